#!/usr/bin/python3
"""The fault test's librdkafka clients (Debian's python3-confluent-kafka), each its own process
so that the test's own work does not pace them. Both stop once --stop-file exists.

  fault_clients.py produce --bootstrap B --topic T --partitions N --out FILE --stop-file F
                           [--rate R] [--tag rdk] [--delivery-timeout-ms 60000]
                           [--start-at UNIX_SECONDS]
  fault_clients.py consume --bootstrap B --topic T --partitions N --out FILE --stop-file F
                           [--mode group|assign] [--group G]

produce: an idempotent acks=all producer; record i goes to partition i % N with the value
"<tag>.<instance>|<partition>|<sequence>|<padding>", sequences counting per partition from 0 for
each producer instance. --out gets one line per delivery report:
  A <tag>.<instance> <partition> <offset> <sequence> <unix ms>     acknowledged
  F <tag>.<instance> <partition> <sequence> <error name>           failed
  S <tag> sent=<n>                                                 records sent so far
--start-at holds the producer back until that moment (several processes started at once ask
for their producer ids together). A fatal error of the idempotent producer (e.g. after the broker lost its sequence state) ends the
instance: it is flushed and a new one (instance + 1, a new producer id) goes on; the out file
gets "X <tag>.<instance> <error>".

consume: --mode group subscribes with group.id (a consumer group, what the acceptance asks);
--mode assign assigns every partition from offset 0 with no group (for brokers that do not
coordinate groups yet). --out gets "C <partition> <offset> <value's first three fields>" for
every record seen, and "E <error>" for errors.
"""

import argparse
import os
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

PAD = "x" * 40


def produce(a) -> int:
    out = open(a.out, "a", buffering=1 << 16)
    instance = 0
    seqs = [0] * a.partitions
    fatal = [None]

    def report(err, msg, tag, p, seq):
        if err is None:
            out.write(f"A {tag} {msg.partition()} {msg.offset()} {seq} "
                      f"{int(time.time() * 1000)}\n")
        else:
            out.write(f"F {tag} {p} {seq} {err.name()}\n")

    def on_error(err):
        if err.fatal():
            fatal[0] = err

    def make():
        conf = {"bootstrap.servers": a.bootstrap, "enable.idempotence": True, "acks": "all",
                "linger.ms": 5, "message.timeout.ms": a.delivery_timeout_ms, "error_cb": on_error}
        if os.environ.get("SAMSA_RDKAFKA_DEBUG"):
            # librdkafka's own trace into the client's log (e.g. "msg,eos,metadata,protocol").
            conf["debug"] = os.environ["SAMSA_RDKAFKA_DEBUG"]
        if not a.client_defaults:
            # An isolated leader's connection is not reset: only the request timeout sends the
            # producer elsewhere (it bounds isolation failovers; librdkafka's default is 30 s).
            conf.update({"reconnect.backoff.max.ms": 1000,
                         "request.timeout.ms": min(5000, a.delivery_timeout_ms // 2)})
        return Producer(conf)

    if a.start_at:
        time.sleep(max(0.0, a.start_at - time.time()))
    p = make()
    i = 0
    start = time.time()
    last_flush = start
    while not os.path.exists(a.stop_file):
        try:
            if fatal[0] is not None:
                raise KafkaException(fatal[0])
            ahead = i / a.rate - (time.time() - start)
            if ahead < -1:  # blocked for a while (BufferError): no burst to make up for it
                start -= ahead + 1
            if ahead > 0:
                p.poll(min(ahead, 0.05))
                continue
            part = i % a.partitions
            seq = seqs[part]
            tag = f"{a.tag}.{instance}"
            try:
                p.produce(a.topic, value=f"{tag}|{part}|{seq}|{PAD}".encode(), partition=part,
                          on_delivery=lambda err, msg, t=tag, q=part, s=seq:
                          report(err, msg, t, q, s))
            except BufferError:
                p.poll(0.05)
                continue
            seqs[part] += 1
            i += 1
            p.poll(0)
        except KafkaException as e:
            # confluent-kafka raises a fatal error from poll()/produce(); the instance is done:
            # its queued records fail (reported), a new producer id goes on.
            err = e.args[0] if e.args else None
            if err is None or not hasattr(err, "fatal") or not err.fatal():
                raise
            out.write(f"X {a.tag}.{instance} {err.name()}\n")
            try:
                p.flush(5)
            except KafkaException:
                pass
            instance += 1
            seqs = [0] * a.partitions
            fatal[0] = None
            p = make()
        if time.time() - last_flush > 0.1:
            out.write(f"S {a.tag} sent={i}\n")
            out.flush()
            last_flush = time.time()
    try:
        left = p.flush(a.delivery_timeout_ms / 1000 + 5)
    except KafkaException as e:
        left = str(e.args[0].name() if e.args else e)
    out.write(f"D {a.tag}.{instance} sent={i} unfinished={left}\n")
    out.close()
    return 0


def consume(a) -> int:
    out = open(a.out, "a", buffering=1 << 16)
    conf = {"bootstrap.servers": a.bootstrap, "enable.auto.commit": True,
            "auto.offset.reset": "earliest", "enable.partition.eof": False,
            "group.id": a.group, "session.timeout.ms": 10000,
            "reconnect.backoff.max.ms": 1000}
    if os.environ.get("SAMSA_FAULT_CONSUMER_DEBUG"):  # e.g. fetch,metadata: to its log
        conf["debug"] = os.environ["SAMSA_FAULT_CONSUMER_DEBUG"]
    c = Consumer(conf)
    if a.mode == "group":
        c.subscribe([a.topic])
    else:
        c.assign([TopicPartition(a.topic, q, 0) for q in range(a.partitions)])
    last_flush = time.time()
    while not os.path.exists(a.stop_file):
        for m in c.consume(500, 0.2):
            if m.error():
                if m.error().code() != KafkaError._PARTITION_EOF:
                    out.write(f"E {m.error().name()}\n")
                continue
            fields = m.value().decode(errors="replace").split("|")
            out.write(f"C {m.partition()} {m.offset()} {'|'.join(fields[:3])}\n")
        if time.time() - last_flush > 0.1:
            out.flush()
            last_flush = time.time()
    c.close()
    out.close()
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["produce", "consume"])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--partitions", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--stop-file", required=True)
    ap.add_argument("--rate", type=float, default=200)
    ap.add_argument("--tag", default="rdk")
    ap.add_argument("--delivery-timeout-ms", type=int, default=60000)
    ap.add_argument("--start-at", type=float, default=0)
    ap.add_argument("--client-defaults", action="store_true",
                    help="librdkafka's own request.timeout.ms and reconnect.backoff.max.ms")
    ap.add_argument("--mode", choices=["group", "assign"], default="group")
    ap.add_argument("--group", default="fault-test")
    a = ap.parse_args()
    return produce(a) if a.what == "produce" else consume(a)


if __name__ == "__main__":
    sys.exit(main())
