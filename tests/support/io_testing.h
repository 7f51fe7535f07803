// Helpers for tests of code built on io::Log (io's own tests, replication's, tools): temporary
// directories, appends that own their bytes, synchronous append/read on a reactor. Not for
// production code: these allocate freely and run reactor turns inline.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "io/batch_builder.h"
#include "io/log.h"
#include "io/segment.h"

namespace samsa::io::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/samsa-test-XXXXXX";
    if (!::mkdtemp(tmpl.data())) std::abort();
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& s) const { return path_ / s; }

 private:
  std::filesystem::path path_;
};

// An AppendOp that owns its batch and counts its completions.
struct OwnedAppend : AppendOp {
  std::vector<std::byte> bytes;
  int completions = 0;
  explicit OwnedAppend(std::vector<std::byte> b, Durability d = Durability::durable)
      : bytes(std::move(b)) {
    batch = bytes;
    durability = d;
    done = [](AppendOp* self) { ++static_cast<OwnedAppend*>(self)->completions; };
  }
  OwnedAppend(const OwnedAppend&) = delete;
  OwnedAppend& operator=(const OwnedAppend&) = delete;
};

// Records with keys "k<i>" and values of value_size bytes, timestamps ts, ts+1, ...
inline std::vector<std::byte> make_batch(int records, std::int64_t ts, std::size_t value_size = 16,
                                         int key_base = 0) {
  std::vector<SimpleRecord> rs;
  for (int i = 0; i < records; ++i) {
    SimpleRecord r;
    r.timestamp = ts + i;
    r.key = "k" + std::to_string(key_base + i);
    r.value = std::string(value_size, static_cast<char>('a' + (key_base + i) % 26));
    rs.push_back(std::move(r));
  }
  return build_batch(rs);
}

// Appends and runs the reactor until the op completes (or 30 s pass).
inline Result<AppendResult> append_sync(Reactor& r, Log& log, std::vector<std::byte> bytes,
                                        Durability d = Durability::durable) {
  OwnedAppend op(std::move(bytes), d);
  auto res = log.append(&op);
  if (!res) return res;
  if (!r.run_until([&] { return op.completions > 0; })) {
    return std::unexpected(Error{Errc::io_error, "append did not complete"});
  }
  if (op.error) return std::unexpected(*op.error);
  return op.result;
}

inline std::vector<std::byte> slice_bytes(const Slice& s) {
  std::vector<std::byte> out(s.length);
  ssize_t n = detail::pread_full(s.file->fd, out.data(), out.size(), s.position);
  out.resize(n < 0 ? 0 : static_cast<std::size_t>(n));
  return out;
}

inline std::vector<std::byte> read_bytes(const ReadResult& rr) {
  std::vector<std::byte> out;
  for (const Slice& s : rr.slices) {
    auto b = slice_bytes(s);
    out.insert(out.end(), b.begin(), b.end());
  }
  return out;
}

inline std::vector<std::byte> file_bytes(const std::filesystem::path& p) {
  std::vector<std::byte> out;
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  out.resize(std::filesystem::file_size(p));
  ssize_t n = detail::pread_full(fd, out.data(), out.size(), 0);
  ::close(fd);
  out.resize(n < 0 ? 0 : static_cast<std::size_t>(n));
  return out;
}

}  // namespace samsa::io::testing
