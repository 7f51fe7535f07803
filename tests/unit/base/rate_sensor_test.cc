#include "base/rate_sensor.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace samsa {
namespace {

// Kafka's SimpleRate: from the first record of the oldest window, at least one window, so a
// throttle holds from its first second and a steady rate reads as itself.
TEST(RateSensor, SimpleRateCountsFromTheFirstRecord) {
  RateSensor s(RateSensor::Kind::simple);
  const std::int64_t t0 = 1'000'500;  // mid-window: the first record starts the span
  EXPECT_DOUBLE_EQ(s.rate(t0), 0.0);
  s.record(4'000, t0);
  std::int64_t elapsed = 0;
  EXPECT_DOUBLE_EQ(s.rate(t0, &elapsed), 4'000.0) << "at least one window";
  EXPECT_EQ(elapsed, 1'000);
  s.record(4'000, t0 + 1'500);
  EXPECT_DOUBLE_EQ(s.rate(t0 + 2'000, &elapsed), 4'000.0);  // 8,000 over 2 s
  EXPECT_EQ(elapsed, 2'000);
  // 8,000 bytes against 2,000/s: back within after 4 s from t0, 2 s from now.
  EXPECT_EQ(s.throttle_ms(2'000.0, t0 + 2'000), 2'000);
  EXPECT_EQ(s.throttle_ms(4'000.0, t0 + 2'000), 0);
}

// 1,000 bytes every 100 ms for 30 s: the rate reads 10,000/s once the first windows have
// passed, and only the last 11 windows count.
TEST(RateSensor, SimpleRateOfASteadyStream) {
  RateSensor s(RateSensor::Kind::simple);
  const std::int64_t t0 = 5'000'000;
  for (std::int64_t t = 0; t < 30'000; t += 100) {
    s.record(1'000, t0 + t);
    if (t >= 2'000) {
      EXPECT_NEAR(s.rate(t0 + t + 99), 10'000.0, 10'000.0 * 0.11) << t;
    }
  }
  std::int64_t elapsed = 0;
  EXPECT_NEAR(s.rate(t0 + 30'000, &elapsed), 10'000.0, 1'000.0);
  EXPECT_GE(elapsed, 10'000);
  EXPECT_LE(elapsed, 11'000);
  EXPECT_DOUBLE_EQ(s.rate(t0 + 45'000), 0.0) << "every window expired";
}

// Kafka's Rate (client quotas) is unchanged: at least ten windows' time.
TEST(RateSensor, RateKindWaitsTenWindows) {
  RateSensor s;
  s.record(10'000, 7'000'000);
  EXPECT_DOUBLE_EQ(s.rate(7'000'000), 1'000.0);
}

// Reactors record into one sensor at once: no record is lost within a window (windows change
// only once a second; the reset race costs at most the records of that instant).
TEST(RateSensor, ThreadsShareOneSensorWithoutALock) {
  RateSensor s(RateSensor::Kind::simple);
  const std::int64_t now = 9'000'000;
  s.record(1, now);  // the window exists before the threads start
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 100'000; ++i)
        s.record(10, now + 10);
    });
  for (auto& t : threads)
    t.join();
  EXPECT_DOUBLE_EQ(s.rate(now + 10), 4'000'001.0);
}

}  // namespace
}  // namespace samsa
