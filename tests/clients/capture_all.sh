#!/usr/bin/env bash
# Regenerates tests/unit/net/golden/<client>/: runs every client driver in --small mode against
# Apache Kafka (perf/vs-kafka/kafka.sh) through tests/clients/kcapture.py, which keeps the first
# request frame of each (api, version). The Java driver also runs a KIP-848 consumer group so
# that ConsumerGroupHeartbeat is captured.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$root/tests/unit/net/golden
harness=$root/tests/integration/run_client_test.py
rc=0
for client in kcat confluent_kafka kafka_python kafkajs java; do
  extra=()
  [ "$client" = java ] && extra=(-- --group-protocols classic,consumer)
  log=$(mktemp)
  if python3 "$harness" --client "$client" --broker kafka --small --topic-prefix golden \
    --capture "$out" "${extra[@]}" >"$log" 2>&1; then
    echo "capture_all: $client: $(ls "$out/$client"/*.bin | wc -l) frames"
  else
    cat "$log" >&2
    echo "capture_all: $client FAILED" >&2
    rc=1
  fi
  rm -f "$log"
done
exit $rc
