// Answers leave in request order whatever order the handler completes them in; skip(); what
// happens to answers around a close.
#include <sys/socket.h>

#include <algorithm>
#include <random>

#include "tests/unit/net/transport_harness.h"

namespace samsa::net::test {
namespace {

std::string numbered(int i) {
  return "request " + std::to_string(i);
}

TEST(TransportOrdering, OutOfOrderCompletionIsAnsweredInOrder) {
  TestHandler h;
  h.hold = true;
  Server srv(h);
  ASSERT_EQ(srv.error(), "");
  Client c(srv.port());
  constexpr int kN = 40;
  std::string wire;
  for (int i = 0; i < kN; ++i)
    wire += frame(numbered(i));
  ASSERT_TRUE(c.send_all(wire));
  ASSERT_TRUE(srv.wait_for([&] { return h.held.size() == kN; }));

  // Everything but seq 0, in a shuffled order: nothing may be sent yet.
  std::vector<int> order;
  for (int i = 1; i < kN; ++i)
    order.push_back(i);
  std::shuffle(order.begin(), order.end(), std::mt19937(3));
  srv.call([&] {
    for (int i : order)
      h.held[i].conn->respond(h.held[i].seq, answer_of("answer " + h.held[i].payload));
  });
  // A later turn: the previous turn's end (where sends are issued) has run.
  srv.call([] {});
  EXPECT_EQ(srv.stats().sends, 0u);

  srv.call(
      [&] { h.held[0].conn->respond(h.held[0].seq, answer_of("answer " + h.held[0].payload)); });
  for (int i = 0; i < kN; ++i)
    ASSERT_EQ(c.read_frame(), "answer " + numbered(i));
}

TEST(TransportOrdering, SkippedFramesGetNoAnswerAndDoNotHoldLaterOnesBack) {
  TestHandler h;
  h.on_frame_fn = [](Connection& c, std::uint64_t seq, Buffer& f) {
    if (to_string(f).starts_with("acks=0")) {
      c.skip(seq);
    } else {
      c.respond(seq, answer_of(to_string(f)));
    }
  };
  Server srv(h);
  ASSERT_EQ(srv.error(), "");
  Client c(srv.port());
  std::string wire;
  for (int i = 0; i < 30; ++i)
    wire += frame((i % 3 ? "acks=1 " : "acks=0 ") + std::to_string(i));
  ASSERT_TRUE(c.send_all(wire));
  for (int i = 0; i < 30; ++i) {
    if (i % 3) {
      ASSERT_EQ(c.read_frame(), "acks=1 " + std::to_string(i));
    }
  }
  // Only skips: the connection stays usable.
  ASSERT_TRUE(c.send_all(frame("acks=0 a") + frame("acks=0 b") + frame("last")));
  EXPECT_EQ(c.read_frame(), "last");
}

TEST(TransportOrdering, SkipCompletingLastReleasesTheQueue) {
  TestHandler h;
  h.hold = true;
  Server srv(h);
  ASSERT_EQ(srv.error(), "");
  Client c(srv.port());
  ASSERT_TRUE(c.send_all(frame("0") + frame("1") + frame("2")));
  ASSERT_TRUE(srv.wait_for([&] { return h.held.size() == 3; }));
  srv.call([&] {
    h.held[2].conn->respond(h.held[2].seq, answer_of("two"));
    h.held[1].conn->respond(h.held[1].seq, answer_of("one"));
  });
  srv.call([] {});
  EXPECT_EQ(srv.stats().sends, 0u);
  srv.call([&] { h.held[0].conn->skip(h.held[0].seq); });
  EXPECT_EQ(c.read_frame(), "one");
  EXPECT_EQ(c.read_frame(), "two");
}

TEST(TransportOrdering, WrongAnswersAreIgnored) {
  TestHandler h;
  h.hold = true;
  Server srv(h);
  ASSERT_EQ(srv.error(), "");
  Client c(srv.port());
  ASSERT_TRUE(c.send_all(frame("0")));
  ASSERT_TRUE(srv.wait_for([&] { return h.held.size() == 1; }));
  srv.call([&] {
    Connection* conn = h.held[0].conn;
    conn->respond(7, answer_of("never delivered seq"));
    conn->respond(0, answer_of("zero"));
    conn->respond(0, answer_of("twice"));
    conn->skip(0);
  });
  EXPECT_EQ(c.read_frame(), "zero");
  ASSERT_TRUE(c.send_all(frame("1")));
  ASSERT_TRUE(srv.wait_for([&] { return h.held.size() == 2; }));
  srv.call([&] { h.held[1].conn->respond(1, answer_of("one")); });
  EXPECT_EQ(c.read_frame(), "one");
}

// The Connection outlives on_close until every delivered seq is settled; late answers are
// dropped (ASan would flag a use after free, LeakSanitizer a connection never freed).
TEST(TransportOrdering, AnswersAfterThePeerLeftAreDiscarded) {
  TestHandler h;
  h.hold = true;
  Server srv(h);
  ASSERT_EQ(srv.error(), "");
  {
    Client c(srv.port());
    ASSERT_TRUE(c.send_all(frame("a") + frame("b") + frame("c")));
    ASSERT_TRUE(srv.wait_for([&] { return h.held.size() == 3; }));
    c.reset();
  }
  ASSERT_TRUE(srv.wait_for([&] { return h.closes.load() == 1; }));
  srv.call([&] {
    EXPECT_TRUE(h.held[0].conn->closed());
    EXPECT_FALSE(h.held[0].conn->peer().empty());
    h.held[1].conn->respond(h.held[1].seq, answer_of("late"));
    h.held[0].conn->skip(h.held[0].seq);
  });
  srv.call([&] {
    EXPECT_TRUE(h.held[2].conn->closed());
    h.held[2].conn->respond(h.held[2].seq, answer_of("last late"));
  });
  EXPECT_EQ(srv.stats().bytes_out, 0u);
  EXPECT_EQ(srv.call([&] { return srv.transport().connection_count(); }), 0u);
}

TEST(TransportOrdering, GracefulCloseSendsEveryDeliveredAnswerFirst) {
  TestHandler h;
  h.hold = true;
  Server srv(h);
  ASSERT_EQ(srv.error(), "");
  Client c(srv.port());
  ASSERT_TRUE(c.send_all(frame("0") + frame("1") + frame("2")));
  ASSERT_TRUE(srv.wait_for([&] { return h.held.size() == 3; }));
  srv.call([&] {
    h.held[2].conn->respond(2, answer_of("two"));
    h.held[1].conn->respond(1, answer_of("one"));
    h.held[0].conn->close(true);
  });
  // Frames after close(true) are not delivered.
  ASSERT_TRUE(c.send_all(frame("after close")));
  srv.call([] {});
  srv.call([&] {
    EXPECT_FALSE(h.held[0].conn->closed());
    h.held[0].conn->respond(0, answer_of("zero"));
  });
  EXPECT_EQ(c.read_frame(), "zero");
  EXPECT_EQ(c.read_frame(), "one");
  EXPECT_EQ(c.read_frame(), "two");
  EXPECT_TRUE(c.wait_closed());
  // Our FIN ends the server's linger.
  ::shutdown(c.fd(), SHUT_WR);
  ASSERT_TRUE(srv.wait_for([&] { return h.closes.load() == 1; }));
  EXPECT_EQ(h.frames.load(), 3u);
}

// A peer that never closes its side: the linger after a graceful close is bounded (by the idle
// timeout here).
TEST(TransportOrdering, GracefulCloseLingerEnds) {
  TestHandler h;
  h.on_frame_fn = [](Connection& c, std::uint64_t seq, Buffer& f) {
    c.respond(seq, answer_of(to_string(f)));
    c.close(true);
  };
  ListenerConfig cfg = test_config();
  cfg.limits.idle_timeout_ms = 200;
  Server srv(h, cfg);
  ASSERT_EQ(srv.error(), "");
  Client c(srv.port());
  ASSERT_TRUE(c.send_all(frame("x")));
  EXPECT_EQ(c.read_frame(), "x");
  EXPECT_TRUE(c.wait_closed());
  ASSERT_TRUE(srv.wait_for([&] { return h.closes.load() == 1; }));
}

TEST(TransportOrdering, AnswerThenCloseFromInsideOnFrame) {
  TestHandler h;
  h.on_frame_fn = [](Connection& c, std::uint64_t seq, Buffer& f) {
    c.respond(seq, answer_of("bye " + to_string(f)));
    c.close(true);
  };
  Server srv(h);
  ASSERT_EQ(srv.error(), "");
  Client c(srv.port());
  ASSERT_TRUE(c.send_all(frame("x") + frame("not delivered")));
  EXPECT_EQ(c.read_frame(), "bye x");
  EXPECT_TRUE(c.wait_closed());
  ::shutdown(c.fd(), SHUT_WR);
  ASSERT_TRUE(srv.wait_for([&] { return h.closes.load() == 1; }));
  EXPECT_EQ(h.frames.load(), 1u);
}

TEST(TransportOrdering, ImmediateCloseFromOnOpen) {
  struct Refuser : TestHandler {
    void on_open(Connection& c) override {
      TestHandler::on_open(c);
      c.close(false);
    }
  } refuser;
  Server srv(refuser);
  ASSERT_EQ(srv.error(), "");
  Client c(srv.port());
  c.send_all(frame("ignored"));
  EXPECT_TRUE(c.wait_closed());
  ASSERT_TRUE(srv.wait_for([&] { return refuser.closes.load() == 1; }));
  EXPECT_EQ(refuser.frames.load(), 0u);
}

// A client that half-closes after its requests still gets every answer, then EOF.
TEST(TransportOrdering, HalfClosedPeerGetsItsAnswers) {
  TestHandler h;
  h.hold = true;
  Server srv(h);
  ASSERT_EQ(srv.error(), "");
  Client c(srv.port());
  ASSERT_TRUE(c.send_all(frame("p") + frame("q")));
  ::shutdown(c.fd(), SHUT_WR);
  ASSERT_TRUE(srv.wait_for([&] { return h.held.size() == 2; }));
  srv.call([] {});
  srv.call([&] {
    h.held[1].conn->respond(1, answer_of("Q"));
    h.held[0].conn->respond(0, answer_of("P"));
  });
  EXPECT_EQ(c.read_frame(), "P");
  EXPECT_EQ(c.read_frame(), "Q");
  EXPECT_TRUE(c.wait_closed());
  ASSERT_TRUE(srv.wait_for([&] { return h.closes.load() == 1; }));
}

// A frame that must describe the state when it is answered (Metadata) waits for every earlier
// frame's answer, not for later ones; with nothing earlier pending it runs at once.
TEST(TransportOrdering, AfterEarlierAnswersWaitsForEarlierFramesOnly) {
  TestHandler h;
  std::vector<std::string> ran;  // reactor thread only
  h.on_frame_fn = [&](Connection& c, std::uint64_t seq, Buffer& f) {
    const std::string body = to_string(f);
    if (body.starts_with("slow")) {
      h.held.push_back({&c, seq, body});
      return;
    }
    if (body.starts_with("late")) {
      c.after_earlier_answers(seq, [&ran, &c, seq, body] {
        ran.push_back(body);
        c.respond(seq, answer_of("built after the earlier answers: " + body));
      });
      return;
    }
    c.respond(seq, answer_of(body));
  };
  Server srv(h);
  ASSERT_EQ(srv.error(), "");
  Client c(srv.port());
  ASSERT_TRUE(
      c.send_all(frame("late first") + frame("slow 1") + frame("late second") + frame("quick 3")));
  EXPECT_EQ(c.read_frame(), "built after the earlier answers: late first");
  ASSERT_TRUE(srv.wait_for([&] { return h.held.size() == 1; }));
  srv.call([] {});
  std::vector<std::string> seen;
  srv.call([&] { seen = ran; });
  EXPECT_EQ(seen, std::vector<std::string>{"late first"}) << "held back by slow 1";
  srv.call([&] { h.held[0].conn->respond(h.held[0].seq, answer_of("answer slow 1")); });
  EXPECT_EQ(c.read_frame(), "answer slow 1");
  EXPECT_EQ(c.read_frame(), "built after the earlier answers: late second");
  EXPECT_EQ(c.read_frame(), "quick 3");
}

}  // namespace
}  // namespace samsa::net::test
