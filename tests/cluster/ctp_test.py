#!/usr/bin/env python3
"""Exactly once through faults (issue 21): a consume-transform-produce loop on Apache Kafka's
Java client (tests/clients/java/CtpLoop.java: read_committed input, one transaction per poll
with its output records and its input offsets) on a cluster of 1 controller and 3 brokers on
loopback, through a seeded sequence of faults:

  producer  kill -9 of the loop's JVM; a new incarnation (same transactional.id, same static
            group member) fences the old one and carries on from the committed offsets;
  coord     kill -9 of the broker that coordinates the loop's transactional id (FindCoordinator
            key type 1); __transaction_state's leadership moves, the broker restarts;
  cut       every TCP connection of the loop's JVM is cut (ss -K); the client reconnects.

  ctp_test.py --samsad PATH [--faults N | --full] [--records N] [--seed S] [--keep]

Checked:
- every input record appears exactly once in the output read with read_committed at the end,
  and a read_committed consumer reading the output during the run never sees a record twice
  (it would have seen an aborted one, or a duplicate commit);
- no transaction hangs: after every fault, the output's last stable offset passes the high
  watermark it had at the fault within transaction.timeout.ms plus the broker's restart;
- the loop commits again after every fault.
CI size: 20 faults over 6,000 records; --full: 200 faults over 60,000 records. Exit 77 (skip)
when a client is missing, except under CI=true where that fails.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cluster_harness import (check, free_port, log, loopback_cluster,  # noqa: E402
                             prometheus, skip_or_fail)

import kproto  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
KAFKA_SH = os.path.join(ROOT, "perf", "vs-kafka", "kafka.sh")
CTP_JAVA = os.path.join(ROOT, "tests", "clients", "java", "CtpLoop.java")
PARTS = 3
TXN_ID = "ctp-loop"
TXN_TIMEOUT_MS = 10000


def find_txn_coordinator(brokers: dict, alive: set[int]) -> int | None:
    """The node FindCoordinator (key type 1) names for the loop's transactional id."""
    k = kproto.Kafka()
    for b in sorted(alive):
        try:
            conn = kproto.Conn("127.0.0.1", brokers[b].port, timeout=3)
            try:
                conn.send(k.encode_request(10, 3, 1, "ctp-test", {"Key": TXN_ID, "KeyType": 1}))
                r = k.decode_response(10, 3, conn.recv(3))[1]
            finally:
                conn.close()
            if r["ErrorCode"] == 0:
                return r["NodeId"]
        except Exception:
            continue
    return None


def cut_connections(pid: int) -> int:
    """Cuts every TCP connection process `pid` has (ss -K on its local ports)."""
    r = subprocess.run(["ss", "-tnpH"], capture_output=True, text=True)
    ports = []
    for line in r.stdout.splitlines():
        if f"pid={pid}," not in line:
            continue
        local = line.split()[3]
        ports.append(local.rsplit(":", 1)[1])
    for port in ports:
        subprocess.run(["ss", "-K", "src", "127.0.0.1", "sport", "=", f":{port}"],
                       capture_output=True)
    return len(ports)


class Loop:
    """The Java loop's process: started, killed and restarted; its output kept in the work dir."""

    def __init__(self, classpath: str, boot: str, work: str):
        self.classpath, self.boot, self.work = classpath, boot, work
        self.proc: subprocess.Popen | None = None
        self.n = 0
        self.last_commit = 0.0
        self.committed = 0

    def start(self):
        self.n += 1
        out = open(os.path.join(self.work, f"ctp-{self.n}.log"), "w")
        env = dict(os.environ, JAVA_TOOL_OPTIONS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        self.proc = subprocess.Popen(
            ["java", "-cp", self.classpath, CTP_JAVA, "--bootstrap", self.boot,
             "--input", "ctp-in", "--output", "ctp-out", "--group", "ctp", "--txn-id", TXN_ID,
             "--instance", "ctp-1", "--txn-timeout-ms", str(TXN_TIMEOUT_MS)],
            stdout=subprocess.PIPE, stderr=out, text=True, env=env)
        threading.Thread(target=self._read, args=(self.proc,), daemon=True).start()

    def _read(self, proc):
        for line in proc.stdout:
            if line.startswith("committed "):
                self.last_commit = time.time()
                self.committed += 1

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        if self.alive():
            self.proc.kill()
            self.proc.wait()


class Watch(threading.Thread):
    """A read_committed consumer of the output during the run: a value seen twice is a
    duplicate commit, or an aborted record let through."""

    def __init__(self, boot: str):
        super().__init__(daemon=True)
        self.boot = boot
        self.seen: set[str] = set()
        self.twice: list[str] = []
        self.stop = False

    def run(self):
        from confluent_kafka import Consumer
        c = Consumer({"bootstrap.servers": self.boot, "group.id": f"watch-{time.time()}",
                      "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                      "enable.auto.commit": False})
        c.subscribe(["ctp-out"])
        while not self.stop:
            m = c.poll(0.2)
            if m is None or m.error():
                continue
            v = m.value().decode()
            if v in self.seen:
                self.twice.append(v)
            self.seen.add(v)
        c.close()


def offsets(boot: str, isolation: str) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": boot, "group.id": "offsets", "isolation.level": isolation})
    try:
        return [c.get_watermark_offsets(TopicPartition("ctp-out", p), timeout=5)[1]
                for p in range(PARTS)]
    finally:
        c.close()


def read_all(boot: str, isolation: str, timeout: float = 120) -> list[str]:
    """Every record of the output the isolation level shows, to its end (the last offsets
    may be markers, which no consumer sees: the read ends 5 s after the last record once every
    partition is within a few offsets of its end)."""
    from confluent_kafka import Consumer
    ends = offsets(boot, isolation)
    c = Consumer({"bootstrap.servers": boot, "group.id": f"final-{time.time()}",
                  "isolation.level": isolation, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.subscribe(["ctp-out"])
    got: list[str] = []
    eof: set[int] = set()
    end = time.time() + timeout
    while time.time() < end and len(eof) < PARTS:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == -191:  # _PARTITION_EOF: at the end the consumer may read
                eof.add(m.partition())
            continue
        eof.discard(m.partition())
        got.append(m.value().decode())
    c.close()
    log(f"read {len(got)} records ({isolation}) of ends {ends}")
    return got


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samsad", required=True)
    ap.add_argument("--faults", type=int, default=20)
    ap.add_argument("--records", type=int, default=6000)
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    if a.full:
        a.faults, a.records = 200, 60000
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    log(f"seed {seed}: {a.faults} faults over {a.records} records")
    try:
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient, NewTopic
    except ImportError:
        return skip_or_fail(log, "confluent-kafka is missing", "the test")
    if not shutil.which("java") or not shutil.which("ss"):
        return skip_or_fail(log, "java or ss is missing", "the test")
    r = subprocess.run(["bash", KAFKA_SH, "classpath"], capture_output=True, text=True)
    classpath = r.stdout.strip()
    if r.returncode or not os.path.isdir(os.path.dirname(classpath)):
        return skip_or_fail(log, "Kafka's client jars (bash perf/vs-kafka/kafka.sh fetch)",
                            "the test")

    root = tempfile.mkdtemp(prefix="samsa-ctp-")
    controller, brokers = loopback_cluster(
        a.samsad, root, common={
            "samsa.reactors": "1", "offsets.topic.num.partitions": "3",
            "offsets.topic.replication.factor": "3",
            "transaction.state.log.num.partitions": "3",
            "transaction.state.log.replication.factor": "3",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
            "group.initial.rebalance.delay.ms": "0"},
        broker_props={"samsa.metrics.listen": lambda: f"127.0.0.1:{free_port()}"})
    nodes = [controller] + list(brokers.values())
    loop: Loop | None = None
    watch: Watch | None = None
    ok = False
    try:
        controller.start()
        controller.wait_listening()
        for b in brokers.values():
            b.start()
        for b in brokers.values():
            b.wait_listening()
        boot = ",".join(f"127.0.0.1:{b.port}" for b in brokers.values())
        admin = AdminClient({"bootstrap.servers": boot})
        cfg = {"min.insync.replicas": "2"}
        for f in admin.create_topics([NewTopic("ctp-in", PARTS, 3, config=cfg),
                                      NewTopic("ctp-out", PARTS, 3, config=cfg)]).values():
            f.result(30)
        time.sleep(1)
        # The input arrives throughout the faults (about 3 s of it per fault), so every fault
        # lands on a loop with work in hand.
        feeder_ok = [False]

        def feed():
            p = Producer({"bootstrap.servers": boot, "enable.idempotence": True,
                          "linger.ms": 5, "acks": "all"})
            per_s = max(50, int(a.records / max(1, a.faults * 3.5)))
            t0 = time.time()
            for i in range(a.records):
                p.produce("ctp-in", value=f"in-{i}".encode(), partition=i % PARTS)
                if i % 50 == 0:
                    p.poll(0)
                    ahead = t0 + i / per_s - time.time()
                    if ahead > 0:
                        time.sleep(ahead)
            feeder_ok[0] = p.flush(120) == 0

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()

        loop = Loop(classpath, boot, root)
        loop.start()
        watch = Watch(boot)
        watch.start()
        end = time.time() + 90
        while loop.committed == 0 and time.time() < end:
            time.sleep(0.2)
        check(loop.committed > 0, "the loop commits transactions")

        alive = set(brokers)
        hang_waits = []
        kinds = {"producer": 0, "coord": 0, "cut": 0}
        for k in range(a.faults):
            time.sleep(rng.uniform(0.5, 2.0))
            kind = rng.choice(["producer", "coord", "cut"])
            before = offsets(boot, "read_uncommitted")
            t0 = time.time()
            restart = None
            if kind == "producer":
                loop.kill()
                loop.start()
            elif kind == "coord":
                victim = find_txn_coordinator(brokers, alive)
                if victim is None:
                    kind = "cut"
                else:
                    brokers[victim].kill9()
                    alive.discard(victim)
                    restart = victim
            if kind == "cut":
                cut_connections(loop.proc.pid)
            kinds[kind] += 1
            if restart is not None:
                time.sleep(rng.uniform(1.0, 3.0))
                brokers[restart].start()
                brokers[restart].wait_listening()
                alive.add(restart)
            if not loop.alive():
                loop.start()
            # Nothing written before the fault stays undecided past the timeout.
            limit = TXN_TIMEOUT_MS / 1000 + 30
            while time.time() - t0 < limit:
                try:
                    lso = offsets(boot, "read_committed")
                    if all(lso[i] >= before[i] for i in range(PARTS)):
                        break
                except Exception:
                    pass
                time.sleep(0.2)
            waited = time.time() - t0
            hang_waits.append(waited)
            check(waited < limit, f"fault {k + 1} ({kind}): the output's LSO passed its HW at the "
                                  f"fault ({before}) after {waited:.1f} s")
            commits = loop.committed
            end = time.time() + 60
            while (loop.committed == commits and time.time() < end and
                   len(watch.seen) < a.records):
                if not loop.alive():
                    loop.start()
                time.sleep(0.2)
            check(loop.committed > commits or len(watch.seen) >= a.records,
                  f"fault {k + 1} ({kind}): the loop commits again "
                  f"({time.time() - t0:.1f} s after the fault)")
        log(f"faults: {kinds}; LSO caught up after a fault in max "
            f"{max(hang_waits):.1f} s, median {sorted(hang_waits)[len(hang_waits) // 2]:.1f} s")

        feeder.join(300)
        check(feeder_ok[0], f"{a.records} input records written (acks=all)")
        end = time.time() + 180
        while len(watch.seen) < a.records and time.time() < end:
            if not loop.alive():
                loop.start()
            time.sleep(0.5)
        watch.stop = True
        loop.kill()
        got = read_all(boot, "read_committed")
        want = {f"out|in-{i}" for i in range(a.records)}
        dup = len(got) - len(set(got))
        missing = len(want - set(got))
        check(dup == 0 and missing == 0 and set(got) == want,
              f"every input record is in the output exactly once ({len(got)} read_committed, "
              f"{dup} duplicates, {missing} missing)")
        check(not watch.twice, f"the read_committed watcher never saw a record twice "
                               f"({len(watch.twice)}: {watch.twice[:3]})")
        # The Java 4.1 client takes transaction version 2 from ApiVersions: its adds come from
        # the partitions' leaders (inter-broker AddPartitionsToTxn), each EndTxn bumps the epoch.
        ended = 0.0
        for b in brokers.values():
            try:
                ended += prometheus(b).get("samsa_txn_coordinator_ended_v2_total", 0)
            except OSError:
                pass
        check(ended > 0, f"the loop used transaction version 2 ({ended:.0f} EndTxn v5 answered "
                         f"since the brokers' last starts)")
        unc = read_all(boot, "read_uncommitted")
        log(f"{len(unc) - len(got)} aborted records in the output (read_uncommitted only), "
            f"{loop.n} loop incarnations")
        ok = True
    except AssertionError as e:
        log(f"FAIL: {e}")
    finally:
        if watch:
            watch.stop = True
        if loop:
            loop.kill()
        for n in nodes:
            n.stop()
        if ok and not a.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            log(f"work dir kept: {root}")
    log("PASS" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
