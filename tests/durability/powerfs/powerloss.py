#!/usr/bin/python3
"""Power-loss test driver: runs a log writer on powerfs, kills it, cuts the power, and checks
the log on the backing directory against every acknowledgement the writer ever printed.

Each iteration: mount powerfs (backing B, mount M); start `TORTURE write --dir M/log --seed S`
collecting its `ACK ...` lines; after a random 50-500 ms kill -9 the writer; cut the power
(`cut torn`, `cut drop` or `cut reorder`, random seed); unmount and wait for powerfs to exit;
run `TORTURE check --dir B/log --acks ACKS --seed S` on the backing directory. The log and the
acknowledgements carry over from one iteration to the next.

With fsync (default) every check must pass. With --no-fsync the writer acknowledges without
fdatasync, and the run passes only if some check caught lost acknowledged data (the test has
teeth); after such an iteration the log starts afresh so each verdict stands on its own.
"""

import argparse
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time


class Failure(Exception):
    pass


# Mounts and writers alive right now, so that any exit (failure, Ctrl-C, ctest's timeout
# SIGTERM) leaves no process or mount behind.
ACTIVE = []


def cleanup():
    while ACTIVE:
        ACTIVE.pop().abandon()


def log(msg):
    print(msg, flush=True)


def ctl(sock_path, command, timeout=10.0):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(sock_path)
        s.sendall(command.encode() + b"\n")
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = s.recv(4096)
            if not chunk:
                break
            reply += chunk
    return reply.decode().strip()


def tail(path, lines=20):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


class PowerFs:
    """One mount of powerfs, in the foreground, controlled through its socket."""

    def __init__(self, binary, backing, mountpoint, sock, logpath, entries):
        self.mountpoint = mountpoint
        self.sock = sock
        self.logpath = logpath
        self.logfile = open(logpath, "ab")
        self.proc = subprocess.Popen(
            [binary, backing, mountpoint, "--control", sock, "-f", "--entries", entries],
            stdout=self.logfile, stderr=subprocess.STDOUT)
        ACTIVE.append(self)
        deadline = time.monotonic() + 15
        while True:
            if self.proc.poll() is not None:
                raise Failure("powerfs exited at start (%s):\n%s"
                              % (self.proc.returncode, tail(logpath)))
            try:
                if ctl(sock, "ping", timeout=2) == "ok":
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise Failure("powerfs did not come up:\n" + tail(logpath))
            time.sleep(0.01)

    def unmount(self):
        """Unmounts and waits for the daemon; returns its exit status."""
        deadline = time.monotonic() + 10
        while self.proc.poll() is None:
            r = subprocess.run(["fusermount3", "-u", self.mountpoint],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            if r.returncode == 0:
                break
            # Busy while the killed writer's io_uring requests drain; give them a moment.
            if time.monotonic() > deadline:
                r = subprocess.run(["fuser", "-vm", self.mountpoint], stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, timeout=10)
                self.busy_users = r.stdout.decode(errors="replace")
                subprocess.run(["fusermount3", "-uz", self.mountpoint],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                break
            time.sleep(0.02)
        try:
            rc = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            where = self.diagnose()
            self.proc.kill()
            self.proc.wait()
            raise Failure("powerfs did not exit after unmount:\n%s%s" % (tail(self.logpath), where))
        self.logfile.close()
        ACTIVE.remove(self)
        return rc

    def diagnose(self):
        """Where powerfs's threads wait, and who still uses the mount (for a hang's report)."""
        out = ["\npowerfs threads (name: kernel wait channel):"]
        task = "/proc/%d/task" % self.proc.pid
        try:
            for tid in sorted(os.listdir(task)):
                try:
                    with open("%s/%s/comm" % (task, tid)) as f:
                        name = f.read().strip()
                    with open("%s/%s/wchan" % (task, tid)) as f:
                        wchan = f.read().strip()
                except OSError:
                    continue
                out.append("  %s %s: %s" % (tid, name, wchan))
        except OSError as e:
            out.append("  %s" % e)
        out.append("users of the mount when it stayed busy for 10 s:\n" +
                   (getattr(self, "busy_users", None) or "(it was not busy)"))
        return "\n".join(out)

    def abandon(self):
        if self.proc.poll() is None:
            subprocess.run(["fusermount3", "-uz", self.mountpoint],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.proc.kill()
            self.proc.wait()
        self.logfile.close()


class Writer:
    """The torture writer, its ACK lines read by a thread until its stdout closes."""

    def __init__(self, argv, errpath):
        self.errpath = errpath
        self.errfile = open(errpath, "wb")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.errfile)
        ACTIVE.append(self)
        self.acks = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for raw in self.proc.stdout:
            # A line without its newline was cut by the kill: it was never acknowledged.
            if raw.endswith(b"\n") and raw.startswith(b"ACK "):
                self.acks.append(raw.decode().strip())

    def kill(self):
        exited_early = self.proc.poll() is not None
        if not exited_early:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.thread.join(timeout=30)
        self.errfile.close()
        ACTIVE.remove(self)
        return exited_early

    def abandon(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def pick_cut(rng):
    r = rng.random()
    seed = rng.randrange(1, 2**63)
    if r < 0.6:
        return "torn %d" % seed
    if r < 0.85:
        return "drop"
    return "reorder %d" % seed


# Phases: how the writer runs, whether the run must catch a loss (a test with teeth), and when
# new directory entries become durable (powerfs --entries). Without fsync, entries are eager so
# that a caught loss proves the checker sees lost data, not only lost files.
PHASES = {
    "fsync": ([], False, "dirsync"),
    "nofsync": (["--no-fsync"], True, "eager"),
    # tiny_log only: new segments' directory entries are never synced.
    "nodirsync": (["--no-dir-fsync"], True, "dirsync"),
}


def run_loop(a, phase, work):
    writer_args, expect_loss, entries = PHASES[phase]
    entries = a.entries or entries
    backing = os.path.join(work, "backing")
    sock = os.path.join(work, "ctl.sock")
    acks_path = os.path.join(work, "acks.txt")
    os.makedirs(backing, exist_ok=True)
    shutil.rmtree(os.path.join(backing, "log"), ignore_errors=True)
    open(acks_path, "w").close()
    rng = random.Random(a.seed)
    log_seed = rng.randrange(1, 2**31)
    log("powerloss %s: seed=%d log_seed=%d iterations=%d entries=%s torture=%s"
        % (phase, a.seed, log_seed, a.iterations, entries, a.torture))
    total_acks = 0
    lost_iterations = 0
    cuts = 0
    for it in range(1, a.iterations + 1):
        # The log directory exists before the first mount, as a broker's log dir would; the
        # writer does not have to make its own entry durable.
        os.makedirs(os.path.join(backing, "log"), exist_ok=True)
        # A fresh mount point each time: nothing of the last mount can touch this one.
        mnt = os.path.join(work, "mnt%d" % it)
        os.makedirs(mnt)
        fs = PowerFs(a.powerfs, backing, mnt, sock, os.path.join(work, "powerfs.log"),
                     entries)
        argv = [a.torture, "write", "--dir", os.path.join(mnt, "log"),
                "--seed", str(log_seed)]
        argv += writer_args + a.writer_arg
        if a.segment_bytes:
            argv += ["--segment-bytes", str(a.segment_bytes)]
        writer = Writer(argv, os.path.join(work, "writer.err"))
        delay_ms = rng.randint(a.min_ms, a.max_ms)
        time.sleep(delay_ms / 1000.0)
        exited_early = writer.kill()
        if exited_early:
            raise Failure("iteration %d: writer exited by itself (rc %s):\n%s"
                          % (it, writer.proc.returncode, tail(writer.errpath)))
        cut = pick_cut(rng)
        reply = ctl(sock, "cut " + cut)
        if not reply.startswith("ok cut"):
            raise Failure("iteration %d: cut %s refused: %s" % (it, cut, reply))
        cuts += 1
        rc = fs.unmount()
        if rc == 3:
            # The connection was aborted from outside after the cut: the backing directory was
            # final at the cut, so the verdict below still stands.
            log("iter %2d: note: powerfs reports its FUSE connection aborted from outside" % it)
        elif rc != 0:
            raise Failure("iteration %d: powerfs exited with %d:\n%s"
                          % (it, rc, tail(fs.logpath)))
        os.rmdir(mnt)
        with open(acks_path, "a") as f:
            for line in writer.acks:
                f.write(line + "\n")
        total_acks += len(writer.acks)
        check = subprocess.run(
            [a.torture, "check", "--dir", os.path.join(backing, "log"), "--acks", acks_path,
             "--seed", str(log_seed)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        out = check.stdout.decode(errors="replace").strip()
        # The verdict line (OK/FAIL); the tool may log other lines before it.
        verdicts = [l for l in out.splitlines() if l.startswith(("OK", "FAIL"))]
        first = verdicts[-1] if verdicts else (out.splitlines() or [""])[-1]
        stats = reply.split(" ", 2)[2] if reply.count(" ") >= 2 else reply
        log("iter %2d: %3d ms, %5d acks (total %6d), cut %s -> %s | check rc=%d %s"
            % (it, delay_ms, len(writer.acks), total_acks, cut.split()[0], stats,
               check.returncode, first))
        if check.returncode != 0:
            if not expect_loss or check.returncode != 1:
                raise Failure("iteration %d: check failed after `cut %s`\n%s\nwriter stderr:\n%s"
                              "\nwork dir kept: %s"
                              % (it, cut, out, tail(writer.errpath), work))
            m = re.search(r"\blost=(\d+)", first)
            if m is None or int(m.group(1)) > 0:
                lost_iterations += 1
            # Start afresh so the next iteration's verdict is about its own cut only.
            shutil.rmtree(os.path.join(backing, "log"), ignore_errors=True)
            open(acks_path, "w").close()
            total_acks = 0
    return cuts, lost_iterations


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--powerfs", required=True, help="path of the powerfs binary")
    p.add_argument("--torture", required=True, help="path of log_torture (or a compatible tool)")
    p.add_argument("--iterations", type=int, default=30)
    p.add_argument("--no-fsync", action="store_true",
                   help="writer acknowledges without fdatasync; pass only if a loss is caught"
                        " (same as --phases nofsync)")
    p.add_argument("--phases", default=None,
                   help="comma-separated phases, each --iterations long: fsync (nothing"
                        " acknowledged may be lost), nofsync and nodirsync (a loss must be"
                        " caught); default fsync")
    p.add_argument("--entries", default=None, choices=["eager", "fsync", "dirsync"],
                   help="powerfs --entries: when new directory entries become durable (default:"
                        " dirsync for the fsync and nodirsync phases, eager for nofsync)")
    p.add_argument("--seed", type=int, default=None, help="driver seed (default: random)")
    p.add_argument("--min-ms", type=int, default=50)
    p.add_argument("--max-ms", type=int, default=500)
    p.add_argument("--workdir", default=None, help="parent of the run's temporary directory")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    p.add_argument("--segment-bytes", type=int, default=None,
                   help="passed to `write`: small segments make the writer roll (and sync the"
                        " directory) often")
    p.add_argument("--writer-arg", action="append", default=[],
                   help="extra argument for `write` (repeatable)")
    a = p.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if a.seed is None:
        a.seed = random.SystemRandom().randrange(1, 2**31)
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        log("SKIP: /dev/fuse is not usable")
        return 77
    # Unix socket paths are short: keep the run directory short too.
    parent = a.workdir if a.workdir and len(a.workdir) < 60 else None
    work = tempfile.mkdtemp(prefix="powerloss-", dir=parent)
    phases = a.phases.split(",") if a.phases else ["nofsync" if a.no_fsync else "fsync"]
    for phase in phases:
        if phase not in PHASES:
            p.error("unknown phase %r" % phase)
    ok = True
    start = time.monotonic()
    try:
        for phase in phases:
            cuts, lost = run_loop(a, phase, os.path.join(work, phase))
            if PHASES[phase][1]:
                log("%s: %d of %d iterations lost acknowledged data (%d cuts)"
                    % (phase, lost, a.iterations, cuts))
                if lost == 0:
                    log("FAIL: no iteration lost acknowledged data although the writer did not"
                        " sync; the power-loss test has no teeth")
                    ok = False
            else:
                log("%s: %d iterations, %d cuts, 0 lost acknowledged data" % (
                    phase, a.iterations, cuts))
    except Failure as e:
        log("FAIL: %s" % e)
        log("reproduce with --seed %d" % a.seed)
        return 1
    finally:
        cleanup()
        log("elapsed %.1f s" % (time.monotonic() - start))
    if ok and not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        log("work dir: %s" % work)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
