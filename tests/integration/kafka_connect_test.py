#!/usr/bin/env python3
"""Kafka Connect 4.1.1 in distributed mode against samsad (jars from Maven Central through
perf/vs-kafka/kafka.sh fetch: connect-runtime comes with kafka-tools, connect-file with the
file connectors is named there):

- the worker creates its three internal topics itself (config, offsets, status; replication
  factor 1, one partition each, small segments passed as `*.storage.<topic config>`) with
  cleanup.policy=compact; restarted, it finds them existing and checks (DescribeConfigs) that
  they are compacted, without complaint;
- FileStreamSource -> topic -> FileStreamSink, created through the REST API, moves a file
  byte-identical (numbered lines, empty lines, tabs, quotes; ASCII: FileStreamSource counts its
  position in characters but skips bytes on a restart, so non-ASCII lines would come twice
  whatever the broker does);
- more source connectors, appends, config updates and pause/resume make superseded records in
  the internal topics while their min.compaction.lag.ms keeps the cleaner off them; their
  records are counted from offset 0, the lag is lifted (AlterConfigs), and once samsad logged a
  cleaner pass for each they are counted again: fewer, every key's latest record still at its
  offset, the survivors unchanged (the counts, on disk and as a consumer reads them, are
  printed);
- the worker is stopped (SIGTERM) and started again on the compacted topics; lines appended
  while it is down and after it is back arrive once each: the sink's file equals the source's,
  the connectors' configs came back from the compacted config topic and the source's position
  (the file's size at the stop) from the compacted offsets topic.

  kafka_connect_test.py --samsad PATH

Needs java and Kafka's jars (skip, exit 77, when missing; a failure under CI=true) and Debian's
python3-confluent-kafka. Everything on 127.0.0.1; the worker and samsad are stopped on exit.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import admin_harness as h  # noqa: E402

KAFKA_VERSION = "4.1.1"
CACHE = os.environ.get("SAMSA_CACHE", os.path.expanduser("~/.cache/samsa"))
LIBS = os.path.join(CACHE, f"kafka-{KAFKA_VERSION}", "libs")

CONFIG_TOPIC, OFFSET_TOPIC, STATUS_TOPIC = "connect-configs", "connect-offsets", "connect-status"
INTERNAL = (CONFIG_TOPIC, OFFSET_TOPIC, STATUS_TOPIC)
DATA_TOPIC, CHURN_TOPIC = "connect-lines", "connect-churn"
CHURN_CONNECTORS = 6
CHURN_SECONDS = 12
# The internal topics' settings, passed by the worker to CreateTopics; min.compaction.lag.ms
# keeps the cleaner off them until the test lifts it.
TOPIC_SETTINGS = {"segment.bytes": "4096", "segment.ms": "1000",
                  "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "3600000"}

checks = h.Checks("kafka-connect")
log = checks.note


def _die_with_parent():
    """In the child before exec: SIGKILL when the test dies (even by SIGKILL)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class Worker:
    """One Kafka Connect distributed worker JVM; its log in work/connect-<n>.log."""

    def __init__(self, work: str, bootstrap: str, rest_port: int):
        self.work, self.rest_port = work, rest_port
        self.url = f"http://127.0.0.1:{rest_port}"
        self.props = os.path.join(work, "worker.properties")
        lines = {
            "bootstrap.servers": bootstrap,
            "group.id": "samsa-connect-test",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "config.storage.topic": CONFIG_TOPIC,
            "offset.storage.topic": OFFSET_TOPIC,
            "status.storage.topic": STATUS_TOPIC,
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "offset.storage.partitions": "1",
            "status.storage.partitions": "1",
            # Source offsets committed every 100 ms (default 60 s): many superseded records.
            "offset.flush.interval.ms": "100",
            "listeners": f"http://127.0.0.1:{rest_port}",
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": str(rest_port),
            "plugin.discovery": "service_load",
            "scheduled.rebalance.max.delay.ms": "0",
            "task.shutdown.graceful.timeout.ms": "10000",
        }
        for prefix in ("config.storage.", "offset.storage.", "status.storage."):
            for k, v in TOPIC_SETTINGS.items():
                lines[prefix + k] = v
        with open(self.props, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in lines.items())
        self.log4j = os.path.join(work, "connect-log4j2.properties")
        self.runs = 0
        self.proc: subprocess.Popen | None = None
        self.log_path = ""

    def start(self):
        self.runs += 1
        self.log_path = os.path.join(self.work, f"connect-{self.runs}.log")
        with open(self.log4j, "w") as f:
            f.write(f"""status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {self.log_path}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.topicadmin.name = org.apache.kafka.connect.util.TopicAdmin
logger.topicadmin.level = DEBUG
logger.file.name = org.apache.kafka.connect.file
logger.file.level = DEBUG
""")
        out = open(os.path.join(self.work, f"connect-{self.runs}.stdout"), "wb")
        self.proc = subprocess.Popen(
            ["java", "-Xms64m", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={self.log4j}",
             "-cp", os.path.join(LIBS, "*"), "org.apache.kafka.connect.cli.ConnectDistributed",
             self.props],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent)
        out.close()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 40) -> int | None:
        """SIGTERM (Connect's graceful shutdown commits the tasks' offsets), SIGKILL after
        `timeout`; the exit code (None if it had to be killed)."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None

    def log(self) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def tail(self, n: int = 25) -> str:
        """The log's last n lines, without the config dumps (indented lines)."""
        lines = [l for l in self.log().splitlines() if l and not l[0].isspace()]
        return "\n".join("    " + l for l in lines[-n:])

    def rest(self, method: str, path: str, body: dict | None = None,
             timeout: float = 30) -> tuple[int, object]:
        """(HTTP status, decoded JSON or text); status 0 when the worker does not answer."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json",
                                              "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                status, raw = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        except OSError:
            return 0, None
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw.decode(errors="replace")

    def rest_retry(self, method: str, path: str, body: dict | None = None,
                   ok=(200, 201, 202, 204), timeout: float = 60,
                   retry_all: bool = False) -> tuple[int, object]:
        """Retries while the worker is starting or rebalancing (no answer, 409, 5xx; with
        `retry_all` any answer but `ok`, e.g. the 404 of a REST server still starting)."""
        deadline = time.monotonic() + timeout
        while True:
            status, out = self.rest(method, path, body)
            if status in ok or (not retry_all and 400 <= status < 500 and status != 409):
                return status, out
            if time.monotonic() > deadline or not self.alive():
                return status, out
            time.sleep(0.3)

    def wait_ready(self, timeout: float = 40) -> float:
        """Until the REST server answers and the herder serves /connectors; the seconds."""
        t0 = time.monotonic()
        status, out = self.rest_retry("GET", "/connectors", ok=(200,), timeout=timeout,
                                      retry_all=True)
        if status != 200:
            raise RuntimeError(f"Connect worker not ready within {timeout:.0f}s "
                               f"(alive={self.alive()}, last answer {status} {out}); "
                               f"{self.log_path}:\n{self.tail()}")
        return time.monotonic() - t0

    def wait_running(self, name: str, timeout: float = 30) -> dict | None:
        """Until the connector and all its tasks are RUNNING; their status (None on time-out)."""
        deadline = time.monotonic() + timeout
        status = None
        while time.monotonic() < deadline:
            code, status = self.rest("GET", f"/connectors/{name}/status")
            if code == 200 and status["connector"]["state"] == "RUNNING" and status["tasks"] \
                    and all(t["state"] == "RUNNING" for t in status["tasks"]):
                return status
            if code == 200 and any(t["state"] == "FAILED" for t in status["tasks"]):
                break
            time.sleep(0.3)
        log(f"connector {name} not RUNNING: {status}")
        return None


# --- records -------------------------------------------------------------------------------

# ASCII only: see the docstring (FileStreamSource's position is in characters).
ALPHABET = ("abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789 .,;:!?'\"\\/"
            "{}[]()<>=+-_*&^%$#@~`|\t")


def make_lines(rng: random.Random, first: int, count: int) -> str:
    """Numbered lines (so a duplicate or a loss shows) of random text, an empty line after every
    97th; every line ends with '\\n' (the source emits only complete lines)."""
    out = []
    for i in range(first, first + count):
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 60)))
        out.append(f"{i:07d} {text}\n")
        if i % 97 == 0:
            out.append("\n")
    return "".join(out)


def append(path: str, text: str):
    with open(path, "a", encoding="utf-8", newline="") as f:
        f.write(text)


def read_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return b""


def wait_identical(src: str, dst: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    want = read_bytes(src)
    while time.monotonic() < deadline:
        got = read_bytes(dst)
        if got == want:
            return True
        if len(got) > len(want):
            break  # more than was written: duplicates
        time.sleep(0.2)
    got = read_bytes(dst)
    log(f"sink file {len(got)} bytes, source file {len(want)} bytes")
    return got == want


def duplicates(path: str) -> list[str]:
    seen, dup = set(), []
    for line in read_bytes(path).decode(errors="replace").splitlines():
        if not line:
            continue
        if line in seen:
            dup.append(line)
        seen.add(line)
    return dup


def disk_records(data_dir: str, topic: str) -> int:
    """The records in partition 0's segment files, from the batch headers (recordsCount)."""
    d = os.path.join(data_dir, f"{topic}-0")
    n = 0
    for name in sorted(os.listdir(d)):
        if not re.fullmatch(r"\d{20}\.log", name):
            continue
        with open(os.path.join(d, name), "rb") as f:
            b = f.read()
        pos = 0
        while pos + 61 <= len(b):
            length = struct.unpack_from(">i", b, pos + 8)[0]
            if pos + 12 + length > len(b):
                break  # a batch still being written
            n += struct.unpack_from(">i", b, pos + 57)[0]
            pos += 12 + length
    return n


def read_topic(bootstrap: str, topic: str, timeout: float = 10) -> list[tuple]:
    """Every record of partition 0 from offset 0 to the end: (offset, key, value)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"count-{time.time()}",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        if hi == 0:
            return []
        c.assign([TopicPartition(topic, 0, 0)])
        out = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    if m.offset() >= hi:
                        return out
                    continue
                raise RuntimeError(f"reading {topic}: {m.error()}")
            out.append((m.offset(), m.key(), m.value()))
        raise RuntimeError(f"did not reach the end ({hi}) of {topic} in {timeout:.0f}s")
    finally:
        c.close()


def topic_configs(admin, topics) -> dict[str, dict[str, str]]:
    from confluent_kafka.admin import ConfigResource
    res = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics]
    out = {}
    for r, f in admin.describe_configs(res).items():
        out[r.name] = {k: v.value for k, v in f.result(timeout=20).items()}
    return out


def cleaner_passes(samsad_log: str, topic: str) -> list[str]:
    return [l for l in samsad_log.splitlines()
            if "log cleaner:" in l and re.search(rf"/{re.escape(topic)}-0: \d+ segments into", l)]


# --- the test ------------------------------------------------------------------------------

def run(broker: h.Samsad, work: str):
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    boot = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": boot})
    rng = random.Random(20261207)

    existing = set(admin.list_topics(timeout=10).topics)
    checks(not existing & set(INTERNAL), f"no internal topic exists before Connect starts "
                                         f"({sorted(existing)})")
    # One partition: the sink then writes the lines in the order the source read them.
    fs = admin.create_topics([NewTopic(DATA_TOPIC, 1, 1), NewTopic(CHURN_TOPIC, 1, 1)])
    for f in fs.values():
        f.result(timeout=20)

    worker = Worker(work, boot, h.free_port())
    run.worker = worker
    t0 = time.monotonic()
    worker.start()
    worker.wait_ready()
    log(f"Connect worker ready in {time.monotonic() - t0:.1f}s (REST on {worker.url})")

    # 1. The internal topics: created by the worker, compacted (it checks the cleanup policy
    # only of topics it did not create: after the restart, below).
    wlog = worker.log()
    for t in INTERNAL:
        checks(re.search(rf"Created topic \(name={re.escape(t)}, numPartitions=1, "
                         rf"replicationFactor=1, .*cleanup.policy=compact", wlog) is not None,
               f"the worker created {t} itself, with cleanup.policy=compact")
    cfgs = topic_configs(admin, INTERNAL)
    for t in INTERNAL:
        c = cfgs[t]
        checks(c.get("cleanup.policy") == "compact" and c.get("segment.bytes") == "4096" and
               c.get("min.compaction.lag.ms") == "3600000",
               f"{t}: cleanup.policy={c.get('cleanup.policy')}, segment.bytes="
               f"{c.get('segment.bytes')}, min.compaction.lag.ms={c.get('min.compaction.lag.ms')}")
    md = admin.list_topics(timeout=10)
    for t in INTERNAL:
        parts = md.topics[t].partitions if t in md.topics else {}
        checks(len(parts) == 1 and all(len(p.replicas) == 1 for p in parts.values()),
               f"{t}: one partition, one replica")

    # 2. A file through FileStreamSource -> topic -> FileStreamSink.
    src, dst = os.path.join(work, "input.txt"), os.path.join(work, "output.txt")
    next_line = 1
    append(src, make_lines(rng, next_line, 3000))
    next_line += 3000
    code, out = worker.rest_retry("POST", "/connectors", {"name": "file-source", "config": {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "tasks.max": "1", "file": src, "topic": DATA_TOPIC}})
    checks(code == 201, f"POST /connectors file-source: {code}")
    code, out = worker.rest_retry("POST", "/connectors", {"name": "file-sink", "config": {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
        "tasks.max": "1", "file": dst, "topics": DATA_TOPIC}})
    checks(code == 201, f"POST /connectors file-sink: {code}")
    for name in ("file-source", "file-sink"):
        checks(worker.wait_running(name) is not None, f"{name} and its task RUNNING")
    t1 = time.monotonic()
    checks(wait_identical(src, dst, 60),
           f"sink file byte-identical to the source file ({os.path.getsize(src)} bytes, "
           f"{next_line - 1} numbered lines)")
    log(f"first file moved in {time.monotonic() - t1:.1f}s")

    # 3. Superseded records in the internal topics: more source connectors (FileStreamSource
    # polls at most once a second when idle, so one offset commit a second each), appends to
    # every file, config updates and pause/resume.
    churn_files = [os.path.join(work, f"churn-{i}.txt") for i in range(CHURN_CONNECTORS)]
    for i, path in enumerate(churn_files):
        append(path, f"churn {i} start\n")
        code, _ = worker.rest_retry("PUT", f"/connectors/churn-{i}/config", {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "tasks.max": "1", "file": path, "topic": CHURN_TOPIC})
        checks(code in (200, 201), f"PUT /connectors/churn-{i}/config: {code}")
    for i in range(CHURN_CONNECTORS):
        worker.wait_running(f"churn-{i}")
    stop_writer = threading.Event()

    def writer():
        n = 0
        while not stop_writer.is_set():
            n += 1
            for i, path in enumerate(churn_files):
                append(path, f"churn {i} line {n}\n")
            stop_writer.wait(0.25)

    wt = threading.Thread(target=writer, daemon=True)
    wt.start()
    churn_end = time.monotonic() + CHURN_SECONDS
    while time.monotonic() < churn_end:
        append(src, make_lines(rng, next_line, 40))
        next_line += 40
        time.sleep(0.5)
    for rnd in range(2):
        for i, path in enumerate(churn_files):
            code, _ = worker.rest_retry("PUT", f"/connectors/churn-{i}/config", {
                "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
                "tasks.max": "1", "file": path, "topic": CHURN_TOPIC,
                "batch.size": str(1000 + rnd)})
            checks(code == 200, f"config update {rnd} of churn-{i}: {code}")
        for i in range(CHURN_CONNECTORS):
            worker.rest_retry("PUT", f"/connectors/churn-{i}/pause")
        time.sleep(1)
        for i in range(CHURN_CONNECTORS):
            worker.rest_retry("PUT", f"/connectors/churn-{i}/resume")
        time.sleep(1)
    stop_writer.set()
    wt.join()
    for i in range(CHURN_CONNECTORS):
        checks(worker.wait_running(f"churn-{i}") is not None, f"churn-{i} RUNNING after churn")
    checks(wait_identical(src, dst, 60),
           f"sink file still byte-identical after appends ({next_line - 1} lines)")
    time.sleep(1.5)  # the last offset flushes

    # 4. The internal topics before and after the cleaner.
    slog = broker.log()
    for t in INTERNAL:
        checks(not cleaner_passes(slog, t), f"{t}: no cleaner pass yet (min.compaction.lag.ms)")
    data = broker.data
    before, before_disk = {}, {}
    for t in INTERNAL:
        recs = read_topic(boot, t)
        before[t], before_disk[t] = recs, disk_records(data, t)
        keys = len({k for _, k, _ in recs})
        log(f"before cleaning: {t}: {len(recs)} records read ({before_disk[t]} on disk), "
            f"{keys} keys, offsets 0..{recs[-1][0]}")
        checks(len(recs) == recs[-1][0] + 1 == before_disk[t],
               f"{t}: offsets 0..{recs[-1][0]} all there before cleaning, as on disk")
    off_keys = {k for _, k, _ in before[OFFSET_TOPIC]}
    checks(len(before[OFFSET_TOPIC]) >= 3 * len(off_keys),
           f"{OFFSET_TOPIC}: {len(before[OFFSET_TOPIC])} offset commits for {len(off_keys)} "
           f"source partitions")
    # AlterConfigs replaces every override: the same settings, without the lag.
    lifted = {"cleanup.policy": "compact", **TOPIC_SETTINGS, "min.compaction.lag.ms": "0"}
    fs = admin.alter_configs([ConfigResource(ConfigResource.Type.TOPIC, t, set_config=lifted)
                              for t in INTERNAL])
    for f in fs.values():
        f.result(timeout=20)
    t2 = time.monotonic()
    pending = set(INTERNAL)
    while pending and time.monotonic() - t2 < 30:
        slog = broker.log()
        pending = {t for t in pending if not cleaner_passes(slog, t)}
        time.sleep(0.3)
    checks(not pending, f"a cleaner pass on each internal topic within 30s "
                        f"(waited {time.monotonic() - t2:.1f}s; missing: {sorted(pending)})")
    for t in INTERNAL:
        for line in cleaner_passes(slog, t)[:3]:
            log(f"samsad: {line.strip()}")
    after, after_disk = {}, {}
    for t in INTERNAL:
        b = before[t]
        after_disk[t] = disk_records(data, t)
        checks(after_disk[t] < before_disk[t],
               f"{t}: {before_disk[t]} records on disk before cleaning, {after_disk[t]} after")
        try:
            recs = read_topic(boot, t)
        except RuntimeError as e:
            checks(False, f"{t}: a consumer reads the cleaned topic from offset 0 ({e})")
            continue
        after[t] = recs
        log(f"after cleaning:  {t}: {len(recs)} records read ({after_disk[t]} on disk), "
            f"{len({k for _, k, _ in recs})} keys")
        checks(len(recs) < len(b), f"{t}: {len(b)} records read before cleaning, {len(recs)} "
                                   f"after")
        # Every key's latest record before cleaning is still there, at its offset.
        latest = {}
        for off, k, v in b:
            latest[k] = (off, v)
        got = {off: (k, v) for off, k, v in recs}
        lost = [k for k, (off, v) in latest.items() if got.get(off) != (k, v)]
        checks(not lost, f"{t}: every key's latest record kept at its offset ({len(lost)} lost)")
        # What was in `before` and survived is at its old offset with its old contents.
        old = {off: (k, v) for off, k, v in b}
        changed = [off for off in got if off in old and old[off] != got[off]]
        checks(not changed, f"{t}: surviving records unchanged")
    rows = " | ".join(f"{t} {before_disk[t]} -> {after_disk[t]} on disk, "
                      f"{len(before[t])} -> {len(after[t]) if t in after else '(read failed)'} read"
                      for t in INTERNAL)
    log(f"RECORDS before -> after cleaning: {rows}")
    # The source's position in the offsets topic: the whole file (ASCII: characters = bytes).
    src_key = json.dumps(["file-source", {"filename": src}], separators=(",", ":")).encode()
    positions = [json.loads(v)["position"] for _, k, v in after.get(OFFSET_TOPIC, before[
        OFFSET_TOPIC]) if k == src_key and v]
    checks(positions and positions[-1] == os.path.getsize(src),
           f"the offsets topic holds the source's position {positions[-1:]} = the file's size "
           f"{os.path.getsize(src)}")

    # 5. Restart the worker on the compacted topics; appends while down and after.
    src_size_at_stop = os.path.getsize(src)
    rc = worker.stop()
    checks(rc is not None, f"Connect worker stopped on SIGTERM (exit {rc})")
    append(src, make_lines(rng, next_line, 500))
    next_line += 500
    t3 = time.monotonic()
    worker.start()
    worker.wait_ready(timeout=30)
    log(f"Connect worker restarted, ready in {time.monotonic() - t3:.1f}s")
    # The worker checks the cleanup policy of internal topics it did not create itself.
    wlog2 = worker.log()
    for t in INTERNAL:
        checks(f"Found cleanup.policy=compact for topic '{t}'" in wlog2,
               f"the restarted worker found {t} compacted (its cleanup policy check)")
    checks("Unable to use admin client to verify the cleanup policy" not in wlog2 and
           "is required to have 'cleanup.policy=compact'" not in wlog2,
           "the restarted worker could verify the internal topics' cleanup policy, no complaint")
    code, names = worker.rest_retry("GET", "/connectors", ok=(200,))
    want_names = {"file-source", "file-sink"} | {f"churn-{i}" for i in range(CHURN_CONNECTORS)}
    checks(code == 200 and set(names or []) == want_names,
           f"every connector back from the compacted config topic ({sorted(names or [])})")
    code, cfg = worker.rest_retry("GET", "/connectors/churn-0/config", ok=(200,))
    checks(code == 200 and cfg.get("batch.size") == "1001",
           f"churn-0's latest config came back ({cfg})")
    for name in ("file-source", "file-sink"):
        checks(worker.wait_running(name) is not None, f"{name} RUNNING after the restart")
    wlog2 = worker.log()
    skips = [int(x) for x in
             re.findall(r"Found previous offset, trying to skip to file offset (\d+)", wlog2)]
    checks(src_size_at_stop in skips,
           f"the source resumed at its committed position, the file's size at the stop "
           f"{src_size_at_stop} (skips logged: {skips})")
    append(src, make_lines(rng, next_line, 500))
    next_line += 500
    checks(wait_identical(src, dst, 60),
           f"after the restart the sink file equals the source file ({next_line - 1} lines, "
           f"{os.path.getsize(src)} bytes)")
    dup = duplicates(dst)
    checks(not dup, f"no line written twice ({len(dup)} duplicates, e.g. {dup[:2]})")

    for n, text in ((1, wlog), (2, wlog2)):
        errors = [l for l in text.splitlines() if "] ERROR " in l]
        checks(not errors, f"worker run {n}: no ERROR in its log ({errors[:3]})")
    checks(worker.alive(), "the worker still runs")
    rc = worker.stop()
    checks(rc is not None, f"Connect worker stopped on SIGTERM (exit {rc})")
    slog = broker.log()
    bad = [l for l in slog.splitlines() if "log cleaner:" in l and
           (" WARN " in l or " ERROR " in l or "error" in l.lower())]
    checks(not bad, f"no cleaner warnings or errors in samsad's log ({bad[:3]})")


class Terminated(Exception):
    pass


def _terminated(*_):
    raise Terminated("SIGTERM")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samsad", required=True)
    a = ap.parse_args()
    if not shutil.which("java"):
        return h.missing(checks, "java not found (scripts/install-deps.sh installs "
                                 "openjdk-17-jdk-headless)")
    for jar in (f"connect-runtime-{KAFKA_VERSION}.jar", f"connect-file-{KAFKA_VERSION}.jar"):
        if not os.path.exists(os.path.join(LIBS, jar)) or \
                not os.path.exists(os.path.join(LIBS, ".complete")):
            return h.missing(checks, f"{jar} not fetched (bash perf/vs-kafka/kafka.sh fetch)")
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return h.missing(checks, "python3-confluent-kafka is not installed (Debian package)")

    # A SIGTERM (ctest's time-out, a runner) fails the test and unwinds through the finally
    # blocks below, which stop the worker and samsad.
    signal.signal(signal.SIGTERM, _terminated)
    broker = h.Samsad(a.samsad, {"log.cleaner.backoff.ms": "500", "num.partitions": "1"})
    work = tempfile.mkdtemp(prefix="samsa-connect-")
    run.worker = None
    try:
        try:
            run(broker, work)
        except Exception as e:
            checks(False, f"unexpected {type(e).__name__}: {e}")
            if run.worker is not None:
                log(f"worker log tail ({run.worker.log_path}):\n{run.worker.tail()}")
        finally:
            if run.worker is not None:
                run.worker.stop(timeout=15)
        checks(broker.proc.poll() is None, "samsad is still running")
        checks(broker.stop() == 0, "samsad exits 0 on SIGTERM")
    finally:
        if run.worker is not None:
            run.worker.stop(timeout=5)
        rc = checks.finish()
        if rc == 0:
            broker.cleanup()
            shutil.rmtree(work, ignore_errors=True)
        else:
            broker.stop()
            log(f"work dirs kept: {broker.work} (samsad), {work} (Connect)")
    return rc


if __name__ == "__main__":
    sys.path.insert(0, "/usr/lib/python3/dist-packages")
    h.main_guard(main)
