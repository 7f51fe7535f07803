#!/usr/bin/python3
# Regenerates the librdkafka test vectors of tests/unit/io/compression_test.cc without a broker:
# librdkafka (through Debian's python3-confluent-kafka) produces to its own in-process mock
# cluster (test.mock.num.brokers) while strace records the bytes its sockets send; the Produce
# requests are then cut out of that stream and each batch's records section is kept.
# Run after compression_gen_kafka_python.py (needs strace; this script re-runs itself under it).
import os
import re
import struct
import subprocess
import sys
import tempfile

OUT = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, OUT)
from compression_gen_records import records  # noqa: E402

HEADER = 61
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def produce(ctype):
    from confluent_kafka import Producer
    p = Producer({"test.mock.num.brokers": 1, "compression.type": ctype, "linger.ms": 2000,
                  "batch.num.messages": 10000, "enable.idempotence": False, "acks": 1})
    for ts, k, v in records():
        p.produce("vectors", key=k, value=v, timestamp=ts, partition=0)
    assert p.flush(30) == 0


def produce_requests(trace):
    # Reassemble what each (pid, fd) sent, then split it into size-prefixed Kafka requests.
    streams = {}
    call = re.compile(r'^(\d+)\s+(sendmsg|sendto|write|writev)\((\d+), (.*)\) = (\d+)$')
    for line in trace.splitlines():
        m = call.match(line)
        if not m:
            continue
        data = b"".join(bytes.fromhex(s.replace("\\x", ""))
                        for s in re.findall(r'"((?:\\x[0-9a-f]{2})*)"', m.group(4)))
        data = data[:int(m.group(5))]
        streams.setdefault((m.group(1), m.group(3)), bytearray()).extend(data)
    for s in streams.values():
        # Client connections open with ApiVersions (key 18); the mock's replies do not.
        if len(s) < 8 or struct.unpack_from(">h", s, 4)[0] != 18:
            continue
        pos = 0
        while pos + 8 <= len(s):
            n, = struct.unpack_from(">i", s, pos)
            key, = struct.unpack_from(">h", s, pos + 4)
            if n <= 0 or pos + 4 + n > len(s) or key < 0 or key > 100:
                break
            if key == 0:
                yield bytes(s[pos + 4:pos + 4 + n])
            pos += 4 + n


def batches(req):
    key, ver, corr, clen = struct.unpack_from(">hhih", req, 0)
    pos = 10 + max(clen, 0)
    if ver >= 3:
        tlen, = struct.unpack_from(">h", req, pos)
        pos += 2 + max(tlen, 0)
    pos += 6  # acks, timeout
    ntopics, = struct.unpack_from(">i", req, pos)
    pos += 4
    for _ in range(ntopics):
        nlen, = struct.unpack_from(">h", req, pos)
        pos += 2 + nlen
        nparts, = struct.unpack_from(">i", req, pos)
        pos += 4
        for _ in range(nparts):
            _, size = struct.unpack_from(">ii", req, pos)
            pos += 8
            yield req[pos:pos + size]
            pos += size


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--produce":
        produce(sys.argv[2])
        return
    for ctype in CODECS:
        # librdkafka may split the records over two batches when a linger timer fires early;
        # one batch is what the vectors want, so try again then.
        for _ in range(5):
            with tempfile.NamedTemporaryFile(suffix=".strace") as t:
                subprocess.run(["strace", "-f", "-qq", "-xx", "-s", "16777216", "-e",
                                "trace=sendmsg,sendto,write,writev", "-o", t.name,
                                sys.executable, os.path.abspath(__file__), "--produce", ctype],
                               check=True)
                trace = open(t.name).read()
            found = [b for r in produce_requests(trace) for b in batches(r)]
            if len(found) == 1:
                break
        assert len(found) == 1, (ctype, len(found))
        b = found[0]
        attrs, = struct.unpack_from(">h", b, 21)
        assert b[16] == 2 and attrs & 7 == CODECS.index(ctype), (ctype, b[16], attrs)
        if ctype == "none":
            assert b[HEADER:] == open(os.path.join(OUT, "compression_plain.bin"), "rb").read(), \
                "librdkafka's plain records differ from kafka-python's"
            continue
        with open(os.path.join(OUT, "compression_%s_librdkafka.bin" % ctype), "wb") as f:
            f.write(b[HEADER:])
        print(ctype, len(b) - HEADER)


main()
