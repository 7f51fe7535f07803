// Producer-state snapshot files, in Kafka's format: `<20-digit offset>.snapshot` beside a
// partition's segments, holding the idempotent producers' state as of that offset (every batch
// below it, none at or above). Layout (big-endian, Kafka's ProducerSnapshot v1):
//   int16 version (1) | uint32 CRC32C of everything after it | int32 count | count entries of
//   int64 producerId, int16 epoch, int32 lastSequence, int64 lastOffset, int32 offsetDelta
//   (lastSequence - firstSequence of that batch), int64 timestamp, int32 coordinatorEpoch,
//   int64 currentTxnFirstOffset.
// samsa writes up to five entries per producer (its last five batches, oldest first) so that a
// restart still recognises retries of any of them; Kafka reads the same file and keeps the last
// entry per producer, which is its own state. Files are replaced atomically (temp, fsync,
// rename, directory fsync).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "io/log.h"

namespace samsa::io {

struct ProducerSnapshotEntry {
  std::int64_t producer_id = -1;
  std::int16_t epoch = -1;
  std::int32_t last_sequence = -1;
  std::int64_t last_offset = -1;
  std::int32_t offset_delta = 0;
  std::int64_t timestamp = -1;
  std::int32_t coordinator_epoch = -1;
  std::int64_t current_txn_first_offset = -1;
  bool operator==(const ProducerSnapshotEntry&) const = default;
};

std::filesystem::path producer_snapshot_path(const std::filesystem::path& dir, std::int64_t offset);
// Offsets of the snapshot files in dir, ascending (files that are not snapshots are ignored).
std::vector<std::int64_t> list_producer_snapshots(const std::filesystem::path& dir);

std::vector<std::byte> encode_producer_snapshot(std::span<const ProducerSnapshotEntry> entries);
// Errc::corrupt_batch naming the problem when the bytes are not a whole, CRC-clean snapshot.
Result<std::vector<ProducerSnapshotEntry>> decode_producer_snapshot(
    std::span<const std::byte> bytes);

// Atomic (write_file_atomically); `sync` false leaves the syncing to a later syncfs (a clean
// stop): a snapshot torn by a cut fails its CRC and is ignored.
Result<void> write_producer_snapshot(const std::filesystem::path& dir, std::int64_t offset,
                                     std::span<const ProducerSnapshotEntry> entries,
                                     bool sync = true);
Result<std::vector<ProducerSnapshotEntry>> read_producer_snapshot(
    const std::filesystem::path& file);

}  // namespace samsa::io
