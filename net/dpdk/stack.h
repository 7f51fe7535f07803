// The stack's internals, shared by its translation units: stack.cc (the device, the poll loop,
// counters), stack_listen.cc (listeners, accepting, SYN-flood shedding), stack_conn.cc (the
// stack half of each connection) and lwip_hooks.cc (the C functions lwipopts.h names).
// Includes lwIP's headers and never DPDK's (port.h hides them).
#pragma once

#include <atomic>
#include <cstdint>
#include <expected>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "net/dpdk/conn_journal.h"
#include "net/dpdk/dpdk_transport.h"
#include "net/dpdk/pipe.h"
#include "net/dpdk/port.h"
#include "net/ring_queue.h"

extern "C" {
#include "lwip/etharp.h"
#include "lwip/init.h"
#include "lwip/ip4_addr.h"
#include "lwip/netif.h"
#include "lwip/pbuf.h"
#include "lwip/priv/tcp_priv.h"
#include "lwip/prot/tcp.h"
#include "lwip/stats.h"
#include "lwip/tcp.h"
#include "lwip/timeouts.h"
#include "netif/ethernet.h"
}

namespace samsa::net::dpdk {

// lwip_hooks.cc: retransmitted segments (lwIP's TCP output hook counts them) and the key of
// the initial sequence numbers (set from getrandom at init).
extern std::atomic<std::uint64_t> g_retransmits;
extern std::uint64_t g_isn_key[2];

class StackImpl;

// A received frame's IPv4 and TCP headers, read before lwIP sees it (the poll loop's own checks:
// stack_probe.cc, stack_offload.cc). Addresses in network order, ports in host order.
struct TcpFrame {
  const std::uint8_t* ip = nullptr;
  const std::uint8_t* tcp = nullptr;
  std::size_t tcp_len = 0;  // header and payload, from the IP total length
  std::uint32_t src = 0, dst = 0;
  std::uint16_t sport = 0, dport = 0;
  std::uint8_t flags = 0;
};
// nullopt: not an Ethernet frame carrying a whole IPv4 TCP segment.
std::optional<TcpFrame> tcp_frame(const Frame& f);

// One answer piece the stack keeps for lwIP, whose segments point into it (tcp_write without
// copy). On devices that take frames in pieces (Port::zero_copy_tx) the frames on their way
// to the device point into it too: `ref` counts the connection's hold plus one per such
// frame segment, so a retransmission still queued in the port when the ACK of the first
// transmission releases the piece keeps reading valid memory. Recycled through TxPool (no
// allocation per answer in steady state).
struct TxPool;
struct TxBuf {
  Buffer bytes;
  ExtRef ref;
  TxPool* pool = nullptr;
  TxBuf* next_free = nullptr;
};

// Free TxBufs. Outlives the port (StackImpl declares it first): the port's queue may still
// hold frames that point into TxBufs when the stack goes.
struct TxPool {
  ~TxPool();
  TxBuf* get(Buffer b);       // the connection's hold (count 1)
  static void put(TxBuf* t);  // drops the connection's hold
  static void freed(void* addr, void* opaque);
  TxBuf* free = nullptr;
  std::size_t free_count = 0;
  std::size_t live = 0;  // taken and not yet back (for tests and counters)
};

class StackConn {
 public:
  StackConn(StackImpl& s, LinkPtr l, tcp_pcb* p) : stack(s), link(std::move(l)), pcb(p) {}

  StackImpl& stack;
  LinkPtr link;
  Conn* conn = nullptr;
  tcp_pcb* pcb = nullptr;  // null once lwIP let go of it (closed, reset, aborted)

  // Received bytes not yet handed over (the chunk being filled) and the pending event.
  Buffer chunk;
  std::size_t chunk_used = 0;
  StackEvent ev;
  bool got_data = false;  // this poll: acknowledge at once rather than after the timer
  bool closed_sent = false;
  bool released = false;

  // Answers: every byte handed over stays here until the peer acknowledged it (lwIP's
  // segments point into these buffers, TCP_WRITE without copy). [0, wpiece/woff) is written
  // into lwIP; `front_start` is the stream offset of txq.front().
  RingQueue<TxBuf*> txq;
  std::size_t tx_hint = 0;  // txq index where link_output last found a segment's bytes
  std::size_t wpiece = 0;
  std::size_t woff = 0;
  std::uint64_t queued = 0, written = 0, acked = 0, front_start = 0;
  bool shutdown_wanted = false, shutdown_done = false, close_wanted = false;

  bool dirty = false;
  StackConn* dirty_next = nullptr;
  int journal_slot = -1;  // ConnJournal's, while the connection is open
  StackConn* prev = nullptr;
  StackConn* next = nullptr;
};

// A port with its listening pcb and the transports that take its connections in turn.
struct Group {
  StackImpl* stack = nullptr;
  tcp_pcb* lpcb = nullptr;
  std::uint16_t port = 0;
  std::vector<LinkPtr> links;
  std::size_t next = 0;
};

class StackImpl final : public DpdkStack, public StackPort, public io::Poller {
 public:
  ~StackImpl() override;

  std::expected<void, std::string> init(const DpdkOptions& o);

  // DpdkStack
  void attach(io::Reactor& r) override;
  void detach() override;
  DpdkStats stats() const override;
  DpdkInfo info() const override;
  std::unique_ptr<ClientConnection> connect(io::Reactor& r, ClientHandler& h,
                                            ClientOptions o) override;

  // StackPort
  io::Reactor* reactor() override { return reactor_.load(std::memory_order_acquire); }
  void update(StackConn* sc, ConnUpdate u) override;
  bool listen(const LinkPtr& link, const ListenerConfig& cfg, std::uint16_t* port,
              std::string* error) override;
  void stop_accepting(const LinkPtr& link) override;
  void detach(const LinkPtr& link) override;
  bool connect_out(const LinkPtr& link, std::uint32_t ip, std::uint16_t port) override;

  // io::Poller
  bool poll() override;
  std::int64_t idle_wait_ns() override;

  // lwIP callbacks
  static err_t on_accept(void* arg, tcp_pcb* pcb, err_t err);
  static err_t on_connected(void* arg, tcp_pcb* pcb, err_t err);
  static err_t on_recv(void* arg, tcp_pcb* pcb, pbuf* p, err_t err);
  static err_t on_sent(void* arg, tcp_pcb* pcb, u16_t len);
  static void on_err(void* arg, err_t err);
  static err_t on_poll(void* arg, tcp_pcb* pcb);
  static err_t netif_init(netif* n);
  static err_t link_output(netif* n, pbuf* p);
  err_t output_pieces(StackConn* sc, pbuf* p);
  TxBuf* find_txbuf(StackConn* sc, const std::byte* p, std::size_t* avail);
  static void free_rx(pbuf* p);

 private:
  struct WaitOp : io::Completion {
    StackImpl* self = nullptr;
    int fd = -1;
    bool armed = false;
  };
  static void on_wait(io::Completion* c, int res, std::uint32_t flags);

  bool do_listen(const LinkPtr& link, const ListenerConfig& cfg, std::uint16_t* port,
                 std::string* error);
  void do_stop_accepting(Link* link);
  void do_detach(const LinkPtr& link);
  void do_connect(const LinkPtr& link, std::uint32_t ip, std::uint16_t port);
  void track(StackConn* sc);
  void close_group(Group& g);
  void mark(StackConn* sc);
  void flush_events();
  void deliver_event(StackConn* sc);
  void try_write(StackConn* sc);
  void release_acked(StackConn* sc);
  void maybe_shutdown(StackConn* sc);
  void do_close(StackConn* sc);
  void drop_pcb(StackConn* sc, StackEvent::Closed why);
  // A connection's pcb: our callbacks, no Nagle, keepalive (as the uring backend's sockets).
  void set_callbacks(tcp_pcb* pcb, StackConn* sc);
  void clear_callbacks(tcp_pcb* pcb);
  void free_conn(StackConn* sc);
  void housekeeping(std::int64_t now);
  void shed_half_open();
  void append_rx(StackConn* sc, pbuf* p);
  // The connections a killed predecessor held (ConnJournal): journal_ opened at the first
  // attach, then probes in rounds (stack_probe.cc).
  void open_journal(std::int64_t now);
  void remember(StackConn* sc, bool outbound);
  void probe_previous(std::int64_t now);
  void now_listening(std::uint16_t port);
  void send_probe(const ConnTuple& t);
  // A segment (not a SYN) to a port the killed predecessor listened on and this process does
  // not yet: dropped rather than reset, so that a remembered connection's client is not sent
  // into refused connects (and their growing backoff) before the listener is back; the probe
  // at listen resets it then.
  bool held_for_listener(const Frame& f) const;
  // stack_offload.cc: a SYN whose checksum the peer left to an offload: says so, once.
  void check_offload(const Frame& f);
  void clear_txq(StackConn* sc);

  DpdkOptions opts_;
  TxPool tx_pool_;  // before port_: frames in the port's queue may point into its buffers
  std::unique_ptr<Port> port_;
  netif netif_{};
  bool netif_up_ = false;
  std::uint32_t ip_ = 0, mask_ = 0, gw_ = 0;
  std::atomic<io::Reactor*> reactor_{nullptr};
  std::map<std::uint16_t, Group> groups_;
  StackConn* conns_ = nullptr;
  StackConn* dirty_ = nullptr;
  std::vector<WaitOp> waits_;
  std::int64_t idle_poll_ns_ = 50'000;
  std::int64_t last_work_ns_ = 0;
  std::int64_t attached_ns_ = 0;
  std::int64_t next_stats_ns_ = 0;
  std::int64_t next_timer_ns_ = 0;
  ConnJournal journal_;
  bool journal_tried_ = false;
  struct Probe {
    ConnTuple t;
    int slot = -1;  // its journal slot, kept until its rounds are done
    int round = 0;  // probes sent
    std::int64_t next_ns = 0;
  };
  std::vector<Probe> probes_;  // the predecessor's connections, while rounds remain
  std::int64_t probes_until_ns_ = 0;
  bool offload_seen_ = false;   // said once
  bool offload_watch_ = false;  // armed by a checksum error, until the next SYN for us
  std::unordered_set<std::uint16_t> waiting_;  // the predecessor's ports not listening yet
  std::int64_t next_probe_ns_ = INT64_MAX;

  // Counters (the poll thread writes, any thread reads).
  std::atomic<std::uint64_t> busy_ns_{0}, sleeps_{0}, accepted_{0}, resets_{0}, open_{0};
  std::atomic<std::uint64_t> half_open_{0}, ip_dropped_{0}, syn_shed_{0}, connects_{0};
  std::atomic<std::uint64_t> rx_packets_{0}, rx_bytes_{0}, tx_packets_{0}, tx_bytes_{0};
  std::atomic<std::uint64_t> rx_dropped_{0}, tx_dropped_{0}, tx_zero_copy_{0};
  std::atomic<std::uint64_t> probed_{0};
  std::atomic<std::uint64_t> bad_checksum_{
      0};  // lwIP's IP and TCP checksum errors  // the predecessor's connections probed
  std::atomic<std::uint32_t> mbufs_free_{0};
  std::uint64_t busy_before_attach_ns_ = 0;
  mutable std::mutex info_mu_;
  DpdkInfo info_;
};

}  // namespace samsa::net::dpdk
