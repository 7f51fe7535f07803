// Internals of io::Log: segment file names, the sparse index files and the rule that places
// their entries, the active segment's ring of recent batch positions, and the sequential batch
// scan used by recovery. Not a public interface (only io/ and its tests include it).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "io/log.h"

namespace samsa::io::detail {

inline constexpr std::size_t kOffsetEntrySize = 8;  // int32 relative offset, int32 position
inline constexpr std::size_t kTimeEntrySize = 12;   // int64 timestamp, int32 relative offset

// "00000000000000000042" for 42.
std::string segment_name(std::int64_t base_offset);
// The base offset of "<20 digits><suffix>", or nullopt.
std::optional<std::int64_t> parse_segment_name(std::string_view filename, std::string_view suffix);
// The offsets of the "<20 digits><suffix>" files in dir, ascending (producer snapshots,
// aborted-transaction indexes); other files are ignored.
std::vector<std::int64_t> list_offset_files(const std::filesystem::path& dir,
                                            std::string_view suffix);

struct OffsetEntry {
  std::int32_t rel_offset;
  std::int32_t position;
};
struct TimeEntry {
  std::int64_t timestamp;
  std::int32_t rel_offset;
};

// Read-only views over index bytes (an index file's contents, or an active segment's entries
// kept in memory in the very same big-endian layout).
struct OffsetIndexView {
  std::span<const std::byte> bytes;
  std::size_t size() const { return bytes.size() / kOffsetEntrySize; }
  OffsetEntry at(std::size_t i) const {
    const std::byte* p = bytes.data() + i * kOffsetEntrySize;
    return {load_be<std::int32_t>(p), load_be<std::int32_t>(p + 4)};
  }
  // Largest i with rel_offset <= rel, or -1.
  std::ptrdiff_t floor_offset(std::int64_t rel) const;
  // Largest i with position <= pos, or -1.
  std::ptrdiff_t floor_position(std::uint64_t pos) const;
};

struct TimeIndexView {
  std::span<const std::byte> bytes;
  std::size_t size() const { return bytes.size() / kTimeEntrySize; }
  TimeEntry at(std::size_t i) const {
    const std::byte* p = bytes.data() + i * kTimeEntrySize;
    return {load_be<std::int64_t>(p), load_be<std::int32_t>(p + 8)};
  }
  // Largest i with timestamp < ts, or -1.
  std::ptrdiff_t floor_below(std::int64_t ts) const;
};

// Checks an offset index against its segment: whole entries, offsets and positions strictly
// increasing, offsets within [0, max_rel], positions inside the log file. The reason on failure.
std::optional<std::string> check_offset_index(std::span<const std::byte> b, std::uint64_t log_size,
                                              std::int64_t max_rel);
std::optional<std::string> check_time_index(std::span<const std::byte> b, std::int64_t max_rel);

// The bytes of a closed segment's index file: mapped read-only (MAP_PRIVATE, which also works on
// FUSE direct_io files), or read into memory where mapping is refused.
class IndexFile {
 public:
  IndexFile() = default;
  IndexFile(IndexFile&& o) noexcept { *this = std::move(o); }
  IndexFile& operator=(IndexFile&& o) noexcept;
  ~IndexFile();
  static Result<IndexFile> load(const std::filesystem::path& p);  // absent file: not_found
  // Entries held in memory (a rolled segment's, until its files are written and mapped).
  static IndexFile adopt(std::shared_ptr<const std::vector<std::byte>> bytes);
  std::span<const std::byte> bytes() const {
    if (map_) return {static_cast<const std::byte*>(map_), map_len_};
    if (owned_) return {owned_->data(), owned_->size()};
    return {};
  }

 private:
  void* map_ = nullptr;
  std::size_t map_len_ = 0;
  std::shared_ptr<const std::vector<std::byte>> owned_;
};

// Kafka's placement of sparse index entries: an offset entry (last offset of the batch -> batch
// position) once more than index.interval.bytes were appended since the previous one, with a
// time entry (largest timestamp so far -> offset of the batch holding it) when that largest
// timestamp grew. finish() adds the final time entry when a segment is closed, so the time
// index's last entry is the segment's largest timestamp.
class IndexBuilder {
 public:
  void reset(std::int64_t base_offset, std::uint32_t interval_bytes);
  // Restores state from existing index bytes (a segment reopened for appends) up to, but not
  // including, the batch at byte position `end` / offset `end_offset`.
  void restore(std::int64_t base_offset, std::uint32_t interval_bytes,
               std::span<const std::byte> offsets, std::span<const std::byte> times,
               std::uint64_t end, std::int64_t end_offset);
  // One batch appended at position with the given size.
  void add(std::int64_t last_offset, std::int64_t max_timestamp, std::uint64_t position,
           std::uint64_t size);
  // Only updates the largest timestamp (batches already covered by restored entries).
  void observe(std::int64_t last_offset, std::int64_t max_timestamp);
  void finish();

  std::size_t offset_entries() const { return offsets.size() / kOffsetEntrySize; }
  std::size_t time_entries() const { return times.size() / kTimeEntrySize; }
  OffsetIndexView offset_view() const { return {offsets}; }
  TimeIndexView time_view() const { return {times}; }

  std::vector<std::byte> offsets;
  std::vector<std::byte> times;
  std::int64_t base = 0;
  std::uint32_t interval = 4096;
  std::uint64_t bytes_since_entry = 0;
  std::int64_t max_timestamp = -1;
  std::int64_t offset_of_max_timestamp = -1;

 private:
  void append_time(std::int64_t ts, std::int64_t offset);
};

// The most recent batches of the active segment (base offset and position), so reads at the tail
// find their bytes without a system call. Bounded: past its capacity the oldest entry falls
// out. Its storage grows with use (16 entries, doubling up to the capacity), so a partition
// written a few times holds a few hundred bytes here, not the whole 16 KiB.
class BatchRing {
 public:
  struct Entry {
    std::int64_t base_offset;
    std::uint64_t position;
  };
  explicit BatchRing(std::size_t capacity = 1024);
  void push(std::int64_t base_offset, std::uint64_t position);
  void pop_back();
  void clear() { head_ = size_ = 0; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const Entry& at(std::size_t i) const { return buf_[(head_ + i) & mask_]; }
  const Entry& back() const { return at(size_ - 1); }
  // Largest i with base_offset <= offset, or -1 (offset older than the ring).
  std::ptrdiff_t find(std::int64_t offset) const;

 private:
  std::vector<Entry> buf_;  // a power of two <= capacity_, or empty
  std::size_t capacity_;
  std::size_t mask_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

// Sequential scan of a segment's batches from `from`, checking each header (magic, lengths,
// record count) and offset continuity, and the CRC when verify_crc. Stops at the first problem
// and says what and where; I/O errors are returned as errors.
struct ScanOptions {
  std::uint64_t from = 0;
  std::uint64_t end = 0;                  // file size
  std::int64_t expected_base = -1;        // base offset of the batch at `from`, if known
  std::int64_t expected_first_last = -1;  // else: last offset of the batch at `from`, if known
  bool verify_crc = true;
  // A compacted log's batches (see Log::Impl::gaps_ok_): offsets only increase, batches may
  // hold fewer records than their offset range, or none. Otherwise they continue exactly.
  bool allow_gaps = false;
};
struct ScanOutcome {
  std::uint64_t valid_end = 0;    // end of the last good batch
  std::int64_t next_offset = -1;  // one past the last good batch's last offset (-1: none)
  std::int64_t batches = 0;
  std::string problem;  // empty when the scan reached `end` cleanly
};
using BatchFn = std::function<void(const BatchInfo& info, std::uint64_t position)>;
Result<ScanOutcome> scan_batches(int fd, const std::filesystem::path& path, const ScanOptions& o,
                                 const BatchFn& fn);

// pread of exactly n bytes (fewer only at end of file). -errno on failure.
ssize_t pread_full(int fd, void* buf, std::size_t n, std::uint64_t off);
// Writes all of data at offset 0 of `p` (created or truncated), then fdatasyncs it if `sync`.
Result<void> write_whole_file(const std::filesystem::path& p, std::span<const std::byte> data,
                              bool sync = false);

}  // namespace samsa::io::detail
