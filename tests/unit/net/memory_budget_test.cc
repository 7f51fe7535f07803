// net::MemoryBudget: frames within the capacity in FIFO order, charges within the overdraft.
#include "net/memory_budget.h"

#include <gtest/gtest.h>

#include <vector>

namespace samsa::net {
namespace {

struct W : MemoryBudget::Waiter {
  int woken = 0;
  void on_budget_available() override { ++woken; }
};

TEST(MemoryBudget, FramesFitWithinTheCapacityAndWaitInOrder) {
  MemoryBudget b(100, 20);
  W a, c;
  EXPECT_TRUE(b.try_reserve_frame(60, &a));
  EXPECT_FALSE(b.try_reserve_frame(60, &a));
  b.wait(&a);
  // A later, smaller frame may not jump the queue.
  EXPECT_FALSE(b.try_reserve_frame(10, &c));
  b.wait(&c);
  b.release(60);
  EXPECT_EQ(a.woken, 1);  // only the front hears
  EXPECT_EQ(c.woken, 0);
  EXPECT_TRUE(b.try_reserve_frame(60, &a));  // a leaves the queue; c is next and hears
  EXPECT_EQ(c.woken, 1);
  EXPECT_TRUE(b.try_reserve_frame(10, &c));
  EXPECT_EQ(b.used(), 70u);
  EXPECT_EQ(b.stats().waits, 2u);
}

TEST(MemoryBudget, ChargesMayUseTheOverdraftButNoMore) {
  MemoryBudget b(100, 20);
  W a;
  EXPECT_TRUE(b.try_reserve_frame(100, &a));
  EXPECT_EQ(b.chargeable(), 20u);
  EXPECT_TRUE(b.try_charge(15));
  EXPECT_FALSE(b.try_charge(10));
  EXPECT_EQ(b.stats().refused, 1u);
  EXPECT_EQ(b.stats().peak, 115u);
  b.release(115);
  EXPECT_EQ(b.used(), 0u);
}

TEST(MemoryBudget, CancelledWaitersLeaveTheQueue) {
  MemoryBudget b(10, 0);
  W a, c, d;
  ASSERT_TRUE(b.try_reserve_frame(10, nullptr));
  b.wait(&a);
  b.wait(&c);
  b.wait(&d);
  b.cancel(&c);
  b.cancel(&a);
  b.release(10);
  EXPECT_EQ(a.woken + c.woken, 0);
  EXPECT_EQ(d.woken, 1);
  EXPECT_TRUE(b.try_reserve_frame(5, &d));
}

}  // namespace
}  // namespace samsa::net
