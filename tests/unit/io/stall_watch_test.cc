// Reactor stalls: turns timed against Reactor::Options::stall_threshold_ns, and the stall
// watch catching a long turn's stack on the reactor's own thread (io/stall_watch.h).
#include "io/stall_watch.h"

#include <gtest/gtest.h>

#include "base/clock.h"
#include "io/reactor.h"

namespace samsa::io {
namespace {

// Busy (a sleep could be cut short by the watch's signal, and real stalls are CPU work or a
// blocking call).
void spin_ms(int ms) {
  const std::int64_t until = mono_ns() + std::int64_t{ms} * 1'000'000;
  while (mono_ns() < until) {
  }
}

std::unique_ptr<Reactor> make(std::int64_t threshold_ns) {
  auto r = Reactor::create({.name = "stall-test", .stall_threshold_ns = threshold_ns});
  EXPECT_TRUE(r.has_value());
  return r ? std::move(*r) : nullptr;
}

// One task spinning ms milliseconds, run to the end of its turn. (A reactor's first turn is
// not timed: it has no start until the loop first left the kernel.)
void run_spinning_task(Reactor& r, int ms) {
  r.run_once(0);
  bool done = false;
  r.defer_fn([&] {
    spin_ms(ms);
    done = true;
  });
  ASSERT_TRUE(r.run_until([&] { return done; }));
  r.run_once(0);  // ends the turn the task ran in
}

TEST(StallWatch, ALongTurnIsCountedWithItsStack) {
  auto r = make(2'000'000);
  ASSERT_NE(r, nullptr);
  StallWatch watch(1'000'000);
  watch.start();
  watch.watch(r.get());
  run_spinning_task(*r, 40);
  watch.unwatch(r.get());
  watch.stop();
  EXPECT_EQ(r->stalls(), 1u);
  EXPECT_EQ(r->stalls_with_stack(), 1u);
  EXPECT_GE(watch.signals_sent(), 1u);
  EXPECT_GE(r->longest_turn_ns(), 40'000'000);
}

TEST(StallWatch, ShortTurnsAreNotStalls) {
  auto r = make(20'000'000);
  ASSERT_NE(r, nullptr);
  StallWatch watch(1'000'000);
  watch.start();
  watch.watch(r.get());
  for (int i = 0; i < 20; ++i)
    run_spinning_task(*r, 1);
  watch.unwatch(r.get());
  watch.stop();
  EXPECT_EQ(r->stalls(), 0u);
  EXPECT_EQ(watch.signals_sent(), 0u);
  EXPECT_GT(r->longest_turn_ns(), 1'000'000);
  EXPECT_LT(r->longest_turn_ns(), 20'000'000);
}

// Without a watch a stall is still counted, without a stack; a threshold of 0 times nothing.
TEST(StallWatch, UnwatchedStallsAreCountedAndUntimedReactorsCountNothing) {
  auto watched_not = make(2'000'000);
  ASSERT_NE(watched_not, nullptr);
  run_spinning_task(*watched_not, 10);
  EXPECT_EQ(watched_not->stalls(), 1u);
  EXPECT_EQ(watched_not->stalls_with_stack(), 0u);
  auto untimed = make(0);
  ASSERT_NE(untimed, nullptr);
  run_spinning_task(*untimed, 10);
  EXPECT_EQ(untimed->stalls(), 0u);
  EXPECT_EQ(untimed->longest_turn_ns(), 0);
}

}  // namespace
}  // namespace samsa::io
