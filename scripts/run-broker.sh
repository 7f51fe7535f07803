#!/usr/bin/env bash
# Installs what is missing, builds, and runs a single-node samsad on 127.0.0.1:9092 with its
# data in ./data and its admin socket in ./samsa-admin.sock. Extra arguments go to samsad
# (e.g. --override log.retention.ms=60000).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --run
cmake -S . -B build -G Ninja >/dev/null
cmake --build build -j "$(nproc)" --target samsad
mkdir -p data
exec build/daemon/samsad \
  --override listeners=PLAINTEXT://127.0.0.1:9092 \
  --override log.dirs="$PWD/data" \
  --override samsa.admin.socket="$PWD/samsa-admin.sock" "$@"
