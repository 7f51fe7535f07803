#include "io/producer_snapshot.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "base/bytes.h"
#include "base/crc32c.h"
#include "io/checkpoint.h"
#include "io/segment.h"

namespace samsa::io {
namespace {

constexpr std::string_view kSuffix = ".snapshot";
constexpr std::int16_t kVersion = 1;
constexpr std::size_t kCrcAt = 2;
constexpr std::size_t kEntriesAt = 6;  // version + CRC: the CRC covers everything from here
constexpr std::size_t kEntrySize = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8;

std::unexpected<Error> corrupt(std::string what) {
  return std::unexpected(Error{Errc::corrupt_batch, std::move(what)});
}

}  // namespace

std::filesystem::path producer_snapshot_path(const std::filesystem::path& dir,
                                             std::int64_t offset) {
  return dir / (detail::segment_name(offset) + std::string(kSuffix));
}

std::vector<std::int64_t> list_producer_snapshots(const std::filesystem::path& dir) {
  return detail::list_offset_files(dir, kSuffix);
}

std::vector<std::byte> encode_producer_snapshot(std::span<const ProducerSnapshotEntry> entries) {
  std::vector<std::byte> b(kEntriesAt + 4 + entries.size() * kEntrySize);
  std::byte* p = b.data();
  store_be<std::int16_t>(p, kVersion);
  store_be<std::int32_t>(p + kEntriesAt, static_cast<std::int32_t>(entries.size()));
  p += kEntriesAt + 4;
  for (const auto& e : entries) {
    store_be<std::int64_t>(p, e.producer_id);
    store_be<std::int16_t>(p + 8, e.epoch);
    store_be<std::int32_t>(p + 10, e.last_sequence);
    store_be<std::int64_t>(p + 14, e.last_offset);
    store_be<std::int32_t>(p + 22, e.offset_delta);
    store_be<std::int64_t>(p + 26, e.timestamp);
    store_be<std::int32_t>(p + 34, e.coordinator_epoch);
    store_be<std::int64_t>(p + 38, e.current_txn_first_offset);
    p += kEntrySize;
  }
  store_be<std::uint32_t>(b.data() + kCrcAt,
                          crc32c(0, b.data() + kEntriesAt, b.size() - kEntriesAt));
  return b;
}

Result<std::vector<ProducerSnapshotEntry>> decode_producer_snapshot(std::span<const std::byte> b) {
  if (b.size() < kEntriesAt + 4) {
    return corrupt("snapshot is " + std::to_string(b.size()) + " bytes, shorter than its header");
  }
  const auto version = load_be<std::int16_t>(b.data());
  if (version != kVersion) {
    return corrupt("snapshot version is " + std::to_string(version) + ", only 1 is known");
  }
  const auto stored = load_be<std::uint32_t>(b.data() + kCrcAt);
  const auto computed = crc32c(0, b.data() + kEntriesAt, b.size() - kEntriesAt);
  if (stored != computed) return corrupt("snapshot CRC32C mismatch");
  const auto count = load_be<std::int32_t>(b.data() + kEntriesAt);
  if (count < 0 || static_cast<std::size_t>(count) * kEntrySize != b.size() - kEntriesAt - 4) {
    return corrupt("snapshot claims " + std::to_string(count) + " entries in " +
                   std::to_string(b.size()) + " bytes");
  }
  std::vector<ProducerSnapshotEntry> out(static_cast<std::size_t>(count));
  const std::byte* p = b.data() + kEntriesAt + 4;
  for (auto& e : out) {
    e.producer_id = load_be<std::int64_t>(p);
    e.epoch = load_be<std::int16_t>(p + 8);
    e.last_sequence = load_be<std::int32_t>(p + 10);
    e.last_offset = load_be<std::int64_t>(p + 14);
    e.offset_delta = load_be<std::int32_t>(p + 22);
    e.timestamp = load_be<std::int64_t>(p + 26);
    e.coordinator_epoch = load_be<std::int32_t>(p + 34);
    e.current_txn_first_offset = load_be<std::int64_t>(p + 38);
    p += kEntrySize;
  }
  return out;
}

Result<void> write_producer_snapshot(const std::filesystem::path& dir, std::int64_t offset,
                                     std::span<const ProducerSnapshotEntry> entries, bool sync) {
  auto bytes = encode_producer_snapshot(entries);
  return write_file_atomically(
      producer_snapshot_path(dir, offset),
      std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), sync);
}

Result<std::vector<ProducerSnapshotEntry>> read_producer_snapshot(
    const std::filesystem::path& file) {
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::unexpected(sys_error("open", file, errno));
  std::vector<std::byte> buf;
  std::byte chunk[8192];
  for (;;) {
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return std::unexpected(sys_error("read", file, err));
    }
    if (n == 0) break;
    buf.insert(buf.end(), chunk, chunk + n);
  }
  ::close(fd);
  auto r = decode_producer_snapshot(buf);
  if (!r) r.error().detail = file.string() + ": " + r.error().detail;
  return r;
}

}  // namespace samsa::io
