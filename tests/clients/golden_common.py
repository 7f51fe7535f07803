"""What the golden-response scenario's steps share (golden_scenario.py runs them, golden_admin.py
holds the admin steps): the broker settings pinned on both brokers, the names and constants,
request-body builders and the unrecorded waits."""

from __future__ import annotations

import struct


# Broker settings that change answers, pinned on both sides. Kafka's single-node config from
# perf/vs-kafka/kafka.sh sets most of them already; they are repeated so that neither broker's
# defaults decide.
BROKER_SETTINGS = {
    "node.id": "1",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "auto.create.topics.enable": "true",
    "delete.topic.enable": "true",
    "offsets.topic.num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000",
    "min.insync.replicas": "1",
    "message.max.bytes": "1048588",
    # Record timestamps are from 2023: keep retention from deleting them during the run.
    "log.retention.check.interval.ms": "3600000",
}
# Kafka only: its first retention pass runs after this delay, not after the interval.
KAFKA_ONLY_SETTINGS = {"log.initial.task.delay.ms": "3600000"}

TS = 1_700_000_000_000  # record timestamps (CreateTime)
TOPIC_A = "golden-a"  # 3 partitions, created in the scenario
TOPIC_B = "golden-b"  # 1 partition with topic configs
TOPIC_AUTO = "golden-auto"  # auto-created through Metadata
TOPIC_AUTO_V1 = "golden-auto-v1"  # auto-created through Metadata v1
TOPIC_IDEM = "golden-idem"  # idempotent producer
TOPIC_DEL = "golden-del"  # created and deleted by name
TOPIC_DEL_ID = "golden-del-id"  # created and deleted by id
UNKNOWN = "golden-unknown"
UNKNOWN_ID = "AAAAAAAAAAAAAAAAAAAAAQ"  # a topic id no broker handed out
SESSION_MS = 30000

# Kafka's error codes used as wait conditions
NONE = 0


def batch(records, base_ts=TS, **kw):
    """A RecordBatch v2 dict (kproto.encode_batch) from (key, value, headers) tuples."""
    recs = []
    for i, (k, v, h) in enumerate(records):
        recs.append({"attributes": 0, "timestampDelta": i, "offsetDelta": i, "key": k,
                     "value": v, "headers": h})
    b = {"baseOffset": 0, "partitionLeaderEpoch": -1, "attributes": 0,
         "baseTimestamp": base_ts, "records": recs}
    b.update(kw)
    return {"batches": [b]}


def recs(prefix, n, headers=True):
    return [(f"{prefix}-k{i}", f"{prefix}-value-{i}",
             [["h", f"{prefix}-{i}"]] if headers else []) for i in range(n)]


def subscription(topics):
    """ConsumerProtocolSubscription v0 (what a consumer puts in JoinGroup's metadata), hex."""
    b = struct.pack(">hi", 0, len(topics))
    for t in topics:
        b += struct.pack(">h", len(t)) + t.encode()
    b += struct.pack(">i", -1)  # user data: null
    return b.hex()


def assignment(parts):
    """ConsumerProtocolAssignment v0, hex; parts: {topic: [partition, ...]}."""
    b = struct.pack(">hi", 0, len(parts))
    for t, ps in parts.items():
        b += struct.pack(">h", len(t)) + t.encode() + struct.pack(">i", len(ps))
        for p in ps:
            b += struct.pack(">i", p)
    b += struct.pack(">i", -1)
    return b.hex()


def produce_body(topic, partition, records, acks=-1, timeout=10000, txn=None):
    return {"TransactionalId": txn, "Acks": acks, "TimeoutMs": timeout,
            "TopicData": [{"Name": topic,
                           "PartitionData": [{"Index": partition, "Records": records}]}]}


def fetch_body(topics, max_wait=0, min_bytes=1, max_bytes=1 << 20, part_max=1 << 20,
               session_epoch=-1, session_id=0, isolation=0, rack=""):
    """topics: [(name, topic_id, [(partition, offset), ...])]."""
    out = {"ReplicaId": -1, "MaxWaitMs": max_wait, "MinBytes": min_bytes,
           "MaxBytes": max_bytes, "IsolationLevel": isolation, "SessionId": session_id,
           "SessionEpoch": session_epoch, "Topics": [], "ForgottenTopicsData": [],
           "RackId": rack}
    for name, tid, parts in topics:
        t = {"Topic": name, "TopicId": tid, "Partitions": []}
        for p, off in parts:
            t["Partitions"].append({"Partition": p, "CurrentLeaderEpoch": -1,
                                    "FetchOffset": off, "LastFetchedEpoch": -1,
                                    "LogStartOffset": -1, "PartitionMaxBytes": part_max})
        out["Topics"].append(t)
    return out


def list_offsets_body(topic, parts, isolation=0):
    """parts: [(partition, timestamp)]."""
    return {"ReplicaId": -1, "IsolationLevel": isolation, "TimeoutMs": 10000,
            "Topics": [{"Name": topic, "Partitions": [
                {"PartitionIndex": p, "CurrentLeaderEpoch": -1, "Timestamp": ts}
                for p, ts in parts]}]}


def metadata_topics(names):
    if names is None:
        return None
    return [{"Name": n, "TopicId": "AAAAAAAAAAAAAAAAAAAAAA"} for n in names]


def wait_metadata(ctx, label, names, want_ok=True, partitions=None):
    """Waits (unrecorded polls) until Metadata v12 shows each topic ready (leader elected for
    every partition; `partitions` of them if given), or gone (want_ok False)."""

    def ready(resp):
        if resp is None:
            return False
        by = {t["Name"]: t for t in resp["Topics"]}
        for n in names:
            t = by.get(n)
            if t is None:
                return False
            if not want_ok:
                if t["ErrorCode"] != 3:
                    return False
                continue
            if t["ErrorCode"] != NONE or not t["Partitions"]:
                return False
            if partitions is not None and len(t["Partitions"]) != partitions:
                return False
            if any(p["ErrorCode"] != NONE or p["LeaderId"] < 0 for p in t["Partitions"]):
                return False
        return True

    return ctx.wait(label, "Metadata", 12,
                    {"Topics": metadata_topics(names), "AllowAutoTopicCreation": False,
                     "IncludeTopicAuthorizedOperations": False}, ready)


def topic_id(ctx, name):
    """The topic id the broker under test gave `name` (from Metadata v12, unrecorded)."""
    return ctx.vars.get(f"topic_id:{name}", UNKNOWN_ID)


def learn_topic_ids(ctx, names):
    resp = ctx.quiet("Metadata", 12, {"Topics": metadata_topics(names),
                                      "AllowAutoTopicCreation": False})
    for t in (resp or {}).get("Topics", []):
        if t.get("ErrorCode") == NONE:
            ctx.vars[f"topic_id:{t['Name']}"] = t["TopicId"]
