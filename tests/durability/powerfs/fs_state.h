// powerfs internals: the state of the mounted file system, shared by the FUSE operations
// (fuse_ops.cc), the control socket (control.cc) and run() (powerfs.cc). Every function here
// that touches an Fs expects its caller to hold fs.mu unless it says otherwise.
#pragma once

#include <dirent.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <expected>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "tests/durability/powerfs/overlay.h"

namespace samsa::powerfs::detail {

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
  // `sync-delay MS` on the control socket: every fsync/fdatasync of a file first waits this
  // long (outside mu), a slow disk. It widens the window in which a broker has acknowledged
  // what its disk does not hold yet, which only a broker acknowledging from memory has.
  std::atomic<std::uint32_t> sync_delay_ms{0};
};

// The one mounted file system; set by run() before the mount, read by the FUSE operations.
extern Fs* g_fs;

// A FUSE path relative to the backing directory ("/" and "" are ".").
const char* rel(const char* path);

std::uint64_t total_pending(const Fs& fs);

// Drops the state of a file nobody has open once it holds nothing pending, or once the file is
// gone (its pending data can never be read again, and releasing the fd lets the inode go).
void maybe_forget(Fs& fs, Inode* ino);

// Opens (or creates) the backing file and finds or makes its Inode. `take_ref` counts a FUSE
// handle; truncate-by-path needs the state without one. Caller holds fs.mu: every change to
// the backing directory happens under it, so none can slip in after a cut.
std::expected<Inode*, int> open_inode(Fs& fs, const char* path, int create_flags, mode_t mode,
                                      int accmode, bool take_ref, bool* created = nullptr);

int err(const Status& s);

// "a/b/c" -> {"a/b", "c"}; "c" -> {".", "c"}.
std::pair<std::string, std::string> split_parent(const char* path);

std::expected<Key, int> key_at(int dirfd, const char* name);

// Records that `path` was just created, unless entries are durable at once. Caller holds fs.mu.
void note_created(Fs& fs, const char* path, bool dir);

void make_durable(Fs& fs, const Key& key);

// fsync of a directory commits the entries created in it (and, in kFsync mode, its own).
void dir_synced(Fs& fs, const Key& dir);

// At a cut: entries never made durable disappear, with everything beneath them.
std::uint64_t drop_fresh_entries(Fs& fs);

}  // namespace samsa::powerfs::detail
