#!/usr/bin/env python3
"""Bad input on samsad's admin socket (DESIGN.md decision 11) while a real Kafka producer keeps
producing: garbage, malformed and non-object JSON, a 10 MiB line, nesting bombs, unknown
commands, arguments of the wrong type, pipelined requests, a client that connects and never
writes, one that stops mid-line, more connections than allowed, and peers that are not allowed
(SO_PEERCRED). Each must get an error line or be closed after the idle timeout; samsactl must
keep working and the producer must see every record acknowledged, with no stall.

  samsactl_socket_test.py --samsad PATH --samsactl PATH
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import admin_harness as h  # noqa: E402

check = h.Checks("admin-socket")
failures = check.failures
IDLE_MS = 2000


class Admin:
    """One connection to the admin socket, reading answer lines."""

    def __init__(self, path: str, timeout: float = 10):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.buf = b""

    def send(self, data: bytes):
        self.s.sendall(data)

    def line(self) -> dict | None:
        while b"\n" not in self.buf:
            try:
                chunk = self.s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                return None
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def ask(self, cmd: str, args=None, v=1) -> dict | None:
        req = {"v": v, "cmd": cmd}
        if args is not None:
            req["args"] = args
        self.send(json.dumps(req).encode() + b"\n")
        return self.line()

    def closed_within(self, seconds: float) -> float | None:
        """Seconds until the daemon closed the connection, None if it did not."""
        start = time.monotonic()
        self.s.settimeout(seconds)
        try:
            while True:
                chunk = self.s.recv(65536)
                if not chunk:
                    return time.monotonic() - start
        except socket.timeout:
            return None
        except ConnectionResetError:
            return time.monotonic() - start

    def close(self):
        self.s.close()


def error_code(ans: dict | None) -> str | None:
    if not ans or ans.get("ok") is not False:
        return None
    return ans.get("error", {}).get("code")


class Producer(threading.Thread):
    """confluent-kafka producer, acks=all, one record every 5 ms until stopped."""

    def __init__(self, port: int, topic: str):
        super().__init__(daemon=True)
        from confluent_kafka import Producer as P
        self.p = P({"bootstrap.servers": f"127.0.0.1:{port}", "acks": "all",
                    "linger.ms": 0, "message.timeout.ms": 20000})
        self.topic = topic
        self.stop_flag = threading.Event()
        self.sent = 0
        self.acked = 0
        self.errors: list[str] = []
        self.ack_times: list[float] = []

    def _cb(self, err, msg):
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked += 1
            self.ack_times.append(time.monotonic())

    def run(self):
        while not self.stop_flag.is_set():
            self.p.produce(self.topic, value=b"v%d" % self.sent, callback=self._cb)
            self.sent += 1
            self.p.poll(0.005)
        self.p.flush(30)


def samsactl(a, sock: str, *args, user: str | None = None) -> subprocess.CompletedProcess:
    binary = a.samsactl
    if user:
        # Another user may not enter the build tree (a checkout under a 0700 folder): it runs a
        # copy in the work dir, which is 0755.
        binary = os.path.join(os.path.dirname(sock), "samsactl")
        if not os.path.exists(binary):
            shutil.copy2(a.samsactl, binary)
    cmd = [binary, "--socket", sock, *args]
    if user:
        cmd = ["runuser", "-u", user, "--", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samsad", required=True)
    ap.add_argument("--samsactl", required=True)
    a = ap.parse_args()
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        print("[admin-socket] python3-confluent-kafka is missing", flush=True)
        return 1 if os.environ.get("CI") == "true" else 77

    work = tempfile.mkdtemp(prefix="samsa-admin-")
    os.chmod(work, 0o755)  # so other users reach the socket's own permission check
    sock = os.path.join(work, "admin.sock")
    broker = h.SamsadProcess(a.samsad, work, [f"samsa.admin.timeout.ms={IDLE_MS}",
                                              "num.partitions=1"])
    port = broker.port
    broker.start(wait=False)  # samsactl status below waits
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            r = samsactl(a, sock, "status")
            if r.returncode == 0 and "serving" in r.stdout:
                break
            time.sleep(0.2)
        check(r.returncode == 0, f"samsactl status answers once samsad serves (rc {r.returncode})")
        st = os.stat(sock)
        check(oct(st.st_mode & 0o777) == "0o660", f"socket mode is 0660 ({oct(st.st_mode & 0o777)})")

        prod = Producer(port, "admin-load")
        prod.start()
        time.sleep(1.0)

        # --- each bad input on its own connection, then the same connection must still work ---
        cases = [
            ("garbage", b"\x00\xff\xfe garbage \x01\n", "bad_request"),
            ("truncated JSON", b'{"v":1,"cmd":\n', "bad_request"),
            ("array", b"[1,2,3]\n", "bad_request"),
            ("string", b'"status"\n', "bad_request"),
            ("null", b"null\n", "bad_request"),
            ("number", b"12345678901234567890123\n", "bad_request"),
            ("no version", b'{"cmd":"status"}\n', "bad_request"),
            ("version 2", b'{"v":2,"cmd":"status"}\n', "unsupported_version"),
            ("version as string", b'{"v":"1","cmd":"status"}\n', "bad_request"),
            ("cmd not a string", b'{"v":1,"cmd":123}\n', "bad_request"),
            ("args not an object", b'{"v":1,"cmd":"status","args":"x"}\n', "invalid_argument"),
            ("unknown command", b'{"v":1,"cmd":"rm -rf /"}\n', "unknown_command"),
            ("nesting bomb", b"[" * 100000 + b"\n", "bad_request"),
            ("object nesting", b'{"a":' * 50 + b"1" + b"}" * 50 + b"\n", "bad_request"),
            ("control character in string", b'{"v":1,"cmd":"sta\x01tus"}\n', "bad_request"),
            ("lone surrogate", b'{"v":1,"cmd":"\\ud800"}\n', "bad_request"),
            ("invalid UTF-8 command", b'{"v":1,"cmd":"\xc3\x28"}\n', "unknown_command"),
            ("config.get key of the wrong type", b'{"v":1,"cmd":"config.get","args":{"key":5}}\n',
             "invalid_argument"),
            ("config.get unknown key", b'{"v":1,"cmd":"config.get","args":{"key":"no.such"}}\n',
             "not_found"),
            ("config.set non-dynamic key",
             b'{"v":1,"cmd":"config.set","args":{"key":"listeners","value":"x"}}\n',
             "invalid_config"),
            ("config.set invalid value",
             b'{"v":1,"cmd":"config.set","args":{"key":"num.partitions","value":"-3"}}\n',
             "invalid_config"),
            ("topic.describe topic as array",
             b'{"v":1,"cmd":"topic.describe","args":{"topic":["a"]}}\n', "invalid_argument"),
            ("topic.describe missing topic", b'{"v":1,"cmd":"topic.describe","args":{}}\n',
             "invalid_argument"),
            ("topic.create partitions as string",
             b'{"v":1,"cmd":"topic.create","args":{"topic":"x","partitions":"3"}}\n',
             "invalid_argument"),
            ("topic.create partitions below 1",
             b'{"v":1,"cmd":"topic.create","args":{"topic":"x","partitions":0}}\n',
             "invalid_argument"),
            ("topic.create config value not a string",
             b'{"v":1,"cmd":"topic.create","args":{"topic":"x","configs":{"retention.ms":5}}}\n',
             "invalid_argument"),
            ("topic.create bad name",
             b'{"v":1,"cmd":"topic.create","args":{"topic":"../../etc"}}\n',
             "invalid_topic_exception"),
            ("partition.describe float partition",
             b'{"v":1,"cmd":"partition.describe","args":{"topic":"admin-load","partition":1.5}}\n',
             "invalid_argument"),
            ("log.level bogus", b'{"v":1,"cmd":"log.level","args":{"level":"loud"}}\n',
             "invalid_argument"),
            ("testing hook while hooks are off",
             b'{"v":1,"cmd":"testing.stall","args":{"seconds":30}}\n', "unavailable"),
            ("group.describe unknown group",
             b'{"v":1,"cmd":"group.describe","args":{"group":"nope"}}\n', "not_found"),
        ]
        for what, data, want in cases:
            c = Admin(sock)
            c.send(data)
            ans = c.line()
            check(error_code(ans) == want, f"{what}: error {error_code(ans)} (want {want})")
            after = c.ask("status")
            check(bool(after and after.get("ok")), f"{what}: the connection still answers status")
            c.close()

        # --- a 10 MiB line: line_too_long, the rest dropped, the connection still usable ---
        c = Admin(sock, timeout=30)
        big = b'{"v":1,"cmd":"status","args":{"pad":"' + b"x" * (10 << 20) + b'"}}\n'
        sender = threading.Thread(target=lambda: c.send(big), daemon=True)
        t0 = time.monotonic()
        sender.start()
        ans = c.line()
        sender.join(30)
        check(error_code(ans) == "line_too_long", f"10 MiB line: {error_code(ans)}")
        check(not sender.is_alive(), f"10 MiB line read and dropped in {time.monotonic() - t0:.1f} s")
        after = c.ask("status")
        check(bool(after and after.get("ok")), "after the 10 MiB line the connection still answers")
        c.close()

        # --- just under the limit is served ---
        c = Admin(sock)
        near = b'{"v":1,"cmd":"status","args":{"pad":"' + b"y" * ((1 << 20) - 100) + b'"}}\n'
        c.send(near)
        ans = c.line()
        check(bool(ans and ans.get("ok")), f"a line of {len(near)} bytes (under 1 MiB) is served")
        c.close()

        # --- pipelined requests are answered in order ---
        c = Admin(sock)
        c.send(b'{"v":1,"cmd":"log.level"}\n{"v":1,"cmd":"nope"}\n\n{"v":1,"cmd":"config.get",'
               b'"args":{"key":"num.partitions"}}\n')
        a1, a2, a3 = c.line(), c.line(), c.line()
        check(bool(a1 and a1.get("ok") and "level" in a1["result"]), "pipelined 1: log.level")
        check(error_code(a2) == "unknown_command", "pipelined 2: unknown_command")
        check(bool(a3 and a3.get("ok") and a3["result"]["configs"][0]["key"] == "num.partitions"),
              "pipelined 3: config.get")
        c.close()

        # --- silent and stalled clients are closed after the idle timeout ---
        silent = Admin(sock)
        took = silent.closed_within(IDLE_MS / 1000 + 5)
        check(took is not None and took < IDLE_MS / 1000 + 3,
              f"a client that never writes is closed after {took}")
        half = Admin(sock)
        half.send(b'{"v":1,"cmd":"sta')
        took = half.closed_within(IDLE_MS / 1000 + 5)
        check(took is not None, f"a client that stops mid-line is closed after {took}")
        # A client that asks and disconnects before the answer.
        gone = Admin(sock)
        gone.send(b'{"v":1,"cmd":"metrics"}\n')
        gone.close()

        # --- more connections than allowed: the extra ones are closed, the rest served ---
        many = []
        for _ in range(80):
            try:
                many.append(Admin(sock, timeout=3))
            except OSError:
                break
        time.sleep(0.3)
        refused = 0
        for m in many:
            m.s.settimeout(0.2)
            try:
                if m.s.recv(1) == b"":
                    refused += 1
            except (socket.timeout, ConnectionResetError):
                pass
        check(refused >= len(many) - 64, f"{len(many)} connections: {refused} closed at once")
        for m in many:
            m.close()
        time.sleep(0.2)
        r = samsactl(a, sock, "status")
        check(r.returncode == 0, "samsactl status works after the connection flood")

        # --- peers: root is served; nobody is refused with exit code 3 ---
        try:
            pwd.getpwnam("nobody")
            have_nobody = True
        except KeyError:
            have_nobody = False
        if have_nobody:
            r = samsactl(a, sock, "status", user="nobody")
            check(r.returncode == 3, f"nobody (socket 0660): exit {r.returncode}, {r.stderr.strip()}")
            check("permission denied" in r.stderr, "the message says permission denied")
            # With the file opened to everyone, SO_PEERCRED is what refuses.
            os.chmod(sock, 0o666)
            r = samsactl(a, sock, "status", user="nobody")
            check(r.returncode == 3, f"nobody (socket 0666): exit {r.returncode}, {r.stderr.strip()}")
            check("group samsa" in r.stderr, "the message names the group to join")
            os.chmod(sock, 0o660)
        r = samsactl(a, sock, "--json", "status")
        check(r.returncode == 0 and json.loads(r.stdout)["state"] == "serving",
              "samsactl --json status as root")
        r = samsactl(a, sock, "config", "get", "no.such.key")
        check(r.returncode == 1, f"an error answer exits 1 ({r.returncode})")
        r = samsactl(a, sock, "topic", "describe")
        check(r.returncode == 2, f"a usage error exits 2 ({r.returncode})")
        r = samsactl(a, os.path.join(work, "nothing.sock"), "status")
        check(r.returncode == 3 and "not running" in r.stderr,
              f"no daemon: exit {r.returncode}, {r.stderr.strip()}")

        # --- the producer never noticed ---
        prod.stop_flag.set()
        prod.join(60)
        gaps = [b - a_ for a_, b in zip(prod.ack_times, prod.ack_times[1:])]
        worst = max(gaps) if gaps else 0
        check(not prod.errors, f"producer errors: {prod.errors[:3]}")
        check(prod.acked == prod.sent and prod.sent > 100,
              f"every record acknowledged ({prod.acked}/{prod.sent})")
        check(worst < 1.0, f"longest gap between acknowledgements {worst * 1000:.0f} ms")
        from confluent_kafka import Consumer, TopicPartition
        cons = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "admin-check",
                         "enable.auto.commit": False})
        cons.assign([TopicPartition("admin-load", 0, 0)])
        got = 0
        end = time.monotonic() + 20
        while got < prod.acked and time.monotonic() < end:
            for m in cons.consume(1000, 1.0):
                if m.error() is None:
                    got += 1
        cons.close()
        check(got == prod.acked, f"consumed every acknowledged record ({got}/{prod.acked})")
        check(broker.alive(), "samsad still runs")
    finally:
        if broker.alive():
            broker.stop()
            rc = broker.proc.returncode
            check(rc == 0, f"samsad stopped cleanly (exit {rc})")
        check(not os.path.exists(sock), "the socket file is gone after the stop")
        text = broker.log()
        if failures:
            print("---- samsad log ----\n" + text[-6000:], flush=True)
    print(f"[admin-socket] {len(failures)} failure(s)", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
