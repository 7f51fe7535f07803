#!/usr/bin/python3
"""The real-cluster fault test of issue 9: 1 controller and 3 brokers, each samsad in its own
network namespace joined by a veth pair to a bridge in another namespace (fault_net.py), each
data directory on its own powerfs mount (fault_cluster.py); three idempotent acks=all producers
(two librdkafka, one Java client), each bootstrapping through a different broker (so their
producer ids come from different brokers' blocks), and a consumer run through a seeded fault
loop, then a history checker (fault_check.py) reads every partition back.

  fault_test.py --samsad PATH --powerfs PATH [--cycles N | --full] [--seed S]
                [--only kill,isolate,slow,powercut] [--consumer group|assign] [--memory-acks]
                [--sync-delay-ms MS [--slow-disks 2,3]] [--cut-modes drop,torn,reorder]
                [--expect-loss] [--keep] [--override key=value]...

Topic `faults`: --partitions (6), replication factor 3, min.insync.replicas=2; brokers run with
replica.lag.time.max.ms=--lag-ms (2000). Each cycle picks one fault (seeded; the seed is printed):
  kill      kill -9 of a partition's leader; once the partition has a new leader and a produce
            on it is acknowledged (the failover time), the broker is restarted.
  isolate   the leader's link to the bridge goes down; failover as above, then the link heals.
  slow      one follower's fetch answers are rate-limited (fault_net.py: no sch_netem in this
            kernel) until Metadata shows it out of the partition's ISR; then restored, and
            it must come back into every ISR.
  powercut  all four samsads frozen (SIGSTOP), all four mounts cut at once (unsynced writes
            dropped, torn or reordered: powerfs `cut drop|torn|reorder`), all killed (kill -9);
            the controller
            and the two brokers that did not lead the chosen partition restart first, one of
            them must take its leadership, then the old leader restarts.
After each cycle the cluster must heal within --heal-timeout: 3 brokers in Metadata, every
partition led with a full ISR, and every producer acknowledged on every partition again.

Checked at the end (a fresh consumer reads every partition from offset 0 to its end): every
acknowledged record is there at its acknowledged offset, none twice, each producer instance's
records in order within a partition, and nothing the consumer saw during the run disappeared.

--memory-acks starts the brokers with the test-only samsa.testing.replica.ack.from.memory=true
(followers report their log end, not their durable end, as Kafka's do): then power cuts must
lose acknowledged records. --sync-delay-ms makes the --slow-disks (powerfs sync-delay) take that
long per fsync, and the power cut then picks a partition whose leader's disk is fast: its
followers lag their leader's disk, which is what acknowledging from memory exposes
(cluster.faults.teeth; tests/README.md). --expect-loss inverts the verdict: pass only if
acknowledged records were lost.

Exit: 0 pass, 1 fail, 77 skip (a tool is missing and CI is not true). Needs root, /dev/fuse,
iproute2 (ip, tc), fusermount3, python3-confluent-kafka, java and Kafka's client jars
(perf/vs-kafka/kafka.sh fetch).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import fault_check  # noqa: E402
import fault_net  # noqa: E402
from cluster_harness import BROKERS, CONTROLLER_ID, log, set_log_prefix  # noqa: E402

PYTHON = "/usr/bin/python3"  # Debian's: sees python3-confluent-kafka
KAFKA_SH = os.path.join(ROOT, "perf", "vs-kafka", "kafka.sh")
JAVA_PRODUCER = os.path.join(ROOT, "tests", "clients", "java", "FaultProducer.java")
JAVA_LOG = os.path.join(ROOT, "tests", "clients", "java", "log4j2-stderr.properties")
FAULTS = ("kill", "isolate", "slow", "powercut")
CUT_MODES = ("drop", "torn", "reorder")  # powerfs's; per node and cut, seeded
CUT_WEIGHTS = {"drop": 5, "torn": 3, "reorder": 2}
ACK_EPSILON_MS = 20  # an answer the old leader sent just before the fault, read just after it


class Fail(Exception):
    pass


class AckTail:
    """Reads the producers' out files as they grow: acknowledgement times per producer and
    partition."""

    def __init__(self, paths: list[str]):
        self.paths = paths
        self.pos = {p: 0 for p in paths}
        self.partial = {p: "" for p in paths}
        # path -> partition -> ack times (ms), in file order
        self.acks: dict[str, dict[int, list[int]]] = {p: {} for p in paths}

    def poll(self):
        for path in self.paths:
            try:
                with open(path, errors="replace") as f:
                    f.seek(self.pos[path])
                    data = f.read()
                    self.pos[path] = f.tell()
            except FileNotFoundError:
                continue
            data = self.partial[path] + data
            lines = data.split("\n")
            self.partial[path] = lines.pop()
            for line in lines:
                w = line.split()
                if len(w) == 6 and w[0] == "A":
                    self.acks[path].setdefault(int(w[2]), []).append(int(w[5]))

    def first_after(self, partition: int, ms: int) -> int | None:
        """The first acknowledgement on the partition after ms, by either producer."""
        self.poll()
        later = [t for per in self.acks.values() for t in per.get(partition, []) if t > ms]
        return min(later) if later else None

    def missing_after(self, partitions: int, ms: int) -> list[str]:
        """'producer file: partitions' that got no acknowledgement after ms (empty: every
        producer acknowledged on every partition)."""
        self.poll()
        out = []
        for path, per in self.acks.items():
            qs = [q for q in range(partitions) if not any(t > ms for t in per.get(q, [])[-50:])]
            if qs:
                out.append(f"{os.path.basename(path)}: {qs}")
        return out

    def all_after(self, partitions: int, ms: int) -> bool:
        return not self.missing_after(partitions, ms)


# The producers and the broker each bootstraps through (issue 17: producers that come in
# through different brokers get their ids from different brokers' blocks).
PRODUCERS = {"rdk": BROKERS[0], "java": BROKERS[1], "rdk2": BROKERS[2]}


class Clients:
    """The producers and the consumer, stopped together through a stop file."""

    def __init__(self, a, work: str, bootstrap: str):
        self.a = a
        self.work = work
        self.stop_file = os.path.join(work, "stop")  # the producers'
        self.consumer_stop = os.path.join(work, "stop-consumer")
        self.outs = {name: os.path.join(work, f"{name}.acks") for name in PRODUCERS}
        self.seen = os.path.join(work, "consumer.seen")
        topic = ["--topic", a.topic, "--partitions", str(a.partitions)]
        clients = os.path.join(HERE, "fault_clients.py")
        self.cmds = {}
        for name, b in PRODUCERS.items():
            producing = topic + ["--bootstrap", f"{fault_net.ip_of(b)}:{fault_net.BROKER_PORT}",
                                 "--stop-file", self.stop_file, "--out", self.outs[name],
                                 "--rate", str(a.rate), "--tag", name]
            if name == "java":
                self.cmds[name] = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp",
                                   a.java_classpath, f"-Dlog4j2.configurationFile={JAVA_LOG}",
                                   JAVA_PRODUCER] + producing
            else:
                self.cmds[name] = [PYTHON, clients, "produce"] + producing
        self.cmds["consumer"] = [PYTHON, clients, "consume", "--out", self.seen, "--mode",
                                 a.consumer, "--group", "fault-test", "--stop-file",
                                 self.consumer_stop, "--bootstrap", bootstrap] + topic
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self):
        for name, cmd in self.cmds.items():
            with open(os.path.join(self.work, f"{name}.log"), "ab") as logf:
                self.procs[name] = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT)

    def check_alive(self):
        for name, p in self.procs.items():
            if p.poll() is not None:
                raise Fail(f"the {name} client exited early ({p.returncode}); its log:\n"
                           + tail(os.path.join(self.work, f"{name}.log")))

    def stop(self, timeout: float):
        """The producers first (each flushes what it has in flight); then the consumer, once it
        has read up to every acknowledged offset (bounded), so that what it saw covers the run."""
        open(self.stop_file, "w").close()
        end = time.time() + timeout
        rcs = {}
        for name in PRODUCERS:
            rcs[name] = self._wait(name, end)
        acked_end: dict[int, int] = {}
        for path in self.outs.values():
            for (_, q, _), (off, _) in fault_check.parse_producer(path)[0].items():
                if off is not None:
                    acked_end[q] = max(acked_end.get(q, -1), off)
        catch_up = time.time() + 30
        while time.time() < catch_up and self.procs["consumer"].poll() is None:
            seen_end: dict[int, int] = {}
            for q, off, _ in fault_check.parse_seen(self.seen)[0]:
                seen_end[q] = max(seen_end.get(q, -1), off)
            if all(seen_end.get(q, -1) >= off for q, off in acked_end.items()):
                break
            time.sleep(0.5)
        else:
            log("note: the consumer had not read up to every acknowledged offset 30 s after the "
                "producers stopped")
        open(self.consumer_stop, "w").close()
        rcs["consumer"] = self._wait("consumer", time.time() + 30)
        return rcs

    def _wait(self, name: str, end: float):
        p = self.procs[name]
        try:
            return p.wait(timeout=max(1.0, end - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            return p.wait()

    def dump_java(self):
        """A thread dump of the Java producer into java.jstack (why it stopped)."""
        p = self.procs.get("java")
        if p is None or p.poll() is not None or not shutil.which("jstack"):
            return
        with open(os.path.join(self.work, "java.jstack"), "ab") as f:
            subprocess.run(["jstack", str(p.pid)], stdout=f, stderr=subprocess.STDOUT,
                           timeout=30)

    def kill(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()


def tail(path: str, n: int = 20) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def missing_tools(a) -> list[str]:
    missing = []
    if os.geteuid() != 0:
        missing.append("root")
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        missing.append("/dev/fuse")
    for tool in ("ip", "tc", "fusermount3", "java"):
        if not shutil.which(tool):
            missing.append(tool)
    if subprocess.run([PYTHON, "-c", "import confluent_kafka"], capture_output=True).returncode:
        missing.append("python3-confluent-kafka")
    r = subprocess.run(["bash", KAFKA_SH, "classpath"], capture_output=True, text=True)
    a.java_classpath = r.stdout.strip()
    if r.returncode or not os.path.isdir(os.path.dirname(a.java_classpath)):
        missing.append("Kafka's client jars (bash perf/vs-kafka/kafka.sh fetch)")
    return missing


def ms_now() -> int:
    return int(time.time() * 1000)


class Loop:
    """The fault cycles and their figures."""

    def __init__(self, a, cluster, net, acks: AckTail, clients: Clients):
        self.a, self.cluster, self.net, self.acks, self.clients = a, cluster, net, acks, clients
        self.rng = random.Random(a.seed)
        self.counts = {f: 0 for f in FAULTS}
        self.failover_ms = {"kill": [], "isolate": []}   # fault -> first ack on the new leader
        self.moved_ms = {"kill": [], "isolate": [], "powercut": []}  # -> new leader in Metadata
        self.heal_ms: list[int] = []
        self.slow_out_ms: list[int] = []
        self.slow_back_ms: list[int] = []
        self.cut_totals = {"dropped_ops": 0, "dropped_bytes": 0, "torn_writes": 0,
                           "lost_entries": 0, "cuts_dropping": 0}
        self.problems: list[str] = []

    def pick_partition(self, fast_leader: bool = False):
        """A partition (seeded) and its (leader, ISR). fast_leader: one whose leader's disk is
        not slowed, if any (with --sync-delay-ms, where followers lag their leader's disk)."""
        snap = self.cluster.snapshot()
        if snap is None or not snap[1]:
            raise Fail("no Metadata for the topic before the fault")
        choices = sorted(snap[1])
        if fast_leader and self.a.sync_delay_ms:
            fast = [q for q in choices if snap[1][q][0] not in self.a.slow_disks]
            choices = fast or choices
        q = self.rng.choice(choices)
        return q, snap[1][q]

    def failover(self, kind: str, q: int, victim: int, t0: int):
        """Waits for partition q's new leader in Metadata and its first acknowledged produce."""
        bound = self.a.failover_timeout
        moved = self.cluster.wait_for(
            lambda live, parts: q in parts and parts[q][0] not in (victim, -1), bound, 0.02)
        if moved is None:
            self.problem(f"{kind}: partition {q} still led by {victim} (or by nobody) "
                         f"{bound:.0f} s after the fault")
            return
        self.moved_ms[kind].append(ms_now() - t0)
        new_leader = moved[1][q][0]
        end = time.time() + bound
        first = None
        while time.time() < end and first is None:
            first = self.acks.first_after(q, t0 + ACK_EPSILON_MS)
            time.sleep(0.02)
        if first is None:
            self.problem(f"{kind}: no produce acknowledged on partition {q} within {bound:.0f} s"
                         f" (new leader {new_leader})")
            return
        self.failover_ms[kind].append(first - t0)
        log(f"  partition {q}: leader {victim} -> {new_leader} in Metadata after "
            f"{self.moved_ms[kind][-1]} ms, first acknowledged produce after {first - t0} ms")

    def problem(self, what: str):
        log(f"  PROBLEM: {what}")
        self.problems.append(what)

    def do_kill(self):
        q, (leader, _) = self.pick_partition()
        log(f"  kill -9 of broker {leader}, leader of partition {q}")
        t0 = ms_now()
        self.cluster.kill(leader)
        self.failover("kill", q, leader, t0)
        self.cluster.start([leader], "restart after kill -9")

    def do_isolate(self):
        q, (leader, _) = self.pick_partition()
        log(f"  isolating broker {leader}, leader of partition {q} (link down)")
        self.net.isolate(leader)
        t0 = ms_now()  # once `ip link set down` has returned: answers sent before it still pass
        self.failover("isolate", q, leader, t0)
        self.net.heal(leader)

    def do_slow(self):
        q, (leader, isr) = self.pick_partition()
        followers = [b for b in BROKERS if b != leader]
        f = self.rng.choice(followers)
        log(f"  slowing broker {f}, follower of partition {q} (leader {leader}, "
            f"ISR {list(isr)}), to {self.a.slow_kbit} kbit/s")
        t0 = time.time()
        self.net.slow(f, self.a.slow_kbit)
        bound = self.a.lag_ms / 1000 + self.a.slow_timeout
        out = self.cluster.wait_for(lambda live, parts: q in parts and f not in parts[q][1],
                                    bound, 0.1)
        stats = self.net.slow_stats(f)
        self.net.unslow(f)
        if out is None:
            self.problem(f"slow: broker {f} never left partition {q}'s ISR within {bound:.0f} s "
                         f"(rate limit: {stats})")
            return
        self.slow_out_ms.append(int((time.time() - t0) * 1000))
        log(f"  broker {f} out of partition {q}'s ISR {out[1][q][1]} after "
            f"{self.slow_out_ms[-1]} ms (rate limit: {stats}); restored")
        t1 = time.time()
        back = self.cluster.wait_for(
            lambda live, parts: all(f in isr for _, isr in parts.values()) and len(parts) > 0,
            self.a.heal_timeout, 0.1)
        if back is None:
            self.problem(f"slow: broker {f} not back in every ISR {self.a.heal_timeout:.0f} s "
                         f"after its link was restored")
            return
        self.slow_back_ms.append(int((time.time() - t1) * 1000))
        log(f"  broker {f} back in every ISR after {self.slow_back_ms[-1]} ms")

    def do_powercut(self):
        q, (leader, _) = self.pick_partition(fast_leader=True)
        modes = {}
        for i in self.cluster.members:
            m = self.rng.choices(CUT_MODES, [CUT_WEIGHTS[x] for x in CUT_MODES])[0] \
                if not self.a.cut_modes else self.rng.choice(self.a.cut_modes)
            modes[i] = m if m == "drop" else f"{m} {self.rng.randrange(1, 2**63)}"
        others = [b for b in BROKERS if b != leader]
        log(f"  power cut of all 4 nodes (partition {q} led by {leader})")
        t0 = ms_now()
        # Aimed at a moment when the brokers that restart first (one of them must lead) have
        # unsynced writes and the old leader has none: what they lose decides whether
        # acknowledged records survive.
        cuts, pending, tries = self.cluster.power_cut(modes, self.rng, others, [leader])
        log(f"  unsynced bytes at the cut {pending} (moment found in {tries} tries)")
        dropped = 0
        for i, c in sorted(cuts.items()):
            for k in ("dropped_ops", "dropped_bytes", "torn_writes", "lost_entries"):
                self.cut_totals[k] += int(c.get(k, 0))
            dropped += int(c.get("dropped_ops", 0))
        self.cut_totals["cuts_dropping"] += dropped > 0
        log("  cut: " + "; ".join(f"node {i} {c['mode']}: dropped {c['dropped_ops']} ops "
                                  f"({c['dropped_bytes']} B), torn {c['torn_writes']}, lost "
                                  f"entries {c['lost_entries']}" for i, c in sorted(cuts.items())))
        if dropped == 0:
            log("  note: this cut found nothing unsynced to drop")
        rcs = self.cluster.remount_all()
        if any(rc not in (0, 3, -1) for rc in rcs.values()):
            raise Fail(f"powerfs exited badly after the cut: {rcs}")
        self.cluster.start([CONTROLLER_ID], "restart after the power cut")
        self.cluster.start(others, "restart after the power cut (followers first)")
        t1 = ms_now()
        moved = self.cluster.wait_for(
            lambda live, parts: q in parts and parts[q][0] in others, self.a.failover_timeout
            + 10, 0.05)
        if moved is None:
            self.problem(f"powercut: neither of {others} took partition {q}'s leadership "
                         f"within {self.a.failover_timeout + 10:.0f} s of their restart")
        else:
            self.moved_ms["powercut"].append(ms_now() - t1)
            log(f"  partition {q}: broker {moved[1][q][0]} leads it {ms_now() - t1} ms after the"
                f" followers restarted ({ms_now() - t0} ms after the cut)")
        self.cluster.start([leader], "restart after the power cut (old leader last)")

    def heal(self) -> bool:
        t0 = time.time()
        mark = ms_now()
        healthy = self.cluster.wait_for(self.cluster.healthy, self.a.heal_timeout, 0.1)
        if healthy is None:
            snap = self.cluster.snapshot()
            self.problem(f"not healed within {self.a.heal_timeout:.0f} s: Metadata {snap}")
            return False
        end = t0 + self.a.heal_timeout
        while time.time() < end and not self.acks.all_after(self.a.partitions, mark):
            time.sleep(0.1)
        missing = self.acks.missing_after(self.a.partitions, mark)
        if missing:
            self.clients.dump_java()
            self.problem(f"healed, but no acknowledged produce within "
                         f"{self.a.heal_timeout:.0f} s from {'; '.join(missing)}")
            return False
        self.heal_ms.append(int((time.time() - t0) * 1000))
        log(f"  healed in {self.heal_ms[-1]} ms (3 brokers, full ISRs, every partition "
            f"acknowledging)")
        return True

    def run(self, cycles: int, faults: list[str]):
        for c in range(cycles):
            self.clients.check_alive()
            fault = self.rng.choice(faults)
            self.counts[fault] += 1
            log(f"cycle {c + 1}/{cycles}: {fault}")
            getattr(self, f"do_{fault}")()
            if not self.heal():
                self.problem(f"cycle {c + 1} ({fault}): the cluster did not heal; the loop "
                             f"stops here and the history is checked")
                return
            time.sleep(self.a.steady)


def drain(cluster, a) -> dict[int, list[tuple[int, str]]]:
    """Every partition from offset 0 to its high watermark, with a fresh consumer."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "fault-drain",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "enable.partition.eof": True})
    ends = {q: c.get_watermark_offsets(TopicPartition(a.topic, q), timeout=10)[1]
            for q in range(a.partitions)}
    c.assign([TopicPartition(a.topic, q, 0) for q in range(a.partitions)])
    out = {q: [] for q in range(a.partitions)}
    done = {q for q, e in ends.items() if e == 0}
    deadline = time.time() + 120
    while len(done) < a.partitions and time.time() < deadline:
        for m in c.consume(1000, 0.5):
            if m.error():
                if m.error().name() == "_PARTITION_EOF" and m.offset() >= ends[m.partition()]:
                    done.add(m.partition())
                continue
            out[m.partition()].append((m.offset(), m.value().decode(errors="replace")))
            if m.offset() + 1 >= ends[m.partition()]:
                done.add(m.partition())
    c.close()
    if len(done) < a.partitions:
        raise Fail(f"drain: partitions {sorted(set(range(a.partitions)) - done)} not read to "
                   f"their end {ends} within 120 s")
    return out


def fig(values: list[int]) -> str:
    if not values:
        return "none"
    return f"median {statistics.median(values):.0f} ms, max {max(values)} ms (n={len(values)})"


def run(a, work: str) -> int:
    from fault_cluster import Cluster
    net = fault_net.Net([CONTROLLER_ID, *BROKERS])
    cluster = clients = None
    t_start = time.time()
    try:
        swept = fault_net.sweep_stale()
        if swept:
            log(f"removed namespaces of dead earlier runs: {swept}")
        net.create()
        net.enter_client()
        cluster = Cluster(a, work, net)
        cluster.boot()
        unknown = cluster.unknown_keys()
        if unknown:
            log(f"note: this samsad ignores unknown keys {unknown}")
        if a.memory_acks and "samsa.testing.replica.ack.from.memory" in unknown:
            log("WARNING: --memory-acks asked, but this samsad does not know "
                "samsa.testing.replica.ack.from.memory: followers ack as they always do")
        if cluster.wait_for(lambda live, parts: live == set(BROKERS), 30) is None:
            raise Fail(f"the 3 brokers are not in Metadata 30 s after their start: "
                       f"{cluster.snapshot()}")
        cluster.create_topic(a.partitions, {"min.insync.replicas": "2"})
        if cluster.wait_for(cluster.healthy, 30) is None:
            raise Fail(f"the topic is not healthy after its creation: {cluster.snapshot()}")
        log(f"cluster up in {time.time() - t_start:.1f} s: {cluster.snapshot()}")
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
                       + tail(os.path.join(work, "java.log")) + tail(os.path.join(work,
                                                                                "rdk.log")))
        log(f"load running ({time.time() - t_start:.1f} s in)")
        time.sleep(max(2.0, a.steady))  # some history before the first fault
        loop = Loop(a, cluster, net, acks, clients)
        faults = a.only.split(",") if a.only else list(FAULTS)
        t_loop = time.time()
        loop.run(a.cycles, faults)
        loop_s = time.time() - t_loop
        rcs = clients.stop(a.delivery_timeout_ms / 1000 + 30)
        log(f"clients stopped {rcs}")
        # A drain needs a leader per partition, not full ISRs (a run that did not heal is
        # still checked).
        if cluster.wait_for(lambda live, parts: len(parts) == a.partitions and all(
                leader in BROKERS for leader, _ in parts.values()), a.heal_timeout) is None:
            raise Fail(f"partitions without a leader before the drain: {cluster.snapshot()}")
        drained = drain(cluster, a)
        return report(a, loop, work, drained, loop_s, time.time() - t_start)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if clients is not None:
            clients.kill()
        if cluster is not None:
            cluster.shutdown()
        net.teardown()


def report(a, loop: Loop, work: str, drained, loop_s: float, total_s: float) -> int:
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
    log(f"seed {a.seed}; {a.cycles} cycles in {loop_s:.0f} s, total run {total_s:.0f} s")
    log(f"faults: {loop.counts}")
    log(f"records: sent {sent}, acknowledged {len(acked)}, failed {failed}, unresolved "
        f"{sent - len(acked) - failed}; drained {figures['drained']}; consumer saw "
        f"{figures['distinct_seen']} distinct offsets (errors {cerrors or 'none'}); "
        f"acknowledged without an offset (librdkafka's implicit acks) "
        f"{figures['acked_without_offset']}")
    log(f"lost {figures['lost']}, moved {figures['moved']}, duplicated {figures['duplicated']}, "
        f"reordered {figures['reordered']}, seen then lost {figures['seen_lost']}")
    if fatal:
        log(f"producer instances ended by a fatal error: {fatal}")
    if figures["distinct_seen"] == 0:
        loop.problems.append(f"the consumer (--consumer {a.consumer}) saw nothing: the "
                             f"seen-then-lost check is empty")
    for kind in ("kill", "isolate"):
        log(f"failover {kind} (fault -> first acknowledged produce on the new leader): "
            f"{fig(loop.failover_ms[kind])}; new leader in Metadata: {fig(loop.moved_ms[kind])}")
    log(f"power cut (followers' restart -> one leads the partition): "
        f"{fig(loop.moved_ms['powercut'])}; cuts {loop.cut_totals}")
    log(f"slow follower: out of the ISR after {fig(loop.slow_out_ms)}; back in every ISR after "
        f"{fig(loop.slow_back_ms)}")
    log(f"heal (fault over -> healthy and acknowledging): {fig(loop.heal_ms)}")
    for kind, (n, examples) in fails.items():
        log(f"FAILED {kind}: {n}, e.g.")
        for e in examples:
            log(f"    {e}")
    for p in loop.problems:
        log(f"PROBLEM: {p}")
    if a.expect_loss:
        ok = figures["lost"] + figures["moved"] > 0
        log(f"{'PASS' if ok else 'FAIL'} (--expect-loss): acknowledged records lost: "
            f"{figures['lost'] + figures['moved']}")
        return 0 if ok else 1
    ok = not fails and not loop.problems
    log("PASS" if ok else f"FAIL (reproduce with --seed {a.seed})")
    return 0 if ok else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samsad", required=True)
    ap.add_argument("--powerfs", required=True)
    ap.add_argument("--cycles", type=int, default=10)
    ap.add_argument("--full", action="store_true", help="50 cycles")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--only", default="", help="comma-separated subset of " + ",".join(FAULTS))
    ap.add_argument("--consumer", choices=["group", "assign"], default="group",
                    help="group: subscribe with group.id; assign: every partition, no group "
                         "(brokers that do not coordinate groups yet)")
    ap.add_argument("--memory-acks", action="store_true")
    ap.add_argument("--sync-delay-ms", type=int, default=0,
                    help="the --slow-disks take this long per fsync (powerfs sync-delay)")
    ap.add_argument("--slow-disks", default=",".join(map(str, BROKERS)),
                    help="node ids whose disks --sync-delay-ms slows (default: the brokers)")
    ap.add_argument("--expect-loss", action="store_true")
    ap.add_argument("--attempts", type=int, default=1,
                    help="with --expect-loss: fresh clusters to try (a cut lands in the "
                         "window of an acknowledgement from memory with high, not certain, "
                         "probability)")
    ap.add_argument("--cut-modes", default="",
                    help="comma-separated powerfs cut modes to draw from, uniformly (default: "
                         "drop 50%%, torn 30%%, reorder 20%%)")
    ap.add_argument("--topic", default="faults")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--rate", type=float, default=150, help="records/s per producer")
    ap.add_argument("--lag-ms", type=int, default=2000)
    ap.add_argument("--slow-kbit", type=int, default=16)
    ap.add_argument("--slow-timeout", type=float, default=20)
    ap.add_argument("--failover-timeout", type=float, default=15)
    ap.add_argument("--heal-timeout", type=float, default=45)
    ap.add_argument("--steady", type=float, default=1.0, help="seconds of load between cycles")
    ap.add_argument("--delivery-timeout-ms", type=int, default=60000)
    ap.add_argument("--override", action="append", default=[], help="broker key=value")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    set_log_prefix("[faults]")
    if a.full:
        a.cycles = 50
    if a.seed is None:
        a.seed = random.SystemRandom().randrange(1, 2**31)
    a.slow_disks = {int(x) for x in a.slow_disks.split(",") if x}
    a.cut_modes = [m for m in a.cut_modes.split(",") if m]
    if any(m not in CUT_MODES for m in a.cut_modes):
        ap.error(f"cut modes are {CUT_MODES}")
    bad = [f for f in a.only.split(",") if f and f not in FAULTS]
    if bad:
        ap.error(f"unknown faults {bad}")
    ci = os.environ.get("CI") == "true"
    missing = missing_tools(a)
    if missing:
        log(f"{'FAIL' if ci else 'SKIP'}: missing {', '.join(missing)}")
        return 1 if ci else 77
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started ignoring it
    rc = 1
    for attempt in range(1, a.attempts + 1):
        if attempt > 1:
            a.seed += 1
            log(f"--expect-loss: no loss in attempt {attempt - 1}; attempt {attempt} of "
                f"{a.attempts} on a fresh cluster")
        rc = attempt_once(a)
        if rc != 1 or not a.expect_loss:
            break
    return rc


def attempt_once(a) -> int:
    work = tempfile.mkdtemp(prefix="samsa-faults-")
    log(f"seed {a.seed}, {a.cycles} cycles of {a.only or ','.join(FAULTS)}; work dir {work}")
    rc = 1
    try:
        rc = run(a, work)
    except Fail as e:
        log(f"FAIL: {e}")
    except Exception as e:  # noqa: BLE001 - a harness failure fails the run with its trace
        import traceback
        traceback.print_exc()
        log(f"FAIL: {type(e).__name__}: {e}")
    except KeyboardInterrupt:
        log("interrupted (SIGINT); cleaned up")
        rc = 130
    except SystemExit as e:
        log("stopped (SIGTERM); cleaned up")
        rc = e.code if isinstance(e.code, int) else 1
    if rc != 0 or a.keep:
        log(f"logs and data kept in {work} (reproduce with --seed {a.seed})")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
