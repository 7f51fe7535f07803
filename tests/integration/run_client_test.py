#!/usr/bin/env python3
"""Integration test harness: starts a broker on a free loopback port with a temporary log dir,
runs one real-client driver from tests/clients against it, stops the broker, and fails if the
driver fails or the broker dies or does not stop cleanly.

  run_client_test.py --client CLIENT [--broker samsad --samsad PATH | --broker kafka]
                     [--override KEY=VALUE ...] [--java-version X.Y.Z]
                     [--capture DIR] [--small] [--keep] [--driver-timeout S]
                     [--topic-prefix P] [-- DRIVER_ARGS...]

CLIENT: the first flow (create, produce every codec, consume, seek, group commit, delete):
kcat, confluent_kafka (Debian's), kafka_python, kafkajs, java (4.1.1's jars from kafka.sh);
the full flow of tests/clients/README.md (also configs, partitions, delete records, group
describe/reset): confluent_kafka_pypi (tests/clients/venv), franz_go, java_3.9, java_4.1,
kafka_cli (Apache Kafka's command-line tools), platformatic (@platformatic/kafka).

--broker kafka runs Apache Kafka through perf/vs-kafka/kafka.sh (the oracle the drivers are
validated against). Both brokers get the same settings: num.partitions=3,
auto.create.topics.enable=true, group.initial.rebalance.delay.ms=0 and
log.retention.check.interval.ms=500 (the full flow waits for retention; Kafka also gets
log.initial.task.delay.ms=0), then every --override (last one wins). --capture DIR puts tests/clients/kcapture.py between client and broker and
saves the request frames into DIR/<client>/ (the broker advertises the proxy's port).

A missing client library or binary skips the test (exit 77) unless CI=true, where it fails.
Exit codes: 0 pass, 1 fail, 77 skipped.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CLIENTS = os.path.join(ROOT, "tests", "clients")
KAFKA_SH = os.path.join(ROOT, "perf", "vs-kafka", "kafka.sh")
DEBIAN_PY = "/usr/bin/python3"
VENV_PY = os.path.join(CLIENTS, "venv", "bin", "python")
CLIENTS_SH = os.path.join(CLIENTS, "java", "clients.sh")
GO_MODULE = os.path.join(CLIENTS, "go")
CACHE = os.environ.get("SAMSA_CACHE", os.path.expanduser("~/.cache/samsa"))
sys.path.insert(0, HERE)
import admin_harness as h  # noqa: E402

# The Java client versions the java_<major.minor> clients run (newest patch releases).
JAVA_VERSIONS = {"3.9": "3.9.2", "4.1": "4.1.2"}
FIRST_FLOW = ["kcat", "confluent_kafka", "kafka_python", "kafkajs", "java"]
FULL_FLOW = ["confluent_kafka_pypi", "franz_go", "java_3.9", "java_4.1", "kafka_cli",
             "platformatic"]
# Broker settings every run gets (kafka.sh sets the rebalance delay itself; samsad needs it
# named): kcat relies on auto-creation with 3 partitions, the full flow on retention running
# often.
BASE_OVERRIDES = ["num.partitions=3", "auto.create.topics.enable=true",
                  "group.initial.rebalance.delay.ms=0", "log.retention.check.interval.ms=500"]
# Kafka runs its first retention check log.initial.task.delay.ms (30 s) after start.
KAFKA_OVERRIDES = ["log.initial.task.delay.ms=0"]
JAVA_OPTS = ["-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             # Client warnings go to stderr (slf4j-simple with clients.sh's jars, log4j2 with
             # kafka.sh's); the one logger silenced floods every assign/seek.
             "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
             "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients.consumer.internals."
             "OffsetFetcherUtils=error",
             "-Dlog4j2.configurationFile=" + os.path.join(CLIENTS, "java",
                                                          "log4j2-stderr.properties")]
# Every driver's segment check decodes compressed batches with these (Debian packages).
PY_CODECS = ["snappy", "lz4.frame", "zstandard"]


log = h.logger("harness")


def py_imports(mods: list[str]) -> str | None:
    if not os.access(DEBIAN_PY, os.X_OK):
        return f"{DEBIAN_PY} not found"
    code = "; ".join(f"import {m}" for m in mods)
    r = subprocess.run([DEBIAN_PY, "-c", code], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return f"{DEBIAN_PY} cannot import {', '.join(mods)}: {r.stderr.strip().splitlines()[-1]}"
    return None


def java_classpath(version: str | None = None) -> tuple[str | None, str | None]:
    """Apache Kafka 4.1.1's jars (kafka.sh: broker, tools, client) or, with `version`, that
    kafka-clients version alone (clients.sh)."""
    if not shutil.which("java") or not shutil.which("javac"):
        return None, "java/javac not found (apt-get install openjdk-17-jdk-headless)"
    cmd = ["bash", CLIENTS_SH, "classpath", version] if version else ["bash", KAFKA_SH,
                                                                        "classpath"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        return None, f"{' '.join(cmd[1:3])} failed: {r.stderr.strip()}"
    return r.stdout.strip(), None


def java_compiled(source: str, cp: str, tag: str) -> tuple[str | None, str | None]:
    """Compiles a driver once per (source, classpath tag) into the cache: the source launcher
    would spend 10-15 s of a 2-core machine compiling it on every run."""
    with open(source, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    name = os.path.splitext(os.path.basename(source))[0]
    out = os.path.join(CACHE, "java-drivers", f"{name}-{tag}-{digest}")
    if os.path.isdir(out):
        return out, None
    tmp = f"{out}.tmp{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    r = subprocess.run(["javac", "-nowarn", "-Xlint:none", "-cp", cp, "-d", tmp, source],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        return None, f"javac {source} failed:\n{r.stdout}{r.stderr}"
    try:
        os.rename(tmp, out)
    except OSError:  # another run compiled it meanwhile
        shutil.rmtree(tmp, ignore_errors=True)
    return out, None


def java_driver(source: str, version: str | None, tag: str):
    cp, why = java_classpath(version)
    if why:
        return None, why
    classes, why = java_compiled(source, cp, tag)
    if why:
        return None, why
    main = os.path.splitext(os.path.basename(source))[0]
    return ["java"] + JAVA_OPTS + ["-Dsegments.py=" + os.path.join(CLIENTS, "segments.py"),
                                   "-cp", f"{classes}:{cp}", main], py_imports(PY_CODECS)


def node_requires(mods: list[str]) -> str | None:
    node_dir = os.path.join(CLIENTS, "node")
    if not shutil.which("node"):
        return "node not found (apt-get install nodejs npm)"
    r = subprocess.run(["node", "-e", f"for (const m of {mods!r}) require(m)"], cwd=node_dir,
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return (f"{', '.join(mods)} not installed (bash tests/clients/install.sh): "
                f"{(r.stderr.strip().splitlines() or ['?'])[-1]}")
    return None


def go_driver(work: str) -> tuple[list[str] | None, str | None]:
    """Builds the franz-go driver (Go's build cache makes a rebuild quick; install.sh warms it
    and downloads the modules). GOTOOLCHAIN=local: toolchain downloads fail here, and the
    module proxy is only asked for modules go.sum pins."""
    if not shutil.which("go"):
        return None, "go not found (apt-get install golang, Go >= 1.24)"
    exe = os.path.join(work, "franzgo")
    env = dict(os.environ, GOTOOLCHAIN="local", GOFLAGS="-mod=readonly")
    r = subprocess.run(["go", "build", "-o", exe, "./cmd/franzgo"], cwd=GO_MODULE, env=env,
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        return None, f"go build ./cmd/franzgo failed (bash tests/clients/install.sh):\n{r.stderr}"
    return [exe], py_imports(PY_CODECS)


def driver_command(client: str, work: str,
                   java_version: str | None) -> tuple[list[str] | None, str | None]:
    """The driver's command line (without the common arguments), or why it cannot run."""
    if client == "kcat":
        if not (shutil.which("kcat") or shutil.which("kafkacat")):
            return None, "kcat not found (apt-get install kcat)"
        why = py_imports(PY_CODECS)
        return [DEBIAN_PY, os.path.join(CLIENTS, "kcat_driver.py")], why
    if client == "confluent_kafka":
        why = py_imports(["confluent_kafka"] + PY_CODECS)
        return [DEBIAN_PY, os.path.join(CLIENTS, "confluent_driver.py")], why
    if client == "confluent_kafka_pypi":
        if not os.access(VENV_PY, os.X_OK):
            return None, f"{VENV_PY} missing (bash tests/clients/install.sh)"
        r = subprocess.run([VENV_PY, "-c", "import confluent_kafka, snappy, lz4.frame, "
                            "zstandard; print(confluent_kafka.__file__)"],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0 or not r.stdout.startswith(os.path.join(CLIENTS, "venv")):
            return None, ("confluent-kafka from PyPI is not in tests/clients/venv (bash "
                          f"tests/clients/install.sh): {r.stdout.strip()} {r.stderr.strip()}")
        return [VENV_PY, os.path.join(CLIENTS, "confluent_driver.py"), "--full"], None
    if client == "kafka_python":
        why = py_imports(["kafka"] + PY_CODECS)
        return [DEBIAN_PY, os.path.join(CLIENTS, "kafka_python_driver.py")], why
    if client == "kafkajs":
        why = node_requires(["kafkajs", "kafkajs-lz4", "kafkajs-snappy", "zstd-napi"])
        if why:
            return None, why
        return ["node", os.path.join(CLIENTS, "node", "kafkajs_driver.js")], py_imports(PY_CODECS)
    if client == "platformatic":
        why = node_requires(["@platformatic/kafka", "zstd-napi"])
        if why:
            return None, why
        return ["node", os.path.join(CLIENTS, "node", "platformatic_driver.mjs")], \
            py_imports(PY_CODECS)
    if client == "java":
        return java_driver(os.path.join(CLIENTS, "java", "JavaDriver.java"), None, "kafka")
    if client.startswith("java_"):
        version = java_version or JAVA_VERSIONS[client[len("java_"):]]
        cmd, why = java_driver(os.path.join(CLIENTS, "java", "JavaDriver.java"), version,
                               version)
        return (cmd + ["--full"] if cmd else None), why
    if client == "kafka_cli":
        return java_driver(os.path.join(CLIENTS, "java", "CliDriver.java"), None, "kafka")
    if client == "franz_go":
        return go_driver(work)
    return None, f"unknown client {client}"


class Broker:
    """samsad (admin_harness.SamsadProcess) or Apache Kafka through kafka.sh."""

    def __init__(self, kind: str, samsad: str | None, work: str, port: int,
                 advertised_port: int | None, overrides: list[str]):
        self.kind, self.work, self.port = kind, work, port
        self.overrides = overrides
        self.advertised_port = advertised_port
        self.samsad = (h.SamsadProcess(samsad, work, ["node.id=1"] + overrides, port=port,
                                       advertised_port=advertised_port, log_name="broker.log",
                                       new_session=True) if kind == "samsad" else None)
        self.log_dir = os.path.join(work, "data")
        self.log_file = os.path.join(work, "broker.log")

    def start(self, timeout: float = 120):
        if self.kind == "kafka":
            env = dict(os.environ)
            if self.advertised_port:
                env["KAFKA_ADVERTISED_PORT"] = str(self.advertised_port)
            r = subprocess.run(["bash", KAFKA_SH, "start", self.work, str(self.port)]
                               + KAFKA_OVERRIDES + self.overrides, env=env, capture_output=True, text=True, timeout=timeout + 60)
            if r.returncode != 0:
                raise RuntimeError(f"kafka.sh start failed: {r.stderr.strip()}")
            self.log_file = os.path.join(self.work, "server.log")
            log(r.stderr.strip().splitlines()[-1])
            return
        os.makedirs(self.log_dir, exist_ok=True)
        log(" ".join(self.samsad.cmd))
        self.samsad.start(timeout)
        log(f"samsad pid {self.samsad.proc.pid} listening on 127.0.0.1:{self.port}")

    def alive(self) -> bool:
        if self.kind == "kafka":
            try:
                with open(os.path.join(self.work, "kafka.pid")) as f:
                    os.kill(int(f.read().strip()), 0)
                return True
            except (OSError, ValueError):
                return False
        return self.samsad.alive()

    def stop(self) -> str | None:
        """Stops the broker; returns a problem description, or None when it stopped cleanly."""
        if self.kind == "kafka":
            r = subprocess.run(["bash", KAFKA_SH, "stop", self.work], capture_output=True,
                               text=True, timeout=90)
            return None if r.returncode == 0 else f"kafka.sh stop: {r.stderr.strip()}"
        return self.samsad.stop()

    def tail(self, n: int = 40) -> str:
        if self.kind == "samsad":
            return self.samsad.tail(n)
        try:
            with open(self.log_file, "rb") as f:
                lines = f.read().decode(errors="replace").splitlines()
            return "\n".join(lines[-n:])
        except OSError:
            return "(no broker log)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--client", required=True, choices=FIRST_FLOW + FULL_FLOW)
    ap.add_argument("--broker", choices=["samsad", "kafka"], default="samsad")
    ap.add_argument("--samsad", help="path of the samsad binary (with --broker samsad)")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="a broker setting (repeatable; after the defaults, last one wins)")
    ap.add_argument("--java-version", help="kafka-clients version for java_* (default: "
                    + ", ".join(f"java_{k}: {v}" for k, v in JAVA_VERSIONS.items()) + ")")
    ap.add_argument("--capture", help="save request frames into CAPTURE/<client>/")
    ap.add_argument("--small", action="store_true", help="a few records per codec")
    ap.add_argument("--keep", action="store_true", help="keep the work dir even on success")
    ap.add_argument("--driver-timeout", type=float, default=90)
    ap.add_argument("--topic-prefix", help="default: it<pid> (captures want a stable one)")
    ap.add_argument("driver_args", nargs="*", help="after --: passed on to the driver")
    a = ap.parse_args()
    for kv in a.override:
        if "=" not in kv:
            ap.error(f"--override {kv}: not KEY=VALUE")
    if a.java_version and not a.client.startswith("java_"):
        ap.error("--java-version goes with a java_* client")

    work = tempfile.mkdtemp(prefix=f"samsa-it-{a.client}-")
    t_setup = time.monotonic()
    cmd, why = driver_command(a.client, work, a.java_version)
    if cmd is None or why:
        shutil.rmtree(work, ignore_errors=True)
        return h.skip_or_fail(log, why, a.client)
    log(f"{a.client} ready in {time.monotonic() - t_setup:.1f}s")
    if a.broker == "samsad" and not (a.samsad and os.access(a.samsad, os.X_OK)):
        shutil.rmtree(work, ignore_errors=True)
        log(f"FAIL: samsad binary not found: {a.samsad!r}")
        return 1
    port = h.free_port()
    cap = None
    cport = None
    if a.capture:
        sys.path.insert(0, CLIENTS)
        import kcapture

        cport = h.free_port()
    broker = Broker(a.broker, a.samsad, work, port, cport, BASE_OVERRIDES + a.override)
    ok = False
    try:
        broker.start()
        bootstrap = f"127.0.0.1:{port}"
        if a.capture:
            out = os.path.join(a.capture, a.client)
            shutil.rmtree(out, ignore_errors=True)
            cap = kcapture.Capture(cport, ("127.0.0.1", port), out).start()
            bootstrap = f"127.0.0.1:{cap.port}"
            log(f"capturing requests through 127.0.0.1:{cap.port} into {out}")
        prefix = a.topic_prefix or f"it{os.getpid()}"
        full = cmd + ["--bootstrap", bootstrap, "--topic-prefix", prefix,
                      "--log-dir", broker.log_dir, "--timeout", str(a.driver_timeout)]
        if a.small:
            full.append("--small")
        full += a.driver_args
        log("driver: " + " ".join(full))
        t_driver = time.monotonic()
        try:
            r = subprocess.run(full, timeout=a.driver_timeout + 20, cwd=CLIENTS)
            rc = r.returncode
            log(f"driver exited with {rc} after {time.monotonic() - t_driver:.1f}s")
        except subprocess.TimeoutExpired:
            log(f"FAIL: driver still running {a.driver_timeout + 20:.0f}s after start (killed)")
            rc = -1
        if not broker.alive():
            log("FAIL: the broker died during the test")
            rc = rc or 1
        ok = rc == 0
        if not ok:
            log(f"FAIL: driver exited with {rc}")
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        log(f"FAIL: {e}")
    finally:
        if cap:
            cap.stop()
            for api, vers in cap.versions().items():
                log(f"requested {api}: v{', v'.join(map(str, vers))}")
            if cap.errors:
                log(f"capture problems: {cap.errors}")
        problem = broker.stop()
        if problem:
            log(f"FAIL: {problem}")
            ok = False
        if not ok:
            log(f"broker log ({broker.log_file}):\n{broker.tail()}")
            log(f"work dir kept: {work}")
        elif a.keep:
            log(f"work dir kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    log("PASS" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
