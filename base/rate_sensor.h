// RateSensor — a byte (or time) rate over the last kWindows windows of kWindowMs, as Kafka's
// metrics measure quotas (SampledStat), shared by threads without a lock: each window's number,
// start and amount are atomics; the first recorder to reach a new window empties it.
//
// Two ways of counting the elapsed time, Kafka's two rate stats:
// - Kind::rate (Kafka's Rate, client quotas): at least kWindows - 1 windows, so a new client's
//   first burst is not seen as a huge rate;
// - Kind::simple (Kafka's SimpleRate, replication quotas): from the first record of the oldest
//   window still in range, at least one window, so a throttle holds from its first second.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace samsa {

class RateSensor {
 public:
  static constexpr int kWindows = 11;              // quota.window.num
  static constexpr std::int64_t kWindowMs = 1000;  // quota.window.size.seconds
  enum class Kind : std::uint8_t { rate, simple };

  explicit RateSensor(Kind kind = Kind::rate);

  void record(std::int64_t amount, std::int64_t now_ms);
  // Per second, over the windows still in range (elapsed_ms: the time it was divided by).
  double rate(std::int64_t now_ms, std::int64_t* elapsed_ms = nullptr) const;
  // How long until the rate is back to quota if nothing more is recorded (0: within it), at
  // most the whole measured span.
  std::int64_t throttle_ms(double quota, std::int64_t now_ms) const;

 private:
  struct Span {
    std::int64_t total = 0;
    std::int64_t elapsed = 0;      // what the rate divides by
    std::int64_t since_first = 0;  // simple: since the oldest window's first record, unpadded
  };
  Span measure(std::int64_t now_ms) const;

  Kind kind_;
  std::array<std::atomic<std::int64_t>, kWindows> window_{};    // window number (now / size)
  std::array<std::atomic<std::int64_t>, kWindows> start_ms_{};  // its first record's time
  std::array<std::atomic<std::int64_t>, kWindows> amount_{};
};

}  // namespace samsa
