#!/usr/bin/python3
# Regenerates the Java-client test vectors of tests/unit/io/compression_test.cc: compiles and runs
# CompressionGenJava.java against kafka-clients from Maven Central (fetched with
# `mvn dependency:get -Dartifact=org.apache.kafka:kafka-clients:4.0.0`) on the records of
# compression_gen_kafka_python.py, then checks the plain section matches that script's.
import glob
import os
import struct
import subprocess
import sys
import tempfile

OUT = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, OUT)
from compression_gen_records import records  # noqa: E402

subprocess.run(["mvn", "-q", "dependency:get", "-Dartifact=org.apache.kafka:kafka-clients:4.0.0"],
               check=True)
m2 = os.path.expanduser("~/.m2/repository")
jars = [glob.glob(os.path.join(m2, p))[0] for p in (
    "org/apache/kafka/kafka-clients/4.0.0/*.jar", "org/xerial/snappy/snappy-java/*/*.jar",
    "org/lz4/lz4-java/*/*.jar", "com/github/luben/zstd-jni/*/*.jar",
    "org/slf4j/slf4j-api/*/*.jar")]
cp = ":".join(jars)
with tempfile.TemporaryDirectory() as tmp:
    src = os.path.join(tmp, "recs.bin")
    with open(src, "wb") as f:
        for ts, k, v in records():
            f.write(struct.pack(">qi", ts, len(k)) + k + struct.pack(">i", len(v)) + v)
    subprocess.run(["javac", "-d", tmp, "-cp", cp, os.path.join(OUT, "CompressionGenJava.java")],
                   check=True)
    subprocess.run(["java", "-cp", cp + ":" + tmp, "CompressionGenJava", src, tmp], check=True)
    for f in glob.glob(os.path.join(tmp, "compression_*_java.bin")):
        data = open(f, "rb").read()
        if f.endswith("plain_java.bin"):
            assert data == open(os.path.join(OUT, "compression_plain.bin"), "rb").read(), \
                "the Java client's plain records differ from kafka-python's"
            continue
        with open(os.path.join(OUT, os.path.basename(f)), "wb") as out:
            out.write(data)
