// The DPDK backend's net::ClientConnection: the requesting reactor's half of an outbound
// connection (pipe.h). Behaves as the uring one (net/client_connection.h): connect timeout,
// backoff with jitter between attempts, request timeout, responses framed by ResponseFramer,
// requests dropped on a reconnect, handler calls only from loop turns, never from inside its
// own member calls. Each attempt has a Link of its own: ending the attempt (failure, reset,
// timeout, reconnect, a new endpoint, the handle destroyed) detaches it, which resets the
// connection on the stack and frees the stack's half; an event still under way to us finds
// the Link no longer naming us and is dropped.
#include <arpa/inet.h>
#include <netdb.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "base/clock.h"
#include "base/log.h"
#include "io/offload.h"
#include "net/client_framing.h"
#include "net/dpdk/pipe.h"
#include "net/ring_queue.h"

namespace samsa::net::dpdk {
namespace {

std::atomic<std::uint64_t> g_resolve_key{0};

// A name or a numeric IPv4 address to an address in network order (0 and an errno when not).
std::pair<std::uint32_t, int> resolve4(const std::string& host, bool numeric_only) {
  in_addr a{};
  if (::inet_pton(AF_INET, host.empty() ? "127.0.0.1" : host.c_str(), &a) == 1)
    return {a.s_addr, 0};
  if (numeric_only) return {0, EAGAIN};
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res) return {0, rc == EAI_NONAME ? ENOENT : EHOSTUNREACH};
  const std::uint32_t ip = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr.s_addr;
  ::freeaddrinfo(res);
  return {ip, 0};
}

class Client final : public ClientSide, ClientCore<Client> {
  friend class ClientCore<Client>;

 public:
  Client(io::Reactor& r, ClientHandler& h, ClientOptions o, StackPort& stack)
      : ClientCore(r, h, std::move(o)),
        stack_(stack),
        backoff_(reinterpret_cast<std::uintptr_t>(this)) {
    backoff_timer_.fn = &Client::on_backoff;
    backoff_timer_.self = this;
  }

  void set_handle(ClientConnection* c) { handle_ = c; }
  void start() { attempt(); }

  bool send(Buffer frame) {
    if (state_ != State::connected || frame.size() == 0) return false;
    stats_.requests++;
    out_.send.push_back(std::move(frame));
    sent_at_.push_back(mono_ns());
    arm_deadline();
    wake();
    return true;
  }
  bool connected() const { return state_ == State::connected; }
  bool connecting() const { return state_ == State::connecting; }
  std::size_t inflight() const { return sent_at_.size(); }
  const ClientStats& stats() const { return stats_; }
  const std::string& host() const { return opts_.host; }
  std::uint16_t port() const { return opts_.port; }
  void reconnect() { fail(ECONNABORTED); }
  void set_endpoint(const std::string& host, std::uint16_t port) {
    if (host == opts_.host && port == opts_.port) return;
    opts_.host = host;
    opts_.port = port;
    if (state_ == State::connected || state_ == State::connecting || state_ == State::resolving) {
      fail(ECONNABORTED);
    }
  }

  void orphan() {
    h_ = nullptr;
    handle_ = nullptr;
    r_.disarm(&backoff_timer_);
    r_.disarm(&deadline_timer_);
    end_attempt();
    state_ = State::gone;
    ++gen_;
    maybe_free();
  }

  // ClientSide: on r_'s thread, from a task or from inside the stack's poll (when r_ polls).
  // Only recorded here; on_turn_end acts on it.
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
  enum class State : std::uint8_t { backoff, resolving, connecting, connected, failed, gone };
  struct ClientTimer : io::Timer {
    Client* self = nullptr;
  };

  // ---- connecting ----

  void attempt() {
    state_ = State::resolving;
    const std::uint64_t gen = ++gen_;
    auto [ip, err] = resolve4(opts_.host, true);
    if (err == 0) {
      open(ip);
      return;
    }
    // A name: getaddrinfo may block on DNS, so it runs on the reactor's offload thread.
    ++ops_;
    io::offload(
        r_, g_resolve_key.fetch_add(1, std::memory_order_relaxed),
        [host = opts_.host] { return resolve4(host, false); },
        [this, gen](std::pair<std::uint32_t, int> res) {
          --ops_;
          if (gen == gen_ && state_ == State::resolving) {
            if (res.second != 0) {
              attempt_failed(res.second);
            } else {
              open(res.first);
            }
          }
          maybe_free();
        });
  }

  void open(std::uint32_t ip) {
    link_ = std::make_shared<Link>();
    link_->reactor = &r_;
    link_->client = this;
    state_ = State::connecting;
    if (!stack_.connect_out(link_, ip, opts_.port)) {
      attempt_failed(ENETDOWN);
      return;
    }
    r_.arm(&deadline_timer_, mono_ns() + opts_.connect_timeout_ms * 1'000'000);
  }

  void attempt_failed(int error) {
    stats_.connect_failures++;
    LOG_DEBUG("connection to %s:%u (dpdk): %s", opts_.host.c_str(), unsigned(opts_.port),
              std::strerror(error));
    end(error);
  }

  // ---- failing ----

  void fail(int error) {
    if (state_ == State::connected) {
      stats_.disconnects++;
      LOG_DEBUG("connection to %s:%u (dpdk) lost: %s", opts_.host.c_str(), unsigned(opts_.port),
                std::strerror(error));
      end(error);
    } else if (state_ == State::connecting || state_ == State::resolving) {
      attempt_failed(error);
    }
  }

  // The attempt is over: the stack resets it (if still open) and frees its half; the handler
  // hears at the end of this turn, then the backoff runs.
  void end(int error) {
    end_attempt();
    ++gen_;  // a resolution still on its way is ignored
    state_ = State::failed;
    pending_error_ = error;
    wake();
  }

  void end_attempt() {
    r_.disarm(&deadline_timer_);
    if (link_) {
      link_->client = nullptr;
      stack_.detach(link_);
      link_.reset();
    }
    sc_ = nullptr;
    out_ = ConnUpdate{};
    rx_.clear();
    ev_connected_ = ev_eof_ = false;
    ev_closed_ = StackEvent::Closed::no;
    framer_.reset();
    sent_at_.clear();
  }

  void on_turn_end() override {
    if (!h_) {
      maybe_free();
      return;
    }
    if (state_ == State::connecting) {
      if (ev_connected_) {
        ev_connected_ = false;
        r_.disarm(&deadline_timer_);
        state_ = State::connected;
        stats_.connects++;
        arm_deadline();
        notify([this] { h_->on_connected(*handle_); });
        if (!h_) return maybe_free();
      } else if (ev_closed_ != StackEvent::Closed::no) {
        attempt_failed(ev_closed_ == StackEvent::Closed::reset ? ECONNREFUSED : EHOSTUNREACH);
      }
    }
    if (state_ == State::connected) receive();
    if (!h_) return maybe_free();
    if (state_ == State::connected) {
      if (ev_eof_ || ev_closed_ != StackEvent::Closed::no) {
        fail(ECONNRESET);
      } else {
        flush();
      }
    }
    if (state_ == State::failed) {
      const int err = pending_error_;
      pending_error_ = 0;
      notify([this, err] { h_->on_disconnected(*handle_, err); });
      if (!h_) return maybe_free();
      if (state_ == State::failed) {  // else the handler asked for something meanwhile
        state_ = State::backoff;
        r_.arm(&backoff_timer_, mono_ns() + backoff_.next_ms(opts_) * 1'000'000);
      }
    }
  }

  // Frames what arrived; every byte consumed reopens the stack's window at once (a frame is
  // assembled in its own buffer, so nothing is held back in the stack).
  void receive() {
    while (!rx_.empty() && state_ == State::connected && h_) {
      Buffer& b = rx_.front();
      const std::byte* p = b.data() + rx_off_;
      std::size_t n = b.size() - rx_off_;
      ResponseFramer::Result res;
      Buffer f;
      std::int32_t size = 0;
      const std::size_t used = framer_.feed(p, n, opts_.max_frame_bytes, &res, &f, &size);
      rx_off_ += used;
      out_.credit += used;
      stats_.bytes_in += used;
      if (rx_off_ == b.size()) {
        rx_.pop_front();
        rx_off_ = 0;
      }
      if (res == ResponseFramer::Result::bad_size) {
        LOG_WARN("connection to %s:%u: response size %d outside 1..%u, reconnecting",
                 opts_.host.c_str(), unsigned(opts_.port), size, opts_.max_frame_bytes);
        fail(EPROTO);
        return;
      }
      if (res == ResponseFramer::Result::frame) frame_done(std::move(f));
    }
  }

  void frame_done(Buffer f) {
    if (sent_at_.empty()) {
      LOG_WARN("connection to %s:%u: a response to no request, reconnecting", opts_.host.c_str(),
               unsigned(opts_.port));
      fail(EPROTO);
      return;
    }
    sent_at_.pop_front();
    r_.disarm(&deadline_timer_);
    arm_deadline();
    stats_.responses++;
    backoff_.reset();
    notify([this, &f] { h_->on_response(*handle_, std::move(f)); });
  }

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

  // ---- timers ----

  static void on_backoff(io::Timer* t) {
    Client* self = static_cast<ClientTimer*>(t)->self;
    if (self->state_ == State::backoff) self->attempt();
  }

  void on_connect_deadline() { attempt_failed(ETIMEDOUT); }

  StackPort& stack_;
  ClientStats stats_;
  State state_ = State::backoff;
  std::uint64_t gen_ = 0;
  int pending_error_ = 0;
  ClientBackoff backoff_;
  ClientTimer backoff_timer_;

  // The current attempt: its Link, the stack's half once connected, what the stack said.
  LinkPtr link_;
  StackConn* sc_ = nullptr;
  bool ev_connected_ = false, ev_eof_ = false;
  StackEvent::Closed ev_closed_ = StackEvent::Closed::no;

  RingQueue<Buffer> rx_;  // received, not yet framed (rx_off_ into the front)
  std::size_t rx_off_ = 0;
  ResponseFramer framer_;
  ConnUpdate out_;  // requests and credit for the stack, sent at the end of the turn
};

}  // namespace

std::unique_ptr<ClientConnection> make_client(io::Reactor& r, ClientHandler& h, ClientOptions o,
                                              StackPort& stack) {
  return make_client_handle<Client>(r, h, std::move(o), stack);
}

}  // namespace samsa::net::dpdk
