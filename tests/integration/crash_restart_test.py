#!/usr/bin/env python3
"""kill -9 samsad while acks=all producers run; after each restart every acknowledged record
must be there, at the offset its acknowledgement named, byte-identical.

  crash_restart_test.py --samsad PATH [--rounds N] [--seed S] [--host IP] [--override K=V ...]

--host is the address samsad listens on and the clients use (default 127.0.0.1; the DPDK
backend's test runs this inside its namespace with samsa.dpdk.ip and --override's for the
backend).

Producers are separate processes (confluent-kafka / librdkafka 2.0, acks=all, no idempotence,
retries on) that append one JSON line per delivery report to a file; a line is written only for
records the broker acknowledged. Between rounds samsad is killed with SIGKILL at a random
moment and restarted on the same data. At the end one consumer reads every partition from the
start and checks each acknowledged (partition, offset) holds exactly the acknowledged value.
Records that were sent but never acknowledged may or may not be there (and may be duplicated
by retries); that is the contract of acks=all without idempotence.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time

DEBIAN_PY = "/usr/bin/python3"
TOPIC = "crash-test"
PARTITIONS = 3

PRODUCER = r"""
import json, os, sys, time
from confluent_kafka import Producer
bootstrap, out_path, tag = sys.argv[1], sys.argv[2], sys.argv[3]
out = os.open(out_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2,
              "enable.idempotence": False, "message.send.max.retries": 1000000,
              "retry.backoff.ms": 50, "socket.timeout.ms": 5000,
              "message.timeout.ms": 600000, "compression.type": "lz4"})
def report(err, msg):
    if err is None:
        line = json.dumps({"p": msg.partition(), "o": msg.offset(),
                           "v": msg.value().decode()}) + "\n"
        os.write(out, line.encode())
seq = 0
while True:
    for _ in range(50):
        v = f"{tag}-{seq}-" + "x" * (seq % 200)
        try:
            p.produce("crash-test", value=v.encode(), key=str(seq).encode(),
                      partition=seq % 3, on_delivery=report)
        except BufferError:
            p.poll(0.05)
            continue
        seq += 1
    p.poll(0.01)
"""


def log(msg: str):
    print(f"[crash] {msg}", flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(host: str, port: int, proc: subprocess.Popen, timeout: float = 60):
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"samsad exited with {proc.returncode} during start-up")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("samsad did not open its port")


def start(samsad: str, host: str, port: int, data: str, logf,
          overrides: list[str]) -> subprocess.Popen:
    cmd = [samsad, "--override", f"listeners=PLAINTEXT://{host}:{port}",
           "--override", f"log.dirs={data}", "--override", "num.partitions=3",
           "--override", "log.segment.bytes=262144",
           "--override", f"samsa.admin.socket={data}/../admin.sock"]
    for kv in overrides:
        cmd += ["--override", kv]
    proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT)
    wait_port(host, port, proc)
    return proc


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samsad", required=True)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    log(f"seed {a.seed}, {a.rounds} rounds")
    try:
        import confluent_kafka  # noqa: F401
    except ImportError as e:
        print(f"[crash] FAIL: confluent_kafka not importable: {e}", flush=True)
        return 1

    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    work = tempfile.mkdtemp(prefix="samsa-crash-")
    data = os.path.join(work, "data")
    acks = os.path.join(work, "acks.jsonl")
    port = free_port()
    logf = open(os.path.join(work, "broker.log"), "ab")
    bootstrap = f"{a.host}:{port}"
    broker = start(a.samsad, a.host, port, data, logf, a.override)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
        f.result(timeout=30)

    failures = []
    try:
        for rnd in range(a.rounds):
            before = sum(1 for _ in open(acks)) if os.path.exists(acks) else 0
            producers = [subprocess.Popen([DEBIAN_PY, "-c", PRODUCER, bootstrap, acks,
                                           f"r{rnd}p{i}"]) for i in range(2)]
            time.sleep(rng.uniform(0.8, 2.5))
            broker.send_signal(signal.SIGKILL)
            broker.wait()
            time.sleep(0.2)
            for p in producers:
                p.kill()
                p.wait()
            after = sum(1 for _ in open(acks))
            log(f"round {rnd}: killed samsad with {after} acknowledged records so far "
                f"({after - before} this round)")
            if after == before:
                failures.append(f"round {rnd}: no record was acknowledged (producers stuck?)")
            broker = start(a.samsad, a.host, port, data, logf, a.override)

        # Every acknowledged record must be where its acknowledgement said.
        expected: dict[tuple[int, int], str] = {}
        for line in open(acks):
            r = json.loads(line)
            key = (r["p"], r["o"])
            if key in expected and expected[key] != r["v"]:
                failures.append(f"offset {key} acknowledged twice with different values")
            expected[key] = r["v"]
        ends = {p: max([o for (pp, o) in expected if pp == p], default=-1) for p in range(PARTITIONS)}
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "crash-check",
                      "enable.auto.commit": False, "enable.partition.eof": True})
        c.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        got: dict[tuple[int, int], str] = {}
        eof: set[int] = set()
        deadline = time.time() + 120
        while len(eof) < PARTITIONS and time.time() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    if m.offset() > ends[m.partition()]:
                        eof.add(m.partition())
                    continue
                failures.append(f"consumer error: {m.error()}")
                break
            got[(m.partition(), m.offset())] = m.value().decode()
        c.close()
        missing = [k for k in expected if k not in got]
        wrong = [k for k in expected if k in got and got[k] != expected[k]]
        for k in missing[:10]:
            failures.append(f"acknowledged record lost: partition {k[0]} offset {k[1]}")
        for k in wrong[:10]:
            failures.append(f"partition {k[0]} offset {k[1]}: acknowledged {expected[k]!r}, "
                            f"stored {got[k]!r}")
        for p in range(PARTITIONS):
            offs = sorted(o for (pp, o) in got if pp == p)
            if offs and offs != list(range(offs[0], offs[0] + len(offs))):
                failures.append(f"partition {p}: offsets are not contiguous")
        log(f"{len(expected)} acknowledged records checked, {len(got)} stored; "
            f"{len(missing)} missing, {len(wrong)} different")
    finally:
        if broker.poll() is None:
            broker.send_signal(signal.SIGTERM)
            try:
                broker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                broker.kill()
                failures.append("samsad did not stop within 30s of SIGTERM")
        logf.close()
    if failures:
        for f in failures:
            log(f"FAIL: {f}")
        log(f"work dir kept: {work}")
        return 1
    log("PASS")
    subprocess.run(["rm", "-rf", work])
    return 0


if __name__ == "__main__":
    sys.exit(main())
