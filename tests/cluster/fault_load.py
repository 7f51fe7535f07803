"""The fault test's load (fault_test.py): the producers and the consumer it runs as
processes (fault_clients.py, tests/clients/java/FaultProducer.java), stopped together through
stop files, and AckTail, which reads the producers' acknowledgements as they are written."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import fault_check
import fault_net
from cluster_harness import BROKERS, log

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PYTHON = "/usr/bin/python3"  # Debian's: sees python3-confluent-kafka
JAVA_PRODUCER = os.path.join(ROOT, "tests", "clients", "java", "FaultProducer.java")
JAVA_LOG = os.path.join(ROOT, "tests", "clients", "java", "log4j2-stderr.properties")


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

    def first_after(self, partition: int, ms: int, path: str | None = None) -> int | None:
        """The first acknowledgement on the partition after ms, by any producer (or the one
        writing `path`)."""
        self.poll()
        later = [t for p, per in self.acks.items() if path in (None, p)
                 for t in per.get(partition, []) if t > ms]
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
                                 "--rate", str(a.rate), "--tag", name,
                                 "--delivery-timeout-ms", str(a.delivery_timeout_ms)]
            if a.client_defaults and name != "java":
                producing.append("--client-defaults")
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
