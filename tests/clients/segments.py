"""Reads a broker's stored log segments (Kafka's layout) so client tests can check what was kept.

A partition is `<log.dirs>/<topic>-<partition>/` holding `<20-digit base offset>.log` files of
RecordBatch v2 (magic 2) entries, stored exactly as the producer sent them apart from the base
offset. This module parses those batches, verifies their CRC-32C, and can decompress and decode
their records, so a driver can prove that a batch produced with codec X is stored with codec X
and holds the records that producer sent. check_log checks a partition's batches as a reader of
a log needs them (offsets increasing across batches and segments, records within their batch,
emptied batches without a codec): cluster.compaction uses it on every replica of a compacted log.

Only the standard library is needed to parse headers; decoding compressed records needs the
codec modules (Debian: python3-snappy, python3-lz4, python3-zstandard; gzip is built in).

CLI:  segments.py dump LOG_DIR TOPIC          print every batch of every partition
      segments.py check LOG_DIR EXPECT.json   run check_codecs() (used by the kafkajs driver)
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import struct
import sys
import time
import zlib

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
CODEC_IDS = {v: k for k, v in CODECS.items()}

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordCount
_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = _HEADER.size  # 61
# Bytes of a batch before batchLength's count starts (baseOffset + batchLength).
LOG_OVERHEAD = 12
_SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")


class SegmentError(Exception):
    pass


def _crc32c_table():
    poly = 0x82F63B78  # Castagnoli, reflected
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    table = _CRC_TABLE
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


@dataclasses.dataclass
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


@dataclasses.dataclass
class Batch:
    file: str
    position: int
    base_offset: int
    length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    raw: bytes  # the whole batch, from baseOffset to its last byte

    @property
    def codec(self) -> str:
        return CODECS.get(self.attributes & 0x07, f"unknown({self.attributes & 0x07})")

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & 0x20)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & 0x10)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def segment_base(self) -> int | None:
        """The base offset its segment file is named after (None: not named like a segment)."""
        m = _SEGMENT_NAME.match(os.path.basename(self.file))
        return int(m.group(1)) if m else None

    def crc_ok(self) -> bool:
        # The CRC covers everything from attributes (offset 21) to the end of the batch.
        return crc32c(self.raw[21:]) == self.crc

    def records(self) -> list[Record]:
        body = decompress(self.codec, self.raw[HEADER_SIZE:])
        return _decode_records(body, self)

    def __str__(self) -> str:
        return (f"batch offsets {self.base_offset}..{self.last_offset} pos {self.position} "
                f"len {self.length} magic {self.magic} codec {self.codec} "
                f"records {self.record_count} attrs 0x{self.attributes:04x} "
                f"pid {self.producer_id} seq {self.base_sequence}")


def decompress(codec: str, data: bytes) -> bytes:
    if codec == "none":
        return data
    if codec == "gzip":
        return zlib.decompress(data, 16 + zlib.MAX_WBITS)
    if codec == "snappy":
        import snappy  # python3-snappy
        # The Java client and kafka-python use xerial's framing; librdkafka and kafkajs-snappy
        # send a bare snappy block. Brokers accept both, so both end up in segments.
        xerial = b"\x82SNAPPY\x00"
        if data.startswith(xerial):
            out, pos = bytearray(), 16
            while pos < len(data):
                (n,) = struct.unpack_from(">i", data, pos)
                out += snappy.uncompress(data[pos + 4:pos + 4 + n])
                pos += 4 + n
            return bytes(out)
        return snappy.uncompress(data)
    if codec == "lz4":
        import lz4.frame  # python3-lz4
        return lz4.frame.decompress(data)
    if codec == "zstd":
        import zstandard  # python3-zstandard
        # Streaming: producers need not write the content size into the frame header.
        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    raise SegmentError(f"unknown codec {codec}")


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= len(buf):
            raise SegmentError("varint runs past the end of the records")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise SegmentError("varint too long")
    return (result >> 1) ^ -(result & 1), pos


def _bytes(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    n, pos = _varint(buf, pos)
    if n < 0:
        return None, pos
    if pos + n > len(buf):
        raise SegmentError("record field runs past the end of the records")
    return bytes(buf[pos:pos + n]), pos + n


def _decode_records(body: bytes, batch: Batch) -> list[Record]:
    out, pos = [], 0
    for _ in range(batch.record_count):
        length, pos = _varint(body, pos)
        end = pos + length
        pos += 1  # record attributes, unused
        ts_delta, pos = _varint(body, pos)
        off_delta, pos = _varint(body, pos)
        key, pos = _bytes(body, pos)
        value, pos = _bytes(body, pos)
        nh, pos = _varint(body, pos)
        headers = []
        for _ in range(nh):
            hk, pos = _bytes(body, pos)
            hv, pos = _bytes(body, pos)
            headers.append(((hk or b"").decode("utf-8", "replace"), hv))
        if pos != end:
            raise SegmentError(f"record at offset {batch.base_offset + off_delta}: length says "
                               f"{length} bytes, fields used {length + pos - end}")
        out.append(Record(batch.base_offset + off_delta, batch.base_timestamp + ts_delta, key,
                          value, headers))
    if pos != len(body):
        raise SegmentError(f"{len(body) - pos} bytes left after {batch.record_count} records "
                           f"in {batch}")
    return out


def parse_segment(data: bytes, path: str, strict: bool = False) -> list[Batch]:
    """The batches of a segment file's bytes (`path` names it in Batch.file and errors).

    Zeros after the last batch (a preallocated file) and a tail too short for a batch's first
    12 bytes end the segment; strict=True rejects both: every byte must belong to a batch, as in
    a segment samsad wrote (it does not preallocate)."""
    batches, pos = [], 0
    while pos < len(data):
        if pos + LOG_OVERHEAD > len(data):
            if strict:
                raise SegmentError(f"{path}@{pos}: {len(data) - pos} bytes after the last batch: "
                                   f"a torn batch header?")
            break
        base_offset, length = struct.unpack_from(">qi", data, pos)
        if not strict and length == 0 and base_offset == 0 and not any(data[pos:pos + 64]):
            break  # preallocated zeros after the last batch
        if length < HEADER_SIZE - LOG_OVERHEAD:
            raise SegmentError(f"{path}@{pos}: batch length {length} is below the minimum")
        end = pos + LOG_OVERHEAD + length
        if end > len(data):
            raise SegmentError(f"{path}@{pos}: batch of {length} bytes runs past the file "
                               f"({len(data)} bytes): torn write?")
        fields = _HEADER.unpack_from(data, pos)
        b = Batch(path, pos, *fields, raw=data[pos:end])
        if b.magic != 2:
            raise SegmentError(f"{path}@{pos}: magic {b.magic}, expected 2")
        batches.append(b)
        pos = end
    return batches


def read_segment(path: str, strict: bool = False) -> list[Batch]:
    with open(path, "rb") as f:
        return parse_segment(f.read(), path, strict)


def partition_dirs(log_dir: str, topic: str) -> dict[int, str]:
    """Partition number -> directory for `topic` (Kafka renames deleted ones with a suffix, which
    this pattern does not match)."""
    pat = re.compile(r"^" + re.escape(topic) + r"-(\d+)$")
    out = {}
    for name in os.listdir(log_dir):
        m = pat.match(name)
        if m and os.path.isdir(os.path.join(log_dir, name)):
            out[int(m.group(1))] = os.path.join(log_dir, name)
    return out


def read_dir(directory: str, tries: int = 100) -> dict[str, bytes]:
    """The bytes of a partition directory's .log files by path, read while its listing (names,
    inodes, sizes) stays the same: a log cleaner swaps and deletes segments under a reader."""
    def listing():
        out = {}
        for name in os.listdir(directory):
            if _SEGMENT_NAME.match(name):
                st = os.stat(os.path.join(directory, name))
                out[os.path.join(directory, name)] = (st.st_ino, st.st_size, st.st_mtime_ns)
        return out
    for _ in range(tries):
        try:
            before = listing()
            files = {}
            for path in before:
                with open(path, "rb") as f:
                    files[path] = f.read()
            if listing() == before and all(len(files[p]) == before[p][1] for p in before):
                return files
        except FileNotFoundError:
            pass
        time.sleep(0.02)
    raise SegmentError(f"{directory}: its segments kept changing while read")


def parse_partition(files: dict[str, bytes], strict: bool = False) -> list[Batch]:
    """The batches of a partition's segment files (their bytes by path, as read_dir returns
    them), in log order."""
    batches = []
    for path in sorted(files, key=os.path.basename):
        batches += parse_segment(files[path], path, strict)
    return batches


def read_partition(directory: str, strict: bool = False) -> list[Batch]:
    return parse_partition(read_dir(directory), strict)


def check_log(batches: list[Batch],
              codecs: set[str] | None = None) -> list[tuple[Batch, list[Record]]]:
    """Checks a partition's batches in log order (parse_partition's) and decodes them: [(batch,
    its records)].

    Every batch must have a valid CRC, start at or above its segment's base offset and above
    every offset before it (a compacted log has gaps, so offsets only increase), and use a codec
    in `codecs` (None: any). A batch of 0 records (one a compaction emptied, kept for its
    producer's sequence numbers) must have no records section and no codec: Kafka writes it
    uncompressed, a reader would try to decompress nothing. Each record's offset must be above
    the previous one and within its batch's lastOffsetDelta. Raises SegmentError on the first
    violation (ImportError if a codec module is missing).
    """
    out, last = [], -1
    for b in batches:
        where = f"{b.file}@{b.position} (base offset {b.base_offset})"
        if not b.crc_ok():
            raise SegmentError(f"{where}: CRC-32C mismatch")
        low = max(last + 1, b.segment_base or 0)
        if b.base_offset < low:
            raise SegmentError(f"{where}: base offset not above {low - 1}")
        if b.record_count == 0:
            body = b.raw[HEADER_SIZE:]
            if body or b.attributes & 0x07:
                raise SegmentError(f"{where}: a batch of 0 records with {len(body)} bytes of "
                                   f"records and codec {b.codec}")
        elif codecs is not None and b.codec not in codecs:
            raise SegmentError(f"{where}: codec {b.codec}, only {sorted(codecs)} expected")
        try:
            records = b.records()
        except (SegmentError, ImportError):
            raise
        except Exception as e:  # the codec's own errors (lz4.frame: RuntimeError, zlib.error...)
            raise SegmentError(f"{where}: {b.codec} records: {e}") from e
        for r in records:
            if r.offset <= last or r.offset - b.base_offset > b.last_offset_delta:
                raise SegmentError(f"{where}: record offset {r.offset} after {last} (delta "
                                   f"{r.offset - b.base_offset}, lastOffsetDelta "
                                   f"{b.last_offset_delta})")
            last = r.offset
        last = max(last, b.last_offset)
        out.append((b, records))
    return out


def read_topic(log_dir: str, topic: str) -> dict[int, list[Batch]]:
    return {p: read_partition(d) for p, d in sorted(partition_dirs(log_dir, topic).items())}


def check_codecs(log_dir: str, topic: str, expected: dict[str, int], tag_sep: bytes = b"|",
                 partitions: int | None = None) -> list[str]:
    """Checks the stored batches of `topic` against what a driver produced.

    Drivers start every record value with `<codec>|` naming the codec its producer used.
    `expected` maps codec name -> number of records produced with it. Every stored batch must
    have a valid CRC, magic 2, and only records whose tag equals the batch's codec; per codec
    the stored record count must equal the expected one. Returns human-readable lines (a
    summary); raises SegmentError on the first violation.
    """
    if not os.path.isdir(log_dir):
        raise SegmentError(f"log dir {log_dir} does not exist")
    parts = read_topic(log_dir, topic)
    if not parts:
        raise SegmentError(f"no partition directories for {topic} under {log_dir}")
    if partitions is not None and sorted(parts) != list(range(partitions)):
        raise SegmentError(f"{topic}: partition dirs {sorted(parts)}, expected 0..{partitions - 1}")
    seen: dict[str, int] = {c: 0 for c in expected}
    batches_per_codec: dict[str, int] = {c: 0 for c in expected}
    lines = []
    for p, batches in parts.items():
        next_offset = None
        for b in batches:
            if not b.crc_ok():
                raise SegmentError(f"{topic}-{p}: CRC mismatch in {b}")
            if next_offset is not None and b.base_offset != next_offset:
                raise SegmentError(f"{topic}-{p}: batch starts at {b.base_offset}, previous "
                                   f"ended at {next_offset - 1}")
            next_offset = b.last_offset + 1
            if b.is_control:
                continue
            recs = b.records()
            if len(recs) != b.record_count:
                raise SegmentError(f"{topic}-{p}: {b} decoded {len(recs)} records")
            tags = {(r.value or b"").split(tag_sep, 1)[0].decode("ascii", "replace") for r in recs}
            if len(tags) != 1:
                raise SegmentError(f"{topic}-{p}: {b} mixes records of codecs {sorted(tags)}")
            tag = tags.pop()
            if tag not in expected:
                raise SegmentError(f"{topic}-{p}: {b} holds records tagged {tag!r}, which no "
                                   f"producer of this test wrote")
            if b.codec != tag:
                raise SegmentError(f"{topic}-{p}: records produced with {tag} are stored in a "
                                   f"batch with codec {b.codec}: {b}")
            seen[tag] += len(recs)
            batches_per_codec[tag] += 1
    for codec, n in expected.items():
        if seen[codec] != n:
            raise SegmentError(f"{topic}: {seen[codec]} stored records of codec {codec}, "
                               f"produced {n}")
        lines.append(f"segments: {codec:6} {n} records in {batches_per_codec[codec]} batches, "
                     f"stored with codec {codec}, CRCs valid")
    return lines


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[1] == "dump":
        for p, batches in read_topic(argv[2], argv[3]).items():
            print(f"partition {p}")
            for b in batches:
                print(f"  {b} crc {'ok' if b.crc_ok() else 'BAD'}")
        return 0
    if len(argv) == 4 and argv[1] == "check":
        with open(argv[3]) as f:
            spec = json.load(f)
        try:
            for line in check_codecs(argv[2], spec["topic"], spec["expected"],
                                     partitions=spec.get("partitions")):
                print(line)
        except (SegmentError, ImportError, OSError) as e:
            print(f"segments: FAIL: {e}", file=sys.stderr)
            return 1
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
