#include "replication/replica_selector.h"

#include <algorithm>
#include <tuple>

namespace samsa::replication {
namespace {

bool reachable_in(const BrokerState& b, std::string_view rack, std::string_view listener) {
  if (b.fenced || b.rack != rack) return false;
  return std::any_of(b.endpoints.begin(), b.endpoints.end(),
                     [&](const BrokerEndpoint& e) { return e.name == listener; });
}

}  // namespace

std::int32_t preferred_read_replica(const ReplicaState& leader,
                                    const std::map<std::int32_t, BrokerState>& brokers,
                                    const ReadReplicaQuery& q) {
  if (q.client_rack.empty() || leader.role() != ReplicaRole::leader) return -1;
  const std::int32_t self = leader.leader_id();
  if (auto b = brokers.find(self); b != brokers.end() && b->second.rack == q.client_rack)
    return -1;  // the leader is in the client's rack: it serves
  std::int32_t best = -1;
  // (fetch offset, -time since caught up, id): the largest wins.
  std::tuple<std::int64_t, std::int64_t, std::int32_t> best_key{};
  for (std::int32_t id : leader.isr()) {
    if (id == self) continue;
    auto f = leader.followers().find(id);
    if (f == leader.followers().end()) continue;
    const ReplicaState::FollowerInfo& fi = f->second;
    // fetch_offset is -1 until it fetched in this leader epoch.
    if (fi.fetch_offset < q.fetch_offset || fi.log_start_offset > q.fetch_offset) continue;
    auto b = brokers.find(id);
    if (b == brokers.end() || !reachable_in(b->second, q.client_rack, q.listener)) continue;
    const std::tuple<std::int64_t, std::int64_t, std::int32_t> key{
        fi.fetch_offset, -(q.now_ms - fi.last_caught_up_ms), id};
    if (best < 0 || key > best_key) {
      best = id;
      best_key = key;
    }
  }
  return best;
}

}  // namespace samsa::replication
