#!/usr/bin/python3
"""Fixed-rate latency and max throughput: samsad's DPDK backend against its uring backend over
the same veth pair, in one run.

  perf/dpdk/latency_bench.py --samsad build/daemon/samsad --perf build/perf/samsa-perf
      [--rates 5,20] [--reps 3] [--seconds 10] [--pmd af_packet|af_xdp] [--json out.json]
      [--backends uring,dpdk,dpdk+pmd=af_xdp,dpdk+KEY=VALUE,uring+offload=off,dpdk+peergro=on]
      [--mtu 9000]
      [--no-max] [--markdown out.md] [-X samsad-key=value ...]

The namespace and veth pair are veth_bench.py's: k0 (10.98.0.1, checksum offload off) for the
client, d0 for samsad (a kernel address for uring; DPDK drives it for dpdk). For every
repetition, both backends in turn (the order alternates, so the shared machine's drift falls on
both alike), one samsad each, fresh data directory:
  - for each rate R (MB/s): `samsa-perf e2e --rate-mb R`, 1 KiB records, one partition,
    acks=all, linger 0 (so the figure is the network and the broker, not the client's batching):
    produce latency (intended send time -> acknowledgement) and end-to-end latency (intended
    send time -> the consumer has it), p50/p99/p99.9 over --seconds after 2 s of warm-up;
  - max throughput: `samsa-perf produce` as fast as it goes for --seconds, then `samsa-perf
    consume --until-end` reads the topic back;
  - samsad's CPU seconds per GB in each measuring window (from /proc/PID/stat, sampled at the
    window's edges; bytes are the records the client counted in the window, produced plus
    consumed).
Prints every run and the medians. Log directories go to --data (default /dev/shm): the disk's
fsync latency on this shared machine would otherwise dominate every percentile of both backends.
Root, iproute2, ethtool. Never run by the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from veth_bench import (BROKER_IP, PORT, cpu_seconds, run_in_namespace,  # noqa: E402
                         sh)

PCTS = ("p50", "p99", "p99.9")


def start_samsad(a, backend: str, work: str) -> subprocess.Popen:
    # "dpdk+k=v+pmd=af_xdp": a variant of a backend with its own samsad overrides (or pmd).
    backend, *extra = backend.split("+")
    pmd = next((kv[4:] for kv in extra if kv.startswith("pmd=")), a.pmd)
    # "uring+offload=off": d0 without TSO/GSO/checksum offload, so the kernel sends
    # MTU-sized segments as the DPDK backend does (veth otherwise passes 64 KiB TSO segments).
    offload = next((kv[8:] for kv in extra if kv.startswith("offload=")), "on")
    # "dpdk+peergro=on": the kernel peer (k0) receives through NAPI with GRO, as a host's NIC
    # driver does; a veth pair delivers frame by frame otherwise, so the peer's TCP pays per
    # 1500-byte frame what it pays per 64 KiB TSO segment from the uring backend. veth merges
    # only frames from a sender without TSO, so d0's (unused by af_packet) goes off with it.
    peergro = next((kv[8:] for kv in extra if kv.startswith("peergro=")), "off")
    extra = [kv for kv in extra if not kv.startswith(("pmd=", "offload=", "peergro="))]
    sh("ethtool", "-K", "k0", "gro", "off")  # off also takes veth's NAPI away
    if peergro == "on":
        sh("ethtool", "-K", "k0", "gro", "on")
        if backend == "dpdk":
            offload = "off"
    sh("ethtool", "-K", "d0", "tx", offload, "tso", offload, "gso", offload)
    cmd = [a.samsad, "--override", f"listeners=PLAINTEXT://{BROKER_IP}:{PORT}",
           "--override", f"log.dirs={work}/data", "--override", "node.id=1",
           "--override", f"samsa.admin.socket={work}/admin.sock"]
    for kv in a.X + extra:
        cmd += ["--override", kv]
    if backend == "dpdk":
        vdev = ("net_af_xdp0,iface=d0,start_queue=0,queue_count=1" if pmd == "af_xdp"
                else "net_af_packet0,iface=d0")
        if a.mtu > 1500 and pmd == "af_packet":  # its ring must hold a jumbo frame
            vdev += ",framesz=9216,blocksz=36864"
            cmd += ["--override", f"samsa.dpdk.mtu={a.mtu}", "--override", "samsa.dpdk.mbufs=16383"]
        cmd += ["--override", "samsa.net.backend=dpdk",
                "--override", f"samsa.dpdk.eal.args=--no-huge -m 512 --vdev={vdev}",
                "--override", f"samsa.dpdk.ip={BROKER_IP}"]
        for kv in a.dpdk_X:
            cmd += ["--override", kv]
        sh("ip", "addr", "flush", "dev", "d0")
    else:
        sh("ip", "addr", "replace", f"{BROKER_IP}/24", "dev", "d0")
    logf = open(f"{work}/samsad.log", "wb")
    p = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection((BROKER_IP, PORT), timeout=1).close()
            return p
        except OSError:
            if p.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"samsad ({backend}) did not start; see {work}/samsad.log")
            time.sleep(0.1)


def perf_run(a, pid: int, args: list[str], work: str, name: str, window: tuple | None):
    """Runs samsa-perf; samples samsad's CPU at the window's edges (seconds after the start)."""
    out = f"{work}/{name}.json"
    cmd = [a.perf, *args, "-b", f"{BROKER_IP}:{PORT}", "-q", "--json", out]
    cpu = {}

    def sampler():
        t0 = time.monotonic()
        for edge, at in zip(("start", "end"), window):
            time.sleep(max(0.0, t0 + at - time.monotonic()))
            cpu[edge] = cpu_seconds(pid)

    th = None
    if window:
        th = threading.Thread(target=sampler)
        th.start()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if th:
        th.join()
    if r.returncode != 0 or not os.path.exists(out):
        raise RuntimeError(f"samsa-perf {' '.join(args)}: {r.returncode} {r.stderr[-2000:]}")
    with open(out) as f:
        j = json.load(f)
    if not j.get("ok", False) or j.get("error"):
        raise RuntimeError(f"samsa-perf {name}: {j.get('error')}")
    return j, cpu


def one_backend(a, backend: str, rep: int) -> dict:
    work = tempfile.mkdtemp(prefix="samsa-latbench-", dir=a.data)
    p = start_samsad(a, backend, work)
    res = {}
    try:
        common = ["-s", "1024", "-p", "1", "--create", "--acks", "all"]
        for rate in a.rates:
            t = f"lat{rate:g}-{rep}"
            j, cpu = perf_run(a, p.pid, ["e2e", "-t", t, *common, "--linger-ms", "0",
                                         "--rate-mb", f"{rate:g}", "-d", str(a.seconds), "-w",
                                         "2"], work, t, (2.3, 2 + a.seconds))
            moved = j["produce"]["bytes"] + j["consume"]["bytes"]
            res[f"r{rate:g}"] = {
                "produce_mb_s": j["produce"]["mb_per_s"],
                "produce": {k: j["produce"]["latency_us"][k] for k in PCTS},
                "e2e": {k: j["consume"]["latency_us"][k] for k in PCTS},
                "errors": j["produce"]["errors"] + j["consume"]["errors"],
                "cpu_s_per_gb": (cpu["end"] - cpu["start"]) / (moved / 1e9) * (
                    a.seconds / (a.seconds - 0.3)),
            }
        if a.no_max:
            return res
        t = f"max-{rep}"
        j, cpu = perf_run(a, p.pid, ["produce", "-t", t, *common, "-d", str(a.seconds), "-w",
                                     "2"], work, t, (2.3, 2 + a.seconds))
        res["max_produce_mb_s"] = j["produce"]["mb_per_s"]
        res["max_produce_cpu_s_per_gb"] = (cpu["end"] - cpu["start"]) / (
            j["produce"]["bytes"] / 1e9) * (a.seconds / (a.seconds - 0.3))
        c0 = cpu_seconds(p.pid)
        j, _ = perf_run(a, p.pid, ["consume", "-t", t, "--until-end", "-d", "120"], work,
                        t + "-consume", None)
        c1 = cpu_seconds(p.pid)
        res["max_consume_mb_s"] = j["consume"]["mb_per_s"]
        res["max_consume_cpu_s_per_gb"] = (c1 - c0) / (j["consume"]["bytes"] / 1e9)
        return res
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
        if a.keep:
            print(f"  kept {work}", flush=True)
        else:
            subprocess.run(["rm", "-rf", work])


def line(r: dict, rates) -> str:
    s = []
    for rate in rates:
        x = r[f"r{rate:g}"]
        s.append(f"{rate:g} MB/s: produce p50/p99/p99.9 "
                 + "/".join(f"{x['produce'][k] / 1000:.2f}" for k in PCTS)
                 + " ms, e2e " + "/".join(f"{x['e2e'][k] / 1000:.2f}" for k in PCTS)
                 + f" ms, {x['cpu_s_per_gb']:.1f} CPU-s/GB" + (
                     f", {x['errors']} errors" if x["errors"] else ""))
    if "max_produce_mb_s" not in r:
        return "\n    ".join(s)
    s.append(f"max: produce {r['max_produce_mb_s']:.1f} MB/s "
             f"({r['max_produce_cpu_s_per_gb']:.2f} CPU-s/GB), consume "
             f"{r['max_consume_mb_s']:.1f} MB/s ({r['max_consume_cpu_s_per_gb']:.2f} CPU-s/GB)")
    return "\n    ".join(s)


def flat(r: dict, rates) -> dict:
    out = {}
    for rate in rates:
        x = r[f"r{rate:g}"]
        for side in ("produce", "e2e"):
            for k in PCTS:
                out[f"{rate:g} MB/s {side} {k} ms"] = x[side][k] / 1000
        out[f"{rate:g} MB/s samsad CPU-s/GB"] = x["cpu_s_per_gb"]
    for k in ("max_produce_mb_s", "max_consume_mb_s", "max_produce_cpu_s_per_gb",
              "max_consume_cpu_s_per_gb"):
        if k in r:
            out[k] = r[k]
    return out


def markdown(summary: dict, backends) -> str:
    """The medians as a table, each run's value beside (for RESULTS.md)."""
    rows = ["| figure | " + " | ".join(backends) + " |",
            "|---|" + "---|" * len(backends)]
    for k in summary[backends[0]]:
        cells = []
        for b in backends:
            x = summary[b][k]
            fmt = (lambda v: f"{v:.0f}") if x["median"] >= 100 else (lambda v: f"{v:.2f}")
            cells.append(f"**{fmt(x['median'])}** ({', '.join(fmt(v) for v in x['runs'])})")
        name = (k.replace("max_produce_mb_s", "max produce MB/s")
                .replace("max_consume_mb_s", "max consume MB/s")
                .replace("max_produce_cpu_s_per_gb", "max produce: samsad CPU-s/GB")
                .replace("max_consume_cpu_s_per_gb", "max consume: samsad CPU-s/GB"))
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def inner(a) -> int:
    backends = tuple(a.backends.split(","))
    runs = {b: [] for b in backends}
    for rep in range(a.reps):
        order = backends if rep % 2 == 0 else backends[::-1]
        for b in order:
            r = one_backend(a, b, rep)
            runs[b].append(r)
            print(f"rep {rep} {b}:\n    {line(r, a.rates)}", flush=True)
    print(f"\nmedians of {a.reps} (per-run values in brackets), veth, pmd {a.pmd}, "
          f"1 KiB records, acks=all, one partition, {a.seconds} s windows:")
    summary = {}
    for b in backends:
        fl = [flat(r, a.rates) for r in runs[b]]
        summary[b] = {k: {"median": statistics.median(f[k] for f in fl),
                          "runs": [f[k] for f in fl]} for k in fl[0]}
    for k in summary[backends[0]]:
        print(f"  {k:32s}" + "   ".join(
            f" {b} {summary[b][k]['median']:8.2f} {[round(v, 2) for v in summary[b][k]['runs']]}"
            for b in backends))
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(markdown(summary, backends))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"settings": {"rates": a.rates, "backends": backends, "reps": a.reps, "seconds": a.seconds,
                                    "pmd": a.pmd, "X": a.X, "dpdk_X": a.dpdk_X},
                       "runs": runs, "summary": summary}, f, indent=1)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samsad", required=True)
    ap.add_argument("--perf", required=True, help="build/perf/samsa-perf")
    ap.add_argument("--rates", default="5,20", help="MB/s, comma-separated (empty: none)")
    ap.add_argument("--backends", default="uring,dpdk",
                    help="which, in this order; variants: dpdk+KEY=VALUE[+pmd=af_xdp], "
                    "uring+offload=off, dpdk+peergro=on")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--pmd", choices=["af_packet", "af_xdp"], default="af_packet")
    ap.add_argument("--data", default="/dev/shm" if os.path.isdir("/dev/shm") else "/var/tmp")
    ap.add_argument("--json")
    ap.add_argument("--markdown", help="write the medians as a Markdown table here")
    ap.add_argument("-X", action="append", default=[], help="samsad override, both backends")
    ap.add_argument("--dpdk-X", action="append", default=[], help="samsad override, dpdk only")
    ap.add_argument("--keep", action="store_true", help="keep each run's directory")
    ap.add_argument("--no-max", action="store_true", help="fixed rates only")
    ap.add_argument("--mtu", type=int, default=1500,
                    help="MTU of the veth pair (both backends); >1500: jumbo frames on DPDK too "
                    "(af_packet only)")
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    a.rates = [float(x) for x in a.rates.split(",") if x]
    for k in ("samsad", "perf"):
        setattr(a, k, os.path.abspath(getattr(a, k)))
    for k in ("json", "markdown"):
        if getattr(a, k):
            setattr(a, k, os.path.abspath(getattr(a, k)))
    if a.inner:
        return inner(a)
    return run_in_namespace(os.path.abspath(__file__), a.mtu)


if __name__ == "__main__":
    sys.exit(main())
