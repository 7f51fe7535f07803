#!/usr/bin/python3
"""Drives a broker with confluent-kafka-python (librdkafka): admin create, keyed produce with
headers through every codec with acks=all, read-back by assignment, seek to offset and to time,
a consumer group with a committed offset, a check of the stored segments, admin delete.

With --full (needs confluent-kafka >= 2.4, the PyPI wheel in tests/clients/venv): the full flow
of tests/clients/README.md, i.e. also topic configs (retention.ms shrinks the log,
max.message.bytes refuses a batch), CreatePartitions, DeleteRecords, and a group described
(members, offsets, lag) and reset.

Runs with Debian's /usr/bin/python3 (python3-confluent-kafka 1.7) or the venv's python.
Exits non-zero on any failure.
"""

import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import driverlib as dl  # noqa: E402

NAME = "confluent_kafka"
EOF_CODE = -191  # KafkaError._PARTITION_EOF


def body(args, step):
    import confluent_kafka
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    lib = confluent_kafka.libversion()
    version = confluent_kafka.version()  # 1.x: (str, int); 2.x: str
    step(f"confluent-kafka {version[0] if isinstance(version, tuple) else version} "
         f"({confluent_kafka.__file__}), "
         f"librdkafka {lib[0]}, broker {args.bootstrap}")
    if args.full:
        dl.check(lib[1] >= 0x02040000, f"--full needs librdkafka >= 2.4 (DeleteRecords, "
                 f"ListOffsets in the admin API), this is {lib[0]}")
    topic = f"{args.topic_prefix}-confluent"
    base = {"bootstrap.servers": args.bootstrap, "client.id": "samsa-confluent-driver"}
    admin = AdminClient(dict(base))
    flow = dl.Flow(NAME, step)
    st = {}  # what later steps need from earlier ones

    def create():
        _wait(admin.create_topics([NewTopic(topic, num_partitions=dl.PARTITIONS,
                                            replication_factor=1)], operation_timeout=15,
                                  request_timeout=15)[topic], f"CreateTopics {topic}")
        md = dl.wait_until(lambda: _topic_md(admin, topic), 15, f"metadata for {topic}")
        dl.check(len(md.partitions) == dl.PARTITIONS,
                 f"{topic} has {len(md.partitions)} partitions, created {dl.PARTITIONS}")
        step(f"created {topic} with {dl.PARTITIONS} partitions")

    flow.run("1", "create topic", create, fatal=True)

    def produce():
        produced = dl.produce_every_codec(
            args, step, lambda codec, recs: _produce(base, topic, codec, recs), "compression.type")
        st["produced"] = produced
        st["per_part"] = dl.by_partition(produced)
        dl.check_segments(step, args.log_dir, topic, produced)

    flow.run("2", "produce every codec", produce, fatal=True)
    per_part = st["per_part"]
    counts = {p: len(per_part[p]) for p in range(dl.PARTITIONS)}

    cbase = dict(base, **{"group.id": f"{args.topic_prefix}-confluent-assign",
                          "enable.auto.commit": False, "auto.offset.reset": "earliest",
                          "enable.partition.eof": True})
    c = Consumer(cbase)

    def consume():
        for p in range(dl.PARTITIONS):
            lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            dl.check((lo, hi) == (0, counts[p]),
                     f"partition {p}: watermarks ({lo}, {hi}), expected (0, {counts[p]})")
        step("ListOffsets earliest/latest match the produced counts")
        c.assign([TopicPartition(topic, p, 0) for p in range(dl.PARTITIONS)])
        got = _consume(c, counts, 30)
        for p in range(dl.PARTITIONS):
            dl.compare_partition(p, per_part[p], got[p])
        step(f"consumed all {len(st['produced'])} records back byte-identical, in order per "
             f"partition")

    flow.run("3", "consume byte-identical", consume)

    def seek_offset():
        seek_p, seek_off = 2, len(per_part[2]) // 3
        c.assign([TopicPartition(topic, seek_p, seek_off)])
        first = _first_record(c, seek_p)
        dl.check_record(seek_p, seek_off, per_part[seek_p][seek_off], first, "after seek")
        step(f"seek to partition {seek_p} offset {seek_off}: first record is the right one")

    def seek_time():
        ts_p = 1
        ts, want_off = dl.timestamp_target(per_part, ts_p)
        res = c.offsets_for_times([TopicPartition(topic, ts_p, ts)], timeout=10)
        dl.check(res[0].error is None, f"offsets_for_times: {res[0].error}")
        dl.check(res[0].offset == want_off,
                 f"offsets_for_times({ts}) on partition {ts_p} gave {res[0].offset}, "
                 f"expected {want_off}")
        c.assign([TopicPartition(topic, ts_p, res[0].offset)])
        first = _first_record(c, ts_p)
        dl.check_record(ts_p, want_off, per_part[ts_p][want_off], first, f"after seek to {ts}")
        step(f"offsets_for_times on partition {ts_p} -> offset {want_off}, first record matches")

    try:
        flow.run("4a", "seek to an offset", seek_offset)
        flow.run("4b", "seek to a timestamp", seek_time)
    finally:
        c.close()

    if args.full:
        _steps_5_to_8(args, step, flow, admin, base, topic, per_part)
    else:
        flow.run("8", "group commit", lambda: _group_commit(args, step, base, topic, per_part))

    def delete():
        topics = [topic] + ([f"{topic}-ret"] if args.full else [])
        futs = admin.delete_topics(topics, operation_timeout=15, request_timeout=15)
        for t in topics:
            _wait(futs[t], f"DeleteTopics {t}")
        for t in topics:
            dl.wait_until(lambda: _topic_md(admin, t) is None, 15, f"{t} to disappear")
        step(f"deleted {', '.join(topics)}")

    flow.run("9", "delete topic", delete)
    flow.finish()


def _steps_5_to_8(args, step, flow, admin, base, topic, per_part):
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, TopicPartition
    from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource,
                                       ConfigSource, NewPartitions, NewTopic, OffsetSpec, ResourceType)

    ret = topic + dl.RET_SUFFIX
    ret_res = ConfigResource(ResourceType.TOPIC, ret)

    def configs():
        entries = _wait(admin.describe_configs([ConfigResource(ResourceType.TOPIC, ret)])[ret_res],
                        f"DescribeConfigs {ret}")
        return {k: (e.value, e.source) for k, e in entries.items()}

    def await_configs(want, before=None):
        """DescribeConfigs until it shows `want`: Kafka answers an alter once the controller
        committed it; its brokers apply the metadata record a moment later."""
        deadline = time.monotonic() + 10
        while True:
            got = configs()
            if all(got.get(k, (None,))[0] == v for k, v in want.items()):
                return got
            dl.check(time.monotonic() < deadline, f"{ret}: DescribeConfigs shows "
                     f"{ {k: got.get(k, (None,))[0] for k in want} } 10s after setting {want} "
                     f"(before: { {k: (before or {}).get(k) for k in want} })")
            time.sleep(0.1)

    def offsets(specs):
        futs = admin.list_offsets(specs, request_timeout=10)
        return {tp: _wait(f, f"ListOffsets {tp.topic}-{tp.partition}").offset
                for tp, f in futs.items()}

    def retention():
        _wait(admin.create_topics([NewTopic(ret, num_partitions=1, replication_factor=1,
                                            config={"segment.ms": str(dl.SEGMENT_MS)})],
                                  operation_timeout=15, request_timeout=15)[ret],
              f"CreateTopics {ret} with segment.ms")
        dl.wait_until(lambda: _topic_md(admin, ret), 15, f"metadata for {ret}")
        recs = dl.retention_records(args.topic_prefix, dl.now_ms() - 600_000)
        _produce(base, ret, "none", recs, each_flushed=True)
        tp = TopicPartition(ret, 0)
        dl.check(offsets({tp: OffsetSpec.earliest()})[tp] == 0, f"{ret}: earliest is not 0")
        step(f"{ret}: {len(recs)} records in batches of their own, 1 s of record time apart, "
             f"segment.ms={dl.SEGMENT_MS}")
        res = ConfigResource(ResourceType.TOPIC, ret, incremental_configs=[
            ConfigEntry("retention.ms", str(dl.RETENTION_MS),
                        incremental_operation=AlterConfigOpType.SET)])
        _wait(admin.incremental_alter_configs([res])[res], f"IncrementalAlterConfigs {ret}")
        v, src = await_configs({"retention.ms": str(dl.RETENTION_MS)})["retention.ms"]
        src = ConfigSource(src).name
        dl.check(src == "DYNAMIC_TOPIC_CONFIG", f"{ret}: retention.ms has source {src}")
        step(f"IncrementalAlterConfigs retention.ms={dl.RETENTION_MS}; DescribeConfigs shows "
             f"{v} ({src})")
        start = dl.wait_until(lambda: offsets({tp: OffsetSpec.earliest()})[tp], 20,
                              f"{ret}'s log start to move (retention)", interval=0.3)
        step(f"retention deleted old segments: {ret}-0 now starts at offset {start}")

    def max_bytes():
        cur = configs()
        want = {"segment.ms": str(dl.SEGMENT_MS), "retention.ms": str(dl.RETENTION_MS),
                "max.message.bytes": str(dl.MAX_MESSAGE_BYTES)}
        # Legacy AlterConfigs replaces the topic's whole dynamic config: name all of it.
        res = ConfigResource(ResourceType.TOPIC, ret, set_config=want)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            fut = admin.alter_configs([res])[res]
        _wait(fut, f"AlterConfigs {ret}")
        await_configs(want, cur)
        step(f"AlterConfigs max.message.bytes={dl.MAX_MESSAGE_BYTES} (with the other two kept)")
        tp = TopicPartition(ret, 0)
        end = offsets({tp: OffsetSpec.latest()})[tp]
        from confluent_kafka import Producer

        p = Producer(dict(base, **{"acks": "all", "message.timeout.ms": 15000}))
        errs = []
        big = dl.big_record(dl.now_ms())
        p.produce(ret, value=big.value, key=big.key, partition=0,
                  on_delivery=lambda err, msg: errs.append(err))
        dl.check(p.flush(20) == 0, "the large record got no delivery report within 20s")
        dl.check(errs and errs[0] is not None, f"a {dl.BIG_VALUE_BYTES}-byte record was "
                 f"accepted with max.message.bytes={dl.MAX_MESSAGE_BYTES}")
        dl.check(errs[0].code() == KafkaError.MSG_SIZE_TOO_LARGE,
                 f"the large record failed with {errs[0]}, expected MSG_SIZE_TOO_LARGE")
        after = offsets({tp: OffsetSpec.latest()})[tp]
        dl.check(after == end, f"{ret}: end offset moved from {end} to {after}")
        step(f"a {dl.BIG_VALUE_BYTES}-byte record is refused: {errs[0].name()}")

    flow.run("5a", "retention.ms shrinks the log", retention)
    flow.run("5b", "max.message.bytes refuses", max_bytes)

    new_recs = dl.new_partition_records(args.topic_prefix, dl.now_ms() - 300_000)
    np = dl.NEW_PARTITIONS - 1
    parts = dict(per_part)

    def partitions():
        _wait(admin.create_partitions([NewPartitions(topic, dl.NEW_PARTITIONS)],
                                      operation_timeout=15, request_timeout=15)[topic],
              f"CreatePartitions {topic}")
        dl.wait_until(lambda: len((_topic_md(admin, topic) or _Empty).partitions)
                      == dl.NEW_PARTITIONS, 15, f"{topic} to show {dl.NEW_PARTITIONS} partitions")
        _produce(base, topic, "lz4", new_recs)
        c = _assign_consumer(base, args)
        try:
            c.assign([TopicPartition(topic, np, 0)])
            got = _consume(c, {np: len(new_recs)}, 20)
        finally:
            c.close()
        dl.compare_partition(np, new_recs, got[np])
        parts[np] = new_recs
        step(f"CreatePartitions {topic} -> {dl.NEW_PARTITIONS}; produced {len(new_recs)} records "
             f"to partition {np} and read them back")

    flow.run("6", "add partitions", partitions)

    def delete_records():
        cut = len(per_part[0]) // 2
        tp = TopicPartition(topic, 0, cut)
        res = _wait(admin.delete_records([tp], operation_timeout=15, request_timeout=15)[tp],
                    f"DeleteRecords {topic}-0 before {cut}")
        dl.check(res.low_watermark == cut, f"DeleteRecords answered low watermark "
                 f"{res.low_watermark}, expected {cut}")
        e = TopicPartition(topic, 0)
        dl.check(offsets({e: OffsetSpec.earliest()})[e] == cut,
                 f"{topic}-0: ListOffsets earliest is not {cut} after DeleteRecords")
        c = _assign_consumer(base, args)
        try:
            c.assign([TopicPartition(topic, 0, -2)])  # OFFSET_BEGINNING
            first = _first_record(c, 0)
        finally:
            c.close()
        dl.check_record(0, cut, per_part[0][cut], first, "from the beginning after DeleteRecords")
        step(f"DeleteRecords {topic}-0 before {cut}: low watermark {cut}, consuming from the "
             f"beginning starts there")
        st["start0"] = cut

    st = {"start0": 0}
    flow.run("7", "delete records", delete_records)

    group = f"{args.topic_prefix}-confluent-group"
    gconf = dict(base, **{"group.id": group, "enable.auto.commit": False,
                          "auto.offset.reset": "earliest", "session.timeout.ms": 10000,
                          "enable.partition.eof": True})

    def describe_group():
        n = len(parts)
        start = {p: (st["start0"] if p == 0 else 0) for p in parts}
        want = {p: len(parts[p]) - start[p] for p in parts}
        g = _new_consumer(gconf)
        try:
            g.subscribe([topic])
            got = _consume(g, want, 40)
            for p in parts:
                dl.compare_partition(p, parts[p][start[p]:], got[p], "group-consumed", start[p])
            commit = {p: len(parts[p]) - dl.LAG for p in parts}
            g.commit(offsets=[TopicPartition(topic, p, o) for p, o in commit.items()],
                     asynchronous=False)
            d = _wait(admin.describe_consumer_groups([group], request_timeout=15)[group],
                      f"DescribeConsumerGroups {group}")
            dl.check(len(d.members) == 1, f"group {group}: {len(d.members)} members, want 1")
            m = d.members[0]
            assigned = sorted(tp.partition for tp in m.assignment.topic_partitions
                              if tp.topic == topic)
            dl.check(assigned == list(range(n)), f"group {group}: member {m.member_id} is "
                     f"assigned {assigned}, want 0..{n - 1}")
            dl.check(str(d.state).upper().endswith("STABLE"), f"group state {d.state}")
            step(f"DescribeConsumerGroups: {d.state}, member {m.member_id} ({m.client_id}, "
                 f"{m.host}) holds partitions {assigned}")
            res = _wait(admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
                        [group], f"ListConsumerGroupOffsets {group}")
            have = {tp.partition: tp.offset for tp in res.topic_partitions if tp.topic == topic}
            dl.check(have == commit, f"group {group}: committed {have}, want {commit}")
            ends = offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in parts})
            lag = {tp.partition: o - commit[tp.partition] for tp, o in ends.items()}
            dl.check(all(v == dl.LAG for v in lag.values()), f"group {group}: lag {lag}")
            step(f"group offsets {commit}, lag {dl.LAG} on every partition")
        finally:
            g.close()

    def reset_group():
        def state():
            d = _wait(admin.describe_consumer_groups([group], request_timeout=15)[group],
                      f"DescribeConsumerGroups {group}")
            return str(d.state).upper().endswith("EMPTY") and not d.members

        dl.wait_until(state, 15, f"group {group} to be empty after its member left")
        reset = {p: (st["start0"] + 1 if p == 0 else 1 + p % 2) for p in parts}
        _wait(admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
            group, [TopicPartition(topic, p, o) for p, o in reset.items()])])[group],
            f"AlterConsumerGroupOffsets {group}")
        res = _wait(admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
                    [group], f"ListConsumerGroupOffsets {group}")
        have = {tp.partition: tp.offset for tp in res.topic_partitions if tp.topic == topic}
        dl.check(have == reset, f"group {group}: offsets {have} after reset to {reset}")
        g = _new_consumer(gconf)
        try:
            g.subscribe([topic])
            got = _consume(g, {p: len(parts[p]) - reset[p] for p in parts}, 40)
        finally:
            g.close()
        for p in parts:
            dl.compare_partition(p, parts[p][reset[p]:], got[p], "consumed after reset", reset[p])
        step(f"reset group offsets to {reset}; the group consumed from there, byte-identical")

    flow.run("8a", "describe group, lag", describe_group)
    flow.run("8b", "reset group offsets", reset_group)


class _Empty:
    partitions = {}


def _new_consumer(conf):
    from confluent_kafka import Consumer

    return Consumer(conf)


def _assign_consumer(base, args):
    return _new_consumer(dict(base, **{"group.id": f"{args.topic_prefix}-confluent-assign",
                                       "enable.auto.commit": False,
                                       "auto.offset.reset": "earliest",
                                       "enable.partition.eof": True}))


def _group_commit(args, step, base, topic, per_part):
    from confluent_kafka import Consumer, TopicPartition

    group = f"{args.topic_prefix}-confluent-group"
    g = Consumer(dict(base, **{"group.id": group, "enable.auto.commit": False,
                               "auto.offset.reset": "earliest", "session.timeout.ms": 10000}))
    try:
        g.subscribe([topic])
        got = _consume(g, {p: len(per_part[p]) for p in range(dl.PARTITIONS)}, 40)
        for p in range(dl.PARTITIONS):
            dl.compare_partition(p, per_part[p], got[p], "group-consumed")
        g.commit(asynchronous=False)
        committed = g.committed([TopicPartition(topic, p) for p in range(dl.PARTITIONS)],
                                timeout=10)
        for tp in committed:
            dl.check(tp.offset == len(per_part[tp.partition]),
                     f"group {group}: committed {tp.offset} for partition {tp.partition}, "
                     f"expected {len(per_part[tp.partition])}")
        step(f"group {group}: subscribed, consumed everything, committed offsets read back")
    finally:
        g.close()


def _wait(fut, what, timeout=20):
    from confluent_kafka import KafkaException

    try:
        return fut.result(timeout=timeout)
    except KafkaException as e:
        dl.fail(f"{what}: {e}")


def _topic_md(admin, topic):
    md = admin.list_topics(timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None or not t.partitions:
        return None
    return t


def _produce(base, topic, codec, recs, each_flushed=False):
    """Produces `recs` with acks=all; `each_flushed` sends every record in a batch of its own."""
    from confluent_kafka import Producer

    p = Producer(dict(base, **{"compression.type": codec, "acks": "all",
                               "linger.ms": 0 if each_flushed else 50,
                               "message.timeout.ms": 20000}))
    errors = []

    def report(err, msg):
        if err is not None:
            errors.append(f"{msg.partition()}: {err}")

    for r in recs:
        p.produce(topic, value=r.value, key=r.key, partition=r.partition, timestamp=r.timestamp,
                  headers=r.headers or None, on_delivery=report)
        if each_flushed:
            p.flush(20)
    left = p.flush(30)
    dl.check(left == 0, f"{codec}: {left} records not delivered within 30s")
    dl.check(not errors, f"{codec}: delivery failed: {errors[:3]}")


def _headers(msg):
    return [(k, v) for k, v in (msg.headers() or [])]


def _poll(c):
    """The next record, or None after 0.5 s or an end-of-partition event; an error fails."""
    m = c.poll(0.5)
    if m is not None and m.error():
        if m.error().code() == EOF_CODE:
            return None
        dl.fail(f"consume error: {m.error()}")
    return m


def _consume(c, want_counts, timeout):
    got = {p: [] for p in want_counts}
    deadline = time.monotonic() + timeout
    while any(len(got[p]) < n for p, n in want_counts.items()):
        if time.monotonic() > deadline:
            dl.fail(f"consume timed out: have {[len(got[p]) for p in got]}, want "
                    f"{list(want_counts.values())}")
        m = _poll(c)
        if m is None:
            continue
        if len(got.setdefault(m.partition(), [])) < want_counts.get(m.partition(), 0):
            got[m.partition()].append((m.offset(), m.key(), m.value(), _headers(m)))
    return got


def _first_record(c, partition):
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        m = _poll(c)
        if m is None:
            continue
        dl.check(m.partition() == partition, f"record from partition {m.partition()}")
        return (m.offset(), m.key(), m.value(), _headers(m))
    dl.fail("no record within 15s after seek")


if __name__ == "__main__":
    dl.run_main(NAME, dl.parse_args(NAME), body)
