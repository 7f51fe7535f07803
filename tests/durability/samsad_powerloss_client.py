#!/usr/bin/python3
"""The Kafka side of the samsad power-loss test (samsad_powerloss.py): checks what a restarted
samsad serves against every acknowledgement so far, then runs the load whose acknowledgements
the next check holds it to. Real clients only: Debian's python3-confluent-kafka (librdkafka).

  samsad_powerloss_client.py --bootstrap HOST:PORT --acks FILE --data DIR [--load --tag T]

The acks file (JSON lines, appended with one write(2) each, so a kill leaves whole lines) holds
what the load sent and what samsad acknowledged:
  {"rec": [partition, offset, key_hex, value_hex, header_hex]}   acks=all delivery report
  {"cs": [group, offset]} / {"ca": [group, offset]} / {"ce": [group, offset]}
      OffsetCommit of `offset` for every partition of the load topic: sent / acknowledged / failed
  {"ts": [op, topic, partitions]} / {"ta": [op, topic]} / {"te": [op, topic]}
      CreateTopics (op "c") or DeleteTopics (op "d"): sent / acknowledged / failed
  {"kvs": [partition, key, seq, tombstone]} / {"kva": [partition, key, seq, offset]}
      a keyed write to the compacted topic: sent / acknowledged (the value is "<key>:<seq>:"
      padded; seq is unique per write)
The check prints one verdict line, "CHECK OK ..." (exit 0) or "CHECK FAIL lost=N ..." (exit 1:
something acknowledged is missing or wrong) after the details; exit 2 when it could not decide
(a timeout, a client error). With --load it then prints "LOAD RUNNING" once every workload has
had an acknowledgement, and runs until killed (or --max-seconds).
"""

import argparse
import functools
import hashlib
import json
import os
import random
import sys
import threading
import time

TOPIC = "pl"
PARTITIONS = 4
# A topic that opted out of fsync (flush.messages, Kafka's default behaviour): what it
# acknowledges may be lost in a cut, but what it serves afterwards must be whole records that
# were sent. Its unsynced writes are what most torn writes in a cut tear.
LAZY = "lazy"
LAZY_PARTITIONS = 2
# A compacted topic whose small segments the cleaner (log.cleaner.backoff.ms=100) keeps cleaning
# while the power is cut.
KV = "kv"
KV_PARTITIONS = 2
KV_KEYS = 40
FIXED = {TOPIC: (PARTITIONS, {"segment.bytes": "131072"}),
         KV: (KV_PARTITIONS, {"cleanup.policy": "compact", "segment.bytes": "8192",
                              "segment.ms": "300", "min.cleanable.dirty.ratio": "0.01",
                              "delete.retention.ms": "2000"}),
         LAZY: (LAZY_PARTITIONS, {"segment.bytes": "131072", "flush.messages": "1000000"})}
GROUPS = ["g0", "g1"]
# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR: try again.
COORDINATOR_WAIT = (14, 15, 16)
# Offsets fetched for a group and partition with nothing committed.
NO_OFFSET = -1001
MAX_LIVE_TOPICS = 8


def say(msg):
    print(msg, flush=True)


class Inconclusive(Exception):
    pass


def churn_partitions(name):
    # A name is always created with the same partition count, so any copy of it must have it.
    return 1 + sum(name.encode()) % 3


# ---- what the acks file says ---------------------------------------------------------------

class History:
    def __init__(self, path):
        self.records = {}  # (partition, offset) -> (key, value, header) as hex
        self.conflicts = []
        self.commits = {g: [] for g in GROUPS}  # [(kind, offset)] in file order
        self.topic_ops = {}  # name -> [(kind, op, partitions)]
        self.kv_sent = {}  # (partition, key) -> [(seq, tombstone)] in send order
        self.kv_acked = {}  # (partition, key) -> (offset, seq) of the latest acknowledged write
        self.kv_tomb = {}  # seq -> tombstone
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            data = b""
        for raw in data.split(b"\n"):
            if not raw:
                continue
            try:
                e = json.loads(raw)
            except ValueError:
                continue  # a line the kill cut short was never acknowledged
            if "rec" in e:
                p, o, k, v, h = e["rec"]
                old = self.records.get((p, o))
                if old is not None and old != (k, v, h):
                    self.conflicts.append((p, o))
                self.records[(p, o)] = (k, v, h)
            if "kvs" in e:
                p, k, seq, tomb = e["kvs"]
                self.kv_sent.setdefault((p, k), []).append((seq, tomb))
                self.kv_tomb[seq] = tomb
            if "kva" in e:
                p, k, seq, o = e["kva"]
                if o > self.kv_acked.get((p, k), (-1, -1))[0]:
                    self.kv_acked[(p, k)] = (o, seq)
            for kind in ("cs", "ca", "ce"):
                if kind in e:
                    g, o = e[kind]
                    self.commits.setdefault(g, []).append((kind, o))
            for kind in ("ts", "ta", "te"):
                if kind in e:
                    op, name = e[kind][0], e[kind][1]
                    n = e[kind][2] if len(e[kind]) > 2 else None
                    self.topic_ops.setdefault(name, []).append((kind, op, n))

    def commit_expectation(self, group):
        """(acknowledged offset or None, offsets that may legitimately be stored instead)."""
        acked = None
        maybe = set()
        for kind, o in self.commits.get(group, []):
            if kind == "ca":
                acked = o
                maybe = set()
            elif kind == "cs":
                maybe.add(o)
        return acked, maybe

    def topic_expectation(self, name):
        """True (must exist), False (must not), None (either: an operation was in flight)."""
        state = None
        for kind, op, _ in self.topic_ops.get(name, []):
            if kind == "ts":
                state = None  # sent: its outcome is unknown until acknowledged
            elif kind == "ta":
                state = op == "c"
        return state

    def next_commit_offset(self, group):
        return 1 + max([o for _, o in self.commits.get(group, [])], default=0)


# ---- the check -----------------------------------------------------------------------------

def check(a, hist):
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient

    problems = []
    lost = 0
    for p, o in hist.conflicts[:5]:
        problems.append("partition %d offset %d acknowledged twice with different bytes" % (p, o))

    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    try:
        md = admin.list_topics(timeout=30)
    except KafkaException as e:
        raise Inconclusive("Metadata: %s" % e)
    live = {name: t for name, t in md.topics.items() if t.error is None}

    # Topics: acknowledged creations exist with their partitions and directories; acknowledged
    # deletions stay deleted, on disk too (a directory of a deleted topic may only remain set
    # aside, renamed "-delete" or "-stray").
    entries = set(os.listdir(a.data))
    must_exist = must_not = 0
    for name in sorted(hist.topic_ops):
        want = hist.topic_expectation(name)
        n = FIXED[name][0] if name in FIXED else churn_partitions(name)
        dirs = ["%s-%d" % (name, p) for p in range(n)]
        if want is True:
            must_exist += 1
            if name not in live:
                lost += 1
                problems.append("topic %s: creation acknowledged, topic missing" % name)
            elif len(live[name].partitions) != n:
                problems.append("topic %s has %d partitions, created with %d"
                                % (name, len(live[name].partitions), n))
            missing = [d for d in dirs if d not in entries]
            if missing:
                lost += 1
                problems.append("topic %s: directories missing: %s" % (name, missing))
        elif want is False:
            must_not += 1
            if name in live:
                lost += 1
                problems.append("topic %s: deletion acknowledged, topic still served" % name)
            left = [d for d in dirs if d in entries]
            if left:
                lost += 1
                problems.append("topic %s: deletion acknowledged, directories left: %s"
                                % (name, left))
        elif name in live and len(live[name].partitions) != n:
            problems.append("topic %s has %d partitions, created with %d"
                            % (name, len(live[name].partitions), n))

    # Directories of deleted partitions left by a cut are removed after the start.
    deadline = time.monotonic() + 15
    while True:
        doomed = [e for e in os.listdir(a.data) if e.endswith("-delete")]
        if not doomed or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    if doomed:
        problems.append("deleted partition directories not removed after the start: %s"
                        % doomed[:5])

    # Records: every acknowledged record at its offset, byte-identical.
    by_part = {}
    for (p, o) in hist.records:
        by_part.setdefault(p, []).append(o)
    checked = 0
    if by_part and TOPIC not in live:
        lost += len(hist.records)
        problems.append("topic %s is gone with %d acknowledged records" % (TOPIC, len(hist.records)))
    elif by_part:
        c = Consumer({"bootstrap.servers": a.bootstrap, "group.id": "pl-check",
                      "enable.auto.commit": False, "enable.partition.eof": True,
                      "fetch.max.bytes": 8 << 20, "max.partition.fetch.bytes": 4 << 20})
        try:
            todo = {}
            for p, offs in by_part.items():
                lo, hi = c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)
                first, last = min(offs), max(offs)
                if hi <= last:
                    short = [o for o in offs if o >= hi]
                    lost += len(short)
                    problems.append("partition %d ends at %d: %d acknowledged records at or past"
                                    " it are lost (first %d)" % (p, hi, len(short), min(short)))
                start = max(first, lo)
                if start < min(hi, last + 1):
                    todo[p] = (start, min(hi, last + 1))
            c.assign([TopicPartition(TOPIC, p, s) for p, (s, _) in todo.items()])
            got = {}
            done = set()
            deadline = time.monotonic() + 90
            while len(done) < len(todo):
                if time.monotonic() > deadline:
                    raise Inconclusive("reading partitions %s timed out" % sorted(set(todo) - done))
                m = c.poll(0.5)
                if m is None:
                    continue
                if m.error():
                    if m.error().code() == -191:  # _PARTITION_EOF
                        if m.offset() >= todo[m.partition()][1]:
                            done.add(m.partition())
                        continue
                    raise Inconclusive("consumer: %s" % m.error())
                p, o = m.partition(), m.offset()
                if p in todo and o < todo[p][1]:
                    got[(p, o)] = (m.key(), m.value(), m.headers())
                if p in todo and o + 1 >= todo[p][1]:
                    done.add(p)
        finally:
            c.close()
        for (p, o), (k, v, h) in sorted(hist.records.items()):
            if p in todo and not (todo[p][0] <= o < todo[p][1]):
                if o < todo[p][0]:
                    lost += 1
                    problems.append("partition %d offset %d: below the log start" % (p, o))
                continue
            if p not in todo:
                continue
            checked += 1
            s = got.get((p, o))
            if s is None:
                lost += 1
                if lost <= 5:
                    problems.append("partition %d offset %d: acknowledged record missing" % (p, o))
                continue
            hk = (s[2] or [(None, b"")])[0][1] or b""
            if (s[0] or b"").hex() != k or (s[1] or b"").hex() != v or hk.hex() != h:
                lost += 1
                if lost <= 5:
                    problems.append("partition %d offset %d: stored bytes differ from the"
                                    " acknowledged record" % (p, o))

    # The compacted topic: from offset 0, each key's latest record is its latest acknowledged
    # write or a later one that was sent, no write shows twice, and a key may be missing only
    # if a tombstone of it was sent at or after its acknowledged write.
    kv_read = 0
    if KV in live and hist.kv_acked:
        kv_read, bad = check_kv(a, hist)
        for what in bad[:5]:
            problems.append("%s: %s" % (KV, what))
        lost += len(bad)

    # The lazy topic: readable to its end, every record one the load sent (self-checking values).
    lazy = 0
    if LAZY in live:
        try:
            lazy, bad = read_lazy(a)
        except KafkaException as e:
            raise Inconclusive("reading %s: %s" % (LAZY, e))
        for what in bad[:5]:
            problems.append("%s: %s" % (LAZY, what))
        lost += len(bad)

    # Committed offsets: OffsetFetch returns the last acknowledged commit (or one sent after it).
    # A group never committed to first: the coordinator is up (__consumer_offsets is served).
    commits_checked = 0
    for g in ["probe"] + GROUPS:
        acked, maybe = hist.commit_expectation(g)
        if acked is None and not maybe and g != "probe":
            continue
        c = Consumer({"bootstrap.servers": a.bootstrap, "group.id": g,
                      "enable.auto.commit": False})
        try:
            # Right after a first start __consumer_offsets may still be being created
            # (COORDINATOR_NOT_AVAILABLE), as with Kafka; a client retries.
            deadline = time.monotonic() + 30
            while True:
                try:
                    res = c.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)],
                                      timeout=30)
                    break
                except KafkaException as e:
                    again = e.args[0].retriable() or e.args[0].code() in COORDINATOR_WAIT
                    if not again or time.monotonic() > deadline:
                        raise Inconclusive("OffsetFetch for %s: %s" % (g, e))
                    time.sleep(0.1)
        finally:
            c.close()
        for tp in res:
            if tp.error is not None:
                raise Inconclusive("OffsetFetch %s %d: %s" % (g, tp.partition, tp.error))
            commits_checked += 1
            ok = tp.offset == acked or tp.offset in maybe or (acked is None and
                                                               tp.offset == NO_OFFSET)
            if not ok:
                lost += 1
                problems.append("group %s partition %d: OffsetFetch returns %d, last acknowledged"
                                " commit %s" % (g, tp.partition, tp.offset, acked))

    for p in problems:
        say("  " + p)
    verdict = ("records=%d commits=%d topics_exist=%d topics_deleted=%d lazy_records=%d"
               " kv_keys=%d kv_sent=%d kv_read=%d"
               % (checked, commits_checked, must_exist, must_not, lazy, len(hist.kv_acked),
                  sum(len(v) for v in hist.kv_sent.values()), kv_read))
    if lost or problems:
        say("CHECK FAIL lost=%d %s" % (lost, verdict))
        return 1, live
    say("CHECK OK lost=0 %s" % verdict)
    return 0, live


def read_all(a, topic, partitions):
    """(partition, offset, key, value) of every record from offset 0 to the high watermark."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": a.bootstrap, "group.id": "pl-kv-check",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                for p in range(partitions)}
        todo = {p for p in range(partitions) if ends[p] > 0}
        c.assign([TopicPartition(topic, p, 0) for p in todo])
        out = []
        deadline = time.monotonic() + 60
        while todo:
            if time.monotonic() > deadline:
                raise Inconclusive("reading %s timed out" % topic)
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    if m.offset() >= ends[m.partition()]:
                        todo.discard(m.partition())
                    continue
                raise Inconclusive("consumer: %s" % m.error())
            out.append((m.partition(), m.offset(), m.key(), m.value()))
            if m.offset() + 1 >= ends[m.partition()]:
                todo.discard(m.partition())
        return out
    finally:
        c.close()


def check_kv(a, hist):
    bad = []
    recs = read_all(a, KV, KV_PARTITIONS)
    latest, seen, prev = {}, set(), {}
    for p, o, k, v in recs:
        if o <= prev.get(p, -1):
            bad.append("partition %d: offset %d after %d" % (p, o, prev[p]))
        prev[p] = o
        key = k.decode()
        if v is None:
            seq = None  # a tombstone names no write; its offset is checked below
        else:
            parts = v.split(b":")
            if len(parts) < 3 or parts[0].decode() != key:
                bad.append("partition %d offset %d: value %r is not one of key %s's" % (p, o, v[:40], key))
                continue
            seq = int(parts[1])
            if seq in seen:
                bad.append("partition %d offset %d: write %d shows twice" % (p, o, seq))
            seen.add(seq)
        latest[(p, key)] = (o, seq, v is None)
    for (p, key), (ao, aseq) in hist.kv_acked.items():
        got = latest.get((p, key))
        later = [s for s, _ in hist.kv_sent.get((p, key), []) if s >= aseq]
        if got is None:
            if not any(hist.kv_tomb.get(s) for s in later):
                bad.append("partition %d key %s: gone, its acknowledged write %d at offset %d "
                           "was not deleted" % (p, key, aseq, ao))
            continue
        o, seq, tomb = got
        if o < ao:
            bad.append("partition %d key %s: latest at offset %d, before its acknowledged write "
                       "at %d" % (p, key, o, ao))
        elif o == ao and (tomb != hist.kv_tomb.get(aseq) or (seq is not None and seq != aseq)):
            bad.append("partition %d key %s offset %d: not the acknowledged write %d"
                       % (p, key, o, aseq))
    return len(recs), bad


def produce_kv(a, acks, rng, stop):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": a.bootstrap, "acks": "all", "linger.ms": 5,
                  "enable.idempotence": True, "message.timeout.ms": 600000})

    def report(part, key, seq, err, msg):
        if err is None:
            acks.write("kva", [part, key, seq, msg.offset()])

    seq = int(time.time() * 1000) * 1000  # unique across the runs of one test
    while not stop.is_set():
        for _ in range(10):
            part = rng.randrange(KV_PARTITIONS)
            key = "k%d" % rng.randrange(KV_KEYS)
            tomb = rng.random() < 0.1
            value = None if tomb else b"%s:%d:" % (key.encode(), seq) + b"v" * rng.randint(0, 200)
            acks.write("kvs", [part, key, seq, tomb])
            try:
                p.produce(KV, key=key.encode(), value=value, partition=part,
                          on_delivery=functools.partial(report, part, key, seq))
            except BufferError:
                break
            seq += 1
        p.poll(0.01)


def lazy_value(rng, size):
    payload = rng.randbytes(size)
    return hashlib.sha256(payload).digest()[:8] + payload


def read_lazy(a):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": a.bootstrap, "group.id": "pl-check",
                  "enable.auto.commit": False, "enable.partition.eof": True, "check.crcs": True})
    bad = []
    n = 0
    try:
        ends = {}
        for p in range(LAZY_PARTITIONS):
            lo, hi = c.get_watermark_offsets(TopicPartition(LAZY, p), timeout=30)
            if hi > lo:
                ends[p] = (lo, hi)
        c.assign([TopicPartition(LAZY, p, lo) for p, (lo, _) in ends.items()])
        done = set()
        deadline = time.monotonic() + 90
        while len(done) < len(ends):
            if time.monotonic() > deadline:
                raise Inconclusive("reading %s timed out" % LAZY)
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191 and m.offset() >= ends[m.partition()][1]:
                    done.add(m.partition())
                    continue
                if m.error().code() == -191:
                    continue
                bad.append("partition %d: %s" % (m.partition(), m.error()))
                break
            v = m.value() or b""
            if hashlib.sha256(v[8:]).digest()[:8] != v[:8]:
                bad.append("partition %d offset %d: a record that was never sent"
                           % (m.partition(), m.offset()))
            n += 1
            if m.offset() + 1 >= ends[m.partition()][1]:
                done.add(m.partition())
    finally:
        c.close()
    return n, bad


# ---- the load ------------------------------------------------------------------------------

class Acks:
    def __init__(self, path):
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.counts = {}
        self.lock = threading.Lock()

    def write(self, kind, value):
        os.write(self.fd, (json.dumps({kind: value}, separators=(",", ":")) + "\n").encode())
        with self.lock:
            self.counts[kind] = self.counts.get(kind, 0) + 1

    def count(self, kind):
        with self.lock:
            return self.counts.get(kind, 0)


def produce(a, acks, rng, stop):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": a.bootstrap, "acks": "all", "linger.ms": 5,
                  "enable.idempotence": False, "message.send.max.retries": 1000000,
                  "retry.backoff.ms": 50, "message.timeout.ms": 600000})

    def report(header, err, msg):
        # Delivery reports carry no headers (librdkafka 2.0): the sent one comes along.
        if err is None:
            acks.write("rec", [msg.partition(), msg.offset(), msg.key().hex(), msg.value().hex(),
                               header.hex()])

    seq = 0
    # Bounded: ~1500 records/s of 16 B..4 KiB, so the data every later check reads stays small.
    while not stop.is_set():
        for _ in range(15):
            size = rng.choice([16, 100, 300, 1000, 4096])
            value = rng.randbytes(rng.randint(size // 2, size))
            key = ("%s-%d" % (a.tag, seq)).encode()
            header = rng.randbytes(rng.randint(0, 8))
            try:
                p.produce(TOPIC, value=value, key=key, partition=seq % PARTITIONS,
                          headers=[("h", header)], on_delivery=functools.partial(report, header))
            except BufferError:
                break
            seq += 1
        p.poll(0.01)


def produce_lazy(a, rng, stop):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": a.bootstrap, "acks": "all", "linger.ms": 5,
                  "enable.idempotence": False, "message.timeout.ms": 600000})
    seq = 0
    while not stop.is_set():
        for _ in range(8):
            try:
                p.produce(LAZY, value=lazy_value(rng, rng.randint(8, 1500)),
                          partition=seq % LAZY_PARTITIONS)
            except BufferError:
                break
            seq += 1
        p.poll(0.01)


def commit(a, acks, group, start, stop):
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    c = Consumer({"bootstrap.servers": a.bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    offset = start
    while not stop.is_set():
        acks.write("cs", [group, offset])
        try:
            res = c.commit(offsets=[TopicPartition(TOPIC, p, offset) for p in range(PARTITIONS)],
                           asynchronous=False)
            ok = all(tp.error is None for tp in res)
        except KafkaException:
            ok = False
        acks.write("ca" if ok else "ce", [group, offset])
        offset += 1
        if not ok:
            time.sleep(0.1)


def churn(a, acks, hist, served, rng, stop):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    # Topics whose last operation's outcome was unknown are deleted again when they exist, so
    # they cannot pile up over many cuts.
    live = [n for n in hist.topic_ops if n not in FIXED and n in served and
            hist.topic_expectation(n) is not False]
    gone = [n for n in hist.topic_ops if n not in FIXED and hist.topic_expectation(n) is False]
    n = 0
    while not stop.is_set():
        if live and (len(live) >= MAX_LIVE_TOPICS or rng.random() < 0.45):
            name = live.pop(rng.randrange(len(live)))
            op = "d"
            acks.write("ts", [op, name])
            fut = admin.delete_topics([name], operation_timeout=15)[name]
        else:
            if gone and rng.random() < 0.25:
                name = gone.pop(rng.randrange(len(gone)))  # the same name again, new topic id
            else:
                name = "c%s-%d" % (a.tag, n)
                n += 1
            op = "c"
            parts = churn_partitions(name)
            acks.write("ts", [op, name, parts])
            fut = admin.create_topics([NewTopic(name, parts, 1)], operation_timeout=15)[name]
        try:
            fut.result(timeout=20)
            acks.write("ta", [op, name])
            (live if op == "c" else gone).append(name)
        except Exception:  # noqa: BLE001 - any failure leaves the outcome unknown
            acks.write("te", [op, name])
            time.sleep(0.1)


def load(a, hist, served):
    from confluent_kafka.admin import AdminClient, NewTopic
    acks = Acks(a.acks)
    rng = random.Random(a.seed)
    for name, (parts, config) in FIXED.items():
        if hist.topic_expectation(name) is True:
            continue
        admin = AdminClient({"bootstrap.servers": a.bootstrap})
        acks.write("ts", ["c", name, parts])
        fut = admin.create_topics([NewTopic(name, parts, 1, config=config)])[name]
        try:
            fut.result(timeout=30)
        except Exception as e:  # noqa: BLE001
            if "TOPIC_ALREADY_EXISTS" not in str(e):
                raise
        acks.write("ta", ["c", name])
    stop = threading.Event()
    threads = [threading.Thread(target=produce, args=(a, acks, random.Random(rng.random()), stop),
                                daemon=True),
               threading.Thread(target=produce_lazy, args=(a, random.Random(rng.random()), stop),
                                daemon=True),
               threading.Thread(target=produce_kv, args=(a, acks, random.Random(rng.random()), stop),
                                daemon=True)]
    for g in GROUPS:
        threads.append(threading.Thread(target=commit,
                                        args=(a, acks, g, hist.next_commit_offset(g), stop),
                                        daemon=True))
    threads.append(threading.Thread(target=churn,
                                    args=(a, acks, hist, served, random.Random(rng.random()), stop),
                                    daemon=True))
    for t in threads:
        t.start()
    # Bounded even if nobody kills us: 60 s to get going, then --max-seconds (or 60 s).
    t0 = time.monotonic()
    end = None
    while end is None or time.monotonic() < end:
        if end is None and all(acks.count(k) for k in ("rec", "ca", "ta", "kva")):
            end = time.monotonic() + (a.max_seconds or 60)
            say("LOAD RUNNING")
        if end is None and time.monotonic() > t0 + 60:
            say("LOAD STUCK: acknowledgements so far %s" % acks.counts)
            os._exit(3)
        time.sleep(0.01)
    stop.set()
    say("LOAD DONE %s" % acks.counts)
    os._exit(0)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--acks", required=True)
    ap.add_argument("--data", required=True, help="samsad's log dir (as samsad sees it)")
    ap.add_argument("--load", action="store_true")
    ap.add_argument("--tag", default="x")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-seconds", type=float, default=0,
                    help="end the load after this long (0: run until killed, at most 60 s)")
    a = ap.parse_args()
    try:
        import confluent_kafka  # noqa: F401
    except ImportError as e:
        say("CHECK ERROR confluent_kafka not importable: %s" % e)
        return 2
    hist = History(a.acks)
    try:
        rc, served = check(a, hist)
    except Inconclusive as e:
        say("CHECK ERROR %s" % e)
        return 2
    if rc != 0 or not a.load:
        return rc
    load(a, hist, served)
    return 0


if __name__ == "__main__":
    sys.exit(main())
