// net::ClientMachine — the outbound connection's state machine (net/client_connection.h),
// written once for every backend: resolving the endpoint (a name off the reactor), connecting
// with a deadline, the requests' deadline, framing the responses, failing, telling the handler,
// backing off and trying again, following a new endpoint, and freeing the internals once the
// handle is gone and the backend has nothing left under way.
//
// A backend's internals D derive from ClientMachine<D> and supply how bytes move:
//   static constexpr int kFamily;       AF_INET or AF_UNSPEC: the addresses it can reach
//   int open(const Resolved&);          start connecting (0, or the errno of a failure at once)
//   void shut();                        stop the attempt's I/O and drop its queued output and
//                                       received input; operations under way still come back
//   void release();                     nothing is under way any more (close the socket)
//   void turn();                        at the end of each loop turn, before the machine: act
//                                       on what the backend recorded (connected_io, bytes_in,
//                                       fail)
//   void queue(Buffer);                 a request to send
//   void flush();                       hand the queued requests to the network
// and report through connected_io(), bytes_in(), frame_in() and fail(). Operations the backend
// has under way are counted in ops_ (the internals are freed only at zero).
//
// Thread: the reactor's; nothing is shared.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "base/assert.h"
#include "base/clock.h"
#include "base/log.h"
#include "io/offload.h"
#include "net/client_framing.h"
#include "net/client_login.h"

namespace samsa::net {

// Where a name or a numeric address resolves.
struct Resolved {
  int error = 0;  // positive errno (ENOENT for an unknown name)
  sockaddr_storage addr{};
  socklen_t len = 0;
};

// numeric_only: a name is not looked up (EAGAIN). May block on DNS: off the reactor for names.
Resolved resolve_endpoint(const std::string& host, std::uint16_t port, bool numeric_only,
                          int family);
// A key spreading resolutions over the offload threads.
std::uint64_t next_resolve_key();

template <class D>
class ClientMachine : protected io::TurnHook {
 public:
  // ---- what the handle calls (ClientHandle) ----
  void set_handle(ClientConnection* c) { handle_ = c; }
  void start() { attempt(); }

  bool send(Buffer frame) {
    // The connection belongs to its reactor: requests to it are posted there.
    SAMSA_ASSERT(io::Reactor::current() == &r_);
    if (state_ != State::connected || login_ || frame.size() == 0) return false;
    stats_.requests++;
    self().queue(std::move(frame));
    sent_at_.push_back(mono_ns());
    arm_deadline();
    wake();
    return true;
  }
  bool connected() const { return state_ == State::connected && !login_; }
  std::size_t inflight() const { return sent_at_.size(); }
  const ClientStats& stats() const { return stats_; }
  const std::string& host() const { return opts_.host; }
  std::uint16_t port() const { return opts_.port; }
  void reconnect() { fail(ECONNABORTED); }

  void set_endpoint(const std::string& host, std::uint16_t port) {
    if (host == opts_.host && port == opts_.port) return;
    opts_.host = host;
    opts_.port = port;
    if (state_ == State::connected || state_ == State::connecting || state_ == State::resolving)
      fail(ECONNABORTED);
  }

  // The handle is gone: no more callbacks; free once the backend is done with us.
  void orphan() {
    h_ = nullptr;
    handle_ = nullptr;
    r_.disarm(&backoff_timer_);
    r_.disarm(&deadline_timer_);
    if (state_ == State::connecting || state_ == State::connected) self().shut();
    state_ = State::gone;
    ++gen_;  // a resolution still on its way is ignored
    maybe_free();
  }

 protected:
  enum class State : std::uint8_t { backoff, resolving, connecting, connected, closing, gone };

  ClientMachine(io::Reactor& r, ClientHandler& h, ClientOptions o)
      : r_(r), h_(&h), opts_(std::move(o)), backoff_(reinterpret_cast<std::uintptr_t>(this)) {
    client_live_counter().fetch_add(1, std::memory_order_relaxed);
    deadline_timer_.fn = &ClientMachine::on_deadline;
    deadline_timer_.self = this;
    backoff_timer_.fn = &ClientMachine::on_backoff;
    backoff_timer_.self = this;
  }
  ~ClientMachine() { client_live_counter().fetch_sub(1, std::memory_order_relaxed); }

  // ---- what the backend calls ----
  // The attempt connected.
  void connected_io() {
    r_.disarm(&deadline_timer_);
    state_ = State::connected;
    stats_.connects++;
    if (opts_.security && opts_.security->mechanism) {
      // The SASL login comes first, within what is left of the connect timeout's budget (a
      // broker that never answers it must not hold the connection).
      login_ = std::make_unique<ClientLogin>(*opts_.security);
      self().queue(login_->start());
      sent_at_.push_back(mono_ns());
      r_.arm(&deadline_timer_, mono_ns() + opts_.connect_timeout_ms * 1'000'000);
      wake();
      return;
    }
    arm_deadline();
    notify([this] { h_->on_connected(*handle_); });
  }

  // A response while logging in: the next request, or the login's end.
  void login_frame(Buffer f) {
    Buffer next;
    std::string error;
    switch (login_->on_response(f, &next, &error)) {
      case ClientLogin::Result::more:
        self().queue(std::move(next));
        sent_at_.push_back(mono_ns());
        wake();
        return;
      case ClientLogin::Result::failed:
        LOG_WARN("connection to %s:%u: SASL login as %s failed: %s", opts_.host.c_str(),
                 unsigned(opts_.port), opts_.security->user.c_str(), error.c_str());
        fail(EACCES);
        return;
      case ClientLogin::Result::done:
        LOG_INFO("connection to %s:%u: logged in as %s with %s%s", opts_.host.c_str(),
                 unsigned(opts_.port), opts_.security->user.c_str(),
                 sasl::mechanism_name(*opts_.security->mechanism),
                 opts_.security->tls ? " over TLS" : "");
        login_.reset();
        r_.disarm(&deadline_timer_);
        backoff_.reset();
        notify([this] { h_->on_connected(*handle_); });
        return;
    }
  }

  // Received bytes: framed into responses. Returns how many were taken (it stops when the
  // connection fails or the handle goes).
  std::size_t bytes_in(const std::byte* p, std::size_t n) {
    std::size_t taken = 0;
    while (taken < n && state_ == State::connected && h_) {
      ResponseFramer::Result res;
      Buffer f;
      std::int32_t size = 0;
      const std::size_t used =
          framer_.feed(p + taken, n - taken, opts_.max_frame_bytes, &res, &f, &size);
      taken += used;
      stats_.bytes_in += used;
      if (res == ResponseFramer::Result::bad_size) {
        LOG_WARN("connection to %s:%u: response size %d outside 1..%u, reconnecting",
                 opts_.host.c_str(), unsigned(opts_.port), size, opts_.max_frame_bytes);
        fail(EPROTO);
        break;
      }
      if (res == ResponseFramer::Result::frame) frame_in(std::move(f));
    }
    return taken;
  }

  // A whole response (received straight into its buffer, framer_.direct_room).
  void frame_in(Buffer f) {
    if (sent_at_.empty()) {
      LOG_WARN("connection to %s:%u: a response to no request, reconnecting", opts_.host.c_str(),
               unsigned(opts_.port));
      fail(EPROTO);
      return;
    }
    sent_at_.pop_front();
    if (login_) {
      login_frame(std::move(f));
      return;
    }
    r_.disarm(&deadline_timer_);
    arm_deadline();
    stats_.responses++;
    backoff_.reset();
    notify([this, &f] { h_->on_response(*handle_, std::move(f)); });
  }

  // The attempt or the connection failed (or is given up): the handler hears at the end of this
  // turn, then the backoff runs once the backend's operations are back.
  void fail(int error) {
    if (state_ == State::closing || state_ == State::backoff || state_ == State::gone) return;
    if (state_ == State::connected) {
      stats_.disconnects++;
      LOG_DEBUG("connection to %s:%u lost: %s", opts_.host.c_str(), unsigned(opts_.port),
                std::strerror(error));
    } else {
      stats_.connect_failures++;
      LOG_DEBUG("connection to %s:%u: %s", opts_.host.c_str(), unsigned(opts_.port),
                std::strerror(error));
    }
    pending_error_ = error;
    state_ = State::closing;
    login_.reset();
    ++gen_;  // a resolution still on its way is ignored
    r_.disarm(&deadline_timer_);
    self().shut();
    sent_at_.clear();
    framer_.reset();
    wake();
  }

  // A backend operation came back in a state that no longer wants it.
  void stale_op_done() {
    if (state_ == State::closing) wake();
    maybe_free();
  }

  void wake() { r_.at_turn_end(this); }

  // Calls the handler, if there still is one. The handler may destroy the handle meanwhile;
  // the guard keeps the internals alive until the completion, hook or event that called it
  // returns.
  template <class F>
  void notify(F f) {
    if (!h_) return;
    ++in_callback_;
    f();
    --in_callback_;
  }

  // Frees the internals once the handle is gone and nothing can still reach them.
  void maybe_free() {
    if (h_ || ops_ > 0 || in_callback_ > 0 || TurnHook::queued) return;
    delete static_cast<D*>(this);
  }

  io::Reactor& r_;
  ClientHandler* h_;
  ClientConnection* handle_ = nullptr;
  ClientOptions opts_;
  ClientStats stats_;
  State state_ = State::backoff;
  int ops_ = 0;
  ResponseFramer framer_;

 private:
  struct MachineTimer : io::Timer {
    ClientMachine* self = nullptr;
  };
  D& self() { return *static_cast<D*>(this); }

  void attempt() {
    state_ = State::resolving;
    const std::uint64_t gen = ++gen_;
    Resolved numeric = resolve_endpoint(opts_.host, opts_.port, true, D::kFamily);
    if (numeric.error == 0) {
      open(numeric);
      return;
    }
    // A name: getaddrinfo may block on DNS, so it runs on the reactor's offload thread.
    ++ops_;
    io::offload(
        r_, next_resolve_key(),
        [host = opts_.host, port = opts_.port] {
          return resolve_endpoint(host, port, false, D::kFamily);
        },
        [this, gen](Resolved res) {
          --ops_;
          if (gen == gen_ && state_ == State::resolving) open(res);
          stale_op_done();
        });
  }

  void open(const Resolved& res) {
    if (res.error != 0) {
      fail(res.error);
      return;
    }
    state_ = State::connecting;
    if (int error = self().open(res); error != 0) {
      fail(error);
      return;
    }
    r_.arm(&deadline_timer_, mono_ns() + opts_.connect_timeout_ms * 1'000'000);
  }

  void on_turn_end() override {
    self().turn();
    if (!h_) {
      maybe_free();
      return;
    }
    if (state_ == State::connected) {
      self().flush();
      return;
    }
    if (state_ != State::closing) return;
    if (pending_error_ != 0) {
      const int err = pending_error_;
      pending_error_ = 0;
      notify([this, err] { h_->on_disconnected(*handle_, err); });
      if (!h_) {
        maybe_free();
        return;
      }
    }
    if (state_ != State::closing) return;  // the handler asked for something meanwhile
    if (ops_ > 0) return;                  // the last operation back wakes us again
    self().release();
    state_ = State::backoff;
    r_.arm(&backoff_timer_, mono_ns() + backoff_.next_ms(opts_) * 1'000'000);
  }

  static void on_backoff(io::Timer* t) {
    ClientMachine* self = static_cast<MachineTimer*>(t)->self;
    if (self->state_ == State::backoff) self->attempt();
  }

  // The connect timeout while connecting; the oldest request's deadline once connected.
  static void on_deadline(io::Timer* t) {
    ClientMachine* self = static_cast<MachineTimer*>(t)->self;
    if (self->state_ == State::connecting || (self->state_ == State::connected && self->login_)) {
      LOG_DEBUG("connection to %s:%u: %s timed out", self->opts_.host.c_str(),
                unsigned(self->opts_.port), self->login_ ? "the SASL login" : "connecting");
      self->fail(ETIMEDOUT);
      return;
    }
    if (self->state_ != State::connected || self->sent_at_.empty()) return;
    const std::int64_t due = self->sent_at_.front() + self->opts_.request_timeout_ms * 1'000'000;
    if (mono_ns() >= due) {
      LOG_WARN("connection to %s:%u: no response for %lld ms, reconnecting",
               self->opts_.host.c_str(), unsigned(self->opts_.port),
               static_cast<long long>(self->opts_.request_timeout_ms));
      self->fail(ETIMEDOUT);
      return;
    }
    self->r_.arm(&self->deadline_timer_, due);
  }

  void arm_deadline() {
    if (opts_.request_timeout_ms <= 0 || deadline_timer_.armed() || sent_at_.empty()) return;
    r_.arm(&deadline_timer_, sent_at_.front() + opts_.request_timeout_ms * 1'000'000);
  }

  std::unique_ptr<ClientLogin> login_;  // a SASL login under way
  std::uint64_t gen_ = 0;
  int pending_error_ = 0;
  int in_callback_ = 0;
  ClientBackoff backoff_;
  MachineTimer backoff_timer_;
  MachineTimer deadline_timer_;
  RingQueue<std::int64_t> sent_at_;  // send time of each request without its response
};

}  // namespace samsa::net
