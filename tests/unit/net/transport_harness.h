// Test support for the transport tests: a reactor thread running a transport, a scriptable
// FrameHandler living on that thread, and plain blocking client sockets.
//
// The same tests run against both backends. Built plainly they drive the uring transport over
// loopback. Built with SAMSA_TRANSPORT_DPDK they drive the DPDK transport: the test process
// moves into a network namespace of its own with a veth pair, the kernel end (10.77.0.1, its
// checksum offload off) holds the clients, and DPDK drives the other end as 10.77.0.2 with the
// PMD named by SAMSA_TEST_DPDK_PMD (af_packet by default, af_xdp, or tap).
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
#include "net/uring/uring_transport.h"
#ifdef SAMSA_TRANSPORT_DPDK
#include <sched.h>

#include <cstdlib>

#include "net/dpdk/dpdk_transport.h"
#endif

namespace samsa::net::test {

#ifdef SAMSA_TRANSPORT_DPDK
using TransportType = DpdkTransport;
using TransportStats = DpdkTransportStats;
constexpr bool kDpdk = true;
constexpr const char* kServerIp = "10.77.0.2";
constexpr const char* kClientIp = "10.77.0.1";

// The process-wide DPDK stack and the namespace it runs in (set up on first use).
class DpdkEnv {
 public:
  static DpdkEnv& get() {
    static DpdkEnv env;
    return env;
  }
  DpdkStack* stack() { return stack_.get(); }
  const std::string& error() const { return error_; }
  io::Reactor* attached = nullptr;

 private:
  DpdkEnv() {
    if (::unshare(CLONE_NEWNET) != 0) {
      error_ = std::string("unshare(CLONE_NEWNET): ") + std::strerror(errno) + " (needs root)";
      return;
    }
    const char* pmd_env = std::getenv("SAMSA_TEST_DPDK_PMD");
    const std::string pmd = pmd_env && *pmd_env ? pmd_env : "af_packet";
    std::string vdev;
    std::string kernel_if = "sk0";
    std::vector<std::string> cmds = {"ip link set lo up"};
    if (pmd == "tap") {
      vdev = "--vdev=net_tap0,iface=dtap0";
      kernel_if = "dtap0";  // created by the PMD; configured below
    } else {
      cmds.push_back("ip link add sk0 type veth peer name sd0");
      cmds.push_back("sysctl -qw net.ipv6.conf.sd0.disable_ipv6=1");
      cmds.push_back("ip link set sd0 up");
      vdev = pmd == "af_xdp" ? "--vdev=net_af_xdp0,iface=sd0,start_queue=0,queue_count=1"
                             : "--vdev=net_af_packet0,iface=sd0";
    }
    auto run = [&](const std::string& c) {
      if (std::system((c + " >/dev/null 2>&1").c_str()) != 0) {
        error_ = "setting up the namespace failed: " + c;
        return false;
      }
      return true;
    };
    auto kernel_side = [&] {
      return run("sysctl -qw net.ipv6.conf." + kernel_if + ".disable_ipv6=1") &&
             run("ip addr add " + std::string(kClientIp) + "/24 dev " + kernel_if) &&
             run("ip link set " + kernel_if + " up") &&
             // A partial checksum (left for an offload) would reach DPDK as a bad one.
             run("ethtool -K " + kernel_if + " tx off");
    };
    for (const auto& c : cmds)
      if (!run(c)) return;
    if (pmd != "tap" && !kernel_side()) return;
    DpdkOptions o;
    o.eal_args = "--no-huge -m 256 --no-pci " + vdev;
    o.ip = kServerIp;
    o.netmask = "255.255.255.0";
    o.mbufs = 8191;
    auto s = DpdkStack::create(o);
    if (!s) {
      error_ = "DpdkStack::create: " + s.error();
      return;
    }
    stack_ = std::move(*s);
    if (pmd == "tap" && !kernel_side()) return;
  }
  std::unique_ptr<DpdkStack> stack_;
  std::string error_;
};
#else
using TransportType = UringTransport;
using TransportStats = UringTransportStats;
constexpr bool kDpdk = false;
constexpr const char* kServerIp = "127.0.0.1";
constexpr const char* kClientIp = "127.0.0.1";
#endif

// What a transport reads past its in-flight bounds before the peer's sends block: the uring
// transport's shared buffer ring (ring_bytes); the DPDK transport's TCP receive window, plus
// the chunks it credited back in the turn the bound was reached (at most a few 16 KiB).
inline std::size_t kReadAheadOfBound(std::size_t ring_bytes) {
#ifdef SAMSA_TRANSPORT_DPDK
  (void)ring_bytes;
  return kDpdkReceiveWindow + (64u << 10);
#else
  return ring_bytes;
#endif
}

// The address clients connect to.
inline in_addr server_addr() {
  in_addr a{};
  ::inet_pton(AF_INET, kServerIp, &a);
  return a;
}

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
  cfg.host = kDpdk ? "" : "127.0.0.1";
  cfg.port = 0;
  return cfg;
}

// A reactor on its own thread with a transport listening (on 127.0.0.1, or on the DPDK
// address; the first DPDK server's reactor also polls the device).
class Server {
 public:
  explicit Server(FrameHandler& h, ListenerConfig cfg = test_config(),
                  std::string name = "test-reactor")
      : h_(h) {
#ifdef SAMSA_TRANSPORT_DPDK
    DpdkEnv::get();  // on the test's thread: it moves into the namespace, clients with it
#endif
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
#ifdef SAMSA_TRANSPORT_DPDK
      DpdkEnv& env = DpdkEnv::get();
      if (!env.stack()) {
        reactor_.reset();
        ready->set_value(env.error());
        return;
      }
      const bool polls = env.attached == nullptr;
      if (polls) {
        env.stack()->attach(*reactor_);
        env.attached = reactor_.get();
      }
      auto detach = [&] {
        if (polls) {
          env.stack()->detach();
          env.attached = nullptr;
        }
      };
      transport_ = DpdkTransport::create(*reactor_, h_, *env.stack());
#else
      auto detach = [] {};
      transport_ = UringTransport::create(*reactor_, h_);
#endif
      std::string err;
      if (!transport_->listen(cfg, &err)) {
        transport_.reset();
        detach();
        reactor_.reset();
        ready->set_value("listen: " + err);
        return;
      }
      port_ = transport_->port();
      ready->set_value("");
      reactor_->run();
      transport_.reset();
      detach();
      reactor_.reset();
    });
    error_ = started.get();
  }
  ~Server() {
    stop();
  }

  const std::string& error() const {
    return error_;
  }
  std::uint16_t port() const {
    return port_;
  }

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

  TransportStats stats() {
    return call([this] { return transport_->stats(); });
  }
  TransportType& transport() {
    return *transport_;
  }

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
  std::unique_ptr<TransportType> transport_;
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
    a.sin_addr = server_addr();
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
