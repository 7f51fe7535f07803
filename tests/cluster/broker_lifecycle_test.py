#!/usr/bin/env python3
"""A broker's retirement through samsactl (issue 23), on 1 controller and brokers 1-4 (loopback):

- topic bl-a (6 partitions, RF 3) on brokers 1-3 and bl-c (2 partitions, RF 2) on 4 and 1-2,
  both with records;
- `samsactl broker drain 4` on broker 2's admin socket (the reassignment forwarded to the
  active controller), then `samsactl broker drain 1` on the controller's: progress lines, and
  Metadata shows no replica (nor leadership) left on the drained broker;
- refusals: an unknown broker, a drain that would leave partitions short of their replication
  factor (named), an unregister of a broker that still holds replicas;
- broker 1 stopped and `samsactl broker unregister 1`: `samsactl broker list` no longer shows
  it, and every record is read back from brokers 2-4.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_harness as ch  # noqa: E402

BROKERS = (1, 2, 3, 4)
RECORDS = 20000


def samsactl(exe: str, node, *args: str, timeout: float = 60) -> tuple[int, str, str]:
    r = subprocess.run([exe, "--socket", node.props["samsa.admin.socket"], *args],
                       capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr


def produce(bootstrap: str, topic: str, n: int) -> dict[tuple[int, int], bytes]:
    from confluent_kafka import Producer
    acked = {}

    def on_ack(err, msg):
        if err is None:
            acked[(msg.partition(), msg.offset())] = msg.value()

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(n):
        p.produce(topic, value=f"{topic}-{i:06d}".encode() + b"x" * 200, key=str(i).encode(),
                  on_delivery=on_ack)
        if i % 500 == 0:
            p.poll(0)
    p.flush(30)
    ch.check(len(acked) == n, f"{n} records acknowledged on {topic}")
    return acked


def consume_all(bootstrap: str, topic: str, partitions: int,
                want: dict[tuple[int, int], bytes]):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bl-{topic}-{time.time()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = {}
    end = time.time() + 20
    while len(got) < len(want) and time.time() < end:
        for m in c.consume(500, 0.5):
            if m.error() is None:
                got[(m.partition(), m.offset())] = m.value()
    c.close()
    ch.check(got == want, f"all {len(want)} records of {topic} read back, at their offsets")


def replicas_on(admin, broker: int) -> list[str]:
    """Partitions whose replicas, ISR or leader name the broker, as Metadata shows them."""
    md = admin.list_topics(timeout=5)
    out = []
    for name, t in md.topics.items():
        for p in t.partitions.values():
            if broker in p.replicas or broker in p.isrs or p.leader == broker:
                out.append(f"{name}-{p.id}")
    return out


PROGRESS = re.compile(r"^broker (\d+): (\d+) of (\d+) partitions moved, (\d+) replicas and "
                      r"(\d+) leaderships left, ETA (\d+ s|unknown)$", re.M)


def drain(exe: str, node, broker: int, where: str) -> float:
    rc, out, _ = samsactl(exe, node, "--json", "broker", "describe", str(broker))
    partitions = json.loads(out)["replicas"]
    t0 = time.time()
    rc, out, err = samsactl(exe, node, "broker", "drain", str(broker), "--timeout", "40")
    took = time.time() - t0
    ch.log(f"samsactl broker drain {broker} on {where} ({took:.1f} s):\n{out}{err}")
    ch.check(rc == 0, f"broker drain {broker} on {where} exits 0")
    ch.check(f"broker {broker}: {partitions} partitions to move off it" in out,
             f"drain {broker}: {partitions} partitions planned")
    lines = PROGRESS.findall(out)
    ch.check(len(lines) >= 1 and all(int(l[2]) == partitions for l in lines),
             f"drain {broker}: progress lines ({len(lines)})")
    ch.check(re.search(rf"^broker {broker}: drained, {partitions} of {partitions} partitions "
                       r"moved in [\d.]+ s$", out, re.M) is not None, f"drain {broker}: drained line")
    return took


def replica_count(admin, broker: int) -> int:
    md = admin.list_topics(timeout=5)
    return sum(broker in p.replicas for t in md.topics.values() for p in t.partitions.values())


def checks_before(exe: str, admin, controller, brokers):
    rc, out, err = samsactl(exe, controller, "--json", "broker", "list")
    listed = {b["id"]: b for b in json.loads(out)["brokers"]}
    ch.check(rc == 0 and sorted(listed) == list(BROKERS), "broker list: brokers 1-4")
    on1, on4 = replica_count(admin, 1), replica_count(admin, 4)
    ch.check(listed[1]["replicas"] == on1 and listed[4]["replicas"] == on4 and
             not listed[1]["fenced"] and listed[1]["endpoints"][0]["name"] == "PLAINTEXT",
             "broker list --json: replicas, state and endpoints")
    rc, out, _ = samsactl(exe, brokers[3], "broker", "list")
    ch.log("samsactl broker list (broker 3):\n" + out)
    ch.check(rc == 0 and re.search(rf"^1\s+-\s+active\s+{on1}\s+\d+\s+PLAINTEXT://", out, re.M),
             "broker list table on a broker node")
    rc, out, _ = samsactl(exe, brokers[2], "broker", "describe", "4")
    ch.log("samsactl broker describe 4:\n" + out)
    ch.check(rc == 0 and re.search(r"^bl-c\s+0\s+(leader|follower)", out, re.M),
             "broker describe 4 lists bl-c-0")
    rc, _, err = samsactl(exe, controller, "broker", "drain", "9")
    ch.check(rc == 1 and "broker 9 is not registered" in err, "drain of an unknown broker: refused")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samsad", required=True)
    ap.add_argument("--samsactl", required=True)
    a = ap.parse_args()
    ch.set_log_prefix("[broker_lifecycle]")
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return ch.skip_or_fail(ch.log, "confluent_kafka is not installed", "the test")
    root = tempfile.mkdtemp(prefix="samsa-broker-lifecycle-")
    controller, brokers = ch.loopback_cluster(
        a.samsad, root, common={"samsa.reactors": "1", "min.insync.replicas": "1",
                              "offsets.topic.num.partitions": "4"},
        brokers=BROKERS)
    everyone = [controller] + list(brokers.values())
    ok = False
    start = time.time()
    try:
        ch.start_all(everyone)
        from confluent_kafka.admin import AdminClient, NewTopic
        bootstrap = ch.bootstrap_of(brokers)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        ch.wait_for(lambda: len(admin.list_topics(timeout=5).brokers) == len(BROKERS), 20,
                    "every broker registered")
        # The group coordinator's topic is created once 3 brokers are up: let it land first.
        ch.topic_md(admin, "__consumer_offsets", 4, 20)
        a_assign = [[1, 2, 3], [2, 3, 1], [3, 1, 2], [1, 3, 2], [2, 1, 3], [3, 2, 1]]
        c_assign = [[4, 1], [2, 4]]
        fs = admin.create_topics([NewTopic("bl-a", 6, replica_assignment=a_assign),
                                  NewTopic("bl-c", 2, replica_assignment=c_assign)])
        for f in fs.values():
            f.result(30)
        ch.topic_md(admin, "bl-a", 6, 20)
        ch.topic_md(admin, "bl-c", 2, 20)
        data_a = produce(bootstrap, "bl-a", RECORDS)
        data_c = produce(bootstrap, "bl-c", RECORDS // 3)
        checks_before(a.samsactl, admin, controller, brokers)

        drain(a.samsactl, brokers[2], 4, "broker 2's admin socket (forwarded)")
        ch.wait_for(lambda: not replicas_on(admin, 4), 10, "Metadata: nothing on broker 4")
        rc, out, _ = samsactl(a.samsactl, brokers[3], "--json", "broker", "drain", "4",
                              "--no-wait")
        again = json.loads(out)
        ch.check(rc == 0 and again["partitions"] == 0 and again["moves"] == [],
                 "drain --no-wait --json of the drained broker: nothing left to move")
        took = drain(a.samsactl, controller, 1, "the controller's admin socket")
        ch.wait_for(lambda: not replicas_on(admin, 1), 10, "Metadata: nothing on broker 1")
        ch.log(f"figure: broker 1 drained in {took:.1f} s")

        rc, _, err = samsactl(a.samsactl, controller, "broker", "unregister", "2")
        ch.log(f"unregister 2: {err.strip()}")
        ch.check(rc == 1 and "still holds" in err and "--force" in err,
                 "unregister of a broker with replicas: refused")
        brokers[1].stop()
        rc, out, err = samsactl(a.samsactl, controller, "broker", "unregister", "1")
        ch.check(rc == 0 and "broker 1 unregistered" in out, "broker unregister 1")
        rc, out, _ = samsactl(a.samsactl, controller, "--json", "broker", "list")
        ch.check(rc == 0 and sorted(b["id"] for b in json.loads(out)["brokers"]) == [2, 3, 4],
                 "broker list no longer shows broker 1")
        ch.wait_for(lambda: samsactl(a.samsactl, brokers[3], "--json", "broker", "list")[1]
                    .count('"id":1,') == 0, 10, "broker 3's image drops broker 1 too")
        rc, _, err = samsactl(a.samsactl, controller, "broker", "drain", "2")
        ch.log(f"drain 2 with 3 brokers left: {err.strip()}")
        ch.check(rc == 1 and "replication factor 3" in err and "bl-a-0" in err,
                 "a drain leaving partitions short of their replication factor: refused, named")
        rest = ",".join(f"{brokers[b].host}:{brokers[b].port}" for b in (2, 3, 4))
        consume_all(rest, "bl-a", 6, data_a)
        consume_all(rest, "bl-c", 2, data_c)
        ch.log(f"figure: test body {time.time() - start:.1f} s")
        ok = True
        return 0
    finally:
        ch.teardown(everyone, root, ok)


if __name__ == "__main__":
    ch.run_main(main)
