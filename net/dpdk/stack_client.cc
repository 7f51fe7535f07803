// The stack's side of outbound connections (client.cc is the requesting reactor's): an active
// open from an ephemeral port, on the stack's reactor. From the handshake on, the connection is
// a StackConn like an accepted one (stack_conn.cc moves its bytes both ways).
#include "base/log.h"
#include "net/dpdk/stack.h"

namespace samsa::net::dpdk {

bool StackImpl::connect_out(const LinkPtr& link, std::uint32_t ip, std::uint16_t port) {
  io::Reactor* sr = reactor();
  if (!sr) return false;
  if (io::Reactor::current() == sr) {
    do_connect(link, ip, port);
  } else {
    sr->post_fn([this, link, ip, port] { do_connect(link, ip, port); });
  }
  return true;
}

void StackImpl::track(StackConn* sc) {
  sc->next = conns_;
  if (conns_) conns_->prev = sc;
  conns_ = sc;
}

void StackImpl::do_connect(const LinkPtr& link, std::uint32_t ip, std::uint16_t port) {
  // The attempt was given up before we got here (detach's own task follows this one).
  if (link->detached.load(std::memory_order_relaxed)) return;
  auto* sc = new StackConn(*this, link, nullptr);
  track(sc);
  auto fail = [&](const char* what, err_t e) {
    (void)what;
    (void)e;
    LOG_DEBUG("dpdk: connect: %s: %s", what, lwip_strerr(e));
    sc->ev.closed = StackEvent::Closed::error;
    mark(sc);
  };
  tcp_pcb* pcb = tcp_new_ip_type(IPADDR_TYPE_V4);
  if (!pcb) return fail("no pcb left", ERR_MEM);
  ip4_addr_t any;
  any.addr = IPADDR_ANY;
  // Port 0: lwIP picks the next free one of its ephemeral range (one queue here, so any port
  // steers the replies to the polling reactor; README.md "Queues" has the multi-queue plan).
  if (err_t e = tcp_bind(pcb, &any, 0); e != ERR_OK) {
    tcp_abort(pcb);
    return fail("bind", e);
  }
  sc->pcb = pcb;
  set_callbacks(pcb, sc);
  ip_addr_t dst;
  IP_SET_TYPE_VAL(dst, IPADDR_TYPE_V4);
  ip_2_ip4(&dst)->addr = ip;
  open_.fetch_add(1, std::memory_order_relaxed);
  connects_.fetch_add(1, std::memory_order_relaxed);
  if (err_t e = tcp_connect(pcb, &dst, port, &StackImpl::on_connected); e != ERR_OK) {
    clear_callbacks(pcb);
    tcp_abort(pcb);
    sc->pcb = nullptr;
    LOG_DEBUG("dpdk: connect: %s", lwip_strerr(e));
    drop_pcb(sc, StackEvent::Closed::error);
    return;
  }
  // The SYN goes out at the end of this poll (flush_events), not on lwIP's timer.
  mark(sc);
}

err_t StackImpl::on_connected(void* arg, tcp_pcb*, err_t err) {
  auto* sc = static_cast<StackConn*>(arg);
  if (!sc || err != ERR_OK) return ERR_OK;  // failures come through on_err
  sc->stack.remember(sc, true);
  sc->ev.connected = true;
  sc->ev.self = sc;
  sc->stack.mark(sc);
  return ERR_OK;
}

}  // namespace samsa::net::dpdk

namespace samsa::net::dpdk {

std::unique_ptr<ClientConnection> StackImpl::connect(io::Reactor& r, ClientHandler& h,
                                                     ClientOptions o) {
  return make_client(r, h, std::move(o), *this);
}

}  // namespace samsa::net::dpdk
