"""The fault test's cluster: 1 controller and 3 brokers, each samsad in its network namespace
(fault_net.py) with its data directory on its own powerfs mount (tests/durability/powerfs), and
what the fault loop asks of it: Metadata snapshots, kill -9 and restart, a power cut of all.

powerfs runs with `--entries dirsync`, as samsad_powerloss.py runs samsad: a new file or
directory survives a cut only once its parent directory was fsynced (what POSIX promises, the
strictest of its modes), so a broker that forgot a directory fsync loses the entry here too.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "durability", "powerfs"))
import powerloss  # noqa: E402  (PowerFs, ctl: the power-loss driver's mount handling)
from cluster_harness import BROKERS, CONTROLLER_ID, Node, kproto  # noqa: E402
from fault_net import BROKER_PORT, CONTROLLER_PORT, ip_of  # noqa: E402

ENTRIES = "dirsync"


class Member:
    """A node and its powerfs mount (backing dir kept across mounts; a fresh mount point each
    time, since a mount that stayed busy after a cut is only lazily detached)."""

    def __init__(self, a, work: str, node: Node):
        self.a = a
        self.node = node
        self.work = work
        self.backing = os.path.join(work, "backing", str(node.id))
        os.makedirs(self.backing)
        self.sock = os.path.join(work, f"pfs-{node.id}.sock")
        self.plog = os.path.join(work, f"powerfs-{node.id}.log")
        self.mounts = 0
        self.fs = None
        self.mnt = None

    def mount(self):
        self.mounts += 1
        self.mnt = os.path.join(self.work, "mnt", f"{self.node.id}-{self.mounts}")
        os.makedirs(self.mnt)
        self.fs = powerloss.PowerFs(self.a.powerfs, self.backing, self.mnt, self.sock, self.plog,
                                    ENTRIES)
        if self.a.sync_delay_ms and self.node.id in self.a.slow_disks:
            reply = powerloss.ctl(self.sock, f"sync-delay {self.a.sync_delay_ms}")
            if not reply.startswith("ok"):
                raise RuntimeError(f"powerfs sync-delay: {reply}")
        self.node.set_data_dir(os.path.join(self.mnt, "data"))

    def unmount(self) -> int:
        """powerfs's exit status (3: the FUSE connection was aborted, seen after cuts)."""
        fs, self.fs = self.fs, None
        try:
            return fs.unmount()
        except powerloss.Failure as e:
            if "did not exit after unmount" not in str(e):
                raise
            return -1  # killed; the backing dir was final at the cut

    def cut(self, mode: str) -> dict:
        reply = powerloss.ctl(self.sock, "cut " + mode)
        if not reply.startswith("ok cut"):
            raise RuntimeError(f"node {self.node.id}: cut {mode}: {reply}")
        return dict(f.split("=", 1) for f in reply.split()[2:] if "=" in f)

    def stats(self) -> dict:
        reply = powerloss.ctl(self.sock, "stats")
        return dict(f.split("=", 1) for f in reply.split()[1:] if "=" in f)


class Cluster:
    def __init__(self, a, work: str, net):
        self.a = a
        self.net = net
        self.topic = a.topic
        common = {"controller.listener.names": "CONTROLLER",
                  "controller.quorum.bootstrap.servers":
                      f"{ip_of(CONTROLLER_ID)}:{CONTROLLER_PORT}",
                  "samsa.reactors": "1",
                  "replica.lag.time.max.ms": str(a.lag_ms),
                  "offsets.topic.replication.factor": "3",
                  "group.initial.rebalance.delay.ms": "0"}
        broker_extra = {}
        if a.memory_acks:
            broker_extra = {"samsa.testing.hooks": "true",
                            "samsa.testing.replica.ack.from.memory": "true"}
        for kv in a.override:
            k, v = kv.split("=", 1)
            broker_extra[k] = v
        self.members: dict[int, Member] = {}
        nodes = [(CONTROLLER_ID, dict(common, **{
            "process.roles": "controller",
            "listeners": f"CONTROLLER://{ip_of(CONTROLLER_ID)}:{CONTROLLER_PORT}"}))]
        for b in BROKERS:
            nodes.append((b, dict(common, **broker_extra, **{
                "process.roles": "broker",
                "listeners": f"PLAINTEXT://{ip_of(b)}:{BROKER_PORT}"})))
        for i, props in nodes:
            node = Node(a.samsad, work, i, props, wrap=net.wrap(i))
            self.members[i] = Member(a, work, node)
        self.bootstrap = ",".join(f"{ip_of(b)}:{BROKER_PORT}" for b in BROKERS)
        self.kp = kproto.Kafka()

    @property
    def brokers(self) -> dict[int, Node]:
        return {b: self.members[b].node for b in BROKERS}

    def node(self, i: int) -> Node:
        return self.members[i].node

    def start(self, ids, label: str):
        for i in ids:
            self.node(i).start(label)
        for i in ids:
            self.node(i).wait_listening(60)

    def boot(self):
        for m in self.members.values():
            m.mount()
        self.start([CONTROLLER_ID], "first start")
        self.start(list(BROKERS), "first start")

    def create_topic(self, partitions: int, configs: dict[str, str]):
        """Once the 3 brokers are in Metadata. An AdminClient bootstrapped earlier can stall:
        a broker that is not unfenced yet answers Metadata naming itself ControllerId but
        listing only the others, and librdkafka's admin then waits for that unknown broker
        until its next metadata refresh (minutes)."""
        from confluent_kafka.admin import AdminClient, NewTopic
        conf = {"bootstrap.servers": self.bootstrap, "log_level": 2}
        if os.environ.get("SAMSA_FAULT_ADMIN_DEBUG"):  # e.g. admin,metadata: to stderr
            conf["debug"] = os.environ["SAMSA_FAULT_ADMIN_DEBUG"]
        admin = AdminClient(conf)
        fs = admin.create_topics([NewTopic(self.topic, num_partitions=partitions,
                                           replication_factor=3, config=configs)])
        fs[self.topic].result(timeout=30)

    def unknown_keys(self) -> list[str]:
        """Keys this samsad warned it does not know (it ignores them)."""
        text = self.node(BROKERS[0]).log_text()
        return sorted({line.split("unknown config key ", 1)[1].split()[0]
                       for line in text.splitlines() if "unknown config key " in line})

    # ---- Metadata ----
    def snapshot(self, timeout: float = 2.0):
        """(live broker ids, {partition: (leader, isr tuple)}) from a raw Metadata v12 of the
        first reachable broker (killed and isolated ones last), or None if none answered in
        time. Raw requests, not librdkafka's, so that a dead broker costs one refused
        connection, not a client's retry schedule."""
        order = sorted(BROKERS, key=lambda b: (not self.node(b).alive() or b in self.net.down,
                                                b))
        end = time.time() + timeout
        for b in order:
            left = end - time.time()
            if left <= 0:
                break
            n = self.node(b)
            try:
                conn = kproto.Conn(n.host, n.port, timeout=min(0.5, left))
            except OSError:
                continue
            try:
                conn.send(self.kp.encode_request(3, 12, 1, "fault-test", {
                    "Topics": [{"Name": self.topic}], "AllowAutoTopicCreation": False}))
                _, md = self.kp.decode_response(3, 12, conn.recv(min(0.5, max(0.05, left))))
            except (OSError, kproto.Closed):
                continue
            finally:
                conn.close()
            live = {x["NodeId"] for x in md["Brokers"]}
            t = md["Topics"][0] if md["Topics"] else None
            if t is None or t["ErrorCode"] != 0:
                return live, {}
            return live, {p["PartitionIndex"]: (p["LeaderId"], tuple(sorted(p["IsrNodes"])))
                          for p in t["Partitions"]}
        return None

    def wait_for(self, pred, timeout: float, step: float = 0.05):
        """The first snapshot pred accepts, or None after timeout."""
        end = time.time() + timeout
        while time.time() < end:
            s = self.snapshot(min(2.0, max(0.2, end - time.time())))
            if s is not None and pred(*s):
                return s
            time.sleep(step)
        return None

    def healthy(self, live, parts) -> bool:
        return (live == set(BROKERS) and len(parts) == self.a.partitions and
                all(leader in BROKERS and isr == BROKERS for leader, isr in parts.values()))

    # ---- faults ----
    def kill(self, i: int):
        self.node(i).kill9()

    def power_cut(self, modes: dict[int, str], rng, aim: list[int], synced: list[int],
                  tries: int = 200):
        """The power of all four nodes goes at one moment: every samsad is frozen (SIGSTOP: no
        write, fsync or answer is issued after this), every mount is cut at once (a thread
        each; unsynced writes dropped, torn or reordered as `modes` say, and every later change
        fails), then every samsad is killed (SIGKILL).

        samsad syncs within a millisecond or so of writing, so a moment picked blindly mostly
        finds nothing unsynced. The moment is chosen the way a fault injector aims: freeze,
        look at powerfs's pending bytes, and unless a broker in `aim` has some while those in
        `synced` have none (what they wrote is durable, so likely acknowledged), let them run
        again for a few milliseconds and retry (up to `tries` times). Returns (cut replies,
        unsynced bytes per node at the cut, tries)."""
        live = [m.node for m in self.members.values() if m.node.alive()]
        for attempt in range(1, tries + 1):
            for n in live:
                n.proc.send_signal(signal.SIGSTOP)
            pending = self.pending()
            if attempt == tries or (any(pending.get(b, 0) > 0 for b in aim) and
                                    all(pending.get(b, 0) == 0 for b in synced)):
                break
            for n in live:
                n.proc.send_signal(signal.SIGCONT)
            time.sleep(rng.uniform(0.001, 0.02))
        results: dict[int, dict] = {}
        errors: list[str] = []

        def cut(i):
            try:
                results[i] = self.members[i].cut(modes[i])
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(str(e))

        threads = [threading.Thread(target=cut, args=(i,)) for i in self.members]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for n in live:
            n.proc.send_signal(signal.SIGKILL)
        for n in live:
            n.proc.wait()
        if errors:
            raise RuntimeError("; ".join(errors))
        return results, pending, attempt

    def remount_all(self) -> dict[int, int]:
        """After a cut: every mount is a dead disk; unmount them all (in parallel) and mount
        afresh on the same backing dirs. Returns powerfs's exit statuses."""
        rcs: dict[int, int] = {}

        def unmount(i):
            rcs[i] = self.members[i].unmount()

        threads = [threading.Thread(target=unmount, args=(i,)) for i in self.members]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for m in self.members.values():
            m.mount()
        return rcs

    def pending(self) -> dict[int, int]:
        """Unsynced bytes powerfs holds per node right now."""
        out = {}
        for i, m in self.members.items():
            try:
                out[i] = int(m.stats().get("pending_bytes", -1))
            except OSError:
                out[i] = -1
        return out

    def shutdown(self):
        for m in self.members.values():
            n = m.node
            if n.alive():
                n.proc.kill()
                n.proc.wait()
        for m in self.members.values():
            if m.fs is not None:
                try:
                    m.unmount()
                except Exception:  # noqa: BLE001 - powerloss.cleanup() detaches what is left
                    pass
        powerloss.cleanup()
