#!/usr/bin/env python3
"""Replication and the controller link over the DPDK backend: a cluster of 1 controller and 2
brokers, broker 1 on the DPDK backend (af_packet on one end of a veth pair, 10.99.0.2) and
broker 2 on uring. The controller, broker 2 and the clients share a network namespace the test
makes, with the veth's kernel end (10.99.0.1); broker 1 runs in a second namespace holding only
the veth's DPDK end and loopback, so its kernel has no route to anything: every byte it
exchanges with the controller (DescribeCluster at first start, BrokerRegistration, heartbeats,
the metadata-log Fetch, forwarded CreateTopics and AlterPartition, controlled shutdown) and
with broker 2 (follower fetches) must cross the userspace stack. The controller listens only on
10.99.0.1.

  dpdk_cluster_test.py --samsad PATH [--mb N] [--catchup-mb N] [--keep]

Checks: broker 1's namespace cannot reach the controller through its kernel; the controller
sees broker 1's link coming from 10.99.0.2; a topic with replication factor 2,
min.insync.replicas=2 and 8 partitions (leaders on both brokers) is created through broker 1
(its CreateTopics counter moves: it forwarded the request); acks=all produce with
confluent-kafka to every partition: each acknowledgement needs the follower's fetch, so the
DPDK broker's fetchers carry half of them. Then every follower's segment must be
byte-identical to its leader's, and the records read back. Then broker 2 stops (controlled
shutdown: the controller takes it out of every ISR) and starts again: broker 1, now leading
every partition, must put it back into each ISR (AlterPartition over the stack). Last, broker 1
stops on SIGTERM with a controlled shutdown within a few seconds. Prints the acks=all produce
rate to partitions whose follower runs on DPDK and to those whose follower runs on uring,
broker 1's time from registration to unfencing and its stop time. Exit 77 (skip) when
something it needs is missing, except under CI=true.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
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
# The DPDK broker's namespace (named after the test's pid, as dt.NS_PREFIX's).
DPDK_NS_PREFIX = "samsa-dpdkctl-"


def setup_dpdk_namespace(ns: str, dns: str):
    """Moves the veth's DPDK end d0 from ns into a namespace of its own, dns: no address and no
    route there, only loopback (nothing listens on it)."""
    dt.sh("ip", "netns", "add", dns)
    dt.sh("ip", "-n", ns, "link", "set", "d0", "netns", dns)
    dt.sh("ip", "-n", dns, "link", "set", "lo", "up")
    dt.sh("ip", "-n", dns, "link", "set", "d0", "up")
    dt.sh("ip", "netns", "exec", dns, "ethtool", "-K", "d0", "tx", "off")


def remove_stale_dpdk_namespaces():
    for line in dt.sh("ip", "netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        if not name.startswith(DPDK_NS_PREFIX):
            continue
        try:
            os.kill(int(name[len(DPDK_NS_PREFIX):]), 0)
            continue
        except (ValueError, ProcessLookupError):
            pass
        except PermissionError:
            continue
        dt.kill_namespace(name)


def admin_metrics(node) -> str:
    """The node's Prometheus text through its admin socket (a Unix socket: it crosses
    namespaces, unlike a metrics port on the DPDK broker's loopback)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(node.props["samsa.admin.socket"])
        s.sendall(json.dumps({"v": 1, "cmd": "metrics"}).encode() + b"\n")
        buf = b""
        while b"\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    r = json.loads(buf.split(b"\n", 1)[0])
    if not r.get("ok"):
        raise AssertionError(f"metrics of node {node.id}: {r}")
    return r["result"]


def metric(text: str, name: str, labels: str = "") -> float:
    """The sum of name's samples whose labels contain `labels` (e.g. 'api="CreateTopics"')."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            if labels in line:
                total += float(line.split()[-1])
    return total


def kernel_reaches(dns: str, host: str, port: int) -> str:
    """What a kernel TCP connect from namespace dns to host:port gives ('connected' or the
    error)."""
    code = ("import socket\n"
            "try:\n"
            f"    socket.create_connection(({host!r}, {port}), timeout=2).close()\n"
            "    print('connected')\n"
            "except OSError as e:\n"
            "    print(e)\n")
    r = subprocess.run(["ip", "netns", "exec", dns, dt.DEBIAN_PY, "-c", code],
                       capture_output=True, text=True, timeout=20)
    return (r.stdout + r.stderr).strip()


def outer(a) -> int:
    why = a.unavailable or dt.missing_prerequisites(a)
    if why:
        return dt.h.skip_or_fail(log, why, "the test")
    ns = f"{dt.NS_PREFIX}{os.getpid()}"
    dns = f"{DPDK_NS_PREFIX}{os.getpid()}"
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(f"SIGTERM: cleaning up {ns}"))
    dt.remove_stale_namespaces()
    remove_stale_dpdk_namespaces()
    t0 = time.monotonic()
    try:
        dt.setup_namespace(ns, force_wire=True)
        setup_dpdk_namespace(ns, dns)
        work = tempfile.mkdtemp(prefix="samsa-dpdk-cluster-")
        cmd = ["ip", "netns", "exec", ns, dt.DEBIAN_PY, os.path.abspath(__file__), "--inner",
               "--work", work, "--dpdk-ns", dns] + sys.argv[1:]
        return dt.run_inner(cmd, a.budget, work, a.keep, t0)
    except Fail as e:
        log(f"FAIL: {e}")
        return 1
    finally:
        dt.kill_namespace(dns)
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


def isr_change(a, dpdk, uring):
    """Broker 2 stops (the controller takes it out of every ISR and hands its leaderships to
    broker 1) and starts again: broker 1, leading every partition, puts it back into each ISR
    with AlterPartition, which only its link to the controller carries."""
    from confluent_kafka.admin import AdminClient
    dadmin = AdminClient({"bootstrap.servers": f"{DPDK_IP}:{dpdk.port}"})
    rc = uring.stop()
    ct.check(rc == 0, f"the uring broker stopped ({rc})")

    def isrs():
        t = ct.topic_md(dadmin, TOPIC, PARTITIONS, timeout=10)
        return {p: (t.partitions[p].leader, sorted(t.partitions[p].isrs))
                for p in range(PARTITIONS)}

    end = time.time() + 20
    while any(v != (DPDK_BROKER, [DPDK_BROKER]) for v in isrs().values()):
        if time.time() > end:
            raise AssertionError(f"ISRs not down to the DPDK broker within 20 s: {isrs()}")
        time.sleep(0.2)
    ct.check(True, "the uring broker out of every ISR, the DPDK broker leads all")
    mark = len(dpdk.log_text())
    t0 = time.monotonic()
    uring.start("restart")
    uring.wait_listening(60)
    end = time.time() + 30
    # (Leaderships may move back once it is in the ISR again: only the ISRs are compared.)
    while any(v[1] != [DPDK_BROKER, URING_BROKER] for v in isrs().values()):
        if time.time() > end:
            raise AssertionError(f"the uring broker not back in every ISR within 30 s: "
                                 f"{isrs()}")
        time.sleep(0.2)
    grown = set(re.findall(rf"ISR of {TOPIC}-(\d+) is now 2 of its replicas",
                           dpdk.log_text()[mark:]))
    ct.check(len(grown) == PARTITIONS,
             f"the DPDK broker's AlterPartition put the uring broker back into {len(grown)} "
             f"ISRs {time.monotonic() - t0:.2f}s after its restart")


def controller_restart(controller, dpdk, cport: int):
    """The controller stops and starts again: the DPDK broker's link loses its connection,
    connects again over the stack and carries a forwarded CreateTopics."""
    from confluent_kafka.admin import AdminClient, NewTopic
    mark = len(dpdk.log_text())
    rc = controller.stop()
    ct.check(rc == 0, f"the controller stopped ({rc})")
    t0 = time.monotonic()
    controller.start("restart")
    controller.wait_listening()
    end = time.time() + 20
    while not from_stack(cport):
        if time.time() > end:
            raise AssertionError("the DPDK broker's link not back at the controller within 20 s")
        time.sleep(0.1)
    again = time.monotonic() - t0
    dadmin = AdminClient({"bootstrap.servers": f"{DPDK_IP}:{dpdk.port}"})
    name = "dpdk-after-controller-restart"
    try:
        dadmin.create_topics([NewTopic(name, num_partitions=1, replication_factor=2)])[name].result(30)
    except Exception as e:  # noqa: BLE001 - only TOPIC_ALREADY_EXISTS is accepted, below
        # Around a controller restart a CreateTopics can be sent twice (the broker's forwarding
        # re-sends on a broken connection, as Kafka's does, and the client retries on
        # NOT_CONTROLLER): the second finds the topic the first created.
        err = e.args[0] if e.args else None
        if getattr(err, "name", lambda: "")() != "TOPIC_ALREADY_EXISTS":
            raise
        ct.log(f"note: {name} was created by an earlier attempt (TOPIC_ALREADY_EXISTS)")
    ct.check(name in dadmin.list_topics(timeout=10).topics, f"{name} exists")
    lost = "lost the connection to the controller" in dpdk.log_text()[mark:]
    ct.check(lost, f"the DPDK broker's link reconnected over the stack {again:.2f}s after the "
                   f"controller's restart and forwarded a CreateTopics")


def inner(a) -> int:
    try:
        import confluent_kafka  # noqa: F401
        from confluent_kafka.admin import AdminClient, NewTopic
    except ImportError:
        return dt.h.skip_or_fail(log, "confluent-kafka is missing", "the test")
    root = a.work
    cport = ct.free_port()
    # The controller listens on the veth's kernel end only: the DPDK broker's namespace has no
    # kernel route to it, the stack reaches it over the veth.
    common = {"controller.listener.names": "CONTROLLER",
              "controller.quorum.bootstrap.servers": f"{KERNEL_IP}:{cport}"}
    controller = ct.Node(a.samsad, root, CONTROLLER,
                         dict(common, **{"process.roles": "controller", "samsa.reactors": "1",
                                         "listeners": f"CONTROLLER://{KERNEL_IP}:{cport}"}))
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
        "samsa.dpdk.netmask": "255.255.255.0"}), wrap=["ip", "netns", "exec", a.dpdk_ns])
    uring = ct.Node(a.samsad, root, URING_BROKER, dict(broker_common, **{
        "listeners": f"PLAINTEXT://{KERNEL_IP}:{ct.free_port()}",
        "samsa.reactors": "2"}))
    brokers = {DPDK_BROKER: dpdk, URING_BROKER: uring}
    nodes = [controller, dpdk, uring]
    ok = False
    try:
        controller.start()
        controller.wait_listening()
        # No kernel path from the DPDK broker's namespace to the controller (so the link below
        # cannot have used one).
        why = kernel_reaches(a.dpdk_ns, KERNEL_IP, cport)
        ct.check(why != "connected" and why != "",
                 f"the DPDK broker's namespace has no kernel route to the controller ({why})")
        t_start = time.monotonic()
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
        unfenced = dpdk.unfenced_ms()
        ct.check(bool(unfenced), f"both brokers (DPDK and uring) registered and unfenced "
                                 f"{time.monotonic() - t_start:.2f}s after start; the DPDK "
                                 f"broker {unfenced[:1]} ms after registering")
        # The controller's end of the DPDK broker's link: from the stack's address.
        end = time.time() + 10
        while not from_stack(cport):
            if time.time() > end:
                raise AssertionError(f"the controller has no connection from {DPDK_IP}")
            time.sleep(0.1)
        ct.check(True, f"the controller's link to the DPDK broker comes from {DPDK_IP} "
                       f"(the userspace stack)")
        # The topic is created through the DPDK broker alone (it names itself controller in
        # Metadata and forwards CreateTopics over its link).
        before = metric(admin_metrics(dpdk), "samsa_requests_total", 'api="CreateTopics"')
        dadmin = AdminClient({"bootstrap.servers": f"{DPDK_IP}:{dpdk.port}"})
        fs = dadmin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS,
                                            replication_factor=2,
                                            config={"min.insync.replicas": "2"})])
        fs[TOPIC].result(30)
        after = metric(admin_metrics(dpdk), "samsa_requests_total", 'api="CreateTopics"')
        ct.check(after > before, f"CreateTopics answered by the DPDK broker ({before:.0f} -> "
                                 f"{after:.0f}), forwarded to the controller over the stack")
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
        isr_change(a, dpdk, uring)
        controller_restart(controller, dpdk, cport)
        # SIGTERM: the DPDK broker's controlled shutdown goes over the stack too.
        t0 = time.monotonic()
        rc = dpdk.stop()
        secs = time.monotonic() - t0
        m = re.findall(r"controlled shutdown: (leaderships moved|timed out) after (\d+) ms",
                       dpdk.log_text())
        ct.check(rc == 0 and secs < 10 and bool(m) and m[-1][0] == "leaderships moved",
                 f"the DPDK broker stopped (exit {rc}) in {secs:.2f}s, controlled shutdown: "
                 f"{m[-1] if m else 'no line'}")
        ok = True
    except AssertionError as e:
        log(f"FAIL: {e}")
    finally:
        for n in (dpdk, uring, controller):
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
    ap.add_argument("--dpdk-ns", default="")
    a, _ = ap.parse_known_args()
    return inner(a) if a.inner else outer(a)


if __name__ == "__main__":
    sys.exit(main())
