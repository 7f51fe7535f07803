#!/usr/bin/python3
"""What the poll-mode driver alone moves over the veth pair: the ceiling any TCP stack on it
(lwIP or one of our own) works under, measured without samsad.

  perf/dpdk/pmd_ceiling.py [--pmd af_packet,af_xdp] [--mtu 1500] [--seconds 8] [--reps 3]
      [--json out.json]

Same namespace and veth pair as veth_bench.py / latency_bench.py (k0 for the kernel peer,
checksum offload off; d0 driven by DPDK). DPDK's own `dpdk-testpmd` (Debian's dpdk-dev
package; installed here when missing) drives d0 with no stack at all:
  - tx: `--forward-mode=txonly`, MTU-sized frames (UDP to an address that is not the peer's, so
    the kernel drops them after its IP input): the bytes k0 received per second. This bounds
    what samsad can send (consume, replication answers);
  - rx: `--forward-mode=rxonly` while the kernel peer sends MTU-sized UDP frames as fast as it
    can (one socket with UDP_SEGMENT: one system call per 64 KiB, cut into frames by the kernel
    before veth, as the peer's TCP does with its checksum offload off): the frames testpmd
    received per second. This bounds what samsad can receive (produce).
Both sides share the machine's two cores, as samsad and its clients do in latency_bench.py.
Compare with latency_bench.py's max produce/consume of both backends (perf/RESULTS.md).
Root, iproute2, ethtool. Never run by the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from veth_bench import BROKER_IP, run_in_namespace, sh  # noqa: E402

TESTPMD = "dpdk-testpmd"
UDP_SEGMENT = 103  # linux/udp.h


def net_dev(iface: str) -> tuple[int, int, int, int]:
    """(rx bytes, rx packets, tx bytes, tx packets) of iface in this namespace."""
    with open("/proc/net/dev") as f:
        for ln in f:
            name, _, rest = ln.partition(":")
            if name.strip() == iface:
                v = [int(x) for x in rest.split()]
                return v[0], v[1], v[8], v[9]
    raise RuntimeError(f"{iface} not in /proc/net/dev")


def vdev(a) -> str:
    if a.pmd == "af_xdp":
        return "net_af_xdp0,iface=d0,start_queue=0,queue_count=1"
    v = "net_af_packet0,iface=d0,framecnt=4096"
    if a.mtu > 1500:
        v += ",framesz=9216,blocksz=36864"
    return v


def testpmd(a, mode: str, extra: list[str], during) -> str:
    """Runs testpmd interactively: start, `during()` (or a sleep), stop; returns its output."""
    frame = a.mtu + 14
    cmd = [TESTPMD, "--no-huge", "-m", "1024", "--no-pci", f"--vdev={vdev(a)}", "-l", "0-1",
           "--", "-i", "--total-num-mbufs=32768", f"--forward-mode={mode}", "--nb-cores=1"] + extra
    # No --max-pkt-len: af_packet reports 1518 as its maximum frame while the kernel interface
    # and the ring (framesz) carry jumbo frames, as samsad's samsa.dpdk.mtu uses them.
    if frame > 2048:  # one frame per mbuf, behind the 128-byte headroom
        # (af_packet wants room for its whole ring frame, framesz=9216)
        cmd.insert(cmd.index("-i") + 1, "--mbuf-size=9344")
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    out = []
    reader = threading.Thread(target=lambda: out.extend(p.stdout), daemon=True)
    reader.start()
    time.sleep(2)  # EAL and the port up
    p.stdin.write("start\n")
    p.stdin.flush()
    result = during()
    p.stdin.write("stop\n")
    p.stdin.flush()
    time.sleep(1)
    p.stdin.write("quit\n")
    p.stdin.flush()
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
    reader.join(timeout=5)
    text = "".join(out)
    if "TX-packets" not in text:
        raise RuntimeError(f"testpmd failed:\n{text[-3000:]}")
    return text, result


def counter(text: str, name: str) -> int:
    # The last "NAME: n" in testpmd's final statistics.
    v = 0
    for ln in text.splitlines():
        if f"{name}:" in ln:
            try:
                v = int(ln.split(f"{name}:")[1].split()[0])
            except (IndexError, ValueError):
                pass
    return v


def tx_ceiling(a) -> dict:
    with open("/sys/class/net/k0/address") as f:
        kmac = f.read().strip()

    def during():
        b0, p0, *_ = net_dev("k0")
        t0 = time.monotonic()
        time.sleep(a.seconds)
        b1, p1, *_ = net_dev("k0")
        return (b1 - b0) / (time.monotonic() - t0), (p1 - p0)

    _, (bps, frames) = testpmd(a, "txonly", [f"--txpkts={a.mtu + 14}", f"--eth-peer=0,{kmac}"],
                               during)
    return {"MB/s": bps / 1e6, "frames/s": frames / a.seconds}


def rx_ceiling(a) -> dict:
    with open("/sys/class/net/d0/address") as f:
        dmac = f.read().strip()
    sh("ip", "neigh", "replace", BROKER_IP, "lladdr", dmac, "dev", "k0")
    payload = a.mtu - 28

    def during():
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.IPPROTO_UDP, UDP_SEGMENT, payload)
        buf = b"\x5a" * (payload * max(1, 65000 // payload))
        _, _, tb0, tp0 = net_dev("k0")
        end = time.monotonic() + a.seconds
        while time.monotonic() < end:
            try:
                s.sendto(buf, (BROKER_IP, 9))
            except OSError:  # ENOBUFS: the peer's queue is full, go on
                pass
        _, _, tb1, tp1 = net_dev("k0")
        return tp1 - tp0

    text, sent = testpmd(a, "rxonly", [], during)
    got = counter(text, "RX-packets")
    return {"MB/s": got * (a.mtu + 14) / a.seconds / 1e6, "frames/s": got / a.seconds,
            "peer sent frames/s": sent / a.seconds}


def inner(a) -> int:
    if not shutil.which(TESTPMD):
        sh("apt-get", "install", "-y", "-q", "--no-install-recommends", "dpdk-dev")
    sh("ip", "addr", "flush", "dev", "d0")
    runs = {"tx": [], "rx": []}
    for rep in range(a.reps):
        for d, fn in (("tx", tx_ceiling), ("rx", rx_ceiling)):
            r = fn(a)
            runs[d].append(r)
            print(f"rep {rep} {a.pmd} mtu {a.mtu} {d}: " +
                  ", ".join(f"{k} {v:,.0f}" for k, v in r.items()), flush=True)
    summary = {d: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for d, rs in runs.items()}
    for d, s in summary.items():
        print(f"median {a.pmd} mtu {a.mtu} {d}: " + ", ".join(f"{k} {v:,.0f}" for k, v in s.items()))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"pmd": a.pmd, "mtu": a.mtu, "seconds": a.seconds, "runs": runs,
                       "summary": summary}, f, indent=1)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pmd", choices=["af_packet", "af_xdp"], default="af_packet")
    ap.add_argument("--mtu", type=int, default=1500)
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.json:
        a.json = os.path.abspath(a.json)
    if a.inner:
        return inner(a)
    return run_in_namespace(os.path.abspath(__file__), a.mtu)


if __name__ == "__main__":
    sys.exit(main())
