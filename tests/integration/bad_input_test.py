#!/usr/bin/env python3
"""Bad input against a live samsad, encoded by hand (independent of samsa's own codecs): every
case must get Kafka's error code, or a closed connection and a log line, and the broker must
keep serving with no acknowledged data lost.

  bad_input_test.py --samsad PATH
"""

from __future__ import annotations

import argparse
import os
import random
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import admin_harness as h  # noqa: E402

DEBIAN_PY = "/usr/bin/python3"
check = h.Checks("bad-input")
failures = check.failures
s16 = h.s16


def header_v1(key: int, ver: int, corr: int, client: str = "bad-input") -> bytes:
    return struct.pack(">hhi", key, ver, corr) + s16(client)


def header_v2(key: int, ver: int, corr: int, client: str = "bad-input") -> bytes:
    return header_v1(key, ver, corr, client) + b"\x00"  # empty tagged fields


class Conn(h.Conn):
    def __init__(self, port: int):
        super().__init__(port, timeout=10, client_id="bad-input")


def build_batch(values: list[bytes], ts: int = 1_700_000_000_000) -> bytearray:
    sys.path.insert(0, "/usr/lib/python3/dist-packages")
    from kafka.record.default_records import DefaultRecordBatchBuilder
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=64 << 20)
    for i, v in enumerate(values):
        b.append(i, timestamp=ts + i, key=b"k%d" % i, value=v, headers=[])
    return bytearray(b.build())


def produce_v3(topic: str, partition: int, records: bytes | None, acks: int = -1) -> bytes:
    body = struct.pack(">h", -1)  # transactional id: null
    body += struct.pack(">hi", acks, 10000)
    body += struct.pack(">i", 1) + s16(topic) + struct.pack(">i", 1) + struct.pack(">i", partition)
    body += struct.pack(">i", -1 if records is None else len(records)) + (records or b"")
    return body


def parse_produce_v3(resp: bytes) -> tuple[int, int]:
    """(error_code, base_offset) of the single partition."""
    off = 4  # topics count
    (n,) = struct.unpack(">h", resp[off:off + 2])
    off += 2 + n + 4  # name, partitions count
    _, err, base = struct.unpack(">ihq", resp[off:off + 14])
    return err, base


def list_offsets_latest(c: Conn, topic: str, partition: int) -> int:
    body = struct.pack(">i", -1) + struct.pack(">i", 1) + s16(topic) + struct.pack(">i", 1)
    body += struct.pack(">iq", partition, -1)
    resp = c.request(2, 1, body)  # ListOffsets v1
    off = 4
    (n,) = struct.unpack(">h", resp[off:off + 2])
    off += 2 + n + 4
    _, err, _ts, offset = struct.unpack(">ihqq", resp[off:off + 22])
    assert err == 0, f"ListOffsets error {err}"
    return offset


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samsad", required=True)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="samsa-badinput-")
    broker = h.SamsadProcess(a.samsad, work, ["message.max.bytes=100000",
                                              "socket.request.max.bytes=1000000"],
                             log_name="broker.log")
    port = broker.port
    try:
        try:
            broker.start(timeout=30)
        except RuntimeError as e:
            print(f"[bad-input] FAIL: samsad did not start: {e}", flush=True)
            return 1
        run(port)
        check(broker.alive(), "samsad is still running after every bad input")
        # A second broker on the same port must refuse to start (SO_REUSEPORT would otherwise
        # let it share the port and take half the connections).
        second = subprocess.run([a.samsad, "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                                 "--override", f"log.dirs={work}/data2"],
                                capture_output=True, text=True, timeout=30)
        check(second.returncode == 1 and "already in use" in second.stderr,
              f"a second samsad on the same port exits 1 naming the port (rc {second.returncode})")
        check(not os.path.exists(f"{work}/data2"), "and leaves no data directory behind")
        log = broker.log()
        check("unknown api key 9999" in log, "unknown api key is logged")
        check("malformed" in log, "malformed requests are logged")
    finally:
        if broker.alive():
            broker.stop()
            if broker.killed:
                check(False, "samsad stops within 30 s of SIGTERM")
            else:
                check(broker.proc.returncode == 0,
                      f"samsad exits 0 on SIGTERM (got {broker.proc.returncode})")
    if failures:
        print(f"[bad-input] FAILED ({len(failures)}); work dir {work}", flush=True)
        return 1
    subprocess.run(["rm", "-rf", work])
    print("[bad-input] PASS", flush=True)
    return 0


def run(port: int):
    c = Conn(port)
    # ApiVersions v0: the served list; Produce is advertised from 0.
    resp = c.request(18, 0, b"")
    err, n = struct.unpack(">hi", resp[:6])
    apis = {struct.unpack(">hhh", resp[6 + 6 * i:12 + 6 * i])[0]:
            struct.unpack(">hhh", resp[6 + 6 * i:12 + 6 * i])[1:] for i in range(n)}
    check(err == 0 and apis.get(0, (None,))[0] == 0, "ApiVersions v0 lists Produce from v0")

    # ApiVersions newer than served: error 35 and, in the v0 shape (header v0), the versions of
    # ApiVersions itself, as Kafka 4.1 answers (tests/integration/golden).
    resp = c.request(18, 99, b"\x00\x00\x00", flexible=True)
    err, n2 = struct.unpack(">hi", resp[:6])
    only = struct.unpack(">hhh", resp[6:12]) if n2 == 1 else None
    check(err == 35 and only == (18, 0, apis[18][1]),
          "ApiVersions v99 gets UNSUPPORTED_VERSION with ApiVersions' own range")

    # Create a topic with CreateTopics v2 (hand-encoded).
    body = struct.pack(">i", 1) + s16("bad") + struct.pack(">ih", 1, 1)
    body += struct.pack(">i", 0) + struct.pack(">i", 0)  # assignments, configs
    body += struct.pack(">ib", 30000, 0)
    resp = c.request(19, 2, body)
    err = struct.unpack(">h", resp[4 + 4 + 2 + 3:4 + 4 + 2 + 3 + 2])[0]
    check(err == 0, f"CreateTopics v2 creates 'bad' (error {err})")
    # An invalid name: INVALID_TOPIC_EXCEPTION.
    body = struct.pack(">i", 1) + s16("no spaces!") + struct.pack(">ih", 1, 1)
    body += struct.pack(">ii", 0, 0) + struct.pack(">ib", 30000, 0)
    resp = c.request(19, 2, body)
    err = struct.unpack(">h", resp[4 + 4 + 2 + len("no spaces!"):][:2])[0]
    check(err == 17, f"CreateTopics with an invalid name gets INVALID_TOPIC_EXCEPTION (got {err})")

    good = build_batch([b"hello", b"world"])
    resp = c.request(0, 3, produce_v3("bad", 0, bytes(good)))
    err, base = parse_produce_v3(resp)
    check(err == 0 and base == 0, f"a good batch is appended at offset 0 (error {err}, base {base})")
    leo = list_offsets_latest(c, "bad", 0)
    check(leo == 2, f"latest offset is 2 after the good batch (got {leo})")

    def rejected(records: bytes | None, want: int, what: str):
        r = c.request(0, 3, produce_v3("bad", 0, records))
        e, _ = parse_produce_v3(r)
        after = list_offsets_latest(c, "bad", 0)
        check(e == want and after == leo, f"{what}: error {e} (want {want}), log end {after}")

    bad = bytearray(good)
    bad[-3] ^= 0xFF
    rejected(bytes(bad), 2, "a batch with a wrong CRC gets CORRUPT_MESSAGE and appends nothing")
    bad = bytearray(good)
    bad[16] = 1
    rejected(bytes(bad), 87, "a batch with magic 1 gets INVALID_RECORD")
    bad = bytearray(good)
    struct.pack_into(">i", bad, 8, len(good) + 100)
    # Kafka's batch iterator finds no whole batch in these: INVALID_RECORD (golden responses).
    rejected(bytes(bad), 87, "a batch whose length runs past the data gets INVALID_RECORD")
    rejected(bytes(good[:40]), 87, "a truncated batch gets INVALID_RECORD")
    bad = bytearray(good)
    struct.pack_into(">i", bad, 57, 1_000_000)  # record count
    rejected(bytes(bad), 2, "an absurd record count gets CORRUPT_MESSAGE")
    rejected(bytes(good) + bytes(good), 87, "two batches in one partition get INVALID_RECORD")
    big = build_batch([os.urandom(60000), os.urandom(60000)])
    rejected(bytes(big), 10, "a batch over message.max.bytes gets MESSAGE_TOO_LARGE")
    rejected(None, 87, "null records get INVALID_RECORD")

    r = c.request(0, 3, produce_v3("no-such-topic", 0, bytes(good)))
    check(parse_produce_v3(r)[0] == 3, "produce to an unknown topic gets UNKNOWN_TOPIC_OR_PARTITION")
    r = c.request(0, 3, produce_v3("bad", 7, bytes(good)))
    check(parse_produce_v3(r)[0] == 3, "produce to a missing partition gets UNKNOWN_TOPIC_OR_PARTITION")

    r = c.request(0, 3, produce_v3("__consumer_offsets", 0, bytes(good)))
    check(parse_produce_v3(r)[0] == 17,
          "produce to __consumer_offsets gets INVALID_TOPIC_EXCEPTION")
    r = c.request(20, 1, struct.pack(">i", 1) + s16("__consumer_offsets") + struct.pack(">i", 30000))
    off = 4 + 4 + 2 + len("__consumer_offsets")
    check(r is not None and struct.unpack(">h", r[off:off + 2])[0] == 17,
          "DeleteTopics of __consumer_offsets gets INVALID_TOPIC_EXCEPTION")

    # Produce v2 is advertised but refused: UNSUPPORTED_VERSION per partition.
    body = struct.pack(">hi", -1, 1000) + struct.pack(">i", 1) + s16("bad")
    body += struct.pack(">i", 1) + struct.pack(">i", 0) + struct.pack(">i", 0)
    r = c.request(0, 2, body)
    off = 4 + 2 + 3 + 4
    check(r is not None and struct.unpack(">ih", r[off:off + 6])[1] == 35,
          "Produce v2 gets UNSUPPORTED_VERSION")

    # Metadata v1 for an invalid topic name.
    r = c.request(3, 1, struct.pack(">i", 1) + s16("bad name!"))
    nb = struct.unpack(">i", r[:4])[0]
    off = 4
    for _ in range(nb):
        off += 4
        off += 2 + struct.unpack(">h", r[off:off + 2])[0] + 4
        ln = struct.unpack(">h", r[off:off + 2])[0]
        off += 2 + max(ln, 0)
    off += 4 + 4  # controller id, topics count
    check(struct.unpack(">h", r[off:off + 2])[0] == 17,
          "Metadata for an invalid topic name gets INVALID_TOPIC_EXCEPTION")

    # Connection-level faults: each must close that connection only.
    cases = [
        ("unknown api key", header_v1(9999, 0, 1)),
        ("truncated Metadata body", header_v1(3, 1, 1) + struct.pack(">i", 5) + b"\x00"),
        ("array count larger than the frame", header_v1(3, 1, 1) + struct.pack(">i", 0x7fffffff)),
        ("Fetch v1 (below the served range)", header_v1(1, 1, 1) + b"\x00" * 20),
        ("truncated header", b"\x00\x03"),
    ]
    for what, frame in cases:
        x = Conn(port)
        x.send_raw(frame)
        check(x.closed(), f"{what}: connection closed")
    for what, size in [("negative frame size", -5), ("zero frame size", 0),
                       ("frame over socket.request.max.bytes", 50_000_000)]:
        x = Conn(port)
        x.s.sendall(struct.pack(">i", size) + b"\x00" * 16)
        check(x.closed(), f"{what}: connection closed")

    rng = random.Random(7)
    for _ in range(300):
        x = Conn(port)
        junk = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 200)))
        try:
            x.send_raw(junk if rng.random() < 0.5 else header_v1(rng.randint(0, 70),
                                                                   rng.randint(0, 20), 1) + junk)
        except OSError:
            pass
        x.s.close()

    # Still serving, nothing lost.
    c2 = Conn(port)
    check(list_offsets_latest(c2, "bad", 0) == leo, "after all of it the log still ends at 2")
    r = c2.request(0, 3, produce_v3("bad", 0, bytes(build_batch([b"again"]))))
    check(parse_produce_v3(r) == (0, 2), "and takes the next good batch at offset 2")


if __name__ == "__main__":
    sys.exit(main())
