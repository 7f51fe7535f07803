// quorum::RaftNode — one node's part in the controller quorum (KRaft's protocol: Vote with
// KIP-996 pre-vote, BeginQuorumEpoch, EndQuorumEpoch, pull replication with Fetch, snapshots),
// with no I/O of its own. Time comes in as arguments; the metadata log is reached through
// ReplicaLog (appends stay with the driver, which owns the bytes); everything to send goes out
// through take_effects(). The daemon's QuorumDriver and the simulation (tests/sim/quorum_sim.cc)
// drive the same code.
//
// The rules that keep a committed record committed:
//  - The quorum state (epoch, vote, leader) is made durable before anything the node produced
//    after changing it is sent (Effects::persist comes first; the driver syncs it, then sends).
//  - A vote is granted once per epoch, to a candidate whose log is at least as up to date
//    (last epoch, then end offset).
//  - A leader's high watermark is the largest offset held durably by a majority of voters (its
//    own durable end included), and moves only once that majority holds a record of the
//    leader's own epoch (its leader-change record): a record of an earlier epoch is never
//    committed by counting replicas alone (Raft's figure 8). It never moves back.
//  - A follower reports its durable end as its fetch offset, so what the leader counts survives
//    a power cut of the follower.
//  - A follower whose log diverged from the leader's (DivergingEpoch) truncates to where it
//    agrees; one below the leader's log start loads the leader's snapshot.
//
// Roles: unattached (no leader known), prospective (asking for pre-votes: nothing persisted),
// candidate, leader, follower, resigned (a leader that stepped down, or one restarted: it may
// not lead again in that epoch). A node that is not a voter is an observer: it only fetches
// (a broker's copy of the metadata log), never votes, never stands.
//
// Used by one thread (the controller's reactor, or the simulation).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "base/kafka_errors.h"
#include "replication/replica_log.h"

namespace samsa::replication::quorum {

using NodeId = std::int32_t;

struct RaftOptions {
  NodeId node_id = -1;
  std::vector<NodeId> voters;  // the quorum (controller.quorum.voters); sorted
  // An observer that knows no leader asks these in turn (bootstrap servers; empty: the voters).
  std::vector<NodeId> bootstrap;
  // controller.quorum.election.timeout.ms: how long an unattached voter or a candidate waits
  // before (re)starting an election; each wait is randomised in [t, 2t).
  std::int64_t election_timeout_ms = 1000;
  // controller.quorum.fetch.timeout.ms: a follower that has had no successful fetch for this
  // long starts an election; a leader that has not heard from a majority for 1.5 times this
  // resigns (check quorum).
  std::int64_t fetch_timeout_ms = 2000;
  // controller.quorum.election.backoff.max.ms: the longest random back-off after a lost
  // election.
  std::int64_t election_backoff_max_ms = 1000;
  // The leader's long poll: how long a follower's fetch at the log end may be held.
  std::int32_t fetch_max_wait_ms = 500;
  // A request unanswered this long is given up (and re-sent where the protocol wants it).
  std::int64_t request_timeout_ms = 2000;
  // Test only (the simulation's broken variant): the high watermark moves as soon as a majority
  // holds an offset, even a record of an earlier epoch (Raft's figure 8). Must lose committed
  // records in the simulation.
  bool testing_commit_old_epoch = false;
};

// What quorum-state holds (KRaft's file): made durable before any vote is answered.
struct QuorumState {
  std::int32_t epoch = 0;
  NodeId voted_for = -1;
  NodeId leader = -1;
  bool operator==(const QuorumState&) const = default;
};

struct SnapshotId {
  std::int64_t end_offset = -1;  // the snapshot holds every record below
  std::int32_t epoch = -1;       // the epoch of the record at end_offset - 1
  bool operator==(const SnapshotId&) const = default;
  auto operator<=>(const SnapshotId&) const = default;
};

// ---- messages (the driver converts them to Kafka's wire formats) ----
struct VoteRequest {
  std::int32_t epoch = 0;  // the candidate's epoch (pre-vote: the epoch it would stand in)
  NodeId candidate = -1;
  std::int32_t last_epoch = 0;
  std::int64_t last_offset = 0;  // the candidate's log end offset
  bool pre_vote = false;
};
struct VoteResponse {
  kafka::ErrorCode error = kafka::ErrorCode::none;
  std::int32_t epoch = 0;  // the voter's epoch
  NodeId leader = -1;      // the leader the voter knows in that epoch
  bool granted = false;
};
struct BeginEpochRequest {
  std::int32_t epoch = 0;
  NodeId leader = -1;
};
struct EndEpochRequest {
  std::int32_t epoch = 0;
  NodeId leader = -1;
  std::vector<NodeId> preferred_successors;  // most caught up first
};
// BeginQuorumEpoch's and EndQuorumEpoch's answers.
struct EpochResponse {
  kafka::ErrorCode error = kafka::ErrorCode::none;
  std::int32_t epoch = 0;
  NodeId leader = -1;
};
struct FetchRequest {
  NodeId replica = -1;
  std::int32_t epoch = 0;  // the epoch the fetcher believes current
  std::int64_t fetch_offset = 0;
  std::int32_t last_fetched_epoch = 0;
  std::int32_t max_wait_ms = 0;
};
// The leader's answer. With error none, no diverging and no snapshot, the driver sends the
// records from fetch_offset on (possibly none).
struct FetchAnswer {
  kafka::ErrorCode error = kafka::ErrorCode::none;
  std::int32_t epoch = 0;
  NodeId leader = -1;
  std::int64_t high_watermark = -1;
  std::int64_t log_start_offset = 0;
  struct Diverging {
    std::int32_t epoch = -1;
    std::int64_t end_offset = -1;
  };
  std::optional<Diverging> diverging;
  std::optional<SnapshotId> snapshot;  // fetch this snapshot first
  // Nothing to send yet: the driver may hold the answer up to max_wait_ms, until the log or the
  // high watermark moves.
  bool may_wait = false;
};
struct FetchResponse {
  FetchAnswer answer;
  std::int64_t records_base = -1;  // offsets of the batches carried (end == base: none)
  std::int64_t records_end = -1;
};
struct FetchSnapshotRequest {
  NodeId replica = -1;
  std::int32_t epoch = 0;
  SnapshotId id;
  std::int64_t position = 0;
};
struct FetchSnapshotResponse {
  kafka::ErrorCode error = kafka::ErrorCode::none;
  std::int32_t epoch = 0;
  NodeId leader = -1;
  std::int64_t size = 0;  // the whole snapshot's
  std::int64_t position = 0;
  std::vector<std::byte> bytes;
};

using Request = std::variant<VoteRequest, BeginEpochRequest, EndEpochRequest, FetchRequest,
                             FetchSnapshotRequest>;

struct Outgoing {
  NodeId to = -1;
  std::int64_t id = 0;  // matches the response (on_response) to its request
  Request request;
};

// Snapshots as the node sees them; the driver stores them (.checkpoint files, or memory).
class SnapshotStore {
 public:
  virtual ~SnapshotStore() = default;
  virtual std::optional<SnapshotId> latest() const = 0;
  virtual std::int64_t size(const SnapshotId& id) const = 0;  // -1: not held
  virtual std::vector<std::byte> read(const SnapshotId& id, std::int64_t position,
                                      std::int64_t max_bytes) const = 0;
  // Receiving one from the leader: bytes arrive in order; finish() checks and installs it
  // (the log restarts at its end offset); false when it is not whole or fails its checks.
  virtual void begin(const SnapshotId& id) = 0;
  virtual void write(std::span<const std::byte> bytes) = 0;
  virtual bool finish() = 0;
};

enum class Role : std::uint8_t { unattached, prospective, candidate, leader, follower, resigned };
const char* role_name(Role r);

// What the driver does after each call, in this order: persist the quorum state durably (sync),
// append the leader-change record (a new leader's first record, of its epoch), then send.
struct Effects {
  std::optional<QuorumState> persist;
  bool append_leader_change = false;
  std::vector<Outgoing> send;
};

// What a follower's driver does with a fetch response.
enum class FollowerStep : std::uint8_t {
  ignore,    // stale or an error (the next fetch goes out when allowed)
  append,    // append the response's batches at records_base (== the log end)
  truncated  // the log was cut to a prefix of the leader's
};

// A voter's replication state as the leader knows it (DescribeQuorum).
struct ReplicaProgress {
  NodeId id = -1;
  std::int64_t end_offset = -1;  // last fetch offset (-1: none in this epoch)
  std::int64_t last_fetch_ms = -1;
  std::int64_t last_caught_up_ms = -1;
  bool voter = false;
};

class RaftNode {
 public:
  RaftNode(RaftOptions opts, ReplicaLog& log, SnapshotStore& snapshots, QuorumState stored,
           std::function<std::uint64_t()> random, std::int64_t now_ms);

  // Timers: elections, resends, the follower's fetch, check quorum. Returns when to call again.
  // The driver calls it after every other call too (it sends what became due).
  std::int64_t tick(std::int64_t now_ms);

  // ---- requests from other nodes; the answer is sent after take_effects()' persist ----
  VoteResponse on_vote(const VoteRequest& r, std::int64_t now_ms);
  EpochResponse on_begin_epoch(const BeginEpochRequest& r, std::int64_t now_ms);
  EpochResponse on_end_epoch(const EndEpochRequest& r, std::int64_t now_ms);
  FetchAnswer on_fetch(const FetchRequest& r, std::int64_t now_ms);
  FetchSnapshotResponse on_fetch_snapshot(const FetchSnapshotRequest& r, std::int64_t max_bytes,
                                          std::int64_t now_ms);

  // ---- answers to this node's requests (id from Outgoing) ----
  void on_vote_response(std::int64_t id, NodeId from, const VoteResponse& r, std::int64_t now_ms);
  void on_epoch_response(std::int64_t id, NodeId from, const EpochResponse& r, std::int64_t now_ms);
  FollowerStep on_fetch_response(std::int64_t id, NodeId from, const FetchResponse& r,
                                 std::int64_t now_ms);
  void on_fetch_snapshot_response(std::int64_t id, NodeId from, const FetchSnapshotResponse& r,
                                  std::int64_t now_ms);
  // The request got no answer: its connection failed (unreachable: refused or reset, so the
  // peer is gone rather than slow) or it timed out.
  void on_request_failed(std::int64_t id, NodeId to, bool unreachable, std::int64_t now_ms);

  // ---- the log ----
  // The driver appended a batch of `epoch` at base (a follower's fetched batch, or the leader's
  // own): keeps the epoch cache.
  void note_batch(std::int32_t epoch, std::int64_t base_offset);
  // The log's durable end moved (a sync finished): the leader's HW may move, a follower fetches.
  void on_log_durable(std::int64_t now_ms);

  // ---- the leader ----
  bool is_leader() const { return role_ == Role::leader; }
  // Proposals are accepted once the leader-change record is appended (it is the epoch's first).
  bool accepts_proposals() const { return is_leader() && leader_change_appended_; }
  void leader_change_appended(std::int64_t offset);
  // Steps down (controlled shutdown): EndQuorumEpoch to the others, most caught up first.
  void resign(std::int64_t now_ms);

  // ---- what it knows ----
  Role role() const { return role_; }
  bool is_voter() const { return voter_; }
  std::int32_t epoch() const { return state_.epoch; }
  NodeId leader() const { return state_.leader; }
  NodeId voted_for() const { return state_.voted_for; }
  const QuorumState& state() const { return state_; }
  // Committed: every record below is on a majority and will never change. On a follower, the
  // leader's HW capped by what this node holds durably; -1 while unknown.
  std::int64_t high_watermark() const { return high_watermark_; }
  std::int64_t epoch_start_offset() const { return epoch_start_offset_; }
  // The leader's view of every voter and observer that fetched in this epoch.
  std::vector<ReplicaProgress> progress(std::int64_t now_ms) const;
  const RaftOptions& options() const { return opts_; }

  Effects take_effects();
  bool has_effects() const {
    return effects_.persist || effects_.append_leader_change || !effects_.send.empty();
  }

 private:
  struct InFlight {
    NodeId to = -1;
    std::int64_t sent_ms = 0;
    Request request;
  };

  // raft.cc: roles and elections
  void become_unattached(std::int32_t epoch, std::int64_t now_ms);
  void become_prospective(std::int64_t now_ms);
  void become_candidate(std::int64_t now_ms);
  void become_leader(std::int64_t now_ms);
  void become_follower(std::int32_t epoch, NodeId leader, std::int64_t now_ms);
  void become_resigned(std::int64_t now_ms);
  void set_state(QuorumState s);
  bool observe_epoch(std::int32_t epoch, NodeId leader, std::int64_t now_ms);
  bool log_up_to_date(std::int32_t last_epoch, std::int64_t last_offset) const;
  std::int32_t last_epoch() const;
  std::int64_t random_ms(std::int64_t lo, std::int64_t hi);
  std::int64_t send(NodeId to, Request r, std::int64_t now_ms);
  void send_votes(bool pre_vote, std::int64_t now_ms);
  void count_vote(NodeId from, bool granted, std::int64_t now_ms);
  void lose_election(std::int64_t now_ms);
  std::size_t majority() const { return opts_.voters.size() / 2 + 1; }
  bool is_voter(NodeId id) const;
  void expire_requests(std::int64_t now_ms);

  // raft_replication.cc: fetches, the high watermark, snapshots
  void maybe_fetch(std::int64_t now_ms);
  NodeId fetch_target();
  void maybe_advance_hw();
  void update_follower_hw();
  void truncate(const FetchAnswer::Diverging& d);
  void send_begin_epochs(std::int64_t now_ms);
  void check_quorum(std::int64_t now_ms);
  std::optional<FetchAnswer::Diverging> diverging(std::int32_t last_fetched_epoch,
                                                  std::int64_t fetch_offset) const;

  RaftOptions opts_;
  ReplicaLog& log_;
  SnapshotStore& snapshots_;
  std::function<std::uint64_t()> random_;
  bool voter_ = false;
  QuorumState state_;
  Role role_ = Role::unattached;
  Effects effects_;
  std::int64_t next_id_ = 1;
  std::map<std::int64_t, InFlight> in_flight_;

  // Timers (absolute ms; INT64_MAX: off).
  std::int64_t election_deadline_ = INT64_MAX;
  std::int64_t fetch_deadline_ = INT64_MAX;  // follower: no successful fetch since
  std::int64_t check_quorum_deadline_ = INT64_MAX;
  std::int64_t begin_epoch_resend_ = INT64_MAX;

  // Elections
  std::set<NodeId> granted_;
  std::set<NodeId> rejected_;
  std::uint32_t lost_elections_ = 0;
  Role prospective_from_ = Role::unattached;  // where a lost pre-vote round returns to
  // A follower whose leader refused or reset its connection: it stands after a short random
  // wait instead of the whole fetch timeout, and grants pre-votes (KIP-996's "has lost its
  // leader") though it fetched recently.
  bool leader_unreachable_ = false;
  std::int64_t last_leader_contact_ms_ = -1;

  // Replication
  std::int64_t high_watermark_ = -1;
  std::int64_t leader_hw_ = -1;   // follower: the leader's, as last heard
  bool leader_answered_ = false;  // follower: a leader answered a fetch since the start
  // Follower: the end of the log prefix the leader confirmed matches its own (its fetch
  // offset, plus what it sent); the HW never passes it.
  std::int64_t matched_end_ = 0;
  std::int64_t epoch_start_offset_ = -1;
  bool leader_change_appended_ = false;
  std::map<NodeId, ReplicaProgress> replicas_;   // leader: voters and observers that fetched
  std::set<NodeId> heard_since_check_;           // leader: voters that fetched (check quorum)
  std::optional<std::int64_t> fetch_in_flight_;  // follower: request id
  std::int64_t fetch_backoff_until_ = 0;
  std::optional<std::int64_t> pending_truncation_;
  // Follower loading a snapshot from the leader.
  struct SnapshotFetch {
    SnapshotId id;
    std::int64_t position = 0;
    std::optional<std::int64_t> in_flight;
  };
  std::optional<SnapshotFetch> snapshot_fetch_;
  std::size_t bootstrap_index_ = 0;  // observer without a leader: which voter to ask
};

}  // namespace samsa::replication::quorum
