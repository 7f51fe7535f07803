// powerfs FUSE operations: each one maps a libfuse high-level call onto the backing directory
// and the file state (fs_state.h). See README.md for the durability model they implement.
#include "tests/durability/powerfs/fuse_ops.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "base/thread.h"
#include "tests/durability/powerfs/fs_state.h"

namespace samsa::powerfs::detail {
namespace {

Fs& self() {
  // libfuse creates its worker threads; name each one the first time it serves us.
  thread_local bool named = (set_thread_name("powerfs-fuse"), true);
  (void)named;
  return *g_fs;
}

Handle* handle(const fuse_file_info* fi) {
  return fi == nullptr ? nullptr : reinterpret_cast<Handle*>(static_cast<uintptr_t>(fi->fh));
}

Inode* file_of(const fuse_file_info* fi) {
  Handle* h = handle(fi);
  return h == nullptr ? nullptr : h->inode;
}

void* op_init(fuse_conn_info* conn, fuse_config* cfg) {
  Fs& fs = self();
  cfg->use_ino = 1;
  cfg->hard_remove = 1;  // no .fuse_hidden files: unlinked open files are served by handle
  cfg->nullpath_ok = 1;
  cfg->direct_io = fs.direct_io ? 1 : 0;
  cfg->kernel_cache = 0;
  cfg->auto_cache = 0;
  // Sizes change under the kernel's feet when a cut drops data; never let it cache them.
  cfg->attr_timeout = 0;
  cfg->entry_timeout = 0;
  cfg->negative_timeout = 0;
  // With writeback caching the kernel would absorb writes and decide itself when we see them;
  // every write must reach us when the application makes it.
  conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
  return &fs;
}

int op_getattr(const char* path, struct stat* st, fuse_file_info* fi) {
  Fs& fs = self();
  if (Inode* ino = file_of(fi)) {
    std::lock_guard lock(fs.mu);
    if (::fstat(ino->state.fd(), st) != 0) return -errno;
    st->st_size = static_cast<off_t>(ino->state.size());
    return 0;
  }
  if (path == nullptr) return -ENOENT;  // unlinked and asked without a handle: see README
  if (::fstatat(fs.root, rel(path), st, AT_SYMLINK_NOFOLLOW) != 0) return -errno;
  if (S_ISREG(st->st_mode)) {
    std::lock_guard lock(fs.mu);
    auto it = fs.inodes.find(Key{st->st_dev, st->st_ino});
    if (it != fs.inodes.end()) st->st_size = static_cast<off_t>(it->second->state.size());
  }
  return 0;
}

int op_readlink(const char* path, char* buf, size_t size) {
  Fs& fs = self();
  if (size == 0) return -EINVAL;
  ssize_t n = ::readlinkat(fs.root, rel(path), buf, size - 1);
  if (n < 0) return -errno;
  buf[n] = '\0';
  return 0;
}

int op_mkdir(const char* path, mode_t mode) {
  Fs& fs = self();
  std::lock_guard lock(fs.mu);
  if (fs.dead) return -EIO;
  if (::mkdirat(fs.root, rel(path), mode) != 0) return -errno;
  note_created(fs, path, true);
  return 0;
}

int op_unlink(const char* path) {
  Fs& fs = self();
  std::lock_guard lock(fs.mu);
  if (fs.dead) return -EIO;
  struct stat st;
  if (::fstatat(fs.root, rel(path), &st, AT_SYMLINK_NOFOLLOW) != 0) return -errno;
  bool had = S_ISREG(st.st_mode);
  if (::unlinkat(fs.root, rel(path), 0) != 0) return -errno;
  fs.fresh.erase(Key{st.st_dev, st.st_ino});
  if (had) {
    auto it = fs.inodes.find(Key{st.st_dev, st.st_ino});
    if (it != fs.inodes.end()) maybe_forget(fs, it->second.get());
  }
  return 0;
}

int op_rmdir(const char* path) {
  Fs& fs = self();
  std::lock_guard lock(fs.mu);
  if (fs.dead) return -EIO;
  auto key = key_at(fs.root, rel(path));
  if (::unlinkat(fs.root, rel(path), AT_REMOVEDIR) != 0) return -errno;
  if (key) fs.fresh.erase(*key);
  return 0;
}

int op_symlink(const char* target, const char* link) {
  Fs& fs = self();
  std::lock_guard lock(fs.mu);
  if (fs.dead) return -EIO;
  return ::symlinkat(target, fs.root, rel(link)) == 0 ? 0 : -errno;
}

int op_rename(const char* from, const char* to, unsigned int flags) {
  Fs& fs = self();
  std::lock_guard lock(fs.mu);
  if (fs.dead) return -EIO;
  struct stat st;
  const bool exchange = (flags & RENAME_EXCHANGE) != 0;
  auto moved = key_at(fs.root, rel(from));
  bool existed = ::fstatat(fs.root, rel(to), &st, AT_SYMLINK_NOFOLLOW) == 0;
  const Key victim{st.st_dev, st.st_ino};
  if (::renameat2(fs.root, rel(from), fs.root, rel(to), flags) != 0) return -errno;
  if (existed && !exchange && S_ISREG(st.st_mode)) {
    auto it = fs.inodes.find(victim);
    if (it != fs.inodes.end()) maybe_forget(fs, it->second.get());
  }
  if (existed) fs.fresh.erase(victim);
  auto f = moved ? fs.fresh.find(*moved) : fs.fresh.end();
  if (f == fs.fresh.end()) return 0;
  // A rename that replaced an entry (or swapped two) is applied to the backing directory for
  // good, and the replaced entry cannot come back; losing the moved one too would leave
  // neither name, a state no file system produces. Count the moved entry as durable then.
  if (existed) {
    make_durable(fs, *moved);
    return 0;
  }
  auto [parent, name] = split_parent(to);
  int pfd = ::openat(fs.root, parent.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  struct stat pst;
  if (pfd < 0 || ::fstat(pfd, &pst) != 0) {
    if (pfd >= 0) ::close(pfd);
    make_durable(fs, *moved);
    return 0;
  }
  ::close(f->second->parent_fd);
  f->second->parent_fd = pfd;
  f->second->parent = Key{pst.st_dev, pst.st_ino};
  f->second->name = name;
  return 0;
}

int op_link(const char* from, const char* to) {
  Fs& fs = self();
  std::lock_guard lock(fs.mu);
  if (fs.dead) return -EIO;
  return ::linkat(fs.root, rel(from), fs.root, rel(to), 0) == 0 ? 0 : -errno;
}

int op_chmod(const char* path, mode_t mode, fuse_file_info* fi) {
  Fs& fs = self();
  std::lock_guard lock(fs.mu);
  if (fs.dead) return -EIO;
  if (Inode* ino = file_of(fi)) return ::fchmod(ino->state.fd(), mode) == 0 ? 0 : -errno;
  if (path == nullptr) return -ENOENT;
  return ::fchmodat(fs.root, rel(path), mode, 0) == 0 ? 0 : -errno;
}

int op_chown(const char* path, uid_t uid, gid_t gid, fuse_file_info* fi) {
  Fs& fs = self();
  std::lock_guard lock(fs.mu);
  if (fs.dead) return -EIO;
  if (Inode* ino = file_of(fi)) return ::fchown(ino->state.fd(), uid, gid) == 0 ? 0 : -errno;
  if (path == nullptr) return -ENOENT;
  return ::fchownat(fs.root, rel(path), uid, gid, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : -errno;
}

int op_truncate(const char* path, off_t size, fuse_file_info* fi) {
  Fs& fs = self();
  if (size < 0) return -EINVAL;
  std::lock_guard lock(fs.mu);
  if (fs.dead) return -EIO;
  Inode* ino = file_of(fi);
  if (ino == nullptr) {
    if (path == nullptr) return -ENOENT;
    auto r = open_inode(fs, path, 0, 0, O_RDWR, false);
    if (!r) return -r.error();
    ino = *r;
  }
  ino->state.resize(static_cast<std::uint64_t>(size));
  ++fs.stats.truncates;
  return 0;
}

// Caller holds fs.mu.
int finish_open(Fs& fs, Inode* ino, fuse_file_info* fi) {
  if (fi->flags & O_TRUNC) {
    ino->state.resize(0);
    ++fs.stats.truncates;
  }
  fi->fh = reinterpret_cast<uintptr_t>(new Handle{ino, nullptr});
  fi->direct_io = fs.direct_io ? 1 : 0;
  fi->keep_cache = 0;
  return 0;
}

int op_open(const char* path, fuse_file_info* fi) {
  Fs& fs = self();
  std::lock_guard lock(fs.mu);
  if (fs.dead && (fi->flags & O_TRUNC)) return -EIO;
  auto r = open_inode(fs, path, 0, 0, fi->flags & O_ACCMODE, true);
  if (!r) return -r.error();
  return finish_open(fs, *r, fi);
}

int op_create(const char* path, mode_t mode, fuse_file_info* fi) {
  Fs& fs = self();
  std::lock_guard lock(fs.mu);
  if (fs.dead) return -EIO;
  bool created = false;
  auto r = open_inode(fs, path, O_CREAT | (fi->flags & O_EXCL), mode, fi->flags & O_ACCMODE, true,
                      &created);
  if (!r) return -r.error();
  if (created) note_created(fs, path, false);
  return finish_open(fs, *r, fi);
}

int op_read(const char*, char* buf, size_t size, off_t off, fuse_file_info* fi) {
  Fs& fs = self();
  Inode* ino = file_of(fi);
  if (ino == nullptr) return -EBADF;
  std::lock_guard lock(fs.mu);
  auto r = ino->state.read(buf, size, static_cast<std::uint64_t>(off));
  if (!r) return -r.error();
  return static_cast<int>(*r);
}

int op_write(const char*, const char* buf, size_t size, off_t off, fuse_file_info* fi) {
  Fs& fs = self();
  Inode* ino = file_of(fi);
  if (ino == nullptr) return -EBADF;
  if (size > static_cast<size_t>(INT_MAX)) size = INT_MAX;
  std::lock_guard lock(fs.mu);
  if (fs.dead) return -EIO;
  ino->state.write(buf, size, static_cast<std::uint64_t>(off));
  ++fs.stats.writes;
  fs.stats.write_bytes += size;
  while (ino->state.pending_ops() > 0 && total_pending(fs) > fs.max_pending_bytes) {
    if (auto st = ino->state.write_back_oldest(); !st) return -st.error();
    ++fs.stats.writebacks;
  }
  return static_cast<int>(size);
}

int op_statfs(const char*, struct statvfs* st) {
  Fs& fs = self();
  return ::fstatvfs(fs.root, st) == 0 ? 0 : -errno;
}

// close(2) does not make anything durable.
int op_flush(const char*, fuse_file_info*) {
  return 0;
}

int op_release(const char*, fuse_file_info* fi) {
  Fs& fs = self();
  Handle* h = handle(fi);
  if (h == nullptr) return 0;
  {
    std::lock_guard lock(fs.mu);
    --h->inode->refs;
    maybe_forget(fs, h->inode);
  }
  delete h;
  return 0;
}

int op_fsync(const char*, int datasync, fuse_file_info* fi) {
  Fs& fs = self();
  Inode* ino = file_of(fi);
  if (ino == nullptr) return -EBADF;
  if (auto delay = fs.sync_delay_ms.load(std::memory_order_relaxed); delay > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(delay));
  std::lock_guard lock(fs.mu);
  if (fs.dead) return -EIO;
  ++(datasync ? fs.stats.fdatasyncs : fs.stats.fsyncs);
  Status st = ino->state.sync(datasync != 0);
  if (st && fs.entries == Entries::kFsync) make_durable(fs, ino->key);
  return err(st);
}

int op_opendir(const char* path, fuse_file_info* fi) {
  Fs& fs = self();
  int fd = ::openat(fs.root, rel(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -errno;
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    int e = errno;
    ::close(fd);
    return -e;
  }
  fi->fh = reinterpret_cast<uintptr_t>(new Handle{nullptr, d});
  return 0;
}

int op_readdir(const char*, void* buf, fuse_fill_dir_t filler, off_t, fuse_file_info* fi,
               fuse_readdir_flags) {
  Handle* h = handle(fi);
  if (h == nullptr || h->dir == nullptr) return -EBADF;
  // Offsets are not handed to the kernel (0 below): libfuse then buffers the whole listing and
  // serves it in pieces, so each opendir sees one consistent snapshot.
  ::rewinddir(h->dir);
  errno = 0;
  while (dirent* e = ::readdir(h->dir)) {
    struct stat st {};
    st.st_ino = e->d_ino;
    st.st_mode = static_cast<mode_t>(DTTOIF(e->d_type));
    if (filler(buf, e->d_name, &st, 0, static_cast<fuse_fill_dir_flags>(0)) != 0) break;
  }
  return -errno;
}

int op_releasedir(const char*, fuse_file_info* fi) {
  Handle* h = handle(fi);
  if (h == nullptr) return 0;
  ::closedir(h->dir);
  delete h;
  return 0;
}

int op_fsyncdir(const char*, int datasync, fuse_file_info* fi) {
  Fs& fs = self();
  Handle* h = handle(fi);
  if (h == nullptr || h->dir == nullptr) return -EBADF;
  int fd = ::dirfd(h->dir);
  struct stat st;
  if (::fstat(fd, &st) != 0) return -errno;
  std::lock_guard lock(fs.mu);
  if (fs.dead) return -EIO;
  ++fs.stats.fsyncdirs;
  if ((datasync ? ::fdatasync(fd) : ::fsync(fd)) != 0) return -errno;
  dir_synced(fs, Key{st.st_dev, st.st_ino});
  return 0;
}

int op_access(const char* path, int mask) {
  Fs& fs = self();
  return ::faccessat(fs.root, rel(path), mask, 0) == 0 ? 0 : -errno;
}

int op_utimens(const char* path, const timespec tv[2], fuse_file_info* fi) {
  Fs& fs = self();
  std::lock_guard lock(fs.mu);
  if (fs.dead) return -EIO;
  if (Inode* ino = file_of(fi)) return ::futimens(ino->state.fd(), tv) == 0 ? 0 : -errno;
  if (path == nullptr) return -ENOENT;
  return ::utimensat(fs.root, rel(path), tv, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : -errno;
}

// fallocate changes what reads return (size, zeros) exactly like a write or a truncate would,
// so it is recorded as those and becomes durable with the next fsync.
int op_fallocate(const char*, int mode, off_t off, off_t len, fuse_file_info* fi) {
  Fs& fs = self();
  Inode* ino = file_of(fi);
  if (ino == nullptr) return -EBADF;
  if (off < 0 || len <= 0) return -EINVAL;
  const auto u_off = static_cast<std::uint64_t>(off);
  const auto u_end = u_off + static_cast<std::uint64_t>(len);
  constexpr std::uint64_t kMaxZeroFill = 64ull << 20;
  std::lock_guard lock(fs.mu);
  if (fs.dead) return -EIO;
  FileState& f = ino->state;
  const bool keep_size = mode & FALLOC_FL_KEEP_SIZE;
  const int kind = mode & ~FALLOC_FL_KEEP_SIZE;
  if (kind == 0) {
    // Plain allocation: only the size is visible.
    if (!keep_size && u_end > f.size()) f.resize(u_end);
    return 0;
  }
  if (kind == FALLOC_FL_PUNCH_HOLE || kind == FALLOC_FL_ZERO_RANGE) {
    if (kind == FALLOC_FL_PUNCH_HOLE && !keep_size) return -EINVAL;  // as the kernel requires
    std::uint64_t end = keep_size ? std::min(u_end, f.size()) : u_end;
    if (end <= u_off) return 0;
    if (end - u_off > kMaxZeroFill) return -EOPNOTSUPP;
    std::vector<char> zeros(end - u_off, 0);
    f.write(zeros.data(), zeros.size(), u_off);
    return 0;
  }
  return -EOPNOTSUPP;
}

}  // namespace

fuse_operations make_ops() {
  fuse_operations ops{};
  ops.getattr = op_getattr;
  ops.readlink = op_readlink;
  ops.mkdir = op_mkdir;
  ops.unlink = op_unlink;
  ops.rmdir = op_rmdir;
  ops.symlink = op_symlink;
  ops.rename = op_rename;
  ops.link = op_link;
  ops.chmod = op_chmod;
  ops.chown = op_chown;
  ops.truncate = op_truncate;
  ops.open = op_open;
  ops.read = op_read;
  ops.write = op_write;
  ops.statfs = op_statfs;
  ops.flush = op_flush;
  ops.release = op_release;
  ops.fsync = op_fsync;
  ops.opendir = op_opendir;
  ops.readdir = op_readdir;
  ops.releasedir = op_releasedir;
  ops.fsyncdir = op_fsyncdir;
  ops.init = op_init;
  ops.access = op_access;
  ops.create = op_create;
  ops.utimens = op_utimens;
  ops.fallocate = op_fallocate;
  // No .lock/.flock: libfuse then tells the kernel to keep POSIX and BSD locks itself, which is
  // exactly right for a single-host file system.
  return ops;
}

}  // namespace samsa::powerfs::detail
