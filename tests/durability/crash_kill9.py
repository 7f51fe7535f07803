#!/usr/bin/python3
"""durability.crash_kill9: kill -9 the log writer at random moments and check what survived.

Usage: crash_kill9.py LOG_TORTURE [--iterations N] [--seed S] [--keep]

Each iteration starts `log_torture write` on one log directory (the log continues across
iterations), kills it with SIGKILL after a random 20-400 ms, then runs `log_torture check` with
every ACK line collected so far. After every fifth kill one extra run appends a bounded number of
batches and shuts down cleanly (then is checked), so the clean-shutdown path is covered too.
Producers and segment sizes vary per run. Any failed check fails the test, with its output.

kill -9 keeps the page cache: this proves crash consistency of the process (torn group commits,
checkpoints written mid-crash, recovery), not power-loss durability (powerfs/ tests that).
"""

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("torture")
    ap.add_argument("--iterations", type=int, default=30, help="kill -9 runs")
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()

    rng = random.Random(args.seed)
    work = tempfile.mkdtemp(prefix="samsa-crash-")
    log_dir = os.path.join(work, "log")
    acks_path = os.path.join(work, "acks")
    data_seed = rng.randrange(1, 1 << 32)
    print(f"crash_kill9: seed {args.seed}, data seed {data_seed}, work dir {work}", flush=True)
    open(acks_path, "w").close()
    started = time.monotonic()
    kills = clean_runs = total_acks = 0
    try:
        runs = [False] * args.iterations  # False: kill -9, True: clean stop
        for k in range(args.iterations // 5):
            runs.insert(6 * k + 5, True)
        for it, clean in enumerate(runs):
            producers = rng.choice([1, 2, 8, 8, 32, 64])
            seg = rng.choice([64 << 10, 256 << 10, 1 << 20])
            cmd = [args.torture, "write", "--dir", log_dir, "--seed", str(data_seed),
                   "--producers", str(producers), "--segment-bytes", str(seg)]
            if clean:
                cmd += ["--max-batches", str(rng.randrange(1, 300))]
            out_path = os.path.join(work, f"out.{it}")
            with open(out_path, "wb") as out:
                p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE)
                if clean:
                    _, err = p.communicate(timeout=60)
                    if p.returncode != 0:
                        print(f"iteration {it}: clean run exited {p.returncode}\n"
                              f"{err.decode(errors='replace')}")
                        return 1
                    clean_runs += 1
                else:
                    time.sleep(rng.uniform(0.020, 0.400))
                    p.send_signal(signal.SIGKILL)
                    _, err = p.communicate(timeout=30)
                    if p.returncode != -signal.SIGKILL:
                        print(f"iteration {it}: writer ended by itself ({p.returncode}) before "
                              f"the kill\n{err.decode(errors='replace')}")
                        return 1
                    kills += 1
            # Whole lines only: a kill may cut the last one.
            with open(out_path, "rb") as f:
                data = f.read()
            lines = data.split(b"\n")[:-1]
            with open(acks_path, "ab") as f:
                for line in lines:
                    if line.startswith(b"ACK "):
                        f.write(line + b"\n")
            total_acks += sum(1 for line in lines if line.startswith(b"ACK "))
            os.unlink(out_path)
            chk = subprocess.run([args.torture, "check", "--dir", log_dir, "--acks", acks_path,
                                  "--seed", str(data_seed)], capture_output=True, timeout=120)
            summary = chk.stdout.decode(errors="replace").strip().splitlines()
            last = summary[-1] if summary else ""
            print(f"iteration {it}: producers {producers}, segment {seg >> 10} KiB, "
                  f"{'clean stop' if clean else 'kill -9'}, acks {len(lines)}: {last}",
                  flush=True)
            if chk.returncode != 0 or not last.startswith("OK "):
                print(chk.stdout.decode(errors="replace"))
                print(chk.stderr.decode(errors="replace"))
                print(f"FAILED at iteration {it}; work dir kept: {work}")
                args.keep = True
                return 1
        elapsed = time.monotonic() - started
        print(f"crash_kill9: PASS {len(runs)} runs ({kills} kill -9, {clean_runs} clean stops), "
              f"{total_acks} acknowledged batches, {elapsed:.1f} s")
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
