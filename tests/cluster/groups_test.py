#!/usr/bin/env python3
"""Consumer groups on a samsa cluster: 1 controller and 3 brokers on loopback (the Node harness
of cluster_test.py), __consumer_offsets with 3 partitions of 3 replicas, and real consumers
(confluent-kafka / librdkafka) plus raw requests (tests/clients/kproto.py).

  groups_test.py --samsad PATH [--keep]

Checks:
- __consumer_offsets is created through the controller with 3 replicas per partition;
- FindCoordinator (v3, one key; v4, a batch) answers, for each group, the leader of the group's
  __consumer_offsets partition with that broker's port; OffsetFetch and Heartbeat sent to
  another broker get NOT_COORDINATOR;
- two consumers in one group share a 6-partition RF=3 topic and commit synchronously;
- right after the commits are acknowledged, kill -9 of the broker that coordinates it: the
  coordinator moves to the new leader of the group's offsets partition (FindCoordinator through
  a survivor answers it; the time from the kill is printed), OffsetFetch there returns every
  offset committed before the kill, the consumers go on consuming new records without reading
  the old ones again, and a third consumer joining rebalances the group on the new coordinator;
- the new coordinator stopped (SIGSTOP) past the session timeout: the next leader takes the
  group over with the same offsets, and the stopped broker, once running again, has unloaded
  the partition and answers NOT_COORDINATOR; the group goes on consuming;
- throughout, no partition is ever assigned to two members at once, and every record a consumer
  gets comes from a partition assigned to it then; at the end the committed offsets are the
  topic's end offsets.

Exit 77 (skip) when confluent-kafka is missing, except under CI=true where that fails.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_harness import (BROKERS, check, log, loopback_cluster, metadata,  # noqa: E402
                             skip_or_fail)

import kproto  # noqa: E402  (cluster_test put tests/clients on the path)

OFFSETS_PARTITIONS = 3
TOPIC = "work"
TOPIC_PARTITIONS = 6
GROUP = "orders"
NOT_COORDINATOR = 16
RETRIABLE_GROUP_ERRORS = (14, 15, 16)  # LOAD_IN_PROGRESS, NOT_AVAILABLE, NOT_COORDINATOR


def partition_for(group: str, partitions: int) -> int:
    """Kafka's choice: abs(String.hashCode) % partitions, abs(Integer.MIN_VALUE) taken as 0."""
    h = 0
    data = group.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    if h >= 1 << 31:
        h -= 1 << 32
    return 0 if h == -(1 << 31) else abs(h) % partitions


class Raw:
    """Blocking raw requests to one broker at a time (kproto)."""

    def __init__(self, brokers: dict):
        self.kp = kproto.Kafka()
        self.brokers = brokers
        self.corr = 0

    def call(self, broker: int, key: int, version: int, body: dict, timeout: float = 5.0):
        conn = kproto.Conn("127.0.0.1", self.brokers[broker].port, timeout=timeout)
        try:
            self.corr += 1
            conn.send(self.kp.encode_request(key, version, self.corr, "groups-test", body))
            return self.kp.decode_response(key, version, conn.recv(timeout))[1]
        finally:
            conn.close()

    def find_coordinator(self, via: int, group: str) -> tuple[int, int, int]:
        """(error, node id, port) from FindCoordinator v3."""
        r = self.call(via, 10, 3, {"Key": group, "KeyType": 0})
        return r["ErrorCode"], r["NodeId"], r["Port"]

    def find_coordinators(self, via: int, groups: list[str]) -> dict[str, tuple[int, int, int]]:
        r = self.call(via, 10, 4, {"KeyType": 0, "CoordinatorKeys": groups})
        return {c["Key"]: (c["ErrorCode"], c["NodeId"], c["Port"]) for c in r["Coordinators"]}

    def offset_fetch(self, via: int, group: str) -> tuple[int, dict[int, int]]:
        """(group error, {partition: committed offset}) from OffsetFetch v8."""
        r = self.call(via, 9, 8, {"Groups": [{"GroupId": group, "Topics": [
            {"Name": TOPIC, "PartitionIndexes": list(range(TOPIC_PARTITIONS))}]}]})
        g = r["Groups"][0]
        offsets = {}
        for t in g["Topics"] or []:
            for p in t["Partitions"]:
                offsets[p["PartitionIndex"]] = p["CommittedOffset"]
        return g["ErrorCode"], offsets

    def offsets_leaders(self, via: int) -> dict[int, tuple[int, list[int], int]]:
        """{partition: (leader, replicas, leader epoch)} of __consumer_offsets (Metadata v12)."""
        r = self.call(via, 3, 12, {"Topics": [{"Name": "__consumer_offsets"}],
                                   "AllowAutoTopicCreation": False})
        t = r["Topics"][0]
        if t["ErrorCode"] != 0:
            return {}
        return {p["PartitionIndex"]: (p["LeaderId"], p["ReplicaNodes"], p["LeaderEpoch"])
                for p in t["Partitions"]}


class Members:
    """Consumers of one group, polled in turn from this thread, with every assignment change and
    record they see checked: no partition is ever held by two members at once, and a record
    comes only from a partition its consumer holds."""

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap
        self.consumers: dict[str, object] = {}
        self.assigned: dict[str, set[int]] = {}
        self.violations: list[str] = []
        self.got: dict[str, list[str]] = {}  # member -> values in order
        self.seen: list[str] = []  # every value, in the order received
        self.rebalances = 0
        self.commit_errors: list[str] = []

    def add(self, name: str):
        from confluent_kafka import Consumer
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": GROUP,
                      "client.id": name, "enable.auto.commit": False,
                      "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                      "heartbeat.interval.ms": 500, "topic.metadata.refresh.interval.ms": 1000})
        self.assigned[name] = set()
        self.got[name] = []

        def on_assign(consumer, parts):
            mine = {p.partition for p in parts}
            for other, theirs in self.assigned.items():
                if other != name and mine & theirs:
                    self.violations.append(f"{name} assigned {sorted(mine & theirs)} still held "
                                           f"by {other}")
            self.assigned[name] = mine
            self.rebalances += 1

        def on_revoke(consumer, parts):
            self.assigned[name] = set()

        c.subscribe([TOPIC], on_assign=on_assign, on_revoke=on_revoke)
        self.consumers[name] = c

    def poll_round(self, timeout: float = 0.05) -> int:
        n = 0
        for name, c in self.consumers.items():
            m = c.poll(timeout)
            if m is None or m.error():
                continue
            if m.partition() not in self.assigned[name]:
                self.violations.append(f"{name} got a record of partition {m.partition()} while "
                                       f"assigned {sorted(self.assigned[name])}")
            self.got[name].append(m.value().decode())
            self.seen.append(m.value().decode())
            n += 1
        return n

    def commit_all(self):
        for name, c in self.consumers.items():
            if not self.assigned[name]:
                continue
            try:
                c.commit(asynchronous=False)
            except Exception as e:  # KafkaException: nothing consumed yet, or a retriable error
                if "_NO_OFFSET" not in str(e):
                    self.commit_errors.append(f"{name}: {e}")

    def values(self) -> list[str]:
        return self.seen

    def consume_until(self, want: set[str], timeout: float) -> bool:
        """Polls (committing every round that got records) until every value in want was seen."""
        end = time.time() + timeout
        while time.time() < end:
            if self.poll_round() > 0:
                self.commit_all()
            elif want <= set(self.values()):
                self.commit_all()
                return True
        return want <= set(self.values())

    def close(self):
        for c in self.consumers.values():
            c.close()
        self.consumers.clear()


def produce(p, prefix: str, n: int):
    delivered, failed = [], []

    def report(err, msg):
        (failed if err else delivered).append(msg)

    for i in range(n):
        p.produce(TOPIC, value=f"{prefix}-{i}".encode(), partition=i % TOPIC_PARTITIONS,
                  on_delivery=report)
    p.flush(30)
    return len(delivered), len(failed)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samsad", required=True)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    try:
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient, NewTopic
    except ImportError:
        return skip_or_fail(log, "confluent-kafka is missing (python3-confluent-kafka)", "the test")

    root = tempfile.mkdtemp(prefix="samsa-groups-")
    controller, brokers = loopback_cluster(
        a.samsad, root, common={"samsa.reactors": "1",
                                "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
                                "offsets.topic.replication.factor": "3",
                                "group.initial.rebalance.delay.ms": "0"})
    nodes = [controller] + list(brokers.values())
    members = None
    ok = False
    try:
        controller.start()
        controller.wait_listening()
        # One broker first: __consumer_offsets waits for 3 live brokers, and says so once.
        brokers[1].start()
        brokers[1].wait_listening()
        raw = Raw(brokers)
        waiting = "consumer groups wait until enough brokers have joined"
        end = time.time() + 5
        while waiting not in brokers[1].tail(200) and time.time() < end:
            time.sleep(0.05)
        check(brokers[1].tail(200).count(waiting) == 1,
              "with 1 of 3 brokers up, the broker says __consumer_offsets waits for 3")
        err, _, _ = raw.find_coordinator(1, GROUP)
        check(err == 15, f"FindCoordinator meanwhile: COORDINATOR_NOT_AVAILABLE ({err})")
        for b in BROKERS[1:]:
            brokers[b].start()
        for b in BROKERS[1:]:
            brokers[b].wait_listening()
        t_all = time.time()

        # ---- __consumer_offsets through the controller, RF 3 ----
        leaders = {}
        end = time.time() + 20
        while time.time() < end:
            leaders = raw.offsets_leaders(1)
            if len(leaders) == OFFSETS_PARTITIONS and all(ld >= 0 for ld, _, _ in
                                                          leaders.values()):
                break
            time.sleep(0.05)
        check(len(leaders) == OFFSETS_PARTITIONS and
              all(sorted(r) == list(BROKERS) for _, r, _ in leaders.values()),
              f"__consumer_offsets: {OFFSETS_PARTITIONS} partitions of 3 replicas "
              f"({time.time() - t_all:.2f}s after the 3 brokers started): {leaders}")
        check(sum("created __consumer_offsets" in n.tail(400) for n in brokers.values()) == 1,
              "one broker created it; the others found it there")

        # ---- FindCoordinator answers the leader of the group's offsets partition ----
        groups = [GROUP] + [f"other-{i}" for i in range(8)]
        want = {g: leaders[partition_for(g, OFFSETS_PARTITIONS)][0] for g in groups}
        coordinator = want[GROUP]
        end = time.time() + 10
        while True:
            answers = {b: raw.find_coordinators(b, groups) for b in BROKERS}
            single = {b: raw.find_coordinator(b, GROUP) for b in BROKERS}
            good = all(answers[b][g] == (0, want[g], brokers[want[g]].port)
                       for b in BROKERS for g in groups) and \
                all(single[b] == (0, coordinator, brokers[coordinator].port) for b in BROKERS)
            if good or time.time() > end:
                break
            time.sleep(0.05)
        check(good, f"FindCoordinator v3 and v4 through every broker answer each group's offsets "
                    f"partition leader ({len(set(want.values()))} distinct coordinators for "
                    f"{len(groups)} groups): {single}")
        other = next(b for b in BROKERS if b != coordinator)
        err, _ = raw.offset_fetch(other, GROUP)
        check(err == NOT_COORDINATOR, f"OffsetFetch to broker {other}, not the coordinator: "
                                      f"NOT_COORDINATOR ({err})")
        hb = raw.call(other, 12, 3, {"GroupId": GROUP, "GenerationId": 1, "MemberId": "m"})
        check(hb["ErrorCode"] == NOT_COORDINATOR,
              f"Heartbeat to broker {other}: NOT_COORDINATOR ({hb['ErrorCode']})")

        # ---- two consumers share a topic and commit ----
        bootstrap = ",".join(f"127.0.0.1:{n.port}" for n in brokers.values())
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, num_partitions=TOPIC_PARTITIONS,
                                      replication_factor=3)])[TOPIC].result(timeout=10)
        end = time.time() + 5
        while TOPIC not in metadata(admin).topics and time.time() < end:
            time.sleep(0.05)
        members = Members(bootstrap)
        members.add("c1")
        members.add("c2")
        t_join = time.time()
        end = time.time() + 30
        while time.time() < end and not (members.assigned["c1"] and members.assigned["c2"]):
            members.poll_round()
        check(members.assigned["c1"] and members.assigned["c2"] and
              sorted(members.assigned["c1"] | members.assigned["c2"]) ==
              list(range(TOPIC_PARTITIONS)),
              f"the two consumers share the {TOPIC_PARTITIONS} partitions "
              f"({time.time() - t_join:.2f}s): {members.assigned}")
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        n_ok, n_failed = produce(p, "a", 600)
        check(n_ok == 600 and n_failed == 0, f"600 records produced ({n_failed} failed)")
        first = {f"a-{i}" for i in range(600)}
        check(members.consume_until(first, 60),
              f"the two consumers got the 600 records ({len(set(members.values()))} distinct)")
        per_partition = 600 // TOPIC_PARTITIONS
        expected = {q: per_partition for q in range(TOPIC_PARTITIONS)}
        end = time.time() + 20
        while True:
            members.poll_round(0.02)
            members.commit_all()
            err, committed = raw.offset_fetch(coordinator, GROUP)
            if (err == 0 and committed == expected) or time.time() > end:
                break
        check(err == 0 and committed == expected,
              f"committed before the kill: {committed} (error {err})")
        # A commit is acknowledged once the ISR holds it (the HW passed it): the coordinator is
        # killed right away, with no wait for the followers.
        gp = partition_for(GROUP, OFFSETS_PARTITIONS)

        # ---- kill -9 of the coordinator ----
        survivors = [b for b in BROKERS if b != coordinator]
        via = survivors[0]
        epoch_before = leaders[gp][2]
        brokers[coordinator].kill9()
        killed = time.time()
        moved = None
        answer = None
        while time.time() - killed < 15:
            members.poll_round(0)
            try:
                answer = raw.find_coordinator(via, GROUP)
            except (OSError, kproto.Closed):
                answer = None
            if answer and answer[0] == 0 and answer[1] in survivors:
                moved = time.time() - killed
                break
            time.sleep(0.01)
        check(moved is not None, f"FindCoordinator through broker {via} names a survivor "
                                 f"({answer})")
        new_coordinator = answer[1]
        log(f"coordinator failover: kill -9 of broker {coordinator} -> FindCoordinator answers "
            f"broker {new_coordinator} after {moved * 1000:.0f} ms")
        now = raw.offsets_leaders(via)
        check(now[gp][0] == new_coordinator and now[gp][2] > epoch_before,
              f"the new coordinator leads __consumer_offsets-{gp} (leader {now[gp][0]}, epoch "
              f"{epoch_before} -> {now[gp][2]})")
        end = time.time() + 15
        while True:
            members.poll_round(0.02)
            err, after = raw.offset_fetch(new_coordinator, GROUP)
            if err not in RETRIABLE_GROUP_ERRORS or time.time() > end:
                break
        loaded_at = time.time() - killed
        check(err == 0 and after == expected,
              f"OffsetFetch from broker {new_coordinator} returns what was committed before the "
              f"kill ({after}, error {err}; {loaded_at * 1000:.0f} ms after the kill)")
        other = next(b for b in survivors if b != new_coordinator)
        err, _ = raw.offset_fetch(other, GROUP)
        check(err == NOT_COORDINATOR, f"broker {other} still answers NOT_COORDINATOR ({err})")

        # ---- the consumers go on, from the committed offsets ----
        before_b = len(members.values())
        check(sorted(members.values()) == sorted(first),
              f"each record from before the kill was read once "
              f"({len(members.values())} read, {len(set(members.values()))} distinct)")
        n_ok, n_failed = produce(p, "b", 600)
        check(n_ok == 600 and n_failed == 0,
              f"600 more records produced through the new leaders ({n_failed} failed)")
        second = {f"b-{i}" for i in range(600)}
        check(members.consume_until(second, 60),
              f"the consumers got the 600 new records "
              f"({len(second & set(members.values()))} of 600)")
        again = [v for v in members.values()[before_b:] if v.startswith("a-")]
        check(not again, f"none of the records committed before the kill was read again "
                         f"({len(again)} were, of partitions "
                         f"{sorted({int(v[2:]) % TOPIC_PARTITIONS for v in again})})")

        # ---- a third member: a rebalance on the new coordinator ----
        rebalances = members.rebalances
        members.add("c3")
        n_ok, n_failed = produce(p, "c", 300)
        check(n_ok == 300 and n_failed == 0, f"300 more records produced ({n_failed} failed)")
        third = {f"c-{i}" for i in range(300)}
        end = time.time() + 60
        while time.time() < end and not (third <= set(members.values()) and
                                         all(members.assigned[m] for m in members.assigned)):
            if members.poll_round() > 0:
                members.commit_all()
        check(third <= set(members.values()), "the 300 records consumed after the third joined")
        sizes = {m: sorted(s) for m, s in members.assigned.items()}
        check(members.rebalances > rebalances and all(sizes.values()) and
              sorted(q for s in sizes.values() for q in s) == list(range(TOPIC_PARTITIONS)),
              f"the group rebalanced over 3 members: {sizes}")
        expected = {q: (600 + 600 + 300) // TOPIC_PARTITIONS for q in range(TOPIC_PARTITIONS)}
        end = time.time() + 20
        while True:
            members.poll_round(0.02)
            members.commit_all()
            err, committed = raw.offset_fetch(new_coordinator, GROUP)
            if (err == 0 and committed == expected) or time.time() > end:
                break
        check(err == 0 and committed == expected, f"the commits are the end offsets "
                                                  f"{committed}")

        # ---- resignation on a live broker: the coordinator is fenced (SIGSTOP beyond the
        # session timeout), leadership moves, and once it runs again it unloads the partition
        # and answers NOT_COORDINATOR ----
        paused = new_coordinator
        last = next(b for b in survivors if b != paused)
        brokers[paused].proc.send_signal(signal.SIGSTOP)
        stopped = time.time()
        answer = None
        while time.time() - stopped < 15:
            members.poll_round(0)
            answer = raw.find_coordinator(last, GROUP)
            if answer[0] == 0 and answer[1] == last:
                break
            time.sleep(0.01)
        handover = time.time() - stopped
        brokers[paused].proc.send_signal(signal.SIGCONT)
        check(answer is not None and answer[1] == last,
              f"broker {paused} stopped: FindCoordinator names broker {last} after "
              f"{handover * 1000:.0f} ms ({answer})")
        unloaded = f"unloaded __consumer_offsets-{gp}"
        end = time.time() + 15
        while time.time() < end:
            members.poll_round(0.02)
            err, _ = raw.offset_fetch(paused, GROUP)
            if err == NOT_COORDINATOR and unloaded in brokers[paused].tail(400):
                break
        check(err == NOT_COORDINATOR and unloaded in brokers[paused].tail(400),
              f"broker {paused}, running again, unloaded the partition and answers "
              f"NOT_COORDINATOR ({err})")
        end = time.time() + 15
        while True:
            members.poll_round(0.02)
            err, committed = raw.offset_fetch(last, GROUP)
            if err not in RETRIABLE_GROUP_ERRORS or time.time() > end:
                break
        check(err == 0 and committed == expected,
              f"broker {last} serves the same offsets ({committed}, error {err})")
        before_d = len(members.values())
        n_ok, n_failed = produce(p, "d", 300)
        check(n_ok == 300 and n_failed == 0, f"300 more records produced ({n_failed} failed)")
        fourth = {f"d-{i}" for i in range(300)}
        check(members.consume_until(fourth, 60), "the group consumed them after the handover")
        again = [v for v in members.values()[before_d:] if not v.startswith("d-")]
        check(not again, f"nothing committed before the handover was read again ({len(again)})")
        expected = {q: (600 + 600 + 300 + 300) // TOPIC_PARTITIONS
                    for q in range(TOPIC_PARTITIONS)}
        end = time.time() + 20
        while True:
            members.poll_round(0.02)
            members.commit_all()
            err, committed = raw.offset_fetch(last, GROUP)
            if (err == 0 and committed == expected) or time.time() > end:
                break
        check(err == 0 and committed == expected, f"the final commits are the end offsets "
                                                  f"{committed}")
        check(not members.violations, f"no partition was held by two members at once, no record "
                                      f"came from a partition not held "
                                      f"({members.violations[:5]})")
        log(f"commit errors seen by the consumers (retried): {members.commit_errors[:5]}")
        log(f"coordinator failover (kill -9 -> FindCoordinator answers the new leader): "
            f"{moved * 1000:.0f} ms; offsets served there {loaded_at * 1000:.0f} ms after the "
            f"kill; SIGSTOP -> FindCoordinator answers the next leader: {handover * 1000:.0f} ms")
        members.close()
        members = None
        del p
        rcs = {n.id: n.stop() for n in nodes if n.id != coordinator}
        check(all(rc == 0 for rc in rcs.values()), f"every running node stops cleanly {rcs}")
        ok = True
        return 0
    except AssertionError as e:
        log(f"FAIL: {e}")
        return 1
    finally:
        if members:
            try:
                members.close()
            except Exception:
                pass
        for n in nodes:
            if n.proc and n.proc.poll() is None:
                n.proc.kill()
                n.proc.wait()
        if not ok:
            for n in nodes:
                log(f"--- node {n.id} log (tail) ---\n{n.tail(60)}")
        if a.keep or not ok:
            log(f"data and logs kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
