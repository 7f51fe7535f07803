// ControllerState's partition reassignment (AlterPartitionReassignments, KIP-455) and broker
// unregistration, with Kafka's ReplicationControlManager rules.
//
// A reassignment to target T of a partition whose replicas are O: the replica list becomes T
// followed by the members of O not in T; `adding` is T - O, `removing` O - T. The new replicas
// start fetching (their shards open them from the image), the leader adds them to the ISR as
// they catch up (AlterPartition), and the change that brings the last adding replica into the
// ISR also completes the reassignment: the replicas become T, the removed ones leave the ISR
// and ELR, and a leader being removed hands its leadership to the first usable ISR member of T.
// A reassignment with nothing to add completes at once. A new reassignment of a partition
// already moving starts again from its original replicas (the adding ones are dropped first);
// cancelling returns to them.
#include <algorithm>

#include "replication/controller_state.h"

namespace samsa::replication {

using kafka::ErrorCode;

namespace {

std::vector<std::int32_t> without(const std::vector<std::int32_t>& from,
                                  const std::vector<std::int32_t>& drop) {
  std::vector<std::int32_t> out;
  for (std::int32_t r : from)
    if (!contains(drop, r)) out.push_back(r);
  return out;
}

}  // namespace

std::optional<std::string> ControllerState::check_reassignment(
    const std::vector<std::int32_t>& target) const {
  if (target.empty()) return "The manual partition assignment includes an empty replica list.";
  for (std::size_t i = 0; i < target.size(); ++i) {
    if (std::find(target.begin(), target.begin() + static_cast<std::ptrdiff_t>(i), target[i]) !=
        target.begin() + static_cast<std::ptrdiff_t>(i))
      return "The manual partition assignment includes the broker " + std::to_string(target[i]) +
             " more than once.";
    if (!broker_registered(target[i]))
      return "The manual partition assignment includes broker " + std::to_string(target[i]) +
             ", but no such broker is registered.";
  }
  return std::nullopt;
}

ReassignmentOutcome ControllerState::reassign_one(const ReassignmentSpec& s, bool allow_rf_change,
                                                  std::vector<MetadataRecord>& out) {
  const TopicState* t = working().topic(s.topic);
  if (!t || s.partition < 0 || static_cast<std::size_t>(s.partition) >= t->partitions.size())
    return {ErrorCode::unknown_topic_or_partition,
            "Unable to find partition " + s.topic + "-" + std::to_string(s.partition) + "."};
  const PartitionState& p = t->partitions[static_cast<std::size_t>(s.partition)];
  if (!s.replicas && !p.reassigning())
    return {ErrorCode::no_reassignment_in_progress,
            "Unable to cancel the reassignment of " + s.topic + "-" + std::to_string(s.partition) +
                ": no reassignment is in progress."};
  // Where the partition started: its replicas without the ones being added.
  const std::vector<std::int32_t> original = without(p.replicas, p.adding);
  const std::vector<std::int32_t> target = s.replicas ? *s.replicas : original;
  if (auto why = check_reassignment(target)) return {ErrorCode::invalid_replica_assignment, *why};
  if (!allow_rf_change && target.size() != original.size())
    return {ErrorCode::invalid_replication_factor,
            "The replication factor is changed from " + std::to_string(original.size()) + " to " +
                std::to_string(target.size()) + " but allowReplicationFactorChange is false"};
  // The adding replicas of an earlier reassignment leave the ISR and ELR first.
  std::vector<std::int32_t> isr = without(p.isr, p.adding);
  if (isr.empty())
    return {ErrorCode::invalid_replica_assignment,
            "The original replicas of " + s.topic + "-" + std::to_string(s.partition) +
                " hold no in-sync replica: the reassignment cannot be changed."};
  PartitionChangeRecord c{t->id, p.partition, std::nullopt, kNoLeaderChange};
  std::vector<std::int32_t> replicas = target;
  for (std::int32_t r : original)
    if (!contains(target, r)) replicas.push_back(r);
  if (isr != p.isr) c.isr = isr;
  if (auto elr = without(p.elr, p.adding); elr != p.elr) c.elr = std::move(elr);
  c.replicas = replicas;
  c.adding_replicas = without(target, original);
  c.removing_replicas = without(original, target);
  // A leader among the dropped adding replicas gives way to an original one.
  if (p.leader >= 0 && !contains(replicas, p.leader)) {
    PartitionState view = p;
    view.replicas = replicas;
    c.leader = clean_leader(view, isr);
  }
  const bool changes = c.isr || c.elr || c.leader != kNoLeaderChange || replicas != p.replicas ||
                       *c.adding_replicas != p.adding || *c.removing_replicas != p.removing;
  if (!changes) return {};
  emit(out, std::move(c));
  const TopicState* now = working().topic(t->id);
  complete_reassignment(*now, now->partitions[static_cast<std::size_t>(s.partition)], out);
  return {};
}

Proposal<std::vector<ReassignmentOutcome>> ControllerState::alter_partition_reassignments(
    const std::vector<ReassignmentSpec>& specs, bool allow_rf_change) {
  Proposal<std::vector<ReassignmentOutcome>> p;
  for (const auto& s : specs)
    p.answer.push_back(reassign_one(s, allow_rf_change, p.records));
  return p;
}

void ControllerState::complete_reassignment(const TopicState& t, const PartitionState& p,
                                            std::vector<MetadataRecord>& out) {
  if (!p.reassigning()) return;
  for (std::int32_t r : p.adding)
    if (!contains(p.isr, r)) return;  // still catching up
  const std::vector<std::int32_t> target = without(p.replicas, p.removing);
  const std::vector<std::int32_t> isr = without(p.isr, p.removing);
  if (isr.empty()) return;  // the target holds nothing yet that the ISR vouches for
  PartitionChangeRecord c{t.id, p.partition, std::nullopt, kNoLeaderChange};
  if (isr != p.isr) c.isr = isr;
  if (auto elr = without(p.elr, p.removing); elr != p.elr) c.elr = std::move(elr);
  if (!contains(target, p.leader)) {
    PartitionState view = p;
    view.replicas = target;
    view.elr.clear();
    const std::int32_t leader = clean_leader(view, isr);
    // Never leaderless for the sake of finishing: the removed leader serves until a target
    // replica can take over (a later ISR change or a broker's return completes it then).
    if (leader < 0) return;
    c.leader = leader;
  }
  c.replicas = target;
  c.removing_replicas = std::vector<std::int32_t>{};
  c.adding_replicas = std::vector<std::int32_t>{};
  emit(out, std::move(c));
}

Proposal<UnregisterAnswer> ControllerState::unregister_broker(std::int32_t id) {
  Proposal<UnregisterAnswer> p;
  auto it = working().brokers().find(id);
  if (opts_.single_node || it == working().brokers().end()) {
    p.answer.error = ErrorCode::broker_id_not_registered;
    p.answer.message = "Broker ID " + std::to_string(id) + " is not currently registered";
    return p;
  }
  const std::int64_t epoch = it->second.epoch;
  // As a fenced broker: it leaves every ISR that keeps a usable member and leads nothing.
  if (!it->second.fenced) emit(p.records, BrokerRegistrationChangeRecord{id, epoch, 1, 0});
  move_away_from(id, p.records);
  emit(p.records, UnregisterBrokerRecord{id, epoch});
  last_heartbeat_ms_.erase(id);
  heard_since_active_.erase(id);
  return p;
}

}  // namespace samsa::replication
