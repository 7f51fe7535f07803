// Internal to io/: the state of one io::Log (Log::Impl) shared by its implementation files,
// one per seam of the log's life: log_open.cc (opening and recovery), log_append.cc (appends
// and group commit), log_read.cc (reads and timestamp lookups), log_trim.cc (truncation,
// deletion, retention, close) and log.cc (the public face). Nothing outside io/ includes it.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>

#include "base/bytes.h"
#include "base/clock.h"
#include "base/log.h"
#include "io/checkpoint.h"
#include "io/compaction.h"
#include "io/leader_epoch.h"
#include "io/log.h"
#include "io/log_dir.h"
#include "io/offload.h"
#include "io/record_batch.h"
#include "io/segment.h"

namespace samsa::io {

// The log's own vocabulary (io-internal: this header is not public).

using detail::BatchRing;
using detail::IndexBuilder;
using detail::IndexFile;
using detail::OffsetIndexView;
using detail::TimeIndexView;

inline constexpr const char* kLogSuffix = ".log";
inline constexpr const char* kIndexSuffix = ".index";
inline constexpr const char* kTimeIndexSuffix = ".timeindex";
inline constexpr const char* kDeletedSuffix = ".deleted";
inline constexpr const char* kEpochFile = "leader-epoch-checkpoint";
inline constexpr const char* kCompactedMarker = "compacted";
// Linux's IOV_MAX: one writev takes at most this many batches; a larger group is split.
inline constexpr std::size_t kMaxIov = 1024;
inline constexpr std::size_t kWindow = 8192;

inline std::unexpected<Error> fail(Errc c, std::string detail) {
  return std::unexpected(Error{c, std::move(detail)});
}

inline std::string fmt(const char* f, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, f, args...);
  return buf;
}

// Scratch of reads without a ReadAhead (start-up, tools, tests): batch headers through a
// window, whole batches for timestamp lookups. What it holds is valid for one call of a read or
// lookup (each starts by forgetting the window), so one per thread serves every log on it: a
// partition read once at start-up keeps no buffer of its own.
struct ReadScratch {
  std::vector<std::byte> window;
  std::uint64_t window_pos = 0;
  std::size_t window_len = 0;
  const SegmentFile* window_file = nullptr;
  std::uint32_t window_batch_len = 0;  // size of the last batch seen through it
  std::vector<std::byte> batch;        // batch_at without a ReadAhead
};
inline ReadScratch& read_scratch() {
  thread_local ReadScratch s;
  return s;
}

struct Segment {
  std::int64_t base = 0;
  // Open while in use or within the reactor's descriptor budget (io/open_files.h); reached
  // through Log::Impl::file(), which opens it again when the budget closed it.
  mutable OpenFiles::Handle file;
  std::uint64_t size = 0;        // bytes placed: written, in flight or queued
  std::int64_t next_offset = 0;  // one past the last offset placed
  std::int64_t max_timestamp = -1;
  std::int64_t first_batch_timestamp = -1;  // Kafka's rolling-based timestamp (segment.ms)
  std::int64_t created_ms = 0;              // also the fallback "age" without timestamps
  IndexFile offset_index;                   // closed segments only
  IndexFile time_index;
  // A rolled segment whose index files are still being written (offloaded): served from
  // memory meanwhile, never removed, and the recovery point stays below it.
  bool index_pending = false;
  // Batches with gaps between them (a follower copying a compacted leader, a truncation into a
  // gap): the ring's next base no longer tells where a batch ends.
  bool gapped = false;
  // One past the last offset a batch of this closed segment holds, when known (-1: not known;
  // then next_offset bounds it). Below next_offset in a compacted segment whose last records
  // were removed: a read from that trailing gap goes straight to the next segment (walking
  // this one again every time would make a ReadAhead chase two files forever).
  mutable std::int64_t data_end = -1;
  std::int64_t read_end() const { return data_end >= 0 ? data_end : next_offset; }
};

class Log::Impl final : public TurnHook {
 public:
  Impl(Reactor& r, std::filesystem::path dir, LogConfig cfg)
      : r_(r), dir_(std::move(dir)), cfg_(cfg) {
    normalize(cfg_);
    offload_key_ = std::hash<std::string>{}(dir_.string());
  }
  ~Impl();

  // --- state ---
  Reactor& r_;
  std::filesystem::path dir_;
  LogConfig cfg_;
  Log* owner_ = nullptr;
  std::deque<std::unique_ptr<Segment>> segs_;  // by base offset; back() is the active one
  IndexBuilder ib_;                            // the active segment's index entries
  BatchRing ring_;                             // the active segment's recent batches
  std::int64_t log_start_ = 0;
  std::int64_t leo_ = 0;
  std::int64_t written_end_ = 0;
  std::int64_t durable_end_ = 0;
  std::int64_t synced_end_ = 0;
  mutable std::optional<Error> fence_;
  bool closed_ = false;
  bool orphaned_ = false;  // the Log was destroyed with I/O in flight: ignore everything
  Listener* listener_ = nullptr;
  Stats stats_;
  LeaderEpochCache epochs_;
  LogDir* log_dir_ = nullptr;
  std::optional<PartitionId> id_;
  std::shared_ptr<LogDir::PartitionState> state_;
  std::vector<std::filesystem::path> pending_deletes_;

  // --- group commit ---
  struct Run {  // consecutive queued ops bound for one segment file
    std::shared_ptr<SegmentFile> file;
    std::uint64_t position = 0;
    AppendOp* first = nullptr;
    std::size_t count = 0;
    std::uint64_t bytes = 0;
  };
  struct RunCompletion : Completion {
    Impl* log = nullptr;
    std::uint32_t run = 0;
    bool sync = false;
  };
  struct FlightRun {
    std::shared_ptr<SegmentFile> file;
    std::uint64_t position = 0;
    std::size_t iov_begin = 0, iov_count = 0;
    std::uint64_t total = 0, done = 0, consumed = 0;
    bool write_pending = false, sync_pending = false;
    bool resubmit = false, sync_again = false, finished = false;
    std::int64_t submitted_ns = 0;  // fsync latency metric: submission to the sync's completion
    int err = 0;
    const char* err_what = nullptr;
    RunCompletion wc, sc;
  };
  struct DirCompletion : Completion {
    Impl* log = nullptr;
  };

  AppendOp* staged_head_ = nullptr;
  AppendOp* staged_tail_ = nullptr;
  // A queue in a vector that keeps its capacity: staging never allocates once warmed up.
  std::vector<Run> staged_runs_;
  std::size_t staged_runs_head_ = 0;
  AppendOp* failed_head_ = nullptr;  // accepted ops that must complete with an error
  AppendOp* failed_tail_ = nullptr;
  bool in_flight_ = false;
  std::vector<FlightRun> flight_;
  std::vector<iovec> iov_;
  AppendOp* flight_head_ = nullptr;
  std::int64_t flight_end_ = 0;
  bool flight_written_ = false;
  bool dir_sync_needed_ = false;
  // The active segment is as its files on disk say, durably: its index files hold ib_ and its
  // data is synced (a new segment, one a clean shutdown closed, an empty one recovery found).
  // close() then writes and syncs nothing for it: a clean stop of 100,000 idle partitions is
  // not 300,000 fsyncs.
  bool active_clean_ = false;
  bool dir_sync_pending_ = false;
  int dir_sync_err_ = 0;
  // The directory is opened for its io_uring fsync and closed when it completes: an idle
  // partition holds no descriptor for it.
  int dir_sync_fd_ = -1;
  int dir_open_errno_ = 0;
  void submit_dir_sync();
  DirCompletion dir_c_;

  // --- flush.messages / flush.ms (cfg_.fsync false) ---
  // Whether the group in flight fdatasyncs: decided when it is submitted, so a config change
  // never takes a sync away from ops already in flight.
  bool flight_sync_ = false;
  // Offsets below were accepted while every group synced; they get a sync even if fsync was
  // turned off since (an acks=all append is never completed on a weaker promise).
  std::int64_t sync_owed_end_ = 0;
  // Files written by groups that did not sync (at most a few: the active segment and those
  // rolled since the last sync); the next syncing group syncs all of them.
  std::vector<std::shared_ptr<SegmentFile>> unsynced_files_;
  std::int64_t unsynced_since_ns_ = -1;  // when the oldest unsynced write completed
  bool flush_due_ = false;               // flush.ms elapsed (or fsync turned on): sync next
  struct FlushTimer : Timer {
    Impl* log = nullptr;
  } flush_timer_;

  // --- helpers ---
  static void normalize(LogConfig& c) {
    c.segment_bytes = std::clamp<std::uint64_t>(c.segment_bytes, 128, INT32_MAX);
    c.index_interval_bytes = std::max<std::uint32_t>(c.index_interval_bytes, 1);
    c.segment_index_bytes = std::max<std::uint32_t>(c.segment_index_bytes, 24);
    if (c.max_batch_bytes < batch::kHeaderSize) c.max_batch_bytes = batch::kHeaderSize;
  }
  Segment& active() { return *segs_.back(); }
  const Segment& active() const { return *segs_.back(); }
  bool is_active(const Segment& s) const { return &s == segs_.back().get(); }
  std::filesystem::path path_of(std::int64_t base, const char* suffix) const {
    return dir_ / (detail::segment_name(base) + suffix);
  }
  std::filesystem::path log_path(const Segment& s) const { return path_of(s.base, kLogSuffix); }
  // s's file, opened again if the descriptor budget closed it, and now the most recently
  // used. Hold the result while using its descriptor.
  Result<std::shared_ptr<SegmentFile>> file(const Segment& s) const;
  OffsetIndexView offsets_of(const Segment& s) const {
    return is_active(s) ? ib_.offset_view() : OffsetIndexView{s.offset_index.bytes()};
  }
  TimeIndexView times_of(const Segment& s) const {
    return is_active(s) ? ib_.time_view() : TimeIndexView{s.time_index.bytes()};
  }
  std::size_t find_segment(std::int64_t offset) const {
    auto it = std::upper_bound(segs_.begin(), segs_.end(), offset,
                               [](std::int64_t o, const auto& s) { return o < s->base; });
    return it == segs_.begin() ? 0 : static_cast<std::size_t>(it - segs_.begin()) - 1;
  }
  std::int64_t effective_max_timestamp(const Segment& s) const {
    return s.max_timestamp >= 0 ? s.max_timestamp : s.created_ms;
  }
  bool idle() const { return !in_flight_ && !staged_head_ && !failed_head_ && index_jobs_ == 0; }
  // The recovery point: synced, and below any segment whose index files are not yet on disk
  // (recovery trusts a closed segment's index only below it).
  std::int64_t trusted_end() const {
    for (const auto& s : segs_)
      if (s->index_pending) return std::min(synced_end_, s->base);
    return synced_end_;
  }
  std::uint64_t total_size() const {
    std::uint64_t n = 0;
    for (const auto& s : segs_)
      n += s->size;
    return n;
  }

  Error fence(Error e) const {
    if (!fence_) {
      LOG_ERROR("log %s fenced: %s", dir_.c_str(), e.detail.c_str());
      fence_ = Error{Errc::fenced, e.detail};
    }
    return *fence_;
  }
  std::unexpected<Error> fenced_error() const { return std::unexpected(*fence_); }

  void publish() {
    if (!state_) return;
    state_->recovery_point.store(trusted_end(), std::memory_order_release);
    state_->log_start_offset.store(log_start_, std::memory_order_release);
    state_->cleaner_offset.store(cleaner_offset_, std::memory_order_release);
  }
  Result<void> checkpoint_now() {
    publish();
    if (log_dir_) return log_dir_->write_checkpoints();
    return {};
  }

  Result<std::vector<std::int64_t>> list_segments(bool* removed);
  Result<void> open_segments(const std::vector<std::int64_t>& bases, const OpenOptions& opts,
                             LogDir::OpenSummary& recovery, bool* removed);
  Result<void> load(const OpenOptions& opts);
  Result<void> open_segment_file(Segment& s, bool create);
  Result<void> create_segment(std::int64_t base);
  Result<void> load_closed(Segment& s, std::int64_t next_base);
  Result<bool> load_clean_active(Segment& s);
  Result<bool> recover_segment(Segment& s, bool last, std::int64_t next_base);
  Result<void> drop_lost_segments(std::vector<std::int64_t>& bases, std::size_t scan_from,
                                  bool* removed);
  Result<void> close_active_index(Segment& s);
  // The active segment's index files are written only when it closes; absent reads as empty.
  // Removes what an earlier close left (a truncated or reopened active segment's are stale).
  Result<void> remove_active_index_files(std::int64_t base) const;
  // Starts a new segment. The old one's index files are written and synced by the offload
  // (write_index = false when the old segment is about to be removed anyway).
  Result<void> roll(std::int64_t now_ms, bool write_index = true);
  void write_index_files(Segment& s, std::shared_ptr<const std::vector<std::byte>> offsets,
                         std::shared_ptr<const std::vector<std::byte>> times);
  std::size_t index_jobs_ = 0;
  std::uint64_t offload_key_ = 0;  // one offload thread per log: its files change in order
  bool roll_due(const Segment& s, std::uint64_t add_bytes, std::int64_t last_offset,
                std::int64_t batch_ts, std::int64_t now) const;
  void remove_segment_files(const Segment& s, bool rename_deleted);

  Result<BatchInfo> prepare(AppendOp* op) const;
  Result<AppendResult> append(AppendOp* op, bool replicated, const BatchInfo* prepared,
                              Log::BatchVisitor* visit = nullptr);
  Result<std::int64_t> check_replicated(std::span<std::byte> b, BatchInfo* first,
                                        BatchInfo* last) const;
  void stage(AppendOp* op, Segment& s, std::uint64_t pos);
  void on_turn_end() override;
  void submit_group();
  bool sync_due(std::int64_t end) const {
    return cfg_.fsync || flush_due_ || synced_end_ < sync_owed_end_ ||
           (end - synced_end_ >= cfg_.flush_messages);
  }
  void add_sync_only_runs();
  void submit_flush();
  void arm_flush_timer();
  static void on_flush_timer(Timer* t);
  void set_config(const LogConfig& cfg);
  void submit_run(FlightRun& fr);
  static void on_run_cqe(Completion* c, int res, std::uint32_t flags);
  static void on_dir_cqe(Completion* c, int res, std::uint32_t flags);
  void run_progress(FlightRun& fr);
  void advance_group();
  void push_failed(AppendOp* head, const Error& e);
  void complete_list(AppendOp* head);

  struct Located {
    std::uint64_t position;
    std::int64_t base_offset;   // -1 when unknown (found through the index)
    std::int64_t first_last;    // last offset of the batch at position when base is unknown
    std::ptrdiff_t ring_index;  // >= 0 when the batch is in the ring
  };
  Result<Located> locate(const Segment& s, std::int64_t offset) const;
  Result<std::uint32_t> checked_header(const Segment& s, std::uint64_t pos,
                                       const std::byte* h) const;
  Result<const std::byte*> header_at(const Segment& s, std::uint64_t pos) const;
  // The whole batch at pos (len bytes), for lookups that decode records.
  Result<const std::byte*> batch_at(const Segment& s, std::uint64_t pos, std::size_t len) const;
  // The caller's ReadAhead for the current read or lookup (null: blocking reads), and how many
  // bytes from a position it may use (what one fill should take).
  mutable ReadAhead* ra_ = nullptr;
  mutable std::size_t ra_span_ = 0;
  // Where this call first needed bytes of a file: a later want covers from there, so that
  // asking again finds everything the walk needs in one buffer (no fill chasing another).
  mutable const SegmentFile* ra_anchor_file_ = nullptr;
  mutable std::uint64_t ra_anchor_ = 0;
  // Asks ra_ for [pos, pos + need) of s, from the anchor on.
  // Errc::would_block (or why the file could not be opened).
  std::unexpected<Error> want_bytes(const Segment& s, std::uint64_t pos, std::size_t need) const;
  struct WithReadAhead {
    const Impl& impl;
    WithReadAhead(const Impl& i, ReadAhead* ra, std::size_t span) : impl(i) {
      impl.ra_ = ra;
      // The index walk to the first batch (at most index.interval.bytes and a batch) and the
      // read itself.
      impl.ra_span_ = span + (256u << 10);
      impl.ra_anchor_file_ = nullptr;
    }
    ~WithReadAhead() { impl.ra_ = nullptr; }
  };
  Error corrupt(const Segment& s, std::uint64_t pos, const std::string& what) const {
    return fence(Error{Errc::fenced, fmt("corrupt segment %s at byte %" PRIu64 ": %s",
                                         log_path(s).c_str(), pos, what.c_str())});
  }
  Result<ReadResult> read(std::int64_t offset, std::size_t max_bytes, std::int64_t max_offset,
                          bool min_one) const;
  Result<std::optional<OffsetAndTimestamp>> find_timestamp(const Segment& s, std::int64_t ts,
                                                           std::int64_t limit) const;
  Result<std::optional<OffsetAndTimestamp>> offset_for_timestamp(std::int64_t ts) const;
  Result<std::optional<OffsetAndTimestamp>> max_timestamp() const;
  Result<void> truncate_to(std::int64_t offset);
  Result<void> truncate_fully_and_start_at(std::int64_t offset);
  Result<std::int64_t> delete_records(std::int64_t offset);
  std::vector<std::filesystem::path> apply_retention(std::int64_t now_ms);
  Result<void> close();

  // --- compaction (log_clean.cc) ---
  // The log may hold gaps between offsets (Kafka's compacted logs): its topic is compacted, or
  // was (the "compacted" marker file, written before the first gap can exist). Elsewhere
  // offsets must continue exactly, which is how recovery tells a hole left by a crash (a
  // group commit whose later segment's write landed and the earlier's did not) from data.
  bool gaps_ok_ = false;
  batch::Form form() const { return gaps_ok_ ? batch::Form::stored : batch::Form::produced; }
  bool gap_ok(std::int64_t base, std::int64_t expected) const {
    return gaps_ok_ ? base >= expected : base == expected;
  }
  // Makes gaps_ok_ true and durable (the marker) when the config compacts.
  Result<void> allow_gaps_if_compacted();
  // Bumped by every truncation: a pass planned before it must not commit.
  std::uint64_t generation_ = 0;
  bool cleaning_ = false;
  std::int64_t cleaner_offset_ = -1;  // first dirty offset (-1: never cleaned)
  std::int64_t last_clean_ms_ = -1;
  std::uint64_t clean_passes_ = 0;
  std::unique_ptr<CleanPlan> plan_cleaning(const CleanRequest& req);
  Result<void> commit_cleaning(const CleanPlan& plan, const CleanResult& result);
  Result<void> swap_in(const CleanPlan& plan, const CleanResult& result);
  void abort_cleaning(const CleanPlan& plan);
  CompactionInfo compaction_info() const;
  // Completes a swap a crash interrupted (the cleaner-swap manifest), before segments are listed.
  Result<bool> finish_interrupted_swap();
};

}  // namespace samsa::io
