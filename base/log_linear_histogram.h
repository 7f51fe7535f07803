// A log-linear histogram of non-negative 64-bit values (latencies in nanoseconds, sizes): every
// power of two is split into 2^kSubBits equal buckets, so a recorded value is known to within
// 1/2^kSubBits of itself (0.8% with the default 7 bits) from 1 up to 2^63, in a fixed array of
// (65 - kSubBits) << kSubBits counters (58 KiB), never allocating after construction.
//
// One writer, any readers: record() may run on one thread at a time while other threads read
// (percentile, merge, count) without a lock. Counters are relaxed atomics written with a load and
// a store (no read-modify-write), so recording costs what a plain increment does; a concurrent
// reader sees each counter either before or after an update, never torn, and its percentiles are
// those of some recent moment (good enough for a progress line or a metrics scrape). Writers on
// several threads each keep their own histogram and a reader merges them.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace samsa {

template <unsigned kSubBits = 7>
class LogLinearHistogram {
  static_assert(kSubBits >= 1 && kSubBits <= 16);

 public:
  static constexpr std::size_t kBuckets = std::size_t{65 - kSubBits} << kSubBits;
  static constexpr std::uint64_t kSub = std::uint64_t{1} << kSubBits;

  LogLinearHistogram() { clear(); }
  LogLinearHistogram(const LogLinearHistogram& o) { *this = o; }
  LogLinearHistogram& operator=(const LogLinearHistogram& o) {
    if (this == &o) return *this;
    clear();
    merge(o);
    return *this;
  }

  // Bucket of value v: values below 2 * kSub have a bucket each; above, the bucket is the
  // power of two (the shift) and the next kSubBits bits below the leading one.
  static constexpr std::size_t bucket_of(std::uint64_t v) {
    const unsigned msb = 63u - static_cast<unsigned>(std::countl_zero(v | 1));
    if (msb <= kSubBits) return static_cast<std::size_t>(v);
    const unsigned shift = msb - kSubBits;
    return (std::size_t{shift + 1} << kSubBits) + static_cast<std::size_t>((v >> shift) - kSub);
  }
  // Smallest and largest value that land in bucket i.
  static constexpr std::uint64_t bucket_low(std::size_t i) {
    if (i < 2 * kSub) return i;
    const unsigned shift = static_cast<unsigned>(i >> kSubBits) - 1;
    return (kSub + (i & (kSub - 1))) << shift;
  }
  static constexpr std::uint64_t bucket_high(std::size_t i) {
    if (i < 2 * kSub) return i;
    const unsigned shift = static_cast<unsigned>(i >> kSubBits) - 1;
    return bucket_low(i) + ((std::uint64_t{1} << shift) - 1);
  }

  void record(std::uint64_t v) { record(v, 1); }
  void record(std::uint64_t v, std::uint64_t n) {
    if (n == 0) return;
    bump(counts_[bucket_of(v)], n);
    bump(count_, n);
    bump(sum_, v * n);  // wraps only after ~584 years of nanoseconds
    if (v < min_.load(std::memory_order_relaxed)) min_.store(v, std::memory_order_relaxed);
    if (v > max_.load(std::memory_order_relaxed)) max_.store(v, std::memory_order_relaxed);
  }

  // Adds o's counts to this one (this histogram's writer must not record meanwhile).
  void merge(const LogLinearHistogram& o) {
    for (std::size_t i = 0; i < kBuckets; ++i) {
      const std::uint64_t c = o.counts_[i].load(std::memory_order_relaxed);
      if (c) bump(counts_[i], c);
    }
    bump(count_, o.count_.load(std::memory_order_relaxed));
    bump(sum_, o.sum_.load(std::memory_order_relaxed));
    // The raw extremes: min() answers 0 for an empty histogram, which would win here.
    min_.store(
        std::min(min_.load(std::memory_order_relaxed), o.min_.load(std::memory_order_relaxed)),
        std::memory_order_relaxed);
    max_.store(std::max(max(), o.max()), std::memory_order_relaxed);
  }

  // Adds a serialized histogram: its non-empty buckets (index, count) and its exact sum and
  // extremes (what a child process sends its parent).
  template <class Buckets>
  void merge_serialized(const Buckets& buckets, std::uint64_t sum, std::uint64_t min,
                        std::uint64_t max) {
    std::uint64_t n = 0;
    for (const auto& [i, c] : buckets) {
      if (i >= kBuckets || c == 0) continue;
      bump(counts_[i], c);
      n += c;
    }
    if (n == 0) return;
    bump(count_, n);
    bump(sum_, sum);
    if (min < min_.load(std::memory_order_relaxed)) min_.store(min, std::memory_order_relaxed);
    if (max > max_.load(std::memory_order_relaxed)) max_.store(max, std::memory_order_relaxed);
  }

  void clear() {
    for (auto& c : counts_)
      c.store(0, std::memory_order_relaxed);
    count_.store(0, std::memory_order_relaxed);
    sum_.store(0, std::memory_order_relaxed);
    min_.store(std::numeric_limits<std::uint64_t>::max(), std::memory_order_relaxed);
    max_.store(0, std::memory_order_relaxed);
  }

  std::uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  std::uint64_t sum() const { return sum_.load(std::memory_order_relaxed); }
  // Exact extremes of what was recorded (0 when empty).
  std::uint64_t min() const {
    const std::uint64_t m = min_.load(std::memory_order_relaxed);
    return m == std::numeric_limits<std::uint64_t>::max() ? 0 : m;
  }
  std::uint64_t max() const { return max_.load(std::memory_order_relaxed); }
  double mean() const { return count() ? static_cast<double>(sum()) / count() : 0.0; }
  std::uint64_t bucket_count(std::size_t i) const {
    return counts_[i].load(std::memory_order_relaxed);
  }

  // The value at quantile q in [0, 1]: the highest value of the bucket holding the
  // ceil(q * count)-th smallest recording (HdrHistogram's "highest equivalent value"), clamped
  // to the exact min and max; so it is never below the true quantile and at most 1/kSub above
  // it. 0 when empty.
  std::uint64_t percentile(double q) const {
    const std::uint64_t n = count();
    if (n == 0) return 0;
    if (q >= 1.0) return max();
    if (q < 0.0) q = 0.0;
    std::uint64_t rank = static_cast<std::uint64_t>(q * static_cast<double>(n) + 0.999999999);
    rank = std::clamp<std::uint64_t>(rank, 1, n);
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < kBuckets; ++i) {
      seen += counts_[i].load(std::memory_order_relaxed);
      if (seen >= rank) return std::clamp(bucket_high(i), min(), max());
    }
    return max();  // a concurrent writer raised count() after the buckets were read
  }

 private:
  static void bump(std::atomic<std::uint64_t>& a, std::uint64_t n) {
    a.store(a.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }

  std::array<std::atomic<std::uint64_t>, kBuckets> counts_;
  std::atomic<std::uint64_t> count_, sum_, min_, max_;
};

}  // namespace samsa
