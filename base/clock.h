#pragma once

#include <chrono>
#include <cstdint>

namespace samsa {

// Wall-clock milliseconds since the epoch: Kafka timestamps, retention.ms, segment.ms.
inline std::int64_t wall_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

// Monotonic nanoseconds: timeouts, latencies.
inline std::int64_t mono_ns() {
  using namespace std::chrono;
  return duration_cast<nanoseconds>(steady_clock::now().time_since_epoch()).count();
}

inline std::int64_t mono_ms() {
  return mono_ns() / 1'000'000;
}

}  // namespace samsa
