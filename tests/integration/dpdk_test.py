#!/usr/bin/python3
"""samsad on the DPDK backend, driven by real clients from the kernel's side of a veth pair.

  dpdk_test.py --samsad PATH [--samsactl PATH] [--pmd af_packet|af_xdp] [--clients kcat,...]
               [--no-group]
               [--connections N] [--bulk-mb N] [--crash-rounds N] [--budget S] [--keep]

The test makes a network namespace of its own (samsa-dpdk-<pid>) and, inside it, a veth pair:
the kernel end k0 (10.99.0.1, checksum offload off: a partial checksum would reach DPDK as a
bad one) holds the clients, and samsad drives the other end d0 with DPDK's net_af_packet (or
net_af_xdp) PMD as 10.99.0.2 through its userspace TCP/IP stack. Then, in order:

1. the client drivers of tests/clients (kcat and confluent-kafka by default: create, produce
   every codec, consume byte-identical, seek, a group with a committed offset, the stored
   segments checked, delete), as the uring backend's integration tests run them;
2. a consumer group of two confluent-kafka consumers sharing a 4-partition topic: both get
   partitions, every record is consumed once, byte-identical, and the committed offsets are
   the log end offsets;
3. --connections (default 500) connections at once, each producing one record (Produce v7,
   acks=all) and fetching it back byte-identical (Fetch v11): all finish, the slowest within
   3x the median (+0.5 s);
4. with --attack-syns N: a SYN flood of N half-open connections from forged silent sources,
   new clients still get in after it, an RST storm at the listener and at live connections,
   and SYNs and segments with malformed options or data offsets, while a producer/consumer
   pair keeps making round trips; samsad's RSS grows by at most 64 MiB;
5. with loss 1%, delay 1 ms, reorder 5% on both directions: an idempotent acks=all producer
   writes --bulk-mb MB (default 50) of seeded random values and a consumer reads them back;
   every value must equal what was sent, in order. With sch_netem in the kernel that is
   `tc netem` on k0's egress and, through an ifb device, its ingress. This machine's kernel
   has no sch_netem, so then the path is k0 <-veth-> w0 [dpdk_wire.py] w1 <-veth-> d0, the
   wire applying the same rule per direction in user space; steps 1-4 run on the direct
   pair, and samsad is restarted on the same data once the wire is in place.

samsad must then use under 5% of a core while idle, (with --samsactl) name the backend and
the device in `samsactl status` and export samsa_dpdk_* metrics, stop cleanly on SIGTERM, and its
counters (logged at shutdown) must show the traffic and, after the lossy run, retransmits.
With --crash-rounds N the flows are replaced by tests/integration/crash_restart_test.py over
the DPDK backend: kill -9 under acks=all producers, N times; no acknowledged record lost.

The namespace (and every process in it) is removed whatever happens; a namespace left by a
run that was killed with SIGKILL is removed by the next run. Needs root, ip, ethtool, tc,
Debian's python3-confluent-kafka, and what each --clients driver needs (run_client_test.py's
checks). A missing tool or client skips (exit 77) unless CI=true, where it fails. Exit codes: 0 pass, 1 fail, 77 skipped.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import random
import re
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
DEBIAN_PY = "/usr/bin/python3"
SKIP = 77
NS_PREFIX = "samsa-dpdk-"
KERNEL_IP, DPDK_IP, PORT = "10.99.0.1", "10.99.0.2", 9092
IMPAIR = dict(loss=1.0, delay_ms=1.0, reorder=5.0)
sys.path.insert(0, HERE)
import admin_harness as h  # noqa: E402
import run_client_test as rct  # noqa: E402  (the drivers' command lines, as the uring tests)

DRIVERS = rct.FIRST_FLOW + rct.FULL_FLOW


log = h.logger("dpdk-test", clock=True)


class Fail(Exception):
    pass


def sh(*cmd: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
    r = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise Fail(f"`{' '.join(cmd)}` failed ({r.returncode}): {r.stderr.strip()}")
    return r


# ---------------------------------------------------------------------------------------------
# Outer process: prerequisites, the namespace, clean-up.


def missing_prerequisites(a) -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces, raw sockets)"
    for tool in ("ip", "ethtool", "tc"):
        if not shutil.which(tool):
            return f"{tool} not found (scripts/install-deps.sh)"
    # The group, bulk and crash flows use Debian's confluent-kafka; each driver is checked
    # by run_client_test.driver_command inside the namespace.
    r = subprocess.run([DEBIAN_PY, "-c", "import confluent_kafka"], capture_output=True,
                       text=True, timeout=60)
    if r.returncode != 0:
        return f"{DEBIAN_PY} cannot import a client module: {r.stderr.strip().splitlines()[-1]}"
    return None


def remove_stale_namespaces():
    """Namespaces of earlier runs whose process is gone (killed with SIGKILL)."""
    r = sh("ip", "netns", "list", check=False)
    for line in r.stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        if not name.startswith(NS_PREFIX):
            continue
        try:
            os.kill(int(name[len(NS_PREFIX):]), 0)
            continue  # its owner still runs
        except (ValueError, ProcessLookupError):
            pass
        except PermissionError:
            continue
        log(f"removing namespace {name} left by a killed run")
        kill_namespace(name)


def kill_namespace(ns: str):
    # Only processes inside our own namespace: the ones this test started.
    for _ in range(3):
        pids = sh("ip", "netns", "pids", ns, check=False).stdout.split()
        if not pids:
            break
        for p in pids:
            try:
                os.kill(int(p), signal.SIGKILL)
            except (ValueError, ProcessLookupError):
                pass
        time.sleep(0.2)
    sh("ip", "netns", "del", ns, check=False)


def netem_available(ns: str) -> bool:
    r = sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root", "netem",
           "delay", "1ms", check=False)
    if r.returncode != 0:
        return False
    sh("ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", "lo", "root", check=False)
    r = sh("ip", "-n", ns, "link", "add", "ifbprobe", "type", "ifb", check=False)
    if r.returncode != 0:
        return False
    sh("ip", "-n", ns, "link", "del", "ifbprobe", check=False)
    return True


def setup_namespace(ns: str, force_wire: bool, mtu: int = 1500) -> str:
    """The namespace with k0 <-veth-> d0; returns the impairment mode: "netem" or "wire"."""
    sh("ip", "netns", "add", ns)
    n = ["ip", "-n", ns]
    sh(*n, "link", "set", "lo", "up")
    mode = "wire" if force_wire or not netem_available(ns) else "netem"
    sh(*n, "link", "add", "k0", "type", "veth", "peer", "name", "d0")
    ifaces = ["k0", "d0"]
    if mode == "netem":
        sh(*n, "link", "add", "ifb0", "type", "ifb")
        sh(*n, "link", "set", "ifb0", "up")
    if mtu != 1500:
        for i in ifaces:
            sh(*n, "link", "set", i, "mtu", str(mtu))
    link_up(n, ns, ifaces)
    return mode


def link_up(n: list[str], ns: str | None, ifaces: list[str]):
    sh(*n, "addr", "add", f"{KERNEL_IP}/24", "dev", "k0")
    for i in ifaces:
        sh(*n, "link", "set", i, "up")
    # A partial checksum (left for an offload that never happens) would reach DPDK as a bad
    # one; with tx off the kernel also stops sending TSO super-frames.
    for i in ifaces:
        sh(*(["ip", "netns", "exec", ns] if ns else []), "ethtool", "-K", i, "tx", "off")


def rewire_through_wire():
    """Inside the namespace, samsad stopped: k0 <-veth-> w0 [dpdk_wire.py] w1 <-veth-> d0.
    (The Python wire is too slow for the many-connections run; the steps before the bulk run
    use the direct pair.)"""
    sh("ip", "link", "del", "k0")  # and its peer d0
    sh("ip", "link", "add", "k0", "type", "veth", "peer", "name", "w0")
    sh("ip", "link", "add", "w1", "type", "veth", "peer", "name", "d0")
    link_up(["ip"], None, ["k0", "w0", "w1", "d0"])


def outer(a) -> int:
    why = a.unavailable or missing_prerequisites(a)
    if why:
        return h.skip_or_fail(log, why, "the test")
    if not (a.samsad and os.access(a.samsad, os.X_OK)):
        log(f"FAIL: samsad binary not found: {a.samsad!r}")
        return 1
    ns = f"{NS_PREFIX}{os.getpid()}"
    # ctest's timeout and ^C end the test through the finally below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(f"SIGTERM: cleaning up {ns}"))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(f"SIGINT: cleaning up {ns}"))
    remove_stale_namespaces()
    inner = None
    t0 = time.monotonic()
    try:
        mode = setup_namespace(ns, a.force_wire, a.mtu)
        log(f"namespace {ns}: kernel k0 {KERNEL_IP} <-> DPDK d0 {DPDK_IP} ({a.pmd}), "
            f"impairment by {'tc netem (+ifb)' if mode == 'netem' else 'dpdk_wire.py'}")
        work = tempfile.mkdtemp(prefix="samsa-dpdk-")
        cmd = ["ip", "netns", "exec", ns, DEBIAN_PY, os.path.abspath(__file__), "--inner",
               "--mode", mode, "--work", work] + sys.argv[1:]
        inner = subprocess.Popen(cmd, start_new_session=True)
        try:
            rc = inner.wait(timeout=a.budget)
        except subprocess.TimeoutExpired:
            log(f"FAIL: the test did not finish within its budget of {a.budget:.0f}s")
            rc = 1
        if rc == SKIP:
            shutil.rmtree(work, ignore_errors=True)
            return SKIP
        log(f"{'PASS' if rc == 0 else 'FAIL'} after {time.monotonic() - t0:.1f}s")
        if rc == 0 and not a.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            log(f"kept {work} (samsad.log, the log dir)")
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
        kill_namespace(ns)


# ---------------------------------------------------------------------------------------------
# Inner process: runs inside the namespace; starts samsad and the clients there.


class Samsad(h.SamsadProcess):
    def __init__(self, path: str, work: str, pmd: str, mtu: int = 1500):
        vdev = ("net_af_xdp0,iface=d0,start_queue=0,queue_count=1" if pmd == "af_xdp"
                else "net_af_packet0,iface=d0")
        if mtu > 1500:  # the af_packet ring's frames must hold a jumbo frame
            vdev += ",framesz=9216,blocksz=36864"
        overrides = [
            "node.id=1",
            "samsa.net.backend=dpdk",
            f"samsa.dpdk.eal.args=--no-huge -m 512 --vdev={vdev}",
            f"samsa.dpdk.ip={DPDK_IP}",
            "samsa.dpdk.netmask=255.255.255.0",
            "num.partitions=3",
            "auto.create.topics.enable=true",
            "group.initial.rebalance.delay.ms=0",
            "log.retention.check.interval.ms=500"]
        if mtu != 1500:
            overrides += [f"samsa.dpdk.mtu={mtu}", "samsa.dpdk.mbufs=16383"]
        super().__init__(path, work, overrides, port=PORT, host=DPDK_IP)
        self.log_dir = self.data
        self.log_file = self.log_path

    def start(self, timeout: float = 60):
        os.makedirs(self.log_dir, exist_ok=True)
        log(" ".join(self.cmd))
        try:
            super().start(timeout, interval=0.1)
        except RuntimeError as e:
            raise Fail(str(e))
        log(f"samsad pid {self.proc.pid} serves {DPDK_IP}:{PORT} over DPDK")

    def tail(self, n: int = 30) -> str:
        return super().tail(n, prefix="  | ", skip="opened log")


def driver_commands(clients: list[str], work: str) -> tuple[dict, str | None]:
    """Each client's driver command (run_client_test.py's), or why one cannot run."""
    cmds = {}
    for name in clients:
        cmd, why = rct.driver_command(name, work, None)
        if cmd is None or why:
            return cmds, f"{name}: {why}"
        cmds[name] = cmd
    return cmds, None


def run_driver(name: str, base: list[str], broker: Samsad, timeout: float):
    cmd = base + ["--bootstrap", f"{DPDK_IP}:{PORT}", "--topic-prefix",
                           f"dp{os.getpid()}{name.replace('_', '')}", "--log-dir", broker.log_dir,
                           "--timeout", str(timeout)]
    log(f"driver {name}: {' '.join(cmd)}")
    t = time.monotonic()
    try:
        r = subprocess.run(cmd, timeout=timeout + 20, cwd=CLIENTS)
    except subprocess.TimeoutExpired:
        raise Fail(f"driver {name} still running {timeout + 20:.0f}s after start (killed)")
    if r.returncode != 0:
        raise Fail(f"driver {name} exited with {r.returncode} (its output is above)")
    if not broker.alive():
        raise Fail(f"samsad died during driver {name}:\n" + broker.tail())
    log(f"driver {name} passed in {time.monotonic() - t:.1f}s")


def bootstrap_conf() -> dict:
    return {"bootstrap.servers": f"{DPDK_IP}:{PORT}", "socket.timeout.ms": 30000,
            "api.version.request.timeout.ms": 30000}


def create_topic(name: str, partitions: int):
    h.create_topics(bootstrap_conf(), {name: partitions}, timeout=40, request_timeout=30)


def consume_until(consumer, want: int, deadline: float, what: str) -> list:
    got = []
    while len(got) < want:
        if time.monotonic() > deadline:
            raise Fail(f"{what}: {len(got)} of {want} records consumed before the deadline")
        for m in consumer.consume(500, timeout=1.0):
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    continue
                raise Fail(f"{what}: consumer error {m.error()}")
            got.append(m)
    return got


def group_flow(timeout: float):
    """Two consumers of one group share a 4-partition topic; each record is consumed once."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    deadline = time.monotonic() + timeout
    topic, group = f"dpgroup{os.getpid()}", f"dpgroup{os.getpid()}-g"
    create_topic(topic, 4)
    conf = dict(bootstrap_conf(), **{"group.id": group, "enable.auto.commit": False,
                                     "auto.offset.reset": "earliest",
                                     "session.timeout.ms": 10000,
                                     "heartbeat.interval.ms": 500,
                                     "enable.partition.eof": False})
    assigned = {0: set(), 1: set()}
    consumers = []
    for idx in (0, 1):
        c = Consumer(conf)
        c.subscribe([topic], on_assign=lambda _c, parts, i=idx: assigned[i].update(
            tp.partition for tp in parts), on_revoke=lambda _c, parts, i=idx: assigned[i].
            difference_update(tp.partition for tp in parts))
        consumers.append(c)
    # Both members join before anything is produced: a member alone would read it all.
    while not (assigned[0] and assigned[1]):
        if time.monotonic() > deadline:
            raise Fail(f"group flow: both members never held partitions: {assigned}")
        for c in consumers:
            m = c.poll(0.2)
            if m is not None and m.error():
                log(f"group flow: while joining: {m.error()}")
            elif m is not None:
                raise Fail("group flow: a record before anything was produced")
    if assigned[0] & assigned[1] or (assigned[0] | assigned[1]) != {0, 1, 2, 3}:
        raise Fail(f"group flow: assignment {assigned} does not split partitions 0-3")
    log(f"group flow: member 0 has {sorted(assigned[0])}, member 1 has {sorted(assigned[1])}")
    rng = random.Random(7)
    sent = {}
    p = Producer(dict(bootstrap_conf(), **{"acks": "all", "linger.ms": 5}))
    for i in range(2000):
        key = f"k{i}".encode()
        val = rng.randbytes(rng.randrange(10, 3000))
        sent[key] = val
        while True:
            try:
                p.produce(topic, val, key, partition=i % 4)
                break
            except BufferError:
                p.poll(0.1)
    if p.flush(max(1.0, deadline - time.monotonic())) != 0:
        raise Fail("group flow: producer did not deliver everything before the deadline")
    got = {}
    while len(got) < len(sent):
        if time.monotonic() > deadline:
            raise Fail(f"group flow: {len(got)} of {len(sent)} records consumed")
        for idx, c in enumerate(consumers):
            for m in c.consume(500, timeout=0.2):
                if m.error():
                    raise Fail(f"group flow: consumer error {m.error()}")
                if m.partition() not in assigned[idx]:
                    raise Fail(f"group flow: member {idx} got partition {m.partition()}")
                if m.key() in got:
                    raise Fail(f"group flow: record {m.key()!r} consumed twice")
                got[m.key()] = m.value()
    bad = [k for k in sent if got.get(k) != sent[k]]
    if bad:
        raise Fail(f"group flow: {len(bad)} records differ (first {bad[0]!r})")
    for c in consumers:
        c.commit(asynchronous=False)
    committed = {}
    for c in consumers:
        for tp in c.committed([TopicPartition(topic, q) for q in range(4)], timeout=15):
            if tp.offset >= 0:
                committed[tp.partition] = tp.offset
    want = {q: 500 for q in range(4)}
    if committed != want:
        raise Fail(f"group flow: committed offsets {committed}, want {want}")
    for c in consumers:
        c.close()
    log(f"group flow: 2 members consumed {len(got)} records once each, byte-identical; "
        f"committed {committed}")


def many_connections(n: int, timeout: float):
    """n connections at once, each: connect, Produce v7 (acks=all) one record, Fetch v11 it
    back byte-identical, close. Every connection must finish, within 3x the median one's
    time (plus 0.5 s: on a loaded 2-core machine the median can be a few ms)."""
    import selectors
    import struct

    from confluent_kafka import Producer  # noqa: F401  (Debian's, checked before)
    sys.path.insert(0, CLIENTS)
    import kproto

    kafka = kproto.Kafka()
    topic = f"dpconn{os.getpid()}"
    create_topic(topic, 3)
    rng = random.Random(11)
    sel = selectors.DefaultSelector()
    deadline = time.monotonic() + timeout

    class C:
        def __init__(self, i: int):
            self.i, self.part = i, i % 3
            self.value = rng.randbytes(rng.randrange(50, 4000))
            self.out, self.inbuf = b"", b""
            self.state, self.offset, self.done_at = "connect", -1, None
            self.s = socket.socket()
            self.s.setblocking(False)
            self.s.connect_ex((DPDK_IP, PORT))
            self.t0 = time.monotonic()
            sel.register(self.s, selectors.EVENT_WRITE, self)

        def queue(self, key: int, v: int, body: dict):
            f = kafka.encode_request(key, v, self.i, f"conn{self.i}", body)
            self.out += struct.pack(">i", len(f)) + f
            sel.modify(self.s, selectors.EVENT_READ | selectors.EVENT_WRITE, self)

        def produce(self):
            rec = {"attributes": 0, "timestampDelta": 0, "offsetDelta": 0,
                   "key": f"c{self.i}", "value": {"hex": self.value.hex()}, "headers": []}
            batch = {"batches": [{"baseOffset": 0, "partitionLeaderEpoch": -1,
                                  "attributes": 0, "baseTimestamp": int(time.time() * 1000),
                                  "records": [rec]}]}
            self.queue(0, 7, {"TransactionalId": None, "Acks": -1, "TimeoutMs": 30000,
                              "TopicData": [{"Name": topic, "PartitionData": [
                                  {"Index": self.part, "Records": batch}]}]})
            self.state = "produce"

        def fetch(self):
            self.queue(1, 11, {"ReplicaId": -1, "MaxWaitMs": 0, "MinBytes": 1,
                               "MaxBytes": 4096, "IsolationLevel": 0, "SessionId": 0,
                               "SessionEpoch": -1, "ForgottenTopicsData": [], "RackId": "",
                               "Topics": [{"Topic": topic, "Partitions": [
                                   {"Partition": self.part, "CurrentLeaderEpoch": -1,
                                    "FetchOffset": self.offset, "LastFetchedEpoch": -1,
                                    "LogStartOffset": -1, "PartitionMaxBytes": 4096}]}]})
            # (A broker answers at least the batch at the offset, whatever the limits; small
            # limits keep the answers, and this single-threaded client's decoding, short.)
            self.state = "fetch"

        def on_frame(self, frame: bytes):
            if self.state == "produce":
                _, body = kafka.decode_response(0, 7, frame)
                pr = body["Responses"][0]["PartitionResponses"][0]
                if pr["ErrorCode"] != 0:
                    raise Fail(f"connection {self.i}: Produce error {pr['ErrorCode']}")
                self.offset = pr["BaseOffset"]
                self.fetch()
            elif self.state == "fetch":
                _, body = kafka.decode_response(1, 11, frame)
                pd = body["Responses"][0]["Partitions"][0]
                if pd["ErrorCode"] != 0:
                    raise Fail(f"connection {self.i}: Fetch error {pd['ErrorCode']}")
                for b in (pd["Records"] or {}).get("batches", []):
                    for r in b.get("records", []):
                        if b["baseOffset"] + r["offsetDelta"] == self.offset:
                            if kproto._json_to_blob(r["value"]) != self.value:
                                raise Fail(f"connection {self.i}: fetched value differs")
                            self.finish()
                            return
                raise Fail(f"connection {self.i}: offset {self.offset} not in the fetch answer")

        def finish(self):
            self.done_at = time.monotonic()
            self.state = "done"
            sel.unregister(self.s)
            self.s.close()

    conns = [C(i) for i in range(n)]
    left = n
    while left:
        if time.monotonic() > deadline:
            stuck = collections.Counter(c.state for c in conns if c.state != "done")
            raise Fail(f"many connections: {left} of {n} unfinished at the deadline: "
                       f"{dict(stuck)}")
        for key, ev in sel.select(timeout=1.0):
            c = key.data
            try:
                if c.state == "connect":
                    err = c.s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        raise Fail(f"connection {c.i}: connect failed: {os.strerror(err)}")
                    c.produce()
                    continue
                if ev & selectors.EVENT_WRITE and c.out:
                    c.out = c.out[c.s.send(c.out):]
                    if not c.out:
                        sel.modify(c.s, selectors.EVENT_READ, c)
                if ev & selectors.EVENT_READ:
                    data = c.s.recv(1 << 20)
                    if not data:
                        raise Fail(f"connection {c.i}: closed by the broker in {c.state}")
                    c.inbuf += data
                    while len(c.inbuf) >= 4:
                        size = struct.unpack_from(">i", c.inbuf)[0]
                        if len(c.inbuf) < 4 + size:
                            break
                        frame, c.inbuf = c.inbuf[4:4 + size], c.inbuf[4 + size:]
                        c.on_frame(frame)
                        if c.state == "done":
                            left -= 1
                            break
            except (BlockingIOError, InterruptedError):
                pass
            except OSError as e:
                raise Fail(f"connection {c.i}: {e} in {c.state}")
    times = sorted(c.done_at - c.t0 for c in conns)
    med = times[len(times) // 2]
    worst = times[-1]
    log(f"{n} connections: median {med * 1000:.0f} ms, p99 {times[int(n * 0.99)] * 1000:.0f} "
        f"ms, slowest {worst * 1000:.0f} ms")
    if worst > 3 * med + 0.5:
        raise Fail(f"many connections: the slowest took {worst:.2f}s, over 3x the median "
                   f"{med:.2f}s (+0.5s)")


def _csum(b: bytes) -> int:
    if len(b) % 2:
        b += b"\0"
    t = sum(int.from_bytes(b[i:i + 2], "big") for i in range(0, len(b), 2))
    while t >> 16:
        t = (t & 0xFFFF) + (t >> 16)
    return ~t & 0xFFFF


def tcp_frame(src_mac: bytes, dst_mac: bytes, src_ip: str, dst_ip: str, sport: int,
              dport: int, seq: int, ack: int, flags: int, options: bytes = b"",
              payload: bytes = b"", data_offset: int | None = None) -> bytes:
    """An Ethernet/IPv4/TCP frame with valid checksums (data_offset overrides the header's)."""
    import struct

    sip, dip = socket.inet_aton(src_ip), socket.inet_aton(dst_ip)
    opts = options + b"\0" * (-len(options) % 4)
    off = data_offset if data_offset is not None else (20 + len(opts)) // 4
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, off << 4, flags, 65535, 0, 0)
    tcp += opts + payload
    c = _csum(sip + dip + struct.pack("!BBH", 0, 6, len(tcp)) + tcp)
    tcp = tcp[:16] + struct.pack("!H", c) + tcp[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), random.randrange(65536), 0x4000,
                     64, 6, 0, sip, dip)
    ip = ip[:10] + struct.pack("!H", _csum(ip)) + ip[12:]
    return dst_mac + src_mac + b"\x08\x00" + ip + tcp


def attack_flow(broker: Samsad, syns: int, timeout: float):
    """A SYN flood of `syns` half-open connections (spoofed sources in the subnet that never
    answer ARP, so the stack's SYN-ACKs go nowhere), an RST storm (random sequence numbers,
    at the listener and at a live client's own connection) and SYNs with malformed TCP
    options, all from an AF_PACKET socket on k0, while a client keeps producing and reading
    back over an established connection. The client must keep going; samsad's RSS may grow
    by at most 64 MiB."""
    import struct
    import threading

    from confluent_kafka import Consumer, Producer, TopicPartition

    sys.path.insert(0, CLIENTS)
    deadline = time.monotonic() + timeout
    topic = f"dpattack{os.getpid()}"
    create_topic(topic, 1)
    rss0 = h.rss_kib(broker.proc.pid)
    # The DPDK end's MAC, from the kernel's neighbour table (a connection was made above).
    neigh = sh("ip", "neigh", "show", DPDK_IP, "dev", "k0").stdout.split()
    if "lladdr" not in neigh:
        raise Fail(f"no neighbour entry for {DPDK_IP}: {' '.join(neigh)}")
    dst_mac = bytes.fromhex(neigh[neigh.index("lladdr") + 1].replace(":", ""))
    with open("/sys/class/net/k0/address") as f:
        src_mac = bytes.fromhex(f.read().strip().replace(":", ""))
    raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    raw.bind(("k0", 0))
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)

    def send(frame: bytes):
        while True:
            try:
                raw.send(frame)
                return
            except (BlockingIOError, OSError) as e:
                if getattr(e, "errno", None) not in (105, 11):  # ENOBUFS, EAGAIN
                    raise
                time.sleep(0.001)

    # The live client: one producer, one consumer, each on its own connection.
    progress = {"acked": 0, "read": 0, "error": None}
    stop = threading.Event()

    def live():
        try:
            p = Producer(dict(bootstrap_conf(), **{"acks": "all", "linger.ms": 1}))
            c = Consumer(dict(bootstrap_conf(), **{"group.id": f"{topic}-live",
                                                   "enable.auto.commit": False}))
            c.assign([TopicPartition(topic, 0, 0)])
            i = 0
            while not stop.is_set():
                v = f"live-{i}".encode()
                p.produce(topic, v, partition=0, on_delivery=lambda e, m: (
                    progress.__setitem__("error", str(e)) if e else
                    progress.__setitem__("acked", progress["acked"] + 1)))
                p.flush(30)
                m = c.poll(10)
                while m is not None and m.error():
                    m = c.poll(10)
                if m is None or m.value() != v:
                    progress["error"] = f"read back {m and m.value()!r}, want {v!r}"
                    return
                progress["read"] += 1
                i += 1
            c.close()
        except Exception as e:  # reported by the main thread
            progress["error"] = f"{type(e).__name__}: {e}"

    th = threading.Thread(target=live, name="live-client", daemon=True)
    th.start()
    while progress["read"] < 5:
        if progress["error"] or time.monotonic() > deadline:
            raise Fail(f"attack: the live client did not start: {progress}")
        time.sleep(0.1)

    def check_live(what: str, since: int):
        end = time.monotonic() + 20
        while progress["read"] < since + 5:
            if progress["error"]:
                raise Fail(f"attack ({what}): the live client failed: {progress['error']}")
            if time.monotonic() > end:
                raise Fail(f"attack ({what}): the live client made no progress in 20 s "
                           f"({progress})")
            time.sleep(0.05)

    # 1. SYN flood: `syns` SYNs from 200 silent addresses x ports.
    t = time.monotonic()
    before = progress["read"]
    for i in range(syns):
        src = f"10.99.0.{50 + i % 200}"
        send(tcp_frame(src_mac, dst_mac, src, DPDK_IP, 10000 + i // 200, PORT,
                       random.getrandbits(32), 0, 0x02, b"\x02\x04\x05\xb4"))
    check_live("SYN flood", before)
    log(f"attack: {syns} SYNs from silent sources sent in {time.monotonic() - t:.1f}s; the "
        f"live client kept going ({progress['read']} round trips so far)")
    # New clients must still get in while the half-open connections linger (lwIP's are
    # counted against the listener's backlog and time out only after 20 s).
    import kproto

    t = time.monotonic()
    for i in range(20):
        k = kproto.Kafka()
        try:
            c = kproto.Conn(DPDK_IP, PORT, timeout=5)
            c.send(k.encode_request(18, 0, i, "after-flood", {}))
            k.decode_response(18, 0, c.recv(timeout=5))
            c.close()
        except (OSError, kproto.Closed) as e:
            raise Fail(f"attack: new connection {i} after the SYN flood failed: {e} (after "
                       f"{time.monotonic() - t:.1f}s)")
    log(f"attack: 20 new connections after the flood answered in {time.monotonic() - t:.2f}s")

    # 2. RST storm: at the listener from random ports, and at the live connections' own
    # 4-tuples with random (out-of-window, almost surely) sequence numbers.
    conns = []
    for line in sh("ss", "-tnH", "state", "established", "dst", DPDK_IP).stdout.splitlines():
        f = line.split()
        local = f[-2]
        conns.append(int(local.rsplit(":", 1)[1]))
    before = progress["read"]
    for i in range(5000):
        send(tcp_frame(src_mac, dst_mac, KERNEL_IP, DPDK_IP, 40000 + i % 20000, PORT,
                       random.getrandbits(32), 0, 0x04))
        for sport in conns:
            send(tcp_frame(src_mac, dst_mac, KERNEL_IP, DPDK_IP, sport, PORT,
                           random.getrandbits(32), 0, 0x04))
    check_live("RST storm", before)
    log(f"attack: RST storm ({5000 * (1 + len(conns))} RSTs, {len(conns)} live connections "
        "targeted) survived")

    # 3. Malformed TCP options and headers on SYNs and on segments.
    bad_options = [b"\x02\x00", b"\x02\x01", b"\x02\x04\x00", b"\x02\x04\x00\x00",
                   b"\x03\x03\xff", b"\x03\x00", b"\x04\x00", b"\x05\x01",
                   b"\x05\x0a\x00\x00\x00\x00\x00\x00\x00\x00", b"\x08\x0a",
                   b"\xfe\xff", b"\x01" * 40, b"\x02\xff" + b"\x00" * 38,
                   b"\x03\x03\x0e\x02\x04\xff\xff", bytes(range(40))]
    before = progress["read"]
    n = 0
    for k, opts in enumerate(bad_options):
        for j in range(20):
            sport = 50000 + k * 20 + j
            send(tcp_frame(src_mac, dst_mac, f"10.99.0.{250 + j % 4}", DPDK_IP, sport, PORT,
                           random.getrandbits(32), 0, 0x02, opts[:40]))
            send(tcp_frame(src_mac, dst_mac, KERNEL_IP, DPDK_IP, sport, PORT,
                           random.getrandbits(32), random.getrandbits(32), 0x18, opts[:40],
                           payload=b"\0\0\0\x10junk"))
            n += 2
    for off in (0, 1, 4, 15):  # data offsets shorter than a header, or past the segment
        for j in range(20):
            send(tcp_frame(src_mac, dst_mac, KERNEL_IP, DPDK_IP, 52000 + off * 20 + j, PORT,
                           random.getrandbits(32), 0, 0x02, data_offset=off))
            n += 1
    check_live("malformed options", before)
    log(f"attack: {n} segments with malformed options or data offsets survived")

    stop.set()
    th.join(30)
    if progress["error"]:
        raise Fail(f"attack: the live client failed: {progress['error']}")
    raw.close()
    rss1 = h.rss_kib(broker.proc.pid)
    log(f"attack: samsad RSS {rss0 // 1024} MiB before, {rss1 // 1024} MiB after; "
        f"{progress['read']} live round trips")
    if rss1 - rss0 > 64 * 1024:
        raise Fail(f"attack: samsad's RSS grew by {(rss1 - rss0) // 1024} MiB (limit 64)")


def bulk_flow(mb: int, timeout: float) -> dict:
    """Produces `mb` MB of seeded random values (idempotent, acks=all) and consumes them back."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    deadline = time.monotonic() + timeout
    topic = f"dpbulk{os.getpid()}"
    create_topic(topic, 1)
    size = 16 * 1024
    count = mb * 1024 * 1024 // size
    rng = random.Random(42)
    block = rng.randbytes(1 << 20)
    # Each value is a distinct slice of the random block, prefixed with its index: cheap to
    # make and to check, and every byte of it differs from its neighbours'.
    def value(i: int) -> bytes:
        off = (i * 7919) % ((1 << 20) - size)
        return i.to_bytes(8, "big") + block[off:off + size - 8]

    errors = []
    p = Producer(dict(bootstrap_conf(), **{
        "acks": "all", "enable.idempotence": True, "linger.ms": 10,
        "batch.num.messages": 64, "message.timeout.ms": int(timeout * 1000),
        "queue.buffering.max.kbytes": 16384}))
    t = time.monotonic()
    for i in range(count):
        while True:
            try:
                p.produce(topic, value(i), partition=0,
                          on_delivery=lambda err, _m: err and errors.append(str(err)))
                break
            except BufferError:
                p.poll(0.05)
        if time.monotonic() > deadline:
            raise Fail(f"bulk: only {i} of {count} records handed to the producer in time")
    left = p.flush(max(1.0, deadline - time.monotonic()))
    if left or errors:
        raise Fail(f"bulk: {left} records undelivered, delivery errors: {errors[:3]}")
    produce_s = time.monotonic() - t
    c = Consumer(dict(bootstrap_conf(), **{"group.id": f"{topic}-reader",
                                           "enable.auto.commit": False,
                                           "fetch.max.bytes": 8 << 20,
                                           "max.partition.fetch.bytes": 4 << 20}))
    c.assign([TopicPartition(topic, 0, 0)])
    t = time.monotonic()
    h_sent, h_got = hashlib.sha256(), hashlib.sha256()
    n = 0
    while n < count:
        if time.monotonic() > deadline:
            raise Fail(f"bulk: {n} of {count} records consumed before the deadline")
        for m in c.consume(1000, timeout=1.0):
            if m.error():
                raise Fail(f"bulk: consumer error {m.error()}")
            v = m.value()
            if m.offset() != n or v != value(n):
                raise Fail(f"bulk: record at offset {m.offset()} (expected {n}) differs from "
                           f"what was produced ({len(v)} bytes, index "
                           f"{int.from_bytes(v[:8], 'big')})")
            h_sent.update(value(n))
            h_got.update(v)
            n += 1
    consume_s = time.monotonic() - t
    c.close()
    total = count * size / 1e6
    res = dict(records=count, mb=round(total, 1), produce_s=round(produce_s, 1),
               consume_s=round(consume_s, 1), produce_mb_s=round(total / produce_s, 1),
               consume_mb_s=round(total / consume_s, 1), sha256=h_got.hexdigest()[:16])
    if h_sent.digest() != h_got.digest():
        raise Fail("bulk: digests differ")
    return res


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_check(broker: Samsad, settle: float = 2.0, span: float = 5.0, limit_pct: float = 5.0):
    """With no traffic the poll loop must sleep: samsad under limit_pct of one core."""
    time.sleep(settle)
    c0, t0 = cpu_seconds(broker.proc.pid), time.monotonic()
    time.sleep(span)
    pct = 100.0 * (cpu_seconds(broker.proc.pid) - c0) / (time.monotonic() - t0)
    log(f"idle: samsad used {pct:.1f}% of a core over {span:.0f}s")
    if pct >= limit_pct:
        raise Fail(f"idle samsad used {pct:.1f}% of a core (limit {limit_pct}%): the DPDK poll "
                   "loop does not sleep")


def samsactl_check(samsactl: str, broker: Samsad):
    """samsactl status names the backend and the device; the metrics carry the stack's."""
    sock = os.path.join(broker.work, "admin.sock")
    r = subprocess.run([samsactl, "--socket", sock, "--json", "status"], capture_output=True,
                       text=True, timeout=30)
    if r.returncode != 0:
        raise Fail(f"samsactl status exited with {r.returncode}: {r.stderr.strip()}")
    st = json.loads(r.stdout)
    st = st.get("result", st)
    d = st.get("dpdk") or {}
    if st.get("backend") != "dpdk" or d.get("interface") != "d0" or d.get("ip") != DPDK_IP:
        raise Fail(f"samsactl status: backend {st.get('backend')!r}, dpdk {d}")
    r = subprocess.run([samsactl, "--socket", sock, "metrics"], capture_output=True, text=True,
                       timeout=30)
    if r.returncode != 0:
        raise Fail(f"samsactl metrics exited with {r.returncode}: {r.stderr.strip()}")
    got = {l.split()[0]: float(l.split()[1]) for l in r.stdout.splitlines()
           if l.startswith("samsa_") and len(l.split()) == 2}
    for name in ("samsa_dpdk_rx_packets_total", "samsa_dpdk_tx_bytes_total",
                 "samsa_connections_accepted_total", "samsa_network_received_bytes_total"):
        if got.get(name, 0) <= 0:
            raise Fail(f"samsactl metrics: {name} is {got.get(name)}")
    log(f"samsactl: status names {d.get('device')} ({d.get('driver')}) on d0, "
        f"{d.get('rx_queues')}/{d.get('tx_queues')} queues polled by {d.get('polled_by')}; "
        f"metrics: {int(got['samsa_dpdk_rx_packets_total'])} rx packets, "
        f"{int(got['samsa_connections_accepted_total'])} connections accepted")


def counters_check(broker: Samsad, impaired: bool) -> bool:
    """The stack's counters, logged at shutdown, saw the traffic (and the losses)."""
    with open(broker.log_file, "rb") as f:
        lines = [l for l in f.read().decode(errors="replace").splitlines()
                 if "dpdk: rx " in l]
    if not lines:
        log("FAIL: samsad logged no dpdk counters at shutdown")
        return False
    log(f"counters at shutdown: {lines[-1].split('dpdk: ', 1)[1]}")
    m = re.search(r"rx (\d+) packets (\d+) bytes, tx (\d+) packets (\d+) bytes.*"
                  r"tcp retransmits (\d+), connections (\d+)", lines[-1])
    if not m:
        log("FAIL: cannot read the dpdk counters line")
        return False
    rx_p, rx_b, tx_p, tx_b, retrans, _conns = map(int, m.groups())
    if min(rx_p, rx_b, tx_p, tx_b) == 0:
        log("FAIL: the dpdk counters show no traffic")
        return False
    if impaired and retrans == 0:
        log("FAIL: 1% loss on the way out of DPDK, yet the stack counted no retransmit")
        return False
    return True


class Impairment:
    def __init__(self, mode: str, work: str):
        self.mode, self.wire, self.work = mode, None, work

    def start_wire(self):
        if self.mode != "wire":
            return
        self.wire_out = open(os.path.join(self.work, "wire.out"), "w+")
        self.wire = subprocess.Popen(
            [DEBIAN_PY, os.path.join(HERE, "dpdk_wire.py"), "w0", "w1",
             "--loss", str(IMPAIR["loss"]), "--delay-ms", str(IMPAIR["delay_ms"]),
             "--reorder", str(IMPAIR["reorder"])], stdout=self.wire_out)
        deadline = time.monotonic() + 20
        while True:
            self.wire_out.seek(0)
            if "ready" in self.wire_out.read():
                break
            if self.wire.poll() is not None or time.monotonic() > deadline:
                raise Fail("dpdk_wire.py did not start")
            time.sleep(0.05)

    def on(self):
        rule = ["loss", f"{IMPAIR['loss']}%", "delay", f"{IMPAIR['delay_ms']}ms",
                "reorder", f"{IMPAIR['reorder']}%"]
        if self.mode == "netem":
            sh("tc", "qdisc", "add", "dev", "k0", "root", "netem", *rule)
            sh("tc", "qdisc", "add", "dev", "k0", "handle", "ffff:", "ingress")
            sh("tc", "filter", "add", "dev", "k0", "parent", "ffff:", "protocol", "all", "u32",
               "match", "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", "ifb0")
            sh("tc", "qdisc", "add", "dev", "ifb0", "root", "netem", *rule)
        else:
            self.wire.send_signal(signal.SIGUSR1)
        log(f"impairment on, both directions: {' '.join(rule)} ({self.mode})")

    def stop(self) -> dict:
        if not self.wire:
            return {}
        self.wire.send_signal(signal.SIGTERM)
        try:
            self.wire.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.wire.kill()
        self.wire_out.seek(0)
        lines = [l for l in self.wire_out.read().splitlines() if l.startswith("{")]
        return json.loads(lines[-1]) if lines else {}


def crash_inner(a) -> int:
    """tests/integration/crash_restart_test.py over this backend: kill -9 under acks=all
    producers, restart, every acknowledged record still there."""
    vdev = ("net_af_xdp0,iface=d0,start_queue=0,queue_count=1" if a.pmd == "af_xdp"
            else "net_af_packet0,iface=d0")
    cmd = [DEBIAN_PY, os.path.join(HERE, "crash_restart_test.py"), "--samsad", a.samsad,
           "--rounds", str(a.crash_rounds), "--host", DPDK_IP,
           "--override", "samsa.net.backend=dpdk",
           "--override", f"samsa.dpdk.eal.args=--no-huge -m 512 --vdev={vdev}",
           "--override", f"samsa.dpdk.ip={DPDK_IP}"]
    log("crash test over DPDK: " + " ".join(cmd))
    try:
        return subprocess.run(cmd, timeout=a.budget - 20).returncode
    except subprocess.TimeoutExpired:
        log("FAIL: the crash test did not finish in time")
        return 1


def jumbo_check(broker: Samsad, mtu: int) -> bool:
    """The frames really were jumbo: samsad says so at start, and its receive counters at
    shutdown average well above a standard frame (the bulk run's data came in large frames)."""
    with open(broker.log_file, "rb") as f:
        text = f.read().decode(errors="replace")
    up = re.search(r"dpdk: \S+ \(net_af_packet on d0\) up: .* mtu (\d+),", text)
    rx = re.findall(r"dpdk: rx (\d+) packets (\d+) bytes", text)
    if not up or int(up.group(1)) != mtu:
        log(f"FAIL: samsad did not bring d0 up with MTU {mtu}: {up and up.group(0)}")
        return False
    if not rx:
        log("FAIL: no dpdk counters in samsad's log")
        return False
    packets, nbytes = (int(x) for x in rx[-1])
    avg = nbytes / max(packets, 1)
    log(f"jumbo: MTU {up.group(1)}, received {packets} frames averaging {avg:.0f} bytes")
    if avg < 3000:
        log(f"FAIL: received frames average {avg:.0f} bytes: not jumbo")
        return False
    return True


def inner(a) -> int:
    if a.crash_rounds:
        return crash_inner(a)
    work = a.work
    broker = Samsad(a.samsad, work, a.pmd, a.mtu)
    imp = Impairment(a.mode, work)
    ok = False
    clients = [c for c in a.clients.split(",") if c]
    cmds, why = driver_commands(clients, work)
    if why:
        return h.skip_or_fail(log, why)
    try:
        broker.start()
        for name in clients:
            run_driver(name, cmds[name], broker, a.driver_timeout)
        if not a.no_group:
            t = time.monotonic()
            group_flow(60)
            log(f"group flow passed in {time.monotonic() - t:.1f}s")
            if not broker.alive():
                raise Fail("samsad died during the group flow:\n" + broker.tail())
        if a.connections:
            t = time.monotonic()
            many_connections(a.connections, 120)
            log(f"{a.connections} connections passed in {time.monotonic() - t:.1f}s")
            if not broker.alive():
                raise Fail("samsad died during the many-connections run:\n" + broker.tail())
        if a.attack_syns:
            t = time.monotonic()
            attack_flow(broker, a.attack_syns, 150)
            log(f"attack passed in {time.monotonic() - t:.1f}s")
            if not broker.alive():
                raise Fail("samsad died during the attack:\n" + broker.tail())
        if a.bulk_mb > 0:
            if a.mtu > 1500:
                log("jumbo frames: the bulk run goes without impairment (the wire program and "
                    "the loss test are for standard frames)")
            elif a.mode == "wire":
                log("restarting samsad with dpdk_wire.py between k0 and d0")
                problem = broker.stop()
                if problem:
                    raise Fail(problem + "\n" + broker.tail())
                rewire_through_wire()
                imp.start_wire()
                broker.start()
            if a.mtu <= 1500:
                imp.on()
            res = bulk_flow(a.bulk_mb, a.bulk_timeout)
            log(f"bulk {'under loss/delay/reorder' if a.mtu <= 1500 else 'with jumbo frames'}: "
                f"{json.dumps(res)}")
            if not broker.alive():
                raise Fail("samsad died during the bulk run:\n" + broker.tail())
        idle_check(broker)
        if a.samsactl:
            samsactl_check(a.samsactl, broker)
        ok = True
    except Fail as e:
        log(f"FAIL: {e}")
    except Exception as e:  # a client library error is a failure with its message
        log(f"FAIL: {type(e).__name__}: {e}")
    finally:
        wire = imp.stop()
        if wire:
            log(f"wire counters: {json.dumps(wire)}")
        problem = broker.stop()
        if problem:
            log(f"FAIL: {problem}\n{broker.tail()}")
            ok = False
        elif ok:
            ok = counters_check(broker, impaired=a.bulk_mb > 0 and a.mtu <= 1500)
            if ok and a.mtu > 1500:
                ok = jumbo_check(broker, a.mtu)
        if not ok:
            log("samsad log tail:\n" + broker.tail())
    return 0 if ok else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samsad")
    ap.add_argument("--pmd", choices=["af_packet", "af_xdp"], default="af_packet")
    ap.add_argument("--clients", default="kcat,confluent_kafka",
                    help="comma-separated drivers of tests/clients (run_client_test.py's "
                    "names): " + ",".join(DRIVERS))
    ap.add_argument("--no-group", action="store_true", help="skip the two-member group flow")
    ap.add_argument("--attack-syns", type=int, default=0,
                    help="SYN flood of this many half-open connections, RST storm, malformed "
                    "options, while a client keeps producing (0: none)")
    ap.add_argument("--connections", type=int, default=500,
                    help="concurrent connections that each produce and fetch a record (0: none)")
    ap.add_argument("--bulk-mb", type=int, default=50, help="MB under loss (0: no bulk run)")
    ap.add_argument("--bulk-timeout", type=float, default=150)
    ap.add_argument("--driver-timeout", type=float, default=90)
    ap.add_argument("--budget", type=float, default=420, help="hard limit of the whole run (s)")
    ap.add_argument("--force-wire", action="store_true",
                    help="use dpdk_wire.py even where tc netem exists")
    ap.add_argument("--crash-rounds", type=int, default=0,
                    help="instead of the flows: crash_restart_test.py with this many kill -9 "
                    "rounds over the DPDK backend")
    ap.add_argument("--samsactl", help="also check samsactl status and metrics")
    ap.add_argument("--unavailable", help="the DPDK backend was not built: this reason")
    ap.add_argument("--mtu", type=int, default=1500,
                    help="MTU of the veth pair and samsa.dpdk.mtu (>1500: jumbo frames, "
                    "af_packet only; the bulk run then goes without impairment)")
    ap.add_argument("--keep", action="store_true", help="keep the work dir")
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--mode", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    a = ap.parse_args()
    for c in a.clients.split(","):
        if c and c not in DRIVERS:
            ap.error(f"--clients: unknown driver {c}")
    return inner(a) if a.inner else outer(a)


if __name__ == "__main__":
    sys.exit(main())
