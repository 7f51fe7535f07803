// The DPDK backend's net::ClientConnection: the requesting reactor's half of an outbound
// connection (pipe.h). The state machine (resolving, connect timeout, backoff, request
// timeout, framing, handler calls) is ClientMachine's, shared with the uring backend; this
// moves the bytes. Each attempt has a Link of its own: ending the attempt (failure, reset,
// timeout, reconnect, a new endpoint, the handle destroyed) detaches it, which resets the
// connection on the stack and frees the stack's half; an event still under way to us finds
// the Link no longer naming us and is dropped.

#include <netinet/in.h>

#include <cerrno>
#include <cstring>

#include "base/clock.h"
#include "base/log.h"
#include "net/client_machine.h"
#include "net/dpdk/pipe.h"
#include "net/ring_queue.h"

namespace samsa::net::dpdk {
namespace {

class Client final : public ClientSide, public ClientMachine<Client> {
  friend class ClientMachine<Client>;

 public:
  static constexpr int kFamily = AF_INET;  // the stack speaks IPv4 only

  Client(io::Reactor& r, ClientHandler& h, ClientOptions o, StackPort& stack)
      : ClientMachine(r, h, std::move(o)), stack_(stack) {}

  // ClientSide: on r_'s thread, from a task or from inside the stack's poll (when r_ polls).
  // Only recorded here; turn() acts on it.
  void on_stack_event(StackEvent& ev) override {
    for (auto& b : ev.data) {
      if (b.size() > 0) rx_.push_back(std::move(b));
    }
    if (ev.connected) {
      ev_connected_ = true;
      sc_ = ev.self;
    }
    if (ev.taken) stats_.bytes_out += ev.taken;
    if (ev.eof) ev_eof_ = true;
    if (ev.closed != StackEvent::Closed::no) ev_closed_ = ev.closed;
    wake();
  }

 private:
  // ---- ClientMachine's hooks ----

  int open(const Resolved& res) {
    const std::uint32_t ip = reinterpret_cast<const sockaddr_in*>(&res.addr)->sin_addr.s_addr;
    link_ = std::make_shared<Link>();
    link_->reactor = &r_;
    link_->client = this;
    return stack_.connect_out(link_, ip, opts_.port) ? 0 : ENETDOWN;
  }

  // The attempt is over: the stack resets it (if still open) and frees its half; an event still
  // on its way finds the Link no longer naming us and is dropped.
  void shut() {
    if (link_) {
      link_->client = nullptr;
      stack_.detach(link_);
      link_.reset();
    }
    sc_ = nullptr;
    out_ = ConnUpdate{};
    rx_.clear();
    rx_off_ = 0;
    ev_connected_ = ev_eof_ = false;
    ev_closed_ = StackEvent::Closed::no;
  }

  void release() {}

  // What the stack said since the last turn.
  void turn() {
    if (state_ == State::connecting) {
      if (ev_connected_) {
        ev_connected_ = false;
        connected_io();
        if (!h_) return;
      } else if (ev_closed_ != StackEvent::Closed::no) {
        fail(ev_closed_ == StackEvent::Closed::reset ? ECONNREFUSED : EHOSTUNREACH);
        return;
      }
    }
    if (state_ != State::connected) return;
    receive();
    if (state_ == State::connected && h_ && (ev_eof_ || ev_closed_ != StackEvent::Closed::no))
      fail(ECONNRESET);
  }

  // Frames what arrived; every byte consumed reopens the stack's window at once (a frame is
  // assembled in its own buffer, so nothing is held back in the stack).
  void receive() {
    while (!rx_.empty() && state_ == State::connected && h_) {
      Buffer& b = rx_.front();
      const std::size_t used = bytes_in(b.data() + rx_off_, b.size() - rx_off_);
      // A bad frame or the handle's end shut the attempt inside bytes_in: rx_ (b with it) and
      // out_ were cleared and belong to no connection now.
      if (state_ != State::connected) return;
      rx_off_ += used;
      out_.credit += used;
      if (rx_off_ == b.size()) {
        rx_.pop_front();
        rx_off_ = 0;
      }
    }
  }

  void queue(Buffer frame) { out_.send.push_back(std::move(frame)); }

  // Requests and receive credit go to the stack: a direct call when this reactor polls, else
  // one task per turn.
  void flush() {
    if (out_.empty() || !sc_ || !link_) return;
    ConnUpdate u = std::move(out_);
    out_ = ConnUpdate{};
    io::Reactor* sr = stack_.reactor();
    if (!sr) return;
    if (sr == &r_) {
      stack_.update(sc_, std::move(u));
    } else {
      sr->post_fn(
          [s = &stack_, sc = sc_, u = std::move(u)]() mutable { s->update(sc, std::move(u)); });
    }
  }

  StackPort& stack_;
  // The current attempt: its Link, the stack's half once connected, what the stack said.
  LinkPtr link_;
  StackConn* sc_ = nullptr;
  bool ev_connected_ = false, ev_eof_ = false;
  StackEvent::Closed ev_closed_ = StackEvent::Closed::no;

  RingQueue<Buffer> rx_;  // received, not yet framed (rx_off_ into the front)
  std::size_t rx_off_ = 0;
  ConnUpdate out_;  // requests and credit for the stack, sent at the end of the turn
};

}  // namespace

std::unique_ptr<ClientConnection> make_client(io::Reactor& r, ClientHandler& h, ClientOptions o,
                                              StackPort& stack) {
  return make_client_handle<Client>(r, h, std::move(o), stack);
}

}  // namespace samsa::net::dpdk
