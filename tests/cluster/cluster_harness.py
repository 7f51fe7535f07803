"""What the cluster tests share: a samsad node of a cluster (its config file, process, log),
Metadata helpers on confluent-kafka's AdminClient and on raw requests (tests/clients/kproto.py).

Used by cluster_test.py and groups_test.py (loopback: loopback_cluster) and fault_test.py (network namespaces, powerfs). A node may
run under a command prefix (`ip netns exec NS`) and listen on any address: its listener's host
is where the test connects.
"""

from __future__ import annotations

import datetime
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import kproto  # noqa: E402
from admin_harness import skip_or_fail  # noqa: E402,F401  (skip, or fail under CI=true)
from admin_harness import metrics_samples  # noqa: E402

CONTROLLER_ID = 100
BROKERS = (1, 2, 3)
NOT_LEADER = 6

_prefix = ["[cluster]"]


def set_log_prefix(prefix: str):
    _prefix[0] = prefix


def log(msg: str):
    # The wall clock (UTC, as samsad's log lines) ties the test's steps to the nodes' logs.
    now = time.time()
    stamp = time.strftime("%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}"
    print(f"{_prefix[0]} {stamp} {msg}", flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Node:
    """One samsad of the cluster: `props` become its server.properties (node.id, log.dirs and
    the admin socket added); `wrap` is a command prefix (e.g. `ip netns exec NS`); `data_dir`
    overrides log.dirs (a powerfs mount)."""

    def __init__(self, samsad: str, root: str, node_id: int, props: dict[str, str],
                 wrap: list[str] | None = None, data_dir: str | None = None):
        self.samsad = samsad
        self.id = node_id
        self.wrap = list(wrap or [])
        self.dir = os.path.join(root, f"node-{node_id}")
        os.makedirs(os.path.join(self.dir, "data"), exist_ok=True)
        self.props = dict(props)
        self.props["node.id"] = str(node_id)
        self.props["log.dirs"] = data_dir or os.path.join(self.dir, "data")
        self.props["samsa.admin.socket"] = os.path.join(self.dir, "admin.sock")
        self.config = os.path.join(self.dir, "server.properties")
        self.write_config()
        self.log_path = os.path.join(self.dir, "samsad.log")
        self.proc: subprocess.Popen | None = None
        listener = self.props["listeners"].split(",")[0].split("://", 1)[1]
        host, port = listener.rsplit(":", 1)
        self.host = host or "127.0.0.1"
        self.port = int(port)

    def write_config(self):
        with open(self.config, "w") as f:
            for k, v in self.props.items():
                f.write(f"{k}={v}\n")

    def set_data_dir(self, path: str):
        self.props["log.dirs"] = path
        self.write_config()

    def start(self, label: str | None = None):
        logf = open(self.log_path, "a")
        if label:
            logf.write(f"==== {time.strftime('%H:%M:%S')} {label} ====\n")
            logf.flush()
        self.proc = subprocess.Popen(self.wrap + [self.samsad, "--config", self.config],
                                     stdout=logf, stderr=subprocess.STDOUT)
        logf.close()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_listening(self, timeout: float = 30):
        end = time.time() + timeout
        while time.time() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"node {self.id} exited with {self.proc.returncode}; "
                                   f"log:\n{self.tail()}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"node {self.id} did not listen within {timeout}s:\n{self.tail()}")

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return -9
        return self.proc.returncode if self.proc else 0

    def tail(self, n: int = 30) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def log_text(self) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def unfenced_ms(self) -> list[int]:
        return [int(m.group(1)) for m in
                re.finditer(r"unfenced by the controller (\d+) ms after registering",
                            self.log_text())]


def loopback_cluster(samsad: str, root: str, common: dict[str, str] | None = None,
                     controller_props: dict[str, str] | None = None,
                     broker_props: dict[str, str] | None = None,
                     brokers=BROKERS) -> tuple[Node, dict[int, Node]]:
    """One controller (CONTROLLER_ID) and `brokers` on loopback, each listener on a free port,
    not started: `common` goes to every node, the other two to the controller or to each broker
    (`broker_props` values may be callables, called once per broker: a free port each)."""
    cport = free_port()
    base = {"controller.listener.names": "CONTROLLER",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{cport}"}
    base.update(common or {})
    controller = Node(samsad, root, CONTROLLER_ID,
                      dict(base, **{"process.roles": "controller",
                                    "listeners": f"CONTROLLER://127.0.0.1:{cport}"},
                           **(controller_props or {})))
    nodes = {}
    for b in brokers:
        props = dict(base, **{"process.roles": "broker",
                              "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}"})
        props.update({k: v() if callable(v) else v for k, v in (broker_props or {}).items()})
        nodes[b] = Node(samsad, root, b, props)
    return controller, nodes


def start_all(nodes, timeout: float = 30):
    """Starts every node, then waits for each to listen (combined and controller nodes need
    each other before they listen: none is waited for before all have started)."""
    for n in nodes:
        n.start()
    for n in nodes:
        n.wait_listening(timeout)


def bootstrap_of(brokers: dict[int, Node]) -> str:
    return ",".join(f"{n.host}:{n.port}" for n in brokers.values())


def metadata(admin, timeout=2.0):
    md = admin.list_topics(timeout=timeout)
    return md


def topic_md(via, name: str, partitions: int, timeout: float = 2.0):
    """The topic's metadata once `via`'s broker shows all its partitions (brokers follow the
    metadata log within a fetch of the one that forwarded the change)."""
    end = time.time() + timeout
    while True:
        try:
            t = metadata(via).topics.get(name)
            if t is not None and len(t.partitions) == partitions:
                return t
        except Exception:
            pass
        if time.time() > end:
            raise AssertionError(f"topic {name} with {partitions} partitions not in Metadata")
        time.sleep(0.05)


def wait_for(fn, timeout: float, what: str, step: float = 0.02):
    """fn()'s first truthy value within timeout (an exception counts as not yet: a client
    timing out while nodes start asks again); AssertionError naming `what` otherwise."""
    end = time.time() + timeout
    while time.time() < end:
        try:
            v = fn()
        except Exception:  # noqa: BLE001
            v = None
        if v:
            return v
        time.sleep(step)
    raise AssertionError(f"{what}: not within {timeout}s")


def wait_identical_metadata_logs(voters, timeout: float) -> int:
    """Waits until every voter's __cluster_metadata log is the same, byte for byte (all caught
    up); its size."""
    def same():
        logs = [metadata_log_bytes(v) for v in voters]
        return all(x == logs[0] for x in logs) and len(logs[0])
    size = wait_for(same, timeout, f"the {len(voters)} metadata logs byte-identical")
    log(f"the {len(voters)} voters' metadata logs are identical ({size} bytes)")
    return size


def teardown(nodes, root: str, ok: bool):
    """Stops every live node; the work directory goes on success, stays (and is named)
    otherwise."""
    for n in nodes:
        if n.alive():
            n.stop()
    if ok:
        import shutil
        shutil.rmtree(root, ignore_errors=True)
    else:
        log(f"work directory kept: {root}")


def run_main(main):
    """A cluster test's entry point: main()'s exit code; a failed check is FAIL and exit 1."""
    try:
        sys.exit(main())
    except AssertionError as e:
        log(f"FAIL: {e}")
        sys.exit(1)


def check(cond: bool, what: str):
    if not cond:
        raise AssertionError(what)
    log(f"ok: {what}")


def topic_metadata(node, kp, topic: str, client_id: str, ok=(0,)) -> dict | None:
    """One topic's Metadata v12 answer from node, None if it did not answer or answered an
    error outside `ok`."""
    try:
        conn = kproto.Conn(node.host, node.port, timeout=2)
    except OSError:
        return None
    try:
        conn.send(kp.encode_request(3, 12, 1, client_id, {
            "Topics": [{"Name": topic}], "AllowAutoTopicCreation": False}))
        _, md = kp.decode_response(3, 12, conn.recv(2))
    except (OSError, kproto.Closed):
        return None
    finally:
        conn.close()
    t = md["Topics"][0] if md["Topics"] else None
    return t if t is not None and t["ErrorCode"] in ok else None


def metadata_topic_id(kp, conn, topic: str) -> str:
    conn.send(kp.encode_request(3, 12, 99, "cluster-test", {
        "Topics": [{"Name": topic}], "AllowAutoTopicCreation": False}))
    _, md = kp.decode_response(3, 12, conn.recv(10))
    return md["Topics"][0]["TopicId"]


def leader_epoch(kp, brokers, topic: str, partition: int, only=None) -> int:
    """The partition's leader epoch as Metadata v12 tells it (confluent-kafka does not show it)."""
    for b in (only or list(brokers)):
        try:
            conn = kproto.Conn(brokers[b].host, brokers[b].port, timeout=5)
        except OSError:
            continue
        try:
            conn.send(kp.encode_request(3, 12, 7, "cluster-test", {
                "Topics": [{"Name": topic}], "AllowAutoTopicCreation": False}))
            _, md = kp.decode_response(3, 12, conn.recv(5))
        finally:
            conn.close()
        for pp in md["Topics"][0]["Partitions"]:
            if pp["PartitionIndex"] == partition:
                return pp["LeaderEpoch"]
    return -1


# ---- the controller quorum, read from the controllers' logs and metadata log files ----
ACTIVE_LINE = re.compile(r"^(\S+) info  \[controller\] quorum: node (\d+) is the active "
                         r"controller \(epoch (\d+)", re.M)


def _log_time(stamp: str) -> float:
    return datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def activations(nodes) -> list[tuple[float, int, int]]:
    """(wall time, node, epoch) of every 'is the active controller' line, oldest first."""
    out = []
    for n in nodes:
        for m in ACTIVE_LINE.finditer(n.log_text()):
            out.append((_log_time(m.group(1)), int(m.group(2)), int(m.group(3))))
    return sorted(out)


def current_leader(controllers) -> tuple[int, int]:
    """(node, epoch) of the newest activation among the live controllers; (-1, -1) if none."""
    act = activations([c for c in controllers.values() if c.alive()])
    if not act:
        return -1, -1
    _, node, epoch = max(act, key=lambda a: a[2])
    return node, epoch


def metadata_log_bytes(node) -> bytes:
    """The node's __cluster_metadata log, its segments concatenated."""
    d = os.path.join(node.props["log.dirs"], "__cluster_metadata-0")
    return b"".join(open(os.path.join(d, f), "rb").read()
                    for f in sorted(os.listdir(d)) if f.endswith(".log"))


def metadata_batches(node) -> dict[int, bytes]:
    """The node's __cluster_metadata log as {base offset: the batch's bytes}: logs that keep
    different prefixes (one truncated before a snapshot) compare where they overlap."""
    data, out, pos = metadata_log_bytes(node), {}, 0
    while pos + 12 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        if length <= 0 or pos + 12 + length > len(data):
            break  # a torn tail (a power cut): what follows is not a batch
        out[base] = data[pos:pos + 12 + length]
        pos += 12 + length
    return out


def metrics(node) -> dict[str, float]:
    """Every sample of the node's /metrics (samsa.metrics.listen), keyed by name and labels."""
    return metrics_samples(node.props["samsa.metrics.listen"], timeout=5)


def prometheus(node) -> dict[str, float]:
    """The node's unlabelled Prometheus samples."""
    return {k: v for k, v in metrics(node).items() if "{" not in k}
