#!/usr/bin/env python3
"""What a partition costs one broker (issue 23): a single-node samsad, --topics topics of
--per-topic partitions (default 1,000 x 100 = 100,000) created with raw CreateTopics requests
(--topics-per-request topics each), and:

  creation     partitions/s from the first CreateTopics to the last answer, and until every
               partition directory exists and a Produce to the last topic is acknowledged
  idle cost    RSS (/proc/PID/status VmRSS) and open fds (/proc/PID/fd) once idle, minus
               the same before the topics existed, per partition
  written      the same after one acks=all record went to every partition (--touch)
  restart      SIGTERM (time to exit), then from exec to: the port open, a Metadata answer
               naming every partition, and an acks=all Produce acknowledged on a partition
               of the first and of the last topic; then the same after kill -9

samsad runs with RLIMIT_NOFILE raised to --nofile (root can) and samsa.max.partitions above
the count. The data lives under --dir (default: a fresh directory in /var/tmp, a real disk:
fsyncs cost what they cost). Prints every figure and the load average; --json writes them.

  /usr/bin/python3 perf/scale/scale_bench.py --samsad build/daemon/samsad [--topics 1000]
      [--per-topic 100] [--topics-per-request 10] [--touch] [--restarts 1] [--keep]

Never run by the test suite (measure alone: nothing else running).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "clients"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "integration"))
import kproto  # noqa: E402
from admin_harness import free_port, port_open, rss_kib  # noqa: E402

KP = kproto.Kafka()
CREATE_V, METADATA_V, PRODUCE_V = 5, 12, 9


def log(msg: str):
    print(f"[scale] {time.strftime('%H:%M:%S')} {msg}", flush=True)


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


class Broker:
    def __init__(self, samsad: str, work: str, nofile: int, extra: list[str]):
        self.port = free_port()
        self.work = work
        self.data = os.path.join(work, "data")
        self.log_path = os.path.join(work, "samsad.log")
        self.nofile = nofile
        self.cmd = [samsad,
                    "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                    "--override", f"log.dirs={self.data}",
                    "--override", f"samsa.admin.socket={os.path.join(work, 'admin.sock')}",
                    "--override", "samsa.max.partitions=1000000",
                    "--override", "group.initial.rebalance.delay.ms=0"]
        for kv in extra:
            self.cmd += ["--override", kv]
        self.proc: subprocess.Popen | None = None

    def start(self) -> float:
        """Starts samsad; returns the monotonic time of the exec."""
        logf = open(self.log_path, "ab")
        lim = self.nofile

        def raise_nofile():
            hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (lim, lim))
            except (ValueError, OSError):  # without CAP_SYS_RESOURCE: up to the hard limit
                resource.setrlimit(resource.RLIMIT_NOFILE, (min(lim, hard), hard))

        t0 = time.monotonic()
        self.proc = subprocess.Popen(self.cmd, stdout=logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, preexec_fn=raise_nofile)
        logf.close()
        return t0

    def wait_port(self, timeout: float = 600) -> float:
        # Right after a kill -9 the dead process's listener may still accept for a moment
        # (io_uring releases a dead ring's files asynchronously): "listening" can read ~0 then;
        # the Metadata and Produce times are the ones that count.
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"samsad exited with {self.proc.returncode}:\n{self.tail()}")
            if port_open(self.port, timeout=0.2):
                return time.monotonic()
            time.sleep(0.01)
        raise RuntimeError(f"samsad did not listen within {timeout}s:\n{self.tail()}")

    def stop(self) -> float:
        t = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=600)
        if rc != 0:
            raise RuntimeError(f"samsad exited with {rc} after SIGTERM:\n{self.tail()}")
        return time.monotonic() - t

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def tail(self, n: int = 20) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""


class Client:
    def __init__(self, port: int, timeout: float = 120):
        self.conn = kproto.Conn("127.0.0.1", port, timeout=timeout)
        self.corr = 0

    def call(self, key: int, v: int, body: dict, timeout: float = 120) -> dict:
        self.corr += 1
        self.conn.send(KP.encode_request(key, v, self.corr, "scale-bench", body))
        corr, resp = KP.decode_response(key, v, self.conn.recv(timeout))
        assert corr == self.corr
        return resp

    def close(self):
        self.conn.close()


def create_topics(c: Client, names: list[str], partitions: int) -> list[tuple[str, int]]:
    resp = c.call(19, CREATE_V, {
        "Topics": [{"Name": n, "NumPartitions": partitions, "ReplicationFactor": 1,
                    "Assignments": [], "Configs": []} for n in names],
        "timeoutMs": 600000, "validateOnly": False}, timeout=600)
    return [(t["Name"], t["ErrorCode"]) for t in resp["Topics"]]


def metadata_partitions(port: int) -> int | None:
    try:
        c = Client(port, timeout=30)
    except OSError:
        return None
    try:
        md = c.call(3, METADATA_V, {"Topics": None, "AllowAutoTopicCreation": False}, timeout=60)
        return sum(len(t["Partitions"]) for t in md["Topics"] if t["ErrorCode"] == 0)
    except (OSError, kproto.Closed, socket.timeout):
        return None
    finally:
        c.close()


def record_batch(value: bytes) -> bytes:
    ts = int(time.time() * 1000)
    return kproto.encode_batch({"baseTimestamp": ts, "records": [{"value": {"hex": value.hex()}}]})


def produce(c: Client, targets: dict[str, list[int]], timeout: float = 60) -> list[int]:
    """One acks=all record to each (topic, partitions); the error codes."""
    batch = {"hex": record_batch(b"scale").hex()}
    resp = c.call(0, PRODUCE_V, {
        "TransactionalId": None, "Acks": -1, "TimeoutMs": int(timeout * 1000),
        "TopicData": [{"Name": t, "PartitionData": [{"Index": p, "Records": batch} for p in ps]}
                      for t, ps in targets.items()]}, timeout=timeout + 10)
    return [p["ErrorCode"] for t in resp["Responses"] for p in t["PartitionResponses"]]


def produce_ok(port: int, targets: dict[str, list[int]]) -> bool:
    try:
        c = Client(port, timeout=30)
    except OSError:
        return False
    try:
        return all(e == 0 for e in produce(c, targets, timeout=5))
    except (OSError, kproto.Closed, socket.timeout):
        return False
    finally:
        c.close()


def count_dirs(data: str, prefix: str) -> int:
    return sum(1 for e in os.scandir(data) if e.name.startswith(prefix))


def settle(b: Broker, seconds: float) -> tuple[int, int]:
    """RSS (KiB) and fds after `seconds` of nothing (both the last of a few samples)."""
    time.sleep(seconds)
    return rss_kib(b.proc.pid), fd_count(b.proc.pid)


def restart(b: Broker, kill: bool, want: int, probe: dict[str, list[int]]) -> dict:
    out = {"kind": "kill -9" if kill else "clean"}
    if kill:
        b.kill9()
    else:
        out["stop_s"] = b.stop()
    t0 = b.start()
    out["listening_s"] = b.wait_port() - t0
    end = time.monotonic() + 600
    while time.monotonic() < end:
        n = metadata_partitions(b.port)
        if n is not None and n >= want:
            break
        time.sleep(0.01)
    out["metadata_s"] = time.monotonic() - t0
    while time.monotonic() < end and not produce_ok(b.port, probe):
        time.sleep(0.01)
    out["produce_s"] = time.monotonic() - t0
    out["rss_kib"], out["fds"] = settle(b, 5)
    log(f"{out['kind']} restart: " + ", ".join(
        f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in out.items()
        if k != "kind") + f" (load {loadavg()})")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samsad", required=True)
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--per-topic", type=int, default=100)
    ap.add_argument("--topics-per-request", type=int, default=10)
    ap.add_argument("--touch", action="store_true",
                    help="also write one record to every partition and measure again")
    ap.add_argument("--restarts", type=int, default=1, help="of each kind")
    ap.add_argument("--nofile", type=int, default=1048576)
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--json")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="samsa-scale-", dir=a.dir)
    b = Broker(os.path.abspath(a.samsad), work, a.nofile, a.override)
    total = a.topics * a.per_topic
    res: dict = {"topics": a.topics, "per_topic": a.per_topic, "partitions": total,
                 "load_start": loadavg(), "started": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                     time.gmtime())}
    ok = False
    try:
        b.start()
        b.wait_port()
        time.sleep(1)  # __consumer_offsets is created just after start
        base_parts = metadata_partitions(b.port) or 0
        rss0, fds0 = settle(b, 2)
        res.update(base_partitions=base_parts, rss0_kib=rss0, fds0=fds0)
        log(f"idle before: {base_parts} partitions, RSS {rss0} KiB, {fds0} fds "
            f"(load {loadavg()})")

        names = [f"scale-{i:05d}" for i in range(a.topics)]
        c = Client(b.port, timeout=600)
        t0 = time.monotonic()
        for i in range(0, len(names), a.topics_per_request):
            chunk = names[i:i + a.topics_per_request]
            bad = [(n, e) for n, e in create_topics(c, chunk, a.per_topic) if e != 0]
            if bad:
                raise RuntimeError(f"CreateTopics failed: {bad[:5]}")
            done = i + len(chunk)
            if done % max(1, len(names) // 10) < a.topics_per_request:
                el = time.monotonic() - t0
                log(f"  {done * a.per_topic} partitions in {el:.1f}s "
                    f"({done * a.per_topic / el:.0f}/s), RSS {rss_kib(b.proc.pid)} KiB, "
                    f"{fd_count(b.proc.pid)} fds")
        answered = time.monotonic() - t0
        probe = {names[0]: [0], names[-1]: [a.per_topic - 1]}
        while count_dirs(b.data, "scale-") < total:
            time.sleep(0.05)
        while not produce_ok(b.port, probe):
            time.sleep(0.05)
        ready = time.monotonic() - t0
        res.update(create_answered_s=answered, create_ready_s=ready,
                   create_rate=total / answered, ready_rate=total / ready)
        log(f"created {total} partitions: answered in {answered:.1f}s ({total / answered:.0f}/s), "
            f"all open and writable in {ready:.1f}s ({total / ready:.0f}/s) (load {loadavg()})")

        rss1, fds1 = settle(b, 10)
        res.update(rss_idle_kib=rss1, fds_idle=fds1,
                   rss_per_partition_kib=(rss1 - rss0) / total,
                   fds_per_partition=(fds1 - fds0) / total)
        log(f"idle with {total} partitions: RSS {rss1} KiB ({(rss1 - rss0) / total:.2f} KiB "
            f"each), {fds1} fds ({(fds1 - fds0) / total:.3f} each) (load {loadavg()})")

        if a.touch:
            t1 = time.monotonic()
            for i in range(0, len(names), a.topics_per_request):
                chunk = names[i:i + a.topics_per_request]
                errs = produce(c, {n: list(range(a.per_topic)) for n in chunk}, timeout=120)
                if any(errs):
                    raise RuntimeError(f"Produce failed: {sorted(set(errs))}")
            touched = time.monotonic() - t1
            rss2, fds2 = settle(b, 10)
            res.update(touch_s=touched, rss_written_kib=rss2, fds_written=fds2,
                       rss_written_per_partition_kib=(rss2 - rss0) / total,
                       fds_written_per_partition=(fds2 - fds0) / total)
            log(f"one record in each partition ({touched:.1f}s): RSS {rss2} KiB "
                f"({(rss2 - rss0) / total:.2f} KiB each), {fds2} fds "
                f"({(fds2 - fds0) / total:.3f} each) (load {loadavg()})")
        c.close()

        want = total + base_parts
        runs = []
        for kill in (False, True):
            for _ in range(a.restarts):
                runs.append(restart(b, kill, want, probe))
        res["restarts"] = runs
        for kind in ("clean", "kill -9"):
            rs = [r for r in runs if r["kind"] == kind]
            if not rs:
                continue
            res[f"{kind}_median"] = {k: statistics.median(r[k] for r in rs)
                                     for k in ("listening_s", "metadata_s", "produce_s")}
        res["load_end"] = loadavg()
        b.stop()
        ok = True
    finally:
        if b.proc and b.proc.poll() is None:
            b.kill9()
        if not ok:
            print(b.tail(), file=sys.stderr)
        if a.keep or not ok:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(res, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
