// replication::Partition — what a partition means on top of its io::Log: leadership and leader
// epoch, the high watermark consumers may read up to, the long polls waiting for data, and the
// idempotent producers' state (sequence checks, duplicates, snapshots).
// On a cluster node it also holds the replica's ReplicaState (leader and follower logic, HW).
// Owned by one reactor's Shard; every call happens on that reactor's thread.
#pragma once

#include <cstdint>
#include <expected>
#include <memory>
#include <optional>
#include <string>

#include "io/log.h"
#include "io/reactor.h"
#include "net/kafka/errors.h"
#include "replication/metadata_records.h"
#include "replication/producer_state.h"
#include "replication/replica_log.h"
#include "replication/replica_state.h"

namespace samsa::replication {

// A parked fetch (long poll) on this partition. Woken when the high watermark moves; with
// log_end (a follower's fetch, which reads above the HW) also when the log end moves.
struct PartitionWaiter {
  virtual void on_partition_advanced() = 0;
  PartitionWaiter* prev = nullptr;
  PartitionWaiter* next = nullptr;
  bool linked = false;
  bool log_end = false;

 protected:
  ~PartitionWaiter() = default;
};

// An acks=all produce of a replicated partition, appended and synced here, waiting until the ISR
// holds it (the high watermark passes last_offset). Intrusive: the produce request embeds it.
struct CommitWaiter {
  using Fn = void (*)(CommitWaiter* self, kafka::ErrorCode outcome);
  std::int64_t last_offset = -1;
  Fn fn = nullptr;
  CommitWaiter* prev = nullptr;
  CommitWaiter* next = nullptr;
  bool linked = false;
};

// Why an append was refused, as the Produce response carries it.
struct AppendError {
  kafka::ErrorCode code = kafka::ErrorCode::none;
  std::string message;
  std::optional<io::Errc> log_error;  // set when the log refused the batch
  // Kafka reports the log start offset with errors found after it looked at the log
  // (sequence, epoch and timestamp checks); -1 with framing errors.
  std::int64_t log_start_offset = -1;
};

// The Kafka error for a log error (Produce and friends).
kafka::ErrorCode kafka_error_of(io::Errc e);

struct PartitionOptions {
  // producer.id.expiration.ms: producers silent this long are forgotten.
  std::int64_t producer_expiration_ms = 86'400'000;
  // Test-only (samsa.testing.producer.sequence.check=false with samsa.testing.hooks=true):
  // no duplicate detection and no sequence or epoch checks, so a test can show the duplicates
  // retries would store without them.
  bool sequence_check = true;
};

class Partition final : private io::Log::Listener {
 public:
  // Rebuilds the producer state from the newest usable snapshot plus the log after it.
  Partition(io::Reactor& r, std::string topic, Uuid topic_id, std::int32_t index,
            std::int32_t leader_epoch, std::unique_ptr<io::Log> log, PartitionOptions opts = {});
  ~Partition();

  const std::string& topic() const { return topic_; }
  const Uuid& topic_id() const { return topic_id_; }
  std::int32_t index() const { return index_; }
  std::int32_t leader_epoch() const { return leader_epoch_; }
  void set_leader_epoch(std::int32_t e) { leader_epoch_ = e; }
  // Whether this node leads the partition (a cluster's follower replicas are open but serve no
  // clients). Always true on a single node.
  bool leader_here() const { return leader_here_; }
  void set_leader_here(bool b) { leader_here_ = b; }
  io::Log& log() { return *log_; }
  const io::Log& log() const { return *log_; }
  void set_options(const PartitionOptions& o) { opts_ = o; }

  // Leader append of a producer's batch (offsets assigned by the log). An idempotent
  // producer's batch is checked against its sequence and epoch first; a duplicate of one of
  // its last five batches is not stored again: op->result gets the original offsets and
  // op->done runs once those are written (acks=1) or durable (acks=all), like a fresh append.
  std::expected<io::AppendResult, AppendError> append(io::AppendOp* op);
  // Follower append of batches copied from the leader (offsets kept, io::Log::append_replicated),
  // recording their producers as the leader did, so this replica removes duplicates once it
  // leads.
  io::Result<io::AppendResult> append_replicated(io::AppendOp* op);

  // Consumers read below this. A single replica's high watermark is its durable end: nothing
  // a consumer has seen can vanish in a power cut. With replica_hw, the ReplicaState's.
  std::int64_t high_watermark() const { return high_watermark_; }

  // A cluster replica: its replication state machine over this log (made once, on the first
  // metadata that names this node a replica). replica_hw: the high watermark is the
  // ReplicaState's (the ISR's durable end) instead of this log's durable end: on wherever the
  // follower fetchers and the ISR keeper run (cluster brokers), without which an RF>1 HW would
  // never move.
  void enable_replica(const ReplicaOptions& o, bool replica_hw);
  ReplicaState* replica() { return replica_.get(); }
  const ReplicaState* replica() const { return replica_.get(); }
  // The replica's state may have moved the HW (a follower's fetch, new metadata, a fetched
  // answer): publish it and wake the long polls.
  void update_high_watermark();
  std::int64_t log_start_offset() const { return log_->log_start_offset(); }
  // Last stable offset: equal to the high watermark until transactions exist.
  std::int64_t last_stable_offset() const { return high_watermark_; }

  void add_waiter(PartitionWaiter* w);
  void remove_waiter(PartitionWaiter* w);

  // Whether acks=all waits for the ISR here (a cluster replica whose HW is the ISR's).
  bool replicated() const { return replica_hw_ && replica_ != nullptr; }
  // acks=all, before appending: NOT_LEADER_OR_FOLLOWER, or NOT_ENOUGH_REPLICAS while the ISR
  // is below min.insync.replicas; none on a partition that is not replicated().
  kafka::ErrorCode check_acks_all() const;
  // acks=all, after the local sync: w->fn runs once the ISR holds w->last_offset (none),
  // the ISR shrank below min.insync.replicas meanwhile (NOT_ENOUGH_REPLICAS_AFTER_APPEND), or
  // leadership was lost or the partition closed (NOT_LEADER_OR_FOLLOWER); at once when the
  // outcome is already known.
  void wait_committed(CommitWaiter* w);
  // Takes w back without calling it (the request timed out).
  void cancel_commit_wait(CommitWaiter* w);
  // Answers every waiting acks=all produce with NOT_LEADER_OR_FOLLOWER (shutdown): the client
  // retries at the next leader, where an idempotent producer's retry is deduplicated.
  void release_commit_waiters() { settle_commit_waiters(true); }

  const ProducerStateTable& producers() const { return producers_; }
  // Batches refused because they repeated a producer's id, epoch and sequences with other
  // contents (two producers given one id: acknowledging them would have lost their records).
  std::uint64_t duplicate_mismatches() const { return duplicate_mismatches_; }
  // Forgets producers silent for producer.id.expiration.ms and those wholly below the log
  // start (retention, DeleteRecords). Returns how many producers were removed.
  std::size_t expire_producers(std::int64_t now_ms);

  // Closes the log cleanly (index files written, synced) and writes a producer snapshot at the
  // log end, so the next start replays nothing.
  io::Result<void> close();

 private:
  void on_log_advanced(io::Log& log) override;
  void on_log_rolled(io::Log& log, std::int64_t new_base) override;
  void load_producer_state();
  static void wake_all(PartitionWaiter*& head);
  void write_snapshot(std::int64_t offset);
  void complete_duplicates();
  // Whether a batch matching stored's producer, epoch and sequences has its contents too.
  bool is_retry_of(const ProducerBatch& stored, const io::BatchInfo& retry,
                   std::span<std::byte> retry_bytes) const;
  // Calls the commit waiters whose outcome is known (oldest first); all of them with
  // not_leader_or_follower when close is set.
  void settle_commit_waiters(bool close = false);

  io::Reactor& reactor_;
  std::string topic_;
  Uuid topic_id_;
  std::int32_t index_;
  std::int32_t leader_epoch_;
  bool leader_here_ = true;
  std::unique_ptr<io::Log> log_;
  PartitionOptions opts_;
  std::int64_t high_watermark_ = 0;
  std::unique_ptr<IoReplicaLog> replica_log_;
  std::unique_ptr<ReplicaState> replica_;
  bool replica_hw_ = false;
  PartitionWaiter* waiters_ = nullptr;
  PartitionWaiter* log_waiters_ = nullptr;  // log_end waiters
  CommitWaiter* commit_head_ = nullptr;     // ordered by last_offset
  CommitWaiter* commit_tail_ = nullptr;
  std::int64_t log_woken_end_ = -1;  // the written end log_waiters_ last saw
  ProducerStateTable producers_;
  std::uint64_t duplicate_mismatches_ = 0;
  // Duplicate batches waiting for their originals to be written/durable (AppendOp::next).
  io::AppendOp* dup_head_ = nullptr;
  struct DupTimer : io::Timer {
    Partition* owner = nullptr;
  } dup_timer_;
};

}  // namespace samsa::replication
