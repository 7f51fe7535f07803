"""The traffic flows of the DPDK integration test (see dpdk_test.py for the whole run): a
consumer group, many connections at once, the bad-input attacks (SYN flood, RST storm,
malformed TCP options) and the bulk transfer under loss and reordering. Each raises Fail."""

from __future__ import annotations

import collections
import hashlib
import os
import random
import socket
import sys
import time

import admin_harness as h
from dpdk_common import (CLIENTS, DPDK_IP, KERNEL_IP, PORT, Fail, bootstrap_conf, create_topic,
                         log, sh)


def group_flow(timeout: float):
    """Two consumers of one group share a 4-partition topic; each record is consumed once."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    deadline = time.monotonic() + timeout
    topic, group = f"dpgroup{os.getpid()}", f"dpgroup{os.getpid()}-g"
    create_topic(topic, 4)
    conf = dict(bootstrap_conf(), **{"group.id": group, "enable.auto.commit": False,
                                     "auto.offset.reset": "earliest",
                                     "session.timeout.ms": 10000,
                                     "heartbeat.interval.ms": 500,
                                     "enable.partition.eof": False})
    assigned = {0: set(), 1: set()}
    consumers = []
    for idx in (0, 1):
        c = Consumer(conf)
        c.subscribe([topic], on_assign=lambda _c, parts, i=idx: assigned[i].update(
            tp.partition for tp in parts), on_revoke=lambda _c, parts, i=idx: assigned[i].
            difference_update(tp.partition for tp in parts))
        consumers.append(c)
    # Both members join before anything is produced: a member alone would read it all.
    while not (assigned[0] and assigned[1]):
        if time.monotonic() > deadline:
            raise Fail(f"group flow: both members never held partitions: {assigned}")
        for c in consumers:
            m = c.poll(0.2)
            if m is not None and m.error():
                log(f"group flow: while joining: {m.error()}")
            elif m is not None:
                raise Fail("group flow: a record before anything was produced")
    if assigned[0] & assigned[1] or (assigned[0] | assigned[1]) != {0, 1, 2, 3}:
        raise Fail(f"group flow: assignment {assigned} does not split partitions 0-3")
    log(f"group flow: member 0 has {sorted(assigned[0])}, member 1 has {sorted(assigned[1])}")
    rng = random.Random(7)
    sent = {}
    p = Producer(dict(bootstrap_conf(), **{"acks": "all", "linger.ms": 5}))
    for i in range(2000):
        key = f"k{i}".encode()
        val = rng.randbytes(rng.randrange(10, 3000))
        sent[key] = val
        while True:
            try:
                p.produce(topic, val, key, partition=i % 4)
                break
            except BufferError:
                p.poll(0.1)
    if p.flush(max(1.0, deadline - time.monotonic())) != 0:
        raise Fail("group flow: producer did not deliver everything before the deadline")
    got = {}
    while len(got) < len(sent):
        if time.monotonic() > deadline:
            raise Fail(f"group flow: {len(got)} of {len(sent)} records consumed")
        for idx, c in enumerate(consumers):
            for m in c.consume(500, timeout=0.2):
                if m.error():
                    raise Fail(f"group flow: consumer error {m.error()}")
                if m.partition() not in assigned[idx]:
                    raise Fail(f"group flow: member {idx} got partition {m.partition()}")
                if m.key() in got:
                    raise Fail(f"group flow: record {m.key()!r} consumed twice")
                got[m.key()] = m.value()
    bad = [k for k in sent if got.get(k) != sent[k]]
    if bad:
        raise Fail(f"group flow: {len(bad)} records differ (first {bad[0]!r})")
    for c in consumers:
        c.commit(asynchronous=False)
    committed = {}
    for c in consumers:
        for tp in c.committed([TopicPartition(topic, q) for q in range(4)], timeout=15):
            if tp.offset >= 0:
                committed[tp.partition] = tp.offset
    want = {q: 500 for q in range(4)}
    if committed != want:
        raise Fail(f"group flow: committed offsets {committed}, want {want}")
    for c in consumers:
        c.close()
    log(f"group flow: 2 members consumed {len(got)} records once each, byte-identical; "
        f"committed {committed}")


def many_connections(n: int, timeout: float):
    """n connections at once, each: connect, Produce v7 (acks=all) one record, Fetch v11 it
    back byte-identical, close. Every connection must finish, and its requests within 3x the
    median connection's time (plus 0.5 s: on a loaded 2-core machine the median can be a few
    ms). The handshake is timed apart and only bounded by the deadline: 500 SYNs at once
    overfill a listener's backlog (lwIP's, like Linux's accept queue, at most 255) when the
    machine is busy, and a dropped SYN costs the client's 1 s retransmission timeout, which
    says nothing about how fairly established connections are served."""
    import selectors
    import struct

    from confluent_kafka import Producer  # noqa: F401  (Debian's, checked before)
    sys.path.insert(0, CLIENTS)
    import kproto

    kafka = kproto.Kafka()
    topic = f"dpconn{os.getpid()}"
    create_topic(topic, 3)
    rng = random.Random(11)
    sel = selectors.DefaultSelector()
    deadline = time.monotonic() + timeout

    class C:
        def __init__(self, i: int):
            self.i, self.part = i, i % 3
            self.value = rng.randbytes(rng.randrange(50, 4000))
            self.out, self.inbuf = b"", b""
            self.state, self.offset, self.done_at = "connect", -1, None
            self.connected = None
            self.s = socket.socket()
            self.s.setblocking(False)
            self.s.connect_ex((DPDK_IP, PORT))
            self.t0 = time.monotonic()
            sel.register(self.s, selectors.EVENT_WRITE, self)

        def queue(self, key: int, v: int, body: dict):
            f = kafka.encode_request(key, v, self.i, f"conn{self.i}", body)
            self.out += struct.pack(">i", len(f)) + f
            sel.modify(self.s, selectors.EVENT_READ | selectors.EVENT_WRITE, self)

        def produce(self):
            rec = {"attributes": 0, "timestampDelta": 0, "offsetDelta": 0,
                   "key": f"c{self.i}", "value": {"hex": self.value.hex()}, "headers": []}
            batch = {"batches": [{"baseOffset": 0, "partitionLeaderEpoch": -1,
                                  "attributes": 0, "baseTimestamp": int(time.time() * 1000),
                                  "records": [rec]}]}
            self.queue(0, 7, {"TransactionalId": None, "Acks": -1, "TimeoutMs": 30000,
                              "TopicData": [{"Name": topic, "PartitionData": [
                                  {"Index": self.part, "Records": batch}]}]})
            self.state = "produce"

        def fetch(self):
            self.queue(1, 11, {"ReplicaId": -1, "MaxWaitMs": 0, "MinBytes": 1,
                               "MaxBytes": 4096, "IsolationLevel": 0, "SessionId": 0,
                               "SessionEpoch": -1, "ForgottenTopicsData": [], "RackId": "",
                               "Topics": [{"Topic": topic, "Partitions": [
                                   {"Partition": self.part, "CurrentLeaderEpoch": -1,
                                    "FetchOffset": self.offset, "LastFetchedEpoch": -1,
                                    "LogStartOffset": -1, "PartitionMaxBytes": 4096}]}]})
            # (A broker answers at least the batch at the offset, whatever the limits; small
            # limits keep the answers, and this single-threaded client's decoding, short.)
            self.state = "fetch"

        def on_frame(self, frame: bytes):
            if self.state == "produce":
                _, body = kafka.decode_response(0, 7, frame)
                pr = body["Responses"][0]["PartitionResponses"][0]
                if pr["ErrorCode"] != 0:
                    raise Fail(f"connection {self.i}: Produce error {pr['ErrorCode']}")
                self.offset = pr["BaseOffset"]
                self.fetch()
            elif self.state == "fetch":
                _, body = kafka.decode_response(1, 11, frame)
                pd = body["Responses"][0]["Partitions"][0]
                if pd["ErrorCode"] != 0:
                    raise Fail(f"connection {self.i}: Fetch error {pd['ErrorCode']}")
                for b in (pd["Records"] or {}).get("batches", []):
                    for r in b.get("records", []):
                        if b["baseOffset"] + r["offsetDelta"] == self.offset:
                            if kproto._json_to_blob(r["value"]) != self.value:
                                raise Fail(f"connection {self.i}: fetched value differs")
                            self.finish()
                            return
                raise Fail(f"connection {self.i}: offset {self.offset} not in the fetch answer")

        def finish(self):
            self.done_at = time.monotonic()
            self.state = "done"
            sel.unregister(self.s)
            self.s.close()

    conns = [C(i) for i in range(n)]
    left = n
    while left:
        if time.monotonic() > deadline:
            stuck = collections.Counter(c.state for c in conns if c.state != "done")
            raise Fail(f"many connections: {left} of {n} unfinished at the deadline: "
                       f"{dict(stuck)}")
        for key, ev in sel.select(timeout=1.0):
            c = key.data
            try:
                if c.state == "connect":
                    err = c.s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        raise Fail(f"connection {c.i}: connect failed: {os.strerror(err)}")
                    c.connected = time.monotonic()
                    c.produce()
                    continue
                if ev & selectors.EVENT_WRITE and c.out:
                    c.out = c.out[c.s.send(c.out):]
                    if not c.out:
                        sel.modify(c.s, selectors.EVENT_READ, c)
                if ev & selectors.EVENT_READ:
                    data = c.s.recv(1 << 20)
                    if not data:
                        raise Fail(f"connection {c.i}: closed by the broker in {c.state}")
                    c.inbuf += data
                    while len(c.inbuf) >= 4:
                        size = struct.unpack_from(">i", c.inbuf)[0]
                        if len(c.inbuf) < 4 + size:
                            break
                        frame, c.inbuf = c.inbuf[4:4 + size], c.inbuf[4 + size:]
                        c.on_frame(frame)
                        if c.state == "done":
                            left -= 1
                            break
            except (BlockingIOError, InterruptedError):
                pass
            except OSError as e:
                raise Fail(f"connection {c.i}: {e} in {c.state}")
    hs = sorted(c.connected - c.t0 for c in conns)
    times = sorted(c.done_at - c.connected for c in conns)
    med = times[len(times) // 2]
    worst = times[-1]
    log(f"{n} connections: handshakes median {hs[len(hs) // 2] * 1000:.0f} ms, slowest "
        f"{hs[-1] * 1000:.0f} ms; requests median {med * 1000:.0f} ms, p99 "
        f"{times[int(n * 0.99)] * 1000:.0f} ms, slowest {worst * 1000:.0f} ms")
    if worst > 3 * med + 0.5:
        raise Fail(f"many connections: the slowest took {worst:.2f}s, over 3x the median "
                   f"{med:.2f}s (+0.5s)")


def _csum(b: bytes) -> int:
    if len(b) % 2:
        b += b"\0"
    t = sum(int.from_bytes(b[i:i + 2], "big") for i in range(0, len(b), 2))
    while t >> 16:
        t = (t & 0xFFFF) + (t >> 16)
    return ~t & 0xFFFF


def tcp_frame(src_mac: bytes, dst_mac: bytes, src_ip: str, dst_ip: str, sport: int,
              dport: int, seq: int, ack: int, flags: int, options: bytes = b"",
              payload: bytes = b"", data_offset: int | None = None) -> bytes:
    """An Ethernet/IPv4/TCP frame with valid checksums (data_offset overrides the header's)."""
    import struct

    sip, dip = socket.inet_aton(src_ip), socket.inet_aton(dst_ip)
    opts = options + b"\0" * (-len(options) % 4)
    off = data_offset if data_offset is not None else (20 + len(opts)) // 4
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, off << 4, flags, 65535, 0, 0)
    tcp += opts + payload
    c = _csum(sip + dip + struct.pack("!BBH", 0, 6, len(tcp)) + tcp)
    tcp = tcp[:16] + struct.pack("!H", c) + tcp[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), random.randrange(65536), 0x4000,
                     64, 6, 0, sip, dip)
    ip = ip[:10] + struct.pack("!H", _csum(ip)) + ip[12:]
    return dst_mac + src_mac + b"\x08\x00" + ip + tcp


def attack_flow(broker: h.SamsadProcess, syns: int, timeout: float):
    """A SYN flood of `syns` half-open connections (spoofed sources in the subnet that never
    answer ARP, so the stack's SYN-ACKs go nowhere), an RST storm (random sequence numbers,
    at the listener and at a live client's own connection) and SYNs with malformed TCP
    options, all from an AF_PACKET socket on k0, while a client keeps producing and reading
    back over an established connection. The client must keep going; samsad's RSS may grow
    by at most 64 MiB."""
    import threading

    from confluent_kafka import Consumer, Producer, TopicPartition

    sys.path.insert(0, CLIENTS)
    deadline = time.monotonic() + timeout
    topic = f"dpattack{os.getpid()}"
    create_topic(topic, 1)
    rss0 = h.rss_kib(broker.proc.pid)
    # The DPDK end's MAC, from the kernel's neighbour table (a connection was made above).
    neigh = sh("ip", "neigh", "show", DPDK_IP, "dev", "k0").stdout.split()
    if "lladdr" not in neigh:
        raise Fail(f"no neighbour entry for {DPDK_IP}: {' '.join(neigh)}")
    dst_mac = bytes.fromhex(neigh[neigh.index("lladdr") + 1].replace(":", ""))
    with open("/sys/class/net/k0/address") as f:
        src_mac = bytes.fromhex(f.read().strip().replace(":", ""))
    raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    raw.bind(("k0", 0))
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)

    def send(frame: bytes):
        while True:
            try:
                raw.send(frame)
                return
            except (BlockingIOError, OSError) as e:
                if getattr(e, "errno", None) not in (105, 11):  # ENOBUFS, EAGAIN
                    raise
                time.sleep(0.001)

    # The live client: one producer, one consumer, each on its own connection.
    progress = {"acked": 0, "read": 0, "error": None}
    stop = threading.Event()

    def live():
        try:
            p = Producer(dict(bootstrap_conf(), **{"acks": "all", "linger.ms": 1}))
            c = Consumer(dict(bootstrap_conf(), **{"group.id": f"{topic}-live",
                                                   "enable.auto.commit": False}))
            c.assign([TopicPartition(topic, 0, 0)])
            i = 0
            while not stop.is_set():
                v = f"live-{i}".encode()
                p.produce(topic, v, partition=0, on_delivery=lambda e, m: (
                    progress.__setitem__("error", str(e)) if e else
                    progress.__setitem__("acked", progress["acked"] + 1)))
                p.flush(30)
                m = c.poll(10)
                while m is not None and m.error():
                    m = c.poll(10)
                if m is None or m.value() != v:
                    progress["error"] = f"read back {m and m.value()!r}, want {v!r}"
                    return
                progress["read"] += 1
                i += 1
            c.close()
        except Exception as e:  # reported by the main thread
            progress["error"] = f"{type(e).__name__}: {e}"

    th = threading.Thread(target=live, name="live-client", daemon=True)
    th.start()
    while progress["read"] < 5:
        if progress["error"] or time.monotonic() > deadline:
            raise Fail(f"attack: the live client did not start: {progress}")
        time.sleep(0.1)

    def check_live(what: str, since: int):
        end = time.monotonic() + 20
        while progress["read"] < since + 5:
            if progress["error"]:
                raise Fail(f"attack ({what}): the live client failed: {progress['error']}")
            if time.monotonic() > end:
                raise Fail(f"attack ({what}): the live client made no progress in 20 s "
                           f"({progress})")
            time.sleep(0.05)

    # 1. SYN flood: `syns` SYNs from 200 silent addresses x ports.
    t = time.monotonic()
    before = progress["read"]
    for i in range(syns):
        src = f"10.99.0.{50 + i % 200}"
        send(tcp_frame(src_mac, dst_mac, src, DPDK_IP, 10000 + i // 200, PORT,
                       random.getrandbits(32), 0, 0x02, b"\x02\x04\x05\xb4"))
    check_live("SYN flood", before)
    log(f"attack: {syns} SYNs from silent sources sent in {time.monotonic() - t:.1f}s; the "
        f"live client kept going ({progress['read']} round trips so far)")
    # New clients must still get in while the half-open connections linger (lwIP's are
    # counted against the listener's backlog and time out only after 20 s).
    import kproto

    t = time.monotonic()
    for i in range(20):
        k = kproto.Kafka()
        try:
            c = kproto.Conn(DPDK_IP, PORT, timeout=5)
            c.send(k.encode_request(18, 0, i, "after-flood", {}))
            k.decode_response(18, 0, c.recv(timeout=5))
            c.close()
        except (OSError, kproto.Closed) as e:
            raise Fail(f"attack: new connection {i} after the SYN flood failed: {e} (after "
                       f"{time.monotonic() - t:.1f}s)")
    log(f"attack: 20 new connections after the flood answered in {time.monotonic() - t:.2f}s")

    # 2. RST storm: at the listener from random ports, and at the live connections' own
    # 4-tuples with random (out-of-window, almost surely) sequence numbers.
    conns = []
    for line in sh("ss", "-tnH", "state", "established", "dst", DPDK_IP).stdout.splitlines():
        f = line.split()
        local = f[-2]
        conns.append(int(local.rsplit(":", 1)[1]))
    before = progress["read"]
    for i in range(5000):
        send(tcp_frame(src_mac, dst_mac, KERNEL_IP, DPDK_IP, 40000 + i % 20000, PORT,
                       random.getrandbits(32), 0, 0x04))
        for sport in conns:
            send(tcp_frame(src_mac, dst_mac, KERNEL_IP, DPDK_IP, sport, PORT,
                           random.getrandbits(32), 0, 0x04))
    check_live("RST storm", before)
    log(f"attack: RST storm ({5000 * (1 + len(conns))} RSTs, {len(conns)} live connections "
        "targeted) survived")

    # 3. Malformed TCP options and headers on SYNs and on segments.
    bad_options = [b"\x02\x00", b"\x02\x01", b"\x02\x04\x00", b"\x02\x04\x00\x00",
                   b"\x03\x03\xff", b"\x03\x00", b"\x04\x00", b"\x05\x01",
                   b"\x05\x0a\x00\x00\x00\x00\x00\x00\x00\x00", b"\x08\x0a",
                   b"\xfe\xff", b"\x01" * 40, b"\x02\xff" + b"\x00" * 38,
                   b"\x03\x03\x0e\x02\x04\xff\xff", bytes(range(40))]
    before = progress["read"]
    n = 0
    for k, opts in enumerate(bad_options):
        for j in range(20):
            sport = 50000 + k * 20 + j
            send(tcp_frame(src_mac, dst_mac, f"10.99.0.{250 + j % 4}", DPDK_IP, sport, PORT,
                           random.getrandbits(32), 0, 0x02, opts[:40]))
            send(tcp_frame(src_mac, dst_mac, KERNEL_IP, DPDK_IP, sport, PORT,
                           random.getrandbits(32), random.getrandbits(32), 0x18, opts[:40],
                           payload=b"\0\0\0\x10junk"))
            n += 2
    for off in (0, 1, 4, 15):  # data offsets shorter than a header, or past the segment
        for j in range(20):
            send(tcp_frame(src_mac, dst_mac, KERNEL_IP, DPDK_IP, 52000 + off * 20 + j, PORT,
                           random.getrandbits(32), 0, 0x02, data_offset=off))
            n += 1
    check_live("malformed options", before)
    log(f"attack: {n} segments with malformed options or data offsets survived")

    stop.set()
    th.join(30)
    if progress["error"]:
        raise Fail(f"attack: the live client failed: {progress['error']}")
    raw.close()
    rss1 = h.rss_kib(broker.proc.pid)
    log(f"attack: samsad RSS {rss0 // 1024} MiB before, {rss1 // 1024} MiB after; "
        f"{progress['read']} live round trips")
    if rss1 - rss0 > 64 * 1024:
        raise Fail(f"attack: samsad's RSS grew by {(rss1 - rss0) // 1024} MiB (limit 64)")


def bulk_flow(mb: int, timeout: float) -> dict:
    """Produces `mb` MB of seeded random values (idempotent, acks=all) and consumes them back."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    deadline = time.monotonic() + timeout
    topic = f"dpbulk{os.getpid()}"
    create_topic(topic, 1)
    size = 16 * 1024
    count = mb * 1024 * 1024 // size
    rng = random.Random(42)
    block = rng.randbytes(1 << 20)
    # Each value is a distinct slice of the random block, prefixed with its index: cheap to
    # make and to check, and every byte of it differs from its neighbours'.
    def value(i: int) -> bytes:
        off = (i * 7919) % ((1 << 20) - size)
        return i.to_bytes(8, "big") + block[off:off + size - 8]

    errors = []
    p = Producer(dict(bootstrap_conf(), **{
        "acks": "all", "enable.idempotence": True, "linger.ms": 10,
        "batch.num.messages": 64, "message.timeout.ms": int(timeout * 1000),
        "queue.buffering.max.kbytes": 16384}))
    t = time.monotonic()
    for i in range(count):
        while True:
            try:
                p.produce(topic, value(i), partition=0,
                          on_delivery=lambda err, _m: err and errors.append(str(err)))
                break
            except BufferError:
                p.poll(0.05)
        if time.monotonic() > deadline:
            raise Fail(f"bulk: only {i} of {count} records handed to the producer in time")
    left = p.flush(max(1.0, deadline - time.monotonic()))
    if left or errors:
        raise Fail(f"bulk: {left} records undelivered, delivery errors: {errors[:3]}")
    produce_s = time.monotonic() - t
    c = Consumer(dict(bootstrap_conf(), **{"group.id": f"{topic}-reader",
                                           "enable.auto.commit": False,
                                           "fetch.max.bytes": 8 << 20,
                                           "max.partition.fetch.bytes": 4 << 20}))
    c.assign([TopicPartition(topic, 0, 0)])
    t = time.monotonic()
    h_sent, h_got = hashlib.sha256(), hashlib.sha256()
    n = 0
    while n < count:
        if time.monotonic() > deadline:
            raise Fail(f"bulk: {n} of {count} records consumed before the deadline")
        for m in c.consume(1000, timeout=1.0):
            if m.error():
                raise Fail(f"bulk: consumer error {m.error()}")
            v = m.value()
            if m.offset() != n or v != value(n):
                raise Fail(f"bulk: record at offset {m.offset()} (expected {n}) differs from "
                           f"what was produced ({len(v)} bytes, index "
                           f"{int.from_bytes(v[:8], 'big')})")
            h_sent.update(value(n))
            h_got.update(v)
            n += 1
    consume_s = time.monotonic() - t
    c.close()
    total = count * size / 1e6
    res = dict(records=count, mb=round(total, 1), produce_s=round(produce_s, 1),
               consume_s=round(consume_s, 1), produce_mb_s=round(total / produce_s, 1),
               consume_mb_s=round(total / consume_s, 1), sha256=h_got.hexdigest()[:16])
    if h_sent.digest() != h_got.digest():
        raise Fail("bulk: digests differ")
    return res
