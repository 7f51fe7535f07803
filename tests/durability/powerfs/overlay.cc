#include "tests/durability/powerfs/overlay.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace samsa::powerfs {

FileState::FileState(int fd, std::uint64_t backing_size) : fd_(fd), size_(backing_size) {}

FileState::~FileState() {
  if (fd_ >= 0) ::close(fd_);
}

void FileState::write(const char* buf, std::size_t len, std::uint64_t off) {
  if (len == 0) return;
  ops_.push_back(PendingOp{PendingOp::Kind::kWrite, off, std::vector<char>(buf, buf + len)});
  pending_bytes_ += len;
  size_ = std::max<std::uint64_t>(size_, off + len);
}

void FileState::resize(std::uint64_t size) {
  ops_.push_back(PendingOp{PendingOp::Kind::kResize, size, {}});
  size_ = size;
}

std::expected<std::size_t, int> FileState::read(char* buf, std::size_t len,
                                                std::uint64_t off) const {
  if (off >= size_) return 0;
  len = static_cast<std::size_t>(std::min<std::uint64_t>(len, size_ - off));
  // The backing file may be shorter than the logical file (pending appends) or longer (pending
  // truncate); bytes past its end read as zeros until an op below says otherwise.
  std::size_t got = 0;
  while (got < len) {
    ssize_t n = ::pread(fd_, buf + got, len - got, static_cast<off_t>(off + got));
    if (n < 0) {
      if (errno == EINTR) continue;
      return std::unexpected(errno);
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  std::memset(buf + got, 0, len - got);
  const std::uint64_t end = off + len;
  for (const PendingOp& op : ops_) {
    if (op.kind == PendingOp::Kind::kResize) {
      // Shrinking destroys the bytes past the new end; a later extension brings back zeros.
      if (op.offset < end) {
        std::uint64_t from = std::max(op.offset, off);
        std::memset(buf + (from - off), 0, end - from);
      }
      continue;
    }
    std::uint64_t w_end = op.offset + op.data.size();
    std::uint64_t from = std::max(op.offset, off);
    std::uint64_t to = std::min(w_end, end);
    if (from < to) std::memcpy(buf + (from - off), op.data.data() + (from - op.offset), to - from);
  }
  return len;
}

Status FileState::apply(const PendingOp& op, std::size_t len) {
  if (op.kind == PendingOp::Kind::kResize) {
    if (::ftruncate(fd_, static_cast<off_t>(op.offset)) != 0) return std::unexpected(errno);
    return {};
  }
  std::size_t done = 0;
  while (done < len) {
    ssize_t n =
        ::pwrite(fd_, op.data.data() + done, len - done, static_cast<off_t>(op.offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return std::unexpected(errno);
    }
    done += static_cast<std::size_t>(n);
  }
  return {};
}

Status FileState::sync(bool datasync) {
  while (!ops_.empty()) {
    if (auto st = write_back_oldest(); !st) return st;
  }
  int rc = datasync ? ::fdatasync(fd_) : ::fsync(fd_);
  if (rc != 0) return std::unexpected(errno);
  return {};
}

Status FileState::write_back_oldest() {
  if (ops_.empty()) return {};
  const PendingOp& op = ops_.front();
  if (auto st = apply(op, op.data.size()); !st) return st;
  pending_bytes_ -= op_bytes(op);
  ops_.pop_front();
  return {};
}

std::expected<CutResult, int> FileState::cut(CutMode mode, std::mt19937_64& rng) {
  CutResult r;
  const std::size_t n = ops_.size();
  // keep[i]: how many bytes of op i survive; SIZE_MAX for the whole op.
  constexpr std::size_t kAll = static_cast<std::size_t>(-1);
  std::vector<std::size_t> keep(n, 0);
  auto torn_length = [&](const PendingOp& op) -> std::size_t {
    // A torn write keeps at least one byte and loses at least one.
    if (op.kind != PendingOp::Kind::kWrite || op.data.size() < 2) return 0;
    return std::uniform_int_distribution<std::size_t>(1, op.data.size() - 1)(rng);
  };
  switch (mode) {
    case CutMode::kDrop:
      break;
    case CutMode::kTorn: {
      std::size_t k = std::uniform_int_distribution<std::size_t>(0, n)(rng);
      for (std::size_t i = 0; i < k; ++i)
        keep[i] = kAll;
      if (k < n && std::bernoulli_distribution(0.5)(rng)) keep[k] = torn_length(ops_[k]);
      break;
    }
    case CutMode::kReorder:
      for (std::size_t i = 0; i < n; ++i) {
        double p = std::uniform_real_distribution<double>(0, 1)(rng);
        if (p < 0.45) {
          keep[i] = kAll;
        } else if (p < 0.55) {
          keep[i] = torn_length(ops_[i]);
        }
      }
      break;
  }
  for (std::size_t i = 0; i < n; ++i) {
    const PendingOp& op = ops_[i];
    const std::size_t bytes = op_bytes(op);
    if (keep[i] == 0) {
      ++r.dropped_ops;
      r.dropped_bytes += bytes;
      continue;
    }
    const std::size_t len = keep[i] == kAll ? bytes : keep[i];
    if (auto st = apply(op, len); !st) return std::unexpected(st.error());
    if (keep[i] == kAll) {
      ++r.kept_ops;
    } else {
      ++r.torn_writes;
    }
    r.kept_bytes += len;
    r.dropped_bytes += bytes - len;
  }
  ops_.clear();
  pending_bytes_ = 0;
  off_t end = ::lseek(fd_, 0, SEEK_END);
  size_ = end < 0 ? 0 : static_cast<std::uint64_t>(end);
  return r;
}

}  // namespace samsa::powerfs
