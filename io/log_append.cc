// io::Log: appends and the group commit (see io/README.md, "Write path").
#include "io/log_impl.h"

namespace samsa::io {

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

Result<void> Log::Impl::roll(std::int64_t /*now_ms*/, bool write_index) {
  Segment& old = active();
  // The old segment is closed at once, its index served from memory; the files are written
  // and synced off the reactor (a roll never blocks the loop on the disk).
  ib_.finish();
  auto offsets = std::make_shared<const std::vector<std::byte>>(std::move(ib_.offsets));
  auto times = std::make_shared<const std::vector<std::byte>>(std::move(ib_.times));
  old.offset_index = IndexFile::adopt(offsets);
  old.time_index = IndexFile::adopt(times);
  old.max_timestamp = ib_.max_timestamp;
  if (write_index) write_index_files(old, std::move(offsets), std::move(times));
  if (auto r = create_segment(leo_); !r) return r;
  ++stats_.rolls;
  LOG_DEBUG("rolled %s at offset %" PRId64, dir_.c_str(), leo_);
  if (listener_ && owner_) listener_->on_log_rolled(*owner_, leo_);
  return {};
}

void Log::Impl::write_index_files(Segment& s, std::shared_ptr<const std::vector<std::byte>> offsets,
                                  std::shared_ptr<const std::vector<std::byte>> times) {
  s.index_pending = true;
  ++index_jobs_;
  using Files = std::pair<IndexFile, IndexFile>;
  offload(
      r_, offload_key_,
      [ip = path_of(s.base, kIndexSuffix), tp = path_of(s.base, kTimeIndexSuffix), offsets,
       times]() -> Result<Files> {
        if (auto r = detail::write_whole_file(ip, *offsets, true); !r)
          return std::unexpected(r.error());
        if (auto r = detail::write_whole_file(tp, *times, true); !r)
          return std::unexpected(r.error());
        auto oi = IndexFile::load(ip);
        if (!oi) return std::unexpected(oi.error());
        auto ti = IndexFile::load(tp);
        if (!ti) return std::unexpected(ti.error());
        return Files{std::move(*oi), std::move(*ti)};
      },
      // The segment cannot go away meanwhile (retention and truncation wait for it), and a
      // Log destroyed with this job pending leaves its state behind, orphaned.
      [this, sp = &s](Result<Files> r) {
        --index_jobs_;
        sp->index_pending = false;
        if (orphaned_) return;
        if (!r) {
          fence(r.error());
          return;
        }
        // Mapped from now on: the entries no longer cost heap memory.
        sp->offset_index = std::move(r->first);
        sp->time_index = std::move(r->second);
        publish();
      });
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
  if (cfg_.cleanup_compact && !v->is_control()) {
    // Kafka's rule: compaction keeps records by key, so a compacted topic refuses records
    // without one (the batch is decompressed to look, as Kafka does).
    thread_local std::vector<std::byte> storage;
    auto recs = batch::records_of(b, storage);
    if (!recs) return fail(Errc::corrupt_batch, recs.error().detail);
    batch::RecordReader rr(*recs, v->record_count);
    for (std::int32_t i = 0;; ++i) {
      auto r = rr.next();
      if (!r) return fail(Errc::corrupt_batch, r.error().detail);
      if (!*r) break;
      if (!(*r)->key) {
        return fail(Errc::invalid_record,
                    fmt("Compacted topic cannot accept message without key in topic partition "
                        "%s (record %d of the batch)",
                        dir_.filename().c_str(), i));
      }
    }
  }
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
    v->crc = load_be<std::uint32_t>(b.data() + batch::kCrc);
  }
  return v;
}

// A follower's batches: each valid, continuing the log exactly; the first and last in *first
// and *last, their number returned.
Result<std::int64_t> Log::Impl::check_replicated(std::span<std::byte> b, BatchInfo* first,
                                                 BatchInfo* last) const {
  std::size_t pos = 0;
  std::int64_t expect = leo_;
  std::int64_t n_batches = 0;
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
    auto v = batch::validate(b.subspan(pos, len), cfg_.max_batch_bytes, nullptr, form());
    if (!v) {
      v.error().detail = fmt("batch %" PRId64 " at byte %zu: ", n_batches, pos) + v.error().detail;
      return std::unexpected(std::move(v.error()));
    }
    // A compacted leader's batches have gaps between them: offsets only have to increase.
    if (!gap_ok(v->base_offset, expect)) {
      return fail(Errc::offset_out_of_range,
                  fmt("batch %" PRId64 " has base offset %" PRId64 ", the log needs %" PRId64 "%s",
                      n_batches, v->base_offset, expect, gaps_ok_ ? " or more" : ""));
    }
    if (n_batches == 0) *first = *v;
    *last = *v;
    expect = v->base_offset + v->last_offset_delta + 1;
    ++n_batches;
    pos += len;
  }
  if (n_batches == 0) return fail(Errc::invalid_length, "no batch given");
  return n_batches;
}

// The accepted op joins the next group commit (its run of the active segment).
void Log::Impl::stage(AppendOp* op, Segment& s, std::uint64_t pos) {
  op->error.reset();
  op->next = nullptr;
  if (staged_tail_) {
    staged_tail_->next = op;
  } else {
    staged_head_ = op;
  }
  staged_tail_ = op;
  if (staged_runs_head_ == staged_runs_.size() || staged_runs_.back().file != s.file.get()) {
    staged_runs_.push_back(Run{s.file.get(), pos, op, 0, 0});
  }
  staged_runs_.back().count++;
  staged_runs_.back().bytes += op->batch.size();
  ++stats_.appends;
  r_.at_turn_end(this);
}

Result<AppendResult> Log::Impl::append(AppendOp* op, bool replicated, const BatchInfo* prepared,
                                       Log::BatchVisitor* visit) {
  if (fence_) return fenced_error();
  if (closed_) return fail(Errc::fenced, "log " + dir_.string() + " is closed");
  std::span<std::byte> b = op->batch;
  BatchInfo first{}, lastb{};
  std::int64_t n_batches = 1;
  if (replicated) {
    auto n = check_replicated(b, &first, &lastb);
    if (!n) return std::unexpected(std::move(n.error()));
    n_batches = *n;
  } else if (prepared) {
    first = lastb = *prepared;
  } else {
    auto v = prepare(op);
    if (!v) return std::unexpected(std::move(v.error()));
    first = lastb = *v;
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
  // Open (the budget may have closed it) before anything changes: stage() runs on it.
  if (auto f = file(active()); !f) return std::unexpected(f.error());

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
  const std::uint64_t pos = s.size;
  active_clean_ = false;
  if (replicated && s.size > 0 && base > s.next_offset) s.gapped = true;
  if (n_batches == 1) {
    std::int64_t ts = append_time ? now : first.max_timestamp;
    ib_.add(last, ts, pos, b.size());
    ring_.push(base, pos);
    if (s.size == 0) s.first_batch_timestamp = ts;
    if (visit) visit->on_batch(first, b);
  } else {
    std::size_t p = 0;
    std::int64_t expect = base;
    while (p < b.size()) {
      BatchInfo i = batch::parse_header(b.data() + p);
      if (i.base_offset > expect) s.gapped = true;
      expect = i.base_offset + i.last_offset_delta + 1;
      ib_.add(i.base_offset + i.last_offset_delta, i.max_timestamp, pos + p,
              static_cast<std::uint64_t>(i.length));
      ring_.push(i.base_offset, pos + p);
      if (s.size == 0 && p == 0) s.first_batch_timestamp = i.max_timestamp;
      if (visit) visit->on_batch(i, b.subspan(p, static_cast<std::size_t>(i.length)));
      p += static_cast<std::size_t>(i.length);
    }
  }
  s.size += b.size();
  s.next_offset = last + 1;
  s.max_timestamp = ib_.max_timestamp;
  leo_ = last + 1;
  op->result = AppendResult{base, last, append_time ? now : -1, log_start_};
  stage(op, s, pos);
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
  if (!in_flight_ && flush_due_ && !fence_ && !closed_) submit_flush();
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
  flight_sync_ = sync_due(flight_end_);
  if (flight_sync_) {
    add_sync_only_runs();
  } else {
    for (const FlightRun& fr : flight_) {
      if (std::find(unsynced_files_.begin(), unsynced_files_.end(), fr.file) ==
          unsynced_files_.end())
        unsynced_files_.push_back(fr.file);
    }
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
  if (dir_sync_needed_ && flight_sync_) submit_dir_sync();
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
  if (fr.total == 0) {
    // A file written by earlier groups that did not sync: only its fdatasync.
    io_uring_prep_fsync(r_.sqe(&fr.sc), fr.file->fd, IORING_FSYNC_DATASYNC);
    fr.sync_pending = true;
    fr.submitted_ns = mono_ns();
    ++stats_.fdatasyncs;
    return;
  }
  // A link must not straddle a submission boundary, or the sync could run before the write.
  if (io_uring_sq_space_left(r_.ring()) < 2) io_uring_submit(r_.ring());
  io_uring_sqe* w = r_.sqe(&fr.wc);
  io_uring_prep_writev(w, fr.file->fd, &iov_[fr.iov_begin], static_cast<unsigned>(fr.iov_count),
                       fr.position + fr.done);
  fr.write_pending = true;
  ++stats_.write_submissions;
  if (flight_sync_) {
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
  if (!fr.err && (fr.resubmit || (fr.sync_again && flight_sync_))) {
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

void Log::Impl::submit_dir_sync() {
  dir_sync_needed_ = false;
  dir_sync_pending_ = true;
  dir_sync_err_ = 0;
  dir_c_.fn = &Impl::on_dir_cqe;
  dir_c_.log = this;
  dir_sync_fd_ = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_sync_fd_ < 0) {
    // Completed through the ring like a failed fsync, so the group fails the same way.
    io_uring_prep_nop(r_.sqe(&dir_c_));
    dir_open_errno_ = errno;
  } else {
    io_uring_prep_fsync(r_.sqe(&dir_c_), dir_sync_fd_, 0);
  }
  ++stats_.dir_fsyncs;
}

void Log::Impl::on_dir_cqe(Completion* c, int res, std::uint32_t) {
  Impl* self = static_cast<DirCompletion*>(c)->log;
  if (self->dir_sync_fd_ >= 0) {
    ::close(self->dir_sync_fd_);
    self->dir_sync_fd_ = -1;
  } else if (res >= 0) {
    res = -self->dir_open_errno_;
  }
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
      if (op->durability == Durability::written || !flight_sync_) {
        *link = op->next;
        op->next = nullptr;
        *done_tail = op;
        done_tail = &op->next;
      } else {
        link = &op->next;
      }
    }
    if (!flight_sync_) durable_end_ = std::max(durable_end_, flight_end_);
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
      if (flight_sync_) {
        synced_end_ = std::max(synced_end_, flight_end_);
        if (synced_end_ >= written_end_) {
          unsynced_since_ns_ = -1;
          r_.disarm(&flush_timer_);
        }
      } else if (unsynced_since_ns_ < 0) {
        unsynced_since_ns_ = mono_ns();
        arm_flush_timer();
      }
      publish();
      advanced = true;
      *done_tail = rest;
      if (staged_head_ || flush_due_) r_.at_turn_end(this);
    }
    // The group no longer needs its files: an idle log's may be closed by the budget.
    for (FlightRun& fr : flight_)
      fr.file.reset();
  }
  if (advanced && listener_) listener_->on_log_advanced(*owner_);
  complete_list(done_now);  // may destroy the log: nothing after this
}

// Every file that earlier groups wrote without a sync joins the syncing group as an
// fdatasync-only run, so the group's end really is on disk when it completes.
void Log::Impl::add_sync_only_runs() {
  flush_due_ = false;
  for (auto& f : unsynced_files_) {
    bool in_group = false;
    for (const FlightRun& fr : flight_)
      if (fr.file == f) in_group = true;
    if (in_group) continue;
    FlightRun fr;
    fr.file = std::move(f);
    flight_.push_back(std::move(fr));
  }
  unsynced_files_.clear();
}

// flush.ms elapsed (or fsync was turned on) with nothing queued: a group of syncs only.
void Log::Impl::submit_flush() {
  if (unsynced_files_.empty() || in_flight_) {
    flush_due_ = unsynced_files_.empty() ? false : flush_due_;
    return;
  }
  flight_.clear();
  flight_sync_ = true;
  add_sync_only_runs();
  flight_head_ = nullptr;
  flight_end_ = written_end_;
  flight_written_ = true;  // nothing to write
  in_flight_ = true;
  for (std::size_t i = 0; i < flight_.size(); ++i) {
    FlightRun& fr = flight_[i];
    fr.wc.fn = fr.sc.fn = &Impl::on_run_cqe;
    fr.wc.log = fr.sc.log = this;
    fr.wc.run = fr.sc.run = static_cast<std::uint32_t>(i);
    fr.wc.sync = false;
    fr.sc.sync = true;
    submit_run(fr);
  }
  if (dir_sync_needed_) submit_dir_sync();
}

void Log::Impl::arm_flush_timer() {
  if (cfg_.fsync || unsynced_since_ns_ < 0 || cfg_.flush_ms == INT64_MAX) return;
  const std::int64_t wait_ns = cfg_.flush_ms >= INT64_MAX / 1'000'000
                                   ? INT64_MAX - unsynced_since_ns_
                                   : cfg_.flush_ms * 1'000'000;
  const std::int64_t deadline =
      wait_ns > INT64_MAX - unsynced_since_ns_ ? INT64_MAX : unsynced_since_ns_ + wait_ns;
  flush_timer_.log = this;
  flush_timer_.fn = &Impl::on_flush_timer;
  r_.arm(&flush_timer_, deadline);
}

void Log::Impl::on_flush_timer(Timer* t) {
  Impl* self = static_cast<FlushTimer*>(t)->log;
  if (self->orphaned_ || self->closed_ || self->fence_) return;
  self->flush_due_ = true;
  // The group in flight (if any) re-queues the hook when it completes.
  if (!self->in_flight_) self->r_.at_turn_end(self);
}

void Log::Impl::set_config(const LogConfig& cfg) {
  // Appends accepted so far were promised a sync: they keep it (see sync_owed_end_).
  if (cfg_.fsync && !cfg.fsync) sync_owed_end_ = leo_;
  cfg_ = cfg;
  normalize(cfg_);
  ib_.interval = cfg_.index_interval_bytes;
  if (auto r = allow_gaps_if_compacted(); !r) {
    // Without the marker the log keeps refusing gaps (and the cleaner leaves it alone).
    LOG_WARN("%s: cannot mark the log compacted: %s", dir_.c_str(), r.error().detail.c_str());
  }
  if (unsynced_since_ns_ < 0 || closed_ || fence_) return;
  if (cfg_.fsync || written_end_ - synced_end_ >= cfg_.flush_messages) {
    flush_due_ = true;
    r_.at_turn_end(this);
  } else {
    r_.disarm(&flush_timer_);
    arm_flush_timer();  // flush.ms may have changed
  }
}

}  // namespace samsa::io
