// io::Log — one partition's append-only log on disk, in Kafka's layout:
//   <dir>/00000000000000000000.log        RecordBatch v2 bytes, as producers sent them
//   <dir>/00000000000000000000.index      sparse relative offset -> file position (8-byte entries)
//   <dir>/00000000000000000000.timeindex  max timestamp so far -> relative offset (12-byte entries)
//   <dir>/leader-epoch-checkpoint         Kafka's text format
// A Log belongs to one reactor and is used only on that reactor's thread.
//
// Durability: append() queues the batch; at the end of the reactor's loop turn every batch
// queued in that turn is written with one io_uring submission, linked to one fdatasync per
// segment (group commit). Each AppendOp completes when its batch is written (Durability::written,
// acks=1) or synced (Durability::durable, acks=all) — never before. At most one such group is in
// flight per log; appends arriving meanwhile form the next one. io/README.md has the details
// (recovery, corruption outcomes, index files).
#pragma once

#include <cstdint>
#include <expected>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "io/reactor.h"
#include "io/read_ahead.h"

namespace samsa::io {

class LogDir;
class LeaderEpochCache;
struct CleanPlan;
struct CleanResult;

enum class Errc : std::uint8_t {
  corrupt_batch,         // CRC mismatch or inconsistent framing inside the batch
  invalid_magic,         // magic byte other than 2
  invalid_length,        // batch length field disagrees with the bytes given, or too short
  invalid_record_count,  // record count disagrees with lastOffsetDelta, or absurd
  batch_too_large,       // over LogConfig::max_batch_bytes
  offset_out_of_range,   // read/lookup before log start or after log end
  fenced,                // the log refuses service: corrupt closed segment or a failed write
  io_error,              // a system call failed (detail names it and errno)
  not_found,
  busy,  // the call needs a quiescent log (no append queued or in flight): retry after them
  invalid_timestamp,  // a record timestamp outside message.timestamp.before/after.max.ms
  would_block,        // a cold read needs file bytes its ReadAhead lacks: fill it, ask again
  invalid_record,     // a record the topic refuses (a null key on a compacted topic)
};

const char* errc_name(Errc e);

struct Error {
  Errc code;
  std::string detail;
};

template <class T>
using Result = std::expected<T, Error>;

enum class TimestampType : std::uint8_t { create_time, log_append_time };

// Per-log settings, named after the Kafka topic configs they implement.
struct LogConfig {
  std::uint64_t segment_bytes = 1ull << 30;                   // segment.bytes
  std::int64_t segment_ms = 7LL * 24 * 3600 * 1000;           // segment.ms
  std::uint32_t index_interval_bytes = 4096;                  // index.interval.bytes
  std::uint32_t segment_index_bytes = 10u << 20;              // segment.index.bytes
  std::int64_t retention_ms = 7LL * 24 * 3600 * 1000;         // retention.ms (-1: forever)
  std::int64_t retention_bytes = -1;                          // retention.bytes (-1: no limit)
  std::uint32_t max_batch_bytes = 1048588;                    // max.message.bytes
  std::int64_t file_delete_delay_ms = 60000;                  // file.delete.delay.ms
  TimestampType timestamp_type = TimestampType::create_time;  // message.timestamp.type
  // CreateTime records may be at most this far in the past / future of the broker's clock
  // (message.timestamp.before.max.ms / .after.max.ms; Kafka 4's defaults).
  std::int64_t timestamp_before_max_ms = INT64_MAX;
  std::int64_t timestamp_after_max_ms = 3600000;
  // Kafka's flush.messages / flush.ms. fsync (flush.messages <= 1, samsa's default): every group
  // commit fdatasyncs and Durability::durable appends complete only after it. Without fsync,
  // durable appends complete once written (Kafka's behaviour), and a group commit still
  // fdatasyncs every file with unsynced data once flush_messages records are unsynced, or
  // flush_ms after the oldest unsynced write (a reactor timer), so the recovery point keeps
  // moving. Both INT64_MAX: only close() syncs (how the power-loss test proves it can fail).
  // A change never weakens an append already accepted: those keep the sync they were promised.
  bool fsync = true;
  std::int64_t flush_messages = INT64_MAX;  // flush.messages (used when fsync is false)
  std::int64_t flush_ms = INT64_MAX;        // flush.ms (used when fsync is false)
  // cleanup.policy: delete (retention.ms / retention.bytes apply), compact (the log cleaner
  // keeps the latest record of each key), or both.
  bool cleanup_delete = true;
  bool cleanup_compact = false;
  std::int64_t delete_retention_ms = 86400000;     // delete.retention.ms (tombstones)
  double min_cleanable_dirty_ratio = 0.5;          // min.cleanable.dirty.ratio
  std::int64_t min_compaction_lag_ms = 0;          // min.compaction.lag.ms
  std::int64_t max_compaction_lag_ms = INT64_MAX;  // max.compaction.lag.ms
};

struct OpenOptions {
  // Offsets below this were synced before the last shutdown (recovery-point checkpoint);
  // segments that start at or after the segment holding it are scanned on open.
  std::int64_t recovery_point = 0;
  // The log directory holds a clean-shutdown marker: trust sizes and indexes, skip the scan.
  bool clean_shutdown = false;
  // Log start offset from the log-start-offset checkpoint (delete_records survives restarts).
  std::int64_t log_start_offset = -1;
  // Compaction's first dirty offset from cleaner-offset-checkpoint (-1: never cleaned).
  std::int64_t cleaner_offset = -1;
  // The log directory this partition directory lives in (dir's parent; dir's name must be
  // "<topic>-<partition>"). The log publishes its recovery point and start offset there and
  // has checkpoints written when they must be durable at once (truncation, delete_records).
  // LogDir::open_log fills all of OpenOptions. Must outlive the Log.
  LogDir* log_dir = nullptr;
};

struct AppendResult {
  std::int64_t base_offset = -1;
  std::int64_t last_offset = -1;
  std::int64_t log_append_time = -1;  // set when timestamp_type is log_append_time
  std::int64_t log_start_offset = 0;
};

enum class Durability : std::uint8_t { written, durable };

// One append in flight. The caller embeds it (no allocation per append) and keeps it and the
// batch bytes alive until done is called. done runs on the log's reactor thread.
struct AppendOp {
  using Fn = void (*)(AppendOp* self);
  std::span<std::byte> batch;  // RecordBatch v2; the base offset is patched in place
  Durability durability = Durability::durable;
  Fn done = nullptr;
  // Filled by the log:
  AppendResult result;
  std::optional<Error> error;  // set if the write or sync failed after append() accepted it
  AppendOp* next = nullptr;    // the log's intrusive list
};

// An open segment file, shared by the log and any reader holding a slice of it: retention can
// drop the segment while a fetch is still sending from it. (path is the name it was opened
// under; after retention it has been renamed *.deleted or unlinked, the fd stays valid.)
struct SegmentFile {
  int fd = -1;
  std::filesystem::path path;
  SegmentFile() = default;
  SegmentFile(const SegmentFile&) = delete;
  SegmentFile& operator=(const SegmentFile&) = delete;
  ~SegmentFile();
};

// A run of whole batches inside one segment file.
struct Slice {
  std::shared_ptr<SegmentFile> file;
  std::uint64_t position = 0;
  std::uint32_t length = 0;
  std::int64_t first_offset = 0;  // base offset of the first batch in the slice
  std::int64_t last_offset = 0;   // last offset of the last batch in the slice
};

struct ReadResult {
  std::vector<Slice> slices;
  std::int64_t next_offset = 0;  // where the next read should start
};

struct OffsetAndTimestamp {
  std::int64_t offset = -1;
  std::int64_t timestamp = -1;
};

// What Log::validate_batch learns from a batch header (used by the log and by callers that
// need producer ids, counts or codecs without parsing twice).
struct BatchInfo {
  std::int64_t base_offset;
  std::int32_t length;  // whole batch, including the 12-byte offset+length prefix
  std::int32_t partition_leader_epoch;
  std::int16_t attributes;
  std::int32_t last_offset_delta;
  std::int64_t base_timestamp;
  std::int64_t max_timestamp;
  std::int64_t producer_id;
  std::int16_t producer_epoch;
  std::int32_t base_sequence;
  std::int32_t record_count;
  std::uint32_t crc;  // CRC32C as stored in the header (attributes .. end)
  int compression() const { return attributes & 0x7; }
  bool is_transactional() const { return attributes & 0x10; }
  bool is_control() const { return attributes & 0x20; }
  bool log_append_time() const { return attributes & 0x08; }
};

class Log {
 public:
  // Opens (creating if absent) the log in dir, recovering as OpenOptions says. Must run on r's
  // thread; the Log stays on it.
  static Result<std::unique_ptr<Log>> open(Reactor& r, std::filesystem::path dir, LogConfig cfg,
                                           OpenOptions opts = {});
  ~Log();

  // Checks one RecordBatch v2: length, magic, CRC32C over attributes..end, record count vs
  // lastOffsetDelta (and record framing when the batch is uncompressed), size limit.
  static Result<BatchInfo> validate_batch(std::span<const std::byte> batch,
                                          std::uint32_t max_batch_bytes);

  // Validates op->batch (exactly one batch) and, if it is good, assigns offsets (patching
  // baseOffset, and maxTimestamp/attributes for LogAppendTime, re-computing the CRC only then)
  // and queues it. On error nothing is changed and op->done is never called. On success
  // op->done is called once, later, from the reactor loop (op->error set if the write or sync
  // failed; the log is fenced then). append(op) is prepare(op) then append_prepared.
  Result<AppendResult> append(AppendOp* op);
  // The first half of append: validates op->batch (framing, CRC, size, timestamp bounds) and
  // normalises it as Kafka does (a maxTimestamp that disagrees with the records is rewritten
  // and the CRC recomputed). Changes nothing in the log. Callers that must look at a valid
  // batch before it is placed (producer sequence checks) call this, then append_prepared.
  Result<BatchInfo> prepare(AppendOp* op) const;
  // The second half: places a batch prepare() accepted (info is what it returned).
  Result<AppendResult> append_prepared(AppendOp* op, const BatchInfo& info);
  // Appends batches that already carry offsets (a follower copying its leader; op->batch may
  // hold several): checks they continue the log exactly, keeps their bytes unchanged. Once
  // they are accepted, each batch's header goes to visit (if given), in order, from the walk
  // that places them (the caller need not walk them again).
  struct BatchVisitor {
    // bytes: the whole batch as placed (offsets and all).
    virtual void on_batch(const BatchInfo& b, std::span<const std::byte> bytes) = 0;

   protected:
    ~BatchVisitor() = default;
  };
  Result<AppendResult> append_replicated(AppendOp* op, BatchVisitor* visit = nullptr);

  // Whole batches from the one containing offset, each ending below max_offset, up to max_bytes
  // (but at least one batch when min_one is set, even if it is larger). offset may fall inside
  // a batch: that batch is returned whole, as Kafka does. Only bytes already written are
  // returned; a read may span segments (one Slice each). Corruption found in a batch header
  // fences the log (Errc::fenced naming the file and position).
  // With ra, nothing is read from a file here: bytes not in ra give Errc::would_block (fill
  // ra, then call again); without it (start-up, tools, tests) headers are read with pread.
  Result<ReadResult> read(std::int64_t offset, std::size_t max_bytes, std::int64_t max_offset,
                          bool min_one = true, ReadAhead* ra = nullptr) const;

  // First offset whose record timestamp is >= ts (decompressing a batch when needed), or
  // nullopt if none. ListOffsets by timestamp.
  Result<std::optional<OffsetAndTimestamp>> offset_for_timestamp(std::int64_t ts,
                                                                 ReadAhead* ra = nullptr) const;
  // The record with the largest timestamp (ListOffsets MAX_TIMESTAMP).
  Result<std::optional<OffsetAndTimestamp>> max_timestamp(ReadAhead* ra = nullptr) const;
  // Reads what the last would_block asked of ra, with io_uring; done(error or nullopt) runs on
  // the log's reactor when it is in (or failed). ra must outlive the fill.
  void fill(ReadAhead& ra, std::function<void(std::optional<std::string>)> done);

  // Drops every batch holding an offset at or after offset (follower divergence, unclean leader
  // change); the log end becomes the first dropped batch's base offset (offset itself when it is
  // a batch boundary). The log must be idle(): with appends queued or in flight it returns
  // Errc::busy and changes nothing (wait for their completions, then call again). The cut is
  // synced and the recovery point checkpoint rewritten before it returns.
  Result<void> truncate_to(std::int64_t offset);
  // Truncates everything and restarts the log at offset (follower far behind a leader's start).
  // Needs idle() like truncate_to.
  Result<void> truncate_fully_and_start_at(std::int64_t offset);
  // Raises the log start offset (DeleteRecords); closed segments wholly below it are renamed
  // *.deleted (handed to the retention thread by the next apply_retention) and the
  // log-start-offset checkpoint is rewritten before it returns. Never removes the active segment.
  Result<std::int64_t> delete_records(std::int64_t offset);

  // Retention and deletion: removes closed segments older than retention.ms (by their largest
  // timestamp) or beyond retention.bytes, renaming them to *.deleted. Returns the renamed files,
  // including those of earlier delete_records calls; the caller (the retention thread) unlinks
  // them after file.delete.delay.ms. Readers holding slices keep reading (the fd stays open).
  std::vector<std::filesystem::path> apply_retention(std::int64_t now_ms);

  // Rolls when the active segment is due (segment.ms) even without an append.
  void maybe_roll(std::int64_t now_ms);
  // Writes index files of the active segment and syncs; called before a clean shutdown. Needs
  // idle() (Errc::busy otherwise). Later appends fail with Errc::fenced.
  Result<void> close();
  // At a clean stop (io::LogDir::defer_close_syncs) true, and the log dir then syncs what the
  // caller writes while closing this log (producer snapshots) with everything else before its
  // clean marker; false otherwise (the caller syncs its files itself).
  bool defer_close_syncs();
  // Nothing queued, in flight or waiting to complete: truncation, close and destruction are safe.
  bool idle() const;

  std::int64_t log_start_offset() const;
  std::int64_t log_end_offset() const;      // next offset to assign
  std::int64_t written_end_offset() const;  // everything below is written (page cache)
  std::int64_t durable_end_offset() const;  // everything below is acknowledged as durable
  // Everything below is on stable storage (what the recovery-point checkpoint records). Equal
  // to durable_end_offset() unless config().fsync is false, when it moves with the syncs that
  // flush_messages / flush_ms ask for, and on close().
  std::int64_t recovery_point() const;
  std::uint64_t size_bytes() const;
  std::size_t segment_count() const;
  // Base offset of the active segment (the one the next append goes to, unless it rolls).
  std::int64_t active_segment_base() const;
  std::uint64_t active_segment_bytes() const;
  // An active segment up to this size is rescanned (batch headers) at a clean open instead of
  // having its index files, and its partition's producer snapshot, written at close: one read
  // at open beats three files created at every clean stop (100,000 written partitions spent
  // 38 s stopping, mostly allocating those inodes).
  static constexpr std::uint64_t kRescannedActiveBytes = 1 << 20;
  bool fenced() const;
  const LogConfig& config() const;
  void set_config(const LogConfig& cfg);  // dynamic topic config changes
  const std::filesystem::path& dir() const;

  // Called when written/durable end offsets advance (long polls wake on it), and when the log
  // rolls to a new segment starting at new_base (before the batch that caused the roll is
  // placed: everything below new_base has been placed).
  struct Listener {
    virtual void on_log_advanced(Log& log) = 0;
    virtual void on_log_rolled(Log& /*log*/, std::int64_t /*new_base*/) {}

   protected:
    ~Listener() = default;
  };
  void set_listener(Listener* l);

  // Calls f(info) with the header of every batch from the one holding `from` to the log end,
  // in order (base offsets as stored), reading them from the files (synchronously: for
  // rebuilding state at open or after truncation, never on the request path). Stops early when
  // f returns false.
  Result<void> scan_batch_headers(std::int64_t from,
                                  const std::function<bool(const BatchInfo&)>& f) const;

  // Compaction (io/compaction.h, io/log_clean.cc). plan_cleaning: the next cleaning pass if one
  // is due (cleanup.policy has compact, no pass in flight, dirty ratio or max.compaction.lag),
  // over closed segments below cleanable_limit (the high watermark: a record a truncation could
  // still remove must not supersede an older one), min.compaction.lag.ms and the recovery
  // point. The log then has a pass in flight until commit_cleaning or abort_cleaning.
  // commit_cleaning swaps the pass's .cleaned files in (crash-safe, see io/README.md), unless
  // the log changed under the pass (truncation, retention): then Errc::busy and the files go.
  struct CleanRequest {
    std::int64_t now_ms = 0;
    std::int64_t cleanable_limit = INT64_MAX;
    std::int64_t producer_expiration_ms = 86400000;  // producer.id.expiration.ms
    bool force = false;                              // ignore the dirty ratio (tests, samsactl)
  };
  std::unique_ptr<CleanPlan> plan_cleaning(const CleanRequest& req);
  Result<void> commit_cleaning(const CleanPlan& plan, const CleanResult& result);
  void abort_cleaning(const CleanPlan& plan);
  struct CompactionInfo {
    std::int64_t first_dirty = 0;     // cleaner-offset-checkpoint
    double dirty_ratio = 0;           // of the closed segments
    std::int64_t last_clean_ms = -1;  // wall clock of the last committed pass
    std::uint64_t passes = 0;         // committed since open
    bool in_flight = false;
  };
  CompactionInfo compaction_info() const;

  // The partition's leader-epoch-checkpoint (truncate_to and delete_records keep it in step).
  LeaderEpochCache& leader_epochs();

  // Counters for benchmarks and metrics.
  struct Stats {
    std::uint64_t appends = 0;
    std::uint64_t write_submissions = 0;  // IORING_OP_WRITEV SQEs (resubmissions included)
    std::uint64_t fdatasyncs = 0;         // fdatasync SQEs on segment files
    std::uint64_t rolls = 0;
    std::uint64_t groups = 0;      // group commits submitted
    std::uint64_t dir_fsyncs = 0;  // fsyncs of the partition directory (new segment files)
    std::uint64_t short_writes = 0;
    std::uint64_t bytes_written = 0;
    std::uint64_t read_ahead_fills = 0;  // cold-read bytes read with io_uring (Log::fill)
  };
  const Stats& stats() const;

  class Impl;

 private:
  explicit Log(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace samsa::io
