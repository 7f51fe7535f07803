#!/usr/bin/env bash
# Installs every Debian package (and the npm/PyPI client libraries the tests drive) that the
# build and the test suite need. Idempotent and quiet; run as root on a fresh Debian 12.
#   install-deps.sh         everything: building, running and the whole test suite
#   install-deps.sh --run   only what building and running samsad need (scripts/run-broker.sh):
#                           no clients, JDK, Kafka jars, fuzzing or packaging tools
set -euo pipefail
cd "$(dirname "$0")/.."
run_only=false
[ "${1:-}" = "--run" ] && run_only=true

# Configuring the tree needs GoogleTest, Google Benchmark and librdkafka's headers (tests/ and
# perf/ are part of it); the DPDK backend needs lwIP's sources, unpacked by dpkg-dev.
RUN_DEBS=(
  build-essential cmake ninja-build pkg-config python3
  liburing-dev libsystemd-dev libgtest-dev libgmock-dev libbenchmark-dev libdpdk-dev
  libzstd-dev liblz4-dev libsnappy-dev zlib1g-dev librdkafka-dev dpkg-dev
  libssl-dev
)
DEBS=(
  build-essential cmake ninja-build pkg-config python3
  liburing-dev libsystemd-dev libgtest-dev libgmock-dev libbenchmark-dev libdpdk-dev
  libfuse3-dev fuse3
  clang libclang-rt-14-dev clang-format
  libzstd-dev liblz4-dev libsnappy-dev zlib1g-dev
  # TLS and SASL/SCRAM (net/tls, net/sasl); sslscan checks the SSL listener's protocols/ciphers.
  libssl-dev openssl sslscan python3-cryptography
  kcat python3-confluent-kafka python3-kafka python3-pytest librdkafka-dev
  python3-lz4 python3-snappy python3-zstandard python3-venv
  iproute2 procps psmisc curl ca-certificates strace
  # The DPDK backend's tests turn checksum offload off on the kernel's veth end.
  ethtool
  # Packages and the system test (tests/system): build the .deb/.rpm, check them, boot a
  # Debian root under systemd-nspawn, scrape samsad with a real Prometheus. dpkg-dev also
  # unpacks lwIP's source package (net/dpdk/fetch-lwip.sh).
  dpkg-dev debootstrap systemd-container rpm lintian prometheus
  # perf/: plots (matplotlib), rdkafka_performance from Debian's source package (dpkg-dev,
  # above), profiles (linux-perf), pinning broker and client to cores (taskset, util-linux)
  python3-matplotlib linux-perf util-linux
)
# Node.js, npm, a JDK and Maven usually come with the machine (nodesource's nodejs bundles npm,
# so Debian's npm package must not be pulled in beside it): install them only when absent.
# Go >= 1.24 (the franz-go test) and Node.js >= 20.19 (@platformatic/kafka) must come with the
# machine too: Debian 12 ships Go 1.19 and Node.js 18; tests/clients/install.sh says so.
command -v node >/dev/null || DEBS+=(nodejs)
command -v npm >/dev/null || DEBS+=(npm)
command -v javac >/dev/null || DEBS+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null || DEBS+=(maven)

$run_only && DEBS=("${RUN_DEBS[@]}")
missing=()
for p in "${DEBS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # Only Prometheus' binaries are needed (the system test runs its own); not the package's
  # service listening on :9090 where systemd runs.
  if [[ " ${missing[*]} " == *" prometheus "* ]] && [ -d /run/systemd/system ]; then
    systemctl disable --now prometheus.service >/dev/null 2>&1 || true
  fi
fi

# lwIP's sources from Debian's source package, for the DPDK backend (net/dpdk/fetch-lwip.sh;
# cached in ~/.cache/samsa/lwip).
bash net/dpdk/fetch-lwip.sh >/dev/null

$run_only && exit 0

# Client libraries from npm, PyPI, the Go proxy and Maven Central for the integration tests
# (kept inside the tree and ignored by git, or in ~/.cache/samsa).
if [ -f tests/clients/install.sh ]; then
  bash tests/clients/install.sh
fi
# Apache Kafka's jars from Maven Central (~55 MB, cached in ~/.cache/samsa): the Java client
# driver runs on them, perf/vs-kafka runs the broker from them, and Kafka Connect (with the file
# connectors) runs from them in tests/integration/kafka_connect_test.py.
bash perf/vs-kafka/kafka.sh fetch
# librdkafka's own regression suite (its 2.0.2 source from Debian's pool, built once into
# ~/.cache/samsa, ~3 minutes): tests/cluster/librdkafka_suite_test.py runs its transactional tests.
bash tests/clients/librdkafka/suite.sh build >/dev/null
