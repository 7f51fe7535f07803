#!/usr/bin/python3
"""Drives a broker with kafka-python: admin create, keyed produce with headers through every
codec with acks=all, read-back by assignment, seek to offset and to time, a consumer group with
a committed offset, a check of the stored segments, admin delete.

Run with Debian's /usr/bin/python3 (python3-kafka; codecs from python3-snappy, python3-lz4,
python3-zstandard). The broker version is left to kafka-python's own probing, as users run it.
Exits non-zero on any failure.
"""

import logging
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import driverlib as dl  # noqa: E402

NAME = "kafka_python"
CLIENT_ID = "samsa-kafka-python-driver"


def body(args, step):
    import kafka
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
    from kafka.admin import NewTopic
    from kafka.errors import KafkaError

    logging.basicConfig(level=logging.ERROR)
    step(f"kafka-python {kafka.__version__}, broker {args.bootstrap}")
    topic = f"{args.topic_prefix}-kafkapython"
    common = {"bootstrap_servers": args.bootstrap, "client_id": CLIENT_ID,
              "request_timeout_ms": 20000}

    admin = KafkaAdminClient(**common)
    step(f"kafka-python's probe says the broker is version {admin.config['api_version']}")
    try:
        res = admin.create_topics([NewTopic(topic, dl.PARTITIONS, 1)], timeout_ms=15000)
    except KafkaError as e:
        dl.fail(f"CreateTopics {topic}: {e!r}")
    for t, code, *_ in res.topic_errors:
        dl.check(code == 0, f"CreateTopics {t}: error code {code}")
    step(f"created {topic} with {dl.PARTITIONS} partitions")

    produced = dl.produce_every_codec(
        args, step, lambda codec, recs: _produce(common, topic, codec, recs), "compression_type")
    per_part = dl.by_partition(produced)
    tps = [TopicPartition(topic, p) for p in range(dl.PARTITIONS)]

    c = KafkaConsumer(**common, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest", consumer_timeout_ms=1000)
    try:
        dl.wait_until(lambda: c.partitions_for_topic(topic) == set(range(dl.PARTITIONS)), 15,
                      f"metadata with {dl.PARTITIONS} partitions for {topic}")
        begin, end = c.beginning_offsets(tps), c.end_offsets(tps)
        for tp in tps:
            want = (0, len(per_part[tp.partition]))
            dl.check((begin[tp], end[tp]) == want,
                     f"partition {tp.partition}: offsets ({begin[tp]}, {end[tp]}), want {want}")
        step("ListOffsets earliest/latest match the produced counts")

        c.assign(tps)
        c.seek_to_beginning()
        got = _consume(c, {p: len(per_part[p]) for p in range(dl.PARTITIONS)}, 30)
        for p in range(dl.PARTITIONS):
            dl.compare_partition(p, per_part[p], got[p])
        step(f"consumed all {len(produced)} records back byte-identical, in order per partition")

        seek_p, seek_off = 2, len(per_part[2]) // 3
        c.assign([tps[seek_p]])
        c.seek(tps[seek_p], seek_off)
        first = _consume(c, {seek_p: 1}, 15)[seek_p][0]
        dl.check_record(seek_p, seek_off, per_part[seek_p][seek_off], first, "after seek")
        step(f"seek to partition {seek_p} offset {seek_off}: first record is the right one")

        ts_p = 1
        ts, want_off = dl.timestamp_target(per_part, ts_p)
        res = c.offsets_for_times({tps[ts_p]: ts})[tps[ts_p]]
        dl.check(res is not None and res.offset == want_off,
                 f"offsets_for_times({ts}) on partition {ts_p} gave {res}, expected {want_off}")
        dl.check(res.timestamp == per_part[ts_p][want_off].timestamp,
                 f"offsets_for_times returned timestamp {res.timestamp}, the record has "
                 f"{per_part[ts_p][want_off].timestamp}")
        c.assign([tps[ts_p]])
        c.seek(tps[ts_p], res.offset)
        first = _consume(c, {ts_p: 1}, 15)[ts_p][0]
        dl.check_record(ts_p, want_off, per_part[ts_p][want_off], first, f"after seek to {ts}")
        step(f"offsets_for_times on partition {ts_p} -> offset {want_off}, first record matches")
    finally:
        c.close()

    group = f"{args.topic_prefix}-kafkapython-group"
    g = KafkaConsumer(topic, **common, group_id=group, enable_auto_commit=False,
                      auto_offset_reset="earliest", consumer_timeout_ms=1000,
                      session_timeout_ms=10000, heartbeat_interval_ms=1000)
    try:
        got = _consume(g, {p: len(per_part[p]) for p in range(dl.PARTITIONS)}, 40)
        for p in range(dl.PARTITIONS):
            dl.compare_partition(p, per_part[p], got[p], "group-consumed")
        # Stay in the group past one heartbeat interval so the member heartbeats at least once.
        hold = time.monotonic() + 1.5
        while time.monotonic() < hold:
            dl.check(not g.poll(timeout_ms=300), "records after the end of the topic")
        g.commit()
        for tp in tps:
            off = g.committed(tp)
            dl.check(off == len(per_part[tp.partition]),
                     f"group {group}: committed {off} for partition {tp.partition}, expected "
                     f"{len(per_part[tp.partition])}")
        step(f"group {group}: subscribed, consumed everything, committed offsets read back")
    finally:
        g.close()

    dl.check_segments(step, args.log_dir, topic, produced)

    try:
        res = admin.delete_topics([topic], timeout_ms=15000)
    except KafkaError as e:
        dl.fail(f"DeleteTopics {topic}: {e!r}")
    for t, code in res.topic_error_codes:
        dl.check(code == 0, f"DeleteTopics {t}: error code {code}")
    dl.wait_until(lambda: topic not in admin.list_topics(), 15, f"{topic} to disappear")
    admin.close()
    step(f"deleted {topic}")


def _produce(common, topic, codec, recs):
    from kafka import KafkaProducer

    # kafka-python does not retry by default; a produce racing the new partitions' leader
    # election gets NOT_LEADER_OR_FOLLOWER. One request in flight keeps retries in order.
    p = KafkaProducer(**common, acks="all", linger_ms=50, retries=5, retry_backoff_ms=200,
                      max_in_flight_requests_per_connection=1,
                      compression_type=None if codec == "none" else codec)
    futs = [p.send(topic, key=r.key, value=r.value, headers=r.headers, partition=r.partition,
                   timestamp_ms=r.timestamp) for r in recs]
    p.flush(30)
    for r, f in zip(recs, futs):
        try:
            md = f.get(timeout=1)
        except Exception as e:  # noqa: BLE001 - any client error fails the run
            dl.fail(f"{codec}: send to partition {r.partition} failed: {e!r}")
        dl.check(md.partition == r.partition, f"{codec}: record went to {md.partition}")
    p.close(5)


def _consume(c, want_counts, timeout):
    got = {p: [] for p in want_counts}
    deadline = time.monotonic() + timeout
    while any(len(got[p]) < n for p, n in want_counts.items()):
        if time.monotonic() > deadline:
            dl.fail(f"consume timed out: have {[len(v) for v in got.values()]}, want "
                    f"{list(want_counts.values())}")
        for tp, msgs in c.poll(timeout_ms=500).items():
            for m in msgs:
                if len(got.setdefault(tp.partition, [])) < want_counts.get(tp.partition, 0):
                    got[tp.partition].append((m.offset, m.key, m.value, list(m.headers)))
    return got


if __name__ == "__main__":
    dl.run_main(NAME, dl.parse_args(NAME), body)
