#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds the three flavours (gcc main,
# gcc ASan+UBSan unit tests, clang libFuzzer target) and runs every CTest test from the main
# tree, ending with ctest's summary.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh

jobs=$(nproc)
# Warnings are errors here and in CI; a plain cmake (a packager's) never gets -Werror.
werror=-DSAMSA_WERROR=ON
cmake -S . -B build-asan -G Ninja $werror -DSAMSA_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-asan -j "$jobs"
cmake -S . -B build-fuzz -G Ninja $werror -DSAMSA_FUZZ=ON -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz -j "$jobs"
cmake -S . -B build -G Ninja $werror -DSAMSA_ASAN_DIR="$PWD/build-asan" -DSAMSA_FUZZ_DIR="$PWD/build-fuzz" >/dev/null
cmake --build build -j "$jobs"

cd build
exec ctest --output-on-failure --timeout 900 -j "${SAMSA_TEST_JOBS:-2}" "$@"
