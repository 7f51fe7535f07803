// Replication throttles as Kafka applies them (its ReplicationQuotaManager and the "Replication
// quotas" of its operations guide): two byte rates per broker, leader.replication.throttled.rate
// and follower.replication.throttled.rate (dynamic broker settings), bound the traffic of the
// replicas two topic configs name for that broker, leader.replication.throttled.replicas and
// follower.replication.throttled.replicas ("partitionId:brokerId,..." or "*").
//
// - Follower side (ReplicaFetcher): a partition listed for this broker is left out of its
//   Fetch while the follower rate is exceeded, unless it had caught up with the leader's high
//   watermark at its last fetch that brought records (Kafka's isReplicaInSync).
// - Leader side (the Fetch handler, a follower's read): a partition listed for this leader is
//   answered with no records while the leader rate is exceeded, unless the follower is in the
//   ISR. Its long poll then waits as any empty fetch does.
// - Both sides record the record bytes of listed partitions that did move, in sync or not, as
//   Kafka does, so a throttle bounds all of a listed replica's traffic. Unlisted partitions are
//   never held back and never counted.
// The rate is Kafka's SimpleRate over 11 windows of 1 s (base/rate_sensor.h): from the first
// byte of the oldest window, at least one window, so a throttle holds from its first second.
//
// Threads: ReplicationQuota is one per side and broker process, shared by every reactor;
// ReplicationThrottle is one per reactor, used on its thread only.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "base/rate_sensor.h"
#include "replication/metadata_image.h"
#include "replication/partition.h"
#include "replication/topic_config.h"

namespace samsa::cluster {

// One side's quota. The quota is per broker while replication runs on every reactor thread:
// the limit is one atomic word (written when settings change), the sensor's windows are atomics
// every reactor adds to, and the counters are relaxed atomic adds, so the rate is measured
// across reactors exactly and nothing on the fetch path takes a lock (which would put every
// replica fetch and read of the broker behind one line). A check and what it lets through are
// two steps, so two reactors could both find the rate under the limit: the leader side records
// a read right after checking it (no wait between), and the follower side reserves a
// partition's bytes when it includes it in a Fetch, before the round trip, and settles them when
// the answer comes. Reactors then see each other's fetches in flight, and what may slip through
// at once is one partition's fetch per reactor, not a round trip's worth each (Kafka checks and
// records after the answer, so its fetcher threads may each overshoot by a whole fetch).
class ReplicationQuota {
 public:
  static constexpr std::int64_t kUnlimited = INT64_MAX;  // Kafka's default, Long.MAX_VALUE

  void set_limit(std::int64_t bytes_per_s) { limit_.store(bytes_per_s, std::memory_order_relaxed); }
  std::int64_t limit() const { return limit_.load(std::memory_order_relaxed); }
  // Kafka's isQuotaExceeded: the listed replicas' byte rate is above the limit.
  bool exceeded(std::int64_t now_ms) const;
  // How long until the rate is back within the limit if nothing more moves (0: within it).
  std::int64_t wait_ms(std::int64_t now_ms) const;
  // Kafka's record: bytes of listed replicas that moved, whether the quota was exceeded or not.
  void record(std::int64_t bytes, std::int64_t now_ms);
  // A follower's Fetch about to go: bytes it may bring, counted now; settle() replaces them by
  // what came (0 if nothing did) once it is answered or lost.
  void reserve(std::int64_t bytes, std::int64_t now_ms) { sensor_.record(bytes, now_ms); }
  void settle(std::int64_t reserved, std::int64_t got, std::int64_t now_ms);
  // A listed replica was held back at now_ms. The time throttled runs from one hold to the next
  // when they are at most a window apart (the throttle still holding), whichever reactor held.
  void note_held(std::int64_t now_ms);

  struct Stats {
    std::uint64_t bytes = 0;         // recorded (listed replicas' bytes that moved)
    std::uint64_t holds = 0;         // times a listed replica was held back
    std::uint64_t throttled_ms = 0;  // time throttled
    double rate = 0;                 // bytes/s, as the throttle sees it now
    std::int64_t limit = kUnlimited;
  };
  Stats stats(std::int64_t now_ms) const;

 private:
  std::atomic<std::int64_t> limit_{kUnlimited};
  RateSensor sensor_{RateSensor::Kind::simple};
  std::atomic<std::uint64_t> bytes_{0};
  std::atomic<std::uint64_t> holds_{0};
  std::atomic<std::uint64_t> throttled_ms_{0};
  std::atomic<std::int64_t> last_held_ms_{-1};
};

// The broker's two quotas (owned by the Broker, outliving its reactors).
struct ReplicationQuotas {
  ReplicationQuota leader;
  ReplicationQuota follower;
};

// One reactor's side of the throttles: which partitions the topic configs list for this broker
// (parsed once per topic and metadata image, when first asked) and the broker's quotas.
class ReplicationThrottle {
 public:
  enum class Side : std::uint8_t { leader = 0, follower = 1 };

  // image: where the reactor keeps its current image (Shard::image()), read at each call.
  ReplicationThrottle(ReplicationQuotas& quotas, const replication::ImagePtr& image,
                      std::int32_t broker_id)
      : quotas_(quotas), image_(image), broker_id_(broker_id) {}

  ReplicationQuota& quota(Side s) { return s == Side::leader ? quotas_.leader : quotas_.follower; }
  // The side's *.replication.throttled.replicas of the topic names this broker for partition.
  bool listed(Side s, std::string_view topic, std::int32_t partition);

  // Leader side, a follower's read of p just made (out): holds the records back (out carries
  // none) when p is listed here, the follower is outside the ISR and the leader quota is
  // exceeded; records their bytes when p is listed and they go.
  void on_leader_read(replication::Partition& p, std::int32_t replica_id,
                      replication::ReadOutcome& out);

 private:
  using Lists = std::array<replication::ThrottledPartitions, 2>;
  const Lists& lists_of(std::string_view topic);

  ReplicationQuotas& quotas_;
  const replication::ImagePtr& image_;
  std::int32_t broker_id_;
  const replication::MetadataImage* cached_image_ = nullptr;
  std::int64_t cached_offset_ = -2;
  std::map<std::string, Lists, std::less<>> cache_;
};

}  // namespace samsa::cluster
