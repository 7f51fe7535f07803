#!/usr/bin/python3
"""Log compaction on a cluster: every replica compacts its own log, and every replica's
latest-record-per-key view stays the one the producers were told.

A controller and 3 brokers on loopback (cluster_harness.loopback_cluster), the brokers with
log.cleaner.backoff.ms=500; topic `compacted`: 3 partitions, replication factor 3 (each broker
leads one), cleanup.policy=compact, segment.bytes=8192, segment.ms=1000,
min.cleanable.dirty.ratio=0.01, delete.retention.ms=2000, min.insync.replicas=2.

1. Idempotent acks=all producers (one uncompressed, one lz4) write rounds of versions of 200
   keys: keys 180-199 once, the others every round, some versions tombstones, every tenth key
   ending deleted. The model is the latest (offset, value) of each key per partition, from the
   delivery reports.
2. Once every replica of every partition logged cleaning passes and its log shrank (fewer than
   a third of the records written are left), each replica's view is compared with the model:
   the leader's through a confluent-kafka consumer reading from offset 0, and every replica's
   (leader and followers) by parsing its partition directory's .log segments with
   tests/clients/segments.py (RecordBatch v2, CRC-32C checked, uncompressed and lz4; offsets
   strictly increasing across batches and segments). Each key must be at its model offset with
   its model value; a key whose latest record is a tombstone may be there as that tombstone or
   absent, never older.
3. kill -9 of partition 0's leader; once another replica leads, more rounds (some deleted keys
   written again, others deleted now); after new cleaning passes on the live replicas, the same
   checks on every live replica and on the new leader's consumer view.
4. The killed broker restarts, follows the compacted leaders and rejoins every ISR; more
   rounds; once all three replicas cleaned again, the same checks on all of them.

  compaction_test.py --samsad PATH [--keep] [--no-lz4]

--no-lz4 writes uncompressed batches only (to tell trouble on the lz4 paths from the rest).

Exit: 0 pass, 1 fail, 77 skip (confluent-kafka or python3-lz4 missing and CI is not true).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_harness import (BROKERS, check, log, loopback_cluster,  # noqa: E402
                             set_log_prefix, skip_or_fail, wait_for)
import segments  # noqa: E402  (tests/clients, on the path cluster_harness sets)

TOPIC = "compacted"
PARTITIONS = 3
KEYS = 200
ONCE_KEYS = range(180, 200)  # written in the first round only: old records that must stay
ROUNDS_1 = 30
ROUNDS_2 = 10
ROUNDS_3 = 5
ASSIGNMENT = [[1, 2, 3], [2, 3, 1], [3, 1, 2]]
TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": "8192", "segment.ms": "1000",
                "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "2000",
                "min.insync.replicas": "2"}
PASS_LINE = re.compile(r"log cleaner: (\S+): (\d+) segments into (\d+), (\d+) -> (\d+) bytes, "
                       r"(\d+) of (\d+) records kept")
T0 = time.time()


def elapsed() -> str:
    return f"{time.time() - T0:.1f} s"


# ---- each replica's log, parsed from its segment files (tests/clients/segments.py) ----------
def parse_log(files: dict[str, bytes]) -> dict:
    """One replica's log (its segment files' bytes by path): the latest (offset, value) of each
    key, and figures. Raises SegmentError on anything malformed (segments.check_log's checks,
    every byte in a batch, no control batch, no record without a key)."""
    view: dict[bytes, tuple[int, bytes | None]] = {}
    stats = defaultdict(int)
    stats["segments"] = len(files)
    stats["bytes"] = sum(len(data) for data in files.values())
    last = -1
    for b, records in segments.check_log(segments.parse_partition(files, strict=True),
                                         codecs={"none", "lz4"}):
        where = f"{b.file}@{b.position} (base offset {b.base_offset})"
        stats["batches"] += 1
        stats["lz4 batches"] += b.codec == "lz4" and b.record_count > 0
        stats["empty batches"] += b.record_count == 0
        if b.is_control:  # no transactions here: none expected
            raise segments.SegmentError(f"{where}: a control batch")
        for r in records:
            if r.key is None:
                raise segments.SegmentError(f"{where}: a record without a key at {r.offset}")
            view[r.key] = (r.offset, r.value)
            stats["records"] += 1
            stats["tombstones"] += r.value is None
        last = max(last, b.last_offset)
    stats["last offset"] = last
    return {"view": view, "stats": dict(stats)}


def replica_log(node, p: int) -> dict:
    """parse_log of node's replica of partition p; AssertionError naming it if malformed."""
    try:
        return parse_log(segments.read_dir(part_dir(node, p)))
    except segments.SegmentError as e:
        raise AssertionError(f"broker {node.id}'s replica of partition {p}: {e}") from e


# ---- the model and the comparison ----------------------------------------------------------
class Model:
    def __init__(self):
        self.latest: dict[int, dict[bytes, tuple[int, bytes | None]]] = defaultdict(dict)
        self.produced = defaultdict(int)  # records acknowledged per partition
        self.end = defaultdict(int)  # the partition's next offset
        self.errors: list[str] = []

    def report(self, err, msg):
        if err:
            self.errors.append(str(err))
            return
        p, off = msg.partition(), msg.offset()
        cur = self.latest[p].get(msg.key())
        if cur is None or cur[0] < off:
            self.latest[p][msg.key()] = (off, msg.value())
        self.produced[p] += 1
        self.end[p] = max(self.end[p], off + 1)


def differences(view: dict, model: dict) -> list[str]:
    """How a latest-per-key view differs from the model (empty: it matches)."""
    out = []
    for key, (off, value) in model.items():
        got = view.get(key)
        if value is None:
            if got is not None and got != (off, None):
                out.append(f"{key!r}: deleted at {off}, seen {got}")
        elif got != (off, value):
            out.append(f"{key!r}: latest {(off, value)}, seen {got}")
    out += [f"{key!r}: seen {view[key]}, never written" for key in view if key not in model]
    return out


def value_of(k: int, version: int, tag: str) -> bytes:
    return f"k{k:03d}-{tag}-v{version:02d}-".encode() + b"x" * (40 + (k * 7 + version) % 50)


def produce_rounds(model: Model, producers, rounds: range, tag: str, shape):
    """Round r: producers[r % len] writes shape(k, r) (bytes, None = tombstone, or skip) for
    every key k, each to partition k % 3; flushed and every record acknowledged each round."""
    n = 0
    for r in rounds:
        p = producers[r % len(producers)]
        for k in range(KEYS):
            v = shape(k, r)
            if v is False:
                continue
            p.produce(TOPIC, key=f"key-{k:03d}".encode(), value=v, partition=k % PARTITIONS,
                      on_delivery=model.report)
            n += 1
            p.poll(0)
        left = p.flush(30)
        if left or model.errors:
            raise AssertionError(f"round {r} ({tag}): {left} records not delivered, errors "
                                 f"{model.errors[:3]}")
    return n


def shape_1(k: int, r: int):
    if k in ONCE_KEYS:
        return value_of(k, r, "a") if r == 0 else False
    if r == ROUNDS_1 - 1 and k % 10 == 0:
        return None  # these keys end deleted
    if (k * 7 + r) % 11 == 0:
        return None  # a tombstone in the middle of a key's history
    return value_of(k, r, "a")


def shape_2(k: int, r: int):
    if k in ONCE_KEYS:
        return False
    if k % 10 == 0:
        return value_of(k, r, "b") if k % 20 == 0 else False  # half come back
    if r == ROUNDS_2 - 1 and k % 10 == 5:
        return None  # deleted now
    return value_of(k, r, "b")


def shape_3(k: int, r: int):
    if k in ONCE_KEYS or k % 5 == 0:
        return False  # the deleted keys stay deleted, the resurrected ones as they are
    return value_of(k, r, "c")


# ---- the cluster -----------------------------------------------------------------------------
def partition_md(admin) -> dict[int, tuple[int, list[int], list[int]]]:
    t = admin.list_topics(topic=TOPIC, timeout=3).topics[TOPIC]
    if t.error is not None:
        return {}
    return {p.id: (p.leader, sorted(p.replicas), sorted(p.isrs)) for p in t.partitions.values()}


def passes(node) -> dict[str, list[tuple[int, ...]]]:
    """The cleaning passes in a broker's log: {partition directory: [(segments in, out, bytes
    in, out, records kept, read)]}."""
    out = defaultdict(list)
    for m in PASS_LINE.finditer(node.log_text()):
        out[m.group(1)].append(tuple(int(g) for g in m.groups()[1:]))
    return out


def part_dir(node, p: int) -> str:
    return os.path.join(node.props["log.dirs"], f"{TOPIC}-{p}")


def consumer_view(bootstrap: str, p: int, end: int, stall_s: float = 8) -> tuple[dict, int]:
    """Partition p from offset 0 to `end` through its leader: (latest per key, records read).
    AssertionError if the consumer makes no progress for stall_s."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "compaction-view",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(TOPIC, p, 0)])
    view, n, last, errors = {}, 0, -1, []
    progress = time.time()
    try:
        while True:
            if time.time() - progress > stall_s:
                raise AssertionError(
                    f"partition {p}: the consumer got nothing past offset {last} for {stall_s:.0f}"
                    f" s (end {end}; errors {errors[-3:]})")
            m = c.poll(0.3)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF and last >= end - 1:
                    break
                if m.error().code() != KafkaError._PARTITION_EOF:
                    errors.append(str(m.error()))
                continue
            if m.offset() <= last:
                raise AssertionError(f"partition {p}: offset {m.offset()} after {last}")
            last = m.offset()
            progress = time.time()
            view[m.key()] = (m.offset(), m.value())
            n += 1
    finally:
        c.close()
    return view, n


def file_view_matches(node, p: int, model: Model, timeout: float = 15) -> dict:
    """Waits until node's replica of p, parsed from its segment files, reaches the partition's
    end and its view equals the model; its figures."""
    last = {}

    def attempt():
        parsed = replica_log(node, p)
        diff = differences(parsed["view"], model.latest[p])
        last.update(parsed=parsed, diff=diff)
        return parsed if parsed["stats"]["last offset"] == model.end[p] - 1 and not diff \
            else None
    try:
        return wait_for(attempt, timeout, "", step=0.2)
    except AssertionError:
        if "parsed" not in last:
            replica_log(node, p)  # raise the parse error itself
        raise AssertionError(
            f"broker {node.id}'s replica of partition {p} (its files): last offset "
            f"{last['parsed']['stats']['last offset']}, end {model.end[p]}, "
            f"{len(last['diff'])} keys differ from the model: {last['diff'][:5]}")


def check_views(brokers, live, bootstrap, model: Model, admin, label: str, failed: list[str]):
    """Every live replica's files, then each leader's consumer view, against the model. A
    consumer that stalls is recorded in `failed` (the other checks still run)."""
    md = partition_md(admin)
    for p in range(PARTITIONS):
        leader = md[p][0]
        for b in live:
            s = file_view_matches(brokers[b], p, model)["stats"]
            role = "leader" if b == leader else "follower"
            check(True, f"{label}: partition {p}: broker {b}'s files ({role}) equal the model: "
                        f"{s.get('records', 0)} records ({s.get('tombstones', 0)} tombstones) "
                        f"in {s.get('batches', 0)} batches ({s.get('lz4 batches', 0)} lz4, "
                        f"{s.get('empty batches', 0)} empty), {s['segments']} segments, "
                        f"{s['bytes']} bytes")
        try:
            view, n = consumer_view(bootstrap, p, model.end[p])
        except AssertionError as e:
            failed.append(f"{label}: {e}")
            log(f"FAIL (going on): {label}: {e}")
            continue
        diff = differences(view, model.latest[p])
        check(not diff, f"{label}: partition {p}: the consumer's view through leader {leader} "
                        f"equals the model ({n} records read of {model.produced[p]} written, "
                        f"{len(view)} keys; differences: {diff[:5]})")
        check(n < model.produced[p] / 3,
              f"{label}: partition {p}: the compacted log is well below what was written "
              f"({n} < {model.produced[p]} / 3)")


CLEANER_TROUBLE = re.compile(r"^\S+ (warn|error) .*log cleaner: .*$", re.M)


def cleaner_trouble(brokers, live) -> list[str]:
    """The log cleaner's warnings and errors in the brokers' logs (a pass that failed)."""
    return [f"broker {b}: {m.group(0)}" for b in live
            for m in CLEANER_TROUBLE.finditer(brokers[b].log_text())]


def wait_cleaned(brokers, live, model: Model, since: dict[int, dict[str, int]], label: str,
                 timeout: float = 45):
    """Waits until each live broker logged a cleaning pass of each partition after `since`
    (passes counted then) and its files hold fewer than a third of the records written."""
    def done():
        trouble = cleaner_trouble(brokers, live)
        if trouble:
            raise Failed(f"{label}: a cleaning pass failed ({len(trouble)} warnings), first: "
                         f"{trouble[0]}")
        for b in live:
            got = passes(brokers[b])
            for p in range(PARTITIONS):
                d = part_dir(brokers[b], p)
                if len(got.get(d, [])) <= since.get(b, {}).get(d, 0):
                    return False
                try:
                    s = replica_log(brokers[b], p)["stats"]
                except AssertionError:
                    time.sleep(0.3)  # malformed twice in a row: not an append caught mid-way
                    try:
                        s = replica_log(brokers[b], p)["stats"]
                    except AssertionError as e:
                        raise Failed(f"{label}: {e}")
                if s.get("records", 0) >= model.produced[p] / 3:
                    return False
        return True
    try:
        got = wait_for(lambda: done_or_failed(done), timeout,
                       f"{label}: every live replica cleaned and shrunk", step=0.25)
    except AssertionError:
        for b in live:  # a malformed log fails as such, not as a timeout
            for p in range(PARTITIONS):
                d = part_dir(brokers[b], p)
                s = replica_log(brokers[b], p)["stats"]
                log(f"{label}: broker {b} partition {p}: {s.get('records', 0)} records of "
                    f"{model.produced[p]} written, {len(passes(brokers[b]).get(d, []))} passes")
        raise
    if isinstance(got, Failed):
        raise AssertionError(str(got))
    for b in live:
        got = passes(brokers[b])
        for p in range(PARTITIONS):
            mine = got[part_dir(brokers[b], p)]
            new = mine[since.get(b, {}).get(part_dir(brokers[b], p), 0):]
            read = sum(x[5] for x in new)
            kept = sum(x[4] for x in new)
            log(f"{label}: broker {b} partition {p}: {len(new)} new cleaning passes "
                f"({len(mine)} in all), {kept} of {read} records kept by them")


class Failed(Exception):
    """Raised inside a wait_for condition: ends the wait (wait_for retries anything else)."""


def done_or_failed(fn):
    try:
        return fn()
    except Failed as e:
        return e  # truthy: wait_for returns it


def pass_counts(brokers, live) -> dict[int, dict[str, int]]:
    return {b: {d: len(v) for d, v in passes(brokers[b]).items()} for b in live}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samsad", required=True)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--no-lz4", action="store_true",
                    help="uncompressed batches only (tells lz4 trouble from the rest)")
    a = ap.parse_args()
    set_log_prefix("[compaction]")
    try:
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient, NewTopic
    except ImportError:
        return skip_or_fail(log, "confluent-kafka is missing (python3-confluent-kafka)",
                            "the test")
    try:
        import lz4.frame  # noqa: F401  (the lz4 batches are parsed with it)
    except ImportError:
        return skip_or_fail(log, "python3-lz4 is missing", "the test")

    root = tempfile.mkdtemp(prefix="samsa-compaction-")
    controller, brokers = loopback_cluster(
        a.samsad, root, common={"samsa.reactors": "1"},
        broker_props={"log.cleaner.backoff.ms": "500", "replica.fetch.wait.max.ms": "100"})
    everyone = [controller, *brokers.values()]
    ok = False
    producers = []
    try:
        for n in everyone:
            n.start()
        for n in everyone:
            n.wait_listening()
        bootstrap = ",".join(f"{n.host}:{n.port}" for n in brokers.values())
        admin = AdminClient({"bootstrap.servers": bootstrap})
        wait_for(lambda: len(admin.list_topics(timeout=2).brokers) == 3, 30,
                 "3 brokers registered")
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, replica_assignment=ASSIGNMENT,
                                      config=TOPIC_CONFIG)])[TOPIC].result(30)
        wait_for(lambda: all(md[0] == ASSIGNMENT[p][0] and md[2] == [1, 2, 3]
                             for p, md in partition_md(admin).items())
                 and len(partition_md(admin)) == PARTITIONS, 30,
                 "each partition led by its first replica with the full ISR")
        log(f"cluster up, topic {TOPIC} created ({elapsed()})")

        def producer(codec: str):
            return Producer({"bootstrap.servers": bootstrap, "acks": "all",
                             "enable.idempotence": True, "compression.type": codec,
                             "linger.ms": 5, "batch.num.messages": 40,
                             "message.timeout.ms": 30000})
        producers = [producer("none"), producer("none" if a.no_lz4 else "lz4"),
                     producer("none")]
        model = Model()
        failed: list[str] = []
        n = produce_rounds(model, producers, range(ROUNDS_1), "a", shape_1)
        check(n == sum(model.produced.values()),
              f"{n} records acknowledged (per partition {dict(model.produced)}, "
              f"{sum(v[1] is None for m in model.latest.values() for v in m.values())} keys "
              f"deleted) ({elapsed()})")

        # 1-2: every replica cleans; every replica's view is the model's.
        live = list(BROKERS)
        wait_cleaned(brokers, live, model, {}, "phase 1")
        check_views(brokers, live, bootstrap, model, admin, "phase 1", failed)
        log(f"phase 1 done ({elapsed()})")

        # 3: kill -9 of partition 0's leader, a new leader, more versions, cleaned again.
        victim = partition_md(admin)[0][0]
        brokers[victim].kill9()
        live = [b for b in BROKERS if b != victim]
        t_kill = time.time()
        md = wait_for(lambda: (lambda m: m if m[0][0] in live else None)(partition_md(admin)),
                      30, "a new leader of partition 0")
        log(f"broker {victim} killed (kill -9): partition 0 led by {md[0][0]} after "
            f"{time.time() - t_kill:.2f} s; leaders {[md[p][0] for p in range(PARTITIONS)]}")
        since = pass_counts(brokers, live)
        before = sum(model.produced.values())
        produce_rounds(model, producers, range(ROUNDS_2), "b", shape_2)
        check(not model.errors, f"{sum(model.produced.values()) - before} more records "
                                f"acknowledged with broker {victim} down ({elapsed()})")
        wait_cleaned(brokers, live, model, since, "phase 2")
        check_views(brokers, live, bootstrap, model, admin, f"broker {victim} down", failed)
        log(f"phase 2 done ({elapsed()})")

        # 4: the killed broker returns, follows the compacted leaders, cleans its own log.
        brokers[victim].start("restarted after kill -9")
        brokers[victim].wait_listening()
        try:
            wait_for(lambda: all(md[2] == [1, 2, 3] for md in partition_md(admin).values()),
                     40, f"broker {victim} back in every ISR")
        except AssertionError as e:
            stuck = [l for l in brokers[victim].log_text().splitlines() if "no response for" in l]
            ends = {p: replica_log(brokers[victim], p)["stats"]
                    ["last offset"] + 1 for p in range(PARTITIONS)}
            raise AssertionError(
                f"{e} (ISRs {partition_md(admin)}; its log ends {ends}, the leaders' "
                f"{dict(model.end)}; its replica fetches: {stuck[:2] or 'answered'})")
        log(f"broker {victim} back in every ISR ({elapsed()})")
        since = pass_counts(brokers, BROKERS)
        before = sum(model.produced.values())
        produce_rounds(model, producers, range(ROUNDS_3), "c", shape_3)
        check(not model.errors, f"{sum(model.produced.values()) - before} more records "
                                f"acknowledged with broker {victim} back ({elapsed()})")
        wait_cleaned(brokers, BROKERS, model, since, f"broker {victim} restarted")
        check_views(brokers, list(BROKERS), bootstrap, model, admin,
                    f"broker {victim} restarted", failed)

        trouble = cleaner_trouble(brokers, BROKERS)
        check(not trouble, f"no cleaning pass failed on any broker ({trouble[:2]})")
        for b in BROKERS:
            got = passes(brokers[b])
            log(f"broker {b}: cleaning passes per partition "
                f"{[len(got[part_dir(brokers[b], p)]) for p in range(PARTITIONS)]}")
        if failed:
            raise AssertionError(f"{len(failed)} consumer views failed: " + "; ".join(failed))
        ok = True
    finally:
        for p in producers:
            p.flush(1)
        producers.clear()
        for n in everyone:
            if n.alive():
                n.stop()
        if ok and not a.keep:
            import shutil
            shutil.rmtree(root, ignore_errors=True)
        else:
            log(f"work directory kept: {root}")
    log(f"PASS ({elapsed()})")
    return 0


if __name__ == "__main__":
    from cluster_harness import run_main
    run_main(main)
