#!/usr/bin/python3
"""The real-cluster fault test of issues 9 and 19: 3 controllers (a KRaft quorum) and 3 brokers
(or, with --combined, 3 nodes that are both: process.roles=broker,controller), each samsad in its own
network namespace joined by a veth pair to a bridge in another namespace (fault_net.py), each
data directory on its own powerfs mount (fault_cluster.py); three idempotent acks=all producers
(two librdkafka, one Java client), each bootstrapping through a different broker (so their
producer ids come from different brokers' blocks), and a consumer run through a seeded fault
loop, then a history checker (fault_check.py) reads every partition back.

  fault_test.py --samsad PATH --powerfs PATH [--cycles N | --full] [--seed S]
                [--only kill,isolate,slow,powercut,ckill,cisolate,bckill] [--controllers 3|1]
                [--combined] [--secure]
                [--consumer group|assign] [--memory-acks]
                [--sync-delay-ms MS [--slow-disks 2,3]] [--cut-modes drop,torn,reorder]
                [--expect-loss] [--keep] [--override key=value]...

Topic `faults`: --partitions (6), replication factor 3, min.insync.replicas=2; brokers run with
replica.lag.time.max.ms=--lag-ms (2000). Each cycle picks one fault (seeded; the seed is printed):
  kill      kill -9 of a partition's leader; once the partition has a new leader and a produce
            on it is acknowledged (the failover time), the broker is restarted.
  isolate   the leader's link to the bridge goes down; failover as above, then the link heals.
            When no running client's produce is acknowledged in time, a fresh client's (the
            harness's own, bootstrapped from the reachable brokers) must be: the clients may
            still be waiting on the unreachable broker (Java re-bootstraps to its one bootstrap
            address after a power cut; librdkafka's idempotent producer waited ~27 s once),
            which is their stall, counted and printed, not the broker's. They must still all
            acknowledge again by the heal. At a problem, each broker's replica state
            (samsactl partition describe) is printed and kept as problem-N-BROKER.json.
  slow      one follower's fetch answers are rate-limited (fault_net.py: no sch_netem in this
            kernel) until Metadata shows it out of the partition's ISR; then restored, and
            it must come back into every ISR.
  powercut  every samsad frozen (SIGSTOP), every mount cut at once (unsynced writes
            dropped, torn or reordered: powerfs `cut drop|torn|reorder`), all killed (kill -9);
            the controllers and the two brokers that did not lead the chosen partition restart
            first, one of them must take its leadership, then the old leader restarts.
  ckill     kill -9 of the active controller (found from the controllers' logs); another must
            become active, a produce on a partition must be acknowledged (produce does not
            wait for the controller), and a topic created meanwhile must be created; then the
            controller restarts.
  cisolate  the active controller's link goes down; as ckill, then the link heals. (--combined:
            when its node leads the chosen partition, that partition's failover is checked as
            isolate's, a client stall told from the broker's.)
  bckill    kill -9 of a partition's leader and of the active controller at once: the new
            controller must fence the broker and move its leaderships; as kill and ckill.
            (--combined: the active controller's node, with a partition it leads.)
After each cycle the cluster must heal within --heal-timeout: 3 brokers in Metadata, every
partition led with a full ISR, every producer acknowledged on every partition again, and an
active controller.

Checked at the end (a fresh consumer reads every partition from offset 0 to its end): every
acknowledged record is there at its acknowledged offset, none twice, each producer instance's
records in order within a partition, and nothing the consumer saw during the run disappeared;
every topic created through the run is in every broker's Metadata once, under one id; and the
controllers' metadata logs (once caught up) hold the same batches byte for byte: no fork.

--secure: nothing between the nodes in clear (issue 22). Brokers replicate over an INTERNAL
listener (port 9094) and every node reaches the quorum over CONTROLLER (9093), both SASL_SSL
with PLAIN logins as User:node; one certificate per node (its SAN the node's IP, one CA: the
peer's address is verified); the clients and the test's raw requests stay on PLAINTEXT (9092:
no raw request of this test goes to a secured port). The authorizer is on
(StandardAuthorizer, super.users=User:node;User:ANONYMOUS): every request of the run is
authorized under the faults, and allowed. The slow fault throttles the INTERNAL port (where
the fetches go: a follower that still replicated over 9092 would never leave the ISR). At the
end, besides the usual checks: no node logged a failed SASL login or a login without TLS;
each broker logged in over TLS to both other brokers' INTERNAL and to a controller, each
controller to another voter; a DescribeAcls to each broker's client port answers 0, not
SECURITY_DISABLED (the authorizer is on); and a plaintext ApiVersions to every node's INTERNAL
and CONTROLLER port gets no Kafka answer (cluster.faults.secure).

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
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import fault_check  # noqa: E402
import fault_net  # noqa: E402
from fault_load import PRODUCERS, AckTail, Clients, Fail, tail  # noqa: E402
from cluster_harness import BROKERS, log, set_log_prefix  # noqa: E402

PYTHON = "/usr/bin/python3"  # Debian's: sees python3-confluent-kafka
KAFKA_SH = os.path.join(ROOT, "perf", "vs-kafka", "kafka.sh")
FAULTS = ("kill", "isolate", "slow", "powercut", "ckill", "cisolate", "bckill")
CONTROLLER_FAULTS = ("ckill", "cisolate", "bckill")  # need a quorum (--controllers 3)
CUT_MODES = ("drop", "torn", "reorder")  # powerfs's; per node and cut, seeded
CUT_WEIGHTS = {"drop": 5, "torn": 3, "reorder": 2}
ACK_EPSILON_MS = 20  # an answer the old leader sent just before the fault, read just after it


def missing_tools(a) -> list[str]:
    missing = []
    if os.geteuid() != 0:
        missing.append("root")
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        missing.append("/dev/fuse")
    for tool in ("ip", "tc", "fusermount3", "java") + (("openssl",) if a.secure else ()):
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
        # fault -> the first acknowledged produce on the fault's partition (its new leader's)
        self.failover_ms: dict[str, list[int]] = {}
        # (fault kind, partition, fault time): each producer's own resume, computed at the end
        self.resume_points: list[tuple[str, int, int]] = []
        self.moved_ms: dict[str, list[int]] = {"powercut": []}  # -> new leader in Metadata
        self.controller_ms: dict[str, list[int]] = {}  # -> a new active controller
        self.created: list[str] = []  # topics created through the run, each acknowledged
        self.heal_ms: list[int] = []
        self.slow_out_ms: list[int] = []
        self.slow_back_ms: list[int] = []
        self.cut_totals = {"dropped_ops": 0, "dropped_bytes": 0, "torn_writes": 0,
                           "lost_entries": 0, "cuts_dropping": 0}
        self.problems: list[str] = []
        self.client_stalls: list[str] = []  # failovers only a fresh client saw in time

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
        self.moved_ms.setdefault(kind, []).append(ms_now() - t0)
        new_leader = moved[1][q][0]
        first = self.client_resume(kind, q, t0, bound, f" (new leader {new_leader})", quiet=True)
        if first is None:
            # Whether the broker failed over, or only the clients did not notice (a client
            # waiting on the unreachable broker: e.g. Java re-bootstrapped to its one bootstrap
            # address after a power cut, and that broker is the one cut off).
            probe = self.leader_acknowledges(q, 10)
            if probe is None:
                self.problem(f"{kind}: no produce acknowledged on partition {q} within "
                             f"{bound:.0f} s of the fault, nor the harness's own produce to "
                             f"its new leader {new_leader}")
                return
            self.client_stalls.append(f"{kind} partition {q}")
            log(f"  partition {q}: leader {victim} -> {new_leader} in Metadata after "
                f"{self.moved_ms[kind][-1]} ms; no client's produce acknowledged within "
                f"{bound:.0f} s, but the new leader acknowledged a fresh client's after {probe} "
                f"ms (a client stall; the heal still needs every client acknowledging)")
            return
        log(f"  partition {q}: leader {victim} -> {new_leader} in Metadata after "
            f"{self.moved_ms[kind][-1]} ms, first acknowledged produce after {first - t0} ms")

    def problem(self, what: str):
        log(f"  PROBLEM: {what}")
        self.problems.append(what)
        self.dump_replicas(len(self.problems))

    def dump_replicas(self, n: int):
        """Each live broker's view of the topic's replicas (samsactl partition describe: role,
        HW, durable end, ISR, followers' fetch offsets) at the moment of a problem, into
        problem-<n>-<broker>.json and one line per partition here: what a stuck HW waits for."""
        samsactl = os.path.join(os.path.dirname(self.a.samsad), "samsactl")
        for b, node in sorted(self.cluster.brokers.items()):
            if not node.alive():
                continue
            r = subprocess.run([samsactl, "--socket", os.path.join(node.dir, "admin.sock"),
                                "--json", "partition", "describe", self.a.topic],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=10, check=False)
            with open(os.path.join(self.clients.work, f"problem-{n}-{b}.json"), "w") as f:
                f.write(r.stdout)
            try:
                parts = json.loads(r.stdout)["partitions"]
            except (ValueError, KeyError):
                log(f"    broker {b}: samsactl said {r.stdout.strip()[:200]}")
                continue
            for p in parts:
                rep = p.get("replica", {})
                fol = " ".join(f"{f['id']}@{f['fetch_offset']}/{f['last_fetch_ms_ago']}ms"
                               for f in rep.get("followers", []))
                log(f"    broker {b} {self.a.topic}-{p['partition']}: {rep.get('role')} "
                    f"(leader {rep.get('leader')}, epoch {p.get('leader_epoch')}) hw "
                    f"{p.get('high_watermark')} leo {p.get('log_end_offset')} durable "
                    f"{rep.get('durable_end_offset')} isr {rep.get('isr')} maximal "
                    f"{rep.get('maximal_isr')} followers [{fol}] fetch in flight "
                    f"{rep.get('fetch_in_flight_ms')} ms, truncation "
                    f"{rep.get('pending_truncation')}")

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
        self.net.slow(f, self.a.slow_kbit, self.cluster.replication_port)
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
        log(f"  power cut of all {len(self.cluster.members)} nodes (partition {q} led by "
            f"{leader})")
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
        self.cluster.start(self.cluster.only_controllers(), "restart after the power cut")
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
            self.client_resume("powercut", q, t0, self.a.heal_timeout)
        self.cluster.start([leader], "restart after the power cut (old leader last)")

    # ---- controller faults ----
    def controller_failover(self, kind: str, victim: int, epoch: int, t0: int):
        """Waits for a new active controller (an epoch after `epoch`) and for the first
        acknowledged produce on a partition (seeded) after the fault: produce must not wait for
        the controller."""
        new = self.cluster.wait_new_active(epoch, t0 / 1000, self.a.failover_timeout)
        if new is None:
            self.problem(f"{kind}: no new active controller {self.a.failover_timeout:.0f} s "
                         f"after the fault on controller {victim}")
            return
        self.controller_ms.setdefault(kind, []).append(int(new[0] * 1000) - t0)
        log(f"  controller {new[1]} active in epoch {new[2]} after "
            f"{self.controller_ms[kind][-1]} ms")

    def leader_acknowledges(self, q: int, bound: float) -> int | None:
        """The harness's own acks=all produce to partition q through a fresh client that knows
        only the reachable brokers: ms until acknowledged, or None. Tells a broker that does
        not fail over from clients that have not noticed it did (their timeouts and bootstrap
        choices). Its record is no producer's: fault_check ignores it."""
        from confluent_kafka import Producer
        live = [b for b in BROKERS if b not in self.net.down and self.cluster.node(b).alive()]
        p = Producer({"bootstrap.servers": ",".join(
            f"{fault_net.ip_of(b)}:{fault_net.BROKER_PORT}" for b in live), "acks": "all",
            "enable.idempotence": False, "message.timeout.ms": int(bound * 1000),
            "log_level": 2})
        outcome: list = []
        t0 = ms_now()
        p.produce(self.a.topic, b"probe", partition=q,
                  on_delivery=lambda err, _msg: outcome.append((err, ms_now())))
        p.flush(bound + 1)
        if outcome and outcome[0][0] is None:
            return outcome[0][1] - t0
        return None

    def client_resume(self, kind: str, q: int, t0: int, bound: float | None = None,
                      detail: str = "", quiet: bool = False) -> int | None:
        """The first acknowledged produce on partition q after the fault at t0 (the failover
        a client sees), recorded; None (a problem) if none came within the bound."""
        bound = bound or self.a.failover_timeout
        end = time.time() + bound
        first = None
        while time.time() < end and first is None:
            first = self.acks.first_after(q, t0 + ACK_EPSILON_MS)
            time.sleep(0.02)
        if first is None:
            if not quiet:
                self.problem(f"{kind}: no produce acknowledged on partition {q} within "
                             f"{bound:.0f} s of the fault{detail}")
            return None
        self.failover_ms.setdefault(kind, []).append(first - t0)
        self.resume_points.append((kind, q, t0))
        return first

    def per_client_resume(self) -> dict[str, dict[str, list[int]]]:
        """Producer -> fault kind -> each fault's time to that producer's own first
        acknowledgement on the fault's partition (the first one overall is often another
        client's: they differ in request time-outs)."""
        out: dict[str, dict[str, list[int]]] = {}
        for path in self.acks.paths:
            name = os.path.basename(path).removesuffix(".acks")
            for kind, q, t0 in self.resume_points:
                first = self.acks.first_after(q, t0 + ACK_EPSILON_MS, path)
                if first is not None:
                    out.setdefault(name, {}).setdefault(kind, []).append(first - t0)
        return out

    def create_during(self, name: str) -> threading.Thread:
        """Creates topic `name` while the fault lasts (a thread); it must exist afterwards."""
        def create():
            err = self.cluster.create_named_topic(name, self.a.heal_timeout)
            if err is None:
                self.created.append(name)
            else:
                self.problem(f"topic {name} not created through the fault: {err}")
        t = threading.Thread(target=create, daemon=True)
        t.start()
        return t

    def do_ckill(self):
        victim, epoch = self.cluster.active_controller()
        q = self.rng.randrange(self.a.partitions)
        log(f"  kill -9 of the active controller {victim} (epoch {epoch})")
        t0 = ms_now()
        self.cluster.kill(victim)
        creating = self.create_during(f"ft-{len(self.created)}-{t0}")
        self.controller_failover("ckill", victim, epoch, t0)
        self.client_resume("ckill", q, t0)
        creating.join()
        self.cluster.start([victim], "restart after kill -9 of the active controller")

    def do_cisolate(self):
        victim, epoch = self.cluster.active_controller()
        q = self.rng.randrange(self.a.partitions)
        snap = self.cluster.snapshot()
        # --combined: the controller's node may lead q too; then this isolates q's leader as
        # well, and clients wait on it as in isolate (Java re-bootstrapped to that very node
        # after a power cut, librdkafka's idempotent producer on requests in flight to it).
        leads_q = bool(snap and q in snap[1] and snap[1][q][0] == victim)
        log(f"  isolating the active controller {victim} (epoch {epoch}; link down)"
            + (f", leader of partition {q}" if leads_q else ""))
        self.net.isolate(victim)
        t0 = ms_now()
        creating = self.create_during(f"ft-{len(self.created)}-{t0}")
        self.controller_failover("cisolate", victim, epoch, t0)
        if leads_q:
            # The broker's failover is checked as isolate's: a new leader in Metadata and an
            # acknowledged produce, a fresh client's when no running client noticed in time.
            self.failover("cisolate", q, victim, t0)
        else:
            self.client_resume("cisolate", q, t0)
        creating.join()
        self.net.heal(victim)

    def do_bckill(self):
        if self.a.combined:
            return self.do_bckill_combined()
        q, (leader, _) = self.pick_partition()
        victim, epoch = self.cluster.active_controller()
        log(f"  kill -9 of broker {leader} (leader of partition {q}) and of the active "
            f"controller {victim} (epoch {epoch}) at once")
        t0 = ms_now()
        self.cluster.kill(victim)
        self.cluster.kill(leader)
        creating = self.create_during(f"ft-{len(self.created)}-{t0}")
        self.controller_failover("bckill", victim, epoch, t0)
        self.failover("bckill", q, leader, t0)
        creating.join()
        self.cluster.start([victim], "restart after kill -9 with a broker")
        self.cluster.start([leader], "restart after kill -9 with the active controller")

    def do_bckill_combined(self):
        """Combined mode: the active controller's node is a broker too; killing another node
        with it would leave no majority. The one kill takes a partition's leader (one it leads,
        if any) and the active controller at once."""
        victim, epoch = self.cluster.active_controller()
        snap = self.cluster.snapshot()
        led = sorted(q for q, (leader, _) in (snap[1] if snap else {}).items() if leader == victim)
        q = self.rng.choice(led) if led else self.rng.randrange(self.a.partitions)
        log(f"  kill -9 of node {victim}, the active controller (epoch {epoch}) and leader of "
            f"partition {q}" + ("" if led else " (it led none: a partition at random)"))
        t0 = ms_now()
        self.cluster.kill(victim)
        creating = self.create_during(f"ft-{len(self.created)}-{t0}")
        self.controller_failover("bckill", victim, epoch, t0)
        if led:
            self.failover("bckill", q, victim, t0)
        else:
            self.client_resume("bckill", q, t0)
        creating.join()
        self.cluster.start([victim], "restart after kill -9 of the active controller's node")

    def heal(self) -> bool:
        t0 = time.time()
        mark = ms_now()
        healthy = self.cluster.wait_for(
            lambda live, parts: self.cluster.healthy(live, parts) and
            self.cluster.active_controller()[0] >= 0, self.a.heal_timeout, 0.1)
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
            f"acknowledging, an active controller)")
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
    from fault_cluster import node_ids
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
        faults = a.only.split(",") if a.only else [
            f for f in FAULTS if a.controllers > 1 or f not in CONTROLLER_FAULTS]
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
        topic_problems = cluster.check_topics(loop.created)
        loop.problems += topic_problems
        log(f"{len(loop.created)} topics created through the faults: "
            f"{'each in every broker' + chr(39) + 's Metadata once' if not topic_problems else 'see the problems'}")
        log_problems, summary = cluster.compare_metadata_logs()
        loop.problems += log_problems
        log(f"controllers' metadata logs: {summary}"
            f"{'; identical' if not log_problems else ''}")
        if a.secure:
            secure_problems, lines = cluster.check_secure()
            for line in lines:
                log(f"secure: {line}")
            loop.problems += secure_problems
            log("secure: every node logged in to its peers with PLAIN over TLS, no failed "
                "login, the authorizer on, no Kafka answer in clear on a secured port"
                if not secure_problems else "secure: see the problems")
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
    for kind in ("kill", "isolate", "bckill"):
        log(f"failover {kind} (fault -> first acknowledged produce on the new leader): "
            f"{fig(loop.failover_ms.get(kind, []))}; new leader in Metadata: "
            f"{fig(loop.moved_ms.get(kind, []))}")
    for kind in CONTROLLER_FAULTS:
        log(f"controller {kind}: a new active controller after "
            f"{fig(loop.controller_ms.get(kind, []))}"
            + ("" if kind == "bckill" else f"; the fault's partition acknowledged after "
                                           f"{fig(loop.failover_ms.get(kind, []))}"))
    log("client-visible failover (fault -> first acknowledged produce on the fault's "
        "partition): " + "; ".join(f"{k} {fig(v)}" for k, v in sorted(loop.failover_ms.items())))
    for name, per in sorted(loop.per_client_resume().items()):
        log(f"  producer {name}" + (" (librdkafka defaults)" if a.client_defaults and
                                    name != "java" else "") + ": "
            + "; ".join(f"{k} {fig(v)}" for k, v in sorted(per.items())))
    log(f"power cut (followers' restart -> one leads the partition): "
        f"{fig(loop.moved_ms['powercut'])}; cuts {loop.cut_totals}")
    log(f"slow follower: out of the ISR after {fig(loop.slow_out_ms)}; back in every ISR after "
        f"{fig(loop.slow_back_ms)}")
    log(f"heal (fault over -> healthy and acknowledging): {fig(loop.heal_ms)}")
    if loop.client_stalls:
        log(f"client stalls (the new leader acknowledged a fresh client, the running clients "
            f"not within the failover bound): {len(loop.client_stalls)}: "
            f"{', '.join(loop.client_stalls)}")
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
    ap.add_argument("--controllers", type=int, choices=[1, 3], default=3,
                    help="a quorum of 3 controllers (default) or one")
    ap.add_argument("--combined", action="store_true",
                    help="3 nodes, each a voter and a broker (process.roles=broker,controller)")
    ap.add_argument("--secure", action="store_true",
                    help="the inter-broker and controller listeners SASL_SSL (PLAIN), the "
                         "authorizer on; clients on PLAINTEXT")
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
    ap.add_argument("--client-defaults", action="store_true",
                    help="the librdkafka producers keep librdkafka's request.timeout.ms (30 s) "
                         "and reconnect.backoff.max.ms (10 s): the failover a default client "
                         "sees (raise --failover-timeout: an isolation then waits out 30 s)")
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
    allowed = FAULTS if a.controllers > 1 else [f for f in FAULTS if f not in CONTROLLER_FAULTS]
    bad = [f for f in a.only.split(",") if f and f not in allowed]
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


def run_guarded(run, a, work: str, kept_note: str = "") -> int:
    """run(a, work) with every way out turned into an exit code and logged (a Fail, a harness
    error with its trace, SIGINT, SIGTERM); the work dir is kept when it failed or --keep."""
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
        log(f"logs and data kept in {work}{kept_note}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return rc


def attempt_once(a) -> int:
    work = tempfile.mkdtemp(prefix="samsa-faults-")
    log(f"seed {a.seed}, {a.cycles} cycles of {a.only or ','.join(FAULTS)}"
        f"{' (--secure: SASL_SSL between the nodes, authorizer on)' if a.secure else ''}; "
        f"work dir {work}")
    return run_guarded(run, a, work, f" (reproduce with --seed {a.seed})")


if __name__ == "__main__":
    sys.exit(main())
