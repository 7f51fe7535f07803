#include "daemon/api/quorum_describe.h"

#include "base/kafka_errors.h"
#include "replication/quorum/quorum_wire.h"

namespace samsa::daemon {

namespace q = replication::quorum;

std::optional<QuorumNode> quorum_endpoint(const BrokerSettings& s, q::NodeId id) {
  if (id < 0) return std::nullopt;
  for (const auto& v : s.cluster.voters)
    if (v.id == id) return v;
  if (id == s.node_id && s.cluster_controller())
    for (const auto& e : s.advertised.empty() ? s.listeners : s.advertised)
      if (!e.host.empty() && e.controller) return QuorumNode{id, e.host, e.port};
  return std::nullopt;
}

kafka::DescribeQuorumResponse describe_quorum_answer(const replication::Controller::QuorumView& v,
                                                     const BrokerSettings& s,
                                                     std::int64_t now_wall_ms,
                                                     std::int64_t now_mono_ms) {
  kafka::DescribeQuorumResponse resp;
  resp.error_message = std::nullopt;
  auto& t = resp.topics.emplace_back();
  t.topic_name = std::string(q::kMetadataTopic);
  auto& p = t.partitions.emplace_back();
  p.partition_index = 0;
  p.leader_id = v.leader;
  p.leader_epoch = v.epoch;
  p.high_watermark = v.high_watermark;
  p.error_message = std::nullopt;
  const bool leads = v.role == q::Role::leader;
  if (!leads) {
    p.error_code = kafka::code(kafka::ErrorCode::not_leader_or_follower);
    p.error_message = "node " + std::to_string(s.node_id) + " does not lead the metadata quorum";
  }
  auto wall = [&](std::int64_t mono) { return mono < 0 ? -1 : now_wall_ms - (now_mono_ms - mono); };
  auto state_of = [&](const q::ReplicaProgress& rp) {
    kafka::DescribeQuorumResponse::ReplicaState st;
    st.replica_id = rp.id;
    st.log_end_offset = rp.end_offset;
    st.last_fetch_timestamp = wall(rp.last_fetch_ms);
    st.last_caught_up_timestamp = wall(rp.last_caught_up_ms);
    return st;
  };
  for (q::NodeId id : v.voters) {
    q::ReplicaProgress rp{id, -1, -1, -1, true};
    for (const auto& x : v.replicas)
      if (x.id == id) rp = x;
    if (id == v.leader && leads) {
      rp.end_offset = v.log_end_offset;
      rp.last_fetch_ms = rp.last_caught_up_ms = now_mono_ms;
    }
    p.current_voters.push_back(state_of(rp));
  }
  for (const auto& x : v.replicas)
    if (!x.voter) p.observers.push_back(state_of(x));
  // v2's Nodes: how to reach each voter, from controller.quorum.voters (a voter's own listener
  // when it has none), so a client can go to the leader without asking for Metadata first.
  const std::string listener =
      s.cluster.controller_listener.empty() ? "CONTROLLER" : s.cluster.controller_listener;
  for (q::NodeId id : v.voters) {
    auto ep = quorum_endpoint(s, id);
    if (!ep) continue;
    auto& n = resp.nodes.emplace_back();
    n.node_id = id;
    n.listeners.push_back({listener, ep->host, ep->port});
  }
  return resp;
}

}  // namespace samsa::daemon
