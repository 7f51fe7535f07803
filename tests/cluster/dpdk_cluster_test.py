#!/usr/bin/env python3
"""Replication over the DPDK backend: a cluster of 1 controller and 2 brokers in a network
namespace the test makes, broker 1 on the DPDK backend (af_packet on one end of a veth pair,
10.99.0.2) and broker 2 on uring (the kernel end, 10.99.0.1). Broker 1's follower fetchers
reach broker 2 through the userspace stack (DpdkStack::connect); broker 2's reach broker 1's
DPDK listener through the kernel. The cluster link (broker <-> controller) stays on kernel
sockets by design (daemon/cluster_link.cc): the controller listens on the namespace's loopback.

  dpdk_cluster_test.py --samsad PATH [--mb N] [--catchup-mb N] [--keep]

A topic with replication factor 2, min.insync.replicas=2 and 8 partitions (leaders on both
brokers); acks=all produce with confluent-kafka to every partition: each acknowledgement needs
the follower's fetch, so the DPDK broker's fetchers carry half of them. Then every follower's
segment must be byte-identical to its leader's, and the records read back. Prints the acks=all
produce rate to partitions whose follower runs on DPDK and to those whose follower runs on
uring. Exit 77 (skip) when something it needs is missing, except under CI=true.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, HERE)
import cluster_test as ct  # noqa: E402  (Node, segment_bytes, replicated, consume_all)
import dpdk_test as dt  # noqa: E402  (the namespace: prerequisites, setup, clean-up)
from dpdk_common import DPDK_IP, KERNEL_IP, Fail, log  # noqa: E402

CONTROLLER, DPDK_BROKER, URING_BROKER = 100, 1, 2
TOPIC, PARTITIONS = "dpdk-rf2", 8


def outer(a) -> int:
    why = a.unavailable or dt.missing_prerequisites(a)
    if why:
        return dt.h.skip_or_fail(log, why, "the test")
    ns = f"{dt.NS_PREFIX}{os.getpid()}"
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(f"SIGTERM: cleaning up {ns}"))
    dt.remove_stale_namespaces()
    inner = None
    t0 = time.monotonic()
    try:
        dt.setup_namespace(ns, force_wire=True)
        work = tempfile.mkdtemp(prefix="samsa-dpdk-cluster-")
        cmd = ["ip", "netns", "exec", ns, dt.DEBIAN_PY, os.path.abspath(__file__), "--inner",
               "--work", work] + sys.argv[1:]
        inner = subprocess.Popen(cmd, start_new_session=True)
        try:
            rc = inner.wait(timeout=a.budget)
        except subprocess.TimeoutExpired:
            log(f"FAIL: the test did not finish within {a.budget:.0f}s")
            rc = 1
        log(f"{'PASS' if rc == 0 else 'FAIL'} after {time.monotonic() - t0:.1f}s")
        if rc == 0 and not a.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            log(f"kept {work}")
        return 0 if rc == 0 else 1
    except Fail as e:
        log(f"FAIL: {e}")
        return 1
    finally:
        if inner and inner.poll() is None:
            try:
                os.killpg(inner.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            inner.wait()
        dt.kill_namespace(ns)


def produce(bootstrap: str, partitions: list[int], mb: int, tag: str,
            acks: str = "all") -> tuple[int, float]:
    """Records of 10 KiB to the given partitions, mb MiB in all; returns (acked, seconds).
    Every record must be acknowledged."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                  "enable.idempotence": acks == "all", "message.timeout.ms": 30000})
    errors, acked = [], [0]

    def cb(err, _msg):
        if err is not None:
            errors.append(str(err))
        else:
            acked[0] += 1

    n = mb * 1024 * 1024 // 10240
    body = (bytes(range(32, 127)) * 108)[:10240]
    t0 = time.monotonic()
    for i in range(n):
        while True:
            try:
                p.produce(TOPIC, value=f"{tag}-{i:08d}".encode() + body,
                          partition=partitions[i % len(partitions)], on_delivery=cb)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    left = p.flush(40)
    secs = time.monotonic() - t0
    if left or errors:
        raise AssertionError(f"{tag}: {left} records unacknowledged, errors: {errors[:3]}")
    return acked[0], secs


def from_stack(port: int) -> bool:
    r = subprocess.run(["ss", "-Htn", "state", "established", f"( sport = :{port} )"],
                       capture_output=True, text=True, timeout=10)
    return any(f"{DPDK_IP}:" in line.split()[-1] for line in r.stdout.splitlines()
               if line.split())


def inner(a) -> int:
    try:
        import confluent_kafka  # noqa: F401
        from confluent_kafka.admin import AdminClient, NewTopic
    except ImportError:
        return dt.h.skip_or_fail(log, "confluent-kafka is missing", "the test")
    root = a.work
    cport = ct.free_port()
    common = {"controller.listener.names": "CONTROLLER",
              "controller.quorum.bootstrap.servers": f"127.0.0.1:{cport}"}
    controller = ct.Node(a.samsad, root, CONTROLLER,
                         dict(common, **{"process.roles": "controller", "samsa.reactors": "1",
                                         "listeners": f"CONTROLLER://127.0.0.1:{cport}"}))
    broker_common = dict(common, **{"process.roles": "broker",
                                    "replica.lag.time.max.ms": "5000",
                                    "replica.fetch.wait.max.ms": "100"})
    # Three reactors on the DPDK broker: reactor 0 polls the device, so the fetchers of the
    # others reach their leader through the cross-reactor queues. (With two, the partitions it
    # follows, every other one, would all hash to one reactor.)
    dpdk = ct.Node(a.samsad, root, DPDK_BROKER, dict(broker_common, **{
        "listeners": f"PLAINTEXT://{DPDK_IP}:9092",
        "samsa.reactors": "3",
        "samsa.net.backend": "dpdk",
        "samsa.dpdk.eal.args": "--no-huge -m 512 --vdev=net_af_packet0,iface=d0",
        "samsa.dpdk.ip": DPDK_IP,
        "samsa.dpdk.netmask": "255.255.255.0"}))
    uring = ct.Node(a.samsad, root, URING_BROKER, dict(broker_common, **{
        "listeners": f"PLAINTEXT://{KERNEL_IP}:{ct.free_port()}",
        "samsa.reactors": "2"}))
    brokers = {DPDK_BROKER: dpdk, URING_BROKER: uring}
    nodes = [controller, dpdk, uring]
    ok = False
    try:
        controller.start()
        controller.wait_listening()
        for n in brokers.values():
            n.start()
        for n in brokers.values():
            n.wait_listening(60)
        bootstrap = f"{DPDK_IP}:{dpdk.port},{KERNEL_IP}:{uring.port}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        end = time.time() + 30
        while set(admin.list_topics(timeout=5).brokers) != {DPDK_BROKER, URING_BROKER}:
            if time.time() > end:
                raise AssertionError("both brokers not in Metadata within 30 s")
            time.sleep(0.1)
        ct.check(True, "both brokers (DPDK and uring) registered")
        fs = admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS,
                                           replication_factor=2,
                                           config={"min.insync.replicas": "2"})])
        fs[TOPIC].result(30)
        t = ct.topic_md(admin, TOPIC, PARTITIONS, timeout=20)
        leaders = {p: t.partitions[p].leader for p in range(PARTITIONS)}
        ct.check(set(leaders.values()) == {DPDK_BROKER, URING_BROKER},
                 f"partitions led by both brokers: {leaders}")
        # Both replicas in the ISR before producing (acks=all with min.insync.replicas=2).
        end = time.time() + 20
        while any(len(t.partitions[p].isrs) != 2 for p in range(PARTITIONS)):
            if time.time() > end:
                raise AssertionError("ISRs not complete within 20 s: " + str(
                    {p: t.partitions[p].isrs for p in range(PARTITIONS)}))
            time.sleep(0.2)
            t = ct.topic_md(admin, TOPIC, PARTITIONS)
        ct.check(True, "every partition's ISR holds both brokers")
        # The DPDK broker's fetchers run on its stack: the uring broker sees a connection from
        # the stack's address (a kernel socket of the DPDK broker would come from KERNEL_IP,
        # the namespace's own address).
        end = time.time() + 10
        while not from_stack(uring.port):
            if time.time() > end:
                raise AssertionError(f"no connection from {DPDK_IP} to the uring broker")
            time.sleep(0.1)
        ct.check(True, f"the DPDK broker's fetcher reaches the uring broker from {DPDK_IP} "
                       f"(the userspace stack)")
        # Warm-up (the producer's first metadata and connections), not timed.
        w, _ = produce(bootstrap, list(range(PARTITIONS)), 1, "warm-up")
        on_uring_leader = [p for p, l in leaders.items() if l == URING_BROKER]
        on_dpdk_leader = [p for p, l in leaders.items() if l == DPDK_BROKER]
        # Leader on uring: the DPDK broker's fetchers must copy every record before its ack.
        n1, s1 = produce(bootstrap, on_uring_leader, a.mb, "to-dpdk-follower")
        ct.check(True, f"acks=all, follower on DPDK: {n1} records, {a.mb} MiB in {s1:.2f}s "
                       f"({a.mb / s1:.1f} MiB/s)")
        n2, s2 = produce(bootstrap, on_dpdk_leader, a.mb, "to-uring-follower")
        ct.check(True, f"acks=all, follower on uring: {n2} records, {a.mb} MiB in {s2:.2f}s "
                       f"({a.mb / s2:.1f} MiB/s)")
        n3 = 0
        if a.catchup_mb:
            # Follower catch-up (by hand, not in CTest): acks=1, so the producer does not wait
            # for the follower; the clock stops when the followers' copies equal the leaders'.
            for follower, parts in (("DPDK", on_uring_leader), ("uring", on_dpdk_leader)):
                t0 = time.monotonic()
                n, _ = produce(bootstrap, parts, a.catchup_mb, f"catch-up-{follower}", acks="1")
                n3 += n
                diff = ct.replicated(brokers, TOPIC, {q: leaders[q] for q in parts}, timeout=120)
                secs = time.monotonic() - t0
                ct.check(not diff, f"follower on {follower} caught up with {a.catchup_mb} MiB "
                                   f"in {secs:.2f}s ({a.catchup_mb / secs:.1f} MiB/s)")
        diff = ct.replicated(brokers, TOPIC, leaders, timeout=20)
        ct.check(not diff, f"the followers hold byte-identical copies of the leaders' segments "
                           f"({diff or 'all equal'})")
        sizes = {p: len(ct.segment_bytes(brokers[leaders[p]], TOPIC, p)) for p in leaders}
        ct.check(all(v > 0 for v in sizes.values()), f"segment bytes per partition: {sizes}")
        total = w + n1 + n2 + n3
        got = ct.consume_all(bootstrap, TOPIC, PARTITIONS, total, timeout=60)
        ct.check(len(got) == total, f"all {total} records read back ({len(got)})")
        ok = True
    except AssertionError as e:
        log(f"FAIL: {e}")
    finally:
        for n in nodes:
            rc = n.stop()
            if rc not in (0, None):
                log(f"node {n.id} stopped with {rc}")
                ok = False
        if ok:
            # The stack counted the fetchers' connections (its counters at shutdown).
            with open(dpdk.log_path) as f:
                m = re.findall(r"outbound (\d+)", f.read())
            try:
                ct.check(bool(m) and int(m[-1]) > 0,
                         f"the DPDK stack opened {m[-1] if m else 'no'} outbound connections")
                with open(dpdk.log_path) as f:
                    fetchers = set(re.findall(r"\[(reactor-\d+)\] replica fetcher: fetching from",
                                              f.read()))
                ct.check("reactor-0" in fetchers and len(fetchers) >= 2,
                         f"fetchers on the polling reactor and on the other one: {fetchers}")
            except AssertionError as e:
                log(f"FAIL: {e}")
                ok = False
        if not ok:
            for n in nodes:
                log(f"--- node {n.id} log tail:\n{n.tail(40)}")
    return 0 if ok else 1


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samsad", required=True)
    ap.add_argument("--mb", type=int, default=8, help="MiB produced to each broker's partitions")
    ap.add_argument("--catchup-mb", type=int, default=0,
                    help="also time follower catch-up of this many MiB (acks=1) each way")
    ap.add_argument("--budget", type=float, default=100)
    ap.add_argument("--unavailable", default="")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--inner", action="store_true")
    ap.add_argument("--work", default="")
    a, _ = ap.parse_known_args()
    return inner(a) if a.inner else outer(a)


if __name__ == "__main__":
    sys.exit(main())
