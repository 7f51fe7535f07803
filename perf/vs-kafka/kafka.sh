#!/usr/bin/env bash
# Fetches, starts and stops a single-node Apache Kafka (KRaft, broker+controller in one JVM).
# It is the oracle the client drivers are validated against and the reference for side-by-side
# runs. Jars come from Maven Central into a cache outside the tree; all broker state stays in the
# directory given to `start`.
#
#   kafka.sh fetch                          resolve broker, tools and Connect jars (idempotent)
#   kafka.sh start DIR PORT [key=value...]  format DIR, start the broker on 127.0.0.1:PORT, wait
#   kafka.sh stop DIR                       SIGTERM, then SIGKILL after a grace period
#   kafka.sh classpath                      print the classpath (for `java -cp`)
#   kafka.sh run MAIN_CLASS [args...]       run a class from the fetched jars (tools, clients)
#
# Environment: KAFKA_VERSION (default 4.1.1), SAMSA_CACHE (default ~/.cache/samsa),
# KAFKA_HEAP (default "-Xmx768m -Xms256m"), KAFKA_START_TIMEOUT seconds (default 120),
# KAFKA_ADVERTISED_PORT (default PORT: the port metadata tells clients to use, e.g. a capturing
# proxy's, so that clients keep talking through it after bootstrap).
# The broker's log directory (what a test inspects for segments) is DIR/data.
set -euo pipefail

KAFKA_VERSION=${KAFKA_VERSION:-4.1.1}
SAMSA_CACHE=${SAMSA_CACHE:-$HOME/.cache/samsa}
KAFKA_HOME=$SAMSA_CACHE/kafka-$KAFKA_VERSION
LIBS=$KAFKA_HOME/libs
KAFKA_HEAP=${KAFKA_HEAP:--Xmx768m -Xms256m}
KAFKA_START_TIMEOUT=${KAFKA_START_TIMEOUT:-120}

die() {
  echo "kafka.sh: $*" >&2
  exit 1
}

# connect-file (FileStreamSource/Sink, tests/integration/kafka_connect_test.py) and
# kafka-streams (tests/integration/streams_eos_test.py) joined the list later: a cache without
# them is resolved again.
fetched() {
  [ -f "$LIBS/.complete" ] && [ -f "$LIBS/connect-file-$KAFKA_VERSION.jar" ] &&
    [ -f "$LIBS/kafka-streams-$KAFKA_VERSION.jar" ]
}

cmd_fetch() {
  if fetched; then
    return 0
  fi
  command -v mvn >/dev/null || die "mvn not found (apt-get install maven)"
  command -v java >/dev/null || die "java not found (apt-get install openjdk-17-jdk-headless)"
  local work=$KAFKA_HOME/resolve
  mkdir -p "$work"
  # The broker artifact alone does not pull the tools (console producer/consumer, perf tools)
  # nor the slf4j 1.x -> log4j2 binding that the release tarball ships (without it the broker
  # logs nothing); name them so the cache matches the tarball's libs/. kafka-tools brings
  # connect-runtime (Kafka Connect's worker); connect-file adds the file connectors.
  cat >"$work/pom.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>samsa.perf</groupId>
  <artifactId>kafka-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <properties><log4j.version>2.24.3</log4j.version></properties>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-clients</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>connect-runtime</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>connect-file</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-streams</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>\${log4j.version}</version></dependency>
  </dependencies>
</project>
EOF
  rm -rf "$LIBS.tmp"
  echo "kafka.sh: resolving Apache Kafka $KAFKA_VERSION from Maven Central into $LIBS" >&2
  mvn -q -B -Dstyle.color=never -f "$work/pom.xml" -Dmaven.repo.local="$SAMSA_CACHE/m2" \
    dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$LIBS.tmp" >&2 ||
    die "maven could not resolve kafka $KAFKA_VERSION"
  ls "$LIBS.tmp"/kafka_2.13-"$KAFKA_VERSION".jar >/dev/null 2>&1 || die "broker jar missing after resolve"
  rm -rf "$LIBS"
  mv "$LIBS.tmp" "$LIBS"
  touch "$LIBS/.complete"
}

classpath() { echo "$LIBS/*"; }

free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

pid_alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }

cmd_start() {
  [ $# -ge 2 ] || die "usage: kafka.sh start DIR PORT [key=value...]"
  local dir=$1 port=$2
  shift 2
  fetched || cmd_fetch
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  if [ -f "$dir/kafka.pid" ] && pid_alive "$(cat "$dir/kafka.pid")"; then
    die "a broker is already running from $dir (pid $(cat "$dir/kafka.pid"))"
  fi
  port_open "$port" && die "port $port is already in use"
  local cport
  cport=${KAFKA_CONTROLLER_PORT:-$(free_port)}
  mkdir -p "$dir/data"

  # Settings a single node needs (replication factors of internal topics = 1) plus fast group
  # joins for tests; extra key=value arguments are appended and win (last one counts).
  cat >"$dir/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:${KAFKA_ADVERTISED_PORT:-$port},CONTROLLER://127.0.0.1:$cport
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$dir/data
num.partitions=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
EOF
  local kv
  for kv in "$@"; do
    [[ $kv == *=* ]] || die "not key=value: $kv"
    echo "$kv" >>"$dir/server.properties"
  done

  cat >"$dir/log4j2.properties" <<EOF
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = $dir/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = org.apache.kafka
logger.kafka.level = INFO
EOF

  local java_opts=($KAFKA_HEAP -XX:+UseG1GC -Djava.awt.headless=true
    -Dlog4j2.configurationFile="$dir/log4j2.properties")
  if [ ! -f "$dir/data/meta.properties" ]; then
    local cluster_id
    cluster_id=$(java -cp "$(classpath)" "${java_opts[@]}" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -1)
    [ -n "$cluster_id" ] || die "StorageTool random-uuid failed"
    java -cp "$(classpath)" "${java_opts[@]}" kafka.tools.StorageTool format --standalone \
      -t "$cluster_id" -c "$dir/server.properties" >"$dir/format.log" 2>&1 ||
      die "storage format failed: $(tail -5 "$dir/format.log")"
  fi

  # setsid: the broker must not share the caller's process group, so a test runner that kills
  # its own group does not take the broker down half-way, and `stop` has one pid to signal.
  setsid java -cp "$(classpath)" "${java_opts[@]}" kafka.Kafka "$dir/server.properties" \
    >"$dir/stdout.log" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$dir/kafka.pid"

  # The port opens before the broker has caught up with its own metadata log; "Kafka Server
  # started" is logged once it serves requests.
  local deadline=$((SECONDS + KAFKA_START_TIMEOUT))
  until port_open "$port" && grep -q "Kafka Server started" "$dir/server.log" 2>/dev/null; do
    if ! pid_alive "$pid"; then
      tail -20 "$dir/stdout.log" "$dir/server.log" >&2 2>/dev/null || true
      die "broker exited during start-up (logs in $dir)"
    fi
    if ((SECONDS >= deadline)); then
      kill -KILL "$pid" 2>/dev/null || true
      die "broker did not start within ${KAFKA_START_TIMEOUT}s (logs in $dir)"
    fi
    sleep 0.3
  done
  echo "kafka.sh: Apache Kafka $KAFKA_VERSION pid $pid on 127.0.0.1:$port (controller $cport), data in $dir/data" >&2
}

cmd_stop() {
  [ $# -eq 1 ] || die "usage: kafka.sh stop DIR"
  local dir=$1 pid
  [ -f "$dir/kafka.pid" ] || return 0
  pid=$(cat "$dir/kafka.pid")
  if pid_alive "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + 30))
    while pid_alive "$pid" && ((SECONDS < deadline)); do sleep 0.2; done
    if pid_alive "$pid"; then
      echo "kafka.sh: broker $pid ignored SIGTERM for 30s, killing" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$dir/kafka.pid"
}

cmd_run() {
  [ $# -ge 1 ] || die "usage: kafka.sh run MAIN_CLASS [args...]"
  fetched || cmd_fetch
  local main=$1
  shift
  exec java -Xmx512m -cp "$(classpath)" -Dlog4j2.level=WARN "$main" "$@"
}

case ${1:-} in
  fetch) cmd_fetch ;;
  start) shift && cmd_start "$@" ;;
  stop) shift && cmd_stop "$@" ;;
  classpath) fetched || cmd_fetch && classpath ;;
  run) shift && cmd_run "$@" ;;
  *) die "usage: kafka.sh fetch | start DIR PORT [key=value...] | stop DIR | classpath | run MAIN [args]" ;;
esac
