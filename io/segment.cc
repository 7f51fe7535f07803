#include "io/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdio>

#include "io/checkpoint.h"
#include "io/record_batch.h"

namespace samsa::io {

SegmentFile::~SegmentFile() {
  if (fd >= 0) ::close(fd);
}

namespace detail {

std::string segment_name(std::int64_t base_offset) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%020" PRId64, base_offset);
  return buf;
}

std::optional<std::int64_t> parse_segment_name(std::string_view name, std::string_view suffix) {
  if (name.size() != 20 + suffix.size() || !name.ends_with(suffix)) return std::nullopt;
  std::int64_t v = 0;
  for (std::size_t i = 0; i < 20; ++i) {
    char c = name[i];
    if (c < '0' || c > '9') return std::nullopt;
    if (v > (INT64_MAX - (c - '0')) / 10) return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

std::vector<std::int64_t> list_offset_files(const std::filesystem::path& dir,
                                            std::string_view suffix) {
  std::vector<std::int64_t> out;
  std::error_code ec;
  for (const auto& de : std::filesystem::directory_iterator(dir, ec)) {
    if (auto o = parse_segment_name(de.path().filename().string(), suffix)) out.push_back(*o);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::ptrdiff_t OffsetIndexView::floor_offset(std::int64_t rel) const {
  std::size_t lo = 0, hi = size();  // first entry with rel_offset > rel
  while (lo < hi) {
    std::size_t mid = (lo + hi) / 2;
    if (at(mid).rel_offset <= rel) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return static_cast<std::ptrdiff_t>(lo) - 1;
}

std::ptrdiff_t OffsetIndexView::floor_position(std::uint64_t pos) const {
  std::size_t lo = 0, hi = size();
  while (lo < hi) {
    std::size_t mid = (lo + hi) / 2;
    if (static_cast<std::uint64_t>(at(mid).position) <= pos) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return static_cast<std::ptrdiff_t>(lo) - 1;
}

std::ptrdiff_t TimeIndexView::floor_below(std::int64_t ts) const {
  std::size_t lo = 0, hi = size();
  while (lo < hi) {
    std::size_t mid = (lo + hi) / 2;
    if (at(mid).timestamp < ts) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return static_cast<std::ptrdiff_t>(lo) - 1;
}

std::optional<std::string> check_offset_index(std::span<const std::byte> b, std::uint64_t log_size,
                                              std::int64_t max_rel) {
  char buf[200];
  if (b.size() % kOffsetEntrySize) {
    std::snprintf(buf, sizeof buf, "size %zu is not a multiple of %zu", b.size(), kOffsetEntrySize);
    return buf;
  }
  OffsetIndexView v{b};
  std::int64_t prev_rel = -1, prev_pos = -1;
  for (std::size_t i = 0; i < v.size(); ++i) {
    OffsetEntry e = v.at(i);
    const char* what = nullptr;
    if (e.rel_offset <= prev_rel) what = "offsets do not increase";
    if (e.position <= prev_pos) what = "positions do not increase";
    if (e.rel_offset > max_rel) what = "offset beyond the segment";
    if (static_cast<std::uint64_t>(e.position) >= log_size) what = "position beyond the log file";
    if (what) {
      std::snprintf(buf, sizeof buf, "entry %zu (offset +%d, position %d): %s", i, e.rel_offset,
                    e.position, what);
      return buf;
    }
    prev_rel = e.rel_offset;
    prev_pos = e.position;
  }
  return std::nullopt;
}

std::optional<std::string> check_time_index(std::span<const std::byte> b, std::int64_t max_rel) {
  char buf[200];
  if (b.size() % kTimeEntrySize) {
    std::snprintf(buf, sizeof buf, "size %zu is not a multiple of %zu", b.size(), kTimeEntrySize);
    return buf;
  }
  TimeIndexView v{b};
  std::int64_t prev_ts = INT64_MIN, prev_rel = -1;
  for (std::size_t i = 0; i < v.size(); ++i) {
    TimeEntry e = v.at(i);
    const char* what = nullptr;
    if (e.timestamp <= prev_ts) what = "timestamps do not increase";
    if (e.rel_offset < prev_rel || e.rel_offset < 0) what = "offsets decrease";
    if (e.rel_offset > max_rel) what = "offset beyond the segment";
    if (what) {
      std::snprintf(buf, sizeof buf, "entry %zu (timestamp %" PRId64 ", offset +%d): %s", i,
                    e.timestamp, e.rel_offset, what);
      return buf;
    }
    prev_ts = e.timestamp;
    prev_rel = e.rel_offset;
  }
  return std::nullopt;
}

IndexFile& IndexFile::operator=(IndexFile&& o) noexcept {
  if (this != &o) {
    if (map_) ::munmap(map_, map_len_);
    map_ = std::exchange(o.map_, nullptr);
    map_len_ = std::exchange(o.map_len_, 0);
    owned_ = std::move(o.owned_);
  }
  return *this;
}

IndexFile::~IndexFile() {
  if (map_) ::munmap(map_, map_len_);
}

IndexFile IndexFile::adopt(std::shared_ptr<const std::vector<std::byte>> bytes) {
  IndexFile f;
  f.owned_ = std::move(bytes);
  return f;
}

Result<IndexFile> IndexFile::load(const std::filesystem::path& p) {
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::unexpected(Error{Errc::not_found, p.string() + " is missing"});
    return std::unexpected(sys_error("open", p, errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return std::unexpected(sys_error("stat", p, err));
  }
  IndexFile f;
  auto len = static_cast<std::size_t>(st.st_size);
  if (len > 0) {
    void* m = ::mmap(nullptr, len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m != MAP_FAILED) {
      f.map_ = m;
      f.map_len_ = len;
    } else {
      auto owned = std::make_shared<std::vector<std::byte>>(len);
      ssize_t n = pread_full(fd, owned->data(), len, 0);
      f.owned_ = std::move(owned);
      if (n < 0 || static_cast<std::size_t>(n) != len) {
        ::close(fd);
        return std::unexpected(sys_error("read", p, n < 0 ? static_cast<int>(-n) : EIO));
      }
    }
  }
  ::close(fd);
  return f;
}

void IndexBuilder::reset(std::int64_t base_offset, std::uint32_t interval_bytes) {
  offsets.clear();
  times.clear();
  base = base_offset;
  interval = interval_bytes;
  bytes_since_entry = 0;
  max_timestamp = -1;
  offset_of_max_timestamp = -1;
}

void IndexBuilder::restore(std::int64_t base_offset, std::uint32_t interval_bytes,
                           std::span<const std::byte> off, std::span<const std::byte> tim,
                           std::uint64_t end, std::int64_t end_offset) {
  reset(base_offset, interval_bytes);
  OffsetIndexView ov{off};
  std::size_t keep = 0;
  while (keep < ov.size() && static_cast<std::uint64_t>(ov.at(keep).position) < end)
    ++keep;
  offsets.assign(off.begin(), off.begin() + static_cast<std::ptrdiff_t>(keep * kOffsetEntrySize));
  TimeIndexView tv{tim};
  std::size_t tkeep = 0;
  while (tkeep < tv.size() && base + tv.at(tkeep).rel_offset < end_offset)
    ++tkeep;
  times.assign(tim.begin(), tim.begin() + static_cast<std::ptrdiff_t>(tkeep * kTimeEntrySize));
  if (tkeep) {
    TimeEntry last = tv.at(tkeep - 1);
    max_timestamp = last.timestamp;
    offset_of_max_timestamp = base + last.rel_offset;
  }
  // Kafka's counter after the batch that got the last entry: the bytes from that batch on.
  bytes_since_entry = keep ? end - static_cast<std::uint64_t>(ov.at(keep - 1).position) : end;
}

void IndexBuilder::append_time(std::int64_t ts, std::int64_t offset) {
  std::size_t n = times.size();
  times.resize(n + kTimeEntrySize);
  store_be<std::int64_t>(times.data() + n, ts);
  store_be<std::int32_t>(times.data() + n + 8, static_cast<std::int32_t>(offset - base));
}

void IndexBuilder::observe(std::int64_t last_offset, std::int64_t max_ts) {
  if (max_ts > max_timestamp) {
    max_timestamp = max_ts;
    offset_of_max_timestamp = last_offset;
  }
}

void IndexBuilder::add(std::int64_t last_offset, std::int64_t max_ts, std::uint64_t position,
                       std::uint64_t size) {
  observe(last_offset, max_ts);
  if (bytes_since_entry > interval) {
    std::size_t n = offsets.size();
    offsets.resize(n + kOffsetEntrySize);
    store_be<std::int32_t>(offsets.data() + n, static_cast<std::int32_t>(last_offset - base));
    store_be<std::int32_t>(offsets.data() + n + 4, static_cast<std::int32_t>(position));
    if (max_timestamp >= 0 &&
        (times.empty() || max_timestamp > time_view().at(time_entries() - 1).timestamp)) {
      append_time(max_timestamp, offset_of_max_timestamp);
    }
    bytes_since_entry = 0;
  }
  bytes_since_entry += size;
}

void IndexBuilder::finish() {
  if (max_timestamp >= 0 &&
      (times.empty() || max_timestamp > time_view().at(time_entries() - 1).timestamp)) {
    append_time(max_timestamp, offset_of_max_timestamp);
  }
}

BatchRing::BatchRing(std::size_t capacity)
    : capacity_(std::bit_ceil(std::max<std::size_t>(capacity, 2))), mask_(capacity_ - 1) {}

void BatchRing::push(std::int64_t base_offset, std::uint64_t position) {
  // Allocated on the first append (a partition nobody writes to costs nothing here), and
  // grown, in order, while below the capacity.
  if (size_ == buf_.size() && buf_.size() < capacity_) {
    std::vector<Entry> bigger(std::min(capacity_, std::max<std::size_t>(16, buf_.size() * 2)));
    for (std::size_t i = 0; i < size_; ++i)
      bigger[i] = at(i);
    buf_.swap(bigger);
    head_ = 0;
    mask_ = buf_.size() - 1;
  }
  if (size_ == buf_.size()) {
    head_ = (head_ + 1) & mask_;
    --size_;
  }
  buf_[(head_ + size_) & mask_] = {base_offset, position};
  ++size_;
}

void BatchRing::pop_back() {
  if (size_) --size_;
}

std::ptrdiff_t BatchRing::find(std::int64_t offset) const {
  std::size_t lo = 0, hi = size_;
  while (lo < hi) {
    std::size_t mid = (lo + hi) / 2;
    if (at(mid).base_offset <= offset) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return static_cast<std::ptrdiff_t>(lo) - 1;
}

ssize_t pread_full(int fd, void* buf, std::size_t n, std::uint64_t off) {
  std::size_t done = 0;
  while (done < n) {
    ssize_t r =
        ::pread(fd, static_cast<char*>(buf) + done, n - done, static_cast<off_t>(off + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (r == 0) break;
    done += static_cast<std::size_t>(r);
  }
  return static_cast<ssize_t>(done);
}

Result<void> write_whole_file(const std::filesystem::path& p, std::span<const std::byte> data,
                              bool sync) {
  int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return std::unexpected(sys_error("create", p, errno));
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::pwrite(fd, data.data() + done, data.size() - done, static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return std::unexpected(sys_error("write", p, err));
    }
    done += static_cast<std::size_t>(n);
  }
  if (sync && ::fdatasync(fd) != 0) {
    int err = errno;
    ::close(fd);
    return std::unexpected(sys_error("fdatasync", p, err));
  }
  ::close(fd);
  return {};
}

Result<ScanOutcome> scan_batches(int fd, const std::filesystem::path& path, const ScanOptions& o,
                                 const BatchFn& fn) {
  constexpr std::size_t kChunk = 1u << 20;
  std::vector<std::byte> buf(std::min<std::uint64_t>(kChunk, o.end - std::min(o.end, o.from)));
  std::uint64_t buf_pos = 0;  // file position of buf[0]
  std::size_t buf_len = 0;
  // Makes [pos, pos + n) available in buf; false at end of file.
  auto ensure = [&](std::uint64_t pos, std::size_t n) -> Result<bool> {
    if (pos >= buf_pos && pos + n <= buf_pos + buf_len) return true;
    std::size_t want = static_cast<std::size_t>(
        std::min<std::uint64_t>(std::max<std::size_t>(n, kChunk), o.end - pos));
    if (want < n) return false;
    if (buf.size() < want) buf.resize(want);
    ssize_t r = pread_full(fd, buf.data(), want, pos);
    if (r < 0) return std::unexpected(sys_error("read", path, static_cast<int>(-r)));
    buf_pos = pos;
    buf_len = static_cast<std::size_t>(r);
    return buf_len >= n;
  };

  ScanOutcome out;
  out.valid_end = o.from;
  std::uint64_t pos = o.from;
  std::int64_t next = o.expected_base;
  char why[256];
  while (pos < o.end) {
    std::uint64_t left = o.end - pos;
    if (left < batch::kHeaderSize) {
      std::snprintf(why, sizeof why, "partial batch header (%" PRIu64 " bytes at end of file)",
                    left);
      out.problem = why;
      break;
    }
    auto got = ensure(pos, batch::kHeaderSize);
    if (!got) return std::unexpected(got.error());
    if (!*got) {
      out.problem = "file shorter than its size while reading";
      break;
    }
    const std::byte* h = buf.data() + (pos - buf_pos);
    auto info = batch::check_header({h, batch::kHeaderSize}, 0,
                                    o.allow_gaps ? batch::Form::stored : batch::Form::produced);
    if (!info) {
      out.problem = info.error().detail;
      break;
    }
    auto len = static_cast<std::uint64_t>(info->length);
    if (len > left) {
      std::snprintf(why, sizeof why,
                    "batch of %" PRIu64 " bytes runs past the end of the file (%" PRIu64
                    " bytes left)",
                    len, left);
      out.problem = why;
      break;
    }
    std::int64_t last = info->base_offset + info->last_offset_delta;
    if (next >= 0 && (o.allow_gaps ? info->base_offset < next : info->base_offset != next)) {
      std::snprintf(why, sizeof why, "base offset %" PRId64 ", expected %s%" PRId64,
                    info->base_offset, o.allow_gaps ? "at least " : "", next);
      out.problem = why;
      break;
    }
    if (next < 0 && out.batches == 0 && o.expected_first_last >= 0 &&
        last != o.expected_first_last) {
      std::snprintf(why, sizeof why, "batch ends at offset %" PRId64 ", the index says %" PRId64,
                    last, o.expected_first_last);
      out.problem = why;
      break;
    }
    if (o.verify_crc) {
      auto whole = ensure(pos, static_cast<std::size_t>(len));
      if (!whole) return std::unexpected(whole.error());
      if (!*whole) {
        out.problem = "file shorter than its size while reading";
        break;
      }
      std::span<const std::byte> b(buf.data() + (pos - buf_pos), static_cast<std::size_t>(len));
      std::uint32_t stored = load_be<std::uint32_t>(b.data() + batch::kCrc);
      std::uint32_t computed = batch::compute_crc(b);
      if (stored != computed) {
        std::snprintf(why, sizeof why,
                      "CRC32C mismatch in batch at offset %" PRId64
                      " (stored 0x%08x, computed "
                      "0x%08x)",
                      info->base_offset, stored, computed);
        out.problem = why;
        break;
      }
    }
    if (fn) fn(*info, pos);
    ++out.batches;
    pos += len;
    next = last + 1;
    out.valid_end = pos;
    out.next_offset = next;
  }
  return out;
}

}  // namespace detail
}  // namespace samsa::io
