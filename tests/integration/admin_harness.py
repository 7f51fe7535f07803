"""What the integration tests share: samsad started from the build tree on a free loopback
port with its work dir (data/, admin.sock, a log file), waiting for its port, stopping it; topic
creation through confluent-kafka; free ports, log lines and skip-or-fail under CI; and, for the
admin tests, Apache Kafka 4.1.1's CLI tools through perf/vs-kafka/kafka.sh, a hand encoder for
the requests no installed tool sends, and a check() that counts failures.

Not a test itself; imported by the tests in this folder and by tests/clients/kgolden.py. Only
the standard library (confluent-kafka is imported where it is used), so that any Python the
tests run under can import it.
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


def port_open(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def logger(tag: str, since: float | None = None, clock: bool = False):
    """A log function printing `[tag] msg` (with `since`: seconds since then after the tag;
    with `clock`: the wall-clock time), flushed at once so it interleaves with child output."""

    def log(msg: str):
        if since is not None:
            print(f"[{tag} {time.monotonic() - since:6.1f}s] {msg}", flush=True)
        elif clock:
            print(f"[{tag} {time.strftime('%H:%M:%S')}] {msg}", flush=True)
        else:
            print(f"[{tag}] {msg}", flush=True)

    return log


def skip_or_fail(log, why: str, what: str = "a client") -> int:
    """Something the test needs is missing: skip (77), or fail under CI=true."""
    if os.environ.get("CI") == "true":
        log(f"FAIL: {what} cannot run and CI=true: {why}")
        return 1
    log(f"SKIP: {why}")
    return SKIP


def metrics_samples(address: str, timeout: float = 10) -> dict[str, float]:
    """Every sample samsad's Prometheus listener (`samsa.metrics.listen`, host:port) serves,
    keyed by its name and labels as written (`samsa_reactor_stalls_total{reactor="0"}`)."""
    import urllib.request
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=timeout) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def create_topics(conf: dict | str, topics: dict[str, int], timeout: float = 30,
                  request_timeout: float | None = None):
    """Creates topics (name -> partitions, replication factor 1) with confluent-kafka's
    AdminClient; raises what the broker answered otherwise."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": conf} if isinstance(conf, str) else conf)
    kw = {} if request_timeout is None else {"request_timeout": request_timeout}
    futures = admin.create_topics([NewTopic(n, p, 1) for n, p in topics.items()], **kw)
    for f in futures.values():
        f.result(timeout=timeout)


class SamsadProcess:
    """samsad from the build tree on `host:port` with its work dir: the log dirs in work/data,
    the admin socket work/admin.sock, stdout and stderr appended to work/<log_name>. start()
    waits for the port; start() again after stop() or a kill keeps the port and the data.

    `overrides` (KEY=VALUE, after the ones above, last one wins) and `advertised_port` (an
    advertised listener on the same host, last of all) complete the command line.
    `new_session`: samsad in a session of its own, so that a signal to the test's process group
    does not reach it before the test stops it."""

    def __init__(self, binary: str, work: str, overrides: list[str] | None = None,
                 port: int | None = None, host: str = "127.0.0.1",
                 advertised_port: int | None = None, log_name: str = "samsad.log",
                 new_session: bool = False):
        self.binary, self.work, self.host = binary, work, host
        self.port = port or free_port()
        self.data = os.path.join(work, "data")
        self.log_path = os.path.join(work, log_name)
        self.cmd = [binary,
                    "--override", f"listeners=PLAINTEXT://{host}:{self.port}",
                    "--override", f"log.dirs={self.data}",
                    "--override", f"samsa.admin.socket={os.path.join(work, 'admin.sock')}"]
        for kv in overrides or []:
            self.cmd += ["--override", kv]
        if advertised_port:
            self.cmd += ["--override",
                         f"advertised.listeners=PLAINTEXT://{host}:{advertised_port}"]
        self.new_session = new_session
        self.proc: subprocess.Popen | None = None
        self.logf = None
        self.stopped = False  # by stop(), exit code 0
        self.killed = False  # by stop(), after SIGTERM's timeout

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 60, interval: float = 0.05, wait: bool = True) -> float:
        """Starts samsad and (with `wait`) waits until it accepts on its port; the seconds that
        took. Raises RuntimeError (with the log's tail) if it exits or does not open the port in
        time."""
        t = time.monotonic()
        self.logf = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.cmd, stdout=self.logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=self.new_session)
        self.stopped = self.killed = False
        while wait and not port_open(self.port, self.host):
            if self.proc.poll() is not None:
                raise RuntimeError(f"samsad exited with {self.proc.returncode} during start-up; "
                                   f"{self.log_path}:\n{self.tail()}")
            if time.monotonic() - t > timeout:
                raise RuntimeError(f"samsad did not open {self.bootstrap} within {timeout:.0f}s; "
                                   f"{self.log_path}:\n{self.tail()}")
            time.sleep(interval)
        return time.monotonic() - t

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        """SIGKILL, and reaped (the data and the port stay for the next start())."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self._close_log()

    def stop(self, timeout: float = 30) -> str | None:
        """SIGTERM; None when samsad exits 0 in time (or was stopped so before), else what went
        wrong (after `timeout` it is killed)."""
        if self.proc is None or self.stopped:
            return None
        if self.proc.poll() is not None:
            self._close_log()
            return f"samsad had already exited with {self.proc.returncode}"
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self.killed = True
            return f"samsad did not exit within {timeout:.0f}s of SIGTERM (killed)"
        finally:
            self._close_log()
        if rc != 0:
            return f"samsad exited with {rc} after SIGTERM"
        self.stopped = True
        return None

    def _close_log(self):
        if self.logf:
            self.logf.close()
            self.logf = None

    def log(self) -> str:
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def tail(self, n: int = 30, prefix: str = "", skip: str | None = None) -> str:
        """The log's last n lines (each after `prefix`; lines containing `skip` left out)."""
        try:
            with open(self.log_path, "rb") as f:
                lines = f.read().decode(errors="replace").splitlines()[-n:]
        except OSError:
            return "(no samsad log)"
        return "\n".join(prefix + l for l in lines if not (skip and skip in l))


class Samsad(SamsadProcess):
    """The admin tests' samsad, started at once in a temporary work dir of its own, with
    settings as a dict; stop() returns the exit code; restart() keeps its data and port."""

    def __init__(self, binary: str, overrides: dict[str, str] | None = None,
                 work: str | None = None):
        settings = {
            "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.num.partitions": "4",
            "samsa.reactors": "2",
        }
        settings.update(overrides or {})
        super().__init__(binary, work or tempfile.mkdtemp(prefix="samsa-admin-"),
                         [f"{k}={v}" for k, v in settings.items()])
        self.start()

    def start(self, timeout: float = 30, interval: float = 0.05) -> float:
        return super().start(timeout, interval)

    def stop(self) -> int:
        super().stop(timeout=40)
        return self.proc.returncode if self.proc else 0

    def restart(self):
        self.stop()
        self.start()

    def rss_kib(self) -> int:
        return rss_kib(self.proc.pid)

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.work, ignore_errors=True)


def run_checked(checks: Checks, broker: Samsad, body) -> int:
    """Runs body(broker); then samsad must still run and exit 0 on SIGTERM. An exception in
    body is a failure, counted and raised on. The work dir goes on success, stays otherwise."""
    try:
        try:
            body(broker)
        except Exception as e:  # a broken answer is a failure, reported with the rest
            checks(False, f"unexpected {type(e).__name__}: {e}")
            raise
        checks(broker.proc.poll() is None, "samsad is still running")
        checks(broker.stop() == 0, "samsad exits 0 on SIGTERM")
    finally:
        rc = checks.finish()
        if rc == 0:
            broker.cleanup()
        else:
            broker.stop()
            print(f"[{checks.name}] work dir kept: {broker.work}", flush=True)
    return rc


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
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
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
    """One connection for hand-encoded requests, checking correlation ids."""

    def __init__(self, port: int, timeout: float = 60, client_id: str = "admin-test"):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.corr = 0
        self.client_id = client_id

    def send_raw(self, frame: bytes):
        self.s.sendall(struct.pack(">i", len(frame)) + frame)

    def recv_frame(self) -> bytes | None:
        """One size-prefixed frame, or None when the broker closed the connection."""
        hdr = self._recv(4)
        if hdr is None:
            return None
        return self._recv(struct.unpack(">i", hdr)[0])

    def request(self, key: int, ver: int, body: bytes, flexible: bool = False) -> bytes | None:
        """The response body (after correlation id and, for flexible versions, the header's
        tagged fields), or None when the broker closed the connection."""
        self.corr += 1
        h = struct.pack(">hhi", key, ver, self.corr) + s16(self.client_id)
        if flexible:
            h += TAGS
        try:
            self.send_raw(h + body)
            resp = self.recv_frame()
        except (ConnectionResetError, BrokenPipeError):
            return None
        if resp is None:
            return None
        corr = struct.unpack(">i", resp[:4])[0]
        assert corr == self.corr, f"correlation id {corr} != {self.corr}"
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

    def closed(self) -> bool:
        """Whether the broker closes the connection (within 5 s) without answering."""
        try:
            self.s.settimeout(5)
            return self.s.recv(1) == b""
        except OSError:  # reset, timeout
            return True

    def close(self):
        self.s.close()


def main_guard(fn) -> None:
    try:
        sys.exit(fn())
    except KeyboardInterrupt:
        sys.exit(130)
