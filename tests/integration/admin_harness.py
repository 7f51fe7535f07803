"""What the admin integration tests share: a samsad they start (free loopback port, temporary
data), Apache Kafka 4.1.1's CLI tools through perf/vs-kafka/kafka.sh, a hand encoder for the
requests no installed tool sends, and a check() that counts failures.

Not a test itself; imported by admin_tools_test.py and admin_limits_test.py.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
KAFKA_SH = os.path.join(ROOT, "perf", "vs-kafka", "kafka.sh")
SKIP = 77


class Checks:
    def __init__(self, name: str):
        self.name = name
        self.failures: list[str] = []
        self.t0 = time.time()

    def __call__(self, cond: bool, what: str) -> bool:
        print(f"[{self.name}] {'ok  ' if cond else 'FAIL'} {what}", flush=True)
        if not cond:
            self.failures.append(what)
        return cond

    def note(self, what: str):
        print(f"[{self.name}] {what}", flush=True)

    def finish(self) -> int:
        took = time.time() - self.t0
        if self.failures:
            print(f"[{self.name}] FAILED ({len(self.failures)}) in {took:.1f}s:", flush=True)
            for f in self.failures:
                print(f"[{self.name}]   {f}", flush=True)
            return 1
        print(f"[{self.name}] PASS in {took:.1f}s", flush=True)
        return 0


def missing(checks: Checks, why: str) -> int:
    """A client or tool is not installed: skip (77), or fail under CI=true."""
    if os.environ.get("CI") == "true":
        checks(False, f"required tool missing under CI=true: {why}")
        return 1
    print(f"[{checks.name}] SKIP: {why}", flush=True)
    return SKIP


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Samsad:
    """One samsad from the build tree; restart() keeps its data and port."""

    def __init__(self, binary: str, overrides: dict[str, str] | None = None, work: str | None = None):
        self.binary = binary
        self.work = work or tempfile.mkdtemp(prefix="samsa-admin-")
        self.data = os.path.join(self.work, "data")
        self.port = free_port()
        self.overrides = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": self.data,
            "samsa.admin.socket": os.path.join(self.work, "admin.sock"),
            "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.num.partitions": "4",
            "samsa.reactors": "2",
        }
        self.overrides.update(overrides or {})
        self.proc: subprocess.Popen | None = None
        self.log_path = os.path.join(self.work, "samsad.log")
        self.start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self):
        args = [self.binary]
        for k, v in self.overrides.items():
            args += ["--override", f"{k}={v}"]
        self.logf = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=self.logf, stderr=subprocess.STDOUT)
        end = time.time() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                break
            except OSError:
                if time.time() > end or self.proc.poll() is not None:
                    raise RuntimeError(f"samsad did not start; log in {self.log_path}")
                time.sleep(0.05)

    def stop(self) -> int:
        if not self.proc or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = -9
        self.logf.close()
        return rc

    def restart(self):
        self.stop()
        self.start()

    def rss_kib(self) -> int:
        return rss_kib(self.proc.pid)

    def log(self) -> str:
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.work, ignore_errors=True)


# --- Apache Kafka's CLI tools ---------------------------------------------------------------

def kafka_tools_available() -> str | None:
    """None when the tools can run, else why not."""
    if not shutil.which("java"):
        return "java not found (scripts/install-deps.sh installs openjdk-17-jdk-headless)"
    cache = os.environ.get("SAMSA_CACHE", os.path.expanduser("~/.cache/samsa"))
    if not os.path.exists(os.path.join(cache, "kafka-4.1.1", "libs", ".complete")):
        return "Kafka 4.1.1 jars not fetched (perf/vs-kafka/kafka.sh fetch)"
    return None


TOOLS = {
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
}


def tool(name: str, *args: str, stdin: str | None = None, timeout: float = 60) -> tuple[int, str]:
    """Runs a Kafka CLI tool; (exit code, stdout + stderr without the JVM's log noise)."""
    # Short-lived JVMs start faster without the optimizing compiler and with the serial GC.
    env = dict(os.environ, JAVA_TOOL_OPTIONS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
    r = subprocess.run(["bash", KAFKA_SH, "run", TOOLS[name], *args], input=stdin,
                       capture_output=True, text=True, timeout=timeout, env=env)
    out = "\n".join(l for l in (r.stdout + r.stderr).splitlines()
                    if " WARN " not in l and not l.startswith("SLF4J") and
                    not l.startswith("Picked up JAVA_TOOL_OPTIONS"))
    return r.returncode, out


# --- hand-encoded requests ------------------------------------------------------------------

def s16(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def uvarint(n: int) -> bytes:
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def cstr(s: str | None) -> bytes:
    """Compact (nullable) string of flexible versions."""
    if s is None:
        return b"\x00"
    b = s.encode()
    return uvarint(len(b) + 1) + b


def carr(items: list[bytes] | None) -> bytes:
    if items is None:
        return b"\x00"
    return uvarint(len(items) + 1) + b"".join(items)


TAGS = b"\x00"  # empty tagged fields


class Reader:
    def __init__(self, b: bytes, off: int = 0):
        self.b, self.off = b, off

    def take(self, fmt: str):
        v = struct.unpack_from(">" + fmt, self.b, self.off)
        self.off += struct.calcsize(">" + fmt)
        return v[0] if len(v) == 1 else v

    def uvarint(self) -> int:
        n = shift = 0
        while True:
            c = self.b[self.off]
            self.off += 1
            n |= (c & 0x7F) << shift
            shift += 7
            if not c & 0x80:
                return n

    def s16(self) -> str | None:
        n = self.take("h")
        if n < 0:
            return None
        s = self.b[self.off:self.off + n].decode()
        self.off += n
        return s

    def cstr(self) -> str | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        s = self.b[self.off:self.off + n].decode()
        self.off += n
        return s

    def carr_len(self) -> int:
        return self.uvarint() - 1

    def tags(self):
        for _ in range(self.uvarint()):
            self.uvarint()
            self.off += self.uvarint()


class Conn:
    def __init__(self, port: int, timeout: float = 60):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.corr = 0

    def request(self, key: int, ver: int, body: bytes, flexible: bool = False) -> bytes | None:
        """The response body (after correlation id and, for flexible versions, the header's
        tagged fields), or None when the broker closed the connection."""
        self.corr += 1
        h = struct.pack(">hhi", key, ver, self.corr) + s16("admin-test")
        if flexible:
            h += TAGS
        frame = h + body
        try:
            self.s.sendall(struct.pack(">i", len(frame)) + frame)
            hdr = self._recv(4)
            if hdr is None:
                return None
            resp = self._recv(struct.unpack(">i", hdr)[0])
        except (ConnectionResetError, BrokenPipeError):
            return None
        if resp is None:
            return None
        assert struct.unpack(">i", resp[:4])[0] == self.corr
        return resp[5:] if flexible and key != 18 else resp[4:]

    def _recv(self, n: int) -> bytes | None:
        out = b""
        while len(out) < n:
            try:
                c = self.s.recv(n - len(out))
            except (ConnectionResetError, socket.timeout):
                return None
            if not c:
                return None
            out += c
        return out

    def close(self):
        self.s.close()


def main_guard(fn) -> None:
    try:
        sys.exit(fn())
    except KeyboardInterrupt:
        sys.exit(130)
