#!/usr/bin/env python3
"""A TCP proxy between Kafka clients and a broker that saves the request frames it forwards.

Every client->broker frame is forwarded unchanged; the first frame of each distinct
(api key, api version) is saved, without its 4-byte size prefix, as
`OUT/<seq:03d>_<ApiName>_v<version>.bin` (seq counts saved files in order of first sight), and
`OUT/index.tsv` lists every (api, version) seen with how often, the header version, client id
and the saved file. Responses are forwarded untouched and not parsed.

For the client to stay on the proxy after bootstrap, the broker must advertise the proxy's port
(perf/vs-kafka/kafka.sh honours KAFKA_ADVERTISED_PORT).

  kcapture.py --listen PORT --upstream HOST:PORT --out DIR    (runs until SIGTERM/SIGINT)
Also used as a module by tests/integration/run_client_test.py (class Capture).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import struct
import sys
import threading

# api key -> (name, first flexible version or None), from Kafka 4.1's message schemas.
APIS = {
    0: ("Produce", 9), 1: ("Fetch", 12), 2: ("ListOffsets", 6), 3: ("Metadata", 9),
    4: ("LeaderAndIsr", 4), 5: ("StopReplica", 2), 6: ("UpdateMetadata", 6),
    7: ("ControlledShutdown", 3), 8: ("OffsetCommit", 8), 9: ("OffsetFetch", 6),
    10: ("FindCoordinator", 3), 11: ("JoinGroup", 6), 12: ("Heartbeat", 4),
    13: ("LeaveGroup", 4), 14: ("SyncGroup", 4), 15: ("DescribeGroups", 5),
    16: ("ListGroups", 3), 17: ("SaslHandshake", None), 18: ("ApiVersions", 3),
    19: ("CreateTopics", 5), 20: ("DeleteTopics", 4), 21: ("DeleteRecords", 2),
    22: ("InitProducerId", 2), 23: ("OffsetForLeaderEpoch", 4), 24: ("AddPartitionsToTxn", 3),
    25: ("AddOffsetsToTxn", 3), 26: ("EndTxn", 3), 27: ("WriteTxnMarkers", 1),
    28: ("TxnOffsetCommit", 3), 29: ("DescribeAcls", 2), 30: ("CreateAcls", 2),
    31: ("DeleteAcls", 2), 32: ("DescribeConfigs", 4), 33: ("AlterConfigs", 2),
    34: ("AlterReplicaLogDirs", 2), 35: ("DescribeLogDirs", 2), 36: ("SaslAuthenticate", 2),
    37: ("CreatePartitions", 2), 38: ("CreateDelegationToken", 2),
    39: ("RenewDelegationToken", 2), 40: ("ExpireDelegationToken", 2),
    41: ("DescribeDelegationToken", 2), 42: ("DeleteGroups", 2), 43: ("ElectLeaders", 2),
    44: ("IncrementalAlterConfigs", 1), 45: ("AlterPartitionReassignments", 0),
    46: ("ListPartitionReassignments", 0), 47: ("OffsetDelete", None),
    48: ("DescribeClientQuotas", 1), 49: ("AlterClientQuotas", 1),
    50: ("DescribeUserScramCredentials", 0), 51: ("AlterUserScramCredentials", 0),
    55: ("DescribeQuorum", 0), 57: ("UpdateFeatures", 0), 60: ("DescribeCluster", 0),
    61: ("DescribeProducers", 0), 64: ("UnregisterBroker", 0), 65: ("DescribeTransactions", 0),
    66: ("ListTransactions", 0), 68: ("ConsumerGroupHeartbeat", 0),
    69: ("ConsumerGroupDescribe", 0), 71: ("GetTelemetrySubscriptions", 0),
    72: ("PushTelemetry", 0), 74: ("ListConfigResources", 0),
    75: ("DescribeTopicPartitions", 0), 76: ("ShareGroupHeartbeat", 0),
    77: ("ShareGroupDescribe", 0), 78: ("ShareFetch", 0), 79: ("ShareAcknowledge", 0),
    88: ("StreamsGroupHeartbeat", 0), 89: ("StreamsGroupDescribe", 0),
}

MAX_FRAME = 100 * 1024 * 1024


def api_name(key: int) -> str:
    return APIS.get(key, (f"Api{key}", None))[0]


def header_version(key: int, version: int) -> int:
    """Request header version: 2 (with tagged fields) from the API's first flexible version,
    else 1; ControlledShutdown v0 alone used header v0."""
    if key == 7 and version == 0:
        return 0
    flex = APIS.get(key, (None, None))[1]
    return 2 if flex is not None and version >= flex else 1


class Capture:
    def __init__(self, listen_port: int, upstream: tuple[str, int], out_dir: str,
                 listen_host: str = "127.0.0.1"):
        self.upstream = upstream
        self.out_dir = out_dir
        os.makedirs(out_dir, exist_ok=True)
        self.lock = threading.Lock()
        self.seen: dict[tuple[int, int], dict] = {}
        self.frames = 0
        self.errors: list[str] = []
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((listen_host, listen_port))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.stopping = False
        self.conns: list[socket.socket] = []

    def start(self) -> "Capture":
        threading.Thread(target=self._accept_loop, name="kcapture-accept", daemon=True).start()
        return self

    def stop(self):
        self.stopping = True
        try:
            self.sock.close()
        except OSError:
            pass
        with self.lock:
            for c in self.conns:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self._write_index()

    def _accept_loop(self):
        while not self.stopping:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            try:
                broker = socket.create_connection(self.upstream, timeout=10)
                broker.settimeout(None)
            except OSError as e:
                self.errors.append(f"upstream {self.upstream}: {e}")
                client.close()
                continue
            for s in (client, broker):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                self.conns += [client, broker]
            threading.Thread(target=self._requests, args=(client, broker), daemon=True,
                             name="kcapture-req").start()
            threading.Thread(target=self._pipe, args=(broker, client), daemon=True,
                             name="kcapture-resp").start()

    @staticmethod
    def _recv_exact(s: socket.socket, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            chunk = s.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def _requests(self, src: socket.socket, dst: socket.socket):
        try:
            while True:
                size_b = self._recv_exact(src, 4)
                if size_b is None:
                    break
                (size,) = struct.unpack(">i", size_b)
                if size < 8 or size > MAX_FRAME:
                    self.errors.append(f"implausible request size {size}")
                    break
                frame = self._recv_exact(src, size)
                if frame is None:
                    break
                self._record(frame)
                dst.sendall(size_b + frame)
        except OSError:
            pass
        finally:
            self._close(src, dst)

    def _pipe(self, src: socket.socket, dst: socket.socket):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            self._close(src, dst)

    @staticmethod
    def _close(*socks):
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _record(self, frame: bytes):
        key, version, _corr = struct.unpack_from(">hhi", frame, 0)
        client_id = ""
        if not (key == 7 and version == 0) and len(frame) >= 10:
            (n,) = struct.unpack_from(">h", frame, 8)
            if n > 0:
                client_id = frame[10:10 + n].decode("utf-8", "replace")
        with self.lock:
            self.frames += 1
            entry = self.seen.get((key, version))
            if entry is not None:
                entry["count"] += 1
                return
            seq = len(self.seen)
            name = f"{seq:03d}_{api_name(key)}_v{version}.bin"
            with open(os.path.join(self.out_dir, name), "wb") as f:
                f.write(frame)
            self.seen[(key, version)] = {"seq": seq, "file": name, "count": 1, "size": len(frame),
                                         "client_id": client_id}
            self._write_index()

    def _write_index(self):
        rows = sorted(self.seen.items(), key=lambda kv: kv[1]["seq"])
        lines = ["seq\tapi_key\tapi\tversion\theader_version\tframes_seen\tsaved_bytes\t"
                 "client_id\tfile"]
        for (key, ver), e in rows:
            lines.append(f"{e['seq']:03d}\t{key}\t{api_name(key)}\t{ver}\t"
                         f"{header_version(key, ver)}\t{e['count']}\t{e['size']}\t"
                         f"{e['client_id']}\t{e['file']}")
        tmp = os.path.join(self.out_dir, "index.tsv.tmp")
        with open(tmp, "w") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(tmp, os.path.join(self.out_dir, "index.tsv"))

    def versions(self) -> dict[str, list[int]]:
        """API name -> sorted versions requested (the per-client version matrix)."""
        out: dict[str, list[int]] = {}
        with self.lock:
            for key, ver in sorted(self.seen):
                out.setdefault(api_name(key), []).append(ver)
        return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--listen", type=int, required=True, help="port to listen on (127.0.0.1)")
    ap.add_argument("--upstream", required=True, help="broker HOST:PORT")
    ap.add_argument("--out", required=True, help="directory for the captured frames")
    a = ap.parse_args()
    host, port = a.upstream.rsplit(":", 1)
    cap = Capture(a.listen, (host, int(port)), a.out).start()
    print(f"kcapture: 127.0.0.1:{cap.port} -> {a.upstream}, frames into {a.out}", flush=True)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    cap.stop()
    for api, vers in cap.versions().items():
        print(f"{api}: {vers}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
