#!/usr/bin/python3
"""What a listener on every interface (`listeners=PLAINTEXT://:PORT`, the packaged default)
advertises (issue 24): the machine's host name where it resolves, as Kafka does; where it does
not (containers, fresh VMs), localhost, with one warning naming advertised.listeners, so that
local clients work out of the box instead of failing to resolve the name Metadata gave them.

samsad runs in a UTS namespace of its own (unshare --uts) whose host name cannot resolve
(`.invalid`, RFC 6761); a librdkafka client bootstrapped at 127.0.0.1 must see `localhost` in
Metadata and produce and consume through it. Then samsad on this machine's own host name, which
resolves here: Metadata names it and nothing is logged.

  advertised_host_test.py --samsad PATH
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from admin_harness import Checks, SamsadProcess, skip_or_fail  # noqa: E402

WARNING = "does not resolve here"


def start(binary: str, work: str, hostname: str | None) -> SamsadProcess:
    os.makedirs(work, exist_ok=True)
    s = SamsadProcess(binary, work, ["samsa.reactors=1"])
    # Every interface: the listener has no host (what the packaged samsa.properties has).
    s.cmd[s.cmd.index(f"listeners=PLAINTEXT://127.0.0.1:{s.port}")] = \
        f"listeners=PLAINTEXT://:{s.port}"
    if hostname:
        s.cmd = ["unshare", "--uts", "sh", "-c", f'hostname {hostname} && exec "$@"', "sh",
                 *s.cmd]
    s.start()
    return s


def roundtrip(port: int, topic: str) -> tuple[str, bool]:
    """(the host Metadata advertises, whether a record went through it and came back)."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient
    boot = f"127.0.0.1:{port}"
    md = AdminClient({"bootstrap.servers": boot}).list_topics(timeout=10)
    host = next(iter(md.brokers.values())).host
    p = Producer({"bootstrap.servers": boot, "message.timeout.ms": 10000})
    p.produce(topic, b"through the advertised host")
    left = p.flush(15)
    c = Consumer({"bootstrap.servers": boot, "group.id": "advertised",
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = None
    for _ in range(30):
        m = c.poll(1.0)
        if m is not None and not m.error():
            got = m.value()
            break
    c.close()
    return host, left == 0 and got == b"through the advertised host"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samsad", required=True)
    a = ap.parse_args()
    checks = Checks("advertised")
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return skip_or_fail(checks.note, "python3-confluent-kafka is not installed")
    if shutil.which("unshare") is None:
        return skip_or_fail(checks.note, "unshare (util-linux) is not installed", "a tool")
    nowhere = "samsa-nowhere.invalid"
    try:
        socket.getaddrinfo(nowhere, None)
        checks(False, f"{nowhere} must not resolve (RFC 6761), but it does here")
        return 1
    except socket.gaierror:
        pass
    work = tempfile.mkdtemp(prefix="samsa-advertised-")
    ok = False
    try:
        s = start(a.samsad, os.path.join(work, "nowhere"), nowhere)
        try:
            host, through = roundtrip(s.port, "nowhere")
            checks(host == "localhost",
                         f"a host name that does not resolve: Metadata advertises {host!r}")
            checks(through, "a client follows it to the broker: produce and consume")
        finally:
            checks(s.stop() is None, "samsad stops cleanly")
        warnings = [l for l in s.log().splitlines() if WARNING in l]
        checks(len(warnings) == 1 and "advertised.listeners" in warnings[0] and
                     nowhere in warnings[0],
                     f"one warning names the host and advertised.listeners: {warnings}")

        own = socket.gethostname()
        try:
            socket.getaddrinfo(own, None)
            resolves = True
        except socket.gaierror:
            resolves = False
        if not resolves:
            checks.note(f"this machine's host name {own!r} does not resolve: the second half "
                       "(a name that resolves) is covered by the first run's fallback only")
        else:
            s = start(a.samsad, os.path.join(work, "own"), None)
            try:
                host, through = roundtrip(s.port, "own")
                checks(host == own, f"a host name that resolves is advertised: {host!r}")
                checks(through, "and clients reach the broker through it")
            finally:
                checks(s.stop() is None, "samsad stops cleanly")
            checks(WARNING not in s.log(), "no warning when the name resolves")
        ok = not checks.failures
    finally:
        if ok:
            shutil.rmtree(work, ignore_errors=True)
        else:
            checks.note(f"work dir kept: {work}")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
