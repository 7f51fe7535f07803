// The only translation unit that includes DPDK's headers (they and lwIP's both define
// struct ip6_hdr). Everything DPDK-specific of the backend is here: EAL start-up and its
// errors, the mbuf pool, the port and its queues, the ARP probe, the wait descriptors.
#include "net/dpdk/port.h"

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

std::string log_tail() {
  std::lock_guard lk(g_log_mu);
  std::string s;
  for (const auto& l : g_log_tail) {
    s += "\n  dpdk: ";
    s += l;
  }
  return s;
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

std::string allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return "0";
  std::string out;
  for (int i = 0; i < CPU_SETSIZE; ++i)
    if (CPU_ISSET(i, &set)) out += (out.empty() ? "" : ",") + std::to_string(i);
  return out.empty() ? "0" : out;
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

std::string device_iface(const std::vector<std::string>& argv, const std::string& device) {
  for (const auto& w : argv) {
    auto at = w.find(device);
    if (at == std::string::npos) continue;
    auto i = w.find("iface=", at);
    if (i == std::string::npos) continue;
    i += 6;
    return w.substr(i, w.find(',', i) - i);
  }
  return "";
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

// The EAL exists once per process; a second open() may only reuse it with the same words.
std::mutex g_eal_mu;
bool g_eal_done = false;
std::string g_eal_args;
std::string g_eal_error;
std::vector<int> g_eal_new_fds;

}  // namespace

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

std::expected<std::unique_ptr<Port>, std::string> Port::open(const PortOptions& opts) {
  auto fail = [](std::string m) { return std::unexpected(std::move(m)); };
  if (opts.mtu < 576 || opts.mtu > 9000)
    return fail("samsa.dpdk.mtu " + std::to_string(opts.mtu) + " is outside 576..9000");
  const std::vector<std::string> argv_s = eal_argv(opts.eal_args, allowed_cpus());
  {
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
        if (tail.find("hugepage") != std::string::npos ||
            tail.find("memory") != std::string::npos || e == ENOMEM)
          why = "no memory: " + why;
        g_eal_error = why + tail;
        return fail(g_eal_error);
      }
      for (int fd : open_fds())
        if (!fds_before.contains(fd)) g_eal_new_fds.push_back(fd);
    }
  }

  std::unique_ptr<Port> p(new Port());
  if (rte_eth_dev_count_avail() == 0) {
    return fail(
        "no device: DPDK found no network device; name one in samsa.dpdk.eal.args (e.g. "
        "--vdev=net_af_xdp0,iface=eth1,start_queue=0,queue_count=1 or "
        "--vdev=net_af_packet0,iface=eth1) and check the interface exists" +
        log_tail());
  }
  const std::uint16_t id =
      static_cast<std::uint16_t>(rte_eth_find_next_owned_by(0, RTE_ETH_DEV_NO_OWNER));
  if (rte_eth_dev_count_avail() > 1)
    LOG_WARN("dpdk: %u devices found; using the first (port %u)", rte_eth_dev_count_avail(), id);
  p->id_ = id;
  char name[RTE_ETH_NAME_MAX_LEN] = {};
  rte_eth_dev_get_name_by_port(id, name);
  p->device_ = name;
  rte_eth_dev_info info{};
  if (int rc = rte_eth_dev_info_get(id, &info); rc != 0)
    return fail("device " + p->device_ + ": " + rte_strerror(-rc) + log_tail());
  p->driver_ = info.driver_name ? info.driver_name : "?";
  p->iface_ = device_iface(argv_s, p->device_);

  const std::uint16_t priv = static_cast<std::uint16_t>(RTE_ALIGN(opts.priv_size, 8));
  static std::atomic<int> pools{0};
  const std::string pool_name = "samsa_mbufs" + std::to_string(pools.fetch_add(1));
  // Software devices never DMA, and with IOVA as VA virtual contiguity is all a device needs:
  // then the buffers may straddle pages and sit back to back. af_xdp needs exactly that: it
  // registers the pool as its UMEM assuming one object every obj_size bytes, while a pool
  // that keeps objects inside pages pads them (to 4 KiB each without hugepages) and the
  // later half of the buffers falls outside the UMEM (invalid descriptors, a stalled queue).
  const bool software =
      p->driver_ == "net_af_xdp" || p->driver_ == "net_af_packet" || p->driver_ == "net_tap";
  const unsigned flags =
      software || rte_eal_iova_mode() == RTE_IOVA_VA ? RTE_MEMPOOL_F_NO_IOVA_CONTIG : 0;
  // One mbuf per frame, jumbo frames included (the receive path relies on it).
  const std::uint32_t room_needed = RTE_PKTMBUF_HEADROOM + opts.mtu + RTE_ETHER_HDR_LEN;
  if (room_needed > RTE_MBUF_DEFAULT_BUF_SIZE && p->driver_ == "net_af_xdp")
    return fail("samsa.dpdk.mtu " + std::to_string(opts.mtu) +
                ": net_af_xdp carries frames of at most 1500 bytes here (one page per frame)");
  // The af_packet PMD also wants its ring's whole frame (framesz= minus its header) to fit:
  // 1 KiB of slack above the MTU lets framesz=MTU rounded up to 1 KiB + 1 KiB do (9216 at 9000).
  const auto room = static_cast<std::uint16_t>(room_needed <= RTE_MBUF_DEFAULT_BUF_SIZE
                                                   ? RTE_MBUF_DEFAULT_BUF_SIZE
                                                   : ((room_needed + 1023) & ~1023u) + 1024);
  rte_pktmbuf_pool_private pool_priv{};
  pool_priv.mbuf_data_room_size = room;
  pool_priv.mbuf_priv_size = priv;
  rte_mempool* mp = rte_mempool_create_empty(
      pool_name.c_str(), opts.mbufs, sizeof(rte_mbuf) + priv + room, 256,
      sizeof(rte_pktmbuf_pool_private), static_cast<int>(rte_socket_id()), flags);
  const auto pool_failed = [&](int e) {
    if (mp) rte_mempool_free(mp);
    const std::uint64_t need = std::uint64_t(opts.mbufs) * (sizeof(rte_mbuf) + priv + room);
    return fail(
        "no memory: DPDK could not allocate " + std::to_string(opts.mbufs) +
        " packet buffers (about " + std::to_string(need >> 20) + " MiB): " + rte_strerror(e) +
        "; give the EAL more memory in samsa.dpdk.eal.args (-m, or more hugepages)" + log_tail());
  };
  if (!mp) return pool_failed(rte_errno);
  if (int rc = rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(), nullptr); rc != 0)
    return pool_failed(-rc);
  rte_pktmbuf_pool_init(mp, &pool_priv);
  if (int rc = rte_mempool_populate_default(mp); rc < 0) return pool_failed(-rc);
  rte_mempool_obj_iter(mp, rte_pktmbuf_init, nullptr);
  if (p->driver_ == "net_af_xdp" && mp->nb_mem_chunks != 1) {
    rte_mempool_free(mp);
    return fail("device " + p->device_ +
                ": af_xdp needs its packet buffers in one piece of memory, and DPDK split them "
                "in " +
                std::to_string(mp->nb_mem_chunks) + "; give the EAL more memory (-m)");
  }
  p->pool_ = mp;

  // Transmit without copying lwIP's segments into mbufs: the headers are copied into one,
  // the payload (answer memory the stack keeps until acknowledged) is attached as external
  // buffers. Only where the PMD walks a segment chain with the CPU: af_packet and tap (their
  // tx_burst copy or writev each segment, and advertise MULTI_SEGS). af_xdp does not (its
  // tx_burst copies pkt_len bytes from the first segment), and a device that DMAs would need
  // the heap memory registered with it (rte_extmem_register, rte_dev_dma_map): both copy.
  p->zero_copy_tx_ = opts.tx_zero_copy &&
                     (p->driver_ == "net_af_packet" || p->driver_ == "net_tap") &&
                     (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) != 0;
  if (p->zero_copy_tx_) {
    const std::string ext_name = "samsa_ext" + std::to_string(pools.fetch_add(1));
    // Attached mbufs live from link_output until tx_burst (af_packet and tap free them
    // there) or while frames wait for ring room (Port's queue, at most 4096 + a burst).
    p->ext_pool_ = rte_pktmbuf_pool_create(ext_name.c_str(), 8191, 256, 0, 0,
                                           static_cast<int>(rte_socket_id()));
    if (!p->ext_pool_) {
      LOG_WARN("dpdk: no memory for the zero-copy transmit mbufs (%s); frames are copied",
               rte_strerror(rte_errno));
      p->zero_copy_tx_ = false;
    }
  }

  rte_eth_conf conf{};
  if (p->zero_copy_tx_) conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
  if (int rc = rte_eth_dev_configure(id, 1, 1, &conf); rc != 0)
    return fail("device " + p->device_ + ": configuring one queue pair: " + rte_strerror(-rc) +
                log_tail());
  std::uint16_t nrx = 1024, ntx = 1024;
  rte_eth_dev_adjust_nb_rx_tx_desc(id, &nrx, &ntx);
  const int socket = rte_eth_dev_socket_id(id);
  const unsigned sock = socket < 0 ? 0u : static_cast<unsigned>(socket);
  if (int rc = rte_eth_rx_queue_setup(id, 0, nrx, sock, nullptr, mp); rc != 0) {
    const std::string tail = log_tail();
    std::string why = rte_strerror(-rc);
    // af_xdp binds its socket here; the kernel refuses a queue another AF_XDP socket holds.
    // Without CAP_SYS_ADMIN the same step fails earlier: libxdp looks XDP programs up by id
    // (BPF_PROG_GET_FD_BY_ID), and registering the packet memory needs CAP_IPC_LOCK or a
    // memlock limit above the pool.
    const bool xsk = tail.find("xsk socket") != std::string::npos ||
                     tail.find("create umem") != std::string::npos;
    if (xsk && !has_capability(21 /*CAP_SYS_ADMIN*/))
      why =
          "permission denied: net_af_xdp as a non-root user needs CAP_SYS_ADMIN besides "
          "CAP_NET_RAW, CAP_NET_ADMIN and CAP_BPF (libxdp looks XDP programs up by id), and "
          "CAP_IPC_LOCK or a memlock limit above the packet pool; see samsa-dpdk.conf (" +
          why + ")";
    else if (tail.find("xsk socket") != std::string::npos)
      why = "in use: the kernel refused an AF_XDP socket on queue 0 of " + p->iface_ +
            " (another broker or AF_XDP program holds it?) (" + why + ")";
    return fail("device " + p->device_ + ": receive queue: " + why + tail);
  }
  if (int rc = rte_eth_tx_queue_setup(id, 0, ntx, sock, nullptr); rc != 0)
    return fail("device " + p->device_ + ": transmit queue: " + rte_strerror(-rc) + log_tail());
  const std::set<int> fds_before = open_fds();
  if (int rc = rte_eth_dev_start(id); rc != 0) {
    std::string why = rte_strerror(-rc);
    const std::string tail = log_tail();
    if (rc == -EBUSY || tail.find("busy") != std::string::npos ||
        tail.find("Busy") != std::string::npos)
      why = "in use by another process (" + why + ")";
    return fail("device " + p->device_ + (p->iface_.empty() ? "" : " on " + p->iface_) +
                " did not start: " + why + tail);
  }
  p->started_ = true;
  std::vector<int> candidates = g_eal_new_fds;
  for (int fd : open_fds())
    if (!fds_before.contains(fd)) candidates.push_back(fd);
  for (int fd : candidates)
    if (is_wait_fd(fd)) p->wait_fds_.push_back(fd);

  rte_ether_addr mac{};
  rte_eth_macaddr_get(id, &mac);
  std::memcpy(p->mac_, mac.addr_bytes, 6);
  std::uint16_t dev_mtu = 1500;
  if (rte_eth_dev_get_mtu(id, &dev_mtu) != 0) dev_mtu = 1500;
  // A jumbo MTU asked for: the PMD sets it on the device (af_packet: on the interface, if its
  // ring's framesz= holds such frames).
  if (opts.mtu > dev_mtu) {
    const int rc = rte_eth_dev_set_mtu(id, static_cast<std::uint16_t>(opts.mtu));
    if (rc == 0) {
      dev_mtu = static_cast<std::uint16_t>(opts.mtu);
    } else if (p->driver_ == "net_af_packet" && !p->iface_.empty()) {
      // ethdev caps af_packet at a standard frame; the kernel interface's MTU is the real
      // limit (and the ring's framesz=, which the PMD already checked against the mbufs).
      std::ifstream f("/sys/class/net/" + p->iface_ + "/mtu");
      std::uint32_t kmtu = 0;
      if (f >> kmtu && kmtu >= opts.mtu) dev_mtu = static_cast<std::uint16_t>(opts.mtu);
    }
    if (dev_mtu < opts.mtu)
      LOG_WARN("dpdk: %s: setting MTU %u: %s", p->device_.c_str(), opts.mtu, rte_strerror(-rc));
  }
  p->mtu_ = std::min<std::uint32_t>(opts.mtu, dev_mtu);
  if (p->mtu_ < opts.mtu)
    LOG_WARN("dpdk: %s has MTU %u; samsa.dpdk.mtu %u lowered to it", p->device_.c_str(), dev_mtu,
             opts.mtu);
  rte_eth_link link{};
  if (rte_eth_link_get_nowait(id, &link) == 0 && link.link_status == RTE_ETH_LINK_DOWN)
    LOG_WARN("dpdk: %s reports its link down", p->device_.c_str());

  // RFC 5227 probe: two ARP requests for our address from 0.0.0.0. Anyone who answers (or
  // announces it) already uses it on this link, e.g. a broker that is still running.
  if (opts.ip != 0) {
    auto send_probe = [&] {
      void* m = nullptr;
      std::byte* d = p->tx_alloc(sizeof(rte_ether_hdr) + sizeof(rte_arp_hdr), &m);
      if (!d) return;
      auto* eth = reinterpret_cast<rte_ether_hdr*>(d);
      std::memset(eth->dst_addr.addr_bytes, 0xff, 6);
      std::memcpy(eth->src_addr.addr_bytes, p->mac_, 6);
      eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP);
      auto* arp = reinterpret_cast<rte_arp_hdr*>(eth + 1);
      arp->arp_hardware = rte_cpu_to_be_16(RTE_ARP_HRD_ETHER);
      arp->arp_protocol = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
      arp->arp_hlen = 6;
      arp->arp_plen = 4;
      arp->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REQUEST);
      std::memcpy(arp->arp_data.arp_sha.addr_bytes, p->mac_, 6);
      arp->arp_data.arp_sip = 0;
      std::memset(arp->arp_data.arp_tha.addr_bytes, 0, 6);
      arp->arp_data.arp_tip = opts.ip;
      p->tx(m);
      p->tx_flush();
    };
    std::string owner;
    const std::int64_t end = mono_ns() + 300'000'000;
    std::int64_t next_probe = 0;
    int probes = 0;
    while (mono_ns() < end && owner.empty()) {
      if (probes < 2 && mono_ns() >= next_probe) {
        send_probe();
        ++probes;
        next_probe = mono_ns() + 100'000'000;
      }
      Frame f[32];
      const std::uint16_t n = p->rx(f, 32);
      for (std::uint16_t i = 0; i < n; ++i) {
        if (f[i].len >= sizeof(rte_ether_hdr) + sizeof(rte_arp_hdr)) {
          const auto* eth = reinterpret_cast<const rte_ether_hdr*>(f[i].data);
          const auto* arp = reinterpret_cast<const rte_arp_hdr*>(eth + 1);
          // Our own probes say 0.0.0.0; anything else claiming the address is another
          // owner, even with our MAC (a second broker on the same interface has it too).
          if (eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP) &&
              arp->arp_data.arp_sip == opts.ip)
            owner = mac_text(arp->arp_data.arp_sha.addr_bytes);
        }
        Port::free(f[i].mbuf);
      }
      if (n == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (!owner.empty())
      return fail("address in use: " + ip_text(opts.ip) + " (samsa.dpdk.ip) already answers on " +
                  (p->iface_.empty() ? p->device_ : p->iface_) + " from " + owner +
                  " (another broker, or a host with that address)");
  }
  LOG_INFO(
      "dpdk: %s (%s%s%s) up: mac %s, mtu %u, 1 rx/1 tx queue, %u mbufs, %zu wait fds, %s "
      "transmit",
      p->device_.c_str(), p->driver_.c_str(), p->iface_.empty() ? "" : " on ", p->iface_.c_str(),
      mac_text(p->mac_).c_str(), p->mtu_, opts.mbufs, p->wait_fds_.size(),
      p->zero_copy_tx_ ? "zero-copy" : "copying");
  return p;
}

Port::~Port() {
  for (void* m : txq_)
    rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
  if (started_) {
    rte_eth_dev_stop(id_);
    rte_eth_dev_close(id_);
  }
  // The pool stays: DPDK may still hold mbufs of a closed device, and the EAL cannot restart
  // within the process anyway.
}

std::uint16_t Port::rx(Frame* out, std::uint16_t n) {
  rte_mbuf* m[64];
  if (n > 64) n = 64;
  const std::uint16_t got = rte_eth_rx_burst(id_, 0, m, n);
  std::uint16_t k = 0;
  for (std::uint16_t i = 0; i < got; ++i) {
    if (m[i]->nb_segs != 1) {  // the data room holds an MTU-sized frame; never trust it
      rte_pktmbuf_free(m[i]);
      continue;
    }
    out[k].mbuf = m[i];
    out[k].data = rte_pktmbuf_mtod(m[i], std::byte*);
    out[k].len = m[i]->data_len;
    ++k;
  }
  return k;
}

std::byte* Port::tx_alloc(std::uint16_t len, void** mbuf) {
  rte_mbuf* m = rte_pktmbuf_alloc(static_cast<rte_mempool*>(pool_));
  if (!m) {
    ++tx_nombuf_;
    return nullptr;
  }
  char* d = rte_pktmbuf_append(m, len);
  if (!d) {
    rte_pktmbuf_free(m);
    ++tx_nombuf_;
    return nullptr;
  }
  *mbuf = m;
  return reinterpret_cast<std::byte*>(d);
}

void Port::tx(void* mbuf) {
  txq_.push_back(mbuf);
  if (txq_.size() >= 64) tx_flush();
}

bool Port::tx_flush() {
  std::size_t done = 0;
  while (done < txq_.size()) {
    const auto want = static_cast<std::uint16_t>(std::min<std::size_t>(txq_.size() - done, 64));
    const std::uint16_t n =
        rte_eth_tx_burst(id_, 0, reinterpret_cast<rte_mbuf**>(txq_.data() + done), want);
    done += n;
    if (n < want) break;
  }
  txq_.erase(txq_.begin(), txq_.begin() + static_cast<std::ptrdiff_t>(done));
  // A ring that stays full for long: drop the oldest rather than grow (TCP resends them).
  if (txq_.size() > 4096) {
    const std::size_t drop = txq_.size() - 4096;
    for (std::size_t i = 0; i < drop; ++i)
      rte_pktmbuf_free(static_cast<rte_mbuf*>(txq_[i]));
    txq_.erase(txq_.begin(), txq_.begin() + static_cast<std::ptrdiff_t>(drop));
    tx_dropped_ += drop;
  }
  return !txq_.empty();
}

static_assert(sizeof(ExtRef) >= sizeof(rte_mbuf_ext_shared_info));
static_assert(alignof(ExtRef) >= alignof(rte_mbuf_ext_shared_info));

namespace {
rte_mbuf_ext_shared_info* shinfo_of(ExtRef* r) {
  return std::launder(reinterpret_cast<rte_mbuf_ext_shared_info*>(r->raw));
}
}  // namespace

void Port::ext_init(ExtRef* ref, ExtFreed freed, void* opaque) {
  auto* sh = new (ref->raw) rte_mbuf_ext_shared_info{};
  sh->free_cb = freed;
  sh->fcb_opaque = opaque;
  rte_mbuf_ext_refcnt_set(sh, 1);
}

void Port::ext_put(ExtRef* ref) {
  rte_mbuf_ext_shared_info* sh = shinfo_of(ref);
  // The same step DPDK takes when it frees an attached mbuf (__rte_pktmbuf_free_extbuf).
  if (rte_mbuf_ext_refcnt_update(sh, -1) == 0) sh->free_cb(nullptr, sh->fcb_opaque);
}

std::uint16_t Port::ext_count(const ExtRef* ref) {
  return rte_mbuf_ext_refcnt_read(shinfo_of(const_cast<ExtRef*>(ref)));
}

bool Port::tx_copy(void** frame, const std::byte* p, std::uint16_t len) {
  auto* head = static_cast<rte_mbuf*>(*frame);
  rte_mbuf* tail = head ? rte_pktmbuf_lastseg(head) : nullptr;
  if (tail && RTE_MBUF_DIRECT(tail) && rte_pktmbuf_tailroom(tail) >= len) {
    std::memcpy(rte_pktmbuf_mtod_offset(tail, char*, tail->data_len), p, len);
    tail->data_len = static_cast<std::uint16_t>(tail->data_len + len);
    head->pkt_len += len;
    return true;
  }
  rte_mbuf* m = rte_pktmbuf_alloc(static_cast<rte_mempool*>(pool_));
  if (!m) {
    ++tx_nombuf_;
    return false;
  }
  char* d = rte_pktmbuf_append(m, len);
  if (!d) {
    rte_pktmbuf_free(m);
    ++tx_nombuf_;
    return false;
  }
  std::memcpy(d, p, len);
  if (head && rte_pktmbuf_chain(head, m) != 0) {
    rte_pktmbuf_free(m);
    return false;
  }
  if (!head) *frame = m;
  return true;
}

bool Port::tx_attach(void** frame, const std::byte* p, std::uint16_t len, ExtRef* ref) {
  rte_mbuf_ext_shared_info* sh = shinfo_of(ref);
  if (!ext_pool_ || rte_mbuf_ext_refcnt_read(sh) >= 0xff00) return false;
  rte_mbuf* m = rte_pktmbuf_alloc(static_cast<rte_mempool*>(ext_pool_));
  if (!m) return false;  // the caller copies instead: not a drop
  // Software devices read it with the CPU; the address is all they use.
  rte_mbuf_ext_refcnt_update(sh, 1);
  void* addr = const_cast<std::byte*>(p);
  rte_pktmbuf_attach_extbuf(
      m, addr, static_cast<rte_iova_t>(reinterpret_cast<std::uintptr_t>(addr)), len, sh);
  m->data_len = len;
  m->pkt_len = len;
  auto* head = static_cast<rte_mbuf*>(*frame);
  if (head && rte_pktmbuf_chain(head, m) != 0) {
    rte_pktmbuf_free(m);  // drops the reference again
    return false;
  }
  if (!head) *frame = m;
  tx_attached_bytes_ += len;
  return true;
}

void Port::tx_discard(void* frame) {
  if (frame) rte_pktmbuf_free(static_cast<rte_mbuf*>(frame));
}

void Port::free(void* mbuf) {
  rte_pktmbuf_free(static_cast<rte_mbuf*>(mbuf));
}

void* Port::priv(void* mbuf) {
  return rte_mbuf_to_priv(static_cast<rte_mbuf*>(mbuf));
}

void* Port::mbuf_of_priv(void* priv) {
  return static_cast<char*>(priv) - sizeof(rte_mbuf);
}

PortStats Port::stats() const {
  PortStats s;
  rte_eth_stats st{};
  if (rte_eth_stats_get(id_, &st) == 0) {
    s.rx_packets = st.ipackets;
    s.rx_bytes = st.ibytes;
    s.tx_packets = st.opackets;
    s.tx_bytes = st.obytes;
    s.rx_missed = st.imissed;
    s.rx_errors = st.ierrors;
    s.rx_nombuf = st.rx_nombuf;
    s.tx_errors = st.oerrors;
  }
  s.tx_dropped = tx_dropped_;
  s.tx_nombuf = tx_nombuf_;
  s.tx_attached_bytes = tx_attached_bytes_;
  return s;
}

std::uint32_t Port::pool_size() const {
  return static_cast<rte_mempool*>(pool_)->size;
}

std::uint32_t Port::pool_available() const {
  return rte_mempool_avail_count(static_cast<rte_mempool*>(pool_));
}

}  // namespace samsa::net::dpdk
