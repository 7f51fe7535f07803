#!/usr/bin/env python3
"""What a broker restart costs with many partitions (issue 19): a loopback cluster (1
controller + 3 brokers, one reactor each) holding --partitions partitions (--topics topics,
replication factor --rf), and broker 1 restarted --restarts times, clean (SIGTERM) and after
kill -9, timing from its exec to:

  listening   its "listening on" log line (it serves from the metadata it keeps locally)
  metadata    its first Metadata answer (raw v12, every topic) naming every partition

and what it replayed from its own metadata log and snapshot (no refetch from offset 0: the
"replayed N records" and "snapshot loaded" lines). The baseline, measured in the same run
on the same cluster before the topics exist: the same restarts with only the internal
topics. Prints medians, every value, the ratio to the baseline and the load average.

  perf/cluster/restart_cost.py --samsad build/daemon/samsad [--partitions 10000]
      [--topics 10] [--rf 1] [--restarts 5] [--keep]

Never run by the test suite (measure alone: nothing else running).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tests", "cluster"))
import cluster_harness as ch  # noqa: E402

LISTENING = re.compile(r"^(\S+) info  \[samsad\] samsad .* listening on", re.M)
REPLAYED = re.compile(r"metadata: replayed (\d+) records \((\d+) skipped\) to offset (-?\d+)")
SNAPSHOT = re.compile(r"metadata: snapshot (\S+) loaded \((\d+) records\)")


def stamp(s: str) -> float:
    import datetime
    return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def partitions_in_metadata(node, kp) -> tuple[float, int] | None:
    """(time the answer arrived, partitions it names), or None."""
    try:
        conn = ch.kproto.Conn(node.host, node.port, timeout=2)
    except OSError:
        return None
    try:
        conn.send(kp.encode_request(3, 12, 1, "restart-cost", {
            "Topics": None, "AllowAutoTopicCreation": False}))
        raw = conn.recv(10)
        got = time.time()
        _, md = kp.decode_response(3, 12, raw)
    except (OSError, ch.kproto.Closed):
        return None
    finally:
        conn.close()
    return got, sum(len(t["Partitions"]) for t in md["Topics"])


def restart(node, kp, want: int, kill: bool) -> dict:
    if kill:
        node.kill9()
    else:
        node.stop()
    offset = len(node.log_text())
    t0 = time.time()
    node.start("restart-cost " + ("kill -9" if kill else "clean"))
    metadata_at = None
    end = t0 + 60
    while time.time() < end:
        r = partitions_in_metadata(node, kp)
        if r and r[1] >= want:
            metadata_at = r[0]
            break
        time.sleep(0.005)
    text = node.log_text()[offset:]
    m = LISTENING.search(text)
    rep = REPLAYED.search(text)
    snap = SNAPSHOT.search(text)
    return {"listening": (stamp(m.group(1)) - t0) * 1000 if m else None,
            "metadata": (metadata_at - t0) * 1000 if metadata_at else None,
            "replayed": int(rep.group(1)) if rep else 0,
            "snapshot": int(snap.group(2)) if snap else 0}


def series(node, kp, want: int, restarts: int, label: str) -> dict[str, list[dict]]:
    out = {}
    for kill in (False, True):
        runs = []
        for _ in range(restarts):
            runs.append(restart(node, kp, want, kill))
            time.sleep(1)
        kind = "kill -9" if kill else "clean"
        out[kind] = runs
        med = {k: statistics.median([r[k] for r in runs if r[k] is not None] or [float("nan")])
               for k in ("listening", "metadata")}
        ch.log(f"{label}, {kind} restart: listening median {med['listening']:.0f} ms, "
               f"Metadata with all {want} partitions median {med['metadata']:.0f} ms; runs "
               f"{[(round(r['listening'] or -1), round(r['metadata'] or -1)) for r in runs]}; "
               f"replayed locally {[r['replayed'] for r in runs]} records, snapshot records "
               f"{[r['snapshot'] for r in runs]}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samsad", required=True)
    ap.add_argument("--partitions", type=int, default=10000)
    ap.add_argument("--topics", type=int, default=10)
    ap.add_argument("--rf", type=int, default=1)
    ap.add_argument("--restarts", type=int, default=5)
    ap.add_argument("--keep", action="store_true", help="keep the nodes' directories and logs")
    a = ap.parse_args()
    ch.set_log_prefix("[restart-cost]")
    from confluent_kafka.admin import AdminClient, NewTopic
    root = tempfile.mkdtemp(prefix="samsa-restart-")
    controller, brokers = ch.loopback_cluster(a.samsad, root, common={"samsa.reactors": "1"})
    everyone = [controller, *brokers.values()]
    kp = ch.kproto.Kafka()
    try:
        for n in everyone:
            n.start()
        for n in everyone:
            n.wait_listening()
        b1 = brokers[ch.BROKERS[0]]
        bootstrap = ",".join(f"{n.host}:{n.port}" for n in brokers.values())
        admin = AdminClient({"bootstrap.servers": bootstrap})
        end = time.time() + 30
        while len(admin.list_topics(timeout=5).brokers) < 3 and time.time() < end:
            time.sleep(0.2)
        base_parts = partitions_in_metadata(b1, kp)[1]
        baseline = series(b1, kp, base_parts, a.restarts, f"baseline ({base_parts} partitions)")
        per = a.partitions // a.topics
        t0 = time.time()
        for i in range(a.topics):
            name = f"many-{i}"
            admin.create_topics([NewTopic(name, per, a.rf)],
                                request_timeout=120)[name].result(180)
        want = base_parts + per * a.topics
        while (partitions_in_metadata(b1, kp) or (0, 0))[1] < want:
            time.sleep(0.5)
        ch.log(f"{per * a.topics} partitions (RF {a.rf}) created in {time.time() - t0:.1f} s")
        loaded = series(b1, kp, want, a.restarts, f"{want} partitions")
        for kind in ("clean", "kill -9"):
            for k in ("listening", "metadata"):
                b = statistics.median([r[k] for r in baseline[kind]])
                m = statistics.median([r[k] for r in loaded[kind]])
                ch.log(f"ratio {kind} {k}: {m:.0f} ms / baseline {b:.0f} ms = {m / b:.2f}")
        ch.log(f"load average {os.getloadavg()}")
    finally:
        for n in everyone:
            if n.alive():
                n.stop()
        if a.keep:
            ch.log(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
