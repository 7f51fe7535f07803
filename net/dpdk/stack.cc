// The TCP/IP side of the DPDK backend: lwIP (raw API, NO_SYS) driven by the reactor the stack
// is attached to. This translation unit includes lwIP's headers and never DPDK's (port.h
// hides them). It owns the listeners, the stack half of every connection (StackConn) and the
// poll loop: receive bursts into lwIP, lwIP's timers, transmit, then one event per touched
// connection to its reactor.
#include <poll.h>
#include <sys/random.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>

#include "base/clock.h"
#include "base/log.h"
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
namespace {
std::atomic<std::uint64_t> g_retransmits{0};
std::uint64_t g_isn_key[2] = {0x9e3779b97f4a7c15ull, 0xbf58476d1ce4e5b9ull};

std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}
}  // namespace
}  // namespace samsa::net::dpdk

extern "C" {

u32_t sys_now(void) {
  return static_cast<u32_t>(samsa::mono_ms());
}

uint16_t samsa_lwip_chksum(const void* data, int len) {
  // Eight bytes at a time into a 64-bit sum of 32-bit halves; folding that to 16 bits gives
  // the same ones' complement sum of 16-bit words as lwIP's byte-pair loop.
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t sum = 0;
  while (len >= 8) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    sum += (v & 0xffffffffu) + (v >> 32);
    p += 8;
    len -= 8;
  }
  while (len >= 2) {
    std::uint16_t v;
    std::memcpy(&v, p, 2);
    sum += v;
    p += 2;
    len -= 2;
  }
  if (len > 0) sum += *p;
  sum = (sum & 0xffffffffu) + (sum >> 32);
  sum = (sum & 0xffffffffu) + (sum >> 32);
  sum = (sum & 0xffffu) + (sum >> 16);
  sum = (sum & 0xffffu) + (sum >> 16);
  sum = (sum & 0xffffu) + (sum >> 16);
  return static_cast<uint16_t>(sum);
}

uint32_t samsa_lwip_tcp_isn(const struct ip4_addr* local_ip, uint16_t local_port,
                            const struct ip4_addr* remote_ip, uint16_t remote_port) {
  using namespace samsa::net::dpdk;
  const std::uint64_t a = (std::uint64_t(local_ip->addr) << 32) | remote_ip->addr;
  const std::uint64_t b = (std::uint64_t(local_port) << 16) | remote_port;
  const std::uint64_t h = mix(mix(a ^ g_isn_key[0]) ^ b ^ g_isn_key[1]);
  return static_cast<uint32_t>(h) + static_cast<uint32_t>(samsa::mono_ns() / 4000);
}

uint32_t* samsa_lwip_tcp_out(struct pbuf* p, struct tcp_hdr* hdr, const struct tcp_pcb* pcb,
                             uint32_t* opts) {
  if (pcb && hdr && p) {
    const std::uint32_t seq = lwip_ntohl(hdr->seqno);
    const std::uint32_t payload = p->tot_len - TCPH_HDRLEN_BYTES(hdr);
    const bool syn_fin = (TCPH_FLAGS(hdr) & (TCP_SYN | TCP_FIN)) != 0;
    if ((payload > 0 || syn_fin) && TCP_SEQ_LT(seq, pcb->snd_nxt))
      samsa::net::dpdk::g_retransmits.fetch_add(1, std::memory_order_relaxed);
  }
  return opts;
}

void samsa_lwip_assert(const char* msg, int line, const char* file) {
  LOG_ERROR("lwIP assertion failed: %s (%s:%d)", msg, file, line);
  std::abort();
}

}  // extern "C"

namespace samsa::net::dpdk {
static_assert(TCP_WND == kDpdkReceiveWindow);
namespace {

// Poll loop: frames per receive burst, and bursts per poll before the rest of the turn runs.
constexpr std::uint16_t kBurst = 32;
constexpr int kBurstsPerPoll = 8;
// Received bytes are copied out of the mbufs at once (the frames go back to the pool) into
// chunks of at least this size.
constexpr std::size_t kChunk = 16384;
// Counters shown to other threads are refreshed this often.
constexpr std::int64_t kStatsEveryNs = 10'000'000;
// Drivers without a descriptor to sleep on nap at most this long when idle.
constexpr std::int64_t kMaxNapNs = 1'000'000;

class StackImpl;

}  // namespace

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
  RingQueue<Buffer> txq;
  std::size_t wpiece = 0;
  std::size_t woff = 0;
  std::uint64_t queued = 0, written = 0, acked = 0, front_start = 0;
  bool shutdown_wanted = false, shutdown_done = false, close_wanted = false;

  bool dirty = false;
  StackConn* dirty_next = nullptr;
  StackConn* prev = nullptr;
  StackConn* next = nullptr;
};

namespace {

// A port with its listening pcb and the transports that take its connections in turn.
struct Group {
  StackImpl* stack = nullptr;
  tcp_pcb* lpcb = nullptr;
  std::uint16_t port = 0;
  std::vector<LinkPtr> links;
  std::size_t next = 0;
};

std::uint32_t parse_ip(const std::string& s, bool* ok) {
  ip4_addr_t a;
  *ok = ip4addr_aton(s.c_str(), &a) != 0;
  return a.addr;
}

std::string ip_string(std::uint32_t be) {
  ip4_addr_t a;
  a.addr = be;
  char buf[IP4ADDR_STRLEN_MAX];
  return ip4addr_ntoa_r(&a, buf, sizeof buf) ? buf : "?";
}

class StackImpl final : public DpdkStack, public StackPort, public io::Poller {
 public:
  ~StackImpl() override;

  std::expected<void, std::string> init(const DpdkOptions& o);

  // DpdkStack
  void attach(io::Reactor& r) override;
  void detach() override;
  DpdkStats stats() const override;
  DpdkInfo info() const override;

  // StackPort
  io::Reactor* reactor() override { return reactor_.load(std::memory_order_acquire); }
  void update(StackConn* sc, ConnUpdate u) override;
  bool listen(const LinkPtr& link, const ListenerConfig& cfg, std::uint16_t* port,
              std::string* error) override;
  void stop_accepting(const LinkPtr& link) override;
  void detach(const LinkPtr& link) override;

  // io::Poller
  bool poll() override;
  std::int64_t idle_wait_ns() override;

  // lwIP callbacks
  static err_t on_accept(void* arg, tcp_pcb* pcb, err_t err);
  static err_t on_recv(void* arg, tcp_pcb* pcb, pbuf* p, err_t err);
  static err_t on_sent(void* arg, tcp_pcb* pcb, u16_t len);
  static void on_err(void* arg, err_t err);
  static err_t on_poll(void* arg, tcp_pcb* pcb);
  static err_t netif_init(netif* n);
  static err_t link_output(netif* n, pbuf* p);
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
  void close_group(Group& g);
  void mark(StackConn* sc);
  void flush_events();
  void deliver_event(StackConn* sc);
  void try_write(StackConn* sc);
  void release_acked(StackConn* sc);
  void maybe_shutdown(StackConn* sc);
  void do_close(StackConn* sc);
  void drop_pcb(StackConn* sc, StackEvent::Closed why);
  void clear_callbacks(tcp_pcb* pcb);
  void free_conn(StackConn* sc);
  void housekeeping(std::int64_t now);
  void shed_half_open();
  void append_rx(StackConn* sc, pbuf* p);

  DpdkOptions opts_;
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

  // Counters (the poll thread writes, any thread reads).
  std::atomic<std::uint64_t> busy_ns_{0}, sleeps_{0}, accepted_{0}, resets_{0}, open_{0};
  std::atomic<std::uint64_t> half_open_{0}, ip_dropped_{0}, syn_shed_{0};
  std::atomic<std::uint64_t> rx_packets_{0}, rx_bytes_{0}, tx_packets_{0}, tx_bytes_{0};
  std::atomic<std::uint64_t> rx_dropped_{0}, tx_dropped_{0};
  std::atomic<std::uint32_t> mbufs_free_{0};
  std::uint64_t busy_before_attach_ns_ = 0;
  mutable std::mutex info_mu_;
  DpdkInfo info_;
};

StackImpl* g_stack = nullptr;  // lwIP has one global state; so does this backend

std::expected<void, std::string> StackImpl::init(const DpdkOptions& o) {
  opts_ = o;
  idle_poll_ns_ = std::int64_t(o.idle_poll_us) * 1000;
  bool ok = false;
  ip_ = parse_ip(o.ip, &ok);
  if (!ok || o.ip.empty())
    return std::unexpected("samsa.dpdk.ip: \"" + o.ip + "\" is not an IPv4 address");
  mask_ = parse_ip(o.netmask, &ok);
  if (!ok) return std::unexpected("samsa.dpdk.netmask: \"" + o.netmask + "\" is not a netmask");
  if (!o.gateway.empty()) {
    gw_ = parse_ip(o.gateway, &ok);
    if (!ok)
      return std::unexpected("samsa.dpdk.gateway: \"" + o.gateway + "\" is not an IPv4 address");
  }
  PortOptions po;
  po.eal_args = o.eal_args;
  po.mtu = o.mtu;
  po.mbufs = o.mbufs;
  po.priv_size = sizeof(pbuf_custom);
  po.ip = ip_;
  auto port = Port::open(po);
  if (!port) return std::unexpected(port.error());
  port_ = std::move(*port);

  if (getrandom(g_isn_key, sizeof g_isn_key, 0) != sizeof g_isn_key)
    LOG_WARN("dpdk: getrandom failed; TCP sequence numbers are less unpredictable");
  lwip_init();
  ip4_addr_t ip, mask, gw;
  ip.addr = ip_;
  mask.addr = mask_;
  gw.addr = gw_;
  if (!netif_add(&netif_, &ip, &mask, &gw, this, &StackImpl::netif_init, ethernet_input))
    return std::unexpected("lwIP refused the interface");
  netif_set_default(&netif_);
  netif_set_link_up(&netif_);
  netif_set_up(&netif_);  // announces the address (gratuitous ARP)
  netif_up_ = true;

  for (int fd : port_->wait_fds()) {
    WaitOp w;
    w.fn = &StackImpl::on_wait;
    w.self = this;
    w.fd = fd;
    waits_.push_back(w);
  }
  char mac[32];
  const std::uint8_t* m = port_->mac();
  std::snprintf(mac, sizeof mac, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4],
                m[5]);
  info_.device = port_->device();
  info_.driver = port_->driver();
  info_.interface = port_->interface();
  info_.ip = ip_string(ip_);
  info_.mac = mac;
  info_.mtu = port_->mtu();
  info_.rx_queues = port_->rx_queues();
  info_.tx_queues = port_->tx_queues();
  mbufs_free_ = port_->pool_available();
  LOG_INFO("dpdk: TCP/IP (lwIP %s) on %s/%u%s%s, %s wakes an idle loop", LWIP_VERSION_STRING,
           info_.ip.c_str(), static_cast<unsigned>(__builtin_popcount(mask_)), gw_ ? " via " : "",
           gw_ ? ip_string(gw_).c_str() : "",
           waits_.empty() ? "a growing nap" : "the device's descriptor");
  return {};
}

StackImpl::~StackImpl() {
  if (!netif_up_) return;  // init failed before lwIP had anything
  // Whatever is left (the broker detaches its transports first) is reset.
  while (conns_) {
    StackConn* sc = conns_;
    if (sc->pcb) {
      clear_callbacks(sc->pcb);
      tcp_abort(sc->pcb);
      sc->pcb = nullptr;
    }
    free_conn(sc);
  }
  for (auto& [port, g] : groups_)
    if (g.lpcb) tcp_close(g.lpcb);
  groups_.clear();
  port_->tx_flush();
  netif_remove(&netif_);
  g_stack = nullptr;
}

err_t StackImpl::netif_init(netif* n) {
  auto* self = static_cast<StackImpl*>(n->state);
  n->name[0] = 'd';
  n->name[1] = 'k';
  n->output = etharp_output;
  n->linkoutput = &StackImpl::link_output;
  n->mtu = static_cast<u16_t>(self->port_->mtu());
  n->hwaddr_len = 6;
  std::memcpy(n->hwaddr, self->port_->mac(), 6);
  n->flags = NETIF_FLAG_BROADCAST | NETIF_FLAG_ETHARP | NETIF_FLAG_ETHERNET | NETIF_FLAG_LINK_UP;
  return ERR_OK;
}

err_t StackImpl::link_output(netif* n, pbuf* p) {
  auto* self = static_cast<StackImpl*>(n->state);
  void* m = nullptr;
  std::byte* d = self->port_->tx_alloc(p->tot_len, &m);
  if (!d) {
    LINK_STATS_INC(link.memerr);
    return ERR_MEM;  // TCP keeps the segment and sends it later
  }
  pbuf_copy_partial(p, d, p->tot_len, 0);
  self->port_->tx(m);
  LINK_STATS_INC(link.xmit);
  return ERR_OK;
}

void StackImpl::free_rx(pbuf* p) {
  Port::free(Port::mbuf_of_priv(p));
}

// ---- attach / poll ----

void StackImpl::attach(io::Reactor& r) {
  r.set_poller(this);
  reactor_.store(&r, std::memory_order_release);
  attached_ns_ = last_work_ns_ = mono_ns();
  next_timer_ns_ = 0;
  std::lock_guard lk(info_mu_);
  info_.polled_by = r.name();
}

void StackImpl::detach() {
  io::Reactor* r = reactor();
  if (!r) return;
  for (auto& w : waits_) {
    if (w.armed) {
      io_uring_prep_cancel(r->sqe_noreply(), &w, 0);
      // The cancelled poll still reports back; run until it has (its Completion is ours).
      r->run_until([&] { return !w.armed; }, 1'000'000'000);
    }
  }
  r->set_poller(nullptr);
  busy_before_attach_ns_ += static_cast<std::uint64_t>(mono_ns() - attached_ns_);
  reactor_.store(nullptr, std::memory_order_release);
  std::lock_guard lk(info_mu_);
  info_.polled_by.clear();
}

void StackImpl::on_wait(io::Completion* c, int, std::uint32_t) {
  static_cast<WaitOp*>(c)->armed = false;  // woke the reactor; the next turn polls
}

bool StackImpl::poll() {
  const std::int64_t t0 = mono_ns();
  bool work = false;
  Frame frames[kBurst];
  for (int round = 0; round < kBurstsPerPoll; ++round) {
    const std::uint16_t n = port_->rx(frames, kBurst);
    if (n == 0) break;
    if (!work) shed_half_open();
    work = true;
    for (std::uint16_t i = 0; i < n; ++i) {
      auto* pc = static_cast<pbuf_custom*>(Port::priv(frames[i].mbuf));
      pc->custom_free_function = &StackImpl::free_rx;
      pbuf* p =
          pbuf_alloced_custom(PBUF_RAW, frames[i].len, PBUF_REF, pc, frames[i].data, frames[i].len);
      if (netif_.input(p, &netif_) != ERR_OK) pbuf_free(p);
    }
    if (n < kBurst) break;
  }
  if (t0 >= next_timer_ns_) {
    sys_check_timeouts();
    const u32_t ms = sys_timeouts_sleeptime();
    next_timer_ns_ = ms == SYS_TIMEOUTS_SLEEPTIME_INFINITE
                         ? INT64_MAX
                         : mono_ns() + std::int64_t(ms) * 1'000'000;
  }
  if (dirty_) {
    work = true;
    flush_events();
  }
  if (port_->tx_flush()) work = true;  // frames still wait for ring room
  const std::int64_t t1 = mono_ns();
  if (work) {
    busy_ns_.fetch_add(static_cast<std::uint64_t>(t1 - t0), std::memory_order_relaxed);
    last_work_ns_ = t1;
  }
  if (t1 >= next_stats_ns_) housekeeping(t1);
  return work;
}

std::int64_t StackImpl::idle_wait_ns() {
  const std::int64_t now = mono_ns();
  const std::int64_t idle = now - last_work_ns_;
  if (idle < idle_poll_ns_) return 0;
  std::int64_t timer =
      next_timer_ns_ == INT64_MAX ? -1 : std::max<std::int64_t>(0, next_timer_ns_ - now);
  if (next_stats_ns_ > now && (timer < 0 || next_stats_ns_ - now < timer) && open_.load() > 0)
    timer = next_stats_ns_ - now;
  sleeps_.fetch_add(1, std::memory_order_relaxed);
  if (!waits_.empty()) {
    io::Reactor* r = reactor();
    for (auto& w : waits_) {
      if (w.armed) continue;
      io_uring_prep_poll_add(r->sqe(&w), w.fd, POLLIN);
      w.armed = true;
    }
    return timer;
  }
  std::int64_t nap = std::clamp<std::int64_t>(idle / 4, 10'000, kMaxNapNs);
  return timer < 0 ? nap : std::min(nap, timer);
}

void StackImpl::housekeeping(std::int64_t now) {
  next_stats_ns_ = now + kStatsEveryNs;
  const PortStats ps = port_->stats();
  rx_packets_ = ps.rx_packets;
  rx_bytes_ = ps.rx_bytes;
  tx_packets_ = ps.tx_packets;
  tx_bytes_ = ps.tx_bytes;
  rx_dropped_ = ps.rx_missed + ps.rx_errors + ps.rx_nombuf;
  tx_dropped_ = ps.tx_dropped + ps.tx_nombuf + ps.tx_errors;
  ip_dropped_ = lwip_stats.ip.drop + lwip_stats.tcp.drop + lwip_stats.etharp.drop;
  std::uint64_t half = 0;
  for (tcp_pcb* p = tcp_active_pcbs; p; p = p->next)
    if (p->state == SYN_RCVD) ++half;
  half_open_ = half;
  const std::uint32_t free = port_->pool_available();
  mbufs_free_ = free;
  // Segments held out of order pin mbufs; when the pool runs low they are the first to go
  // (the peer resends them), before receiving stops altogether.
  if (free < port_->pool_size() / 8) {
    for (tcp_pcb* p = tcp_active_pcbs; p; p = p->next)
      if (p->ooseq) tcp_free_ooseq(p);
  }
}

// lwIP counts a connection against its listener's backlog (at most 255) from the SYN on, and
// has no SYN cookies: a few hundred SYNs that never complete (a flood from forged sources)
// would lock every new client out until they time out (TCP_SYN_RCVD_TIMEOUT, 20 s). When a
// listener's backlog is nearly full, its half-open connections older than kShedAfterMs are
// dropped without a word: a real client's handshake is done long before (a burst of
// legitimate SYNs must not be cut short: their SYN-ACKs are out, and a dropped one would meet
// its peer's ACK with a reset), a forged one never ends. Runs before a burst of received
// frames goes to lwIP, so a new client's SYN finds the room.
void StackImpl::shed_half_open() {
  constexpr int kSlack = 16;
  constexpr u32_t kShedAfterMs = 200;
  constexpr u32_t kShedAfterTicks = std::max<u32_t>(1, kShedAfterMs / TCP_SLOW_INTERVAL);
  for (auto& [port, g] : groups_) {
    auto* l = reinterpret_cast<tcp_pcb_listen*>(g.lpcb);
    if (int(l->accepts_pending) + kSlack < int(l->backlog)) continue;
    std::vector<tcp_pcb*> old;
    for (tcp_pcb* p = tcp_active_pcbs; p; p = p->next)
      if (p->state == SYN_RCVD && p->listener == l && u32_t(tcp_ticks - p->tmr) >= kShedAfterTicks)
        old.push_back(p);
    for (tcp_pcb* p : old) {
      tcp_abandon(p, 0);  // no RST: the source is most likely forged
      syn_shed_.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

// ---- listeners ----

bool StackImpl::listen(const LinkPtr& link, const ListenerConfig& cfg, std::uint16_t* port,
                       std::string* error) {
  io::Reactor* sr = reactor();
  if (!sr) {
    if (error) *error = "the DPDK stack is not attached to a reactor";
    return false;
  }
  if (io::Reactor::current() == sr) return do_listen(link, cfg, port, error);
  struct Result {
    bool done = false, ok = false;
    std::uint16_t port = 0;
    std::string error;
  };
  auto res = std::make_shared<Result>();
  sr->post_fn([this, link, cfg, res] {
    Result r;
    r.ok = do_listen(link, cfg, &r.port, &r.error);
    r.done = true;
    link->reactor->post_fn([res, r] { *res = r; });
  });
  if (!link->reactor->run_until([&] { return res->done; }, 10'000'000'000)) {
    if (error) *error = "the DPDK stack's reactor did not answer within 10 s";
    return false;
  }
  if (port) *port = res->port;
  if (error) *error = res->error;
  return res->ok;
}

bool StackImpl::do_listen(const LinkPtr& link, const ListenerConfig& cfg, std::uint16_t* port,
                          std::string* error) {
  auto fail = [&](std::string m) {
    if (error) *error = std::move(m);
    return false;
  };
  if (!cfg.host.empty() && cfg.host != "0.0.0.0" && cfg.host != info_.ip)
    return fail("listener host " + cfg.host + " is not samsa.dpdk.ip " + info_.ip +
                " (the DPDK backend has one address)");
  Group* g = nullptr;
  if (cfg.port != 0) {
    auto it = groups_.find(cfg.port);
    if (it != groups_.end()) g = &it->second;
  }
  if (!g) {
    tcp_pcb* pcb = tcp_new_ip_type(IPADDR_TYPE_V4);
    if (!pcb) return fail("lwIP has no pcb left for a listener");
    ip_set_option(pcb, SOF_REUSEADDR);
    ip4_addr_t any;
    any.addr = IPADDR_ANY;
    if (err_t e = tcp_bind(pcb, &any, cfg.port); e != ERR_OK) {
      tcp_close(pcb);
      return fail("port " + std::to_string(cfg.port) + " is in use (" + lwip_strerr(e) + ")");
    }
    const std::uint16_t bound = pcb->local_port;
    err_t e = ERR_OK;
    const auto backlog = static_cast<u8_t>(std::clamp(cfg.backlog, 1, 255));
    tcp_pcb* lpcb = tcp_listen_with_backlog_and_err(pcb, backlog, &e);
    if (!lpcb) {
      tcp_close(pcb);
      return fail(std::string("listen: ") + lwip_strerr(e));
    }
    Group& ng = groups_[bound];
    ng.stack = this;
    ng.lpcb = lpcb;
    ng.port = bound;
    tcp_arg(lpcb, &ng);
    tcp_accept(lpcb, &StackImpl::on_accept);
    g = &ng;
    LOG_INFO("dpdk: listening on %s:%u", info_.ip.c_str(), unsigned(bound));
  }
  if (std::find(g->links.begin(), g->links.end(), link) == g->links.end()) g->links.push_back(link);
  if (port) *port = g->port;
  return true;
}

void StackImpl::stop_accepting(const LinkPtr& link) {
  io::Reactor* sr = reactor();
  if (!sr) return;
  if (io::Reactor::current() == sr) {
    do_stop_accepting(link.get());
  } else {
    sr->post_fn([this, link] { do_stop_accepting(link.get()); });
  }
}

void StackImpl::do_stop_accepting(Link* link) {
  for (auto it = groups_.begin(); it != groups_.end();) {
    auto& links = it->second.links;
    std::erase_if(links, [&](const LinkPtr& l) { return l.get() == link; });
    if (links.empty()) {
      close_group(it->second);
      it = groups_.erase(it);
    } else {
      ++it;
    }
  }
}

void StackImpl::close_group(Group& g) {
  if (!g.lpcb) return;
  tcp_arg(g.lpcb, nullptr);
  tcp_accept(g.lpcb, nullptr);
  tcp_close(g.lpcb);  // never fails for a listening pcb
  g.lpcb = nullptr;
  LOG_INFO("dpdk: stopped listening on port %u", unsigned(g.port));
}

void StackImpl::detach(const LinkPtr& link) {
  // The transport's thread: no more posts to its reactor from here on.
  link->detached.store(true, std::memory_order_seq_cst);
  while (link->posting.load(std::memory_order_seq_cst) != 0) {
  }
  io::Reactor* sr = reactor();
  if (!sr) return;
  if (io::Reactor::current() == sr) {
    do_detach(link);
  } else {
    sr->post_fn([this, link] { do_detach(link); });
  }
}

void StackImpl::do_detach(const LinkPtr& link) {
  do_stop_accepting(link.get());
  for (StackConn* sc = conns_; sc;) {
    StackConn* next = sc->next;
    if (sc->link == link) {
      if (sc->pcb) {
        clear_callbacks(sc->pcb);
        tcp_abort(sc->pcb);
        sc->pcb = nullptr;
        open_.fetch_sub(1, std::memory_order_relaxed);
      }
      free_conn(sc);
    }
    sc = next;
  }
}

// ---- connections ----

err_t StackImpl::on_accept(void* arg, tcp_pcb* pcb, err_t err) {
  auto* g = static_cast<Group*>(arg);
  if (!g || err != ERR_OK || !pcb) return ERR_VAL;
  StackImpl& s = *g->stack;
  LinkPtr link;
  for (std::size_t i = 0; i < g->links.size() && !link; ++i) {
    LinkPtr& l = g->links[(g->next + i) % g->links.size()];
    if (!l->detached.load(std::memory_order_relaxed)) {
      link = l;
      g->next = (g->next + i + 1) % g->links.size();
    }
  }
  if (!link) {
    tcp_abort(pcb);
    return ERR_ABRT;
  }
  auto* sc = new StackConn(s, link, pcb);
  char host[IP4ADDR_STRLEN_MAX];
  ip4addr_ntoa_r(ip_2_ip4(&pcb->remote_ip), host, sizeof host);
  std::string peer = std::string(host) + ":" + std::to_string(pcb->remote_port);
  sc->ev.opened = make_conn(link, s, sc, std::move(peer));
  sc->conn = sc->ev.opened.get();
  sc->next = s.conns_;
  if (s.conns_) s.conns_->prev = sc;
  s.conns_ = sc;
  tcp_arg(pcb, sc);
  tcp_recv(pcb, &StackImpl::on_recv);
  tcp_sent(pcb, &StackImpl::on_sent);
  tcp_err(pcb, &StackImpl::on_err);
  tcp_poll(pcb, &StackImpl::on_poll, 4);
  // As the uring transport's sockets: answers go out at once; dead peers are found.
  tcp_nagle_disable(pcb);
  ip_set_option(pcb, SOF_KEEPALIVE);
  s.accepted_.fetch_add(1, std::memory_order_relaxed);
  s.open_.fetch_add(1, std::memory_order_relaxed);
  s.mark(sc);
  return ERR_OK;
}

err_t StackImpl::on_recv(void* arg, tcp_pcb*, pbuf* p, err_t) {
  auto* sc = static_cast<StackConn*>(arg);
  if (!p) {
    sc->ev.eof = true;
  } else {
    sc->stack.append_rx(sc, p);
    pbuf_free(p);
    sc->got_data = true;
  }
  sc->stack.mark(sc);
  return ERR_OK;
}

void StackImpl::append_rx(StackConn* sc, pbuf* p) {
  std::size_t off = 0;
  const std::size_t total = p->tot_len;
  while (off < total) {
    if (sc->chunk_used == sc->chunk.size()) {
      if (sc->chunk.size() > 0) sc->ev.data.push_back(std::move(sc->chunk));
      sc->chunk = Buffer(std::max(kChunk, total - off));
      sc->chunk_used = 0;
    }
    const std::size_t n = std::min(sc->chunk.size() - sc->chunk_used, total - off);
    pbuf_copy_partial(p, sc->chunk.data() + sc->chunk_used, static_cast<u16_t>(n),
                      static_cast<u16_t>(off));
    sc->chunk_used += n;
    off += n;
  }
}

err_t StackImpl::on_sent(void* arg, tcp_pcb*, u16_t len) {
  auto* sc = static_cast<StackConn*>(arg);
  sc->acked += len;
  sc->stack.release_acked(sc);
  sc->stack.try_write(sc);
  if (sc->close_wanted) sc->stack.do_close(sc);
  sc->stack.mark(sc);
  return ERR_OK;
}

void StackImpl::on_err(void* arg, err_t err) {
  auto* sc = static_cast<StackConn*>(arg);
  if (!sc) return;
  // lwIP has freed the pcb (and the segments that pointed into our buffers).
  sc->pcb = nullptr;
  if (err == ERR_RST) sc->stack.resets_.fetch_add(1, std::memory_order_relaxed);
  sc->stack.drop_pcb(sc, err == ERR_RST    ? StackEvent::Closed::reset
                         : err == ERR_CLSD ? StackEvent::Closed::normal
                                           : StackEvent::Closed::error);
}

err_t StackImpl::on_poll(void* arg, tcp_pcb*) {
  auto* sc = static_cast<StackConn*>(arg);
  if (!sc) return ERR_OK;
  // Retries what lwIP's memory refused earlier.
  sc->stack.try_write(sc);
  if (sc->close_wanted && sc->pcb) sc->stack.do_close(sc);
  if (sc->pcb) sc->stack.mark(sc);
  return ERR_OK;
}

void StackImpl::clear_callbacks(tcp_pcb* pcb) {
  tcp_arg(pcb, nullptr);
  tcp_recv(pcb, nullptr);
  tcp_sent(pcb, nullptr);
  tcp_err(pcb, nullptr);
  tcp_poll(pcb, nullptr, 0);
}

void StackImpl::drop_pcb(StackConn* sc, StackEvent::Closed why) {
  if (sc->ev.closed == StackEvent::Closed::no && !sc->closed_sent) {
    sc->ev.closed = why;
    open_.fetch_sub(1, std::memory_order_relaxed);
  }
  sc->txq.clear();
  sc->wpiece = sc->woff = 0;
  sc->front_start = sc->acked = sc->written = sc->queued;
  mark(sc);
}

void StackImpl::update(StackConn* sc, ConnUpdate u) {
  if (u.release) {
    sc->released = true;
    if (sc->pcb) {  // the connection side gave up without our `closed`: reset
      clear_callbacks(sc->pcb);
      tcp_abort(sc->pcb);
      sc->pcb = nullptr;
      open_.fetch_sub(1, std::memory_order_relaxed);
    }
    if (!sc->dirty) free_conn(sc);  // else once its pending event is gone (flush_events)
    return;
  }
  if (!sc->pcb) return;  // closed meanwhile; `closed` is on its way. Answers are dropped.
  for (auto& b : u.send) {
    if (b.size() == 0) continue;
    sc->queued += b.size();
    sc->txq.push_back(std::move(b));
  }
  if (u.credit) {
    // A consumed byte reopens the window by one; lwIP takes 16 bits at a time.
    std::uint64_t c = u.credit;
    while (c > 0 && sc->pcb) {
      const auto n = static_cast<u16_t>(std::min<std::uint64_t>(c, 0xffff));
      tcp_recved(sc->pcb, n);
      c -= n;
    }
  }
  try_write(sc);
  if (u.shutdown) sc->shutdown_wanted = true;
  maybe_shutdown(sc);
  if (u.close) {
    sc->close_wanted = true;
    do_close(sc);
  }
  mark(sc);
}

void StackImpl::try_write(StackConn* sc) {
  while (sc->pcb && sc->wpiece < sc->txq.size()) {
    Buffer& b = sc->txq[sc->wpiece];
    const std::size_t rem = b.size() - sc->woff;
    if (rem == 0) {
      ++sc->wpiece;
      sc->woff = 0;
      continue;
    }
    const u16_t room = tcp_sndbuf(sc->pcb);
    if (room == 0 || tcp_sndqueuelen(sc->pcb) >= TCP_SND_QUEUELEN - 2) break;
    const auto len = static_cast<u16_t>(std::min<std::size_t>(rem, room));
    const bool more = len < rem || sc->wpiece + 1 < sc->txq.size();
    const err_t e = tcp_write(sc->pcb, b.data() + sc->woff, len, more ? TCP_WRITE_FLAG_MORE : 0);
    if (e != ERR_OK) break;  // ERR_MEM: lwIP's pools are busy; on_sent/on_poll retry
    sc->woff += len;
    sc->written += len;
    sc->ev.taken += len;
  }
  maybe_shutdown(sc);
}

void StackImpl::release_acked(StackConn* sc) {
  while (!sc->txq.empty() && sc->wpiece > 0 &&
         sc->front_start + sc->txq.front().size() <= sc->acked) {
    sc->front_start += sc->txq.front().size();
    sc->txq.pop_front();
    --sc->wpiece;
  }
}

void StackImpl::maybe_shutdown(StackConn* sc) {
  if (!sc->pcb || !sc->shutdown_wanted || sc->shutdown_done || sc->written != sc->queued) return;
  if (tcp_shutdown(sc->pcb, 0, 1) == ERR_OK) sc->shutdown_done = true;
}

void StackImpl::do_close(StackConn* sc) {
  if (!sc->pcb) return;
  tcp_pcb* pcb = sc->pcb;
  if (sc->acked == sc->written) {
    // Nothing of ours is referenced any more: lwIP may finish the close on its own (FIN, or
    // RST when received bytes are left unconsumed, as a kernel does).
    clear_callbacks(pcb);
    if (tcp_close(pcb) != ERR_OK) {  // out of memory for the FIN: retried from on_poll
      tcp_arg(pcb, sc);
      tcp_recv(pcb, &StackImpl::on_recv);
      tcp_sent(pcb, &StackImpl::on_sent);
      tcp_err(pcb, &StackImpl::on_err);
      tcp_poll(pcb, &StackImpl::on_poll, 4);
      return;
    }
  } else {
    // Segments still point into answers that are about to be freed: reset instead.
    clear_callbacks(pcb);
    tcp_abort(pcb);
  }
  sc->pcb = nullptr;
  drop_pcb(sc, StackEvent::Closed::normal);
}

void StackImpl::mark(StackConn* sc) {
  if (sc->dirty) return;
  sc->dirty = true;
  sc->dirty_next = dirty_;
  dirty_ = sc;
}

void StackImpl::flush_events() {
  while (StackConn* list = dirty_) {
    dirty_ = nullptr;
    for (StackConn* sc = list; sc;) {
      StackConn* next = sc->dirty_next;
      sc->dirty = false;
      sc->dirty_next = nullptr;
      if (sc->pcb) {
        // Acknowledge what arrived in this poll now instead of on the 25 ms timer: the
        // kernel peer's congestion window grows with our ACKs.
        if (sc->got_data && (sc->pcb->flags & TF_ACK_DELAY)) tcp_ack_now(sc->pcb);
        tcp_output(sc->pcb);
      }
      sc->got_data = false;
      if (sc->released) {
        free_conn(sc);
      } else {
        deliver_event(sc);
      }
      sc = next;
    }
  }
}

void StackImpl::deliver_event(StackConn* sc) {
  if (sc->chunk_used > 0) {
    sc->chunk.resize(sc->chunk_used);
    sc->ev.data.push_back(std::move(sc->chunk));
    sc->chunk = Buffer();
    sc->chunk_used = 0;
  }
  if (sc->ev.empty() || sc->closed_sent) {
    sc->ev = StackEvent{};
    return;
  }
  if (sc->ev.closed != StackEvent::Closed::no) sc->closed_sent = true;
  StackEvent ev = std::move(sc->ev);
  sc->ev = StackEvent{};
  Link& l = *sc->link;
  if (l.detached.load(std::memory_order_relaxed)) return;  // `ev` frees an unadopted half
  if (l.reactor == reactor()) {
    deliver(sc->link, sc->conn, std::move(ev));
    return;
  }
  l.posting.fetch_add(1, std::memory_order_seq_cst);
  if (!l.detached.load(std::memory_order_seq_cst)) {
    l.reactor->post_fn([link = sc->link, c = sc->conn, e = std::move(ev)]() mutable {
      deliver(link, c, std::move(e));
    });
  }
  l.posting.fetch_sub(1, std::memory_order_seq_cst);
}

void StackImpl::free_conn(StackConn* sc) {
  if (sc->prev) sc->prev->next = sc->next;
  if (sc->next) sc->next->prev = sc->prev;
  if (conns_ == sc) conns_ = sc->next;
  if (sc->dirty) {  // unlink from the dirty list
    StackConn** pp = &dirty_;
    while (*pp && *pp != sc)
      pp = &(*pp)->dirty_next;
    if (*pp) *pp = sc->dirty_next;
  }
  delete sc;
}

// ---- stats ----

DpdkStats StackImpl::stats() const {
  DpdkStats s;
  s.rx_packets = rx_packets_;
  s.rx_bytes = rx_bytes_;
  s.tx_packets = tx_packets_;
  s.tx_bytes = tx_bytes_;
  s.rx_dropped = rx_dropped_;
  s.tx_dropped = tx_dropped_;
  s.ip_dropped = ip_dropped_;
  s.tcp_retransmits = g_retransmits.load(std::memory_order_relaxed);
  s.tcp_connections = open_;
  s.tcp_half_open = half_open_;
  s.tcp_syn_dropped = syn_shed_;
  s.tcp_accepted = accepted_;
  s.tcp_resets_received = resets_;
  s.poll_busy_ns = busy_ns_;
  const std::int64_t since = attached_ns_ ? mono_ns() - attached_ns_ : 0;
  s.poll_total_ns = busy_before_attach_ns_ + static_cast<std::uint64_t>(since);
  s.sleeps = sleeps_;
  s.mbufs_free = mbufs_free_;
  s.mbufs_total = opts_.mbufs;
  return s;
}

DpdkInfo StackImpl::info() const {
  std::lock_guard lk(info_mu_);
  return info_;
}

}  // namespace

}  // namespace samsa::net::dpdk

namespace samsa::net {

std::expected<std::unique_ptr<DpdkStack>, std::string> DpdkStack::create(const DpdkOptions& o) {
  // lwIP keeps one global state, and DPDK's EAL starts once per process.
  static bool created = false;
  if (created) return std::unexpected("the DPDK stack can be created once per process");
  created = true;
  auto s = std::make_unique<dpdk::StackImpl>();
  if (auto r = s->init(o); !r) return std::unexpected(r.error());
  dpdk::g_stack = s.get();
  return std::unique_ptr<DpdkStack>(std::move(s));
}

}  // namespace samsa::net
