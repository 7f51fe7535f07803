#!/usr/bin/python3
"""Drives a broker with the kcat binary (librdkafka underneath): produce keyed records with
headers through every codec with acks=all, consume them back, seek to an offset and to a
timestamp (-Q and -o s@TS), a consumer group (-G) that commits, and a check of the stored
segments.

kcat has no admin API. The topic is created by the broker's auto-creation, triggered by kcat's
metadata request (-L -t TOPIC), so the broker must run with auto.create.topics.enable=true and
num.partitions=3 (the integration harness starts it so). It is not deleted: kcat cannot, and the
harness removes the broker's whole log dir afterwards.

Values are printable (kcat reads records as delimited lines); headers are fixed per kcat run
(-H applies to every record of a run), so each (codec, partition) gets its own producer run.
"""

import json
import re
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import driverlib as dl  # noqa: E402

NAME = "kcat"


def body(args, step):
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    dl.check(kcat, "kcat not found on PATH (apt-get install kcat)")
    version = next((ln for ln in _run([kcat, "-V"], 10).splitlines() if "Version" in ln), "?")
    step(f"kcat {version.strip()}, broker {args.bootstrap}")
    topic = f"{args.topic_prefix}-kcat"
    base = [kcat, "-b", args.bootstrap, "-X", "client.id=samsa-kcat-driver", "-m", "10"]

    def partitions():
        out = _run(base + ["-L", "-J", "-t", topic, "-X", "allow.auto.create.topics=true"], 15,
                   check=False)
        try:
            md = json.loads(out)
        except ValueError:
            return None
        for t in md.get("topics", []):
            if t.get("topic") == topic and not t.get("error") and t.get("partitions"):
                return len(t["partitions"])
        return None

    n = dl.wait_until(partitions, 20, f"auto-creation of {topic}", interval=0.5)
    dl.check(n == dl.PARTITIONS,
             f"{topic} was auto-created with {n} partitions; run the broker with "
             f"num.partitions={dl.PARTITIONS}")
    step(f"{topic} auto-created by the broker with {n} partitions (metadata request)")

    count = 3 if args.small else 30
    produced = []
    for codec in args.codecs:
        recs = dl.make_records(codec, args.topic_prefix, count, 0, len(produced), printable=True)
        for r in recs:
            r.headers = [("codec", codec.encode()), ("p", str(r.partition).encode())]
        for p, part in dl.by_partition(recs).items():
            if not part:
                continue
            hdrs = sum((["-H", f"{k}={v.decode()}"] for k, v in part[0].headers), [])
            data = b"".join(r.key + b"\t" + r.value + b"\n" for r in part)
            cmd = base + ["-P", "-t", topic, "-p", str(p), "-K", "\\t", "-X", "acks=all",
                          "-X", "linger.ms=50", "-X", f"compression.codec={codec}"] + hdrs
            _run(cmd, 30, stdin=data)
            # Distinct CreateTimes between runs give the timestamp lookup one right answer.
            time.sleep(0.02)
        produced += recs
        step(f"produced {len(recs)} records with -X compression.codec={codec}, acks=all")
    per_part = dl.by_partition(produced)

    stamps = {}
    for p in range(dl.PARTITIONS):
        msgs = _consume(base + ["-C", "-t", topic, "-p", str(p), "-o", "beginning", "-e"],
                        len(per_part[p]))
        dl.compare_partition(p, per_part[p], [_tuple(m) for m in msgs])
        stamps[p] = [m["ts"] for m in msgs]
    step(f"consumed all {len(produced)} records back byte-identical, in order per partition")

    seek_p, seek_off = 2, len(per_part[2]) // 3
    msgs = _consume(base + ["-C", "-t", topic, "-p", str(seek_p), "-o", str(seek_off), "-c", "1"],
                    1)
    dl.check_record(seek_p, seek_off, per_part[seek_p][seek_off], _tuple(msgs[0]), "after -o")
    step(f"-o {seek_off} on partition {seek_p}: first record is the right one")

    ts_p = 1
    ts = stamps[ts_p]
    # The first record of a later producer run: its CreateTime is above every earlier one.
    idx = next((i for i in range(len(ts) // 2, len(ts)) if ts[i] > max(ts[:i])), None)
    dl.check(idx is not None, f"no strictly later timestamp in partition {ts_p}: {ts}")
    out = _run(base + ["-Q", "-t", f"{topic}:{ts_p}:{ts[idx]}"], 15)
    dl.check(re.search(rf"\boffset {idx}\b", out), f"-Q {topic}:{ts_p}:{ts[idx]} answered {out.strip()!r}, "
             f"expected offset {idx}")
    msgs = _consume(base + ["-C", "-t", topic, "-p", str(ts_p), "-o", f"s@{ts[idx]}", "-c", "1"],
                    1)
    dl.check_record(ts_p, idx, per_part[ts_p][idx], _tuple(msgs[0]), f"after -o s@{ts[idx]}")
    step(f"-Q and -o s@{ts[idx]} on partition {ts_p} -> offset {idx}, first record matches")

    group = f"{args.topic_prefix}-kcat-group"
    # No -o: in -G mode it would override the committed offsets on every assignment.
    gcmd = base + ["-G", group, "-e", "-X", "auto.offset.reset=earliest",
                   "-X", "enable.auto.commit=true",
                   "-X", "auto.commit.interval.ms=200", "-X", "session.timeout.ms=10000", topic]
    msgs = _consume(gcmd, len(produced), timeout=40)
    for p in range(dl.PARTITIONS):
        dl.compare_partition(p, per_part[p],
                             [_tuple(m) for m in msgs if m["partition"] == p], "group-consumed")
    # A second member of the group resumes from the committed offsets: nothing is left.
    again = _consume(gcmd, 0, timeout=40)
    dl.check(not again, f"group {group} re-read {len(again)} records: offsets were not committed")
    step(f"group {group}: consumed everything, a new member resumes at the committed end")

    dl.check_segments(step, args.log_dir, topic, produced)
    step(f"not deleting {topic}: kcat has no admin API (the harness removes the log dir)")


def _run(cmd, timeout, stdin=None, check=True):
    try:
        r = subprocess.run(cmd, input=stdin, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        dl.fail(f"{' '.join(cmd[:12])}... did not finish within {timeout}s")
    if check and r.returncode != 0:
        dl.fail(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.decode(errors='replace')}")
    return r.stdout.decode(errors="replace")


def _consume(cmd, want, timeout=30):
    out = _run(cmd + ["-J"], timeout)
    msgs = [json.loads(line) for line in out.splitlines() if line.strip()]
    dl.check(len(msgs) == want, f"{' '.join(cmd)}: got {len(msgs)} records, want {want}")
    return msgs


def _tuple(m):
    h = m.get("headers") or []
    headers = [(h[i], h[i + 1].encode()) for i in range(0, len(h), 2)]
    key = None if m.get("key") is None else m["key"].encode()
    value = None if m.get("payload") is None else m["payload"].encode()
    return (m["offset"], key, value, headers)


if __name__ == "__main__":
    dl.run_main(NAME, dl.parse_args(NAME), body)
