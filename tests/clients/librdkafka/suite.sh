#!/usr/bin/env bash
# librdkafka's own regression suite (the tests/ of its source, the version Debian ships: 2.0.2),
# built once into a cache outside the tree: the source tarball from Debian's pool (checked
# against its SHA-256), librdkafka's static libraries and the suite's test-runner.
#
#   suite.sh build                      fetch and build if needed; prints the tests directory
#   suite.sh run CONF TEST...           runs each test (e.g. 0103) with CONF as test.conf
#
# Environment: SAMSA_CACHE (default ~/.cache/samsa). TEST_KAFKA_VERSION tells the suite which
# broker features to expect; samsa speaks Kafka 4.1's protocol, the suite knows versions up to
# 3.x: 3.9.0.
set -euo pipefail

SAMSA_CACHE=${SAMSA_CACHE:-$HOME/.cache/samsa}
VERSION=2.0.2
URL=http://deb.debian.org/debian/pool/main/libr/librdkafka/librdkafka_$VERSION.orig.tar.gz
SHA256=f321bcb1e015a34114c83cf1aa7b99ee260236aab096b85c003170c90a47ca9d
DIR=$SAMSA_CACHE/librdkafka-$VERSION-suite

die() {
  echo "suite.sh: $*" >&2
  exit 1
}

build() {
  [ -x "$DIR/src/tests/test-runner" ] && [ -f "$DIR/.complete" ] && return 0
  command -v curl >/dev/null || die "curl not found"
  rm -rf "$DIR" && mkdir -p "$DIR"
  echo "suite.sh: fetching and building librdkafka $VERSION's test suite into $DIR" >&2
  curl -sfL -o "$DIR/src.tar.gz" "$URL" || die "cannot fetch $URL"
  echo "$SHA256  $DIR/src.tar.gz" | sha256sum -c --quiet - || die "checksum mismatch: $URL"
  mkdir "$DIR/src" && tar xzf "$DIR/src.tar.gz" -C "$DIR/src" --strip-components=1
  (cd "$DIR/src" &&
    ./configure --disable-ssl --disable-gssapi --disable-sasl --disable-curl \
      >"$DIR/configure.log" 2>&1 &&
    make -j"$(nproc)" libs >"$DIR/make.log" 2>&1 &&
    make -j"$(nproc)" -C tests test-runner >"$DIR/tests.log" 2>&1) ||
    die "build failed (logs in $DIR)"
  touch "$DIR/.complete"
}

case ${1:-} in
  build)
    build
    echo "$DIR/src/tests"
    ;;
  run)
    [ $# -ge 3 ] || die "usage: suite.sh run CONF TEST..."
    build
    conf=$(realpath "$2")
    shift 2
    cd "$DIR/src/tests"
    rc=0
    for t in "$@"; do
      TESTS=$t TEST_KAFKA_VERSION=${TEST_KAFKA_VERSION:-3.9.0} RDKAFKA_TEST_CONF=$conf \
        ./test-runner || rc=1
    done
    exit $rc
    ;;
  *) die "usage: suite.sh build | run CONF TEST..." ;;
esac
