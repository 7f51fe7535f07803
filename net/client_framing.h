// What every backend's ClientConnection shares (net/client_connection.h): cutting the response
// stream into frames, the backoff between attempts, and ClientCore (the handler and the rules
// for calling it, the request deadline, when the internals may be freed), so the backends
// behave alike.
//
// Thread: whichever owns the connection; no state is shared.
#pragma once

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "base/bytes.h"
#include "base/clock.h"
#include "base/log.h"
#include "io/reactor.h"
#include "net/buffer.h"
#include "net/client_connection.h"
#include "net/ring_queue.h"

namespace samsa::net {

// ClientConnection internals of every backend alive (ClientConnection::live_count()).
std::atomic<std::size_t>& client_live_counter();

// Kafka's framing from the client's side: a big-endian int32 size, then that many bytes.
class ResponseFramer {
 public:
  enum class Result : std::uint8_t { more, frame, bad_size };

  // Takes bytes from [p, p+n) up to the end of one frame. Returns how many it took and in
  // *res whether a frame is complete (moved to *out), more is needed, or the size announced is
  // outside 1..max (in *bad; the connection must go).
  std::size_t feed(const std::byte* p, std::size_t n, std::uint32_t max, Result* res, Buffer* out,
                   std::int32_t* bad) {
    const std::byte* start = p;
    *res = Result::more;
    if (!in_frame_) {
      const std::size_t take = std::min<std::size_t>(4 - hdr_have_, n);
      std::memcpy(hdr_ + hdr_have_, p, take);
      hdr_have_ += static_cast<std::uint32_t>(take);
      p += take;
      n -= take;
      if (hdr_have_ < 4) return static_cast<std::size_t>(p - start);
      const std::int32_t size = load_be<std::int32_t>(hdr_);
      hdr_have_ = 0;
      if (size <= 0 || static_cast<std::uint32_t>(size) > max) {
        *bad = size;
        *res = Result::bad_size;
        return static_cast<std::size_t>(p - start);
      }
      cur_ = Buffer(static_cast<std::size_t>(size));
      cur_have_ = 0;
      in_frame_ = true;
    }
    const std::size_t take = std::min(cur_.size() - cur_have_, n);
    std::memcpy(cur_.data() + cur_have_, p, take);
    cur_have_ += take;
    p += take;
    if (cur_have_ == cur_.size()) {
      *res = Result::frame;
      take_frame(out);
    }
    return static_cast<std::size_t>(p - start);
  }

  // Room left in the frame being received, for a receive straight into it (no copy): null
  // when between frames.
  std::byte* direct_room(std::size_t* len) {
    if (!in_frame_) return nullptr;
    *len = cur_.size() - cur_have_;
    return cur_.data() + cur_have_;
  }
  // n bytes arrived in direct_room(); true (and the frame in *out) when it is complete.
  bool direct_done(std::size_t n, Buffer* out) {
    cur_have_ += n;
    if (cur_have_ < cur_.size()) return false;
    take_frame(out);
    return true;
  }
  void reset() {
    in_frame_ = false;
    hdr_have_ = 0;
    cur_ = Buffer();
    cur_have_ = 0;
  }

 private:
  void take_frame(Buffer* out) {
    in_frame_ = false;
    *out = std::move(cur_);
    cur_ = Buffer();
    cur_have_ = 0;
  }

  std::byte hdr_[4]{};
  std::uint32_t hdr_have_ = 0;
  bool in_frame_ = false;
  Buffer cur_;
  std::size_t cur_have_ = 0;
};

// ClientOptions' backoff: min, doubled per failure up to max, less up to 20% jitter; a
// response resets it.
class ClientBackoff {
 public:
  explicit ClientBackoff(std::uint64_t seed) : rng_(seed | 1) {}
  std::int64_t next_ms(const ClientOptions& o) {
    std::int64_t b = ms_ == 0 ? o.backoff_min_ms : ms_;
    ms_ = std::min(b * 2, o.backoff_max_ms);
    rng_ ^= rng_ << 13;
    rng_ ^= rng_ >> 7;
    rng_ ^= rng_ << 17;
    const std::int64_t jitter = b / 5 > 0 ? static_cast<std::int64_t>(rng_ % (b / 5 + 1)) : 0;
    return std::max<std::int64_t>(b - jitter, 1);
  }
  void reset() { ms_ = 0; }

 private:
  std::int64_t ms_ = 0;
  std::uint64_t rng_;
};

// The part of a backend's connection internals D that does not depend on how bytes move. D
// derives from ClientCore<D> and provides connecting(), connected(), on_connect_deadline()
// (the connect timeout passed) and fail(int); it counts its operations still under way in
// ops_ and pushes each request's send time to sent_at_. deadline_timer_ is the connect timeout
// while connecting and the request deadline once connected.
template <class D>
class ClientCore : protected io::TurnHook {
 protected:
  ClientCore(io::Reactor& r, ClientHandler& h, ClientOptions o)
      : r_(r), h_(&h), opts_(std::move(o)) {
    client_live_counter().fetch_add(1, std::memory_order_relaxed);
    deadline_timer_.fn = &ClientCore::on_deadline;
    deadline_timer_.self = this;
  }
  ~ClientCore() { client_live_counter().fetch_sub(1, std::memory_order_relaxed); }

  void wake() { r_.at_turn_end(this); }

  static void on_deadline(io::Timer* t) {
    D* self = static_cast<D*>(static_cast<CoreTimer*>(t)->self);
    if (self->connecting()) {
      self->on_connect_deadline();
      return;
    }
    if (!self->connected() || self->sent_at_.empty()) return;
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

  struct CoreTimer : io::Timer {
    ClientCore* self = nullptr;
  };

  io::Reactor& r_;
  ClientHandler* h_;
  ClientConnection* handle_ = nullptr;
  ClientOptions opts_;
  int ops_ = 0;
  int in_callback_ = 0;
  CoreTimer deadline_timer_;
  RingQueue<std::int64_t> sent_at_;  // send time of each request without its response
};

// The handle a backend gives its user: every call goes to the internals D, which its
// destruction orphans (they free themselves once the backend has its operations back).
template <class D>
class ClientHandle final : public ClientConnection {
 public:
  explicit ClientHandle(D* d) : d_(d) {}
  ~ClientHandle() override { d_->orphan(); }
  bool send(Buffer frame) override { return d_->send(std::move(frame)); }
  bool connected() const override { return d_->connected(); }
  std::size_t inflight() const override { return d_->inflight(); }
  void reconnect() override { d_->reconnect(); }
  void set_endpoint(const std::string& host, std::uint16_t port) override {
    d_->set_endpoint(host, port);
  }
  const std::string& host() const override { return d_->host(); }
  std::uint16_t port() const override { return d_->port(); }
  const ClientStats& stats() const override { return d_->stats(); }

 private:
  D* d_;
};

// New internals D, their handle, and the first attempt.
template <class D, class... A>
std::unique_ptr<ClientConnection> make_client_handle(A&&... args) {
  auto* d = new D(std::forward<A>(args)...);
  auto handle = std::make_unique<ClientHandle<D>>(d);
  d->set_handle(handle.get());
  d->start();
  return handle;
}

}  // namespace samsa::net
