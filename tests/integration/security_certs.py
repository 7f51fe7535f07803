"""Throwaway certificates for the security tests, made with Debian's openssl command: a CA, the
broker's certificate (SAN 127.0.0.1 and localhost) with its key in one PEM file (Kafka's
ssl.keystore.type=PEM keystore), and client certificates for mutual TLS. EC P-256 keys: quick
to make and to use on 2 cores."""

from __future__ import annotations

import os
import subprocess


def _run(*args: str, cwd: str):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, text=True)


def make_ca(d: str, name: str = "ca") -> tuple[str, str]:
    key, cert = os.path.join(d, f"{name}.key"), os.path.join(d, f"{name}.pem")
    _run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", key, "-out", cert, "-days", "2", "-subj", f"/CN=samsa test {name}", cwd=d)
    return key, cert


def make_cert(d: str, name: str, subject: str, ca: tuple[str, str], san: str | None = None,
              key_password: str | None = None, serial: int = 1) -> tuple[str, str, str]:
    """Signs a certificate for `subject` ("/CN=alice/OU=eng/O=samsa"); returns (key, cert,
    keystore): the keystore holds the key (encrypted with key_password, if given) and the
    certificate then the CA's, as Kafka's PEM keystore file does."""
    ca_key, ca_cert = ca
    key, csr, cert = (os.path.join(d, f"{name}.{x}") for x in ("key", "csr", "crt"))
    _run("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", key, "-out", csr, "-subj", subject, cwd=d)
    ext = os.path.join(d, f"{name}.ext")
    with open(ext, "w") as f:
        f.write("basicConstraints=CA:FALSE\n")
        if san:
            f.write(f"subjectAltName={san}\n")
    _run("x509", "-req", "-in", csr, "-CA", ca_cert, "-CAkey", ca_key, "-set_serial", str(serial),
         "-out", cert, "-days", "2", "-extfile", ext, cwd=d)
    keystore = os.path.join(d, f"{name}.keystore.pem")
    if key_password:
        enc = os.path.join(d, f"{name}.enc.key")
        _run("pkcs8", "-topk8", "-in", key, "-out", enc, "-passout", f"pass:{key_password}",
             "-v2", "aes-256-cbc", cwd=d)
        key_text = open(enc).read()
    else:
        key_text = open(key).read()
    with open(keystore, "w") as f:
        f.write(key_text + open(cert).read() + open(ca_cert).read())
    return key, cert, keystore
