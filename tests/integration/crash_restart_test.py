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
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import admin_harness as h  # noqa: E402

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


log = h.logger("crash")


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

    work = tempfile.mkdtemp(prefix="samsa-crash-")
    acks = os.path.join(work, "acks.jsonl")
    broker = h.SamsadProcess(a.samsad, work, ["num.partitions=3", "log.segment.bytes=262144"]
                             + a.override, host=a.host, log_name="broker.log")
    bootstrap = broker.bootstrap
    broker.start()
    h.create_topics(bootstrap, {TOPIC: PARTITIONS})

    failures = []
    try:
        for rnd in range(a.rounds):
            before = sum(1 for _ in open(acks)) if os.path.exists(acks) else 0
            producers = [subprocess.Popen([DEBIAN_PY, "-c", PRODUCER, bootstrap, acks,
                                           f"r{rnd}p{i}"]) for i in range(2)]
            time.sleep(rng.uniform(0.8, 2.5))
            broker.kill()
            time.sleep(0.2)
            for p in producers:
                p.kill()
                p.wait()
            after = sum(1 for _ in open(acks))
            log(f"round {rnd}: killed samsad with {after} acknowledged records so far "
                f"({after - before} this round)")
            if after == before:
                failures.append(f"round {rnd}: no record was acknowledged (producers stuck?)")
            broker.start()

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
        if broker.alive():
            problem = broker.stop()
            if broker.killed:  # an exit code other than 0 is no failure here
                failures.append(problem)
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
