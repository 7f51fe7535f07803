#!/usr/bin/python3
"""A userspace stand-in for `tc qdisc ... netem loss L% delay D reorder R%` on both directions
of a link, for kernels built without sch_netem (this machine's: CONFIG_NET_SCH_NETEM is not
set). It joins two interfaces with AF_PACKET sockets: every frame that arrives on one leaves
on the other, with netem's semantics per direction: a frame is lost with probability L; of the
others, R are sent at once and the rest after D (so those R overtake the frames delayed before
them: reordering).

  dpdk_wire.py IFACE_A IFACE_B [--loss PCT] [--delay-ms MS] [--reorder PCT] [--seed N]

Until SIGUSR1 the wire passes frames unimpaired; SIGUSR1 switches the impairment on, SIGUSR2
off. SIGTERM ends it after printing its counters (frames, bytes, lost, reordered per
direction) on stdout as one JSON line.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import select
import signal
import socket
import sys
import time

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23


def open_raw(iface: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    try:  # the frames we send ourselves on this interface are not input
        s.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
    except OSError:
        pass
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    s.bind((iface, ETH_P_ALL))
    s.setblocking(False)
    return s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--loss", type=float, default=1.0)
    ap.add_argument("--delay-ms", type=float, default=1.0)
    ap.add_argument("--reorder", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    loss, reorder, delay = a.loss / 100.0, a.reorder / 100.0, a.delay_ms / 1000.0
    socks = [open_raw(a.a), open_raw(a.b)]
    # Per direction (0: a->b, 1: b->a): frames waiting for their time, FIFO since every delay
    # is the same.
    queues = [collections.deque(), collections.deque()]
    stats = [dict(frames=0, bytes=0, lost=0, reordered=0, send_errors=0) for _ in range(2)]
    state = {"impair": False, "stop": False}
    signal.signal(signal.SIGUSR1, lambda *_: state.update(impair=True))
    signal.signal(signal.SIGUSR2, lambda *_: state.update(impair=False))
    signal.signal(signal.SIGTERM, lambda *_: state.update(stop=True))
    signal.signal(signal.SIGINT, lambda *_: state.update(stop=True))
    poller = select.poll()
    for s in socks:
        poller.register(s.fileno(), select.POLLIN)
    fd_dir = {socks[0].fileno(): 0, socks[1].fileno(): 1}

    def send(d: int, frame: bytes):
        try:
            socks[1 - d].send(frame)
        except (BlockingIOError, OSError):
            stats[d]["send_errors"] += 1  # a full device queue drops, as a wire would

    print("ready", flush=True)
    while not state["stop"]:
        now = time.monotonic()
        for d in (0, 1):
            q = queues[d]
            while q and q[0][0] <= now:
                send(d, q.popleft()[1])
        due = [q[0][0] for q in queues if q]
        timeout_ms = max(0.0, (min(due) - now) * 1000.0) if due else 100.0
        try:
            events = poller.poll(timeout_ms)
        except InterruptedError:
            continue
        for fd, _ in events:
            d = fd_dir[fd]
            s = socks[d]
            st = stats[d]
            for _ in range(256):
                try:
                    frame, addr = s.recvfrom(65536)
                except (BlockingIOError, InterruptedError):
                    break
                if addr[2] == PACKET_OUTGOING:
                    continue
                st["frames"] += 1
                st["bytes"] += len(frame)
                if not state["impair"]:
                    if queues[d]:  # keep the order of frames still delayed
                        queues[d].append((0.0, frame))
                    else:
                        send(d, frame)
                    continue
                if rng.random() < loss:
                    st["lost"] += 1
                    continue
                if rng.random() < reorder:
                    st["reordered"] += 1
                    send(d, frame)
                    continue
                queues[d].append((time.monotonic() + delay, frame))
    print(json.dumps({f"{a.a}->{a.b}": stats[0], f"{a.b}->{a.a}": stats[1]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
