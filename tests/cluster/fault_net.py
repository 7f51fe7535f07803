"""The fault test's network: a bridge in a namespace of its own, one namespace per samsad node
and one for the clients, each joined to the bridge by a veth pair; and the faults done on it.

  bridge namespace  <prefix>-br : br0, and one port per member, p<id> (p0 = the clients)
  node namespaces   <prefix>-n<id> : eth0 = 10.99.0.<10 + id> for a broker, 10.99.0.<id> for a
                    controller (ids 100..)
  client namespace  <prefix>-cl : eth0 = 10.99.0.2

Nothing is added to the root namespace. Faults act on the bridge's side of a member's veth:
  isolate(id)  `ip link set p<id> down`: the member loses every peer (this kernel has no
               sch_netem, so no `netem loss 100%`; a downed link is the same cut).
  slow(id)     an HTB class limited to --slow-kbit on the traffic the bridge sends the member
               *from the brokers' inter-broker listener port* (source port 9092; 9094, the
               SASL_SSL INTERNAL listener, with --secure): the answers to its follower
               fetches (and any request it sends another broker) crawl, while its heartbeats
               to the controller (port 9093), the clients' requests to it and its answers to
               them pass at full speed. The stand-in for `netem delay 200ms` (absent here): a
               rate far below the produce rate makes the follower fall further behind with
               every fetch, so it leaves the ISR after replica.lag.time.max.ms, and catches up
               once the class is removed.
"""

from __future__ import annotations

import ctypes
import os
import re
import subprocess

BROKER_PORT = 9092  # the clients' listener (PLAINTEXT); also the inter-broker one unless --secure
CONTROLLER_PORT = 9093
INTERNAL_PORT = 9094  # --secure: the inter-broker listener (SASL_SSL)
SUBNET = "10.99.0"
CLIENT_IP = f"{SUBNET}.2"
CLONE_NEWNET = 0x40000000
NS_PREFIX = "samsaflt"  # <NS_PREFIX><pid>-...: stale ones of dead runs are swept at start


def ip_of(node_id: int) -> str:
    return f"{SUBNET}.{node_id if node_id >= 100 else 10 + node_id}"


def run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=30)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {r.returncode}: {r.stderr.strip()}")
    return r


def sweep_stale() -> list[str]:
    """Deletes the namespaces of earlier runs of this test whose process is gone (a run killed
    with SIGKILL cannot clean up); names carry the owner's pid."""
    gone = []
    for line in run("ip", "netns", "list", check=False).stdout.splitlines():
        m = re.match(rf"^({NS_PREFIX}(\d+)-\S+)", line)
        if m and not os.path.exists(f"/proc/{m.group(2)}"):
            run("ip", "netns", "del", m.group(1), check=False)
            gone.append(m.group(1))
    return gone


class Net:
    def __init__(self, node_ids: list[int]):
        self.prefix = f"{NS_PREFIX}{os.getpid()}"
        self.br = f"{self.prefix}-br"
        self.client = f"{self.prefix}-cl"
        self.node_ids = list(node_ids)
        self.made: list[str] = []
        self.down: set[int] = set()
        self.slowed: set[int] = set()

    def ns(self, node_id: int) -> str:
        return f"{self.prefix}-n{node_id}"

    def wrap(self, node_id: int) -> list[str]:
        return ["ip", "netns", "exec", self.ns(node_id)]

    def _add_ns(self, name: str):
        run("ip", "netns", "add", name)
        self.made.append(name)
        run("ip", "-n", name, "link", "set", "lo", "up")

    def _join(self, name: str, port: str, addr: str):
        run("ip", "-n", self.br, "link", "add", port, "type", "veth", "peer", "name", "eth0",
            "netns", name)
        run("ip", "-n", self.br, "link", "set", port, "master", "br0")
        run("ip", "-n", self.br, "link", "set", port, "up")
        run("ip", "-n", name, "addr", "add", f"{addr}/24", "dev", "eth0")
        run("ip", "-n", name, "link", "set", "eth0", "up")

    def create(self):
        self._add_ns(self.br)
        # No STP: a port forwards as soon as it is up (a healed link carries at once).
        run("ip", "-n", self.br, "link", "add", "br0", "type", "bridge", "forward_delay", "0",
            "stp_state", "0")
        run("ip", "-n", self.br, "link", "set", "br0", "up")
        self._add_ns(self.client)
        self._join(self.client, "p0", CLIENT_IP)
        for i in self.node_ids:
            self._add_ns(self.ns(i))
            self._join(self.ns(i), f"p{i}", ip_of(i))

    def enter_client(self):
        """Moves this (still single-threaded) process into the client namespace: its clients,
        and every process it starts without `wrap`, talk to the brokers over the bridge."""
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(f"/var/run/netns/{self.client}", os.O_RDONLY)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), f"setns into {self.client}")
        finally:
            os.close(fd)

    def isolate(self, node_id: int):
        run("ip", "-n", self.br, "link", "set", f"p{node_id}", "down")
        self.down.add(node_id)

    def heal(self, node_id: int):
        run("ip", "-n", self.br, "link", "set", f"p{node_id}", "up")
        self.down.discard(node_id)

    def slow(self, node_id: int, kbit: int, port: int = BROKER_PORT):
        """Rate-limits what the member receives from `port` (the inter-broker listener's)."""
        dev = f"p{node_id}"
        tc = ["tc", "-n", self.br]
        run(*tc, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "10")
        run(*tc, "class", "add", "dev", dev, "parent", "1:", "classid", "1:10", "htb", "rate",
            "10gbit", "quantum", "60000")
        run(*tc, "class", "add", "dev", dev, "parent", "1:", "classid", "1:20", "htb", "rate",
            f"{kbit}kbit", "ceil", f"{kbit}kbit", "burst", "1600", "cburst", "1600",
            "quantum", "1514")
        run(*tc, "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1",
            "u32", "match", "ip", "sport", str(port), "0xffff", "flowid", "1:20")
        self.slowed.add(node_id)

    def slow_stats(self, node_id: int) -> str:
        """What the slow class let through and dropped (proof the limit bit)."""
        out = run("tc", "-n", self.br, "-s", "class", "show", "dev", f"p{node_id}",
                  check=False).stdout
        m = re.search(r"class htb 1:20 .*?Sent (\d+) bytes (\d+) pkt \(dropped (\d+), "
                      r"overlimits (\d+)", out, re.S)
        return (f"sent {m.group(1)} bytes in {m.group(2)} packets, dropped {m.group(3)}, "
                f"overlimits {m.group(4)}") if m else out.strip()

    def unslow(self, node_id: int):
        run("tc", "-n", self.br, "qdisc", "del", "dev", f"p{node_id}", "root", check=False)
        self.slowed.discard(node_id)

    def teardown(self):
        """Deleting a namespace destroys its veth ends (and so their peers) and its qdiscs."""
        for name in reversed(self.made):
            run("ip", "netns", "del", name, check=False)
        self.made.clear()
