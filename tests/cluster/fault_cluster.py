"""The fault test's cluster: 3 controllers (a KRaft quorum; --controllers 1: one) and 3 brokers
(the brokers' ids are a.brokers when set: reassign_test.py runs 4),
or (--combined) 3 nodes that are voters and brokers at once (process.roles=broker,controller),
each samsad in its network namespace
(fault_net.py) with its data directory on its own powerfs mount (tests/durability/powerfs), and
what the fault loop asks of it: Metadata snapshots, the active controller (from the controllers'
logs), kill -9 and restart, a power cut of all, topics created through the run and the checks
after it (every such topic once; the controllers' metadata logs identical).

powerfs runs with `--entries dirsync`, as samsad_powerloss.py runs samsad: a new file or
directory survives a cut only once its parent directory was fsynced (what POSIX promises, the
strictest of its modes), so a broker that forgot a directory fsync loses the entry here too.

--secure: nothing between the nodes in clear. Each broker replicates over an INTERNAL listener
(port 9094) and every node speaks to the quorum over CONTROLLER (9093), both SASL_SSL with PLAIN
logins as User:node (as combined_test.py's secure_settings()); each node has its own certificate
(SAN: its namespace's IP only, signed by one CA), so a peer's IP is verified against the node it
meant to reach. The clients stay on PLAINTEXT (9092, the first listener: every raw request of
the test goes there). The authorizer is on (StandardAuthorizer, super.users=User:node and
User:ANONYMOUS, the PLAINTEXT clients): every request is authorized, and allowed. check_secure()
reads the logs and probes the secured ports at the end.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import struct
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "durability", "powerfs"))
import powerloss  # noqa: E402  (PowerFs, ctl: the power-loss driver's mount handling)
import cluster_harness as ch  # noqa: E402
from cluster_harness import BROKERS, Node, kproto  # noqa: E402
from fault_net import BROKER_PORT, CONTROLLER_PORT, INTERNAL_PORT, ip_of  # noqa: E402

ENTRIES = "dirsync"
CLUSTER_ID = "fLtQ3xk9TnKc0Wm7aZr2Bw"  # every node formats with it (samsa.cluster.id)
# --secure: the nodes' PLAIN login (the JAAS config holds the client's and the server's side).
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="node" '
        'password="node-secret" user_node="node-secret";')


def secure_settings(certs: str, ids) -> tuple[dict[str, str], dict[int, dict[str, str]]]:
    """(what every node gets, each node's keystore): a CA and one certificate per node, its
    SAN the node's IP (tests/integration/security_certs.py, openssl)."""
    import security_certs  # tests/integration (on the path through cluster_harness)
    os.makedirs(certs, exist_ok=True)
    ca = security_certs.make_ca(certs)
    own = {}
    for i in ids:
        _, _, keystore = security_certs.make_cert(
            certs, f"node-{i}", f"/CN=samsa-node-{i}/O=samsa", ca, san=f"IP:{ip_of(i)}",
            serial=i)
        own[i] = {"ssl.keystore.location": keystore}
    common = {"listener.security.protocol.map":
              "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL,CONTROLLER:SASL_SSL",
              "ssl.truststore.location": ca[1],
              "sasl.enabled.mechanisms": "PLAIN",
              "listener.name.controller.plain.sasl.jaas.config": JAAS,
              "sasl.mechanism.controller.protocol": "PLAIN",
              "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:node;User:ANONYMOUS"}
    return common, own


BROKER_SECURE = {"inter.broker.listener.name": "INTERNAL",
                 "listener.name.internal.plain.sasl.jaas.config": JAAS,
                 "sasl.mechanism.inter.broker.protocol": "PLAIN"}


def broker_ids(a) -> tuple[int, ...]:
    """The brokers: a.brokers if the test sets it (reassign_test.py runs 4), else BROKERS."""
    return tuple(getattr(a, "brokers", None) or BROKERS)


def controller_ids(n: int, combined: bool = False, brokers=BROKERS) -> tuple[int, ...]:
    """The voters' node ids: separate controllers from 100, or the brokers themselves."""
    return tuple(brokers) if combined else tuple(range(100, 100 + n))


def node_ids(a) -> tuple[int, ...]:
    """Every samsad of the cluster, each in its own namespace."""
    return tuple(sorted(set(controller_ids(a.controllers, a.combined, broker_ids(a))) |
                        set(broker_ids(a))))


def plaintext_probe(host: str, port: int) -> bytes:
    """The first bytes answered to a plaintext ApiVersions v0 (b"" if none, or closed)."""
    frame = struct.pack(">hhi", 18, 0, 1) + struct.pack(">h", 10) + b"fault-test"
    with socket.create_connection((host, port), timeout=5) as s:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        s.settimeout(5)
        try:
            return s.recv(16)
        except (ConnectionResetError, socket.timeout):
            return b""


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
        self.broker_ids = broker_ids(a)
        self.controllers = controller_ids(a.controllers, a.combined, self.broker_ids)
        quorum = {"controller.listener.names": "CONTROLLER", "samsa.cluster.id": CLUSTER_ID,
                  "controller.quorum.bootstrap.servers": ",".join(
                      f"{ip_of(c)}:{CONTROLLER_PORT}" for c in self.controllers)}
        if len(self.controllers) > 1:
            quorum["controller.quorum.voters"] = ",".join(
                f"{c}@{ip_of(c)}:{CONTROLLER_PORT}" for c in self.controllers)
        common = dict(quorum, **{"samsa.reactors": "1",
                                 "replica.lag.time.max.ms": str(a.lag_ms),
                                 "offsets.topic.replication.factor": "3",
                                 "group.initial.rebalance.delay.ms": "0"})
        broker_extra = {}
        if a.memory_acks:
            broker_extra = {"samsa.testing.hooks": "true",
                            "samsa.testing.replica.ack.from.memory": "true"}
        for kv in a.override:
            k, v = kv.split("=", 1)
            broker_extra[k] = v
        self.secure = bool(getattr(a, "secure", False))
        # The port brokers replicate over (what the slow fault throttles).
        self.replication_port = INTERNAL_PORT if self.secure else BROKER_PORT
        own: dict[int, dict[str, str]] = {}
        if self.secure:
            sec_common, own = secure_settings(os.path.join(work, "certs"), node_ids(a))
            common.update(sec_common)
            broker_extra = dict(BROKER_SECURE, **broker_extra)
        self.members: dict[int, Member] = {}
        nodes = [(c, dict(common, **own.get(c, {}), **{
            "process.roles": "controller",
            "listeners": f"CONTROLLER://{ip_of(c)}:{CONTROLLER_PORT}"}))
            for c in self.controllers if c not in self.broker_ids]
        for b in self.broker_ids:
            # A combined node's first listener is its clients' (Node connects to it).
            listeners = f"PLAINTEXT://{ip_of(b)}:{BROKER_PORT}" + (
                f",INTERNAL://{ip_of(b)}:{INTERNAL_PORT}" if self.secure else "") + (
                f",CONTROLLER://{ip_of(b)}:{CONTROLLER_PORT}" if b in self.controllers else "")
            nodes.append((b, dict(common, **own.get(b, {}), **broker_extra, **{
                "process.roles": "broker,controller" if b in self.controllers else "broker",
                "listeners": listeners})))
        for i, props in nodes:
            node = Node(a.samsad, work, i, props, wrap=net.wrap(i))
            self.members[i] = Member(a, work, node)
        self.bootstrap = ",".join(f"{ip_of(b)}:{BROKER_PORT}" for b in self.broker_ids)
        self.kp = kproto.Kafka()

    @property
    def brokers(self) -> dict[int, Node]:
        return {b: self.members[b].node for b in self.broker_ids}

    def only_controllers(self) -> list[int]:
        """The controllers that are not brokers too (none in combined mode)."""
        return [c for c in self.controllers if c not in self.broker_ids]

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
        self.start(self.only_controllers(), "first start")
        # Combined nodes listen to clients only once a quorum of them has a leader: all start
        # before any is waited for.
        self.start(list(self.broker_ids), "first start")

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
        text = self.node(self.broker_ids[0]).log_text()
        return sorted({line.split("unknown config key ", 1)[1].split()[0]
                       for line in text.splitlines() if "unknown config key " in line})

    # ---- Metadata ----
    def snapshot(self, timeout: float = 2.0):
        """(live broker ids, {partition: (leader, isr tuple)}) from a raw Metadata v12 of the
        first reachable broker (killed and isolated ones last), or None if none answered in
        time. Raw requests, not librdkafka's, so that a dead broker costs one refused
        connection, not a client's retry schedule."""
        order = sorted(self.broker_ids,
                       key=lambda b: (not self.node(b).alive() or b in self.net.down, b))
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
        return (live == set(self.broker_ids) and len(parts) == self.a.partitions and
                all(leader in self.broker_ids and isr == self.broker_ids
                    for leader, isr in parts.values()))

    # ---- the controller quorum ----
    def controller_nodes(self) -> dict[int, Node]:
        return {c: self.members[c].node for c in self.controllers}

    def active_controller(self) -> tuple[int, int]:
        """(node, epoch) of the newest activation among the live controllers ((-1, -1): none
        yet). An isolated one is left out: its last line is its own, older epoch."""
        return ch.current_leader({c: n for c, n in self.controller_nodes().items()
                                  if c not in self.net.down})

    def wait_new_active(self, epoch: int, since: float, timeout: float):
        """(wall time, node, epoch) of the first activation after `epoch` logged since `since`,
        or None after timeout."""
        end = time.time() + timeout
        while time.time() < end:
            new = [x for x in ch.activations(self.controller_nodes().values())
                   if x[2] > epoch and x[0] >= since - 0.5]
            if new:
                return new[0]
            time.sleep(0.02)
        return None

    def admin(self):
        if getattr(self, "_admin", None) is None:
            from confluent_kafka.admin import AdminClient
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 2})
        return self._admin

    def create_named_topic(self, name: str, timeout: float) -> str | None:
        """Creates `name` (1 partition, replication factor 3; 2 in combined mode, where a
        controller fault also takes a broker and placement uses live brokers only), asking
        again while controllers fail over. None once it exists: TOPIC_ALREADY_EXISTS after an attempt that failed means
        that attempt committed. Otherwise the last error."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import NewTopic
        end, last, tries = time.time() + timeout, "not asked", 0
        while time.time() < end:
            tries += 1
            if tries > 1:
                # A new client, as an operator's next kafka-topics would be: librdkafka keeps
                # sending admin requests to the broker its last Metadata named as controller,
                # which may be the one the fault killed (seen: 5 attempts timed out on it).
                self._admin = None
            try:
                rf = 2 if self.a.combined else 3
                fs = self.admin().create_topics([NewTopic(name, 1, rf)], request_timeout=10,
                                                operation_timeout=10)
                fs[name].result(timeout=15)
                return None
            except KafkaException as e:
                err = e.args[0] if e.args else None
                if err is not None and err.name() == "TOPIC_ALREADY_EXISTS":
                    return None
                last = f"{err.name() if err is not None else e} (attempt {tries})"
            except Exception as e:  # noqa: BLE001 - a client-side time-out: ask again
                last = f"{type(e).__name__}: {e} (attempt {tries})"
            time.sleep(0.2)
        return last

    def topic_ids(self, b: int) -> dict[str, list[str]] | None:
        """Every topic broker b's Metadata lists, name -> its topic ids (one, unless a name is
        listed twice); None if it did not answer."""
        n = self.node(b)
        try:
            conn = kproto.Conn(n.host, n.port, timeout=5)
        except OSError:
            return None
        try:
            conn.send(self.kp.encode_request(3, 12, 2, "fault-test", {
                "Topics": None, "AllowAutoTopicCreation": False}))
            _, md = self.kp.decode_response(3, 12, conn.recv(5))
        except (OSError, kproto.Closed):
            return None
        finally:
            conn.close()
        out: dict[str, list[str]] = {}
        for t in md["Topics"]:
            out.setdefault(t["Name"], []).append(str(t["TopicId"]))
        return out

    def check_topics(self, created: list[str], timeout: float = 20) -> list[str]:
        """Problems with the topics created through the run: each must be in every broker's
        Metadata exactly once, under one topic id on all of them."""
        end, problems = time.time() + timeout, ["not checked"]
        while time.time() < end and problems:
            problems = []
            views = {b: self.topic_ids(b) for b in self.broker_ids}
            for name in created:
                ids = set()
                for b, view in views.items():
                    got = (view or {}).get(name, [])
                    if len(got) != 1:
                        problems.append(f"topic {name} listed {len(got)} times by broker {b}")
                    ids.update(got)
                if len(ids) > 1:
                    problems.append(f"topic {name} has ids {sorted(ids)} across the brokers")
            if problems:
                time.sleep(0.5)
        return problems

    def compare_metadata_logs(self, timeout: float = 30) -> tuple[list[str], str]:
        """(problems, summary): once the controllers have caught up, their metadata logs must
        hold the same batches, byte for byte, wherever they overlap, and end at one offset."""
        if len(self.controllers) < 2:
            return [], "one controller: nothing to compare"
        end = time.time() + timeout
        while True:
            logs = {c: ch.metadata_batches(n) for c, n in self.controller_nodes().items()}
            first = min(self.controllers)
            problems = []
            for c, batches in logs.items():
                if c == first:
                    continue
                common = set(batches) & set(logs[first])
                diff = sorted(o for o in common if batches[o] != logs[first][o])
                if diff:
                    problems.append(f"controllers {first} and {c} differ from offset {diff[0]} "
                                    f"({len(diff)} batches)")
                if max(batches, default=-1) != max(logs[first], default=-1):
                    problems.append(f"controller {c} ends at batch {max(batches, default=-1)}, "
                                    f"{first} at {max(logs[first], default=-1)}")
            if not problems or time.time() > end:
                sizes = {c: sum(map(len, b.values())) for c, b in logs.items()}
                return problems, (f"{len(logs[first])} batches, bytes per controller {sizes}")
            time.sleep(0.5)

    # ---- --secure ----
    def secured_ports(self, i: int) -> list[tuple[str, int]]:
        """(listener, port) of node i's SASL_SSL listeners."""
        out = [("INTERNAL", INTERNAL_PORT)] if i in self.broker_ids else []
        return out + ([("CONTROLLER", CONTROLLER_PORT)] if i in self.controllers else [])

    def check_secure(self) -> tuple[list[str], list[str]]:
        """(problems, lines to log): nothing went between the nodes in clear.
        - no node logged a failed SASL login, nor a login without TLS;
        - each broker logged in over TLS to the INTERNAL listener of both other brokers (each
          led partitions the other two followed) and to the CONTROLLER listener of a
          controller; each controller to the CONTROLLER listener of another voter;
        - the authorizer is on: a raw DescribeAcls to each live broker's client port answers
          0, not SECURITY_DISABLED (User:ANONYMOUS is a super user);
        - a plaintext ApiVersions to each live node's INTERNAL and CONTROLLER ports gets no
          Kafka answer (a TLS alert, or the connection closed)."""
        problems, lines = [], []
        ok_line = re.compile(r"connection to (\S+):(\d+): logged in as node with PLAIN over TLS$",
                             re.M)
        by_addr = {(ip_of(i), p): (i, name) for i in self.members
                   for name, p in self.secured_ports(i)}
        for i, m in sorted(self.members.items()):
            text = m.node.log_text()
            failed = re.findall(r"^.*SASL login as \S+ failed.*$", text, re.M)
            if failed:
                problems.append(f"node {i} logged {len(failed)} failed SASL logins, e.g. "
                                f"{failed[0].strip()}")
            clear = [x for x in re.findall(r"^.*: logged in as .*$", text, re.M)
                     if not x.endswith(" over TLS")]
            if clear:
                problems.append(f"node {i} logged in without TLS: {clear[0].strip()}")
            reached: dict[str, set[int]] = {"INTERNAL": set(), "CONTROLLER": set()}
            logins = 0
            for mm in ok_line.finditer(text):
                logins += 1
                peer = by_addr.get((mm.group(1), int(mm.group(2))))
                if peer is None:
                    problems.append(f"node {i} logged in to {mm.group(1)}:{mm.group(2)}, no "
                                    f"node's secured listener")
                elif peer[0] != i:
                    reached[peer[1]].add(peer[0])
            want = {"CONTROLLER": (set(self.controllers) - {i}, "any")}
            if i in self.broker_ids:
                want["INTERNAL"] = (set(self.broker_ids) - {i}, "all")
            for name, (peers, rule) in want.items():
                if not peers:
                    continue  # --controllers 1: the one controller has no peer
                got = reached[name] & peers
                if (rule == "all" and got != peers) or not got:
                    problems.append(f"node {i} logged in over TLS to {name} of nodes "
                                    f"{sorted(got)} only (expected {rule} of {sorted(peers)})")
            lines.append(f"node {i}: {logins} logins as node with PLAIN over TLS, to INTERNAL of "
                         f"{sorted(reached['INTERNAL'])}, CONTROLLER of "
                         f"{sorted(reached['CONTROLLER'])}; failed {len(failed)}")
        for b, n in sorted(self.brokers.items()):
            if not n.alive() or b in self.net.down:
                continue
            err = self.describe_acls_error(b)
            if err != 0:
                problems.append(f"broker {b}: DescribeAcls answered {err}, not 0" + (
                    " (SECURITY_DISABLED: the authorizer is off)" if err == 54 else ""))
            lines.append(f"broker {b}: DescribeAcls on the client port -> error {err}"
                         + (" (the authorizer is on; User:ANONYMOUS a super user)"
                            if err == 0 else ""))
        for i, m in sorted(self.members.items()):
            if not m.node.alive() or i in self.net.down:
                continue
            for name, port in self.secured_ports(i):
                try:
                    got = plaintext_probe(ip_of(i), port)
                except OSError as e:
                    problems.append(f"{name} of node {i} ({ip_of(i)}:{port}): {e}")
                    continue
                # A TLS server answers a non-TLS byte stream with an alert (0x15) or closes.
                if got and got[:1] != b"\x15":
                    problems.append(f"{name} of node {i} ({ip_of(i)}:{port}) answered a "
                                    f"plaintext ApiVersions with {got!r}")
                what = ("closed, nothing answered" if not got else "a TLS alert"
                        if got[:1] == b"\x15" else "AN ANSWER IN CLEAR")
                lines.append(f"node {i} {name} ({ip_of(i)}:{port}): plaintext ApiVersions -> "
                             f"{what} {got[:8]!r}")
        return problems, lines

    def describe_acls_error(self, b: int):
        """The ErrorCode of a raw DescribeAcls v3 (every ACL) to broker b's client port; a
        string if it did not answer."""
        n = self.node(b)
        try:
            conn = kproto.Conn(n.host, n.port, timeout=5)
        except OSError as e:
            return f"no connection ({e})"
        try:
            conn.send(self.kp.encode_request(29, 3, 3, "fault-test", {
                "ResourceTypeFilter": 1, "ResourceNameFilter": None, "PatternTypeFilter": 1,
                "PrincipalFilter": None, "HostFilter": None, "Operation": 1,
                "PermissionType": 1}))
            _, body = self.kp.decode_response(29, 3, conn.recv(5))
            return body["ErrorCode"]
        except (OSError, kproto.Closed) as e:
            return f"no answer ({type(e).__name__})"
        finally:
            conn.close()

    # ---- faults ----
    def kill(self, i: int):
        self.node(i).kill9()

    def power_cut(self, modes: dict[int, str], rng, aim: list[int], synced: list[int],
                  tries: int = 200):
        """The power of every node goes at one moment: every samsad is frozen (SIGSTOP: no
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
