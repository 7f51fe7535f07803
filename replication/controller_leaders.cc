// ControllerState's leadership decisions: who leaves an ISR when a broker goes, who leads a
// partition whose leader went, ElectLeaders, and KIP-966's eligible leader replicas (ELR).
//
// The ELR: a member that leaves an ISR that is then below min.insync.replicas holds every
// record acknowledged to an acks=all producer (each was on every member when acknowledged, and
// none is acknowledged while the ISR is that small: ReplicaState::acks_all_outcome), so it may
// lead cleanly when no ISR member can. (Kafka also stops the high watermark below
// min.insync.replicas; samsa does not yet, so writes no acks=all producer was told of may be
// missing from an ELR leader.) A broker whose log dir was replaced (a new directory id: the disk
// that held its replicas is gone) leaves every ISR and ELR at once, even the last member's place,
// so that an empty log is never elected while an eligible replica may still return.
#include <algorithm>
#include <cstdlib>
#include <utility>

#include "base/log.h"
#include "replication/controller_state.h"

namespace samsa::replication {

using kafka::ErrorCode;

bool ControllerState::usable(std::int32_t id) const {
  auto it = working().brokers().find(id);
  return it != working().brokers().end() && !it->second.fenced &&
         !it->second.in_controlled_shutdown;
}

std::size_t ControllerState::min_insync(const TopicState& t) const {
  const std::string v = topic_config_value(t.configs, opts_.defaults, "min.insync.replicas");
  const long n = std::strtol(v.c_str(), nullptr, 10);
  return n > 0 ? static_cast<std::size_t>(n) : 1;
}

PartitionChangeRecord ControllerState::isr_change(const TopicState& t, const PartitionState& p,
                                                  std::vector<std::int32_t> isr,
                                                  std::int32_t leader) const {
  PartitionChangeRecord c{t.id, p.partition, std::nullopt, leader};
  std::vector<std::int32_t> elr;
  if (isr.size() < min_insync(t)) {
    for (std::int32_t r : p.elr)
      if (!contains(isr, r)) elr.push_back(r);
    for (std::int32_t r : p.isr)
      if (!contains(isr, r) && !contains(elr, r)) elr.push_back(r);
  }
  if (isr != p.isr) c.isr = std::move(isr);
  if (elr != p.elr) c.elr = std::move(elr);
  return c;
}

std::int32_t ControllerState::clean_leader(const PartitionState& p,
                                           const std::vector<std::int32_t>& isr,
                                           std::int32_t leaving) const {
  for (std::int32_t r : p.replicas)
    if (r != leaving && contains(isr, r) && usable(r)) return r;
  for (std::int32_t r : p.replicas)
    if (r != leaving && contains(p.elr, r) && usable(r)) return r;
  return -1;
}

std::optional<PartitionChangeRecord> ControllerState::elect_clean(const TopicState& t,
                                                                  const PartitionState& p,
                                                                  std::vector<std::int32_t> isr,
                                                                  std::int32_t leader_now,
                                                                  std::int32_t leaving) const {
  std::int32_t leader = kNoLeaderChange;
  if (leader_now < 0) {
    const std::int32_t l = clean_leader(p, isr, leaving);
    if (l >= 0) {
      // An ELR member leads alone; the ISR members it replaces keep their eligibility.
      if (!contains(isr, l)) isr = {l};
      leader = l;
    } else if (p.leader >= 0) {
      leader = -1;
    }
  }
  auto c = isr_change(t, p, std::move(isr), leader);
  if (!c.isr && !c.elr && c.leader == kNoLeaderChange) return std::nullopt;
  return c;
}

void ControllerState::move_away_from(std::int32_t id, std::vector<MetadataRecord>& out) {
  std::vector<PartitionChangeRecord> changes;
  for (const auto& [name, t] : working().topics()) {
    for (const auto& p : t->partitions) {
      if (!contains(p.replicas, id)) continue;
      std::vector<std::int32_t> isr = p.isr;
      if (contains(isr, id)) {
        std::erase(isr, id);
        // A member leaves only while a usable one remains. Otherwise (the last member, or the
        // whole ISR lost together, as in a power cut of the cluster) the ISR stays whole:
        // followers report only synced offsets, so every member holds on disk each record
        // acknowledged, and whichever returns first may lead with unclean election off.
        bool usable_left = false;
        for (std::int32_t r : isr)
          usable_left = usable_left || usable(r);
        if (!usable_left) isr = p.isr;
      }
      // Its records are still written as usable: it must not be chosen itself.
      auto c = elect_clean(*t, p, std::move(isr), p.leader == id ? -1 : p.leader, id);
      if (c) changes.push_back(std::move(*c));
    }
  }
  for (auto& c : changes)
    emit(out, std::move(c));
}

void ControllerState::forget_replicas(std::int32_t id, std::vector<MetadataRecord>& out) {
  std::vector<PartitionChangeRecord> changes;
  std::size_t stranded = 0;
  for (const auto& [name, t] : working().topics()) {
    for (const auto& p : t->partitions) {
      if (!contains(p.isr, id) && !contains(p.elr, id)) continue;
      PartitionChangeRecord c{t->id, p.partition, std::nullopt, kNoLeaderChange};
      std::vector<std::int32_t> isr = p.isr, elr = p.elr;
      std::erase(isr, id);
      std::erase(elr, id);
      if (isr != p.isr) c.isr = isr;
      if (elr != p.elr) c.elr = elr;
      if (p.leader == id) c.leader = -1;
      stranded += isr.empty() && elr.empty();
      changes.push_back(std::move(c));
    }
  }
  if (!changes.empty())
    LOG_WARN(
        "broker %d registered with a new log dir: its replicas lost their data, so it leaves "
        "%zu ISRs/ELRs; %zu partitions keep no eligible replica and stay leaderless until an "
        "unclean election (kafka-leader-election --election-type unclean)",
        id, changes.size(), stranded);
  for (auto& c : changes)
    emit(out, std::move(c));
}

void ControllerState::elect_leaderless(std::vector<MetadataRecord>& out) {
  std::vector<PartitionChangeRecord> changes;
  for (const auto& [name, t] : working().topics())
    for (const auto& p : t->partitions)
      if (p.leader < 0)
        if (auto c = elect_clean(*t, p, p.isr, -1); c && c->leader >= 0)
          changes.push_back(std::move(*c));
  for (auto& c : changes)
    emit(out, std::move(c));
}

std::vector<MetadataRecord> ControllerState::rebalance_leaders() {
  return elect_leaders(false, nullptr, true).records;
}

Proposal<std::vector<ElectionResult>> ControllerState::elect_leaders(
    bool unclean, const std::vector<std::pair<std::string, std::int32_t>>* which, bool heard_only) {
  Proposal<std::vector<ElectionResult>> out;
  // The outcome for one partition, and the change it needs (leader, new ISR) if any.
  auto decide = [&](const TopicState& t, const PartitionState& p, ElectionResult& r) {
    if (!unclean) {
      const std::int32_t preferred = p.replicas.empty() ? -1 : p.replicas.front();
      if (p.leader == preferred) {
        r.error = ErrorCode::election_not_needed;
        return;
      }
      if (!contains(p.isr, preferred) || !usable(preferred) ||
          (heard_only && !heard_since_active_.contains(preferred))) {
        r.error = ErrorCode::preferred_leader_not_available;
        r.message = "the preferred replica " + std::to_string(preferred) +
                    (usable(preferred) ? " is not in the ISR" : " is not a live broker");
        return;
      }
      emit(out.records, PartitionChangeRecord{t.id, p.partition, std::nullopt, preferred});
      return;
    }
    if (p.leader >= 0) {
      r.error = ErrorCode::election_not_needed;
      return;
    }
    if (auto c = elect_clean(t, p, p.isr, -1); c && c->leader >= 0) {
      emit(out.records, std::move(*c));
      return;
    }
    for (std::int32_t id : p.replicas) {
      if (usable(id)) {
        // Unclean: only this replica's log survives as the partition's; nobody else is
        // eligible any more.
        PartitionChangeRecord c{t.id, p.partition, std::vector<std::int32_t>{id}, id};
        if (!p.elr.empty()) c.elr = std::vector<std::int32_t>{};
        emit(out.records, std::move(c));
        return;
      }
    }
    r.error = ErrorCode::eligible_leaders_not_available;
    r.message = "no replica is a live broker";
  };
  if (!which) {
    std::vector<std::pair<std::string, std::int32_t>> all;
    for (const auto& [name, t] : working().topics())
      for (const auto& p : t->partitions)
        all.emplace_back(name, p.partition);
    for (const auto& [name, part] : all) {
      const TopicState* t = working().topic(name);
      ElectionResult r{name, part, ErrorCode::none, {}};
      decide(*t, t->partitions[static_cast<std::size_t>(part)], r);
      if (r.error != ErrorCode::election_not_needed) out.answer.push_back(std::move(r));
    }
    return out;
  }
  for (const auto& [name, part] : *which) {
    ElectionResult r{name, part, ErrorCode::none, {}};
    const TopicState* t = working().topic(name);
    if (!t || part < 0 || static_cast<std::size_t>(part) >= t->partitions.size()) {
      r.error = ErrorCode::unknown_topic_or_partition;
      r.message = "no such partition";
    } else {
      decide(*t, t->partitions[static_cast<std::size_t>(part)], r);
    }
    out.answer.push_back(std::move(r));
  }
  return out;
}

}  // namespace samsa::replication
