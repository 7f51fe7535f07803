// replication::ReplicaState — one partition replica's replication state machine, leader side and
// follower side, with no I/O of its own: time comes in as arguments, the log is reached through
// ReplicaLog, and everything to send (fetches, AlterPartition proposals, answers) goes out as
// return values the driver (the daemon's reactor, or the simulation test) delivers.
//
// Leader: tracks each follower's fetch offset (its *durable* end: a follower fetches again only
// after its group commit synced), keeps the ISR (replica.lag.time.max.ms), and advances the high
// watermark to the lowest durable offset across the maximal ISR (the committed ISR plus a member
// whose addition is in flight; a removal counts only once committed), so an acknowledged acks=all
// record is on disk on every ISR member. ISR changes go to the controller as AlterPartition
// proposals carrying the leader and partition epochs, one at a time.
// Follower: says what to fetch next, appends nothing itself (the driver does), and truncates a
// diverged tail from the leader's diverging-epoch answer until its log is a prefix of the
// leader's.
//
// Owned by the partition's reactor; every call happens on that thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "base/kafka_errors.h"
#include "replication/metadata_image.h"
#include "replication/replica_log.h"

namespace samsa::replication {

struct ReplicaOptions {
  std::int32_t broker_id = -1;
  // replica.lag.time.max.ms: a follower that has not caught up with the leader's log end for
  // this long leaves the ISR. (Kafka's default.)
  std::int64_t replica_lag_time_max_ms = 30000;
  // min.insync.replicas of the topic.
  std::int32_t min_insync_replicas = 1;
  // An AlterPartition proposal unanswered this long is sent again (the controller answers a
  // repeat it already applied with INVALID_UPDATE_VERSION; the metadata then brings the change).
  std::int64_t alter_partition_retry_ms = 1000;
  // A follower's fetch unanswered this long is given up and sent again.
  std::int64_t fetch_timeout_ms = 1000;
  // Test-only: the high watermark follows the leader's own durable end alone, ignoring the ISR
  // (the simulation test's broken variant, which must lose acknowledged records).
  bool testing_hw_leader_only = false;
  // Test-only: a follower fetches again without waiting for its sync, so its fetch offset is
  // its log end (Kafka's followers, acknowledging from memory): a power cut of every replica
  // then loses acknowledged records.
  bool testing_fetch_from_memory = false;
};

enum class ReplicaRole : std::uint8_t { none, leader, follower };

// A follower's Fetch as the leader sees it (FetchRequest ReplicaState + the partition fields).
struct ReplicaFetch {
  std::int32_t replica_id = -1;
  std::int64_t broker_epoch = -1;          // ReplicaState.ReplicaEpoch
  std::int32_t current_leader_epoch = -1;  // CurrentLeaderEpoch
  std::int64_t fetch_offset = 0;           // FetchOffset: the follower's durable end
  std::int32_t last_fetched_epoch = -1;    // LastFetchedEpoch (-1: empty log)
  std::int64_t log_start_offset = -1;      // LogStartOffset (-1: not told)
};

// The leader's answer to a ReplicaFetch. With diverging set the answer carries no records; with
// error none and no divergence the driver sends the records from fetch_offset on.
struct ReplicaFetchAnswer {
  kafka::ErrorCode error = kafka::ErrorCode::none;
  std::optional<io::LeaderEpochCache::EpochEnd> diverging;  // DivergingEpoch
  std::int64_t high_watermark = -1;
  std::int64_t log_start_offset = -1;
};

// What a follower sends (the driver adds the fetch session and sizes).
struct FollowerFetchRequest {
  std::int64_t request_id = 0;  // matches the answer to its request
  std::int32_t leader_id = -1;
  ReplicaFetch fetch;
};

// The leader's answer as the follower received it. records_base/records_end: the offsets of
// the batches the response carries (end = base when it carries none).
struct FollowerFetchResponse {
  std::int64_t request_id = 0;
  ReplicaFetchAnswer answer;
  std::int64_t records_base = -1;
  std::int64_t records_end = -1;
};

// What the follower's driver does with a response.
enum class FollowerStep : std::uint8_t {
  ignore,    // stale, or an error: nothing to do (the next fetch goes out when allowed)
  append,    // append the response's batches at records_base (>= the log end: a compacted
             // leader's answer may start past it), then call
             // note_replicated_batch for each and fetch again once they are durable
  truncated  // the log was truncated to a prefix of the leader's; fetch again
};

struct IsrMember {
  std::int32_t broker_id = -1;
  std::int64_t broker_epoch = -1;
  bool operator==(const IsrMember&) const = default;
};

// AlterPartition for one partition (the leader fills the request's BrokerId/BrokerEpoch).
struct AlterPartitionProposal {
  std::int64_t request_id = 0;  // the driver's correlation with the answer
  std::int32_t leader_epoch = -1;
  std::int32_t partition_epoch = -1;
  std::vector<IsrMember> new_isr;
};

// The controller's answer for the partition (AlterPartitionResponse PartitionData).
struct AlterPartitionAnswer {
  std::int64_t request_id = 0;
  kafka::ErrorCode error = kafka::ErrorCode::none;
  std::int32_t leader_id = -1;
  std::int32_t leader_epoch = -1;
  std::vector<std::int32_t> isr;
  std::int32_t partition_epoch = -1;
};

class ReplicaState {
 public:
  ReplicaState(ReplicaOptions opts, ReplicaLog& log) : opts_(opts), log_(log) {}

  // Applies the partition as the metadata now says (PartitionRecord / PartitionChangeRecord):
  // become leader or follower on a new leader epoch, take a new ISR at the same leader epoch, or
  // stop (not a replica, or no leader). Metadata older than what was applied is ignored.
  void apply_metadata(const PartitionState& p, std::int64_t now_ms);
  void set_min_insync_replicas(std::int32_t n) { opts_.min_insync_replicas = n; }
  // This broker's registration epoch (sent in fetches and in its own ISR entry).
  void set_broker_epoch(std::int64_t e) { broker_epoch_ = e; }

  ReplicaRole role() const { return role_; }
  std::int32_t leader_id() const { return leader_id_; }
  std::int32_t leader_epoch() const { return leader_epoch_; }
  std::int32_t partition_epoch() const { return partition_epoch_; }
  const std::vector<std::int32_t>& isr() const { return isr_; }
  const std::vector<std::int32_t>& replicas() const { return replicas_; }
  std::int32_t min_insync_replicas() const { return opts_.min_insync_replicas; }
  // The committed ISR is smaller than min.insync.replicas (capped at the replica count).
  bool under_min_isr() const;
  // The committed ISR plus a member whose addition is in flight (what the HW waits for).
  const std::vector<std::int32_t>& maximal_isr() const { return maximal_isr_; }
  // Where this leadership began (the log end when it became leader).
  std::int64_t epoch_start_offset() const { return epoch_start_offset_; }

  // ---- leader ----
  // A follower's fetch: fenced/unknown epochs and diverged logs are answered without counting
  // the offset; otherwise the follower's fetch offset is recorded and the HW may move.
  ReplicaFetchAnswer on_replica_fetch(const ReplicaFetch& f, std::int64_t now_ms);
  // A consumer's (or producer's) CurrentLeaderEpoch against this leadership (KIP-320): -1 is
  // not checked; older is fenced_leader_epoch, newer unknown_leader_epoch.
  kafka::ErrorCode check_leader_epoch(std::int32_t current_leader_epoch) const;
  // The leader's own log advanced (durable end moved): the HW may move.
  void on_log_advanced();
  // The replica's high watermark (leader: lowest durable offset across the maximal ISR, never
  // moving back; follower: the leader's HW capped by its own durable end).
  std::int64_t high_watermark() const { return high_watermark_; }
  // What consumers may be told (KIP-207): nullopt while a new leader's HW is still below the
  // start of its epoch (it may lag behind the HW its predecessor served), so a consumer never
  // sees the HW go back; answer OFFSET_NOT_AVAILABLE / retry meanwhile.
  std::optional<std::int64_t> visible_high_watermark() const;
  // Whether a produce may be appended now: not_leader_or_follower, or (acks=all)
  // not_enough_replicas while the ISR is below min.insync.replicas.
  kafka::ErrorCode check_produce(bool acks_all) const;
  // An acks=all append ending at last_offset: nullopt while it waits for the HW; none once the
  // ISR holds it; not_enough_replicas_after_append when the HW reached it with the ISR below
  // min.insync.replicas; not_leader_or_follower once leadership is lost.
  std::optional<kafka::ErrorCode> acks_all_outcome(std::int64_t last_offset) const;
  // ISR maintenance, called every few hundred ms and after fetches: a proposal to send to the
  // controller when a follower fell behind for replica.lag.time.max.ms or caught up, and none is
  // in flight (or the one in flight is due for a retry). brokers: the registrations (a member
  // joins only while registered with the epoch it fetched with, unfenced, not shutting down).
  std::optional<AlterPartitionProposal> poll_isr(
      std::int64_t now_ms, const std::map<std::int32_t, BrokerState>& brokers);
  void on_alter_partition_answer(const AlterPartitionAnswer& a, std::int64_t now_ms);

  // ---- follower ----
  // The next fetch to send to the leader, or nullopt: one is in flight, the log has unsynced
  // batches (the fetch offset must be durable), or a truncation is waiting for the log to go
  // idle (call again later).
  std::optional<FollowerFetchRequest> next_fetch(std::int64_t now_ms);
  FollowerStep on_fetch_response(const FollowerFetchResponse& r, std::int64_t now_ms);
  // The fetch in flight will get no answer (its connection closed): next_fetch may send a new
  // one at once instead of after fetch_timeout_ms. A late answer to it is then ignored.
  void abandon_fetch() { in_flight_.reset(); }
  // The driver appended a replicated batch of `epoch` at base_offset (keeps the epoch cache).
  void note_replicated_batch(std::int32_t epoch, std::int64_t base_offset);
  // The follower has fetched without divergence in this epoch: its log is a prefix of the
  // leader's from here on.
  bool truncation_done() const { return truncation_done_; }

  struct FollowerInfo {
    std::int64_t fetch_offset = -1;  // -1: not fetched in this leader epoch
    std::int64_t broker_epoch = -1;
    std::int64_t last_caught_up_ms = 0;
    std::int64_t last_fetch_ms = 0;
    std::int64_t last_fetch_leader_end = -1;
    // The follower's log start (KIP-392: a consumer is sent only to a replica holding its offset).
    std::int64_t log_start_offset = -1;
  };
  const std::map<std::int32_t, FollowerInfo>& followers() const { return followers_; }
  // Follower: when the fetch in flight was sent (nullopt: none), and a truncation waiting for
  // the log to go idle (what an operator needs to see why a follower does not fetch).
  std::optional<std::int64_t> fetch_sent_ms() const {
    return in_flight_ ? std::optional<std::int64_t>(in_flight_sent_ms_) : std::nullopt;
  }
  std::optional<std::int64_t> pending_truncation() const { return pending_truncation_; }

 private:
  void become_leader(const PartitionState& p, std::int64_t now_ms);
  // The followers tracked are the replicas' (a reassignment adds and removes some while the
  // leadership stays): new ones start unknown and out of the ISR.
  void track_replicas();
  void become_follower(const PartitionState& p);
  void stop();
  void set_isr(std::vector<std::int32_t> isr, std::int32_t partition_epoch);
  void recompute_maximal_isr();
  void maybe_advance_hw();
  bool in_isr(std::int32_t id) const;

  ReplicaOptions opts_;
  ReplicaLog& log_;
  ReplicaRole role_ = ReplicaRole::none;
  std::int32_t leader_id_ = -1;
  std::int32_t leader_epoch_ = -1;
  std::int32_t partition_epoch_ = -1;
  std::vector<std::int32_t> replicas_;
  std::vector<std::int32_t> isr_;
  std::vector<std::int32_t> maximal_isr_;
  std::int64_t high_watermark_ = 0;
  std::int64_t epoch_start_offset_ = 0;
  std::int64_t broker_epoch_ = -1;
  // Leader
  std::map<std::int32_t, FollowerInfo> followers_;
  struct Pending {
    AlterPartitionProposal proposal;
    std::int64_t sent_ms = 0;
    // The controller refused it without saying whether an earlier copy was applied: keep the
    // maximal ISR until the metadata brings the partition's next epoch.
    bool answered = false;
  };
  std::int64_t next_proposal_id_ = 1;
  std::optional<Pending> pending_;
  // Follower
  std::int64_t next_request_id_ = 1;
  std::optional<std::int64_t> in_flight_;  // request id
  std::int64_t in_flight_sent_ms_ = 0;
  std::optional<std::int64_t> pending_truncation_;
  bool truncation_done_ = false;
};

}  // namespace samsa::replication
