// DescribeQuorum's answer (Kafka API 55) made from the controller's QuorumView. The one place
// that turns this node's quorum state into what kafka-metadata-quorum shows
// (handlers::describe_quorum) and what `samsactl quorum` shows (daemon/admin/admin_quorum.cc),
// so the two can never disagree.
#pragma once

#include <cstdint>
#include <optional>

#include "daemon/settings.h"
#include "net/kafka/gen/describe_quorum_response.h"
#include "replication/controller.h"

namespace samsa::daemon {

// v is taken on the controller thread; now_wall_ms and now_mono_ms are read together when
// answering, because the view keeps monotonic times and DescribeQuorum shows wall-clock ones.
// A node that does not lead answers NOT_LEADER_OR_FOLLOWER and names the leader, as KRaft does.
kafka::DescribeQuorumResponse describe_quorum_answer(const replication::Controller::QuorumView& v,
                                                     const BrokerSettings& s,
                                                     std::int64_t now_wall_ms,
                                                     std::int64_t now_mono_ms);

// A quorum node's address for others: a configured voter's, or this controller's own listener.
std::optional<QuorumNode> quorum_endpoint(const BrokerSettings& s, replication::quorum::NodeId id);

}  // namespace samsa::daemon
