#!/usr/bin/python3
"""The acceptance test of issue 23: partition reassignment under load and a broker fault.

1 controller and 4 brokers, each samsad in its own network namespace with its data directory on
powerfs (the fault test's machinery: fault_net.py, fault_cluster.py, fault_load.py). Topic
`reassign`: 12 partitions, replication factor 3, min.insync.replicas=2, placed by explicit
assignment on brokers 1-3 only. The fault test's idempotent acks=all producers (two librdkafka,
one Java client) and a consumer in a consumer group run throughout.

A drain round moves every replica off broker SRC onto broker DST, keeping the other replicas
and their order (kafka-reassign-partitions --execute, with --throttle BYTES unless
--no-throttle). DST's replication fetches are rate-limited to --copy-kbit (fault_net.py's slow
fault, 24000 kbit/s) until SRC restarts, so that it copies for seconds. While the reassignment is
in flight (as soon as some partition has completed, or --kill-after seconds after --execute
returned) SRC is killed with kill -9, and restarted --down seconds later. Then, within
--reassign-timeout: ListPartitionReassignments lists nothing; Metadata shows 4 live brokers and
every partition's replicas equal to the target, with all 3 in its ISR and a leader among them,
SRC in none; SRC holds no live directory of the topic (a
directory of a replica moved away while it was down is renamed "<topic>-<p>.<id>-stray", as
Kafka does: counted, not a failure); every producer is acknowledged on every partition again.
With throttles, kafka-reassign-partitions --verify must report every partition complete and
clear the throttles.

CI runs one round (1 -> 4): the kill lands with every partition still copying, so the
partitions SRC led move to a new leader mid-copy. --full preloads more data and runs 5 rounds
back and forth (1 -> 4, 4 -> 1, ...), each killing the broker it drains; its even rounds copy at
full speed, and the kill lands at the first partition completed.

At the end the producers and the consumer stop and the fault test's history checker
(fault_check.py) reads every partition back: no acknowledged record lost, moved, duplicated or
reordered, nothing the consumer saw taken back.

  reassign_test.py --samsad PATH --powerfs PATH [--full] [--no-throttle] [--throttle BYTES]
                   [--rounds N] [--preload-mb MB] [--copy-kbit K] [--kill-after S] [--down S]
                   [--keep]

--no-throttle: for brokers without the replication throttle configs
(leader.replication.throttled.rate...), where --execute --throttle and --verify fail; --verify
is then skipped and completion is read from ListPartitionReassignments only.

Exit: 0 pass, 1 fail, 77 skip (a tool is missing and CI is not true). Needs root, /dev/fuse,
iproute2, fusermount3, python3-confluent-kafka, java and Kafka's jars (kafka.sh fetch).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import fault_check  # noqa: E402
import fault_net  # noqa: E402
from cluster_harness import kproto, log, set_log_prefix  # noqa: E402
from fault_load import PRODUCERS, AckTail, Clients, Fail, tail  # noqa: E402
from fault_test import drain, missing_tools, run_guarded  # noqa: E402

KAFKA_SH = os.path.join(ROOT, "perf", "vs-kafka", "kafka.sh")
REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
BROKERS = (1, 2, 3, 4)
FIRST = (1, 2, 3)  # where the topic starts


def ms_now() -> int:
    return int(time.time() * 1000)


def reassign_tool(a, *args: str, timeout: float = 90) -> tuple[int, str]:
    """kafka-reassign-partitions; (exit code, output without the JVM's noise)."""
    env = dict(os.environ, JAVA_TOOL_OPTIONS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
    r = subprocess.run(["bash", KAFKA_SH, "run", REASSIGN, "--bootstrap-server", a.bootstrap,
                        *args], capture_output=True, text=True, timeout=timeout, env=env)
    out = "\n".join(x for x in (r.stdout + r.stderr).splitlines()
                    if " WARN " not in x and not x.startswith("SLF4J") and
                    not x.startswith("Picked up JAVA_TOOL_OPTIONS"))
    return r.returncode, out


class View:
    """Raw requests to whichever broker answers (a killed one costs a refused connection)."""

    def __init__(self, a, cluster):
        self.a, self.cluster = a, cluster
        self.kp = kproto.Kafka()

    def ask(self, key: int, v: int, body: dict, timeout: float = 5.0):
        order = sorted(BROKERS, key=lambda b: (not self.cluster.node(b).alive(), b))
        for b in order:
            n = self.cluster.node(b)
            try:
                conn = kproto.Conn(n.host, n.port, timeout=1.0)
            except OSError:
                continue
            try:
                conn.send(self.kp.encode_request(key, v, 1, "reassign-test", body))
                return self.kp.decode_response(key, v, conn.recv(timeout))[1]
            except (OSError, kproto.Closed):
                continue
            finally:
                conn.close()
        return None

    def metadata(self):
        """(live brokers, {partition: (leader, replicas, sorted isr)}) or None."""
        md = self.ask(3, 12, {"Topics": [{"Name": self.a.topic}],
                              "AllowAutoTopicCreation": False})
        if md is None:
            return None
        live = {x["NodeId"] for x in md["Brokers"]}
        t = md["Topics"][0] if md["Topics"] else None
        if t is None or t["ErrorCode"] != 0:
            return live, {}
        return live, {p["PartitionIndex"]: (p["LeaderId"], tuple(p["ReplicaNodes"]),
                                            tuple(sorted(p["IsrNodes"])))
                      for p in t["Partitions"]}

    def ongoing(self):
        """{partition: (replicas, adding, removing)} of the topic's reassignments in progress
        (ListPartitionReassignments), or None if no broker answered without error."""
        r = self.ask(46, 0, {"TimeoutMs": 5000, "Topics": None})
        if r is None or r["ErrorCode"] != 0:
            return None
        return {p["PartitionIndex"]: (p["Replicas"], p["AddingReplicas"], p["RemovingReplicas"])
                for t in r["Topics"] if t["Name"] == self.a.topic for p in t["Partitions"]}

    def wait(self, what, timeout: float, step: float = 0.1):
        """The first non-None what() within timeout, or None."""
        end = time.time() + timeout
        while True:
            got = what()
            if got is not None or time.time() > end:
                return got
            time.sleep(step)


def topic_dirs(a, cluster, b: int) -> tuple[list[str], list[str]]:
    """(live partition directories of the topic, set-aside ones: -stray, -delete) on broker b's
    disk."""
    data = cluster.node(b).props["log.dirs"]
    live, aside = [], []
    for name in sorted(os.listdir(data)):
        if re.fullmatch(re.escape(a.topic) + r"-\d+", name):
            live.append(name)
        elif re.fullmatch(re.escape(a.topic) + r"-\d+\..*-(stray|delete)", name):
            aside.append(name)
    return live, aside


def create_topic(a, cluster):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": a.bootstrap, "log_level": 2})
    # Leaders spread over brokers 1-3 (the first replica is the preferred leader).
    assignment = [[FIRST[(p + i) % 3] for i in range(3)] for p in range(a.partitions)]
    fs = admin.create_topics([NewTopic(a.topic, a.partitions, replica_assignment=assignment,
                                       config={"min.insync.replicas": "2"})])
    fs[a.topic].result(timeout=30)
    return assignment


def settled(a, want: dict[int, list[int]]):
    """A Metadata predicate: 4 live brokers, each partition's replicas as wanted, all of them in
    its ISR, a leader among them."""
    def pred(md):
        live, parts = md
        return (live == set(BROKERS) and len(parts) == a.partitions and
                all(parts[p][1] == tuple(want[p]) and parts[p][2] == tuple(sorted(want[p])) and
                    parts[p][0] in want[p] for p in range(a.partitions)))
    return pred


def preload(a, work: str):
    """--preload-mb of filler records (not the checker's format: fault_check ignores them), so
    that the new replicas have something to copy."""
    if a.preload_mb <= 0:
        return
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": a.bootstrap, "acks": "all", "linger.ms": 20,
                  "compression.type": "none", "log_level": 2})
    value = b"fill|" + os.urandom(512).hex().encode()[:1019]
    n = a.preload_mb * 1024
    # Partition q gets a share proportional to q + 1: under a slow copy the small ones complete
    # first, so the kill can land with some partitions moved and others not.
    weights = [q + 1 for q in range(a.partitions)]
    counts = [n * w // sum(weights) for w in weights]
    t0 = time.time()
    for q, count in enumerate(counts):
        for _ in range(count):
            while True:
                try:
                    p.produce(a.topic, value=value, partition=q)
                    break
                except BufferError:
                    p.poll(0.05)
            p.poll(0)
    left = p.flush(60)
    if left:
        raise Fail(f"preload: {left} records not acknowledged")
    log(f"preloaded {n} records of 1 KiB in {time.time() - t0:.1f} s")


class Rounds:
    """The drain rounds and their figures."""

    def __init__(self, a, work, cluster, view: View, acks: AckTail, clients: Clients):
        self.a, self.work, self.cluster, self.view = a, work, cluster, view
        self.net = cluster.net
        self.acks, self.clients = acks, clients
        self.problems: list[str] = []
        self.figures: list[str] = []

    def problem(self, msg: str):
        log(f"PROBLEM: {msg}")
        self.problems.append(msg)

    def execute(self, r: int, target: dict[int, list[int]]) -> str:
        path = os.path.join(self.work, f"round-{r}.json")
        with open(path, "w") as f:
            json.dump({"version": 1, "partitions": [
                {"topic": self.a.topic, "partition": p, "replicas": reps}
                for p, reps in sorted(target.items())]}, f)
        args = ["--reassignment-json-file", path, "--execute"]
        if not self.a.no_throttle:
            args += ["--throttle", str(self.a.throttle)]
        rc, out = reassign_tool(self.a, *args)
        if rc != 0 or "Successfully started" not in out:
            if "Unknown broker config name: leader.replication.throttled.rate" in out:
                raise Fail(f"round {r}: this samsad has no replication throttle configs "
                           f"(leader.replication.throttled.rate): --execute --throttle fails; "
                           f"--no-throttle runs without them")
            raise Fail(f"round {r}: kafka-reassign-partitions --execute: exit {rc}:\n{out}")
        return path

    def kill_in_flight(self, r: int, src: int, t_exec: float) -> tuple[int | None, float]:
        """Waits until some partition has completed (or --kill-after), then kill -9 of src.
        Returns (partitions still moving at the kill, seconds since --execute returned)."""
        moving = None
        while True:
            ong = self.view.ongoing()
            if ong is not None:
                moving = len(ong)
            if (moving is not None and moving < self.a.partitions) or \
                    time.time() - t_exec > self.a.kill_after:
                break
            time.sleep(0.02)
        self.cluster.kill(src)
        return moving, time.time() - t_exec

    def round(self, r: int, src: int, dst: int):
        md = self.view.wait(self.view.metadata, 10)
        if md is None:
            raise Fail(f"round {r}: no Metadata")
        current = {p: list(reps) for p, (_, reps, _) in md[1].items()}
        target = {p: [dst if x == src else x for x in reps] for p, reps in current.items()}
        moved = sum(src in reps for reps in current.values())
        log(f"round {r}: moving {moved} replicas from broker {src} to {dst}")
        # dst's fetch answers crawl: it copies for seconds, not milliseconds, and the kill lands
        # with every partition still copying. --full leaves even rounds at full speed: there
        # the kill lands at the first completion.
        slowed = bool(self.a.copy_kbit) and not (self.a.full and r % 2 == 0)
        if slowed:
            self.net.slow(dst, self.a.copy_kbit)
        t0 = time.time()
        path = self.execute(r, target)
        t_exec = time.time()
        log(f"round {r}: --execute returned after {t_exec - t0:.1f} s"
            f"{'' if self.a.no_throttle else f' (throttle {self.a.throttle} B/s)'}"
            f"{f'; broker {dst} fetches at {self.a.copy_kbit} kbit/s' if slowed else ''}")
        moving, after = self.kill_in_flight(r, src, t_exec)
        log(f"round {r}: kill -9 of broker {src} {after:.2f} s after --execute, "
            f"{moving if moving is not None else '?'} of {self.a.partitions} partitions still "
            f"moving")
        if moving == 0:
            log(f"round {r}: note: the reassignment had completed before the kill")
        # While src is down: the partitions it did not lead complete without it; those it led
        # once the controller fences it and elects another leader.
        restart_at = time.time() + self.a.down
        done_s = None
        while time.time() < restart_at:
            if done_s is None and self.view.ongoing() == {}:
                done_s = time.time() - t_exec
                log(f"round {r}: no reassignment listed {done_s:.2f} s after --execute, broker "
                    f"{src} down")
            time.sleep(0.1)
        self.cluster.node(src).start(f"restart in round {r}")
        self.cluster.node(src).wait_listening(60)
        if slowed:
            log(f"round {r}: broker {dst}'s slowed fetches: {self.net.slow_stats(dst)}")
            self.net.unslow(dst)
        log(f"round {r}: broker {src} restarted")
        self.wait_done(r, (src, dst), target, (t_exec, done_s), moving, path)

    def wait_done(self, r, move, target, times, moving, path):
        src, (t_exec, done_s) = move[0], times
        end = time.time() + self.a.reassign_timeout
        ong = self.view.wait(lambda: {} if self.view.ongoing() == {} else None,
                             self.a.reassign_timeout, 0.1)
        if ong != {}:
            self.problem(f"round {r}: reassignments still in progress after "
                         f"{self.a.reassign_timeout:.0f} s: {self.view.ongoing()}")
            return
        if done_s is None:
            done_s = time.time() - t_exec
            log(f"round {r}: no reassignment listed {done_s:.2f} s after --execute (after the "
                f"restart of broker {src})")
        ok = settled(self.a, target)
        md = self.view.wait(lambda: (lambda m: m if m and ok(m) else None)(self.view.metadata()),
                            max(5.0, end - time.time()))
        if md is None:
            self.problem(f"round {r}: Metadata not as targeted with full ISRs: "
                         f"{self.view.metadata()} (target {target})")
            return
        holders = [p for p, (_, reps, _) in md[1].items() if src in reps]
        if holders:
            self.problem(f"round {r}: broker {src} still a replica of partitions {holders}")
        settled_s = time.time() - t_exec
        dirs_end = time.time() + 30
        while True:
            live, aside = topic_dirs(self.a, self.cluster, src)
            if not live or time.time() > dirs_end:
                break
            time.sleep(0.2)
        if live:
            self.problem(f"round {r}: broker {src} still has partition directories {live}")
        t_ms = ms_now()
        ack_end = time.time() + 30
        while time.time() < ack_end and not self.acks.all_after(self.a.partitions, t_ms):
            self.clients.check_alive()
            time.sleep(0.2)
        missing = self.acks.missing_after(self.a.partitions, t_ms)
        if missing:
            self.problem(f"round {r}: no acknowledgement within 30 s of the end from {missing}")
        acked_s = time.time() - t_exec
        self.figures.append(
            f"round {r} ({src} -> {move[1]}): kill -9 with "
            f"{moving} partitions moving; none listed {done_s:.1f} s after --execute, "
            f"Metadata settled (full ISRs, {src} in none) at {settled_s:.1f} s, every producer "
            f"acknowledged on every partition at {acked_s:.1f} s; broker {src}'s disk: "
            f"{len(live)} live, {len(aside)} set aside {aside[:3]}"
            f"{'...' if len(aside) > 3 else ''}")
        log(self.figures[-1])
        if not self.a.no_throttle:
            self.verify(r, path)

    def verify(self, r: int, path: str):
        rc, out = reassign_tool(self.a, "--reassignment-json-file", path, "--verify")
        complete = len(re.findall(r"Reassignment of partition \S+ is completed?\.", out))
        cleared = "Clearing broker-level throttles" in out and \
            "Clearing topic-level throttles" in out
        log(f"round {r}: --verify exit {rc}, {complete} partitions complete, throttles "
            f"{'cleared' if cleared else 'NOT cleared'}")
        if rc != 0 or complete != self.a.partitions or not cleared:
            self.problem(f"round {r}: kafka-reassign-partitions --verify:\n{out}")

    def run(self):
        src, dst = 1, 4
        for r in range(1, self.a.rounds + 1):
            self.clients.check_alive()
            self.round(r, src, dst)
            if self.problems:
                return
            src, dst = dst, src
            time.sleep(self.a.steady)


def run(a, work: str) -> int:
    from fault_cluster import Cluster, node_ids
    net = fault_net.Net(list(node_ids(a)))
    cluster = clients = None
    t_start = time.time()
    try:
        swept = fault_net.sweep_stale()
        if swept:
            log(f"removed namespaces of dead earlier runs: {swept}")
        net.create()
        net.enter_client()
        cluster = Cluster(a, work, net)
        a.bootstrap = cluster.bootstrap
        cluster.boot()
        view = View(a, cluster)
        if view.wait(lambda: (lambda m: m if m and m[0] == set(BROKERS) else None)(
                view.metadata()), 30) is None:
            raise Fail(f"the 4 brokers are not in Metadata 30 s after their start: "
                       f"{view.metadata()}")
        first = create_topic(a, cluster)
        ok = settled(a, dict(enumerate(first)))
        if view.wait(lambda: (lambda m: m if m and ok(m) else None)(view.metadata()),
                     30) is None:
            raise Fail(f"the topic is not on brokers 1-3 with full ISRs: {view.metadata()}")
        preload(a, work)
        log(f"cluster up in {time.time() - t_start:.1f} s")
        clients = Clients(a, work, cluster.bootstrap)
        clients.start()
        acks = AckTail(list(clients.outs.values()))
        end = time.time() + 60
        while time.time() < end and not acks.all_after(a.partitions, 0):
            clients.check_alive()
            time.sleep(0.2)
        if not acks.all_after(a.partitions, 0):
            raise Fail(f"no acknowledgement within 60 s from "
                       f"{'; '.join(acks.missing_after(a.partitions, 0))}:\n"
                       + tail(os.path.join(work, "java.log")))
        log(f"load running ({time.time() - t_start:.1f} s in)")
        time.sleep(a.steady)
        rounds = Rounds(a, work, cluster, view, acks, clients)
        t_rounds = time.time()
        rounds.run()
        rounds_s = time.time() - t_rounds
        rcs = clients.stop(a.delivery_timeout_ms / 1000 + 30)
        log(f"clients stopped {rcs}")
        if cluster.wait_for(lambda live, parts: len(parts) == a.partitions and all(
                leader in BROKERS for leader, _ in parts.values()), 30) is None:
            raise Fail(f"partitions without a leader before the drain: {view.metadata()}")
        drained = drain(cluster, a)
        return report(a, rounds, work, drained, rounds_s, time.time() - t_start)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if clients is not None:
            clients.kill()
        if cluster is not None:
            cluster.shutdown()
        net.teardown()


def report(a, rounds: Rounds, work: str, drained, rounds_s: float, total_s: float) -> int:
    acked, sent, failed, fatal = {}, 0, 0, []
    for name in PRODUCERS:
        ak, fl, ft, st = fault_check.parse_producer(os.path.join(work, f"{name}.acks"))
        acked.update(ak)
        sent += st
        failed += len(fl)
        fatal += [f"{name}: {x}" for x in ft]
    seen, cerrors = fault_check.parse_seen(os.path.join(work, "consumer.seen"))
    figures, fails = fault_check.check(acked, drained, seen)
    log("---- figures ----")
    log(f"{a.rounds} rounds in {rounds_s:.0f} s, total run {total_s:.0f} s")
    for line in rounds.figures:
        log(line)
    log(f"records: sent {sent}, acknowledged {len(acked)}, failed {failed}; drained "
        f"{figures['drained']} (preload included); consumer saw {figures['distinct_seen']} "
        f"distinct offsets (errors {cerrors or 'none'})")
    log(f"lost {figures['lost']}, moved {figures['moved']}, duplicated {figures['duplicated']}, "
        f"reordered {figures['reordered']}, seen then lost {figures['seen_lost']}")
    if fatal:
        log(f"producer instances ended by a fatal error: {fatal}")
    if figures["distinct_seen"] == 0:
        rounds.problems.append("the consumer saw nothing")
    for kind, (n, examples) in fails.items():
        log(f"FAILED {kind}: {n}, e.g.")
        for e in examples:
            log(f"    {e}")
    for p in rounds.problems:
        log(f"PROBLEM: {p}")
    ok = not fails and not rounds.problems
    log("PASS" if ok else "FAIL")
    return 0 if ok else 1


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samsad", required=True)
    ap.add_argument("--powerfs", required=True)
    ap.add_argument("--full", action="store_true",
                    help="5 rounds back and forth, 48 MiB preloaded")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--preload-mb", type=int, default=6, help="MiB of filler before the load")
    ap.add_argument("--throttle", type=int, default=50_000_000, help="bytes/s (--throttle)")
    ap.add_argument("--no-throttle", action="store_true",
                    help="--execute without --throttle, no --verify")
    ap.add_argument("--kill-after", type=float, default=1.0,
                    help="kill the drained broker at the latest this long after --execute")
    ap.add_argument("--down", type=float, default=3.0, help="seconds the broker stays down")
    ap.add_argument("--copy-kbit", type=int, default=24000,
                    help="the receiving broker's replication fetches limited to this rate "
                         "(kbit/s, fault_net.slow) from --execute to the drained broker's "
                         "restart; 0: no limit")
    ap.add_argument("--reassign-timeout", type=float, default=45)
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--rate", type=float, default=150, help="records/s per producer")
    ap.add_argument("--steady", type=float, default=2.0, help="seconds of load between steps")
    ap.add_argument("--delivery-timeout-ms", type=int, default=60000)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    if a.full:
        a.rounds = max(a.rounds, 5)
        a.preload_mb = max(a.preload_mb, 48)
    # What fault_cluster.Cluster and fault_load.Clients read.
    a.brokers = BROKERS
    a.topic = "reassign"
    a.controllers, a.combined, a.secure, a.memory_acks = 1, False, False, False
    a.lag_ms, a.override, a.sync_delay_ms, a.slow_disks = 2000, [], 0, set()
    a.consumer, a.client_defaults = "group", False
    return a


def main() -> int:
    a = parse_args()
    set_log_prefix("[reassign]")
    ci = os.environ.get("CI") == "true"
    missing = missing_tools(a)
    if missing:
        log(f"{'FAIL' if ci else 'SKIP'}: missing {', '.join(missing)}")
        return 1 if ci else 77
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    work = tempfile.mkdtemp(prefix="samsa-reassign-")
    log(f"{a.rounds} drain rounds, {a.partitions} partitions, "
        f"{'no throttle' if a.no_throttle else f'throttle {a.throttle} B/s'}; work dir {work}")
    return run_guarded(run, a, work)


if __name__ == "__main__":
    sys.exit(main())
