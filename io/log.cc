#include "io/log.h"

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
#include "io/leader_epoch.h"
#include "io/log_dir.h"
#include "io/record_batch.h"
#include "io/segment.h"

namespace samsa::io {

const char* errc_name(Errc e) {
  switch (e) {
    case Errc::corrupt_batch:
      return "corrupt_batch";
    case Errc::invalid_magic:
      return "invalid_magic";
    case Errc::invalid_length:
      return "invalid_length";
    case Errc::invalid_record_count:
      return "invalid_record_count";
    case Errc::batch_too_large:
      return "batch_too_large";
    case Errc::offset_out_of_range:
      return "offset_out_of_range";
    case Errc::fenced:
      return "fenced";
    case Errc::invalid_timestamp:
      return "invalid_timestamp";
    case Errc::io_error:
      return "io_error";
    case Errc::not_found:
      return "not_found";
    case Errc::busy:
      return "busy";
  }
  return "unknown";
}

namespace {

using detail::BatchRing;
using detail::IndexBuilder;
using detail::IndexFile;
using detail::OffsetIndexView;
using detail::TimeIndexView;

constexpr const char* kLogSuffix = ".log";
constexpr const char* kIndexSuffix = ".index";
constexpr const char* kTimeIndexSuffix = ".timeindex";
constexpr const char* kDeletedSuffix = ".deleted";
constexpr const char* kEpochFile = "leader-epoch-checkpoint";
// Linux's IOV_MAX: one writev takes at most this many batches; a larger group is split.
constexpr std::size_t kMaxIov = 1024;
constexpr std::size_t kWindow = 8192;

std::unexpected<Error> fail(Errc c, std::string detail) {
  return std::unexpected(Error{c, std::move(detail)});
}

std::string fmt(const char* f, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, f, args...);
  return buf;
}

struct Segment {
  std::int64_t base = 0;
  std::shared_ptr<SegmentFile> file;
  std::uint64_t size = 0;        // bytes placed: written, in flight or queued
  std::int64_t next_offset = 0;  // one past the last offset placed
  std::int64_t max_timestamp = -1;
  std::int64_t first_batch_timestamp = -1;  // Kafka's rolling-based timestamp (segment.ms)
  std::int64_t created_ms = 0;              // also the fallback "age" without timestamps
  IndexFile offset_index;                   // closed segments only
  IndexFile time_index;
};

}  // namespace

class Log::Impl final : public TurnHook {
 public:
  Impl(Reactor& r, std::filesystem::path dir, LogConfig cfg)
      : r_(r), dir_(std::move(dir)), cfg_(cfg) {
    normalize(cfg_);
  }
  ~Impl();

  // --- state ---
  Reactor& r_;
  std::filesystem::path dir_;
  LogConfig cfg_;
  Log* owner_ = nullptr;
  int dir_fd_ = -1;
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
  mutable std::vector<std::byte> window_;  // batch headers for reads
  mutable std::uint64_t window_pos_ = 0;
  mutable std::size_t window_len_ = 0;
  mutable const SegmentFile* window_file_ = nullptr;
  mutable std::uint32_t window_batch_len_ = 0;  // size of the last batch seen through it

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
  bool dir_sync_pending_ = false;
  int dir_sync_err_ = 0;
  DirCompletion dir_c_;

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
  bool idle() const { return !in_flight_ && !staged_head_ && !failed_head_; }
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
    state_->recovery_point.store(synced_end_, std::memory_order_release);
    state_->log_start_offset.store(log_start_, std::memory_order_release);
  }
  Result<void> checkpoint_now() {
    publish();
    if (log_dir_) return log_dir_->write_checkpoints();
    return {};
  }

  Result<void> load(const OpenOptions& opts);
  Result<void> open_segment_file(Segment& s, bool create);
  Result<void> create_segment(std::int64_t base);
  Result<void> load_closed(Segment& s, std::int64_t next_base);
  Result<bool> load_clean_active(Segment& s);
  Result<bool> recover_segment(Segment& s, bool last, std::int64_t next_base);
  Result<void> close_active_index(Segment& s);
  Result<void> roll(std::int64_t now_ms);
  bool roll_due(const Segment& s, std::uint64_t add_bytes, std::int64_t last_offset,
                std::int64_t batch_ts, std::int64_t now) const;
  void remove_segment_files(const Segment& s, bool rename_deleted);

  Result<BatchInfo> prepare(AppendOp* op) const;
  Result<AppendResult> append(AppendOp* op, bool replicated, const BatchInfo* prepared);
  void on_turn_end() override;
  void submit_group();
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
  Result<const std::byte*> header_at(const Segment& s, std::uint64_t pos) const;
  Error corrupt(const Segment& s, std::uint64_t pos, const std::string& what) const {
    return fence(Error{Errc::fenced, fmt("corrupt segment %s at byte %" PRIu64 ": %s",
                                         s.file->path.c_str(), pos, what.c_str())});
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
};

Log::Impl::~Impl() {
  if (state_ && log_dir_ && id_) log_dir_->detach(*id_, state_);
  if (dir_fd_ >= 0) ::close(dir_fd_);
}

// ---------------------------------------------------------------------------------------------
// Opening and recovery

Result<void> Log::Impl::open_segment_file(Segment& s, bool create) {
  auto p = path_of(s.base, kLogSuffix);
  int flags = O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_TRUNC : 0);
  int fd = ::open(p.c_str(), flags, 0644);
  if (fd < 0) return std::unexpected(sys_error(create ? "create" : "open", p, errno));
  s.file = std::make_shared<SegmentFile>();
  s.file->fd = fd;
  s.file->path = p;
  struct stat st {};
  if (::fstat(fd, &st) != 0) return std::unexpected(sys_error("stat", p, errno));
  s.size = static_cast<std::uint64_t>(st.st_size);
  s.created_ms = create ? wall_ms() : st.st_mtim.tv_sec * 1000LL + st.st_mtim.tv_nsec / 1000000;
  return {};
}

Result<void> Log::Impl::create_segment(std::int64_t base) {
  auto s = std::make_unique<Segment>();
  s->base = base;
  s->next_offset = base;
  if (auto r = open_segment_file(*s, true); !r) return r;
  // The index files exist from the start, as in Kafka; their entries are written on roll/close.
  for (const char* suffix : {kIndexSuffix, kTimeIndexSuffix}) {
    if (auto r = detail::write_whole_file(path_of(base, suffix), {}); !r) return r;
  }
  segs_.push_back(std::move(s));
  ib_.reset(base, cfg_.index_interval_bytes);
  ring_.clear();
  dir_sync_needed_ = true;
  return {};
}

Result<void> Log::Impl::load_closed(Segment& s, std::int64_t next_base) {
  std::int64_t max_rel = next_base - 1 - s.base;
  std::string why;
  auto oi = IndexFile::load(path_of(s.base, kIndexSuffix));
  auto ti = IndexFile::load(path_of(s.base, kTimeIndexSuffix));
  if (!oi) {
    why = oi.error().detail;
  } else if (!ti) {
    why = ti.error().detail;
  } else if (auto bad = detail::check_offset_index(oi->bytes(), s.size, max_rel)) {
    why = path_of(s.base, kIndexSuffix).string() + ": " + *bad;
  } else if (auto bad2 = detail::check_time_index(ti->bytes(), max_rel)) {
    why = path_of(s.base, kTimeIndexSuffix).string() + ": " + *bad2;
  } else if (ti->bytes().empty() && s.size > 0) {
    // A closed segment always gets a final time entry; none means the file was lost.
    why = path_of(s.base, kTimeIndexSuffix).string() + " is empty";
  }
  if (why.empty()) {
    s.offset_index = std::move(*oi);
    s.time_index = std::move(*ti);
    TimeIndexView tv{s.time_index.bytes()};
    if (tv.size()) s.max_timestamp = tv.at(tv.size() - 1).timestamp;
    s.next_offset = next_base;
    return {};
  }
  // Below the recovery point the data is trusted to be synced: the index is rebuilt from it,
  // and anything wrong in the data itself is corruption of acknowledged records.
  LOG_WARN("rebuilding the index of %s: %s", s.file->path.c_str(), why.c_str());
  ib_.reset(s.base, cfg_.index_interval_bytes);
  detail::ScanOptions so{.from = 0, .end = s.size, .expected_base = s.base, .verify_crc = true};
  auto out = detail::scan_batches(s.file->fd, s.file->path, so,
                                  [&](const BatchInfo& b, std::uint64_t pos) {
                                    ib_.add(b.base_offset + b.last_offset_delta, b.max_timestamp,
                                            pos, static_cast<std::uint64_t>(b.length));
                                  });
  if (!out) return std::unexpected(out.error());
  if (!out->problem.empty()) {
    return fail(Errc::fenced, fmt("corrupt closed segment %s at byte %" PRIu64 ": %s",
                                  s.file->path.c_str(), out->valid_end, out->problem.c_str()));
  }
  std::int64_t end = out->batches ? out->next_offset : s.base;
  if (end != next_base) {
    return fail(Errc::fenced,
                fmt("closed segment %s ends at offset %" PRId64 " but the next segment starts at "
                    "%" PRId64,
                    s.file->path.c_str(), end, next_base));
  }
  s.next_offset = next_base;
  return close_active_index(s);
}

// Writes ib_ as the segment's index files and maps them: the segment is closed from now on.
// They are synced before the recovery point can pass the segment (its data's group commit
// completes after this returns): a closed segment below the recovery point is trusted with its
// index, and a time index that lost its last entry would make the segment look older.
Result<void> Log::Impl::close_active_index(Segment& s) {
  ib_.finish();
  auto ip = path_of(s.base, kIndexSuffix);
  auto tp = path_of(s.base, kTimeIndexSuffix);
  if (auto r = detail::write_whole_file(ip, ib_.offsets, true); !r) return r;
  if (auto r = detail::write_whole_file(tp, ib_.times, true); !r) return r;
  auto oi = IndexFile::load(ip);
  if (!oi) return std::unexpected(oi.error());
  auto ti = IndexFile::load(tp);
  if (!ti) return std::unexpected(ti.error());
  s.offset_index = std::move(*oi);
  s.time_index = std::move(*ti);
  s.max_timestamp = ib_.max_timestamp;
  return {};
}

// The last segment after a clean shutdown: trust its index files and size, and read only the
// batch headers after the last index entry (to find the log end and fill the ring). false when
// something does not add up; the caller then recovers the segment in full.
Result<bool> Log::Impl::load_clean_active(Segment& s) {
  auto oi = IndexFile::load(path_of(s.base, kIndexSuffix));
  auto ti = IndexFile::load(path_of(s.base, kTimeIndexSuffix));
  if (!oi || !ti) return false;
  if (auto bad = detail::check_offset_index(oi->bytes(), s.size, INT32_MAX)) {
    LOG_WARN("%s: %s", path_of(s.base, kIndexSuffix).c_str(), bad->c_str());
    return false;
  }
  if (auto bad = detail::check_time_index(ti->bytes(), INT32_MAX)) {
    LOG_WARN("%s: %s", path_of(s.base, kTimeIndexSuffix).c_str(), bad->c_str());
    return false;
  }
  OffsetIndexView ov{oi->bytes()};
  detail::ScanOptions so{.end = s.size, .verify_crc = false};
  if (ov.size()) {
    auto e = ov.at(ov.size() - 1);
    so.from = static_cast<std::uint64_t>(e.position);
    so.expected_first_last = s.base + e.rel_offset;
  } else {
    so.expected_base = s.base;
  }
  ib_.restore(s.base, cfg_.index_interval_bytes, oi->bytes(), ti->bytes(), s.size, INT64_MAX);
  ring_.clear();
  auto out = detail::scan_batches(
      s.file->fd, s.file->path, so, [&](const BatchInfo& b, std::uint64_t pos) {
        ib_.observe(b.base_offset + b.last_offset_delta, b.max_timestamp);
        ring_.push(b.base_offset, pos);
        if (s.first_batch_timestamp < 0 && pos == 0) {
          s.first_batch_timestamp = b.max_timestamp;
        }
      });
  if (!out) return std::unexpected(out.error());
  if (!out->problem.empty()) {
    LOG_WARN("%s: not as it was closed (%s at byte %" PRIu64 "); recovering it",
             s.file->path.c_str(), out->problem.c_str(), out->valid_end);
    return false;
  }
  s.next_offset = out->batches ? out->next_offset : s.base;
  if (s.size > 0 && out->batches == 0) return false;  // the index pointed at the very end
  if (s.first_batch_timestamp < 0 && s.size > 0) {
    std::byte h[batch::kHeaderSize];
    ssize_t n = detail::pread_full(s.file->fd, h, sizeof h, 0);
    if (n != static_cast<ssize_t>(sizeof h)) return false;
    s.first_batch_timestamp = batch::parse_header(h).max_timestamp;
  }
  s.max_timestamp = ib_.max_timestamp;
  return true;
}

// A full scan with CRCs (from the recovery point on). Truncates a torn or corrupt tail and
// returns true when it did (everything after it is then dropped by the caller).
Result<bool> Log::Impl::recover_segment(Segment& s, bool last, std::int64_t next_base) {
  ib_.reset(s.base, cfg_.index_interval_bytes);
  ring_.clear();
  detail::ScanOptions so{.from = 0, .end = s.size, .expected_base = s.base, .verify_crc = true};
  auto out = detail::scan_batches(s.file->fd, s.file->path, so,
                                  [&](const BatchInfo& b, std::uint64_t pos) {
                                    ib_.add(b.base_offset + b.last_offset_delta, b.max_timestamp,
                                            pos, static_cast<std::uint64_t>(b.length));
                                    ring_.push(b.base_offset, pos);
                                    if (pos == 0) s.first_batch_timestamp = b.max_timestamp;
                                  });
  if (!out) return std::unexpected(out.error());
  s.next_offset = out->batches ? out->next_offset : s.base;
  s.max_timestamp = ib_.max_timestamp;
  bool truncated = false;
  if (!out->problem.empty()) {
    LOG_WARN("%s: %s at byte %" PRIu64 "; truncating the %" PRIu64 " bytes from there",
             s.file->path.c_str(), out->problem.c_str(), out->valid_end, s.size - out->valid_end);
    if (::ftruncate(s.file->fd, static_cast<off_t>(out->valid_end)) != 0) {
      return std::unexpected(sys_error("truncate", s.file->path, errno));
    }
    s.size = out->valid_end;
    truncated = true;
  }
  // What was scanned may be only in the page cache (a crash kills the process, not the
  // machine): sync it before it counts as below the recovery point.
  if (::fdatasync(s.file->fd) != 0) {
    return std::unexpected(sys_error("fdatasync", s.file->path, errno));
  }
  if (!last && !truncated && s.next_offset != next_base) {
    LOG_WARN("%s ends at offset %" PRId64 " but the next segment starts at %" PRId64
             "; dropping the segments after it",
             s.file->path.c_str(), s.next_offset, next_base);
    truncated = true;
  }
  if (!last && !truncated) {
    if (auto r = close_active_index(s); !r) return std::unexpected(r.error());
  }
  return truncated;
}

void Log::Impl::remove_segment_files(const Segment& s, bool rename_deleted) {
  for (const char* suffix : {kLogSuffix, kIndexSuffix, kTimeIndexSuffix}) {
    auto p = path_of(s.base, suffix);
    if (rename_deleted) {
      auto d = p;
      d += kDeletedSuffix;
      if (::rename(p.c_str(), d.c_str()) == 0) {
        pending_deletes_.push_back(d);
      } else if (errno != ENOENT) {
        LOG_WARN("rename %s to %s: %s", p.c_str(), d.c_str(), std::strerror(errno));
      }
    } else if (::unlink(p.c_str()) != 0 && errno != ENOENT) {
      LOG_WARN("unlink %s: %s", p.c_str(), std::strerror(errno));
    }
  }
}

Result<void> Log::Impl::load(const OpenOptions& opts) {
  log_dir_ = opts.log_dir;
  if (log_dir_) {
    id_ = PartitionId::parse(dir_.filename().string());
    if (!id_) {
      return fail(Errc::not_found,
                  "log dir " + dir_.string() + " is not named <topic>-<partition>");
    }
  }
  std::error_code ec;
  bool created = std::filesystem::create_directories(dir_, ec);
  if (ec) return std::unexpected(sys_error("create", dir_, ec.value()));
  if (created) {
    if (auto r = fsync_dir(dir_.parent_path().empty() ? "." : dir_.parent_path()); !r) return r;
  }
  dir_fd_ = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd_ < 0) return std::unexpected(sys_error("open", dir_, errno));
  auto epochs = LeaderEpochCache::load(dir_ / kEpochFile);
  if (!epochs) return std::unexpected(epochs.error());
  epochs_ = std::move(*epochs);
  window_.resize(kWindow);

  // What is in the directory.
  std::map<std::int64_t, int> found;  // base -> bit 1 .log, 2 .index, 4 .timeindex
  bool removed = false;
  for (const auto& de : std::filesystem::directory_iterator(dir_, ec)) {
    std::string name = de.path().filename().string();
    if (name.ends_with(kDeletedSuffix) || name.ends_with(".tmp") || name.ends_with(".cleaned") ||
        name.ends_with(".swap")) {
      LOG_INFO("removing leftover %s", de.path().c_str());
      ::unlink(de.path().c_str());
      removed = true;
      continue;
    }
    if (auto b = detail::parse_segment_name(name, kLogSuffix)) found[*b] |= 1;
    if (auto b = detail::parse_segment_name(name, kIndexSuffix)) found[*b] |= 2;
    if (auto b = detail::parse_segment_name(name, kTimeIndexSuffix)) found[*b] |= 4;
  }
  if (ec) return std::unexpected(sys_error("list", dir_, ec.value()));
  std::vector<std::int64_t> bases;
  for (auto [b, bits] : found) {
    if (bits & 1) {
      bases.push_back(b);
    } else {
      LOG_INFO("removing index files of %s without a log file", detail::segment_name(b).c_str());
      ::unlink(path_of(b, kIndexSuffix).c_str());
      ::unlink(path_of(b, kTimeIndexSuffix).c_str());
      removed = true;
    }
  }

  // Segments wholly below the checkpointed log start (their deletion may not have survived).
  while (bases.size() > 1 && opts.log_start_offset >= bases[1]) {
    LOG_INFO("removing %s, below the log start offset %" PRId64,
             path_of(bases[0], kLogSuffix).c_str(), opts.log_start_offset);
    Segment tmp;
    tmp.base = bases[0];
    remove_segment_files(tmp, false);
    bases.erase(bases.begin());
    removed = true;
  }

  LogDir::OpenSummary recovery;
  if (bases.empty()) {
    if (auto r = create_segment(std::max<std::int64_t>(0, opts.log_start_offset)); !r) return r;
  } else {
    // Segments before the one holding the recovery point are trusted (index checked); from it
    // on they are scanned. A clean shutdown trusts all of them.
    std::size_t scan_from = 0;
    if (opts.clean_shutdown) {
      scan_from = bases.size();
    } else {
      for (std::size_t i = 0; i < bases.size(); ++i) {
        if (bases[i] <= opts.recovery_point) scan_from = i;
      }
    }
    for (std::size_t i = 0; i < bases.size(); ++i) {
      auto s = std::make_unique<Segment>();
      s->base = bases[i];
      if (auto r = open_segment_file(*s, false); !r) return r;
      bool last = i + 1 == bases.size();
      std::int64_t next_base = last ? -1 : bases[i + 1];
      bool cut = false;
      if (i < scan_from) {
        if (!last) {
          if (auto r = load_closed(*s, next_base); !r) return r;
        } else {
          auto ok = load_clean_active(*s);
          if (!ok) return std::unexpected(ok.error());
          if (!*ok) {
            ++recovery.scanned_segments;
            auto rec = recover_segment(*s, true, -1);
            if (!rec) return std::unexpected(rec.error());
          }
        }
      } else {
        ++recovery.scanned_segments;
        auto rec = recover_segment(*s, last, next_base);
        if (!rec) return std::unexpected(rec.error());
        cut = *rec;
        recovery.truncated |= cut;
      }
      segs_.push_back(std::move(s));
      if (cut && !last) {
        for (std::size_t j = i + 1; j < bases.size(); ++j) {
          LOG_WARN("removing %s: it follows the truncated tail",
                   path_of(bases[j], kLogSuffix).c_str());
          Segment tmp;
          tmp.base = bases[j];
          remove_segment_files(tmp, false);
        }
        removed = true;
        // The truncated segment is the active one now; its index files get rewritten on roll.
        for (const char* suffix : {kIndexSuffix, kTimeIndexSuffix}) {
          if (auto r = detail::write_whole_file(path_of(segs_.back()->base, suffix), {}); !r) {
            return r;
          }
        }
        break;
      }
    }
  }
  Segment& a = active();
  leo_ = a.next_offset;
  log_start_ = std::max(segs_.front()->base, opts.log_start_offset);
  if (log_start_ > leo_) log_start_ = leo_;
  written_end_ = durable_end_ = synced_end_ = leo_;
  if (removed || dir_sync_needed_) {
    if (::fsync(dir_fd_) != 0) return std::unexpected(sys_error("fsync", dir_, errno));
    dir_sync_needed_ = false;
  }
  if (auto r = epochs_.truncate_from_end(leo_); !r) return r;
  if (auto r = epochs_.truncate_from_start(log_start_); !r) return r;
  if (log_dir_) {
    state_ = log_dir_->attach(*id_, synced_end_, log_start_);
    recovery.segments = segs_.size();
    for (const auto& seg : segs_)
      recovery.bytes += seg->size;
    log_dir_->note_opened(recovery);
  }
  // One line per log dir at info (LogDir::recovery_summary); per partition only at debug.
  LOG_DEBUG("opened log %s: offsets %" PRId64 "..%" PRId64 ", %zu segments%s", dir_.c_str(),
            log_start_, leo_, segs_.size(), opts.clean_shutdown ? " (clean)" : "");
  return {};
}

// ---------------------------------------------------------------------------------------------
// Appends and group commit

bool Log::Impl::roll_due(const Segment& s, std::uint64_t add_bytes, std::int64_t last_offset,
                         std::int64_t batch_ts, std::int64_t now) const {
  if (s.size == 0) return false;
  if (s.size + add_bytes > cfg_.segment_bytes) return true;
  if (ib_.offset_entries() >= cfg_.segment_index_bytes / detail::kOffsetEntrySize) return true;
  if (ib_.time_entries() >= cfg_.segment_index_bytes / detail::kTimeEntrySize) return true;
  if (last_offset - s.base > INT32_MAX) return true;
  // Kafka measures segment.ms with record timestamps when the segment has them.
  std::int64_t waited = s.first_batch_timestamp >= 0 && batch_ts >= 0
                            ? batch_ts - s.first_batch_timestamp
                            : now - s.created_ms;
  return waited > cfg_.segment_ms;
}

Result<void> Log::Impl::roll(std::int64_t /*now_ms*/) {
  Segment& old = active();
  if (auto r = close_active_index(old); !r) return r;
  if (auto r = create_segment(leo_); !r) return r;
  ++stats_.rolls;
  LOG_DEBUG("rolled %s at offset %" PRId64, dir_.c_str(), leo_);
  if (listener_ && owner_) listener_->on_log_rolled(*owner_, leo_);
  return {};
}

// Kafka's LogValidator for a client's batch: CreateTime records must lie within
// [now - before.max.ms, now + after.max.ms] (records without a timestamp, -1, are exempt), and
// the stored maxTimestamp is the records' largest, whatever the producer wrote there.
Result<BatchInfo> Log::Impl::prepare(AppendOp* op) const {
  if (fence_) return fenced_error();
  if (closed_) return fail(Errc::fenced, "log " + dir_.string() + " is closed");
  std::span<std::byte> b = op->batch;
  batch::RecordTimestamps ts;
  auto v = batch::validate(b, cfg_.max_batch_bytes, &ts);
  if (!v) return v;
  if (cfg_.timestamp_type == TimestampType::log_append_time) return v;
  const std::int64_t now = wall_ms();
  const std::int64_t earliest =
      cfg_.timestamp_before_max_ms >= now ? INT64_MIN : now - cfg_.timestamp_before_max_ms;
  const std::int64_t latest =
      cfg_.timestamp_after_max_ms > INT64_MAX - now ? INT64_MAX : now + cfg_.timestamp_after_max_ms;
  const std::int64_t bad = ts.min_set < earliest ? ts.min_set
                           : ts.max_set > latest ? ts.max_set
                                                 : INT64_MIN;
  if (bad != INT64_MIN) {
    return fail(
        Errc::invalid_timestamp,
        fmt("timestamp %" PRId64 " of a record is out of range: it must be within [%" PRId64
            ", %" PRId64 "] (message.timestamp.before.max.ms %" PRId64
            ", message.timestamp.after.max.ms %" PRId64 ")",
            bad, earliest, latest, cfg_.timestamp_before_max_ms, cfg_.timestamp_after_max_ms));
  }
  if (v->compression() == 0 && v->max_timestamp != ts.max) {
    store_be<std::int64_t>(b.data() + batch::kMaxTimestamp, ts.max);
    batch::update_crc(b);
    v->max_timestamp = ts.max;
  }
  return v;
}

Result<AppendResult> Log::Impl::append(AppendOp* op, bool replicated, const BatchInfo* prepared) {
  if (fence_) return fenced_error();
  if (closed_) return fail(Errc::fenced, "log " + dir_.string() + " is closed");
  std::span<std::byte> b = op->batch;
  BatchInfo first{}, lastb{};
  std::int64_t n_batches = 0;
  if (!replicated) {
    if (prepared) {
      first = lastb = *prepared;
    } else {
      auto v = prepare(op);
      if (!v) return std::unexpected(std::move(v.error()));
      first = lastb = *v;
    }
    n_batches = 1;
  } else {
    std::size_t pos = 0;
    std::int64_t expect = leo_;
    while (pos < b.size()) {
      std::size_t left = b.size() - pos;
      if (left < batch::kHeaderSize) {
        return fail(
            Errc::invalid_length,
            fmt("%zu trailing bytes after batch %" PRId64 " are not a batch", left, n_batches));
      }
      std::int32_t raw = load_be<std::int32_t>(b.data() + pos + batch::kLength);
      std::size_t len = left;  // unless the length is plausible, validate() names the problem
      if (raw >= 0 && static_cast<std::size_t>(raw) + batch::kLogOverhead <= left) {
        len = static_cast<std::size_t>(raw) + batch::kLogOverhead;
      }
      auto v = batch::validate(b.subspan(pos, len), cfg_.max_batch_bytes);
      if (!v) {
        v.error().detail =
            fmt("batch %" PRId64 " at byte %zu: ", n_batches, pos) + v.error().detail;
        return std::unexpected(std::move(v.error()));
      }
      if (v->base_offset != expect) {
        return fail(Errc::offset_out_of_range,
                    fmt("batch %" PRId64 " has base offset %" PRId64 ", the log needs %" PRId64,
                        n_batches, v->base_offset, expect));
      }
      if (n_batches == 0) first = *v;
      lastb = *v;
      expect = v->base_offset + v->last_offset_delta + 1;
      ++n_batches;
      pos += len;
    }
    if (n_batches == 0) return fail(Errc::invalid_length, "no batch given");
  }
  const std::int64_t now = wall_ms();
  const bool append_time = !replicated && cfg_.timestamp_type == TimestampType::log_append_time;
  const std::int64_t base = replicated ? first.base_offset : leo_;
  const std::int64_t last =
      replicated ? lastb.base_offset + lastb.last_offset_delta : leo_ + first.last_offset_delta;
  const std::int64_t batch_ts = append_time ? now : lastb.max_timestamp;
  if (roll_due(active(), b.size(), last, batch_ts, now)) {
    if (auto r = roll(now); !r) return std::unexpected(r.error());
  }

  // Accepted: from here on nothing fails.
  Segment& s = active();
  if (!replicated) {
    store_be<std::int64_t>(b.data() + batch::kBaseOffset, base);
    if (append_time) {
      auto attrs = static_cast<std::int16_t>(first.attributes | batch::kTimestampTypeBit);
      store_be<std::int16_t>(b.data() + batch::kAttributes, attrs);
      store_be<std::int64_t>(b.data() + batch::kMaxTimestamp, now);
      batch::update_crc(b);
    }
  }
  std::uint64_t pos = s.size;
  if (n_batches == 1) {
    std::int64_t ts = append_time ? now : first.max_timestamp;
    ib_.add(last, ts, pos, b.size());
    ring_.push(base, pos);
    if (s.size == 0) s.first_batch_timestamp = ts;
  } else {
    std::size_t p = 0;
    while (p < b.size()) {
      BatchInfo i = batch::parse_header(b.data() + p);
      ib_.add(i.base_offset + i.last_offset_delta, i.max_timestamp, pos + p,
              static_cast<std::uint64_t>(i.length));
      ring_.push(i.base_offset, pos + p);
      if (s.size == 0 && p == 0) s.first_batch_timestamp = i.max_timestamp;
      p += static_cast<std::size_t>(i.length);
    }
  }
  s.size += b.size();
  s.next_offset = last + 1;
  s.max_timestamp = ib_.max_timestamp;
  leo_ = last + 1;

  op->result = AppendResult{base, last, append_time ? now : -1, log_start_};
  op->error.reset();
  op->next = nullptr;
  if (staged_tail_) {
    staged_tail_->next = op;
  } else {
    staged_head_ = op;
  }
  staged_tail_ = op;
  if (staged_runs_head_ == staged_runs_.size() || staged_runs_.back().file != s.file) {
    staged_runs_.push_back(Run{s.file, pos, op, 0, 0});
  }
  staged_runs_.back().count++;
  staged_runs_.back().bytes += b.size();
  ++stats_.appends;
  r_.at_turn_end(this);
  return op->result;
}

void Log::Impl::on_turn_end() {
  if (orphaned_) return;
  if (fence_ && staged_head_) {
    AppendOp* h = staged_head_;
    staged_head_ = staged_tail_ = nullptr;
    staged_runs_.clear();
    staged_runs_head_ = 0;
    push_failed(h, *fence_);
  }
  if (!in_flight_ && staged_head_) submit_group();
  if (failed_head_) {
    AppendOp* h = failed_head_;
    failed_head_ = failed_tail_ = nullptr;
    complete_list(h);  // may destroy the log: nothing after this
  }
}

void Log::Impl::push_failed(AppendOp* head, const Error& e) {
  for (AppendOp* op = head; op;) {
    AppendOp* next = op->next;
    op->error = e;
    op->next = nullptr;
    if (failed_tail_) {
      failed_tail_->next = op;
    } else {
      failed_head_ = op;
    }
    failed_tail_ = op;
    op = next;
  }
}

void Log::Impl::complete_list(AppendOp* head) {
  while (head) {
    AppendOp* next = head->next;  // done() may re-append the op and reuse `next`
    head->next = nullptr;
    if (head->done) head->done(head);
    head = next;
  }
}

void Log::Impl::submit_group() {
  flight_.clear();
  iov_.clear();
  AppendOp* last_taken = nullptr;
  while (staged_runs_head_ < staged_runs_.size() && iov_.size() < kMaxIov) {
    Run& run = staged_runs_[staged_runs_head_];
    std::size_t take = std::min(run.count, kMaxIov - iov_.size());
    FlightRun fr;
    fr.file = run.file;
    fr.position = run.position;
    fr.iov_begin = iov_.size();
    fr.iov_count = take;
    AppendOp* op = run.first;
    for (std::size_t i = 0; i < take; ++i) {
      iov_.push_back(iovec{op->batch.data(), op->batch.size()});
      fr.total += op->batch.size();
      last_taken = op;
      op = op->next;
    }
    flight_.push_back(std::move(fr));
    if (take == run.count) {
      run.file.reset();
      if (++staged_runs_head_ == staged_runs_.size()) {
        staged_runs_.clear();
        staged_runs_head_ = 0;
      }
    } else {
      run.first = op;
      run.count -= take;
      run.position += flight_.back().total;
      run.bytes -= flight_.back().total;
    }
  }
  flight_head_ = staged_head_;
  staged_head_ = last_taken->next;
  last_taken->next = nullptr;
  if (!staged_head_) staged_tail_ = nullptr;
  flight_end_ = last_taken->result.last_offset + 1;
  flight_written_ = false;
  in_flight_ = true;
  ++stats_.groups;
  {
    auto& m = r_.io_metrics();
    m.group_commit_appends.record(iov_.size());
    for (const FlightRun& fr : flight_)
      m.group_commit_bytes += fr.total;
  }
  for (std::size_t i = 0; i < flight_.size(); ++i) {
    FlightRun& fr = flight_[i];
    fr.wc.fn = fr.sc.fn = &Impl::on_run_cqe;
    fr.wc.log = fr.sc.log = this;
    fr.wc.run = fr.sc.run = static_cast<std::uint32_t>(i);
    fr.wc.sync = false;
    fr.sc.sync = true;
    submit_run(fr);
  }
  if (dir_sync_needed_ && cfg_.fsync) {
    dir_sync_needed_ = false;
    dir_sync_pending_ = true;
    dir_sync_err_ = 0;
    dir_c_.fn = &Impl::on_dir_cqe;
    dir_c_.log = this;
    io_uring_prep_fsync(r_.sqe(&dir_c_), dir_fd_, 0);
    ++stats_.dir_fsyncs;
  }
}

// One writev of the run's remaining bytes, linked to an fdatasync of its file.
void Log::Impl::submit_run(FlightRun& fr) {
  // Skip what earlier (short) writes already put in the file.
  std::uint64_t skip = fr.done - fr.consumed;
  while (skip > 0 && fr.iov_count > 0) {
    iovec& v = iov_[fr.iov_begin];
    if (skip >= v.iov_len) {
      skip -= v.iov_len;
      ++fr.iov_begin;
      --fr.iov_count;
    } else {
      v.iov_base = static_cast<char*>(v.iov_base) + skip;
      v.iov_len -= skip;
      skip = 0;
    }
  }
  fr.consumed = fr.done;
  fr.resubmit = fr.sync_again = false;
  // A link must not straddle a submission boundary, or the sync could run before the write.
  if (io_uring_sq_space_left(r_.ring()) < 2) io_uring_submit(r_.ring());
  io_uring_sqe* w = r_.sqe(&fr.wc);
  io_uring_prep_writev(w, fr.file->fd, &iov_[fr.iov_begin], static_cast<unsigned>(fr.iov_count),
                       fr.position + fr.done);
  fr.write_pending = true;
  ++stats_.write_submissions;
  if (cfg_.fsync) {
    w->flags |= IOSQE_IO_LINK;
    io_uring_prep_fsync(r_.sqe(&fr.sc), fr.file->fd, IORING_FSYNC_DATASYNC);
    fr.sync_pending = true;
    fr.submitted_ns = mono_ns();
    ++stats_.fdatasyncs;
  }
}

void Log::Impl::on_run_cqe(Completion* c, int res, std::uint32_t) {
  auto* rc = static_cast<RunCompletion*>(c);
  Impl* self = rc->log;
  if (self->orphaned_) return;
  FlightRun& fr = self->flight_[rc->run];
  if (!rc->sync) {
    fr.write_pending = false;
    if (res == -EINTR || res == -EAGAIN) {
      fr.resubmit = true;
    } else if (res < 0) {
      if (!fr.err) fr.err = -res, fr.err_what = "write";
    } else if (res == 0 && fr.done < fr.total) {
      if (!fr.err) fr.err = EIO, fr.err_what = "write (no progress)";
    } else {
      fr.done += static_cast<std::uint64_t>(res);
      self->stats_.bytes_written += static_cast<std::uint64_t>(res);
      if (fr.done < fr.total) {
        fr.resubmit = true;
        ++self->stats_.short_writes;
      }
    }
  } else {
    fr.sync_pending = false;
    if (res == -ECANCELED || res == -EINTR || res == -EAGAIN) {
      fr.sync_again = true;  // the write before it broke the link (short or failed)
    } else if (res < 0) {
      if (!fr.err) fr.err = -res, fr.err_what = "fdatasync";
    } else if (fr.submitted_ns) {
      self->r_.io_metrics().fsync.record(static_cast<std::uint64_t>(mono_ns() - fr.submitted_ns));
    }
  }
  self->run_progress(fr);
}

void Log::Impl::run_progress(FlightRun& fr) {
  if (fr.write_pending || fr.sync_pending) {
    // The write is complete and its sync still runs: ops asking only for the write go now.
    if (!fr.write_pending && !fr.err && fr.done == fr.total && !flight_written_) advance_group();
    return;
  }
  if (!fr.err && (fr.resubmit || (fr.sync_again && cfg_.fsync))) {
    if (fr.done < fr.total) {
      submit_run(fr);
    } else {
      fr.sync_again = false;
      io_uring_prep_fsync(r_.sqe(&fr.sc), fr.file->fd, IORING_FSYNC_DATASYNC);
      fr.sync_pending = true;
      fr.submitted_ns = mono_ns();
      ++stats_.fdatasyncs;
    }
    return;
  }
  fr.finished = true;
  advance_group();
}

void Log::Impl::on_dir_cqe(Completion* c, int res, std::uint32_t) {
  Impl* self = static_cast<DirCompletion*>(c)->log;
  if (self->orphaned_) return;
  self->dir_sync_pending_ = false;
  if (res < 0) self->dir_sync_err_ = -res;
  self->advance_group();
}

void Log::Impl::advance_group() {
  bool all_written = true, all_finished = true;
  const FlightRun* failed = nullptr;
  for (const FlightRun& fr : flight_) {
    if (fr.done < fr.total) all_written = false;
    if (!fr.finished) all_finished = false;
    if (fr.err && !failed) failed = &fr;
  }
  AppendOp* done_now = nullptr;
  AppendOp** done_tail = &done_now;
  bool advanced = false;
  if (all_written && !failed && !flight_written_) {
    flight_written_ = true;
    written_end_ = std::max(written_end_, flight_end_);
    advanced = true;
    // Ops that asked only for the write (or every op, without fsync) complete now; unlink
    // them first, their done() may re-append them.
    AppendOp** link = &flight_head_;
    while (AppendOp* op = *link) {
      if (op->durability == Durability::written || !cfg_.fsync) {
        *link = op->next;
        op->next = nullptr;
        *done_tail = op;
        done_tail = &op->next;
      } else {
        link = &op->next;
      }
    }
    if (!cfg_.fsync) durable_end_ = std::max(durable_end_, flight_end_);
  }
  if (all_finished && !dir_sync_pending_) {
    in_flight_ = false;
    AppendOp* rest = flight_head_;
    flight_head_ = nullptr;
    if (failed || dir_sync_err_) {
      Error e = failed ? sys_error(failed->err_what, failed->file->path, failed->err)
                       : sys_error("fsync", dir_, dir_sync_err_);
      fence(e);
      for (AppendOp* op = rest; op; op = op->next)
        op->error = e;
      // Ops completed as written before the failure stay completed; the rest fail.
      *done_tail = rest;
      if (staged_head_) {
        AppendOp* h = staged_head_;
        staged_head_ = staged_tail_ = nullptr;
        staged_runs_.clear();
        staged_runs_head_ = 0;
        push_failed(h, *fence_);
        r_.at_turn_end(this);
      }
    } else {
      durable_end_ = std::max(durable_end_, flight_end_);
      if (cfg_.fsync) synced_end_ = std::max(synced_end_, flight_end_);
      publish();
      advanced = true;
      *done_tail = rest;
      if (staged_head_) r_.at_turn_end(this);
    }
  }
  if (advanced && listener_) listener_->on_log_advanced(*owner_);
  complete_list(done_now);  // may destroy the log: nothing after this
}

// ---------------------------------------------------------------------------------------------
// Reads

// The header of the batch at pos, through a small read-ahead window (valid for one call of a
// read/lookup: the file may grow under it).
Result<const std::byte*> Log::Impl::header_at(const Segment& s, std::uint64_t pos) const {
  if (window_file_ != s.file.get() || pos < window_pos_ ||
      pos + batch::kHeaderSize > window_pos_ + window_len_) {
    // Small batches: read ahead a window of headers; large ones: just the next header.
    std::size_t ahead = window_batch_len_ < kWindow / 4 ? kWindow : batch::kHeaderSize;
    std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(ahead, s.size - pos));
    ssize_t n = detail::pread_full(s.file->fd, window_.data(), want, pos);
    if (n < 0) return std::unexpected(sys_error("read", s.file->path, static_cast<int>(-n)));
    window_file_ = s.file.get();
    window_pos_ = pos;
    window_len_ = static_cast<std::size_t>(n);
    if (window_len_ < batch::kHeaderSize) {
      return std::unexpected(corrupt(s, pos, "the file ends inside a batch header"));
    }
  }
  const std::byte* h = window_.data() + (pos - window_pos_);
  auto info = batch::check_header({h, batch::kHeaderSize}, 0);
  if (!info) return std::unexpected(corrupt(s, pos, info.error().detail));
  window_batch_len_ = static_cast<std::uint32_t>(info->length);
  if (pos + static_cast<std::uint64_t>(info->length) > s.size) {
    return std::unexpected(
        corrupt(s, pos, fmt("batch of %d bytes runs past the segment's end", info->length)));
  }
  return h;
}

// The batch of segment s that holds offset (or the first batch after it, when offset is below
// the segment's base).
Result<Log::Impl::Located> Log::Impl::locate(const Segment& s, std::int64_t offset) const {
  if (offset <= s.base) {
    bool in_ring = is_active(s) && !ring_.empty() && ring_.at(0).position == 0;
    return Located{0, s.base, -1, in_ring ? 0 : -1};
  }
  if (is_active(s) && !ring_.empty() && offset >= ring_.at(0).base_offset) {
    std::ptrdiff_t i = ring_.find(offset);
    return Located{ring_.at(static_cast<std::size_t>(i)).position,
                   ring_.at(static_cast<std::size_t>(i)).base_offset, -1, i};
  }
  OffsetIndexView ov = offsets_of(s);
  std::ptrdiff_t e = ov.floor_offset(offset - s.base);
  std::uint64_t pos = 0;
  std::int64_t base = s.base, first_last = -1;
  if (e >= 0) {
    pos = static_cast<std::uint64_t>(ov.at(static_cast<std::size_t>(e)).position);
    base = -1;
    first_last = s.base + ov.at(static_cast<std::size_t>(e)).rel_offset;
  }
  // Walk headers to the batch whose last offset reaches offset.
  for (;;) {
    if (pos >= s.size) {
      return std::unexpected(
          corrupt(s, pos, fmt("offset %" PRId64 " not found before the end", offset)));
    }
    auto h = header_at(s, pos);
    if (!h) return std::unexpected(h.error());
    BatchInfo bi = batch::parse_header(*h);
    std::int64_t last = bi.base_offset + bi.last_offset_delta;
    if (base >= 0 && bi.base_offset != base) {
      return std::unexpected(
          corrupt(s, pos, fmt("base offset %" PRId64 ", expected %" PRId64, bi.base_offset, base)));
    }
    if (base < 0 && last != first_last) {
      return std::unexpected(corrupt(
          s, pos,
          fmt("batch ends at offset %" PRId64 ", the index says %" PRId64, last, first_last)));
    }
    if (last >= offset) return Located{pos, bi.base_offset, -1, -1};
    pos += static_cast<std::uint64_t>(bi.length);
    base = last + 1;
  }
}

Result<ReadResult> Log::Impl::read(std::int64_t offset, std::size_t max_bytes,
                                   std::int64_t max_offset, bool min_one) const {
  if (fence_) return fenced_error();
  if (offset < log_start_ || offset > leo_) {
    return fail(Errc::offset_out_of_range,
                fmt("offset %" PRId64 " is outside the log [%" PRId64 ", %" PRId64 "]", offset,
                    log_start_, leo_));
  }
  window_file_ = nullptr;
  ReadResult rr;
  rr.next_offset = offset;
  const std::int64_t limit = std::min(max_offset, written_end_);
  std::uint64_t budget = max_bytes;
  for (std::size_t si = find_segment(offset); si < segs_.size(); ++si) {
    const Segment& s = *segs_[si];
    if (rr.next_offset >= limit || s.base >= limit) break;
    if (rr.next_offset >= s.next_offset) continue;
    auto loc = locate(s, rr.next_offset);
    if (!loc) return std::unexpected(loc.error());
    const bool first_batch_free = min_one && rr.slices.empty();
    std::uint64_t start = loc->position, end = start;
    std::int64_t first_offset = -1, last_offset = -1;
    bool stopped = false;  // by the budget or the limit, rather than the segment's end
    if (loc->ring_index >= 0) {
      for (auto i = static_cast<std::size_t>(loc->ring_index); i < ring_.size(); ++i) {
        bool has_next = i + 1 < ring_.size();
        std::uint64_t bend = has_next ? ring_.at(i + 1).position : s.size;
        std::int64_t blast = has_next ? ring_.at(i + 1).base_offset - 1 : s.next_offset - 1;
        if (blast >= limit || (bend - start > budget && !(first_batch_free && end == start))) {
          stopped = true;
          break;
        }
        if (first_offset < 0) first_offset = ring_.at(i).base_offset;
        end = bend;
        last_offset = blast;
      }
    } else {
      std::uint64_t pos = start;
      std::int64_t base = loc->base_offset;  // locate() always knows it
      // Every header on the way is read and checked (no skipping ahead through the index):
      // baseOffset is outside the CRC, so a damaged one would reach consumers unnoticed.
      while (pos < s.size) {
        if (base >= limit) {
          stopped = true;
          break;
        }
        auto h = header_at(s, pos);
        if (!h) return std::unexpected(h.error());
        BatchInfo bi = batch::parse_header(*h);
        if (bi.base_offset != base) {
          return std::unexpected(corrupt(
              s, pos, fmt("base offset %" PRId64 ", expected %" PRId64, bi.base_offset, base)));
        }
        std::int64_t blast = bi.base_offset + bi.last_offset_delta;
        std::uint64_t bend = pos + static_cast<std::uint64_t>(bi.length);
        if (blast >= limit || (bend - start > budget && !(first_batch_free && end == start))) {
          stopped = true;
          break;
        }
        if (first_offset < 0) first_offset = bi.base_offset;
        end = pos = bend;
        last_offset = blast;
        base = blast + 1;
      }
    }
    if (first_offset < 0) break;  // not even one batch fits
    rr.slices.push_back(
        Slice{s.file, start, static_cast<std::uint32_t>(end - start), first_offset, last_offset});
    budget -= std::min<std::uint64_t>(budget, end - start);
    rr.next_offset = last_offset + 1;
    if (stopped || budget == 0) break;
  }
  return rr;
}

// First record with timestamp >= ts in segment s, below limit.
Result<std::optional<OffsetAndTimestamp>> Log::Impl::find_timestamp(const Segment& s,
                                                                    std::int64_t ts,
                                                                    std::int64_t limit) const {
  TimeIndexView tv = times_of(s);
  OffsetIndexView ov = offsets_of(s);
  std::uint64_t pos = 0;
  std::int64_t base = s.base, first_last = -1;
  std::ptrdiff_t t = tv.floor_below(ts);
  // The active segment's entries may describe batches not written yet: use older ones.
  while (t >= 0 && s.base + tv.at(static_cast<std::size_t>(t)).rel_offset >= limit)
    --t;
  if (t >= 0) {
    std::ptrdiff_t e = ov.floor_offset(tv.at(static_cast<std::size_t>(t)).rel_offset);
    if (e >= 0) {
      pos = static_cast<std::uint64_t>(ov.at(static_cast<std::size_t>(e)).position);
      base = -1;
      first_last = s.base + ov.at(static_cast<std::size_t>(e)).rel_offset;
    }
  }
  std::vector<std::byte> bytes, storage;
  while (pos < s.size && (base < 0 || base < limit)) {
    auto h = header_at(s, pos);
    if (!h) return std::unexpected(h.error());
    BatchInfo bi = batch::parse_header(*h);
    std::int64_t blast = bi.base_offset + bi.last_offset_delta;
    if ((base >= 0 && bi.base_offset != base) || (base < 0 && blast != first_last)) {
      return std::unexpected(corrupt(s, pos, "batch offsets do not match the index"));
    }
    if (blast >= limit) break;
    if (bi.max_timestamp >= ts && blast >= log_start_) {
      bytes.resize(static_cast<std::size_t>(bi.length));
      ssize_t n = detail::pread_full(s.file->fd, bytes.data(), bytes.size(), pos);
      if (n < 0) return std::unexpected(sys_error("read", s.file->path, static_cast<int>(-n)));
      if (static_cast<std::size_t>(n) != bytes.size()) {
        return std::unexpected(corrupt(s, pos, "the file ends inside a batch"));
      }
      auto v = batch::validate(bytes, 0);
      if (!v) return std::unexpected(corrupt(s, pos, v.error().detail));
      if (bi.log_append_time()) {
        return std::optional<OffsetAndTimestamp>(
            OffsetAndTimestamp{std::max(bi.base_offset, log_start_), bi.max_timestamp});
      }
      auto recs = batch::records_of(bytes, storage);
      if (!recs) return std::unexpected(corrupt(s, pos, recs.error().detail));
      batch::RecordReader rr(*recs, bi.record_count);
      for (;;) {
        auto r = rr.next();
        if (!r) return std::unexpected(corrupt(s, pos, r.error().detail));
        if (!*r) break;
        std::int64_t off = bi.base_offset + (*r)->offset_delta;
        std::int64_t rts = bi.base_timestamp + (*r)->timestamp_delta;
        if (rts >= ts && off >= log_start_) {
          return std::optional<OffsetAndTimestamp>(OffsetAndTimestamp{off, rts});
        }
      }
    }
    pos += static_cast<std::uint64_t>(bi.length);
    base = blast + 1;
  }
  return std::optional<OffsetAndTimestamp>{};
}

Result<std::optional<OffsetAndTimestamp>> Log::Impl::offset_for_timestamp(std::int64_t ts) const {
  if (fence_) return fenced_error();
  window_file_ = nullptr;
  for (std::size_t i = find_segment(log_start_); i < segs_.size(); ++i) {
    const Segment& s = *segs_[i];
    if (s.base >= written_end_) break;
    if (s.max_timestamp < ts) continue;
    auto r = find_timestamp(s, ts, written_end_);
    if (!r || *r) return r;
  }
  return std::optional<OffsetAndTimestamp>{};
}

Result<std::optional<OffsetAndTimestamp>> Log::Impl::max_timestamp() const {
  if (fence_) return fenced_error();
  window_file_ = nullptr;
  const Segment* best = nullptr;
  for (std::size_t i = find_segment(log_start_); i < segs_.size(); ++i) {
    const Segment& s = *segs_[i];
    if (s.base >= written_end_ || s.next_offset <= log_start_) continue;
    if (s.max_timestamp >= 0 && (!best || s.max_timestamp > best->max_timestamp)) best = &s;
  }
  if (!best) return std::optional<OffsetAndTimestamp>{};
  auto r = find_timestamp(*best, best->max_timestamp, written_end_);
  if (!r || *r) return r;
  // The largest timestamp belongs to a batch not written yet: take the written part's largest.
  std::optional<OffsetAndTimestamp> found;
  std::uint64_t pos = 0;
  std::int64_t base = best->base;
  while (pos < best->size && base < written_end_) {
    auto h = header_at(*best, pos);
    if (!h) return std::unexpected(h.error());
    BatchInfo bi = batch::parse_header(*h);
    if (bi.base_offset + bi.last_offset_delta >= written_end_) break;
    if (!found || bi.max_timestamp > found->timestamp) {
      found = OffsetAndTimestamp{bi.base_offset, bi.max_timestamp};
    }
    pos += static_cast<std::uint64_t>(bi.length);
    base = bi.base_offset + bi.last_offset_delta + 1;
  }
  if (!found || found->timestamp < 0) return std::optional<OffsetAndTimestamp>{};
  return find_timestamp(*best, found->timestamp, written_end_);
}

// ---------------------------------------------------------------------------------------------
// Truncation, deletion, retention, close

Result<void> Log::Impl::truncate_to(std::int64_t offset) {
  if (fence_) return fenced_error();
  if (!idle()) {
    return fail(Errc::busy, "truncate_to needs the log idle: appends are queued or in flight");
  }
  if (offset >= leo_) return {};
  if (offset < log_start_) {
    return fail(
        Errc::offset_out_of_range,
        fmt("cannot truncate to %" PRId64 ", below the log start %" PRId64, offset, log_start_));
  }
  window_file_ = nullptr;
  std::size_t si = find_segment(offset);
  Segment& s = *segs_[si];
  auto loc = locate(s, offset);
  if (!loc) return std::unexpected(loc.error());
  const std::uint64_t cut = loc->position;
  const std::int64_t new_end = loc->base_offset;
  const bool was_active = is_active(s);

  while (segs_.size() > si + 1) {
    LOG_INFO("truncation to %" PRId64 " removes %s", offset, segs_.back()->file->path.c_str());
    remove_segment_files(*segs_.back(), false);
    segs_.pop_back();
  }
  // s is the active segment now. Its index entries below the cut stay; the largest timestamp
  // is the last time entry's, or a later batch's before the cut.
  if (was_active) {
    std::vector<std::byte> off = ib_.offsets, tim = ib_.times;
    ib_.restore(s.base, cfg_.index_interval_bytes, off, tim, cut, new_end);
    while (!ring_.empty() && ring_.back().base_offset >= new_end)
      ring_.pop_back();
  } else {
    ib_.restore(s.base, cfg_.index_interval_bytes, s.offset_index.bytes(), s.time_index.bytes(),
                cut, new_end);
    s.offset_index = IndexFile();
    s.time_index = IndexFile();
    ring_.clear();
  }
  OffsetIndexView ov = ib_.offset_view();
  detail::ScanOptions so{.end = cut, .verify_crc = false};
  if (ov.size()) {
    so.from = static_cast<std::uint64_t>(ov.at(ov.size() - 1).position);
    so.expected_first_last = s.base + ov.at(ov.size() - 1).rel_offset;
  } else {
    so.expected_base = s.base;
  }
  auto out =
      detail::scan_batches(s.file->fd, s.file->path, so, [&](const BatchInfo& b, std::uint64_t) {
        ib_.observe(b.base_offset + b.last_offset_delta, b.max_timestamp);
      });
  if (!out) return std::unexpected(out.error());
  if (!out->problem.empty()) {
    return std::unexpected(corrupt(s, out->valid_end, out->problem));
  }
  if (::ftruncate(s.file->fd, static_cast<off_t>(cut)) != 0) {
    return std::unexpected(fence(sys_error("truncate", s.file->path, errno)));
  }
  if (::fdatasync(s.file->fd) != 0) {
    return std::unexpected(fence(sys_error("fdatasync", s.file->path, errno)));
  }
  for (const char* suffix : {kIndexSuffix, kTimeIndexSuffix}) {
    if (auto r = detail::write_whole_file(path_of(s.base, suffix), {}); !r) {
      return std::unexpected(fence(r.error()));
    }
  }
  if (::fsync(dir_fd_) != 0) return std::unexpected(fence(sys_error("fsync", dir_, errno)));
  s.size = cut;
  s.next_offset = new_end;
  s.max_timestamp = ib_.max_timestamp;
  if (cut == 0) {
    s.first_batch_timestamp = -1;
    s.created_ms = wall_ms();
  }
  leo_ = new_end;
  written_end_ = std::min(written_end_, new_end);
  durable_end_ = std::min(durable_end_, new_end);
  synced_end_ = std::min(synced_end_, new_end);
  log_start_ = std::min(log_start_, new_end);
  if (auto r = epochs_.truncate_from_end(new_end); !r) return r;
  LOG_INFO("truncated %s to offset %" PRId64, dir_.c_str(), new_end);
  return checkpoint_now();
}

Result<void> Log::Impl::truncate_fully_and_start_at(std::int64_t offset) {
  if (fence_) return fenced_error();
  if (!idle()) {
    return fail(Errc::busy, "truncate_fully_and_start_at needs the log idle");
  }
  if (offset < 0) return fail(Errc::offset_out_of_range, "negative start offset");
  for (auto& s : segs_)
    remove_segment_files(*s, false);
  segs_.clear();
  if (auto r = create_segment(offset); !r) return std::unexpected(fence(r.error()));
  dir_sync_needed_ = false;
  if (::fsync(dir_fd_) != 0) return std::unexpected(fence(sys_error("fsync", dir_, errno)));
  log_start_ = leo_ = written_end_ = durable_end_ = synced_end_ = offset;
  if (auto r = epochs_.clear(); !r) return r;
  LOG_INFO("restarted %s at offset %" PRId64, dir_.c_str(), offset);
  return checkpoint_now();
}

Result<std::int64_t> Log::Impl::delete_records(std::int64_t offset) {
  if (fence_) return fenced_error();
  if (offset > leo_ || offset < 0) {
    return fail(
        Errc::offset_out_of_range,
        fmt("cannot delete records before %" PRId64 ": the log ends at %" PRId64, offset, leo_));
  }
  if (offset <= log_start_) return log_start_;
  log_start_ = offset;
  while (segs_.size() > 1 && segs_[1]->base <= log_start_ &&
         segs_.front()->next_offset <= written_end_) {
    remove_segment_files(*segs_.front(), true);
    segs_.pop_front();
  }
  if (auto r = epochs_.truncate_from_start(log_start_); !r) return std::unexpected(r.error());
  if (auto r = checkpoint_now(); !r) return std::unexpected(r.error());
  return log_start_;
}

std::vector<std::filesystem::path> Log::Impl::apply_retention(std::int64_t now_ms) {
  std::vector<std::filesystem::path> out;
  if (!fence_) {
    std::uint64_t total = total_size();
    bool changed = false;
    while (segs_.size() > 1) {
      const Segment& s = *segs_.front();
      if (s.next_offset > written_end_) break;  // never data still on its way to the file
      bool by_time =
          cfg_.retention_ms >= 0 && now_ms - effective_max_timestamp(s) > cfg_.retention_ms;
      bool by_size = cfg_.retention_bytes >= 0 &&
                     total - s.size >= static_cast<std::uint64_t>(cfg_.retention_bytes);
      bool by_start = segs_[1]->base <= log_start_;
      if (!by_time && !by_size && !by_start) break;
      LOG_INFO("retention removes %s (%s)", s.file->path.c_str(),
               by_start  ? "below the log start"
               : by_time ? "retention.ms"
                         : "retention.bytes");
      remove_segment_files(s, true);
      total -= s.size;
      segs_.pop_front();
      changed = true;
    }
    if (changed) {
      log_start_ = std::max(log_start_, segs_.front()->base);
      if (auto r = epochs_.truncate_from_start(log_start_); !r) {
        LOG_WARN("%s: %s", dir_.c_str(), r.error().detail.c_str());
      }
      publish();
    }
  }
  out.swap(pending_deletes_);
  return out;
}

Result<void> Log::Impl::close() {
  if (closed_) return {};
  if (fence_) return fenced_error();
  if (!idle()) return fail(Errc::busy, "close needs the log idle: appends are in flight");
  Segment& s = active();
  ib_.finish();
  for (const auto& [suffix, bytes] :
       {std::pair{kIndexSuffix, &ib_.offsets}, std::pair{kTimeIndexSuffix, &ib_.times}}) {
    if (auto r = detail::write_whole_file(path_of(s.base, suffix), *bytes, true); !r) return r;
  }
  if (::fdatasync(s.file->fd) != 0) {
    return std::unexpected(sys_error("fdatasync", s.file->path, errno));
  }
  if (::fsync(dir_fd_) != 0) return std::unexpected(sys_error("fsync", dir_, errno));
  synced_end_ = durable_end_ = written_end_ = leo_;
  closed_ = true;
  publish();
  if (state_) state_->closed_cleanly.store(true, std::memory_order_release);
  return {};
}

// ---------------------------------------------------------------------------------------------
// Log: the public face

Log::Log(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  impl_->owner_ = this;
}

Log::~Log() {
  if (!impl_) return;
  if (impl_->in_flight_ || impl_->queued) {
    // The kernel (or the reactor's hook list) still points into impl_: keep it alive, inert.
    LOG_ERROR("log %s destroyed with appends in flight; leaking its state", impl_->dir_.c_str());
    impl_->orphaned_ = true;
    impl_->listener_ = nullptr;
    (void)impl_.release();
  }
}

Result<std::unique_ptr<Log>> Log::open(Reactor& r, std::filesystem::path dir, LogConfig cfg,
                                       OpenOptions opts) {
  auto impl = std::make_unique<Impl>(r, std::move(dir), cfg);
  if (auto res = impl->load(opts); !res) return std::unexpected(res.error());
  return std::unique_ptr<Log>(new Log(std::move(impl)));
}

Result<BatchInfo> Log::validate_batch(std::span<const std::byte> b, std::uint32_t max_batch_bytes) {
  return batch::validate(b, max_batch_bytes);
}

Result<AppendResult> Log::append(AppendOp* op) {
  return impl_->append(op, false, nullptr);
}
Result<BatchInfo> Log::prepare(AppendOp* op) const {
  return impl_->prepare(op);
}
Result<AppendResult> Log::append_prepared(AppendOp* op, const BatchInfo& info) {
  return impl_->append(op, false, &info);
}
Result<AppendResult> Log::append_replicated(AppendOp* op) {
  return impl_->append(op, true, nullptr);
}
Result<ReadResult> Log::read(std::int64_t offset, std::size_t max_bytes, std::int64_t max_offset,
                             bool min_one) const {
  return impl_->read(offset, max_bytes, max_offset, min_one);
}
Result<std::optional<OffsetAndTimestamp>> Log::offset_for_timestamp(std::int64_t ts) const {
  return impl_->offset_for_timestamp(ts);
}
Result<std::optional<OffsetAndTimestamp>> Log::max_timestamp() const {
  return impl_->max_timestamp();
}
Result<void> Log::truncate_to(std::int64_t offset) {
  return impl_->truncate_to(offset);
}
Result<void> Log::truncate_fully_and_start_at(std::int64_t offset) {
  return impl_->truncate_fully_and_start_at(offset);
}
Result<std::int64_t> Log::delete_records(std::int64_t offset) {
  return impl_->delete_records(offset);
}
std::vector<std::filesystem::path> Log::apply_retention(std::int64_t now_ms) {
  return impl_->apply_retention(now_ms);
}
void Log::maybe_roll(std::int64_t now_ms) {
  Impl& m = *impl_;
  if (m.fence_ || m.closed_) return;
  const Segment& s = m.active();
  if (s.size == 0) return;
  std::int64_t since = s.first_batch_timestamp >= 0 ? s.first_batch_timestamp : s.created_ms;
  if (now_ms - since <= m.cfg_.segment_ms) return;
  if (auto r = m.roll(now_ms); !r)
    LOG_WARN("%s: roll failed: %s", m.dir_.c_str(), r.error().detail.c_str());
}
Result<void> Log::close() {
  return impl_->close();
}
bool Log::idle() const {
  return impl_->idle();
}
std::int64_t Log::log_start_offset() const {
  return impl_->log_start_;
}
std::int64_t Log::log_end_offset() const {
  return impl_->leo_;
}
std::int64_t Log::written_end_offset() const {
  return impl_->written_end_;
}
std::int64_t Log::durable_end_offset() const {
  return impl_->durable_end_;
}
std::int64_t Log::recovery_point() const {
  return impl_->synced_end_;
}
std::uint64_t Log::size_bytes() const {
  return impl_->total_size();
}
std::size_t Log::segment_count() const {
  return impl_->segs_.size();
}
bool Log::fenced() const {
  return impl_->fence_.has_value();
}
const LogConfig& Log::config() const {
  return impl_->cfg_;
}
void Log::set_config(const LogConfig& cfg) {
  impl_->cfg_ = cfg;
  Impl::normalize(impl_->cfg_);
  impl_->ib_.interval = impl_->cfg_.index_interval_bytes;
}
const std::filesystem::path& Log::dir() const {
  return impl_->dir_;
}
void Log::set_listener(Listener* l) {
  impl_->listener_ = l;
}
Result<void> Log::scan_batch_headers(std::int64_t from,
                                     const std::function<bool(const BatchInfo&)>& f) const {
  // Whole batches come back as slices of the segment files; only their headers are read.
  std::byte h[batch::kHeaderSize];
  std::int64_t offset = std::max(from, log_start_offset());
  const std::int64_t end = written_end_offset();
  while (offset < end) {
    auto rr = read(offset, 64u << 20, end, true);
    if (!rr) return std::unexpected(rr.error());
    if (rr->slices.empty()) break;
    for (const Slice& sl : rr->slices) {
      std::uint64_t pos = sl.position;
      const std::uint64_t stop = sl.position + sl.length;
      while (pos + batch::kHeaderSize <= stop) {
        std::size_t got = 0;
        while (got < sizeof h) {
          ssize_t n = ::pread(sl.file->fd, h + got, sizeof h - got, static_cast<off_t>(pos + got));
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0)
            return std::unexpected(sys_error("pread", sl.file->path, n < 0 ? errno : EIO));
          got += static_cast<std::size_t>(n);
        }
        BatchInfo info = batch::parse_header(h);
        if (info.length < static_cast<std::int32_t>(batch::kHeaderSize)) {
          return fail(Errc::fenced, fmt("batch header at byte %" PRIu64 " of %s has length %d", pos,
                                        sl.file->path.c_str(), info.length));
        }
        if (!f(info)) return {};
        pos += static_cast<std::uint64_t>(info.length);
      }
    }
    if (rr->next_offset <= offset) break;
    offset = rr->next_offset;
  }
  return {};
}

LeaderEpochCache& Log::leader_epochs() {
  return impl_->epochs_;
}
const Log::Stats& Log::stats() const {
  return impl_->stats_;
}

}  // namespace samsa::io
