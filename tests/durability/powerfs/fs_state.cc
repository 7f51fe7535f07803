// powerfs file state: see fs_state.h.
#include "tests/durability/powerfs/fs_state.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>

namespace samsa::powerfs::detail {

Fs* g_fs = nullptr;

const char* rel(const char* path) {
  if (path[0] == '\0' || (path[0] == '/' && path[1] == '\0')) return ".";
  return path[0] == '/' ? path + 1 : path;
}

std::uint64_t total_pending(const Fs& fs) {
  std::uint64_t n = 0;
  for (const auto& [k, ino] : fs.inodes)
    n += ino->state.pending_bytes();
  return n;
}

void maybe_forget(Fs& fs, Inode* ino) {
  if (ino->refs > 0) return;
  bool gone = ino->state.pending_ops() == 0;
  if (!gone) {
    struct stat st;
    gone = ::fstat(ino->state.fd(), &st) == 0 && st.st_nlink == 0;
  }
  if (gone) fs.inodes.erase(ino->key);
}

std::expected<Inode*, int> open_inode(Fs& fs, const char* path, int create_flags, mode_t mode,
                                      int accmode, bool take_ref, bool* created) {
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

static bool remove_tree(int dirfd, const char* name) {
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

}  // namespace samsa::powerfs::detail
