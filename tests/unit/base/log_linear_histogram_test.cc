#include "base/log_linear_histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <thread>
#include <vector>

namespace samsa {
namespace {

using Histogram = LogLinearHistogram<>;

// The exact q-quantile of sorted values, with the histogram's rank rule.
std::uint64_t exact(const std::vector<std::uint64_t>& sorted, double q) {
  auto rank = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(sorted.size())));
  rank = std::clamp<std::uint64_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

TEST(LogLinearHistogram, EmptyAnswersZero) {
  Histogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.min(), 0u);
  EXPECT_EQ(h.max(), 0u);
  EXPECT_EQ(h.percentile(0.5), 0u);
  EXPECT_EQ(h.percentile(1.0), 0u);
  EXPECT_EQ(h.mean(), 0.0);
}

TEST(LogLinearHistogram, SmallValuesAreExact) {
  Histogram h;
  for (std::uint64_t v = 0; v < 256; ++v)
    h.record(v);
  EXPECT_EQ(h.count(), 256u);
  EXPECT_EQ(h.min(), 0u);
  EXPECT_EQ(h.max(), 255u);
  EXPECT_EQ(h.percentile(0.5), 127u);
  EXPECT_EQ(h.percentile(0.0), 0u);
  EXPECT_EQ(h.percentile(1.0), 255u);
  EXPECT_EQ(h.sum(), 255u * 256u / 2);
}

TEST(LogLinearHistogram, BucketsTileTheWholeRange) {
  // Every bucket starts one past the previous one's end; the last ends at 2^64-1.
  for (std::size_t i = 1; i < Histogram::kBuckets; ++i) {
    ASSERT_EQ(Histogram::bucket_low(i), Histogram::bucket_high(i - 1) + 1) << i;
    ASSERT_EQ(Histogram::bucket_of(Histogram::bucket_low(i)), i);
    ASSERT_EQ(Histogram::bucket_of(Histogram::bucket_high(i)), i);
  }
  EXPECT_EQ(Histogram::bucket_high(Histogram::kBuckets - 1),
            std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(Histogram::bucket_of(std::numeric_limits<std::uint64_t>::max()),
            Histogram::kBuckets - 1);
}

TEST(LogLinearHistogram, BucketWidthIsWithinRelativePrecision) {
  for (std::size_t i = 2 * Histogram::kSub; i < Histogram::kBuckets; ++i) {
    const double lo = static_cast<double>(Histogram::bucket_low(i));
    const double width = static_cast<double>(Histogram::bucket_high(i)) - lo + 1;
    ASSERT_LE(width / lo, 1.0 / Histogram::kSub + 1e-12) << i;
  }
}

TEST(LogLinearHistogram, PercentilesOfRandomLatenciesWithinPrecision) {
  // Log-uniform from 1 µs to 10 s, like a latency distribution with a long tail.
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> exp10(3.0, 10.0);
  std::vector<std::uint64_t> vals(200'000);
  Histogram h;
  for (auto& v : vals) {
    v = static_cast<std::uint64_t>(std::pow(10.0, exp10(rng)));
    h.record(v);
  }
  std::sort(vals.begin(), vals.end());
  EXPECT_EQ(h.min(), vals.front());
  EXPECT_EQ(h.max(), vals.back());
  for (double q : {0.0, 0.001, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999, 1.0}) {
    const std::uint64_t want = exact(vals, q);
    const std::uint64_t got = h.percentile(q);
    // Never below the true value, at most one bucket width (1/128) above it.
    EXPECT_GE(got, want) << "q=" << q;
    EXPECT_LE(static_cast<double>(got), static_cast<double>(want) * (1.0 + 1.0 / 128) + 1)
        << "q=" << q;
  }
}

TEST(LogLinearHistogram, HugeValuesAndCounts) {
  Histogram h;
  const std::uint64_t big = std::uint64_t{1} << 62;
  h.record(big, 1000);
  h.record(std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(h.count(), 1001u);
  EXPECT_EQ(h.max(), std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(h.percentile(0.5), Histogram::bucket_high(Histogram::bucket_of(big)));
  EXPECT_EQ(h.percentile(1.0), std::numeric_limits<std::uint64_t>::max());
  h.record(5, 0);  // a zero count records nothing
  EXPECT_EQ(h.count(), 1001u);
  EXPECT_EQ(h.min(), big);
}

TEST(LogLinearHistogram, MergeEqualsRecordingEverythingInOne) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<std::uint64_t> d(0, 50'000'000);
  Histogram a, b, all;
  for (int i = 0; i < 10'000; ++i) {
    const auto v = d(rng);
    (i % 3 ? a : b).record(v);
    all.record(v);
  }
  Histogram m = a;
  m.merge(b);
  EXPECT_EQ(m.count(), all.count());
  EXPECT_EQ(m.sum(), all.sum());
  EXPECT_EQ(m.min(), all.min());
  EXPECT_EQ(m.max(), all.max());
  for (std::size_t i = 0; i < Histogram::kBuckets; ++i)
    ASSERT_EQ(m.bucket_count(i), all.bucket_count(i)) << i;
  for (double q : {0.5, 0.99, 0.9999})
    EXPECT_EQ(m.percentile(q), all.percentile(q));
  m.clear();
  EXPECT_EQ(m.count(), 0u);
  EXPECT_EQ(m.percentile(0.99), 0u);
}

TEST(LogLinearHistogram, SerializedFormRebuildsTheSameHistogram) {
  Histogram h;
  for (std::uint64_t v : {3u, 900u, 901u, 123456u, 99999999u})
    h.record(v, v % 7 + 1);
  std::vector<std::pair<std::size_t, std::uint64_t>> buckets;
  for (std::size_t i = 0; i < Histogram::kBuckets; ++i)
    if (h.bucket_count(i)) buckets.emplace_back(i, h.bucket_count(i));
  buckets.emplace_back(Histogram::kBuckets + 5, 9);  // out of range: ignored
  Histogram r;
  r.merge_serialized(buckets, h.sum(), h.min(), h.max());
  EXPECT_EQ(r.count(), h.count());
  EXPECT_EQ(r.sum(), h.sum());
  EXPECT_EQ(r.min(), h.min());
  EXPECT_EQ(r.max(), h.max());
  for (double q : {0.0, 0.5, 0.9, 1.0})
    EXPECT_EQ(r.percentile(q), h.percentile(q));
  Histogram e;
  e.merge_serialized(std::vector<std::pair<std::size_t, std::uint64_t>>{}, 0, 0, 0);
  EXPECT_EQ(e.count(), 0u);
  EXPECT_EQ(e.min(), 0u);
}

TEST(LogLinearHistogram, ReaderSeesMonotonicCountsWhileOneThreadRecords) {
  Histogram h;
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    std::uint64_t v = 1;
    while (!stop.load(std::memory_order_relaxed))
      h.record(v++ % 1'000'000);
  });
  std::uint64_t last = 0;
  for (int i = 0; i < 2000; ++i) {
    const std::uint64_t c = h.count();
    ASSERT_GE(c, last);
    last = c;
    const std::uint64_t p = h.percentile(0.99);
    ASSERT_LE(p, 1'000'000u);
  }
  stop = true;
  writer.join();
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < Histogram::kBuckets; ++i)
    total += h.bucket_count(i);
  EXPECT_EQ(total, h.count());
}

}  // namespace
}  // namespace samsa
