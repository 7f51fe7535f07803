#!/usr/bin/python3
"""samsad on the DPDK backend, driven by real clients from the kernel's side of a veth pair.

  dpdk_test.py --samsad PATH [--samsactl PATH] [--pmd af_packet|af_xdp] [--clients kcat,...]
               [--no-group] [--default-offloads]
               [--connections N] [--bulk-mb N] [--crash-rounds N [--resume-check MS]] [--budget S] [--keep]

The test makes a network namespace of its own (samsa-dpdk-<pid>) and, inside it, a veth pair:
the kernel end k0 (10.99.0.1, checksum offload off: a partial checksum would reach DPDK as a
bad one) holds the clients, and samsad drives the other end d0 with DPDK's net_af_packet (or
net_af_xdp) PMD as 10.99.0.2 through its userspace TCP/IP stack. Then, in order:

1. the client drivers of tests/clients (kcat and confluent-kafka by default: create, produce
   every codec, consume byte-identical, seek, a group with a committed offset, the stored
   segments checked, delete), as the uring backend's integration tests run them;
2. a consumer group of two confluent-kafka consumers sharing a 4-partition topic: both get
   partitions, every record is consumed once, byte-identical, and the committed offsets are
   the log end offsets;
3. --connections (default 500) connections at once, each producing one record (Produce v7,
   acks=all) and fetching it back byte-identical (Fetch v11): all finish, the slowest within
   3x the median (+0.5 s), the handshake timed apart;
4. with --attack-syns N: a SYN flood of N half-open connections from forged silent sources,
   new clients still get in after it, an RST storm at the listener and at live connections,
   and SYNs and segments with malformed options or data offsets, while a producer/consumer
   pair keeps making round trips; samsad's RSS grows by at most 64 MiB;
5. with loss 1%, delay 1 ms, reorder 5% on both directions: an idempotent acks=all producer
   writes --bulk-mb MB (default 50) of seeded random values and a consumer reads them back;
   every value must equal what was sent, in order. With sch_netem in the kernel that is
   `tc netem` on k0's egress and, through an ifb device, its ingress. This machine's kernel
   has no sch_netem, so then the path is k0 <-veth-> w0 [dpdk_wire.py] w1 <-veth-> d0, the
   wire applying the same rule per direction in user space; steps 1-4 run on the direct
   pair, and samsad is restarted on the same data once the wire is in place.

samsad must then use under 5% of a core while idle, (with --samsactl) name the backend and
the device in `samsactl status` and export samsa_dpdk_* metrics, stop cleanly on SIGTERM, and its
counters (logged at shutdown) must show the traffic and, after the lossy run, retransmits.
With --crash-rounds N the flows are replaced by tests/integration/crash_restart_test.py over
the DPDK backend: kill -9 under acks=all producers, N times; no acknowledged record lost (with
--resume-check MS, clients living through the kills carry on within MS of each restart).
With --default-offloads the flows are replaced by the veth pair as created (transmit checksum
offload on k0): samsad must log the exact fix at the first SYN, once, and the fix must work.

The namespace (and every process in it) is removed whatever happens; a namespace left by a
run that was killed with SIGKILL is removed by the next run. Needs root, ip, ethtool, tc,
Debian's python3-confluent-kafka, and what each --clients driver needs (run_client_test.py's
checks). A missing tool or client skips (exit 77) unless CI=true, where it fails. Exit codes: 0 pass, 1 fail, 77 skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CLIENTS = os.path.join(ROOT, "tests", "clients")
DEBIAN_PY = "/usr/bin/python3"
SKIP = 77
NS_PREFIX = "samsa-dpdk-"
IMPAIR = dict(loss=1.0, delay_ms=1.0, reorder=5.0)
sys.path.insert(0, HERE)
import admin_harness as h  # noqa: E402
import run_client_test as rct  # noqa: E402  (the drivers' command lines, as the uring tests)
from dpdk_common import DPDK_IP, KERNEL_IP, PORT, Fail, log, sh  # noqa: E402
from dpdk_flows import attack_flow, bulk_flow, group_flow, many_connections  # noqa: E402

DRIVERS = rct.FIRST_FLOW + rct.FULL_FLOW




# ---------------------------------------------------------------------------------------------
# Outer process: prerequisites, the namespace, clean-up.


def missing_prerequisites(a) -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces, raw sockets)"
    for tool in ("ip", "ethtool", "tc"):
        if not shutil.which(tool):
            return f"{tool} not found (scripts/install-deps.sh)"
    # The group, bulk and crash flows use Debian's confluent-kafka; each driver is checked
    # by run_client_test.driver_command inside the namespace.
    r = subprocess.run([DEBIAN_PY, "-c", "import confluent_kafka"], capture_output=True,
                       text=True, timeout=60)
    if r.returncode != 0:
        return f"{DEBIAN_PY} cannot import a client module: {r.stderr.strip().splitlines()[-1]}"
    return None


def remove_stale_namespaces():
    """Namespaces of earlier runs whose process is gone (killed with SIGKILL)."""
    r = sh("ip", "netns", "list", check=False)
    for line in r.stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        if not name.startswith(NS_PREFIX):
            continue
        try:
            os.kill(int(name[len(NS_PREFIX):]), 0)
            continue  # its owner still runs
        except (ValueError, ProcessLookupError):
            pass
        except PermissionError:
            continue
        log(f"removing namespace {name} left by a killed run")
        kill_namespace(name)


def kill_namespace(ns: str):
    # Only processes inside our own namespace: the ones this test started.
    for _ in range(3):
        pids = sh("ip", "netns", "pids", ns, check=False).stdout.split()
        if not pids:
            break
        for p in pids:
            try:
                os.kill(int(p), signal.SIGKILL)
            except (ValueError, ProcessLookupError):
                pass
        time.sleep(0.2)
    sh("ip", "netns", "del", ns, check=False)


def netem_available(ns: str) -> bool:
    r = sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root", "netem",
           "delay", "1ms", check=False)
    if r.returncode != 0:
        return False
    sh("ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", "lo", "root", check=False)
    r = sh("ip", "-n", ns, "link", "add", "ifbprobe", "type", "ifb", check=False)
    if r.returncode != 0:
        return False
    sh("ip", "-n", ns, "link", "del", "ifbprobe", check=False)
    return True


def setup_namespace(ns: str, force_wire: bool, mtu: int = 1500, offloads_off: bool = True) -> str:
    """The namespace with k0 <-veth-> d0; returns the impairment mode: "netem" or "wire"."""
    sh("ip", "netns", "add", ns)
    n = ["ip", "-n", ns]
    sh(*n, "link", "set", "lo", "up")
    mode = "wire" if force_wire or not netem_available(ns) else "netem"
    sh(*n, "link", "add", "k0", "type", "veth", "peer", "name", "d0")
    ifaces = ["k0", "d0"]
    if mode == "netem":
        sh(*n, "link", "add", "ifb0", "type", "ifb")
        sh(*n, "link", "set", "ifb0", "up")
    if mtu != 1500:
        for i in ifaces:
            sh(*n, "link", "set", i, "mtu", str(mtu))
    link_up(n, ns, ifaces, offloads_off)
    return mode


def link_up(n: list[str], ns: str | None, ifaces: list[str], offloads_off: bool = True):
    sh(*n, "addr", "add", f"{KERNEL_IP}/24", "dev", "k0")
    for i in ifaces:
        sh(*n, "link", "set", i, "up")
    # A partial checksum (left for an offload that never happens) would reach DPDK as a bad
    # one; with tx off the kernel also stops sending TSO super-frames.
    for i in ifaces if offloads_off else []:
        sh(*(["ip", "netns", "exec", ns] if ns else []), "ethtool", "-K", i, "tx", "off")


def rewire_through_wire():
    """Inside the namespace, samsad stopped: k0 <-veth-> w0 [dpdk_wire.py] w1 <-veth-> d0.
    (The Python wire is too slow for the many-connections run; the steps before the bulk run
    use the direct pair.)"""
    sh("ip", "link", "del", "k0")  # and its peer d0
    sh("ip", "link", "add", "k0", "type", "veth", "peer", "name", "w0")
    sh("ip", "link", "add", "w1", "type", "veth", "peer", "name", "d0")
    link_up(["ip"], None, ["k0", "w0", "w1", "d0"])


def run_inner(cmd: list[str], budget: float, work: str, keep: bool, t0: float) -> int:
    """Runs the test's inner half (inside its namespace, in a session of its own, killed with
    it if it outlives the budget or this process is ended) and says the verdict; the work
    directory goes on success unless kept. 0, 1 or SKIP."""
    inner = subprocess.Popen(cmd, start_new_session=True)
    try:
        try:
            rc = inner.wait(timeout=budget)
        except subprocess.TimeoutExpired:
            log(f"FAIL: the test did not finish within its budget of {budget:.0f}s")
            rc = 1
    finally:
        if inner.poll() is None:
            try:
                os.killpg(inner.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            inner.wait()
    if rc == SKIP:
        shutil.rmtree(work, ignore_errors=True)
        return SKIP
    log(f"{'PASS' if rc == 0 else 'FAIL'} after {time.monotonic() - t0:.1f}s")
    if rc == 0 and not keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        log(f"kept {work} (samsad.log, the log dir)")
    return 0 if rc == 0 else 1


def outer(a) -> int:
    why = a.unavailable or missing_prerequisites(a)
    if why:
        return h.skip_or_fail(log, why, "the test")
    if not (a.samsad and os.access(a.samsad, os.X_OK)):
        log(f"FAIL: samsad binary not found: {a.samsad!r}")
        return 1
    ns = f"{NS_PREFIX}{os.getpid()}"
    # ctest's timeout and ^C end the test through the finally below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(f"SIGTERM: cleaning up {ns}"))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(f"SIGINT: cleaning up {ns}"))
    remove_stale_namespaces()
    t0 = time.monotonic()
    try:
        mode = setup_namespace(ns, a.force_wire, a.mtu, offloads_off=not a.default_offloads)
        log(f"namespace {ns}: kernel k0 {KERNEL_IP} <-> DPDK d0 {DPDK_IP} ({a.pmd}), "
            f"impairment by {'tc netem (+ifb)' if mode == 'netem' else 'dpdk_wire.py'}")
        work = tempfile.mkdtemp(prefix="samsa-dpdk-")
        cmd = ["ip", "netns", "exec", ns, DEBIAN_PY, os.path.abspath(__file__), "--inner",
               "--mode", mode, "--work", work] + sys.argv[1:]
        return run_inner(cmd, a.budget, work, a.keep, t0)
    except Fail as e:
        log(f"FAIL: {e}")
        return 1
    finally:
        kill_namespace(ns)


# ---------------------------------------------------------------------------------------------
# Inner process: runs inside the namespace; starts samsad and the clients there.


class Samsad(h.SamsadProcess):
    def __init__(self, path: str, work: str, pmd: str, mtu: int = 1500):
        vdev = ("net_af_xdp0,iface=d0,start_queue=0,queue_count=1" if pmd == "af_xdp"
                else "net_af_packet0,iface=d0")
        if mtu > 1500:  # the af_packet ring's frames must hold a jumbo frame
            vdev += ",framesz=9216,blocksz=36864"
        overrides = [
            "node.id=1",
            "samsa.net.backend=dpdk",
            f"samsa.dpdk.eal.args=--no-huge -m 512 --vdev={vdev}",
            f"samsa.dpdk.ip={DPDK_IP}",
            "samsa.dpdk.netmask=255.255.255.0",
            "num.partitions=3",
            "auto.create.topics.enable=true",
            "group.initial.rebalance.delay.ms=0",
            "log.retention.check.interval.ms=500"]
        if mtu != 1500:
            overrides += [f"samsa.dpdk.mtu={mtu}", "samsa.dpdk.mbufs=16383"]
        super().__init__(path, work, overrides, port=PORT, host=DPDK_IP)
        self.log_dir = self.data
        self.log_file = self.log_path

    def start(self, timeout: float = 60):
        os.makedirs(self.log_dir, exist_ok=True)
        log(" ".join(self.cmd))
        try:
            super().start(timeout, interval=0.1)
        except RuntimeError as e:
            raise Fail(str(e))
        log(f"samsad pid {self.proc.pid} serves {DPDK_IP}:{PORT} over DPDK")

    def tail(self, n: int = 30) -> str:
        return super().tail(n, prefix="  | ", skip="opened log")


def driver_commands(clients: list[str], work: str) -> tuple[dict, str | None]:
    """Each client's driver command (run_client_test.py's), or why one cannot run."""
    cmds = {}
    for name in clients:
        cmd, why = rct.driver_command(name, work, None)
        if cmd is None or why:
            return cmds, f"{name}: {why}"
        cmds[name] = cmd
    return cmds, None


def run_driver(name: str, base: list[str], broker: Samsad, timeout: float):
    cmd = base + ["--bootstrap", f"{DPDK_IP}:{PORT}", "--topic-prefix",
                           f"dp{os.getpid()}{name.replace('_', '')}", "--log-dir", broker.log_dir,
                           "--timeout", str(timeout)]
    log(f"driver {name}: {' '.join(cmd)}")
    t = time.monotonic()
    try:
        r = subprocess.run(cmd, timeout=timeout + 20, cwd=CLIENTS)
    except subprocess.TimeoutExpired:
        raise Fail(f"driver {name} still running {timeout + 20:.0f}s after start (killed)")
    if r.returncode != 0:
        raise Fail(f"driver {name} exited with {r.returncode} (its output is above)")
    if not broker.alive():
        raise Fail(f"samsad died during driver {name}:\n" + broker.tail())
    log(f"driver {name} passed in {time.monotonic() - t:.1f}s")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_check(broker: Samsad, settle: float = 2.0, span: float = 5.0, limit_pct: float = 5.0):
    """With no traffic the poll loop must sleep: samsad under limit_pct of one core."""
    time.sleep(settle)
    c0, t0 = cpu_seconds(broker.proc.pid), time.monotonic()
    time.sleep(span)
    pct = 100.0 * (cpu_seconds(broker.proc.pid) - c0) / (time.monotonic() - t0)
    log(f"idle: samsad used {pct:.1f}% of a core over {span:.0f}s")
    if pct >= limit_pct:
        raise Fail(f"idle samsad used {pct:.1f}% of a core (limit {limit_pct}%): the DPDK poll "
                   "loop does not sleep")


def samsactl_check(samsactl: str, broker: Samsad):
    """samsactl status names the backend and the device; the metrics carry the stack's."""
    sock = os.path.join(broker.work, "admin.sock")
    r = subprocess.run([samsactl, "--socket", sock, "--json", "status"], capture_output=True,
                       text=True, timeout=30)
    if r.returncode != 0:
        raise Fail(f"samsactl status exited with {r.returncode}: {r.stderr.strip()}")
    st = json.loads(r.stdout)
    st = st.get("result", st)
    d = st.get("dpdk") or {}
    if st.get("backend") != "dpdk" or d.get("interface") != "d0" or d.get("ip") != DPDK_IP:
        raise Fail(f"samsactl status: backend {st.get('backend')!r}, dpdk {d}")
    r = subprocess.run([samsactl, "--socket", sock, "metrics"], capture_output=True, text=True,
                       timeout=30)
    if r.returncode != 0:
        raise Fail(f"samsactl metrics exited with {r.returncode}: {r.stderr.strip()}")
    got = {l.split()[0]: float(l.split()[1]) for l in r.stdout.splitlines()
           if l.startswith("samsa_") and len(l.split()) == 2}
    for name in ("samsa_dpdk_rx_packets_total", "samsa_dpdk_tx_bytes_total",
                 "samsa_connections_accepted_total", "samsa_network_received_bytes_total"):
        if got.get(name, 0) <= 0:
            raise Fail(f"samsactl metrics: {name} is {got.get(name)}")
    log(f"samsactl: status names {d.get('device')} ({d.get('driver')}) on d0, "
        f"{d.get('rx_queues')}/{d.get('tx_queues')} queues polled by {d.get('polled_by')}; "
        f"metrics: {int(got['samsa_dpdk_rx_packets_total'])} rx packets, "
        f"{int(got['samsa_connections_accepted_total'])} connections accepted")


def counters_check(broker: Samsad, impaired: bool, pmd: str) -> bool:
    """The stack's counters, logged at shutdown, saw the traffic (and the losses), and answers
    went out without a copy into mbufs on af_packet (zero-copy transmit), copied on af_xdp."""
    with open(broker.log_file, "rb") as f:
        lines = [l for l in f.read().decode(errors="replace").splitlines()
                 if "dpdk: rx " in l]
    if not lines:
        log("FAIL: samsad logged no dpdk counters at shutdown")
        return False
    log(f"counters at shutdown: {lines[-1].split('dpdk: ', 1)[1]}")
    m = re.search(r"rx (\d+) packets (\d+) bytes, tx (\d+) packets (\d+) bytes "
                  r"\((\d+) without a copy\).*tcp retransmits (\d+), connections (\d+)", lines[-1])
    if not m:
        log("FAIL: cannot read the dpdk counters line")
        return False
    rx_p, rx_b, tx_p, tx_b, zero_copy, retrans, _conns = map(int, m.groups())
    if min(rx_p, rx_b, tx_p, tx_b) == 0:
        log("FAIL: the dpdk counters show no traffic")
        return False
    if pmd == "af_packet" and zero_copy < tx_b // 4:
        log(f"FAIL: af_packet sent only {zero_copy} of {tx_b} bytes without a copy")
        return False
    if pmd == "af_xdp" and zero_copy != 0:
        log(f"FAIL: af_xdp cannot take frames in pieces, yet {zero_copy} bytes went so")
        return False
    if impaired and retrans == 0:
        log("FAIL: 1% loss on the way out of DPDK, yet the stack counted no retransmit")
        return False
    return True


class Impairment:
    def __init__(self, mode: str, work: str):
        self.mode, self.wire, self.work = mode, None, work

    def start_wire(self):
        if self.mode != "wire":
            return
        self.wire_out = open(os.path.join(self.work, "wire.out"), "w+")
        self.wire = subprocess.Popen(
            [DEBIAN_PY, os.path.join(HERE, "dpdk_wire.py"), "w0", "w1",
             "--loss", str(IMPAIR["loss"]), "--delay-ms", str(IMPAIR["delay_ms"]),
             "--reorder", str(IMPAIR["reorder"])], stdout=self.wire_out)
        deadline = time.monotonic() + 20
        while True:
            self.wire_out.seek(0)
            if "ready" in self.wire_out.read():
                break
            if self.wire.poll() is not None or time.monotonic() > deadline:
                raise Fail("dpdk_wire.py did not start")
            time.sleep(0.05)

    def on(self):
        rule = ["loss", f"{IMPAIR['loss']}%", "delay", f"{IMPAIR['delay_ms']}ms",
                "reorder", f"{IMPAIR['reorder']}%"]
        if self.mode == "netem":
            sh("tc", "qdisc", "add", "dev", "k0", "root", "netem", *rule)
            sh("tc", "qdisc", "add", "dev", "k0", "handle", "ffff:", "ingress")
            sh("tc", "filter", "add", "dev", "k0", "parent", "ffff:", "protocol", "all", "u32",
               "match", "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", "ifb0")
            sh("tc", "qdisc", "add", "dev", "ifb0", "root", "netem", *rule)
        else:
            self.wire.send_signal(signal.SIGUSR1)
        log(f"impairment on, both directions: {' '.join(rule)} ({self.mode})")

    def stop(self) -> dict:
        if not self.wire:
            return {}
        self.wire.send_signal(signal.SIGTERM)
        try:
            self.wire.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.wire.kill()
        self.wire_out.seek(0)
        lines = [l for l in self.wire_out.read().splitlines() if l.startswith("{")]
        return json.loads(lines[-1]) if lines else {}


def crash_inner(a) -> int:
    """tests/integration/crash_restart_test.py over this backend: kill -9 under acks=all
    producers, restart, every acknowledged record still there."""
    vdev = ("net_af_xdp0,iface=d0,start_queue=0,queue_count=1" if a.pmd == "af_xdp"
            else "net_af_packet0,iface=d0")
    cmd = [DEBIAN_PY, os.path.join(HERE, "crash_restart_test.py"), "--samsad", a.samsad,
           "--rounds", str(a.crash_rounds), "--host", DPDK_IP,
           "--override", "samsa.net.backend=dpdk",
           "--override", f"samsa.dpdk.eal.args=--no-huge -m 512 --vdev={vdev}",
           "--override", f"samsa.dpdk.ip={DPDK_IP}"]
    if a.resume_check:
        cmd += ["--resume-check", str(a.resume_check)]
    if a.forget_connections:
        cmd.append("--forget-connections")
    if a.kill_during_start:
        cmd.append("--kill-during-start")
    log("crash test over DPDK: " + " ".join(cmd))
    try:
        return subprocess.run(cmd, timeout=a.budget - 20).returncode
    except subprocess.TimeoutExpired:
        log("FAIL: the crash test did not finish in time")
        return 1


def offloads_inner(a) -> int:
    """The veth pair as `ip link add` leaves it (transmit checksum offload on k0): samsad must
    name the problem and the exact command at the first SYN, and that command must fix it."""
    import socket

    def connects(timeout: float) -> bool:
        try:
            with socket.create_connection((DPDK_IP, PORT), timeout=timeout):
                return True
        except OSError:
            return False

    broker = Samsad(a.samsad, a.work, a.pmd, a.mtu)
    ok = False
    try:
        os.makedirs(broker.log_dir, exist_ok=True)
        h.SamsadProcess.start(broker, wait=False)  # its port cannot answer yet: that is the point
        end = time.time() + 60
        while time.time() < end and "listening on PLAINTEXT" not in broker.tail(200):
            time.sleep(0.1)
        log(f"k0's offloads: {sh('ethtool', '-k', 'k0').stdout.count(': on')} on "
            f"(tx-checksumming: {'on' if 'tx-checksumming: on' in sh('ethtool', '-k', 'k0').stdout else 'off'})")
        first = connects(3)
        line = next((l for l in broker.tail(400).splitlines() if "unfilled TCP checksums" in l),
                    "")
        log(f"a connect with the default offloads: {'connected' if first else 'no answer'}; "
            f"samsad said: {line.split('] ', 1)[-1] if line else 'nothing'}")
        fix = line.split("Run: ", 1)[1].strip() if "Run: " in line else ""
        if first:
            raise Fail("connected although k0 offloads transmit checksums: the check is moot")
        if fix != "ethtool -K k0 tx off":
            raise Fail(f"samsad did not name the fix (wanted 'ethtool -K k0 tx off'): {line!r}")
        if broker.tail(400).count("unfilled TCP checksums") != 1:
            raise Fail("samsad said it more than once")
        sh(*fix.split())
        if not connects(5):
            raise Fail(f"still no connection after `{fix}`")
        log(f"after `{fix}` a connect succeeds")
        ok = True
    except Fail as e:
        log(f"FAIL: {e}")
    finally:
        problem = broker.stop()
        if problem:
            log(f"FAIL: {problem}")
            ok = False
    if ok:
        counters = re.findall(r"\(bad checksum (\d+)\)", broker.tail(50))
        if not counters or int(counters[-1]) < 1:
            log(f"FAIL: the shutdown counters show no bad checksum: {counters}")
            ok = False
        else:
            log(f"bad checksums counted: {counters[-1]} (samsa_dpdk_rx_bad_checksum_total)")
    if not ok:
        log("samsad log tail:\n" + broker.tail())
    return 0 if ok else 1


def jumbo_check(broker: Samsad, mtu: int) -> bool:
    """The frames really were jumbo: samsad says so at start, and its receive counters at
    shutdown average well above a standard frame (the bulk run's data came in large frames)."""
    with open(broker.log_file, "rb") as f:
        text = f.read().decode(errors="replace")
    up = re.search(r"dpdk: \S+ \(net_af_packet on d0\) up: .* mtu (\d+),", text)
    rx = re.findall(r"dpdk: rx (\d+) packets (\d+) bytes", text)
    if not up or int(up.group(1)) != mtu:
        log(f"FAIL: samsad did not bring d0 up with MTU {mtu}: {up and up.group(0)}")
        return False
    if not rx:
        log("FAIL: no dpdk counters in samsad's log")
        return False
    packets, nbytes = (int(x) for x in rx[-1])
    avg = nbytes / max(packets, 1)
    log(f"jumbo: MTU {up.group(1)}, received {packets} frames averaging {avg:.0f} bytes")
    if avg < 3000:
        log(f"FAIL: received frames average {avg:.0f} bytes: not jumbo")
        return False
    return True


def refused_start(samsad: str, work: str, vdev: str) -> tuple[int, str]:
    d = os.path.join(work, "refused")
    os.makedirs(d, exist_ok=True)
    cmd = [samsad, "--override", f"listeners=PLAINTEXT://{DPDK_IP}:{PORT}",
           "--override", f"log.dirs={os.path.join(d, 'data')}",
           "--override", f"samsa.admin.socket={os.path.join(d, 'admin.sock')}",
           "--override", "samsa.net.backend=dpdk",
           "--override", f"samsa.dpdk.eal.args=--no-huge -m 256 --vdev={vdev}",
           "--override", f"samsa.dpdk.ip={DPDK_IP}"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr


def refused_start_check(samsad: str, work: str, pmd: str):
    """A device the EAL cannot probe: samsad exits 1 with the EAL's reason, never a crash
    (the shutdown of a half-started broker has no backend to tidy). On af_xdp, a queue the
    interface does not have is refused as that, with how many it has (not as "in use")."""
    rc, out = refused_start(samsad, work, "net_af_packet0,iface=nosuch0")
    if rc != 1 or ("nosuch0" not in out and "net_af_packet0" not in out):
        raise Fail(f"a device that does not exist: samsad exit {rc} (want 1 and the "
                   f"EAL's reason):\n{out[-800:]}")
    log("a device that does not exist: samsad exits 1 and says why")
    if pmd != "af_xdp":
        return
    have = len([q for q in os.listdir("/sys/class/net/d0/queues") if q.startswith("rx-")])
    rc, out = refused_start(samsad, work,
                            f"net_af_xdp0,iface=d0,start_queue={have},queue_count=1")
    want = f"no such queue: start_queue={have} but d0 has {have} receive queue"
    if rc != 1 or want not in out:
        raise Fail(f"af_xdp on a queue d0 lacks: samsad exit {rc} (want 1 and {want!r}):\n"
                   f"{out[-800:]}")
    log(f"af_xdp on queue {have} of d0 (which has {have}): refused as a missing queue")


def inner(a) -> int:
    if a.crash_rounds:
        return crash_inner(a)
    if a.default_offloads:
        return offloads_inner(a)
    work = a.work
    broker = Samsad(a.samsad, work, a.pmd, a.mtu)
    imp = Impairment(a.mode, work)
    ok = False
    clients = [c for c in a.clients.split(",") if c]
    cmds, why = driver_commands(clients, work)
    if why:
        return h.skip_or_fail(log, why)
    try:
        refused_start_check(a.samsad, work, a.pmd)
        broker.start()
        for name in clients:
            run_driver(name, cmds[name], broker, a.driver_timeout)
        if not a.no_group:
            t = time.monotonic()
            group_flow(60)
            log(f"group flow passed in {time.monotonic() - t:.1f}s")
            if not broker.alive():
                raise Fail("samsad died during the group flow:\n" + broker.tail())
        if a.connections:
            t = time.monotonic()
            many_connections(a.connections, 120)
            log(f"{a.connections} connections passed in {time.monotonic() - t:.1f}s")
            if not broker.alive():
                raise Fail("samsad died during the many-connections run:\n" + broker.tail())
        if a.attack_syns:
            t = time.monotonic()
            attack_flow(broker, a.attack_syns, 150)
            log(f"attack passed in {time.monotonic() - t:.1f}s")
            if not broker.alive():
                raise Fail("samsad died during the attack:\n" + broker.tail())
        if a.bulk_mb > 0:
            if a.mtu > 1500:
                log("jumbo frames: the bulk run goes without impairment (the wire program and "
                    "the loss test are for standard frames)")
            elif a.mode == "wire":
                log("restarting samsad with dpdk_wire.py between k0 and d0")
                problem = broker.stop()
                if problem:
                    raise Fail(problem + "\n" + broker.tail())
                rewire_through_wire()
                imp.start_wire()
                broker.start()
            if a.mtu <= 1500:
                imp.on()
            res = bulk_flow(a.bulk_mb, a.bulk_timeout)
            log(f"bulk {'under loss/delay/reorder' if a.mtu <= 1500 else 'with jumbo frames'}: "
                f"{json.dumps(res)}")
            if not broker.alive():
                raise Fail("samsad died during the bulk run:\n" + broker.tail())
        idle_check(broker)
        if a.samsactl:
            samsactl_check(a.samsactl, broker)
        ok = True
    except Fail as e:
        log(f"FAIL: {e}")
    except Exception as e:  # a client library error is a failure with its message
        log(f"FAIL: {type(e).__name__}: {e}")
    finally:
        wire = imp.stop()
        if wire:
            log(f"wire counters: {json.dumps(wire)}")
        problem = broker.stop()
        if problem:
            log(f"FAIL: {problem}\n{broker.tail()}")
            ok = False
        elif ok:
            ok = counters_check(broker, impaired=a.bulk_mb > 0 and a.mtu <= 1500, pmd=a.pmd)
            if ok and a.mtu > 1500:
                ok = jumbo_check(broker, a.mtu)
        if not ok:
            log("samsad log tail:\n" + broker.tail())
    return 0 if ok else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samsad")
    ap.add_argument("--pmd", choices=["af_packet", "af_xdp"], default="af_packet")
    ap.add_argument("--clients", default="kcat,confluent_kafka",
                    help="comma-separated drivers of tests/clients (run_client_test.py's "
                    "names): " + ",".join(DRIVERS))
    ap.add_argument("--no-group", action="store_true", help="skip the two-member group flow")
    ap.add_argument("--attack-syns", type=int, default=0,
                    help="SYN flood of this many half-open connections, RST storm, malformed "
                    "options, while a client keeps producing (0: none)")
    ap.add_argument("--connections", type=int, default=500,
                    help="concurrent connections that each produce and fetch a record (0: none)")
    ap.add_argument("--bulk-mb", type=int, default=50, help="MB under loss (0: no bulk run)")
    ap.add_argument("--bulk-timeout", type=float, default=150)
    ap.add_argument("--driver-timeout", type=float, default=90)
    ap.add_argument("--budget", type=float, default=420, help="hard limit of the whole run (s)")
    ap.add_argument("--force-wire", action="store_true",
                    help="use dpdk_wire.py even where tc netem exists")
    ap.add_argument("--crash-rounds", type=int, default=0,
                    help="instead of the flows: crash_restart_test.py with this many kill -9 "
                    "rounds over the DPDK backend")
    ap.add_argument("--resume-check", type=int, default=0, metavar="MS",
                    help="with --crash-rounds: an idempotent producer and an idle consumer live "
                    "through the kills and must carry on within MS of each restart")
    ap.add_argument("--default-offloads", action="store_true",
                    help="instead of the flows: the veth's offloads as created (transmit "
                    "checksum offload on k0); samsad must name the fix, and the fix must work")
    ap.add_argument("--kill-during-start", action="store_true",
                    help="with --crash-rounds: each round also kills samsad during start-up")
    ap.add_argument("--forget-connections", action="store_true",
                    help="with --resume-check: the stack's connection journal is deleted before "
                    "each restart; the clients must then miss the bound (the check's teeth)")
    ap.add_argument("--samsactl", help="also check samsactl status and metrics")
    ap.add_argument("--unavailable", help="the DPDK backend was not built: this reason")
    ap.add_argument("--mtu", type=int, default=1500,
                    help="MTU of the veth pair and samsa.dpdk.mtu (>1500: jumbo frames, "
                    "af_packet only; the bulk run then goes without impairment)")
    ap.add_argument("--keep", action="store_true", help="keep the work dir")
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--mode", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    a = ap.parse_args()
    for c in a.clients.split(","):
        if c and c not in DRIVERS:
            ap.error(f"--clients: unknown driver {c}")
    return inner(a) if a.inner else outer(a)


if __name__ == "__main__":
    sys.exit(main())
