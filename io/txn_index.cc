#include "io/txn_index.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/bytes.h"
#include "io/checkpoint.h"
#include "io/segment.h"

namespace samsa::io {
namespace {

constexpr std::string_view kSuffix = ".txnindex";
constexpr std::int16_t kVersion = 0;

std::unexpected<Error> sys_fail(const std::filesystem::path& p, const char* what) {
  return std::unexpected(
      Error{Errc::io_error, p.string() + ": " + what + ": " + std::strerror(errno)});
}

}  // namespace

std::filesystem::path txn_index_path(const std::filesystem::path& dir, std::int64_t base) {
  return dir / (detail::segment_name(base) + std::string(kSuffix));
}

std::vector<std::int64_t> list_txn_indexes(const std::filesystem::path& dir) {
  return detail::list_offset_files(dir, kSuffix);
}

void encode_aborted_txn(const AbortedTxn& e, std::byte* p) {
  store_be<std::int16_t>(p, kVersion);
  store_be<std::int64_t>(p + 2, e.producer_id);
  store_be<std::int64_t>(p + 10, e.first_offset);
  store_be<std::int64_t>(p + 18, e.last_offset);
  store_be<std::int64_t>(p + 26, e.last_stable_offset);
}

Result<std::vector<AbortedTxn>> read_txn_index(const std::filesystem::path& file, bool* torn) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return sys_fail(file, "open");
  std::vector<std::byte> buf;
  std::byte chunk[4096];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      auto err = sys_fail(file, "read");
      ::close(fd);
      return err;
    }
    if (n == 0) break;
    buf.insert(buf.end(), chunk, chunk + n);
  }
  ::close(fd);
  if (torn) *torn = buf.size() % kTxnIndexEntrySize != 0;
  std::vector<AbortedTxn> out;
  out.reserve(buf.size() / kTxnIndexEntrySize);
  for (std::size_t at = 0; at + kTxnIndexEntrySize <= buf.size(); at += kTxnIndexEntrySize) {
    const std::byte* p = buf.data() + at;
    if (const auto v = load_be<std::int16_t>(p); v != kVersion) {
      return std::unexpected(
          Error{Errc::corrupt_batch, file.string() + ": entry " +
                                         std::to_string(at / kTxnIndexEntrySize) + " has version " +
                                         std::to_string(v)});
    }
    out.push_back(AbortedTxn{load_be<std::int64_t>(p + 2), load_be<std::int64_t>(p + 10),
                             load_be<std::int64_t>(p + 18), load_be<std::int64_t>(p + 26)});
  }
  return out;
}

Result<void> append_txn_index(const std::filesystem::path& dir, std::int64_t base,
                              const AbortedTxn& e) {
  const auto path = txn_index_path(dir, base);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return sys_fail(path, "open");
  std::byte b[kTxnIndexEntrySize];
  encode_aborted_txn(e, b);
  ssize_t n;
  do {
    n = ::write(fd, b, sizeof b);
  } while (n < 0 && errno == EINTR);
  Result<void> r{};
  if (n != static_cast<ssize_t>(sizeof b)) r = sys_fail(path, "write");
  ::close(fd);
  return r;
}

Result<void> rewrite_txn_index(const std::filesystem::path& dir, std::int64_t base,
                               std::span<const AbortedTxn> entries) {
  const auto path = txn_index_path(dir, base);
  if (entries.empty()) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return sys_fail(path, "unlink");
    return fsync_dir(dir);
  }
  std::string bytes(entries.size() * kTxnIndexEntrySize, '\0');
  for (std::size_t i = 0; i < entries.size(); ++i)
    encode_aborted_txn(entries[i],
                       reinterpret_cast<std::byte*>(bytes.data()) + i * kTxnIndexEntrySize);
  return write_file_atomically(path, bytes);
}

Result<void> sync_txn_index(const std::filesystem::path& dir, std::int64_t base) {
  const auto path = txn_index_path(dir, base);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return {};
    return sys_fail(path, "open");
  }
  Result<void> r{};
  if (::fdatasync(fd) != 0) r = sys_fail(path, "fdatasync");
  ::close(fd);
  return r;
}

}  // namespace samsa::io
