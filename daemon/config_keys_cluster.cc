// The cluster's broker settings, in a table of their own beside config_keys.cc's: the
// controller quorum (controller.*, metadata.*), registration and heartbeats, racks and replica
// selection, and the follower fetchers and ISR (replica.*). Kafka's names; where samsa's
// default differs, the doc says why.
#include <cstdint>
#include <vector>

#include "daemon/config.h"

namespace samsa::daemon {

namespace {

using T = ConfigType;
constexpr std::int64_t kMax32 = INT32_MAX;

const std::vector<ConfigKey> kKeys = {
    {"controller.listener.names",
     T::list,
     "",
     {},
     {},
     {},
     false,
     "Listener names the controller serves on. A single node does not open them; a "
     "controller node listens only on them; a broker node must not."},
    {"samsa.cluster.id",
     T::string,
     "",
     {},
     {},
     {},
     false,
     "The cluster id a node with no data takes (what kafka-storage format -t gives every "
     "node). Required on the voters of a quorum of several controllers; unset, a single node "
     "or a lone controller makes one up and a broker asks its controller."},
    {"controller.quorum.voters",
     T::list,
     "",
     {},
     {},
     {},
     false,
     "The controller quorum's voters, id@host:port each (KRaft's static quorum). Empty on a "
     "controller: a quorum of itself. A broker with it set follows whichever voter leads."},
    {"controller.quorum.election.timeout.ms",
     T::int32,
     "1000",
     10,
     kMax32,
     {},
     false,
     "How long a voter without a leader waits before standing (randomised up to twice)."},
    {"controller.quorum.fetch.timeout.ms",
     T::int32,
     "2000",
     10,
     kMax32,
     {},
     false,
     "A follower that has not fetched from its leader this long stands for election; a "
     "leader not fetched from by a majority for 1.5 times this resigns."},
    {"controller.quorum.election.backoff.max.ms",
     T::int32,
     "1000",
     1,
     kMax32,
     {},
     false,
     "The longest random back-off after a lost election."},
    {"metadata.log.max.record.bytes.between.snapshots",
     T::int64,
     "20971520",
     1,
     INT64_MAX,
     {},
     false,
     "Bytes of metadata log after which the controller state is written as a snapshot "
     "(.checkpoint) and the log before it deleted."},
    {"metadata.log.max.snapshot.interval.ms",
     T::int64,
     "3600000",
     0,
     INT64_MAX,
     {},
     false,
     "A snapshot is also written this long after the last one if the log grew."},
    {"controller.quorum.bootstrap.servers",
     T::list,
     "",
     {},
     {},
     {},
     false,
     "host:port of controllers a node asks until it knows the quorum's leader (a broker "
     "registers with the active controller and follows the metadata log from it)."},
    {"broker.rack",
     T::string,
     "",
     {},
     {},
     {},
     false,
     "Rack of this broker: the controller spreads each partition's replicas over racks, and "
     "with replica.selector.class consumers may fetch from a replica in their own rack."},
    {"replica.selector.class",
     T::string,
     "",
     {},
     {},
     {},
     false,
     "org.apache.kafka.common.replica.RackAwareReplicaSelector: a leader answers a consumer "
     "whose client.rack (Fetch v11+ rack_id) names another rack than its own with "
     "PreferredReadReplica, an in-sync follower in that rack holding the fetch offset (KIP-392). "
     "Empty (the default): consumers are served by leaders, or by the replica they ask."},
    {"inter.broker.listener.name",
     T::string,
     "",
     {},
     {},
     {},
     false,
     "The listener other brokers reach this one on (default: the first listener)."},
    {"broker.session.timeout.ms",
     T::int32,
     "1500",
     100,
     kMax32,
     {},
     false,
     "A broker whose heartbeats stop this long is fenced and its leaderships move. Kafka's "
     "default is 9000; samsa's lets a failover finish within 2 s."},
    {"broker.heartbeat.interval.ms",
     T::int32,
     "250",
     10,
     kMax32,
     {},
     false,
     "How often a broker node heartbeats to the controller (Kafka: 2000); below "
     "broker.session.timeout.ms."},
    {"auto.leader.rebalance.enable",
     T::boolean,
     "true",
     {},
     {},
     {},
     false,
     "The controller moves leaderships back to each partition's preferred (first) replica "
     "once it is in the ISR again, every leader.imbalance.check.interval.seconds."},
    {"leader.imbalance.check.interval.seconds",
     T::int64,
     "300",
     1,
     kMax32,
     {},
     false,
     "How often the controller looks for leaderships to move back to preferred replicas."},
    {"replica.lag.time.max.ms",
     T::int64,
     "30000",
     100,
     kMax32,
     {},
     false,
     "A follower that has not caught up with its leader's log end for this long leaves the ISR "
     "(a stopped broker leaves it sooner: when its session expires and it is fenced)."},
    {"replica.fetch.wait.max.ms",
     T::int32,
     "500",
     0,
     kMax32,
     {},
     false,
     "How long a follower's Fetch may wait at the leader for new records."},
    {"replica.fetch.max.bytes",
     T::int32,
     "1048576",
     1,
     kMax32,
     {},
     false,
     "Bytes a follower asks per partition in one Fetch (a larger first batch still comes whole)."},
    {"replica.fetch.response.max.bytes",
     T::int32,
     "10485760",
     1,
     kMax32,
     {},
     false,
     "Bytes a follower asks for in one Fetch across its partitions."},
    {"replica.fetch.backoff.ms",
     T::int32,
     "100",
     0,
     kMax32,
     {},
     false,
     "How long a follower waits before fetching again after an error (Kafka: 1000; samsa "
     "retries sooner so a failover's followers catch up within its 2 s)."},
};

}  // namespace

const std::vector<ConfigKey>& cluster_config_keys() {
  return kKeys;
}

}  // namespace samsa::daemon
