// The uring transport: the per-reactor listening socket (SO_REUSEPORT), multishot accept and
// the transport's lifetime. The connections are in uring_connection.cc.
#include "net/uring/uring_transport.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "base/clock.h"
#include "base/log.h"
#include "net/uring/connection.h"

namespace samsa::net {
namespace uring {
namespace {

// Accept failures that persist (EMFILE, ENFILE, ENOMEM) are retried after this long instead
// of spinning.
constexpr std::int64_t kAcceptRetryMs = 100;

std::string format_peer(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = "?";
  unsigned port = 0;
  if (ss.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(ss);
    ::inet_ntop(AF_INET, &a.sin_addr, host, sizeof host);
    port = ntohs(a.sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  if (ss.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(ss);
    ::inet_ntop(AF_INET6, &a.sin6_addr, host, sizeof host);
    port = ntohs(a.sin6_port);
    return "[" + std::string(host) + "]:" + std::to_string(port);
  }
  return "?";
}

}  // namespace

TransportImpl::TransportImpl(io::Reactor& r, FrameHandler& h) : TransportBase(r, h) {
  conn_stats_ = &stats_;
  accept_op_.fn = &TransportImpl::on_accept;
  accept_op_.self = this;
  retry_timer_.fn = &TransportImpl::on_retry;
  retry_timer_.self = this;
}

bool TransportImpl::listen(const ListenerConfig& cfg, std::string* error) {
  auto fail = [&](std::string msg) {
    if (error) *error = std::move(msg);
    return false;
  };
  if (lfd_ >= 0 || bufs_) return fail("already listening");
  cfg_ = cfg;

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(cfg.port);
  int rc = ::getaddrinfo(cfg.host.empty() ? nullptr : cfg.host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) return fail("resolving " + cfg.host + ": " + ::gai_strerror(rc));
  std::string last_error = "no address";
  int fd = -1;
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last_error = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    // Set on the listening socket so accepted ones inherit them (the receive buffer decides
    // the window scale offered in the handshake).
    if (cfg.socket_send_buffer_bytes > 0) {
      ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &cfg.socket_send_buffer_bytes, sizeof(int));
    }
    if (cfg.socket_receive_buffer_bytes > 0) {
      ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &cfg.socket_receive_buffer_bytes, sizeof(int));
    }
    // Every reactor binds the same address; the kernel hashes new connections over them.
    if (::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0 ||
        ::bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || ::listen(fd, cfg.backlog) < 0) {
      last_error = std::strerror(errno);
      ::close(fd);
      fd = -1;
      continue;
    }
    break;
  }
  ::freeaddrinfo(res);
  if (fd < 0) return fail("listening on " + cfg.host + ":" + port + ": " + last_error);

  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  port_ = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(ss).sin6_port
                                         : reinterpret_cast<sockaddr_in&>(ss).sin_port);

  auto bufs = ProvidedBuffers::create(r_.ring(), cfg.recv_buffer_count, cfg.recv_buffer_bytes);
  if (!bufs) {
    ::close(fd);
    return fail(std::string("registering the receive buffer ring: ") +
                std::strerror(-bufs.error()));
  }
  bufs_ = std::move(*bufs);
  lfd_ = fd;
  accepting_ = true;
  arm_accept();
  LOG_DEBUG("%s: listening on %s:%u", r_.name().c_str(), cfg.host.c_str(), unsigned(port_));
  return true;
}

void TransportImpl::arm_accept() {
  io_uring_prep_multishot_accept(r_.sqe(&accept_op_), lfd_, nullptr, nullptr, SOCK_CLOEXEC);
  accept_armed_ = true;
}

void TransportImpl::on_accept(io::Completion* c, int res, std::uint32_t flags) {
  TransportImpl* self = static_cast<AcceptOp*>(c)->self;
  if (!(flags & IORING_CQE_F_MORE)) self->accept_armed_ = false;
  bool transient = false;
  if (res >= 0) {
    if (self->accepting_) {
      self->adopt(res);
    } else {
      ::close(res);
    }
  } else if (res != -ECANCELED) {
    transient = res == -EMFILE || res == -ENFILE || res == -ENOMEM || res == -ENOBUFS;
    LOG_WARN("%s: accept: %s", self->r_.name().c_str(), std::strerror(-res));
  }
  if (self->accept_armed_) return;
  if (self->accepting_) {
    if (transient) {
      self->r_.arm(&self->retry_timer_, mono_ns() + kAcceptRetryMs * 1'000'000);
    } else {
      self->arm_accept();
    }
  } else if (self->lfd_ >= 0) {
    ::close(self->lfd_);
    self->lfd_ = -1;
  }
}

void TransportImpl::on_retry(io::Timer* t) {
  TransportImpl* self = static_cast<RetryTimer*>(t)->self;
  if (self->accepting_ && !self->accept_armed_) self->arm_accept();
}

void TransportImpl::adopt(int fd) {
  int one = 1;
  // As Kafka's acceptor: answers go out at once, and dead peers are found eventually.
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  std::string peer = ::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0
                         ? format_peer(ss)
                         : std::string("?");
  auto tls = cfg_.tls ? cfg_.tls() : nullptr;
  if (tls && stats_.tls_pending >= cfg_.tls_max_pending) {
    // Logged at most once a second: a flood must not flood the log too.
    ++stats_.tls_refused;
    if (const std::int64_t now = mono_ns(); now - tls_refused_logged_ns_ > 1'000'000'000) {
      LOG_WARN(
          "%s: %llu TLS handshakes under way (samsa.ssl.max.pending.handshakes); closing "
          "new connections such as %s (%llu so far)",
          r_.name().c_str(), static_cast<unsigned long long>(stats_.tls_pending), peer.c_str(),
          static_cast<unsigned long long>(stats_.tls_refused));
      tls_refused_logged_ns_ = now;
    }
    ::close(fd);
    return;
  }
  auto* c = new UringConnection(*this, fd, std::move(peer), std::move(tls));
  add(c);
  c->start();
}

void TransportImpl::stop_accepting() {
  if (!accepting_) return;
  accepting_ = false;
  r_.disarm(&retry_timer_);
  if (accept_armed_) {
    // The listening socket closes when the cancelled accept reports back.
    io_uring_prep_cancel(r_.sqe_noreply(), &accept_op_, 0);
  } else if (lfd_ >= 0) {
    ::close(lfd_);
    lfd_ = -1;
  }
}

TransportImpl::~TransportImpl() {
  stop_accepting();
  close_all();
  dying_ = true;
  wake_each();
  // The kernel may still write into connection buffers and the buffer ring until the cancelled
  // operations report back; run the loop until they have.
  const bool done = r_.run_until([&] { return !accept_armed_ && no_connections(); });
  if (!done) {
    LOG_ERROR("%s: transport destroyed with operations still in the kernel; leaking them",
              r_.name().c_str());
    bufs_.release();
    return;
  }
  if (lfd_ >= 0) ::close(lfd_);
}

}  // namespace uring

bool check_address_free(const std::string& host, std::uint16_t port, std::string* error) {
  if (port == 0) return true;  // an ephemeral port cannot collide
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string p = std::to_string(port);
  int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), p.c_str(), &hints, &res);
  if (rc != 0) {
    if (error) *error = "resolving " + host + ": " + ::gai_strerror(rc);
    return false;
  }
  bool ok = true;
  for (addrinfo* ai = res; ai && ok; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno == EADDRINUSE) {
      ok = false;
      if (error) *error = host + ":" + p + " is already in use by another process";
    }
    ::close(fd);
    break;  // the first address is the one listen() takes
  }
  ::freeaddrinfo(res);
  return ok;
}

std::unique_ptr<UringTransport> UringTransport::create(io::Reactor& r, FrameHandler& h) {
  return std::make_unique<uring::TransportImpl>(r, h);
}

std::unique_ptr<Transport> make_uring_transport(io::Reactor& r, FrameHandler& h) {
  return UringTransport::create(r, h);
}

}  // namespace samsa::net
