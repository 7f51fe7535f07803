// The replication throttles' broker settings (Kafka's ReplicationQuotaManager), in a table of
// their own beside config_keys.cc's: the byte rates kafka-reassign-partitions --throttle and
// kafka-configs --entity-type brokers set, per broker or as the cluster-wide default. Which
// replicas they hold back are the topic configs leader.replication.throttled.replicas and
// follower.replication.throttled.replicas (replication/topic_config.cc); how, is
// daemon/cluster/replication_throttle.h.
#include <cstdint>
#include <vector>

#include "daemon/config.h"

namespace samsa::daemon {

namespace {

using T = ConfigType;

const std::vector<ConfigKey> kReplicationKeys = {
    {"leader.replication.throttled.rate",
     T::int64,
     "9223372036854775807",
     0,
     INT64_MAX,
     {},
     true,
     "Bytes per second this broker's leaders send to followers of the replicas "
     "leader.replication.throttled.replicas names (measured over 11 one-second windows); "
     "above it, followers outside the ISR get no records for those partitions until the rate "
     "is back under. The default (Long.MAX_VALUE) throttles nothing. Kafka sets it only "
     "dynamically; samsa also reads it from the file."},
    {"follower.replication.throttled.rate",
     T::int64,
     "9223372036854775807",
     0,
     INT64_MAX,
     {},
     true,
     "Bytes per second this broker's followers fetch for the replicas "
     "follower.replication.throttled.replicas names (measured over 11 one-second windows); "
     "above it, those of them that have not caught up with their leader are left out of its "
     "fetches until the rate is back under. The default (Long.MAX_VALUE) throttles nothing. "
     "Kafka sets it only dynamically; samsa also reads it from the file."},
    // kafka-reassign-partitions sets and clears it with the two rates above (--throttle,
    // --verify); refusing it would fail those commands. samsa moves no replica between its own
    // log dirs (no AlterReplicaLogDirs), so nothing reads it.
    {"replica.alter.log.dirs.io.max.bytes.per.second",
     T::int64,
     "9223372036854775807",
     0,
     INT64_MAX,
     {},
     true,
     "Bytes per second a replica moving between this broker's log dirs may copy. samsa does not "
     "move replicas between log dirs, so the value is kept and has no effect; "
     "kafka-reassign-partitions --throttle sets it beside the replication rates."},
};

}  // namespace

const std::vector<ConfigKey>& replication_config_keys() {
  return kReplicationKeys;
}

}  // namespace samsa::daemon
