#!/usr/bin/python3
"""Drives a broker with confluent-kafka-python (librdkafka): admin create, keyed produce with
headers through every codec with acks=all, read-back by assignment, seek to offset and to time,
a consumer group with a committed offset, a check of the stored segments, admin delete.

Run with Debian's /usr/bin/python3 (python3-confluent-kafka). Exits non-zero on any failure.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import driverlib as dl  # noqa: E402

NAME = "confluent_kafka"


def body(args, step):
    import confluent_kafka
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    step(f"confluent-kafka {confluent_kafka.version()[0]}, librdkafka "
         f"{confluent_kafka.libversion()[0]}, broker {args.bootstrap}")
    topic = f"{args.topic_prefix}-confluent"
    base = {"bootstrap.servers": args.bootstrap, "client.id": "samsa-confluent-driver"}

    admin = AdminClient(dict(base))
    fut = admin.create_topics([NewTopic(topic, num_partitions=dl.PARTITIONS,
                                        replication_factor=1)], operation_timeout=15,
                              request_timeout=15)[topic]
    try:
        fut.result(timeout=20)
    except KafkaException as e:
        dl.fail(f"CreateTopics {topic}: {e}")
    md = dl.wait_until(lambda: _topic_md(admin, topic), 15, f"metadata for {topic}")
    dl.check(len(md.partitions) == dl.PARTITIONS,
             f"{topic} has {len(md.partitions)} partitions, created {dl.PARTITIONS}")
    step(f"created {topic} with {dl.PARTITIONS} partitions")

    t0 = dl.now_ms() - 600_000
    count = 3 if args.small else 30
    produced = []
    for codec in args.codecs:
        recs = dl.make_records(codec, args.topic_prefix, count, t0, len(produced))
        _produce(base, topic, codec, recs)
        produced += recs
        step(f"produced {len(recs)} records with compression.type={codec}, acks=all")
    per_part = dl.by_partition(produced)

    cbase = dict(base, **{"group.id": f"{args.topic_prefix}-confluent-assign",
                          "enable.auto.commit": False, "auto.offset.reset": "earliest",
                          "enable.partition.eof": True})
    c = Consumer(cbase)
    try:
        for p in range(dl.PARTITIONS):
            lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            dl.check((lo, hi) == (0, len(per_part[p])),
                     f"partition {p}: watermarks ({lo}, {hi}), expected (0, {len(per_part[p])})")
        step("ListOffsets earliest/latest match the produced counts")

        c.assign([TopicPartition(topic, p, 0) for p in range(dl.PARTITIONS)])
        got = _consume(c, {p: len(per_part[p]) for p in range(dl.PARTITIONS)}, 30)
        for p in range(dl.PARTITIONS):
            dl.compare_partition(p, per_part[p], got[p])
        step(f"consumed all {len(produced)} records back byte-identical, in order per partition")

        seek_p, seek_off = 2, len(per_part[2]) // 3
        c.assign([TopicPartition(topic, seek_p, seek_off)])
        first = _first_record(c, seek_p)
        dl.check_record(seek_p, seek_off, per_part[seek_p][seek_off], first, "after seek")
        step(f"seek to partition {seek_p} offset {seek_off}: first record is the right one")

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
    finally:
        c.close()

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

    dl.check_segments(step, args.log_dir, topic, produced)

    fut = admin.delete_topics([topic], operation_timeout=15, request_timeout=15)[topic]
    try:
        fut.result(timeout=20)
    except KafkaException as e:
        dl.fail(f"DeleteTopics {topic}: {e}")
    dl.wait_until(lambda: _topic_md(admin, topic) is None, 15, f"{topic} to disappear")
    step(f"deleted {topic}")


def _topic_md(admin, topic):
    md = admin.list_topics(timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None or not t.partitions:
        return None
    return t


def _produce(base, topic, codec, recs):
    from confluent_kafka import Producer

    p = Producer(dict(base, **{"compression.type": codec, "acks": "all", "linger.ms": 50,
                               "message.timeout.ms": 20000}))
    errors = []

    def report(err, msg):
        if err is not None:
            errors.append(f"{msg.partition()}: {err}")

    for r in recs:
        p.produce(topic, value=r.value, key=r.key, partition=r.partition, timestamp=r.timestamp,
                  headers=r.headers or None, on_delivery=report)
    left = p.flush(30)
    dl.check(left == 0, f"{codec}: {left} records not delivered within 30s")
    dl.check(not errors, f"{codec}: delivery failed: {errors[:3]}")


def _headers(msg):
    return [(k, v) for k, v in (msg.headers() or [])]


def _consume(c, want_counts, timeout):
    got = {p: [] for p in want_counts}
    import time

    deadline = time.monotonic() + timeout
    while any(len(got[p]) < n for p, n in want_counts.items()):
        if time.monotonic() > deadline:
            dl.fail(f"consume timed out: have {[len(got[p]) for p in got]}, want "
                    f"{list(want_counts.values())}")
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == -191:  # _PARTITION_EOF
                continue
            dl.fail(f"consume error: {m.error()}")
        got[m.partition()].append((m.offset(), m.key(), m.value(), _headers(m)))
    return got


def _first_record(c, partition):
    import time

    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == -191:
                continue
            dl.fail(f"consume error: {m.error()}")
        dl.check(m.partition() == partition, f"record from partition {m.partition()}")
        return (m.offset(), m.key(), m.value(), _headers(m))
    dl.fail("no record within 15s after seek")


if __name__ == "__main__":
    dl.run_main(NAME, dl.parse_args(NAME), body)
