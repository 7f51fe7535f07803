#!/usr/bin/env python3
"""Exactly once through faults: an idempotent producer (the Java client with its defaults, or
franz-go) writes N records to a 6-partition topic through a fault-injecting proxy while samsad
is killed with SIGKILL and restarted; afterwards every acknowledged record must be stored
exactly once, in send order per partition.

  eos_test.py --samsad PATH --client java|franz-go [--teeth] [--full] [--seed S] [--keep]
              [--records N] [--drops N] [--produce-drops N] [--kills N] [--rate R]

- samsad advertises the proxy (tests/integration/fault_proxy.py), so every client connection
  after bootstrap goes through it. The producer is paced (--rate records/s); the proxy drops
  connections (both sides) at moments drawn at random over the paced run time: --drops at once,
  and --produce-drops right after it forwarded a Produce, swallowing the broker's answer, so
  that the client retries a batch the broker already stored. Requests the broker leaves
  unanswered for 5 s are logged ("broker stall") and counted.
- samsad is killed (SIGKILL) --kills times at random moments and restarted on the same port and
  data.
- The producer appends every acknowledged record (partition, offset, per-partition sequence) to
  a file; each value carries (producer tag, partition, sequence). The checker (confluent-kafka)
  then reads every partition from the start and counts duplicates (extra copies of any record),
  losses (acknowledged records not stored), reorders (a record stored after a later one of the
  same partition) and acknowledgements naming an offset that holds another record.

Default verdict: no duplicates, losses, reorders or wrong offsets; every record acknowledged;
at least --drops + --produce-drops drops (>= 50, >= 10 after a Produce) and --kills kills.
--teeth switches samsad's producer sequence check off (the test-only hook
`samsa.testing.hooks=true`, `samsa.testing.producer.sequence.check=false`) and passes only if
duplicates are found (and nothing acknowledged is lost): the proof that the check is what keeps
the default run clean.

The CI size (default: 200,000 records at 5,000/s, 45 drops and 15 after a Produce, 3 kills)
takes about 50 s per client; --full (1,000,000 records at 12,000/s, 200 drops and 50 after a
Produce, 6 kills) about 110 s. --broker kafka runs Apache Kafka 4.1.1 instead (by hand; its
restarts take ~15 s, so pass --rate 1500). Everything the run saw stays in the work dir on
failure: producer.out/err (client logs), proxy.log (connections and drops), samsad.log,
acks.txt, result.json. Exit codes: 0 pass, 1 fail, 77 skipped (a
client is missing and CI is not true).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CLIENTS = os.path.join(ROOT, "tests", "clients")
KAFKA_SH = os.path.join(ROOT, "perf", "vs-kafka", "kafka.sh")
PARTITIONS = 6
TOPIC = "eos"
PAD = 40  # filler bytes after the fields of each value
T0 = time.monotonic()
sys.path.insert(0, HERE)
import admin_harness as h  # noqa: E402
from fault_proxy import FaultProxy  # noqa: E402


log = h.logger("eos", since=T0)


class Samsad(h.SamsadProcess):
    """samsad on a fixed port and data dir, advertising the proxy; kill -9 and restart keep
    both."""

    def __init__(self, binary: str, work: str, port: int, advertised_port: int, extra: list[str]):
        # Segments roll during the run, so restarts find producer state in more than the active
        # segment.
        super().__init__(binary, work, ["node.id=1", "log.segment.bytes=1048576"] + extra,
                         port=port, advertised_port=advertised_port, new_session=True)
        self.restart_seconds: list[float] = []
        self.listener_linger: list[float] = []

    def start(self, timeout: float = 60):
        return super().start(timeout, interval=0.02)

    def kill_and_restart(self, rng: random.Random):
        self.kill()
        # The dead process's io_uring is torn down after the process is reaped, and its
        # listening socket with it: for ~10-20 ms the kernel still completes handshakes there
        # that nobody serves, and a samsad started meanwhile refuses to start ("already in use
        # by another process"). Wait until connections are refused.
        t = time.monotonic()
        while time.monotonic() - t < 10:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
            except ConnectionRefusedError:
                break
            except OSError:
                pass
            time.sleep(0.005)
        self.listener_linger.append(time.monotonic() - t)
        time.sleep(rng.uniform(0, 0.3))
        self.restart_seconds.append(self.start())


class Kafka:
    """Apache Kafka 4.1.1 through perf/vs-kafka/kafka.sh, with Samsad's interface: the oracle
    that shows the test passes against the reference implementation (--broker kafka)."""

    def __init__(self, work: str, port: int, advertised_port: int):
        self.work, self.port = work, port
        self.env = dict(os.environ, KAFKA_ADVERTISED_PORT=str(advertised_port),
                        KAFKA_CONTROLLER_PORT=str(h.free_port()))
        self.restart_seconds: list[float] = []

    def start(self):
        t = time.monotonic()
        r = subprocess.run(["bash", KAFKA_SH, "start", self.work, str(self.port),
                            "log.segment.bytes=1048576"], env=self.env, capture_output=True,
                           text=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError(f"kafka.sh start failed: {r.stderr.strip()}")
        return time.monotonic() - t

    def pid(self) -> int:
        with open(os.path.join(self.work, "kafka.pid")) as f:
            return int(f.read().strip())

    def kill_and_restart(self, rng: random.Random):
        pid = self.pid()
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        while os.path.exists(f"/proc/{pid}"):
            time.sleep(0.02)
        time.sleep(rng.uniform(0, 0.3))
        self.restart_seconds.append(self.start())

    def alive(self) -> bool:
        try:
            os.kill(self.pid(), 0)
            return True
        except (OSError, ValueError):
            return False

    def stop(self) -> str | None:
        r = subprocess.run(["bash", KAFKA_SH, "stop", self.work], capture_output=True, text=True,
                           timeout=90)
        return None if r.returncode == 0 else f"kafka.sh stop: {r.stderr.strip()}"


def producer_command(client: str, work: str) -> tuple[list[str] | None, str | None]:
    """The producer's command line without its arguments, or why it cannot run."""
    if client == "java":
        if not shutil.which("java"):
            return None, "java not found (apt-get install openjdk-17-jdk-headless)"
        r = subprocess.run(["bash", KAFKA_SH, "classpath"], capture_output=True, text=True,
                           timeout=600)
        if r.returncode != 0:
            return None, f"kafka.sh classpath failed: {r.stderr.strip()}"
        jars = r.stdout.strip()
        if not os.path.isdir(os.path.dirname(jars)):
            return None, "Kafka's jars are not fetched (bash perf/vs-kafka/kafka.sh fetch)"
        # Warnings, plus the network client's connection events (why a connection closed), on
        # stdout.
        conf = os.path.join(work, "log4j2.properties")
        with open(conf, "w") as f:
            f.write("appender.out.type = Console\nappender.out.name = OUT\n"
                    "appender.out.layout.type = PatternLayout\n"
                    "appender.out.layout.pattern = %d{HH:mm:ss.SSS} %p %c{1} %m%n\n"
                    "rootLogger.level = WARN\nrootLogger.appenderRef.out.ref = OUT\n"
                    "logger.net.name = org.apache.kafka.clients.NetworkClient\n"
                    "logger.net.level = INFO\n")
        return ["java", "-Xmx384m", "-cp", jars, f"-Dlog4j2.configurationFile={conf}",
                os.path.join(CLIENTS, "java", "EosProducer.java")], None
    if client == "franz-go":
        if not shutil.which("go"):
            return None, "go not found (Go >= 1.24 on PATH)"
        out = os.path.join(work, "eosproduce")
        env = dict(os.environ, GOTOOLCHAIN="local")
        r = subprocess.run(["go", "build", "-o", out, "./cmd/eosproduce"],
                           cwd=os.path.join(CLIENTS, "go"), env=env, capture_output=True,
                           text=True, timeout=600)
        if r.returncode != 0:
            return None, f"go build ./cmd/eosproduce failed: {r.stderr.strip()}"
        return [out], None
    return None, f"unknown client {client}"


def producer_args(client: str, bootstrap: str, acks: str, records: int, rate: float,
                  tag: str) -> list[str]:
    common = ["--bootstrap", bootstrap, "--topic", TOPIC, "--acks", acks,
              "--records", str(records), "--partitions", str(PARTITIONS), "--tag", tag,
              "--rate", str(rate), "--pad", str(PAD)]
    if client == "java":
        return common + ["--delivery-timeout-ms", "60000"]
    return common + ["--delivery-timeout", "60s", "--timeout", "600s"]


class AckWatcher:
    """Counts the lines the producer has appended to its acknowledgement file so far."""

    def __init__(self, path: str):
        self.path, self.count, self.f = path, 0, None

    def poll(self) -> int:
        if self.f is None:
            try:
                self.f = open(self.path, "rb")
            except FileNotFoundError:
                return 0
        while chunk := self.f.read(1 << 20):
            self.count += chunk.count(b"\n")
        return self.count


def plan_faults(rng: random.Random, drops: int, produce_drops: int, kills: int):
    """(moment, kind) events, sorted; a moment is a fraction of the paced run time (records /
    rate, counted from the first acknowledgement), which the producer can hardly beat. Kills sit
    apart from each other so that each restart has time to matter; nothing is planned for the
    last third, so that drops held up by a restart (a client reconnects with a growing backoff)
    are done before the producer finishes even on a loaded CI machine (with a fifth left, a CI
    run once ended four drops short)."""
    ev = [(rng.uniform(0.0, 0.65), "drop") for _ in range(drops)]
    ev += [(rng.uniform(0.0, 0.65), "produce-drop") for _ in range(produce_drops)]
    if kills:
        span = 0.55 / kills
        ev += [(0.05 + i * span + rng.uniform(0.1, 0.9) * span, "kill") for i in range(kills)]
    return sorted(ev)


def read_back(bootstrap: str, timeout: float):
    """{partition: [(offset, value bytes)]} for every record up to the high watermark."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"eos-check-{os.getpid()}",
                  "enable.auto.commit": False, "enable.partition.eof": False,
                  "fetch.max.bytes": 8 << 20})
    ends = {p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1]
            for p in range(PARTITIONS)}
    c.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
    pos = {p: 0 for p in range(PARTITIONS)}
    deadline = time.monotonic() + timeout
    while any(pos[p] < ends[p] for p in range(PARTITIONS)):
        if time.monotonic() > deadline:
            c.close()
            raise RuntimeError(f"read-back incomplete after {timeout:.0f}s: at {pos}, ends {ends}")
        for m in c.consume(num_messages=10000, timeout=1.0):
            if m.error():
                c.close()
                raise RuntimeError(f"consumer error: {m.error()}")
            got[m.partition()].append((m.offset(), m.value()))
            pos[m.partition()] = m.offset() + 1
    c.close()
    return got, ends


def check(tag: str, records: int, acks_path: str, stored: dict[int, list[tuple[int, bytes]]]):
    """Compares what was acknowledged with what is stored; returns the counts."""
    acked: dict[tuple[int, int], int] = {}  # (partition, sequence) -> acknowledged offset
    double_acks = 0
    with open(acks_path) as f:
        for line in f:
            p, off, seq = map(int, line.split())
            if (p, seq) in acked:
                double_acks += 1
            acked[(p, seq)] = off
    occurrences: collections.Counter = collections.Counter()
    at_offset: dict[tuple[int, int], int] = {}  # (partition, offset) -> sequence stored there
    reorders = foreign = 0
    examples: list[str] = []
    for p, recs in stored.items():
        highest = -1
        for off, value in recs:
            parts = value.split(b"|")
            try:
                ok = (len(parts) == 4 and parts[0].decode() == tag and int(parts[1]) == p
                      and parts[3] == b"x" * PAD)
                seq = int(parts[2])
            except (IndexError, ValueError, UnicodeDecodeError):
                ok = False
            if not ok:
                foreign += 1
                continue
            at_offset[(p, off)] = seq
            occurrences[(p, seq)] += 1
            if occurrences[(p, seq)] > 1:
                if len(examples) < 5:
                    examples.append(f"duplicate: partition {p} sequence {seq} again at {off}")
                continue
            if seq < highest:
                reorders += 1
                if len(examples) < 10:
                    examples.append(f"reorder: partition {p} sequence {seq} at offset {off} "
                                    f"after sequence {highest}")
            highest = max(highest, seq)
    duplicates = sum(n - 1 for n in occurrences.values())
    lost = [k for k in acked if occurrences[k] == 0]
    wrong_offset = [k for k, off in acked.items()
                    if occurrences[k] and at_offset.get((k[0], off)) != k[1]]
    for p, seq in lost[:5]:
        examples.append(f"lost: partition {p} sequence {seq} (acknowledged at {acked[(p, seq)]})")
    for p, seq in wrong_offset[:5]:
        examples.append(f"wrong offset: partition {p} sequence {seq} acknowledged at "
                        f"{acked[(p, seq)]}, which holds {at_offset.get((p, acked[(p, seq)]))}")
    return {
        "acked": len(acked), "stored": sum(len(r) for r in stored.values()),
        "duplicates": duplicates,
        "duplicated_records": sum(1 for n in occurrences.values() if n > 1),
        "losses": len(lost), "reorders": reorders, "wrong_offsets": len(wrong_offset),
        "double_acks": double_acks, "foreign": foreign,
        "stored_unacked": sum(1 for k in occurrences if k not in acked),
        "never_sent": sum(1 for k in occurrences
                          if not (0 <= k[1] and k[0] + PARTITIONS * k[1] < records)),
    }, examples


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samsad", help="path of the samsad binary")
    ap.add_argument("--broker", choices=["samsad", "kafka"], default="samsad",
                    help="kafka: Apache Kafka 4.1.1 as the oracle (by hand, never in CI)")
    ap.add_argument("--client", required=True, choices=["java", "franz-go"])
    ap.add_argument("--teeth", action="store_true",
                    help="sequence check off; pass only if duplicates are found")
    ap.add_argument("--full", action="store_true", help="the long run")
    ap.add_argument("--records", type=int)
    ap.add_argument("--drops", type=int, help="random drops")
    ap.add_argument("--produce-drops", type=int, help="drops right after a Produce")
    ap.add_argument("--kills", type=int)
    ap.add_argument("--rate", type=float, help="records per second the producer aims at")
    ap.add_argument("--timeout", type=float, help="give the producer this long (seconds)")
    ap.add_argument("--seed", type=int, default=int(time.time() * 1000) % 1000000)
    ap.add_argument("--keep", action="store_true", help="keep the work dir even on success")
    a = ap.parse_args()
    size = ({"records": 1000000, "drops": 200, "produce_drops": 50, "kills": 6, "rate": 12000,
             "timeout": 900} if a.full else
            {"records": 200000, "drops": 45, "produce_drops": 15, "kills": 3, "rate": 5000,
             "timeout": 150})
    for k, v in size.items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    rng = random.Random(a.seed)
    mode = "teeth (sequence check off)" if a.teeth else "exactly once"
    log(f"{a.client}, {mode}: {a.records} records, {a.drops} random drops + {a.produce_drops} "
        f"after a Produce, {a.kills} kills, ~{a.rate:.0f} records/s, seed {a.seed}")

    if a.broker == "kafka" and a.teeth:
        log("FAIL: --teeth needs samsad's test hook")
        return 1
    if a.broker == "samsad" and not (a.samsad and os.access(a.samsad, os.X_OK)):
        log(f"FAIL: samsad binary not found: {a.samsad!r}")
        return 1
    work = tempfile.mkdtemp(prefix=f"samsa-eos-{a.client}-")
    try:
        import confluent_kafka  # noqa: F401

        cmd, why = producer_command(a.client, work)
    except ImportError as e:
        cmd, why = None, f"confluent_kafka not importable by {sys.executable}: {e}"
    if cmd is None or why:
        shutil.rmtree(work, ignore_errors=True)
        return h.skip_or_fail(log, why, a.client)

    port = h.free_port()
    proxy = FaultProxy(port, seed=rng.randrange(1 << 30)).start()
    hooks = (["samsa.testing.hooks=true", "samsa.testing.producer.sequence.check=false"]
             if a.teeth else [])
    broker = (Samsad(a.samsad, work, port, proxy.port, hooks) if a.broker == "samsad"
              else Kafka(work, port, proxy.port))
    bootstrap = f"127.0.0.1:{proxy.port}"
    acks = os.path.join(work, "acks.txt")
    failures: list[str] = []
    result: dict = {"client": a.client, "mode": "teeth" if a.teeth else "exactly-once",
                    "seed": a.seed, "records": a.records}
    producer = None
    try:
        broker.start()
        h.create_topics(bootstrap, {TOPIC: PARTITIONS})
        log(f"{a.broker} on {port} advertises the proxy on {proxy.port}; topic {TOPIC} created")

        plan = plan_faults(rng, a.drops, a.produce_drops, a.kills)
        tag = f"{a.client}{rng.randrange(1 << 20):05x}"
        out = open(os.path.join(work, "producer.out"), "wb")
        err = open(os.path.join(work, "producer.err"), "wb")
        t_produce = time.monotonic()
        producer = subprocess.Popen(
            cmd + producer_args(a.client, bootstrap, acks, a.records, a.rate, tag),
            stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=CLIENTS,
            start_new_session=True)
        watcher = AckWatcher(acks)
        next_ev = 0
        want_drops = want_produce = kills = 0
        last_report = last_drop = time.monotonic()
        t_first_ack = None
        paced = a.records / a.rate
        while producer.poll() is None:
            now = time.monotonic()
            if now - t_produce > a.timeout:
                failures.append(f"producer still running after {a.timeout:.0f}s (killed)")
                break
            if not broker.alive():
                failures.append("the broker died on its own (restarted to finish the run)")
                broker.kill_and_restart(rng)
            done = watcher.poll()
            if t_first_ack is None:
                if done == 0:
                    time.sleep(0.02)
                    continue
                t_first_ack = now
            frac = (now - t_first_ack) / paced
            while next_ev < len(plan) and plan[next_ev][0] <= frac:
                kind = plan[next_ev][1]
                next_ev += 1
                if kind == "kill":
                    broker.kill_and_restart(rng)
                    kills += 1
                    linger = getattr(broker, "listener_linger", [0.0])[-1]
                    log(f"kill -9 #{kills} at {done} acknowledged; the dead listener lingered "
                        f"{linger * 1000:.0f} ms; restarted in {broker.restart_seconds[-1]:.2f}s")
                elif kind == "drop":
                    want_drops += 1
                else:
                    want_produce += 1
            c = proxy.counts()
            # A backlog (events held up by a restart) is worked off one drop per 50 ms, so that
            # a client is not cut off again the moment it reconnects.
            if c["random_drops"] < want_drops and now - last_drop > 0.05:
                if proxy.drop_random():
                    last_drop = now
            if c["produce_drops"] < want_produce:
                proxy.arm_produce_drop()
            proxy.expire_doom(10.0)
            for stall in proxy.find_stalls(5.0):
                log(f"broker stall: {stall}")
            if time.monotonic() - last_report > 5:
                last_report = time.monotonic()
                log(f"{done} acknowledged; drops {c['random_drops']} random + "
                    f"{c['produce_drops']} after a Produce (due: {want_drops} + {want_produce});"
                    f" kills {kills}")
            time.sleep(0.02)
        if producer.poll() is None:
            os.killpg(producer.pid, signal.SIGKILL)
            producer.wait()
        produce_s = time.monotonic() - t_produce
        out.close()
        err.close()
        proxy.disarm()  # the checker reads through the proxy, which injects nothing more
        faults = proxy.counts()
        result.update(faults)
        result.update({"kills": kills, "restart_seconds": [round(s, 2) for s in
                                                           broker.restart_seconds],
                       "produce_seconds": round(produce_s, 1),
                       "producer_exit": producer.returncode})
        # The Java client logs to stdout, franz-go to stderr; the summary is a JSON line.
        out_lines = open(os.path.join(work, "producer.out"), errors="replace").read().splitlines()
        err_lines = open(os.path.join(work, "producer.err"), errors="replace").read().splitlines()
        summary = [ln for ln in out_lines if ln.startswith("{")]
        log(f"producer exited with {producer.returncode} after {produce_s:.1f}s: "
            f"{summary[-1] if summary else '(no summary)'}")
        if producer.returncode != 0:
            for ln in (out_lines + err_lines)[-15:]:
                log(f"producer: {ln[:300]}")
        failed_lines = [ln for ln in err_lines if ln.startswith("FAILED")]
        result["failed_sends"] = len(failed_lines)
        for ln in failed_lines[:5]:
            log(f"producer: {ln.rstrip()}")

        t_check = time.monotonic()
        stored, ends = read_back(f"127.0.0.1:{proxy.port}", 120)
        counts, examples = check(tag, a.records, acks, stored)
        result.update(counts)
        result["check_seconds"] = round(time.monotonic() - t_check, 1)
        for e in examples:
            log(e)
        log(f"stored {counts['stored']} records (high watermarks {list(ends.values())}), "
            f"acknowledged {counts['acked']}: duplicates {counts['duplicates']}, losses "
            f"{counts['losses']}, reorders {counts['reorders']}, wrong offsets "
            f"{counts['wrong_offsets']}, stored but unacknowledged {counts['stored_unacked']}")

        if faults["drops"] < a.drops + a.produce_drops:
            failures.append(f"only {faults['drops']} drops of {a.drops + a.produce_drops}")
        if faults["produce_drops"] < a.produce_drops:
            failures.append(f"only {faults['produce_drops']} drops after a Produce of "
                            f"{a.produce_drops}")
        if kills < a.kills:
            failures.append(f"only {kills} kills of {a.kills}")
        if counts["losses"]:
            failures.append(f"{counts['losses']} acknowledged records lost")
        if counts["foreign"] or counts["never_sent"] or counts["double_acks"]:
            failures.append(f"{counts['foreign']} stored values match no sent value, "
                            f"{counts['never_sent']} records never sent, "
                            f"{counts['double_acks']} acknowledged twice")
        if a.teeth:
            if counts["duplicates"] == 0:
                failures.append("no duplicates with the sequence check off: the faults did not "
                                "make the client retry a stored batch, so the default run "
                                "proves nothing")
        else:
            if counts["duplicates"]:
                failures.append(f"{counts['duplicates']} duplicates "
                                f"({counts['duplicated_records']} records stored more than once)")
            if counts["reorders"]:
                failures.append(f"{counts['reorders']} records stored out of send order")
            if counts["wrong_offsets"]:
                failures.append(f"{counts['wrong_offsets']} acknowledgements name an offset "
                                f"holding another record")
            if producer.returncode != 0 or counts["acked"] != a.records:
                failures.append(f"producer exited with {producer.returncode}; "
                                f"{counts['acked']} of {a.records} records acknowledged")
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        failures.append(f"{type(e).__name__}: {e}")
    except Exception as e:  # confluent_kafka's KafkaException and friends
        failures.append(f"{type(e).__name__}: {e}")
    finally:
        if producer is not None and producer.poll() is None:
            os.killpg(producer.pid, signal.SIGKILL)
            producer.wait()
        proxy.stop()
        problem = broker.stop()
        if problem:
            failures.append(problem)
    with open(os.path.join(work, "proxy.log"), "w") as f:
        f.write("\n".join(proxy.events + [""]))
    result["wall_seconds"] = round(time.monotonic() - T0, 1)
    result["failures"] = failures
    with open(os.path.join(work, "result.json"), "w") as f:
        json.dump(result, f, indent=1)
    print("RESULT " + json.dumps(result), flush=True)
    if failures:
        if a.broker == "samsad":
            try:
                with open(os.path.join(work, "samsad.log"), errors="replace") as f:
                    tail = [ln for ln in f.read().splitlines() if "opened log" not in ln][-20:]
                log("samsad.log (last lines):\n" + "\n".join(tail))
            except OSError:
                pass
        for f in failures:
            log(f"FAIL: {f}")
        log(f"work dir kept: {work}")
        return 1
    log(f"PASS in {result['wall_seconds']}s" + (" (duplicates found, as they must be with the "
                                                "sequence check off)" if a.teeth else ""))
    if a.keep:
        log(f"work dir kept: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
