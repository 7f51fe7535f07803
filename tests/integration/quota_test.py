#!/usr/bin/env python3
"""Client quotas on samsad, driven by Kafka 4.1.1's kafka-configs and librdkafka:

1. kafka-configs --alter/--describe for a client id, a user and client id, and the client-id
   default (AlterClientQuotas, DescribeClientQuotas); a byte rate that is not whole and an
   unknown key are refused with Kafka's message;
2. a producer with client.id `slow` (producer_byte_rate) is held to its quota: its rate over a
   run of several seconds stays near the quota, librdkafka reports the broker's throttle time,
   and a producer without a quota on the same broker runs many times faster;
3. a consumer with client.id `slowread` (consumer_byte_rate) likewise;
4. removing the quota lets the same client id run fast again.

  quota_test.py --samsad PATH
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients"))
from admin_harness import Checks, SamsadProcess, kafka_tools_available, missing, tool  # noqa: E402

checks = Checks("quota")
QUOTA = 200 * 1024  # bytes per second
RUN_S = 10.0


def configs(bootstrap: str, *args: str) -> tuple[int, str]:
    return tool("kafka-configs", "--bootstrap-server", bootstrap, *args)


def produce_for(bootstrap: str, client_id: str, seconds: float) -> tuple[float, int]:
    """Produces 1 KiB records as fast as the broker takes them; (acknowledged bytes per second
    over the run, the largest throttle time librdkafka reported)."""
    from confluent_kafka import Producer
    throttles: list[int] = []

    def stats(s: str):
        for b in json.loads(s).get("brokers", {}).values():
            throttles.append(int(b.get("throttle", {}).get("max", 0)))

    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
                  "batch.size": 16384, "statistics.interval.ms": 500, "stats_cb": stats})
    acked = [0]

    def on_ack(err, msg):
        if err is None:
            acked[0] += len(msg.value())

    value = b"q" * 1024
    start = time.time()
    while time.time() - start < seconds:
        try:
            p.produce("quota-t", value, on_delivery=on_ack)
        except BufferError:
            p.poll(0.01)
        p.poll(0)
    rate = acked[0] / (time.time() - start)
    p.purge()
    p.flush(5)
    return rate, max(throttles or [0])


def consume_for(bootstrap: str, client_id: str, seconds: float) -> tuple[float, int]:
    from confluent_kafka import Consumer, TopicPartition
    throttles: list[int] = []

    def stats(s: str):
        for b in json.loads(s).get("brokers", {}).values():
            throttles.append(int(b.get("throttle", {}).get("max", 0)))

    c = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id,
                  "group.id": f"g-{client_id}-{time.time()}", "enable.auto.commit": False,
                  "fetch.max.bytes": 1 << 20, "max.partition.fetch.bytes": 1 << 20,
                  "statistics.interval.ms": 500, "stats_cb": stats})
    c.assign([TopicPartition("quota-t", 0, 0)])
    got = 0
    start = time.time()
    while time.time() - start < seconds:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got += len(m.value())
    rate = got / (time.time() - start)
    c.close()
    return rate, max(throttles or [0])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samsad", required=True)
    a = ap.parse_args()
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return missing(checks, "python3-confluent-kafka")
    why = kafka_tools_available()
    if why:
        return missing(checks, why)
    work = tempfile.mkdtemp(prefix="samsa-quota-")
    broker = SamsadProcess(a.samsad, work, ["num.partitions=1"])
    ok = False
    try:
        broker.start()
        b = broker.bootstrap
        rc, out = configs(b, "--alter", "--entity-type", "clients", "--entity-name", "slow",
                          "--add-config", f"producer_byte_rate={QUOTA}")
        checks(rc == 0 and "Completed" in out, f"kafka-configs: producer_byte_rate for slow ({out[-120:]})")
        rc, out = configs(b, "--alter", "--entity-type", "clients", "--entity-name", "slowread",
                          "--add-config", f"consumer_byte_rate={QUOTA}")
        checks(rc == 0, f"kafka-configs: consumer_byte_rate for slowread ({out[-120:]})")
        rc, out = configs(b, "--alter", "--entity-type", "users", "--entity-name", "alice",
                          "--entity-type", "clients", "--entity-default", "--add-config",
                          "request_percentage=50.5")
        checks(rc == 0, f"kafka-configs: request_percentage for alice's clients ({out[-120:]})")
        rc, out = configs(b, "--describe", "--entity-type", "clients")
        checks(f"client-id 'slow' are producer_byte_rate={QUOTA}.0" in out and
               f"client-id 'slowread' are consumer_byte_rate={QUOTA}.0" in out,
               f"kafka-configs --describe clients ({out.strip()[-300:]})")
        rc, out = configs(b, "--describe", "--entity-type", "users", "--entity-name", "alice",
                          "--entity-type", "clients")
        checks("request_percentage=50.5" in out, f"kafka-configs --describe alice ({out[-200:]})")
        rc, out = configs(b, "--alter", "--entity-type", "clients", "--entity-name", "x",
                          "--add-config", "producer_byte_rate=1.5")
        checks(rc != 0 and "must be a Long value" in out, f"a byte rate that is not whole is refused ({out[-160:]})")

        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": b})  # kept: its futures die with it
        admin.create_topics([NewTopic("quota-t", 1, 1)])["quota-t"].result(30)
        slow, slow_t = produce_for(b, "slow", RUN_S)
        fast, fast_t = produce_for(b, "fast", 3.0)
        checks.note(f"produce: slow {slow / 1024:.0f} KiB/s (quota {QUOTA // 1024}), throttle up "
                    f"to {slow_t} ms; fast {fast / 1024:.0f} KiB/s, throttle {fast_t} ms")
        # The first windows let a burst of (windows - 1) x quota through, as Kafka's do.
        checks(slow <= QUOTA * 2.2, f"the throttled producer stays near its quota "
               f"({slow / 1024:.0f} KiB/s for {QUOTA // 1024})")
        checks(slow_t > 0 and fast_t == 0, f"librdkafka reports the throttle ({slow_t} ms; "
               f"{fast_t} ms without a quota)")
        checks(fast > 5 * slow, f"a producer without a quota runs far faster ({fast / 1024:.0f} KiB/s)")

        slowr, slowr_t = consume_for(b, "slowread", RUN_S)
        fastr, _ = consume_for(b, "fastread", 3.0)
        checks.note(f"consume: slowread {slowr / 1024:.0f} KiB/s, throttle up to {slowr_t} ms; "
                    f"fastread {fastr / 1024:.0f} KiB/s")
        checks(slowr <= QUOTA * 2.5 and slowr_t > 0,
               f"the throttled consumer stays near its quota ({slowr / 1024:.0f} KiB/s, "
               f"throttle {slowr_t} ms)")
        checks(fastr > 3 * slowr, f"a consumer without a quota reads far faster ({fastr / 1024:.0f} KiB/s)")

        rc, out = configs(b, "--alter", "--entity-type", "clients", "--entity-name", "slow",
                          "--delete-config", "producer_byte_rate")
        checks(rc == 0, f"kafka-configs --delete-config producer_byte_rate ({out[-120:]})")
        time.sleep(12)  # the sensor's old windows age out
        again, again_t = produce_for(b, "slow", 3.0)
        checks(again > 5 * QUOTA and again_t == 0,
               f"without its quota, slow runs fast again ({again / 1024:.0f} KiB/s, {again_t} ms)")
        checks(broker.alive(), "samsad is still running")
        ok = True
    except Exception as e:
        import traceback
        traceback.print_exc()
        checks(False, f"unexpected {type(e).__name__}: {e}")
    finally:
        if broker.alive():
            broker.stop()
        rc = checks.finish()
        if rc:
            print(f"[quota] samsad log tail:\n{broker.tail(30, '  | ')}", flush=True)
        elif ok:
            shutil.rmtree(work, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
