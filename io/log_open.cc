// io::Log: opening a log and recovering it (see io/README.md, "Recovery").
#include "io/log_impl.h"

namespace samsa::io {

// ---------------------------------------------------------------------------------------------
// Opening and recovery

Result<std::shared_ptr<SegmentFile>> Log::Impl::file(const Segment& s) const {
  OpenFiles& files = r_.open_files();
  if (s.file) {
    files.touch(s.file);
    return s.file.get();
  }
  auto p = log_path(s);
  int fd = ::open(p.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return std::unexpected(sys_error("open", p, errno));
  auto f = std::make_shared<SegmentFile>();
  f->fd = fd;
  f->path = std::move(p);
  files.adopt(s.file, f);
  return f;
}

Result<void> Log::Impl::open_segment_file(Segment& s, bool create) {
  auto p = log_path(s);
  int flags = O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_TRUNC : 0);
  int fd = ::open(p.c_str(), flags, 0644);
  if (fd < 0) return std::unexpected(sys_error(create ? "create" : "open", p, errno));
  auto f = std::make_shared<SegmentFile>();
  f->fd = fd;
  f->path = p;
  struct stat st {};
  if (::fstat(fd, &st) != 0) return std::unexpected(sys_error("stat", p, errno));
  r_.open_files().adopt(s.file, std::move(f));
  s.size = static_cast<std::uint64_t>(st.st_size);
  s.created_ms = create ? wall_ms() : st.st_mtim.tv_sec * 1000LL + st.st_mtim.tv_nsec / 1000000;
  return {};
}

namespace {

// The active segment's index files are written when it is closed (roll, close): until then
// they need not exist, and a new partition creates two files fewer (inode allocation is most
// of what creating a partition costs on ext4).
bool index_file_is_empty(const std::filesystem::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return errno == ENOENT;
  return st.st_size == 0;
}

Result<IndexFile> load_active_index(const std::filesystem::path& p) {
  auto f = IndexFile::load(p);
  if (!f && f.error().code == Errc::not_found) return IndexFile{};
  return f;
}

}  // namespace

Result<void> Log::Impl::create_segment(std::int64_t base) {
  auto s = std::make_unique<Segment>();
  s->base = base;
  s->next_offset = base;
  if (auto r = open_segment_file(*s, true); !r) return r;
  // Unlike Kafka, no index files yet: they are written on roll or close (index_file_is_empty).
  segs_.push_back(std::move(s));
  ib_.reset(base, cfg_.index_interval_bytes);
  ring_.clear();
  dir_sync_needed_ = true;
  active_clean_ = true;  // an empty file: nothing to sync but its entry (dir_sync_needed_)
  return {};
}

Result<void> Log::Impl::remove_active_index_files(std::int64_t base) const {
  for (const char* suffix : {kIndexSuffix, kTimeIndexSuffix}) {
    const auto p = path_of(base, suffix);
    if (::unlink(p.c_str()) != 0 && errno != ENOENT) {
      return std::unexpected(sys_error("unlink", p, errno));
    }
  }
  return {};
}

Result<void> Log::Impl::load_closed(Segment& s, std::int64_t next_base) {
  auto held = file(s);
  if (!held) return std::unexpected(held.error());
  SegmentFile& sf = **held;
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
  LOG_WARN("rebuilding the index of %s: %s", sf.path.c_str(), why.c_str());
  ib_.reset(s.base, cfg_.index_interval_bytes);
  detail::ScanOptions so{.from = 0,
                         .end = s.size,
                         .expected_base = s.base,
                         .verify_crc = true,
                         .allow_gaps = gaps_ok_};
  auto out = detail::scan_batches(sf.fd, sf.path, so, [&](const BatchInfo& b, std::uint64_t pos) {
    ib_.add(b.base_offset + b.last_offset_delta, b.max_timestamp, pos,
            static_cast<std::uint64_t>(b.length));
  });
  if (!out) return std::unexpected(out.error());
  if (!out->problem.empty()) {
    return fail(Errc::fenced, fmt("corrupt closed segment %s at byte %" PRIu64 ": %s",
                                  sf.path.c_str(), out->valid_end, out->problem.c_str()));
  }
  std::int64_t end = out->batches ? out->next_offset : s.base;
  if (gaps_ok_ ? end > next_base : end != next_base) {  // below it: compaction's trailing gap
    return fail(Errc::fenced,
                fmt("closed segment %s ends at offset %" PRId64 " but the next segment starts at "
                    "%" PRId64,
                    sf.path.c_str(), end, next_base));
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
  auto held = file(s);
  if (!held) return std::unexpected(held.error());
  SegmentFile& sf = **held;
  auto oi = load_active_index(path_of(s.base, kIndexSuffix));
  auto ti = load_active_index(path_of(s.base, kTimeIndexSuffix));
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
  detail::ScanOptions so{.end = s.size, .verify_crc = false, .allow_gaps = gaps_ok_};
  // No offset entry (a small segment, closed without index files): the index is rebuilt from
  // the whole scan, as appends built it. Otherwise only the batches after the last entry are
  // read, and they add no entry (close wrote every entry).
  const bool rebuild = ov.size() == 0;
  if (rebuild) {
    so.expected_base = s.base;
    ib_.reset(s.base, cfg_.index_interval_bytes);
  } else {
    auto e = ov.at(ov.size() - 1);
    so.from = static_cast<std::uint64_t>(e.position);
    so.expected_first_last = s.base + e.rel_offset;
    ib_.restore(s.base, cfg_.index_interval_bytes, oi->bytes(), ti->bytes(), s.size, INT64_MAX);
  }
  ring_.clear();
  auto out = detail::scan_batches(sf.fd, sf.path, so, [&](const BatchInfo& b, std::uint64_t pos) {
    if (rebuild) {
      ib_.add(b.base_offset + b.last_offset_delta, b.max_timestamp, pos,
              static_cast<std::uint64_t>(b.length));
    } else {
      ib_.observe(b.base_offset + b.last_offset_delta, b.max_timestamp);
    }
    ring_.push(b.base_offset, pos);
    // Whether the batches before the last index entry had gaps is not known here; only a
    // compacted topic's can (a follower copies its leader's gaps).
    s.gapped = s.gapped || cfg_.cleanup_compact || (pos > so.from && b.base_offset > s.next_offset);
    s.next_offset = b.base_offset + b.last_offset_delta + 1;
    if (s.first_batch_timestamp < 0 && pos == 0) {
      s.first_batch_timestamp = b.max_timestamp;
    }
  });
  if (!out) return std::unexpected(out.error());
  if (!out->problem.empty()) {
    LOG_WARN("%s: not as it was closed (%s at byte %" PRIu64 "); recovering it", sf.path.c_str(),
             out->problem.c_str(), out->valid_end);
    return false;
  }
  s.next_offset = out->batches ? out->next_offset : s.base;
  if (s.size > 0 && out->batches == 0) return false;  // the index pointed at the very end
  if (s.first_batch_timestamp < 0 && s.size > 0) {
    std::byte h[batch::kHeaderSize];
    ssize_t n = detail::pread_full(sf.fd, h, sizeof h, 0);
    if (n != static_cast<ssize_t>(sizeof h)) return false;
    s.first_batch_timestamp = batch::parse_header(h).max_timestamp;
  }
  s.max_timestamp = ib_.max_timestamp;
  active_clean_ = true;  // restored from the files the clean close wrote and synced
  return true;
}

// A full scan with CRCs (from the recovery point on). Truncates a torn or corrupt tail and
// returns true when it did (everything after it is then dropped by the caller).
Result<bool> Log::Impl::recover_segment(Segment& s, bool last, std::int64_t next_base) {
  auto held = file(s);
  if (!held) return std::unexpected(held.error());
  SegmentFile& sf = **held;
  ib_.reset(s.base, cfg_.index_interval_bytes);
  ring_.clear();
  detail::ScanOptions so{.from = 0,
                         .end = s.size,
                         .expected_base = s.base,
                         .verify_crc = true,
                         .allow_gaps = gaps_ok_};
  auto out = detail::scan_batches(sf.fd, sf.path, so, [&](const BatchInfo& b, std::uint64_t pos) {
    ib_.add(b.base_offset + b.last_offset_delta, b.max_timestamp, pos,
            static_cast<std::uint64_t>(b.length));
    ring_.push(b.base_offset, pos);
    if (pos == 0) s.first_batch_timestamp = b.max_timestamp;
    if (pos > 0 && b.base_offset > s.next_offset) s.gapped = true;
    s.next_offset = b.base_offset + b.last_offset_delta + 1;
  });
  if (!out) return std::unexpected(out.error());
  s.next_offset = out->batches ? out->next_offset : s.base;
  s.max_timestamp = ib_.max_timestamp;
  bool truncated = false;
  if (!out->problem.empty()) {
    LOG_WARN("%s: %s at byte %" PRIu64 "; truncating the %" PRIu64 " bytes from there",
             sf.path.c_str(), out->problem.c_str(), out->valid_end, s.size - out->valid_end);
    if (::ftruncate(sf.fd, static_cast<off_t>(out->valid_end)) != 0) {
      return std::unexpected(sys_error("truncate", sf.path, errno));
    }
    s.size = out->valid_end;
    truncated = true;
  }
  // What was scanned may be only in the page cache (a crash kills the process, not the
  // machine): sync it before it counts as below the recovery point. An empty file that was not
  // cut holds nothing to sync (every cut of the log is synced when made). Its directory entry
  // may be unsynced too: the next group commit syncs the directory (open_segments).
  if ((s.size > 0 || truncated) && ::fdatasync(sf.fd) != 0) {
    return std::unexpected(sys_error("fdatasync", sf.path, errno));
  }
  if (!last && !truncated && (gaps_ok_ ? s.next_offset > next_base : s.next_offset != next_base)) {
    LOG_WARN("%s ends at offset %" PRId64 " but the next segment starts at %" PRId64
             "; dropping the segments after it",
             sf.path.c_str(), s.next_offset, next_base);
    truncated = true;
  }
  if (!last && !truncated) {
    s.next_offset = next_base;  // a compacted segment may end in a gap
    if (auto r = close_active_index(s); !r) return std::unexpected(r.error());
  }
  // An empty active segment with empty index files (an idle partition after a crash) is
  // already as close() would leave it.
  active_clean_ = last && !truncated && s.size == 0 &&
                  index_file_is_empty(path_of(s.base, kIndexSuffix)) &&
                  index_file_is_empty(path_of(s.base, kTimeIndexSuffix));
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

// The segment bases in the directory, leftovers of interrupted work and index files without
// a log file removed (*removed set when anything was).
Result<std::vector<std::int64_t>> Log::Impl::list_segments(bool* removed) {
  std::error_code ec;
  // What is in the directory.
  std::map<std::int64_t, int> found;  // base -> bit 1 .log, 2 .index, 4 .timeindex
  for (const auto& de : std::filesystem::directory_iterator(dir_, ec)) {
    std::string name = de.path().filename().string();
    if (name.ends_with(kDeletedSuffix) || name.ends_with(".tmp") || name.ends_with(".cleaned") ||
        name.ends_with(".swap")) {
      LOG_INFO("removing leftover %s", de.path().c_str());
      ::unlink(de.path().c_str());
      *removed = true;
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
      *removed = true;
    }
  }

  return bases;
}

// A compacted log may end a segment in a gap, so recovery cannot tell lost writes from a gap
// by offsets alone. But when the scanned (unsynced) part ends in segment files left empty,
// those are lost writes: rolls create a segment with the batch that starts it, and unsynced
// writes vanish from the first lost one on, so everything after it is empty too. The log then
// ends at the data before them: the empty segments are removed and the one before (scanned
// too) becomes the active one. Only such a trailing run counts: an empty segment with data
// after it is a cleaned one (an older samsa's cleaner could leave a group empty) that the
// recovery point, checkpointed lazily, may not cover yet. Without this the log would claim the
// lost offsets as a gap with nothing after it, and a consumer could never reach its end.
Result<void> Log::Impl::drop_lost_segments(std::vector<std::int64_t>& bases, std::size_t scan_from,
                                           bool* removed) {
  std::size_t k = bases.size();
  while (k > 0) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path_of(bases[k - 1], kLogSuffix), ec);
    if (ec || size != 0) break;
    --k;
  }
  k = std::max<std::size_t>(k, std::max<std::size_t>(scan_from + 1, 1));
  if (k >= bases.size()) return {};
  for (std::size_t j = k; j < bases.size(); ++j) {
    LOG_WARN("removing %s: the writes from %s's end on were lost (only empty segments follow it)",
             path_of(bases[j], kLogSuffix).c_str(), path_of(bases[k - 1], kLogSuffix).c_str());
    Segment tmp;
    tmp.base = bases[j];
    remove_segment_files(tmp, false);
  }
  bases.resize(k);
  *removed = true;
  // The previous segment is the active one now; its index files get rewritten on roll.
  return remove_active_index_files(bases.back());
}

// Opens the segments: those before the one holding the recovery point are trusted (index
// checked), from it on they are scanned; a clean shutdown trusts all of them. A scan that cut
// a torn tail removes the segments after it.
Result<void> Log::Impl::open_segments(const std::vector<std::int64_t>& bases,
                                      const OpenOptions& opts, LogDir::OpenSummary& recovery,
                                      bool* removed) {
  std::size_t scan_from = 0;
  if (opts.clean_shutdown) {
    scan_from = bases.size();
  } else {
    for (std::size_t i = 0; i < bases.size(); ++i) {
      if (bases[i] <= opts.recovery_point) scan_from = i;
    }
  }
  // After a crash the entries of the segments scanned may never have reached the disk (a roll
  // or a new log whose first group commit never came): the first group commit syncs the
  // directory before anything appended now is acknowledged.
  if (scan_from < bases.size()) dir_sync_needed_ = true;
  std::vector<std::int64_t> kept = bases;
  if (gaps_ok_) {
    if (auto r = drop_lost_segments(kept, scan_from, removed); !r) return r;
  }
  const std::vector<std::int64_t>& segs = kept;
  for (std::size_t i = 0; i < segs.size(); ++i) {
    auto s = std::make_unique<Segment>();
    s->base = segs[i];
    if (auto r = open_segment_file(*s, false); !r) return r;
    bool last = i + 1 == segs.size();
    std::int64_t next_base = last ? -1 : segs[i + 1];
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
      for (std::size_t j = i + 1; j < segs.size(); ++j) {
        LOG_WARN("removing %s: it follows the truncated tail",
                 path_of(segs[j], kLogSuffix).c_str());
        Segment tmp;
        tmp.base = segs[j];
        remove_segment_files(tmp, false);
      }
      *removed = true;
      // The truncated segment is the active one now; its index files get rewritten on roll.
      if (auto r = remove_active_index_files(segs_.back()->base); !r) return r;
      break;
    }
  }
  return {};
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
  // Durable before the first append can be acknowledged: the segment files' own entries are
  // synced with the first group commit, this directory's entry here.
  if (auto r = create_directories_durably(dir_); !r) return std::unexpected(r.error());
  auto epochs = LeaderEpochCache::load(dir_ / kEpochFile);
  if (!epochs) return std::unexpected(epochs.error());
  epochs_ = std::move(*epochs);

  cleaner_offset_ = opts.cleaner_offset;
  gaps_ok_ = std::filesystem::exists(dir_ / kCompactedMarker);
  if (auto r = allow_gaps_if_compacted(); !r) return r;
  auto swapped = finish_interrupted_swap();
  if (!swapped) return std::unexpected(swapped.error());
  bool removed = false;
  auto listed = list_segments(&removed);
  if (!listed) return std::unexpected(listed.error());
  std::vector<std::int64_t> bases = std::move(*listed);
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
  } else if (auto r = open_segments(bases, opts, recovery, &removed); !r) {
    return r;
  }
  Segment& a = active();
  leo_ = a.next_offset;
  log_start_ = std::max(segs_.front()->base, opts.log_start_offset);
  if (log_start_ > leo_) log_start_ = leo_;
  written_end_ = durable_end_ = synced_end_ = leo_;
  // Removals are synced now. A segment created here (a new partition) is synced with the
  // first group commit or close(), as a rolled segment is: nothing in it is acknowledged
  // before, and a cut that loses its empty files loses nothing (they are made again).
  if (removed) {
    if (auto r = fsync_dir(dir_); !r) return std::unexpected(r.error());
    dir_sync_needed_ = false;
  }
  epochs_.trim_loaded(log_start_, leo_);
  // From now on the log serves: its epoch checkpoint is written off the reactor, in order.
  epochs_.set_writer(
      [this](const std::filesystem::path& f, std::vector<std::vector<std::string>> lines) {
        offload(
            r_, offload_key_, [f, lines = std::move(lines)] { return write_checkpoint(f, lines); },
            [f](Result<void> r) {
              if (!r) LOG_WARN("writing %s: %s", f.c_str(), r.error().detail.c_str());
            });
      });
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

}  // namespace samsa::io
