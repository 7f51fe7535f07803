#!/usr/bin/env bash
# Fetches Apache Kafka's Java client (org.apache.kafka:kafka-clients) of one version with its
# runtime dependencies from Maven Central into a cache outside the tree, and prints its
# classpath. The Java driver runs on it; each version has a directory of its own, so several
# versions stay cached side by side.
#
#   clients.sh fetch VERSION        resolve (idempotent)
#   clients.sh classpath VERSION    fetch if needed, print the classpath (for `java -cp`)
#
# Environment: SAMSA_CACHE (default ~/.cache/samsa; the Maven repository is $SAMSA_CACHE/m2, the
# one perf/vs-kafka/kafka.sh uses).
set -euo pipefail

SAMSA_CACHE=${SAMSA_CACHE:-$HOME/.cache/samsa}

die() {
  echo "clients.sh: $*" >&2
  exit 1
}

fetch() {
  local version=$1 libs=$SAMSA_CACHE/kafka-clients-$1
  [ -f "$libs/.complete" ] && return 0
  command -v mvn >/dev/null || die "mvn not found (apt-get install maven)"
  local work=$libs.resolve
  mkdir -p "$work"
  # slf4j-simple: without a binding the client's warnings (retries, refused batches) vanish.
  cat >"$work/pom.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>samsa.tests</groupId>
  <artifactId>kafka-clients-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-clients</artifactId><version>$version</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-simple</artifactId><version>1.7.36</version></dependency>
  </dependencies>
</project>
EOF
  rm -rf "$libs.tmp"
  echo "clients.sh: resolving kafka-clients $version from Maven Central into $libs" >&2
  mvn -q -B -Dstyle.color=never -f "$work/pom.xml" -Dmaven.repo.local="$SAMSA_CACHE/m2" \
    dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$libs.tmp" >&2 ||
    die "maven could not resolve kafka-clients $version"
  ls "$libs.tmp/kafka-clients-$version.jar" >/dev/null 2>&1 || die "kafka-clients jar missing"
  rm -rf "$libs" "$work"
  mv "$libs.tmp" "$libs"
  touch "$libs/.complete"
}

[ $# -eq 2 ] || die "usage: clients.sh fetch|classpath VERSION"
case $1 in
  fetch) fetch "$2" ;;
  classpath) fetch "$2" && echo "$SAMSA_CACHE/kafka-clients-$2/*" ;;
  *) die "usage: clients.sh fetch|classpath VERSION" ;;
esac
