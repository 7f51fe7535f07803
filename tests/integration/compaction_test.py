#!/usr/bin/env python3
"""Log compaction in samsad, with librdkafka (confluent-kafka) as the client:

- a topic created with cleanup.policy=compact, small segments and a low dirty ratio; an
  idempotent producer writes many versions of a few hundred keys (lz4 on one partition, none on
  the other) and tombstones for some of them; every delivery report's offset goes in a model;
- a record without a key is refused with INVALID_RECORD, and nothing of it is stored;
- once the cleaner ran (samsa_log_cleaner_passes_total, the log line per pass), a consumer
  reading from offset 0 sees exactly the latest record of each key at the offset the producer
  was told, far fewer records than were written, and tombstones still there;
- the same after a clean restart and after kill -9;
- after delete.retention.ms (and more writes, so the cleaner has something to do), the
  tombstones are gone and so are their keys;
- `samsactl partition describe` shows the dirty ratio and the last cleaning; kafka-configs-like
  changes (AlterConfigs through the AdminClient) take effect without a restart:
  turning compaction off on a topic stops its cleaning;
- transactions on a compacted topic: aborted records are removed and never supersede a
  committed value; read_committed shows every key's last committed value after cleaning and
  after kill -9.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import admin_harness as h  # noqa: E402

TOPIC = "compacted"
KEYS = 300
VERSIONS = 12


def consume_all(port: int, topic: str, partitions: int, timeout: float = 30,
                isolation: str = "read_committed") -> list[tuple]:
    """Every record from offset 0 to the end (the high watermark, or the LSO for
    read_committed): (partition, offset, key, value)."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": f"check-{time.time()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "enable.partition.eof": True, "isolation.level": isolation})
    try:
        ends = {}
        for p in range(partitions):
            lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            ends[p] = hi
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out, done = [], {p for p in range(partitions) if ends[p] == 0}
        deadline = time.time() + timeout
        while len(done) < partitions and time.time() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            if m.error():
                if m.error().code() == m.error()._PARTITION_EOF:
                    if m.offset() >= ends[m.partition()]:
                        done.add(m.partition())
                    continue
                raise RuntimeError(f"consume: {m.error()}")
            out.append((m.partition(), m.offset(), m.key(), m.value()))
            if m.offset() + 1 >= ends[m.partition()]:
                done.add(m.partition())
        if len(done) < partitions:
            raise RuntimeError(f"did not reach the end of {topic} in {timeout}s")
        return out
    finally:
        c.close()


def metrics(broker) -> dict[str, float]:
    out = {}
    sock = os.path.join(broker.work, "admin.sock")
    r = subprocess.run([broker.samsactl, "--socket", sock, "metrics"], capture_output=True,
                       text=True, timeout=20)
    for line in r.stdout.splitlines():
        m = re.match(r"^(samsa_log_cleaner_[a-z_]+)(\{[^}]*\})? ([0-9.e+-]+)$", line)
        if m:
            out[m.group(1)] = out.get(m.group(1), 0) + float(m.group(3))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samsad", required=True)
    ap.add_argument("--samsactl", required=True)
    args = ap.parse_args()
    check = h.Checks("compaction")
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return h.missing(check, "confluent_kafka")
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    broker = h.Samsad(args.samsad, {"log.cleaner.backoff.ms": "300",
                                    "samsa.reactors": "2"})
    broker.samsactl = args.samsactl

    def body(b):
        boot = f"127.0.0.1:{b.port}"
        admin = AdminClient({"bootstrap.servers": boot})
        cfg = {"cleanup.policy": "compact", "segment.bytes": "16384", "segment.ms": "500",
               "min.cleanable.dirty.ratio": "0.05", "delete.retention.ms": "15000"}
        admin.create_topics([NewTopic(TOPIC, 2, 1, config=cfg),
                             NewTopic("plain", 1, 1, config={"cleanup.policy": "compact"})]
                            )[TOPIC].result(30)
        time.sleep(0.5)

        model: dict[tuple[int, bytes], tuple[int, bytes | None]] = {}
        written = 0
        errors = []

        def produce(keys, versions, tomb_every=0, tag="v"):
            nonlocal written
            for part, codec in ((0, "lz4"), (1, "none")):
                p = Producer({"bootstrap.servers": boot, "enable.idempotence": True,
                              "compression.type": codec, "linger.ms": 5, "acks": "all"})

                def dr(err, msg):
                    if err:
                        errors.append(str(err))
                        return
                    model[(msg.partition(), msg.key())] = (msg.offset(), msg.value())

                for v in range(versions):
                    for k in range(keys):
                        key = f"key-{k}".encode()
                        val = None if tomb_every and k % tomb_every == 0 and v == versions - 1 \
                            else f"{tag}{v}-{k}-".encode() * 3
                        p.produce(TOPIC, key=key, value=val, partition=part, on_delivery=dr)
                        written += 1
                    p.poll(0)
                left = p.flush(30)
                check(left == 0, f"partition {part} ({codec}): every record acknowledged")
        produce(KEYS, VERSIONS, tomb_every=10)
        check(not errors, f"no delivery errors ({errors[:3]})")

        # A record without a key: INVALID_RECORD, nothing stored.
        got = []
        p = Producer({"bootstrap.servers": boot, "acks": "all", "retries": 0})
        before = consume_all(b.port, "plain", 1)
        p.produce("plain", value=b"no key", on_delivery=lambda e, m: got.append(e))
        p.flush(10)
        check(len(got) == 1 and got[0] is not None and got[0].code() == KafkaError.INVALID_RECORD,
              f"a null key on a compacted topic gets INVALID_RECORD ({got})")
        check(consume_all(b.port, "plain", 1) == before, "and nothing is stored")

        def view_matches(what: str, allow_tombstones_gone: bool) -> int:
            recs = consume_all(b.port, TOPIC, 2)
            latest: dict[tuple[int, bytes], tuple[int, bytes | None]] = {}
            prev = {}
            ok_order = True
            for part, off, key, val in recs:
                if off <= prev.get(part, -1):
                    ok_order = False
                prev[part] = off
                latest[(part, key)] = (off, val)
            check(ok_order, f"{what}: offsets increase")
            bad = []
            for k, (off, val) in model.items():
                got = latest.get(k)
                if got is None and val is None and allow_tombstones_gone:
                    continue
                if got != (off, val):
                    bad.append((k, (off, val), got))
            extra = [k for k in latest if k not in model and not k[1].startswith(b"filler")]
            check(not bad and not extra,
                  f"{what}: every key's latest record at its offset ({len(bad)} wrong, e.g. "
                  f"{bad[:2]}; {len(extra)} unknown)")
            return len(recs)

        # Wait for the cleaner: records read from 0 fall well below what was written.
        filler = Producer({"bootstrap.servers": boot, "acks": "all"})

        def roll():
            # Segments roll on appends (segment.ms is measured with record timestamps, as in
            # Kafka): a filler record closes the active segment, so the last versions become
            # cleanable.
            for part in (0, 1):
                filler.produce(TOPIC, key=f"filler-{time.time()}".encode(), value=b"f",
                               partition=part)
            filler.flush(10)

        deadline = time.time() + 60
        n = written
        while time.time() < deadline:
            time.sleep(0.7)
            roll()
            n = len(consume_all(b.port, TOPIC, 2))
            if n < written // 3:
                break
        check(n < written // 3, f"the cleaner shrank the topic: {written} written, {n} read "
                                f"from offset 0")
        check.note(f"figures: {written} records written, {n} left after cleaning")
        view_matches("after cleaning", allow_tombstones_gone=False)
        m = metrics(b)
        check(m.get("samsa_log_cleaner_passes_total", 0) > 0,
              f"samsa_log_cleaner_passes_total counts passes ({m})")
        check(m.get("samsa_log_cleaner_bytes_read_total", 0) > 0, "and the bytes it read")
        sock = os.path.join(b.work, "admin.sock")
        r = subprocess.run([args.samsactl, "--socket", sock, "partition", "describe",
                            f"{TOPIC}:0"], capture_output=True, text=True, timeout=20)
        check(r.returncode == 0 and "dirty ratio" in r.stdout and "last cleaning" in r.stdout,
              f"samsactl partition describe shows the cleaner's state:\n{r.stdout}{r.stderr}")

        # samsactl clean: a pass now, whatever the dirty ratio.
        def set_topic(conf):
            res = ConfigResource(ConfigResource.Type.TOPIC, TOPIC, set_config=conf)
            admin.alter_configs([res])[res].result(30)
        set_topic(dict(cfg, **{"min.cleanable.dirty.ratio": "0.99"}))
        produce(5, 1, tag="few")
        roll()
        time.sleep(1.0)
        passes = metrics(b).get("samsa_log_cleaner_passes_total", 0)
        time.sleep(1.0)
        idle = metrics(b).get("samsa_log_cleaner_passes_total", 0) == passes
        r = subprocess.run([args.samsactl, "--socket", sock, "clean"], capture_output=True,
                           text=True, timeout=20)
        deadline = time.time() + 10
        while time.time() < deadline and \
                metrics(b).get("samsa_log_cleaner_passes_total", 0) == passes:
            time.sleep(0.2)
        check(r.returncode == 0 and idle and
              metrics(b).get("samsa_log_cleaner_passes_total", 0) > passes,
              f"below min.cleanable.dirty.ratio nothing is cleaned (idle {idle}), `samsactl "
              f"clean` cleans ({r.stdout.strip()}{r.stderr.strip()})")
        set_topic(cfg)

        b.restart()
        # (delete.retention.ms may pass from here on: tombstones may go.)
        view_matches("after a clean restart", allow_tombstones_gone=True)
        b.kill()
        b.start()
        view_matches("after kill -9", allow_tombstones_gone=True)

        # Past delete.retention.ms the tombstones go (the next passes need dirty data).
        deadline = time.time() + 40
        gone = False
        while time.time() < deadline and not gone:
            produce(20, 2, tag="more")
            time.sleep(1.0)
            keys = {(p, k) for p, _, k, _ in consume_all(b.port, TOPIC, 2)}
            gone = all(k not in keys for k, (o, v) in model.items() if v is None)
        check(gone, "tombstones are removed after delete.retention.ms")
        view_matches("after the tombstones went", allow_tombstones_gone=True)

        # Compaction off at run time: the cleaner leaves the topic alone from now on.
        # (AlterConfigs replaces the topic's whole set: the others are given again.)
        set_topic(dict(cfg, **{"cleanup.policy": "delete"}))
        time.sleep(1.5)
        passes = metrics(b).get("samsa_log_cleaner_passes_total", 0)
        produce(KEYS, 3, tag="late")
        time.sleep(3.0)
        check(metrics(b).get("samsa_log_cleaner_passes_total", 0) == passes,
              "with cleanup.policy=delete the topic is not cleaned any more")

        transactions_on_a_compacted_topic(b, admin, cfg, check)

    return h.run_checked(check, broker, body)


def transactions_on_a_compacted_topic(b, admin, cfg, check):
    """Committed and aborted transactions rewriting the same keys: the cleaner drops the
    aborted records and never lets one supersede a committed value (nor cleans above the LSO,
    where a transaction may still abort); the markers and the aborted-transaction index stay
    right through cleaning and kill -9."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic
    topic = "txn-compacted"
    admin.create_topics([NewTopic(topic, 1, 1, config=cfg)])[topic].result(30)
    time.sleep(0.5)
    p = Producer({"bootstrap.servers": f"127.0.0.1:{b.port}", "transactional.id": "compact-tx",
                  "linger.ms": 5})
    p.init_transactions(30)
    committed: dict[bytes, bytes] = {}
    aborted_written = 0
    keys = 40

    def txn(tag: str, commit: bool):
        nonlocal aborted_written
        p.begin_transaction()
        for k in range(keys):
            p.produce(topic, key=f"k{k}".encode(), value=f"{tag}-{k}".encode(), partition=0)
        if commit:
            p.commit_transaction(30)
            for k in range(keys):
                committed[f"k{k}".encode()] = f"{tag}-{k}".encode()
        else:
            p.flush(30)
            p.abort_transaction(30)
            aborted_written += keys

    def view(what: str):
        latest = {}
        for _, _, k, v in consume_all(b.port, topic, 1):
            if not k.startswith(b"filler"):
                latest[k] = v
        check(latest == committed,
              f"{what}: read_committed shows every key's last committed value "
              f"({sum(latest.get(k) != v for k, v in committed.items())} of {len(committed)} "
              f"wrong, e.g. {[(k, latest.get(k), v) for k, v in committed.items() if latest.get(k) != v][:2]})")

    filler = Producer({"bootstrap.servers": f"127.0.0.1:{b.port}", "acks": "all"})
    passes = metrics(b).get("samsa_log_cleaner_passes_total", 0)
    for v in range(30):
        txn(f"c{v}", True)
        txn(f"a{v}", False)
    # One more aborted round last, so that aborted values are the newest of every key.
    txn("a-last", False)
    deadline = time.time() + 60
    left = aborted_written
    while time.time() < deadline:
        filler.produce(topic, key=f"filler-{time.time()}".encode(), value=b"f", partition=0)
        filler.flush(10)
        time.sleep(0.7)
        uncommitted = consume_all(b.port, topic, 1, isolation="read_uncommitted")
        left = sum(1 for _, _, _, v in uncommitted if v and v.startswith(b"a"))
        if metrics(b).get("samsa_log_cleaner_passes_total", 0) > passes and left < keys * 2:
            break
    check(left < keys * 2, f"the cleaner removed aborted records ({aborted_written} written, "
                           f"{left} still read with read_uncommitted)")
    view("after cleaning")
    b.kill()
    b.start()
    view("after cleaning and kill -9")


if __name__ == "__main__":
    sys.exit(main())
