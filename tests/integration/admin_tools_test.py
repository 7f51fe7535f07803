#!/usr/bin/env python3
"""The admin APIs against a live samsad, driven the way operators drive Kafka: Apache Kafka
4.1.1's CLI tools (kafka-topics, kafka-configs, kafka-delete-records, kafka-log-dirs,
kafka-get-offsets, kafka-consumer-groups, kafka-cluster, kafka-leader-election), Debian's confluent-kafka AdminClient
(librdkafka), and hand-encoded requests where no installed tool sends them. Every config change
is checked for its effect, not just for its answer:

- DescribeConfigs prints what Kafka 4.1.1 prints (lines captured from Kafka, below);
- max.message.bytes (topic and dynamic broker default) refuses a larger batch at once;
- retention.ms shrinks the log at the next retention pass (the active segment too, as in Kafka);
- flush.messages/flush.ms > 1: acks=all still works and the recovery-point checkpoint moves;
- dynamic broker settings survive a restart; non-dynamic ones are refused;
- CreatePartitions, DeleteRecords, DescribeLogDirs, DescribeCluster, OffsetForLeaderEpoch,
  IncrementalAlterConfigs (APPEND/SUBTRACT/DELETE), AlterConfigs (replaces all overrides);
- kafka-consumer-groups: describe with lag, reset offsets, delete offsets.

  admin_tools_test.py --samsad PATH
"""

from __future__ import annotations

import argparse
import json
import os
import re
import struct
import sys
import tempfile
import time

from admin_harness import (TAGS, Checks, Conn, Reader, Samsad, carr, cstr, kafka_tools_available,
                           main_guard, missing, run_checked, s16, tool)

checks = Checks("admin-tools")

# `kafka-configs --describe --all --entity-type topics` against Apache Kafka 4.1.1 for a topic
# created with retention.bytes=-1 (what samsa must print the same; flush.messages and
# min.insync.replicas differ on purpose, see the README's notes).
KAFKA_TOPIC_LINES = [
    "cleanup.policy=delete sensitive=false synonyms={DEFAULT_CONFIG:log.cleanup.policy=delete}",
    "compression.type=producer sensitive=false synonyms={DEFAULT_CONFIG:compression.type=producer}",
    "delete.retention.ms=86400000 sensitive=false synonyms={DEFAULT_CONFIG:log.cleaner.delete.retention.ms=86400000}",
    "file.delete.delay.ms=60000 sensitive=false synonyms={DEFAULT_CONFIG:log.segment.delete.delay.ms=60000}",
    "flush.ms=9223372036854775807 sensitive=false synonyms={}",
    "follower.replication.throttled.replicas= sensitive=false synonyms={}",
    "index.interval.bytes=4096 sensitive=false synonyms={DEFAULT_CONFIG:log.index.interval.bytes=4096}",
    "local.retention.ms=-2 sensitive=false synonyms={DEFAULT_CONFIG:log.local.retention.ms=-2}",
    "max.message.bytes=1048588 sensitive=false synonyms={DEFAULT_CONFIG:message.max.bytes=1048588}",
    "message.timestamp.type=CreateTime sensitive=false synonyms={DEFAULT_CONFIG:log.message.timestamp.type=CreateTime}",
    "min.cleanable.dirty.ratio=0.5 sensitive=false synonyms={DEFAULT_CONFIG:log.cleaner.min.cleanable.ratio=0.5}",
    "preallocate=false sensitive=false synonyms={DEFAULT_CONFIG:log.preallocate=false}",
    "remote.storage.enable=false sensitive=false synonyms={}",
    "retention.bytes=-1 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.bytes=-1, DEFAULT_CONFIG:log.retention.bytes=-1}",
    "retention.ms=604800000 sensitive=false synonyms={}",
    "segment.bytes=1073741824 sensitive=false synonyms={DEFAULT_CONFIG:log.segment.bytes=1073741824}",
    "segment.index.bytes=10485760 sensitive=false synonyms={DEFAULT_CONFIG:log.index.size.max.bytes=10485760}",
    "segment.jitter.ms=0 sensitive=false synonyms={}",
    "segment.ms=604800000 sensitive=false synonyms={}",
    "unclean.leader.election.enable=false sensitive=false synonyms={DEFAULT_CONFIG:unclean.leader.election.enable=false}",
]
# Every topic config Kafka 4.1.1 lists.
KAFKA_TOPIC_KEYS = sorted("""cleanup.policy compression.gzip.level compression.lz4.level
compression.type compression.zstd.level delete.retention.ms file.delete.delay.ms flush.messages
flush.ms follower.replication.throttled.replicas index.interval.bytes
leader.replication.throttled.replicas local.retention.bytes local.retention.ms
max.compaction.lag.ms max.message.bytes message.timestamp.after.max.ms
message.timestamp.before.max.ms message.timestamp.type min.cleanable.dirty.ratio
min.compaction.lag.ms min.insync.replicas preallocate remote.log.copy.disable
remote.log.delete.on.disable remote.storage.enable retention.bytes retention.ms segment.bytes
segment.index.bytes segment.jitter.ms segment.ms unclean.leader.election.enable""".split())

INVALID_CONFIG, INVALID_REQUEST, UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC = 40, 42, 75, 3


def config_lines(out: str) -> dict[str, str]:
    """`kafka-configs --describe` output: key -> whole line."""
    lines = {}
    for line in out.splitlines():
        m = re.match(r"\s+([a-z0-9.]+)=", line)
        if m:
            lines[m.group(1)] = line.strip()
    return lines


class Client:
    """confluent-kafka (Debian's python3-confluent-kafka, librdkafka 2.0)."""

    def __init__(self, bootstrap: str):
        import confluent_kafka
        from confluent_kafka import admin
        self.ck, self.admin_mod = confluent_kafka, admin
        self.bootstrap = bootstrap
        self.admin = admin.AdminClient({"bootstrap.servers": bootstrap})

    def produce(self, topic: str, values: list[bytes], partition: int = -1) -> list[str | None]:
        """Delivery errors (None for each delivered record)."""
        p = self.ck.Producer({"bootstrap.servers": self.bootstrap, "acks": "all",
                              "linger.ms": 0, "compression.type": "none",
                              "message.timeout.ms": 15000})
        errs: list[str | None] = []
        for i, v in enumerate(values):
            kw = {"partition": partition} if partition >= 0 else {}
            p.produce(topic, v, key=b"k%d" % i,
                      on_delivery=lambda e, m: errs.append(None if e is None else e.name()), **kw)
            p.poll(0)
        p.flush(30)
        return errs

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        c = self.ck.Consumer({"bootstrap.servers": self.bootstrap, "group.id": "wm"})
        lo, hi = c.get_watermark_offsets(self.ck.TopicPartition(topic, partition), timeout=10)
        c.close()
        return lo, hi

    def describe(self, rtype: str, name: str) -> dict:
        r = self.admin_mod.ConfigResource(rtype, name)
        return self.admin.describe_configs([r])[r].result(timeout=15)

    def consume_group(self, topic: str, group: str, want: int) -> int:
        c = self.ck.Consumer({"bootstrap.servers": self.bootstrap, "group.id": group,
                              "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.subscribe([topic])
        got, end = 0, time.time() + 30
        while got < want and time.time() < end:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got += 1
        c.commit(asynchronous=False)
        c.close()
        return got


def recovery_point(data: str, topic: str, partition: int) -> int:
    try:
        with open(os.path.join(data, "recovery-point-offset-checkpoint")) as f:
            for line in f.read().splitlines()[2:]:
                t, p, o = line.split()
                if t == topic and int(p) == partition:
                    return int(o)
    except OSError:
        pass
    return -1


def wait_until(fn, timeout: float = 10, step: float = 0.1):
    end = time.time() + timeout
    while True:
        v = fn()
        if v or time.time() > end:
            return v
        time.sleep(step)


def test_describe_and_alter_topic(b: Samsad, cl: Client):
    rc, out = tool("kafka-topics", "--bootstrap-server", b.bootstrap, "--create", "--topic", "adm",
                   "--partitions", "3", "--config", "retention.bytes=-1")
    checks(rc == 0 and "Created topic adm." in out, f"kafka-topics --create ({out.strip()[-80:]})")
    errs = cl.produce("adm", [b"v%03d" % i for i in range(60)])
    checks(errs == [None] * 60, "60 records produced with acks=all")
    produced_at = time.time()

    rc, out = tool("kafka-configs", "--bootstrap-server", b.bootstrap, "--describe", "--all",
                   "--entity-type", "topics", "--entity-name", "adm")
    lines = config_lines(out)
    checks(rc == 0 and sorted(lines) == KAFKA_TOPIC_KEYS,
           f"kafka-configs --describe --all lists Kafka 4.1.1's {len(KAFKA_TOPIC_KEYS)} topic configs")
    bad = [l for l in KAFKA_TOPIC_LINES if l not in lines.values()]
    checks(not bad, f"... with Kafka's values, sources and synonyms (differs: {bad})")

    # Topic overrides take effect at once.
    rc, out = tool("kafka-configs", "--bootstrap-server", b.bootstrap, "--alter", "--entity-type",
                   "topics", "--entity-name", "adm", "--add-config",
                   "max.message.bytes=2000,flush.messages=1000,flush.ms=200")
    checks(rc == 0 and "Completed updating config for topic adm." in out,
           f"kafka-configs --alter --add-config on a topic ({out.strip()[-80:]})")
    errs = cl.produce("adm", [b"x" * 5000], partition=0)
    checks(errs == ["MSG_SIZE_TOO_LARGE"], f"max.message.bytes=2000 refuses a 5000-byte batch ({errs})")
    errs = cl.produce("adm", [b"y" * 400] * 3, partition=1)  # one batch of ~1.3 KB
    checks(errs == [None] * 3, f"... and takes smaller ones, acks=all with flush.messages=1000 ({errs})")
    _, hi = cl.watermarks("adm", 1)
    rp = wait_until(lambda: recovery_point(b.data, "adm", 1) == hi, timeout=10)
    checks(rp, f"flush.ms=200 syncs: the recovery-point checkpoint reaches the log end {hi}"
               f" ({recovery_point(b.data, 'adm', 1)})")

    rc, out = tool("kafka-configs", "--bootstrap-server", b.bootstrap, "--alter", "--entity-type",
                   "topics", "--entity-name", "adm", "--add-config", "segment.bytes=10")
    checks(rc != 0 and "Invalid value 10 for configuration segment.bytes: Value must be at least" in out,
           "an out-of-range value is refused with Kafka's message")

    # retention.ms applies without a restart, at the next retention pass (every 500 ms here).
    time.sleep(max(0.0, produced_at + 1.5 - time.time()))
    rc, out = tool("kafka-configs", "--bootstrap-server", b.bootstrap, "--alter", "--entity-type",
                   "topics", "--entity-name", "adm", "--add-config", "retention.ms=1000")
    checks(rc == 0, "retention.ms=1000 set")
    emptied = wait_until(lambda: all(lo == hi for lo, hi in (cl.watermarks("adm", p) for p in (0, 2))),
                         timeout=10, step=0.3)
    checks(emptied, f"retention.ms shrinks the log: {[cl.watermarks('adm', p) for p in range(3)]}")

    d = cl.describe("topic", "adm")
    e = d["retention.ms"]
    checks(e.value == "1000" and e.source == 1, f"librdkafka's DescribeConfigs sees retention.ms=1000 "
                                                f"from DYNAMIC_TOPIC_CONFIG ({e.value}, {e.source})")


def test_broker_settings(b: Samsad, cl: Client):
    rc, out = tool("kafka-configs", "--bootstrap-server", b.bootstrap, "--alter", "--entity-type",
                   "brokers", "--entity-default", "--add-config", "message.max.bytes=3000")
    checks(rc == 0 and "Completed updating default config for brokers in the cluster." in out,
           f"kafka-configs --alter --entity-default ({out.strip()[-90:]})")
    errs = cl.produce("plain", [b"s" * 100])  # auto-created, no overrides
    errs += cl.produce("plain", [b"x" * 5000]) + cl.produce("plain", [b"y" * 2500])
    checks(errs == [None, "MSG_SIZE_TOO_LARGE", None],
           f"the dynamic message.max.bytes=3000 reaches topics without an override ({errs})")
    rc, out = tool("kafka-configs", "--bootstrap-server", b.bootstrap, "--alter", "--entity-type",
                   "brokers", "--entity-name", "1", "--add-config", "log.dirs=/elsewhere")
    checks(rc != 0 and "Cannot update these configs dynamically: Set(log.dirs)" in out,
           "a static broker setting is refused as Kafka refuses it")
    rc, out = tool("kafka-configs", "--bootstrap-server", b.bootstrap, "--describe", "--all",
                   "--entity-type", "brokers", "--entity-name", "1")
    lines = config_lines(out)
    want = ("message.max.bytes=3000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:"
            "message.max.bytes=3000, DEFAULT_CONFIG:message.max.bytes=1048588}")
    checks(lines.get("message.max.bytes") == want, f"broker 1 describes it as Kafka does ({lines.get('message.max.bytes')})")
    checks(lines.get("log.retention.ms") == "log.retention.ms=null sensitive=false synonyms={}" and
           lines.get("log.retention.hours") ==
           "log.retention.hours=168 sensitive=false synonyms={DEFAULT_CONFIG:log.retention.hours=168}",
           "unset and defaulted keys print as Kafka prints them")
    port_line = lines.get("listeners", "")
    checks(port_line.startswith(f"listeners=PLAINTEXT://127.0.0.1:{b.port} sensitive=false synonyms="
                                "{STATIC_BROKER_CONFIG:"), f"--override settings are static ({port_line[:70]})")

    b.restart()
    d = cl.describe("broker", "1")
    e = d["message.max.bytes"]
    checks(e.value == "3000" and e.source == 3,
           f"after a restart the setting is still there, DYNAMIC_DEFAULT_BROKER_CONFIG ({e.value}, {e.source})")
    errs = cl.produce("plain", [b"x" * 5000]) + cl.produce("plain", [b"y" * 2500])
    checks(errs == ["MSG_SIZE_TOO_LARGE", None], f"... and still in force ({errs})")
    rc, out = tool("kafka-configs", "--bootstrap-server", b.bootstrap, "--alter", "--entity-type",
                   "brokers", "--entity-default", "--delete-config", "message.max.bytes")
    checks(rc == 0, "--delete-config removes it")
    errs = cl.produce("plain", [b"x" * 5000])
    checks(errs == [None], f"... and the default is back ({errs})")


def test_partitions_records_dirs(b: Samsad, cl: Client):
    rc, out = tool("kafka-topics", "--bootstrap-server", b.bootstrap, "--alter", "--topic", "adm",
                   "--partitions", "5")
    checks(rc == 0, f"kafka-topics --alter --partitions 5 ({out.strip()[-60:]})")
    rc, out = tool("kafka-topics", "--bootstrap-server", b.bootstrap, "--describe", "--topic", "adm")
    checks("PartitionCount: 5" in out and out.count("Partition: ") == 5 and
           "retention.ms=1000" in out, "kafka-topics --describe shows 5 partitions and the overrides")
    errs = cl.produce("adm", [b"p4"], partition=4)
    checks(errs == [None], "the new partition takes records")

    fut = cl.admin.create_topics([cl.admin_mod.NewTopic("del", 2, 1)])
    fut["del"].result(timeout=15)
    errs = cl.produce("del", [b"d%02d" % i for i in range(20)], partition=0)
    errs += cl.produce("del", [b"e%02d" % i for i in range(20)], partition=1)
    checks(errs == [None] * 40, "40 records in del-0 and del-1")
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"version": 1, "partitions": [{"topic": "del", "partition": 0, "offset": 7},
                                                {"topic": "del", "partition": 1, "offset": -1}]}, f)
    rc, out = tool("kafka-delete-records", "--bootstrap-server", b.bootstrap, "--offset-json-file", f.name)
    os.unlink(f.name)
    checks(rc == 0 and "partition: del-0\tlow_watermark: 7" in out and
           "partition: del-1\tlow_watermark: 20" in out, f"kafka-delete-records ({out.strip()[-90:]})")
    rc, out = tool("kafka-get-offsets", "--bootstrap-server", b.bootstrap, "--topic", "del", "--time", "-2")
    checks(out.split() == ["del:0:7", "del:1:20"], f"kafka-get-offsets --time -2 shows the new starts ({out.split()})")

    rc, out = tool("kafka-log-dirs", "--bootstrap-server", b.bootstrap, "--describe", "--topic-list", "del,adm")
    doc = json.loads(out.splitlines()[-1]) if rc == 0 else {}
    dirs = doc.get("brokers", [{}])[0].get("logDirs", [])
    parts = {p["partition"]: p["size"] for d in dirs for p in d["partitions"]}
    checks(len(dirs) == 1 and dirs[0]["logDir"] == b.data and dirs[0]["error"] is None,
           f"kafka-log-dirs names the log dir ({[d.get('logDir') for d in dirs]})")
    checks(sorted(parts) == sorted([f"del-{i}" for i in range(2)] + [f"adm-{i}" for i in range(5)]) and
           parts["del-0"] > 0, f"... with every partition asked for and its size ({parts})")

    # ElectLeaders: a single node's one replica already leads every partition.
    rc, out = tool("kafka-leader-election", "--bootstrap-server", b.bootstrap, "--election-type",
                   "preferred", "--topic", "adm", "--partition", "0")
    checks(rc == 0 and "Valid replica already elected for partitions adm-0" in out,
           f"kafka-leader-election --election-type preferred ({out.strip()[-90:]})")
    rc, out = tool("kafka-leader-election", "--bootstrap-server", b.bootstrap, "--election-type",
                   "unclean", "--topic", "nope", "--partition", "0")
    checks(rc != 0 and "UnknownTopicOrPartition" in out,
           f"kafka-leader-election on an unknown partition fails with its error ({out.strip()[-90:]})")

    rc, out = tool("kafka-cluster", "cluster-id", "--bootstrap-server", b.bootstrap)
    with open(os.path.join(b.data, "meta.properties")) as f:
        cid = re.search(r"cluster.id=(\S+)", f.read()).group(1)
    checks(out.strip() == f"Cluster ID: {cid}", f"kafka-cluster cluster-id (DescribeCluster): {out.strip()}")


def test_groups(b: Samsad, cl: Client):
    got = cl.consume_group("del", "cg", 13)
    checks(got == 13, f"a consumer group reads del and commits ({got} records)")
    errs = cl.produce("del", [b"late%d" % i for i in range(5)], partition=0)
    checks(errs == [None] * 5, "5 more records in del-0")
    rc, out = tool("kafka-consumer-groups", "--bootstrap-server", b.bootstrap, "--describe", "--group", "cg")
    rows = {(r[1], r[2]): r[3:6] for r in (l.split() for l in out.splitlines()) if len(r) >= 6 and r[0] == "cg"}
    # del-1 was emptied by kafka-delete-records: the consumer had no position there to commit.
    checks(rows == {("del", "0"): ["20", "25", "5"]},
           f"kafka-consumer-groups --describe shows offsets, log ends and lag ({rows})")
    rc, out = tool("kafka-consumer-groups", "--bootstrap-server", b.bootstrap, "--reset-offsets",
                   "--group", "cg", "--topic", "del", "--to-earliest", "--execute")
    rows = {(r[1], r[2]): r[3] for r in (l.split() for l in out.splitlines()) if len(r) == 4 and r[0] == "cg"}
    checks(rows == {("del", "0"): "7", ("del", "1"): "20"}, f"--reset-offsets --to-earliest --execute ({rows})")
    rc, out = tool("kafka-consumer-groups", "--bootstrap-server", b.bootstrap, "--delete-offsets",
                   "--group", "cg", "--topic", "del")
    checks(rc == 0 and out.count("Successful") == 2, f"--delete-offsets ({out.strip()[-60:]})")
    rc, out = tool("kafka-consumer-groups", "--bootstrap-server", b.bootstrap, "--describe", "--group", "cg")
    checks(not [l for l in out.splitlines() if l.startswith("cg ")], "... leaves no offsets to describe")


def incremental_alter_v0(resources: list[tuple[int, str, list[tuple[str, int, str | None]]]]) -> bytes:
    body = struct.pack(">i", len(resources))
    for rtype, name, ops in resources:
        body += struct.pack(">b", rtype) + s16(name) + struct.pack(">i", len(ops))
        for key, op, value in ops:
            body += s16(key) + struct.pack(">b", op) + s16(value)
    return body + struct.pack(">?", False)


def parse_alter(resp: bytes) -> list[tuple[int, str | None]]:
    r = Reader(resp)
    r.take("i")
    out = []
    for _ in range(r.take("i")):
        err, msg = r.take("h"), r.s16()
        r.take("b"), r.s16()
        out.append((err, msg))
    return out


def offset_for_leader_epoch_v4(topic: str, parts: list[tuple[int, int, int]]) -> bytes:
    ps = [struct.pack(">iii", p, cur, ep) + TAGS for p, cur, ep in parts]
    return struct.pack(">i", -1) + carr([cstr(topic) + carr(ps) + TAGS]) + TAGS


def parse_offset_for_leader_epoch_v4(resp: bytes) -> list[tuple[int, int, int, int]]:
    r = Reader(resp)
    r.take("i")
    out = []
    for _ in range(r.carr_len()):
        r.cstr()
        for _ in range(r.carr_len()):
            err, p, ep, end = r.take("hiiq")
            r.tags()
            out.append((err, p, ep, end))
        r.tags()
    return out


def test_hand_encoded(b: Samsad, cl: Client):
    c = Conn(b.port)
    # IncrementalAlterConfigs: APPEND/SUBTRACT on lists, DELETE, and the refusals.
    out = parse_alter(c.request(44, 0, incremental_alter_v0([(2, "del", [("cleanup.policy", 2, "compact")])])))
    checks(out == [(0, None)], f"APPEND compact to cleanup.policy ({out})")
    checks(cl.describe("topic", "del")["cleanup.policy"].value == "delete,compact",
           "... gives delete,compact (appended to the default, as Kafka does)")
    out = parse_alter(c.request(44, 0, incremental_alter_v0([(2, "del", [("cleanup.policy", 3, "delete")])])))
    checks(out == [(0, None)] and cl.describe("topic", "del")["cleanup.policy"].value == "compact",
           "SUBTRACT delete leaves compact")
    out = parse_alter(c.request(44, 0, incremental_alter_v0([(2, "del", [("cleanup.policy", 1, None)])])))
    checks(out == [(0, None)] and cl.describe("topic", "del")["cleanup.policy"].source == 5,
           "DELETE returns it to the default")
    cases = [
        (2, "del", [("retention.ms", 2, "5")]),
        (2, "del", [("no.such.key", 0, "1")]),
        (2, "nosuch", [("retention.ms", 0, "1")]),
        (4, "1", [("log.dirs", 0, "/x")]),
        (4, "7", [("log.retention.ms", 0, "1")]),
        (2, "del", [("retention.ms", 9, "1")]),
        (2, "del", [("retention.ms", 0, "5"), ("retention.ms", 0, "6")]),
    ]
    # One resource per request: Kafka refuses a resource named twice in one request.
    out = [parse_alter(c.request(44, 0, incremental_alter_v0([case])))[0] for case in cases]
    want = [(INVALID_CONFIG, "Can't APPEND to key retention.ms because its type is not LIST."),
            (INVALID_CONFIG, "Unknown topic config name: no.such.key"),
            (UNKNOWN_TOPIC, "The topic 'nosuch' does not exist."),
            (INVALID_REQUEST, "Cannot update these configs dynamically: Set(log.dirs)"),
            (INVALID_REQUEST, "Unexpected broker id, expected 1 or empty string, but received 7"),
            (INVALID_REQUEST, None),
            (INVALID_REQUEST, "Error due to duplicate config keys")]
    twice = parse_alter(c.request(44, 0, incremental_alter_v0(cases[:2])))
    checks(twice == [(INVALID_REQUEST, "Each resource must appear at most once.")] * 2,
           f"a resource named twice is refused both times, as Kafka does ({twice})")
    for (g, gm), (w, wm) in zip(out, want):
        checks(g == w and (wm is None or gm == wm), f"refused: {gm} (code {g})")

    # AlterConfigs (legacy, librdkafka's alter_configs): the given set replaces every override.
    from confluent_kafka.admin import ConfigResource
    r = ConfigResource("topic", "del", set_config={"segment.ms": "100000", "retention.bytes": "100000"})
    cl.admin.alter_configs([r])[r].result(timeout=15)
    r = ConfigResource("topic", "del", set_config={"retention.bytes": "200000"})
    cl.admin.alter_configs([r])[r].result(timeout=15)
    d = cl.describe("topic", "del")
    checks(d["retention.bytes"].value == "200000" and d["segment.ms"].source == 5,
           "AlterConfigs replaces all overrides (segment.ms is back to its default)")

    # OffsetForLeaderEpoch from the leader-epoch cache.
    _, hi = cl.watermarks("del", 0)
    out = parse_offset_for_leader_epoch_v4(c.request(23, 4, offset_for_leader_epoch_v4(
        "del", [(0, -1, 0), (0, -1, 3), (1, 5, 0), (9, -1, 0)]), flexible=True))
    checks(out[0] == (0, 0, 0, hi), f"epoch 0 of del-0 ends at the log end {hi} ({out[0]})")
    checks(out[1] == (0, 0, -1, -1), f"an epoch above every known one is undefined ({out[1]})")
    checks(out[2][0] == UNKNOWN_LEADER_EPOCH, f"a newer current leader epoch gets UNKNOWN_LEADER_EPOCH ({out[2]})")
    checks(out[3][0] == UNKNOWN_TOPIC, f"an unknown partition gets UNKNOWN_TOPIC_OR_PARTITION ({out[3]})")
    c.close()


def run(b: Samsad) -> None:
    cl = Client(b.bootstrap)
    test_describe_and_alter_topic(b, cl)
    test_broker_settings(b, cl)
    test_partitions_records_dirs(b, cl)
    test_groups(b, cl)
    test_hand_encoded(b, cl)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samsad", required=True)
    a = ap.parse_args()
    why = kafka_tools_available()
    if why:
        return missing(checks, why)
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return missing(checks, "python3-confluent-kafka is not installed (Debian package)")
    broker = Samsad(a.samsad, {
        # Retention acts at the next pass after a change (as in Kafka): make passes frequent.
        "log.retention.check.interval.ms": "500",
        # The recovery-point checkpoint is written often enough to watch it move.
        "log.flush.offset.checkpoint.interval.ms": "300",
        "num.partitions": "1",
    })
    return run_checked(checks, broker, run)


if __name__ == "__main__":
    sys.path.insert(0, "/usr/lib/python3/dist-packages")
    main_guard(main)
