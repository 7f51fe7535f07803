#!/usr/bin/python3
"""Power-loss test of samsad itself: its log.dirs live on powerfs from the very first start,
power is cut while it works, and after every cut samsad must start on what survived (no repair)
and serve everything it acknowledged.

Each cut is one of three kinds (a seeded plan; the first is always `load`):
  load     samsad runs acks=all producers, OffsetCommits of two groups, a loop creating and
           deleting topics, and keyed writes to a compacted topic its cleaner keeps cleaning
           (samsad_powerloss_client.py, Debian's confluent-kafka); the power is
           cut at a random moment once every workload has been acknowledged at least once.
  restart  the same load, then samsad is killed (kill -9: its unsynced writes stay pending,
           as in a page cache) and started again; the power is cut during that start's
           recovery.
  first    the log dir is wiped and samsad starts for the first time; the power is cut during
           that start (meta.properties, the metadata log, __consumer_offsets being created).
Cut modes come from a seeded shuffle with at least half `torn` (each file keeps a random prefix
of its unsynced writes, the first lost write torn with p=1/2), the rest `drop` and `reorder`
(powerfs/README.md). After each cut: unmount, mount afresh, start samsad (it must become ready:
sd_notify READY=1), then the client checks, against every acknowledgement since the log dir was
last wiped, that each acknowledged record is at its offset byte-identical, OffsetFetch returns
each group's last acknowledged commit, acknowledged creations exist (with their partition
directories) and acknowledged deletions stay deleted (on disk too).

With --no-fsync samsad runs with log.flush.interval.messages huge (acknowledges without
fdatasync) on `--entries eager`; the run passes only if a check catches lost acknowledged data
(the test has teeth) and stops at the first one.
"""

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "powerfs"))
import powerloss  # noqa: E402  (PowerFs, ctl, tail: the log_torture driver's mount handling)

CLIENT = os.path.join(HERE, "samsad_powerloss_client.py")
PYTHON = "/usr/bin/python3"  # Debian's, which sees python3-confluent-kafka
OFFSETS_PARTITIONS = 16


Failure = powerloss.Failure


def log(msg):
    print(msg, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Samsad:
    """One samsad process on the mount; readiness through sd_notify (READY=1)."""

    def __init__(self, a, work, data, logpath, label):
        self.port = free_port()
        self.logpath = logpath
        with open(logpath, "ab") as f:
            f.write(("==== %s ====\n" % label).encode())
            self.log_from = f.tell()
        self.logfile = open(logpath, "ab")
        self.notify_path = os.path.join(work, "notify.sock")
        if os.path.exists(self.notify_path):
            os.unlink(self.notify_path)
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(self.notify_path)
        cmd = [a.samsad]
        for kv in ["listeners=PLAINTEXT://127.0.0.1:%d" % self.port,
                   "log.dirs=" + data,
                   "samsa.admin.socket=" + os.path.join(work, "admin.sock"),
                   "offsets.topic.num.partitions=%d" % OFFSETS_PARTITIONS,
                   "group.initial.rebalance.delay.ms=0",
                   # Checkpoints and the deleter run often, so cuts also land in their writes.
                   "log.flush.offset.checkpoint.interval.ms=200",
                   "log.retention.check.interval.ms=500",
                   "log.segment.delete.delay.ms=200",
                   "log.cleaner.backoff.ms=100"] + a.override:
            cmd += ["--override", kv]
        env = dict(os.environ, NOTIFY_SOCKET=self.notify_path)
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdout=self.logfile, stderr=subprocess.STDOUT, env=env)
        powerloss.ACTIVE.append(self)

    def log_text(self):
        with open(self.logpath, "rb") as f:
            f.seek(self.log_from)
            return f.read().decode(errors="replace")

    def wait_ready(self, timeout=60):
        """Seconds from spawn to READY=1; Failure if samsad exits or stalls first."""
        self.notify.settimeout(0.05)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                msg = self.notify.recv(4096).decode(errors="replace")
                if "READY=1" in msg.split("\n"):
                    return time.monotonic() - self.t0
            except socket.timeout:
                pass
            if self.proc.poll() is not None:
                raise Failure("samsad exited with %d before it was ready:\n%s"
                              % (self.proc.returncode, self.log_text()[-3000:]))
        raise Failure("samsad not ready after %d s:\n%s" % (timeout, self.log_text()[-3000:]))

    def wait_log(self, needle, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.log_text():
                return time.monotonic() - self.t0
            if self.proc.poll() is not None:
                break
            time.sleep(0.005)
        raise Failure("samsad never logged %r:\n%s" % (needle, self.log_text()[-3000:]))

    def kill(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.logfile.close()
        self.notify.close()
        if self in powerloss.ACTIVE:
            powerloss.ACTIVE.remove(self)

    def abandon(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


class Client:
    """samsad_powerloss_client.py: its CHECK verdict, then (with load) LOAD RUNNING."""

    def __init__(self, a, samsad, data, acks, tag, seed, load, errpath):
        argv = [PYTHON, CLIENT, "--bootstrap", "127.0.0.1:%d" % samsad.port, "--acks", acks,
                "--data", data, "--tag", tag, "--seed", str(seed)]
        if load:
            argv.append("--load")
        self.errfile = open(errpath, "ab")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.errfile)
        powerloss.ACTIVE.append(self)
        self.lines = []
        self.cv = threading.Condition()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for raw in self.proc.stdout:
            with self.cv:
                self.lines.append(raw.decode(errors="replace").rstrip("\n"))
                self.cv.notify_all()
        with self.cv:
            self.lines.append(None)  # end of output
            self.cv.notify_all()

    def wait_line(self, prefixes, timeout):
        """The first line starting with one of prefixes; None if output ends or time runs out."""
        deadline = time.monotonic() + timeout
        seen = 0
        with self.cv:
            while True:
                while seen < len(self.lines):
                    line = self.lines[seen]
                    seen += 1
                    if line is None:
                        return None
                    if line.startswith(prefixes):
                        return line
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cv.wait(left)

    def details(self):
        with self.cv:
            return "\n".join(l for l in self.lines if l is not None and l.startswith("  "))

    def kill(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.thread.join(timeout=10)
        self.errfile.close()
        if self in powerloss.ACTIVE:
            powerloss.ACTIVE.remove(self)

    def abandon(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def phase(text):
    """How far a start had got when the power went, from its log."""
    if "group coordinator: loaded" in text:
        return "started"
    if "created __consumer_offsets" in text:
        return "loading groups"
    if "__cluster_metadata-0: offsets" in text:
        return "creating __consumer_offsets" if "listening on" in text else "starting reactors"
    if "log dir " in text:
        return "meta.properties/metadata log"
    return "opening the log dir"


def plan(a, rng):
    """[(kind, cut)] for a.cuts cuts: at least half torn, the first cut under load."""
    n = a.cuts
    if a.no_fsync:
        kinds = ["load"] * n
    else:
        n_first = max(3, n // 5)
        n_restart = max(3, n // 6)
        kinds = ["first"] * n_first + ["restart"] * n_restart
        kinds += ["load"] * (n - 1 - len(kinds))
        rng.shuffle(kinds)
        kinds = ["load"] + kinds
    n_torn = (n * 11 + 19) // 20  # 55 %, never under half
    n_drop = (n - n_torn + 1) // 2
    modes = ["torn"] * n_torn + ["drop"] * n_drop + ["reorder"] * (n - n_torn - n_drop)
    rng.shuffle(modes)
    cuts = []
    for m in modes:
        cuts.append("drop" if m == "drop" else "%s %d" % (m, rng.randrange(1, 2**63)))
    return list(zip(kinds, cuts))


def count_lines(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return {}
    counts = {}
    for raw in data.split(b"\n"):
        if raw.startswith(b'{"'):
            k = raw[2:raw.find(b'"', 2)].decode()
            counts[k] = counts.get(k, 0) + 1
    return counts


def in_flight(path, since):
    """Commits and topic operations sent but neither acknowledged nor failed (cut mid-way)."""
    with open(path, "rb") as f:
        f.seek(since)
        data = f.read()
    open_ops = set()
    for raw in data.split(b"\n"):
        try:
            e = json.loads(raw)
        except ValueError:
            continue
        for sent, ends in (("cs", ("ca", "ce")), ("ts", ("ta", "te"))):
            if sent in e:
                open_ops.add((sent, tuple(e[sent][:2])))
            for d in ends:
                if d in e:
                    open_ops.discard((sent, tuple(e[d][:2])))
    return (sum(1 for k, _ in open_ops if k == "cs"), sum(1 for k, _ in open_ops if k == "ts"))


def run(a, work):
    rng = random.Random(a.seed)
    backing = os.path.join(work, "backing")
    acks = os.path.join(work, "acks.jsonl")
    sock = os.path.join(work, "ctl.sock")
    slog = os.path.join(work, "samsad.log")
    plog = os.path.join(work, "powerfs.log")
    clog = os.path.join(work, "client.err")
    os.makedirs(backing)
    open(acks, "w").close()
    entries = a.entries or ("eager" if a.no_fsync else "dirsync")
    steps = plan(a, rng)
    log("samsad power-loss: seed=%d cuts=%d entries=%s%s" % (
        a.seed, len(steps), entries, " no-fsync" if a.no_fsync else ""))
    mounts = [0]

    def mount():
        mounts[0] += 1
        mnt = os.path.join(work, "m%d" % mounts[0])
        os.makedirs(mnt)
        return mnt, powerloss.PowerFs(a.powerfs, backing, mnt, sock, plog, entries)

    def unmount(fs, mnt, after_cut=False):
        try:
            rc = fs.unmount()
        except Failure as e:
            # After a cut the backing dir is final (a dead disk takes no change), so a powerfs
            # that hangs on its way out (seen once in ~600 mounts here) does not touch the
            # verdict; it is killed, reported and counted.
            if not after_cut or "did not exit after unmount" not in str(e):
                raise
            log("note: %s" % e)
            stats["hung_unmounts"] += 1
            rc = 0
        if rc == 3:
            # The FUSE connection was aborted (powerfs exit 3). Seen here only during the
            # unmount after a cut, about once in 30 (requests of the killed samsad still
            # pending?); the backing dir is final at the cut, so it changes nothing.
            stats["outside_aborts"] += after_cut
        elif rc != 0:
            raise Failure("powerfs exited with %d:\n%s" % (rc, powerloss.tail(plog)))
        try:
            os.rmdir(mnt)
        except OSError:
            pass  # still lazily mounted after a hang

    stats = {"torn": 0, "drop": 0, "reorder": 0, "torn_writes": 0, "cuts_with_torn_write": 0,
             "kept_ops": 0, "dropped_ops": 0, "lost_entries": 0, "commit_inflight": 0,
             "topic_inflight": 0, "first": 0, "restart": 0, "load": 0, "phases": {},
             "hung_unmounts": 0, "outside_aborts": 0, "redone": 0}
    ready_times = []
    t_first = None  # a whole first start: spawn until __consumer_offsets is loaded
    verified = {"records": 0, "commits": 0}
    caught = None

    def redo(why, fs, mnt, *procs):
        """The mount died under us before the cut (aborted from outside): what is on the
        backing dir is everything written (powerfs writes back on the way out), no cut. Start
        again from the same step. Any other exit of powerfs is a failure."""
        if fs.proc.returncode != 3:
            raise Failure("%s, and powerfs exited with %s:\n%s"
                          % (why, fs.proc.returncode, powerloss.tail(plog)))
        log("note: %s, and powerfs exited (3): the FUSE connection was aborted from outside;"
            " redoing this step" % why)
        for p in procs:
            p.kill()
        unmount(fs, mnt)
        stats["redone"] += 1
        if stats["redone"] > 10:
            raise Failure("the FUSE connection keeps being aborted from outside")

    i = 0
    while True:
        last = i == len(steps)
        mnt, fs = mount()
        data = os.path.join(mnt, "data")
        label = "start %d (%s)" % (i, "after cut %d" % i if i else "first")
        s = Samsad(a, work, data, slog, label)
        try:
            ready = s.wait_ready()
        except Failure as e:
            if fs.proc.poll() is not None:
                redo("samsad did not start", fs, mnt, s)
                continue
            raise Failure("cut %d: samsad does not start after it: %s" % (i, e))
        ready_times.append(ready)
        if t_first is None:
            t_first = s.wait_log("group coordinator: loaded")
        kind, cut = steps[i] if not last else ("check", None)
        c = Client(a, s, data, acks, "i%d" % i, rng.randrange(1, 2**31), kind in ("load", "restart"),
                   clog)
        verdict = c.wait_line(("CHECK",), 150)
        if verdict is None or not verdict.startswith("CHECK OK"):
            details = c.details()
            if fs.proc.poll() is not None:
                redo("the check failed (%s)" % verdict, fs, mnt, c, s)
                continue
            c.kill()
            s.kill()
            unmount(fs, mnt)
            if (a.no_fsync and verdict is not None and verdict.startswith("CHECK FAIL") and
                    not verdict.startswith("CHECK FAIL lost=0 ")):
                caught = (i, verdict, details)
                log("after cut %d: %s\n%s" % (i, verdict, details))
                break
            raise Failure("after cut %d: %s\n%s\nclient stderr:\n%s"
                          % (i, verdict or "no verdict", details, powerloss.tail(clog)))
        for k, v in (("records", "records="), ("commits", "commits=")):
            verified[k] += int(verdict.split(v)[1].split()[0])
        if i:
            log("  start after cut %d: ready in %.2f s; %s" % (i, ready, verdict))
        if last:
            c.kill()
            s.kill()
            unmount(fs, mnt)
            break

        before = os.path.getsize(acks)
        counts_before = count_lines(acks)
        if kind in ("load", "restart"):
            if c.wait_line(("LOAD RUNNING",), 60) is None:
                c.kill()
                raise Failure("cut %d: the load never got going:\n%s\n%s"
                              % (i + 1, "\n".join(l for l in c.lines if l), powerloss.tail(clog)))
            time.sleep(rng.uniform(0.1, 1.5) if kind == "load" else rng.uniform(0.1, 0.6))
        if kind == "restart":
            s.kill()
            c.kill()
            s = Samsad(a, work, data, slog, "restart %d (killed, cut during start)" % (i + 1))
            time.sleep(rng.uniform(0, 1.2 * ready))
        elif kind == "first":
            c.kill()
            s.kill()
            unmount(fs, mnt)
            shutil.rmtree(backing)
            os.makedirs(backing)
            open(acks, "w").close()
            before = 0
            counts_before = {}
            mnt, fs = mount()
            s = Samsad(a, work, os.path.join(mnt, "data"), slog,
                       "first start %d (cut during it)" % (i + 1))
            # Skewed early: half the cuts land in the first 30 % of the start, where
            # meta.properties and the metadata log are written (creating __consumer_offsets takes
            # most of the rest).
            time.sleep(1.2 * t_first * rng.random() ** 2)
        if fs.proc.poll() is not None:
            redo("before cut %d" % (i + 1), fs, mnt, s, c)
            continue
        if s.proc.poll() is not None:
            raise Failure("cut %d: samsad exited by itself (%d) before the power went:\n%s"
                          % (i + 1, s.proc.returncode, s.log_text()[-3000:]))
        try:
            reply = powerloss.ctl(sock, "cut " + cut)
        except OSError as e:
            reply = "err %s" % e
        s.kill()
        c.kill()
        if not reply.startswith("ok cut"):
            if fs.proc.poll() is not None:
                redo("cut %d failed (%s)" % (i + 1, reply), fs, mnt)
                continue
            raise Failure("cut %d: `cut %s` refused: %s" % (i + 1, cut, reply))
        unmount(fs, mnt, after_cut=True)
        fields = dict(f.split("=", 1) for f in reply.split()[2:] if "=" in f)
        mode = fields["mode"]
        stats[mode] += 1
        stats[kind] += 1
        for k in ("torn_writes", "kept_ops", "dropped_ops", "lost_entries"):
            stats[k] += int(fields[k])
        stats["cuts_with_torn_write"] += int(fields["torn_writes"]) > 0
        counts = count_lines(acks)
        new = {k: counts.get(k, 0) - counts_before.get(k, 0) for k in ("rec", "ca", "ta")}
        cf, tf = in_flight(acks, before) if kind in ("load", "restart") else (0, 0)
        if kind == "load":
            stats["commit_inflight"] += cf > 0
            stats["topic_inflight"] += tf > 0
        where = phase(s.log_text()) if kind != "load" else ""
        # Cleaning passes samsad committed in this run before the cut (kv is compacted all the
        # time: the cut lands among them).
        passes = s.log_text().count("log cleaner: ")
        stats["cleaner_passes"] = stats.get("cleaner_passes", 0) + passes
        stats["cuts_after_cleaning"] = stats.get("cuts_after_cleaning", 0) + (passes > 0)
        if kind == "first":
            stats["phases"][where] = stats["phases"].get(where, 0) + 1
        log("cut %2d/%d %-7s %-7s: acked +%d records +%d commits +%d topic ops; in flight at the"
            " %s: %d commits, %d topic ops%s, %d cleaning passes | kept_ops=%s dropped_ops=%s"
            " torn_writes=%s lost_entries=%s"
            % (i + 1, len(steps), kind, mode, new["rec"], new["ca"], new["ta"],
                                  "kill" if kind == "restart" else "cut", cf, tf,
                                  " (start: %s)" % where if where else "", passes,
                                  fields["kept_ops"], fields["dropped_ops"],
                                  fields["torn_writes"], fields["lost_entries"]))
        i += 1
    return stats, ready_times, verified, caught


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--samsad", required=True)
    p.add_argument("--powerfs", required=True)
    p.add_argument("--cuts", type=int, default=25)
    p.add_argument("--no-fsync", action="store_true",
                   help="samsad acknowledges without fdatasync; pass only if a loss is caught")
    p.add_argument("--entries", choices=["eager", "fsync", "dirsync"], default=None,
                   help="powerfs --entries (default dirsync; eager with --no-fsync)")
    p.add_argument("--override", action="append", default=[],
                   help="extra samsad --override key=value (repeatable)")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--workdir", default=None)
    p.add_argument("--keep", action="store_true")
    a = p.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if a.seed is None:
        a.seed = random.SystemRandom().randrange(1, 2**31)
    if a.no_fsync:
        a.override.append("log.flush.interval.messages=9223372036854775807")
    ci = os.environ.get("CI") == "true"
    missing = []
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        missing.append("/dev/fuse")
    if subprocess.run([PYTHON, "-c", "import confluent_kafka"], capture_output=True).returncode:
        missing.append("python3-confluent-kafka")
    if missing:
        log("%s: %s not usable" % ("FAIL" if ci else "SKIP", ", ".join(missing)))
        return 1 if ci else 77
    parent = a.workdir if a.workdir and len(a.workdir) < 60 else None
    work = tempfile.mkdtemp(prefix="samsad-pl-", dir=parent)
    start = time.monotonic()
    ok = False
    try:
        stats, ready, verified, caught = run(a, work)
        elapsed = time.monotonic() - start
        if a.no_fsync:
            if caught:
                log("PASS: without fsync the check caught lost acknowledged data after cut %d"
                    " (%.1f s)" % (caught[0], elapsed))
                ok = True
            else:
                log("FAIL: %d cuts without fsync and no loss caught: the test has no teeth"
                    % a.cuts)
        else:
            cuts = stats["torn"] + stats["drop"] + stats["reorder"]
            log("PASS: %d cuts (%d torn, %d drop, %d reorder; %d kept a torn write, %d torn writes"
                " in all; %d ops kept, %d dropped, %d new entries lost) of kinds load %d,"
                " restart %d, first %d; load cuts with a commit in flight %d, with a topic"
                " operation in flight %d; first starts cut while %s; samsad started after every cut (ready in"
                " %.2f s median, %.2f max); %d checks verified %d acknowledged records and %d"
                " committed offsets in all (each check covers everything since the last wipe);"
                " FUSE connection aborted: %d times at the unmount after a cut, %d times before"
                " a cut (step redone);"
                " powerfs hung after a cut: %d; compacted topic kv: %d load periods cut after"
                " cleaning passes (%d passes in all); %.1f s"
                % (cuts, stats["torn"], stats["drop"], stats["reorder"],
                   stats["cuts_with_torn_write"], stats["torn_writes"], stats["kept_ops"],
                   stats["dropped_ops"], stats["lost_entries"], stats["load"],
                   stats["restart"], stats["first"], stats["commit_inflight"],
                   stats["topic_inflight"],
                   ", ".join("%s %d" % kv for kv in sorted(stats["phases"].items())),
                   sorted(ready)[len(ready) // 2], max(ready), len(ready),
                   verified["records"], verified["commits"], stats["outside_aborts"],
                   stats["redone"], stats["hung_unmounts"], stats.get("cuts_after_cleaning", 0),
                   stats.get("cleaner_passes", 0), elapsed))
            ok = True
    except Failure as e:
        log("FAIL: %s" % e)
        log("reproduce with --seed %d" % a.seed)
        # CI keeps only the head and the tail of a failing test's output: the reason goes
        # last too, on one line.
        log("failed: %s" % (str(e).splitlines() or ["?"])[0])
    finally:
        powerloss.cleanup()
    if ok and not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        log("work dir: %s" % work)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
