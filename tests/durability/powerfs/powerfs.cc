// powerfs: a pass-through FUSE file system that keeps unsynced writes in memory so that a
// simulated power cut can lose them. See README.md for the durability model and the control
// protocol.
//
//   powerfs <backing_dir> <mountpoint> [--control SOCKET] [-f] [-d] [--page-cache]
//           [--entries eager|fsync|dirsync] [--max-pending-mb N] [-o fuse_opts]
//   powerfs ctl SOCKET COMMAND...
#define FUSE_USE_VERSION FUSE_MAKE_VERSION(3, 14)
#include <dirent.h>
#include <fcntl.h>
#include <fuse3/fuse.h>
#include <fuse3/fuse_common.h>
#include <linux/falloc.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "base/thread.h"
#include "tests/durability/powerfs/overlay.h"

namespace samsa::powerfs {
namespace {

// Backing inodes are the identity of a file: stable across renames, shared by hard links, and
// never reused while we hold an fd to them (every Inode below does).
using Key = std::pair<dev_t, ino_t>;

struct Inode {
  Inode(Key k, int fd, std::uint64_t size) : key(k), state(fd, size) {}
  Key key;
  FileState state;
  int refs = 0;  // open FUSE handles
};

struct Handle {
  Inode* inode = nullptr;  // regular files
  DIR* dir = nullptr;      // directories
};

// When does a newly created directory entry (file or directory) survive a cut?
enum class Entries : std::uint8_t {
  kEager,    // at once, like a file system that commits metadata eagerly
  kFsync,    // once the new file itself or its parent directory is fsynced (ext4 in practice)
  kDirsync,  // only once its parent directory is fsynced (what POSIX promises)
};

// A directory entry created since mount that a cut would lose. `parent_fd` (O_PATH) follows the
// parent directory through renames, so the entry can be found again without a path.
struct Fresh {
  Fresh(int fd, Key p, std::string n, bool d)
      : parent_fd(fd), parent(p), name(std::move(n)), dir(d) {}
  ~Fresh() {
    if (parent_fd >= 0) ::close(parent_fd);
  }
  Fresh(const Fresh&) = delete;
  Fresh& operator=(const Fresh&) = delete;
  int parent_fd;
  Key parent;
  std::string name;
  bool dir;
};

struct Stats {
  std::uint64_t writes = 0;
  std::uint64_t write_bytes = 0;
  std::uint64_t fsyncs = 0;
  std::uint64_t fdatasyncs = 0;
  std::uint64_t fsyncdirs = 0;
  std::uint64_t truncates = 0;
  std::uint64_t writebacks = 0;  // ops made durable early to bound memory
  std::uint64_t entries_made_durable = 0;
};

struct Fs {
  int root = -1;  // backing directory
  bool direct_io = true;
  std::uint64_t max_pending_bytes = 256ull << 20;
  Entries entries = Entries::kEager;

  std::mutex mu;
  // std::map so that a cut visits files in a fixed order and a seed reproduces it.
  std::map<Key, std::unique_ptr<Inode>> inodes;
  std::map<Key, std::unique_ptr<Fresh>> fresh;  // by the new entry's own key
  // Set by a cut, after which every change fails like a disk without power. Read and written
  // under mu only.
  bool dead = false;
  Stats stats;
};

Fs* g_fs = nullptr;

Fs& self() {
  // libfuse creates its worker threads; name each one the first time it serves us.
  thread_local bool named = (set_thread_name("powerfs-fuse"), true);
  (void)named;
  return *g_fs;
}

const char* rel(const char* path) {
  if (path[0] == '\0' || (path[0] == '/' && path[1] == '\0')) return ".";
  return path[0] == '/' ? path + 1 : path;
}

Handle* handle(const fuse_file_info* fi) {
  return fi == nullptr ? nullptr : reinterpret_cast<Handle*>(static_cast<uintptr_t>(fi->fh));
}

Inode* file_of(const fuse_file_info* fi) {
  Handle* h = handle(fi);
  return h == nullptr ? nullptr : h->inode;
}

std::uint64_t total_pending(const Fs& fs) {
  std::uint64_t n = 0;
  for (const auto& [k, ino] : fs.inodes)
    n += ino->state.pending_bytes();
  return n;
}

// Drops the state of a file nobody has open once it holds nothing pending, or once the file is
// gone (its pending data can never be read again, and releasing the fd lets the inode go).
void maybe_forget(Fs& fs, Inode* ino) {
  if (ino->refs > 0) return;
  bool gone = ino->state.pending_ops() == 0;
  if (!gone) {
    struct stat st;
    gone = ::fstat(ino->state.fd(), &st) == 0 && st.st_nlink == 0;
  }
  if (gone) fs.inodes.erase(ino->key);
}

// Opens (or creates) the backing file and finds or makes its Inode. `take_ref` counts a FUSE
// handle; truncate-by-path needs the state without one. Caller holds fs.mu: every change to
// the backing directory happens under it, so none can slip in after a cut.
std::expected<Inode*, int> open_inode(Fs& fs, const char* path, int create_flags, mode_t mode,
                                      int accmode, bool take_ref, bool* created = nullptr) {
  int fd = -1;
  if (created != nullptr) {
    // Exclusive first, so that we know whether this call made the entry.
    fd = ::openat(fs.root, rel(path), O_RDWR | O_CLOEXEC | O_CREAT | O_EXCL, mode);
    *created = fd >= 0;
    if (fd < 0 && errno == EEXIST && (create_flags & O_EXCL) == 0) create_flags = 0;
  }
  if (fd < 0) fd = ::openat(fs.root, rel(path), O_RDWR | O_CLOEXEC | create_flags, mode);
  if (fd < 0 && (errno == EACCES || errno == EROFS || errno == ETXTBSY) && accmode == O_RDONLY) {
    fd = ::openat(fs.root, rel(path), O_RDONLY | O_CLOEXEC | create_flags, mode);
  }
  if (fd < 0) return std::unexpected(errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return std::unexpected(e);
  }
  Key key{st.st_dev, st.st_ino};
  auto it = fs.inodes.find(key);
  if (it == fs.inodes.end()) {
    it = fs.inodes
             .emplace(key, std::make_unique<Inode>(key, fd, static_cast<std::uint64_t>(st.st_size)))
             .first;
  } else {
    ::close(fd);
  }
  if (take_ref) ++it->second->refs;
  return it->second.get();
}

int err(const Status& s) {
  return s ? 0 : -s.error();
}

// "a/b/c" -> {"a/b", "c"}; "c" -> {".", "c"}.
std::pair<std::string, std::string> split_parent(const char* path) {
  std::string_view r = rel(path);
  auto slash = r.rfind('/');
  if (slash == std::string_view::npos) return {".", std::string(r)};
  return {std::string(r.substr(0, slash)), std::string(r.substr(slash + 1))};
}

std::expected<Key, int> key_at(int dirfd, const char* name) {
  struct stat st;
  if (::fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return std::unexpected(errno);
  return Key{st.st_dev, st.st_ino};
}

// Records that `path` was just created, unless entries are durable at once. Caller holds fs.mu.
void note_created(Fs& fs, const char* path, bool dir) {
  if (fs.entries == Entries::kEager) return;
  auto [parent, name] = split_parent(path);
  auto key = key_at(fs.root, rel(path));
  int pfd = ::openat(fs.root, parent.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (!key || pfd < 0) {
    if (pfd >= 0) ::close(pfd);
    return;  // raced with a removal: nothing left to lose
  }
  struct stat st;
  if (::fstat(pfd, &st) != 0) {
    ::close(pfd);
    return;
  }
  fs.fresh[*key] = std::make_unique<Fresh>(pfd, Key{st.st_dev, st.st_ino}, name, dir);
}

void make_durable(Fs& fs, const Key& key) {
  if (fs.fresh.erase(key) > 0) ++fs.stats.entries_made_durable;
}

// fsync of a directory commits the entries created in it (and, in kFsync mode, its own).
void dir_synced(Fs& fs, const Key& dir) {
  for (auto it = fs.fresh.begin(); it != fs.fresh.end();) {
    if (it->second->parent == dir) {
      it = fs.fresh.erase(it);
      ++fs.stats.entries_made_durable;
    } else {
      ++it;
    }
  }
  if (fs.entries == Entries::kFsync) make_durable(fs, dir);
}

bool remove_tree(int dirfd, const char* name) {
  int fd = ::openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return false;
  }
  bool ok = true;
  while (dirent* e = ::readdir(d)) {
    std::string_view n = e->d_name;
    if (n == "." || n == "..") continue;
    if (e->d_type == DT_DIR) {
      ok = remove_tree(fd, e->d_name) && ok;
    } else {
      ok = ::unlinkat(fd, e->d_name, 0) == 0 && ok;
    }
  }
  ::closedir(d);
  return ::unlinkat(dirfd, name, AT_REMOVEDIR) == 0 && ok;
}

// At a cut: entries never made durable disappear, with everything beneath them.
std::uint64_t drop_fresh_entries(Fs& fs) {
  std::uint64_t lost = 0;
  for (auto& [key, f] : fs.fresh) {
    auto now = key_at(f->parent_fd, f->name.c_str());
    if (!now || *now != key) continue;  // already gone with a dropped parent, or replaced
    bool ok = f->dir ? remove_tree(f->parent_fd, f->name.c_str())
                     : ::unlinkat(f->parent_fd, f->name.c_str(), 0) == 0;
    lost += ok;
  }
  fs.fresh.clear();
  return lost;
}

// ---- FUSE operations ------------------------------------------------------------------------

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

// ---- control socket --------------------------------------------------------------------------

std::string stats_line(Fs& fs) {
  std::lock_guard lock(fs.mu);
  std::uint64_t pending_ops = 0, dirty = 0, open = 0;
  for (const auto& [k, ino] : fs.inodes) {
    pending_ops += ino->state.pending_ops();
    dirty += ino->state.pending_ops() > 0;
    open += ino->refs > 0;
  }
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "ok pending_bytes=%llu pending_ops=%llu dirty_files=%llu open_files=%llu "
                "writes=%llu write_bytes=%llu fsyncs=%llu fdatasyncs=%llu fsyncdirs=%llu "
                "truncates=%llu writebacks=%llu fresh_entries=%zu entries_made_durable=%llu "
                "cut=%d",
                static_cast<unsigned long long>(total_pending(fs)),
                static_cast<unsigned long long>(pending_ops),
                static_cast<unsigned long long>(dirty), static_cast<unsigned long long>(open),
                static_cast<unsigned long long>(fs.stats.writes),
                static_cast<unsigned long long>(fs.stats.write_bytes),
                static_cast<unsigned long long>(fs.stats.fsyncs),
                static_cast<unsigned long long>(fs.stats.fdatasyncs),
                static_cast<unsigned long long>(fs.stats.fsyncdirs),
                static_cast<unsigned long long>(fs.stats.truncates),
                static_cast<unsigned long long>(fs.stats.writebacks), fs.fresh.size(),
                static_cast<unsigned long long>(fs.stats.entries_made_durable), fs.dead ? 1 : 0);
  return buf;
}

std::string cut(Fs& fs, CutMode mode, std::uint64_t seed, std::string_view mode_name) {
  std::lock_guard lock(fs.mu);
  if (fs.dead) return "err already cut";
  std::mt19937_64 rng(seed);
  CutResult total;
  std::uint64_t files = 0;
  std::string errors;
  for (auto& [k, ino] : fs.inodes) {
    if (ino->state.pending_ops() == 0) continue;
    ++files;
    auto r = ino->state.cut(mode, rng);
    if (!r) {
      errors += " ";
      errors += std::strerror(r.error());
      continue;
    }
    total.kept_ops += r->kept_ops;
    total.dropped_ops += r->dropped_ops;
    total.torn_writes += r->torn_writes;
    total.kept_bytes += r->kept_bytes;
    total.dropped_bytes += r->dropped_bytes;
  }
  fs.dead = true;
  const std::uint64_t lost_entries = drop_fresh_entries(fs);
  for (auto it = fs.inodes.begin(); it != fs.inodes.end();) {
    it = it->second->refs == 0 ? fs.inodes.erase(it) : std::next(it);
  }
  if (!errors.empty()) return "err applying kept writes:" + errors;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "ok cut mode=%.*s seed=%llu files=%llu kept_ops=%llu dropped_ops=%llu "
                "torn_writes=%llu kept_bytes=%llu dropped_bytes=%llu lost_entries=%llu",
                static_cast<int>(mode_name.size()), mode_name.data(),
                static_cast<unsigned long long>(seed), static_cast<unsigned long long>(files),
                static_cast<unsigned long long>(total.kept_ops),
                static_cast<unsigned long long>(total.dropped_ops),
                static_cast<unsigned long long>(total.torn_writes),
                static_cast<unsigned long long>(total.kept_bytes),
                static_cast<unsigned long long>(total.dropped_bytes),
                static_cast<unsigned long long>(lost_entries));
  return buf;
}

std::vector<std::string_view> split(std::string_view s) {
  std::vector<std::string_view> out;
  while (!s.empty()) {
    auto b = s.find_first_not_of(" \t\r");
    if (b == std::string_view::npos) break;
    s.remove_prefix(b);
    auto e = s.find_first_of(" \t\r");
    out.push_back(s.substr(0, e));
    if (e == std::string_view::npos) break;
    s.remove_prefix(e);
  }
  return out;
}

std::string execute(Fs& fs, std::string_view line) {
  auto w = split(line);
  if (w.empty()) return "err empty command";
  if (w[0] == "ping") return "ok";
  if (w[0] == "stats") return stats_line(fs);
  if (w[0] == "cut") {
    if (w.size() < 2) return "err usage: cut drop | cut torn SEED | cut reorder SEED";
    std::uint64_t seed = 0;
    if (w.size() >= 3) {
      auto [p, ec] = std::from_chars(w[2].data(), w[2].data() + w[2].size(), seed);
      if (ec != std::errc{} || p != w[2].data() + w[2].size()) return "err bad seed";
    }
    if (w[1] == "drop") return cut(fs, CutMode::kDrop, seed, w[1]);
    if (w.size() < 3) return "err torn and reorder need a seed";
    if (w[1] == "torn") return cut(fs, CutMode::kTorn, seed, w[1]);
    if (w[1] == "reorder") return cut(fs, CutMode::kReorder, seed, w[1]);
    return "err unknown cut mode";
  }
  return "err unknown command";
}

void serve_connection(Fs& fs, int fd) {
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string in;
  char buf[1024];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return;
    in.append(buf, static_cast<size_t>(n));
    size_t nl;
    while ((nl = in.find('\n')) != std::string::npos) {
      std::string reply = execute(fs, std::string_view(in).substr(0, nl)) + "\n";
      in.erase(0, nl + 1);
      if (::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL) < 0) return;
    }
    if (in.size() > 4096) return;
  }
}

void control_loop(Fs& fs, int listen_fd, int wake_fd) {
  set_thread_name("powerfs-ctl");
  for (;;) {
    pollfd p[2] = {{listen_fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[1].revents) return;
    if (p[0].revents & POLLIN) {
      int c = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      serve_connection(fs, c);
      ::close(c);
    }
  }
}

int listen_unix(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    std::fprintf(stderr, "powerfs: control path too long: %s\n", path.c_str());
    return -1;
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  ::unlink(path.c_str());
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 8) != 0) {
    std::fprintf(stderr, "powerfs: control socket %s: %s\n", path.c_str(), std::strerror(errno));
    ::close(fd);
    return -1;
  }
  return fd;
}

int ctl_main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: powerfs ctl SOCKET COMMAND...\n");
    return 2;
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string path = argv[2];
  if (path.size() >= sizeof addr.sun_path) return 2;
  std::memcpy(addr.sun_path, path.data(), path.size());
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    std::fprintf(stderr, "powerfs ctl: %s: %s\n", path.c_str(), std::strerror(errno));
    return 3;
  }
  std::string cmd;
  for (int i = 3; i < argc; ++i) {
    if (i > 3) cmd += ' ';
    cmd += argv[i];
  }
  cmd += '\n';
  if (::send(fd, cmd.data(), cmd.size(), MSG_NOSIGNAL) < 0) return 3;
  std::string reply;
  char c;
  while (::recv(fd, &c, 1, 0) == 1 && c != '\n')
    reply += c;
  ::close(fd);
  std::printf("%s\n", reply.c_str());
  return reply.starts_with("ok") ? 0 : 1;
}

void usage() {
  std::fprintf(stderr,
               "usage: powerfs BACKING_DIR MOUNTPOINT [--control SOCKET] [-f] [-d] [--page-cache]\n"
               "               [--entries eager|fsync|dirsync] [--max-pending-mb N] [-o OPTIONS]\n"
               "       powerfs ctl SOCKET COMMAND...   (ping | stats | cut drop | cut torn SEED |"
               " cut reorder SEED)\n");
}

std::string absolute(const std::string& p) {
  if (p.empty() || p[0] == '/') return p;
  char cwd[PATH_MAX];
  if (::getcwd(cwd, sizeof cwd) == nullptr) return p;
  return std::string(cwd) + "/" + p;
}

int run(int argc, char** argv) {
  if (argc >= 2 && std::string_view(argv[1]) == "ctl") return ctl_main(argc, argv);
  std::vector<std::string> positional;
  std::vector<std::string> fuse_opts;
  std::string control;
  bool foreground = false, debug = false, direct_io = true;
  Entries entries = Entries::kEager;
  std::uint64_t max_pending_mb = 256;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "--control") {
      const char* v = value();
      if (v == nullptr) return usage(), 2;
      control = v;
    } else if (a == "-f") {
      foreground = true;
    } else if (a == "-d") {
      debug = foreground = true;
    } else if (a == "--entries") {
      const char* v = value();
      std::string_view e = v == nullptr ? "" : v;
      if (e == "eager") {
        entries = Entries::kEager;
      } else if (e == "fsync") {
        entries = Entries::kFsync;
      } else if (e == "dirsync") {
        entries = Entries::kDirsync;
      } else {
        return usage(), 2;
      }
    } else if (a == "--page-cache") {
      direct_io = false;
    } else if (a == "--max-pending-mb") {
      const char* v = value();
      if (v == nullptr) return usage(), 2;
      max_pending_mb = std::strtoull(v, nullptr, 10);
    } else if (a == "-o") {
      const char* v = value();
      if (v == nullptr) return usage(), 2;
      fuse_opts.emplace_back(v);
    } else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else if (a.starts_with("-")) {
      usage();
      return 2;
    } else {
      positional.emplace_back(a);
    }
  }
  if (positional.size() != 2) return usage(), 2;

  char backing[PATH_MAX];
  if (::realpath(positional[0].c_str(), backing) == nullptr) {
    std::fprintf(stderr, "powerfs: %s: %s\n", positional[0].c_str(), std::strerror(errno));
    return 1;
  }
  Fs fs;
  fs.direct_io = direct_io;
  fs.entries = entries;
  fs.max_pending_bytes = max_pending_mb << 20;
  fs.root = ::open(backing, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fs.root < 0) {
    std::fprintf(stderr, "powerfs: %s: %s\n", backing, std::strerror(errno));
    return 1;
  }
  g_fs = &fs;

  std::string fsname = std::string("fsname=powerfs:") + backing;
  std::vector<std::string> args = {
      argv[0], "-o", fsname, "-o", "subtype=powerfs", "-o", "default_permissions"};
  if (debug) args.emplace_back("-d");
  for (auto& o : fuse_opts) {
    args.emplace_back("-o");
    args.push_back(o);
  }
  std::vector<char*> cargs;
  for (auto& a : args)
    cargs.push_back(a.data());
  fuse_args fargs = FUSE_ARGS_INIT(static_cast<int>(cargs.size()), cargs.data());
  fuse_operations ops = make_ops();
  // fuse_new may copy the arguments into memory of its own, to be freed once it is gone.
  struct ArgsGuard {
    fuse_args* a;
    ~ArgsGuard() { fuse_opt_free_args(a); }
  } args_guard{&fargs};
  fuse* f = fuse_new(&fargs, &ops, sizeof ops, &fs);
  if (f == nullptr) return 1;
  std::string mountpoint = absolute(positional[1]);
  if (fuse_mount(f, mountpoint.c_str()) != 0) {
    fuse_destroy(f);
    return 1;
  }
  // Bound only once the mount exists, so a client that can connect knows the mount is live.
  int listen_fd = -1;
  if (!control.empty()) {
    control = absolute(control);
    listen_fd = listen_unix(control);
    if (listen_fd < 0) {
      fuse_unmount(f);
      fuse_destroy(f);
      return 1;
    }
  }
  if (fuse_daemonize(foreground ? 1 : 0) != 0) return 1;
  set_thread_name("powerfs");
  ::signal(SIGPIPE, SIG_IGN);
  fuse_session* se = fuse_get_session(f);
  fuse_set_signal_handlers(se);

  int wake_fd = ::eventfd(0, EFD_CLOEXEC);
  std::thread ctl;
  if (listen_fd >= 0) ctl = std::thread(control_loop, std::ref(fs), listen_fd, wake_fd);

  fuse_loop_config* cfg = fuse_loop_cfg_create();
  fuse_loop_cfg_set_max_threads(cfg, 16);
  int rc = fuse_loop_mt(f, cfg);
  fuse_loop_cfg_destroy(cfg);
  const bool aborted = rc == -ECONNABORTED || rc == ECONNABORTED;
  if (aborted) {
    // Only a write to /sys/fs/fuse/connections/N/abort (or a forced unmount) ends a session
    // this way: someone outside pulled the plug on the mount.
    std::fprintf(stderr, "powerfs: the FUSE connection was aborted from outside\n");
  }

  if (ctl.joinable()) {
    std::uint64_t one = 1;
    (void)!::write(wake_fd, &one, sizeof one);
    ctl.join();
  }
  // A clean unmount is a clean shutdown: everything written reaches the disk.
  {
    std::lock_guard lock(fs.mu);
    if (!fs.dead) {
      for (auto& [k, ino] : fs.inodes) {
        if (auto st = ino->state.sync(false); !st) {
          std::fprintf(stderr, "powerfs: write-back at unmount: %s\n", std::strerror(st.error()));
          rc = 1;
        }
      }
    }
    fs.inodes.clear();
    fs.fresh.clear();
  }
  fuse_remove_signal_handlers(se);
  fuse_unmount(f);
  fuse_destroy(f);
  if (listen_fd >= 0) {
    ::close(listen_fd);
    ::unlink(control.c_str());
  }
  ::close(wake_fd);
  ::close(fs.root);
  if (aborted) return 3;
  return rc == 0 ? 0 : 1;
}

}  // namespace
}  // namespace samsa::powerfs

int main(int argc, char** argv) {
  return samsa::powerfs::run(argc, argv);
}
