#!/usr/bin/env python3
"""Transactions in samsad (single node), with librdkafka (confluent-kafka) as the client:

- commit and abort: a read_committed consumer sees exactly the committed records, in order,
  and none of an aborted transaction; a read_uncommitted one sees both; ListOffsets with
  read_committed (the consumer's watermarks) stops at the last stable offset while a
  transaction is open;
- offsets sent in a transaction (send_offsets_to_transaction, TxnOffsetCommit) are committed
  with it, and not at all when it aborts;
- a zombie: a second producer with the same transactional.id fences the first, whose open
  transaction is aborted and whose commit fails;
- a producer that goes silent inside a transaction: the coordinator aborts it after
  transaction.timeout.ms and the last stable offset moves on (nothing hangs);
- Kafka's kafka-transactions tool: list, describe and describe-producers show an open
  transaction, and so does `samsactl partition describe` (open transactions, LSO lag); abort (WriteTxnMarkers from the admin client) ends it on its partition and
  the last stable offset moves;
- KIP-890's defence, with raw requests: a producer's batch that arrives after its transaction
  was aborted (without AddPartitionsToTxn for a new one) is refused with INVALID_TXN_STATE, and
  the partition's last stable offset does not stay behind (no hanging transaction);
- transaction version 2 with raw requests: Produce v12 adds its partition itself, EndTxn v5
  answers with the bumped epoch (and again to a retry at the old epoch), a late batch at the
  old epoch gets INVALID_PRODUCER_EPOCH;
- kill -9 of samsad in the middle of a transaction, and a clean restart: committed records stay
  visible, aborted ones stay hidden (the .txnindex files and __transaction_state are replayed),
  and the transaction that was open is aborted after its timeout.
"""

from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import admin_harness as h  # noqa: E402

TOPIC = "txn"
PARTS = 3


def consume(boot: str, isolation: str, topic: str = TOPIC, want: int | None = None,
            timeout: float = 20) -> list[str]:
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": boot, "group.id": f"reader-{time.time()}",
                  "isolation.level": isolation, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.subscribe([topic])
    got: list[str] = []
    eofs: set[int] = set()
    end = time.time() + timeout
    while time.time() < end:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == -191:  # _PARTITION_EOF
                eofs.add(m.partition())
                if len(eofs) == PARTS and (want is None or len(got) >= want):
                    break
            continue
        got.append(m.value().decode())
        if want is not None and len(got) >= want and len(eofs) == PARTS:
            break
    c.close()
    return got


def lso(boot: str, partition: int, topic: str = TOPIC) -> int:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": boot, "group.id": "lso",
                  "isolation.level": "read_committed"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
    finally:
        c.close()


def hw_of(boot: str, partition: int, topic: str = TOPIC) -> int:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": boot, "group.id": "hw",
                  "isolation.level": "read_uncommitted"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
    finally:
        c.close()


def producer(boot: str, tid: str, timeout_ms: int = 60000):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": boot, "transactional.id": tid,
                  "transaction.timeout.ms": timeout_ms, "linger.ms": 5})
    p.init_transactions(30)
    return p


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samsad", required=True)
    ap.add_argument("--samsactl", required=True)
    args = ap.parse_args()
    check = h.Checks("transactions")
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return h.missing(check, "confluent_kafka")
    why = h.kafka_tools_available()
    if why:
        return h.missing(check, why)
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    broker = h.Samsad(args.samsad, {
        "transaction.state.log.num.partitions": "8",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"})

    def body(b):
        boot = f"127.0.0.1:{b.port}"
        admin = AdminClient({"bootstrap.servers": boot})
        fs = admin.create_topics([NewTopic(TOPIC, PARTS, 1), NewTopic("input", 1, 1)])
        for f in fs.values():
            f.result(30)
        committed: list[str] = []
        aborted: list[str] = []

        # Commit, abort, commit with offsets, abort with offsets.
        p = producer(boot, "tx-main")
        grp = Consumer({"bootstrap.servers": boot, "group.id": "ctp"})
        for round_, (commit, offset) in enumerate([(True, None), (False, None), (True, 7),
                                                   (False, 9), (True, 11)]):
            p.begin_transaction()
            vals = [f"r{round_}-{i}" for i in range(30)]
            for i, v in enumerate(vals):
                p.produce(TOPIC, value=v, partition=i % PARTS)
            if offset is not None:
                p.send_offsets_to_transaction([TopicPartition("input", 0, offset)],
                                              grp.consumer_group_metadata(), 30)
            if commit:
                p.commit_transaction(30)
                committed += vals
            else:
                p.flush(30)
                p.abort_transaction(30)
                aborted += vals
        got = consume(boot, "read_committed", want=len(committed))
        check(sorted(got) == sorted(committed),
              f"read_committed sees exactly the {len(committed)} committed records "
              f"(got {len(got)}, aborted among them: {len(set(got) & set(aborted))})")
        per_part = {}
        for v in got:
            r, i = v[1:].split("-")
            per_part.setdefault(int(i) % PARTS, []).append((int(r), int(i)))
        check(all(x == sorted(x) for x in per_part.values()), "in order within each partition")
        unc = consume(boot, "read_uncommitted", want=len(committed) + len(aborted))
        check(len(unc) == len(committed) + len(aborted),
              f"read_uncommitted sees the aborted records too ({len(unc)})")
        off = grp.committed([TopicPartition("input", 0)], 10)[0].offset
        check(off == 11, f"offsets committed in transactions: the last committed one ({off})")

        # An open transaction holds the LSO; its commit releases it.
        p.begin_transaction()
        p.produce(TOPIC, value="open-0", partition=0)
        p.flush(30)
        # (librdkafka's default isolation is read_committed: ask for the HW explicitly.)
        hw = Consumer({"bootstrap.servers": boot, "group.id": "hw",
                       "isolation.level": "read_uncommitted"}).get_watermark_offsets(
            TopicPartition(TOPIC, 0), timeout=10)[1]
        stable = lso(boot, 0)
        check(stable < hw, f"read_committed end (LSO {stable}) stays below the HW ({hw}) "
                           "while a transaction is open")
        p.commit_transaction(30)
        committed.append("open-0")
        # EndTxn is answered once the decision is durable; the markers follow at once.
        t0 = time.time()
        while time.time() - t0 < 5 and lso(boot, 0) != hw + 1:
            time.sleep(0.05)
        check(lso(boot, 0) == hw + 1, f"after the commit the LSO passes the marker "
                                      f"({time.time() - t0:.2f} s)")

        # A zombie is fenced by a new producer with its transactional.id.
        z = producer(boot, "tx-zombie")
        z.begin_transaction()
        z.produce(TOPIC, value="zombie-0", partition=1)
        z.flush(30)
        aborted.append("zombie-0")
        n = producer(boot, "tx-zombie")  # fences z, aborts its transaction
        fenced = False
        try:
            z.commit_transaction(10)
        except KafkaException as e:
            fenced = True
            check(e.args[0].fatal() or e.args[0].txn_requires_abort(),
                  f"the zombie's commit fails ({e.args[0].name()})")
        check(fenced, "the zombie cannot commit")
        n.begin_transaction()
        n.produce(TOPIC, value="new-0", partition=1)
        n.commit_transaction(30)
        committed.append("new-0")

        # A silent producer: aborted after its timeout, the LSO moves on.
        s = producer(boot, "tx-silent", timeout_ms=2000)
        s.begin_transaction()
        s.produce(TOPIC, value="silent-0", partition=2)
        s.flush(30)
        aborted.append("silent-0")
        before = lso(boot, 2)
        t0 = time.time()
        while time.time() - t0 < 15 and lso(boot, 2) <= before:
            time.sleep(0.2)
        waited = time.time() - t0
        check(lso(boot, 2) > before, f"the coordinator aborted the silent transaction; the LSO "
                                     f"moved after {waited:.1f} s (timeout 2 s)")

        # The operator's tool.
        hung = producer(boot, "tx-hung", timeout_ms=60000)
        hung.begin_transaction()
        hung.produce(TOPIC, value="hung-0", partition=1)
        hung.flush(30)
        aborted.append("hung-0")
        start = lso(boot, 1)

        def txtool(*a):
            rc, out = h.tool("kafka-transactions", "--bootstrap-server", boot, *a)
            return rc, [line.split() for line in out.splitlines() if line.strip()]

        rc, rows = txtool("list")
        check(rc == 0 and any(r[0] == "tx-hung" and r[3] == "Ongoing" for r in rows[1:]),
              f"kafka-transactions list shows tx-hung Ongoing ({rows})")
        rc, rows = txtool("describe", "--transactional-id", "tx-hung")
        check(rc == 0 and len(rows) == 2 and rows[1][4] == "Ongoing" and
              rows[1][-1] == f"{TOPIC}-1",
              f"kafka-transactions describe: Ongoing on {TOPIC}-1 ({rows})")
        rc, rows = txtool("describe-producers", "--topic", TOPIC, "--partition", "1")
        open_at = [r for r in rows[1:] if r[-1] == str(start)]
        check(rc == 0 and len(open_at) == 1,
              f"describe-producers: one producer with a transaction open at {start} ({rows})")
        r = subprocess.run([args.samsactl, "--socket", os.path.join(b.work, "admin.sock"),
                            "partition", "describe", TOPIC], capture_output=True, text=True)
        line = [x for x in r.stdout.splitlines() if x.startswith("partition 1 transactions")]
        check(r.returncode == 0 and len(line) == 1 and " 1 open, last stable offset " +
              str(start) in line[0], f"samsactl partition describe shows the open transaction "
                                     f"and the LSO lag ({line})")
        rc, rows = txtool("abort", "--topic", TOPIC, "--partition", "1", "--start-offset",
                          str(start))
        check(rc == 0, f"kafka-transactions abort succeeds ({rows})")
        check(lso(boot, 1) > start, f"after abort the LSO of {TOPIC}-1 moved past {start}")

        # A late batch of an aborted transaction (raw requests, KIP-890's defence).
        sys.path.insert(0, os.path.join(os.path.dirname(HERE), "clients"))
        import kproto
        raw = kproto.Client("127.0.0.1", b.port, "late-batch", timeout=10)

        def until_ok(key, v, body, err_of, what):
            end = time.time() + 15
            while True:
                r = raw.call(key, v, body)
                e = err_of(r)
                if e == 0 or time.time() > end:
                    check(e == 0, f"{what}: error {e}")
                    return r
                time.sleep(0.1)

        r = until_ok(22, 4, {"TransactionalId": "tx-late", "TransactionTimeoutMs": 60000,
                             "ProducerId": -1, "ProducerEpoch": -1},
                     lambda r: r["ErrorCode"], "raw InitProducerId")
        pid, epoch = r["ProducerId"], r["ProducerEpoch"]

        def batch(seq):
            return {"batches": [{"attributes": 0x10, "producerId": pid, "producerEpoch": epoch,
                                 "baseSequence": seq,
                                 "records": [{"key": None, "value": f"late-{seq}"}]}]}

        def produce(seq):
            r = raw.call(0, 9, {"TransactionalId": "tx-late", "Acks": -1, "TimeoutMs": 10000,
                                "TopicData": [{"Name": TOPIC, "PartitionData": [
                                    {"Index": 2, "Records": batch(seq)}]}]})
            return r["Responses"][0]["PartitionResponses"][0]["ErrorCode"]

        until_ok(24, 3, {"V3AndBelowTransactionalId": "tx-late", "V3AndBelowProducerId": pid,
                         "V3AndBelowProducerEpoch": epoch,
                         "V3AndBelowTopics": [{"Name": TOPIC, "Partitions": [2]}]},
                 lambda r: r["ResultsByTopicV3AndBelow"][0]["ResultsByPartition"][0][
                     "PartitionErrorCode"], "raw AddPartitionsToTxn")
        check(produce(0) == 0, "the transaction's batch is taken (verified by the coordinator)")
        aborted.append("late-0")
        until_ok(26, 3, {"TransactionalId": "tx-late", "ProducerId": pid,
                         "ProducerEpoch": epoch, "Committed": False},
                 lambda r: r["ErrorCode"], "raw EndTxn(abort)")
        t0 = time.time()
        while time.time() - t0 < 5 and lso(boot, 2) < hw_of(boot, 2):
            time.sleep(0.05)
        late = produce(1)
        check(late == 48, f"a batch after the abort, in no transaction, is refused with "
                          f"INVALID_TXN_STATE ({late})")
        time.sleep(0.5)
        check(lso(boot, 2) == hw_of(boot, 2), "and the partition's LSO is not held back")

        # Transaction version 2 (KIP-890 part 2), raw: Produce v12 adds its partition itself,
        # EndTxn v5 bumps the epoch and answers with it; a late batch at the old epoch is
        # refused; a retried EndTxn at the old epoch gets the same answer.
        r = until_ok(22, 5, {"TransactionalId": "tx-v2", "TransactionTimeoutMs": 60000,
                             "ProducerId": -1, "ProducerEpoch": -1},
                     lambda r: r["ErrorCode"], "raw InitProducerId (tx-v2)")
        pid, epoch = r["ProducerId"], r["ProducerEpoch"]

        def produce_v12(seq, ep, value):
            body = {"TransactionalId": "tx-v2", "Acks": -1, "TimeoutMs": 10000,
                    "TopicData": [{"Name": TOPIC, "PartitionData": [
                        {"Index": 2, "Records": {"batches": [
                            {"attributes": 0x10, "producerId": pid, "producerEpoch": ep,
                             "baseSequence": seq,
                             "records": [{"key": None, "value": value}]}]}}]}]}
            end = time.time() + 15
            while True:
                r = raw.call(0, 12, body)
                e = r["Responses"][0]["PartitionResponses"][0]["ErrorCode"]
                if e not in (7, 19, 51) or time.time() > end:  # retriable: try again
                    return e
                time.sleep(0.1)

        e = produce_v12(0, epoch, "v2-committed")
        check(e == 0, f"Produce v12 adds its partition to the transaction itself ({e})")
        committed.append("v2-committed")
        r = until_ok(26, 5, {"TransactionalId": "tx-v2", "ProducerId": pid, "ProducerEpoch": epoch,
                             "Committed": True}, lambda r: r["ErrorCode"], "raw EndTxn v5 commit")
        check((r["ProducerId"], r["ProducerEpoch"]) == (pid, epoch + 1),
              f"EndTxn v5 answers with the bumped epoch ({r['ProducerId']}, {r['ProducerEpoch']} "
              f"after {epoch})")
        r = until_ok(26, 5, {"TransactionalId": "tx-v2", "ProducerId": pid,
                             "ProducerEpoch": epoch, "Committed": True},
                     lambda r: 0 if r["ErrorCode"] == 0 else -1 if r["ErrorCode"] == 51 else
                     r["ErrorCode"], "raw EndTxn v5 retried (CONCURRENT_TRANSACTIONS meanwhile)")
        check((r["ErrorCode"], r["ProducerId"], r["ProducerEpoch"]) == (0, pid, epoch + 1),
              f"a retried EndTxn at the old epoch gets the same answer ({r})")
        t0 = time.time()
        while time.time() - t0 < 5 and lso(boot, 2) < hw_of(boot, 2):
            time.sleep(0.05)
        e = produce_v12(1, epoch, "v2-late")
        check(e == 47, f"a late batch at the old epoch is refused with INVALID_PRODUCER_EPOCH ({e})")
        e = produce_v12(0, epoch + 1, "v2-aborted")
        check(e == 0, f"the next transaction (epoch {epoch + 1}, sequence 0) is taken ({e})")
        aborted.append("v2-aborted")
        r = until_ok(26, 5, {"TransactionalId": "tx-v2", "ProducerId": pid,
                             "ProducerEpoch": epoch + 1, "Committed": False},
                     lambda r: r["ErrorCode"], "raw EndTxn v5 abort")
        check(r["ProducerEpoch"] == epoch + 2, f"an abort bumps the epoch too ({r})")

        # kill -9 in the middle of a transaction.
        k = producer(boot, "tx-killed", timeout_ms=3000)
        k.begin_transaction()
        k.produce(TOPIC, value="killed-0", partition=0)
        k.flush(30)
        aborted.append("killed-0")
        b.kill()
        b.start()
        check(bool(glob.glob(os.path.join(b.work, "**", "*.txnindex"), recursive=True)),
              "aborted transactions are indexed in .txnindex files")
        t0 = time.time()
        got = []
        while time.time() - t0 < 20:
            got = consume(boot, "read_committed", want=len(committed), timeout=5)
            if sorted(got) == sorted(committed):
                break
        check(sorted(got) == sorted(committed),
              f"after kill -9: exactly the committed records ({len(got)} of {len(committed)}), "
              f"the open transaction aborted by its timeout after "
              f"{time.time() - t0:.1f} s")
        b.restart()
        got = consume(boot, "read_committed", want=len(committed))
        check(sorted(got) == sorted(committed), "after a clean restart: the same")

    return h.run_checked(check, broker, body)


if __name__ == "__main__":
    sys.exit(main())
