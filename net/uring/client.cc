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
#include "net/client_machine.h"
#include "net/ring_queue.h"

namespace samsa::net {
namespace {

// Receive scratch for small pieces (size prefixes, small answers); a body larger than this is
// received straight into its own buffer.
constexpr std::size_t kScratchBytes = 64 * 1024;
constexpr std::size_t kMaxIov = 64;

// The uring backend's outbound connection: a kernel socket whose connect, receives and sends
// are io_uring operations on the owning reactor's ring (ClientMachine does the rest).
class UringClient final : public ClientMachine<UringClient> {
  friend class ClientMachine<UringClient>;

 public:
  static constexpr int kFamily = AF_UNSPEC;

  UringClient(io::Reactor& r, ClientHandler& h, ClientOptions o)
      : ClientMachine(r, h, std::move(o)), scratch_(kScratchBytes) {
    connect_op_.fn = &UringClient::on_connect;
    connect_op_.self = this;
    recv_op_.fn = &UringClient::on_recv;
    recv_op_.self = this;
    send_op_.fn = &UringClient::on_send;
    send_op_.self = this;
    iov_.reserve(kMaxIov);
  }
  ~UringClient() {
    if (fd_ >= 0) ::close(fd_);
  }

 private:
  struct Op : io::Completion {
    UringClient* self = nullptr;
  };

  // ---- ClientMachine's hooks ----

  int open(const Resolved& res) {
    addr_ = res.addr;
    addr_len_ = res.len;
    int fd = ::socket(addr_.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return errno;
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
    io_uring_sqe* s = r_.sqe(&connect_op_);
    io_uring_prep_connect(s, fd_, reinterpret_cast<sockaddr*>(&addr_), addr_len_);
    ++ops_;
    connect_pending_ = true;
    return 0;
  }

  // Stops the socket's operations; their completions still arrive.
  void shut() {
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
    if (connect_pending_) io_uring_prep_cancel(r_.sqe_noreply(), &connect_op_, 0);
    if (recv_pending_) io_uring_prep_cancel(r_.sqe_noreply(), &recv_op_, 0);
    if (send_pending_) io_uring_prep_cancel(r_.sqe_noreply(), &send_op_, 0);
    send_q_.clear();
    front_off_ = 0;
  }

  void release() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    tls_.reset();
    tls_out_.clear();
    tls_out_off_ = 0;
  }

  void turn() {}

  void queue(Buffer frame) { send_q_.push_back(std::move(frame)); }

  void flush() {
    if (tls_) return tls_flush();
    if (send_pending_ || send_q_.empty() || fd_ < 0) return;
    iov_.clear();
    for (std::size_t i = 0; i < send_q_.size() && iov_.size() < kMaxIov; ++i) {
      Buffer& b = send_q_[i];
      const std::size_t off = i == 0 ? front_off_ : 0;
      iov_.push_back(iovec{b.data() + off, b.size() - off});
    }
    msg_ = msghdr{};
    msg_.msg_iov = iov_.data();
    msg_.msg_iovlen = iov_.size();
    io_uring_sqe* s = r_.sqe(&send_op_);
    io_uring_prep_sendmsg(s, fd_, &msg_, MSG_NOSIGNAL);
    send_pending_ = true;
    ++ops_;
  }

  // ---- completions ----

  static void on_connect(io::Completion* c, int res, std::uint32_t) {
    UringClient* self = static_cast<Op*>(c)->self;
    --self->ops_;
    self->connect_pending_ = false;
    if (self->state_ != State::connecting) return self->stale_op_done();
    if (res < 0) return self->fail(-res);
    const auto& sec = self->opts_.security;
    if (sec && sec->tls) {
      // The TLS handshake runs within the connect timeout; connected once it is done.
      self->tls_ = std::make_unique<tls::Session>(sec->tls, self->opts_.host);
      if (self->tls_->failed()) return self->tls_failed();
      self->arm_recv();
      self->tls_flush();
      return;
    }
    self->arm_recv();
    self->connected_io();
    self->maybe_free();
  }

  void tls_failed() {
    LOG_WARN("connection to %s:%u: %s", opts_.host.c_str(), unsigned(opts_.port),
             tls_->error().c_str());
    fail(EPROTO);
  }

  bool io_wanted() const {
    return state_ == State::connected || (state_ == State::connecting && tls_);
  }

  // Ciphertext received: the handshake first, then plaintext on to the framing.
  void tls_in(std::size_t n) {
    if (!tls_->feed(reinterpret_cast<const std::uint8_t*>(scratch_.data()), n)) return tls_failed();
    if (state_ == State::connecting && tls_->handshake_done()) connected_io();
    while (state_ == State::connected && h_) {
      auto plain = tls_->plain();
      if (plain.empty()) break;
      bytes_in(reinterpret_cast<const std::byte*>(plain.data()), plain.size());
      tls_->consume_plain(plain.size());
    }
    if (tls_ && tls_->failed()) return tls_failed();
    if (io_wanted()) tls_flush();
  }

  // Encrypts the queued requests (once the handshake is done) and sends the ciphertext, one
  // sendmsg at a time from a buffer of ours (the session's may move while the kernel reads).
  void tls_flush() {
    if (send_pending_ || fd_ < 0 || !tls_) return;
    if (tls_out_off_ == tls_out_.size()) {
      tls_out_.clear();
      tls_out_off_ = 0;
      while (tls_->handshake_done() && !send_q_.empty()) {
        Buffer& b = send_q_.front();
        const std::size_t want = b.size() - front_off_;
        const std::size_t took =
            tls_->write_plain(reinterpret_cast<const std::uint8_t*>(b.data()) + front_off_, want);
        front_off_ += took;
        if (took < want) break;
        front_off_ = 0;
        send_q_.pop_front();
      }
      auto out = tls_->pending_out();
      if (out.empty()) return;
      tls_out_.assign(out.begin(), out.end());
      tls_->consume_out(out.size());
    }
    iov_.clear();
    iov_.push_back(iovec{tls_out_.data() + tls_out_off_, tls_out_.size() - tls_out_off_});
    msg_ = msghdr{};
    msg_.msg_iov = iov_.data();
    msg_.msg_iovlen = 1;
    io_uring_prep_sendmsg(r_.sqe(&send_op_), fd_, &msg_, MSG_NOSIGNAL);
    send_pending_ = true;
    ++ops_;
  }

  void arm_recv() {
    void* dst = scratch_.data();
    std::size_t len = kScratchBytes;
    std::size_t room = 0;
    std::byte* direct = tls_ ? nullptr : framer_.direct_room(&room);
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
    UringClient* self = static_cast<Op*>(c)->self;
    --self->ops_;
    self->recv_pending_ = false;
    if (!self->io_wanted()) return self->stale_op_done();
    if (res <= 0) return self->fail(res == 0 ? ECONNRESET : -res);
    const auto n = static_cast<std::size_t>(res);
    if (self->tls_) {
      self->tls_in(n);
    } else if (self->direct_) {
      self->stats_.bytes_in += n;
      Buffer f;
      if (self->framer_.direct_done(n, &f)) self->frame_in(std::move(f));
    } else {
      self->bytes_in(self->scratch_.data(), n);
    }
    if (!self->h_) return self->maybe_free();
    if (self->io_wanted()) self->arm_recv();
  }

  static void on_send(io::Completion* c, int res, std::uint32_t) {
    UringClient* self = static_cast<Op*>(c)->self;
    --self->ops_;
    self->send_pending_ = false;
    if (!self->io_wanted()) return self->stale_op_done();
    if (res < 0) return self->fail(-res);
    self->stats_.bytes_out += static_cast<std::uint64_t>(res);
    std::size_t n = static_cast<std::size_t>(res);
    if (self->tls_) {
      self->tls_out_off_ += n;  // the requests were taken when encrypted
      if (self->tls_out_off_ < self->tls_out_.size() || !self->send_q_.empty() ||
          !self->tls_->pending_out().empty())
        self->tls_flush();
      return;
    }
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

  int fd_ = -1;
  sockaddr_storage addr_{};
  socklen_t addr_len_ = 0;
  Op connect_op_, recv_op_, send_op_;
  bool connect_pending_ = false, recv_pending_ = false, send_pending_ = false;

  // Receiving: the size prefix, then the frame's own buffer.
  Buffer scratch_;
  bool direct_ = false;

  // Sending: frames not yet wholly handed to the kernel (front_off_ into the first).
  RingQueue<Buffer> send_q_;
  std::size_t front_off_ = 0;
  std::vector<iovec> iov_;
  msghdr msg_{};

  // TLS (ClientSecurity::tls): the session, and the ciphertext being sent.
  std::unique_ptr<tls::Session> tls_;
  std::vector<std::uint8_t> tls_out_;
  std::size_t tls_out_off_ = 0;
};

}  // namespace

Resolved resolve_endpoint(const std::string& host, std::uint16_t port, bool numeric_only,
                          int family) {
  Resolved out;
  addrinfo hints{};
  hints.ai_family = family;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (numeric_only ? AI_NUMERICHOST : 0);
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  int rc = ::getaddrinfo(host.empty() ? "127.0.0.1" : host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    out.error = rc == EAI_NONAME ? (numeric_only ? EAGAIN : ENOENT) : EHOSTUNREACH;
    return out;
  }
  std::memcpy(&out.addr, res->ai_addr, res->ai_addrlen);
  out.len = res->ai_addrlen;
  ::freeaddrinfo(res);
  return out;
}

std::uint64_t next_resolve_key() {
  static std::atomic<std::uint64_t> key{0};
  return key.fetch_add(1, std::memory_order_relaxed);
}

std::atomic<std::size_t>& client_live_counter() {
  static std::atomic<std::size_t> live{0};
  return live;
}

std::unique_ptr<ClientConnection> ClientConnection::create(io::Reactor& r, ClientHandler& h,
                                                           ClientOptions o) {
  return make_client_handle<UringClient>(r, h, std::move(o));
}

std::size_t ClientConnection::live_count() {
  return client_live_counter().load(std::memory_order_relaxed);
}

}  // namespace samsa::net
