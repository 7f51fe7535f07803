#!/usr/bin/env python3
"""A broker whose disk was replaced is never elected while an eligible replica may return
(KIP-858 directory ids and KIP-966 eligible leader replicas, issue 19), on a loopback cluster
of 1 controller and 3 brokers.

Topic `w`: 2 partitions, both on brokers [1, 2, 3] led by 1, min.insync.replicas=2. Records
are acknowledged (acks=all) on both partitions; then broker 3 and broker 2 are killed in turn
(the ISR shrinks to [1]; broker 2 left it below the minimum, so it is eligible: ELR [2]), then
broker 1. Broker 1's data directory is wiped (a new disk: a new directory id) and it restarts:

- it leaves the ISR of both partitions and leads neither, for as long as the others are down
  (kafka-topics --describe shows the empty ISR and Elr: 2);
- the operator elects it uncleanly for partition 1 on purpose (kafka-leader-election
  --election-type unclean): it leads partition 1 with an empty log;
- broker 2 returns and leads partition 0 from the ELR, with every acknowledged record;
- broker 3 returns; broker 1 follows and is back in partition 0's ISR.

Exit 77 (skip) without confluent-kafka or Kafka's tools, except under CI=true (a failure).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_harness as ch  # noqa: E402
from admin_harness import kafka_tools_available, tool  # noqa: E402

TOPIC = "w"
RECORDS = 200


def leaders(node, kp) -> dict[int, tuple[int, list[int]]] | None:
    """{partition: (leader, ISR)} from one broker's Metadata, None if it did not answer."""
    t = ch.topic_metadata(node, kp, TOPIC, "wiped-disk", ok=(0, 5))  # 5: LEADER_NOT_AVAILABLE
    if t is None:
        return None
    return {p["PartitionIndex"]: (p["LeaderId"], sorted(p["IsrNodes"])) for p in t["Partitions"]}


def wait(fn, timeout: float, what: str):
    end = time.time() + timeout
    while time.time() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {timeout:.0f} s")


def produce(bootstrap: str) -> dict[int, list[bytes]]:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    acked: dict[int, list[bytes]] = {0: [], 1: []}
    errors = []

    def done(err, msg):
        if err:
            errors.append(err)
        else:
            acked[msg.partition()].append(msg.value())

    for i in range(RECORDS):
        for q in (0, 1):
            p.produce(TOPIC, f"r{q}-{i}".encode(), partition=q, on_delivery=done)
    p.flush(30)
    ch.check(not errors and all(len(v) == RECORDS for v in acked.values()),
             f"{2 * RECORDS} records acknowledged with acks=all (errors {errors[:3]})")
    return acked


def read_all(node, partition: int) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": f"{node.host}:{node.port}", "group.id": "wiped-read",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([TopicPartition(TOPIC, partition, 0)])
    out, end = [], time.time() + 30
    while time.time() < end:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().name() == "_PARTITION_EOF":
                break
            continue
        out.append(m.value())
    c.close()
    return out


def describe(bootstrap: str) -> str:
    rc, out = tool("kafka-topics", "--bootstrap-server", bootstrap, "--describe", "--topic",
                   TOPIC)
    ch.check(rc == 0, f"kafka-topics --describe ran (exit {rc})")
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samsad", required=True)
    a = ap.parse_args()
    ch.set_log_prefix("[wiped-disk]")
    try:
        import confluent_kafka  # noqa: F401  (only whether it is there)
    except ImportError:
        return ch.skip_or_fail(ch.log, "confluent-kafka is missing", "the test")
    why = kafka_tools_available()
    if why:
        return ch.skip_or_fail(ch.log, why, "the test")
    root = tempfile.mkdtemp(prefix="samsa-wiped-")
    controller, brokers = ch.loopback_cluster(a.samsad, root, common={"samsa.reactors": "1"})
    everyone = [controller, *brokers.values()]
    ok = False
    try:
        for n in everyone:
            n.start()
        for n in everyone:
            n.wait_listening()
        b1, b2, b3 = (brokers[i] for i in ch.BROKERS)
        bootstrap = ",".join(f"{n.host}:{n.port}" for n in brokers.values())
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": bootstrap})
        wait(lambda: len(admin.list_topics(timeout=5).brokers) == 3, 30, "3 brokers registered")
        admin.create_topics([NewTopic(TOPIC, 2, -1, replica_assignment=[[1, 2, 3], [1, 2, 3]],
                                      config={"min.insync.replicas": "2"})])[TOPIC].result(30)
        wait(lambda: (leaders(b1, kp) or {}).get(1, (0, []))[1] == [1, 2, 3], 20,
             "both partitions led by 1 with the full ISR")
        acked = produce(bootstrap)

        # The ISR shrinks to [1]: 3 leaves at the minimum, 2 below it (eligible).
        b3.kill9()
        wait(lambda: all(isr == [1, 2] for _, isr in (leaders(b1, kp) or {9: (0, [])}).values()),
             20, "ISR [1, 2] once broker 3 is gone")
        b2.kill9()
        wait(lambda: all(isr == [1] for _, isr in (leaders(b1, kp) or {9: (0, [])}).values()),
             20, "ISR [1] once broker 2 is gone")
        b1.kill9()
        ch.log("brokers 3, 2, 1 killed in turn; broker 1's data directory wiped")
        data = b1.props["log.dirs"]
        shutil.rmtree(data)
        os.makedirs(data)
        before = len(b1.log_text())
        b1.start("restart on a new disk")
        b1.wait_listening()
        # Until its new registration is in the metadata, its image is the one from before (it
        # names the killed incarnation leader; the replicas do not act on it).
        wait(lambda: "unfenced by the controller" in b1.log_text()[before:], 30,
             "broker 1 registered again and unfenced")
        seen = wait(lambda: leaders(b1, kp), 30, "broker 1 answers Metadata")
        end = time.time() + 5
        while time.time() < end:  # it stays leaderless while nobody eligible is back
            seen = leaders(b1, kp) or seen
            if any(leader != -1 for leader, _ in seen.values()):
                raise AssertionError(f"a partition got a leader with only the wiped broker "
                                     f"back: {seen}")
            time.sleep(0.2)
        ch.check(all(leader == -1 and 1 not in isr for leader, isr in seen.values()),
                 f"the wiped broker 1 left both ISRs and leads neither for 5 s ({seen})")
        ch.check("registered with a new log dir" in controller.log_text(),
                 "the controller says why (a new log dir)")
        out = describe(f"{b1.host}:{b1.port}")
        ch.log("kafka-topics --describe:\n" + out)
        ch.check(all("Elr: 2" in l for l in out.splitlines() if "Partition:" in l),
                 "kafka-topics shows broker 2 eligible (Elr: 2) for both partitions")

        rc, out = tool("kafka-leader-election", "--bootstrap-server", f"{b1.host}:{b1.port}",
                       "--election-type", "unclean", "--topic", TOPIC, "--partition", "1")
        ch.log(f"kafka-leader-election --election-type unclean (partition 1): exit {rc}\n{out}")
        wait(lambda: (leaders(b1, kp) or {}).get(1, (-1, []))[0] == 1, 20,
             "the operator's unclean election: broker 1 leads partition 1")
        ch.check((leaders(b1, kp) or {}).get(0, (0, []))[0] == -1,
                 "partition 0 still waits for an eligible replica")

        b2.start("the eligible replica returns")
        b2.wait_listening()
        wait(lambda: (leaders(b1, kp) or {}).get(0, (-1, []))[0] == 2, 30,
             "broker 2 (ELR) leads partition 0")
        got = read_all(b2, 0)
        ch.check(got[:len(acked[0])] == acked[0],
                 f"partition 0 holds every acknowledged record, in order ({len(got)} read, "
                 f"{len(acked[0])} acknowledged)")
        b3.start("the last broker returns")
        b3.wait_listening()
        wait(lambda: (leaders(b2, kp) or {}).get(0, (0, []))[1] == [1, 2, 3], 40,
             "brokers 1 and 3 back in partition 0's ISR")
        ok = True
    finally:
        ch.teardown(everyone, root, ok)
    ch.log("PASS")
    return 0


kp = ch.kproto.Kafka()

if __name__ == "__main__":
    ch.run_main(main)
