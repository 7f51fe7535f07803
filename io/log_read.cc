// io::Log: reads by offset and timestamp lookups.
#include "io/log_impl.h"

namespace samsa::io {

// ---------------------------------------------------------------------------------------------
// Reads

// The header of the batch at pos, through a small read-ahead window (valid for one call of a
// read/lookup: the file may grow under it).
Result<const std::byte*> Log::Impl::header_at(const Segment& s, std::uint64_t pos) const {
  if (ra_) {
    // A reactor's read: only what the caller's ReadAhead holds; the rest is asked for.
    const std::byte* h = ra_->find(s.file.get().get(), pos, batch::kHeaderSize);
    if (!h) {
      if (pos + batch::kHeaderSize > s.size) {
        return std::unexpected(corrupt(s, pos, "the file ends inside a batch header"));
      }
      return want_bytes(s, pos, batch::kHeaderSize);
    }
    if (auto ok = checked_header(s, pos, h); !ok) return std::unexpected(ok.error());
    return h;
  }
  auto f = file(s);
  if (!f) return std::unexpected(f.error());
  ReadScratch& w = read_scratch();
  if (w.window_file != f->get() || pos < w.window_pos ||
      pos + batch::kHeaderSize > w.window_pos + w.window_len) {
    // Small batches: read ahead a window of headers; large ones: just the next header.
    std::size_t ahead = w.window_batch_len < kWindow / 4 ? kWindow : batch::kHeaderSize;
    std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(ahead, s.size - pos));
    if (w.window.empty()) w.window.resize(kWindow);
    ssize_t n = detail::pread_full((*f)->fd, w.window.data(), want, pos);
    if (n < 0) return std::unexpected(sys_error("read", (*f)->path, static_cast<int>(-n)));
    w.window_file = f->get();
    w.window_pos = pos;
    w.window_len = static_cast<std::size_t>(n);
    if (w.window_len < batch::kHeaderSize) {
      return std::unexpected(corrupt(s, pos, "the file ends inside a batch header"));
    }
  }
  const std::byte* h = w.window.data() + (pos - w.window_pos);
  auto len = checked_header(s, pos, h);
  if (!len) return std::unexpected(len.error());
  w.window_batch_len = *len;
  return h;
}

// The length of the batch whose header is h (at pos of s), if the header is sound and the
// batch ends inside the segment.
Result<std::uint32_t> Log::Impl::checked_header(const Segment& s, std::uint64_t pos,
                                                const std::byte* h) const {
  auto info = batch::check_header({h, batch::kHeaderSize}, 0, form());
  if (!info) return std::unexpected(corrupt(s, pos, info.error().detail));
  if (pos + static_cast<std::uint64_t>(info->length) > s.size) {
    return std::unexpected(
        corrupt(s, pos, fmt("batch of %d bytes runs past the segment's end", info->length)));
  }
  return static_cast<std::uint32_t>(info->length);
}

std::unexpected<Error> Log::Impl::want_bytes(const Segment& s, std::uint64_t pos,
                                             std::size_t need) const {
  auto f = file(s);
  if (!f) return std::unexpected(f.error());
  if (ra_anchor_file_ != f->get() || ra_anchor_ > pos) {
    ra_anchor_file_ = f->get();
    ra_anchor_ = pos;
  }
  const std::uint64_t from = ra_anchor_;
  const std::uint64_t end = std::min<std::uint64_t>(s.size, std::max(pos + need, from + ra_span_));
  ra_->want(*f, from, static_cast<std::size_t>(pos + need - from),
            static_cast<std::size_t>(end - from));
  return fail(Errc::would_block, "not read yet");
}

Result<const std::byte*> Log::Impl::batch_at(const Segment& s, std::uint64_t pos,
                                             std::size_t len) const {
  if (ra_) {
    if (const std::byte* b = ra_->find(s.file.get().get(), pos, len)) return b;
    return want_bytes(s, pos, len);
  }
  auto f = file(s);
  if (!f) return std::unexpected(f.error());
  std::vector<std::byte>& buf = read_scratch().batch;
  if (buf.size() < len) buf.resize(len);
  ssize_t n = detail::pread_full((*f)->fd, buf.data(), len, pos);
  if (n < 0) return std::unexpected(sys_error("read", (*f)->path, static_cast<int>(-n)));
  if (static_cast<std::size_t>(n) != len) {
    return std::unexpected(corrupt(s, pos, "the file ends inside a batch"));
  }
  return buf.data();
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
    auto at = [&](std::ptrdiff_t j) { return ring_.at(static_cast<std::size_t>(j)); };
    if (s.gapped && offset > at(i).base_offset) {
      // offset may be in the gap after batch i: its header says where it ends.
      auto h = header_at(s, at(i).position);
      if (!h) return std::unexpected(h.error());
      BatchInfo bi = batch::parse_header(*h);
      if (bi.base_offset + bi.last_offset_delta < offset) {
        if (static_cast<std::size_t>(i) + 1 == ring_.size()) return Located{s.size, -1, -1, -1};
        ++i;
      }
    }
    return Located{at(i).position, at(i).base_offset, -1, i};
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
      // Past the last batch: offset is in the gap compaction left at the end of a closed
      // segment (the active segment's offsets end exactly where its bytes do).
      if (gaps_ok_ && !is_active(s) && offset < s.next_offset) {
        if (base >= 0) s.data_end = base;
        return Located{s.size, -1, -1, -1};
      }
      return std::unexpected(
          corrupt(s, pos, fmt("offset %" PRId64 " not found before the end", offset)));
    }
    auto h = header_at(s, pos);
    if (!h) return std::unexpected(h.error());
    BatchInfo bi = batch::parse_header(*h);
    std::int64_t last = bi.base_offset + bi.last_offset_delta;
    if (base >= 0 && !gap_ok(bi.base_offset, base)) {
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
  read_scratch().window_file = nullptr;
  ReadResult rr;
  rr.next_offset = offset;
  const std::int64_t limit = std::min(max_offset, written_end_);
  std::uint64_t budget = max_bytes;
  for (std::size_t si = find_segment(offset); si < segs_.size(); ++si) {
    const Segment& s = *segs_[si];
    if (rr.next_offset >= limit || s.base >= limit) break;
    if (rr.next_offset >= s.read_end()) continue;
    auto loc = locate(s, rr.next_offset);
    if (!loc) {
      // A cold later segment: answer with what is already found rather than ask for bytes
      // (asking again would start over and need the earlier segment's bytes once more).
      if (loc.error().code == Errc::would_block && !rr.slices.empty()) break;
      return std::unexpected(loc.error());
    }
    if (loc->position >= s.size) continue;  // a compacted segment's trailing gap
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
        if (!h) {
          // Past what the ReadAhead holds: the batches found so far are the answer.
          if (h.error().code == Errc::would_block && (first_offset >= 0 || !rr.slices.empty())) {
            stopped = true;
            break;
          }
          return std::unexpected(h.error());
        }
        BatchInfo bi = batch::parse_header(*h);
        if (!gap_ok(bi.base_offset, base)) {
          return std::unexpected(corrupt(
              s, pos, fmt("base offset %" PRId64 ", expected %" PRId64, bi.base_offset, base)));
        }
        if (bi.base_offset >= limit) {
          stopped = true;
          break;
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
    auto f = file(s);
    if (!f) return std::unexpected(f.error());
    rr.slices.push_back(Slice{std::move(*f), start, static_cast<std::uint32_t>(end - start),
                              first_offset, last_offset});
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
  std::vector<std::byte> storage;
  while (pos < s.size && (base < 0 || base < limit)) {
    auto h = header_at(s, pos);
    if (!h) return std::unexpected(h.error());
    BatchInfo bi = batch::parse_header(*h);
    std::int64_t blast = bi.base_offset + bi.last_offset_delta;
    if ((base >= 0 && !gap_ok(bi.base_offset, base)) || (base < 0 && blast != first_last)) {
      return std::unexpected(corrupt(s, pos, "batch offsets do not match the index"));
    }
    if (blast >= limit) break;
    if (bi.max_timestamp >= ts && blast >= log_start_) {
      auto b = batch_at(s, pos, static_cast<std::size_t>(bi.length));
      if (!b) return std::unexpected(b.error());
      std::span<const std::byte> bytes(*b, static_cast<std::size_t>(bi.length));
      auto v = batch::validate(bytes, 0, nullptr, form());
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
  read_scratch().window_file = nullptr;
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
  read_scratch().window_file = nullptr;
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

}  // namespace samsa::io
