// io::Log: truncation, delete_records, retention and close.
#include "io/log_impl.h"

namespace samsa::io {

// ---------------------------------------------------------------------------------------------
// Truncation, deletion, retention, close

Result<void> Log::Impl::truncate_to(std::int64_t offset) {
  if (fence_) return fenced_error();
  if (!idle()) {
    return fail(Errc::busy, "truncate_to needs the log idle: appends are queued or in flight");
  }
  if (offset >= leo_) {
    // Nothing to cut, but the epoch cache may end with an epoch this log began and never
    // appended to (it led, then lost the leadership before any record). A follower that kept
    // it would name it as its last fetched epoch, be told it diverges, truncate to here, and
    // ask again forever, never rejoining the ISR. Kafka's truncateTo drops it the same way.
    return epochs_.truncate_from_end(leo_);
  }
  if (offset < log_start_) {
    return fail(
        Errc::offset_out_of_range,
        fmt("cannot truncate to %" PRId64 ", below the log start %" PRId64, offset, log_start_));
  }
  read_scratch().window_file = nullptr;
  active_clean_ = false;
  ++generation_;  // a cleaning pass in flight read what this may cut
  std::size_t si = find_segment(offset);
  Segment& s = *segs_[si];
  auto loc = locate(s, offset);
  if (!loc) return std::unexpected(loc.error());
  const std::uint64_t cut = loc->position;
  // offset in a gap compaction left (between batches, or after a closed segment's last one):
  // the log ends at offset itself, nothing at or above it survives.
  const std::int64_t new_end = loc->base_offset < 0 ? offset : std::min(offset, loc->base_offset);
  const bool was_active = is_active(s);

  while (segs_.size() > si + 1) {
    LOG_INFO("truncation to %" PRId64 " removes %s", offset, log_path(*segs_.back()).c_str());
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
  auto held = file(s);
  if (!held) return std::unexpected(held.error());
  SegmentFile& sf = **held;
  OffsetIndexView ov = ib_.offset_view();
  detail::ScanOptions so{.end = cut, .verify_crc = false, .allow_gaps = gaps_ok_};
  if (ov.size()) {
    so.from = static_cast<std::uint64_t>(ov.at(ov.size() - 1).position);
    so.expected_first_last = s.base + ov.at(ov.size() - 1).rel_offset;
  } else {
    so.expected_base = s.base;
  }
  auto out = detail::scan_batches(sf.fd, sf.path, so, [&](const BatchInfo& b, std::uint64_t) {
    ib_.observe(b.base_offset + b.last_offset_delta, b.max_timestamp);
  });
  if (!out) return std::unexpected(out.error());
  if (!out->problem.empty()) {
    return std::unexpected(corrupt(s, out->valid_end, out->problem));
  }
  if (::ftruncate(sf.fd, static_cast<off_t>(cut)) != 0) {
    return std::unexpected(fence(sys_error("truncate", sf.path, errno)));
  }
  if (::fdatasync(sf.fd) != 0) {
    return std::unexpected(fence(sys_error("fdatasync", sf.path, errno)));
  }
  if (auto r = remove_active_index_files(s.base); !r) return std::unexpected(fence(r.error()));
  if (auto r = fsync_dir(dir_); !r) return std::unexpected(fence(r.error()));
  s.size = cut;
  if (loc->base_offset < 0 || offset < loc->base_offset) s.gapped = true;  // cut in a gap
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
  sync_owed_end_ = std::min(sync_owed_end_, new_end);
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
  ++generation_;
  cleaner_offset_ = -1;
  for (auto& s : segs_)
    remove_segment_files(*s, false);
  segs_.clear();
  if (auto r = create_segment(offset); !r) return std::unexpected(fence(r.error()));
  dir_sync_needed_ = false;
  if (auto r = fsync_dir(dir_); !r) return std::unexpected(fence(r.error()));
  log_start_ = leo_ = written_end_ = durable_end_ = synced_end_ = sync_owed_end_ = offset;
  unsynced_files_.clear();
  unsynced_since_ns_ = -1;
  r_.disarm(&flush_timer_);
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
         segs_.front()->next_offset <= written_end_ && !segs_.front()->index_pending) {
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
    while (!segs_.empty()) {
      const Segment& s = *segs_.front();
      const bool active = segs_.size() == 1;
      if (s.next_offset > written_end_) break;  // never data still on its way to the file
      if (s.index_pending) break;               // its index files are being written
      // As in Kafka, the active segment goes too once all of it is expired, but only when the
      // log is quiet and every record in it is acknowledged: it is rolled first, so the log
      // continues at the same offset in a fresh segment.
      if (active && (s.size == 0 || !idle() || durable_end_ < leo_)) break;
      // cleanup.policy=compact alone: only the cleaner removes records.
      bool by_time = cfg_.cleanup_delete && cfg_.retention_ms >= 0 &&
                     now_ms - effective_max_timestamp(s) > cfg_.retention_ms;
      bool by_size = cfg_.cleanup_delete && cfg_.retention_bytes >= 0 &&
                     total - s.size >= static_cast<std::uint64_t>(cfg_.retention_bytes);
      bool by_start = !active && segs_[1]->base <= log_start_;
      if (!by_time && !by_size && !by_start) break;
      if (active) {
        if (auto r = roll(now_ms, false); !r) {
          LOG_WARN("%s: roll before retention failed: %s", dir_.c_str(), r.error().detail.c_str());
          break;
        }
      }
      LOG_INFO("retention removes %s (%s)", log_path(s).c_str(),
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
  // At a clean stop the index files and the directory are synced by the log dir's one syncfs
  // before its clean marker; data the group commits synced is not synced again.
  const bool defer = log_dir_ && log_dir_->close_syncs_deferred();
  const std::size_t entries = ib_.offsets.size() + ib_.times.size();
  ib_.finish();
  if (active_clean_ && entries == ib_.offsets.size() + ib_.times.size() &&
      unsynced_files_.empty() && synced_end_ == leo_) {
    // Entries of files holding nothing need no sync: one lost in a cut is made again at open.
    if (dir_sync_needed_ && total_size() > 0) {
      if (defer) {
        log_dir_->note_unsynced_close();
      } else if (auto r = fsync_dir(dir_); !r) {
        return r;
      }
    }
    dir_sync_needed_ = false;
    closed_ = true;
    publish();
    if (state_) state_->closed_cleanly.store(true, std::memory_order_release);
    return {};
  }
  if (s.size <= Log::kRescannedActiveBytes) {
    // Rebuilt by the next open's scan.
    if (auto r = remove_active_index_files(s.base); !r) return r;
  } else {
    for (const auto& [suffix, bytes] :
         {std::pair{kIndexSuffix, &ib_.offsets}, std::pair{kTimeIndexSuffix, &ib_.times}}) {
      if (auto r = detail::write_whole_file(path_of(s.base, suffix), *bytes, !defer); !r) return r;
    }
  }
  if (defer) log_dir_->note_unsynced_close();
  // Data the group commits synced is not synced again (nor its file opened for that).
  std::shared_ptr<SegmentFile> active_file;
  if (synced_end_ < leo_ || !unsynced_files_.empty()) {
    auto held = file(s);
    if (!held) return std::unexpected(held.error());
    active_file = std::move(*held);
    if (::fdatasync(active_file->fd) != 0) {
      return std::unexpected(sys_error("fdatasync", active_file->path, errno));
    }
    ++stats_.fdatasyncs;
  }
  // Segments rolled since the last sync (flush.messages > 1) hold unsynced data too.
  for (const auto& f : unsynced_files_) {
    if (f == active_file) continue;
    if (::fdatasync(f->fd) != 0) return std::unexpected(sys_error("fdatasync", f->path, errno));
    ++stats_.fdatasyncs;
  }
  unsynced_files_.clear();
  unsynced_since_ns_ = -1;
  r_.disarm(&flush_timer_);
  if (dir_sync_needed_ && !defer) {
    if (auto r = fsync_dir(dir_); !r) return r;
  }
  dir_sync_needed_ = false;
  synced_end_ = durable_end_ = written_end_ = leo_;
  closed_ = true;
  publish();
  if (state_) state_->closed_cleanly.store(true, std::memory_order_release);
  return {};
}

}  // namespace samsa::io
