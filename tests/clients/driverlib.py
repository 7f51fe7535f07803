"""What the Python client drivers share: arguments, the hard time limit, the records each codec's
producer sends, and the comparisons. Each driver stays a standalone program built on this.

Record values start with `<codec>|` so segments.check_codecs can tell which producer wrote a
stored batch; the rest is compressible on purpose even for a batch of one record (librdkafka and
kafka-python send a batch uncompressed when compression does not shrink it, which would hide
whether the broker kept the codec).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import threading
import time
import traceback

import segments

ALL_CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 3


class DriverError(Exception):
    pass


def fail(msg: str):
    raise DriverError(msg)


def check(cond, msg: str):
    if not cond:
        raise DriverError(msg)


@dataclasses.dataclass
class Rec:
    partition: int
    key: bytes | None
    value: bytes
    headers: list[tuple[str, bytes]]
    timestamp: int
    codec: str


def parse_args(name: str, extra=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog=name)
    ap.add_argument("--bootstrap", required=True, help="HOST:PORT of the broker")
    ap.add_argument("--topic-prefix", required=True, help="prefix for every topic and group")
    ap.add_argument("--log-dir", required=True, help="the broker's log.dirs, to read segments")
    ap.add_argument("--timeout", type=float, default=60.0, help="hard limit for the whole run (s)")
    ap.add_argument("--small", action="store_true",
                    help="a few records per codec (for request captures)")
    ap.add_argument("--codecs", default=",".join(ALL_CODECS),
                    help="comma-separated subset of " + ",".join(ALL_CODECS))
    ap.add_argument("--full", action="store_true",
                    help="the full flow of tests/clients/README.md (admin steps 5-8 too)")
    if extra:
        extra(ap)
    args = ap.parse_args()
    args.codecs = [c for c in args.codecs.split(",") if c]
    for c in args.codecs:
        if c not in ALL_CODECS:
            ap.error(f"unknown codec {c}")
    return args


class Steps:
    """Prints each step with the time since start, so a failure shows where it stopped."""

    def __init__(self, name: str):
        self.name = name
        self.t0 = time.monotonic()

    def __call__(self, msg: str):
        print(f"[{self.name} {time.monotonic() - self.t0:6.2f}s] {msg}", flush=True)


def arm_watchdog(name: str, seconds: float):
    """A thread, not SIGALRM: the main thread may sit inside a C library call (librdkafka) that
    a Python signal handler would not interrupt."""

    def expire():
        print(f"{name}: FAIL: hard timeout of {seconds:.0f}s reached", file=sys.stderr, flush=True)
        os._exit(3)

    t = threading.Timer(seconds, expire)
    t.daemon = True
    t.start()
    return t


class Flow:
    """The numbered steps of the full flow (tests/clients/README.md). Each step's result is
    recorded and the run goes on after a failed step, so one run against a broker that lacks
    some APIs shows every step that fails and why; `fatal` steps (nothing after them can work)
    end the run. The summary lines (`RESULT <step> PASS|FAIL ...`) are what the harness and the
    reports quote; the same step ids are used by every driver."""

    def __init__(self, name: str, steps: Steps):
        self.name, self.steps = name, steps
        self.results: list[tuple[str, str, str | None]] = []

    def run(self, sid: str, title: str, fn, fatal: bool = False):
        t = time.monotonic()
        try:
            out = fn()
        except (DriverError, segments.SegmentError) as e:
            self._record(sid, title, str(e), t)
            if fatal:
                self.finish()
            return None
        except Exception as e:  # noqa: BLE001 - any client exception fails the step
            traceback.print_exc()
            self._record(sid, title, f"{type(e).__name__}: {e}", t)
            if fatal:
                self.finish()
            return None
        self._record(sid, title, None, t)
        return out

    def _record(self, sid, title, err, t):
        took = f"{time.monotonic() - t:.1f}s"
        self.results.append((sid, title, err))
        if err is None:
            self.steps(f"step {sid} ({title}) passed in {took}")
        else:
            self.steps(f"step {sid} ({title}) FAILED after {took}: {err}")

    def failed(self, sid_prefix: str) -> bool:
        return any(s.startswith(sid_prefix) and e is not None for s, _, e in self.results)

    def finish(self):
        for sid, title, err in self.results:
            print(f"RESULT {sid:6} {title:28} " + ("PASS" if err is None else f"FAIL: {err}"),
                  flush=True)
        bad = [sid for sid, _, err in self.results if err is not None]
        if bad:
            raise DriverError(f"steps failed: {', '.join(bad)}")


def run_main(name: str, args: argparse.Namespace, body) -> None:
    arm_watchdog(name, args.timeout)
    steps = Steps(name)
    try:
        body(args, steps)
    except DriverError as e:
        print(f"{name}: FAIL: {e}", file=sys.stderr, flush=True)
        os._exit(1)
    except segments.SegmentError as e:
        print(f"{name}: FAIL: stored segments: {e}", file=sys.stderr, flush=True)
        os._exit(1)
    except Exception:
        traceback.print_exc()
        print(f"{name}: FAIL: unexpected exception", file=sys.stderr, flush=True)
        os._exit(1)
    steps("PASS")
    sys.stdout.flush()
    # os._exit: client libraries' background threads must not keep a finished run alive.
    os._exit(0)


_FILLER = b"samsa-kafka-compatible-log-broker;" * 8


def make_records(codec: str, prefix: str, count: int, t0: int, start_index: int,
                 printable: bool = False) -> list[Rec]:
    """`count` records for one codec's producer, spread round-robin over the partitions, with
    strictly increasing timestamps (t0 + 10 ms per record across the whole run, so a timestamp
    lookup has exactly one right answer). Keys, headers and values vary in shape: null key,
    binary bytes, no headers, duplicate header keys, empty header values, empty filler."""
    out = []
    for i in range(count):
        g = start_index + i
        filler = _FILLER + _FILLER[: (i * 37) % len(_FILLER)]
        if printable:
            key = f"key-{codec}-{i}".encode()
            value = f"{codec}|{prefix}|{i:04d}|".encode() + filler
            headers = [("codec", codec.encode()), ("i", str(i).encode())]
        else:
            key = None if i == 1 else f"key-{codec}-{i}".encode() + bytes([0, 255, i % 256])
            value = f"{codec}|{prefix}|{i:04d}|".encode() + filler + bytes([0, 128 + i % 128])
            headers = [
                [],
                [("h1", b"v1"), ("bin", bytes([0, 1, 254, 255]))],
                [("dup", b"a"), ("dup", b"b"), ("empty", b"")],
                [("codec", codec.encode())],
            ][i % 4]
        out.append(Rec(i % PARTITIONS, key, value, headers, t0 + g * 10, codec))
    return out


def produce_every_codec(args: argparse.Namespace, steps: Steps, produce, setting: str) -> list[Rec]:
    """The records of every --codecs producer (3 each with --small, else 30), handed to
    produce(codec, records) in turn; timestamps from 10 minutes ago. `setting`: the client's
    name for the compression setting, for the step lines."""
    t0 = now_ms() - 600_000
    count = 3 if args.small else 30
    produced: list[Rec] = []
    for codec in args.codecs:
        recs = make_records(codec, args.topic_prefix, count, t0, len(produced))
        produce(codec, recs)
        produced += recs
        steps(f"produced {len(recs)} records with {setting}={codec}, acks=all")
    return produced


def by_partition(recs: list[Rec], partitions: int = PARTITIONS) -> dict[int, list[Rec]]:
    out: dict[int, list[Rec]] = {p: [] for p in range(partitions)}
    for r in recs:
        out[r.partition].append(r)
    return out


def compare_partition(p: int, want: list[Rec], got: list[tuple], what: str = "consumed",
                      first: int = 0):
    """`got`: (offset, key, value, headers) in the order received; `want`: the records produced
    from offset `first` on. Offsets must be first..first+n-1 and every field byte-identical to
    what was produced, in production order."""
    if len(got) != len(want):
        fail(f"partition {p}: {what} {len(got)} records from offset {first}, produced "
             f"{len(want)}")
    for i, (w, g) in enumerate(zip(want, got)):
        check_record(p, first + i, w, g, f"{what} #{i}")


def check_record(p: int, offset: int, w: Rec, g: tuple, what: str):
    """One received (offset, key, value, headers) against the record produced at `offset`."""
    off, key, value, headers = g
    where = f"partition {p} offset {off} ({what}, codec {w.codec})"
    check(off == offset, f"{where}: expected offset {offset}")
    check(key == w.key, f"{where}: key {key!r} != produced {w.key!r}")
    check(value == w.value, f"{where}: value {value[:60]!r}... != produced {w.value[:60]!r}...")
    check(list(headers) == list(w.headers),
          f"{where}: headers {headers!r} != produced {w.headers!r}")


def timestamp_target(per_part: dict[int, list[Rec]], p: int) -> tuple[int, int]:
    """A timestamp lookup with one right answer: 3 ms before the middle record of partition p,
    which lies after the previous record of that partition (records are 10 ms apart).
    Returns (timestamp to look up, expected offset)."""
    recs = per_part[p]
    idx = len(recs) // 2
    return recs[idx].timestamp - 3, idx


def check_segments(steps: Steps, log_dir: str, topic: str, recs: list[Rec]):
    expected: dict[str, int] = {}
    for r in recs:
        expected[r.codec] = expected.get(r.codec, 0) + 1
    for line in segments.check_codecs(log_dir, topic, expected, partitions=PARTITIONS):
        steps(line)


def wait_until(pred, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            fail(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def now_ms() -> int:
    return int(time.time() * 1000)


# The full flow's fixed figures (tests/clients/README.md); every driver uses the same ones.
RET_SUFFIX = "-ret"  # topic for step 5: 1 partition, segment.ms=SEGMENT_MS
SEGMENT_MS = 100  # Kafka 4 refuses segment.bytes below 1 MiB: segments roll by record time
RET_RECORDS = 6  # each in a batch of its own, 1 s of record time apart: one segment each
RETENTION_MS = 1000  # the records are 10 minutes old: every closed segment expires
MAX_MESSAGE_BYTES = 2048
BIG_VALUE_BYTES = 8192  # random, uncompressed: over MAX_MESSAGE_BYTES whatever the codec
NEW_PARTITIONS = 4  # step 6 grows the topic from PARTITIONS to this
NEW_RECORDS = 3  # produced to the new partition
LAG = 2  # step 8 commits each partition's end minus LAG


def retention_records(prefix: str, t0: int) -> list[Rec]:
    return [Rec(0, f"ret-{i}".encode(), f"none|{prefix}|ret|{i}|".encode() + _FILLER,
                [("r", str(i).encode())], t0 + i * 1000, "none") for i in range(RET_RECORDS)]


def new_partition_records(prefix: str, t0: int) -> list[Rec]:
    p = NEW_PARTITIONS - 1
    return [Rec(p, f"new-{i}".encode() + bytes([0, 255]),
                f"none|{prefix}|new|{i}|".encode() + _FILLER + bytes([0, 200 + i]),
                [("new", str(i).encode()), ("bin", bytes([0, 255]))], t0 + i * 10, "none")
            for i in range(NEW_RECORDS)]


def big_record(t: int) -> Rec:
    return Rec(0, b"big", os.urandom(BIG_VALUE_BYTES), [], t, "none")
