#!/usr/bin/env python3
"""Bounded work for admin requests, against a live samsad, with requests encoded by hand:

- CreateTopics asking for 10,000,000 partitions, or more than samsa.max.partitions.per.request
  over several topics, is refused at once with POLICY_VIOLATION (Kafka's answer and message),
  and so is anything past samsa.max.partitions; CreatePartitions likewise.
- Absurd array counts close the connection; the broker keeps serving.
- A Metadata request naming 100,000 new topics with auto-creation on is answered: topics are
  created whole, in order, while they fit samsa.max.partitions, the rest get POLICY_VIOLATION,
  and nothing half-created is left behind (metadata, directories, and after a restart).
- Meanwhile samsad's RSS stays below its idle RSS + queued.max.request.bytes (256 MiB) + 64 MiB,
  and another client is answered.

  admin_limits_test.py --samsad PATH
"""

from __future__ import annotations

import argparse
import os
import struct
import threading
import time

from admin_harness import (TAGS, Checks, Conn, Reader, Samsad, carr, cstr, main_guard, run_checked,
                           s16, uvarint)

checks = Checks("admin-limits")
POLICY_VIOLATION, INVALID_PARTITIONS, UNKNOWN_TOPIC = 44, 37, 3
MAX_PARTITIONS = 1000
PARTITIONS_PER_TOPIC = 3
BUDGET_KIB = 256 * 1024 + 64 * 1024


def create_topics_v2(topics: list[tuple[str, int]], count: int | None = None) -> bytes:
    body = struct.pack(">i", len(topics) if count is None else count)
    for name, n in topics:
        body += s16(name) + struct.pack(">ihii", n, 1, 0, 0)  # no assignments, no configs
    return body + struct.pack(">i?", 10000, False)


def parse_create_topics_v2(resp: bytes) -> list[tuple[str, int, str | None]]:
    r = Reader(resp)
    r.take("i")  # throttle
    out = []
    for _ in range(r.take("i")):
        out.append((r.s16(), r.take("h"), r.s16()))
    return out


def create_partitions_v1(name: str, count: int) -> bytes:
    return struct.pack(">i", 1) + s16(name) + struct.pack(">ii", count, -1) + struct.pack(">i?", 10000, False)


def parse_create_partitions_v1(resp: bytes) -> list[tuple[str, int, str | None]]:
    r = Reader(resp)
    r.take("i")
    return [(r.s16(), r.take("h"), r.s16()) for _ in range(r.take("i"))]


def metadata_v4(names: list[str] | None, auto_create: bool) -> bytes:
    if names is None:
        return struct.pack(">i?", -1, auto_create)
    return struct.pack(">i", len(names)) + b"".join(s16(n) for n in names) + struct.pack(">?", auto_create)


def parse_metadata_v4(resp: bytes) -> dict[str, tuple[int, int]]:
    """topic -> (error code, partition count)."""
    r = Reader(resp)
    r.take("i")  # throttle
    for _ in range(r.take("i")):  # brokers
        r.take("i"), r.s16(), r.take("i"), r.s16()
    r.s16()  # cluster id
    r.take("i")  # controller
    out = {}
    for _ in range(r.take("i")):
        err = r.take("h")
        name = r.s16()
        r.take("?")
        n = r.take("i")
        for _ in range(n):
            r.take("hii")
            for _ in range(2):  # replicas, isr (offline replicas come with v5)
                k = r.take("i")
                r.off += 4 * k
        out[name] = (err, n)
    return out


class RssSampler(threading.Thread):
    def __init__(self, broker: Samsad):
        super().__init__(daemon=True)
        self.broker, self.peak, self.stop_flag = broker, 0, False

    def run(self):
        while not self.stop_flag:
            try:
                self.peak = max(self.peak, self.broker.rss_kib())
            except OSError:
                return
            time.sleep(0.02)


def still_serving(broker: Samsad, what: str):
    c = Conn(broker.port, timeout=30)
    resp = c.request(18, 0, b"")
    checks(resp is not None and struct.unpack(">h", resp[:2])[0] == 0,
           f"another client is answered after {what}")
    c.close()


def run(broker: Samsad):
    time.sleep(0.5)  # the offsets topic is created just after start
    idle = broker.rss_kib()
    sampler = RssSampler(broker)
    sampler.start()
    c = Conn(broker.port)

    # 10,000,000 partitions in one CreateTopics: refused before anything is built.
    t0 = time.time()
    out = parse_create_topics_v2(c.request(19, 2, create_topics_v2([("huge", 10_000_000)])))
    took = time.time() - t0
    checks(out == [("huge", POLICY_VIOLATION, "Excessively large number of partitions per request.")],
           f"CreateTopics with 10,000,000 partitions gets POLICY_VIOLATION with Kafka's message ({out})")
    checks(took < 2, f"... at once ({took * 1000:.0f} ms)")

    # Over the per-request cap only together: the whole request is refused, as Kafka does.
    out = parse_create_topics_v2(c.request(19, 2, create_topics_v2([("a6k", 6000), ("b6k", 6000)])))
    checks([e for _, e, _ in out] == [POLICY_VIOLATION] * 2,
           f"two topics of 6000 partitions (10000 per request) are both refused ({[e for _, e, _ in out]})")
    # Within the request cap but past samsa.max.partitions.
    out = parse_create_topics_v2(c.request(19, 2, create_topics_v2([("big", 1500)])))
    checks(out[0][1] == POLICY_VIOLATION and "samsa.max.partitions" in (out[0][2] or ""),
           f"1500 partitions past samsa.max.partitions={MAX_PARTITIONS} get POLICY_VIOLATION naming it ({out[0][2]})")
    out = parse_create_topics_v2(c.request(19, 2, create_topics_v2([("zero", 0), ("neg", -7)])))
    checks([e for _, e, _ in out] == [INVALID_PARTITIONS] * 2, "0 and -7 partitions get INVALID_PARTITIONS")
    meta = parse_metadata_v4(c.request(3, 4, metadata_v4(["huge", "a6k", "b6k", "big"], False)))
    checks(all(e == UNKNOWN_TOPIC for e, _ in meta.values()), "none of the refused topics exists")

    # CreatePartitions: absurd and shrinking counts.
    out = parse_create_topics_v2(c.request(19, 2, create_topics_v2([("lim", 2)])))
    checks(out[0][1] == 0, "a 2-partition topic is created")
    out = parse_create_partitions_v1(c.request(37, 1, create_partitions_v1("lim", 2_000_000_000)))
    checks(out[0][1] == POLICY_VIOLATION, f"CreatePartitions to 2,000,000,000 gets POLICY_VIOLATION ({out})")
    out = parse_create_partitions_v1(c.request(37, 1, create_partitions_v1("lim", 1)))
    checks(out[0][1] == INVALID_PARTITIONS and "would not be an increase" in (out[0][2] or ""),
           f"CreatePartitions to fewer gets INVALID_PARTITIONS ({out[0][2]})")
    out = parse_create_partitions_v1(c.request(37, 1, create_partitions_v1("nosuch", 4)))
    checks(out[0][1] == UNKNOWN_TOPIC, "CreatePartitions of an unknown topic gets UNKNOWN_TOPIC_OR_PARTITION")
    out = parse_create_partitions_v1(c.request(37, 1, create_partitions_v1("lim", 3)))
    checks(out[0][1] == 0, "CreatePartitions 2 -> 3 succeeds")

    # DescribeConfigs naming one topic 200,000 times (8 bytes each): the answer stops growing
    # at 100,000 entries; the rest of the resources get INVALID_REQUEST.
    body = struct.pack(">i", 200_000) + (struct.pack(">b", 2) + s16("lim") + struct.pack(">i", -1)) * 200_000
    body += struct.pack(">?", False)
    resp = c.request(32, 1, body)
    r = Reader(resp)
    r.take("i")
    described = refused = 0
    for _ in range(r.take("i")):
        err = r.take("h")
        r.s16(), r.take("b"), r.s16()
        n = r.take("i")
        for _ in range(n):
            r.s16(), r.s16(), r.take("?b?")
            for _ in range(r.take("i")):
                r.s16(), r.s16(), r.take("b")
        described += err == 0 and n > 0
        refused += err == 42
    checks(described + refused == 200_000 and 0 < described * 33 <= 100_000 + 33,
           f"DescribeConfigs naming a topic 200,000 times: {described} described, {refused} INVALID_REQUEST")

    # Counts the frame cannot hold: the decoder refuses them without allocating; connection closed.
    for what, body in [
        ("2,000,000,000 topics in 20 bytes", create_topics_v2([], count=2_000_000_000)),
        ("an assignments count of 2^31-1",
         struct.pack(">i", 1) + s16("x") + struct.pack(">ihi", -1, -1, 0x7FFFFFFF) + b"\0" * 16),
    ]:
        bad = Conn(broker.port)
        checks(bad.request(19, 2, body) is None, f"CreateTopics with {what} closes the connection")
        bad.close()
    still_serving(broker, "the absurd counts")

    # A Produce carrying 1,000,000 empty partition entries (a 6 MB frame): decoding it and the
    # per-partition state would take several hundred MiB, over the reactor's request memory
    # budget, so it is refused (a log line and a closed connection) before that is allocated.
    entry = struct.pack(">i", 0) + b"\x00" + TAGS  # partition 0, null records, no tags
    body = (cstr(None) + struct.pack(">hi", -1, 10000)  # transactional id, acks, timeout
            + carr([cstr("lim") + uvarint(1_000_000 + 1) + entry * 1_000_000 + TAGS]) + TAGS)
    bad = Conn(broker.port)
    checks(bad.request(0, 9, body, flexible=True) is None,
           "Produce with 1,000,000 empty partition entries is refused (connection closed)")
    bad.close()
    checks("over this reactor's request memory budget" in broker.log(),
           "... with a log line naming the request memory budget")
    still_serving(broker, "the oversized Produce")

    # 100,000 new topics named in one Metadata request with auto-creation on.
    names = [f"auto-{i:06d}" for i in range(100_000)]
    answered = {}

    def other_client():
        time.sleep(0.2)
        t = time.time()
        o = Conn(broker.port, timeout=60)
        r = o.request(18, 0, b"")
        answered["apiversions"] = (r is not None, time.time() - t)
        o.close()

    th = threading.Thread(target=other_client)
    th.start()
    t0 = time.time()
    big = Conn(broker.port, timeout=300)
    resp = big.request(3, 4, metadata_v4(names, True))
    took = time.time() - t0
    th.join()
    checks(resp is not None, f"Metadata naming 100,000 new topics is answered ({took:.1f} s)")
    meta = parse_metadata_v4(resp)
    created = sorted(n for n, (e, _) in meta.items() if e == 0)
    refused = [n for n, (e, _) in meta.items() if e == POLICY_VIOLATION]
    checks(len(meta) == 100_000 and len(created) + len(refused) == 100_000,
           f"every topic is answered: {len(created)} created, {len(refused)} POLICY_VIOLATION")
    checks(all(meta[n][1] == PARTITIONS_PER_TOPIC for n in created),
           f"every created topic has all {PARTITIONS_PER_TOPIC} partitions")
    checks(created == names[:len(created)], "topics are created in request order until the limit")
    existing = 4 + 3  # __consumer_offsets (4) and lim (3)
    checks(existing + PARTITIONS_PER_TOPIC * len(created) <= MAX_PARTITIONS <
           existing + PARTITIONS_PER_TOPIC * (len(created) + 1),
           f"as many as fit samsa.max.partitions={MAX_PARTITIONS}")
    ok, wait = answered.get("apiversions", (False, 0))
    checks(ok, f"another client is answered meanwhile ({wait:.1f} s)")

    def complete_everywhere(when: str):
        cc = Conn(broker.port)
        allmeta = parse_metadata_v4(cc.request(3, 4, metadata_v4(None, False)))
        cc.close()
        autos = {n: v for n, v in allmeta.items() if n.startswith("auto-")}
        checks(sorted(autos) == created and all(v == (0, PARTITIONS_PER_TOPIC) for v in autos.values()),
               f"{when}: the metadata holds exactly the created topics, each whole")
        dirs = [d for d in os.listdir(broker.data) if d.startswith("auto-")]
        checks(len(dirs) == PARTITIONS_PER_TOPIC * len(created),
               f"{when}: {len(dirs)} partition directories, {PARTITIONS_PER_TOPIC} per created topic")

    complete_everywhere("after the request")
    sampler.stop_flag = True
    sampler.join()
    peak = sampler.peak
    checks(peak < idle + BUDGET_KIB,
           f"RSS peak {peak / 1024:.1f} MiB < idle {idle / 1024:.1f} MiB + 256 MiB + 64 MiB")
    checks.note(f"figures: idle RSS {idle / 1024:.1f} MiB, peak {peak / 1024:.1f} MiB, "
                f"{len(created)} topics ({PARTITIONS_PER_TOPIC * len(created)} partitions) created in {took:.1f} s")
    c.close()
    big.close()

    broker.restart()
    complete_everywhere("after a restart")
    still_serving(broker, "the restart")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samsad", required=True)
    a = ap.parse_args()
    broker = Samsad(a.samsad, {"samsa.max.partitions": str(MAX_PARTITIONS),
                               "num.partitions": str(PARTITIONS_PER_TOPIC),
                               "auto.create.topics.enable": "true"})
    return run_checked(checks, broker, run)


if __name__ == "__main__":
    main_guard(main)
