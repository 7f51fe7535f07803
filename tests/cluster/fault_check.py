#!/usr/bin/python3
"""The fault test's history checker: what the producers were told (their out files, see
fault_clients.py and tests/clients/java/FaultProducer.java), what the consumer saw during the run,
and what a final drain read from every partition (offset 0 to its end).

A record is (producer instance, partition, sequence), carried in its value. Failures:
  lost          acknowledged, not in the drain
  moved         acknowledged at one offset, in the drain at another (its acknowledged place was
                rewritten)
  duplicated    in the drain more than once (idempotence)
  reordered     within a partition, a producer instance's records in the drain out of sequence
                order, or acknowledged at offsets out of sequence order
  seen_lost     the consumer saw it at some offset during the run and the drain does not hold it
                there (a record served, then taken back)

An acknowledgement may carry no offset ("None"): librdkafka acknowledges a batch implicitly,
offset unknown, when a later batch of the same idempotent producer is acknowledged while the
earlier one was still waiting for its retry (rd_kafka_dr_implicit_ack). Such a record must still
be in the drain exactly once; only where it sits cannot be checked.

  fault_check.py --selftest      checks the checker on small made-up histories
"""

from __future__ import annotations

import sys
from collections import defaultdict


def parse_producer(path: str):
    acked, failed, fatal, sent = {}, set(), [], 0
    with open(path, errors="replace") as f:
        for line in f:
            w = line.split()
            if not w:
                continue
            if w[0] == "A" and len(w) == 6:
                off = None if w[3] == "None" else int(w[3])
                acked[(w[1], int(w[2]), int(w[4]))] = (off, int(w[5]))
            elif w[0] == "F" and len(w) >= 4:
                failed.add((w[1], int(w[2]), int(w[3])))
            elif w[0] == "X":
                fatal.append(" ".join(w[1:]))
            elif w[0] in ("S", "D") and len(w) >= 3:  # progress, done: records sent so far
                sent = max(sent, int(w[2].split("=")[1]))
    return acked, failed, fatal, sent


def parse_seen(path: str):
    """[(partition, offset, key)] the consumer saw, and its error lines counted by name."""
    seen, errors = [], defaultdict(int)
    with open(path, errors="replace") as f:
        for line in f:
            w = line.split()
            if len(w) == 4 and w[0] == "C":
                seen.append((int(w[1]), int(w[2]), key_of(w[3])))
            elif len(w) >= 2 and w[0] == "E":
                errors[w[1]] += 1
    return seen, dict(errors)


def key_of(value: str):
    """(instance tag, partition, sequence) from "tag|partition|sequence[|...]"; None if not ours."""
    f = value.split("|")
    try:
        return (f[0], int(f[1]), int(f[2]))
    except (IndexError, ValueError):
        return None


def check(acked: dict, drained: dict[int, list[tuple[int, str]]], seen: list, samples: int = 5):
    """acked: key -> (offset or None, ms); drained: partition -> [(offset, value)] in log order;
    seen: [(partition, offset, key)]. Returns (figures, failures) where failures maps a kind to
    (count, a few examples)."""
    where = defaultdict(list)  # key -> [(partition, offset)]
    by_offset = {}
    order = defaultdict(list)  # (tag, partition) -> sequences in log order
    for p, recs in drained.items():
        for off, value in recs:
            k = key_of(value)
            by_offset[(p, off)] = k
            if k is None:
                continue
            where[k].append((p, off))
            order[(k[0], p)].append(k[2])
    fails = defaultdict(list)
    for k, (off, _) in sorted(acked.items()):
        if k not in where:
            fails["lost"].append(f"{k} acknowledged at offset {off}")
        elif off is not None and (k[1], off) not in where[k]:
            fails["moved"].append(f"{k} acknowledged at offset {off}, drained at {where[k]}")
    for k, places in sorted(where.items()):
        if len(places) > 1:
            fails["duplicated"].append(f"{k} at {places}")
    for (tag, p), seqs in sorted(order.items()):
        bad = [(a, b) for a, b in zip(seqs, seqs[1:]) if b <= a]
        if bad:
            fails["reordered"].append(f"{tag} partition {p}: sequence {bad[0][0]} then "
                                      f"{bad[0][1]} ({len(bad)} such steps)")
    acked_order = defaultdict(list)
    for (tag, p, seq), (off, _) in acked.items():
        if off is not None:
            acked_order[(tag, p)].append((seq, off))
    for (tag, p), pairs in sorted(acked_order.items()):
        pairs.sort()
        bad = [(a, b) for a, b in zip(pairs, pairs[1:]) if b[1] <= a[1]]
        if bad:
            fails["reordered"].append(f"{tag} partition {p}: acknowledged (seq, offset) "
                                      f"{bad[0][0]} then {bad[0][1]}")
    seen_lost = set()
    for p, off, k in seen:
        if by_offset.get((p, off), "missing") != k:
            seen_lost.add((p, off, k))
    for p, off, k in sorted(seen_lost, key=str):
        now = by_offset.get((p, off), "nothing")
        fails["seen_lost"].append(f"{k} seen at partition {p} offset {off}; the drain has {now} "
                                  f"there")
    figures = {"drained": sum(len(r) for r in drained.values()),
               "distinct_seen": len({(p, o) for p, o, _ in seen}),
               "acked_without_offset": sum(off is None for off, _ in acked.values())}
    for kind in ("lost", "moved", "duplicated", "reordered", "seen_lost"):
        figures[kind] = len(fails.get(kind, []))
    return figures, {k: (len(v), v[:samples]) for k, v in fails.items() if v}


def selftest() -> int:
    def v(tag, p, s):
        return f"{tag}|{p}|{s}|xx"
    acked = {("a.0", 0, 0): (0, 1), ("a.0", 0, 1): (1, 2), ("a.0", 0, 2): (2, 3)}
    good = {0: [(0, v("a.0", 0, 0)), (1, v("a.0", 0, 1)), (2, v("a.0", 0, 2)),
                (3, v("a.0", 0, 3))]}
    seen = [(0, 0, ("a.0", 0, 0)), (0, 3, ("a.0", 0, 3))]
    cases = [
        ("clean", good, seen, set()),
        ("lost", {0: good[0][:2]}, [], {"lost"}),
        ("moved", {0: [(0, v("a.0", 0, 0)), (1, v("a.0", 0, 2)), (2, v("a.0", 0, 1))]}, [],
         {"moved", "reordered"}),
        ("duplicated", {0: good[0][:3] + [(3, v("a.0", 0, 2))]}, [], {"duplicated",
                                                                      "reordered"}),
        ("seen then lost", {0: good[0][:3]}, seen, {"seen_lost"}),
        ("seen then replaced", {0: good[0][:3] + [(3, v("b.0", 0, 0))]}, seen, {"seen_lost"}),
    ]
    ok = True
    for name, drained, s, want in cases:
        _, fails = check(acked, drained, s)
        got = set(fails)
        print(f"selftest {name}: {'ok' if got == want else 'WRONG'} {sorted(got)}")
        ok &= got == want
    bad_ack = dict(acked)
    bad_ack[("a.0", 0, 3)] = (1, 4)  # seq 3 acknowledged below seq 2's offset
    _, fails = check(bad_ack, good, [])
    print(f"selftest acknowledged out of order: {'ok' if 'reordered' in fails else 'WRONG'}")
    ok &= "reordered" in fails
    implicit = dict(acked)
    implicit[("a.0", 0, 3)] = (None, 4)  # acknowledged implicitly: in the drain, place unknown
    for name, drained, want in (("implicit ack held", good, set()),
                                ("implicit ack lost", {0: good[0][:3]}, {"lost"})):
        _, fails = check(implicit, drained, [])
        print(f"selftest {name}: {'ok' if set(fails) == want else 'WRONG'} {sorted(fails)}")
        ok &= set(fails) == want
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1:] == ["--selftest"]:
        sys.exit(selftest())
    print(__doc__)
    sys.exit(2)
