#!/usr/bin/env bash
# Installs the Kafka clients the integration tests drive that are not Debian packages, each
# into the tree or a cache (ignored by git):
#   - kafkajs with its codecs and @platformatic/kafka from npm into node/node_modules;
#   - confluent-kafka from PyPI (a wheel bundling a current librdkafka) into venv/, a venv of
#     Debian's python3 that also sees Debian's codec modules;
#   - the franz-go driver's modules from the Go proxy (go/go.sum pins them), built once to warm
#     Go's build cache;
#   - Apache Kafka's Java client of each version the tests run (java/clients.sh, Maven Central).
# The Debian ones (kcat, python3-confluent-kafka, python3-kafka and the codec modules
# python3-lz4, python3-snappy, python3-zstandard) come from scripts/install-deps.sh, as do
# Apache Kafka's broker and tools jars (perf/vs-kafka/kafka.sh fetch).
# Idempotent and quiet: each part does nothing when what it installed is still in place.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
node_dir=$here/node

# Pinned versions (the tests quote them in their output).
CONFLUENT_KAFKA_VERSION=2.16.1
JAVA_CLIENT_VERSIONS=(3.9.2 4.1.2)

quiet() {
  # Runs "$@" with its output kept back unless it fails.
  local log
  log=$(mktemp)
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    return 1
  fi
  rm -f "$log"
}

# --- confluent-kafka from PyPI -----------------------------------------------------------------
venv=$here/venv
want_py="confluent-kafka==$CONFLUENT_KAFKA_VERSION $(/usr/bin/python3 --version 2>&1)"
if [ "$(cat "$venv/.samsa-installed" 2>/dev/null)" != "$want_py" ] ||
  ! "$venv/bin/python" -c "import confluent_kafka" >/dev/null 2>&1; then
  echo "clients/install.sh: installing confluent-kafka $CONFLUENT_KAFKA_VERSION into $venv" >&2
  rm -rf "$venv"
  # --system-site-packages: segments.py decodes with Debian's python3-snappy/lz4/zstandard.
  # The pinned version keeps pip from settling for Debian's confluent-kafka 1.7.
  quiet /usr/bin/python3 -m venv --system-site-packages "$venv"
  quiet "$venv/bin/pip" install --disable-pip-version-check --no-input \
    "confluent-kafka==$CONFLUENT_KAFKA_VERSION"
  "$venv/bin/python" -c "import confluent_kafka as c; v = c.version(); assert (v[0] if isinstance(v, tuple) else v) == '$CONFLUENT_KAFKA_VERSION'" ||
    { echo "clients/install.sh: the venv does not load confluent-kafka $CONFLUENT_KAFKA_VERSION" >&2; exit 1; }
  echo "$want_py" >"$venv/.samsa-installed"
fi

# --- franz-go ------------------------------------------------------------------------------------
# franz-go v1.20.5 needs Go >= 1.24 (go/go.mod), which must come with the machine: Debian 12 has
# 1.19 (bookworm-backports 1.23) and toolchain downloads fail here (GOTOOLCHAIN=local). Without
# it the franz-go test skips, or fails under CI=true; the other clients are still installed.
if command -v go >/dev/null; then
  (cd "$here/go" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly quiet go build -o /dev/null ./cmd/...) ||
    echo "clients/install.sh: the franz-go driver does not build with $(go version); it needs Go >= 1.24" >&2
else
  echo "clients/install.sh: go not found; the franz-go test cannot run (it needs Go >= 1.24)" >&2
fi

# --- Java clients --------------------------------------------------------------------------------
for v in "${JAVA_CLIENT_VERSIONS[@]}"; do
  bash "$here/java/clients.sh" fetch "$v"
done

# --- npm -----------------------------------------------------------------------------------------

if ! command -v npm >/dev/null; then
  echo "clients/install.sh: npm not found; kafkajs tests cannot run (apt-get install npm)" >&2
  exit 1
fi

# The stamp records which package.json the tree was installed from; the require() check
# catches a half-finished or foreign node_modules (e.g. native addons built for another node).
stamp=$node_dir/node_modules/.samsa-installed
want=$(sha256sum "$node_dir/package.json" | cut -d' ' -f1)-$(node --version)
loads() {
  (cd "$node_dir" && node -e "for (const m of ['kafkajs','kafkajs-lz4','kafkajs-snappy','zstd-napi','@platformatic/kafka']) require(m)") \
    >/dev/null 2>&1
}
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && loads; then
  exit 0
fi

echo "clients/install.sh: installing kafkajs, @platformatic/kafka and codecs into $node_dir/node_modules" >&2
log=$(mktemp)
# zstd-napi and lz4 build native addons with node-gyp (zstd-napi first tries to download a
# prebuilt binary, which fails offline and falls back to building its bundled sources).
if ! (cd "$node_dir" && npm install --no-audit --no-fund --no-progress --loglevel=error \
  >"$log" 2>&1); then
  cat "$log" >&2
  rm -f "$log"
  exit 1
fi
rm -f "$log"
loads || {
  echo "clients/install.sh: installed modules do not load" >&2
  exit 1
}
echo "$want" >"$stamp"
