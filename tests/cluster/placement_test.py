#!/usr/bin/env python3
"""Racks (issue 23): rack-aware replica placement and KIP-392's fetch from the closest replica,
on a loopback cluster of 1 controller and 6 brokers in 3 racks (broker.rack: brokers 1, 2 in
r1; 3, 4 in r2; 5, 6 in r3).

- 100 topics created in one CreateTopics (90 with 2 partitions and replication factor 3, 10
  with 3 partitions and factor 2): every partition's replicas span min(RF, 3) racks, and the
  leaderships spread over the 6 brokers (each within 25 % of the mean).
- Brokers 1 to 4 set replica.selector.class=org.apache.kafka.common.replica.
  RackAwareReplicaSelector, brokers 5 and 6 do not. A confluent-kafka consumer with
  client.rack=r2 reads a partition led in r1: the leader answers PreferredReadReplica, and the
  records come from the follower in r2 (its samsa_fetch_follower_bytes_total grew by at least
  the records' size; no other broker's did).
- Without the selector the leader serves: a consumer with client.rack=r1 reads a partition led
  in r3 (whose leader has no selector): no follower served a byte, the leader sent the records.

Exit 77 (skip) without confluent-kafka, except under CI=true (a failure).

  placement_test.py --samsad PATH [--keep]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_harness as ch  # noqa: E402

RACKS = {1: "r1", 2: "r1", 3: "r2", 4: "r2", 5: "r3", 6: "r3"}
SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
WITH_SELECTOR = (1, 2, 3, 4)
RECORDS = 200
VALUE = 1000  # bytes per record


def snapshot(brokers) -> dict[int, dict[str, float]]:
    return {b: ch.metrics(n) for b, n in brokers.items()}


def delta(before, after, b: int, key: str) -> float:
    return after[b].get(key, 0.0) - before[b].get(key, 0.0)


FOLLOWER_BYTES = "samsa_fetch_follower_bytes_total"
PREFERRED = "samsa_fetch_preferred_replica_total"


def check_placement(md, specs: dict[str, tuple[int, int]]):
    leads = {b: 0 for b in RACKS}
    for name, (parts, rf) in specs.items():
        t = md.topics[name]
        if len(t.partitions) != parts:
            raise AssertionError(f"{name}: {len(t.partitions)} partitions, not {parts}")
        for p in t.partitions.values():
            racks = {RACKS[r] for r in p.replicas}
            if len(p.replicas) != rf or len(racks) != min(rf, 3):
                raise AssertionError(f"{name}-{p.id}: replicas {p.replicas} span racks {racks}")
            leads[p.replicas[0]] += 1  # the leader placement chose (a fencing may move it)
    total = sum(parts for parts, _ in specs.values())
    ch.check(True, f"the {total} partitions' replicas each span min(RF, 3) racks")
    mean = total / len(RACKS)
    ch.check(all(0.75 * mean <= n <= 1.25 * mean for n in leads.values()),
             f"leaderships spread over the brokers (mean {mean:.0f}): {leads}")


def produce(bootstrap: str, topic: str):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    failed = []
    for i in range(RECORDS):
        p.produce(topic, value=f"{i:06d}".encode().ljust(VALUE, b"x"), partition=0,
                  on_delivery=lambda err, _m: failed.append(err) if err else None)
    left = p.flush(20)
    ch.check(left == 0 and not failed, f"{RECORDS} records produced to {topic}-0 with acks=all")


def consume(bootstrap: str, topic: str, rack: str) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"racks-{topic}",
                  "client.rack": rack, "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(topic, 0, 0)])
    got, end = [], time.time() + 20
    while len(got) < RECORDS and time.time() < end:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    return got


def partition0(md, topic: str) -> tuple[int, list[int]]:
    p = md.topics[topic].partitions[0]
    return p.leader, list(p.replicas)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samsad", required=True)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    ch.set_log_prefix("[placement]")
    try:
        import confluent_kafka  # noqa: F401  (only whether it is there)
    except ImportError:
        return ch.skip_or_fail(ch.log, "confluent-kafka is missing", "the test")
    started = time.time()
    root = tempfile.mkdtemp(prefix="samsa-racks-")
    controller, brokers = ch.loopback_cluster(
        a.samsad, root,
        # A session longer than samsa's 1.5 s default (Kafka's is 9 s): on a loaded machine,
        # creating 630 replicas at once must not fence brokers and move leaderships mid-test.
        common={"samsa.reactors": "1", "offsets.topic.num.partitions": "3",
                "broker.session.timeout.ms": "6000"},
        controller_props={"leader.imbalance.check.interval.seconds": "1"},
        broker_props={"samsa.metrics.listen": lambda: f"127.0.0.1:{ch.free_port()}"},
        brokers=tuple(RACKS))
    for b, n in brokers.items():
        n.props["broker.rack"] = RACKS[b]
        if b in WITH_SELECTOR:
            n.props["replica.selector.class"] = SELECTOR
        n.write_config()
    everyone = [controller, *brokers.values()]
    ok = False
    try:
        ch.start_all(everyone)
        bootstrap = ch.bootstrap_of(brokers)
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": bootstrap})
        ch.wait_for(lambda: len(admin.list_topics(timeout=5).brokers) == len(RACKS), 30,
                    "6 brokers registered and unfenced")
        # DescribeCluster shows each broker's rack as it registered it. Broker 1 answers from
        # its own metadata image, which may apply the last registration a moment after the
        # broker the admin client asked: asked until it names all six (or 15 s).
        kp = ch.kproto.Kafka()
        seen: dict = {}

        def racks_seen():
            conn = ch.kproto.Conn(brokers[1].host, brokers[1].port)
            try:
                conn.send(kp.encode_request(60, 1, 1, "placement-test", {"EndpointType": 1}))
                _, dc = kp.decode_response(60, 1, conn.recv(10))
            finally:
                conn.close()
            seen.clear()
            seen.update({x["BrokerId"]: x["Rack"] for x in dc["Brokers"]})
            return len(seen) == len(RACKS)

        try:
            ch.wait_for(racks_seen, 15, "broker 1's DescribeCluster names six brokers")
        except AssertionError:
            pass  # the check below says what it saw
        ch.check(seen == RACKS, f"DescribeCluster names each broker's rack ({seen})")

        # ---- placement ----
        specs = {f"t{i:03d}": (2, 3) if i < 90 else (3, 2) for i in range(100)}
        t0 = time.time()
        fs = admin.create_topics([NewTopic(n, num_partitions=p, replication_factor=rf)
                                  for n, (p, rf) in specs.items()])
        for f in fs.values():
            f.result(timeout=30)
        ch.log(f"100 topics created in {time.time() - t0:.2f} s")
        md = ch.wait_for(lambda: (lambda m: m if all(n in m.topics for n in specs) else None)(
            admin.list_topics(timeout=5)), 10, "the 100 topics in Metadata")
        check_placement(md, specs)
        # The consumers below need each partition's leader as placed and its ISR whole.
        md = ch.wait_for(lambda: (lambda m: m if all(
            p.leader == p.replicas[0] and sorted(p.isrs) == sorted(p.replicas)
            for n in specs for p in m.topics[n].partitions.values()) else None)(
            admin.list_topics(timeout=5)), 30, "every partition led by its first replica, ISR whole")

        # ---- KIP-392: a consumer in r2 reads a partition led in r1 from its follower in r2 ----
        topic = next(n for n in specs if specs[n][1] == 3 and RACKS[partition0(md, n)[0]] == "r1")
        leader, replicas = partition0(md, topic)
        near = next(r for r in replicas if RACKS[r] == "r2")
        ch.log(f"{topic}-0: leader {leader} (r1), replicas {replicas}, follower {near} in r2")
        produce(bootstrap, topic)
        before = snapshot(brokers)
        got = consume(bootstrap, topic, "r2")
        after = snapshot(brokers)
        ch.check(len(got) == RECORDS and got[0].startswith(b"000000"),
                 f"the consumer in r2 read the {RECORDS} records ({len(got)})")
        served = {b: delta(before, after, b, FOLLOWER_BYTES) for b in brokers}
        ch.check(delta(before, after, leader, PREFERRED) >= 1,
                 f"leader {leader} answered with a preferred read replica")
        ch.check(served[near] >= RECORDS * VALUE,
                 f"follower {near} in r2 served the records ({served[near]:.0f} bytes)")
        ch.check(all(v == 0 for b, v in served.items() if b != near),
                 f"no other broker served consumer bytes as a follower ({served})")

        # ---- without the selector the leader serves ----
        topic = next(n for n in specs if specs[n][1] == 3 and RACKS[partition0(md, n)[0]] == "r3")
        leader, replicas = partition0(md, topic)
        ch.log(f"{topic}-0: leader {leader} (r3, no replica.selector.class), replicas {replicas}")
        produce(bootstrap, topic)
        before = snapshot(brokers)
        got = consume(bootstrap, topic, "r1")
        after = snapshot(brokers)
        ch.check(len(got) == RECORDS, f"the consumer in r1 read the {RECORDS} records "
                                      f"({len(got)})")
        served = {b: delta(before, after, b, FOLLOWER_BYTES) for b in brokers}
        sent = delta(before, after, leader, f'samsa_topic_bytes_out_total{{topic="{topic}"}}')
        ch.check(all(v == 0 for v in served.values()) and
                 delta(before, after, leader, PREFERRED) == 0,
                 f"no follower served it, no preferred replica named ({served})")
        ch.check(sent >= RECORDS * VALUE, f"leader {leader} sent the records ({sent:.0f} bytes)")
        ok = not a.keep
    finally:
        # SIGTERM to every broker at once (each hands its leaderships over while the controller
        # still runs), then the controller.
        for n in brokers.values():
            if n.alive():
                n.proc.send_signal(signal.SIGTERM)
        ch.teardown([*brokers.values(), controller], root, ok)
    ch.log(f"PASS in {time.time() - started:.1f} s")
    return 0


if __name__ == "__main__":
    ch.run_main(main)
