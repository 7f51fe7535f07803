#include "io/log.h"

#include "io/log_impl.h"

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
    case Errc::invalid_record:
      return "invalid_record";
    case Errc::would_block:
      return "would_block";
    case Errc::io_error:
      return "io_error";
    case Errc::not_found:
      return "not_found";
    case Errc::busy:
      return "busy";
  }
  return "unknown";
}

Log::Impl::~Impl() {
  r_.disarm(&flush_timer_);
  if (state_ && log_dir_ && id_) log_dir_->detach(*id_, state_);
  if (dir_sync_fd_ >= 0) ::close(dir_sync_fd_);
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
Result<AppendResult> Log::append_replicated(AppendOp* op, BatchVisitor* visit) {
  return impl_->append(op, true, nullptr, visit);
}
Result<ReadResult> Log::read(std::int64_t offset, std::size_t max_bytes, std::int64_t max_offset,
                             bool min_one, ReadAhead* ra) const {
  Impl::WithReadAhead w(*impl_, ra, max_bytes);
  return impl_->read(offset, max_bytes, max_offset, min_one);
}
Result<std::optional<OffsetAndTimestamp>> Log::offset_for_timestamp(std::int64_t ts,
                                                                    ReadAhead* ra) const {
  Impl::WithReadAhead w(*impl_, ra, 0);
  return impl_->offset_for_timestamp(ts);
}
Result<std::optional<OffsetAndTimestamp>> Log::max_timestamp(ReadAhead* ra) const {
  Impl::WithReadAhead w(*impl_, ra, 0);
  return impl_->max_timestamp();
}

void Log::fill(ReadAhead& ra, std::function<void(std::optional<std::string>)> done) {
  if (!ra.want_file_ || ra.filling_) {
    done(std::string("nothing to read ahead"));
    return;
  }
  if (ra.size_ < ra.want_len_) {
    ra.buf_ = std::make_unique_for_overwrite<std::byte[]>(ra.want_len_);
    ra.size_ = ra.want_len_;
  }
  ra.file_.reset();
  ra.len_ = 0;
  ra.filling_ = true;
  ra.on_filled_ = std::move(done);
  ra.fill_c_.self = &ra;
  ra.fill_c_.fn = [](Completion* c, int res, std::uint32_t) {
    ReadAhead& r = *static_cast<ReadAhead::FillCompletion*>(c)->self;
    r.filling_ = false;
    std::optional<std::string> err;
    if (res < 0) {
      err = "read " + r.want_file_->path.string() + ": " + std::strerror(-res);
    } else {
      r.file_ = r.want_file_;
      r.pos_ = r.want_pos_;
      r.len_ = static_cast<std::size_t>(res);
    }
    r.want_file_.reset();
    auto cb = std::move(r.on_filled_);
    cb(std::move(err));
  };
  io_uring_prep_read(impl_->r_.sqe(&ra.fill_c_), ra.want_file_->fd, ra.buf_.get(),
                     static_cast<unsigned>(ra.want_len_), ra.want_pos_);
  ++impl_->stats_.read_ahead_fills;
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
std::unique_ptr<CleanPlan> Log::plan_cleaning(const CleanRequest& req) {
  return impl_->plan_cleaning(req);
}
Result<void> Log::commit_cleaning(const CleanPlan& plan, const CleanResult& result) {
  return impl_->commit_cleaning(plan, result);
}
void Log::abort_cleaning(const CleanPlan& plan) {
  impl_->abort_cleaning(plan);
}
Log::CompactionInfo Log::compaction_info() const {
  return impl_->compaction_info();
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
  return impl_->trusted_end();
}
std::uint64_t Log::size_bytes() const {
  return impl_->total_size();
}
std::size_t Log::segment_count() const {
  return impl_->segs_.size();
}
std::int64_t Log::active_segment_base() const {
  return impl_->active().base;
}
std::uint64_t Log::active_segment_bytes() const {
  return impl_->active().size;
}
bool Log::fenced() const {
  return impl_->fence_.has_value();
}
const LogConfig& Log::config() const {
  return impl_->cfg_;
}
void Log::set_config(const LogConfig& cfg) {
  impl_->set_config(cfg);
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

bool Log::defer_close_syncs() {
  if (!impl_->log_dir_ || !impl_->log_dir_->close_syncs_deferred()) return false;
  impl_->log_dir_->note_unsynced_close();
  return true;
}

LeaderEpochCache& Log::leader_epochs() {
  return impl_->epochs_;
}
const Log::Stats& Log::stats() const {
  return impl_->stats_;
}

}  // namespace samsa::io
