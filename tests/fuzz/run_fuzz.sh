#!/usr/bin/env bash
# Runs the Kafka request decoder fuzzer for a fixed time over a copy of its seed corpus.
#   tests/fuzz/run_fuzz.sh <fuzz-build-dir> <corpus-dir> [seconds] [target]
# target defaults to kafka_request_fuzz.
# Fails on any crash, sanitizer report, leak, timeout or oversized allocation; the input
# that caused it is kept and its path printed. The committed corpus is never modified.
set -euo pipefail

if [[ $# -lt 2 ]]; then
  echo "usage: $0 <fuzz-build-dir> <corpus-dir> [seconds]" >&2
  exit 2
fi
build=$1
corpus=$2
seconds=${3:-60}
target=${4:-kafka_request_fuzz}
fuzzer=$build/tests/fuzz/$target
if [[ ! -x $fuzzer ]]; then
  echo "$0: $fuzzer not built (configure $build with -DSAMSA_FUZZ=ON and build $target)" >&2
  exit 1
fi
if [[ ! -d $corpus ]]; then
  echo "$0: no corpus at $corpus" >&2
  exit 1
fi

work=$(mktemp -d /tmp/samsa-fuzz-$target.XXXXXX)
cleanup() {
  # Keep the work folder when something was found, so the input can be replayed.
  if [[ ${status:-1} -eq 0 ]]; then rm -rf "$work"; fi
}
trap cleanup EXIT
mkdir -p "$work/corpus" "$work/artifacts"
cp -r "$corpus"/. "$work/corpus/"

# malloc_limit_mb: no single allocation may approach what an absurd length would ask for;
# inputs are at most max_len bytes, so anything near 64 MiB is a decoder trusting a count.
status=0
"$fuzzer" "$work/corpus" \
  -max_total_time="$seconds" \
  -max_len=65536 \
  -timeout=10 \
  -rss_limit_mb=2048 \
  -malloc_limit_mb=64 \
  -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" >"$work/log" 2>&1 || status=$?

tail -n 25 "$work/log"
found=$(find "$work/artifacts" -type f | head -n 20)
if [[ $status -ne 0 || -n $found ]]; then
  status=1
  echo "$target FAILED; inputs kept in $work/artifacts:" >&2
  for f in $found; do
    echo "  $f (replay: $fuzzer $f)" >&2
  done
  exit 1
fi
echo "$target: no failures in ${seconds}s"
