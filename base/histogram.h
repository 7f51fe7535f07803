// A fixed-bucket histogram for metrics: counts per bucket, a sum and a count, recorded by one
// thread with plain integers (the owner thread hands out copies when metrics are collected).
// Buckets are cumulative-upper-bound in the Prometheus sense: bucket i counts values
// <= Bounds[i], the last one everything above.
//
// The bound sets below are log-linear: 1, 2.5 and 5 in every decade, so the relative error
// stays within one step whatever the magnitude, and the exposition needs no conversion.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

namespace samsa {

// Durations in nanoseconds, 10 µs .. 30 s.
inline constexpr std::array<std::uint64_t, 20> kLatencyBoundsNs = {
    10'000,        25'000,        50'000,        100'000,        250'000,
    500'000,       1'000'000,     2'500'000,     5'000'000,      10'000'000,
    25'000'000,    50'000'000,    100'000'000,   250'000'000,    500'000'000,
    1'000'000'000, 2'500'000'000, 5'000'000'000, 10'000'000'000, 30'000'000'000};

// Counts (items per batch): 1 .. 25000.
inline constexpr std::array<std::uint64_t, 14> kCountBounds = {
    1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000};

template <const auto& Bounds>
class Histogram {
 public:
  static constexpr std::size_t kBuckets = Bounds.size();

  void record(std::uint64_t v) {
    auto it = std::lower_bound(Bounds.begin(), Bounds.end(), v);
    ++counts_[static_cast<std::size_t>(it - Bounds.begin())];
    sum_ += v;
    ++count_;
  }
  // Adds another histogram (aggregation across threads).
  void merge(const Histogram& o) {
    for (std::size_t i = 0; i < counts_.size(); ++i)
      counts_[i] += o.counts_[i];
    sum_ += o.sum_;
    count_ += o.count_;
  }

  static constexpr const auto& bounds() { return Bounds; }
  // kBuckets + 1 entries: one per bound, then the overflow bucket (not cumulative).
  const std::array<std::uint64_t, kBuckets + 1>& counts() const { return counts_; }
  std::uint64_t sum() const { return sum_; }
  std::uint64_t count() const { return count_; }

 private:
  std::array<std::uint64_t, kBuckets + 1> counts_{};
  std::uint64_t sum_ = 0;
  std::uint64_t count_ = 0;
};

using LatencyHistogram = Histogram<kLatencyBoundsNs>;
using CountHistogram = Histogram<kCountBounds>;

}  // namespace samsa
