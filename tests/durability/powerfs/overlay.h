// The data model of powerfs: one file's durable content (the backing file) plus the ordered list
// of changes the application made since its last fsync. Kept free of FUSE so that the model can
// be reasoned about (and read) on its own; the FUSE glue in powerfs.cc only adds locking.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <expected>
#include <random>
#include <string_view>
#include <vector>

namespace samsa::powerfs {

// One change not yet made durable. Size changes (ftruncate, O_TRUNC, fallocate that extends)
// are kept in the same sequence as writes because a disk that loses power keeps a prefix of
// what the file system sent it, and a truncate followed by a write is not the same file as the
// write followed by the truncate.
struct PendingOp {
  enum class Kind : std::uint8_t { kWrite, kResize };
  Kind kind;
  std::uint64_t offset;    // kWrite: file offset; kResize: the new size
  std::vector<char> data;  // kWrite only
};

enum class CutMode : std::uint8_t {
  kDrop,     // every pending op is lost
  kTorn,     // a random prefix of the sequence survives; the first lost write may be half there
  kReorder,  // a random subset survives, any surviving write may be torn
};

struct CutResult {
  std::uint64_t kept_ops = 0;
  std::uint64_t dropped_ops = 0;
  std::uint64_t torn_writes = 0;
  std::uint64_t kept_bytes = 0;
  std::uint64_t dropped_bytes = 0;
};

// Errors are errno values, the currency FUSE replies in.
using Status = std::expected<void, int>;

class FileState {
 public:
  // Takes ownership of `fd`, an fd of the backing file opened read-write when possible.
  FileState(int fd, std::uint64_t backing_size);
  ~FileState();
  FileState(const FileState&) = delete;
  FileState& operator=(const FileState&) = delete;

  int fd() const { return fd_; }
  // The size the application sees: the backing file's with every pending op applied.
  std::uint64_t size() const { return size_; }
  std::uint64_t pending_bytes() const { return pending_bytes_; }
  std::size_t pending_ops() const { return ops_.size(); }

  void write(const char* buf, std::size_t len, std::uint64_t off);
  void resize(std::uint64_t size);
  // Reads the logical content (backing file overlaid with pending ops); returns bytes read,
  // short only at the logical end of file.
  std::expected<std::size_t, int> read(char* buf, std::size_t len, std::uint64_t off) const;

  // fsync/fdatasync: applies every pending op to the backing file in order, then syncs it.
  Status sync(bool datasync);
  // Makes the oldest pending op durable, as the kernel's background writeback may at any time;
  // used to bound the daemon's memory when an application never syncs.
  Status write_back_oldest();
  // Power cut: decides which pending ops reached the platter, applies those, forgets the rest.
  std::expected<CutResult, int> cut(CutMode mode, std::mt19937_64& rng);

 private:
  Status apply(const PendingOp& op, std::size_t len);
  static std::size_t op_bytes(const PendingOp& op) {
    return op.kind == PendingOp::Kind::kWrite ? op.data.size() : 0;
  }

  int fd_;
  std::uint64_t size_;
  std::uint64_t pending_bytes_ = 0;
  std::deque<PendingOp> ops_;
};

}  // namespace samsa::powerfs
