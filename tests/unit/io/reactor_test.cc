#include "io/reactor.h"

#include <gtest/gtest.h>

#include <thread>

#include "base/clock.h"

namespace samsa::io {
namespace {

TEST(Reactor, NopCompletionRunsCallback) {
  auto r = Reactor::create({.name = "test"});
  ASSERT_TRUE(r.has_value());
  struct Op : Completion {
    int res = 1;
    bool done = false;
  } op;
  op.fn = [](Completion* c, int res, std::uint32_t) {
    auto* o = static_cast<Op*>(c);
    o->res = res;
    o->done = true;
  };
  io_uring_prep_nop((*r)->sqe(&op));
  ASSERT_TRUE((*r)->run_until([&] { return op.done; }));
  EXPECT_EQ(op.res, 0);
}

TEST(Reactor, PostFromOtherThreadWakesLoop) {
  auto r = Reactor::create({.name = "test"});
  ASSERT_TRUE(r.has_value());
  Reactor* rx = r->get();
  std::atomic<int> ran{0};
  std::thread t([&] {
    for (int i = 0; i < 1000; ++i)
      rx->post_fn([&] { ran.fetch_add(1); });
  });
  EXPECT_TRUE(rx->run_until([&] { return ran.load() == 1000; }, 5'000'000'000));
  t.join();
}

TEST(Reactor, TimersFireInDeadlineOrder) {
  auto r = Reactor::create({.name = "test"});
  ASSERT_TRUE(r.has_value());
  struct T : Timer {
    std::vector<int>* order;
    int id;
  };
  std::vector<int> order;
  T a, b, c, d;
  int id = 0;
  for (T* t : {&a, &b, &c, &d}) {
    t->order = &order;
    t->id = id++;
    t->fn = [](Timer* x) {
      auto* tt = static_cast<T*>(x);
      tt->order->push_back(tt->id);
    };
  }
  auto now = mono_ns();
  (*r)->arm(&a, now + 30'000'000);
  (*r)->arm(&b, now + 10'000'000);
  (*r)->arm(&c, now + 20'000'000);
  (*r)->arm(&d, now + 15'000'000);
  (*r)->disarm(&d);
  ASSERT_TRUE((*r)->run_until([&] { return order.size() == 3; }));
  EXPECT_EQ(order, (std::vector<int>{1, 2, 0}));
  EXPECT_GE(mono_ns() - now, 30'000'000);
}

TEST(Reactor, TurnHookRunsOncePerTurn) {
  auto r = Reactor::create({.name = "test"});
  ASSERT_TRUE(r.has_value());
  struct H : TurnHook {
    int runs = 0;
    void on_turn_end() override { ++runs; }
  } h;
  (*r)->at_turn_end(&h);
  (*r)->at_turn_end(&h);
  (*r)->run_once(0);
  EXPECT_EQ(h.runs, 1);
  (*r)->run_once(0);
  EXPECT_EQ(h.runs, 1);
}

}  // namespace
}  // namespace samsa::io
