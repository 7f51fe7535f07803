#!/usr/bin/env python3
"""The controller quorum on loopback: 3 controllers (controller.quorum.voters) and 3 brokers
that know only the bootstrap servers. Checks, with real clients:

- kafka-metadata-quorum describe --status and --replication (through a broker, which forwards
  DescribeQuorum) name the leader, the three voters and the brokers as observers;
- samsactl quorum on the leader's, a follower controller's and a broker's admin socket names
  the same leader and the three voters (the leader's and the broker's with every replica's
  progress, the broker's own view following that leader);
- kill -9 of the active controller, repeatedly: a new controller commits its first record
  (failover time: kill -> its "active controller" line, median and max printed), a topic
  created after each failover exists afterwards exactly once, and an acks=all producer to an
  existing topic is never held up by a failover (its longest gap between acknowledgements);
- afterwards every controller's metadata log is the same, byte for byte.

CI size: 5 kills; --full: 20.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_harness as ch  # noqa: E402
from admin_harness import kafka_tools_available, tool  # noqa: E402

VOTERS = (100, 101, 102)
BROKERS = (1, 2, 3)
CLUSTER_ID = "q7Xb3pQ9R4uUoVw0ZyLm2A"


class Producer(threading.Thread):
    """acks=all to an existing topic; the longest gap between acknowledgements."""

    def __init__(self, bootstrap: str, topic: str):
        super().__init__(daemon=True)
        from confluent_kafka import Producer as P
        self.p = P({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                    "enable.idempotence": True})
        self.topic, self.stop, self.acked, self.errors = topic, False, 0, 0
        self.last, self.max_gap = None, 0.0

    def on_ack(self, err, _msg):
        if err:
            self.errors += 1
            return
        now = time.monotonic()
        if self.last is not None:
            self.max_gap = max(self.max_gap, now - self.last)
        self.last = now
        self.acked += 1

    def run(self):
        i = 0
        while not self.stop:
            self.p.produce(self.topic, f"v{i}".encode(), on_delivery=self.on_ack)
            i += 1
            self.p.poll(0.002)
        self.p.flush(30)


def samsactl_quorum(samsactl: str, node, *extra: str) -> tuple[int, str]:
    r = subprocess.run([samsactl, "--socket", node.props["samsa.admin.socket"], *extra, "quorum"],
                       capture_output=True, text=True, timeout=30)
    return r.returncode, r.stdout + r.stderr


def check_samsactl_quorum(samsactl: str, controllers, brokers, leader: int):
    """samsactl quorum on the leader, a follower controller and a broker: one leader, three
    voters; the progress table where the leader's answer is (the leader's, forwarded by the
    broker); the broker's own view follows that leader."""
    follower = next(c for v, c in controllers.items() if v != leader)
    broker = next(iter(brokers.values()))
    for what, node in (("leader", controllers[leader]), ("follower controller", follower),
                       ("broker", broker)):
        rc, out = samsactl_quorum(samsactl, node)
        ch.log(f"samsactl quorum on the {what} (node {node.id}):\n" + out)
        ch.check(rc == 0 and re.search(rf"^leader\s+{leader}$", out, re.M) is not None,
                 f"samsactl quorum on the {what} names leader {leader}")
        voters_line = re.search(r"^voters\s+(.*)$", out, re.M)
        ch.check(voters_line is not None and
                 sorted(int(x.split("@")[0]) for x in voters_line.group(1).split(", ")) ==
                 list(VOTERS), f"samsactl quorum on the {what} lists the three voters")
        rc, out = samsactl_quorum(samsactl, node, "--json")
        j = json.loads(out) if rc == 0 else {}
        q = j.get("quorum", {})
        ch.check(q.get("leader_id") == leader and
                 sorted(v["id"] for v in q.get("voters", [])) == list(VOTERS),
                 f"samsactl --json quorum on the {what}: leader and voters")
        if what == "follower controller":
            ch.check("NOT_LEADER_OR_FOLLOWER" in q.get("error", ""),
                     "a follower controller says the progress is the leader's")
            continue
        ch.check(all(v["lag"] is not None and v["last_fetch_ms_ago"] is not None
                     for v in q["voters"]), f"the {what}'s answer has every voter's progress")
        ch.check(sorted(o["id"] for o in q.get("observers", [])) == sorted(BROKERS),
                 f"the {what}'s answer lists the brokers as observers")
        ch.check(len(q.get("nodes", [])) == len(VOTERS), f"the {what}'s answer names the "
                 "voters' endpoints (DescribeQuorum v2 Nodes)")
    rc, out = samsactl_quorum(samsactl, broker, "--json")
    n = json.loads(out)["node"] if rc == 0 else {}
    ch.check(n.get("leader_id") == leader and n.get("voter") is False and
             n.get("log_end_offset", -1) > 0, "the broker's own view follows the leader")


def check_samsactl_replicas(samsactl: str, brokers):
    """samsactl partition describe on each broker shows its replica of q-data-0: one leader
    whose followers have fetched in its epoch, two followers naming it."""
    roles = {}
    for b, node in brokers.items():
        r = subprocess.run([samsactl, "--socket", node.props["samsa.admin.socket"], "--json",
                            "partition", "describe", "q-data:0"], capture_output=True, text=True,
                           timeout=10)
        parts = json.loads(r.stdout)["partitions"] if r.returncode == 0 else []
        roles[b] = parts[0].get("replica", {}) if parts else {}
    leaders = [b for b, rep in roles.items() if rep.get("role") == "leader"]
    ch.log(f"samsactl partition describe q-data:0 per broker: {roles}")
    ch.check(len(leaders) == 1, "samsactl partition describe: one broker leads q-data-0")
    lead = roles[leaders[0]]
    ch.check(sorted(f["id"] for f in lead.get("followers", [])) ==
             sorted(b for b in brokers if b != leaders[0]) and
             all(f["fetch_offset"] >= 0 and 0 <= f["last_fetch_ms_ago"] < 10000
                 for f in lead["followers"]),
             "the leader lists both followers with their fetch offsets and last fetch")
    ch.check(all(rep.get("role") == "follower" and rep.get("leader") == leaders[0]
                 for b, rep in roles.items() if b != leaders[0]),
             "the other two are followers of that leader")
    node = brokers[leaders[0]]
    r = subprocess.run([samsactl, "--socket", node.props["samsa.admin.socket"], "partition",
                        "describe", "q-data:0"], capture_output=True, text=True, timeout=10)
    ch.log(r.stdout)
    ch.check(r.returncode == 0 and "this node's replicas" in r.stdout and "leader" in r.stdout,
             "samsactl partition describe prints the replica's table")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samsad", required=True)
    ap.add_argument("--samsactl", help="also check samsactl quorum on the admin sockets")
    ap.add_argument("--full", action="store_true", help="20 kills instead of 5")
    a = ap.parse_args()
    ch.set_log_prefix("[quorum]")
    why = kafka_tools_available()
    if why:
        return ch.skip_or_fail(ch.log, why, "the test")
    kills = 20 if a.full else 5
    root = tempfile.mkdtemp(prefix="samsa-quorum-")
    ports = {v: ch.free_port() for v in VOTERS}
    voters = ",".join(f"{v}@127.0.0.1:{ports[v]}" for v in VOTERS)
    base = {"controller.listener.names": "CONTROLLER", "samsa.cluster.id": CLUSTER_ID,
            "controller.quorum.bootstrap.servers":
                ",".join(f"127.0.0.1:{ports[v]}" for v in VOTERS),
            "samsa.reactors": "1", "min.insync.replicas": "2"}
    controllers = {v: ch.Node(a.samsad, root, v, dict(base, **{
        "process.roles": "controller", "controller.quorum.voters": voters,
        "listeners": f"CONTROLLER://127.0.0.1:{ports[v]}"})) for v in VOTERS}
    brokers = {b: ch.Node(a.samsad, root, b, dict(base, **{
        "process.roles": "broker",
        "listeners": f"PLAINTEXT://127.0.0.1:{ch.free_port()}"})) for b in BROKERS}
    everyone = list(controllers.values()) + list(brokers.values())
    producer = None
    ok = False
    try:
        for n in everyone:
            n.write_config()
            n.start()
        for n in everyone:
            n.wait_listening()
        leader, epoch = ch.wait_for(lambda: ch.current_leader(controllers)[0] >= 0 and
                                 ch.current_leader(controllers), 20, "a first leader")
        ch.log(f"node {leader} leads epoch {epoch}")
        bootstrap = ",".join(f"{n.host}:{n.port}" for n in brokers.values())
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": bootstrap})
        ch.wait_for(lambda: len(admin.list_topics(timeout=5).brokers) == len(BROKERS), 20,
                 "every broker registered")
        admin.create_topics([NewTopic("q-data", 3, 3)])["q-data"].result(30)
        ch.wait_for(lambda: ch.topic_md(admin, "q-data", 3), 20, "q-data in every broker's image")

        # kafka-metadata-quorum through a broker.
        first = next(iter(brokers.values()))
        rc, out = tool("kafka-metadata-quorum", "--bootstrap-server",
                       f"{first.host}:{first.port}", "describe", "--status")
        ch.log("describe --status:\n" + out)
        ch.check(rc == 0 and re.search(rf"LeaderId:\s+{leader}\b", out) is not None,
                 f"describe --status names leader {leader}")
        ch.check(all(f'"id": {v}' in out.split("CurrentVoters:")[1].split("\n")[0]
                     for v in VOTERS), "describe --status lists the three voters")
        rc, out = tool("kafka-metadata-quorum", "--bootstrap-server",
                       f"{first.host}:{first.port}", "describe", "--replication")
        ch.log("describe --replication:\n" + out)
        rows = {int(l.split()[0]): l.split()[-1] for l in out.splitlines()[1:] if l.strip()}
        ch.check(rc == 0 and rows.get(leader) == "Leader", "--replication: the leader's row")
        ch.check(all(rows.get(v) in ("Leader", "Follower") for v in VOTERS),
                 "--replication: every voter")
        ch.check(all(rows.get(b) == "Observer" for b in BROKERS),
                 "--replication: the brokers are observers")
        if a.samsactl:
            check_samsactl_quorum(a.samsactl, controllers, brokers, leader)

        producer = Producer(bootstrap, "q-data")
        producer.start()
        ch.wait_for(lambda: producer.acked > 100, 20, "the producer's first acknowledgements")
        if a.samsactl:
            check_samsactl_replicas(a.samsactl, brokers)
        failovers = []
        for k in range(kills):
            leader, epoch = ch.current_leader(controllers)
            victim = controllers[leader]
            t_kill = time.time()
            victim.kill9()
            new = ch.wait_for(lambda: [x for x in ch.activations(controllers.values())
                                    if x[2] > epoch and x[0] >= t_kill - 0.5], 20,
                           f"a new active controller after killing {leader}")
            failovers.append(new[0][0] - t_kill)
            ch.log(f"kill {k + 1}: node {leader} (epoch {epoch}) killed; node {new[0][1]} "
                   f"active in epoch {new[0][2]} after {failovers[-1] * 1000:.0f} ms")
            name = f"q-after-{k}"
            admin.create_topics([NewTopic(name, 1, 3)])[name].result(30)
            victim.start(f"restart after kill {k + 1}")
            victim.wait_listening()
            time.sleep(0.5)
        producer.stop = True
        producer.join(60)
        ch.log(f"failover (kill -9 of the active controller -> a new one commits): median "
               f"{statistics.median(failovers) * 1000:.0f} ms, max {max(failovers) * 1000:.0f} "
               f"ms over {len(failovers)} kills")
        ch.log(f"producer: {producer.acked} acknowledged, {producer.errors} errors, longest gap "
               f"between acknowledgements {producer.max_gap * 1000:.0f} ms")
        ch.check(producer.errors == 0, "no produce failed")
        ch.check(producer.max_gap < 1.0, "produce never paused for a controller failover")
        names = [t for t in admin.list_topics(timeout=10).topics if t.startswith("q-after-")]
        ch.check(sorted(names) == sorted(f"q-after-{k}" for k in range(kills)),
                 "every topic created between the failovers exists, once")
        # Every controller holds the same log once all have caught up.
        ch.wait_identical_metadata_logs(list(controllers.values()), 20)
        ok = True
    finally:
        if producer:
            producer.stop = True
        ch.teardown(everyone, root, ok)
    ch.log("PASS")
    return 0


if __name__ == "__main__":
    ch.run_main(main)
