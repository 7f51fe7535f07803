// DPDK's EAL start-up for the port (port.cc): its arguments, what is checked before it starts
// (hugepages, socket permissions, interfaces nobody else uses), its log captured into ours, and
// the small helpers both files use. Includes DPDK's headers, so never lwIP's.
#include "net/dpdk/eal.h"

#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <rte_arp.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <rte_mempool.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <new>
#include <set>
#include <sstream>
#include <thread>

#include "base/clock.h"
#include "base/log.h"

#ifndef AF_XDP
#define AF_XDP 44
#endif

namespace samsa::net::dpdk {
namespace {

// ---- DPDK's log, into ours ----
// EAL and the drivers log through a stdio stream; this one turns each line into a samsa log
// line and keeps the last few, which start-up errors quote (DPDK's own reason is usually
// there, e.g. "failed to create xsk socket" or "No free 2048 kB hugepages").
std::mutex g_log_mu;  // the EAL's interrupt thread logs too
std::deque<std::string> g_log_tail;
std::string g_log_partial;

ssize_t log_write(void*, const char* buf, size_t n) {
  std::lock_guard lk(g_log_mu);
  g_log_partial.append(buf, n);
  std::size_t nl;
  while ((nl = g_log_partial.find('\n')) != std::string::npos) {
    std::string line = g_log_partial.substr(0, nl);
    g_log_partial.erase(0, nl + 1);
    if (line.empty()) continue;
    const int lvl = rte_log_cur_msg_loglevel();
    if (lvl <= static_cast<int>(RTE_LOG_ERR)) {
      LOG_ERROR("dpdk: %s", line.c_str());
    } else if (lvl <= static_cast<int>(RTE_LOG_WARNING)) {
      LOG_WARN("dpdk: %s", line.c_str());
    } else if (lvl <= static_cast<int>(RTE_LOG_NOTICE)) {
      LOG_INFO("dpdk: %s", line.c_str());
    } else {
      LOG_DEBUG("dpdk: %s", line.c_str());
    }
    g_log_tail.push_back(std::move(line));
    if (g_log_tail.size() > 12) g_log_tail.pop_front();
  }
  return static_cast<ssize_t>(n);
}

void capture_dpdk_log() {
  static FILE* f = [] {
    cookie_io_functions_t io{};
    io.write = &log_write;
    FILE* s = fopencookie(nullptr, "w", io);
    if (s) setvbuf(s, nullptr, _IOLBF, 0);
    return s;
  }();
  if (f) rte_openlog_stream(f);
}

// ---- arguments ----

std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string w;
  while (in >> w)
    out.push_back(w);
  return out;
}

bool has_flag(const std::vector<std::string>& v, std::initializer_list<const char*> names) {
  for (const auto& w : v)
    for (const char* n : names) {
      const std::size_t len = std::strlen(n);
      if (w == n || (w.size() > len && w.compare(0, len, n) == 0 && w[len] == '=')) return true;
      // Short options glued to their value: -l0, -m256.
      if (len == 2 && n[0] == '-' && n[1] != '-' && w.size() > 2 && w.compare(0, 2, n) == 0)
        return true;
    }
  return false;
}

std::uint64_t free_hugepages_kib() {
  std::uint64_t kib = 0;
  std::error_code ec;
  for (const auto& d : std::filesystem::directory_iterator("/sys/kernel/mm/hugepages", ec)) {
    const std::string name = d.path().filename();  // hugepages-2048kB
    std::uint64_t size_kb = std::strtoull(name.c_str() + std::strlen("hugepages-"), nullptr, 10);
    std::ifstream in(d.path() / "free_hugepages");
    std::uint64_t n = 0;
    in >> n;
    kib += n * size_kb;
  }
  return kib;
}

// Claims the interfaces a vdev names (iface=...) for this process: an abstract unix socket
// lives in the network namespace the interface lives in, and dies with the process. Two
// af_packet sockets on one interface are allowed by the kernel (and, with the PMD's qdisc
// bypass, do not even see each other's frames), so a second broker on the same interface is
// refused here rather than silently sharing it.
bool claim_interfaces(const std::vector<std::string>& argv, std::string* error) {
  for (const auto& w : argv) {
    for (std::size_t at = w.find("iface="); at != std::string::npos; at = w.find("iface=", at)) {
      at += 6;
      const std::string iface = w.substr(at, w.find(',', at) - at);
      sockaddr_un a{};
      a.sun_family = AF_UNIX;
      const std::string name = "samsa/dpdk/" + iface;
      std::memcpy(a.sun_path + 1, name.data(), std::min(name.size(), sizeof a.sun_path - 2));
      const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) continue;
      const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 +
                                              std::min(name.size(), sizeof a.sun_path - 2));
      if (::bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0) {
        ::close(fd);
        if (errno == EADDRINUSE) {
          *error = "in use: another process of this network namespace drives " + iface +
                   " with DPDK (it holds @" + name + "); one broker per interface";
          return false;
        }
        continue;
      }
      // Kept open for the life of the process.
    }
  }
  return true;
}

// The af_packet and af_xdp PMDs open their sockets deep inside the EAL's device probe, where a
// refusal surfaces as "no device". A socket of the same family opened here first names the
// real cause: the missing capability (a plain user, or the hardened systemd unit without the
// samsa-dpdk.conf drop-in) or the address family a seccomp filter forbids.
bool check_socket_permissions(const std::vector<std::string>& argv, std::string* error) {
  for (const auto& w : argv) {
    const bool xdp = w.find("net_af_xdp") != std::string::npos;
    if (!xdp && w.find("net_af_packet") == std::string::npos) continue;
    const int fd = ::socket(xdp ? AF_XDP : AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
      ::close(fd);
      continue;
    }
    const int e = errno;
    if (e != EPERM && e != EACCES && e != EAFNOSUPPORT) continue;  // the PMD reports the rest
    const char* family = xdp ? "AF_XDP" : "AF_PACKET";
    *error = std::string("permission denied: ") + (xdp ? "net_af_xdp" : "net_af_packet") +
             " needs an " + family + " socket, which was refused (" + std::strerror(e) +
             "): it needs " + (xdp ? "CAP_NET_RAW, CAP_NET_ADMIN and CAP_BPF" : "CAP_NET_RAW") +
             " and the " + family +
             " address family. Under systemd the samsa unit grants neither: install its drop-in "
             "(ln -s /usr/share/samsa/samsa-dpdk.conf /etc/systemd/system/samsa.service.d/, "
             "then systemctl daemon-reload)";
    return false;
  }
  return true;
}

// The EAL exists once per process; a second open() may only reuse it with the same words.
std::mutex g_eal_mu;
bool g_eal_done = false;
std::string g_eal_args;
std::string g_eal_error;

}  // namespace

std::vector<int> g_eal_new_fds;

std::string log_tail() {
  std::lock_guard lk(g_log_mu);
  std::string s;
  for (const auto& l : g_log_tail) {
    s += "\n  dpdk: ";
    s += l;
  }
  return s;
}

std::string allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return "0";
  std::string out;
  for (int i = 0; i < CPU_SETSIZE; ++i)
    if (CPU_ISSET(i, &set)) out += (out.empty() ? "" : ",") + std::to_string(i);
  return out.empty() ? "0" : out;
}

std::set<int> open_fds() {
  std::set<int> fds;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') fds.insert(std::atoi(e->d_name));
    ::closedir(d);
  }
  return fds;
}

// A PMD's receive socket (af_packet, af_xdp) or tap device: poll() on it reports POLLIN once
// a frame waits in its ring, which lets an idle loop sleep until traffic arrives.
bool is_wait_fd(int fd) {
  int domain = 0;
  socklen_t len = sizeof domain;
  if (::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0)
    return domain == AF_PACKET || domain == AF_XDP;
  char target[64] = {};
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
  return n > 0 && std::string_view(target, static_cast<std::size_t>(n)) == "/dev/net/tun";
}

std::string device_arg(const std::vector<std::string>& argv, const std::string& device,
                       const std::string& key) {
  for (const auto& w : argv) {
    auto at = w.find(device);
    if (at == std::string::npos) continue;
    const std::string k = "," + key + "=";
    auto i = w.find(k, at);
    if (i == std::string::npos) continue;
    i += k.size();
    return w.substr(i, w.find(',', i) - i);
  }
  return "";
}

std::string device_iface(const std::vector<std::string>& argv, const std::string& device) {
  return device_arg(argv, device, "iface");
}

int rx_queue_count(const std::string& iface) {
  std::error_code ec;
  int n = 0;
  for (const auto& e :
       std::filesystem::directory_iterator("/sys/class/net/" + iface + "/queues", ec))
    n += e.path().filename().string().starts_with("rx-");
  return ec ? -1 : n;
}

std::string ip_text(std::uint32_t ip_be) {
  const auto* b = reinterpret_cast<const std::uint8_t*>(&ip_be);
  return std::to_string(b[0]) + "." + std::to_string(b[1]) + "." + std::to_string(b[2]) + "." +
         std::to_string(b[3]);
}

std::string mac_text(const std::uint8_t* m) {
  char s[32];
  std::snprintf(s, sizeof s, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
  return s;
}

// Whether this thread's effective set holds capability `cap` (the CapEff mask of /proc).
bool has_capability(int cap) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    const unsigned long long mask = std::strtoull(line.c_str() + 7, nullptr, 16);
    return (mask >> cap) & 1;
  }
  return true;  // unknown: do not guess at a permission problem
}

std::vector<std::string> eal_argv(const std::string& args, const std::string& cpus) {
  std::vector<std::string> v = {"samsad"};
  for (auto& w : split_words(args))
    v.push_back(std::move(w));
  const std::vector<std::string> user(v.begin() + 1, v.end());
  // EAL pins the calling thread to its main lcore's CPUs; without a core list it would also
  // start an idle worker thread per core. One lcore on every CPU we may use: no extra
  // threads, and nothing pinned.
  if (!has_flag(user, {"-l", "-c", "--lcores"})) v.push_back("--lcores=0@(" + cpus + ")");
  // Nothing left behind in /dev/hugepages or /var/run/dpdk after a kill -9, and two brokers
  // on one host do not take each other for a primary process.
  if (!has_flag(user, {"--in-memory", "--no-shconf", "--file-prefix", "--proc-type"})) {
    v.push_back(has_flag(user, {"--no-huge"}) ? "--no-shconf" : "--in-memory");
  }
  if (!has_flag(user, {"--no-telemetry", "--telemetry"})) v.push_back("--no-telemetry");
  // With only virtual devices named, the EAL would still probe every PCI NIC it can reach
  // (including the one the host's own traffic uses); a PCI device must be named to be taken.
  if (has_flag(user, {"--vdev"}) && !has_flag(user, {"-a", "--allow", "-b", "--block", "--no-pci"}))
    v.push_back("--no-pci");
  return v;
}

// Initialises DPDK's EAL once per process with argv (checked first: hugepages, socket
// permissions, interfaces nobody else uses); a later call with other arguments is refused.
std::expected<void, std::string> start_eal(const PortOptions& opts,
                                           const std::vector<std::string>& argv_s) {
  auto fail = [](std::string m) { return std::unexpected(std::move(m)); };
  std::lock_guard lk(g_eal_mu);
  if (g_eal_done) {
    if (!g_eal_error.empty()) return fail(g_eal_error);
    if (g_eal_args != opts.eal_args)
      return fail("DPDK's EAL is already running in this process with other arguments");
  } else {
    g_eal_done = true;
    g_eal_args = opts.eal_args;
    const std::vector<std::string> user(argv_s.begin() + 1, argv_s.end());
    if (!has_flag(user, {"--no-huge"}) && free_hugepages_kib() == 0) {
      g_eal_error =
          "hugepages missing: samsa.dpdk.eal.args does not say --no-huge and no hugepages are "
          "free (/sys/kernel/mm/hugepages/*/free_hugepages); reserve some (e.g. echo 256 > "
          "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages) or add --no-huge -m 256";
      return fail(g_eal_error);
    }
    if (std::string why; !check_socket_permissions(user, &why)) {
      g_eal_error = why;
      return fail(g_eal_error);
    }
    if (std::string why; !claim_interfaces(user, &why)) {
      g_eal_error = why;
      return fail(g_eal_error);
    }
    capture_dpdk_log();
    // EAL's argv is kept by DPDK for the life of the process.
    static std::vector<std::string> keep;
    static std::vector<char*> argv;
    keep = argv_s;
    for (auto& s : keep)
      argv.push_back(s.data());
    argv.push_back(nullptr);
    cpu_set_t before;
    const bool have_before = pthread_getaffinity_np(pthread_self(), sizeof before, &before) == 0;
    const std::set<int> fds_before = open_fds();
    std::string words;
    for (const auto& s : keep)
      words += (words.empty() ? "" : " ") + s;
    LOG_INFO("dpdk: starting the EAL: %s", words.c_str());
    const int rc = rte_eal_init(static_cast<int>(argv.size() - 1), argv.data());
    if (have_before) pthread_setaffinity_np(pthread_self(), sizeof before, &before);
    if (rc < 0) {
      const int e = rte_errno;
      std::string why = std::string("DPDK's EAL did not start with samsa.dpdk.eal.args \"") +
                        opts.eal_args + "\": " + rte_strerror(e);
      const std::string tail = log_tail();
      if (tail.find("hugepage") != std::string::npos || tail.find("memory") != std::string::npos ||
          e == ENOMEM)
        why = "no memory: " + why;
      g_eal_error = why + tail;
      return fail(g_eal_error);
    }
    for (int fd : open_fds())
      if (!fds_before.contains(fd)) g_eal_new_fds.push_back(fd);
  }
  return {};
}

}  // namespace samsa::net::dpdk
