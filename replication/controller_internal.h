// Shared by controller.cc and controller_cluster.cc (not a public header).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "io/log.h"
#include "replication/metadata_records.h"

namespace samsa::replication {

// Calls fn(record, or nullptr when undecodable; its offset) for every record of the whole
// record batches in buf (a trailing partial batch is ignored).
io::Result<void> for_each_record(
    std::span<const std::byte> buf, std::vector<std::byte>& storage,
    const std::function<void(const MetadataRecord*, std::int64_t)>& fn);
io::Result<void> pread_all(int fd, std::byte* dst, std::size_t n, std::uint64_t off);

}  // namespace samsa::replication
