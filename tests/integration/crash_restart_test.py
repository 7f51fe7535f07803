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


# --resume-check: clients that live through the kills, with librdkafka's default timeouts. The
# producer is idempotent and writes what it was acknowledged (with the time) to the same file
# as the round's producers; the consumer sits idle at the end of crash-idle and writes what it
# gets. Over kernel sockets the kernel resets a killed process's connections and both carry on
# at once; over the DPDK stack the restarted broker must do that itself (net/dpdk/conn_journal.h).
SURVIVOR = r"""
import json, os, sys, time
from confluent_kafka import Producer
bootstrap, out_path = sys.argv[1], sys.argv[2]
out = os.open(out_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
              "linger.ms": 2})
def report(err, msg):
    if err is None:
        os.write(out, (json.dumps({"p": msg.partition(), "o": msg.offset(),
                                   "v": msg.value().decode(), "t": time.time()}) + "\n").encode())
seq = 0
while True:
    p.produce("crash-test", value=f"s-{seq}".encode(), partition=seq % 3, on_delivery=report)
    seq += 1
    p.poll(0.02)
"""

IDLE_CONSUMER = r"""
import json, os, sys, time
from confluent_kafka import Consumer, TopicPartition
bootstrap, out_path = sys.argv[1], sys.argv[2]
out = os.open(out_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
c = Consumer({"bootstrap.servers": bootstrap, "group.id": "crash-idle",
              "enable.auto.commit": False})
# At the end as of now (an explicit offset: OFFSET_END would be resolved only at the first
# fetch, after a record produced meanwhile).
end = c.get_watermark_offsets(TopicPartition("crash-idle", 0), timeout=30)[1]
c.assign([TopicPartition("crash-idle", 0, end)])
os.write(out, (json.dumps({"v": None, "t": time.time()}) + "\n").encode())
while True:
    m = c.poll(0.2)
    if m is not None and not m.error():
        os.write(out, (json.dumps({"v": m.value().decode(), "t": time.time()}) + "\n").encode())
"""

log = h.logger("crash")


class Tail:
    """The JSON lines appended to a file since the last read (the acks file grows to hundreds
    of thousands of lines: read once, not from the start every 50 ms)."""

    def __init__(self, path: str):
        self.path, self.pos, self.partial = path, 0, b""

    def new(self) -> list[dict]:
        if not os.path.exists(self.path):
            return []
        with open(self.path, "rb") as f:
            f.seek(self.pos)
            data = self.partial + f.read()
            self.pos = f.tell()
        *whole, self.partial = data.split(b"\n")
        return [json.loads(l) for l in whole if l.strip()]


class Survivors:
    """The producer and the idle consumer of --resume-check, and each restart's figures."""

    def __init__(self, bootstrap: str, work: str, acks: str, expect_late: bool):
        self.bootstrap, self.acks, self.expect_late = bootstrap, acks, expect_late
        self.idle = os.path.join(work, "idle.jsonl")
        self.idle_tail, self.acks_tail = Tail(self.idle), Tail(acks)
        self.idle_seen: list[dict] = []
        self.procs = [subprocess.Popen([DEBIAN_PY, "-c", SURVIVOR, bootstrap, acks]),
                      subprocess.Popen([DEBIAN_PY, "-c", IDLE_CONSUMER, bootstrap, self.idle])]
        self.producer_ms: list[int] = []
        self.consumer_ms: list[int] = []

    def marker(self, value: str, timeout: float) -> int | None:
        """Produces value to crash-idle with a fresh producer; ms from its acknowledgement to
        the idle consumer having it, or None."""
        from confluent_kafka import Producer
        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all"})
        p.produce("crash-idle", value=value.encode(), partition=0)
        if p.flush(timeout) != 0:
            return None
        acked = time.time()
        end = acked + timeout
        while time.time() < end:
            self.idle_seen += self.idle_tail.new()
            got = [x["t"] for x in self.idle_seen if x["v"] == value]
            if got:
                return int((got[0] - acked) * 1000)
            time.sleep(0.05)
        return None

    def after_restart(self, rnd: int, t_up: float, failures: list[str], bound_ms: int):
        """The producer's first acknowledgement after the restart, and a new record reaching
        the idle consumer: both within bound_ms."""
        end = time.time() + 90  # librdkafka's socket.timeout.ms (60 s) and then some
        first = None
        while time.time() < end and first is None:
            later = [x["t"] for x in self.acks_tail.new() if "t" in x and x["t"] > t_up]
            first = min(later) if later else None
            time.sleep(0.05)
        if first is None:
            failures.append(f"round {rnd}: the idempotent producer got no acknowledgement within "
                            f"90 s of the restart")
        else:
            self.producer_ms.append(int((first - t_up) * 1000))
        seen = self.marker(f"m-{rnd}", 90)
        if seen is None:
            failures.append(f"round {rnd}: the idle consumer did not get a new record within "
                            f"90 s of its acknowledgement")
        else:
            self.consumer_ms.append(seen)
        log(f"round {rnd}: after the restart the producer's next acknowledgement came after "
            f"{self.producer_ms[-1] if first else 'none'} ms, the idle consumer got a new record "
            f"{seen if seen is not None else 'never'} ms after it was acknowledged")
        late = [(what, ms) for what, ms in (("producer", first and self.producer_ms[-1]),
                                            ("idle consumer", seen))
                if ms is not None and ms > bound_ms]
        if self.expect_late and not late:
            failures.append(f"round {rnd}: both resumed within {bound_ms} ms although nobody "
                            f"told them of the restart (the check has no teeth)")
        if not self.expect_late:
            for what, ms in late:
                failures.append(f"round {rnd}: the {what} resumed after {ms} ms (bound "
                                f"{bound_ms} ms): it did not hear of the restart")

    def stop(self):
        for p in self.procs:
            p.kill()
            p.wait()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samsad", required=True)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--kill-during-start", action="store_true",
                    help="each round also kills samsad at a random moment of its start-up")
    ap.add_argument("--forget-connections", action="store_true",
                    help="the teeth of --resume-check over DPDK: delete the stack's connection "
                    "journal before each restart (as after a reboot), so that nobody tells the "
                    "clients; they must then miss the bound")
    ap.add_argument("--resume-check", type=int, default=0, metavar="MS",
                    help="also run an idempotent producer and an idle consumer through the "
                    "kills (librdkafka's default timeouts): after each restart both must carry "
                    "on within MS")
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
    survivors = None
    try:
        if a.resume_check:
            h.create_topics(bootstrap, {"crash-idle": 1})
            survivors = Survivors(bootstrap, work, acks, a.forget_connections)
            # Both connected before the first kill: the consumer has a fetch waiting.
            end = time.time() + 60
            while time.time() < end and not survivors.idle_tail.new():
                time.sleep(0.1)
            if survivors.marker("m-warm-up", 60) is None:
                failures.append("the idle consumer never got the warm-up record")
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
            if a.forget_connections:
                os.remove(os.path.join(broker.data, "dpdk-connections"))
            if a.kill_during_start:
                # kill -9 at any moment of a start-up too (device, EAL, recovery, listeners).
                broker.start(wait=False)
                time.sleep(rng.uniform(0.0, 1.5))
                broker.kill()
                log(f"round {rnd}: killed samsad again during its start-up")
            broker.start()
            if survivors:
                survivors.after_restart(rnd, time.time(), failures, a.resume_check)
        if survivors:
            survivors.stop()
            med = lambda v: sorted(v)[len(v) // 2] if v else None  # noqa: E731
            log(f"after {a.rounds} restarts: the producer's next acknowledgement median "
                f"{med(survivors.producer_ms)} ms, max {max(survivors.producer_ms, default=None)}"
                f" ms; the idle consumer's new record median {med(survivors.consumer_ms)} ms, "
                f"max {max(survivors.consumer_ms, default=None)} ms")
            with open(broker.log_path, errors="replace") as f:
                told = [l.strip() for l in f if "of a previous process" in l]
            for line in told[-3:]:
                log(f"samsad: {line}")

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
        if survivors:
            survivors.stop()
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
