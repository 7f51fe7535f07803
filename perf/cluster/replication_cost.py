#!/usr/bin/env python3
"""What replication costs: acks=all produce latency and throughput on a loopback cluster
(1 controller + 3 brokers, one reactor each), for

  rf1     replication factor 1 (the leader's fsync alone)
  rf3     replication factor 3, followers acknowledging from disk (samsa's default: a
          follower fetches again only after its group commit synced)
  rf3mem  replication factor 3, followers acknowledging from memory (Kafka's followers;
          samsa.testing.replica.ack.from.memory, a test-only switch)

  perf/cluster/replication_cost.py --samsad build/daemon/samsad --perf build/perf/samsa-perf
      [--rates 2,10] [--reps 3] [--seconds 10] [--json F]

Each repetition starts a fresh cluster per follower mode and measures, per topic (3
partitions, min.insync.replicas=2 for RF 3): produce latency p50/p99/p99.9 at fixed rates
(samsa-perf produce --rate-mb, 1 KiB records, acks=all, linger 0) and the max produce
throughput (10 s). Modes alternate within a repetition; the table gives medians and every
run's value. Never run by the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tests", "cluster"))
from cluster_harness import BROKERS, CONTROLLER_ID, Node, free_port  # noqa: E402

PCTS = ("p50", "p99", "p99.9")


def start_cluster(a, root: str, from_memory: bool) -> list[Node]:
    cport = free_port()
    common = {"controller.listener.names": "CONTROLLER",
              "controller.quorum.bootstrap.servers": f"127.0.0.1:{cport}",
              "samsa.reactors": "1"}
    if from_memory:
        common.update({"samsa.testing.hooks": "true",
                       "samsa.testing.replica.ack.from.memory": "true"})
    nodes = [Node(a.samsad, root, CONTROLLER_ID,
                  dict(common, **{"process.roles": "controller",
                                  "listeners": f"CONTROLLER://127.0.0.1:{cport}"}))]
    for b in BROKERS:
        nodes.append(Node(a.samsad, root, b,
                          dict(common, **{"process.roles": "broker",
                                          "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}"})))
    for n in nodes:
        n.start()
    for n in nodes:
        n.wait_listening()
    return nodes


def create(bootstrap: str, name: str, rf: int):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    cfg = {"min.insync.replicas": "2"} if rf > 1 else {}
    end = time.time() + 20
    while True:
        try:
            admin.create_topics([NewTopic(name, num_partitions=3, replication_factor=rf,
                                          config=cfg)])[name].result(timeout=10)
            return
        except Exception:
            if time.time() > end:
                raise
            time.sleep(0.2)  # the brokers are still registering


def perf(a, bootstrap: str, args: list[str], work: str, name: str) -> dict:
    out = os.path.join(work, f"{name}.json")
    r = subprocess.run([a.perf, *args, "-b", bootstrap, "-q", "--json", out],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0 or not os.path.exists(out):
        raise RuntimeError(f"samsa-perf {' '.join(args)}: {r.returncode} {r.stderr[-2000:]}")
    with open(out) as f:
        j = json.load(f)
    if not j.get("ok", False) or j.get("error"):
        raise RuntimeError(f"samsa-perf {name}: {j.get('error')}")
    return j


def one_mode(a, from_memory: bool, rep: int) -> dict:
    root = tempfile.mkdtemp(prefix="samsa-replcost-", dir=a.data)
    nodes = start_cluster(a, root, from_memory)
    bootstrap = ",".join(f"127.0.0.1:{n.port}" for n in nodes[1:])
    res: dict[str, dict] = {}
    try:
        topics = {"rf3mem": 3} if from_memory else {"rf1": 1, "rf3": 3}
        for label, rf in topics.items():
            t = f"{label}-{rep}"
            create(bootstrap, t, rf)
            r = {}
            common = ["-t", t, "-s", "1024", "--acks", "all", "--round-robin"]
            for rate in a.rates:
                j = perf(a, bootstrap, ["produce", *common, "--linger-ms", "0", "--rate-mb",
                                        f"{rate:g}", "-d", str(a.seconds), "-w", "2"], root,
                         f"{t}-r{rate:g}")
                r[f"r{rate:g}"] = {k: j["produce"]["latency_us"][k] for k in PCTS}
                r[f"r{rate:g}"]["errors"] = j["produce"]["errors"]
            j = perf(a, bootstrap, ["produce", *common, "-d", str(a.seconds), "-w", "2"], root,
                     f"{t}-max")
            r["max_mb_s"] = j["produce"]["mb_per_s"]
            r["max_errors"] = j["produce"]["errors"]
            res[label] = r
            print(f"  rep {rep} {label}: " + ", ".join(
                f"{rate:g} MB/s p50/p99/p99.9 " + "/".join(
                    f"{r[f'r{rate:g}'][k] / 1000:.2f}" for k in PCTS) + " ms"
                for rate in a.rates) + f", max {r['max_mb_s']:.1f} MB/s", flush=True)
        return res
    finally:
        for n in reversed(nodes):
            n.stop()
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samsad", required=True)
    ap.add_argument("--perf", required=True, help="build/perf/samsa-perf")
    ap.add_argument("--rates", default="2,10", help="MB/s, comma-separated")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--data", default=None, help="where the data directories go")
    ap.add_argument("--json")
    a = ap.parse_args()
    a.rates = [float(x) for x in a.rates.split(",") if x]
    runs: dict[str, list[dict]] = {"rf1": [], "rf3": [], "rf3mem": []}
    for rep in range(a.reps):
        for from_memory in (False, True) if rep % 2 == 0 else (True, False):
            for label, r in one_mode(a, from_memory, rep).items():
                runs[label].append(r)
    print("\n| topic | " + " | ".join(f"{r:g} MB/s p50 / p99 / p99.9 (ms)" for r in a.rates)
          + " | max produce MB/s |")
    print("|---|" + "---|" * (len(a.rates) + 1))
    for label, rs in runs.items():
        cells = []
        for rate in a.rates:
            k = f"r{rate:g}"
            cells.append(" / ".join(
                f"{statistics.median(r[k][p] for r in rs) / 1000:.2f}" for p in PCTS))
        mx = [r["max_mb_s"] for r in rs]
        cells.append(f"{statistics.median(mx):.1f} ({', '.join(f'{x:.1f}' for x in mx)})")
        print(f"| {label} | " + " | ".join(cells) + " |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rates": a.rates, "seconds": a.seconds, "runs": runs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
