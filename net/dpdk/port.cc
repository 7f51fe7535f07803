// The port: DPDK's headers stay out of lwIP's translation units (both define struct
// ip6_hdr). The device, the mbuf pool, the queues, the ARP probe, the wait descriptors, and
// transmit and receive; the EAL's start-up is eal.cc.
#include "net/dpdk/port.h"
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

// The first device the EAL found: its port id, names and capabilities.
std::expected<void, std::string> Port::find_device(const std::vector<std::string>& argv_s,
                                                   rte_eth_dev_info& info) {
  auto fail = [](std::string m) { return std::unexpected(std::move(m)); };
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
  id_ = id;
  char name[RTE_ETH_NAME_MAX_LEN] = {};
  rte_eth_dev_get_name_by_port(id, name);
  device_ = name;
  if (int rc = rte_eth_dev_info_get(id, &info); rc != 0)
    return fail("device " + device_ + ": " + rte_strerror(-rc) + log_tail());
  driver_ = info.driver_name ? info.driver_name : "?";
  iface_ = device_iface(argv_s, device_);
  if (const std::string q = device_arg(argv_s, device_, "start_queue"); !q.empty())
    start_queue_ = std::atoi(q.c_str());

  return {};
}

// The packet buffer pool (one mbuf per frame, jumbo frames included) and, where the device
// takes segment chains, the pool of attached mbufs for zero-copy transmit.
std::expected<void, std::string> Port::make_pools(const PortOptions& opts,
                                                  const rte_eth_dev_info& info) {
  auto fail = [](std::string m) { return std::unexpected(std::move(m)); };
  const std::uint16_t priv = static_cast<std::uint16_t>(RTE_ALIGN(opts.priv_size, 8));
  static std::atomic<int> pools{0};
  const std::string pool_name = "samsa_mbufs" + std::to_string(pools.fetch_add(1));
  // Software devices never DMA, and with IOVA as VA virtual contiguity is all a device needs:
  // then the buffers may straddle pages and sit back to back. af_xdp needs exactly that: it
  // registers the pool as its UMEM assuming one object every obj_size bytes, while a pool
  // that keeps objects inside pages pads them (to 4 KiB each without hugepages) and the
  // later half of the buffers falls outside the UMEM (invalid descriptors, a stalled queue).
  const bool software =
      driver_ == "net_af_xdp" || driver_ == "net_af_packet" || driver_ == "net_tap";
  const unsigned flags =
      software || rte_eal_iova_mode() == RTE_IOVA_VA ? RTE_MEMPOOL_F_NO_IOVA_CONTIG : 0;
  // One mbuf per frame, jumbo frames included (the receive path relies on it).
  const std::uint32_t room_needed = RTE_PKTMBUF_HEADROOM + opts.mtu + RTE_ETHER_HDR_LEN;
  if (room_needed > RTE_MBUF_DEFAULT_BUF_SIZE && driver_ == "net_af_xdp")
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
  if (driver_ == "net_af_xdp" && mp->nb_mem_chunks != 1) {
    rte_mempool_free(mp);
    return fail("device " + device_ +
                ": af_xdp needs its packet buffers in one piece of memory, and DPDK split them "
                "in " +
                std::to_string(mp->nb_mem_chunks) + "; give the EAL more memory (-m)");
  }
  pool_ = mp;

  // Transmit without copying lwIP's segments into mbufs: the headers are copied into one,
  // the payload (answer memory the stack keeps until acknowledged) is attached as external
  // buffers. Only where the PMD walks a segment chain with the CPU: af_packet and tap (their
  // tx_burst copy or writev each segment, and advertise MULTI_SEGS). af_xdp does not (its
  // tx_burst copies pkt_len bytes from the first segment), and a device that DMAs would need
  // the heap memory registered with it (rte_extmem_register, rte_dev_dma_map): both copy.
  zero_copy_tx_ = opts.tx_zero_copy && (driver_ == "net_af_packet" || driver_ == "net_tap") &&
                  (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) != 0;
  if (zero_copy_tx_) {
    const std::string ext_name = "samsa_ext" + std::to_string(pools.fetch_add(1));
    // Attached mbufs live from link_output until tx_burst (af_packet and tap free them
    // there) or while frames wait for ring room (Port's queue, at most 4096 + a burst).
    ext_pool_ = rte_pktmbuf_pool_create(ext_name.c_str(), 8191, 256, 0, 0,
                                        static_cast<int>(rte_socket_id()));
    if (!ext_pool_) {
      LOG_WARN("dpdk: no memory for the zero-copy transmit mbufs (%s); frames are copied",
               rte_strerror(rte_errno));
      zero_copy_tx_ = false;
    }
  }

  return {};
}

// One queue pair set up and the device started; the descriptors its PMD waits on collected.
std::expected<void, std::string> Port::start_queues() {
  auto fail = [](std::string m) { return std::unexpected(std::move(m)); };
  auto* mp = static_cast<rte_mempool*>(pool_);
  const std::uint16_t id = id_;
  rte_eth_conf conf{};
  if (zero_copy_tx_) conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
  if (int rc = rte_eth_dev_configure(id, 1, 1, &conf); rc != 0)
    return fail("device " + device_ + ": configuring one queue pair: " + rte_strerror(-rc) +
                log_tail());
  std::uint16_t nrx = 1024, ntx = 1024;
  rte_eth_dev_adjust_nb_rx_tx_desc(id, &nrx, &ntx);
  const int socket = rte_eth_dev_socket_id(id);
  const unsigned sock = socket < 0 ? 0u : static_cast<unsigned>(socket);
  if (driver_ == "net_af_xdp" && !iface_.empty())
    if (const std::string done = detach_stale_xsk_program(iface_); !done.empty())
      LOG_WARN("dpdk: %s", done.c_str());
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
    else if (const int have = rx_queue_count(iface_);
             tail.find("xsk socket") != std::string::npos && have > 0 && start_queue_ >= have)
      why = "no such queue: start_queue=" + std::to_string(start_queue_) + " but " + iface_ +
            " has " + std::to_string(have) + " receive queue" + (have == 1 ? "" : "s") + " (0.." +
            std::to_string(have - 1) + ") (" + why + ")";
    else if (tail.find("xsk socket") != std::string::npos)
      why = "in use: the kernel refused an AF_XDP socket on queue " + std::to_string(start_queue_) +
            " of " + iface_ + " (another broker or AF_XDP program holds it?) (" + why + ")";
    return fail("device " + device_ + ": receive queue: " + why + tail);
  }
  if (int rc = rte_eth_tx_queue_setup(id, 0, ntx, sock, nullptr); rc != 0)
    return fail("device " + device_ + ": transmit queue: " + rte_strerror(-rc) + log_tail());
  const std::set<int> fds_before = open_fds();
  if (int rc = rte_eth_dev_start(id); rc != 0) {
    std::string why = rte_strerror(-rc);
    const std::string tail = log_tail();
    if (rc == -EBUSY || tail.find("busy") != std::string::npos ||
        tail.find("Busy") != std::string::npos)
      why = "in use by another process (" + why + ")";
    return fail("device " + device_ + (iface_.empty() ? "" : " on " + iface_) +
                " did not start: " + why + tail);
  }
  started_ = true;
  std::vector<int> candidates = g_eal_new_fds;
  for (int fd : open_fds())
    if (!fds_before.contains(fd)) candidates.push_back(fd);
  for (int fd : candidates)
    if (is_wait_fd(fd)) wait_fds_.push_back(fd);

  return {};
}

// The MAC address, and the MTU: samsa.dpdk.mtu, set on the device when it is larger, lowered
// to the device's when that cannot be done.
void Port::settle_mtu(const PortOptions& opts) {
  const std::uint16_t id = id_;
  rte_ether_addr mac{};
  rte_eth_macaddr_get(id, &mac);
  std::memcpy(mac_, mac.addr_bytes, 6);
  std::uint16_t dev_mtu = 1500;
  if (rte_eth_dev_get_mtu(id, &dev_mtu) != 0) dev_mtu = 1500;
  // A jumbo MTU asked for: the PMD sets it on the device (af_packet: on the interface, if its
  // ring's framesz= holds such frames).
  if (opts.mtu > dev_mtu) {
    const int rc = rte_eth_dev_set_mtu(id, static_cast<std::uint16_t>(opts.mtu));
    if (rc == 0) {
      dev_mtu = static_cast<std::uint16_t>(opts.mtu);
    } else if (driver_ == "net_af_packet" && !iface_.empty()) {
      // ethdev caps af_packet at a standard frame; the kernel interface's MTU is the real
      // limit (and the ring's framesz=, which the PMD already checked against the mbufs).
      std::ifstream f("/sys/class/net/" + iface_ + "/mtu");
      std::uint32_t kmtu = 0;
      if (f >> kmtu && kmtu >= opts.mtu) dev_mtu = static_cast<std::uint16_t>(opts.mtu);
    }
    if (dev_mtu < opts.mtu)
      LOG_WARN("dpdk: %s: setting MTU %u: %s", device_.c_str(), opts.mtu, rte_strerror(-rc));
  }
  mtu_ = std::min<std::uint32_t>(opts.mtu, dev_mtu);
  if (mtu_ < opts.mtu)
    LOG_WARN("dpdk: %s has MTU %u; samsa.dpdk.mtu %u lowered to it", device_.c_str(), dev_mtu,
             opts.mtu);
  rte_eth_link link{};
  if (rte_eth_link_get_nowait(id, &link) == 0 && link.link_status == RTE_ETH_LINK_DOWN)
    LOG_WARN("dpdk: %s reports its link down", device_.c_str());
}

// RFC 5227 probe: two ARP requests for ip from 0.0.0.0. Anyone who answers (or announces it)
// already uses it on this link, e.g. a broker that is still running. Returns its MAC, or "".
std::string Port::address_owner(std::uint32_t ip) {
  auto send_probe = [&] {
    void* m = nullptr;
    std::byte* d = tx_alloc(sizeof(rte_ether_hdr) + sizeof(rte_arp_hdr), &m);
    if (!d) return;
    auto* eth = reinterpret_cast<rte_ether_hdr*>(d);
    std::memset(eth->dst_addr.addr_bytes, 0xff, 6);
    std::memcpy(eth->src_addr.addr_bytes, mac_, 6);
    eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP);
    auto* arp = reinterpret_cast<rte_arp_hdr*>(eth + 1);
    arp->arp_hardware = rte_cpu_to_be_16(RTE_ARP_HRD_ETHER);
    arp->arp_protocol = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
    arp->arp_hlen = 6;
    arp->arp_plen = 4;
    arp->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REQUEST);
    std::memcpy(arp->arp_data.arp_sha.addr_bytes, mac_, 6);
    arp->arp_data.arp_sip = 0;
    std::memset(arp->arp_data.arp_tha.addr_bytes, 0, 6);
    arp->arp_data.arp_tip = ip;
    tx(m);
    tx_flush();
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
    const std::uint16_t n = rx(f, 32);
    for (std::uint16_t i = 0; i < n; ++i) {
      if (f[i].len >= sizeof(rte_ether_hdr) + sizeof(rte_arp_hdr)) {
        const auto* eth = reinterpret_cast<const rte_ether_hdr*>(f[i].data);
        const auto* arp = reinterpret_cast<const rte_arp_hdr*>(eth + 1);
        // Our own probes say 0.0.0.0; anything else claiming the address is another
        // owner, even with our MAC (a second broker on the same interface has it too).
        if (eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP) && arp->arp_data.arp_sip == ip)
          owner = mac_text(arp->arp_data.arp_sha.addr_bytes);
      }
      Port::free(f[i].mbuf);
    }
    if (n == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return owner;
}

std::expected<std::unique_ptr<Port>, std::string> Port::open(const PortOptions& opts) {
  auto fail = [](std::string m) { return std::unexpected(std::move(m)); };
  if (opts.mtu < 576 || opts.mtu > 9000)
    return fail("samsa.dpdk.mtu " + std::to_string(opts.mtu) + " is outside 576..9000");
  const std::vector<std::string> argv_s = eal_argv(opts.eal_args, allowed_cpus());
  if (auto r = start_eal(opts, argv_s); !r) return std::unexpected(r.error());
  std::unique_ptr<Port> p(new Port());
  rte_eth_dev_info info{};
  if (auto r = p->find_device(argv_s, info); !r) return std::unexpected(r.error());
  if (auto r = p->make_pools(opts, info); !r) return std::unexpected(r.error());
  if (auto r = p->start_queues(); !r) return std::unexpected(r.error());
  p->settle_mtu(opts);
  if (opts.ip != 0) {
    if (const std::string owner = p->address_owner(opts.ip); !owner.empty())
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
