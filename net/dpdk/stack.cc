// The TCP/IP side of the DPDK backend: lwIP (raw API, NO_SYS) driven by the reactor the stack
// is attached to. This file holds the device end (lwIP's interface on the DPDK port), the
// poll loop (receive bursts into lwIP, lwIP's timers, transmit, then one event per touched
// connection to its reactor), the idle sleep and the counters. Listeners are in
// stack_listen.cc, the stack half of each connection in stack_conn.cc (stack.h).
#include <poll.h>
#include <sys/random.h>

#include <algorithm>
#include <cstring>

#include "base/clock.h"
#include "base/log.h"
#include "net/dpdk/stack.h"

namespace samsa::net::dpdk {
static_assert(TCP_WND == kDpdkReceiveWindow);
namespace {

// Poll loop: frames per receive burst, and bursts per poll before the rest of the turn runs.
constexpr std::uint16_t kBurst = 32;
constexpr int kBurstsPerPoll = 8;
// Counters shown to other threads are refreshed this often.
constexpr std::int64_t kStatsEveryNs = 10'000'000;
// Payload pieces shorter than this are copied even on zero-copy devices: an attached
// segment costs a second mbuf (allocated, attached, freed through the callback), which a
// small memcpy into the header's mbuf beats (produce answers are tens of bytes).
constexpr std::size_t kAttachMin = 512;
// Drivers without a descriptor to sleep on nap at most this long when idle.
constexpr std::int64_t kMaxNapNs = 1'000'000;

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

StackImpl* g_stack = nullptr;  // lwIP has one global state; so does this backend

}  // namespace

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
  po.tx_zero_copy = o.tx_zero_copy;
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
  if (self->port_->zero_copy_tx() && p->next) {
    // While a TCP pcb sends, lwIP points the interface's hints at the pcb's own: that names
    // the connection whose kept answers a PBUF_ROM payload (tcp_write without copy) may
    // point into. Anything else (ARP, ICMP, frames ARP held back) is copied.
    StackConn* sc = nullptr;
    if (n->hints) {
      auto* pcb = reinterpret_cast<tcp_pcb*>(reinterpret_cast<char*>(n->hints) -
                                             offsetof(tcp_pcb, netif_hints));
      // A listener's half-open pcbs carry its Group as their argument, and send no data.
      if (pcb->state != LISTEN && pcb->state != SYN_RCVD)
        sc = static_cast<StackConn*>(pcb->callback_arg);
    }
    if (sc) return self->output_pieces(sc, p);
  }
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

// The frame as a chain of mbufs: headers (and anything not found among the connection's kept
// answers) copied, payload attached where it lies. Each attached segment holds a reference on
// its answer piece until the device is done with it.
err_t StackImpl::output_pieces(StackConn* sc, pbuf* p) {
  void* frame = nullptr;
  for (pbuf* q = p; q; q = q->next) {
    if (q->len == 0) continue;
    const auto* d = static_cast<const std::byte*>(q->payload);
    std::size_t left = q->len;
    // PBUF_ROM: tcp_write's reference to data kept until acknowledged (only ours).
    const bool rom = q->type_internal == PBUF_ROM && q->len >= kAttachMin;
    while (left > 0) {
      std::size_t avail = 0;
      TxBuf* t = rom && !sc->txq.empty() ? find_txbuf(sc, d, &avail) : nullptr;
      const auto len = static_cast<std::uint16_t>(t ? std::min(left, avail) : left);
      if (!(t && port_->tx_attach(&frame, d, len, &t->ref)) && !port_->tx_copy(&frame, d, len)) {
        Port::tx_discard(frame);
        LINK_STATS_INC(link.memerr);
        return ERR_MEM;  // TCP keeps the segment and sends it later
      }
      d += len;
      left -= len;
    }
  }
  port_->tx(frame);
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
  if (!journal_tried_) open_journal(attached_ns_);
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
      if (offload_watch_) check_offload(frames[i]);
      if (!waiting_.empty() && held_for_listener(frames[i])) {
        Port::free(frames[i].mbuf);
        continue;
      }
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
  if (t0 >= next_probe_ns_) {
    probe_previous(t0);
    work = true;
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
  if (next_probe_ns_ != INT64_MAX)
    timer = timer < 0 ? std::max<std::int64_t>(0, next_probe_ns_ - now)
                      : std::min(timer, std::max<std::int64_t>(0, next_probe_ns_ - now));
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
  tx_zero_copy_ = ps.tx_attached_bytes;
  ip_dropped_ = lwip_stats.ip.drop + lwip_stats.tcp.drop + lwip_stats.etharp.drop;
  // A checksum error arms the offload check for the frames that follow (the peer's SYN comes
  // again within a second): no frame is parsed for it while checksums are good.
  const std::uint64_t bad = lwip_stats.ip.chkerr + lwip_stats.tcp.chkerr;
  if (bad > bad_checksum_ && !offload_seen_) offload_watch_ = true;
  bad_checksum_ = bad;
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

// ---- stats ----

DpdkStats StackImpl::stats() const {
  DpdkStats s;
  s.rx_packets = rx_packets_;
  s.rx_bytes = rx_bytes_;
  s.tx_packets = tx_packets_;
  s.tx_bytes = tx_bytes_;
  s.rx_dropped = rx_dropped_;
  s.tx_dropped = tx_dropped_;
  s.tx_zero_copy_bytes = tx_zero_copy_;
  s.ip_dropped = ip_dropped_;
  s.tcp_retransmits = g_retransmits.load(std::memory_order_relaxed);
  s.tcp_connections = open_;
  s.tcp_half_open = half_open_;
  s.tcp_syn_dropped = syn_shed_;
  s.tcp_probes = probed_;
  s.rx_bad_checksum = bad_checksum_;
  s.tcp_accepted = accepted_;
  s.tcp_connects = connects_;
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
