#include "replication/partition.h"

#include <unistd.h>

#include <cinttypes>

#include "base/assert.h"
#include "base/bytes.h"
#include "base/clock.h"
#include "base/log.h"
#include "io/leader_epoch.h"
#include "io/offload.h"
#include "io/producer_snapshot.h"
#include "io/record_batch.h"
#include "io/segment.h"

namespace samsa::replication {

using kafka::ErrorCode;

ErrorCode kafka_error_of(io::Errc e) {
  switch (e) {
    case io::Errc::corrupt_batch:
    case io::Errc::invalid_length:
    case io::Errc::invalid_record_count:
      return ErrorCode::corrupt_message;
    case io::Errc::invalid_magic:
    case io::Errc::invalid_record:
      return ErrorCode::invalid_record;
    case io::Errc::batch_too_large:
      return ErrorCode::message_too_large;
    case io::Errc::invalid_timestamp:
      return ErrorCode::invalid_timestamp;
    case io::Errc::fenced:
    case io::Errc::io_error:
      return ErrorCode::kafka_storage_error;
    case io::Errc::offset_out_of_range:
      return ErrorCode::offset_out_of_range;
    case io::Errc::busy:
    case io::Errc::would_block:
    case io::Errc::not_found:
      break;
  }
  return ErrorCode::unknown_server_error;
}

Partition::Partition(io::Reactor& r, std::string topic, Uuid topic_id, std::int32_t index,
                     std::int32_t leader_epoch, std::unique_ptr<io::Log> log, PartitionOptions opts)
    : reactor_(r),
      topic_(std::move(topic)),
      topic_id_(topic_id),
      index_(index),
      leader_epoch_(leader_epoch),
      log_(std::move(log)),
      opts_(opts),
      txns_(log_->dir(), topic_ + "-" + std::to_string(index_)) {
  high_watermark_ = log_->durable_end_offset();
  // Duplicates whose originals are already durable answer on the next loop turn, never inside
  // append() itself (its caller is still filling in the op).
  dup_timer_.fn = [](io::Timer* t) { static_cast<DupTimer*>(t)->owner->complete_duplicates(); };
  dup_timer_.owner = this;
  load_producer_state();
  log_->set_listener(this);
}

Partition::~Partition() {
  log_->set_listener(nullptr);
  settle_commit_waiters(true);
  if (dup_timer_.armed()) reactor_.disarm(&dup_timer_);
  // Duplicates still waiting for their originals: the partition is going away (topic deleted,
  // shutdown); they fail like the appends the log drops.
  while (io::AppendOp* op = dup_head_) {
    dup_head_ = op->next;
    op->next = nullptr;
    op->error = io::Error{io::Errc::fenced, topic_ + "-" + std::to_string(index_) + " closed"};
    op->done(op);
  }
  // Parked fetches must not keep pointing here; wake them so they re-resolve the partition.
  while (PartitionWaiter* w = waiters_) {
    remove_waiter(w);
    w->on_partition_advanced();
  }
}

// ---------------------------------------------------------------------------------------------
// Producer state: rebuilt at open from the newest snapshot at or below the log end plus the
// batches after it (never by rescanning the whole log when a snapshot exists: one is written
// at every roll and at a clean close that finds the log moved).

void Partition::load_producer_state() {
  last_snapshot_ = -1;
  const auto& dir = log_->dir();
  const std::int64_t end = log_->log_end_offset();
  const std::int64_t start = log_->log_start_offset();
  std::int64_t from = start;
  auto offsets = io::list_producer_snapshots(dir);
  // Snapshots above the log end describe batches a crash took back.
  while (!offsets.empty() && offsets.back() > end) {
    ::unlink(io::producer_snapshot_path(dir, offsets.back()).c_str());
    offsets.pop_back();
  }
  while (!offsets.empty()) {
    const std::int64_t at = offsets.back();
    auto entries = io::read_producer_snapshot(io::producer_snapshot_path(dir, at));
    if (entries) {
      producers_.load(*entries);
      last_snapshot_ = at;
      from = std::max(at, start);
      break;
    }
    LOG_WARN("%s-%d: ignoring producer snapshot: %s", topic_.c_str(), index_,
             entries.error().detail.c_str());
    ::unlink(io::producer_snapshot_path(dir, at).c_str());
    offsets.pop_back();
  }
  // Open transactions as the snapshot saw them; the index keeps what lies before it.
  txns_.load(start, from);
  producers_.for_each([&](const ProducerEntry& e) {
    if (e.current_txn_first_offset >= 0) txns_.begin(e.producer_id, e.current_txn_first_offset);
  });
  std::size_t replayed = 0;
  auto r = log_->scan_batch_headers(from, [&](const io::BatchInfo& b) {
    const std::int64_t last = b.base_offset + b.last_offset_delta;
    if (last < from) return true;  // the batch holding `from` began before the snapshot
    if (b.producer_id >= 0) note_producer_batch(b, b.base_offset, last, {});
    ++replayed;
    return true;
  });
  if (!r) {
    LOG_ERROR("%s-%d: rebuilding producer state from offset %" PRId64 ": %s", topic_.c_str(),
              index_, from, r.error().detail.c_str());
  }
  producers_.evict_below(start);
  txns_.on_high_watermark(high_watermark_);
  if (producers_.size() || replayed) {
    LOG_DEBUG("%s-%d: %zu producers, %zu open transactions (snapshot at %" PRId64
              ", %zu batches replayed)",
              topic_.c_str(), index_, producers_.size(), txns_.ongoing(), from, replayed);
  }
}

void Partition::rebuild_producer_state() {
  producers_.clear();
  load_producer_state();
}

void Partition::note_producer_batch(const io::BatchInfo& b, std::int64_t first, std::int64_t last,
                                    std::span<const std::byte> bytes) {
  if (b.is_control()) {
    std::optional<io::batch::TxnMarker> m;
    if (!bytes.empty()) {
      auto parsed = io::batch::parse_txn_marker(bytes);
      if (parsed) m = *parsed;
    } else {
      m = read_marker(b);
    }
    if (m) note_marker(b, *m, first);
    return;
  }
  const std::int64_t ts = b.max_timestamp >= 0 ? b.max_timestamp : wall_ms();
  if (producers_.update(b, first, last, ts)) {
    txns_.begin(b.producer_id, first);
    // Used: the transaction is open here now (kept while batches still wait behind it).
    if (auto g = verified_.find(b.producer_id); g != verified_.end() && g->second.pending == 0)
      verified_.erase(g);
  }
}

void Partition::note_marker(const io::BatchInfo& b, const io::batch::TxnMarker& m,
                            std::int64_t offset) {
  if (auto g = verified_.find(b.producer_id);
      g != verified_.end() && !(g->second.add && g->second.epoch == b.producer_epoch))
    verified_.erase(g);
  const std::int64_t first =
      producers_.end_txn(b.producer_id, b.producer_epoch, m.coordinator_epoch, wall_ms());
  // A marker for a transaction that wrote nothing here (or whose data retention removed) closes
  // nothing; Kafka writes it all the same.
  if (first < 0) return;
  txns_.end(b.producer_id, first, offset, m.type == io::batch::ControlType::abort,
            log_->active_segment_base());
}

std::optional<io::batch::TxnMarker> Partition::read_marker(const io::BatchInfo& b) const {
  auto rr = log_->read(b.base_offset, static_cast<std::size_t>(b.length),
                       b.base_offset + b.last_offset_delta + 1, true);
  std::string why;
  if (rr && !rr->slices.empty()) {
    const io::Slice& s = rr->slices.front();
    std::vector<std::byte> buf(s.length);
    if (io::detail::pread_full(s.file->fd, buf.data(), buf.size(), s.position) ==
        static_cast<ssize_t>(buf.size())) {
      auto m = io::batch::parse_txn_marker(std::span<const std::byte>(buf).first(
          std::min(buf.size(), static_cast<std::size_t>(b.length))));
      if (m) return *m;
      if (m.error().code == io::Errc::invalid_record) return std::nullopt;  // not a marker
      why = m.error().detail;
    } else {
      why = "short read";
    }
  } else {
    why = rr ? "not found" : rr.error().detail;
  }
  LOG_WARN("%s-%d: reading the control batch at offset %" PRId64 ": %s", topic_.c_str(), index_,
           b.base_offset, why.c_str());
  return std::nullopt;
}

// Writes the snapshot and drops those below the log start (their segments are gone). At a
// roll this runs on the offload (never blocking the reactor); at a clean close, inline.
namespace {
io::Result<void> store_snapshot(const std::filesystem::path& dir, std::int64_t offset,
                                std::int64_t log_start,
                                const std::vector<io::ProducerSnapshotEntry>& entries,
                                bool sync = true) {
  if (auto r = io::write_producer_snapshot(dir, offset, entries, sync); !r) return r;
  for (std::int64_t o : io::list_producer_snapshots(dir)) {
    if (o >= log_start || o == offset) break;
    ::unlink(io::producer_snapshot_path(dir, o).c_str());
  }
  return {};
}
}  // namespace

void Partition::write_snapshot(std::int64_t offset, bool sync) {
  auto r =
      store_snapshot(log_->dir(), offset, log_->log_start_offset(), producers_.snapshot(), sync);
  if (r) last_snapshot_ = offset;
  if (!r) {
    LOG_WARN("%s-%d: producer snapshot at %" PRId64 ": %s", topic_.c_str(), index_, offset,
             r.error().detail.c_str());
  }
}

void Partition::on_log_rolled(io::Log&, std::int64_t new_base) {
  // The batch that caused the roll is not in the table yet: the table is exactly the state
  // of every batch below new_base. A snapshot that a crash keeps from being written only
  // means replaying from the one before.
  // Aborted-transaction entries the snapshot covers are synced first: after it, a restart no
  // longer replays (and so no longer rebuilds) them.
  io::offload(
      reactor_, std::hash<std::string>{}(log_->dir().string()),
      [dir = log_->dir(), new_base, start = log_->log_start_offset(),
       entries = producers_.snapshot(), txn_files = txns_.files_to_sync(new_base)] {
        for (std::int64_t base : txn_files) {
          if (auto r = io::sync_txn_index(dir, base); !r) return r;
        }
        return store_snapshot(dir, new_base, start, entries);
      },
      [name = topic_ + "-" + std::to_string(index_), new_base](io::Result<void> r) {
        if (!r) {
          LOG_WARN("%s: producer snapshot at %" PRId64 ": %s", name.c_str(), new_base,
                   r.error().detail.c_str());
        }
      });
}

std::size_t Partition::expire_producers(std::int64_t now_ms) {
  const std::size_t before = producers_.size();
  producers_.evict_below(log_->log_start_offset());
  producers_.expire(now_ms, opts_.producer_expiration_ms);
  txns_.evict_below(log_->log_start_offset());
  return before - producers_.size();
}

// ---------------------------------------------------------------------------------------------
// Appends

bool Partition::needs_verification(const io::BatchInfo& b, bool add) const {
  if (!(opts_.txn_verification || add) || !b.is_transactional() || b.is_control() ||
      b.producer_id < 0)
    return false;
  const ProducerEntry* e = producers_.find(b.producer_id);
  // A batch at another epoch than the open transaction's is not part of it (version 2's next
  // transaction, before the previous one's marker is here).
  if (!e || e->current_txn_first_offset < 0 || e->epoch < b.producer_epoch) return true;
  // Open already, but batches before this one still wait for their answer: this one waits
  // behind them, or it would be appended first (out of sequence).
  auto g = verified_.find(b.producer_id);
  return g != verified_.end() && g->second.pending > 0;
}

std::uint64_t Partition::begin_verification(std::int64_t producer_id, std::int16_t epoch,
                                            bool add) {
  // Batches of one transaction arrive pipelined (several in flight): they share the guard
  // until one of them opens the transaction (Kafka's VerificationStateEntry); a newer epoch
  // starts a new one.
  auto it = verified_.find(producer_id);
  if (it == verified_.end() || it->second.epoch != epoch) {
    it = verified_
             .insert_or_assign(producer_id, VerificationGuard{++next_verification_, epoch, 0, add})
             .first;
  }
  ++it->second.pending;
  return it->second.token;
}

void Partition::end_verification(std::int64_t producer_id, std::uint64_t token) {
  auto it = verified_.find(producer_id);
  if (it != verified_.end() && it->second.token == token && it->second.pending > 0)
    --it->second.pending;
}

std::expected<bool, AppendError> Partition::check_producer(io::AppendOp* op,
                                                           const io::BatchInfo& info,
                                                           AppendOrigin origin,
                                                           std::uint64_t verification) {
  auto refuse = [&](ErrorCode code, std::string msg) {
    return std::unexpected(AppendError{code, std::move(msg), {}, log_->log_start_offset()});
  };
  if (info.is_control() != (origin == AppendOrigin::marker)) {
    // Kafka's LogValidator: clients may not write control batches; a marker is one.
    return std::unexpected(AppendError{ErrorCode::invalid_record,
                                       origin == AppendOrigin::marker
                                           ? "a transaction marker must be a control batch"
                                           : "control batches are written only by the transaction "
                                             "coordinator"});
  }
  if (origin == AppendOrigin::marker) {
    if (info.producer_id < 0 || !info.is_transactional())
      return std::unexpected(
          AppendError{ErrorCode::invalid_record, "a marker names a transactional producer"});
    auto m = io::batch::parse_txn_marker(op->batch);
    if (!m) return std::unexpected(AppendError{ErrorCode::invalid_record, m.error().detail});
    const ErrorCode e =
        producers_.check_marker(info.producer_id, info.producer_epoch, m->coordinator_epoch);
    if (e != ErrorCode::none) {
      return refuse(e, "marker of producer " + std::to_string(info.producer_id) + " epoch " +
                           std::to_string(info.producer_epoch) + " refused");
    }
    return false;
  }
  const ProducerEntry* pe = info.producer_id >= 0 ? producers_.find(info.producer_id) : nullptr;
  if (origin == AppendOrigin::client && info.is_transactional() && !info.is_control() &&
      info.producer_id >= 0 &&
      (!pe || pe->current_txn_first_offset < 0 || pe->epoch < info.producer_epoch)) {
    auto g = verified_.find(info.producer_id);
    const bool guarded = opts_.txn_verification || (g != verified_.end() && g->second.add);
    if (guarded && (g == verified_.end() || g->second.token != verification ||
                    info.producer_epoch < g->second.epoch)) {
      return refuse(ErrorCode::invalid_txn_state,
                    "the transaction coordinator has not confirmed that this partition is in "
                    "a transaction of producer " +
                        std::to_string(info.producer_id));
    }
  }
  if (info.producer_id < 0 || !opts_.sequence_check) return false;
  ProducerCheck c = producers_.check(info);
  // The coordinator's own transactional writes carry no sequences (Kafka's AppendOrigin
  // COORDINATOR): only the epoch fences them.
  if (origin == AppendOrigin::coordinator && c.verdict != ProducerVerdict::invalid_epoch)
    return false;
  switch (c.verdict) {
    case ProducerVerdict::append:
      return false;
    case ProducerVerdict::duplicate:
      if (!is_retry_of(c.duplicate, info, op->batch)) {
        ++duplicate_mismatches_;
        LOG_WARN("%s-%d: a batch of producer %" PRId64
                 " epoch %d repeats sequences %d..%d "
                 "(offsets %" PRId64 "..%" PRId64
                 ") with other contents (%d records, CRC "
                 "0x%08x; stored: %d records, CRC 0x%08x): refused, not a retry; is the "
                 "producer id in use twice?",
                 topic_.c_str(), index_, info.producer_id, info.producer_epoch,
                 c.duplicate.first_seq, c.duplicate.last_seq, c.duplicate.first_offset,
                 c.duplicate.last_offset, info.record_count, info.crc, c.duplicate.record_count,
                 c.duplicate.crc);
        return refuse(ErrorCode::out_of_order_sequence_number,
                      "The batch repeats the sequence numbers of a stored batch of this producer "
                      "with other contents.");
      }
      LOG_DEBUG("%s-%d: duplicate batch of producer %" PRId64
                " (sequences %d..%d) at offset "
                "%" PRId64,
                topic_.c_str(), index_, info.producer_id, c.duplicate.first_seq,
                c.duplicate.last_seq, c.duplicate.first_offset);
      // Kafka answers a duplicate with the original batch's timestamp in logAppendTimeMs,
      // whatever the topic's timestamp type.
      op->result = io::AppendResult{c.duplicate.first_offset, c.duplicate.last_offset,
                                    c.duplicate.timestamp, log_->log_start_offset()};
      op->error.reset();
      op->next = dup_head_;
      dup_head_ = op;
      if (!dup_timer_.armed()) reactor_.arm(&dup_timer_, 0);
      return true;
    case ProducerVerdict::out_of_order:
      return refuse(ErrorCode::out_of_order_sequence_number, std::move(c.message));
    case ProducerVerdict::invalid_epoch:
      return refuse(ErrorCode::invalid_producer_epoch, std::move(c.message));
    case ProducerVerdict::invalid_txn_state:
      return refuse(ErrorCode::invalid_txn_state, std::move(c.message));
  }
  return false;
}

std::expected<io::AppendResult, AppendError> Partition::append(io::AppendOp* op,
                                                               AppendOrigin origin,
                                                               std::uint64_t verification) {
  auto info = log_->prepare(op);
  if (!info) {
    const io::Errc e = info.error().code;
    return std::unexpected(
        AppendError{kafka_error_of(e), std::move(info.error().detail), e,
                    e == io::Errc::invalid_timestamp ? log_->log_start_offset() : -1});
  }
  auto dup = check_producer(op, *info, origin, verification);
  if (!dup) return std::unexpected(std::move(dup.error()));
  if (*dup) return op->result;  // a duplicate, answered as its original once that is written
  // The leader stamps its epoch into partitionLeaderEpoch (outside the CRC, as in Kafka):
  // followers and OffsetForLeaderEpoch rely on it to find where logs diverge.
  store_be<std::int32_t>(op->batch.data() + io::batch::kPartitionLeaderEpoch, leader_epoch_);
  auto r = log_->append_prepared(op, *info);
  if (!r) {
    return std::unexpected(
        AppendError{kafka_error_of(r.error().code), std::move(r.error().detail), r.error().code});
  }
  if (info->producer_id >= 0) note_producer_batch(*info, r->base_offset, r->last_offset, op->batch);
  // The first batch of a new epoch starts that epoch in leader-epoch-checkpoint (rare: once
  // per leadership change, so its small synchronous file write stays off the common path).
  auto& epochs = log_->leader_epochs();
  auto latest = epochs.latest_epoch();
  if (!latest || *latest < leader_epoch_) {
    if (auto a = epochs.assign(leader_epoch_, r->base_offset); !a)
      LOG_WARN("%s-%d: leader epoch checkpoint: %s", topic_.c_str(), index_,
               a.error().detail.c_str());
  }
  return *r;
}

io::Result<io::AppendResult> Partition::append_replicated(io::AppendOp* op) {
  // In the log's own walk over the headers it has just validated: the producers as the leader
  // recorded them, and each batch's epoch for the replica's leader-epoch cache.
  struct Note final : io::Log::BatchVisitor {
    explicit Note(Partition& p) : part(p) {}
    void on_batch(const io::BatchInfo& info, std::span<const std::byte> bytes) override {
      if (info.producer_id >= 0)
        part.note_producer_batch(info, info.base_offset, info.base_offset + info.last_offset_delta,
                                 bytes);
      if (part.replica_)
        part.replica_->note_replicated_batch(info.partition_leader_epoch, info.base_offset);
    }
    Partition& part;
  } note(*this);
  return log_->append_replicated(op, &note);
}

bool Partition::is_retry_of(const ProducerBatch& stored, const io::BatchInfo& retry,
                            std::span<std::byte> retry_bytes) const {
  if (stored.record_count >= 0) return same_batch(stored, retry, retry_bytes);
  // Loaded from a snapshot, which keeps no contents: the log's copy says. This header read is
  // synchronous, but rare and bounded: a retry of one of a producer's last five batches from
  // before this replica opened the log (at most once per such retry, a header just written).
  ProducerBatch known = stored;
  bool found = false;
  auto r = log_->scan_batch_headers(stored.first_offset, [&](const io::BatchInfo& b) {
    found = b.base_offset == stored.first_offset && b.producer_id == retry.producer_id &&
            b.producer_epoch == retry.producer_epoch && b.base_sequence == stored.first_seq;
    known.record_count = b.record_count;
    known.crc = b.crc;
    known.log_append_time = b.log_append_time();
    known.timestamp = b.max_timestamp;
    return false;  // the one batch
  });
  if (!r) {
    LOG_WARN("%s-%d: reading the batch at offset %" PRId64 " to check a retry: %s", topic_.c_str(),
             index_, stored.first_offset, r.error().detail.c_str());
  }
  return r && found && same_batch(known, retry, retry_bytes);
}

void Partition::complete_duplicates() {
  io::AppendOp** link = &dup_head_;
  io::AppendOp* ready = nullptr;
  while (io::AppendOp* op = *link) {
    const std::int64_t reached = op->durability == io::Durability::durable
                                     ? log_->durable_end_offset()
                                     : log_->written_end_offset();
    if (reached > op->result.last_offset || log_->fenced()) {
      *link = op->next;
      if (reached <= op->result.last_offset)
        op->error = io::Error{io::Errc::fenced, "log fenced before the original batch was durable"};
      op->next = ready;
      ready = op;
    } else {
      link = &op->next;
    }
  }
  // Completing may free the ops' owners; nothing of this list is touched after done().
  while (io::AppendOp* op = ready) {
    ready = op->next;
    op->next = nullptr;
    op->done(op);
  }
}

// ---------------------------------------------------------------------------------------------
// High watermark and long polls

void Partition::add_waiter(PartitionWaiter* w) {
  if (w->linked) return;
  PartitionWaiter*& head = w->log_end ? log_waiters_ : waiters_;
  w->prev = nullptr;
  w->next = head;
  if (head) head->prev = w;
  head = w;
  w->linked = true;
}

void Partition::remove_waiter(PartitionWaiter* w) {
  if (!w->linked) return;
  if (w->prev) {
    w->prev->next = w->next;
  } else {
    (w->log_end ? log_waiters_ : waiters_) = w->next;
  }
  if (w->next) w->next->prev = w->prev;
  w->prev = w->next = nullptr;
  w->linked = false;
}

void Partition::wake_all(PartitionWaiter*& head) {
  // Waking may make a waiter unlink itself (or others); detach the list first.
  PartitionWaiter* w = head;
  head = nullptr;
  while (w) {
    PartitionWaiter* next = w->next;
    w->prev = w->next = nullptr;
    w->linked = false;
    w->on_partition_advanced();
    w = next;
  }
}

ErrorCode Partition::check_acks_all() const {
  return replicated() ? replica_->check_produce(true) : ErrorCode::none;
}

void Partition::wait_committed(CommitWaiter* w) {
  if (!replicated()) {
    w->fn(w, ErrorCode::none);
    return;
  }
  if (auto outcome = replica_->acks_all_outcome(w->last_offset)) {
    w->fn(w, *outcome);
    return;
  }
  // Appends finish in offset order, so this is nearly always the tail.
  CommitWaiter* after = commit_tail_;
  while (after && after->last_offset > w->last_offset)
    after = after->prev;
  w->prev = after;
  w->next = after ? after->next : commit_head_;
  (w->next ? w->next->prev : commit_tail_) = w;
  (after ? after->next : commit_head_) = w;
  w->linked = true;
  // settle_commit_waiters answers from the head and stops at the first that must wait.
  SAMSA_ASSERT(!w->next || w->next->last_offset >= w->last_offset);
}

void Partition::cancel_commit_wait(CommitWaiter* w) {
  if (!w->linked) return;
  (w->prev ? w->prev->next : commit_head_) = w->next;
  (w->next ? w->next->prev : commit_tail_) = w->prev;
  w->prev = w->next = nullptr;
  w->linked = false;
}

void Partition::settle_commit_waiters(bool close) {
  while (CommitWaiter* w = commit_head_) {
    std::optional<ErrorCode> outcome = ErrorCode::not_leader_or_follower;
    if (!close && replica_) outcome = replica_->acks_all_outcome(w->last_offset);
    // Outcomes are monotone in the offset: once one waits, those after it wait too.
    if (!outcome) break;
    cancel_commit_wait(w);
    w->fn(w, *outcome);
  }
}

void Partition::enable_replica(const ReplicaOptions& o, bool replica_hw) {
  if (replica_) return;
  // A truncation takes back batches the producer state and the open transactions counted.
  replica_log_ = std::make_unique<IoReplicaLog>(*log_, [this] { rebuild_producer_state(); });
  replica_ = std::make_unique<ReplicaState>(o, *replica_log_);
  replica_hw_ = replica_hw;
  // The log's own end was the HW until now (a single node's rule); a replica's is what the ISR
  // holds, unknown yet. Kept, a restart's unreplicated tail was served to consumers (through a
  // follower read) before the controller had even fenced the old incarnation.
  update_high_watermark();
}

void Partition::on_log_advanced(io::Log&) {
  if (dup_head_) complete_duplicates();
  if (replica_) replica_->on_log_advanced();
  if (log_waiters_ && log_->written_end_offset() != log_woken_end_) {
    log_woken_end_ = log_->written_end_offset();
    wake_all(log_waiters_);
  }
  update_high_watermark();
}

void Partition::update_high_watermark() {
  // The ReplicaState's HW never moves back on a leader; a follower's follows the leader's.
  std::int64_t hw =
      replica_hw_ && replica_ ? replica_->high_watermark() : log_->durable_end_offset();
  // Within one leadership the HW never goes back: a consumer was told everything below it.
  const bool leading = !replica_ || replica_->role() == ReplicaRole::leader;
  const std::int32_t epoch = replica_ ? replica_->leader_epoch() : leader_epoch_;
  if (leading && epoch == hw_epoch_)
    SAMSA_ASSERT_MSG(hw >= high_watermark_, "a leader's high watermark never moves back");
  hw_epoch_ = leading ? epoch : -1;
  // Leadership and the ISR can settle waiting produces without moving the HW.
  if (commit_head_) settle_commit_waiters();
  if (hw == high_watermark_) return;
  high_watermark_ = hw;
  txns_.on_high_watermark(hw);
  wake_all(waiters_);
  // A follower's parked fetch carries the HW too: it learns of the move at once.
  wake_all(log_waiters_);
}

io::Result<void> Partition::close() {
  settle_commit_waiters(true);
  auto r = log_->close();
  if (!r) return r;
  for (std::int64_t base : txns_.files_to_sync(INT64_MAX)) {
    if (auto s = io::sync_txn_index(log_->dir(), base); !s) {
      // Without the entries durable, the snapshot must not claim to cover them.
      LOG_WARN("%s-%d: %s", topic_.c_str(), index_, s.error().detail.c_str());
      return r;
    }
  }
  // As Kafka: a snapshot only when the log moved past the newest one (not for every idle
  // partition at every stop), synced with the log dir's one syncfs at a clean stop. Unlike
  // Kafka, none when what the next open would replay is only a small active segment (the
  // newest snapshot, or the log start, lies in it): replaying its batch headers costs one read,
  // the snapshot a file created at every stop.
  const std::int64_t end = log_->log_end_offset();
  const bool moved = last_snapshot_ >= 0 ? end != last_snapshot_
                                         : end != log_->log_start_offset() || producers_.size();
  const std::int64_t replay_from = std::max(last_snapshot_, log_->log_start_offset());
  const bool replay_small = replay_from >= log_->active_segment_base() &&
                            log_->active_segment_bytes() <= io::Log::kRescannedActiveBytes;
  if (moved && !replay_small) write_snapshot(end, !log_->defer_close_syncs());
  return r;
}

}  // namespace samsa::replication
