// powerfs: a pass-through FUSE file system that keeps unsynced writes in memory so that a
// simulated power cut can lose them. See README.md for the durability model and the control
// protocol.
//
//   powerfs <backing_dir> <mountpoint> [--control SOCKET] [-f] [-d] [--page-cache]
//           [--entries eager|fsync|dirsync] [--max-pending-mb N] [-o fuse_opts]
//   powerfs ctl SOCKET COMMAND...
#define FUSE_USE_VERSION FUSE_MAKE_VERSION(3, 14)
#include <fcntl.h>
#include <fuse3/fuse.h>
#include <fuse3/fuse_common.h>
#include <signal.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/thread.h"
#include "tests/durability/powerfs/control.h"
#include "tests/durability/powerfs/fs_state.h"
#include "tests/durability/powerfs/fuse_ops.h"

namespace samsa::powerfs {
namespace {

using namespace detail;

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
