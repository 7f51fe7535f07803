#include "base/rate_sensor.h"

#include <algorithm>

namespace samsa {

RateSensor::RateSensor(Kind kind) : kind_(kind) {
  // No window yet: numbers no clock reaches, so none counts before its first record.
  for (auto& w : window_)
    w.store(INT64_MIN / 2, std::memory_order_relaxed);
}

void RateSensor::record(std::int64_t amount, std::int64_t now_ms) {
  const std::int64_t w = now_ms / kWindowMs;
  const std::size_t i = static_cast<std::size_t>(w % kWindows);
  std::int64_t seen = window_[i].load(std::memory_order_acquire);
  // The first to reach a new window empties it (an add racing the reset may be lost: a
  // measurement error of one record, never a stuck rate).
  if (seen != w && window_[i].compare_exchange_strong(seen, w, std::memory_order_acq_rel)) {
    start_ms_[i].store(now_ms, std::memory_order_relaxed);
    amount_[i].store(0, std::memory_order_relaxed);
  }
  amount_[i].fetch_add(amount, std::memory_order_relaxed);
}

RateSensor::Span RateSensor::measure(std::int64_t now_ms) const {
  const std::int64_t w = now_ms / kWindowMs;
  Span sp;
  std::int64_t oldest = w;
  std::size_t oldest_i = kWindows;
  for (std::size_t i = 0; i < kWindows; ++i) {
    const std::int64_t wi = window_[i].load(std::memory_order_acquire);
    if (wi <= w - kWindows || wi > w) continue;
    sp.total += amount_[i].load(std::memory_order_relaxed);
    if (wi <= oldest) {
      oldest = wi;
      oldest_i = i;
    }
  }
  sp.elapsed = now_ms - oldest * kWindowMs;
  if (kind_ == Kind::rate) {
    const std::int64_t full = sp.elapsed / kWindowMs;
    if (full < kWindows - 1) sp.elapsed += (kWindows - 1 - full) * kWindowMs;
    sp.since_first = sp.elapsed;
    return sp;
  }
  if (oldest_i < kWindows) {
    // A start read while its window is being reset may be an old window's: keep it inside.
    const std::int64_t start = std::clamp(start_ms_[oldest_i].load(std::memory_order_relaxed),
                                          oldest * kWindowMs, oldest * kWindowMs + kWindowMs - 1);
    sp.elapsed = now_ms - start;
  }
  sp.since_first = sp.elapsed;
  sp.elapsed = std::max(sp.elapsed, kWindowMs);
  return sp;
}

double RateSensor::rate(std::int64_t now_ms, std::int64_t* elapsed_out) const {
  const Span sp = measure(now_ms);
  if (elapsed_out) *elapsed_out = sp.elapsed;
  return static_cast<double>(sp.total) * 1000.0 /
         static_cast<double>(std::max<std::int64_t>(sp.elapsed, 1));
}

std::int64_t RateSensor::throttle_ms(double quota, std::int64_t now_ms) const {
  if (quota <= 0) return 0;
  const Span sp = measure(now_ms);
  const double r = static_cast<double>(sp.total) * 1000.0 /
                   static_cast<double>(std::max<std::int64_t>(sp.elapsed, 1));
  if (r <= quota) return 0;
  // Until total / (since_first + t) is the quota. (For Kind::rate since_first is the padded
  // span: Kafka's client-quota formula, (rate - quota) / quota * window.)
  const double t =
      static_cast<double>(sp.total) * 1000.0 / quota - static_cast<double>(sp.since_first);
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(t), 0, kWindows * kWindowMs);
}

}  // namespace samsa
