// RaftNode: roles, elections and the epoch rules (raft_replication.cc has fetches, the high
// watermark and snapshots).
#include "replication/quorum/raft.h"

#include <algorithm>

#include "base/assert.h"
#include "base/log.h"

namespace samsa::replication::quorum {

using kafka::ErrorCode;

const char* role_name(Role r) {
  switch (r) {
    case Role::unattached:
      return "unattached";
    case Role::prospective:
      return "prospective";
    case Role::candidate:
      return "candidate";
    case Role::leader:
      return "leader";
    case Role::follower:
      return "follower";
    case Role::resigned:
      return "resigned";
  }
  return "?";
}

RaftNode::RaftNode(RaftOptions opts, ReplicaLog& log, SnapshotStore& snapshots, QuorumState stored,
                   std::function<std::uint64_t()> random, std::int64_t now_ms)
    : opts_(std::move(opts)),
      log_(log),
      snapshots_(snapshots),
      random_(std::move(random)),
      state_(stored) {
  std::sort(opts_.voters.begin(), opts_.voters.end());
  voter_ = is_voter(opts_.node_id);
  SAMSA_ASSERT_MSG(!opts_.voters.empty() || !opts_.bootstrap.empty(),
                   "a node knows the voters or whom to ask for them");
  if (state_.leader == opts_.node_id) {
    // It led this epoch before the restart and lost what it held in memory (its followers'
    // progress, its unsynced tail): it may not lead again in this epoch.
    become_resigned(now_ms);
  } else if (state_.leader >= 0) {
    role_ = Role::follower;
    fetch_deadline_ = now_ms + opts_.fetch_timeout_ms;
  } else {
    role_ = Role::unattached;
    if (voter_) election_deadline_ = now_ms + random_ms(0, opts_.election_timeout_ms);
  }
  // A quorum of one elects itself at once.
  if (voter_ && opts_.voters.size() == 1 && role_ != Role::leader) become_candidate(now_ms);
}

bool RaftNode::is_voter(NodeId id) const {
  return std::binary_search(opts_.voters.begin(), opts_.voters.end(), id);
}

std::int64_t RaftNode::random_ms(std::int64_t lo, std::int64_t hi) {
  if (hi <= lo) return lo;
  return lo + static_cast<std::int64_t>(random_() % static_cast<std::uint64_t>(hi - lo));
}

void RaftNode::set_state(QuorumState s) {
  // The epoch never goes back, and a vote once given in an epoch is never changed.
  SAMSA_ASSERT(s.epoch >= state_.epoch);
  SAMSA_ASSERT_MSG(
      s.epoch != state_.epoch || state_.voted_for < 0 || s.voted_for == state_.voted_for,
      "a vote is given once per epoch");
  if (s == state_) return;
  state_ = s;
  effects_.persist = state_;
}

Effects RaftNode::take_effects() {
  Effects e = std::move(effects_);
  effects_ = Effects{};
  return e;
}

std::int32_t RaftNode::last_epoch() const {
  if (log_.log_end_offset() > log_.log_start_offset()) return log_.latest_epoch().value_or(0);
  if (auto s = snapshots_.latest(); s && s->end_offset == log_.log_end_offset()) return s->epoch;
  return 0;
}

bool RaftNode::log_up_to_date(std::int32_t last_epoch, std::int64_t last_offset) const {
  const std::int32_t mine = this->last_epoch();
  return last_epoch > mine || (last_epoch == mine && last_offset >= log_.log_end_offset());
}

std::int64_t RaftNode::send(NodeId to, Request r, std::int64_t now_ms) {
  const std::int64_t id = next_id_++;
  in_flight_[id] = InFlight{to, now_ms, r};
  effects_.send.push_back(Outgoing{to, id, std::move(r)});
  return id;
}

// ---- roles ----

void RaftNode::become_unattached(std::int32_t epoch, std::int64_t now_ms) {
  if (role_ == Role::leader)
    LOG_INFO("quorum: node %d steps down as leader of epoch %d", opts_.node_id, state_.epoch);
  set_state(QuorumState{epoch, epoch == state_.epoch ? state_.voted_for : -1, -1});
  role_ = Role::unattached;
  fetch_in_flight_.reset();
  snapshot_fetch_.reset();
  leader_change_appended_ = false;
  replicas_.clear();
  granted_.clear();
  rejected_.clear();
  fetch_deadline_ = check_quorum_deadline_ = begin_epoch_resend_ = INT64_MAX;
  election_deadline_ =
      voter_ ? now_ms + random_ms(opts_.election_timeout_ms, 2 * opts_.election_timeout_ms)
             : INT64_MAX;
}

void RaftNode::become_follower(std::int32_t epoch, NodeId leader, std::int64_t now_ms) {
  SAMSA_ASSERT(leader >= 0 && leader != opts_.node_id);
  const bool same = role_ == Role::follower && state_.epoch == epoch && state_.leader == leader;
  if (role_ == Role::leader)
    LOG_INFO("quorum: node %d steps down as leader of epoch %d (node %d leads epoch %d)",
             opts_.node_id, state_.epoch, leader, epoch);
  set_state(QuorumState{epoch, epoch == state_.epoch ? state_.voted_for : -1, leader});
  role_ = Role::follower;
  leader_change_appended_ = false;
  replicas_.clear();
  granted_.clear();
  rejected_.clear();
  election_deadline_ = check_quorum_deadline_ = begin_epoch_resend_ = INT64_MAX;
  if (same) return;
  LOG_DEBUG("quorum: node %d follows node %d in epoch %d", opts_.node_id, leader, epoch);
  fetch_in_flight_.reset();  // an answer from the old leader is stale
  snapshot_fetch_.reset();
  // What agrees with the new leader's log is known again only from its answers.
  matched_end_ = std::max(high_watermark_, log_.log_start_offset());
  leader_unreachable_ = false;
  lost_elections_ = 0;
  last_leader_contact_ms_ = now_ms;
  fetch_deadline_ = now_ms + opts_.fetch_timeout_ms;
  fetch_backoff_until_ = 0;
}

void RaftNode::become_resigned(std::int64_t now_ms) {
  role_ = Role::resigned;
  leader_change_appended_ = false;
  fetch_in_flight_.reset();
  fetch_deadline_ = check_quorum_deadline_ = begin_epoch_resend_ = INT64_MAX;
  election_deadline_ =
      voter_ ? now_ms + random_ms(opts_.election_timeout_ms, 2 * opts_.election_timeout_ms)
             : INT64_MAX;
}

// KIP-996: ask for pre-votes first. Nothing is persisted and no epoch moves, so a node cut off
// from the others cannot disturb a healthy quorum when it comes back.
void RaftNode::become_prospective(std::int64_t now_ms) {
  SAMSA_ASSERT(voter_);
  prospective_from_ = role_ == Role::prospective ? prospective_from_ : role_;
  role_ = Role::prospective;
  // The fetch it timed out on is given up (KRaft resets its connections here): its answer is
  // ignored, and a follower again after a lost pre-vote fetches at once instead of waiting out
  // the old request's timeout, which is longer than the fetch timeout.
  fetch_in_flight_.reset();
  if (snapshot_fetch_) snapshot_fetch_->in_flight.reset();
  granted_ = {opts_.node_id};
  rejected_.clear();
  election_deadline_ = now_ms + random_ms(opts_.election_timeout_ms, 2 * opts_.election_timeout_ms);
  if (granted_.size() >= majority()) {
    become_candidate(now_ms);
    return;
  }
  send_votes(true, now_ms);
}

void RaftNode::become_candidate(std::int64_t now_ms) {
  SAMSA_ASSERT(voter_);
  set_state(QuorumState{state_.epoch + 1, opts_.node_id, -1});
  role_ = Role::candidate;
  fetch_in_flight_.reset();
  snapshot_fetch_.reset();
  fetch_deadline_ = INT64_MAX;
  granted_ = {opts_.node_id};
  rejected_.clear();
  election_deadline_ = now_ms + random_ms(opts_.election_timeout_ms, 2 * opts_.election_timeout_ms);
  LOG_DEBUG("quorum: node %d stands in epoch %d", opts_.node_id, state_.epoch);
  if (granted_.size() >= majority()) {
    become_leader(now_ms);
    return;
  }
  send_votes(false, now_ms);
}

void RaftNode::become_leader(std::int64_t now_ms) {
  SAMSA_ASSERT(role_ == Role::candidate && state_.voted_for == opts_.node_id);
  set_state(QuorumState{state_.epoch, opts_.node_id, opts_.node_id});
  role_ = Role::leader;
  lost_elections_ = 0;
  election_deadline_ = fetch_deadline_ = INT64_MAX;
  // The epoch starts with the leader-change record at the log end; nothing of an earlier epoch
  // is committed by this leader until a majority holds that record.
  epoch_start_offset_ = log_.log_end_offset();
  if (auto r = log_.assign_epoch(state_.epoch, epoch_start_offset_); !r)
    LOG_WARN("quorum: leader epoch %d: %s", state_.epoch, r.error().detail.c_str());
  leader_change_appended_ = false;
  effects_.append_leader_change = true;
  replicas_.clear();
  for (NodeId v : opts_.voters)
    replicas_[v] =
        ReplicaProgress{v, v == opts_.node_id ? log_.durable_end_offset() : -1, -1, -1, true};
  check_quorum_deadline_ = now_ms + opts_.fetch_timeout_ms * 3 / 2;
  heard_since_check_.clear();
  LOG_INFO("quorum: node %d leads epoch %d from offset %lld (votes %zu of %zu)", opts_.node_id,
           state_.epoch, static_cast<long long>(epoch_start_offset_), granted_.size(),
           opts_.voters.size());
  send_begin_epochs(now_ms);
}

void RaftNode::leader_change_appended(std::int64_t offset) {
  SAMSA_ASSERT(role_ == Role::leader && offset == epoch_start_offset_);
  leader_change_appended_ = true;
}

void RaftNode::resign(std::int64_t now_ms) {
  if (role_ != Role::leader) return;
  std::vector<ReplicaProgress> others;
  for (const auto& [id, p] : replicas_)
    if (p.voter && id != opts_.node_id) others.push_back(p);
  std::stable_sort(others.begin(), others.end(),
                   [](const auto& a, const auto& b) { return a.end_offset > b.end_offset; });
  EndEpochRequest req{state_.epoch, opts_.node_id, {}};
  for (const auto& p : others)
    req.preferred_successors.push_back(p.id);
  for (NodeId v : opts_.voters)
    if (v != opts_.node_id) send(v, req, now_ms);
  LOG_INFO("quorum: node %d resigns as leader of epoch %d", opts_.node_id, state_.epoch);
  become_resigned(now_ms);
}

// Learns of an epoch (and maybe its leader) from any request or answer. Returns whether the
// node moved.
bool RaftNode::observe_epoch(std::int32_t epoch, NodeId leader, std::int64_t now_ms) {
  if (epoch > state_.epoch) {
    if (leader >= 0 && leader != opts_.node_id)
      become_follower(epoch, leader, now_ms);
    else
      become_unattached(epoch, now_ms);
    return true;
  }
  if (epoch == state_.epoch && leader >= 0 && leader != opts_.node_id && state_.leader < 0 &&
      role_ != Role::leader) {
    become_follower(epoch, leader, now_ms);
    return true;
  }
  return false;
}

// ---- elections ----

void RaftNode::send_votes(bool pre_vote, std::int64_t now_ms) {
  VoteRequest req{pre_vote ? state_.epoch + 1 : state_.epoch, opts_.node_id, last_epoch(),
                  log_.log_end_offset(), pre_vote};
  for (NodeId v : opts_.voters)
    if (v != opts_.node_id) send(v, req, now_ms);
}

VoteResponse RaftNode::on_vote(const VoteRequest& r, std::int64_t now_ms) {
  VoteResponse out;
  if (!voter_ || !is_voter(r.candidate)) {
    out.error = ErrorCode::inconsistent_voter_set;
    out.epoch = state_.epoch;
    out.leader = state_.leader;
    return out;
  }
  const bool up_to_date = log_up_to_date(r.last_epoch, r.last_offset);
  if (r.pre_vote) {
    // Nothing changes here. Granted to a candidate whose log is up to date, unless this node
    // has a leader it still hears from (it would only disturb a working quorum).
    const bool has_live_leader =
        role_ == Role::leader || (role_ == Role::follower && !leader_unreachable_ &&
                                  now_ms - last_leader_contact_ms_ < opts_.fetch_timeout_ms);
    out.epoch = state_.epoch;
    out.leader = state_.leader;
    out.granted = r.epoch > state_.epoch && up_to_date && !has_live_leader;
    return out;
  }
  if (r.epoch > state_.epoch) observe_epoch(r.epoch, -1, now_ms);
  out.epoch = state_.epoch;
  out.leader = state_.leader;
  if (r.epoch < state_.epoch) return out;
  if (state_.voted_for == r.candidate) {
    out.granted = true;  // the same vote again (a lost answer)
    return out;
  }
  if (state_.voted_for >= 0 || state_.leader >= 0 || role_ == Role::leader) return out;
  if (!up_to_date) return out;
  // Durable before the answer leaves (Effects::persist is delivered first).
  set_state(QuorumState{state_.epoch, r.candidate, -1});
  election_deadline_ = now_ms + random_ms(opts_.election_timeout_ms, 2 * opts_.election_timeout_ms);
  out.granted = true;
  return out;
}

void RaftNode::on_vote_response(std::int64_t id, NodeId from, const VoteResponse& r,
                                std::int64_t now_ms) {
  auto it = in_flight_.find(id);
  if (it == in_flight_.end()) return;
  const auto* request = std::get_if<VoteRequest>(&it->second.request);
  if (!request) {
    in_flight_.erase(it);
    return;
  }
  // Copied out: erasing the entry frees the request it points into.
  const VoteRequest sent = *request;
  in_flight_.erase(it);
  if (r.error != ErrorCode::none) {
    observe_epoch(r.epoch, r.leader, now_ms);
    return;
  }
  if (sent.pre_vote) {
    if (role_ != Role::prospective || sent.epoch != state_.epoch + 1) return;
    // A newer epoch, or a leader of this one it did not know: follow instead of standing.
    if (observe_epoch(r.epoch, r.leader, now_ms)) return;
    count_vote(from, r.granted, now_ms);
    return;
  }
  if (observe_epoch(r.epoch, r.leader, now_ms)) return;
  if (role_ != Role::candidate || sent.epoch != state_.epoch || r.epoch != state_.epoch) return;
  count_vote(from, r.granted, now_ms);
}

void RaftNode::count_vote(NodeId from, bool granted, std::int64_t now_ms) {
  (granted ? granted_ : rejected_).insert(from);
  if (granted_.size() >= majority()) {
    if (role_ == Role::prospective)
      become_candidate(now_ms);
    else if (role_ == Role::candidate)
      become_leader(now_ms);
    return;
  }
  if (rejected_.size() > opts_.voters.size() - majority()) lose_election(now_ms);
}

// A lost election (or one that timed out): back off, randomly and longer each time, then ask
// for pre-votes again (a follower again: once its leader has been silent a fetch timeout).
void RaftNode::lose_election(std::int64_t now_ms) {
  ++lost_elections_;
  const std::int64_t cap =
      std::min<std::int64_t>(opts_.election_backoff_max_ms,
                             std::int64_t{50} << std::min<std::uint32_t>(lost_elections_, 10));
  const std::int64_t wait = random_ms(0, cap) + 1;
  if (role_ == Role::prospective && prospective_from_ == Role::follower && state_.leader >= 0) {
    // The leader may still be there (the others would not stand): follow it again with a whole
    // fetch timeout, as KRaft's new FollowerState does. A deadline of only the back-off ran out
    // before a fetch could come back (one the leader long-polls, or one lost and re-sent after its
    // request timeout), and a prospective node drops that answer: the follower flapped between the
    // two roles while its fetches, and so the leader's commits, stalled.
    role_ = Role::follower;
    fetch_deadline_ = now_ms + opts_.fetch_timeout_ms;
    election_deadline_ = leader_unreachable_ ? now_ms + wait : INT64_MAX;
    return;
  }
  role_ = role_ == Role::prospective && prospective_from_ == Role::resigned ? Role::resigned
                                                                            : Role::unattached;
  election_deadline_ = now_ms + wait;
}

// ---- quorum epochs ----

EpochResponse RaftNode::on_begin_epoch(const BeginEpochRequest& r, std::int64_t now_ms) {
  EpochResponse out;
  if (!voter_ || !is_voter(r.leader)) {
    out.error = ErrorCode::inconsistent_voter_set;
  } else if (r.epoch < state_.epoch) {
    out.error = ErrorCode::fenced_leader_epoch;
  } else if (r.leader != opts_.node_id) {
    SAMSA_ASSERT_MSG(!(r.epoch == state_.epoch && role_ == Role::leader),
                     "two leaders in one epoch");
    if (!(role_ == Role::follower && state_.epoch == r.epoch && state_.leader == r.leader))
      become_follower(r.epoch, r.leader, now_ms);
  }
  out.epoch = state_.epoch;
  out.leader = state_.leader;
  return out;
}

EpochResponse RaftNode::on_end_epoch(const EndEpochRequest& r, std::int64_t now_ms) {
  EpochResponse out;
  if (r.epoch < state_.epoch) {
    out.error = ErrorCode::fenced_leader_epoch;
  } else if (r.epoch > state_.epoch) {
    observe_epoch(r.epoch, -1, now_ms);
  } else if (voter_ && state_.leader == r.leader && role_ == Role::follower) {
    // The leader stepped down: stand soon, the most caught up first.
    auto pos =
        std::find(r.preferred_successors.begin(), r.preferred_successors.end(), opts_.node_id) -
        r.preferred_successors.begin();
    leader_unreachable_ = true;
    election_deadline_ = now_ms + pos * 50 + random_ms(0, 50);
  }
  out.epoch = state_.epoch;
  out.leader = state_.leader;
  return out;
}

void RaftNode::on_epoch_response(std::int64_t id, NodeId from, const EpochResponse& r,
                                 std::int64_t now_ms) {
  (void)from;
  if (in_flight_.erase(id) == 0) return;
  observe_epoch(r.epoch, r.leader, now_ms);
}

// ---- timers ----

void RaftNode::expire_requests(std::int64_t now_ms) {
  std::vector<std::pair<std::int64_t, NodeId>> expired;
  for (const auto& [id, f] : in_flight_) {
    std::int64_t limit = opts_.request_timeout_ms;
    if (std::holds_alternative<FetchRequest>(f.request)) limit += opts_.fetch_max_wait_ms;
    if (now_ms - f.sent_ms >= limit) expired.emplace_back(id, f.to);
  }
  for (auto [id, to] : expired)
    on_request_failed(id, to, false, now_ms);
}

void RaftNode::on_request_failed(std::int64_t id, NodeId to, bool unreachable,
                                 std::int64_t now_ms) {
  if (in_flight_.erase(id) == 0) return;
  if (fetch_in_flight_ == id) {
    fetch_in_flight_.reset();
    // Try again shortly; an observer asks the next voter.
    fetch_backoff_until_ = now_ms + std::min<std::int64_t>(50, opts_.election_timeout_ms);
    if (state_.leader < 0) ++bootstrap_index_;
    if (unreachable && role_ == Role::follower && to == state_.leader && !leader_unreachable_) {
      // The leader's node answers no more (refused or reset): it is gone, not slow. A voter
      // stands after a short random wait instead of the whole fetch timeout; an observer asks
      // the others who leads now (tick).
      leader_unreachable_ = true;
      if (voter_) election_deadline_ = now_ms + random_ms(0, opts_.election_timeout_ms / 2);
    }
  }
  if (snapshot_fetch_ && snapshot_fetch_->in_flight == id) snapshot_fetch_->in_flight.reset();
}

std::int64_t RaftNode::tick(std::int64_t now_ms) {
  expire_requests(now_ms);
  switch (role_) {
    case Role::unattached:
    case Role::resigned:
      if (voter_ && now_ms >= election_deadline_) become_prospective(now_ms);
      break;
    case Role::prospective:
    case Role::candidate:
      if (now_ms >= election_deadline_) lose_election(now_ms);
      break;
    case Role::follower:
      if (voter_ &&
          (now_ms >= fetch_deadline_ || (leader_unreachable_ && now_ms >= election_deadline_)))
        become_prospective(now_ms);
      else if (!voter_ && (now_ms >= fetch_deadline_ || leader_unreachable_))
        become_unattached(state_.epoch, now_ms);  // an observer looks for the leader again
      break;
    case Role::leader:
      check_quorum(now_ms);
      if (role_ == Role::leader && now_ms >= begin_epoch_resend_) send_begin_epochs(now_ms);
      break;
  }
  if (role_ == Role::follower || (role_ == Role::unattached && !voter_)) maybe_fetch(now_ms);
  std::int64_t next =
      std::min({election_deadline_, fetch_deadline_, check_quorum_deadline_, begin_epoch_resend_});
  if (fetch_backoff_until_ > now_ms) next = std::min(next, fetch_backoff_until_);
  for (const auto& [id, f] : in_flight_)
    next = std::min(next, f.sent_ms + opts_.request_timeout_ms + opts_.fetch_max_wait_ms);
  return std::max(next, now_ms + 1);
}

}  // namespace samsa::replication::quorum
