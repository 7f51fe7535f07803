// RaftNode: pull replication (the leader answers fetches and counts what followers hold; a
// follower fetches, truncates a diverged tail, loads a snapshot), the high watermark, check
// quorum. Roles and elections are in raft.cc.
#include <algorithm>

#include "base/assert.h"
#include "base/log.h"
#include "replication/quorum/raft.h"

namespace samsa::replication::quorum {

using kafka::ErrorCode;

// ---- leader ----

void RaftNode::send_begin_epochs(std::int64_t now_ms) {
  // Every voter that has not fetched in this epoch hears of it (again, until it does).
  for (NodeId v : opts_.voters) {
    if (v == opts_.node_id) continue;
    auto it = replicas_.find(v);
    if (it != replicas_.end() && it->second.end_offset >= 0) continue;
    bool pending = false;
    for (const auto& [id, f] : in_flight_)
      pending |= f.to == v && std::holds_alternative<BeginEpochRequest>(f.request);
    if (!pending) send(v, BeginEpochRequest{state_.epoch, opts_.node_id}, now_ms);
  }
  begin_epoch_resend_ = now_ms + opts_.request_timeout_ms;
}

// A leader that has not heard from a majority for 1.5 fetch timeouts is likely cut off: it
// resigns, so it stops taking writes that can never commit and the others elect a leader
// without waiting for it (KRaft's check quorum).
void RaftNode::check_quorum(std::int64_t now_ms) {
  if (now_ms < check_quorum_deadline_) return;
  std::size_t heard = 1;  // itself
  for (NodeId v : heard_since_check_)
    heard += is_voter(v) && v != opts_.node_id ? 1 : 0;
  heard_since_check_.clear();
  check_quorum_deadline_ = now_ms + opts_.fetch_timeout_ms * 3 / 2;
  if (heard >= majority()) return;
  LOG_WARN("quorum: node %d heard from %zu of %zu voters in %lld ms; resigning epoch %d",
           opts_.node_id, heard, opts_.voters.size(),
           static_cast<long long>(opts_.fetch_timeout_ms * 3 / 2), state_.epoch);
  resign(now_ms);
}

std::optional<FetchAnswer::Diverging> RaftNode::diverging(std::int32_t last_fetched_epoch,
                                                          std::int64_t fetch_offset) const {
  if (fetch_offset == 0) return std::nullopt;
  const auto end = log_.end_offset_for(last_fetched_epoch);
  if (end.epoch == last_fetched_epoch && end.end_offset >= fetch_offset) return std::nullopt;
  return FetchAnswer::Diverging{end.epoch, end.epoch < 0 ? 0 : end.end_offset};
}

FetchAnswer RaftNode::on_fetch(const FetchRequest& r, std::int64_t now_ms) {
  FetchAnswer a;
  a.epoch = state_.epoch;
  a.leader = state_.leader;
  if (r.epoch < state_.epoch) {
    a.error = ErrorCode::fenced_leader_epoch;
    return a;
  }
  if (r.epoch > state_.epoch) {
    a.error = ErrorCode::unknown_leader_epoch;
    return a;
  }
  if (role_ != Role::leader) {
    a.error = ErrorCode::not_leader_or_follower;
    return a;
  }
  a.high_watermark = high_watermark_;
  a.log_start_offset = log_.log_start_offset();
  if (is_voter(r.replica)) heard_since_check_.insert(r.replica);
  const auto snap = snapshots_.latest();
  if (r.fetch_offset < log_.log_start_offset() ||
      (snap && r.fetch_offset == snap->end_offset && r.fetch_offset == log_.log_start_offset() &&
       r.last_fetched_epoch != snap->epoch)) {
    // What it lacks is only in the snapshot now.
    a.snapshot = snap;
    if (!snap) a.error = ErrorCode::offset_out_of_range;
    return a;
  }
  if (r.fetch_offset > log_.log_start_offset() || log_.log_start_offset() == 0) {
    if (auto d = diverging(r.last_fetched_epoch, r.fetch_offset)) {
      a.diverging = d;
      return a;
    }
  }
  // Its log is a prefix of this one up to fetch_offset, and fetch_offset is its durable end.
  auto& p = replicas_[r.replica];
  p.id = r.replica;
  p.voter = is_voter(r.replica);
  p.end_offset = r.fetch_offset;
  p.last_fetch_ms = now_ms;
  if (r.fetch_offset >= log_.readable_end_offset()) p.last_caught_up_ms = now_ms;
  if (p.voter) maybe_advance_hw();
  a.high_watermark = high_watermark_;
  a.may_wait = r.fetch_offset >= log_.readable_end_offset();
  return a;
}

void RaftNode::maybe_advance_hw() {
  if (role_ != Role::leader) return;
  std::vector<std::int64_t> ends;
  for (NodeId v : opts_.voters) {
    if (v == opts_.node_id) {
      ends.push_back(log_.durable_end_offset());
      continue;
    }
    auto it = replicas_.find(v);
    ends.push_back(it == replicas_.end() ? -1 : it->second.end_offset);
  }
  std::sort(ends.begin(), ends.end(), std::greater<>());
  const std::int64_t m = ends[majority() - 1];
  // Only once a majority holds a record of this epoch (the leader-change record at its start)
  // does anything below it count as committed: an earlier epoch's record on a majority may
  // still be overwritten by a leader that never saw it (Raft's figure 8).
  if (!opts_.testing_commit_old_epoch && m <= epoch_start_offset_) return;
  if (m > high_watermark_) high_watermark_ = m;
}

// ---- follower ----

NodeId RaftNode::fetch_target() {
  if (state_.leader >= 0) return state_.leader;
  // An observer that knows no leader asks the voters (or bootstrap servers) in turn; any of
  // them names the leader.
  const auto& ask = opts_.bootstrap.empty() ? opts_.voters : opts_.bootstrap;
  return ask[bootstrap_index_ % ask.size()];
}

void RaftNode::maybe_fetch(std::int64_t now_ms) {
  if (fetch_in_flight_ || now_ms < fetch_backoff_until_) return;
  if (pending_truncation_) {
    if (!log_.truncate_to(*pending_truncation_)) return;  // busy: after the sync
    pending_truncation_.reset();
  }
  if (snapshot_fetch_) {
    if (snapshot_fetch_->in_flight) return;
    snapshot_fetch_->in_flight =
        send(fetch_target(),
             FetchSnapshotRequest{opts_.node_id, state_.epoch, snapshot_fetch_->id,
                                  snapshot_fetch_->position},
             now_ms);
    return;
  }
  // The fetch offset is what survives a power cut: wait for the sync.
  if (log_.durable_end_offset() < log_.log_end_offset()) return;
  // The first fetch since this process started does not wait: with nothing new for it (a
  // broker restarted on an up-to-date local log) the leader would hold it a whole long poll,
  // and until an answer it cannot know it has caught up. (KIP-1166 sends the fetcher's HW in
  // Fetch v18 for this; Kafka 4.1 does not advertise v18 yet.)
  FetchRequest f{opts_.node_id, state_.epoch, log_.durable_end_offset(), last_epoch(),
                 leader_answered_ ? opts_.fetch_max_wait_ms : 0};
  fetch_in_flight_ = send(fetch_target(), f, now_ms);
}

void RaftNode::truncate(const FetchAnswer::Diverging& d) {
  // KRaft's truncateToEndOffset: to where this log and the leader's agree.
  std::int64_t to;
  if (d.epoch <= 0) {
    to = std::min(std::max<std::int64_t>(d.end_offset, 0), log_.log_end_offset());
  } else {
    const auto mine = log_.end_offset_for(d.epoch);
    to = mine.epoch == d.epoch ? std::min(mine.end_offset, d.end_offset)
                               : std::max<std::int64_t>(mine.end_offset, 0);
  }
  to = std::max(to, log_.log_start_offset());
  matched_end_ = std::min(matched_end_, to);
  if (to < std::min(high_watermark_, log_.log_end_offset()))
    LOG_ERROR(
        "quorum: node %d asked to truncate to %lld below its HW %lld (diverging epoch %d "
        "end %lld, log %lld..%lld, epoch %d)",
        opts_.node_id, static_cast<long long>(to), static_cast<long long>(high_watermark_), d.epoch,
        static_cast<long long>(d.end_offset), static_cast<long long>(log_.log_start_offset()),
        static_cast<long long>(log_.log_end_offset()), state_.epoch);
  // A committed record is never cut.
  SAMSA_ASSERT_MSG(to >= std::min(high_watermark_, log_.log_end_offset()),
                   "truncation below the high watermark");
  if (to >= log_.log_end_offset()) return;
  if (!log_.truncate_to(to)) pending_truncation_ = to;
}

FollowerStep RaftNode::on_fetch_response(std::int64_t id, NodeId from, const FetchResponse& r,
                                         std::int64_t now_ms) {
  (void)from;
  auto sent_it = in_flight_.find(id);
  if (sent_it == in_flight_.end() || fetch_in_flight_ != id) return FollowerStep::ignore;
  const auto* sent = std::get_if<FetchRequest>(&sent_it->second.request);
  const std::int64_t sent_offset = sent ? sent->fetch_offset : -1;
  in_flight_.erase(sent_it);
  fetch_in_flight_.reset();
  const FetchAnswer& a = r.answer;
  if (a.error != ErrorCode::none) {
    if (!observe_epoch(a.epoch, a.leader, now_ms)) {
      fetch_backoff_until_ = now_ms + std::min<std::int64_t>(50, opts_.election_timeout_ms);
      if (state_.leader < 0) ++bootstrap_index_;
    }
    return FollowerStep::ignore;
  }
  if (observe_epoch(a.epoch, a.leader, now_ms) || role_ != Role::follower ||
      a.epoch != state_.epoch)
    return FollowerStep::ignore;
  leader_unreachable_ = false;
  last_leader_contact_ms_ = now_ms;
  fetch_deadline_ = now_ms + opts_.fetch_timeout_ms;
  if (!leader_unreachable_) election_deadline_ = INT64_MAX;
  leader_hw_ = std::max(leader_hw_, a.high_watermark);
  leader_answered_ = true;
  if (a.snapshot) {
    snapshot_fetch_ = SnapshotFetch{*a.snapshot, 0, std::nullopt};
    snapshots_.begin(*a.snapshot);
    return FollowerStep::ignore;
  }
  if (a.diverging) {
    truncate(*a.diverging);
    return FollowerStep::truncated;
  }
  // The leader checked this log up to the fetch offset; the records it sends extend that.
  const bool append = r.records_end > r.records_base && r.records_base == sent_offset &&
                      sent_offset == log_.log_end_offset();
  matched_end_ = append ? r.records_end : sent_offset;
  update_follower_hw();
  return append ? FollowerStep::append : FollowerStep::ignore;
}

void RaftNode::update_follower_hw() {
  // What the leader committed, as far as this log holds it durably and is known to agree with
  // the leader's (a tail not yet truncated may hold other records at those offsets).
  const std::int64_t hw =
      std::min({leader_hw_, log_.durable_end_offset(), matched_end_, log_.log_end_offset()});
  if (hw > high_watermark_) high_watermark_ = hw;
}

// ---- snapshots ----

FetchSnapshotResponse RaftNode::on_fetch_snapshot(const FetchSnapshotRequest& r,
                                                  std::int64_t max_bytes, std::int64_t now_ms) {
  (void)now_ms;
  FetchSnapshotResponse out;
  out.epoch = state_.epoch;
  out.leader = state_.leader;
  if (r.epoch < state_.epoch) {
    out.error = ErrorCode::fenced_leader_epoch;
  } else if (r.epoch > state_.epoch) {
    out.error = ErrorCode::unknown_leader_epoch;
  } else if (role_ != Role::leader) {
    out.error = ErrorCode::not_leader_or_follower;
  } else if (const std::int64_t size = snapshots_.size(r.id); size < 0) {
    out.error = ErrorCode::snapshot_not_found;
  } else if (r.position < 0 || r.position > size) {
    out.error = ErrorCode::position_out_of_range;
  } else {
    out.size = size;
    out.position = r.position;
    out.bytes = snapshots_.read(r.id, r.position, max_bytes);
  }
  return out;
}

void RaftNode::on_fetch_snapshot_response(std::int64_t id, NodeId from,
                                          const FetchSnapshotResponse& r, std::int64_t now_ms) {
  (void)from;
  if (in_flight_.erase(id) == 0 || !snapshot_fetch_ || snapshot_fetch_->in_flight != id) return;
  snapshot_fetch_->in_flight.reset();
  if (r.error != ErrorCode::none || r.position != snapshot_fetch_->position) {
    // The next fetch asks again (the leader may hold a newer snapshot by then).
    snapshot_fetch_.reset();
    if (r.error != ErrorCode::none) observe_epoch(r.epoch, r.leader, now_ms);
    fetch_backoff_until_ = now_ms + std::min<std::int64_t>(50, opts_.election_timeout_ms);
    return;
  }
  last_leader_contact_ms_ = now_ms;
  fetch_deadline_ = now_ms + opts_.fetch_timeout_ms;
  snapshots_.write(r.bytes);
  snapshot_fetch_->position += static_cast<std::int64_t>(r.bytes.size());
  if (snapshot_fetch_->position < r.size && !r.bytes.empty()) return;  // the next chunk
  const SnapshotId sid = snapshot_fetch_->id;
  const bool whole = snapshot_fetch_->position == r.size;
  snapshot_fetch_.reset();
  if (whole && snapshots_.finish()) {
    // The log restarts at the snapshot's end; everything in it was committed.
    SAMSA_ASSERT(log_.log_end_offset() == sid.end_offset);
    high_watermark_ = std::max(high_watermark_, sid.end_offset);
    leader_hw_ = std::max(leader_hw_, sid.end_offset);
    matched_end_ = sid.end_offset;
    LOG_INFO("quorum: node %d loaded snapshot %lld-%d from node %d", opts_.node_id,
             static_cast<long long>(sid.end_offset), sid.epoch, from);
  } else {
    LOG_WARN("quorum: node %d: snapshot %lld-%d from node %d failed its checks; fetching again",
             opts_.node_id, static_cast<long long>(sid.end_offset), sid.epoch, from);
  }
}

// ---- the log ----

void RaftNode::note_batch(std::int32_t epoch, std::int64_t base_offset) {
  auto latest = log_.latest_epoch();
  if (!latest || epoch > *latest) {
    if (auto r = log_.assign_epoch(epoch, base_offset); !r)
      LOG_WARN("quorum: epoch %d at %lld: %s", epoch, static_cast<long long>(base_offset),
               r.error().detail.c_str());
  }
}

void RaftNode::on_log_durable(std::int64_t now_ms) {
  if (role_ == Role::leader) {
    replicas_[opts_.node_id].end_offset = log_.durable_end_offset();
    maybe_advance_hw();
    return;
  }
  update_follower_hw();
  if (role_ == Role::follower || (role_ == Role::unattached && !voter_)) maybe_fetch(now_ms);
}

std::vector<ReplicaProgress> RaftNode::progress(std::int64_t now_ms) const {
  std::vector<ReplicaProgress> out;
  for (const auto& [id, p] : replicas_) {
    ReplicaProgress q = p;
    if (id == opts_.node_id) {
      q.end_offset = log_.log_end_offset();
      q.last_fetch_ms = q.last_caught_up_ms = now_ms;
    }
    out.push_back(q);
  }
  return out;
}

}  // namespace samsa::replication::quorum
