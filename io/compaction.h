// io compaction — one cleaning pass over a log's closed segments (Kafka's log cleaner, KIP-534
// delete horizons), run off the reactor by io::LogCleaner's threads:
//   1. one read of the range: the last batch of every producer id, and (from the first dirty
//      offset on) the key -> latest offset map, until the map is full (several passes then);
//   2. each group of adjacent segments (Kafka's group-by-size rule, so small cleaned segments
//      merge) is rewritten into <base>.log.cleaned (+ .index.cleaned, .timeindex.cleaned),
//      keeping the latest record of each key at its original offset, tombstones until their
//      batch's delete horizon, and the last batch of each unexpired producer (empty if need be);
//      transaction markers stay, aborted transactions' records go; the group's last batch
//      stays (emptied) so that its offsets still reach the next segment: a consumer then moves
//      past the group's end even when nothing follows yet (an empty active segment);
//   3. the files are fdatasynced. Log::commit_cleaning swaps them in (io/log_clean.cc).
// Reads and writes go through the pass's own io_uring, throttled to a byte rate.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "io/log.h"
#include "io/txn_index.h"

struct io_uring;

namespace samsa::io {

// Key -> latest offset with bounded memory (log.cleaner.dedupe.buffer.size): keys are kept as
// 128-bit hashes (as Kafka keeps MD5s), 24 bytes a slot, open addressing, filled to 90%.
class OffsetMap {
 public:
  explicit OffsetMap(std::size_t bytes);
  void clear();
  void put(std::span<const std::byte> key, std::int64_t offset) { put(hash(key), offset); }
  std::optional<std::int64_t> get(std::span<const std::byte> key) const { return get(hash(key)); }
  // The same in two steps, so that a batch's keys can be hashed and their slots prefetched
  // before any is looked at: each lookup is a cache miss in a map of 128 MiB, and a batch's
  // misses then overlap instead of queueing.
  struct Hash {
    std::uint64_t h1, h2;
  };
  static Hash hash(std::span<const std::byte> key);
  void prefetch(const Hash& h) const {
    __builtin_prefetch(&slots_[static_cast<std::size_t>(h.h2 % slots_.size())]);
  }
  void put(const Hash& h, std::int64_t offset);
  std::optional<std::int64_t> get(const Hash& h) const;
  std::size_t size() const { return size_; }
  std::size_t slots() const { return slots_.size(); }
  // Keys that still fit before the 90% load limit.
  std::size_t room() const { return limit_ > size_ ? limit_ - size_ : 0; }

 private:
  struct Slot {
    std::uint64_t h1 = 0, h2 = 0;  // h1 == 0: empty (hashes are made non-zero)
    std::int64_t offset = -1;
  };
  std::size_t find(std::uint64_t h1, std::uint64_t h2) const;
  std::vector<Slot> slots_;
  std::size_t size_ = 0;
  std::size_t limit_ = 0;
};

// File reads and writes of a pass: an io_uring of its own (pread/pwrite where the kernel refuses
// one), and log.cleaner.io.max.bytes.per.second over both.
class CleanerIo {
 public:
  explicit CleanerIo(double max_bytes_per_second = 0);
  ~CleanerIo();
  CleanerIo(const CleanerIo&) = delete;
  CleanerIo& operator=(const CleanerIo&) = delete;
  Result<std::size_t> read(int fd, std::byte* buf, std::size_t n, std::uint64_t off,
                           const std::filesystem::path& path);
  Result<void> write(int fd, const std::byte* buf, std::size_t n, std::uint64_t off,
                     const std::filesystem::path& path);
  Result<void> sync(int fd, const std::filesystem::path& path);
  void set_rate(double max_bytes_per_second) { rate_ = max_bytes_per_second; }
  bool uses_uring() const { return ring_ != nullptr; }
  std::uint64_t bytes_read = 0, bytes_written = 0;
  std::int64_t throttled_ns = 0;

 private:
  void throttle(std::size_t n);
  int submit(int op, int fd, void* buf, std::size_t n, std::uint64_t off);
  struct io_uring* ring_ = nullptr;
  double rate_ = 0;
  double tokens_ = 0;
  std::int64_t last_ns_ = 0;
};

// What a pass works on (Log::plan_cleaning fills it on the log's reactor).
struct CleanPlan {
  struct Seg {
    std::shared_ptr<SegmentFile> file;
    std::int64_t base = 0;
    std::uint64_t size = 0;
    std::int64_t next_base = 0;  // the next segment's base: this one covers [base, next_base)
    std::uint64_t index_bytes = 0;
  };
  std::filesystem::path dir;
  std::vector<Seg> segments;  // closed, below clean_end, in order, from the first one
  std::int64_t log_start = 0;
  std::int64_t first_dirty = 0;  // records below were cleaned already
  std::int64_t clean_end = 0;    // nothing at or above is touched
  std::uint64_t generation = 0;  // Log's structure generation when planned (commit checks it)
  std::uint64_t dirty_bytes = 0, total_bytes = 0;
  std::int64_t now_ms = 0;
  std::uint64_t segment_bytes = 1ull << 30;
  std::uint32_t segment_index_bytes = 10u << 20;
  std::uint32_t index_interval_bytes = 4096;
  std::int64_t delete_retention_ms = 86400000;
  std::int64_t producer_expiration_ms = 86400000;
  // Aborted transactions with records in the range (their owner's aborted-transaction index):
  // those records are dropped and their keys supersede nothing.
  std::vector<AbortedTxn> aborted;
  double dirty_ratio() const {
    return total_bytes ? static_cast<double>(dirty_bytes) / static_cast<double>(total_bytes) : 0;
  }
};

struct CleanedGroup {
  std::int64_t base = 0;  // the group's first segment's base: the cleaned segment's name
  std::int64_t end = 0;   // the group covers [base, end): the next segment's base
  std::size_t input_segments = 0;
  std::uint64_t size = 0;  // bytes of the cleaned .log
  std::int64_t max_timestamp = -1;
  std::int64_t first_batch_timestamp = -1;
  std::int64_t data_end = -1;  // one past the last offset of its last batch (-1: no batch)
};

struct CleanStats {
  std::uint64_t bytes_read = 0, bytes_written = 0;
  std::uint64_t batches_read = 0, batches_written = 0, batches_emptied = 0;
  std::uint64_t records_read = 0, records_kept = 0, tombstones_removed = 0;
  std::uint64_t map_keys = 0;
};

struct CleanResult {
  std::vector<CleanedGroup> groups;  // in order; together they replace plan.segments[0, n)
  std::int64_t new_first_dirty = 0;  // the key map's end: the next pass starts there
  CleanStats stats;
};

// The pass itself, on the calling (cleaner) thread: leaves <base>.log.cleaned and its index
// files in plan.dir, synced, for every group. stop (if set) aborts it between batches
// (Errc::busy). On error the .cleaned files it wrote are removed.
Result<CleanResult> clean_segments(const CleanPlan& plan, OffsetMap& map, CleanerIo& io,
                                   const std::atomic<bool>* stop = nullptr);

// Names of a pass's files: "<base>.log.cleaned", and the manifest that commits a pass.
inline constexpr const char* kCleanedSuffix = ".cleaned";
inline constexpr const char* kSwapManifest = "cleaner-swap";
std::filesystem::path cleaned_path(const std::filesystem::path& dir, std::int64_t base,
                                   const char* suffix);
// Removes a pass's .cleaned files (a pass whose log went away, or was not committed).
void discard_cleaned(const CleanPlan& plan, const CleanResult& result);

}  // namespace samsa::io
