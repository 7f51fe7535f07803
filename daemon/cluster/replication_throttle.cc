#include "daemon/cluster/replication_throttle.h"

#include <algorithm>

#include "base/clock.h"

namespace samsa::cluster {

bool ReplicationQuota::exceeded(std::int64_t now_ms) const {
  const std::int64_t l = limit();
  if (l == kUnlimited) return false;
  return sensor_.rate(now_ms) > static_cast<double>(l);
}

std::int64_t ReplicationQuota::wait_ms(std::int64_t now_ms) const {
  const std::int64_t l = limit();
  if (l == kUnlimited) return 0;
  // A zero limit is exceeded by any byte until the windows holding it have passed.
  if (l == 0) return exceeded(now_ms) ? RateSensor::kWindowMs : 0;
  return sensor_.throttle_ms(static_cast<double>(l), now_ms);
}

void ReplicationQuota::record(std::int64_t bytes, std::int64_t now_ms) {
  if (bytes <= 0) return;
  sensor_.record(bytes, now_ms);
  bytes_.fetch_add(static_cast<std::uint64_t>(bytes), std::memory_order_relaxed);
}

void ReplicationQuota::settle(std::int64_t reserved, std::int64_t got, std::int64_t now_ms) {
  // The difference lands in the current window: the sensor's sum over its span stays exact.
  if (got != reserved) sensor_.record(got - reserved, now_ms);
  if (got > 0) bytes_.fetch_add(static_cast<std::uint64_t>(got), std::memory_order_relaxed);
}

void ReplicationQuota::note_held(std::int64_t now_ms) {
  holds_.fetch_add(1, std::memory_order_relaxed);
  // Only the latest hold moves the mark (reactors read their clocks in no particular order), so
  // stretches counted never overlap.
  std::int64_t prev = last_held_ms_.load(std::memory_order_relaxed);
  while (now_ms > prev &&
         !last_held_ms_.compare_exchange_weak(prev, now_ms, std::memory_order_relaxed)) {
  }
  if (now_ms <= prev) return;
  if (prev >= 0 && now_ms - prev <= RateSensor::kWindowMs)
    throttled_ms_.fetch_add(static_cast<std::uint64_t>(now_ms - prev), std::memory_order_relaxed);
}

ReplicationQuota::Stats ReplicationQuota::stats(std::int64_t now_ms) const {
  Stats s;
  s.bytes = bytes_.load(std::memory_order_relaxed);
  s.holds = holds_.load(std::memory_order_relaxed);
  s.throttled_ms = throttled_ms_.load(std::memory_order_relaxed);
  s.rate = sensor_.rate(now_ms);
  s.limit = limit();
  return s;
}

const ReplicationThrottle::Lists& ReplicationThrottle::lists_of(std::string_view topic) {
  static const Lists kNone{};
  const replication::MetadataImage* img = image_.get();
  if (!img) return kNone;
  if (img != cached_image_ || img->offset() != cached_offset_) {
    cache_.clear();
    cached_image_ = img;
    cached_offset_ = img->offset();
  }
  auto it = cache_.find(topic);
  if (it != cache_.end()) return it->second;
  Lists lists;
  if (const replication::TopicState* t = img->topic(topic)) {
    auto parse = [&](const char* key, Side s) {
      auto c = t->configs.find(key);
      if (c != t->configs.end())
        lists[static_cast<std::size_t>(s)] =
            replication::parse_throttled_replicas(c->second, broker_id_);
    };
    parse("leader.replication.throttled.replicas", Side::leader);
    parse("follower.replication.throttled.replicas", Side::follower);
  }
  return cache_.emplace(std::string(topic), std::move(lists)).first->second;
}

bool ReplicationThrottle::listed(Side s, std::string_view topic, std::int32_t partition) {
  return lists_of(topic)[static_cast<std::size_t>(s)].contains(partition);
}

void ReplicationThrottle::on_leader_read(replication::Partition& p, std::int32_t replica_id,
                                         replication::ReadOutcome& out) {
  if (out.error != kafka::ErrorCode::none || out.diverging) return;
  if (!listed(Side::leader, p.topic(), p.index())) return;
  const std::int64_t now = mono_ms();
  const replication::ReplicaState* rs = p.replica();
  const bool in_isr =
      rs && std::find(rs->isr().begin(), rs->isr().end(), replica_id) != rs->isr().end();
  if (out.bytes > 0 && !in_isr && quotas_.leader.exceeded(now)) {
    out.slices.clear();
    out.bytes = 0;
    quotas_.leader.note_held(now);
    return;
  }
  quotas_.leader.record(static_cast<std::int64_t>(out.bytes), now);
}

}  // namespace samsa::cluster
