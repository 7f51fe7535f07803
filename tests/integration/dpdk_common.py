"""What the DPDK integration test's pieces share: the addresses of the veth pair, the log, the
failure type, shell calls and the client configuration for the broker on the DPDK end.
Imported by dpdk_test.py and dpdk_flows.py; not a test itself."""

from __future__ import annotations

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CLIENTS = os.path.join(ROOT, "tests", "clients")
KERNEL_IP, DPDK_IP, PORT = "10.99.0.1", "10.99.0.2", 9092
sys.path.insert(0, HERE)
import admin_harness as h  # noqa: E402

log = h.logger("dpdk-test", clock=True)


class Fail(Exception):
    pass


def sh(*cmd: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
    r = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise Fail(f"`{' '.join(cmd)}` failed ({r.returncode}): {r.stderr.strip()}")
    return r


def bootstrap_conf() -> dict:
    return {"bootstrap.servers": f"{DPDK_IP}:{PORT}", "socket.timeout.ms": 30000,
            "api.version.request.timeout.ms": 30000}


def create_topic(name: str, partitions: int):
    h.create_topics(bootstrap_conf(), {name: partitions}, timeout=40, request_timeout=30)
