#!/usr/bin/env python3
"""Replication throttles as Kafka applies them (issue 23), on a loopback cluster of 1
controller and 3 brokers (2 reactors each, so a quota is shared across reactor threads).

Topics `big` and `big2` (4 partitions) and `live` (2 partitions), replicated on brokers 1, 2, 3.

Follower side:
1. Baseline: a producer sends to `live` (acks=all, one 1 KiB record every 5 ms) with all three
   brokers up and nothing else moving: its p99 latency (again once the catch-up is over; the
   larger of the two is the baseline, so the machine's own noise is in it).
2. The throttle, as kafka-reassign-partitions --throttle sets it for a move's destination:
   IncrementalAlterConfigs gives broker 3 follower.replication.throttled.rate = 10 MB/s (its own
   dynamic setting) and `big` follower.replication.throttled.replicas naming broker 3 for every
   partition; malformed values are refused in Kafka's words.
3. Broker 3 stops (controlled shutdown, it leaves the ISRs); 100 MB go to `big` (--full: 400).
4. Broker 3 restarts and catches up: its copy of `big` (its .log bytes, sampled every 100 ms)
   grows at 10 MB/s within 10% (from its first byte to its last), while the same producer sends
   to the unthrottled `live`, whose p99 stays within 2x the baseline. DescribeConfigs shows both
   settings with Kafka's sources; broker 3 is back in every ISR with all of `big`; its metrics
   count every byte of `big` as throttled, and most of the catch-up as time throttled.
Leader side:
5. Broker 3 stops while 40 MB go to `big2` (--full: 200); then leader.replication.throttled.rate
   = 5 MB/s as the cluster-wide default and `big2` leader.replication.throttled.replicas = *;
   broker 3 restarts: its catch-up takes at least 80% of the time the two leaders' quotas
   allow for their shares, and the leaders count their holds and exactly its bytes.

CI mode (the default) stays within 60 s. Exit 77 (skip) without confluent-kafka, except under
CI=true (a failure). SAMSA_KEEP=1 keeps the work directory (samples and latencies in it).
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_harness as ch  # noqa: E402

RATE = 10_000_000  # follower.replication.throttled.rate for broker 3, bytes/s
LEADER_RATE = 5_000_000  # leader.replication.throttled.rate, the cluster-wide default
BIG_PARTITIONS = 4
RECORD = 100_000  # bytes per record of `big`
INCREMENTAL_ALTER_CONFIGS, DESCRIBE_CONFIGS = 44, 32
TOPIC, BROKER = 2, 4  # config resource types
DYNAMIC_TOPIC, DYNAMIC_BROKER, DYNAMIC_DEFAULT, DEFAULT = 1, 2, 3, 5  # config sources
INVALID_CONFIG = 40


def call(node, api: int, version: int, body: dict) -> dict:
    conn = ch.kproto.Conn(node.host, node.port, timeout=10)
    try:
        conn.send(kp.encode_request(api, version, 1, "throttle-test", body))
        _, resp = kp.decode_response(api, version, conn.recv(10))
        return resp
    finally:
        conn.close()


def set_config(node, rtype: int, name: str, key: str, value: str) -> tuple[int, str]:
    """IncrementalAlterConfigs SET through `node`: (error code, message)."""
    r = call(node, INCREMENTAL_ALTER_CONFIGS, 1, {"Resources": [
        {"ResourceType": rtype, "ResourceName": name,
         "Configs": [{"Name": key, "ConfigOperation": 0, "Value": value}]}],
        "ValidateOnly": False})
    res = r["Responses"][0]
    return res["ErrorCode"], res["ErrorMessage"] or ""


def describe(node, rtype: int, name: str, keys: list[str]) -> dict[str, tuple[str, int]]:
    """DescribeConfigs v4: {key: (value, source)}."""
    r = call(node, DESCRIBE_CONFIGS, 4, {"Resources": [
        {"ResourceType": rtype, "ResourceName": name, "ConfigurationKeys": keys}],
        "IncludeSynonyms": False, "IncludeDocumentation": False})
    return {c["Name"]: (c["Value"], c["ConfigSource"]) for c in r["Results"][0]["Configs"]}


def leaders(node, topic: str) -> dict[int, int]:
    md = metadata(node, topic) or {}
    return {p["PartitionIndex"]: p["LeaderId"] for p in md.get("Partitions", [])}


def isrs(node, topic: str) -> dict[int, list[int]] | None:
    t = metadata(node, topic)
    return {p["PartitionIndex"]: sorted(p["IsrNodes"]) for p in t["Partitions"]} if t else None


def metadata(node, topic: str) -> dict | None:
    """The topic's Metadata v12 answer from node (None: no answer or an error)."""
    return ch.topic_metadata(node, kp, topic, "throttle-test")


def log_bytes(node, topic: str) -> int:
    """The record bytes of the node's replicas of `topic` (its segment files), or of one
    partition ("topic-N")."""
    total = 0
    pattern = topic if re.search(r"-\d+$", topic) else f"{topic}-*"
    for f in glob.glob(os.path.join(node.props["log.dirs"], pattern, "*.log")):
        try:
            total += os.path.getsize(f)
        except OSError:
            pass
    return total


class LiveProducer:
    """acks=all records of 1 KiB to `live`, one every 5 ms, on a thread; latencies (send to
    acknowledgement) collected between start() and stop()."""

    def __init__(self, bootstrap: str):
        from confluent_kafka import Producer
        self.p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                           "enable.idempotence": True})
        # Connections, metadata and the producer id before anything is measured.
        for partition in (0, 1):
            self.p.produce("live", b"warm-up", partition=partition)
        self.p.flush(30)
        self.lat: list[float] = []
        self.errors: list[str] = []
        self.running = False
        self.thread: threading.Thread | None = None

    def _done(self, err, msg, sent: float):
        if err:
            self.errors.append(str(err))
        else:
            self.lat.append(time.monotonic() - sent)
            self.timeline.append((sent, time.monotonic() - sent))

    def _run(self):
        payload = b"l" * 1024
        nxt = time.monotonic()
        while self.running:
            sent = time.monotonic()
            self.p.produce("live", payload, on_delivery=lambda e, m, s=sent: self._done(e, m, s))
            self.p.poll(0)
            nxt += 0.005
            while self.running and time.monotonic() < nxt:
                self.p.poll(max(0.0, min(0.001, nxt - time.monotonic())))
        self.p.flush(30)

    def start(self):
        self.lat, self.errors, self.running, self.timeline = [], [], True, []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def stop(self) -> tuple[float, int]:
        """(p99 in ms, records acknowledged)."""
        self.running = False
        self.thread.join(60)
        lat = sorted(self.lat)
        ch.check(not self.errors and lat, f"live records acknowledged ({len(lat)}, errors "
                 f"{self.errors[:3]})")
        return lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000, len(lat)


def produce_big(bootstrap: str, topic: str, total: int):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20,
                  "batch.size": 1_000_000, "enable.idempotence": True,
                  "queue.buffering.max.kbytes": 262144})
    payload = os.urandom(RECORD)
    errors = []
    start = time.monotonic()
    n = total // RECORD
    for i in range(n):
        while True:
            try:
                p.produce(topic, payload, partition=i % BIG_PARTITIONS,
                          on_delivery=lambda e, m: e and errors.append(str(e)))
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    left = p.flush(120)
    took = time.monotonic() - start
    ch.check(not errors and left == 0,
             f"{n * RECORD / 1e6:.0f} MB produced to {topic} with acks=all in {took:.1f} s "
             f"(errors {errors[:3]})")


def catch_up(b3, topic: str, target: int, timeout: float) -> list[tuple[float, int]]:
    """Samples (time, bytes) of broker 3's copy of `topic` until it holds `target` bytes."""
    samples = []
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        samples.append((time.monotonic(), log_bytes(b3, topic)))
        if samples[-1][1] >= target:
            return samples
        time.sleep(0.1)
    raise AssertionError(f"broker 3 holds {samples[-1][1]} of {topic}'s {target} bytes after "
                         f"{timeout:.0f} s")


def copy_rate(samples: list[tuple[float, int]], target: int) -> tuple[float, float]:
    """The catch-up's bytes/s, from its first byte (halfway between the samples around it) to
    its last, and the steady rate between 25% and 95% of the way (after the first window, which
    Kafka's SimpleRate lets go at once)."""
    i = next(i for i, s in enumerate(samples) if s[1] > 0)
    first = (samples[max(i - 1, 0)][0] + samples[i][0]) / 2
    overall = (samples[-1][1] - samples[max(i - 1, 0)][1]) / (samples[-1][0] - first)
    t25, b25 = next(s for s in samples if s[1] >= target * 0.25)
    t95, b95 = next(s for s in samples if s[1] >= target * 0.95)
    return overall, (b95 - b25) / (t95 - t25)


class Run:
    """The cluster and what the phases share."""

    def __init__(self, samsad: str, root: str, full: bool):
        self.root, self.full = root, full
        self.controller, self.brokers = ch.loopback_cluster(
            samsad, root, common={"samsa.reactors": "2", "offsets.topic.num.partitions": "1"},
            broker_props={"samsa.metrics.listen": lambda: f"127.0.0.1:{ch.free_port()}"})
        self.everyone = [self.controller, *self.brokers.values()]
        self.b1, self.b3 = self.brokers[1], self.brokers[3]
        self.bootstrap = ",".join(f"{n.host}:{n.port}" for n in self.brokers.values())
        self.live: LiveProducer | None = None

    def start(self):
        for n in self.everyone:
            n.start()
        for n in self.everyone:
            n.wait_listening()
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        ch.wait_for(lambda: len(admin.list_topics(timeout=5).brokers) == 3, 30,
                    "3 brokers registered")
        fs = admin.create_topics([NewTopic(t, BIG_PARTITIONS, 3) for t in ("big", "big2")] +
                                 [NewTopic("live", 2, 3)])
        for f in fs.values():
            f.result(30)
        for t in ("big", "big2", "live"):
            self.wait_full_isr(t)
        self.live = LiveProducer(self.bootstrap)

    def wait_full_isr(self, topic: str):
        ch.wait_for(lambda: all(i == [1, 2, 3] for i in (isrs(self.b1, topic) or {9: []}).values()),
                    30, f"{topic}: every partition's ISR is [1, 2, 3]")

    def dump(self, name: str, rows):
        with open(os.path.join(self.root, name), "w") as f:
            for r in rows:
                f.write(" ".join(f"{x:.3f}" for x in r) + "\n")

    def behind(self, topic: str, total: int) -> int:
        """Broker 3 stops and `total` bytes go to `topic` meanwhile: the leaders' bytes."""
        self.b3.stop()
        ch.wait_for(lambda: all(3 not in i for i in (isrs(self.b1, topic) or {9: [3]}).values()),
                    20, f"broker 3 stopped and out of {topic}'s ISR")
        produce_big(self.bootstrap, topic, total)
        target = log_bytes(self.b1, topic)
        ch.log(f"the leaders' copy of {topic}: {target} bytes")
        return target


def baseline(run: Run, when: str) -> float:
    """live's p99 with nothing else moving: 6 s after a second of warm-up."""
    live = run.live
    live.start()
    time.sleep(1)
    live.lat, live.timeline = [], []
    time.sleep(6)
    p99, n = live.stop()
    run.dump(f"live-baseline-{when}.txt", live.timeline)
    ch.log(f"baseline {when} the catch-up: live p99 {p99:.1f} ms over {n} records")
    return p99


def follower_phase(run: Run, total: int):
    b1, b3, live = run.b1, run.b3, run.live
    before = baseline(run, "before")

    # What kafka-reassign-partitions --throttle sets for a move whose destination is 3.
    listed = ",".join(f"{p}:3" for p in range(BIG_PARTITIONS))
    err, msg = set_config(b3, BROKER, "3", "follower.replication.throttled.rate", str(RATE))
    ch.check(err == 0, f"broker 3's follower.replication.throttled.rate set ({err} {msg})")
    err, msg = set_config(b1, TOPIC, "big", "follower.replication.throttled.replicas", listed)
    ch.check(err == 0, f"big's follower.replication.throttled.replicas set ({err} {msg})")
    err, msg = set_config(b1, TOPIC, "big", "leader.replication.throttled.replicas", "0:x")
    ch.check(err == INVALID_CONFIG and "must be the literal '*'" in msg,
             f"a malformed list is refused as Kafka refuses it ({err}: {msg})")
    err, msg = set_config(b3, BROKER, "3", "leader.replication.throttled.rate", "-1")
    ch.check(err != 0 and "Value must be at least 0" in msg,
             f"a negative rate is refused ({err}: {msg})")

    target = run.behind("big", total)
    live.start()
    b3.start("restart with the follower throttle")
    samples = catch_up(b3, "big", target, total / RATE * 2 + 30)
    p99, n = live.stop()
    run.dump("samples-follower.txt", samples)
    run.dump("live.txt", live.timeline)
    rate, steady = copy_rate(samples, target)
    took = samples[-1][0] - samples[0][0]
    ch.log(f"broker 3 copied {target / 1e6:.1f} MB of big in {took:.1f} s; live p99 "
           f"{p99:.1f} ms over {n} records meanwhile")
    ch.check(abs(rate - RATE) <= RATE * 0.1,
             f"broker 3's catch-up copy rate {rate / 1e6:.2f} MB/s (steady: {steady / 1e6:.2f} "
             f"MB/s) is within 10% of {RATE / 1e6:.0f} MB/s")

    cfg = describe(b3, BROKER, "3", ["follower.replication.throttled.rate",
                                     "leader.replication.throttled.rate"])
    ch.check(cfg["follower.replication.throttled.rate"] == (str(RATE), DYNAMIC_BROKER) and
             cfg["leader.replication.throttled.rate"] == ("9223372036854775807", DEFAULT),
             f"DescribeConfigs of broker 3 after its restart: {cfg}")
    cfg = describe(b3, TOPIC, "big", ["follower.replication.throttled.replicas",
                                      "leader.replication.throttled.replicas"])
    ch.check(cfg["follower.replication.throttled.replicas"] == (listed, DYNAMIC_TOPIC) and
             cfg["leader.replication.throttled.replicas"] == ("", DEFAULT),
             f"DescribeConfigs of big: {cfg}")
    for t in ("big", "live"):
        run.wait_full_isr(t)
    ch.check(log_bytes(b3, "big") == target, "broker 3's copy of big is as large as the leaders'")
    # The baseline brackets the catch-up: the machine's own noise is in both.
    after = baseline(run, "after")
    ch.check(p99 <= 2 * max(before, after),
             f"live's p99 during the catch-up, {p99:.1f} ms, is within 2x the unthrottled "
             f"baseline ({before:.1f} ms before, {after:.1f} ms after)")
    m = ch.metrics(b3)
    fb = m.get('samsa_replication_throttled_bytes_total{side="follower"}', 0)
    fsec = m.get('samsa_replication_throttled_seconds_total{side="follower"}', 0)
    holds = m.get('samsa_replication_throttle_holds_total{side="follower"}')
    ch.log(f"broker 3: follower throttled bytes {fb:.0f}, seconds {fsec:.1f}, holds {holds}")
    ch.check(fb == target, f"the follower side recorded every byte of big ({fb:.0f})")
    ch.check(took * 0.5 <= fsec <= took + 1,
             f"and was throttled most of the catch-up ({fsec:.1f} of {took:.1f} s)")
    ch.check(m.get('samsa_replication_throttled_bytes_total{side="leader"}', -1) == 0,
             "broker 3's leader side moved nothing listed")


def leader_phase(run: Run, total: int):
    """The leader side, set as a cluster-wide default: brokers 1 and 2 each send at most
    LEADER_RATE of big2 (every replica listed) to followers outside the ISR."""
    b1, b3 = run.b1, run.b3
    target = run.behind("big2", total)
    # Set once the data is there, as a reassignment sets them (the leaders' quota counts the
    # in-sync followers' traffic of listed replicas too).
    err, msg = set_config(b1, BROKER, "", "leader.replication.throttled.rate", str(LEADER_RATE))
    ch.check(err == 0, f"leader.replication.throttled.rate set as the cluster default ({err} "
             f"{msg})")
    err, msg = set_config(b1, TOPIC, "big2", "leader.replication.throttled.replicas", "*")
    ch.check(err == 0, f"big2's leader.replication.throttled.replicas=* ({err} {msg})")
    # Each leader sends its own partitions at most LEADER_RATE: the catch-up takes as long as
    # the leader with the most bytes needs.
    per_leader: dict[int, int] = {}
    for p, leader in leaders(b1, "big2").items():
        per_leader[leader] = per_leader.get(leader, 0) + log_bytes(b1, f"big2-{p}")
    expected = max(per_leader.values()) / LEADER_RATE
    b3.start("restart behind throttled leaders")
    samples = catch_up(b3, "big2", target, total / LEADER_RATE + 30)
    run.dump("samples-leader.txt", samples)
    rate, _ = copy_rate(samples, target)
    took = target / rate
    ch.log(f"broker 3 copied {target / 1e6:.1f} MB of big2 in {took:.1f} s ({rate / 1e6:.2f} "
           f"MB/s) from leaders sending {per_leader} bytes, throttled at "
           f"{LEADER_RATE / 1e6:.0f} MB/s each: {expected:.1f} s expected")
    # The first window and the last fetch may each go a little early; a held follower's fetch
    # waits out replica.fetch.wait.max.ms at the leader (Kafka's DelayedFetch), so the rate
    # stays under the limit by up to that wait per hold.
    ch.check(0.8 * expected <= took <= 2.5 * expected + 2,
             f"the leaders' throttle held: {took:.1f} s for {expected:.1f} s of quota")
    cfg = describe(b1, BROKER, "1", ["leader.replication.throttled.rate"])
    ch.check(cfg["leader.replication.throttled.rate"] == (str(LEADER_RATE), DYNAMIC_DEFAULT),
             f"DescribeConfigs of broker 1: the cluster default ({cfg})")
    held = sent = 0.0
    for b in (run.brokers[1], run.brokers[2]):
        m = ch.metrics(b)
        held += m.get('samsa_replication_throttle_holds_total{side="leader"}', 0)
        sent += m.get('samsa_replication_throttled_bytes_total{side="leader"}', 0)
    ch.check(held > 0 and sent == target,
             f"the leaders held broker 3 back {held:.0f} times and recorded {sent:.0f} bytes")
    run.wait_full_isr("big2")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samsad", required=True)
    ap.add_argument("--full", action="store_true", help="copy 400 MB instead of 100 MB")
    a = ap.parse_args()
    ch.set_log_prefix("[throttle]")
    try:
        import confluent_kafka  # noqa: F401  (only whether it is there)
    except ImportError:
        return ch.skip_or_fail(ch.log, "confluent-kafka is missing", "the test")
    wall = time.monotonic()
    run = Run(a.samsad, tempfile.mkdtemp(prefix="samsa-throttle-"), a.full)
    ok = False
    try:
        run.start()
        follower_phase(run, (400 if a.full else 100) * 1_000_000)
        leader_phase(run, (200 if a.full else 40) * 1_000_000)
        ok = True
    finally:
        ch.teardown(run.everyone, run.root, ok and not os.environ.get("SAMSA_KEEP"))
    ch.log(f"PASS in {time.monotonic() - wall:.0f} s")
    return 0


kp = ch.kproto.Kafka()

if __name__ == "__main__":
    ch.run_main(main)
