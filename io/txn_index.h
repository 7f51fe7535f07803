// Aborted-transaction index files, in Kafka's format: `<20-digit base>.txnindex` beside a
// partition's segments, one 34-byte entry per aborted transaction whose ABORT marker was
// written while the segment starting at `base` was active (big-endian, Kafka's
// AbortedTxn v0): int16 version (0) | int64 producerId | int64 firstOffset | int64 lastOffset
// (the marker's offset) | int64 lastStableOffset (the LSO once the marker was written).
// A read_committed fetch is answered with the entries its range overlaps, so the consumer can
// drop those producers' records. Entries are appended as markers are written (page cache) and
// synced before the producer snapshot that covers them (replication::Partition does both);
// whatever a crash loses above the newest snapshot is rebuilt by replaying the log after it.
// The files are owned by replication::Partition (io only leaves them alone): they follow the
// partition's log start, not the segment files, so a compacted segment's merge keeps them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "io/log.h"

namespace samsa::io {

struct AbortedTxn {
  std::int64_t producer_id = -1;
  std::int64_t first_offset = -1;
  std::int64_t last_offset = -1;
  std::int64_t last_stable_offset = -1;
  bool operator==(const AbortedTxn&) const = default;
};

inline constexpr std::size_t kTxnIndexEntrySize = 34;

std::filesystem::path txn_index_path(const std::filesystem::path& dir, std::int64_t base);
// Bases of the .txnindex files in dir, ascending.
std::vector<std::int64_t> list_txn_indexes(const std::filesystem::path& dir);

void encode_aborted_txn(const AbortedTxn& e, std::byte* out);  // kTxnIndexEntrySize bytes
// Entries of one file. A torn last entry (a crash in the middle of an append) is ignored;
// an unknown version is Errc::corrupt_batch naming the file and entry. torn, when given, says
// whether such a partial entry was found (rewrite the file before appending to it again).
Result<std::vector<AbortedTxn>> read_txn_index(const std::filesystem::path& file,
                                               bool* torn = nullptr);
// Appends one entry to the file of base (created if absent). Not synced.
Result<void> append_txn_index(const std::filesystem::path& dir, std::int64_t base,
                              const AbortedTxn& e);
// Replaces the file of base with exactly entries (removing it when there are none), synced.
Result<void> rewrite_txn_index(const std::filesystem::path& dir, std::int64_t base,
                               std::span<const AbortedTxn> entries);
// fdatasync of the file of base, if it exists.
Result<void> sync_txn_index(const std::filesystem::path& dir, std::int64_t base);

}  // namespace samsa::io
