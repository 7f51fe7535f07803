// Framing over real loopback sockets: frames split anywhere, many per send, spanning many
// receive buffers, and sizes the transport must refuse.
#include <random>

#include "tests/unit/net/transport_harness.h"

namespace samsa::net::test {
namespace {

std::string random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::string s(n, '\0');
  for (auto& c : s)
    c = static_cast<char>(g());
  return s;
}

TEST(TransportFraming, EchoesOneFrame) {
  TestHandler h;
  Server srv(h);
  ASSERT_EQ(srv.error(), "");
  Client c(srv.port());
  ASSERT_TRUE(c.send_all(frame("hello")));
  EXPECT_EQ(c.read_frame(), "hello");
  EXPECT_EQ(h.frames.load(), 1u);
  EXPECT_EQ(h.opens.load(), 1);
}

TEST(TransportFraming, PeerIsTheClientsAddress) {
  TestHandler h;
  Server srv(h);
  ASSERT_EQ(srv.error(), "");
  Client c(srv.port());
  ASSERT_TRUE(c.send_all(frame("who")));
  EXPECT_EQ(c.read_frame(), "who");
  sockaddr_in me{};
  socklen_t len = sizeof me;
  ::getsockname(c.fd(), reinterpret_cast<sockaddr*>(&me), &len);
  EXPECT_EQ(srv.call([&] { return h.open_conns.at(0)->peer(); }),
            std::string(kClientIp) + ":" + std::to_string(ntohs(me.sin_port)));
}

TEST(TransportFraming, ListensOnIpv6) {
  TestHandler h;
  ListenerConfig cfg = test_config();
  cfg.host = "::1";
  Server srv(h, cfg);
  if (kDpdk) {
    // The DPDK backend speaks IPv4 only: an IPv6 listener is refused, naming the address.
    EXPECT_NE(srv.error().find("listener host ::1"), std::string::npos) << srv.error();
    return;
  }
  if (srv.error().find("Cannot assign") != std::string::npos ||
      srv.error().find("not supported") != std::string::npos) {
    GTEST_SKIP() << "no IPv6 loopback here: " << srv.error();
  }
  ASSERT_EQ(srv.error(), "");
  int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(srv.port());
  a.sin6_addr = in6addr_loopback;
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const std::string f = frame("v6");
  ASSERT_EQ(::send(fd, f.data(), f.size(), MSG_NOSIGNAL), static_cast<ssize_t>(f.size()));
  char buf[6];
  ASSERT_EQ(::recv(fd, buf, sizeof buf, MSG_WAITALL), 6);
  EXPECT_EQ(std::string(buf + 4, 2), "v6");
  EXPECT_TRUE(srv.call([&] { return h.open_conns.at(0)->peer(); }).starts_with("[::1]:"));
  ::close(fd);
}

TEST(TransportFraming, ManyFramesInOneSend) {
  TestHandler h;
  Server srv(h);
  ASSERT_EQ(srv.error(), "");
  Client c(srv.port());
  std::vector<std::string> payloads;
  std::string wire;
  for (int i = 0; i < 500; ++i) {
    payloads.push_back(std::to_string(i) + ":" + random_bytes(1 + (i * 37) % 300, i));
    wire += frame(payloads.back());
  }
  ASSERT_TRUE(c.send_all(wire));
  for (const auto& p : payloads)
    ASSERT_EQ(c.read_frame(), p);
  // Several answers ready in one turn go out in one sendmsg.
  EXPECT_LT(srv.stats().sends, 500u);
}

struct SplitParam {
  std::uint32_t buffer_bytes;
  std::uint32_t buffer_count;
};

class TransportSplit : public ::testing::TestWithParam<SplitParam> {};

// The server sees the two frames cut at every byte boundary: each prefix is consumed by the
// server before the rest is sent, so every cut really reaches the frame assembler.
TEST_P(TransportSplit, FramesSplitAtEveryByteBoundary) {
  TestHandler h;
  ListenerConfig cfg = test_config();
  cfg.recv_buffer_bytes = GetParam().buffer_bytes;
  cfg.recv_buffer_count = GetParam().buffer_count;
  Server srv(h, cfg);
  ASSERT_EQ(srv.error(), "");
  Client c(srv.port());
  const std::string a = "first frame, long enough to span small buffers";
  const std::string b = "2nd";
  const std::string wire = frame(a) + frame(b);
  for (std::size_t cut = 1; cut < wire.size(); ++cut) {
    const std::uint64_t before = srv.stats().bytes_in;
    ASSERT_TRUE(c.send_all(std::string_view(wire).substr(0, cut)));
    ASSERT_TRUE(srv.wait_for([&] { return srv.transport().stats().bytes_in == before + cut; }))
        << "cut " << cut;
    ASSERT_TRUE(c.send_all(std::string_view(wire).substr(cut)));
    ASSERT_EQ(c.read_frame(), a) << "cut " << cut;
    ASSERT_EQ(c.read_frame(), b) << "cut " << cut;
  }
  EXPECT_EQ(h.frames.load(), 2 * (wire.size() - 1));
}

INSTANTIATE_TEST_SUITE_P(BufferSizes, TransportSplit,
                         ::testing::Values(SplitParam{16384, 256}, SplitParam{8, 4},
                                           SplitParam{3, 2}));

// Frames far larger than one provided buffer, and a ring so small that it runs dry while a
// single frame arrives: the recv ends with ENOBUFS and must be re-armed.
TEST(TransportFraming, LargeFramesAcrossTinyBufferRing) {
  TestHandler h;
  ListenerConfig cfg = test_config();
  cfg.recv_buffer_bytes = 64;
  cfg.recv_buffer_count = 4;
  Server srv(h, cfg);
  ASSERT_EQ(srv.error(), "");
  Client c(srv.port());
  std::vector<std::string> payloads;
  std::string wire;
  for (int i = 0; i < 4; ++i) {
    payloads.push_back(random_bytes(100'000 + i, 100 + i));
    wire += frame(payloads.back());
  }
  std::thread sender([&] { c.send_all(wire); });
  for (const auto& p : payloads)
    ASSERT_EQ(c.read_frame(), p);
  sender.join();
  auto st = srv.stats();
#ifndef SAMSA_TRANSPORT_DPDK  // a provided-buffer ring is the uring transport's
  EXPECT_GT(st.recv_enobufs, 0u);
#endif
  EXPECT_EQ(st.frames_in, 4u);
}

class TransportBadSize : public ::testing::TestWithParam<std::int32_t> {};

TEST_P(TransportBadSize, ClosesTheConnection) {
  TestHandler h;
  ListenerConfig cfg = test_config();
  cfg.limits.max_frame_bytes = 1000;
  Server srv(h, cfg);
  ASSERT_EQ(srv.error(), "");
  {
    Client c(srv.port());
    ASSERT_TRUE(c.send_all(frame("ok")));
    EXPECT_EQ(c.read_frame(), "ok");
    ASSERT_TRUE(c.send_all(be32(GetParam()) + "trailing bytes"));
    EXPECT_TRUE(c.wait_closed());
  }
  ASSERT_TRUE(srv.wait_for([&] { return h.closes.load() == 1; }));
  auto st = srv.stats();
  EXPECT_EQ(st.bad_frames, 1u);
  EXPECT_EQ(st.frames_in, 1u);
  // The transport keeps serving others.
  Client d(srv.port());
  ASSERT_TRUE(d.send_all(frame("still here")));
  EXPECT_EQ(d.read_frame(), "still here");
}

INSTANTIATE_TEST_SUITE_P(Sizes, TransportBadSize,
                         ::testing::Values(0, -1, -1000, INT32_MIN, 1001, INT32_MAX));

TEST(TransportFraming, FrameOfExactlyTheLimitIsAccepted) {
  TestHandler h;
  ListenerConfig cfg = test_config();
  cfg.limits.max_frame_bytes = 1000;
  Server srv(h, cfg);
  ASSERT_EQ(srv.error(), "");
  Client c(srv.port());
  const std::string p = random_bytes(1000, 7);
  ASSERT_TRUE(c.send_all(frame(p)));
  EXPECT_EQ(c.read_frame(), p);
}

TEST(TransportFraming, PeerResetMidFrame) {
  TestHandler h;
  Server srv(h);
  ASSERT_EQ(srv.error(), "");
  {
    Client c(srv.port());
    ASSERT_TRUE(c.send_all(frame("whole")));
    EXPECT_EQ(c.read_frame(), "whole");
    ASSERT_TRUE(c.send_all(be32(5000) + random_bytes(1234, 1)));
    const std::uint64_t want = 4 + 5 + 4 + 1234;
    ASSERT_TRUE(srv.wait_for([&] { return srv.transport().stats().bytes_in == want; }));
    c.reset();
  }
  ASSERT_TRUE(srv.wait_for([&] { return h.closes.load() == 1; }));
  EXPECT_EQ(srv.call([&] { return srv.transport().connection_count(); }), 0u);
  EXPECT_EQ(h.frames.load(), 1u);
  Client d(srv.port());
  ASSERT_TRUE(d.send_all(frame("next")));
  EXPECT_EQ(d.read_frame(), "next");
}

// Garbage from many peers at once must never take the process down.
TEST(TransportFraming, RandomInputNeverCrashes) {
  TestHandler h;
  ListenerConfig cfg = test_config();
  cfg.limits.max_frame_bytes = 4096;
  cfg.recv_buffer_bytes = 32;
  cfg.recv_buffer_count = 8;
  Server srv(h, cfg);
  ASSERT_EQ(srv.error(), "");
  std::mt19937 g(42);
  for (int i = 0; i < 40; ++i) {
    Client c(srv.port());
    std::string junk = random_bytes(g() % 20000, g());
    if (i % 3 == 0) junk = frame(random_bytes(g() % 100, g())) + junk;
    c.send_all(junk);
    if (i % 2) c.reset();
  }
  ASSERT_TRUE(srv.wait_for([&] { return srv.transport().connection_count() == 0; }));
  Client d(srv.port());
  ASSERT_TRUE(d.send_all(frame("alive")));
  EXPECT_EQ(d.read_frame(), "alive");
}

}  // namespace
}  // namespace samsa::net::test
