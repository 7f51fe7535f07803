#!/usr/bin/env python3
"""Combined mode on three nodes (issue 19): each samsad is a voter of the controller quorum and
a broker at once (process.roles=broker,controller, controller.quorum.voters naming all three),
on loopback. Checks, with real clients:

- the three elect a leader, register as brokers and serve Metadata;
- kafka-metadata-quorum describe --status/--replication name that leader and the three voters
  (each a voter, none an observer), and samsactl quorum agrees;
- an idempotent acks=all producer (librdkafka) writes to a 6-partition RF=3 topic through:
  kill -9 of the active controller's node (a broker too: its partitions fail over), a
  controlled shutdown (SIGTERM) of the active controller's node, and kill -9 of all three at
  once, then every node restarted (power cuts that drop unsynced writes: the fault test's
  `--combined` run, cluster.faults.combined);
- after each controller fault a new controller commits (time printed) and a topic created
  then exists afterwards exactly once;
- every acknowledged record is read back at its offset, once, in order; the three metadata
  logs are byte-identical.

CI size: 3 kills; --full: 10.

--secure: the same with nothing between the nodes in clear (issue 22): replication on an
INTERNAL listener and the quorum on CONTROLLER, both SASL_SSL (PLAIN logins from the JAAS
config, certificates made by openssl here), clients on PLAINTEXT; every node's log must show
no failed login, and a plaintext request to either secured listener is refused. ACLs are on
(StandardAuthorizer, super.users=User:node): the clients' principal (User:ANONYMOUS) is granted
what the run needs by ACLs made over INTERNAL as User:node; at the end, a topic creation and
an ACL creation it is not granted are refused through every node, which checks that a change
forwarded to the controller is authorized as the client (EnvelopeRequest), not as the node
that forwards it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_harness as ch  # noqa: E402
from admin_harness import kafka_tools_available, tool  # noqa: E402

NODES = (1, 2, 3)
CLUSTER_ID = "c0mb1nedR4uUoVw0ZyLm2A"
TOPIC = "c-data"
PARTITIONS = 6


class Producer(threading.Thread):
    """Idempotent acks=all, keyed values; every acknowledgement kept as (partition, offset)."""

    def __init__(self, bootstrap: str):
        super().__init__(daemon=True)
        from confluent_kafka import Producer as P
        self.p = P({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                    "enable.idempotence": True, "message.timeout.ms": 120000})
        self.stop, self.sent, self.errors = False, 0, []
        self.acked: dict[tuple[int, int], bytes] = {}
        self.implicit: list[tuple[int, bytes]] = []  # acknowledged without an offset
        self.ack_times: list[float] = []
        self.lock = threading.Lock()

    def on_ack(self, err, msg):
        with self.lock:
            if err:
                self.errors.append(str(err))
                return
            if msg.offset() is None or msg.offset() < 0:
                self.implicit.append((msg.partition(), msg.value()))
            else:
                self.acked[(msg.partition(), msg.offset())] = msg.value()
            self.ack_times.append(time.time())

    def first_ack_after(self, t: float) -> float | None:
        with self.lock:
            later = [a for a in self.ack_times if a > t]
        return min(later) - t if later else None

    def run(self):
        while not self.stop:
            try:
                self.p.produce(TOPIC, f"v{self.sent}".encode(), key=f"k{self.sent}".encode(),
                               on_delivery=self.on_ack)
                self.sent += 1
            except BufferError:
                pass
            self.p.poll(0.003)
        self.p.flush(150)


def read_back(bootstrap: str, ends: dict[int, int]) -> dict[int, list[tuple[int, bytes]]]:
    """Every partition from offset 0 up to `ends` (its high watermark)."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "combined-check",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
    done = {p for p in range(PARTITIONS) if ends[p] == 0}
    end = time.time() + 120
    while len(done) < PARTITIONS and time.time() < end:
        m = c.poll(1.0)
        if m is None:
            continue
        if m.error():
            if m.error().code() == -191:  # _PARTITION_EOF
                if m.offset() >= ends[m.partition()]:
                    done.add(m.partition())
            continue
        out[m.partition()].append((m.offset(), m.value()))
    c.close()
    ch.check(len(done) == PARTITIONS, "every partition read back to its high watermark")
    return out


def create_topic(admin, name: str, rf: int, created: list[str]):
    """Creates `name` (1 partition), asking again while a controller fails over; an attempt
    that timed out but committed shows as TOPIC_ALREADY_EXISTS on the next."""
    from confluent_kafka.admin import NewTopic

    def attempt():
        try:
            admin.create_topics([NewTopic(name, 1, rf)])[name].result(30)
        except Exception as e:  # noqa: BLE001  (KafkaException: asked again below)
            if "TOPIC_ALREADY_EXISTS" not in str(e):
                raise
        return True
    ch.wait_for(attempt, 60, f"topic {name} created")
    created.append(name)


def isr_full(admin) -> bool:
    t = admin.list_topics(TOPIC, timeout=5).topics[TOPIC]
    return len(t.partitions) == PARTITIONS and all(
        len(p.isrs) == len(NODES) and p.leader >= 0 for p in t.partitions.values())


def check_quorum_tools(nodes, samsactl: str | None, leader: int):
    via = nodes[NODES[0]]
    rc, out = tool("kafka-metadata-quorum", "--bootstrap-server", f"{via.host}:{via.port}",
                   "describe", "--status")
    ch.log("describe --status:\n" + out)
    ch.check(rc == 0 and re.search(rf"LeaderId:\s+{leader}\b", out) is not None,
             f"describe --status names leader {leader}")
    voters_line = out.split("CurrentVoters:")[1].split("\n")[0]
    ch.check(all(f'"id": {n}' in voters_line for n in NODES),
             "describe --status lists the three nodes as voters")
    rc, out = tool("kafka-metadata-quorum", "--bootstrap-server", f"{via.host}:{via.port}",
                   "describe", "--replication")
    ch.log("describe --replication:\n" + out)
    rows = {int(l.split()[0]): l.split()[-1] for l in out.splitlines()[1:] if l.strip()}
    ch.check(rc == 0 and rows.get(leader) == "Leader", "--replication: the leader's row")
    ch.check(sorted(rows) == list(NODES) and
             all(rows[n] in ("Leader", "Follower") for n in NODES),
             "--replication: three voters, no observer")
    if not samsactl:
        return
    for n in NODES:
        r = subprocess.run([samsactl, "--socket", nodes[n].props["samsa.admin.socket"], "--json",
                            "quorum"], capture_output=True, text=True, timeout=30)
        j = json.loads(r.stdout) if r.returncode == 0 else {}
        node = j.get("node", {})
        ch.check(node.get("leader_id") == leader and node.get("voter") is True and
                 j.get("process_roles") == "broker,controller",
                 f"samsactl quorum on node {n}: a voter following leader {leader}")


def controller_fault(nodes, admin, producer, kind: str, k: int, created: list[str]) -> dict:
    """kill -9 or SIGTERM of the active controller's node: the times to a new controller, to
    the producer's next ack, then a topic created and the node restarted."""
    leader, epoch = ch.current_leader(nodes)
    victim = nodes[leader]
    t0 = time.time()
    if kind == "kill":
        victim.kill9()
    else:
        rc = victim.stop()
        ch.check(rc == 0, f"node {leader} stopped cleanly on SIGTERM")
    new = ch.wait_for(lambda: [x for x in ch.activations(nodes.values())
                            if x[2] > epoch and x[0] >= t0 - 0.5], 30,
                   f"a new active controller after the {kind} of node {leader}")
    failover = new[0][0] - t0
    resume = ch.wait_for(lambda: producer.first_ack_after(t0), 60,
                      f"the producer's first ack after the {kind} of node {leader}")
    ch.log(f"{kind} {k + 1}: node {leader} (epoch {epoch}); node {new[0][1]} active in epoch "
           f"{new[0][2]} after {failover * 1000:.0f} ms; producer's next ack after "
           f"{resume * 1000:.0f} ms")
    # Two live brokers meanwhile: replication factor 2.
    create_topic(admin, f"c-after-{kind}-{k}", 2, created)
    victim.start(f"restart after {kind} {k + 1}")
    victim.wait_listening(60)
    ch.wait_for(lambda: isr_full(admin), 60, "every partition's ISR whole again")
    return {"kind": kind, "failover": failover, "resume": resume}


def kill_all(nodes, admin, producer, created: list[str]) -> float:
    t0 = time.time()
    for n in nodes.values():
        n.proc.kill()
    for n in nodes.values():
        n.proc.wait()
    ch.log("kill -9 of every node at once")
    for n in nodes.values():
        n.start("restart after kill -9 of every node")
    for n in nodes.values():
        n.wait_listening(60)
    resume = ch.wait_for(lambda: producer.first_ack_after(t0), 90,
                      "the producer's first ack after kill -9 of every node")
    ch.log(f"every node listening again, producer's next ack after {resume * 1000:.0f} ms")
    create_topic(admin, "c-after-killall", 3, created)
    ch.wait_for(lambda: isr_full(admin), 60, "every partition's ISR whole again")
    return resume


def verify(producer, bootstrap: str, admin):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "combined-ends"})
    ends = {p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
            for p in range(PARTITIONS)}
    c.close()
    got = read_back(bootstrap, ends)
    # librdkafka may acknowledge an idempotent batch without an offset (its implicit ack, when
    # a later batch's answer proves an earlier attempt was written): such a record must be in
    # its partition, at whatever offset.
    at = {p: set(recs) for p, recs in got.items()}
    values = {p: {v for _, v in recs} for p, recs in got.items()}
    lost = [k for k, v in producer.acked.items() if (k[1], v) not in at[k[0]]]
    lost += [(p, v) for p, v in producer.implicit if v not in values[p]]
    ch.check(not lost, f"every acknowledged record read back at its offset "
             f"({len(producer.acked)} acknowledged, {len(producer.implicit)} without an offset; "
             f"lost: {lost[:5]})")
    values = [v for recs in got.values() for _, v in recs]
    ch.check(len(values) == len(set(values)), f"no record twice ({len(values)} read)")
    for p, recs in got.items():
        seq = [int(v[1:]) for _, v in recs]
        ch.check(seq == sorted(seq), f"partition {p}: records in the order they were sent")


JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="node" '
        'password="node-secret" user_node="node-secret";')


def secure_settings(root: str) -> dict[str, str]:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                    "integration"))
    import security_certs as certs
    ca = certs.make_ca(root)
    _, _, keystore = certs.make_cert(root, "node", "/CN=samsa-node/O=samsa", ca,
                                     san="IP:127.0.0.1,DNS:localhost")
    return {"listener.security.protocol.map":
            "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL,CONTROLLER:SASL_SSL",
            "inter.broker.listener.name": "INTERNAL",
            "ssl.keystore.location": keystore, "ssl.truststore.location": ca[1],
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.internal.plain.sasl.jaas.config": JAAS,
            "listener.name.controller.plain.sasl.jaas.config": JAAS,
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "sasl.mechanism.controller.protocol": "PLAIN",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:node"}


def acls_tool(secure: dict[str, str], bootstrap: str, *args: str, as_node: bool = True):
    """kafka-acls, as User:node over a node's INTERNAL SASL_SSL listener (as_node), or as
    User:ANONYMOUS over PLAINTEXT."""
    from admin_harness import TOOLS, tool
    TOOLS.setdefault("kafka-acls", "org.apache.kafka.tools.AclCommand")
    extra: list[str] = []
    if as_node:
        conf = os.path.join(os.path.dirname(secure["ssl.keystore.location"]), "node-client.properties")
        client_jaas = JAAS.replace(' user_node="node-secret"', '')
        truststore = secure["ssl.truststore.location"]
        with open(conf, "w") as f:
            f.write("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
                    f"sasl.jaas.config={client_jaas}\nssl.truststore.type=PEM\n"
                    f"ssl.truststore.location={truststore}\n")
        extra = ["--command-config", conf]
    return tool("kafka-acls", "--bootstrap-server", bootstrap, *extra, *args, timeout=90)


def grant_clients(secure: dict[str, str], iports: dict[int, int]) -> int:
    """What User:ANONYMOUS (the PLAINTEXT clients) needs, made as User:node over INTERNAL, and
    a DENY the end of the run checks."""
    at = f"127.0.0.1:{iports[1]}"
    anon = ["--allow-principal", "User:ANONYMOUS"]
    runs = [
        [*anon, "--topic", "*", "--group", "*", "--operation", "All"],
        # Not CREATE on the cluster: it would allow every topic whatever the topic ACLs say.
        [*anon, "--cluster", "--operation", "Describe", "--operation", "IdempotentWrite",
         "--operation", "DescribeConfigs"],
        ["--deny-principal", "User:ANONYMOUS", "--topic", "denied-",
         "--resource-pattern-type", "prefixed", "--operation", "Create"],
    ]
    for args in runs:
        rc, out = acls_tool(secure, at, "--add", *args)
        ch.check(rc == 0 and "Adding ACLs" in out, f"kafka-acls --add {' '.join(args[2:4])} as "
                 f"User:node over INTERNAL (exit {rc}; {out[-300:]})")
    return 2 + 3 + 1


def check_acls(secure: dict[str, str], nodes, iports: dict[int, int], count: int):
    """Every node holds the same ACLs; what User:ANONYMOUS is not granted is refused through
    every node (each forwards to the controller, which must authorize the client, not the
    node that forwards)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic
    for n in nodes:
        rc, out = acls_tool(secure, f"127.0.0.1:{iports[n]}", "--list")
        entries = len(re.findall(r"\(principal=User:ANONYMOUS", out))
        ch.check(rc == 0 and entries == count,
                 f"node {n} lists the {count} ACLs ({entries}; exit {rc})")
    for n, node in nodes.items():
        admin = AdminClient({"bootstrap.servers": f"{node.host}:{node.port}"})
        err = None
        try:
            admin.create_topics([NewTopic(f"denied-{n}", 1, 3)])[f"denied-{n}"].result(30)
        except KafkaException as e:
            err = e.args[0].name()
        ch.check(err == "TOPIC_AUTHORIZATION_FAILED",
                 f"through node {n}: User:ANONYMOUS creating denied-{n} is refused ({err})")
    node = nodes[2]
    rc, out = acls_tool(secure, f"{node.host}:{node.port}", "--add", "--allow-principal",
                        "User:ANONYMOUS", "--topic", "x", "--operation", "Read", as_node=False)
    ch.check("ClusterAuthorizationException" in out,
             f"through node 2: User:ANONYMOUS creating an ACL is refused ({out[-200:]})")


def check_secure(nodes, iports: dict[int, int], cports: dict[int, int]):
    """Nothing in clear between the nodes: every login succeeded, and a plaintext ApiVersions
    to an INTERNAL or CONTROLLER port gets no Kafka answer."""
    import socket
    import struct
    logs = {n: node.log_text() for n, node in nodes.items()}
    failed = [n for n, t in logs.items() if "SASL login as" in t and "failed" in t]
    ch.check(not failed, f"no node logged a failed SASL login ({failed})")
    for n, t in logs.items():
        for name, ports in (("INTERNAL", iports), ("CONTROLLER", cports)):
            peers = {m for m in nodes if m != n and
                     f"127.0.0.1:{ports[m]}: logged in as node with PLAIN over TLS" in t}
            ch.check(peers, f"node {n} logged in to {name} of nodes {sorted(peers)} over TLS")
    for name, ports in (("INTERNAL", iports), ("CONTROLLER", cports)):
        port = ports[1]
        frame = struct.pack(">hhi", 18, 0, 1) + struct.pack(">h", 4) + b"test"
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(struct.pack(">i", len(frame)) + frame)
            s.settimeout(5)
            try:
                got = s.recv(4)
            except (ConnectionResetError, socket.timeout):
                got = b""
        # A TLS server answers a non-TLS byte stream with an alert (0x15 0x03) or closes.
        ch.check(not got or got[:1] == b"\x15",
                 f"{name} on node 1 answers plaintext with no Kafka response ({got!r})")


def check_wrong_password(node):
    """A node whose own password is wrong gets no further than the login: it says so in its
    log, and comes back once the password is right again."""
    key = "listener.name.controller.plain.sasl.jaas.config"
    node.stop()
    good = node.props[key]
    node.props[key] = good.replace('password="node-secret"', 'password="wrong"')
    node.write_config()
    node.start("wrong password")
    try:
        ch.wait_for(lambda: "SASL login as node failed" in node.log_text(), 20,
                    "node 3 logs its failed login")
        ch.check(True, "node 3 with a wrong password: 'SASL login as node failed' in its log")
    finally:
        # It never finishes its start-up (it cannot reach the quorum); SIGTERM still stops it.
        t = time.monotonic()
        rc = node.stop()
        took = time.monotonic() - t
        ch.check(rc == 0 and took < 5,
                 f"SIGTERM during its start-up: exit {rc} after {took:.1f}s")
        node.props[key] = good
        node.write_config()
    node.start("right password again")
    node.wait_listening(60)
    ch.check(True, "node 3 with its password right again serves clients")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samsad", required=True)
    ap.add_argument("--samsactl")
    ap.add_argument("--full", action="store_true", help="10 kills instead of 3")
    ap.add_argument("--secure", action="store_true",
                    help="inter-broker and controller listeners over SASL_SSL")
    a = ap.parse_args()
    ch.set_log_prefix("[combined]")
    why = kafka_tools_available()
    if why:
        return ch.skip_or_fail(ch.log, why, "the test")
    kills = 10 if a.full else 3
    root = tempfile.mkdtemp(prefix="samsa-combined-")
    cports = {n: ch.free_port() for n in NODES}
    voters = ",".join(f"{n}@127.0.0.1:{cports[n]}" for n in NODES)
    secure = secure_settings(root) if a.secure else {}
    iports = {n: ch.free_port() for n in NODES}
    nodes = {n: ch.Node(a.samsad, root, n, {
        "process.roles": "broker,controller", "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": voters, "samsa.cluster.id": CLUSTER_ID,
        "listeners": f"PLAINTEXT://127.0.0.1:{ch.free_port()},"
                     + (f"INTERNAL://127.0.0.1:{iports[n]}," if a.secure else "")
                     + f"CONTROLLER://127.0.0.1:{cports[n]}",
        "samsa.reactors": "1", "min.insync.replicas": "2",
        "offsets.topic.replication.factor": "3", **secure}) for n in NODES}
    producer = None
    ok = False
    try:
        for n in nodes.values():
            n.start()
        for n in nodes.values():
            n.wait_listening(60)
        leader, epoch = ch.wait_for(lambda: ch.current_leader(nodes)[0] >= 0 and
                                 ch.current_leader(nodes), 30, "a first leader")
        ch.log(f"node {leader} leads epoch {epoch}")
        acl_count = grant_clients(secure, iports) if a.secure else 0
        bootstrap = ",".join(f"{n.host}:{n.port}" for n in nodes.values())
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": bootstrap})
        ch.wait_for(lambda: len(admin.list_topics(timeout=5).brokers) == len(NODES), 30,
                 "every node registered as a broker")
        ch.check(True, "the three combined nodes are brokers in Metadata")
        check_quorum_tools(nodes, a.samsactl, leader)
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
        ch.wait_for(lambda: isr_full(admin), 30, f"{TOPIC}: every replica in the ISR")
        leaders = {p.leader for p in admin.list_topics(TOPIC, timeout=5).topics[
            TOPIC].partitions.values()}
        ch.check(leaders == set(NODES), "the topic's leaders spread over the three nodes")

        producer = Producer(bootstrap)
        producer.start()
        ch.wait_for(lambda: len(producer.acked) > 200, 30, "the producer's first acknowledgements")
        created: list[str] = []
        faults = []
        for k in range(kills):
            faults.append(controller_fault(nodes, admin, producer, "kill", k, created))
            time.sleep(0.5)
        faults.append(controller_fault(nodes, admin, producer, "sigterm", 0, created))
        cut_resume = kill_all(nodes, admin, producer, created)
        time.sleep(1)
        producer.stop = True
        producer.join(180)
        for kind in ("kill", "sigterm"):
            f = [x for x in faults if x["kind"] == kind]
            ch.log(f"{kind} of the active controller's node ({len(f)}): new controller median "
                   f"{statistics.median(x['failover'] for x in f) * 1000:.0f} ms, max "
                   f"{max(x['failover'] for x in f) * 1000:.0f} ms; producer's next ack median "
                   f"{statistics.median(x['resume'] for x in f) * 1000:.0f} ms, max "
                   f"{max(x['resume'] for x in f) * 1000:.0f} ms")
        ch.log(f"kill -9 of all three: producer's next ack after {cut_resume * 1000:.0f} ms")
        ch.log(f"producer: {producer.sent} sent, {len(producer.acked)} acknowledged, "
               f"{len(producer.errors)} failed")
        ch.check(not producer.errors, f"no produce failed ({producer.errors[:3]})")
        verify(producer, bootstrap, admin)
        names = [t for t in admin.list_topics(timeout=10).topics if t.startswith("c-after-")]
        ch.check(sorted(names) == sorted(created),
                 "every topic created after a controller fault exists, once")
        ch.wait_identical_metadata_logs(list(nodes.values()), 30)
        if a.secure:
            check_secure(nodes, iports, cports)
            check_acls(secure, nodes, iports, acl_count)
            check_wrong_password(nodes[3])
        ok = True
    finally:
        if producer:
            producer.stop = True
        ch.teardown(nodes.values(), root, ok)
    ch.log("PASS")
    return 0


if __name__ == "__main__":
    ch.run_main(main)
