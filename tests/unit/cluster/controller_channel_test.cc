// The reactor-backed ControllerChannel (what a DPDK broker's cluster link uses), here over the
// uring backend's ClientConnection and a kernel server on loopback: answers come back in
// order, a silent peer times out, a closing peer fails at once, the stop flag ends a wait,
// a refused connect fails within its bound, a channel reconnects after a failure, and a
// stopped reactor does not hang disconnect().
#include "daemon/cluster/controller_channel.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "base/clock.h"

namespace samsa::cluster {
namespace {

// A reactor on a thread of its own, as reactor 0 is for the cluster link.
class ReactorThread {
 public:
  ReactorThread() {
    std::atomic<bool> ready{false};
    t_ = std::thread([this, &ready] {
      auto r = io::Reactor::create({.name = "test-reactor"});
      ASSERT_TRUE(r.has_value());
      r_ = std::move(*r);
      ready.store(true);
      r_->run();
    });
    while (!ready.load())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~ReactorThread() { stop(); }
  void stop() {
    if (!t_.joinable()) return;
    r_->stop();
    t_.join();
  }
  io::Reactor& reactor() { return *r_; }

 private:
  std::unique_ptr<io::Reactor> r_;
  std::thread t_;
};

enum class Mode { echo, silent, close };

// One connection at a time on 127.0.0.1: echoes each frame back (size prefix included),
// never answers, or closes after reading a frame.
class Server {
 public:
  explicit Server(Mode m) : mode_(m) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(fd_, 8), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    t_ = std::thread([this] { run(); });
  }
  ~Server() {
    done_.store(true);
    ::shutdown(fd_, SHUT_RDWR);
    // A client the test left open (its reactor stopped under it) must not hold the thread.
    if (const int c = conn_.load(); c >= 0) ::shutdown(c, SHUT_RDWR);
    t_.join();
    ::close(fd_);
  }
  std::uint16_t port() const { return port_; }
  int accepted() const { return accepted_.load(); }

 private:
  static bool read_exact(int c, std::byte* p, std::size_t n) {
    while (n > 0) {
      ssize_t k = ::recv(c, p, n, 0);
      if (k <= 0) return false;
      p += k;
      n -= static_cast<std::size_t>(k);
    }
    return true;
  }
  void run() {
    while (!done_.load()) {
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      accepted_.fetch_add(1);
      conn_.store(c);
      for (;;) {
        std::byte hdr[4];
        if (!read_exact(c, hdr, 4)) break;
        const std::uint32_t n = (std::to_integer<std::uint32_t>(hdr[0]) << 24) |
                                (std::to_integer<std::uint32_t>(hdr[1]) << 16) |
                                (std::to_integer<std::uint32_t>(hdr[2]) << 8) |
                                std::to_integer<std::uint32_t>(hdr[3]);
        std::vector<std::byte> body(n);
        if (!read_exact(c, body.data(), n)) break;
        if (mode_ == Mode::close) break;
        if (mode_ == Mode::silent) continue;
        body.insert(body.begin(), hdr, hdr + 4);  // one send: no Nagle wait between pieces
        ::send(c, body.data(), body.size(), MSG_NOSIGNAL);
      }
      conn_.store(-1);
      ::close(c);
    }
  }

  Mode mode_;
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> done_{false};
  std::atomic<int> accepted_{0};
  std::atomic<int> conn_{-1};
  std::thread t_;
};

std::vector<std::byte> frame_of(const std::string& text) {
  std::vector<std::byte> f(4 + text.size());
  const auto n = static_cast<std::uint32_t>(text.size());
  for (int i = 0; i < 4; ++i)
    f[static_cast<std::size_t>(i)] = static_cast<std::byte>(n >> (24 - 8 * i));
  std::memcpy(f.data() + 4, text.data(), text.size());
  return f;
}

std::string text_of(const std::vector<std::byte>& b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

TEST(ReactorControllerChannel, AnswersInOrderAndReconnects) {
  Server s(Mode::echo);
  ReactorThread rt;
  auto ch = reactor_controller_channel(rt.reactor(), {});
  std::atomic<bool> stop{false};
  ASSERT_TRUE(ch->connect("127.0.0.1", s.port()));
  EXPECT_TRUE(ch->connected());
  for (int i = 0; i < 20; ++i) {
    const std::string msg = "request-" + std::to_string(i);
    auto a = ch->exchange(frame_of(msg), 2000, stop);
    ASSERT_TRUE(a.has_value()) << i;
    EXPECT_EQ(text_of(*a), msg);
  }
  ch->disconnect();
  EXPECT_FALSE(ch->connected());
  EXPECT_FALSE(ch->exchange(frame_of("x"), 200, stop).has_value());
  ASSERT_TRUE(ch->connect("127.0.0.1", s.port()));
  auto a = ch->exchange(frame_of("again"), 2000, stop);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(text_of(*a), "again");
  EXPECT_EQ(s.accepted(), 2);
  ch->disconnect();
  // The uring internals go once the kernel has returned their cancelled operations.
  const std::int64_t end = mono_ms() + 2000;
  while (net::ClientConnection::live_count() != 0 && mono_ms() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(net::ClientConnection::live_count(), 0u);
}

TEST(ReactorControllerChannel, RefusedConnectFailsWithinItsBound) {
  std::uint16_t port = 0;
  {
    Server s(Mode::echo);
    port = s.port();
  }  // nothing listens there now
  ReactorThread rt;
  auto ch = reactor_controller_channel(rt.reactor(), {});
  const std::int64_t t0 = mono_ms();
  EXPECT_FALSE(ch->connect("127.0.0.1", port));
  EXPECT_LT(mono_ms() - t0, 1600);
  EXPECT_FALSE(ch->connected());
  const std::int64_t end = mono_ms() + 2000;
  while (net::ClientConnection::live_count() != 0 && mono_ms() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(net::ClientConnection::live_count(), 0u);
}

TEST(ReactorControllerChannel, SilentPeerTimesOut) {
  Server s(Mode::silent);
  ReactorThread rt;
  auto ch = reactor_controller_channel(rt.reactor(), {});
  std::atomic<bool> stop{false};
  ASSERT_TRUE(ch->connect("127.0.0.1", s.port()));
  const std::int64_t t0 = mono_ms();
  EXPECT_FALSE(ch->exchange(frame_of("hello"), 300, stop).has_value());
  const std::int64_t took = mono_ms() - t0;
  EXPECT_GE(took, 290);
  EXPECT_LT(took, 1000);
}

TEST(ReactorControllerChannel, ClosingPeerFailsAtOnce) {
  Server s(Mode::close);
  ReactorThread rt;
  auto ch = reactor_controller_channel(rt.reactor(), {});
  std::atomic<bool> stop{false};
  ASSERT_TRUE(ch->connect("127.0.0.1", s.port()));
  const std::int64_t t0 = mono_ms();
  EXPECT_FALSE(ch->exchange(frame_of("hello"), 5000, stop).has_value());
  EXPECT_LT(mono_ms() - t0, 1000);
}

TEST(ReactorControllerChannel, StopFlagEndsTheWait) {
  Server s(Mode::silent);
  ReactorThread rt;
  auto ch = reactor_controller_channel(rt.reactor(), {});
  std::atomic<bool> stop{false};
  ASSERT_TRUE(ch->connect("127.0.0.1", s.port()));
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    stop.store(true);
  });
  const std::int64_t t0 = mono_ms();
  EXPECT_FALSE(ch->exchange(frame_of("hello"), 10'000, stop).has_value());
  EXPECT_LT(mono_ms() - t0, 1000);
  stopper.join();
}

TEST(ReactorControllerChannel, StoppedReactorDoesNotHangDisconnect) {
  Server s(Mode::silent);
  ReactorThread rt;
  auto ch = reactor_controller_channel(rt.reactor(), {});
  std::atomic<bool> stop{false};
  ASSERT_TRUE(ch->connect("127.0.0.1", s.port()));
  rt.stop();  // the reactor goes away under the channel (its connection is left, not touched)
  const std::int64_t t0 = mono_ms();
  EXPECT_FALSE(ch->exchange(frame_of("hello"), 5000, stop).has_value());
  ch->disconnect();
  EXPECT_LT(mono_ms() - t0, 500);
}

}  // namespace
}  // namespace samsa::cluster
