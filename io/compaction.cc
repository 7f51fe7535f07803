// One cleaning pass (see io/compaction.h): the key map, the producers' last batches, and the
// rewrite of each group of segments into .cleaned files.
#include "io/compaction.h"

#include <fcntl.h>
#include <liburing.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <thread>
#include <unordered_map>

#include "base/assert.h"
#include "base/bytes.h"
#include "base/clock.h"
#include "base/log.h"
#include "io/compression.h"
#include "io/log_impl.h"  // fail, fmt, sys_error
#include "io/record_batch.h"
#include "io/segment.h"

namespace samsa::io {
namespace {

// --- the key hash: two 64-bit lanes over 8-byte words, each word mixed (splitmix64's
// finaliser) into both; 128 bits, so a collision (which would lose a key) is as unlikely as
// with Kafka's MD5.
inline std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}
inline std::uint64_t rotl(std::uint64_t x, int r) {
  return (x << r) | (x >> (64 - r));
}

std::pair<std::uint64_t, std::uint64_t> hash128(std::span<const std::byte> k) {
  std::uint64_t h1 = 0x9e3779b97f4a7c15ULL ^ (k.size() * 0x87c37b91114253d5ULL);
  std::uint64_t h2 = 0x6a09e667f3bcc909ULL ^ (k.size() * 0x4cf5ad432745937fULL);
  std::size_t i = 0;
  auto round = [&](std::uint64_t w) {
    h1 = rotl(h1 ^ mix64(w * 0x87c37b91114253d5ULL), 27) * 5 + 0x52dce729;
    h2 = rotl(h2 ^ mix64((w ^ h1) * 0x4cf5ad432745937fULL), 31) * 5 + 0x38495ab5;
  };
  for (; i + 8 <= k.size(); i += 8) {
    std::uint64_t w;
    std::memcpy(&w, k.data() + i, 8);
    round(w);
  }
  if (i < k.size()) {
    std::uint64_t w = 0;
    std::memcpy(&w, k.data() + i, k.size() - i);
    round(w ^ (0xffULL << 56));
  }
  h1 = mix64(h1 + h2);
  h2 = mix64(h2 + h1);
  return {h1 | 1, h2};  // h1 never 0: 0 marks an empty slot
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// OffsetMap

OffsetMap::OffsetMap(std::size_t bytes) {
  std::size_t n = std::max<std::size_t>(bytes / sizeof(Slot), 16);
  slots_.resize(n);
  limit_ = n * 9 / 10;
}

void OffsetMap::clear() {
  std::fill(slots_.begin(), slots_.end(), Slot{});
  size_ = 0;
}

std::size_t OffsetMap::find(std::uint64_t h1, std::uint64_t h2) const {
  std::size_t i = static_cast<std::size_t>(h2 % slots_.size());
  while (slots_[i].h1 != 0 && (slots_[i].h1 != h1 || slots_[i].h2 != h2)) {
    if (++i == slots_.size()) i = 0;
  }
  return i;
}

OffsetMap::Hash OffsetMap::hash(std::span<const std::byte> key) {
  auto [h1, h2] = hash128(key);
  return Hash{h1, h2};
}

void OffsetMap::put(const Hash& h, std::int64_t offset) {
  Slot& s = slots_[find(h.h1, h.h2)];
  if (s.h1 == 0) {
    SAMSA_ASSERT(size_ < slots_.size() - 1);
    ++size_;
    s.h1 = h.h1;
    s.h2 = h.h2;
  }
  s.offset = std::max(s.offset, offset);
}

std::optional<std::int64_t> OffsetMap::get(const Hash& h) const {
  const Slot& s = slots_[find(h.h1, h.h2)];
  if (s.h1 == 0) return std::nullopt;
  return s.offset;
}

// ---------------------------------------------------------------------------------------------
// CleanerIo

CleanerIo::CleanerIo(double rate) : rate_(rate) {
  auto* r = new io_uring;
  if (io_uring_queue_init(4, r, 0) == 0) {
    ring_ = r;
  } else {
    delete r;
    LOG_WARN("log cleaner: no io_uring here, using pread/pwrite");
  }
  last_ns_ = mono_ns();
}

CleanerIo::~CleanerIo() {
  if (ring_) {
    io_uring_queue_exit(ring_);
    delete ring_;
  }
}

// A token bucket of one second's worth of bytes: a pass sleeps instead of exceeding the rate.
void CleanerIo::throttle(std::size_t n) {
  if (rate_ <= 0) return;
  std::int64_t now = mono_ns();
  tokens_ = std::min(rate_, tokens_ + rate_ * static_cast<double>(now - last_ns_) / 1e9);
  last_ns_ = now;
  tokens_ -= static_cast<double>(n);
  if (tokens_ < 0) {
    auto wait = static_cast<std::int64_t>(-tokens_ / rate_ * 1e9);
    std::this_thread::sleep_for(std::chrono::nanoseconds(wait));
    throttled_ns += wait;
  }
}

int CleanerIo::submit(int op, int fd, void* buf, std::size_t n, std::uint64_t off) {
  io_uring_sqe* sqe = io_uring_get_sqe(ring_);
  if (op == 0) {
    io_uring_prep_read(sqe, fd, buf, static_cast<unsigned>(n), off);
  } else if (op == 1) {
    io_uring_prep_write(sqe, fd, buf, static_cast<unsigned>(n), off);
  } else {
    io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
  }
  int r = io_uring_submit(ring_);
  if (r < 0) return r;
  io_uring_cqe* cqe = nullptr;
  do {
    r = io_uring_wait_cqe(ring_, &cqe);
  } while (r == -EINTR);
  if (r < 0) return r;
  int res = cqe->res;
  io_uring_cqe_seen(ring_, cqe);
  return res;
}

Result<std::size_t> CleanerIo::read(int fd, std::byte* buf, std::size_t n, std::uint64_t off,
                                    const std::filesystem::path& path) {
  std::size_t got = 0;
  while (got < n) {
    int r = ring_
                ? submit(0, fd, buf + got, n - got, off + got)
                : static_cast<int>(::pread(fd, buf + got, n - got, static_cast<off_t>(off + got)));
    if (!ring_ && r < 0) r = -errno;
    if (r == -EINTR || r == -EAGAIN) continue;
    if (r < 0) return std::unexpected(sys_error("read", path, -r));
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  bytes_read += got;
  throttle(got);
  return got;
}

Result<void> CleanerIo::write(int fd, const std::byte* buf, std::size_t n, std::uint64_t off,
                              const std::filesystem::path& path) {
  std::size_t done = 0;
  while (done < n) {
    auto* p = const_cast<std::byte*>(buf + done);
    int r = ring_ ? submit(1, fd, p, n - done, off + done)
                  : static_cast<int>(::pwrite(fd, p, n - done, static_cast<off_t>(off + done)));
    if (!ring_ && r < 0) r = -errno;
    if (r == -EINTR || r == -EAGAIN) continue;
    if (r <= 0) return std::unexpected(sys_error("write", path, r == 0 ? EIO : -r));
    done += static_cast<std::size_t>(r);
  }
  bytes_written += n;
  throttle(n);
  return {};
}

Result<void> CleanerIo::sync(int fd, const std::filesystem::path& path) {
  int r = ring_ ? submit(2, fd, nullptr, 0, 0) : (::fdatasync(fd) == 0 ? 0 : -errno);
  if (r < 0) return std::unexpected(sys_error("fdatasync", path, -r));
  return {};
}

std::filesystem::path cleaned_path(const std::filesystem::path& dir, std::int64_t base,
                                   const char* suffix) {
  return dir / (detail::segment_name(base) + suffix + kCleanedSuffix);
}

void discard_cleaned(const CleanPlan& plan, const CleanResult& result) {
  for (const auto& g : result.groups)
    for (const char* suffix : {".log", ".index", ".timeindex"})
      ::unlink(cleaned_path(plan.dir, g.base, suffix).c_str());
}

namespace {

// ---------------------------------------------------------------------------------------------
// Reading a segment batch by batch

class BatchReader {
 public:
  BatchReader(CleanerIo& io, const CleanPlan::Seg& s) : io_(io), s_(s) {}
  struct Batch {
    std::uint64_t position;
    BatchInfo info;
    std::span<const std::byte> bytes;
  };
  // The next batch (header checked, offsets increasing inside the segment), nullopt at the end.
  Result<std::optional<Batch>> next() {
    if (pos_ >= s_.size) return std::optional<Batch>{};
    auto h = ensure(batch::kHeaderSize);
    if (!h) return std::unexpected(h.error());
    auto info = batch::check_header({*h, batch::kHeaderSize}, 0, batch::Form::stored);
    if (!info) return bad(info.error().detail);
    const auto len = static_cast<std::uint64_t>(info->length);
    const std::int64_t last = info->base_offset + info->last_offset_delta;
    if (len > s_.size - pos_) return bad("batch runs past the end of the file");
    if (info->base_offset < next_offset_ || last >= s_.next_base) {
      return bad(fmt("batch offsets %" PRId64 "..%" PRId64 " outside [%" PRId64 ", %" PRId64 ")",
                     info->base_offset, last, next_offset_, s_.next_base));
    }
    auto whole = ensure(static_cast<std::size_t>(len));
    if (!whole) return std::unexpected(whole.error());
    Batch b{pos_, *info, {*whole, static_cast<std::size_t>(len)}};
    pos_ += len;
    next_offset_ = last + 1;
    return std::optional<Batch>(b);
  }

 private:
  std::unexpected<Error> bad(const std::string& what) const {
    return fail(Errc::fenced, fmt("corrupt segment %s at byte %" PRIu64 ": %s",
                                  s_.file->path.c_str(), pos_, what.c_str()));
  }
  // [pos_, pos_ + n) in the buffer.
  Result<const std::byte*> ensure(std::size_t n) {
    if (pos_ >= buf_pos_ && pos_ + n <= buf_pos_ + buf_len_) return buf_.data() + (pos_ - buf_pos_);
    std::size_t want = static_cast<std::size_t>(
        std::min<std::uint64_t>(std::max<std::size_t>(n, kChunk), s_.size - pos_));
    if (buf_.size() < want) buf_.resize(want);
    auto got = io_.read(s_.file->fd, buf_.data(), want, pos_, s_.file->path);
    if (!got) return std::unexpected(got.error());
    buf_pos_ = pos_;
    buf_len_ = *got;
    if (buf_len_ < n) return bad("file shorter than its size");
    return buf_.data();
  }
  static constexpr std::size_t kChunk = 1u << 20;
  CleanerIo& io_;
  const CleanPlan::Seg& s_;
  std::vector<std::byte> buf_;
  std::uint64_t buf_pos_ = 0;
  std::size_t buf_len_ = 0;
  std::uint64_t pos_ = 0;
  std::int64_t next_offset_ = s_.base;
};

// ---------------------------------------------------------------------------------------------
// Writing a cleaned segment

class GroupWriter {
 public:
  GroupWriter(CleanerIo& io, const CleanPlan& plan, std::int64_t base) : io_(io), plan_(plan) {
    group_.base = base;
    ib_.reset(base, plan.index_interval_bytes);
    path_ = cleaned_path(plan.dir, base, ".log");
  }
  ~GroupWriter() {
    if (fd_ >= 0) ::close(fd_);
  }
  Result<void> open() {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) return std::unexpected(sys_error("create", path_, errno));
    return {};
  }
  Result<void> add(std::span<const std::byte> b, const BatchInfo& info) {
    if (buf_.size() + b.size() > kFlushAt && !buf_.empty()) {
      if (auto r = flush(); !r) return r;
    }
    const std::uint64_t pos = group_.size;
    buf_.insert(buf_.end(), b.begin(), b.end());
    group_.size += b.size();
    ib_.add(info.base_offset + info.last_offset_delta, info.max_timestamp, pos, b.size());
    if (group_.first_batch_timestamp < 0 && pos == 0)
      group_.first_batch_timestamp = info.max_timestamp;
    group_.data_end = info.base_offset + info.last_offset_delta + 1;
    return {};
  }
  // Flushes, writes the index files, syncs all three.
  Result<CleanedGroup> finish(std::int64_t end, std::size_t inputs) {
    if (auto r = flush(); !r) return std::unexpected(r.error());
    if (auto r = io_.sync(fd_, path_); !r) return std::unexpected(r.error());
    ib_.finish();
    for (const auto& [suffix, bytes] :
         {std::pair{".index", &ib_.offsets}, std::pair{".timeindex", &ib_.times}}) {
      auto p = cleaned_path(plan_.dir, group_.base, suffix);
      int fd = ::open(p.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0) return std::unexpected(sys_error("create", p, errno));
      auto w = io_.write(fd, bytes->data(), bytes->size(), 0, p);
      auto s = w ? io_.sync(fd, p) : w;
      ::close(fd);
      if (!s) return std::unexpected(s.error());
    }
    group_.end = end;
    group_.input_segments = inputs;
    group_.max_timestamp = ib_.max_timestamp;
    return group_;
  }

 private:
  Result<void> flush() {
    if (buf_.empty()) return {};
    if (auto r = io_.write(fd_, buf_.data(), buf_.size(), written_, path_); !r) return r;
    written_ += buf_.size();
    buf_.clear();
    return {};
  }
  static constexpr std::size_t kFlushAt = 1u << 20;
  CleanerIo& io_;
  const CleanPlan& plan_;
  std::filesystem::path path_;
  int fd_ = -1;
  std::vector<std::byte> buf_;
  std::uint64_t written_ = 0;
  detail::IndexBuilder ib_;
  CleanedGroup group_;
};

// ---------------------------------------------------------------------------------------------
// The pass

inline constexpr std::int16_t kDeleteHorizonBit = 0x40;  // KIP-534: baseTimestamp is the horizon

struct ProducerLast {
  std::int64_t last_offset = -1;
  std::int64_t timestamp = -1;
};

class Pass {
 public:
  Pass(const CleanPlan& plan, OffsetMap& map, CleanerIo& io, const std::atomic<bool>* stop)
      : plan_(plan), map_(map), io_(io), stop_(stop) {
    for (const AbortedTxn& a : plan_.aborted)
      aborted_[a.producer_id].emplace_back(a.first_offset, a.last_offset);
    for (auto& [pid, spans] : aborted_)
      std::sort(spans.begin(), spans.end());
  }

  Result<CleanResult> run() {
    map_.clear();
    if (auto r = scan(); !r) return std::unexpected(r.error());
    out_.new_first_dirty = map_end_;
    out_.stats.map_keys = map_.size();
    // The segments the map reaches: [0, n).
    std::size_t n = 0;
    while (n < plan_.segments.size() && plan_.segments[n].base < map_end_)
      ++n;
    for (std::size_t i = 0; i < n;) {
      std::size_t j = group_end(i, n);
      auto g = clean_group(i, j);
      if (!g) {
        remove_outputs();
        return std::unexpected(g.error());
      }
      out_.groups.push_back(*g);
      i = j;
    }
    out_.stats.bytes_read = io_.bytes_read;
    out_.stats.bytes_written = io_.bytes_written;
    return out_;
  }

 private:
  bool stopped() const { return stop_ && stop_->load(std::memory_order_relaxed); }

  // One read of every segment: producers' last batches everywhere, keys from first_dirty on.
  Result<void> scan() {
    map_end_ = plan_.clean_end;
    bool full = false;
    std::vector<std::byte> storage;
    for (const auto& s : plan_.segments) {
      BatchReader rd(io_, s);
      for (;;) {
        if (stopped()) return fail(Errc::busy, "the cleaner is stopping");
        auto nb = rd.next();
        if (!nb) return std::unexpected(nb.error());
        if (!*nb) break;
        const BatchInfo& bi = (*nb)->info;
        const std::int64_t last = bi.base_offset + bi.last_offset_delta;
        if (bi.producer_id >= 0) {
          auto& p = producers_[bi.producer_id];
          if (last > p.last_offset) p = ProducerLast{last, bi.max_timestamp};
        }
        if (full || last < plan_.first_dirty || bi.is_control() || bi.record_count == 0 ||
            is_aborted(bi)) {
          continue;
        }
        if (map_.room() < static_cast<std::size_t>(bi.record_count)) {
          if (map_.size() == 0) {
            return fail(Errc::batch_too_large,
                        fmt("log.cleaner.dedupe.buffer.size holds %zu keys, a batch of %s has %d",
                            map_.room(), plan_.dir.c_str(), bi.record_count));
          }
          full = true;
          map_end_ = bi.base_offset;
          continue;
        }
        auto recs = batch::records_of((*nb)->bytes, storage);
        if (!recs) return std::unexpected(recs.error());
        batch::RecordReader rr(*recs, bi.record_count);
        hashed_.clear();
        for (;;) {
          auto r = rr.next();
          if (!r) return std::unexpected(r.error());
          if (!*r) break;
          if (!(*r)->key) continue;
          hashed_.push_back({OffsetMap::hash(*(*r)->key), bi.base_offset + (*r)->offset_delta});
          map_.prefetch(hashed_.back().first);
        }
        for (const auto& [h, off] : hashed_)
          map_.put(h, off);
      }
    }
    return {};
  }

  // Kafka's groupSegmentsBySize: adjacent segments whose sizes (and index sizes) add up to at
  // most a segment, and whose offsets fit one segment's 32-bit relative offsets.
  std::size_t group_end(std::size_t i, std::size_t n) const {
    const auto& first = plan_.segments[i];
    std::uint64_t size = first.size, index = first.index_bytes;
    std::size_t j = i + 1;
    while (j < n) {
      const auto& s = plan_.segments[j];
      if (size + s.size > plan_.segment_bytes) break;
      if (index + s.index_bytes > plan_.segment_index_bytes) break;
      if (s.next_base - 1 - first.base > INT32_MAX) break;
      size += s.size;
      index += s.index_bytes;
      ++j;
    }
    return j;
  }

  Result<CleanedGroup> clean_group(std::size_t i, std::size_t j) {
    GroupWriter w(io_, plan_, plan_.segments[i].base);
    outputs_.push_back(plan_.segments[i].base);
    if (auto r = w.open(); !r) return std::unexpected(r.error());
    // The header of the last batch read, when it was dropped.
    std::optional<std::array<std::byte, batch::kHeaderSize>> dropped_last;
    for (std::size_t k = i; k < j; ++k) {
      BatchReader rd(io_, plan_.segments[k]);
      for (;;) {
        if (stopped()) return fail(Errc::busy, "the cleaner is stopping");
        auto nb = rd.next();
        if (!nb) return std::unexpected(nb.error());
        if (!*nb) break;
        ++out_.stats.batches_read;
        auto kept = filter((*nb)->bytes, (*nb)->info);
        if (!kept) return std::unexpected(kept.error());
        if (kept->empty()) {
          dropped_last.emplace();
          std::memcpy(dropped_last->data(), (*nb)->bytes.data(), batch::kHeaderSize);
          continue;
        }
        dropped_last.reset();
        if (auto r = add(w, *kept); !r) return std::unexpected(r.error());
      }
    }
    if (dropped_last) {
      // Without it the group would end in a gap, and a consumer at the gap with nothing after
      // it (an empty active segment, after a roll or a power cut) would never reach the log
      // end. Emptied and anonymous: its producer, if any, has expired.
      std::span<const std::byte> h(*dropped_last);
      const BatchInfo hi = batch::parse_header(h.data());
      if (auto r = add(w, emptied(h, hi, /*anonymous=*/true)); !r)
        return std::unexpected(r.error());
    }
    return w.finish(plan_.segments[j - 1].next_base, j - i);
  }

  Result<void> add(GroupWriter& w, std::span<const std::byte> b) {
    ++out_.stats.batches_written;
    return w.add(b, batch::parse_header(b.data()));
  }

  // Whether bi holds records of an aborted transaction: its producer's aborted transaction
  // began at or before it and its ABORT marker comes after it.
  bool is_aborted(const BatchInfo& bi) const {
    if (!bi.is_transactional() || bi.is_control()) return false;
    auto it = aborted_.find(bi.producer_id);
    if (it == aborted_.end()) return false;
    const auto& spans = it->second;  // (first offset, marker offset), ascending
    auto u = std::upper_bound(spans.begin(), spans.end(), bi.base_offset,
                              [](std::int64_t o, const auto& s) { return o < s.first; });
    return u != spans.begin() && bi.base_offset < std::prev(u)->second;
  }

  // Whether bi is the last batch of a producer that has not expired (producer.id.expiration.ms,
  // by the batch's timestamp): such a batch stays, emptied if need be, so that the producer's
  // sequence numbers still check after a restart.
  bool keeps_producer_state(const BatchInfo& bi) const {
    if (bi.producer_id < 0) return false;
    auto it = producers_.find(bi.producer_id);
    return it != producers_.end() &&
           it->second.last_offset == bi.base_offset + bi.last_offset_delta &&
           it->second.timestamp >= plan_.now_ms - plan_.producer_expiration_ms;
  }

  // What of batch b survives: b itself, a rewritten batch (in rewrite_), or nothing (empty).
  Result<std::span<const std::byte>> filter(std::span<const std::byte> b, const BatchInfo& bi) {
    // Transaction markers stay (Kafka removes a marker once its transaction's records are gone
    // and a delete horizon passed; keeping them costs a batch header per transaction).
    if (bi.is_control()) return b;
    if (batch::compute_crc(b) != bi.crc) {
      // Rewriting would give damaged records a fresh CRC: stop instead.
      return fail(Errc::fenced, fmt("CRC32C mismatch in the batch at offset %" PRId64 " of %s",
                                    bi.base_offset, plan_.dir.c_str()));
    }
    if (bi.record_count == 0) {
      // Kept (emptied) by an earlier pass for its producer: nothing to decompress (an older
      // samsa left such batches with their codec bits).
      return keeps_producer_state(bi) ? b : std::span<const std::byte>{};
    }
    if (is_aborted(bi)) {
      out_.stats.records_read += static_cast<std::uint64_t>(bi.record_count);
      if (!keeps_producer_state(bi)) return std::span<const std::byte>{};
      ++out_.stats.batches_emptied;
      return emptied(b, bi);
    }
    auto recs = batch::records_of(b, storage_);
    if (!recs) return std::unexpected(recs.error());
    const bool has_horizon = bi.attributes & kDeleteHorizonBit;
    const bool horizon_passed = has_horizon && bi.base_timestamp <= plan_.now_ms;
    kept_.clear();
    bool kept_tombstone = false, dropped = false;
    std::int64_t max_ts = -1;
    // First every record's key hashed and its slot prefetched, then the decisions.
    cands_.clear();
    batch::RecordReader rr(*recs, bi.record_count);
    for (;;) {
      const std::size_t start = recs->size() - rr.remaining();
      auto r = rr.next();
      if (!r) return std::unexpected(r.error());
      if (!*r) break;
      ++out_.stats.records_read;
      const batch::Record& rec = **r;
      Cand c{start,
             recs->size() - rr.remaining(),
             rec.timestamp_delta,
             bi.base_offset + rec.offset_delta,
             rec.key.has_value(),
             !rec.value,
             {}};
      // Records without a key cannot be compacted: Kafka drops them too.
      if (c.has_key) {
        c.hash = OffsetMap::hash(*rec.key);
        map_.prefetch(c.hash);
      }
      cands_.push_back(c);
    }
    for (const Cand& c : cands_) {
      bool keep = false;
      if (c.has_key) {
        auto latest = map_.get(c.hash);
        keep = !latest || c.offset >= *latest;
        // A tombstone goes once its horizon passed, if the map saw it (an older value of its key
        // then goes in this same pass: removing only the tombstone would bring it back).
        if (keep && c.tombstone && horizon_passed && c.offset < map_end_) {
          keep = false;
          ++out_.stats.tombstones_removed;
        }
      }
      if (!keep) {
        dropped = true;
        continue;
      }
      if (c.tombstone) kept_tombstone = true;
      max_ts = std::max(max_ts, bi.base_timestamp + c.timestamp_delta);
      kept_.push_back({c.begin, c.end, c.timestamp_delta});
    }
    out_.stats.records_kept += kept_.size();
    const bool set_horizon = kept_tombstone && !has_horizon;
    if (!dropped && !set_horizon && !kept_.empty()) return b;
    if (kept_.empty()) {
      if (!keeps_producer_state(bi)) return std::span<const std::byte>{};
      ++out_.stats.batches_emptied;
      return emptied(b, bi);
    }
    return rebuild(b, bi, *recs, set_horizon, max_ts);
  }

  // b's header alone, in rewrite_: a batch of no records at b's offsets; anonymous: of no
  // producer (and so in no transaction) either.
  std::span<const std::byte> emptied(std::span<const std::byte> b, const BatchInfo& bi,
                                     bool anonymous = false) {
    rewrite_.assign(b.begin(), b.begin() + batch::kHeaderSize);
    // No records, so no codec (Kafka's empty batches are uncompressed: a reader would try to
    // decompress zero bytes).
    std::int16_t attrs = static_cast<std::int16_t>(bi.attributes & ~0x7);
    if (anonymous) {
      attrs = static_cast<std::int16_t>(attrs & ~batch::kTransactionalBit);
      store_be<std::int64_t>(rewrite_.data() + batch::kProducerId, -1);
      store_be<std::int16_t>(rewrite_.data() + batch::kProducerEpoch, -1);
      store_be<std::int32_t>(rewrite_.data() + batch::kBaseSequence, -1);
    }
    store_be<std::int16_t>(rewrite_.data() + batch::kAttributes, attrs);
    store_be<std::int32_t>(rewrite_.data() + batch::kRecordCount, 0);
    store_be<std::int32_t>(rewrite_.data() + batch::kLength,
                           static_cast<std::int32_t>(batch::kHeaderSize - batch::kLogOverhead));
    batch::update_crc(rewrite_);
    return std::span<const std::byte>(rewrite_);
  }

  // b with only the kept records (their own bytes, or re-encoded against a new base timestamp
  // when the delete horizon is set), recompressed with b's codec.
  Result<std::span<const std::byte>> rebuild(std::span<const std::byte> b, const BatchInfo& bi,
                                             std::span<const std::byte> recs, bool set_horizon,
                                             std::int64_t max_ts) {
    const std::int64_t base_ts =
        set_horizon ? plan_.now_ms + plan_.delete_retention_ms : bi.base_timestamp;
    records_.clear();
    for (const auto& k : kept_) {
      if (!set_horizon) {
        records_.insert(records_.end(), recs.begin() + static_cast<std::ptrdiff_t>(k.begin),
                        recs.begin() + static_cast<std::ptrdiff_t>(k.end));
        continue;
      }
      reencode(recs.subspan(k.begin, k.end - k.begin),
               bi.base_timestamp + k.timestamp_delta - base_ts);
    }
    std::span<const std::byte> body(records_);
    std::vector<std::byte> packed;
    if (bi.compression() != 0) {
      auto c = compress(static_cast<Codec>(bi.compression()), body);
      if (!c) return fail(Errc::corrupt_batch, "recompressing: " + c.error());
      packed = std::move(*c);
      body = packed;
    }
    rewrite_.assign(b.begin(), b.begin() + batch::kHeaderSize);
    rewrite_.insert(rewrite_.end(), body.begin(), body.end());
    std::int16_t attrs = bi.attributes;
    if (set_horizon) attrs = static_cast<std::int16_t>(attrs | kDeleteHorizonBit);
    store_be<std::int16_t>(rewrite_.data() + batch::kAttributes, attrs);
    store_be<std::int64_t>(rewrite_.data() + batch::kBaseTimestamp, base_ts);
    // LogAppendTime batches keep the broker's time; others the largest kept record's.
    if (!bi.log_append_time())
      store_be<std::int64_t>(rewrite_.data() + batch::kMaxTimestamp, max_ts);
    store_be<std::int32_t>(rewrite_.data() + batch::kRecordCount,
                           static_cast<std::int32_t>(kept_.size()));
    store_be<std::int32_t>(rewrite_.data() + batch::kLength,
                           static_cast<std::int32_t>(rewrite_.size() - batch::kLogOverhead));
    batch::update_crc(rewrite_);
    return std::span<const std::byte>(rewrite_);
  }

  // Appends record r with its timestampDelta replaced (everything else is its own bytes).
  void reencode(std::span<const std::byte> r, std::int64_t ts_delta) {
    std::int64_t len = 0, old_delta = 0;
    std::size_t n1 = read_varint64(r.data(), r.size(), len);
    std::size_t attr_at = n1;
    std::size_t n2 = read_varint64(r.data() + attr_at + 1, r.size() - attr_at - 1, old_delta);
    std::span<const std::byte> rest = r.subspan(attr_at + 1 + n2);
    std::byte tmp[10];
    std::size_t nd = write_varint64(tmp, ts_delta);
    const std::int64_t new_len = 1 + static_cast<std::int64_t>(nd + rest.size());
    std::byte lb[10];
    std::size_t nl = write_varint64(lb, new_len);
    records_.insert(records_.end(), lb, lb + nl);
    records_.push_back(r[attr_at]);
    records_.insert(records_.end(), tmp, tmp + nd);
    records_.insert(records_.end(), rest.begin(), rest.end());
  }

  void remove_outputs() {
    for (std::int64_t base : outputs_) {
      for (const char* suffix : {".log", ".index", ".timeindex"}) {
        ::unlink(cleaned_path(plan_.dir, base, suffix).c_str());
      }
    }
  }

  struct Kept {
    std::size_t begin, end;
    std::int64_t timestamp_delta;
  };
  struct Cand {
    std::size_t begin, end;  // the record's bytes in the records section
    std::int64_t timestamp_delta;
    std::int64_t offset;
    bool has_key, tombstone;
    OffsetMap::Hash hash;
  };
  std::vector<Cand> cands_;
  std::vector<std::pair<OffsetMap::Hash, std::int64_t>> hashed_;
  const CleanPlan& plan_;
  OffsetMap& map_;
  CleanerIo& io_;
  const std::atomic<bool>* stop_;
  std::int64_t map_end_ = 0;
  std::unordered_map<std::int64_t, ProducerLast> producers_;
  // Producer id -> its aborted transactions' (first offset, marker offset), ascending.
  std::unordered_map<std::int64_t, std::vector<std::pair<std::int64_t, std::int64_t>>> aborted_;
  std::vector<std::int64_t> outputs_;
  std::vector<std::byte> storage_, records_, rewrite_;
  std::vector<Kept> kept_;
  CleanResult out_;
};

}  // namespace

Result<CleanResult> clean_segments(const CleanPlan& plan, OffsetMap& map, CleanerIo& io,
                                   const std::atomic<bool>* stop) {
  io.bytes_read = io.bytes_written = 0;
  return Pass(plan, map, io, stop).run();
}

}  // namespace samsa::io
