#!/usr/bin/env python3
"""Kafka Streams 4.1.1 with processing.guarantee=exactly_once_v2 on samsad (issue 21): a word
count (tests/clients/java/WordCountEos.java: split, repartition by word, count in a state store
with a changelog, every update to the output with the record cache off) over a known input
that keeps arriving while the Streams JVM is killed with kill -9 (twice) and restarted on the
same state directory.

Checked, reading the output with read_committed: each word's counts are exactly 1, 2, ..., n
with n its number of occurrences in the input: no update lost, none twice, even though the
killed instance's open transactions (and the restored state's replays) wrote records that
were aborted (reported: the read_uncommitted view holds more).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import admin_harness as h  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
KAFKA_SH = os.path.join(ROOT, "perf", "vs-kafka", "kafka.sh")
APP = os.path.join(ROOT, "tests", "clients", "java", "WordCountEos.java")
LINES = 3000
WORDS = 17


def line(i: int) -> str:
    return " ".join(f"w{(i * 7 + j) % WORDS}" for j in range(5))


def expected() -> collections.Counter:
    return collections.Counter(w for i in range(LINES) for w in line(i).split())


def read_counts(boot: str, isolation: str, timeout: float = 20) -> dict[str, list[int]]:
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": boot, "group.id": f"check-{time.time()}",
                  "isolation.level": isolation, "auto.offset.reset": "earliest",
                  "enable.partition.eof": True})
    c.subscribe(["wc-out"])
    seq: dict[str, list[int]] = collections.defaultdict(list)
    eof: set[int] = set()
    end = time.time() + timeout
    while len(eof) < 2 and time.time() < end:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == -191:
                eof.add(m.partition())
            continue
        eof.discard(m.partition())
        seq[m.key().decode()].append(struct.unpack(">q", m.value())[0])
    c.close()
    return seq


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samsad", required=True)
    ap.add_argument("--samsactl", required=True)
    args = ap.parse_args()
    check = h.Checks("streams-eos")
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return h.missing(check, "confluent_kafka")
    why = h.kafka_tools_available()
    if why:
        return h.missing(check, why)
    cp = subprocess.run(["bash", KAFKA_SH, "classpath"], capture_output=True, text=True)
    if cp.returncode:
        return h.missing(check, "Kafka's jars (bash perf/vs-kafka/kafka.sh fetch)")
    classpath = cp.stdout.strip()
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    broker = h.Samsad(args.samsad, {"transaction.state.log.num.partitions": "4"})

    def body(b):
        boot = f"127.0.0.1:{b.port}"
        admin = AdminClient({"bootstrap.servers": boot})
        for f in admin.create_topics([NewTopic("wc-in", 2, 1),
                                      NewTopic("wc-out", 2, 1)]).values():
            f.result(30)
        state = tempfile.mkdtemp(prefix="wc-state-", dir=b.work)
        runs = []

        def start():
            log = open(os.path.join(b.work, f"streams-{len(runs) + 1}.log"), "w")
            env = dict(os.environ, JAVA_TOOL_OPTIONS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
            runs.append(subprocess.Popen(
                ["java", "-cp", classpath, APP, "--bootstrap", boot, "--app-id", "wc-eos",
                 "--input", "wc-in", "--output", "wc-out", "--state-dir", state],
                stdout=log, stderr=subprocess.STDOUT, env=env))

        # The input arrives over ~20 s, through the kills.
        fed = [False]

        def feed():
            p = Producer({"bootstrap.servers": boot, "enable.idempotence": True})
            for i in range(LINES):
                p.produce("wc-in", key=str(i).encode(), value=line(i).encode())
                if i % 100 == 0:
                    p.poll(0)
                    time.sleep(0.6)
            fed[0] = p.flush(60) == 0

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        start()
        want = expected()
        total = sum(want.values())
        for kill in range(2):
            # Kill once the output has moved on since the last start.
            end = time.time() + 90
            seen = 0
            while time.time() < end:
                seen = sum(len(v) for v in read_counts(boot, "read_uncommitted", 5).values())
                if seen > (kill + 1) * total // 4:
                    break
                time.sleep(1)
            runs[-1].kill()
            runs[-1].wait()
            check(seen > 0, f"kill -9 of the Streams instance #{kill + 1} in the middle "
                            f"({seen} of {total} updates written)")
            start()
        feeder.join(120)
        check(fed[0], f"{LINES} input lines written")
        got: dict[str, list[int]] = {}
        end = time.time() + 120
        while time.time() < end:
            got = read_counts(boot, "read_committed", 10)
            if sum(len(v) for v in got.values()) >= total:
                break
            time.sleep(1)
        runs[-1].terminate()
        try:
            runs[-1].wait(30)
        except subprocess.TimeoutExpired:
            runs[-1].kill()
        bad = [w for w, n in want.items() if got.get(w) != list(range(1, n + 1))]
        check(not bad and set(got) == set(want),
              f"read_committed: every word's counts are exactly 1..n ({len(want)} words, "
              f"{sum(len(v) for v in got.values())} of {total} updates; wrong: "
              f"{[(w, got.get(w, [])[-3:], want[w]) for w in bad[:3]]})")
        unc = read_counts(boot, "read_uncommitted")
        extra = sum(len(v) for v in unc.values()) - sum(len(v) for v in got.values())
        check.note(f"{extra} aborted updates in the output (read_uncommitted only)")
        # The Java 4.1 client takes transaction version 2 from ApiVersions' finalized features:
        # no AddPartitionsToTxn, an epoch bump per EndTxn (v5).
        r = subprocess.run([args.samsactl, "--socket", os.path.join(b.work, "admin.sock"),
                            "metrics"], capture_output=True, text=True, timeout=20)
        m = re.search(r"^samsa_txn_coordinator_ended_v2_total ([0-9.e+]+)$", r.stdout, re.M)
        ended = float(m.group(1)) if m else 0
        check(ended > 0, f"Streams' producers used transaction version 2 ({ended:.0f} ends with "
                         f"EndTxn v5)")
        shutil.rmtree(state, ignore_errors=True)

    return h.run_checked(check, broker, body)


if __name__ == "__main__":
    sys.exit(main())
