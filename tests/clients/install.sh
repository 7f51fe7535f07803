#!/usr/bin/env bash
# Installs the Kafka client libraries the integration tests drive that are not Debian packages:
# kafkajs and its codecs from npm into tests/clients/node/node_modules (ignored by git).
# The Debian ones (kcat, python3-confluent-kafka, python3-kafka and the codec modules
# python3-lz4, python3-snappy, python3-zstandard) come from scripts/install-deps.sh.
# Idempotent and quiet: does nothing when node_modules already matches package.json.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
node_dir=$here/node

if ! command -v npm >/dev/null; then
  echo "clients/install.sh: npm not found; kafkajs tests cannot run (apt-get install npm)" >&2
  exit 1
fi

# The stamp records which package.json the tree was installed from; the require() check
# catches a half-finished or foreign node_modules (e.g. native addons built for another node).
stamp=$node_dir/node_modules/.samsa-installed
want=$(sha256sum "$node_dir/package.json" | cut -d' ' -f1)-$(node --version)
loads() {
  (cd "$node_dir" && node -e "for (const m of ['kafkajs','kafkajs-lz4','kafkajs-snappy','zstd-napi']) require(m)") \
    >/dev/null 2>&1
}
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && loads; then
  exit 0
fi

echo "clients/install.sh: installing kafkajs and codecs into $node_dir/node_modules" >&2
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
