// Snapshots of the metadata image as KRaft keeps them: .checkpoint files in the metadata log's
// directory (__cluster_metadata-0), named <end offset, 20 digits>-<epoch, 10 digits>.checkpoint
// (e.g. 00000000000000001234-0000000007.checkpoint). A file is record batches (RecordBatch v2,
// uncompressed, partitionLeaderEpoch = the snapshot's epoch, offsets from 0 within the file and
// continuous):
//   a control batch holding a SnapshotHeaderRecord (offset 0),
//   data batches holding the MetadataRecords (encode_record values, null keys; at most
//     kSnapshotBatchBytes each, unless one record alone is larger),
//   a control batch holding a SnapshotFooterRecord (the last offset).
// A file being written is <name>.part until it is synced and renamed, so a .checkpoint file is
// always whole (a power cut leaves at most a stray .part, removed at the next open).
//
// Encoding is CPU work (the controller's thread); writing is blocking file I/O on whichever
// thread the caller picks (an offload thread: these functions touch no shared state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/log.h"
#include "replication/metadata_records.h"
#include "replication/quorum/raft.h"

namespace samsa::replication::quorum {

inline constexpr std::string_view kSnapshotSuffix = ".checkpoint";
inline constexpr std::string_view kPartialSuffix = ".part";  // after kSnapshotSuffix
inline constexpr std::size_t kSnapshotBatchBytes = 1u << 20;

// "<end offset, 20 digits>-<epoch, 10 digits>.checkpoint"; the id back from exactly such a
// name (nullopt for anything else: other files, .part files, numbers out of range).
std::string snapshot_file_name(const SnapshotId& id);
std::optional<SnapshotId> parse_snapshot_file_name(std::string_view name);

// The whole file's bytes. last_contained_timestamp goes to the header and is every record's
// timestamp, so the same image always encodes to the same bytes.
std::vector<std::byte> encode_snapshot(std::span<const MetadataRecord> records,
                                       const SnapshotId& id, std::int64_t last_contained_timestamp);

// Checks a snapshot's bytes and returns its records: every batch whole and valid (length,
// magic, CRC, record framing), offsets continuous from 0, a SnapshotHeaderRecord batch first, a
// SnapshotFooterRecord batch last and nothing after it, no other control batch, every record
// decodable. Errc::corrupt_batch (or the batch check's own code), the detail starting with
// `what` and naming the byte position and the problem.
io::Result<std::vector<MetadataRecord>> decode_snapshot(std::span<const std::byte> bytes,
                                                        std::string_view what);

// Writes dir/<name>.part (created exclusively: two writers of one snapshot fail rather than
// mix), fsyncs it, renames it to dir/<name> and fsyncs dir. Returns the final path. On failure
// the .part file is removed and no .checkpoint appears.
io::Result<std::filesystem::path> write_snapshot_file(const std::filesystem::path& dir,
                                                      const SnapshotId& id,
                                                      std::span<const std::byte> bytes);

// Reads and checks a whole .checkpoint file (decode_snapshot; errors name the file).
io::Result<std::vector<MetadataRecord>> read_snapshot_file(const std::filesystem::path& path);

// The snapshots in dir (regular files with valid names only), oldest first.
io::Result<std::vector<SnapshotId>> list_snapshots(const std::filesystem::path& dir);

// Removes every snapshot older than keep (by end offset, then epoch), then fsyncs dir once.
// Returns how many were removed.
io::Result<std::size_t> delete_snapshots_before(const std::filesystem::path& dir,
                                                const SnapshotId& keep);

// Removes stray *.checkpoint.part files (writes or transfers a stop or power cut interrupted).
// Called when the directory is opened, before anything is written. Returns how many.
io::Result<std::size_t> remove_partial_snapshots(const std::filesystem::path& dir);

namespace detail {
// write(2) until all of bytes is written (EINTR retried); errors name path.
io::Result<void> write_all(int fd, std::span<const std::byte> bytes,
                           const std::filesystem::path& path);
}  // namespace detail

}  // namespace samsa::replication::quorum
