// Many connections at once, two reactors sharing a port, drain (stop_accepting) and close_all.
#include <random>

#include "tests/unit/net/transport_harness.h"

namespace samsa::net::test {
namespace {

// Each of `threads` client threads opens conns_per_thread connections, pipelines `frames`
// requests on each, then reads and checks every answer.
void pipeline_clients(std::uint16_t port, int threads, int conns_per_thread, int frames) {
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([=] {
      std::mt19937 g(t);
      std::vector<std::unique_ptr<Client>> cs;
      std::vector<std::vector<std::string>> sent(conns_per_thread);
      for (int i = 0; i < conns_per_thread; ++i) {
        cs.push_back(std::make_unique<Client>(port));
        if (!cs.back()->ok()) return;
      }
      for (int i = 0; i < conns_per_thread; ++i) {
        std::string wire;
        for (int f = 0; f < frames; ++f) {
          std::string p = std::to_string(t) + "/" + std::to_string(i) + "/" + std::to_string(f);
          p.resize(p.size() + g() % 400, static_cast<char>('A' + f % 26));
          wire += frame(p);
          sent[i].push_back(std::move(p));
        }
        if (!cs[i]->send_all(wire)) {
          ADD_FAILURE() << "send failed";
          return;
        }
      }
      for (int i = 0; i < conns_per_thread; ++i) {
        for (const auto& p : sent[i]) {
          std::string got = cs[i]->read_frame();
          if (got != p) {
            ADD_FAILURE() << "expected " << p.substr(0, 20) << " got " << got.substr(0, 20);
            return;
          }
        }
      }
    });
  }
  for (auto& t : ts)
    t.join();
}

TEST(TransportScale, TwoHundredConnectionsEachPipelining) {
  TestHandler h;
  Server srv(h);
  ASSERT_EQ(srv.error(), "");
  pipeline_clients(srv.port(), 8, 25, 50);
  auto st = srv.stats();
  EXPECT_EQ(st.accepted, 200u);
  EXPECT_EQ(st.frames_in, 200u * 50u);
  EXPECT_EQ(h.frames.load(), 200u * 50u);
  // Clients have gone; every connection object is released.
  ASSERT_TRUE(srv.wait_for([&] { return h.closes.load() == 200; }));
  EXPECT_EQ(srv.call([&] { return srv.transport().connection_count(); }), 0u);
}

// A shared ring this small runs dry with many connections receiving at once.
TEST(TransportScale, ManyConnectionsOnATinyBufferRing) {
  TestHandler h;
  ListenerConfig cfg = test_config();
  cfg.recv_buffer_count = 8;
  cfg.recv_buffer_bytes = 512;
  Server srv(h, cfg);
  ASSERT_EQ(srv.error(), "");
  pipeline_clients(srv.port(), 4, 25, 40);
  EXPECT_EQ(h.frames.load(), 100u * 40u);
}

TEST(TransportScale, TwoReactorsShareThePortWithReusePort) {
  TestHandler h1, h2;
  Server a(h1, test_config(), "reactor-a");
  ASSERT_EQ(a.error(), "");
  ListenerConfig cfg = test_config();
  cfg.port = a.port();
  Server b(h2, cfg, "reactor-b");
  ASSERT_EQ(b.error(), "");
  ASSERT_EQ(b.port(), a.port());
  // The kernel hashes connections over both sockets; 64 all landing on one has odds 2^-63.
  pipeline_clients(a.port(), 4, 16, 10);
  const auto sa = a.stats(), sb = b.stats();
  EXPECT_EQ(sa.accepted + sb.accepted, 64u);
  EXPECT_GT(sa.accepted, 0u);
  EXPECT_GT(sb.accepted, 0u);
  EXPECT_EQ(h1.frames.load() + h2.frames.load(), 640u);
}

TEST(TransportScale, StopAcceptingKeepsExistingConnections) {
  TestHandler h;
  Server srv(h);
  ASSERT_EQ(srv.error(), "");
  Client c(srv.port());
  ASSERT_TRUE(c.send_all(frame("before")));
  EXPECT_EQ(c.read_frame(), "before");
  srv.call([&] { srv.transport().stop_accepting(); });
  // Once the cancelled accept reports back the listening socket is closed: refused.
  bool refused = false;
  for (int i = 0; i < 200 && !refused; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(srv.port());
    addr.sin_addr = server_addr();
    refused =
        ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0 && errno == ECONNREFUSED;
    ::close(fd);
    if (!refused) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(refused);
  ASSERT_TRUE(c.send_all(frame("after")));
  EXPECT_EQ(c.read_frame(), "after");
  EXPECT_EQ(srv.call([&] { return srv.transport().connection_count(); }), 1u);
}

TEST(TransportScale, CloseAllClosesEveryConnection) {
  TestHandler h;
  h.hold = true;  // some with answers outstanding
  Server srv(h);
  ASSERT_EQ(srv.error(), "");
  std::vector<std::unique_ptr<Client>> cs;
  for (int i = 0; i < 10; ++i) {
    cs.push_back(std::make_unique<Client>(srv.port()));
    if (i % 2) {
      ASSERT_TRUE(cs.back()->send_all(frame("held")));
    }
  }
  ASSERT_TRUE(srv.wait_for([&] { return h.opens.load() == 10 && h.held.size() == 5; }));
  srv.call([&] { srv.transport().close_all(); });
  for (auto& c : cs)
    EXPECT_TRUE(c->wait_closed());
  ASSERT_TRUE(srv.wait_for([&] { return h.closes.load() == 10; }));
  EXPECT_EQ(srv.call([&] { return srv.transport().connection_count(); }), 0u);
  // The held answers arrive after close: dropped, and the connections can now be freed.
  srv.call([&] {
    for (auto& x : h.held)
      x.conn->respond(x.seq, answer_of("late"));
  });
  EXPECT_EQ(srv.stats().bytes_out, 0u);
}

// Destroying the transport with connections open and answers outstanding must release
// everything (LeakSanitizer checks under ASan).
TEST(TransportScale, DestroyWithOpenConnections) {
  TestHandler h;
  h.hold = true;
  auto srv = std::make_unique<Server>(h);
  ASSERT_EQ(srv->error(), "");
  std::vector<std::unique_ptr<Client>> cs;
  for (int i = 0; i < 5; ++i) {
    cs.push_back(std::make_unique<Client>(srv->port()));
    ASSERT_TRUE(cs.back()->send_all(frame("x") + be32(100) + "partial"));
  }
  ASSERT_TRUE(srv->wait_for([&] { return h.held.size() == 5; }));
  srv.reset();
  EXPECT_EQ(h.closes.load(), 5);
  for (auto& c : cs)
    EXPECT_TRUE(c->wait_closed());
}

}  // namespace
}  // namespace samsa::net::test
