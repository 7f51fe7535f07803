#!/usr/bin/env python3
"""No blocking on a reactor (issue 8, DESIGN.md decision 12): samsad's threads are traced with
strace while a consumer catches up on a cold backlog (page cache dropped, broker restarted) and
a producer makes the log roll segments; any pread, pwrite, fsync or fdatasync issued from a
thread named reactor-N fails the test.

The trace must see those calls somewhere (the offload threads write and sync the rolled
segments' index files), so a trace that catches nothing cannot pass for a clean one; and with
--expect-blocking (samsa.testing.blocking.reads, a test-only hook: fetches read cold batch
headers with pread, as before the read-ahead existed) the test passes only if it catches the
reactor reading.
"""

from __future__ import annotations

import argparse
import collections
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "clients"))
import admin_harness as h  # noqa: E402
import kproto  # noqa: E402

TRACED = ("pread64", "pwrite64", "preadv", "preadv2", "pwritev", "pwritev2", "fsync",
          "fdatasync", "sync_file_range")
TOPIC = "nb"
SEGMENT_BYTES = 256 << 10
VALUE = b"v" * 1000


class Client(kproto.Client):
    def __init__(self, port: int):
        super().__init__("127.0.0.1", port, "no-blocking-test", timeout=60)

    def produce(self, records: int) -> None:
        batch = {"baseOffset": 0, "baseTimestamp": int(time.time() * 1000),
                 "records": [{"key": f"k{i}", "value": VALUE.decode(), "headers": []}
                             for i in range(records)]}
        r = self.call(0, 9, {"Acks": -1, "TimeoutMs": 30000, "TopicData": [
            {"Name": TOPIC, "PartitionData": [{"Index": 0, "Records": {"batches": [batch]}}]}]})
        err = r["Responses"][0]["PartitionResponses"][0]["ErrorCode"]
        assert err == 0, f"produce error {err}"

    def fetch(self, offset: int) -> tuple[int, int]:
        """(records, next offset) from one fetch of up to 1 MiB."""
        r = self.call(1, 12, {
            "ReplicaId": -1, "MaxWaitMs": 100, "MinBytes": 1, "MaxBytes": 4 << 20,
            "IsolationLevel": 0, "SessionId": 0, "SessionEpoch": -1,
            "Topics": [{"Topic": TOPIC, "Partitions": [
                {"Partition": 0, "FetchOffset": offset, "PartitionMaxBytes": 1 << 20}]}],
            "ForgottenTopicsData": [], "RackId": ""})
        p = r["Responses"][0]["Partitions"][0]
        assert p["ErrorCode"] == 0, f"fetch error {p['ErrorCode']}"
        n, nxt = 0, offset
        for b in (p.get("Records") or {}).get("batches", []):
            for rec in b["records"]:
                o = b["baseOffset"] + rec["offsetDelta"]
                if o >= offset:
                    n += 1
                    nxt = o + 1
        return n, nxt


def drop_caches(check) -> None:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1\n")
    except OSError as e:
        check(os.environ.get("CI") != "true", f"drop the page cache ({e}; needs root)")


def thread_names(pid: int) -> dict[int, str]:
    out = {}
    for t in glob.glob(f"/proc/{pid}/task/*"):
        try:
            with open(os.path.join(t, "comm")) as f:
                out[int(os.path.basename(t))] = f.read().strip()
        except OSError:
            pass
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samsad", required=True)
    ap.add_argument("--expect-blocking", action="store_true",
                    help="run with the test-only blocking-reads hook; pass only if caught")
    ap.add_argument("--backlog-mb", type=int, default=24)
    args = ap.parse_args()
    name = "no_blocking" + ("_teeth" if args.expect_blocking else "")
    check = h.Checks(name)
    if not shutil.which("strace"):
        return h.missing(check, "strace not installed (scripts/install-deps.sh installs it)")
    overrides = {"samsa.reactors": "2", "log.segment.bytes": str(SEGMENT_BYTES),
                 "log.index.interval.bytes": "4096"}
    if args.expect_blocking:
        overrides.update({"samsa.testing.hooks": "true", "samsa.testing.blocking.reads": "true"})
    broker = h.Samsad(args.samsad, overrides)
    trace_dir = tempfile.mkdtemp(prefix="samsa-strace-")
    strace = None
    try:
        c = Client(broker.port)
        check(c.create_topic(TOPIC, 1) == 0, "topic created")
        backlog = args.backlog_mb * 1024  # 1 KB records
        for _ in range(backlog // 256):
            c.produce(256)
        c.c.close()
        # A cold backlog: a fresh process, nothing in the page cache.
        check(broker.stop() == 0, "samsad stopped cleanly")
        drop_caches(check)
        broker.start()
        c = Client(broker.port)
        segments_before = len(glob.glob(os.path.join(broker.data, f"{TOPIC}-0", "*.log")))
        check(segments_before >= 20, f"a backlog of {segments_before} segments")

        names = thread_names(broker.proc.pid)
        check(any(n.startswith("reactor-") for n in names.values()), "reactor threads found")
        strace = subprocess.Popen(
            ["strace", "-f", "-qq", "-ff", "-o", os.path.join(trace_dir, "t"),
             "-e", "trace=" + ",".join(TRACED), "-p", str(broker.proc.pid)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)  # strace attaches to every thread

        # Catch up from the start, and meanwhile produce enough to roll a few segments.
        producer = Client(broker.port)
        offset, read, t0 = 0, 0, time.time()
        produced = 0
        while offset < backlog and time.time() - t0 < 120:
            n, offset = c.fetch(offset)
            read += n
            if produced < 1024 * 1024 and read % 4 == 0:
                producer.produce(256)
                produced += 256 * 1024
        check(read >= backlog, f"caught up on the cold backlog: {read} records in "
                               f"{time.time() - t0:.1f} s")
        while produced < 1024 * 1024:
            producer.produce(256)
            produced += 256 * 1024
        time.sleep(0.5)  # offloaded index writes land
        names.update(thread_names(broker.proc.pid))
        segments_after = len(glob.glob(os.path.join(broker.data, f"{TOPIC}-0", "*.log")))
        check(segments_after >= segments_before + 3,
              f"the log rolled while traced ({segments_before} -> {segments_after} segments)")
    except Exception as e:  # noqa: BLE001 - report, then fail
        check(False, f"{type(e).__name__}: {e}")
    finally:
        if strace:
            strace.send_signal(signal.SIGINT)
            try:
                strace.wait(timeout=30)
            except subprocess.TimeoutExpired:
                strace.kill()
        check(broker.stop() == 0, "samsad stopped cleanly")

    calls: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for f in glob.glob(os.path.join(trace_dir, "t.*")):
        tid = int(f.rsplit(".", 1)[1])
        who = names.get(tid, f"tid {tid}")
        with open(f, errors="replace") as fh:
            for line in fh:
                call = line.split("(", 1)[0].strip()
                if call in TRACED:
                    calls[who][call] += 1
    shutil.rmtree(trace_dir, ignore_errors=True)
    for who, cs in sorted(calls.items()):
        check.note(f"{who}: " + ", ".join(f"{k} {v}" for k, v in sorted(cs.items())))
    on_reactors = {w: cs for w, cs in calls.items() if w.startswith("reactor-")}
    elsewhere = sum(sum(cs.values()) for w, cs in calls.items() if not w.startswith("reactor-"))
    check(elsewhere > 0, "the trace saw the offload threads' writes and syncs (it works)")
    if args.expect_blocking:
        check(bool(on_reactors), "with blocking reads the trace catches the reactors reading")
    else:
        check(not on_reactors, "no pread, pwrite, fsync or fdatasync on a reactor thread")
    code = check.finish()
    if code == 0:
        broker.cleanup()
    else:
        print(broker.log()[-3000:])
    return code


if __name__ == "__main__":
    h.main_guard(main)
