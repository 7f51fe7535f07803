// net::dpdk::Port — DPDK's environment (EAL) and the one Ethernet port the backend drives:
// argument handling and start-up checks, the packet buffer pool, burst receive and transmit,
// and the file descriptors a sleeping poll loop can wait on. This header is free of DPDK's
// own headers (they clash with lwIP's, FACTS.md), so the TCP/IP side includes it freely.
//
// Threads: open() runs once per process (DPDK's EAL cannot be initialised twice), on any
// thread; it restores that thread's CPU affinity afterwards. rx/tx belong to the one thread
// that polls (the stack's reactor). free() and stats() are safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <memory>
#include <string>
#include <vector>

struct rte_eth_dev_info;

namespace samsa::net::dpdk {

// A received frame: a DPDK mbuf seen as bytes. The backend gives it back with Port::free.
struct Frame {
  void* mbuf = nullptr;
  std::byte* data = nullptr;
  std::uint16_t len = 0;
};

// Memory outgoing frames may point into instead of having it copied (DPDK's external
// buffers): the storage of an rte_mbuf_ext_shared_info (port.cc checks the size). Its count is the
// owner's own hold plus one per mbuf attached; `freed(nullptr, opaque)` runs once it drops to
// zero, on the thread that drops the last reference (here always the polling thread: the
// PMDs this is used with free transmitted mbufs inside tx_burst).
struct ExtRef {
  alignas(8) unsigned char raw[24];
};
using ExtFreed = void (*)(void* addr, void* opaque);

struct PortOptions {
  // samsa.dpdk.eal.args, split on white space. Missing essentials are added (see port.cc).
  std::string eal_args;
  std::uint32_t mtu = 1500;  // samsa.dpdk.mtu; up to 9000 (one mbuf per frame, sized to it)
  std::uint32_t mbufs = 32767;
  // Bytes each mbuf keeps for the stack right after the mbuf header (the lwIP pbuf that
  // wraps a received frame lives there: no allocation per packet).
  std::uint16_t priv_size = 0;
  std::uint32_t ip = 0;      // network order; probed with ARP before the port is used
  bool tx_zero_copy = true;  // where the device allows (zero_copy_tx())
};

// Counters since start; rx/tx from DPDK's port statistics, the rest kept here.
struct PortStats {
  std::uint64_t rx_packets = 0;
  std::uint64_t rx_bytes = 0;
  std::uint64_t tx_packets = 0;
  std::uint64_t tx_bytes = 0;
  std::uint64_t rx_missed = 0;  // dropped by the device: rx ring full
  std::uint64_t rx_errors = 0;
  std::uint64_t rx_nombuf = 0;  // no mbuf to receive into
  std::uint64_t tx_errors = 0;
  std::uint64_t tx_dropped = 0;         // tx ring stayed full; frame dropped (TCP resends it)
  std::uint64_t tx_nombuf = 0;          // no mbuf for an outgoing frame
  std::uint64_t tx_attached_bytes = 0;  // sent from attached memory (tx_attach), not copied
};

class Port {
 public:
  // Initialises the EAL (once per process), opens the first Ethernet device it found,
  // starts it with one queue pair and probes opts.ip with ARP. Errors say which of the
  // start-up problems it was (no device, no memory, hugepages missing, device or address in
  // use) with DPDK's own last log lines.
  static std::expected<std::unique_ptr<Port>, std::string> open(const PortOptions& opts);
  ~Port();
  Port(const Port&) = delete;
  Port& operator=(const Port&) = delete;

  std::uint16_t rx(Frame* out, std::uint16_t n);
  // A buffer for an outgoing frame of len bytes (nullptr: pool empty); queue it with tx().
  std::byte* tx_alloc(std::uint16_t len, void** mbuf);
  void tx(void* mbuf);

  // Frames built from pieces, for devices that take multi-segment frames from memory the CPU
  // reads (zero_copy_tx()). tx_copy appends bytes copied into pool mbufs; tx_attach appends
  // len bytes at p, which `ref` keeps alive, without a copy (one reference per attached
  // segment, dropped when the device is done with it). *frame starts null; false (pool
  // empty, or ref's count near its 16-bit limit) leaves *frame as it was: append by copy
  // instead, or tx_discard it. A finished frame goes to tx().
  bool zero_copy_tx() const { return zero_copy_tx_; }
  bool tx_copy(void** frame, const std::byte* p, std::uint16_t len);
  bool tx_attach(void** frame, const std::byte* p, std::uint16_t len, ExtRef* ref);
  static void tx_discard(void* frame);
  // The owner's hold on `ref`: ext_init takes it (count 1), ext_put drops one reference and
  // runs `freed` when it was the last.
  static void ext_init(ExtRef* ref, ExtFreed freed, void* opaque);
  static void ext_put(ExtRef* ref);
  // References on `ref` (the owner's and the frames'); for tests.
  static std::uint16_t ext_count(const ExtRef* ref);
  // Hands queued frames to the device; true while some are still waiting for ring room.
  bool tx_flush();

  static void free(void* mbuf);
  static void* priv(void* mbuf);
  static void* mbuf_of_priv(void* priv);

  const std::uint8_t* mac() const { return mac_; }
  std::uint32_t mtu() const { return mtu_; }
  const std::string& device() const { return device_; }    // e.g. "net_af_xdp0"
  const std::string& driver() const { return driver_; }    // e.g. "net_af_xdp"
  const std::string& interface() const { return iface_; }  // kernel interface, if any
  std::uint16_t rx_queues() const { return 1; }
  std::uint16_t tx_queues() const { return 1; }
  // Sockets or character devices of the PMD that become readable when frames arrive
  // (af_packet and af_xdp sockets, tap's /dev/net/tun); empty when the driver has none.
  const std::vector<int>& wait_fds() const { return wait_fds_; }
  PortStats stats() const;
  std::uint32_t pool_size() const;
  std::uint32_t pool_available() const;

 private:
  Port() = default;
  // open's steps, in order.
  std::expected<void, std::string> find_device(const std::vector<std::string>& argv_s,
                                               rte_eth_dev_info& info);
  std::expected<void, std::string> make_pools(const PortOptions& opts,
                                              const rte_eth_dev_info& info);
  std::expected<void, std::string> start_queues();
  void settle_mtu(const PortOptions& opts);
  std::string address_owner(std::uint32_t ip);
  std::uint16_t id_ = 0;
  bool started_ = false;
  void* pool_ = nullptr;
  void* ext_pool_ = nullptr;  // data-less mbufs for tx_attach
  bool zero_copy_tx_ = false;
  std::uint8_t mac_[6]{};
  std::uint32_t mtu_ = 1500;
  std::string device_, driver_, iface_;
  int start_queue_ = 0;  // net_af_xdp's start_queue= (the queue its socket binds)
  std::vector<int> wait_fds_;
  std::vector<void*> txq_;  // frames waiting for ring room
  std::uint64_t tx_dropped_ = 0;
  std::uint64_t tx_nombuf_ = 0;
  std::uint64_t tx_attached_bytes_ = 0;
};

// The EAL argument vector samsad passes for samsa.dpdk.eal.args (exposed for tests): the
// user's words, plus --lcores=0@(every CPU we may run on) when no core list is given, plus
// --in-memory (hugepages) or --no-shconf (--no-huge) unless a process type or file prefix
// is given, plus --no-telemetry.
std::vector<std::string> eal_argv(const std::string& args, const std::string& cpus);

}  // namespace samsa::net::dpdk
