#include "replication/controller_state.h"

#include <algorithm>
#include <climits>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "base/assert.h"
#include "base/log.h"

namespace samsa::replication {

using kafka::ErrorCode;

namespace {

// A log dir the broker registered with before is missing from its new registration: that
// disk (and every replica on it) is gone. Unknown on either side (an older broker): not.
bool dirs_replaced(const std::vector<Uuid>& before, const std::vector<Uuid>& now) {
  if (before.empty() || now.empty()) return false;
  for (const auto& d : before)
    if (std::find(now.begin(), now.end(), d) == now.end()) return true;
  return false;
}

// The brokers by rack (KIP-36's broker.rack): racks in order, brokers without one together
// first (as one rack, as Kafka's StripedReplicaPlacer counts them), each rack's brokers by id.
std::vector<std::vector<std::int32_t>> rack_groups(const std::vector<std::int32_t>& ids,
                                                   const MetadataImage& image) {
  std::map<std::optional<std::string>, std::vector<std::int32_t>> by_rack;
  for (std::int32_t id : ids) {
    auto b = image.brokers().find(id);
    by_rack[b == image.brokers().end() ? std::nullopt : b->second.rack].push_back(id);
  }
  std::vector<std::vector<std::int32_t>> out;
  out.reserve(by_rack.size());
  for (auto& [rack, brokers] : by_rack)
    out.push_back(std::move(brokers));
  return out;
}

// The replicas of the c-th partition placed, Kafka's striped placement without its random
// starts: it begins in rack c mod R and takes one broker from each rack in turn, so its replicas
// span min(RF, R) racks, then goes round again for the rest, past racks with no broker left.
// In a rack, the broker is the (c / R + its place in the stripe + the round)-th: the rack's
// leaders (c / R counts them) rotate over all its brokers, and so do its followers. One rack
// (no broker.rack anywhere) is the plain round robin from a rotating start.
std::vector<std::int32_t> striped(const std::vector<std::vector<std::int32_t>>& racks,
                                  std::int64_t c, std::size_t rf) {
  std::size_t brokers = 0;
  for (const auto& r : racks)
    brokers += r.size();
  SAMSA_ASSERT(rf <= brokers);
  const auto n = static_cast<std::int64_t>(racks.size());
  const std::int64_t first = c % n;
  const std::int64_t turn = c / n;
  std::vector<std::int32_t> out;
  out.reserve(rf);
  for (std::int64_t round = 0; out.size() < rf; ++round) {
    for (std::int64_t d = 0; d < n && out.size() < rf; ++d) {
      const auto& rack = racks[static_cast<std::size_t>((first + d) % n)];
      const auto size = static_cast<std::int64_t>(rack.size());
      if (round < size) out.push_back(rack[static_cast<std::size_t>((turn + d + round) % size)]);
    }
  }
  return out;
}

}  // namespace

ControllerState::ControllerState(ControllerStateOptions opts)
    : opts_(std::move(opts)), committed_(std::make_shared<MetadataImage>()) {}

const MetadataImage& ControllerState::working() const {
  if (working_stale_) {
    // Topics stay shared with the committed view until either side changes one.
    working_ = *committed_;
    working_stale_ = false;
  }
  return working_;
}

MetadataImage& ControllerState::working() {
  return const_cast<MetadataImage&>(std::as_const(*this).working());
}

bool ControllerState::replay(const MetadataRecord& r, std::int64_t offset) {
  SAMSA_ASSERT_MSG(pending_.empty(), "committed records are replayed only with nothing proposed");
  // A record the image refuses contradicts what came before; replay carries on (the caller
  // counts and logs it) rather than stopping the cluster.
  if (committed_.use_count() != 1) committed_ = std::make_shared<MetadataImage>(*committed_);
  const bool ok = committed_->apply(r);
  committed_->set_offset(offset);
  working_stale_ = true;
  next_offset_ = std::max(next_offset_, offset + 1);
  return ok;
}

void ControllerState::skip(std::int64_t offset) {
  SAMSA_ASSERT(pending_.empty());
  if (committed_.use_count() != 1) committed_ = std::make_shared<MetadataImage>(*committed_);
  committed_->set_offset(offset);
  working_stale_ = true;
  next_offset_ = std::max(next_offset_, offset + 1);
}

void ControllerState::emit(std::vector<MetadataRecord>& out, MetadataRecord r) {
  SAMSA_ASSERT(pending_.empty() || pending_.back().offset < next_offset_);
  if (!working().apply(r)) {
    // Decisions are made from the working view, so each record they produce applies to it;
    // one that does not would be a contradiction in the log. It is left out and counted.
    ++refused_proposals_;
    LOG_ERROR("controller: a proposed record contradicts the working view (bug), left out");
    return;
  }
  working().set_offset(next_offset_);
  pending_.push_back(Pending{next_offset_, r});
  ++next_offset_;
  out.push_back(std::move(r));
}

void ControllerState::commit(std::int64_t offset) {
  if (pending_.empty() || pending_.front().offset > offset) return;
  auto next =
      committed_.use_count() == 1 ? committed_ : std::make_shared<MetadataImage>(*committed_);
  while (!pending_.empty() && pending_.front().offset <= offset) {
    // It applied to the working view in the same order, after the same committed records.
    const bool ok = next->apply(pending_.front().record);
    SAMSA_ASSERT_MSG(ok, "a committed proposal applies to the committed view");
    next->set_offset(pending_.front().offset);
    pending_.pop_front();
  }
  committed_ = std::move(next);
}

void ControllerState::revert_to(std::int64_t offset) {
  SAMSA_ASSERT(offset > committed_->offset());
  while (!pending_.empty() && pending_.back().offset >= offset)
    pending_.pop_back();
  working_ = *committed_;
  working_stale_ = false;
  for (const auto& p : pending_) {
    const bool ok = working_.apply(p.record);
    SAMSA_ASSERT(ok);
    working_.set_offset(p.offset);
  }
  // A second failure further on (every later write of a fenced log fails too) changes nothing.
  next_offset_ = std::min(next_offset_, offset);
}

std::vector<MetadataRecord> ControllerState::snapshot() const {
  std::vector<MetadataRecord> out;
  const MetadataImage& image = *committed_;
  for (const auto& [id, b] : image.brokers()) {
    out.push_back(RegisterBrokerRecord{id, b.incarnation_id, b.epoch, b.endpoints, b.rack, b.fenced,
                                       b.log_dirs});
    if (b.in_controlled_shutdown) out.push_back(BrokerRegistrationChangeRecord{id, b.epoch, 0, 1});
  }
  for (const auto& [name, t] : image.topics()) {
    out.push_back(TopicRecord{name, t->id});
    for (const auto& p : t->partitions)
      out.push_back(PartitionRecord{t->id, p.partition, p.replicas, p.isr, p.leader, p.leader_epoch,
                                    p.partition_epoch, p.elr, p.removing, p.adding});
    for (const auto& [k, v] : t->configs)
      out.push_back(ConfigRecord{ConfigResource::topic, name, k, v});
  }
  for (const auto& [res, layer] : image.broker_configs())
    for (const auto& [k, v] : layer)
      out.push_back(ConfigRecord{ConfigResource::broker, res, k, v});
  if (image.next_producer_id() > 0) out.push_back(ProducerIdsRecord{-1, image.next_producer_id()});
  for (const auto& [key, cred] : image.scram_credentials())
    out.push_back(cred);
  for (const auto& [entity, values] : image.client_quotas())
    for (const auto& [key, value] : values)
      out.push_back(ClientQuotaRecord{entity, key, value, false});
  for (const auto& [id, acl] : image.acls())
    out.push_back(AccessControlEntryRecord{id, acl});
  return out;
}

void ControllerState::on_become_active(std::int64_t now_ms, std::int64_t next_offset) {
  active_ = true;
  next_offset_ = std::max(next_offset_, next_offset);
  last_heartbeat_ms_.clear();
  heard_since_active_.clear();
  for (const auto& [id, b] : working().brokers())
    last_heartbeat_ms_[id] = now_ms;
}

Proposal<RegistrationAnswer> ControllerState::register_broker(const BrokerRegistration& req,
                                                              std::int64_t now_ms) {
  Proposal<RegistrationAnswer> p;
  if (req.broker_id < 0) {
    p.answer.error = ErrorCode::invalid_request;
    return p;
  }
  auto it = working().brokers().find(req.broker_id);
  if (it != working().brokers().end()) {
    const BrokerState& b = it->second;
    if (b.incarnation_id == req.incarnation_id) {
      // A retry of a registration that went through: the same epoch again, nothing to write.
      last_heartbeat_ms_[req.broker_id] = now_ms;
      p.answer.broker_epoch = b.epoch;
      return p;
    }
    const bool alive = now_ms - last_heartbeat_ms_[req.broker_id] < opts_.session_timeout_ms;
    if (alive && !b.fenced) {
      // Another process claims a live broker's id.
      p.answer.error = ErrorCode::duplicate_broker_registration;
      return p;
    }
    // A restart: the old incarnation's leaderships and ISR places go first. Its unsynced tail is
    // gone, so it must not lead again in the epoch it led before.
    const bool was_fenced = b.fenced;
    const std::int64_t old_epoch = b.epoch;
    const bool disk_replaced = dirs_replaced(b.log_dirs, req.log_dirs);
    move_away_from(req.broker_id, p.records);
    if (!was_fenced)
      emit(p.records, BrokerRegistrationChangeRecord{req.broker_id, old_epoch, 1, 0});
    if (disk_replaced) forget_replicas(req.broker_id, p.records);
  }
  // Kafka's broker epoch is the offset of its registration record.
  const std::int64_t epoch = next_offset_;
  emit(p.records, RegisterBrokerRecord{req.broker_id, req.incarnation_id, epoch, req.endpoints,
                                       req.rack, true, req.log_dirs});
  last_heartbeat_ms_[req.broker_id] = now_ms;
  p.answer.broker_epoch = epoch;
  return p;
}

Proposal<HeartbeatAnswer> ControllerState::heartbeat(const Heartbeat& hb, std::int64_t now_ms) {
  Proposal<HeartbeatAnswer> p;
  auto it = working().brokers().find(hb.broker_id);
  if (it == working().brokers().end() || it->second.epoch != hb.broker_epoch) {
    p.answer.error = ErrorCode::stale_broker_epoch;
    return p;
  }
  last_heartbeat_ms_[hb.broker_id] = now_ms;
  heard_since_active_.insert(hb.broker_id);
  const BrokerState b = it->second;
  p.answer.is_caught_up = hb.current_metadata_offset >= b.epoch;
  if (hb.want_shut_down) {
    if (!b.in_controlled_shutdown && !b.fenced) {
      emit(p.records, BrokerRegistrationChangeRecord{hb.broker_id, b.epoch, 0, 1});
      move_away_from(hb.broker_id, p.records);
    }
    // Once it leads nothing it may stop; it is fenced then, so nothing waits for it.
    bool leads = false;
    for (const auto& [name, t] : working().topics())
      for (const auto& part : t->partitions)
        leads = leads || part.leader == hb.broker_id;
    if (!leads) {
      if (!working().brokers().at(hb.broker_id).fenced)
        emit(p.records, BrokerRegistrationChangeRecord{hb.broker_id, b.epoch, 1, 0});
      p.answer.should_shut_down = true;
    }
  } else if (hb.want_fence) {
    if (!b.fenced) {
      move_away_from(hb.broker_id, p.records);
      emit(p.records, BrokerRegistrationChangeRecord{hb.broker_id, b.epoch, 1, 0});
    }
  } else if (b.fenced && !b.in_controlled_shutdown && p.answer.is_caught_up) {
    // Caught up with the metadata up to its own registration: it may serve and lead.
    emit(p.records, BrokerRegistrationChangeRecord{hb.broker_id, b.epoch, -1, 0});
    elect_leaderless(p.records);
  }
  p.answer.is_fenced = working().brokers().at(hb.broker_id).fenced;
  return p;
}

std::vector<MetadataRecord> ControllerState::tick(std::int64_t now_ms) {
  std::vector<MetadataRecord> out;
  if (!active_) return out;
  std::vector<std::pair<std::int32_t, std::int64_t>> expired;
  for (const auto& [id, b] : working().brokers()) {
    if (b.fenced) continue;
    auto hb = last_heartbeat_ms_.find(id);
    if (hb == last_heartbeat_ms_.end()) {
      last_heartbeat_ms_[id] = now_ms;
      continue;
    }
    if (now_ms - hb->second >= opts_.session_timeout_ms) expired.emplace_back(id, b.epoch);
  }
  // Fenced together first, so brokers expiring in the same tick do not shrink an ISR to
  // whichever of them happened to be handled last.
  for (const auto& [id, epoch] : expired)
    emit(out, BrokerRegistrationChangeRecord{id, epoch, 1, 0});
  for (const auto& [id, epoch] : expired)
    move_away_from(id, out);
  return out;
}

Proposal<AlterPartitionAnswer> ControllerState::alter_partition(const AlterPartitionItem& req) {
  Proposal<AlterPartitionAnswer> p;
  auto& a = p.answer;
  a.request_id = req.proposal.request_id;
  auto b = working().brokers().find(req.broker_id);
  if (b == working().brokers().end() || b->second.epoch != req.broker_epoch) {
    a.error = ErrorCode::stale_broker_epoch;
    return p;
  }
  const TopicState* t = working().topic(req.topic_id);
  if (!t || req.partition < 0 || static_cast<std::size_t>(req.partition) >= t->partitions.size()) {
    a.error = ErrorCode::unknown_topic_or_partition;
    return p;
  }
  const PartitionState& part = t->partitions[static_cast<std::size_t>(req.partition)];
  auto answer_current = [&](ErrorCode e) {
    a.error = e;
    a.leader_id = part.leader;
    a.leader_epoch = part.leader_epoch;
    a.isr = part.isr;
    a.partition_epoch = part.partition_epoch;
  };
  const auto& prop = req.proposal;
  if (part.leader != req.broker_id) {
    answer_current(ErrorCode::not_leader_or_follower);
    return p;
  }
  if (prop.leader_epoch != part.leader_epoch) {
    answer_current(prop.leader_epoch < part.leader_epoch ? ErrorCode::fenced_leader_epoch
                                                         : ErrorCode::invalid_request);
    return p;
  }
  // Checked before eligibility, so a refusal for eligibility says no earlier copy of this
  // proposal was applied (the leader then drops it without waiting for the metadata).
  if (prop.partition_epoch != part.partition_epoch) {
    answer_current(ErrorCode::invalid_update_version);
    return p;
  }
  std::vector<std::int32_t> isr;
  for (const auto& m : prop.new_isr) {
    if (!contains(part.replicas, m.broker_id) || contains(isr, m.broker_id)) {
      answer_current(ErrorCode::invalid_request);
      return p;
    }
    isr.push_back(m.broker_id);
  }
  if (!contains(isr, part.leader)) {
    answer_current(ErrorCode::invalid_request);
    return p;
  }
  for (const auto& m : prop.new_isr) {
    if (contains(part.isr, m.broker_id)) continue;  // only additions must be eligible
    auto mb = working().brokers().find(m.broker_id);
    if (mb == working().brokers().end() || mb->second.fenced || mb->second.in_controlled_shutdown ||
        (m.broker_epoch >= 0 && mb->second.epoch != m.broker_epoch)) {
      answer_current(ErrorCode::ineligible_replica);
      return p;
    }
  }
  if (auto c = isr_change(*t, part, isr, kNoLeaderChange); c.isr || c.elr)
    emit(p.records, std::move(c));
  // The replica that joins last completes a reassignment (in the same batch: never an ISR
  // with every target replica and the reassignment still open after a power cut).
  const TopicState* changed = working().topic(req.topic_id);
  complete_reassignment(*changed, changed->partitions[static_cast<std::size_t>(req.partition)],
                        p.records);
  const PartitionState& now =
      working().topic(req.topic_id)->partitions[static_cast<std::size_t>(req.partition)];
  a.error = ErrorCode::none;
  a.leader_id = now.leader;
  a.leader_epoch = now.leader_epoch;
  a.isr = now.isr;
  a.partition_epoch = now.partition_epoch;
  return p;
}

std::vector<std::int32_t> ControllerState::usable_brokers() const {
  if (opts_.single_node) return {opts_.node_id};
  std::vector<std::int32_t> live;
  for (const auto& [bid, b] : working().brokers())
    if (!b.fenced && !b.in_controlled_shutdown) live.push_back(bid);
  return live;
}

std::int32_t ControllerState::live_brokers() const {
  return static_cast<std::int32_t>(usable_brokers().size());
}

bool ControllerState::broker_registered(std::int32_t id) const {
  if (opts_.single_node) return id == opts_.node_id;
  return working().brokers().contains(id);
}

std::optional<std::vector<std::vector<std::int32_t>>> ControllerState::place(
    std::int32_t partitions, std::int16_t replication_factor) {
  const std::vector<std::int32_t> live = usable_brokers();
  if (replication_factor < 1 || static_cast<std::size_t>(replication_factor) > live.size())
    return std::nullopt;
  const auto racks = rack_groups(live, working());
  std::vector<std::vector<std::int32_t>> out;
  out.reserve(static_cast<std::size_t>(std::max(partitions, 0)));
  for (std::int32_t i = 0; i < partitions; ++i)
    out.push_back(striped(racks, std::int64_t{placement_start_} + i,
                          static_cast<std::size_t>(replication_factor)));
  // Not wrapped at the broker count: with racks of unequal sizes the stripe repeats only every
  // R * lcm(sizes) partitions.
  placement_start_ = placement_start_ == INT32_MAX ? 0 : placement_start_ + 1;
  return out;
}

}  // namespace samsa::replication
