#include "net/client_connection.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "base/bytes.h"
#include "base/clock.h"
#include "base/log.h"
#include "io/offload.h"
#include "net/client_framing.h"
#include "net/ring_queue.h"

namespace samsa::net {
namespace {

std::atomic<std::uint64_t> g_resolve_key{0};

// Receive scratch for small pieces (size prefixes, small answers); a body larger than this is
// received straight into its own buffer.
constexpr std::size_t kScratchBytes = 64 * 1024;
constexpr std::size_t kMaxIov = 64;

struct Resolved {
  int error = 0;  // positive errno (ENOENT for an unknown name)
  sockaddr_storage addr{};
  socklen_t len = 0;
};

Resolved resolve(const std::string& host, std::uint16_t port, bool numeric_only) {
  Resolved out;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (numeric_only ? AI_NUMERICHOST : 0);
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  int rc = ::getaddrinfo(host.empty() ? "127.0.0.1" : host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    out.error = rc == EAI_NONAME ? ENOENT : EHOSTUNREACH;
    return out;
  }
  std::memcpy(&out.addr, res->ai_addr, res->ai_addrlen);
  out.len = res->ai_addrlen;
  ::freeaddrinfo(res);
  return out;
}

class Impl final : ClientCore<Impl> {
  friend class ClientCore<Impl>;

 public:
  Impl(io::Reactor& r, ClientHandler& h, ClientOptions o)
      : ClientCore(r, h, std::move(o)),
        backoff_(reinterpret_cast<std::uintptr_t>(this)),
        scratch_(kScratchBytes) {
    connect_op_.fn = &Impl::on_connect;
    connect_op_.self = this;
    recv_op_.fn = &Impl::on_recv;
    recv_op_.self = this;
    send_op_.fn = &Impl::on_send;
    send_op_.self = this;
    backoff_timer_.fn = &Impl::on_backoff;
    backoff_timer_.self = this;
    iov_.reserve(kMaxIov);
  }
  ~Impl() {
    if (fd_ >= 0) ::close(fd_);
  }

  void set_handle(ClientConnection* c) { handle_ = c; }

  void start() { attempt(); }

  bool send(Buffer frame) {
    if (state_ != State::connected || frame.size() == 0) return false;
    stats_.requests++;
    send_q_.push_back(std::move(frame));
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

  // The handle is gone: no more callbacks; free once the kernel is done with us.
  void orphan() {
    h_ = nullptr;
    handle_ = nullptr;
    r_.disarm(&backoff_timer_);
    r_.disarm(&deadline_timer_);
    if (state_ != State::closing) shut();
    state_ = State::closing;
    ++gen_;  // a resolution still on its way is ignored
    maybe_free();
  }

 private:
  enum class State : std::uint8_t { backoff, resolving, connecting, connected, closing };
  struct Op : io::Completion {
    Impl* self = nullptr;
  };
  struct ImplTimer : io::Timer {
    Impl* self = nullptr;
  };

  // ---- connecting ----

  void attempt() {
    state_ = State::resolving;
    const std::uint64_t gen = ++gen_;
    Resolved numeric = resolve(opts_.host, opts_.port, true);
    if (numeric.error == 0) {
      resolved(gen, numeric);
      return;
    }
    // A name: getaddrinfo may block on DNS, so it runs on the reactor's offload thread.
    ++ops_;
    io::offload(
        r_, g_resolve_key.fetch_add(1, std::memory_order_relaxed),
        [host = opts_.host, port = opts_.port] { return resolve(host, port, false); },
        [this, gen](Resolved res) {
          --ops_;
          if (gen == gen_ && state_ == State::resolving) resolved(gen, res);
          if (state_ == State::closing) wake();
          maybe_free();
        });
  }

  void resolved(std::uint64_t, const Resolved& res) {
    if (res.error != 0) {
      attempt_failed(res.error);
      return;
    }
    addr_ = res.addr;
    addr_len_ = res.len;
    int fd = ::socket(addr_.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      attempt_failed(errno);
      return;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    if (opts_.socket_send_buffer_bytes > 0) {
      ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &opts_.socket_send_buffer_bytes, sizeof(int));
    }
    if (opts_.socket_receive_buffer_bytes > 0) {
      ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &opts_.socket_receive_buffer_bytes, sizeof(int));
    }
    fd_ = fd;
    state_ = State::connecting;
    timed_out_ = false;
    io_uring_sqe* s = r_.sqe(&connect_op_);
    io_uring_prep_connect(s, fd_, reinterpret_cast<sockaddr*>(&addr_), addr_len_);
    ++ops_;
    connect_pending_ = true;
    r_.arm(&deadline_timer_, mono_ns() + opts_.connect_timeout_ms * 1'000'000);
  }

  static void on_connect(io::Completion* c, int res, std::uint32_t) {
    Impl* self = static_cast<Op*>(c)->self;
    --self->ops_;
    self->connect_pending_ = false;
    if (self->state_ != State::connecting) {
      if (self->state_ == State::closing) self->wake();
      self->maybe_free();
      return;
    }
    if (res < 0) {
      self->attempt_failed(self->timed_out_ ? ETIMEDOUT : -res);
      return;
    }
    self->r_.disarm(&self->deadline_timer_);
    self->state_ = State::connected;
    self->stats_.connects++;
    self->arm_recv();
    self->notify([self] { self->h_->on_connected(*self->handle_); });
    self->maybe_free();
  }

  // An attempt that never connected: close what there is, wait the backoff, try again.
  void attempt_failed(int error) {
    stats_.connect_failures++;
    LOG_DEBUG("connection to %s:%u: %s", opts_.host.c_str(), unsigned(opts_.port),
              std::strerror(error));
    pending_error_ = error;
    begin_close();
  }

  // ---- failing and closing ----

  void fail(int error) {
    if (state_ == State::closing || state_ == State::backoff) return;
    if (state_ == State::connected) {
      stats_.disconnects++;
      LOG_DEBUG("connection to %s:%u lost: %s", opts_.host.c_str(), unsigned(opts_.port),
                std::strerror(error));
    } else {
      stats_.connect_failures++;
    }
    pending_error_ = error;
    begin_close();
  }

  void begin_close() {
    state_ = State::closing;
    ++gen_;
    r_.disarm(&deadline_timer_);
    shut();
    send_q_.clear();
    sent_at_.clear();
    framer_.reset();
    wake();  // on_turn_end reports it and, once the kernel is done, arms the backoff
  }

  // Stops the socket's operations; their completions still arrive.
  void shut() {
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
    if (connect_pending_) io_uring_prep_cancel(r_.sqe_noreply(), &connect_op_, 0);
    if (recv_pending_) io_uring_prep_cancel(r_.sqe_noreply(), &recv_op_, 0);
    if (send_pending_) io_uring_prep_cancel(r_.sqe_noreply(), &send_op_, 0);
  }

  void on_turn_end() override {
    if (state_ == State::connected) {
      flush();
      return;
    }
    if (state_ != State::closing) return;
    if (pending_error_ != 0) {
      const int err = pending_error_;
      pending_error_ = 0;
      notify([this, err] { h_->on_disconnected(*handle_, err); });
    }
    if (!h_) {
      maybe_free();
      return;
    }
    if (state_ != State::closing) return;  // the handler changed the endpoint and it restarted
    if (ops_ > 0) return;                  // the last completion wakes us again
    if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
    state_ = State::backoff;
    r_.arm(&backoff_timer_, mono_ns() + backoff_.next_ms(opts_) * 1'000'000);
  }

  static void on_backoff(io::Timer* t) {
    Impl* self = static_cast<ImplTimer*>(t)->self;
    if (self->state_ == State::backoff) self->attempt();
  }

  // The connect timeout: the cancelled connect reports ETIMEDOUT (on_connect).
  void on_connect_deadline() {
    timed_out_ = true;
    io_uring_prep_cancel(r_.sqe_noreply(), &connect_op_, 0);
  }

  // ---- receiving ----

  void arm_recv() {
    void* dst = scratch_.data();
    std::size_t len = kScratchBytes;
    std::size_t room = 0;
    std::byte* direct = framer_.direct_room(&room);
    if (direct && room >= kScratchBytes) {
      // A large body goes straight into its buffer: no copy.
      dst = direct;
      len = room;
      direct_ = true;
    } else {
      direct_ = false;
    }
    io_uring_sqe* s = r_.sqe(&recv_op_);
    io_uring_prep_recv(s, fd_, dst, len, 0);
    recv_pending_ = true;
    ++ops_;
  }

  static void on_recv(io::Completion* c, int res, std::uint32_t) {
    Impl* self = static_cast<Op*>(c)->self;
    --self->ops_;
    self->recv_pending_ = false;
    if (self->state_ != State::connected) {
      if (self->state_ == State::closing) self->wake();
      self->maybe_free();
      return;
    }
    if (res <= 0) {
      self->fail(res == 0 ? ECONNRESET : -res);
      return;
    }
    self->stats_.bytes_in += static_cast<std::uint64_t>(res);
    if (self->direct_) {
      Buffer f;
      if (self->framer_.direct_done(static_cast<std::size_t>(res), &f))
        self->frame_done(std::move(f));
    } else {
      self->consume(self->scratch_.data(), static_cast<std::size_t>(res));
    }
    if (!self->h_) {
      self->maybe_free();
      return;
    }
    if (self->state_ == State::connected) self->arm_recv();
  }

  // Frames bytes from the scratch buffer; stops when the handler drops the connection.
  void consume(const std::byte* p, std::size_t n) {
    while (n > 0 && state_ == State::connected && h_) {
      ResponseFramer::Result res;
      Buffer f;
      std::int32_t size = 0;
      const std::size_t used = framer_.feed(p, n, opts_.max_frame_bytes, &res, &f, &size);
      p += used;
      n -= used;
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

  // ---- sending ----

  void flush() {
    if (send_pending_ || send_q_.empty() || fd_ < 0) return;
    iov_.clear();
    std::size_t len = 0;
    for (std::size_t i = 0; i < send_q_.size() && iov_.size() < kMaxIov; ++i) {
      Buffer& b = send_q_[i];
      const std::size_t off = i == 0 ? front_off_ : 0;
      iov_.push_back(iovec{b.data() + off, b.size() - off});
      len += b.size() - off;
    }
    msg_ = msghdr{};
    msg_.msg_iov = iov_.data();
    msg_.msg_iovlen = iov_.size();
    io_uring_sqe* s = r_.sqe(&send_op_);
    io_uring_prep_sendmsg(s, fd_, &msg_, MSG_NOSIGNAL);
    send_pending_ = true;
    ++ops_;
  }

  static void on_send(io::Completion* c, int res, std::uint32_t) {
    Impl* self = static_cast<Op*>(c)->self;
    --self->ops_;
    self->send_pending_ = false;
    if (self->state_ != State::connected) {
      if (self->state_ == State::closing) self->wake();
      self->maybe_free();
      return;
    }
    if (res < 0) {
      self->fail(-res);
      return;
    }
    self->stats_.bytes_out += static_cast<std::uint64_t>(res);
    std::size_t n = static_cast<std::size_t>(res);
    while (n > 0 && !self->send_q_.empty()) {
      const std::size_t left = self->send_q_.front().size() - self->front_off_;
      if (n < left) {
        self->front_off_ += n;
        break;
      }
      n -= left;
      self->front_off_ = 0;
      self->send_q_.pop_front();
    }
    if (!self->send_q_.empty()) self->wake();
  }

  ClientStats stats_;
  State state_ = State::backoff;
  int fd_ = -1;
  std::uint64_t gen_ = 0;
  int pending_error_ = 0;
  bool timed_out_ = false;
  ClientBackoff backoff_;

  sockaddr_storage addr_{};
  socklen_t addr_len_ = 0;
  Op connect_op_, recv_op_, send_op_;
  bool connect_pending_ = false, recv_pending_ = false, send_pending_ = false;
  ImplTimer backoff_timer_;

  // Receiving: the size prefix, then the frame's own buffer.
  Buffer scratch_;
  bool direct_ = false;
  ResponseFramer framer_;

  // Sending: frames not yet wholly handed to the kernel (front_off_ into the first).
  RingQueue<Buffer> send_q_;
  std::size_t front_off_ = 0;
  std::vector<iovec> iov_;
  msghdr msg_{};
};

}  // namespace

std::atomic<std::size_t>& client_live_counter() {
  static std::atomic<std::size_t> live{0};
  return live;
}

std::unique_ptr<ClientConnection> ClientConnection::create(io::Reactor& r, ClientHandler& h,
                                                           ClientOptions o) {
  return make_client_handle<Impl>(r, h, std::move(o));
}

std::size_t ClientConnection::live_count() {
  return client_live_counter().load(std::memory_order_relaxed);
}

}  // namespace samsa::net
