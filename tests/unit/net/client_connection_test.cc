// net::ClientConnection over loopback: a reactor on the test thread drives the client; the
// servers are plain blocking sockets on their own threads, each connection scripted by the test.
// Built with SAMSA_CLIENT_DPDK (dpdk.unit.net.client_connection_test.*) the same tests drive the
// DPDK backend's outbound connection (DpdkStack::connect): the process moves into a network
// namespace with a veth pair (transport_harness.h's DpdkEnv), the servers listen on the kernel
// end and the client's stack polls the other end from the test's reactor.
#include "net/client_connection.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "base/bytes.h"
#include "base/clock.h"
#include "io/reactor.h"
#ifdef SAMSA_CLIENT_DPDK
#define SAMSA_TRANSPORT_DPDK 1
#include "tests/unit/net/transport_harness.h"
#endif

namespace samsa::net {
namespace {

#ifdef SAMSA_CLIENT_DPDK
constexpr bool kDpdkClient = true;
// The kernel end of the veth pair: where the servers listen and the client connects.
constexpr const char* kServerHost = "10.77.0.1";
#else
constexpr bool kDpdkClient = false;
constexpr const char* kServerHost = "127.0.0.1";
#endif

in_addr server_host() {
  in_addr a{};
  ::inet_pton(AF_INET, kServerHost, &a);
  return a;
}

// A loopback listener whose accepted connections each run `serve(fd, index)` on the server
// thread, one after another (a client has one connection at a time).
class Server {
 public:
  using Serve = std::function<void(int fd, int index)>;
  explicit Server(Serve serve, std::uint16_t port = 0) : serve_(std::move(serve)) {
    lfd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(lfd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr = server_host();
    a.sin_port = htons(port);
    if (::bind(lfd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ADD_FAILURE() << "bind: " << std::strerror(errno);
    }
    ::listen(lfd_, 16);
    socklen_t len = sizeof a;
    ::getsockname(lfd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~Server() {
    stop_ = true;
    thread_.join();
    ::close(lfd_);
  }
  std::uint16_t port() const { return port_; }
  int accepted() const { return accepted_.load(); }

 private:
  void run() {
    while (!stop_) {
      pollfd p{lfd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      int fd = ::accept4(lfd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      const int index = accepted_.fetch_add(1);
      serve_(fd, index);
      ::close(fd);
    }
  }
  Serve serve_;
  int lfd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

bool read_full(int fd, void* p, std::size_t n) {
  auto* b = static_cast<char*>(p);
  while (n > 0) {
    pollfd pf{fd, POLLIN, 0};
    if (::poll(&pf, 1, 5000) <= 0) return false;
    ssize_t r = ::recv(fd, b, n, 0);
    if (r <= 0) return false;
    b += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

bool write_full(int fd, const void* p, std::size_t n) {
  auto* b = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t r = ::send(fd, b, n, MSG_NOSIGNAL);
    if (r <= 0) return false;
    b += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

// Reads one frame (without its prefix); empty when the peer closed.
std::vector<char> read_frame(int fd) {
  std::byte hdr[4];
  if (!read_full(fd, hdr, 4)) return {};
  std::vector<char> f(load_be<std::uint32_t>(hdr));
  if (!read_full(fd, f.data(), f.size())) return {};
  return f;
}

void write_frame(int fd, const std::vector<char>& body) {
  std::byte hdr[4];
  store_be<std::uint32_t>(hdr, static_cast<std::uint32_t>(body.size()));
  write_full(fd, hdr, 4);
  write_full(fd, body.data(), body.size());
}

// Echoes every frame back, reversed (so a response is not the request by accident), until the
// peer closes or `limit` frames were answered.
Server::Serve echo(int limit = -1) {
  return [limit](int fd, int) {
    for (int n = 0; limit < 0 || n < limit; ++n) {
      auto f = read_frame(fd);
      if (f.empty()) return;
      std::reverse(f.begin(), f.end());
      write_frame(fd, f);
    }
  };
}

// A listener that never accepts, its backlog filled: the kernel drops further SYNs, so a
// connect hangs as it does toward an isolated broker.
class BlackHole {
 public:
  BlackHole() {
    lfd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr = server_host();
    ::bind(lfd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(lfd_, 0);
    socklen_t len = sizeof a;
    ::getsockname(lfd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    for (int i = 0; i < 4; ++i) {
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
      fillers_.push_back(fd);
    }
    ::usleep(50000);  // the fillers' handshakes fill the queue
  }
  ~BlackHole() {
    for (int fd : fillers_)
      ::close(fd);
    ::close(lfd_);
  }
  std::uint16_t port() const { return port_; }

 private:
  int lfd_ = -1;
  std::uint16_t port_ = 0;
  std::vector<int> fillers_;
};

Buffer frame_of(const std::vector<char>& body) {
  Buffer b(4 + body.size());
  store_be<std::uint32_t>(b.data(), static_cast<std::uint32_t>(body.size()));
  std::memcpy(b.data() + 4, body.data(), body.size());
  return b;
}

std::vector<char> body_of(std::size_t n, int seed) {
  std::vector<char> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<char>((i * 131 + static_cast<std::size_t>(seed) * 7) & 0xff);
  return v;
}

struct Recorder : ClientHandler {
  void on_connected(ClientConnection& c) override {
    ++connected;
    if (on_conn) on_conn(c);
  }
  void on_response(ClientConnection& c, Buffer f) override {
    responses.emplace_back(reinterpret_cast<const char*>(f.data()),
                           reinterpret_cast<const char*>(f.data()) + f.size());
    if (on_resp) on_resp(c);
  }
  void on_disconnected(ClientConnection&, int error) override { errors.push_back(error); }
  int connected = 0;
  std::vector<std::vector<char>> responses;
  std::vector<int> errors;
  std::function<void(ClientConnection&)> on_conn;
  std::function<void(ClientConnection&)> on_resp;
};

class ClientConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = io::Reactor::create({.name = "client-test"});
    ASSERT_TRUE(r.has_value());
    reactor_ = std::move(*r);
#ifdef SAMSA_CLIENT_DPDK
    auto& env = test::DpdkEnv::get();
    if (!env.stack()) GTEST_FAIL() << env.error();
    env.stack()->attach(*reactor_);
#endif
  }
  void TearDown() override {
    // Every internal is freed once the kernel (or the stack) has returned its operations.
    EXPECT_TRUE(reactor_->run_until([] { return ClientConnection::live_count() == 0; }, 5e9));
#ifdef SAMSA_CLIENT_DPDK
    if (auto* s = test::DpdkEnv::get().stack()) s->detach();
#endif
  }
  // The backend's connection under test.
  std::unique_ptr<ClientConnection> connect(ClientHandler& h, ClientOptions o) {
#ifdef SAMSA_CLIENT_DPDK
    return test::DpdkEnv::get().stack()->connect(*reactor_, h, std::move(o));
#else
    return ClientConnection::create(*reactor_, h, std::move(o));
#endif
  }
  ClientOptions opts(std::uint16_t port) {
    ClientOptions o;
    o.host = kServerHost;
    o.port = port;
    o.backoff_min_ms = 20;
    o.backoff_max_ms = 80;
    return o;
  }
  // A few loop turns after a connection went, so its close reaches the server's thread before
  // the server is joined (the DPDK stack sends what it queued when its reactor polls).
  void settle() {
    run([] { return false; }, 20);
  }
  template <class P>
  bool run(P p, std::int64_t ms = 5000) {
    return reactor_->run_until(p, ms * 1'000'000);
  }
  std::unique_ptr<io::Reactor> reactor_;
};

TEST_F(ClientConnectionTest, PipelinedRequestsGetTheirResponsesInOrder) {
  Server server(echo());
  Recorder h;
  auto c = connect(h, opts(server.port()));
  EXPECT_FALSE(c->send(frame_of(body_of(10, 0))));  // not connected yet
  ASSERT_TRUE(run([&] { return c->connected(); }));
  // Sizes around the scratch buffer and the direct-receive path, several MiB in all.
  std::vector<std::size_t> sizes = {1, 3, 4, 5, 100, 65535, 65536, 65537, 200000, 1 << 20};
  for (int i = 0; i < 40; ++i)
    sizes.push_back(static_cast<std::size_t>((i * 7919) % 150000 + 1));
  for (std::size_t i = 0; i < sizes.size(); ++i)
    ASSERT_TRUE(c->send(frame_of(body_of(sizes[i], static_cast<int>(i)))));
  EXPECT_EQ(c->inflight(), sizes.size());
  ASSERT_TRUE(run([&] { return h.responses.size() == sizes.size(); }));
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    auto want = body_of(sizes[i], static_cast<int>(i));
    std::reverse(want.begin(), want.end());
    ASSERT_EQ(h.responses[i], want) << "response " << i;
  }
  EXPECT_EQ(c->inflight(), 0u);
  EXPECT_EQ(c->stats().responses, sizes.size());
  EXPECT_EQ(h.connected, 1);
  EXPECT_TRUE(h.errors.empty());
}

TEST_F(ClientConnectionTest, ReconnectsWhenTheServerCloses) {
  // Every connection answers two frames of three, then closes (having read all three: unread
  // input would turn the close into a RST, which may destroy the answers before the client
  // reads them).
  Server server([](int fd, int) {
    std::vector<std::vector<char>> got;
    for (int i = 0; i < 3; ++i) {
      got.push_back(read_frame(fd));
      if (got.back().empty()) return;
    }
    write_frame(fd, got[0]);
    write_frame(fd, got[1]);
  });
  Recorder h;
  auto c = connect(h, opts(server.port()));
  h.on_conn = [](ClientConnection& c) {
    c.send(frame_of(body_of(10, 1)));
    c.send(frame_of(body_of(10, 2)));
    c.send(frame_of(body_of(10, 3)));  // never answered: the server closes first
  };
  ASSERT_TRUE(run([&] { return h.connected >= 3 && h.errors.size() >= 2; }));
  EXPECT_GE(h.responses.size(), 4u);
  for (int e : h.errors)
    EXPECT_TRUE(e == ECONNRESET || e == EPIPE) << std::strerror(e);
  EXPECT_GE(c->stats().disconnects, 2u);
  EXPECT_EQ(c->stats().connects, static_cast<std::uint64_t>(h.connected));
}

TEST_F(ClientConnectionTest, RefusedAttemptsBackOffUntilTheServerAppears) {
  // Take a free port, then leave it unused.
  std::uint16_t port;
  {
    Server probe([](int, int) {});
    port = probe.port();
  }
  Recorder h;
  auto c = connect(h, opts(port));
  run([] { return false; }, 400);
  // 20, 40, 80, 80, ... ms (less up to 20% jitter): about 6 attempts in 400 ms, not hundreds.
  EXPECT_GE(h.errors.size(), 3u);
  EXPECT_LE(h.errors.size(), 12u);
  for (int e : h.errors)
    EXPECT_EQ(e, ECONNREFUSED);
  EXPECT_FALSE(c->connected());
  Server server(echo(), port);
  ASSERT_TRUE(run([&] { return c->connected(); }));
  ASSERT_TRUE(c->send(frame_of(body_of(7, 0))));
  ASSERT_TRUE(run([&] { return h.responses.size() == 1; }));
  c.reset();  // before the server, whose thread serves the connection until it closes
  settle();
}

TEST_F(ClientConnectionTest, BadResponseSizeReconnects) {
  Server server([](int fd, int index) {
    auto f = read_frame(fd);
    if (f.empty()) return;
    if (index == 0) {
      std::byte hdr[4];
      store_be<std::int32_t>(hdr, -5);
      write_full(fd, hdr, 4);
      read_frame(fd);  // until the client closes
      return;
    }
    write_frame(fd, f);
    read_frame(fd);  // the connection stays: a close here would be a second error
  });
  Recorder h;
  auto c = connect(h, opts(server.port()));
  h.on_conn = [](ClientConnection& c) { c.send(frame_of(body_of(5, 0))); };
  ASSERT_TRUE(run([&] { return h.responses.size() == 1; }));
  ASSERT_EQ(h.errors.size(), 1u);
  EXPECT_EQ(h.errors[0], EPROTO);
  EXPECT_EQ(h.connected, 2);
  c.reset();
  settle();
}

TEST_F(ClientConnectionTest, UnansweredRequestTimesOut) {
  std::atomic<bool> done{false};
  Server server([&](int fd, int index) {
    auto f = read_frame(fd);
    if (index == 0) {
      read_frame(fd);  // silent until the client gives up
      return;
    }
    if (!f.empty()) write_frame(fd, f);
    done = true;
  });
  Recorder h;
  auto o = opts(server.port());
  o.request_timeout_ms = 200;
  auto c = connect(h, o);
  h.on_conn = [](ClientConnection& c) { c.send(frame_of(body_of(5, 0))); };
  const std::int64_t start = mono_ms();
  ASSERT_TRUE(run([&] { return !h.errors.empty(); }));
  EXPECT_GE(mono_ms() - start, 190);
  EXPECT_EQ(h.errors[0], ETIMEDOUT);
  ASSERT_TRUE(run([&] { return h.responses.size() == 1; }));
}

TEST_F(ClientConnectionTest, DestroyedInsideItsOwnCallback) {
  Server server(echo());
  Recorder h;
  auto c = connect(h, opts(server.port()));
  h.on_conn = [](ClientConnection& c) {
    for (int i = 0; i < 5; ++i)
      c.send(frame_of(body_of(100000, i)));
  };
  h.on_resp = [&](ClientConnection&) { c.reset(); };
  ASSERT_TRUE(run([&] { return c == nullptr; }));
  EXPECT_EQ(h.responses.size(), 1u);  // nothing after the handle went
  // TearDown checks the internals were freed.
}

TEST_F(ClientConnectionTest, DestroyedWhileConnecting) {
  BlackHole hole;
  Recorder h;
  auto c = connect(h, opts(hole.port()));
  run([] { return false; }, 50);
  c.reset();
  EXPECT_TRUE(h.errors.empty());
}

TEST_F(ClientConnectionTest, ConnectTimeout) {
  BlackHole hole;
  Recorder h;
  auto o = opts(hole.port());
  o.connect_timeout_ms = 100;
  auto c = connect(h, o);
  const std::int64_t start = mono_ms();
  ASSERT_TRUE(run([&] { return h.errors.size() >= 2; }));
  EXPECT_EQ(h.errors[0], ETIMEDOUT) << std::strerror(h.errors[0]);
  EXPECT_EQ(h.errors[1], ETIMEDOUT) << std::strerror(h.errors[1]);
  EXPECT_GE(mono_ms() - start, 190);
}

TEST_F(ClientConnectionTest, ResolvesNamesAndFollowsEndpointChanges) {
  Server a(echo());
  Server b(echo());
  Recorder h;
  auto o = opts(a.port());
  // A name (the DPDK stack cannot reach the loopback address "localhost" names: there, the
  // veth's kernel end by number).
  o.host = kDpdkClient ? kServerHost : "localhost";
  auto c = connect(h, o);
  ASSERT_TRUE(run([&] { return c->connected() && a.accepted() == 1; }));
  c->set_endpoint(kServerHost, b.port());
  EXPECT_FALSE(c->connected());
  ASSERT_TRUE(run([&] { return c->connected() && b.accepted() == 1; }));
  ASSERT_TRUE(c->send(frame_of(body_of(3, 0))));
  ASSERT_TRUE(run([&] { return h.responses.size() == 1; }));
  ASSERT_EQ(h.errors.size(), 1u);
  EXPECT_EQ(h.errors[0], ECONNABORTED);
  EXPECT_EQ(c->host(), kServerHost);
  c.reset();
  settle();
}

TEST_F(ClientConnectionTest, UnknownNameFailsAndRetries) {
  Recorder h;
  auto o = opts(9092);
  o.host = "no-such-host.invalid";
  auto c = connect(h, o);
  ASSERT_TRUE(run([&] { return h.errors.size() >= 2; }));
  EXPECT_FALSE(c->connected());
}

#ifdef SAMSA_CLIENT_DPDK
// As on samsad's reactors other than the polling one: the stack polled by another reactor on
// its own thread, the connection's bytes and requests crossing the reactors' task queues.
TEST_F(ClientConnectionTest, OwnedByAReactorThatDoesNotPoll) {
  Server server(echo());
  DpdkStack* stack = test::DpdkEnv::get().stack();
  stack->detach();
  std::atomic<io::Reactor*> poller{nullptr};
  std::thread t([&] {
    auto pr = io::Reactor::create({.name = "stack-poller"});
    if (!pr) return;
    std::unique_ptr<io::Reactor> r = std::move(*pr);
    stack->attach(*r);
    poller = r.get();
    r->run();
    stack->detach();
  });
  while (!poller.load())
    ::usleep(1000);
  Recorder h;
  auto c = connect(h, opts(server.port()));
  ASSERT_TRUE(run([&] { return c->connected(); }));
  std::vector<std::size_t> sizes = {1, 5, 65537, 1 << 20, 3 << 20};
  for (std::size_t i = 0; i < sizes.size(); ++i)
    ASSERT_TRUE(c->send(frame_of(body_of(sizes[i], static_cast<int>(i)))));
  ASSERT_TRUE(run([&] { return h.responses.size() == sizes.size(); }, 20000));
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    auto want = body_of(sizes[i], static_cast<int>(i));
    std::reverse(want.begin(), want.end());
    ASSERT_EQ(h.responses[i], want) << "response " << i;
  }
  c->reconnect();  // a reset from this side, then a new connection through the queues
  ASSERT_TRUE(run([&] { return h.connected == 2; }));
  ASSERT_TRUE(c->send(frame_of(body_of(9, 9))));
  ASSERT_TRUE(run([&] { return h.responses.size() == sizes.size() + 1; }));
  c.reset();
  EXPECT_TRUE(run([] { return ClientConnection::live_count() == 0; }));
  poller.load()->stop();
  t.join();
  stack->attach(*reactor_);  // TearDown detaches
}
#endif

}  // namespace
}  // namespace samsa::net
