"""A fault-injecting TCP proxy for Kafka connections (used by eos_test.py).

Every client connection gets its own upstream connection to the broker; frames are forwarded
whole in both directions, parsed only as far as Kafka's framing: a 4-byte size, then (requests)
api key, api version and correlation id, or (responses) the correlation id.

Two kinds of drop, both closing the client's and the broker's side of one connection:
- drop_random(): at once, on a connection that carried traffic lately (mid-frame or idle).
- arm_produce_drop(): the next Produce request (api key 0) on a connection is forwarded to the
  broker; the proxy then forwards no more requests on that connection, waits for the broker's
  answer to that Produce, swallows it and closes both sides. The broker has handled (for acks=all:
  stored and synced) a batch whose client never hears so, which makes the client retry a batch
  the broker already holds. Only drops whose response was swallowed count in produce_drops;
  a doomed connection that dies first (broker killed, random drop) counts in produce_drops_lost
  and the next Produce is doomed instead.

Only connections that have answered at least two requests are cut (see _Conn.eligible). Half of
the drops close with RST (SO_LINGER 0), half with FIN.
"""

from __future__ import annotations

import random
import socket
import struct
import threading
import time

MAX_FRAME = 256 * 1024 * 1024
PRODUCE = 0


def _read_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            return None
        got += k
    return bytes(buf)


def _read_frame(sock: socket.socket) -> bytes | None:
    """One Kafka frame including its size prefix, or None at end of stream."""
    head = _read_exact(sock, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">i", head)
    if size < 0 or size > MAX_FRAME:
        raise OSError(f"bad frame size {size}")
    body = _read_exact(sock, size)
    if body is None:
        return None
    return head + body


class _Conn:
    def __init__(self, proxy: "FaultProxy", client: socket.socket, upstream: socket.socket):
        self.proxy, self.client, self.upstream = proxy, client, upstream
        self.closed = False
        self.doomed_corr: int | None = None
        self.doomed_at = 0.0
        self.doom_confirmed = False
        self.last_activity = time.monotonic()
        self.responses = 0  # forwarded to the client
        self.id = 0
        # Requests forwarded and not answered yet: correlation id -> (api key, version, when).
        self.pending: dict[int, tuple[int, int, float]] = {}
        self.stall_reported: set[int] = set()

    def eligible(self) -> bool:
        # A connection is cut only after it has answered something beyond the handshake
        # (ApiVersions): cutting every new connection at once would only measure the client's
        # reconnect backoff, which grows with each failure, and the run would stall.
        return self.doomed_corr is None and self.responses >= 2

    def close(self, why: str, rst: bool = False):
        p = self.proxy
        with p.lock:
            if self.closed:
                return
            self.closed = True
            p.event(f"conn {self.id} closed ({why}{', RST' if rst else ''}); "
                    f"{len(self.pending)} requests unanswered")
            p.conns.discard(self)
            if self.doomed_corr is not None and not self.doom_confirmed:
                p.doom = "idle"
                p.produce_drops_lost += 1
        # close() alone would not end the connection: the forwarding threads are blocked in
        # recv on these sockets, and the kernel keeps a socket open until such a call returns,
        # so the peer would notice nothing until it sent more (a client waiting on its requests
        # would time out instead). shutdown(SHUT_RD) wakes them without telling the peer
        # anything; the final close then sends RST (linger 0) or FIN.
        for s in (self.client, self.upstream):
            try:
                if rst:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    s.shutdown(socket.SHUT_RD)
                else:
                    s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


class FaultProxy:
    def __init__(self, upstream_port: int, seed: int = 0):
        self.upstream = ("127.0.0.1", upstream_port)
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.conns: set[_Conn] = set()
        self.doom = "idle"  # idle | armed | inflight
        self.random_drops = 0
        self.produce_drops = 0
        self.produce_drops_lost = 0
        self.produce_requests = 0
        self.connections = 0
        self.upstream_refused = 0
        self.stalls: list[str] = []  # requests the broker left unanswered too long
        self.events: list[str] = []  # timestamped, for reading beside the clients' logs
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(128)
        self.port = self.listener.getsockname()[1]
        self._stopped = False

    def event(self, what: str):
        """Appends to the event log; call with the lock held."""
        t = time.time()
        self.events.append(time.strftime("%H:%M:%S", time.localtime(t)) +
                           f".{int(t * 1000) % 1000:03d} {what}")

    def start(self) -> "FaultProxy":
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()
        return self

    def stop(self):
        self._stopped = True
        try:
            self.listener.close()
        except OSError:
            pass
        with self.lock:
            conns = list(self.conns)
        for c in conns:
            c.close("proxy stopped")

    # -- faults -------------------------------------------------------------------------------
    def drop_random(self) -> bool:
        """Closes one live connection that carried traffic in the last second (else any live
        one). False when there is none to drop."""
        now = time.monotonic()
        with self.lock:
            live = [c for c in self.conns if c.eligible()]
            busy = [c for c in live if now - c.last_activity < 1.0]
            pool = busy or live
            if not pool:
                return False
            victim = self.rng.choice(sorted(pool, key=id))
            self.random_drops += 1
        victim.close("random drop", rst=self.rng.random() < 0.5)
        return True

    def arm_produce_drop(self) -> bool:
        """Dooms the next Produce request; False while an earlier one is still pending."""
        with self.lock:
            if self.doom != "idle":
                return False
            self.doom = "armed"
            return True

    def disarm(self):
        """No Produce is doomed from now on (one already forwarded still is)."""
        with self.lock:
            if self.doom == "armed":
                self.doom = "idle"

    def expire_doom(self, max_age: float):
        """Closes a doomed connection whose Produce got no answer within max_age seconds (the
        broker hangs or died); it counts as lost, not as a produce drop."""
        now = time.monotonic()
        with self.lock:
            stale = [c for c in self.conns
                     if c.doomed_corr is not None and now - c.doomed_at > max_age]
        for c in stale:
            c.close("doomed Produce unanswered")

    def find_stalls(self, max_age: float) -> list[str]:
        """Requests the broker has left unanswered for more than max_age seconds on a live
        connection (each reported once). A broker that never answers a request shows up in the
        client as a request timeout, and in the producer as stalls and expired batches."""
        now = time.monotonic()
        found = []
        with self.lock:
            for c in self.conns:
                for corr, (key, ver, t) in c.pending.items():
                    if now - t > max_age and corr not in c.stall_reported:
                        c.stall_reported.add(corr)
                        found.append(f"connection {c.id}: api {key} v{ver} correlation id "
                                     f"{corr} unanswered for {now - t:.1f}s")
            self.stalls += found
        return found

    def doom_pending(self) -> bool:
        with self.lock:
            return self.doom != "idle"

    def counts(self) -> dict:
        with self.lock:
            return {"random_drops": self.random_drops, "produce_drops": self.produce_drops,
                    "drops": self.random_drops + self.produce_drops,
                    "produce_drops_lost": self.produce_drops_lost,
                    "produce_requests": self.produce_requests, "connections": self.connections,
                    "upstream_refused": self.upstream_refused, "stalls": len(self.stalls)}

    # -- forwarding -----------------------------------------------------------------------------
    def _accept(self):
        while not self._stopped:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream, timeout=2)
                upstream.settimeout(None)
            except OSError:
                # The broker is down (killed, restarting): the client sees a closed connection.
                with self.lock:
                    self.upstream_refused += 1
                    self.event("upstream refused")
                client.close()
                continue
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            c = _Conn(self, client, upstream)
            with self.lock:
                self.conns.add(c)
                self.connections += 1
                c.id = self.connections
                self.event(f"conn {c.id} from client port {client.getpeername()[1]}")
            threading.Thread(target=self._requests, args=(c,), name="proxy-c2b",
                             daemon=True).start()
            threading.Thread(target=self._responses, args=(c,), name="proxy-b2c",
                             daemon=True).start()

    def _requests(self, c: _Conn):
        try:
            while True:
                frame = _read_frame(c.client)
                if frame is None:
                    break
                doomed = False
                with self.lock:
                    if c.closed:
                        break
                    c.last_activity = time.monotonic()
                    if len(frame) >= 12:
                        api_key, version, corr = struct.unpack_from(">hhi", frame, 4)
                        c.pending[corr] = (api_key, version, time.monotonic())
                        if api_key == PRODUCE:
                            self.produce_requests += 1
                            if self.doom == "armed" and c.eligible():
                                self.doom = "inflight"
                                self.event(f"conn {c.id}: Produce correlation id {corr} doomed")
                                c.doomed_corr = corr
                                c.doomed_at = time.monotonic()
                                doomed = True
                c.upstream.sendall(frame)
                if doomed:
                    # Nothing more goes to the broker on this connection; _responses closes it
                    # once the doomed Produce's answer arrives.
                    return
            why = "client closed"
        except OSError as e:
            why = f"request path: {e}"
        c.close(why)

    def _responses(self, c: _Conn):
        try:
            while True:
                frame = _read_frame(c.upstream)
                if frame is None:
                    break
                swallow = False
                with self.lock:
                    c.last_activity = time.monotonic()
                    if len(frame) >= 8:
                        c.pending.pop(struct.unpack_from(">i", frame, 4)[0], None)
                    if (c.doomed_corr is not None and len(frame) >= 8
                            and struct.unpack_from(">i", frame, 4)[0] == c.doomed_corr):
                        c.doom_confirmed = True
                        self.doom = "idle"
                        self.produce_drops += 1
                        swallow = True
                if swallow:
                    c.close("drop after Produce", rst=self.rng.random() < 0.5)
                    return
                c.client.sendall(frame)
                c.responses += 1
            why = "broker closed"
        except OSError as e:
            why = f"response path: {e}"
        c.close(why)
