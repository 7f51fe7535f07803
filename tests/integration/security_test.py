#!/usr/bin/env python3
"""Security on samsad's listeners, driven by real clients over real sockets:

1. a broker with five listeners: PLAINTEXT, SSL (client certificates requested), MTLS (an SSL
   listener requiring them), SASL_SSL and SASL_PLAINTEXT (PLAIN from a JAAS user list,
   SCRAM-SHA-256 and SCRAM-SHA-512 from the metadata log), REAUTH (SASL_PLAINTEXT with
   connections.max.reauth.ms); certificates made by openssl here, PEM keystores, one key
   encrypted (ssl.key.password);
2. SCRAM users made with Kafka 4.1.1's kafka-configs (DescribeUserScramCredentials and
   AlterUserScramCredentials), once over SASL_SSL with a --command-config;
3. confluent-kafka (librdkafka) produces and consumes over SSL, mutual TLS, SASL_SSL with
   SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN, and SASL_PLAINTEXT; kcat, Kafka's console
   producer and consumer, franz-go and kafkajs over SSL, mutual TLS and SASL_SSL with
   SCRAM-SHA-512; the principal of a client certificate is its subject through
   ssl.principal.mapping.rules;
4. what must be refused: a wrong password (SASL_AUTHENTICATION_FAILED, after Kafka's 100 ms
   delay), no client certificate on MTLS, an untrusted broker certificate, any request before
   SASL authentication but ApiVersions and SaslHandshake (the connection closes without an
   answer), an unknown mechanism, an oversized token, an expired session (KIP-368) while a
   re-authenticated one carries on, TLS garbage, a silent TLS client (closed after the handshake
   timeout), N failed logins in a row (memory bounded, the log not flooded, the broker serving);
5. sslscan: nothing below TLS 1.2, no weak cipher;
6. a new certificate picked up by `samsactl reload` for the next connection.

  security_test.py --samsad PATH --samsactl PATH [--failed-logins N]
"""

from __future__ import annotations

import argparse
import os
import re
import selectors
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients"))
from admin_harness import Checks, Samsad, free_port, kafka_tools_available, missing, tool  # noqa: E402
import kproto  # noqa: E402
import security_certs as certs  # noqa: E402

checks = Checks("security")
K = kproto.Kafka()
API_VERSIONS, METADATA, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 3, 17, 36
SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM = 58, 33
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" user_admin="admin-secret" '
        'user_bob="bob-secret";')


class Env:
    def __init__(self, work: str):
        self.work = work
        self.ca = certs.make_ca(work)
        _, _, self.keystore = certs.make_cert(work, "broker", "/CN=broker1/O=samsa", self.ca,
                                              san="IP:127.0.0.1,DNS:localhost",
                                              key_password="broker-key-pass", serial=11)
        self.alice_key, self.alice_cert, _ = certs.make_cert(
            work, "alice", "/C=US/O=samsa/OU=ServiceUsers/CN=alice", self.ca, serial=12)
        self.other_ca = certs.make_ca(work, "other-ca")
        self.ports = {n: free_port() for n in
                      ("SSL", "MTLS", "SASL_SSL", "SASL_PLAINTEXT", "REAUTH")}


def broker_settings(env: Env) -> dict[str, str]:
    p = env.ports
    listeners = ",".join(f"{n}://127.0.0.1:{port}" for n, port in p.items())
    s = {
        # The PLAINTEXT listener (admin_harness's, first) stays for the setup; no ACLs yet.
        "listeners": "PLAINTEXT://127.0.0.1:{plain}," + listeners,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,"
                                          "SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                          "REAUTH:SASL_PLAINTEXT",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": env.keystore,
        "ssl.key.password": "broker-key-pass",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": env.ca[1],
        "ssl.client.auth": "requested",
        "listener.name.mtls.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^.*CN=([a-z]+),OU=ServiceUsers.*$/$1/,DEFAULT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listener.name.reauth.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.reauth.connections.max.reauth.ms": "1500",
        "samsa.ssl.handshake.timeout.ms": "1500",
        "samsa.ssl.max.pending.handshakes": "300",
        "num.partitions": "1",
        "auto.create.topics.enable": "true",
    }
    return s


# --- raw connections ------------------------------------------------------------------------

class Raw:
    """A blocking Kafka connection speaking the project's own codecs (tests/clients/kproto)."""

    def __init__(self, port: int, tls: ssl.SSLContext | None = None, timeout: float = 10):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        if tls:
            self.s = tls.wrap_socket(self.s, server_hostname="127.0.0.1")
        self.corr = 0

    def send(self, key: int, v: int, body: dict):
        self.corr += 1
        f = K.encode_request(key, v, self.corr, "security-test", body)
        self.s.sendall(struct.pack(">i", len(f)) + f)

    def recv(self, key: int, v: int) -> dict | None:
        """The answer, or None when the broker closed the connection."""
        head = self._exact(4)
        if head is None:
            return None
        frame = self._exact(struct.unpack(">i", head)[0])
        if frame is None:
            return None
        return K.decode_response(key, v, frame)[1]

    def call(self, key: int, v: int, body: dict) -> dict | None:
        self.send(key, v, body)
        return self.recv(key, v)

    def _exact(self, n: int) -> bytes | None:
        out = b""
        while len(out) < n:
            try:
                chunk = self.s.recv(n - len(out))
            except (ConnectionResetError, ssl.SSLError):
                return None
            if not chunk:
                return None
            out += chunk
        return out

    def closed_by_peer(self, wait: float = 5) -> bool:
        self.s.settimeout(wait)
        try:
            return self.s.recv(1) == b""
        except (ConnectionResetError, ssl.SSLError):
            return True
        except socket.timeout:
            return False

    def close(self):
        self.s.close()


def metadata_body() -> dict:
    return {"Topics": None, "AllowAutoTopicCreation": False,
            "IncludeTopicAuthorizedOperations": False}


def handshake(c: Raw, mech: str) -> dict | None:
    return c.call(SASL_HANDSHAKE, 1, {"Mechanism": mech})


def authenticate(c: Raw, data: bytes, v: int = 2) -> dict | None:
    return c.call(SASL_AUTHENTICATE, v, {"AuthBytes": data.hex()})


def blob(v) -> bytes:
    return bytes.fromhex(v) if v else b""  # kproto gives bytes fields as hex


def scram_login(c: Raw, user: str, password: str, mech: str = "SCRAM-SHA-512") -> dict | None:
    """A whole SCRAM exchange with RFC 5802's client side; the last answer."""
    import base64
    import hashlib
    import hmac
    h = hashlib.sha512 if mech.endswith("512") else hashlib.sha256
    r = handshake(c, mech)
    if not r or r["ErrorCode"]:
        return r
    nonce = base64.b64encode(os.urandom(18)).decode()
    first_bare = f"n={user},r={nonce}"
    r = authenticate(c, ("n,," + first_bare).encode())
    if not r or r["ErrorCode"]:
        return r
    server_first = blob(r["AuthBytes"]).decode()
    fields = dict(x.split("=", 1) for x in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(h().name, password.encode(), base64.b64decode(fields["s"]),
                                 int(fields["i"]))
    client_key = hmac.new(salted, b"Client Key", h).digest()
    stored = h(client_key).digest()
    final_bare = f"c=biws,r={fields['r']}"
    auth_msg = f"{first_bare},{server_first},{final_bare}".encode()
    sig = hmac.new(stored, auth_msg, h).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, sig))).decode()
    return authenticate(c, f"{final_bare},p={proof}".encode())


# --- clients --------------------------------------------------------------------------------

def client_conf(env: Env, listener: str, **extra) -> dict:
    port = env.ports[listener]
    c = {"bootstrap.servers": f"127.0.0.1:{port}", "socket.timeout.ms": 10000}
    if listener in ("SSL", "MTLS", "SASL_SSL"):
        c["ssl.ca.location"] = env.ca[1]
    c.update(extra)
    return c


def produce_consume(conf: dict, topic: str, n: int = 20, timeout: float = 30) -> str | None:
    """Produces n records (acks=all) and reads them back; None, or what went wrong."""
    from confluent_kafka import Consumer, KafkaError, Producer
    errors: list[str] = []

    def on_error(e):
        errors.append(str(e))

    p = Producer({**conf, "acks": "all", "error_cb": on_error, "message.timeout.ms": 15000})
    delivered: list = []
    for i in range(n):
        p.produce(topic, f"{topic}-{i}".encode(), on_delivery=lambda e, m: delivered.append(e))
    p.flush(timeout)
    bad = [e for e in delivered if e is not None]
    if len(delivered) < n or bad:
        return f"produce: {len(delivered)} reports, errors {bad[:1] or errors[:2]}"
    c = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                  "error_cb": on_error, "enable.auto.commit": False})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.time() + timeout
    while len(got) < n and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() != KafkaError._PARTITION_EOF:
                errors.append(str(m.error()))
            continue
        got.append(m.value())
    c.close()
    if got != [f"{topic}-{i}".encode() for i in range(n)]:
        return f"consume: {len(got)} of {n} records, errors {errors[:2]}"
    return None


def refused(conf: dict, want: str, timeout: float = 15) -> str:
    """A producer that cannot get in: the first error librdkafka reports (must match want)."""
    from confluent_kafka import Producer
    errors: list[str] = []
    p = Producer({**conf, "error_cb": lambda e: errors.append(str(e)),
                  "message.timeout.ms": 4000, "reconnect.backoff.max.ms": 1000})
    p.produce("sec-refused", b"x")
    deadline = time.time() + timeout
    while time.time() < deadline and not any(re.search(want, e) for e in errors):
        p.poll(0.2)
    p.flush(1)
    return next((e for e in errors if re.search(want, e)), " | ".join(errors[:3]) or "(no error)")


def kafka_configs(args: list[str]) -> tuple[int, str]:
    return tool("kafka-configs", *args, timeout=90)


# --- the steps ------------------------------------------------------------------------------

def java_props(env: Env, path: str, mech: str, user: str, password: str) -> str:
    module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mech == "PLAIN" else
              "org.apache.kafka.common.security.scram.ScramLoginModule")
    with open(path, "w") as f:
        f.write("security.protocol=SASL_SSL\n"
                f"sasl.mechanism={mech}\n"
                f'sasl.jaas.config={module} required username="{user}" password="{password}";\n'
                "ssl.truststore.type=PEM\n"
                f"ssl.truststore.location={env.ca[1]}\n")
    return path


def step_users(env: Env, plain_bootstrap: str):
    rc, out = kafka_configs(["--bootstrap-server", plain_bootstrap, "--alter", "--add-config",
                             "SCRAM-SHA-256=[iterations=8192,password=alice-secret],"
                             "SCRAM-SHA-512=[password=alice-secret]",
                             "--entity-type", "users", "--entity-name", "alice"])
    checks(rc == 0 and "Completed updating config for user alice" in out,
           f"kafka-configs --alter --add-config SCRAM-SHA-256/512 for alice ({out.strip()[-90:]})")
    props = java_props(env, os.path.join(env.work, "admin.properties"), "PLAIN", "admin",
                       "admin-secret")
    rc, out = kafka_configs(["--bootstrap-server", f"127.0.0.1:{env.ports['SASL_SSL']}",
                             "--command-config", props, "--alter", "--add-config",
                             "SCRAM-SHA-512=[password=carol-secret]", "--entity-type", "users",
                             "--entity-name", "carol"])
    checks(rc == 0, f"kafka-configs over SASL_SSL (PLAIN admin, PEM truststore) adds carol "
                    f"({out.strip()[-90:]})")
    rc, out = kafka_configs(["--bootstrap-server", plain_bootstrap, "--describe",
                             "--entity-type", "users"])
    want_alice = ("SCRAM credential configs for user-principal 'alice' are "
                  "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096")
    checks(rc == 0 and want_alice in out and "user-principal 'carol' are "
           "SCRAM-SHA-512=iterations=4096" in out, f"kafka-configs --describe users: {out!r}")
    rc, out = kafka_configs(["--bootstrap-server", plain_bootstrap, "--alter", "--add-config",
                             "SCRAM-SHA-512=[iterations=100,password=x]", "--entity-type",
                             "users", "--entity-name", "dave"])
    checks(rc != 0 and "less than the minimum 4096" in out,
           f"kafka-configs refuses too few iterations itself: {out.strip()[-100:]!r}")
    # The broker's own check, by hand: the Java tool never sends such a request.
    c = Raw(int(plain_bootstrap.rsplit(":", 1)[1]))
    r = c.call(51, 0, {"Deletions": [{"Name": "nobody", "Mechanism": 1}],
                       "Upsertions": [{"Name": "dave", "Mechanism": 2, "Iterations": 100,
                                       "Salt": "00" * 16, "SaltedPassword": "00" * 64},
                                      {"Name": "erin", "Mechanism": 7, "Iterations": 4096,
                                       "Salt": "00" * 16, "SaltedPassword": "00" * 64}]})
    res = {x["User"]: (x["ErrorCode"], x["ErrorMessage"]) for x in (r or {}).get("Results", [])}
    checks(res == {"nobody": (91, "Attempt to delete a user credential that does not exist"),
                   "dave": (93, "Too few iterations"),
                   "erin": (33, "Unknown SCRAM mechanism")},
           f"AlterUserScramCredentials by hand: Kafka's error per user ({res})")
    c.close()


def step_clients(env: Env):
    sasl = lambda mech, user, pw: {"sasl.mechanisms": mech, "sasl.username": user,
                                   "sasl.password": pw}
    cases = [
        ("SSL", "ssl", {"security.protocol": "SSL"}),
        ("MTLS", "mtls", {"security.protocol": "SSL", "ssl.certificate.location": env.alice_cert,
                          "ssl.key.location": env.alice_key}),
        ("SASL_SSL", "scram512", {"security.protocol": "SASL_SSL",
                                  **sasl("SCRAM-SHA-512", "alice", "alice-secret")}),
        ("SASL_SSL", "scram256", {"security.protocol": "SASL_SSL",
                                  **sasl("SCRAM-SHA-256", "alice", "alice-secret")}),
        ("SASL_SSL", "plain", {"security.protocol": "SASL_SSL",
                               **sasl("PLAIN", "bob", "bob-secret")}),
        ("SASL_PLAINTEXT", "saslplain", {"security.protocol": "SASL_PLAINTEXT",
                                         **sasl("SCRAM-SHA-512", "carol", "carol-secret")}),
    ]
    for listener, name, extra in cases:
        why = produce_consume(client_conf(env, listener, **extra), f"sec-{name}")
        checks(why is None, f"confluent-kafka over {listener} ({name}): 20 records produced "
                            f"and consumed{'' if why is None else ': ' + why}")


def step_refusals(env: Env, broker_log):
    e = refused(client_conf(env, "SASL_SSL", **{"security.protocol": "SASL_SSL",
                                                "sasl.mechanisms": "SCRAM-SHA-512",
                                                "sasl.username": "alice",
                                                "sasl.password": "wrong"}),
                "invalid credentials")
    checks("Authentication failed during authentication due to invalid credentials with SASL "
           "mechanism SCRAM-SHA-512" in e, f"wrong SCRAM password refused: {e}")
    e = refused(client_conf(env, "SASL_SSL", **{"security.protocol": "SASL_SSL",
                                                "sasl.mechanisms": "PLAIN",
                                                "sasl.username": "bob",
                                                "sasl.password": "wrong"}),
                "Invalid username or password")
    checks("Invalid username or password" in e, f"wrong PLAIN password refused: {e}")
    e = refused(client_conf(env, "MTLS", **{"security.protocol": "SSL"}),
                "SSL|ssl|handshake|Disconnected")
    checks(bool(re.search("SSL|ssl|handshake|Disconnected", e)) and
           "peer did not return a certificate" in broker_log(),
           f"MTLS without a client certificate refused (the broker's log says why): {e}")
    e = refused({**client_conf(env, "SSL", **{"security.protocol": "SSL"}),
                 "ssl.ca.location": env.other_ca[1]}, "certificate verify failed|verify")
    checks("verify" in e, f"an untrusted broker certificate is refused by the client: {e}")


def step_kcat(env: Env):
    if not shutil.which("kcat"):
        missing(checks, "kcat")
        return
    base = ["kcat", "-b", f"127.0.0.1:{env.ports['SASL_SSL']}", "-X", "security.protocol=SASL_SSL",
            "-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", "sasl.username=alice",
            "-X", "sasl.password=alice-secret", "-X", f"ssl.ca.location={env.ca[1]}",
            "-t", "sec-kcat"]
    lines = "".join(f"kcat-{i}\n" for i in range(10))
    p = subprocess.run(base + ["-P"], input=lines, capture_output=True, text=True, timeout=60)
    checks(p.returncode == 0, f"kcat -P over SASL_SSL SCRAM-SHA-512 ({p.stderr.strip()[-80:]})")
    p = subprocess.run(base + ["-C", "-o", "beginning", "-e", "-q"], capture_output=True,
                       text=True, timeout=60)
    checks(p.stdout == lines, f"kcat -C reads the 10 records back ({p.stdout[:60]!r} "
                              f"{p.stderr.strip()[-80:]})")


def step_tls_kcat_console(env: Env):
    """kcat and Kafka's console tools over SSL and mutual TLS (alice's certificate)."""
    mtls_pem = os.path.join(env.work, "alice-keystore.pem")
    with open(mtls_pem, "w") as f:
        f.write(open(env.alice_key).read() + open(env.alice_cert).read())
    for listener in ("SSL", "MTLS"):
        topic = f"sec-tls-{listener.lower()}"
        if shutil.which("kcat"):
            base = ["kcat", "-b", f"127.0.0.1:{env.ports[listener]}", "-X",
                    "security.protocol=SSL", "-X", f"ssl.ca.location={env.ca[1]}", "-t", topic]
            if listener == "MTLS":
                base += ["-X", f"ssl.certificate.location={env.alice_cert}",
                         "-X", f"ssl.key.location={env.alice_key}"]
            lines = "".join(f"kcat-{i}\n" for i in range(5))
            p = subprocess.run(base + ["-P"], input=lines, capture_output=True, text=True,
                               timeout=60)
            q = subprocess.run(base + ["-C", "-o", "beginning", "-e", "-q"], capture_output=True,
                               text=True, timeout=60)
            checks(p.returncode == 0 and q.stdout == lines,
                   f"kcat over {listener}: 5 records produced and read back "
                   f"({q.stdout[:40]!r} {(p.stderr + q.stderr).strip()[-80:]})")
        else:
            missing(checks, "kcat")
        props = os.path.join(env.work, f"tls-{listener.lower()}.properties")
        with open(props, "w") as f:
            f.write("security.protocol=SSL\nssl.truststore.type=PEM\n"
                    f"ssl.truststore.location={env.ca[1]}\n")
            if listener == "MTLS":
                f.write(f"ssl.keystore.type=PEM\nssl.keystore.location={mtls_pem}\n")
        boot = f"127.0.0.1:{env.ports[listener]}"
        lines = "".join(f"console-{i}\n" for i in range(5))
        rc, out = tool("kafka-console-producer", "--bootstrap-server", boot, "--topic",
                       topic + "-java", "--producer.config", props, stdin=lines, timeout=90)
        rc2, out2 = tool("kafka-console-consumer", "--bootstrap-server", boot, "--topic",
                         topic + "-java", "--consumer.config", props, "--from-beginning",
                         "--max-messages", "5", "--timeout-ms", "30000", timeout=90)
        got = [l for l in out2.splitlines() if l.startswith("console-")]
        checks(rc == 0 and rc2 == 0 and got == [f"console-{i}" for i in range(5)],
               f"Kafka's console producer and consumer over {listener} ({got}; "
               f"{(out + out2).strip()[-120:]})")


def step_console(env: Env):
    props = java_props(env, os.path.join(env.work, "alice.properties"), "SCRAM-SHA-512",
                       "alice", "alice-secret")
    boot = f"127.0.0.1:{env.ports['SASL_SSL']}"
    lines = "".join(f"console-{i}\n" for i in range(5))
    rc, out = tool("kafka-console-producer", "--bootstrap-server", boot, "--topic", "sec-console",
                   "--producer.config", props, stdin=lines, timeout=90)
    checks(rc == 0, f"kafka-console-producer over SASL_SSL SCRAM-SHA-512 ({out.strip()[-80:]})")
    rc, out = tool("kafka-console-consumer", "--bootstrap-server", boot, "--topic", "sec-console",
                   "--consumer.config", props, "--from-beginning", "--max-messages", "5",
                   "--timeout-ms", "30000", timeout=90)
    got = [l for l in out.splitlines() if l.startswith("console-")]
    checks(rc == 0 and got == [f"console-{i}" for i in range(5)],
           f"kafka-console-consumer reads them back ({got})")


CLIENTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients")


def step_go_node(env: Env):
    """franz-go and kafkajs over SASL_SSL with SCRAM-SHA-512 (tests/clients/go/cmd/securecheck,
    tests/clients/node/secure_check.js), and a wrong password refused."""
    boot = f"127.0.0.1:{env.ports['SASL_SSL']}"
    common = ["--bootstrap", boot, "--ca", env.ca[1], "--mechanism", "SCRAM-SHA-512",
              "--user", "alice"]
    progs = {}
    if shutil.which("go"):
        binary = os.path.join(env.work, "securecheck")
        b = subprocess.run(["go", "build", "-o", binary, "./cmd/securecheck"],
                           cwd=os.path.join(CLIENTS, "go"), capture_output=True, text=True,
                           timeout=300)
        if checks(b.returncode == 0, f"franz-go check builds ({b.stderr.strip()[-120:]})"):
            progs["franz-go"] = [binary]
    else:
        missing(checks, "go (franz-go)")
    node_modules = os.path.join(CLIENTS, "node", "node_modules", "kafkajs")
    if shutil.which("node") and os.path.isdir(node_modules):
        progs["kafkajs"] = ["node", os.path.join(CLIENTS, "node", "secure_check.js")]
    else:
        missing(checks, "node with kafkajs (tests/clients/install.sh)")
    for name, cmd in progs.items():
        topic = f"sec-{name.replace('-', '')}"
        # SSL (no SASL), then mutual TLS with alice's certificate.
        for listener, extra in (("SSL", []),
                                ("MTLS", ["--cert", env.alice_cert, "--key", env.alice_key])):
            p = subprocess.run(cmd + ["--bootstrap", f"127.0.0.1:{env.ports[listener]}",
                                      "--ca", env.ca[1], "--mechanism", "NONE",
                                      "--topic", f"{topic}-{listener.lower()}", *extra],
                               capture_output=True, text=True, timeout=90)
            checks(p.returncode == 0 and "PASS" in p.stdout,
                   f"{name} over {listener}: 20 records produced and consumed "
                   f"({(p.stdout + p.stderr).strip().splitlines()[-1:]})")
        p = subprocess.run(cmd + common + ["--password", "alice-secret", "--topic", topic],
                           capture_output=True, text=True, timeout=90)
        checks(p.returncode == 0 and "PASS" in p.stdout,
               f"{name} over SASL_SSL SCRAM-SHA-512: 20 records produced and consumed "
               f"({(p.stdout + p.stderr).strip().splitlines()[-1:]})")
        p = subprocess.run(cmd + common + ["--password", "wrong", "--topic", topic,
                                           "--expect-auth-failure"],
                           capture_output=True, text=True, timeout=60)
        checks(p.returncode == 0 and "Authentication failed" in p.stdout,
               f"{name}: a wrong password is refused "
               f"({[l for l in p.stdout.splitlines() if 'refused' in l][:1]})")


def step_gate(env: Env, broker_log):
    port = env.ports["SASL_PLAINTEXT"]
    c = Raw(port)
    r = c.call(API_VERSIONS, 3, {"ClientSoftwareName": "security-test",
                                 "ClientSoftwareVersion": "1"})
    keys = {a["ApiKey"] for a in (r or {}).get("ApiKeys", [])}
    checks(r is not None and r["ErrorCode"] == 0 and {SASL_HANDSHAKE, SASL_AUTHENTICATE} <= keys,
           "ApiVersions is answered before authentication and lists the SASL apis")
    r = c.call(METADATA, 12, metadata_body())
    checks(r is None, "Metadata before SASL authentication: the connection closes, no answer")
    c = Raw(port)
    r = handshake(c, "GSSAPI")
    checks(r is not None and r["ErrorCode"] == UNSUPPORTED_SASL_MECHANISM and
           set(r["Mechanisms"]) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"},
           f"SaslHandshake GSSAPI: UNSUPPORTED_SASL_MECHANISM with the enabled ones ({r})")
    checks(c.closed_by_peer(), "... and the connection closes")
    c = Raw(port)
    r = authenticate(c, b"\0bob\0bob-secret")
    checks(r is None, "SaslAuthenticate without SaslHandshake: closed")
    c = Raw(port)
    handshake(c, "PLAIN")
    c.send(SASL_AUTHENTICATE, 2, {"AuthBytes": (b"x" * 600_000).hex()})
    checks(c.recv(SASL_AUTHENTICATE, 2) is None,
           "a 600 kB SASL token (over sasl.server.max.receive.size): closed")
    c = Raw(port)
    handshake(c, "PLAIN")
    r = authenticate(c, b"\0bob\0bob-secret")
    ok = r is not None and r["ErrorCode"] == 0
    r = c.call(METADATA, 12, metadata_body()) if ok else None
    checks(ok and r is not None and r["Brokers"],
           "PLAIN by hand: authenticated, then Metadata is answered")
    c.close()
    log = broker_log()
    checks("before SASL authentication" in log, "the refused request is in the broker's log")


def step_reauth(env: Env):
    port = env.ports["REAUTH"]
    a, b = Raw(port), Raw(port)
    ra, rb = scram_login(a, "alice", "alice-secret"), scram_login(b, "alice", "alice-secret")
    checks(ra is not None and ra["ErrorCode"] == 0 and ra.get("SessionLifetimeMs") == 1500,
           f"SCRAM by hand on REAUTH: session lifetime 1500 ms ({ra})")
    time.sleep(1.0)
    r = scram_login(b, "alice", "alice-secret")
    checks(r is not None and r["ErrorCode"] == 0, "re-authentication before the session ends")
    time.sleep(0.8)
    checks(a.call(METADATA, 12, metadata_body()) is None,
           "a request after the session ended without re-authentication: closed")
    r = b.call(METADATA, 12, metadata_body())
    checks(r is not None and r["Brokers"], "the re-authenticated connection carries on")
    c = Raw(port)
    scram_login(c, "alice", "alice-secret")
    r = scram_login(c, "carol", "carol-secret")
    checks(r is not None and r["ErrorCode"] == SASL_AUTHENTICATION_FAILED and
           "Cannot change principals" in (r.get("ErrorMessage") or ""),
           f"re-authentication as someone else is refused ({r and r.get('ErrorMessage')})")


def step_tls_bad_input(env: Env, broker, broker_log, n_silent: int = 1000):
    port = env.ports["SSL"]
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + os.urandom(2000))
    t = time.time()
    try:
        closed = s.recv(4096) is not None  # an alert or nothing, then EOF
        while s.recv(4096):
            pass
    except (ConnectionResetError, socket.timeout):
        closed = True
    checks(closed and time.time() - t < 3, "TLS garbage: the connection closes at once")
    s.close()
    rss0 = broker_rss(broker)
    # Silent clients, and clients that stop in the middle of their ClientHello.
    hello = bytes.fromhex("160301020001") + os.urandom(100)
    silent = []
    for i in range(n_silent):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        if i % 2:
            s.sendall(hello)
        silent.append(s)
    time.sleep(0.3)
    rss1 = broker_rss(broker)
    checks(rss1 - rss0 < 32 * 1024, f"{n_silent} stalled TLS handshakes: RSS {rss0 // 1024} -> "
                                     f"{rss1 // 1024} MiB")
    checks("TLS handshakes under way (samsa.ssl.max.pending.handshakes)" in broker_log(),
           "past samsa.ssl.max.pending.handshakes (300 per reactor) new ones are closed, "
           "with a log line")
    t = time.time()
    ends = []
    for s in silent:
        s.settimeout(6)
        try:
            s.recv(1)
        except (ConnectionResetError, socket.timeout):
            pass
        ends.append(time.time() - t)
        s.close()
    checks(max(ends) < 4, f"{n_silent} stalled TLS clients closed by the 1.5 s handshake "
                          f"timeout (last after {max(ends):.1f}s)")
    # A TLS client on the PLAINTEXT listener: the log says what happened.
    try:
        Raw(env.plaintext_port, ssl.create_default_context(cafile=env.ca[1]), timeout=3)
    except (OSError, ssl.SSLError):
        pass
    time.sleep(0.3)
    log = broker_log()
    checks("the client uses SSL on a listener without TLS" in log,
           "TLS on the PLAINTEXT listener: closed, and the log says it was TLS")
    checks("TLS handshake not done within 1500 ms" in log and
           ("TLS handshake failed" in log or "wrong version number" in log),
           "both are in the log")


def step_failed_logins(env: Env, broker: Samsad, n: int):
    """n connections each fail a PLAIN login (400 at a time): the broker's memory stays
    bounded, its log is not flooded, and it serves a good login after."""
    port = env.ports["SASL_PLAINTEXT"]
    rss0 = broker_rss(broker)
    hs = K.encode_request(SASL_HANDSHAKE, 1, 1, "guesser", {"Mechanism": "PLAIN"})
    au = K.encode_request(SASL_AUTHENTICATE, 2, 2, "guesser",
                          {"AuthBytes": b"\0bob\0guess".hex()})
    wire = struct.pack(">i", len(hs)) + hs + struct.pack(">i", len(au)) + au
    done = failed = 0
    t = time.time()
    sel = selectors.DefaultSelector()
    started = 0
    while done < n:
        while started < n and started - done < 400:
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            sel.register(s, selectors.EVENT_WRITE, [b"", False])
            started += 1
        for key, ev in sel.select(timeout=5):
            s, st = key.fileobj, key.data
            try:
                if ev & selectors.EVENT_WRITE and not st[1]:
                    s.sendall(wire)
                    st[1] = True
                    sel.modify(s, selectors.EVENT_READ, st)
                    continue
                data = s.recv(65536)
            except OSError:
                data = b""
            if data:
                st[0] += data
                continue
            # closed by the broker: the second answer must be the failure
            if b"Invalid username or password" in st[0]:
                failed += 1
            sel.unregister(s)
            s.close()
            done += 1
        if time.time() - t > 600:
            break
    took = time.time() - t
    rss1 = broker_rss(broker)
    checks(failed == n, f"{n} failed PLAIN logins: {failed} answered SASL_AUTHENTICATION_FAILED "
                        f"and closed, in {took:.1f}s; RSS {rss0 // 1024} -> {rss1 // 1024} MiB")
    checks(rss1 - rss0 < 64 * 1024, "the broker's RSS grew less than 64 MiB")
    lines = broker.log().count("failed authentication with")
    checks(lines <= took * 2 + 10, f"failed logins logged {lines} times (at most one a second "
                                   f"per reactor, with counts), not {n}")
    c = Raw(port)
    handshake(c, "PLAIN")
    r = authenticate(c, b"\0bob\0bob-secret")
    checks(r is not None and r["ErrorCode"] == 0, "a good login still works")


def broker_rss(broker) -> int:
    with open(f"/proc/{broker.proc.pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def step_sslscan(env: Env):
    if not shutil.which("sslscan"):
        missing(checks, "sslscan (scripts/install-deps.sh installs it)")
        return
    p = subprocess.run(["sslscan", "--no-colour", f"127.0.0.1:{env.ports['SSL']}"],
                       capture_output=True, text=True, timeout=120)
    out = p.stdout
    enabled = re.findall(r"^(SSLv2|SSLv3|TLSv1\.[0-3])\s+enabled", out, re.M)
    checks(p.returncode == 0 and set(enabled) == {"TLSv1.2", "TLSv1.3"},
           f"sslscan: protocols enabled {enabled}")
    accepted = re.findall(r"^(?:Preferred|Accepted)\s+(\S+)\s+\d+ bits\s+(\S+)", out, re.M)
    weak = [c for _, c in accepted if re.search(r"CBC|RC4|DES|NULL|EXP|anon|MD5|SHA$", c)]
    checks(accepted and not weak, f"sslscan: {len(accepted)} suites accepted, none weak "
                                  f"({sorted({c for _, c in accepted})}; weak: {weak})")
    print("[security] sslscan summary:\n" + "\n".join(
        l for l in out.splitlines() if re.match(r"(SSLv|TLSv|Preferred|Accepted)", l)),
        flush=True)


def peer_serial(port: int, ca: str) -> int:
    ctx = ssl.create_default_context(cafile=ca)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        with ctx.wrap_socket(s, server_hostname="127.0.0.1") as t:
            der = t.getpeercert(binary_form=True)
    from cryptography import x509  # python3-cryptography, beside python3-openssl
    return x509.load_der_x509_certificate(der).serial_number


def step_reload(env: Env, samsactl: str, broker):
    port = env.ports["SSL"]
    before = peer_serial(port, env.ca[1])
    keep = Raw(port, ssl.create_default_context(cafile=env.ca[1]))
    _, _, ks = certs.make_cert(env.work, "broker2", "/CN=broker1/O=samsa", env.ca,
                               san="IP:127.0.0.1,DNS:localhost", key_password="broker-key-pass",
                               serial=99)
    os.replace(ks, env.keystore)
    p = subprocess.run([samsactl, "--socket", os.path.join(broker.work, "admin.sock"), "reload"],
                       capture_output=True, text=True, timeout=30)
    after = peer_serial(port, env.ca[1])
    checks(p.returncode == 0 and before == 11 and after == 99,
           f"samsactl reload: new connections get the new certificate (serial {before} -> "
           f"{after}; {p.stdout.strip()[-80:]} {p.stderr.strip()[-80:]})")
    r = keep.call(METADATA, 12, metadata_body())
    checks(r is not None and r["Brokers"], "a connection made before the reload carries on")


def step_samsactl_user(env: Env, samsactl: str, broker):
    """samsactl user add makes a SCRAM user (the password from standard input) a client logs in
    as; user list shows it (no key); user remove takes it away. samsactl acl add/list on a
    broker without an authorizer keeps the ACL and says it is not enforced."""
    ctl = [samsactl, "--socket", os.path.join(broker.work, "admin.sock")]
    run = lambda *a, stdin=None: subprocess.run([*ctl, *a], input=stdin, capture_output=True,
                                                text=True, timeout=30)
    p = run("user", "add", "dora", "--mechanism", "SCRAM-SHA-512", "--iterations", "8192",
            stdin="dora-secret\n")
    checks(p.returncode == 0, f"samsactl user add dora ({p.stderr.strip()[-120:]})")
    p = run("user", "list")
    checks(re.search(r"dora\s+SCRAM-SHA-512\s+8192", p.stdout) is not None,
           f"samsactl user list shows dora ({p.stdout.strip()[-200:]})")
    sasl = {"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": "dora", "sasl.password": "dora-secret"}
    err = produce_consume(client_conf(env, "SASL_SSL", **sasl), "sec-dora")
    checks(err is None, f"dora, made by samsactl, produces and consumes over SASL_SSL ({err})")
    p = run("user", "add", "erin", "--mechanism", "SCRAM-SHA-512", stdin="")
    checks(p.returncode == 2 and "standard input" in p.stderr,
           f"samsactl user add without a password on standard input: usage error ({p.stderr!r})")
    p = run("user", "remove", "dora", "--mechanism", "SCRAM-SHA-512")
    checks(p.returncode == 0, f"samsactl user remove dora ({p.stderr.strip()[-120:]})")
    e = refused(client_conf(env, "SASL_SSL", **sasl), "Authentication failed")
    checks("Authentication failed" in e, f"dora, removed, cannot log in ({e})")
    p = run("acl", "add", "--allow", "User:dora", "--operation", "Read", "--topic", "t",
            "--prefixed")
    checks(p.returncode == 0, f"samsactl acl add ({p.stderr.strip()[-120:]})")
    p = run("acl", "list")
    checks("User:dora" in p.stdout and "PREFIXED" in p.stdout and "not enforced" in p.stdout,
           f"samsactl acl list: the ACL, not enforced without an authorizer ({p.stdout!r})")
    p = run("acl", "add", "--allow", "dora", "--operation", "Read", "--topic", "t")
    checks(p.returncode == 1 and "colon" in p.stderr,
           f"samsactl acl add with a principal without a type: refused ({p.stderr.strip()})")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samsad", required=True)
    ap.add_argument("--samsactl", required=True)
    ap.add_argument("--failed-logins", type=int, default=10000)
    a = ap.parse_args()
    for need in ("openssl",):
        if not shutil.which(need):
            return missing(checks, need)
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return missing(checks, "python3-confluent-kafka")
    why = kafka_tools_available()
    if why:
        return missing(checks, why)
    from admin_harness import SamsadProcess
    work = tempfile.mkdtemp(prefix="samsa-security-")
    env = Env(work)
    plain = free_port()
    settings = broker_settings(env)
    settings["listeners"] = settings["listeners"].format(plain=plain)
    settings.update({"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "2",
                     "samsa.reactors": "2"})
    env.plaintext_port = plain
    broker = SamsadProcess(a.samsad, work, [f"{k}={v}" for k, v in settings.items()], port=plain)
    ok = False
    try:
        broker.start()
        log = broker.log
        step_users(env, broker.bootstrap)
        step_clients(env)
        step_refusals(env, log)
        step_kcat(env)
        step_console(env)
        step_tls_kcat_console(env)
        step_go_node(env)
        step_gate(env, log)
        step_reauth(env)
        step_tls_bad_input(env, broker, log)
        step_failed_logins(env, broker, a.failed_logins)
        step_sslscan(env)
        step_reload(env, a.samsactl, broker)
        step_samsactl_user(env, a.samsactl, broker)
        checks(broker.alive(), "samsad is still running")
        checks(broker.stop() is None, "samsad exits 0 on SIGTERM")
        ok = True
    except Exception as e:
        checks(False, f"unexpected {type(e).__name__}: {e}")
    finally:
        if broker.alive():
            broker.stop()
        rc = checks.finish()
        if rc:
            print(f"[security] samsad log tail:\n{broker.tail(40, '  | ')}", flush=True)
            print(f"[security] work dir kept: {work}", flush=True)
        elif ok:
            shutil.rmtree(work, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
