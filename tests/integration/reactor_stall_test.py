#!/usr/bin/env python3
"""Reactor stalls seen from outside (issue 25): samsad with testing hooks stalls reactor 1 for
2 s (`samsactl testing stall`, a sleep inside one of the reactor's tasks). Then
samsa_reactor_stalls_total{reactor="1"} has grown by one, samsa_reactor_longest_turn_seconds
says 2 s, reactor 0 has no new stall, the log names the stalled turn with the stack the
stall-watch thread caught inside it (the sleep's libc frame), and the broker still answers a
Metadata request and stops cleanly.

Then the turn budget (samsa.reactor.turn.budget.us, set to 1 us here so that every request's
second partition waits for the next turn): produce requests of 8 partitions each are split
across turns (samsa_reactor_turn_yields_total grows), and a consumer reads back every record of
every partition, in the order it was sent (an idempotent producer: a split request must not let
the next one overtake it).

  reactor_stall_test.py --samsad PATH --samsactl PATH
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import admin_harness as h  # noqa: E402


def split_requests_keep_their_order(b, mport, checks):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    boot = f"127.0.0.1:{b.port}"
    parts, per_part = 8, 2000
    admin = AdminClient({"bootstrap.servers": boot})
    admin.create_topics([NewTopic("split", parts, 1)])["split"].result(30)
    yields = 'samsa_reactor_turn_yields_total{reactor="%d"}'
    before = h.metrics_samples(f"127.0.0.1:{mport}")
    # linger and up to 5 requests in flight: each request carries a batch for every partition.
    p = Producer({"bootstrap.servers": boot, "enable.idempotence": True, "linger.ms": 20,
                  "max.in.flight.requests.per.connection": 5})
    failed = []
    for i in range(per_part):
        for part in range(parts):
            p.produce("split", value=b"%d:%d" % (part, i), partition=part,
                      on_delivery=lambda err, _m: err and failed.append(err))
        if i % 200 == 0:
            p.poll(0)
    checks(p.flush(30) == 0 and not failed, f"every record acknowledged ({failed[:3]})")
    after = h.metrics_samples(f"127.0.0.1:{mport}")
    grown = sum(after.get(yields % r, 0) - before.get(yields % r, 0) for r in (0, 1))
    checks(grown > 0, f"produce requests were split across turns ({grown} yields)")
    c = Consumer({"bootstrap.servers": boot, "group.id": "split-check",
                  "enable.auto.commit": False})
    c.assign([TopicPartition("split", part, 0) for part in range(parts)])
    seen = {part: [] for part in range(parts)}
    deadline = time.monotonic() + 30
    while sum(map(len, seen.values())) < parts * per_part and time.monotonic() < deadline:
        for m in c.consume(1000, 1.0):
            if not m.error():
                seen[m.partition()].append(int(m.value().split(b":")[1]))
    c.close()
    checks(all(v == list(range(per_part)) for v in seen.values()),
           "every partition holds its records once each, in the order sent "
           f"({ {k: len(v) for k, v in seen.items()} })")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samsad", required=True)
    ap.add_argument("--samsactl", required=True)
    a = ap.parse_args()
    checks = h.Checks("reactor-stall")
    mport = h.free_port()
    broker = h.Samsad(a.samsad, {"samsa.testing.hooks": "true",
                                 "samsa.reactor.turn.budget.us": "1",
                                 "samsa.metrics.listen": f"127.0.0.1:{mport}"})

    def body(b: h.Samsad):
        stalls = 'samsa_reactor_stalls_total{reactor="%d"}'
        longest = 'samsa_reactor_longest_turn_seconds{reactor="1"}'
        before = h.metrics_samples(f"127.0.0.1:{mport}")
        checks(stalls % 1 in before and longest in before, "the stall metrics are exported")
        checks("samsa_io_workers" in before,
               f"io_uring's worker threads are counted ({before.get('samsa_io_workers')})")
        r = subprocess.run([a.samsactl, "--socket", os.path.join(b.work, "admin.sock"),
                            "testing", "stall", "reactor", "1", "2"],
                           capture_output=True, text=True, timeout=30)
        checks(r.returncode == 0, f"samsactl testing stall reactor 1 2: {r.stdout}{r.stderr}")
        time.sleep(3)
        after = h.metrics_samples(f"127.0.0.1:{mport}")
        checks(after.get(stalls % 1, 0) == before.get(stalls % 1, 0) + 1,
               f"reactor 1 counted one stall ({before.get(stalls % 1)} -> "
               f"{after.get(stalls % 1)})")
        checks(after.get(stalls % 0, 0) == before.get(stalls % 0, 0),
               "reactor 0 counted none meanwhile")
        checks(2.0 <= after.get(longest, 0) < 2.5,
               f"reactor 1's longest turn is the 2 s stall ({after.get(longest)} s)")
        log = b.log()
        line = next((l for l in log.splitlines()
                     if re.search(r"reactor-1: a loop turn ran 2\d\d\d\.\d\d ms", l)
                     and "its stack after" in l), None)
        checks(line is not None, "the log names the 2 s turn with its stack")
        stack = log[log.index(line):].splitlines()[1:40] if line else []
        frames = [f for f in stack if f.startswith("    ")]
        checks(any("nanosleep" in f for f in frames),
               "the stack was taken inside the turn (the sleep's libc frame is in it)")
        # Still serving.
        with socket.create_connection(("127.0.0.1", b.port), timeout=10) as c:
            # Metadata v1, no topics: length, key 3, version 1, correlation 7, client "t", [].
            req = b"\x00\x03\x00\x01\x00\x00\x00\x07\x00\x01t\xff\xff\xff\xff"
            c.sendall(len(req).to_bytes(4, "big") + req)
            head = c.recv(8)
        checks(len(head) == 8 and head[4:8] == b"\x00\x00\x00\x07",
               "a Metadata request is answered after the stall")
        split_requests_keep_their_order(b, mport, checks)

    return h.run_checked(checks, broker, body)


if __name__ == "__main__":
    sys.exit(main())
