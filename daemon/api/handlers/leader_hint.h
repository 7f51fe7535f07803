// NOT_LEADER_OR_FOLLOWER with the way to the leader (KIP-951): the partition's current leader
// and epoch from this broker's image, and the leader's endpoint on the listener the client
// came through, once per response. The codecs write them only where the version has them.
#pragma once

#include <algorithm>
#include <string_view>
#include <vector>

#include "daemon/api/dispatch.h"
#include "daemon/broker.h"

namespace samsa::daemon::handlers {

template <class Leader, class Endpoint>
void leader_hint(const Request& r, std::string_view topic, std::int32_t partition, Leader& out,
                 std::vector<Endpoint>& endpoints) {
  const auto& s = *r.rc.settings;
  if (!s.clustered() || !r.rc.image) return;
  const auto* t = r.rc.image->topic(topic);
  if (!t || partition < 0 || static_cast<std::size_t>(partition) >= t->partitions.size()) return;
  const auto& p = t->partitions[static_cast<std::size_t>(partition)];
  out.leader_id = p.leader;
  out.leader_epoch = p.leader_epoch;
  if (p.leader < 0) return;
  if (std::any_of(endpoints.begin(), endpoints.end(),
                  [&](const Endpoint& e) { return e.node_id == p.leader; }))
    return;
  auto b = r.rc.image->brokers().find(p.leader);
  if (b == r.rc.image->brokers().end()) return;
  const auto& name = s.advertised[std::min(r.dispatcher.listener(), s.advertised.size() - 1)].name;
  for (const auto& e : b->second.endpoints) {
    if (e.name != name) continue;
    Endpoint ne;
    ne.node_id = p.leader;
    ne.host = e.host;
    ne.port = e.port;
    ne.rack = b->second.rack;
    endpoints.push_back(std::move(ne));
    return;
  }
}

}  // namespace samsa::daemon::handlers
