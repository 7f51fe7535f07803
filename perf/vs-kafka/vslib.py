"""Shared by perf/vs-kafka/run and perf/vs-kafka/validate: starting and stopping samsad and
Apache Kafka with the committed settings, reading a broker's CPU time and peak RSS from /proc,
running samsa-perf, deleting topics. Only Debian's Python and its packages."""

import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
BUILD = Path(os.environ.get("SAMSA_BUILD_DIR", ROOT / "build"))
SAMSAD = BUILD / "daemon" / "samsad"
SAMSA_PERF = BUILD / "perf" / "samsa-perf"
CPU_FLOOR = BUILD / "perf" / "cpu_floor"
KAFKA_SH = HERE / "kafka.sh"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def ensure_built():
    """Configures build/ if needed and builds the binaries the runs use (-j2: shared machine)."""
    targets = ["samsad", "samsa-perf", "cpu_floor"]
    if not (BUILD / "build.ninja").exists() and not (BUILD / "Makefile").exists():
        log(f"configuring {BUILD}")
        subprocess.run(["cmake", "-S", str(ROOT), "-B", str(BUILD), "-G", "Ninja"], check=True,
                       stdout=subprocess.DEVNULL)
    log("building " + " ".join(targets))
    subprocess.run(["cmake", "--build", str(BUILD), "-j", "2", "--target", *targets], check=True,
                   stdout=subprocess.DEVNULL)


# --------------------------------------------------------------------------------------------
# /proc


def proc_stat(pid):
    """(comm, the fields after it) of /proc/PID/stat: fields[0] is field 3 (state), so utime
    and stime are fields[11] and fields[12], ppid fields[1], flags fields[6]."""
    with open(f"/proc/{pid}/stat") as f:
        s = f.read()
    return s[s.index("(") + 1:s.rindex(")")], s.rsplit(")", 1)[1].split()


def proc_cpu_seconds(pid):
    """User + system CPU seconds of every thread of pid (io_uring workers included)."""
    fields = proc_stat(pid)[1]
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def reset_peak_rss(pid):
    """Resets VmHWM to the current RSS (Linux >= 4.0); False if not allowed."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def proc_status(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024  # kB
    return None


def disk_of(path):
    """The block device (name in /proc/diskstats) holding path, or None."""
    dev = os.stat(path).st_dev
    major, minor = os.major(dev), os.minor(dev)
    try:
        with open("/proc/diskstats") as f:
            for line in f:
                p = line.split()
                if int(p[0]) == major and int(p[1]) == minor:
                    # A partition: report its disk (same name without the trailing digits).
                    return p[2]
    except OSError:
        pass
    return None


def diskstats(name):
    """(sectors written, io_ticks ms) of a device."""
    with open("/proc/diskstats") as f:
        for line in f:
            p = line.split()
            if p[2] == name:
                return int(p[9]), int(p[12])
    return None


class BrokerMeter:
    """CPU seconds and peak RSS of a broker process between start() and stop(), plus the
    disk's write volume and busy time."""

    def __init__(self, pid, disk):
        self.pid, self.disk = pid, disk

    def start(self):
        self.hwm_reset = reset_peak_rss(self.pid)
        self.cpu0 = proc_cpu_seconds(self.pid)
        self.t0 = time.monotonic()
        self.disk0 = diskstats(self.disk) if self.disk else None
        return self

    def stop(self):
        wall = time.monotonic() - self.t0
        cpu = proc_cpu_seconds(self.pid) - self.cpu0
        out = {"broker_cpu_s": cpu, "wall_s": wall, "broker_cores": cpu / wall if wall else None,
               "peak_rss_bytes": proc_status(self.pid, "VmHWM") if self.hwm_reset else None,
               "rss_bytes": proc_status(self.pid, "VmRSS")}
        if self.disk0:
            d1 = diskstats(self.disk)
            out["disk_write_bytes"] = (d1[0] - self.disk0[0]) * 512
            out["disk_busy"] = (d1[1] - self.disk0[1]) / 1000 / wall if wall else None
        return out


PF_KTHREAD = 0x00200000


def proc_table():
    """{pid: (comm, cpu ticks, kernel thread?, ppid)} of every process now."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            comm, fields = proc_stat(d)
        except OSError:
            continue
        out[int(d)] = (comm, int(fields[11]) + int(fields[12]),
                       bool(int(fields[6]) & PF_KTHREAD), int(fields[1]))
    return out


def descendants(table, roots):
    roots = {r for r in roots if r}
    out, grew = set(roots), True
    while grew:
        grew = False
        for pid, (_, _, _, ppid) in table.items():
            if ppid in out and pid not in out:
                out.add(pid)
                grew = True
    return out


class OthersMeter:
    """CPU used between start() and stop() by the processes not being measured: everything but
    the broker under test and the load generator (samsa-perf), with their children. Kernel
    threads (writeback, softirqs, io_uring's workers are the broker's own threads) are counted
    apart: part of them is the broker's work. From /proc, not from the load average (samsad's
    dozens of runnable io_uring workers raise the load average by themselves)."""

    MEASURED = {"samsa-perf", "taskset"}

    def __init__(self, pids):
        self.pids = list(pids)

    def start(self):
        self.t0, self.p0 = time.monotonic(), proc_table()
        return self

    def stop(self):
        wall = time.monotonic() - self.t0
        p1 = proc_table()
        mine = descendants(p1, self.pids) | descendants(self.p0, self.pids)
        mine |= {pid for pid, v in p1.items() if v[0] in self.MEASURED}
        by_name, kernel = {}, 0
        for pid, (comm, ticks, kthread, _) in p1.items():
            if pid in mine:
                continue
            before = self.p0.get(pid)
            used = ticks - (before[1] if before and before[0] == comm else 0)
            if used <= 0:
                continue
            if kthread:
                kernel += used
            else:
                by_name[comm] = by_name.get(comm, 0) + used
        cores = {k: v / CLK_TCK / wall for k, v in by_name.items()} if wall else {}
        top = sorted(cores.items(), key=lambda kv: -kv[1])[:3]
        return {"others_cores": sum(cores.values()),
                "others_top": [[k, round(v, 3)] for k, v in top],
                "kernel_threads_cores": kernel / CLK_TCK / wall if wall else None,
                "load1": os.getloadavg()[0]}


def wait_quiet(pids, threshold, max_s, window=2.0):
    """Waits (at most max_s) until a window in which the processes other than pids used at
    most `threshold` cores; returns (seconds waited, the last window's figures)."""
    t0 = time.monotonic()
    while True:
        m = OthersMeter(pids).start()
        time.sleep(window)
        r = m.stop()
        waited = time.monotonic() - t0
        if r["others_cores"] <= threshold or waited >= max_s:
            if r["others_cores"] > threshold:
                log(f"  the machine is not quiet after {waited:.0f} s: others use "
                    f"{r['others_cores']:.2f} cores {r['others_top']}")
            return waited, r


def cpu_set(cpus):
    """"0", "0-1", "0,2-3" -> {0, ...}."""
    out = set()
    for part in str(cpus).split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def start_pinned(broker, cpus):
    """Starts a broker with its affinity set from its first instruction (a child inherits it):
    samsad sizes its reactors and the JVM its GC and compiler threads by the CPUs they may use.
    Then every thread is pinned again (pin), in case the broker changed its own."""
    if not cpus:
        return broker.start()
    mine = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpu_set(cpus))
    try:
        broker.start()
    finally:
        os.sched_setaffinity(0, mine)
    pin(broker.pid, cpus)
    return broker


def quietly(quiet, pid, measure):
    """One repetition under the quiet-machine protocol ([quiet] of workloads.toml): waits for
    quiet, runs measure() and returns (its result, the figures of the processes other than pid
    and samsa-perf meanwhile, with `disturbed` and `quiet_wait_s`)."""
    threshold = quiet.get("threshold_cores", 0.10)
    waited, _ = wait_quiet([pid], threshold, quiet.get("max_wait_s", 60))
    others = OthersMeter([pid]).start()
    result = measure()
    q = others.stop()
    q["quiet_wait_s"] = waited
    q["disturbed"] = q["others_cores"] > threshold
    if q["disturbed"]:
        log(f"  disturbed: others used {q['others_cores']:.2f} cores {q['others_top']}")
    return result, q


def commit_label():
    """The checkout's short commit, "-dirty" when tracked files changed."""
    def git(*a):
        return subprocess.run(["git", "-C", str(ROOT), *a], capture_output=True,
                              text=True).stdout.strip()
    return git("rev-parse", "--short", "HEAD") + (
        "-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def pin(pid, cpus):
    """Pins every thread of pid (and the threads it creates later) to cpus."""
    subprocess.run(["taskset", "-a", "-p", "-c", str(cpus), str(pid)], check=True,
                   stdout=subprocess.DEVNULL)


def pause(broker, stop):
    """SIGSTOP (stop=True) or SIGCONT a broker's process group: a broker not under test uses
    no CPU at all while another is measured (a JVM's background threads otherwise do)."""
    if broker.pid:
        try:
            os.killpg(broker.pid, signal.SIGSTOP if stop else signal.SIGCONT)
        except ProcessLookupError:
            pass


# --------------------------------------------------------------------------------------------
# Brokers


class Broker:
    name = "?"
    pid = None
    port = None
    log_path = None
    closing_marker = None  # a log line's text that means "closed a client's connection"

    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def reactor_stalls(self):
        """Loop turns over the stall threshold so far (samsa_reactor_stalls_total; None if the
        broker has no such count)."""
        return None

    def closed_connections(self):
        """Connections the broker closed on a client so far, by its log (None if unknown)."""
        if not self.closing_marker or not self.log_path:
            return None
        try:
            return Path(self.log_path).read_text(errors="replace").count(self.closing_marker)
        except OSError:
            return None


class Samsa(Broker):
    def __init__(self, name, workdir, overrides=(), cpu=None, binary=None):
        self.name, self.dir, self.overrides, self.cpu = name, Path(workdir), list(overrides), cpu
        self.binary = Path(binary) if binary else SAMSAD
        self.proc = None

    def start(self):
        shutil.rmtree(self.dir, ignore_errors=True)
        (self.dir / "data").mkdir(parents=True)
        self.port = free_port()
        cmd = [str(self.binary), "--config", str(HERE / "samsa.properties"),
               "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
               "--override", f"log.dirs={self.dir / 'data'}",
               "--override", f"samsa.admin.socket={self.dir / 'admin.sock'}"]
        self.metrics_port = free_port()
        cmd += ["--override", f"samsa.metrics.listen=127.0.0.1:{self.metrics_port}"]
        for o in self.overrides:
            cmd += ["--override", o]
        if self.cpu is not None:
            cmd = ["taskset", "-c", str(self.cpu)] + cmd
        self.log_path = self.dir / "samsad.log"
        # samsad's warning when it gives up on a connection (bad frame size, over budget).
        self.closing_marker = "; closing"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.pid = self.proc.pid
        deadline = time.monotonic() + 30
        while not port_open(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"samsad did not start (log: {self.dir / 'samsad.log'})")
            time.sleep(0.1)
        log(f"{self.name}: samsad pid {self.pid} on {self.bootstrap()}")
        return self

    def reactor_stalls(self):
        sys.path.insert(0, str(ROOT / "tests" / "integration"))
        from admin_harness import metrics_samples
        try:
            m = metrics_samples(f"127.0.0.1:{self.metrics_port}", timeout=5)
        except OSError:
            return None
        return int(sum(v for k, v in m.items() if k.startswith("samsa_reactor_stalls_total{")))

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def cleanup(self):
        shutil.rmtree(self.dir / "data", ignore_errors=True)


class Kafka(Broker):
    def __init__(self, name, workdir, extra_props=()):
        self.name, self.dir, self.extra = name, Path(workdir), list(extra_props)
        self.proc = None

    def start(self):
        subprocess.run(["bash", str(KAFKA_SH), "fetch"], check=True)
        cp = subprocess.run(["bash", str(KAFKA_SH), "classpath"], check=True, text=True,
                            capture_output=True).stdout.strip()
        shutil.rmtree(self.dir, ignore_errors=True)
        (self.dir / "data").mkdir(parents=True)
        self.port, cport = free_port(), free_port()
        props = (HERE / "kafka-server.properties").read_text()
        props = (props.replace("@PORT@", str(self.port)).replace("@CONTROLLER_PORT@", str(cport))
                 .replace("@DATA@", str(self.dir / "data")))
        for kv in self.extra:
            props += kv + "\n"
        (self.dir / "server.properties").write_text(props)
        (self.dir / "log4j2.properties").write_text(
            "status = warn\nappender.file.type = File\nappender.file.name = FILE\n"
            f"appender.file.fileName = {self.dir / 'server.log'}\n"
            "appender.file.layout.type = PatternLayout\n"
            "appender.file.layout.pattern = [%d] %p %m (%c)%n\n"
            "rootLogger.level = INFO\nrootLogger.appenderRef.file.ref = FILE\n")
        flags = [l.strip() for l in (HERE / "kafka-jvm.flags").read_text().splitlines()
                 if l.strip() and not l.startswith("#")]
        java = ["java", *flags, f"-Dlog4j2.configurationFile={self.dir / 'log4j2.properties'}",
                "-cp", cp]
        uuid = subprocess.run(java + ["kafka.tools.StorageTool", "random-uuid"], check=True,
                              text=True, capture_output=True).stdout.strip().splitlines()[-1]
        subprocess.run(java + ["kafka.tools.StorageTool", "format", "--standalone", "-t", uuid,
                               "-c", str(self.dir / "server.properties")], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.log = open(self.dir / "stdout.log", "w")
        self.proc = subprocess.Popen(java + ["kafka.Kafka", str(self.dir / "server.properties")],
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.pid = self.proc.pid
        deadline = time.monotonic() + 120
        server_log = self.dir / "server.log"
        while True:
            if port_open(self.port) and server_log.exists() and \
                    "Kafka Server started" in server_log.read_text(errors="replace"):
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"Kafka did not start (logs in {self.dir})")
            time.sleep(0.3)
        log(f"{self.name}: Kafka pid {self.pid} on {self.bootstrap()} "
            f"{' '.join(self.extra) if self.extra else '(defaults)'}")
        return self

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def cleanup(self):
        shutil.rmtree(self.dir / "data", ignore_errors=True)


def make_broker(name, workroot, baseline=None):
    """A broker of the config's list; "samsa-baseline" is samsad built from another checkout
    (run --samsad-baseline), to compare two versions of samsa in the same run."""
    if name == "samsa":
        return Samsa(name, Path(workroot) / name)
    if name == "samsa-baseline":
        if not baseline:
            raise ValueError("samsa-baseline needs a samsad binary (--samsad-baseline)")
        return Samsa(name, Path(workroot) / name, binary=baseline)
    if name == "kafka-default":
        return Kafka(name, Path(workroot) / name)
    if name == "kafka-flush":
        return Kafka(name, Path(workroot) / name, ["log.flush.interval.messages=1"])
    raise ValueError(name)


def delete_topics(bootstrap, topics):
    """Deletes topics (so a run's data does not fill the disk); waits for the answer."""
    try:
        from confluent_kafka.admin import AdminClient
    except ImportError:
        log("python3-confluent-kafka missing: topics are not deleted between workloads")
        return
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_topics(list(topics), operation_timeout=30)
    for t, f in futures.items():
        try:
            f.result(60)
        except Exception as e:  # noqa: BLE001 - logged, the run goes on
            log(f"deleting {t}: {e}")


# --------------------------------------------------------------------------------------------
# samsa-perf


def samsa_perf(mode, bootstrap, args, cpu=None, timeout=600):
    """Runs samsa-perf and returns its JSON (with 'exit' added). Progress goes to stderr."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tf:
        out = tf.name
    cmd = [str(SAMSA_PERF), mode, "-b", bootstrap, "--json", out, *[str(a) for a in args]]
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu)] + cmd
    log("  " + " ".join(cmd[cmd.index(str(SAMSA_PERF)):]).replace(str(SAMSA_PERF), "samsa-perf"))
    try:
        p = subprocess.run(cmd, timeout=timeout, stdout=subprocess.PIPE, text=True)
        sys.stderr.write(p.stdout)
        try:
            with open(out) as f:
                res = json.load(f)
        except (OSError, ValueError):
            res = {"ok": False, "error": "no JSON written"}
        res["exit"] = p.returncode
    finally:
        try:
            os.unlink(out)
        except OSError:
            pass
    return res


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("1\n")
