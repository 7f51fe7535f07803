// powerfs control socket: the server side (one connection at a time, one command a line) and
// the `powerfs ctl` client. See README.md for the protocol.
#include "tests/durability/powerfs/control.h"

#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "base/thread.h"
#include "tests/durability/powerfs/fs_state.h"

namespace samsa::powerfs::detail {
namespace {

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
  if (w[0] == "sync-delay") {
    std::uint32_t ms = 0;
    if (w.size() != 2) return "err usage: sync-delay MS";
    auto [p, ec] = std::from_chars(w[1].data(), w[1].data() + w[1].size(), ms);
    if (ec != std::errc{} || p != w[1].data() + w[1].size() || ms > 10000)
      return "err sync-delay takes 0..10000 ms";
    fs.sync_delay_ms.store(ms, std::memory_order_relaxed);
    return "ok sync-delay=" + std::to_string(ms);
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

}  // namespace

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

}  // namespace samsa::powerfs::detail
