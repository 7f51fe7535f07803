#!/usr/bin/env python3
"""Incremental fetch sessions (KIP-227) against samsad, with hand-encoded Fetch requests:

- a full fetch with epoch 0 gets a session id other than 0; epoch -1 gets none;
- an incremental fetch carries only changed partitions, and the answer only partitions with
  records, errors or moved offsets (an idle partition is left out; one that gets a record comes
  back; a forgotten one never again);
- a wrong epoch gets INVALID_FETCH_SESSION_EPOCH, and the session still works with the right one;
- with one session slot, a new session evicts an idle one, whose next incremental fetch gets
  FETCH_SESSION_ID_NOT_FOUND; a closed session (epoch -1) is gone too.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "clients"))
import admin_harness as h  # noqa: E402
import kproto  # noqa: E402

FETCH = 1
PRODUCE = 0
VERSION = 12  # names topics by name; sessions exist from v7
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71


class Client(kproto.Client):
    def __init__(self, port: int):
        super().__init__("127.0.0.1", port, "fetch-sessions-test", timeout=30)

    def fetch(self, session_id: int, epoch: int, parts: list[tuple[str, int, int]],
              forgotten: list[tuple[str, int]] | None = None, max_wait: int = 0,
              max_bytes: int = 50 << 20) -> dict:
        topics: dict[str, list] = {}
        for t, p, off in parts:
            topics.setdefault(t, []).append({"Partition": p, "FetchOffset": off,
                                             "PartitionMaxBytes": 1 << 20})
        ftopics: dict[str, list] = {}
        for t, p in forgotten or []:
            ftopics.setdefault(t, []).append(p)
        return self.call(FETCH, VERSION, {
            "ReplicaId": -1, "MaxWaitMs": max_wait, "MinBytes": 0, "MaxBytes": max_bytes,
            "IsolationLevel": 0, "SessionId": session_id, "SessionEpoch": epoch,
            "Topics": [{"Topic": t, "Partitions": ps} for t, ps in topics.items()],
            "ForgottenTopicsData": [{"Topic": t, "Partitions": ps} for t, ps in ftopics.items()],
            "RackId": ""})

    def produce(self, topic: str, partition: int, value: bytes) -> None:
        batch = {"baseOffset": 0, "baseTimestamp": int(time.time() * 1000),
                 "records": [{"key": None, "value": value.decode(), "headers": []}]}
        r = self.call(PRODUCE, 9, {"Acks": -1, "TimeoutMs": 10000, "TopicData": [
            {"Name": topic, "PartitionData": [{"Index": partition,
                                               "Records": {"batches": [batch]}}]}]})
        err = r["Responses"][0]["PartitionResponses"][0]["ErrorCode"]
        assert err == 0, f"produce error {err}"


def answered(resp: dict) -> set[tuple[str, int]]:
    return {(t["Topic"], p["PartitionIndex"]) for t in resp["Responses"] for p in t["Partitions"]}


def records_in(resp: dict, topic: str, partition: int) -> int:
    for t in resp["Responses"]:
        for p in t["Partitions"]:
            if t["Topic"] == topic and p["PartitionIndex"] == partition:
                recs = p.get("Records") or {}
                return sum(len(b.get("records", [])) for b in recs.get("batches", []))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samsad", required=True)
    args = ap.parse_args()
    check = h.Checks("fetch_sessions")
    broker = h.Samsad(args.samsad, {"samsa.reactors": "1",
                                    "max.incremental.fetch.session.cache.slots": "1",
                                    "samsa.fetch.session.eviction.ms": "500"})
    try:
        c = Client(broker.port)
        err = c.create_topic("fs", 3)
        check(err == 0, f"topic created ({err})")
        for p in range(3):
            c.produce("fs", p, f"first-{p}".encode())
        parts = [("fs", 0, 0), ("fs", 1, 0), ("fs", 2, 0)]

        none = c.fetch(0, -1, parts)
        check(none["SessionId"] == 0, "epoch -1 (sessionless) gets session id 0")
        full = c.fetch(0, 0, parts)
        sid = full["SessionId"]
        check(sid != 0, f"a full fetch with epoch 0 gets a session id ({sid})")
        check(answered(full) == {("fs", 0), ("fs", 1), ("fs", 2)}, "the full answer has all three")

        # Move partition 0 past its record; nothing else changed.
        inc = c.fetch(sid, 1, [("fs", 0, 1)])
        check(inc["ErrorCode"] == 0, f"incremental fetch accepted ({inc['ErrorCode']})")
        check(inc["SessionId"] == sid, "the answer names the session")
        # Partitions 1 and 2 still have their records at offset 0 (the session remembers offset
        # 0): they are answered with them; partition 0 has nothing new and its offsets did not
        # move since the full answer, so it is left out.
        check(answered(inc) == {("fs", 1), ("fs", 2)},
              f"only partitions with records are answered: {sorted(answered(inc))}")
        inc = c.fetch(sid, 2, [("fs", 1, 1), ("fs", 2, 1)])
        check(answered(inc) == set(), f"nothing changed, nothing answered: {sorted(answered(inc))}")

        c.produce("fs", 2, b"second-2")
        inc = c.fetch(sid, 3, [])
        check(answered(inc) == {("fs", 2)}, f"a new record brings its partition back: "
                                             f"{sorted(answered(inc))}")
        check(records_in(inc, "fs", 2) == 1, "with that record")

        bad = c.fetch(sid, 99, [])
        check(bad["ErrorCode"] == INVALID_FETCH_SESSION_EPOCH,
              f"a wrong epoch gets INVALID_FETCH_SESSION_EPOCH ({bad['ErrorCode']})")
        inc = c.fetch(sid, 4, [("fs", 2, 2)], forgotten=[("fs", 1)])
        check(inc["ErrorCode"] == 0, "the right epoch still works after a wrong one")
        c.produce("fs", 1, b"second-1")
        inc = c.fetch(sid, 5, [])
        check(("fs", 1) not in answered(inc), "a forgotten partition is not answered any more")

        # One slot: once the session has been idle past the eviction time, another client's
        # full fetch takes its place.
        time.sleep(0.8)
        other = Client(broker.port)
        o = other.fetch(0, 0, [("fs", 0, 0)])
        check(o["SessionId"] not in (0, sid), f"the newcomer gets a session ({o['SessionId']})")
        gone = c.fetch(sid, 6, [])
        check(gone["ErrorCode"] == FETCH_SESSION_ID_NOT_FOUND,
              f"the evicted session's next fetch gets FETCH_SESSION_ID_NOT_FOUND "
              f"({gone['ErrorCode']})")
        check(answered(gone) == set(), "with no partitions")

        # Closing with epoch -1 removes the session (and answers as a sessionless fetch).
        closed = other.fetch(o["SessionId"], -1, [("fs", 0, 0)])
        check(closed["SessionId"] == 0 and closed["ErrorCode"] == 0, "epoch -1 closes the session")
        after = other.fetch(o["SessionId"], 1, [])
        check(after["ErrorCode"] == FETCH_SESSION_ID_NOT_FOUND, "a closed session is gone")

        # Fairness: under a response limit that only the first partition's batch fits, the
        # partition that brought records goes to the back of the session, so successive
        # fetches take turns instead of starving the others.
        err = c.create_topic("rot", 3)
        check(err == 0, f"topic rot created ({err})")
        for p in range(3):
            c.produce("rot", p, b"x" * 200)
        rot = [("rot", 0, 0), ("rot", 1, 0), ("rot", 2, 0)]
        full = c.fetch(0, 0, rot, max_bytes=1)
        rsid = full["SessionId"]
        turns = []
        for epoch in (1, 2, 3):
            inc = c.fetch(rsid, epoch, [], max_bytes=1)
            turns.append([p for p in range(3) if records_in(inc, "rot", p) > 0])
        check(sorted(t[0] for t in turns if len(t) == 1) == [0, 1, 2] and
              all(len(t) == 1 for t in turns),
              f"one partition per limited answer, each in turn: {turns}")
    except Exception as e:  # noqa: BLE001 - report, then fail
        check(False, f"{type(e).__name__}: {e}")
        print(broker.log()[-4000:])
    finally:
        check(broker.stop() == 0, "samsad stopped cleanly")
    return check.finish()


if __name__ == "__main__":
    h.main_guard(main)
