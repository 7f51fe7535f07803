// The pieces of every backend's ClientConnection (net/client_connection.h): cutting the
// response stream into frames, the backoff between attempts, and the handle a user holds. The
// state machine that uses them is net/client_machine.h.
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
