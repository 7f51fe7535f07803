// Shared by controller.cc and controller_cluster.cc (not a public header).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "io/log.h"
#include "replication/controller.h"
#include "replication/metadata_records.h"
#include "replication/quorum/file_snapshot_store.h"

namespace samsa::replication {

// Calls fn(record, or nullptr when undecodable or a control record; its offset; whether it is
// a control record) for every record of the whole record batches in buf (a trailing partial
// batch is ignored).
io::Result<void> for_each_record(
    std::span<const std::byte> buf, std::vector<std::byte>& storage,
    const std::function<void(const MetadataRecord*, std::int64_t, bool)>& fn);
io::Result<void> pread_all(int fd, std::byte* dst, std::size_t n, std::uint64_t off);

// One commit: its records in one or more batches (pieces), appended in the same loop turn so
// one group commit writes and syncs them all. It completes once the quorum's high watermark
// passes its last record (on a quorum of one: once synced).
struct Controller::Commit {
  struct Piece : io::AppendOp {
    std::vector<std::byte> bytes;
    std::int64_t first_offset = -1;  // what the state machine gave its records
    std::int64_t last_offset = -1;
    Commit* owner = nullptr;
    std::size_t index = 0;
  };
  std::vector<std::unique_ptr<Piece>> pieces;
  std::size_t in_flight = 0;  // appended pieces whose write has not completed
  std::int64_t last_offset = -1;
  std::function<void(kafka::ErrorCode)> then;
  Controller* self = nullptr;
  bool orphaned = false;  // answered already (leadership lost); freed once its writes are back
};

struct Controller::Parked {
  quorum::FetchRequest req;
  std::int32_t max_bytes = 0;
  std::int64_t deadline_ms = 0;  // mono
  std::int64_t hw_seen = -1;
  std::function<void(FetchReply)> done;
};

// A follower's fetched batches on their way to the log (one fetch at a time: the next one waits
// for this to be durable).
struct Controller::FollowerAppend : io::AppendOp {
  std::vector<std::byte> bytes;
  Controller* self = nullptr;
};

}  // namespace samsa::replication
