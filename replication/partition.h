// replication::Partition — what a partition means on top of its io::Log: leadership and leader
// epoch, the high watermark consumers may read up to, the long polls waiting for data, and the
// idempotent producers' state (sequence checks, duplicates, snapshots).
// On a cluster node it also holds the replica's ReplicaState (leader and follower logic, HW).
// Owned by one reactor's Shard; every call happens on that reactor's thread.
#pragma once

#include <cstdint>
#include <expected>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "base/kafka_errors.h"
#include "io/log.h"
#include "io/reactor.h"
#include "io/record_batch.h"
#include "replication/metadata_records.h"
#include "replication/producer_state.h"
#include "replication/replica_log.h"
#include "replication/replica_state.h"
#include "replication/txn_state.h"

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

// The Kafka error for a log error: every Kafka-facing call maps storage errors here.
kafka::ErrorCode kafka_error_of(io::Errc e);

class Partition;

// Who wrote a batch a leader appends: what it may hold and which producer checks apply.
enum class AppendOrigin : std::uint8_t {
  client,       // a Produce: no control batches; idempotent and transactional checks
  coordinator,  // the group coordinator's records (TxnOffsetCommit: transactional, no sequences)
  marker,       // WriteTxnMarkers: one control batch ending a producer's transaction
};

// One partition's batch of a Produce request. The caller embeds it (no allocation per
// partition) and keeps it and the batch bytes alive until `produced` runs, exactly once, on
// the partition's reactor (possibly inside Partition::produce, for an immediate refusal).
struct ProduceOp : io::AppendOp {
  using Fn = void (*)(ProduceOp* self);
  // 0 and 1: answered once the batch is written; -1 (all): once it is synced and, on a
  // replicated partition, held by the ISR (at least min.insync.replicas of it).
  std::int16_t acks = 1;
  AppendOrigin origin = AppendOrigin::client;
  // The token begin_verification gave for this batch once the coordinator confirmed it (0:
  // not verified).
  std::uint64_t verification = 0;
  // acks=all waiting for the ISR gets REQUEST_TIMED_OUT at this time (mono_ns), as from
  // Kafka's produce purgatory (the records may still commit).
  std::int64_t deadline_ns = 0;
  Fn produced = nullptr;
  // The outcome: error none and io::AppendOp::result, or the error, its message and the log
  // start offset the answer reports with it (-1 when the log was not looked at).
  kafka::ErrorCode error = kafka::ErrorCode::none;
  std::string message;
  std::int64_t error_log_start = -1;
  std::optional<io::Errc> log_error;  // set when the log refused or failed the batch

 private:
  friend class Partition;
  Partition* partition_ = nullptr;
  struct Commit : CommitWaiter {
    ProduceOp* op = nullptr;
  } commit_;
  struct Deadline : io::Timer {
    ProduceOp* op = nullptr;
  } deadline_;
};

// What a Fetch asks of one partition (a consumer's, or with replica a follower's).
struct ReadArgs {
  std::int64_t offset = 0;
  std::int32_t max_bytes = 0;
  bool read_committed = false;  // isolation_level 1: up to the last stable offset
  // A follower's fetch: recorded by the leader's ReplicaState (its fetch offset may move the
  // HW), read up to the log end (the follower needs records above the HW for the HW to pass
  // them), or answered with the diverging epoch instead of records.
  const ReplicaFetch* replica = nullptr;
  bool refuse_replicas = false;  // stopping: followers are sent elsewhere
};

// What Partition::read found. On error the offsets are still filled in where known.
struct ReadOutcome {
  kafka::ErrorCode error = kafka::ErrorCode::none;
  std::int64_t high_watermark = -1;
  std::int64_t last_stable = -1;
  std::int64_t log_start = -1;
  std::int64_t log_end_seen = -1;  // a follower's read: the written end it was answered from
  std::optional<io::LeaderEpochCache::EpochEnd> diverging;
  std::vector<io::Slice> slices;
  // read_committed: the aborted transactions the records returned overlap.
  std::vector<io::AbortedTxn> aborted;
  std::size_t bytes = 0;
};

// ListOffsets' answer for one partition. ready false: the bytes it needs are not in memory
// (fill the ReadAhead with Partition::fill, then ask again).
struct OffsetAnswer {
  bool ready = true;
  kafka::ErrorCode error = kafka::ErrorCode::none;
  std::int64_t offset = -1;
  std::int64_t timestamp = -1;
  std::int32_t leader_epoch = -1;
};

// ListOffsets' special timestamps (Kafka's ListOffsetsRequest).
inline constexpr std::int64_t kLatestOffset = -1;
inline constexpr std::int64_t kEarliestOffset = -2;
inline constexpr std::int64_t kMaxTimestampOffset = -3;
inline constexpr std::int64_t kEarliestLocalOffset = -4;
inline constexpr std::int64_t kLatestTieredOffset = -5;

struct PartitionOptions {
  // producer.id.expiration.ms: producers silent this long are forgotten.
  std::int64_t producer_expiration_ms = 86'400'000;
  // Test-only (samsa.testing.producer.sequence.check=false with samsa.testing.hooks=true):
  // no duplicate detection and no sequence or epoch checks, so a test can show the duplicates
  // retries would store without them.
  bool sequence_check = true;
  // transaction.partition.verification.enable (KIP-890): a producer's first transactional
  // batch of a transaction here is taken only once the transaction coordinator said the
  // partition is in the transaction (begin_verification, ProduceOp::verification), so a late
  // batch of a transaction that already ended cannot open one nobody will ever end.
  bool txn_verification = true;
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

  // ---- the Kafka-facing calls (handlers decode, call these, encode) ----
  // A client's batch: the acks check (NOT_ENOUGH_REPLICAS before anything is stored), the
  // idempotent producer's checks, the append, and for acks=all the sync and the wait for the
  // ISR with its deadline. op->produced runs once with the outcome.
  void produce(ProduceOp* op);
  // Reads whole batches from args.offset up to what the reader may see: the high watermark,
  // the last stable offset (read_committed), or a follower's log end. Checks the offset range
  // (OFFSET_OUT_OF_RANGE) and, for a follower, its epoch (a diverging epoch instead of
  // records). With ra, nothing is read from a file here: false means the bytes are not in
  // memory (fill ra with fill(), then read again); without ra, headers are read with pread.
  bool read(const ReadArgs& args, ReadOutcome& out, io::ReadAhead* ra);
  void fill(io::ReadAhead& ra, std::function<void(std::optional<std::string>)> done);
  // Whether what a read saw has moved since (a long poll need not wait): the HW, or for a
  // follower's read the log end.
  bool moved_since(const ReadOutcome& seen, bool replica) const;
  // ListOffsets: the special timestamps above, or the first record at or after timestamp
  // (below the HW, or the last stable offset with read_committed).
  OffsetAnswer list_offset(std::int64_t timestamp, bool read_committed, io::ReadAhead* ra);
  // DeleteRecords: raises the log start to offset (-1: the high watermark).
  std::expected<std::int64_t, kafka::ErrorCode> delete_records(std::int64_t offset);
  // OffsetForLeaderEpoch: where epoch ended in this log (or the largest epoch below it).
  io::LeaderEpochCache::EpochEnd end_offset_for(std::int32_t epoch);
  const std::filesystem::path& dir() const { return log_->dir(); }
  std::uint64_t size_bytes() const { return log_->size_bytes(); }

  // Leader append of a producer's batch (offsets assigned by the log), used by produce() and by
  // the group coordinator's own appends. An idempotent
  // producer's batch is checked against its sequence and epoch first; a duplicate of one of
  // its last five batches is not stored again: op->result gets the original offsets and
  // op->done runs once those are written (acks=1) or durable (acks=all), like a fresh append.
  std::expected<io::AppendResult, AppendError> append(io::AppendOp* op,
                                                      AppendOrigin origin = AppendOrigin::client,
                                                      std::uint64_t verification = 0);
  // KIP-890. needs_verification: a client's transactional batch that would open a
  // transaction here (its producer has none open at the batch's epoch) must first have the
  // coordinator's word: with add (transaction version 2: Produce v12+, whose clients send no
  // AddPartitionsToTxn) always, the coordinator then adding the partition; otherwise when
  // verification is on, the coordinator confirming it. begin_verification records a guard for
  // the producer and returns its token; ask the coordinator, and on yes produce with
  // ProduceOp::verification = token. A marker for the producer drops its guard: a
  // verification from before the transaction ended admits nothing after it, except a version
  // 2 guard at the marker's own epoch (the previous transaction's marker, bumped to the epoch
  // the next one already uses, landing while the next one's add is in flight).
  // end_verification: the coordinator answered for a batch begin_verification counted (call
  // it before producing the batch). While answers are pending, the producer's later batches
  // need the same round trip, so they cannot overtake the earlier ones.
  bool needs_verification(const io::BatchInfo& b, bool add = false) const;
  std::uint64_t begin_verification(std::int64_t producer_id, std::int16_t epoch, bool add = false);
  void end_verification(std::int64_t producer_id, std::uint64_t token);
  // Follower append of batches copied from the leader (offsets kept, io::Log::append_replicated),
  // recording their producers as the leader did (so this replica removes duplicates once it
  // leads) and their epochs in the ReplicaState, in one walk over the batch headers.
  io::Result<io::AppendResult> append_replicated(io::AppendOp* op);
  // ---- what the cluster tells the replica (each may move the high watermark) ----
  // New metadata for this partition (leader, ISR, epochs).
  void apply_metadata(const PartitionState& p, std::int64_t now_ms);
  // A follower's fetch answer from its leader.
  FollowerStep on_fetch_response(const FollowerFetchResponse& r, std::int64_t now_ms);
  // The controller's answer to this leader's AlterPartition.
  void on_alter_partition_answer(const AlterPartitionAnswer& a, std::int64_t now_ms);

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
  std::int64_t log_start_offset() const { return log_->log_start_offset(); }
  // Last stable offset: below the first transaction still open (or closed by a marker the high
  // watermark has not passed), at most the high watermark. read_committed reads below it.
  std::int64_t last_stable_offset() const { return txns_.last_stable(high_watermark_); }
  const PartitionTxns& txns() const { return txns_; }

  void add_waiter(PartitionWaiter* w);
  void remove_waiter(PartitionWaiter* w);

  // Whether acks=all waits for the ISR here (a cluster replica whose HW is the ISR's).
  bool replicated() const { return replica_hw_ && replica_ != nullptr; }
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
  // After a truncation: the producers and transactions as of the new log end.
  void rebuild_producer_state();
  // An appended, replicated or replayed batch of a producer: its state, and the transaction it
  // opens. A control batch (bytes: the whole batch) closes one instead.
  void note_producer_batch(const io::BatchInfo& b, std::int64_t first, std::int64_t last,
                           std::span<const std::byte> bytes);
  void note_marker(const io::BatchInfo& b, const io::batch::TxnMarker& m, std::int64_t offset);
  // The marker of a control batch the log holds (read from its file: replay only).
  std::optional<io::batch::TxnMarker> read_marker(const io::BatchInfo& b) const;
  // A leader append's producer checks (AppendOrigin decides which): false to go ahead, true
  // for a duplicate (queued, answered as its original), or why the batch is refused.
  std::expected<bool, AppendError> check_producer(io::AppendOp* op, const io::BatchInfo& info,
                                                  AppendOrigin origin, std::uint64_t verification);
  static void wake_all(PartitionWaiter*& head);
  void write_snapshot(std::int64_t offset, bool sync = true);
  void complete_duplicates();
  // The replica's state may have moved the HW (a follower's fetch, new metadata, a fetched
  // answer): publish it and wake the long polls. The HW never moves back on a leader.
  void update_high_watermark();
  // acks=all, before appending: NOT_LEADER_OR_FOLLOWER, or NOT_ENOUGH_REPLICAS while the ISR
  // is below min.insync.replicas; none on a partition that is not replicated().
  kafka::ErrorCode check_acks_all() const;
  // acks=all, after the local sync: w->fn runs once the ISR holds w->last_offset (none),
  // the ISR shrank below min.insync.replicas meanwhile (NOT_ENOUGH_REPLICAS_AFTER_APPEND), or
  // leadership was lost or the partition closed (NOT_LEADER_OR_FOLLOWER); at once when the
  // outcome is already known. Waiters are kept in offset order.
  void wait_committed(CommitWaiter* w);
  // Takes w back without calling it (the request timed out).
  void cancel_commit_wait(CommitWaiter* w);
  static void on_produce_written(io::AppendOp* op);
  static void on_produce_committed(CommitWaiter* w, kafka::ErrorCode outcome);
  static void on_produce_deadline(io::Timer* t);
  // The records a read may return stop below this (HW, LSO or a follower's log end), or an
  // error; fills the outcome's offsets.
  std::int64_t read_limit(const ReadArgs& args, ReadOutcome& out);
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
  std::int32_t hw_epoch_ = -1;  // the leader epoch high_watermark_ was published in (-1: following)
  std::unique_ptr<IoReplicaLog> replica_log_;
  std::unique_ptr<ReplicaState> replica_;
  bool replica_hw_ = false;
  PartitionWaiter* waiters_ = nullptr;
  PartitionWaiter* log_waiters_ = nullptr;  // log_end waiters
  CommitWaiter* commit_head_ = nullptr;     // ordered by last_offset
  CommitWaiter* commit_tail_ = nullptr;
  std::int64_t log_woken_end_ = -1;  // the written end log_waiters_ last saw
  ProducerStateTable producers_;
  PartitionTxns txns_;
  struct VerificationGuard {
    std::uint64_t token = 0;
    std::int16_t epoch = -1;
    std::uint32_t pending = 0;  // batches waiting for the coordinator's answer
    bool add = false;           // transaction version 2
  };
  std::unordered_map<std::int64_t, VerificationGuard> verified_;
  std::uint64_t next_verification_ = 0;
  std::uint64_t duplicate_mismatches_ = 0;
  std::int64_t last_snapshot_ = -1;  // offset of the newest producer snapshot on disk, -1: none
  // Duplicate batches waiting for their originals to be written/durable (AppendOp::next).
  io::AppendOp* dup_head_ = nullptr;
  struct DupTimer : io::Timer {
    Partition* owner = nullptr;
  } dup_timer_;
};

}  // namespace samsa::replication
