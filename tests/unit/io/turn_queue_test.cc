// io::TurnQueue: jobs run in push order, a step at a time, and leave the rest of their steps to
// later loop turns once the turn has run past Reactor::Options::turn_budget_ns.
#include "io/turn_queue.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/clock.h"
#include "io/reactor.h"

namespace samsa::io {
namespace {

std::unique_ptr<Reactor> make(std::int64_t budget_ns) {
  auto r = Reactor::create({.name = "turn-queue-test", .turn_budget_ns = budget_ns});
  EXPECT_TRUE(r.has_value());
  return r ? std::move(*r) : nullptr;
}

// A job of `steps` steps that records each one as "<name><step>" with the turn it ran in.
struct Recorded : TurnQueue::Job {
  std::string name;
  int steps = 0;
  int done = 0;
  bool finished_called = false;
  std::vector<std::string>* trace = nullptr;
  Reactor* reactor = nullptr;
  std::vector<std::uint64_t>* turns = nullptr;
  std::int64_t spin_ns = 0;  // each step's cost

  Recorded(std::string n, int s, std::vector<std::string>& t, Reactor& r,
           std::vector<std::uint64_t>& tu, std::int64_t spin = 0)
      : name(std::move(n)), steps(s), trace(&t), reactor(&r), turns(&tu), spin_ns(spin) {
    step = [](Job* j) {
      auto* self = static_cast<Recorded*>(j);
      const std::int64_t until = mono_ns() + self->spin_ns;
      while (mono_ns() < until) {
      }
      self->trace->push_back(self->name + std::to_string(self->done++));
      self->turns->push_back(self->reactor->turns());
      return self->done == self->steps;
    };
    finished = [](Job* j) { static_cast<Recorded*>(j)->finished_called = true; };
  }
};

// Runs f inside a task of a turn that has begun (a reactor's first turn has no start).
template <class F>
void in_a_task(Reactor& r, F f) {
  r.run_once(0);
  bool ran = false;
  r.defer_fn([&] {
    f();
    ran = true;
  });
  ASSERT_TRUE(r.run_until([&] { return ran; }));
}

TEST(TurnQueue, WithBudgetLeftAJobRunsInlineToItsEnd) {
  auto r = make(1'000'000'000);
  ASSERT_NE(r, nullptr);
  TurnQueue q(*r);
  std::vector<std::string> trace;
  std::vector<std::uint64_t> turns;
  Recorded a("a", 3, trace, *r, turns);
  in_a_task(*r, [&] {
    q.push(&a);
    EXPECT_TRUE(a.finished_called);  // before push returned
  });
  EXPECT_EQ(trace, (std::vector<std::string>{"a0", "a1", "a2"}));
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.yields(), 0u);
}

TEST(TurnQueue, ASpentTurnLeavesTheRestToLaterTurnsOneStepEach) {
  // Every step costs more than the budget: after the budget is spent a turn runs one step.
  auto r = make(2'000'000);
  ASSERT_NE(r, nullptr);
  TurnQueue q(*r);
  std::vector<std::string> trace;
  std::vector<std::uint64_t> turns;
  Recorded a("a", 3, trace, *r, turns, 5'000'000);
  in_a_task(*r, [&] {
    q.push(&a);
    // The turn had budget for the first step only.
    EXPECT_EQ(trace, (std::vector<std::string>{"a0"}));
    EXPECT_FALSE(a.finished_called);
  });
  ASSERT_TRUE(r->run_until([&] { return a.finished_called; }, 5'000'000'000));
  EXPECT_EQ(trace, (std::vector<std::string>{"a0", "a1", "a2"}));
  ASSERT_EQ(turns.size(), 3u);
  EXPECT_LT(turns[0], turns[1]);
  EXPECT_LT(turns[1], turns[2]);
  EXPECT_EQ(q.yields(), 2u);
  EXPECT_TRUE(q.empty());
}

TEST(TurnQueue, AJobPushedWhileOthersWaitRunsAfterThemNeverInline) {
  auto r = make(2'000'000);
  ASSERT_NE(r, nullptr);
  TurnQueue q(*r);
  std::vector<std::string> trace;
  std::vector<std::uint64_t> turns;
  Recorded a("a", 2, trace, *r, turns, 5'000'000);
  Recorded b("b", 2, trace, *r, turns);
  // b arrives the way a request does: from a completion, reaped at the start of a fresh turn
  // (all its budget left) and before the queue's task runs a's next step. It must still wait
  // behind a (an idempotent producer's next request must not overtake the one before it).
  struct Arrival : Completion {
    TurnQueue* q;
    Recorded* b;
    std::size_t trace_at_push = 0;
    bool b_done_at_push = true;
  } arrival;
  arrival.q = &q;
  arrival.b = &b;
  arrival.fn = [](Completion* c, int, std::uint32_t) {
    auto* self = static_cast<Arrival*>(c);
    self->trace_at_push = self->b->trace->size();
    self->q->push(self->b);
    self->b_done_at_push = self->b->finished_called;
  };
  in_a_task(*r, [&] {
    q.push(&a);  // a0 runs and spends the budget; a1 waits for the next turn
    io_uring_prep_nop(r->sqe(&arrival));
  });
  ASSERT_TRUE(r->run_until([&] { return b.finished_called; }, 5'000'000'000));
  EXPECT_EQ(arrival.trace_at_push, 1u);  // pushed before a1 ran
  EXPECT_FALSE(arrival.b_done_at_push);
  EXPECT_EQ(trace, (std::vector<std::string>{"a0", "a1", "b0", "b1"}));
  EXPECT_TRUE(a.finished_called);
}

TEST(TurnQueue, NoBudgetMeansNeverYielding) {
  auto r = make(0);
  ASSERT_NE(r, nullptr);
  TurnQueue q(*r);
  std::vector<std::string> trace;
  std::vector<std::uint64_t> turns;
  Recorded a("a", 4, trace, *r, turns, 300'000);
  in_a_task(*r, [&] { q.push(&a); });
  EXPECT_TRUE(a.finished_called);
  EXPECT_EQ(trace.size(), 4u);
  EXPECT_EQ(q.yields(), 0u);
}

// A job's last step may free it (the request it belongs to is answered): the queue must not
// touch it after finished().
TEST(TurnQueue, FinishedMayFreeTheJob) {
  auto r = make(1'000'000'000);
  ASSERT_NE(r, nullptr);
  TurnQueue q(*r);
  struct Owned : TurnQueue::Job {
    int* freed = nullptr;
  };
  int freed = 0;
  auto* j = new Owned;
  j->freed = &freed;
  j->step = [](TurnQueue::Job*) { return true; };
  j->finished = [](TurnQueue::Job* self) {
    auto* o = static_cast<Owned*>(self);
    ++*o->freed;
    delete o;
  };
  in_a_task(*r, [&] { q.push(j); });
  EXPECT_EQ(freed, 1);
  EXPECT_TRUE(q.empty());
}

}  // namespace
}  // namespace samsa::io
