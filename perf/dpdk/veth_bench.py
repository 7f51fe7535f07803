#!/usr/bin/python3
"""samsad's DPDK backend against its uring backend over the same veth pair, in one run.

  perf/dpdk/veth_bench.py --samsad build/daemon/samsad [--mb 200] [--reps 3] [--pmd af_packet]
                          [--value-bytes 16384]

A network namespace of its own holds a veth pair: k0 (10.98.0.1, checksum offload off, as the
DPDK peer needs) for the client, d0 for samsad. uring: d0 gets 10.98.0.2 in the kernel and
samsad listens on it. dpdk: d0 has no kernel address and samsad drives it with DPDK (net_
af_packet or net_af_xdp) as 10.98.0.2. Per repetition and backend, a confluent-kafka producer
(acks=all, --value-bytes values, linger 5 ms) writes --mb MB to a one-partition topic, then a consumer
reads them back; the values are checked byte-for-byte. Prints the medians: produce and consume
MB/s, and samsad's CPU seconds per GB of each direction, with the DPDK/uring ratios. The namespace is removed
whatever happens. Root, iproute2, ethtool, Debian's python3-confluent-kafka.
"""

from __future__ import annotations

import argparse
import gc
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

NS = f"samsa-bench-{os.getpid()}"
CLIENT_IP, BROKER_IP, PORT = "10.98.0.1", "10.98.0.2", 9092


def sh(*cmd):
    subprocess.run(list(cmd), check=True, capture_output=True, timeout=30)


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_once(a, backend: str, rep: int) -> dict:
    """Runs inside the namespace."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    work = tempfile.mkdtemp(prefix="samsa-bench-")
    cmd = [a.samsad, "--override", f"listeners=PLAINTEXT://{BROKER_IP}:{PORT}",
           "--override", f"log.dirs={work}/data", "--override", "node.id=1",
           "--override", f"samsa.admin.socket={work}/admin.sock"]
    if backend == "dpdk":
        vdev = ("net_af_xdp0,iface=d0,start_queue=0,queue_count=1" if a.pmd == "af_xdp"
                else "net_af_packet0,iface=d0")
        cmd += ["--override", "samsa.net.backend=dpdk",
                "--override", f"samsa.dpdk.eal.args=--no-huge -m 512 --vdev={vdev}",
                "--override", f"samsa.dpdk.ip={BROKER_IP}"]
        sh("ip", "addr", "flush", "dev", "d0")
    else:
        sh("ip", "addr", "replace", f"{BROKER_IP}/24", "dev", "d0")
    logf = open(f"{work}/samsad.log", "wb")
    p = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection((BROKER_IP, PORT), timeout=1).close()
                break
            except OSError:
                if p.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"samsad ({backend}) did not start; see {work}")
                time.sleep(0.1)
        boot = {"bootstrap.servers": f"{BROKER_IP}:{PORT}"}
        topic = f"bench{rep}"
        admin = AdminClient(boot)
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        size = a.value_bytes
        count = a.mb * 1024 * 1024 // size
        block = os.urandom(1 << 20)
        vals = [block[(i * 4099) % ((1 << 20) - size):][:size] for i in range(256)]
        batch = {"batch.size": 1 << 20} if size < 16384 else {}
        prod = Producer(dict(boot, **{"acks": "all", "linger.ms": 5,
                                      "queue.buffering.max.kbytes": 65536}, **batch))
        c0, t0 = cpu_seconds(p.pid), time.monotonic()
        for i in range(count):
            while True:
                try:
                    prod.produce(topic, vals[i % 256], partition=0)
                    break
                except BufferError:
                    prod.poll(0.01)
        if prod.flush(300) != 0:
            raise RuntimeError("produce did not finish")
        t1, c1 = time.monotonic(), cpu_seconds(p.pid)
        cons = Consumer(dict(boot, **{"group.id": "bench", "fetch.max.bytes": 16 << 20,
                                      "max.partition.fetch.bytes": 8 << 20,
                                      "enable.auto.commit": False}))
        cons.assign([TopicPartition(topic, 0, 0)])
        n = 0
        while n < count:
            for m in cons.consume(1000, timeout=1.0):
                if m.error():
                    raise RuntimeError(str(m.error()))
                if m.value() != vals[n % 256]:
                    raise RuntimeError(f"record {n} differs")
                n += 1
            if time.monotonic() - t1 > 300:
                raise RuntimeError("consume did not finish")
        t2, c2 = time.monotonic(), cpu_seconds(p.pid)
        cons.close()
        del prod, cons, admin  # before samsad stops: no reconnect noise from dead clients
        gc.collect()
        mb = count * size / 1e6
        return dict(produce=mb / (t1 - t0), consume=mb / (t2 - t1),
                    cpu_per_gb=(c2 - c0) / (2 * mb / 1000),
                    produce_cpu_per_gb=(c1 - c0) / (mb / 1000),
                    consume_cpu_per_gb=(c2 - c1) / (mb / 1000))
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
        subprocess.run(["rm", "-rf", work])


def inner(a) -> int:
    results = {"uring": [], "dpdk": []}
    for rep in range(a.reps):
        for backend in ("uring", "dpdk"):  # interleaved: load drifts hit both alike
            r = run_once(a, backend, rep)
            results[backend].append(r)
            print(f"rep {rep} {backend:5s}: produce {r['produce']:6.1f} MB/s, consume "
                  f"{r['consume']:6.1f} MB/s, samsad CPU-s/GB {r['cpu_per_gb']:4.2f} (produce "
                  f"{r['produce_cpu_per_gb']:4.2f}, consume {r['consume_cpu_per_gb']:4.2f})",
                  flush=True)
    print(f"medians of {a.reps}, {a.mb} MB each way of {a.value_bytes}-byte values, veth, pmd "
          f"{a.pmd}, load average {os.getloadavg()[0]:.2f}:")
    for backend, rs in results.items():
        med = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
        lo = {k: min(r[k] for r in rs) for k in rs[0]}
        hi = {k: max(r[k] for r in rs) for k in rs[0]}
        print(f"  {backend:5s}: produce {med['produce']:6.1f} MB/s ({lo['produce']:.0f}-"
              f"{hi['produce']:.0f}), consume {med['consume']:6.1f} MB/s ({lo['consume']:.0f}-"
              f"{hi['consume']:.0f}); samsad CPU-s/GB produce {med['produce_cpu_per_gb']:4.2f}, "
              f"consume {med['consume_cpu_per_gb']:4.2f}")
    for k in ("produce", "consume"):
        u = statistics.median(r[f"{k}_cpu_per_gb"] for r in results["uring"])
        d = statistics.median(r[f"{k}_cpu_per_gb"] for r in results["dpdk"])
        print(f"  {k}: dpdk/uring CPU per GB {d / u:.2f}x, throughput "
              f"{statistics.median(r[k] for r in results['dpdk']) / statistics.median(r[k] for r in results['uring']):.2f}x")
    return 0


def run_in_namespace(script: str, mtu: int = 1500) -> int:
    """Makes the namespace with its veth pair (k0 for the client, checksum offload off; d0 for
    samsad), runs `script --inner` with this process's arguments inside it, and removes the
    namespace and everything in it afterwards."""
    try:
        sh("ip", "netns", "add", NS)
        n = ["ip", "-n", NS]
        sh(*n, "link", "set", "lo", "up")
        sh(*n, "link", "add", "k0", "type", "veth", "peer", "name", "d0")
        sh(*n, "addr", "add", f"{CLIENT_IP}/24", "dev", "k0")
        if mtu != 1500:
            sh(*n, "link", "set", "k0", "mtu", str(mtu))
            sh(*n, "link", "set", "d0", "mtu", str(mtu))
        sh(*n, "link", "set", "k0", "up")
        sh(*n, "link", "set", "d0", "up")
        sh("ip", "netns", "exec", NS, "ethtool", "-K", "k0", "tx", "off")
        return subprocess.run(["ip", "netns", "exec", NS, "/usr/bin/python3", script,
                               "--inner"] + sys.argv[1:]).returncode
    finally:
        for pid in subprocess.run(["ip", "netns", "pids", NS], capture_output=True,
                                  text=True).stdout.split():
            os.kill(int(pid), signal.SIGKILL)
        subprocess.run(["ip", "netns", "del", NS])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samsad", required=True)
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--value-bytes", type=int, default=16 * 1024,
                    help="record value size (issue 24's figures: 1024)")
    ap.add_argument("--pmd", choices=["af_packet", "af_xdp"], default="af_packet")
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    a.samsad = os.path.abspath(a.samsad)
    if a.inner:
        return inner(a)
    return run_in_namespace(os.path.abspath(__file__))


if __name__ == "__main__":
    sys.exit(main())
