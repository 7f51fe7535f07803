#!/usr/bin/python3
# Regenerates the kafka-python test vectors of tests/unit/io/compression_test.cc, and the plain
# records section all vectors decompress to: builds one RecordBatch v2 per codec with
# kafka-python's own batch builder (so its codec framing is the one it really sends) and keeps
# the batch's records section. Needs Debian's python3-kafka, python3-snappy, python3-lz4,
# python3-zstandard.
import os
import sys

OUT = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, OUT)
from compression_gen_records import records  # noqa: E402
from kafka import codec  # noqa: E402
from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402

HEADER = 61  # RecordBatch v2 header; the (compressed) records section follows


def batch(ctype):
    b = DefaultRecordBatchBuilder(magic=2, compression_type=ctype, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 20)
    for off, (ts, k, v) in enumerate(records()):
        b.append(off, timestamp=ts, key=k, value=v, headers=[])
    buf = bytes(b.build())
    attrs = int.from_bytes(buf[21:23], "big")
    assert attrs & 7 == ctype, (ctype, attrs)
    return buf[HEADER:]


def write(name, data):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
    print(name, len(data))


plain = batch(0)
write("compression_plain.bin", plain)
for ctype, name in ((1, "gzip"), (2, "snappy"), (3, "lz4"), (4, "zstd")):
    write("compression_%s_kafka_python.bin" % name, batch(ctype))
# A raw snappy block (no xerial framing) of the first 300 bytes, as some clients send it.
write("compression_snappyraw300_kafka_python.bin",
      codec.snappy_encode(plain[:300], xerial_compatible=False))
