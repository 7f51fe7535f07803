#!/usr/bin/env python3
"""A samsa cluster on loopback: 1 controller and 3 brokers, each a separate samsad process
with its own data directory and free ports, checked with a real client (confluent-kafka /
librdkafka) and raw requests (tests/clients/kproto.py).

  cluster_test.py --samsad PATH [--cycles N] [--keep]

Checks: the 3 brokers are in Metadata; a topic with replication factor 3 and 3 partitions gets 3
distinct leaders; produce and consume through the leaders work; a raw ListOffsets to a
non-leader gets NOT_LEADER_OR_FOLLOWER, a consumer's Fetch v16 to a follower is served by it
(KIP-392) and to a broker with no replica gets NOT_LEADER_OR_FOLLOWER with the current leader
and its endpoint; a follower's Fetch (ReplicaState) to a leader is answered by its ReplicaState (records, diverging
epoch, a non-replica refused);
replication factor 4 gets INVALID_REPLICATION_FACTOR; kill -9 of a partition leader -> within
2 s it is gone from Metadata and its leaderships moved with the leader epoch bumped; restarted,
it registers again and is back. Prints the failover times (kill -9 to the new leader visible in
Metadata) and each broker's registration-to-unfenced time.

Exit 77 (skip) when confluent-kafka is missing, except under CI=true where that fails.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_harness import (BROKERS, NOT_LEADER, check, free_port, kproto,  # noqa: E402
                             leader_epoch, log, loopback_cluster, metadata, metadata_topic_id,
                             skip_or_fail, topic_md)
from cluster_harness import Node  # noqa: E402,F401  (dpdk_cluster_test.py uses ct.Node)
from cluster_harness import prometheus  # noqa: E402

INVALID_RF = 38


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samsad", required=True)
    ap.add_argument("--cycles", type=int, default=3)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    try:
        from confluent_kafka import Consumer, Producer, TopicPartition
        from confluent_kafka.admin import AdminClient, NewTopic
    except ImportError:
        return skip_or_fail(log, "confluent-kafka is missing (python3-confluent-kafka)", "the test")

    root = tempfile.mkdtemp(prefix="samsa-cluster-")
    controller, brokers = loopback_cluster(
        a.samsad, root, common={"samsa.reactors": "1"},
        controller_props={"leader.imbalance.check.interval.seconds": "1"},
        broker_props={
            # below the 1.5 s session, so a stalled follower leaves the ISR through
            # AlterPartition first
            "replica.lag.time.max.ms": "600",
            # an idle follower's long poll well inside that lag
            "replica.fetch.wait.max.ms": "100",
            "samsa.metrics.listen": lambda: f"127.0.0.1:{free_port()}"})
    nodes = [controller] + list(brokers.values())
    ok = False
    try:
        controller.start()
        controller.wait_listening()
        t0 = time.time()
        for n in brokers.values():
            n.start()
        for n in brokers.values():
            n.wait_listening()
        bootstrap = ",".join(f"127.0.0.1:{n.port}" for n in brokers.values())
        admin = AdminClient({"bootstrap.servers": bootstrap})

        def live_brokers(via=admin):
            try:
                return set(metadata(via).brokers.keys())
            except Exception:
                return set()

        end = time.time() + 15
        while live_brokers() != set(BROKERS) and time.time() < end:
            time.sleep(0.05)
        check(live_brokers() == set(BROKERS),
              f"Metadata lists the 3 brokers ({time.time() - t0:.2f}s after they started)")
        cluster_ids = set()
        for b, n in brokers.items():
            # Each broker's own image follows the metadata log within a fetch of the others.
            via = AdminClient({"bootstrap.servers": f"127.0.0.1:{n.port}"})
            end = time.time() + 5
            while True:
                md = metadata(via)
                ports = {i: m.port for i, m in md.brokers.items()}
                if ports == {i: brokers[i].port for i in BROKERS} or time.time() > end:
                    break
                time.sleep(0.05)
            cluster_ids.add(md.cluster_id)
            check(ports == {i: brokers[i].port for i in BROKERS},
                  f"broker {b} advertises every broker at its own listener")
        check(len(cluster_ids) == 1, f"the brokers joined the controller's cluster {cluster_ids}")
        kp = kproto.Kafka()
        conn = kproto.Conn("127.0.0.1", brokers[BROKERS[0]].port)
        conn.send(kp.encode_request(60, 2, 1, "cluster-test", {"EndpointType": 1,
                                                                "IncludeFencedBrokers": True}))
        _, dc = kp.decode_response(60, 2, conn.recv(10))
        conn.close()
        check(sorted((b["BrokerId"], b["Port"], b["IsFenced"]) for b in dc["Brokers"]) ==
              [(b, brokers[b].port, False) for b in BROKERS] and
              dc["ClusterId"] in cluster_ids, "DescribeCluster lists the 3 brokers, unfenced")

        # ---- placement ----
        fs = admin.create_topics([NewTopic("rf3", num_partitions=3, replication_factor=3)])
        fs["rf3"].result(timeout=10)
        t = topic_md(admin, "rf3", 3)
        leaders = {p.id: p.leader for p in t.partitions.values()}
        check(len(t.partitions) == 3 and sorted(leaders.values()) == list(BROKERS),
              f"rf3 has 3 partitions with 3 distinct leaders {leaders}")
        check(all(sorted(p.replicas) == list(BROKERS) and sorted(p.isrs) == list(BROKERS)
                  for p in t.partitions.values()), "each partition has 3 replicas, all in sync")
        # The broker the request went to answers once its own image has the topic.
        # (the others follow the metadata log within a fetch).
        for b, n in brokers.items():
            one = AdminClient({"bootstrap.servers": f"127.0.0.1:{n.port}"})
            end = time.time() + 2
            while "rf3" not in metadata(one).topics and time.time() < end:
                time.sleep(0.05)
            check("rf3" in metadata(one).topics, f"broker {b} knows rf3")

        fs = admin.create_topics([NewTopic("rf4", num_partitions=1, replication_factor=4)])
        try:
            fs["rf4"].result(timeout=10)
            check(False, "replication factor 4 refused")
        except Exception as e:  # KafkaException carrying a KafkaError
            err = e.args[0] if e.args else None
            code = err.code() if hasattr(err, "code") else None
            check(code == INVALID_RF, f"replication factor 4 gets INVALID_REPLICATION_FACTOR "
                                      f"({err})")

        # ---- produce and consume through the leaders ----
        # Idempotent: its producer id comes from a block the controller reserved.
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                      "enable.idempotence": True})
        delivered, failed = [], []

        def report(err, msg):
            (failed if err else delivered).append((msg.partition(), msg.offset(), err))

        for i in range(300):
            p.produce("rf3", value=f"v{i}".encode(), partition=i % 3, on_delivery=report)
        p.flush(20)
        check(len(delivered) == 300 and not failed,
              f"300 records produced through the leaders ({len(failed)} failed)")
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "cluster-test",
                      "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        c.assign([TopicPartition("rf3", i, 0) for i in range(3)])
        got = set()
        end = time.time() + 20
        while len(got) < 300 and time.time() < end:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.add(m.value().decode())
        c.close()
        check(got == {f"v{i}" for i in range(300)}, "the 300 records consumed from the leaders")

        # Metadata's auto-creation goes through the controller too.
        delivered.clear()
        for i in range(10):
            p.produce("auto-created", value=b"x", on_delivery=report)
        p.flush(20)
        check(len(delivered) == 10 and not failed,
              "producing to a new topic auto-creates it through the controller")

        # ---- the followers replicate ----
        diff = replicated(brokers, "rf3", {q: leaders[q] for q in range(3)})
        check(not diff, f"the followers of rf3 hold byte-identical copies of the leaders' "
                        f"segments ({diff or 'all equal'})")

        # ---- a non-leader refuses ----
        leader0 = leaders[0]
        other = next(b for b in BROKERS if b != leader0)
        conn = kproto.Conn("127.0.0.1", brokers[other].port)
        conn.send(kp.encode_request(2, 7, 1, "cluster-test", {
            "ReplicaId": -1, "Topics": [{"Name": "rf3", "Partitions": [
                {"PartitionIndex": 0, "Timestamp": -1}]}]}))
        _, lo = kp.decode_response(2, 7, conn.recv(10))
        code = lo["Topics"][0]["Partitions"][0]["ErrorCode"]
        check(code == NOT_LEADER, f"ListOffsets to non-leader {other} gets "
                                  f"NOT_LEADER_OR_FOLLOWER ({code})")
        topic_id = metadata_topic_id(kp, conn, "rf3")

        def consumer_fetch(c, tid: str) -> tuple[dict, dict]:
            c.send(kp.encode_request(1, 16, 2, "cluster-test", {
                "MaxWaitMs": 0, "MinBytes": 1, "SessionEpoch": -1, "Topics": [{
                    "TopicId": tid, "Partitions": [
                        {"Partition": 0, "FetchOffset": 0, "PartitionMaxBytes": 65536}]}]}))
            _, fr = kp.decode_response(1, 16, c.recv(10))
            return fr, fr["Responses"][0]["Partitions"][0]

        # KIP-392: a consumer's Fetch v11+ is served by a follower too, up to its HW.
        _, part = consumer_fetch(conn, topic_id)
        check(part["ErrorCode"] == 0 and part["Records"] and part["HighWatermark"] == 100,
              f"a consumer's Fetch v16 to follower {other} is served by it "
              f"({part['ErrorCode']}, HW {part['HighWatermark']})")
        conn.close()
        # A broker with no replica answers NOT_LEADER_OR_FOLLOWER and the way to the leader
        # ("auto-created" has default.replication.factor=1).
        t_auto = topic_md(admin, "auto-created", 1).partitions[0]
        no_replica = next(b for b in BROKERS if b not in t_auto.replicas)
        conn = kproto.Conn("127.0.0.1", brokers[no_replica].port)
        fr, part = consumer_fetch(conn, metadata_topic_id(kp, conn, "auto-created"))
        cur = part["CurrentLeader"]
        eps = {e["NodeId"]: e["Port"] for e in fr["NodeEndpoints"]}
        check(part["ErrorCode"] == NOT_LEADER and cur["LeaderId"] == t_auto.leader and
              eps.get(t_auto.leader) == brokers[t_auto.leader].port,
              f"Fetch v16 to broker {no_replica}, no replica, gets NOT_LEADER_OR_FOLLOWER with "
              f"leader {t_auto.leader} and its endpoint ({part['ErrorCode']}, {cur}, {eps})")
        conn.close()

        # ---- a follower's Fetch to the leader (ReplicaState, Fetch v16) ----
        # The leader's ReplicaState answers it: the follower's offset counts, a tail the
        # leader's log does not have gets the diverging epoch, a broker that is no replica
        # is refused.
        epoch0 = leader_epoch(kp, brokers, "rf3", 0)
        conn = kproto.Conn("127.0.0.1", brokers[leader0].port)

        def follower_fetch(replica: int, offset: int, last_epoch: int) -> dict:
            conn.send(kp.encode_request(1, 16, 3, "cluster-test", {
                "ReplicaState": {"ReplicaId": replica, "ReplicaEpoch": -1},
                "MaxWaitMs": 0, "MinBytes": 1, "SessionEpoch": -1, "Topics": [{
                    "TopicId": topic_id, "Partitions": [{
                        "Partition": 0, "CurrentLeaderEpoch": epoch0, "FetchOffset": offset,
                        "LastFetchedEpoch": last_epoch, "PartitionMaxBytes": 1 << 20}]}]}))
            _, r = kp.decode_response(1, 16, conn.recv(10))
            return r["Responses"][0]["Partitions"][0]

        def batches(part: dict) -> int:
            return len((part["Records"] or {}).get("batches", []))

        first = follower_fetch(other, 0, -1)
        hw0 = first["HighWatermark"]
        check(first["ErrorCode"] == 0 and batches(first) > 0 and hw0 == 100,
              f"a follower's Fetch from offset 0 gets records and the HW 100 ({first['ErrorCode']}, "
              f"{hw0}, {batches(first)} batches)")
        ahead = follower_fetch(other, hw0 + 10, epoch0)
        div = ahead["DivergingEpoch"]
        check(ahead["ErrorCode"] == 0 and div["Epoch"] == epoch0 and div["EndOffset"] == hw0 and
              batches(ahead) == 0,
              f"a follower ahead of the leader in its epoch gets the diverging epoch "
              f"{{{epoch0}, {hw0}}} and no records ({ahead['ErrorCode']}, {div})")
        stranger = follower_fetch(99, 0, -1)
        check(stranger["ErrorCode"] == NOT_LEADER,
              f"a Fetch from broker 99, no replica, gets NOT_LEADER_OR_FOLLOWER "
              f"({stranger['ErrorCode']})")
        conn.close()

        # ---- kill -9 of a leader ----
        failovers = []
        rebalanced = []
        for cycle in range(a.cycles):
            name = f"failover-{cycle}"
            admin.create_topics([NewTopic(name, num_partitions=3, replication_factor=3)])[
                name].result(timeout=10)
            before = {q.id: (q.leader, leader_epoch(kp, brokers, name, q.id))
                      for q in topic_md(admin, name, 3).partitions.values()}
            victim = before[cycle % 3][0]
            survivors = [b for b in BROKERS if b != victim]
            # acks=all: acknowledged once every ISR member synced them, so the leader is killed
            # the moment the last acknowledgement arrives, without waiting for anything else.
            delivered.clear()
            failed.clear()
            for i in range(60):
                p.produce(name, value=f"before-{i}".encode(), partition=i % 3,
                          on_delivery=report)
            p.flush(20)
            check(len(delivered) == 60 and not failed,
                  f"cycle {cycle}: 60 records produced before the kill ({len(failed)} failed)")
            via = AdminClient({"bootstrap.servers": f"127.0.0.1:{brokers[survivors[0]].port}"})
            brokers[victim].kill9()
            killed = time.time()
            moved_at = None
            while time.time() - killed < 5:
                try:
                    md = metadata(via, 1.0)
                except Exception:
                    continue
                if name not in md.topics:
                    continue
                parts = md.topics[name].partitions
                if victim not in md.brokers and all(
                        parts[q].leader not in (victim, -1) for q in before):
                    moved_at = time.time()
                    break
                time.sleep(0.01)
            check(moved_at is not None,
                  f"cycle {cycle}: broker {victim} gone and its leaderships moved")
            elapsed = moved_at - killed
            failovers.append(elapsed)
            log(f"cycle {cycle}: kill -9 of broker {victim} -> new leaders visible in "
                f"{elapsed * 1000:.0f} ms")
            check(elapsed <= 2.0, f"cycle {cycle}: failover within 2 s ({elapsed:.2f}s)")
            for q, (old_leader, old_epoch) in before.items():
                if old_leader != victim:
                    continue
                new_epoch = leader_epoch(kp, brokers, name, q, only=survivors)
                check(new_epoch == old_epoch + 1,
                      f"cycle {cycle}: partition {q} leader epoch {old_epoch} -> {new_epoch}")
            # Produce through the new leaders.
            delivered.clear()
            failed.clear()
            for i in range(30):
                p.produce(name, value=b"after", partition=i % 3, on_delivery=report)
            p.flush(20)
            check(len(delivered) == 30 and not failed,
                  f"cycle {cycle}: produce through the new leaders ({len(failed)} failed)")
            got = consume_all(",".join(f"127.0.0.1:{brokers[b].port}" for b in survivors), name,
                              3, 90)
            check(sorted(got) == sorted([f"before-{i}" for i in range(60)] + ["after"] * 30),
                  f"cycle {cycle}: the new leaders serve the 60 records from before the kill "
                  f"and the 30 after ({len(got)} read)")
            # Restart: it registers again (a new incarnation) and comes back.
            brokers[victim].start()
            back = time.time()
            while victim not in live_brokers(via) and time.time() - back < 15:
                time.sleep(0.05)
            check(victim in live_brokers(via),
                  f"cycle {cycle}: broker {victim} is back in Metadata after "
                  f"{time.time() - back:.2f}s")
            # The restarted replica follows the new leaders: its copies become byte-identical
            # to theirs (the leaders' batches at the leaders' offsets, nothing re-assigned).
            now_leaders = {q.id: q.leader for q in topic_md(via, name, 3).partitions.values()}
            diff = replicated(brokers, name, now_leaders, timeout=10)
            check(not diff, f"cycle {cycle}: every replica holds its leader's bytes "
                            f"({diff or 'all equal'})")
            # auto.leader.rebalance.enable (checked every second here): once back in the ISR,
            # the restarted broker leads its preferred partitions again.
            t_back = time.time()
            while time.time() - t_back < 10:
                parts = topic_md(via, name, 3).partitions.values()
                if all(q.leader == q.replicas[0] for q in parts):
                    break
                time.sleep(0.05)
            check(all(q.leader == q.replicas[0] for q in topic_md(via, name, 3).partitions.values()),
                  f"cycle {cycle}: leaderships back on the preferred replicas after "
                  f"{time.time() - t_back:.2f}s")
            rebalanced.append(time.time() - t_back)
            # ElectLeaders through a broker (forwarded): nothing left to elect, and an unknown
            # partition named.
            c2 = kproto.Conn("127.0.0.1", brokers[survivors[0]].port)
            c2.send(kp.encode_request(43, 2, 5, "cluster-test", {
                "ElectionType": 0, "TimeoutMs": 10000,
                "TopicPartitions": [{"Topic": name, "Partitions": [0, 1, 2, 7]}]}))
            _, el = kp.decode_response(43, 2, c2.recv(10))
            c2.close()
            codes = {r["PartitionId"]: r["ErrorCode"]
                     for t in el["ReplicaElectionResults"] for r in t["PartitionResult"]}
            check(el["ErrorCode"] == 0 and codes == {0: 84, 1: 84, 2: 84, 7: 3},
                  f"cycle {cycle}: ElectLeaders answers ELECTION_NOT_NEEDED for balanced "
                  f"partitions and UNKNOWN_TOPIC_OR_PARTITION for partition 7 ({codes})")
        p.flush(5)

        # ---- the ISR: a stalled follower leaves it (acks=all then refused below
        # min.insync.replicas) and rejoins through the leader's AlterPartition ----
        name = "isr"
        admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=3,
                                      config={"min.insync.replicas": "3"})])[name].result(
            timeout=10)
        leader = topic_md(admin, name, 1).partitions[0].leader
        stalled = next(b for b in BROKERS if b != leader)
        strict = Producer({"bootstrap.servers": f"127.0.0.1:{brokers[leader].port}",
                           "acks": "all", "retries": 0,
                           "linger.ms": 0})
        outcome = []
        strict.produce(name, value=b"all-three", partition=0,
                       on_delivery=lambda err, msg: outcome.append(err))
        strict.flush(10)
        check(outcome == [None], f"acks=all with the 3 replicas in sync: {outcome}")

        def isr_of() -> list[int]:
            # Raw Metadata from the leader: a client might ask the stalled broker and wait.
            c = kproto.Conn("127.0.0.1", brokers[leader].port)
            try:
                c.send(kp.encode_request(3, 12, 7, "cluster-test", {
                    "Topics": [{"Name": name}], "AllowAutoTopicCreation": False}))
                _, md = kp.decode_response(3, 12, c.recv(5))
                return sorted(md["Topics"][0]["Partitions"][0]["IsrNodes"])
            finally:
                c.close()

        brokers[stalled].proc.send_signal(signal.SIGSTOP)
        stopped = time.time()
        while stalled in isr_of() and time.time() - stopped < 10:
            time.sleep(0.02)
        shrink = time.time() - stopped
        check(stalled not in isr_of(), f"stalled broker {stalled} left the ISR of {name}-0")
        gauges = prometheus(brokers[leader])
        check(gauges.get("samsa_under_replicated_partitions", 0) >= 1 and
              gauges.get("samsa_under_min_isr_partitions", 0) >= 1 and
              gauges.get("samsa_offline_partitions") == 0,
              f"the leader's metrics show it: under-replicated "
              f"{gauges.get('samsa_under_replicated_partitions')}, under min ISR "
              f"{gauges.get('samsa_under_min_isr_partitions')}, offline "
              f"{gauges.get('samsa_offline_partitions')}")
        outcome.clear()
        strict.produce(name, value=b"two-of-three", partition=0,
                       on_delivery=lambda err, msg: outcome.append(err))
        strict.flush(10)
        check(len(outcome) == 1 and outcome[0] is not None and outcome[0].code() == 19,
              f"acks=all below min.insync.replicas=3 gets NOT_ENOUGH_REPLICAS ({outcome})")
        brokers[stalled].proc.send_signal(signal.SIGCONT)
        resumed = time.time()
        while isr_of() != list(BROKERS) and time.time() - resumed < 15:
            time.sleep(0.02)
        rejoin = time.time() - resumed
        check(isr_of() == list(BROKERS), f"broker {stalled} rejoined the ISR ({isr_of()})")
        with open(brokers[leader].log_path) as f:
            text = f.read()
        check(f"ISR of {name}-0 is now 3 of its replicas" in text,
              f"the leader {leader} grew the ISR through AlterPartition")
        gauges = prometheus(brokers[leader])
        check(gauges.get("samsa_isr_expands_total", 0) >= 1 and
              gauges.get("samsa_under_min_isr_partitions") == 0,
              f"... and counted it (ISR expands {gauges.get('samsa_isr_expands_total')}, "
              f"under min ISR {gauges.get('samsa_under_min_isr_partitions')})")
        how = ("AlterPartition" if f"ISR of {name}-0 is now 2 of its replicas" in text
               else "fencing")
        log(f"stalled follower out of the ISR in {shrink * 1000:.0f} ms (by {how}), back "
            f"{rejoin * 1000:.0f} ms after it resumed")
        outcome.clear()
        strict.produce(name, value=b"all-three-again", partition=0,
                       on_delivery=lambda err, msg: outcome.append(err))
        strict.flush(10)
        check(outcome == [None], f"acks=all accepted again once the ISR is whole: {outcome}")
        del strict

        # ---- controlled shutdown: SIGTERM moves the leaderships before the broker stops ----
        name = "graceful"
        admin.create_topics([NewTopic(name, num_partitions=3, replication_factor=3)])[
            name].result(timeout=10)
        before = {q.id: (q.leader, leader_epoch(kp, brokers, name, q.id))
                  for q in topic_md(admin, name, 3).partitions.values()}
        victim = before[0][0]
        survivors = [b for b in BROKERS if b != victim]
        via = AdminClient({"bootstrap.servers": f"127.0.0.1:{brokers[survivors[0]].port}"})
        metadata(via)
        brokers[victim].proc.send_signal(signal.SIGTERM)
        termed = time.time()
        moved_at = None
        while time.time() - termed < 5 and moved_at is None:
            try:
                md = metadata(via, 1.0)
                parts = md.topics[name].partitions
                if victim not in md.brokers and all(
                        parts[q].leader not in (victim, -1) for q in before):
                    moved_at = time.time()
            except Exception:
                pass
        rc = brokers[victim].proc.wait(timeout=20)
        check(rc == 0 and moved_at is not None,
              f"SIGTERM of broker {victim}: clean stop and its leaderships moved")
        graceful = moved_at - termed
        check(graceful < 1.0, f"controlled shutdown moved them in {graceful * 1000:.0f} ms, "
                              f"not after the 1.5 s session timeout")
        check("controlled shutdown: leaderships moved" in brokers[victim].tail(60),
              f"broker {victim} logged its controlled shutdown")
        for q, (old_leader, old_epoch) in before.items():
            if old_leader == victim:
                check(leader_epoch(kp, brokers, name, q, only=survivors) == old_epoch + 1,
                      f"partition {q} of {name}: leader epoch bumped")
        brokers[victim].start()
        back = time.time()
        while victim not in live_brokers(via) and time.time() - back < 15:
            time.sleep(0.05)
        check(victim in live_brokers(via), f"broker {victim} is back after its restart")

        # ---- forwarded changes: CreatePartitions and DeleteTopics through a broker ----
        from confluent_kafka.admin import NewPartitions
        admin.create_partitions([NewPartitions("rf3", 5)])["rf3"].result(timeout=10)
        parts = topic_md(admin, "rf3", 5).partitions
        check(len(parts) == 5 and all(len(parts[q].replicas) == 3 for q in parts),
              "CreatePartitions through a broker: rf3 has 5 partitions of 3 replicas")
        admin.delete_topics(["rf3"])["rf3"].result(timeout=10)
        for b, n in brokers.items():
            one = AdminClient({"bootstrap.servers": f"127.0.0.1:{n.port}"})
            end = time.time() + 2
            while "rf3" in metadata(one).topics and time.time() < end:
                time.sleep(0.05)
            check("rf3" not in metadata(one).topics,
                  f"DeleteTopics through a broker: broker {b} forgot rf3")

        unfenced = [ms for n in brokers.values() for ms in n.unfenced_ms()]
        log(f"failover (kill -9 -> new leaders in Metadata), ms: "
            f"{[round(x * 1000) for x in failovers]}; median "
            f"{statistics.median(failovers) * 1000:.0f}, max {max(failovers) * 1000:.0f}")
        if unfenced:
            log(f"registration -> unfenced, ms: {unfenced}; median "
                f"{statistics.median(unfenced):.0f}")
        log(f"controlled shutdown (SIGTERM -> new leaders in Metadata): {graceful * 1000:.0f} ms")
        log(f"restart -> preferred leaders again (auto rebalance), s: "
            f"{[round(x, 2) for x in rebalanced]}")
        # The idempotent producer stays open while the nodes stop, controller first: a
        # request it leaves waiting on a forward to the stopped controller must not hold a
        # broker's stop (the cluster link gives such forwards up at once when stopping).
        t_stop = time.time()
        rcs = {n.id: n.stop() for n in nodes}
        log(f"the 4 nodes stopped in {time.time() - t_stop:.1f} s")
        del p
        check(all(rc == 0 for rc in rcs.values()), f"every node stops cleanly on SIGTERM {rcs}")
        ok = True
        return 0
    except AssertionError as e:
        log(f"FAIL: {e}")
        return 1
    finally:
        for n in nodes:
            if n.proc and n.proc.poll() is None:
                n.proc.kill()
                n.proc.wait()
        if not ok:
            for n in nodes:
                log(f"--- node {n.id} log (tail) ---\n{n.tail()}")
        if a.keep or not ok:
            log(f"data and logs kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


def segment_bytes(node, topic: str, partition: int) -> bytes:
    path = os.path.join(node.dir, "data", f"{topic}-{partition}", "00000000000000000000.log")
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def replicated(brokers, topic: str, leaders: dict[int, int], timeout: float = 5.0) -> str:
    """Waits until every follower's first segment of each partition is byte-identical to its
    leader's (the fetchers append the leader's batches at the leader's offsets, unchanged);
    returns "" then, else what still differs."""
    end = time.time() + timeout
    while True:
        diff = []
        for q, leader in leaders.items():
            want = segment_bytes(brokers[leader], topic, q)
            for b in brokers:
                if b != leader and segment_bytes(brokers[b], topic, q) != want:
                    diff.append(f"{topic}-{q} on {b}: {len(segment_bytes(brokers[b], topic, q))}"
                                f" of {len(want)} bytes")
        if not diff or time.time() > end:
            return "; ".join(diff)
        time.sleep(0.05)


def consume_all(bootstrap: str, topic: str, partitions: int, want: int,
                timeout: float = 20.0) -> list[str]:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, i, 0) for i in range(partitions)])
    got = []
    end = time.time() + timeout
    while len(got) < want and time.time() < end:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append(m.value().decode())
    c.close()
    return got


if __name__ == "__main__":
    sys.exit(main())
