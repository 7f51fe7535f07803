// Where the replicas of a broker being drained go (samsactl broker drain; admin_brokers.cc).
//
// plan_drain is a pure function of the metadata image: for every partition with a replica on
// the broker it names the replica list that replaces the broker by another usable one
// (registered, unfenced, not in controlled shutdown) that does not hold the partition yet.
// The choice keeps the load even (the broker with the fewest replicas, counted as the plan
// goes on) and, when brokers have racks, the partition's rack spread: the drained broker's own
// rack first, then a rack the partition's other replicas are not on. The replacement takes
// the drained broker's place in the list, so the preferred leaders stay spread as they were.
// The whole plan is submitted as one AlterPartitionReassignments.
#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <vector>

#include "replication/metadata_image.h"

namespace samsa::daemon {

struct DrainMove {
  std::string topic;
  std::int32_t partition = 0;
  std::vector<std::int32_t> from;    // the replicas it is meant to have now
  std::vector<std::int32_t> target;  // from, with the drained broker replaced
  std::int32_t replacement = -1;
};

struct DrainPlan {
  std::int32_t broker = -1;
  // Partitions with a replica on the broker (what "N of M partitions moved" counts).
  std::size_t partitions = 0;
  std::vector<DrainMove> moves;
  // "topic-p" already being moved off the broker by a reassignment in progress: left alone.
  std::vector<std::string> moving_away;
};

// Whether a broker may take replicas: registered, unfenced, not shutting down.
bool usable_for_replicas(const replication::BrokerState& b);

// The plan, or why there is none: the broker is not registered, or some partitions cannot keep
// their replication factor without it (each named with its factor, and the usable brokers).
std::expected<DrainPlan, std::string> plan_drain(const replication::MetadataImage& image,
                                                 std::int32_t broker);

}  // namespace samsa::daemon
