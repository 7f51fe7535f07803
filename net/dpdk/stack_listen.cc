// The DPDK stack's listeners: one listening pcb per port, shared by the transports that
// listen there (connections go to them in turn), accepting, and dropping stale half-open
// connections when a SYN flood fills a listener's backlog (README.md, "SYN floods").
#include <algorithm>

#include "base/log.h"
#include "net/dpdk/stack.h"

namespace samsa::net::dpdk {

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
    now_listening(bound);
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
  s.track(sc);
  s.remember(sc, false);
  s.set_callbacks(pcb, sc);
  s.accepted_.fetch_add(1, std::memory_order_relaxed);
  s.open_.fetch_add(1, std::memory_order_relaxed);
  s.mark(sc);
  return ERR_OK;
}

}  // namespace samsa::net::dpdk
