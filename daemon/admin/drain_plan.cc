#include "daemon/admin/drain_plan.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace samsa::daemon {
namespace {

using replication::BrokerState;
using replication::contains;
using replication::PartitionState;

// The replicas a partition is meant to end with: those of a reassignment's target, or all.
std::vector<std::int32_t> target_of(const PartitionState& p) {
  std::vector<std::int32_t> t;
  for (std::int32_t r : p.replicas)
    if (!contains(p.removing, r)) t.push_back(r);
  return t;
}

std::string ids_text(const std::vector<std::int32_t>& ids) {
  std::string s;
  for (std::int32_t id : ids)
    s += (s.empty() ? "" : ", ") + std::to_string(id);
  return s.empty() ? "none" : s;
}

struct Planner {
  const std::map<std::int32_t, BrokerState>& brokers;
  std::int32_t drained;
  std::vector<std::int32_t> usable;   // candidates, in id order
  std::map<std::int32_t, long> load;  // replicas each candidate holds (as planned)
  bool racks = false;

  const std::optional<std::string>& rack(std::int32_t id) const {
    static const std::optional<std::string> none;
    auto it = brokers.find(id);
    return it == brokers.end() ? none : it->second.rack;
  }

  // Lower is better: the drained broker's rack, then a rack new to the partition; then load.
  std::tuple<int, long, std::int32_t> rank(std::int32_t c,
                                           const std::vector<std::int32_t>& target) const {
    int tier = 0;
    if (racks) {
      const auto& own = rack(drained);
      if (own && rack(c) == own) {
        tier = 0;
      } else {
        std::set<std::optional<std::string>> taken;
        for (std::int32_t r : target)
          if (r != drained) taken.insert(rack(r));
        tier = taken.contains(rack(c)) ? 2 : 1;
      }
    }
    return {tier, load.at(c), c};
  }

  // The best candidate not in target, or -1.
  std::int32_t choose(const std::vector<std::int32_t>& target) const {
    std::int32_t best = -1;
    for (std::int32_t c : usable) {
      if (contains(target, c)) continue;
      if (best < 0 || rank(c, target) < rank(best, target)) best = c;
    }
    return best;
  }
};

}  // namespace

bool usable_for_replicas(const BrokerState& b) {
  return !b.fenced && !b.in_controlled_shutdown;
}

std::expected<DrainPlan, std::string> plan_drain(const replication::MetadataImage& image,
                                                 std::int32_t broker) {
  const auto& brokers = image.brokers();
  if (!brokers.contains(broker))
    return std::unexpected("broker " + std::to_string(broker) + " is not registered");
  Planner pl{brokers, broker, {}, {}, false};
  for (const auto& [id, b] : brokers) {
    if (id == broker || !usable_for_replicas(b)) continue;
    pl.usable.push_back(id);
    pl.load[id] = 0;
    if (b.rack) pl.racks = true;
  }
  for (const auto& [name, t] : image.topics())
    for (const auto& p : t->partitions)
      for (std::int32_t r : target_of(p))
        if (auto it = pl.load.find(r); it != pl.load.end()) ++it->second;
  DrainPlan plan;
  plan.broker = broker;
  std::vector<std::string> short_of;
  for (const auto& [name, t] : image.topics()) {
    for (const auto& p : t->partitions) {
      if (!contains(p.replicas, broker)) continue;
      ++plan.partitions;
      const std::string tp = name + "-" + std::to_string(p.partition);
      std::vector<std::int32_t> target = target_of(p);
      if (!contains(target, broker)) {
        plan.moving_away.push_back(tp);
        continue;
      }
      const std::int32_t c = pl.choose(target);
      if (c < 0) {
        short_of.push_back(tp + " (replication factor " + std::to_string(target.size()) + ")");
        continue;
      }
      DrainMove m{name, p.partition, target, target, c};
      std::ranges::replace(m.target, broker, c);
      ++pl.load[c];
      plan.moves.push_back(std::move(m));
    }
  }
  if (!short_of.empty()) {
    std::string msg = "not enough usable brokers besides " + std::to_string(broker) +
                      " (usable: " + ids_text(pl.usable) + ") to keep the replication factor of ";
    constexpr std::size_t kNamed = 20;  // an answer an operator can read
    for (std::size_t i = 0; i < short_of.size() && i < kNamed; ++i)
      msg += (i ? ", " : "") + short_of[i];
    if (short_of.size() > kNamed)
      msg += " and " + std::to_string(short_of.size() - kNamed) + " more partitions";
    return std::unexpected(msg);
  }
  return plan;
}

}  // namespace samsa::daemon
