// replication::preferred_read_replica — KIP-392's fetch from the closest replica: which replica
// a leader tells a consumer to fetch from (FetchResponse PreferredReadReplica), as Kafka's
// ReplicaManager.findPreferredReadReplica asks its RackAwareReplicaSelector
// (replica.selector.class). Pure: the caller, on the partition's reactor, passes the leader's
// ReplicaState, the image's brokers and the time.
#pragma once

#include <cstdint>
#include <map>
#include <string_view>

#include "replication/metadata_image.h"
#include "replication/replica_state.h"

namespace samsa::replication {

// What the consumer's Fetch says of it and the partition it asks for.
struct ReadReplicaQuery {
  std::string_view client_rack;  // Fetch v11+ RackId (client.rack)
  std::string_view listener;     // the listener it came through: a replica must have an endpoint
  std::int64_t fetch_offset = 0;
  std::int64_t now_ms = 0;
};

// The follower the consumer should fetch from, or -1 for the leader itself: the client names no
// rack, the leader is in its rack, or no candidate is. A candidate is a follower in the client's
// rack that is in the ISR, registered unfenced with an endpoint on the client's listener, and
// holds the fetch offset (its last fetch offset at or past it, its log start not after it); of
// several, the most caught up (highest fetch offset, then most recently caught up, then the
// highest id), as Kafka's ReplicaView comparator orders them. `leader` must lead.
std::int32_t preferred_read_replica(const ReplicaState& leader,
                                    const std::map<std::int32_t, BrokerState>& brokers,
                                    const ReadReplicaQuery& q);

}  // namespace samsa::replication
