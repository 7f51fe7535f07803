#!/usr/bin/env python3
"""Golden responses: runs one deterministic scenario of Kafka requests (golden_scenario.py)
against a broker, records every request and response as JSON, and compares two recordings
field by field.

  kgolden.py capture --out DIR            start Apache Kafka (perf/vs-kafka/kafka.sh) on a free
                                          port, run the scenario, write DIR/NNN_label.json
  kgolden.py run --samsad PATH --out DIR  the same against samsad (for looking at its answers)
  kgolden.py compare GOLDEN ACTUAL        compare two recordings (rules below)
  kgolden.py test --samsad PATH           run against samsad and compare with the committed
                                          Kafka capture; exit 0 when every difference is known
  kgolden.py recheck                      capture Apache Kafka again into a temporary directory
                                          and compare with the committed capture (no
                                          difference allowed: the capture is reproducible)
  kgolden.py show FILE.json               print one step without its raw frames

Comparison: golden/normalise.rules says which fields are not compared literally (throttle
times, ids a broker hands out, host ports...), golden/known_differences.txt lists differences
that are known, each with its reason. Every other difference fails `test`. Known entries that
no longer match anything are reported as stale.

Only the standard library; the message codecs come from net/kafka/schema via kproto.py.
"""

from __future__ import annotations

import argparse
import json
import re
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import admin_harness as h  # noqa: E402  (starting and stopping samsad)
import golden_scenario  # noqa: E402
import kproto  # noqa: E402

KAFKA_SH = os.path.join(ROOT, "perf", "vs-kafka", "kafka.sh")
GOLDEN_DIR = os.path.join(ROOT, "tests", "integration", "golden")
CAPTURE_DIR = os.path.join(GOLDEN_DIR, "kafka-4.1.1")
RULES = os.path.join(GOLDEN_DIR, "normalise.rules")
KNOWN = os.path.join(GOLDEN_DIR, "known_differences.txt")
CLIENT_ID = "samsa-golden"


_GLOBS: dict[str, re.Pattern] = {}


def glob(text: str, pattern: str) -> bool:
    """fnmatch without character classes: only * and ? are special, so that paths with [] and
    [Name=x] can be written as they print."""
    rx = _GLOBS.get(pattern)
    if rx is None:
        rx = re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c)
                                for c in pattern) + r"\Z", re.S)
        _GLOBS[pattern] = rx
    return rx.match(text) is not None


log = h.logger("golden")


# ------------------------------------------------------------------------------------------
# Running the scenario


class Ctx:
    """What the scenario calls: records each step; connections by name, reopened after a
    broker closes one."""

    def __init__(self, port: int, broker: str, wait_timeout: float, request_timeout: float):
        self.kafka = kproto.Kafka()
        self.port = port
        self.broker = broker
        self.wait_timeout = wait_timeout
        self.request_timeout = request_timeout
        self.conns: dict[str, kproto.Conn] = {}
        self.corr: dict[str, int] = {}
        self.steps: list[dict] = []
        self.waits: list[dict] = []
        self.vars: dict = {}
        self.pending: dict[str, list] = {}  # conn -> steps sent, answers not read yet

    def _conn(self, name: str) -> kproto.Conn:
        c = self.conns.get(name)
        if c is None:
            c = kproto.Conn("127.0.0.1", self.port, timeout=self.request_timeout)
            self.conns[name] = c
            self.corr[name] = 0
        return c

    def _drop(self, name: str):
        c = self.conns.pop(name, None)
        if c:
            c.close()
        for st in self.pending.pop(name, []):
            if st["outcome"] == "pending":
                st["outcome"] = "closed"

    def call(self, label, api, version, body=None, body_hex=None, expect_response=True,
             conn="main", wait=True):
        """Sends one recorded request; returns the decoded response body (None when there is
        none). wait=False returns the step; collect(step) reads its answer later."""
        key = self.kafka.schemas.api_key(api)
        n = len(self.steps)
        st = {"step": n, "label": f"{n:03d}_{label}", "api": api, "key": key,
              "version": version, "conn": conn}
        self.steps.append(st)
        try:
            c = self._conn(conn)
        except OSError as e:
            st.update(outcome="connect-failed", error=str(e))
            return None
        self.corr[conn] += 1
        corr = self.corr[conn]
        frame = self.kafka.encode_request(key, version, corr, CLIENT_ID, body, body_hex)
        st["correlationId"] = corr
        st["request"] = self._decode_request(frame, body_hex)
        st["requestFrame"] = frame.hex()
        st["_t0"] = time.monotonic()
        try:
            c.send(frame)
        except kproto.Closed as e:
            st.update(outcome="closed", error=str(e))
            self._drop(conn)
            return None
        if not expect_response:
            st["outcome"] = "no-response"
            return None
        st["outcome"] = "pending"
        self.pending.setdefault(conn, []).append(st)
        if not wait:
            return st
        return self.collect(st)

    def collect(self, st):
        conn = st["conn"]
        while st["outcome"] == "pending":
            c = self.conns.get(conn)
            if c is None:
                st["outcome"] = "closed"
                break
            try:
                frame = c.recv(self.request_timeout)
            except socket.timeout:
                st["outcome"] = "timeout"
                self._drop(conn)
                break
            except kproto.Closed as e:
                st["closeReason"] = str(e)
                self._drop(conn)
                break
            corr = int.from_bytes(frame[:4], "big", signed=True)
            queue = self.pending.get(conn, [])
            match = next((p for p in queue if p["correlationId"] == corr), None)
            if match is None:
                # An answer to a request that expected none (acks=0), or garbage.
                prev = next((s for s in reversed(self.steps)
                             if s["conn"] == conn and s.get("correlationId") == corr), None)
                if prev is not None:
                    prev["unexpectedResponse"] = frame.hex()
                    prev["outcome"] = "unexpected-response"
                continue
            queue.remove(match)
            match["elapsedMs"] = round((time.monotonic() - match.pop("_t0")) * 1000)
            match["responseFrame"] = frame.hex()
            try:
                _, match["response"] = self.kafka.decode_response(match["key"], match["version"],
                                                                  frame)
                match["outcome"] = "response"
            except (kproto.CodecError, UnicodeDecodeError) as e:
                match["outcome"] = "undecodable"
                match["error"] = str(e)
        return st.get("response")

    def _decode_request(self, frame: bytes, body_hex):
        if body_hex is not None:
            return {"_bodyHex": body_hex}
        _, body = self.kafka.decode_request(frame)
        return body

    def quiet(self, api, version, body):
        """An unrecorded request on its own connection (polls); None on any failure
        (self.quiet_closed tells whether the broker closed the connection)."""
        key = self.kafka.schemas.api_key(api)
        self.quiet_closed = False
        try:
            c = self._conn("_quiet")
            self.corr["_quiet"] += 1
            corr = self.corr["_quiet"]
            c.send(self.kafka.encode_request(key, version, corr, CLIENT_ID, body))
            frame = c.recv(self.request_timeout)
            _, resp = self.kafka.decode_response(key, version, frame)
            return resp
        except kproto.Closed:
            self.quiet_closed = True
            self._drop("_quiet")
            return None
        except (OSError, kproto.CodecError, socket.timeout):
            self._drop("_quiet")
            return None

    def wait(self, label, api, version, body, ok, give_up_s=None):
        """Polls until ok(response); records only the outcome."""
        limit = self.wait_timeout if give_up_s is None else min(give_up_s, self.wait_timeout)
        deadline = time.monotonic() + limit
        polls = 0
        while True:
            polls += 1
            resp = self.quiet(api, version, body)
            if ok(resp):
                good = True
                break
            # A broker that closes the connection does not serve the api: no use waiting.
            if time.monotonic() > deadline or (self.quiet_closed and polls >= 2):
                good = False
                break
            time.sleep(0.1)
        self.waits.append({"wait": label, "afterStep": len(self.steps) - 1, "ok": good})
        if not good:
            log(f"wait {label}: not reached within {limit:.0f}s")
        return good

    def close(self):
        for name in list(self.conns):
            self._drop(name)


def run_scenario(port: int, broker: str, wait_timeout: float, request_timeout: float) -> Ctx:
    ctx = Ctx(port, broker, wait_timeout, request_timeout)
    try:
        golden_scenario.run(ctx)
    finally:
        ctx.close()
    return ctx


def redecode(kafka: kproto.Kafka, st: dict):
    try:
        if st.get("requestFrame") and "_bodyHex" not in (st.get("request") or {}):
            _, st["request"] = kafka.decode_request(bytes.fromhex(st["requestFrame"]))
        if st.get("responseFrame"):
            _, st["response"] = kafka.decode_response(st["key"], st["version"],
                                                      bytes.fromhex(st["responseFrame"]))
    except (kproto.CodecError, UnicodeDecodeError) as e:
        st["outcome"] = "undecodable"
        st["error"] = f"the recorded frame no longer decodes: {e}"


def write_recording(ctx: Ctx, out: str, meta: dict):
    if os.path.isdir(out):
        for fn in os.listdir(out):
            if fn.endswith(".json"):
                os.remove(os.path.join(out, fn))
    os.makedirs(out, exist_ok=True)
    for st in ctx.steps:
        st.pop("_t0", None)
        with open(os.path.join(out, st["label"] + ".json"), "w") as f:
            json.dump(st, f, indent=1, sort_keys=False)
            f.write("\n")
    meta = dict(meta, steps=len(ctx.steps), waits=ctx.waits)
    with open(os.path.join(out, "_run.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")


def load_recording(d: str, kafka: kproto.Kafka | None = None) -> tuple[list[dict], dict]:
    """The steps of a recording. With `kafka`, requests and responses are decoded again from
    the raw frames with today's schemas, so that a capture stays comparable when a schema file
    changes (the JSON is for people to read)."""
    steps = []
    for fn in sorted(os.listdir(d)):
        if fn.endswith(".json") and not fn.startswith("_"):
            with open(os.path.join(d, fn)) as f:
                st = json.load(f)
            if kafka is not None:
                redecode(kafka, st)
            steps.append(st)
    with open(os.path.join(d, "_run.json")) as f:
        meta = json.load(f)
    return steps, meta


# ------------------------------------------------------------------------------------------
# Brokers


def samsad_settings() -> dict:
    return dict(golden_scenario.BROKER_SETTINGS)


def kafka_settings() -> dict:
    s = dict(golden_scenario.BROKER_SETTINGS)
    s.update(golden_scenario.KAFKA_ONLY_SETTINGS)
    return s


class Samsad(h.SamsadProcess):
    def __init__(self, binary: str, work: str):
        super().__init__(binary, work, [f"{k}={v}" for k, v in samsad_settings().items()],
                         new_session=True)

    def start(self, timeout=20.0):
        super().start(timeout)
        log(f"samsad pid {self.proc.pid} on 127.0.0.1:{self.port}")


class ApacheKafka:
    def __init__(self, work: str):
        self.work = work
        self.port = h.free_port()

    def start(self):
        args = [f"{k}={v}" for k, v in kafka_settings().items()]
        r = subprocess.run(["bash", KAFKA_SH, "start", self.work, str(self.port)] + args,
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError(f"kafka.sh start: {r.stderr.strip()}")
        log(r.stderr.strip().splitlines()[-1])

    def stop(self):
        subprocess.run(["bash", KAFKA_SH, "stop", self.work], capture_output=True, timeout=90)


# ------------------------------------------------------------------------------------------
# Comparison


class Rules:
    """normalise.rules: `KIND [ARG] PATH-GLOB [@STEP-GLOB]`; see the file's header."""

    KINDS = {"ignore": 0, "presence": 0, "map": 1, "ordered": 0, "key": 1}

    def __init__(self, path: str):
        self.rules = []
        with open(path) as f:
            for lineno, line in enumerate(f, 1):
                line = line.split("#", 1)[0].strip()
                if not line:
                    continue
                parts = line.split()
                kind = parts[0]
                if kind not in self.KINDS:
                    raise SystemExit(f"{path}:{lineno}: unknown rule {kind}")
                nargs = self.KINDS[kind]
                arg = parts[1] if nargs else None
                rest = parts[1 + nargs:]
                step = "*"
                if rest and rest[-1].startswith("@"):
                    step = rest.pop()[1:]
                if len(rest) != 1:
                    raise SystemExit(f"{path}:{lineno}: expected {kind} {'ARG ' * nargs}PATH")
                self.rules.append((kind, arg, rest[0], step))

    def find(self, kinds, step: str, generic: str, path: str | None = None):
        """The first rule of one of `kinds` whose glob matches the generic path (arrays as
        []) or the concrete one (elements named by key or index)."""
        for kind, arg, pglob, sglob in self.rules:
            if kind in kinds and glob(step, sglob) and (
                    glob(generic, pglob) or
                    (path is not None and glob(path, pglob))):
                return kind, arg
        return None


class Known:
    """known_differences.txt: `STEP-GLOB PATH-GLOB  # reason`; the reason is required. A glob
    may list alternatives separated by |. Reasons starting with PENDING mark differences that
    work in progress removes (they are counted apart)."""

    def __init__(self, path: str):
        self.entries = []
        with open(path) as f:
            for lineno, raw in enumerate(f, 1):
                line = raw.strip()
                if not line or line.startswith("#"):
                    continue
                if "#" not in line:
                    raise SystemExit(f"{path}:{lineno}: a known difference needs '# reason'")
                spec, reason = line.split("#", 1)
                parts = spec.split()
                if len(parts) != 2 or not reason.strip():
                    raise SystemExit(f"{path}:{lineno}: expected STEP-GLOB PATH-GLOB # reason")
                self.entries.append({"step": parts[0], "path": parts[1],
                                     "reason": reason.strip(), "line": lineno, "hits": 0})

    def match(self, step: str, path: str, generic: str):
        def any_of(text, globs):
            return any(glob(text, g) for g in globs.split("|"))
        for e in self.entries:
            if any_of(step, e["step"]) and (any_of(path, e["path"]) or
                                            any_of(generic, e["path"])):
                e["hits"] += 1
                return e
        return None


SENTINELS = (None, "", kproto.ZERO_UUID, -1, 0)
KEY_FIELDS = ("ApiKey", "Name", "Topic", "TopicName", "PartitionIndex", "Partition", "Index",
              "GroupId", "ResourceName", "BrokerId", "NodeId", "ProducerId", "MemberId",
              "LogDir", "Key")


def short(v, n=160) -> str:
    s = json.dumps(v, sort_keys=True)
    return s if len(s) <= n else s[:n] + f"...({len(s)} chars)"


class Comparer:
    def __init__(self, rules: Rules, known: Known):
        self.rules = rules
        self.known = known
        self.maps: dict[str, tuple[dict, dict]] = {}
        self.diffs: list[dict] = []

    def diff(self, step, path, generic, kafka, samsad, note=""):
        e = self.known.match(step, path, generic)
        self.diffs.append({"step": step, "path": path, "kafka": kafka, "samsad": samsad,
                           "note": note, "known": e["reason"] if e else None})

    def mapped(self, ns, a, b) -> bool:
        """a (Kafka's) and b (samsad's) name the same thing: one-to-one over the whole run."""
        if a in SENTINELS or b in SENTINELS:
            return a == b
        fwd, back = self.maps.setdefault(ns, ({}, {}))
        ka = json.dumps(a, sort_keys=True)
        kb = json.dumps(b, sort_keys=True)
        if ka in fwd or kb in back:
            return fwd.get(ka) == kb and back.get(kb) == ka
        fwd[ka] = kb
        back[kb] = ka
        return True

    def compare(self, step, path, generic, a, b):
        rule = self.rules.find(("ignore", "presence", "map"), step, generic, path)
        if rule:
            kind, arg = rule
            if kind == "ignore":
                return
            if kind == "presence":
                if (a is None) != (b is None):
                    self.diff(step, path, generic, a, b, "one is null")
                return
            if kind == "map":
                if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
                    for i, (x, y) in enumerate(zip(a, b)):
                        if not self.mapped(arg, x, y):
                            self.diff(step, f"{path}[{i}]", generic + "[]", x, y,
                                      f"not the same {arg}")
                    return
                if not self.mapped(arg, a, b):
                    self.diff(step, path, generic, a, b, f"not the same {arg} as before")
                return
        if isinstance(a, dict) and isinstance(b, dict):
            for k in list(a) + [k for k in b if k not in a]:
                if k in ("crcOk",) and a.get(k) == b.get(k):
                    continue
                if k not in b:
                    self.diff(step, f"{path}.{k}", f"{generic}.{k}", a[k], "<absent>")
                elif k not in a:
                    self.diff(step, f"{path}.{k}", f"{generic}.{k}", "<absent>", b[k])
                else:
                    self.compare(step, f"{path}.{k}", f"{generic}.{k}", a[k], b[k])
            return
        if isinstance(a, list) and isinstance(b, list):
            self.compare_list(step, path, generic, a, b)
            return
        if a != b or type(a) is not type(b):
            self.diff(step, path, generic, a, b)

    def key_field(self, step, generic, a, b):
        rule = self.rules.find(("key",), step, generic)
        if rule:
            return rule[1]
        items = a + b
        if not items or not all(isinstance(x, dict) for x in items):
            return None
        for k in KEY_FIELDS:
            if all(k in x for x in items):
                vals_a = [json.dumps(x[k]) for x in a]
                vals_b = [json.dumps(x[k]) for x in b]
                if len(set(vals_a)) == len(vals_a) and len(set(vals_b)) == len(vals_b):
                    return k
        return None

    def compare_list(self, step, path, generic, a, b):
        g = generic + "[]"
        k = self.key_field(step, generic, a, b)
        if k is None:
            for i in range(max(len(a), len(b))):
                if i >= len(b):
                    self.diff(step, f"{path}[{i}]", g, a[i], "<absent>", "element missing")
                elif i >= len(a):
                    self.diff(step, f"{path}[{i}]", g, "<absent>", b[i], "extra element")
                else:
                    self.compare(step, f"{path}[{i}]", g, a[i], b[i])
            return
        # Keyed: elements pair up by the key; a mapped key goes through its map.
        krule = self.rules.find(("map",), step, f"{g}.{k}")

        def translate(v):
            if krule and v not in SENTINELS:
                fwd = self.maps.get(krule[1], ({}, {}))[0]
                t = fwd.get(json.dumps(v, sort_keys=True))
                return json.loads(t) if t is not None else None
            return v

        bkeys = [json.dumps(x[k], sort_keys=True) for x in b]
        used = set()
        order_a, order_b = [], []
        for i, x in enumerate(a):
            want = translate(x[k])
            j = None
            if want is not None or not krule:
                wk = json.dumps(want, sort_keys=True)
                j = next((j for j, bk in enumerate(bkeys) if bk == wk and j not in used), None)
            if j is None and krule:
                # Not bound yet: pair with the same position when it is free and unbound.
                if i < len(b) and i not in used:
                    j = i
            label = f"{path}[{k}={x[k]}]"
            if j is None:
                self.diff(step, label, g, x, "<absent>", "element missing")
                continue
            used.add(j)
            order_a.append(i)
            order_b.append(j)
            self.compare(step, label, g, x, b[j])
        for j, y in enumerate(b):
            if j not in used:
                self.diff(step, f"{path}[{k}={y[k]}]", g, "<absent>", y, "extra element")
        if order_b != sorted(order_b) and self.rules.find(("ordered",), step, generic):
            self.diff(step, path + "<order>", generic + "<order>",
                      [a[i][k] for i in order_a], [b[j][k] for j in sorted(order_b)],
                      "same elements in another order")


def compare_recordings(golden_dir: str, actual_dir: str, rules: Rules, known: Known):
    kafka = kproto.Kafka()
    gsteps, gmeta = load_recording(golden_dir, kafka)
    asteps, ameta = load_recording(actual_dir, kafka)
    cmp = Comparer(rules, known)
    by_label = {s["label"]: s for s in asteps}
    for g in gsteps:
        label = g["label"]
        a = by_label.pop(label, None)
        if a is None:
            cmp.diff(label, "<step>", "<step>", "present", "<absent>", "scenario changed?")
            continue
        # Requests must match modulo the values threaded from earlier answers.
        areq_name = g["api"] + "Request"
        if a.get("request") is not None and g.get("request") is not None:
            cmp.compare(label, areq_name, areq_name, g["request"], a["request"])
        if g["outcome"] != a["outcome"]:
            detail = a.get("closeReason") or a.get("error") or ""
            cmp.diff(label, "<outcome>", "<outcome>", g["outcome"], a["outcome"], detail)
            continue
        if g["outcome"] == "response":
            name = g["api"] + "Response"
            cmp.compare(label, name, name, g["response"], a["response"])
    for label in by_label:
        cmp.diff(label, "<step>", "<step>", "<absent>", "present", "scenario changed?")
    awaits = {w["wait"]: w for w in ameta.get("waits", [])}
    for w in gmeta.get("waits", []):
        aw = awaits.get(w["wait"])
        if aw is None or aw["ok"] != w["ok"]:
            cmp.diff(f"wait:{w['wait']}", "<wait>", "<wait>", w["ok"],
                     aw["ok"] if aw else "<absent>", "a wait condition differs")
    return cmp, gsteps


def report(cmp: Comparer, known: Known, gsteps, verbose_known: bool) -> int:
    unknown = [d for d in cmp.diffs if not d["known"]]
    known_d = [d for d in cmp.diffs if d["known"]]
    if verbose_known:
        by_reason: dict[str, list] = {}
        for d in known_d:
            by_reason.setdefault(d["known"], []).append(d)
        for reason, ds in by_reason.items():
            log(f"KNOWN ({len(ds)}): {reason}")
            for d in ds[:6]:
                log(f"    {d['step']}: {d['path']}: kafka={short(d['kafka'], 80)} "
                    f"samsad={short(d['samsad'], 80)}")
            if len(ds) > 6:
                log(f"    ... and {len(ds) - 6} more")
    for d in unknown:
        note = f" ({d['note']})" if d["note"] else ""
        log(f"DIFF {d['step']}: {d['path']}: kafka={short(d['kafka'])} "
            f"samsad={short(d['samsad'])}{note}")
    stale = [e for e in known.entries if e["hits"] == 0]
    for e in stale:
        log(f"STALE known difference (line {e['line']}, matches nothing now): "
            f"{e['step']} {e['path']}  # {e['reason']}")
    apis = sorted({(s['api'], s['version']) for s in gsteps})
    pending = [d for d in known_d if d["known"].startswith("PENDING")]
    log(f"{len(gsteps)} steps, {len({a for a, _ in apis})} apis, {len(apis)} api versions; "
        f"{len(cmp.diffs)} differences: {len(known_d) - len(pending)} known and harmless, "
        f"{len(pending)} known and PENDING (work in progress), {len(unknown)} not known; "
        f"{len(stale)} stale known entries")
    return 1 if unknown else 0


# ------------------------------------------------------------------------------------------
# Commands


def cmd_capture(a) -> int:
    work = tempfile.mkdtemp(prefix="golden-kafka-")
    k = ApacheKafka(work)
    try:
        k.start()
        t0 = time.monotonic()
        ctx = run_scenario(k.port, "kafka", wait_timeout=60, request_timeout=60)
        log(f"scenario: {len(ctx.steps)} steps in {time.monotonic() - t0:.1f}s")
        write_recording(ctx, a.out, {"broker": "Apache Kafka 4.1.1",
                                     "settings": kafka_settings()})
    finally:
        k.stop()
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            log(f"kafka's files kept in {work}")
    return 0


def run_samsad(binary: str, out: str) -> tuple[int, str | None]:
    work = tempfile.mkdtemp(prefix="golden-samsad-")
    s = Samsad(binary, work)
    problem = None
    try:
        s.start()
        t0 = time.monotonic()
        ctx = run_scenario(s.port, "samsad", wait_timeout=3, request_timeout=10)
        log(f"scenario: {len(ctx.steps)} steps in {time.monotonic() - t0:.1f}s")
        write_recording(ctx, out, {"broker": "samsad", "settings": samsad_settings()})
    finally:
        problem = s.stop()
        if problem:
            log(f"samsad: {problem}\n{s.tail()}")
        shutil.rmtree(work, ignore_errors=True)
    return 0, problem


def cmd_run(a) -> int:
    _, problem = run_samsad(a.samsad, a.out)
    return 1 if problem else 0


def cmd_compare(a) -> int:
    rules, known = Rules(a.rules), Known(a.known)
    cmp, gsteps = compare_recordings(a.golden, a.actual, rules, known)
    return report(cmp, known, gsteps, verbose_known=not a.quiet_known)


def cmd_test(a) -> int:
    if not os.access(a.samsad, os.X_OK):
        log(f"FAIL: samsad not found: {a.samsad}")
        return 1
    rules, known = Rules(a.rules), Known(a.known)
    out = a.out or tempfile.mkdtemp(prefix="golden-actual-")
    t0 = time.monotonic()
    _, problem = run_samsad(a.samsad, out)
    cmp, gsteps = compare_recordings(a.golden, out, rules, known)
    rc = report(cmp, known, gsteps, verbose_known=True)
    if problem:
        log(f"FAIL: {problem}")
        rc = 1
    log(f"{'PASS' if rc == 0 else 'FAIL'} in {time.monotonic() - t0:.1f}s"
        + (f"; samsad's answers in {out}" if a.out or rc else ""))
    if rc == 0 and not a.out:
        shutil.rmtree(out, ignore_errors=True)
    return rc


def cmd_recheck(a) -> int:
    out = tempfile.mkdtemp(prefix="golden-recapture-")
    try:
        a.out, a.keep = out, False
        cmd_capture(a)
        rules, known = Rules(a.rules), Known(os.devnull)
        cmp, gsteps = compare_recordings(a.golden, out, rules, known)
        return report(cmp, known, gsteps, verbose_known=False)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def cmd_show(a) -> int:
    with open(a.file) as f:
        st = json.load(f)
    print(json.dumps({k: v for k, v in st.items() if not k.endswith("Frame")}, indent=1))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("capture", help="record Apache Kafka's answers")
    p.add_argument("--out", default=CAPTURE_DIR)
    p.add_argument("--keep", action="store_true", help="keep Kafka's work directory")
    p.set_defaults(fn=cmd_capture)
    p = sub.add_parser("run", help="record samsad's answers")
    p.add_argument("--samsad", required=True)
    p.add_argument("--out", required=True)
    p.set_defaults(fn=cmd_run)
    p = sub.add_parser("recheck", help="capture Kafka again and compare with the committed one")
    p.add_argument("--golden", default=CAPTURE_DIR)
    p.add_argument("--rules", default=RULES)
    p.set_defaults(fn=cmd_recheck)
    for name, fn in (("compare", cmd_compare), ("test", cmd_test)):
        p = sub.add_parser(name)
        if name == "compare":
            p.add_argument("golden")
            p.add_argument("actual")
            p.add_argument("--quiet-known", action="store_true")
        else:
            p.add_argument("--samsad", required=True)
            p.add_argument("--golden", default=CAPTURE_DIR)
            p.add_argument("--out", help="keep samsad's recording here")
        p.add_argument("--rules", default=RULES)
        p.add_argument("--known", default=KNOWN)
        p.set_defaults(fn=fn)
    p = sub.add_parser("show")
    p.add_argument("file")
    p.set_defaults(fn=cmd_show)
    a = ap.parse_args()
    return a.fn(a)


if __name__ == "__main__":
    sys.exit(main())
