// Test support for the uring transport tests: a reactor thread running a UringTransport, a
// scriptable FrameHandler living on that thread, and plain blocking client sockets.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/bytes.h"
#include "base/thread.h"
#include "io/reactor.h"
#include "net/uring_transport.h"

namespace samsa::net::test {

inline std::string be32(std::int32_t v) {
  std::string s(4, '\0');
  store_be<std::int32_t>(reinterpret_cast<std::byte*>(s.data()), v);
  return s;
}

// A frame on the wire: size prefix, then the payload.
inline std::string frame(std::string_view payload) {
  return be32(static_cast<std::int32_t>(payload.size())) + std::string(payload);
}

inline Buffer to_buffer(std::string_view s) {
  Buffer b(s.size());
  std::memcpy(b.data(), s.data(), s.size());
  return b;
}

inline std::string to_string(const Buffer& b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

// An answer whose payload is s, as one piece (size prefix included).
inline Response answer_of(std::string_view s) {
  Response r;
  r.append(to_buffer(frame(s)));
  return r;
}

// Runs on the reactor thread. Default behaviour: echo every frame back as the answer.
struct TestHandler : FrameHandler {
  struct Held {
    Connection* conn;
    std::uint64_t seq;
    std::string payload;
  };
  // Replaces the echo when set.
  std::function<void(Connection&, std::uint64_t, Buffer&)> on_frame_fn;
  bool hold = false;  // keep frames in `held` instead of answering
  std::vector<Held> held;
  std::vector<Connection*> open_conns;
  std::atomic<int> opens{0};
  std::atomic<int> closes{0};
  std::atomic<std::uint64_t> frames{0};

  void on_open(Connection& c) override {
    ++opens;
    open_conns.push_back(&c);
  }
  void on_frame(Connection& c, std::uint64_t seq, Buffer f) override {
    ++frames;
    if (on_frame_fn) {
      on_frame_fn(c, seq, f);
    } else if (hold) {
      held.push_back({&c, seq, to_string(f)});
    } else {
      c.respond(seq, answer_of(to_string(f)));
    }
  }
  void on_close(Connection& c) override {
    ++closes;
    std::erase(open_conns, &c);
  }
};

inline ListenerConfig test_config() {
  ListenerConfig cfg;
  cfg.host = "127.0.0.1";
  cfg.port = 0;
  return cfg;
}

// A reactor on its own thread with a transport listening on 127.0.0.1.
class Server {
 public:
  explicit Server(FrameHandler& h, ListenerConfig cfg = test_config(),
                  std::string name = "test-reactor")
      : h_(h) {
    // Shared: set_value may still be touching the promise when get() returns.
    auto ready = std::make_shared<std::promise<std::string>>();
    auto started = ready->get_future();
    thread_ = std::thread([this, cfg, name, ready] {
      set_thread_name(name);
      auto r = io::Reactor::create({.name = name});
      if (!r) {
        ready->set_value("reactor: " + std::to_string(r.error()));
        return;
      }
      reactor_ = std::move(*r);
      transport_ = UringTransport::create(*reactor_, h_);
      std::string err;
      if (!transport_->listen(cfg, &err)) {
        transport_.reset();
        reactor_.reset();
        ready->set_value("listen: " + err);
        return;
      }
      port_ = transport_->port();
      ready->set_value("");
      reactor_->run();
      transport_.reset();
      reactor_.reset();
    });
    error_ = started.get();
  }
  ~Server() { stop(); }

  const std::string& error() const { return error_; }
  std::uint16_t port() const { return port_; }

  void stop() {
    if (!thread_.joinable()) return;
    if (reactor_) reactor_->stop();
    thread_.join();
  }

  // Runs f on the reactor thread and returns its result.
  template <class F>
  auto call(F f) -> decltype(f()) {
    using R = decltype(f());
    auto p = std::make_shared<std::promise<R>>();
    auto fut = p->get_future();
    reactor_->post_fn([&f, p] {
      if constexpr (std::is_void_v<R>) {
        f();
        p->set_value();
      } else {
        p->set_value(f());
      }
    });
    return fut.get();
  }

  UringTransportStats stats() {
    return call([this] { return transport_->stats(); });
  }
  UringTransport& transport() { return *transport_; }

  // Polls cond (evaluated on the reactor thread) until it holds or ~20 s pass.
  template <class F>
  bool wait_for(F cond) {
    for (int i = 0; i < 4000; ++i) {
      if (call(cond)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }

 private:
  FrameHandler& h_;
  std::thread thread_;
  std::unique_ptr<io::Reactor> reactor_;
  std::unique_ptr<UringTransport> transport_;
  std::uint16_t port_ = 0;
  std::string error_;
};

// A blocking client socket with a receive timeout so a broken server fails the test instead
// of hanging it.
class Client {
 public:
  explicit Client(std::uint16_t port, int rcv_timeout_ms = 20000) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0) {
      ADD_FAILURE() << "connect: " << std::strerror(errno);
      ::close(fd_);
      fd_ = -1;
      return;
    }
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    timeval tv{rcv_timeout_ms / 1000, (rcv_timeout_ms % 1000) * 1000};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~Client() {
    if (fd_ >= 0) ::close(fd_);
  }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  int fd() const { return fd_; }
  bool ok() const { return fd_ >= 0; }

  bool send_all(std::string_view s) {
    while (!s.empty()) {
      ssize_t n = ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      s.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  // Exactly n bytes, or fewer if the connection ends or the timeout passes.
  std::string recv_exact(std::size_t n) {
    std::string out(n, '\0');
    std::size_t got = 0;
    while (got < n) {
      ssize_t r = ::recv(fd_, out.data() + got, n - got, 0);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += static_cast<std::size_t>(r);
    }
    out.resize(got);
    return out;
  }

  // The payload of the next answer, or nullopt-like "\x01<closed>" marker on failure.
  std::string read_frame() {
    std::string h = recv_exact(4);
    if (h.size() != 4) return "<closed>";
    auto n = load_be<std::int32_t>(reinterpret_cast<const std::byte*>(h.data()));
    if (n < 0) return "<bad size>";
    std::string body = recv_exact(static_cast<std::size_t>(n));
    if (body.size() != static_cast<std::size_t>(n)) return "<closed>";
    return body;
  }

  // True once the server has closed the connection (EOF or reset); unread answers are
  // skipped. False if it is still open after the receive timeout.
  bool wait_closed() {
    char buf[4096];
    for (;;) {
      ssize_t r = ::recv(fd_, buf, sizeof buf, 0);
      if (r > 0) continue;
      if (r == 0) return true;
      if (errno == EINTR) continue;
      return errno == ECONNRESET || errno == EPIPE;
    }
  }

  // Abortive close: the peer sees a RST.
  void reset() {
    linger l{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

}  // namespace samsa::net::test
