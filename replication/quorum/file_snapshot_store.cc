#include "replication/quorum/file_snapshot_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "io/checkpoint.h"
#include "replication/quorum/snapshot_file.h"

namespace samsa::replication::quorum {

io::Result<std::unique_ptr<FileSnapshotStore>> FileSnapshotStore::open(std::filesystem::path dir,
                                                                       InstallFn install) {
  if (auto r = io::create_directories_durably(dir); !r) return std::unexpected(r.error());
  auto removed = remove_partial_snapshots(dir);
  if (!removed) return std::unexpected(removed.error());
  if (*removed > 0) LOG_INFO("%s: removed %zu unfinished snapshot files", dir.c_str(), *removed);
  auto ids = list_snapshots(dir);
  if (!ids) return std::unexpected(ids.error());
  std::unique_ptr<FileSnapshotStore> s(new FileSnapshotStore(std::move(dir), std::move(install)));
  for (const SnapshotId& id : *ids) {
    if (auto r = s->add(id); !r) return std::unexpected(r.error());
  }
  return s;
}

FileSnapshotStore::~FileSnapshotStore() {
  abandon();
}

std::filesystem::path FileSnapshotStore::path_of(const SnapshotId& id) const {
  return dir_ / snapshot_file_name(id);
}

std::optional<SnapshotId> FileSnapshotStore::latest() const {
  if (held_.empty()) return std::nullopt;
  return held_.rbegin()->first;
}

std::int64_t FileSnapshotStore::size(const SnapshotId& id) const {
  auto it = held_.find(id);
  return it == held_.end() ? -1 : it->second;
}

std::vector<std::byte> FileSnapshotStore::read(const SnapshotId& id, std::int64_t position,
                                               std::int64_t max_bytes) const {
  const std::int64_t total = size(id);
  if (total < 0 || position < 0 || position >= total || max_bytes <= 0) return {};
  const auto path = path_of(id);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    LOG_WARN("snapshot %s: open: %s", path.c_str(), std::strerror(errno));
    return {};
  }
  std::vector<std::byte> out(static_cast<std::size_t>(std::min(max_bytes, total - position)));
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::pread(fd, out.data() + done, out.size() - done,
                              static_cast<off_t>(position + static_cast<std::int64_t>(done)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // A short answer is what the follower sees as a failed transfer: it asks again.
      if (n < 0) LOG_WARN("snapshot %s: read: %s", path.c_str(), std::strerror(errno));
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  out.resize(done);
  return out;
}

void FileSnapshotStore::abandon() {
  if (!receiving_) return;
  if (receiving_->fd >= 0) ::close(receiving_->fd);
  if (!receiving_->part.empty()) ::unlink(receiving_->part.c_str());
  receiving_.reset();
}

bool FileSnapshotStore::fail(std::string why) {
  LOG_WARN("%s", why.c_str());
  last_error_ = std::move(why);
  return false;
}

void FileSnapshotStore::begin(const SnapshotId& id) {
  abandon();
  last_error_.clear();
  Receiving r;
  r.id = id;
  r.part = path_of(id);
  r.part += kPartialSuffix;
  if (id.end_offset < 0 || id.epoch < 0) {
    r.error = "snapshot id " + std::to_string(id.end_offset) + "-" + std::to_string(id.epoch) +
              " is not valid";
  } else {
    // Exclusive: a local write of the same snapshot in progress makes this transfer fail
    // rather than mix bytes with it.
    r.fd = ::open(r.part.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (r.fd < 0) {
      const int err = errno;
      r.error = io::sys_error("create", r.part, err).detail;
      // Not ours to remove: leave the path alone in abandon().
      if (err == EEXIST) r.part.clear();
    }
  }
  receiving_ = std::move(r);
}

void FileSnapshotStore::write(std::span<const std::byte> bytes) {
  if (!receiving_) {
    last_error_ = "snapshot bytes received without begin()";
    return;
  }
  if (receiving_->error) return;
  if (auto r = detail::write_all(receiving_->fd, bytes, receiving_->part); !r) {
    receiving_->error = r.error().detail;
  }
}

bool FileSnapshotStore::finish() {
  if (!receiving_) return fail("snapshot finish() without begin()");
  const SnapshotId id = receiving_->id;
  const std::string name = snapshot_file_name(id);
  auto refuse = [&](const std::string& why) {
    abandon();
    return fail("snapshot " + name + why);
  };
  if (receiving_->error) return refuse(" not received: " + *receiving_->error);
  if (::fsync(receiving_->fd) != 0) {
    return refuse(": " + io::sys_error("fsync", receiving_->part, errno).detail);
  }
  ::close(receiving_->fd);
  receiving_->fd = -1;
  auto records = read_snapshot_file(receiving_->part);
  if (!records) return refuse(" failed its checks: " + records.error().detail);
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(receiving_->part, ec);
  if (ec) return refuse(": " + io::sys_error("stat", receiving_->part, ec.value()).detail);
  if (auto r = io::rename_durably(receiving_->part, path_of(id)); !r) {
    return refuse(": " + r.error().detail);
  }
  receiving_.reset();
  held_[id] = static_cast<std::int64_t>(bytes);
  if (install_ && !install_(id, std::move(*records))) {
    return fail("snapshot " + name + " received but not installed");
  }
  return true;
}

io::Result<void> FileSnapshotStore::add(const SnapshotId& id) {
  const auto path = path_of(id);
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path, ec);
  if (ec) return std::unexpected(io::sys_error("stat", path, ec.value()));
  held_[id] = static_cast<std::int64_t>(bytes);
  return {};
}

io::Result<std::size_t> FileSnapshotStore::delete_before(const SnapshotId& keep) {
  auto n = delete_snapshots_before(dir_, keep);
  if (!n) return n;
  held_.erase(held_.begin(), held_.lower_bound(keep));
  return n;
}

}  // namespace samsa::replication::quorum
