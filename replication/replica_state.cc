#include "replication/replica_state.h"

#include <algorithm>

namespace samsa::replication {

using kafka::ErrorCode;

bool ReplicaState::in_isr(std::int32_t id) const {
  return contains(isr_, id);
}

// ---------------------------------------------------------------------------------------------
// Metadata

void ReplicaState::apply_metadata(const PartitionState& p, std::int64_t now_ms) {
  const std::int32_t me = opts_.broker_id;
  if (p.leader_epoch < leader_epoch_ ||
      (p.leader_epoch == leader_epoch_ && p.partition_epoch <= partition_epoch_))
    return;  // not newer than what this replica acts on
  if (!contains(p.replicas, me)) {
    stop();
    leader_epoch_ = p.leader_epoch;
    partition_epoch_ = p.partition_epoch;
    return;
  }
  replicas_ = p.replicas;
  if (p.leader == me) {
    if (role_ == ReplicaRole::leader && p.leader_epoch == leader_epoch_) {
      // Same leadership, newer ISR (our AlterPartition, or the controller fencing a member),
      // or new replicas (a reassignment: they start out of the ISR; removed ones are gone).
      set_isr(p.isr, p.partition_epoch);
      track_replicas();
      if (pending_ && pending_->proposal.partition_epoch < p.partition_epoch) pending_.reset();
      recompute_maximal_isr();
      maybe_advance_hw();
      return;
    }
    become_leader(p, now_ms);
    return;
  }
  if (p.leader < 0) {
    stop();
    leader_epoch_ = p.leader_epoch;
    partition_epoch_ = p.partition_epoch;
    isr_ = p.isr;
    return;
  }
  if (role_ == ReplicaRole::follower && p.leader_epoch == leader_epoch_ && p.leader == leader_id_) {
    partition_epoch_ = p.partition_epoch;
    isr_ = p.isr;
    return;
  }
  become_follower(p);
}

void ReplicaState::become_leader(const PartitionState& p, std::int64_t now_ms) {
  role_ = ReplicaRole::leader;
  leader_id_ = opts_.broker_id;
  leader_epoch_ = p.leader_epoch;
  partition_epoch_ = p.partition_epoch;
  isr_ = p.isr;
  pending_.reset();
  in_flight_.reset();
  pending_truncation_.reset();
  truncation_done_ = false;
  // The epoch starts at the log end (Kafka assigns it at election, before the first append),
  // so a follower asking about an older epoch learns where that one ended here.
  epoch_start_offset_ = log_.log_end_offset();
  (void)log_.assign_epoch(leader_epoch_, epoch_start_offset_);
  // Nothing is known about the followers in this epoch: the HW waits until every ISR member
  // has fetched (KIP-207: it may lag behind the HW the previous leader served meanwhile).
  // ISR members get a full replica.lag.time.max.ms to show up.
  followers_.clear();
  for (std::int32_t r : replicas_) {
    if (r == opts_.broker_id) continue;
    FollowerInfo f;
    f.last_caught_up_ms = in_isr(r) ? now_ms : 0;
    followers_.emplace(r, f);
  }
  high_watermark_ = std::min(high_watermark_, log_.log_end_offset());
  recompute_maximal_isr();
  maybe_advance_hw();
}

void ReplicaState::track_replicas() {
  std::erase_if(followers_, [&](const auto& f) { return !contains(replicas_, f.first); });
  for (std::int32_t r : replicas_)
    if (r != opts_.broker_id && !followers_.contains(r)) followers_.emplace(r, FollowerInfo{});
}

void ReplicaState::become_follower(const PartitionState& p) {
  role_ = ReplicaRole::follower;
  leader_id_ = p.leader;
  leader_epoch_ = p.leader_epoch;
  partition_epoch_ = p.partition_epoch;
  isr_ = p.isr;
  maximal_isr_.clear();
  followers_.clear();
  pending_.reset();
  in_flight_.reset();
  // A cut computed against the previous leader's log: the new leader's answer decides anew.
  pending_truncation_.reset();
  truncation_done_ = false;
}

void ReplicaState::stop() {
  role_ = ReplicaRole::none;
  leader_id_ = -1;
  maximal_isr_.clear();
  followers_.clear();
  pending_.reset();
  in_flight_.reset();
  pending_truncation_.reset();
  truncation_done_ = false;
}

void ReplicaState::set_isr(std::vector<std::int32_t> isr, std::int32_t partition_epoch) {
  isr_ = std::move(isr);
  partition_epoch_ = partition_epoch;
}

void ReplicaState::recompute_maximal_isr() {
  maximal_isr_ = isr_;
  if (pending_) {
    // An addition counts at once (the HW must wait for the new member before the controller
    // can have it in the ISR); a removal counts only once committed.
    for (const auto& m : pending_->proposal.new_isr)
      if (!contains(maximal_isr_, m.broker_id)) maximal_isr_.push_back(m.broker_id);
  }
}

// ---------------------------------------------------------------------------------------------
// Leader

ErrorCode ReplicaState::check_leader_epoch(std::int32_t current_leader_epoch) const {
  if (role_ != ReplicaRole::leader) return ErrorCode::not_leader_or_follower;
  if (current_leader_epoch < 0) return ErrorCode::none;
  if (current_leader_epoch < leader_epoch_) return ErrorCode::fenced_leader_epoch;
  if (current_leader_epoch > leader_epoch_) return ErrorCode::unknown_leader_epoch;
  return ErrorCode::none;
}

ReplicaFetchAnswer ReplicaState::on_replica_fetch(const ReplicaFetch& f, std::int64_t now_ms) {
  ReplicaFetchAnswer a;
  if (role_ != ReplicaRole::leader) {
    a.error = ErrorCode::not_leader_or_follower;
    return a;
  }
  // A follower always names the epoch it follows; -1 would skip the fencing check.
  a.error =
      check_leader_epoch(f.current_leader_epoch < 0 ? leader_epoch_ - 1 : f.current_leader_epoch);
  if (a.error != ErrorCode::none) return a;
  auto fi = followers_.find(f.replica_id);
  if (fi == followers_.end()) {
    a.error = ErrorCode::not_leader_or_follower;  // not a replica of this partition
    return a;
  }
  const std::int64_t leo = log_.log_end_offset();
  a.log_start_offset = log_.log_start_offset();
  if (f.fetch_offset < a.log_start_offset || (f.last_fetched_epoch < 0 && f.fetch_offset > leo)) {
    a.error = ErrorCode::offset_out_of_range;
    a.high_watermark = high_watermark_;
    return a;
  }
  if (f.last_fetched_epoch >= 0) {
    // The follower's last epoch must end here no earlier than its fetch offset; otherwise its
    // tail diverged, and its offset must not count (it holds batches this log does not).
    auto end = log_.end_offset_for(f.last_fetched_epoch);
    if (end.epoch < f.last_fetched_epoch || end.end_offset < f.fetch_offset) {
      a.diverging = end;
      a.high_watermark = high_watermark_;
      return a;
    }
  }
  FollowerInfo& s = fi->second;
  // Kafka's rule against what this fetch can be answered with: caught up now when it asks for
  // nothing more, or as of its previous fetch when it has everything that one could give.
  const std::int64_t readable = log_.readable_end_offset();
  if (f.fetch_offset >= readable) {
    s.last_caught_up_ms = std::max(s.last_caught_up_ms, now_ms);
  } else if (f.fetch_offset >= s.last_fetch_leader_end) {
    s.last_caught_up_ms = std::max(s.last_caught_up_ms, s.last_fetch_ms);
  }
  s.last_fetch_leader_end = readable;
  s.last_fetch_ms = now_ms;
  s.fetch_offset = f.fetch_offset;
  s.broker_epoch = f.broker_epoch;
  s.log_start_offset = f.log_start_offset;
  maybe_advance_hw();
  a.high_watermark = high_watermark_;
  return a;
}

void ReplicaState::on_log_advanced() {
  if (role_ == ReplicaRole::leader) maybe_advance_hw();
}

void ReplicaState::maybe_advance_hw() {
  if (role_ != ReplicaRole::leader) return;
  // KIP-966: below min.insync.replicas the HW stands still. The members that left the ISR
  // then stay eligible to lead (ELR), which is safe only if each holds everything committed;
  // acks=1 records appended meanwhile become visible once the ISR is back to the minimum.
  if (under_min_isr()) return;
  std::int64_t hw = log_.durable_end_offset();
  if (!opts_.testing_hw_leader_only) {
    for (std::int32_t id : maximal_isr_) {
      if (id == opts_.broker_id) continue;
      auto it = followers_.find(id);
      if (it == followers_.end() || it->second.fetch_offset < 0) return;  // not heard from yet
      hw = std::min(hw, it->second.fetch_offset);
    }
  }
  if (hw > high_watermark_) high_watermark_ = hw;
}

bool ReplicaState::under_min_isr() const {
  // Kafka's effective minimum: never more than the partition's replicas.
  const auto replicas = static_cast<std::int32_t>(std::max<std::size_t>(replicas_.size(), 1));
  const std::int32_t min_isr = std::min(opts_.min_insync_replicas, replicas);
  return static_cast<std::int32_t>(isr_.size()) < min_isr;
}

std::optional<std::int64_t> ReplicaState::visible_high_watermark() const {
  if (role_ != ReplicaRole::leader || high_watermark_ < epoch_start_offset_) return std::nullopt;
  return high_watermark_;
}

ErrorCode ReplicaState::check_produce(bool acks_all) const {
  if (role_ != ReplicaRole::leader) return ErrorCode::not_leader_or_follower;
  if (acks_all && static_cast<std::int32_t>(isr_.size()) < opts_.min_insync_replicas)
    return ErrorCode::not_enough_replicas;
  return ErrorCode::none;
}

std::optional<ErrorCode> ReplicaState::acks_all_outcome(std::int64_t last_offset) const {
  if (role_ != ReplicaRole::leader) return ErrorCode::not_leader_or_follower;
  if (high_watermark_ <= last_offset) return std::nullopt;
  if (static_cast<std::int32_t>(maximal_isr_.size()) < opts_.min_insync_replicas)
    return ErrorCode::not_enough_replicas_after_append;
  return ErrorCode::none;
}

std::optional<AlterPartitionProposal> ReplicaState::poll_isr(
    std::int64_t now_ms, const std::map<std::int32_t, BrokerState>& brokers) {
  if (role_ != ReplicaRole::leader) return std::nullopt;
  if (pending_) {
    if (pending_->answered || now_ms - pending_->sent_ms < opts_.alter_partition_retry_ms)
      return std::nullopt;
    pending_->sent_ms = now_ms;  // unanswered: send the same change again
    return pending_->proposal;
  }
  auto epoch_of = [&](std::int32_t id) {
    if (id == opts_.broker_id) return broker_epoch_;
    auto it = followers_.find(id);
    return it == followers_.end() ? std::int64_t{-1} : it->second.broker_epoch;
  };
  std::vector<std::int32_t> next;
  for (std::int32_t id : isr_) {
    if (id != opts_.broker_id) {
      auto it = followers_.find(id);
      if (it == followers_.end() ||
          now_ms - it->second.last_caught_up_ms > opts_.replica_lag_time_max_ms)
        continue;  // fell behind: leaves the ISR
    }
    next.push_back(id);
  }
  if (next.size() == isr_.size()) {
    // Nobody leaves: may one join? It must hold everything below the HW and everything of
    // earlier leaders (the epoch start), so no HW any leader served is above its log.
    for (const auto& [id, f] : followers_) {
      if (in_isr(id) || f.fetch_offset < 0) continue;
      if (f.fetch_offset < high_watermark_ || f.fetch_offset < epoch_start_offset_) continue;
      // Not one that would be dropped again at the next poll (an ISR flapping under load).
      if (now_ms - f.last_caught_up_ms > opts_.replica_lag_time_max_ms) continue;
      auto b = brokers.find(id);
      if (b == brokers.end() || b->second.fenced || b->second.in_controlled_shutdown ||
          b->second.epoch != f.broker_epoch)
        continue;
      next.push_back(id);
      break;  // one at a time, as Kafka does
    }
    if (next.size() == isr_.size()) return std::nullopt;
  }
  AlterPartitionProposal prop;
  prop.request_id = next_proposal_id_++;
  prop.leader_epoch = leader_epoch_;
  prop.partition_epoch = partition_epoch_;
  for (std::int32_t id : next)
    prop.new_isr.push_back({id, epoch_of(id)});
  pending_ = Pending{prop, now_ms, false};
  recompute_maximal_isr();
  return prop;
}

void ReplicaState::on_alter_partition_answer(const AlterPartitionAnswer& a, std::int64_t now_ms) {
  (void)now_ms;
  if (role_ != ReplicaRole::leader || !pending_ || a.request_id != pending_->proposal.request_id)
    return;
  switch (a.error) {
    case ErrorCode::none:
      if (a.leader_epoch == leader_epoch_ && a.partition_epoch > partition_epoch_)
        set_isr(a.isr, a.partition_epoch);
      pending_.reset();
      break;
    case ErrorCode::ineligible_replica:
      // Refused after the epochs matched, so no earlier copy was applied: back to committed.
      pending_.reset();
      break;
    default:
      pending_->answered = true;
      return;
  }
  recompute_maximal_isr();
  maybe_advance_hw();
}

// ---------------------------------------------------------------------------------------------
// Follower

std::optional<FollowerFetchRequest> ReplicaState::next_fetch(std::int64_t now_ms) {
  if (role_ != ReplicaRole::follower) return std::nullopt;
  if (pending_truncation_) {
    auto r = log_.truncate_to(*pending_truncation_);
    if (!r) return std::nullopt;  // busy: appends still in flight
    high_watermark_ = std::min(high_watermark_, *pending_truncation_);
    pending_truncation_.reset();
  }
  if (in_flight_ && now_ms - in_flight_sent_ms_ < opts_.fetch_timeout_ms) return std::nullopt;
  // The fetch offset tells the leader what this replica holds on disk: wait for the sync.
  if (log_.durable_end_offset() < log_.log_end_offset() && !opts_.testing_fetch_from_memory)
    return std::nullopt;
  FollowerFetchRequest req;
  req.request_id = next_request_id_++;
  req.leader_id = leader_id_;
  req.fetch.replica_id = opts_.broker_id;
  req.fetch.broker_epoch = broker_epoch_;
  req.fetch.current_leader_epoch = leader_epoch_;
  req.fetch.fetch_offset = log_.log_end_offset();
  req.fetch.last_fetched_epoch = log_.latest_epoch().value_or(-1);
  req.fetch.log_start_offset = log_.log_start_offset();
  in_flight_ = req.request_id;
  in_flight_sent_ms_ = now_ms;
  return req;
}

FollowerStep ReplicaState::on_fetch_response(const FollowerFetchResponse& r, std::int64_t now_ms) {
  (void)now_ms;
  if (role_ != ReplicaRole::follower || !in_flight_ || *in_flight_ != r.request_id)
    return FollowerStep::ignore;
  in_flight_.reset();
  const auto& a = r.answer;
  const std::int64_t leo = log_.log_end_offset();
  if (a.error == ErrorCode::offset_out_of_range && a.diverging == std::nullopt) {
    // The leader has nothing matching our tail and no epoch to say where: keep only what is
    // below our HW, which every leader holds.
    pending_truncation_ = std::min(high_watermark_, leo);
  } else if (a.error != ErrorCode::none) {
    return FollowerStep::ignore;  // fenced or unknown epoch: the metadata will catch up
  } else if (a.diverging) {
    // Kafka's truncation rule: find our own end of the epoch the leader named; if we do not
    // know that epoch, cut at the end of our largest smaller one and ask again.
    const auto& d = *a.diverging;
    std::int64_t target;
    if (d.epoch < 0) {
      target = std::min(high_watermark_, leo);
    } else {
      auto mine = log_.end_offset_for(d.epoch);
      if (mine.epoch < 0) {
        target = std::min(d.end_offset, leo);
      } else if (mine.epoch != d.epoch) {
        target = std::min(mine.end_offset, leo);
      } else {
        target = std::min({mine.end_offset, d.end_offset, leo});
      }
    }
    pending_truncation_ = target;
  } else {
    truncation_done_ = true;
    const std::int64_t hw = std::min(a.high_watermark, log_.durable_end_offset());
    if (hw > high_watermark_) high_watermark_ = hw;
    // A compacted leader's answer may start past our end (the records between were compacted
    // away); the log refuses such a gap unless its topic is compacted.
    if (r.records_end > r.records_base && r.records_base >= leo) return FollowerStep::append;
    return FollowerStep::ignore;
  }
  // Nothing to cut at or past our end, but an epoch this replica began and never appended to
  // (it led, then lost the leadership before any record) still leaves the end of its epoch
  // cache (truncate_to does that): kept, it is named again as the last fetched epoch and the
  // leader answers "diverging" forever; this follower never rejoins the ISR.
  if (*pending_truncation_ > leo) pending_truncation_ = leo;
  if (auto t = log_.truncate_to(*pending_truncation_); t) {
    high_watermark_ = std::min(high_watermark_, *pending_truncation_);
    pending_truncation_.reset();
  }
  return FollowerStep::truncated;
}

void ReplicaState::note_replicated_batch(std::int32_t epoch, std::int64_t base_offset) {
  auto latest = log_.latest_epoch();
  if (!latest || *latest < epoch) (void)log_.assign_epoch(epoch, base_offset);
}

}  // namespace samsa::replication
