#include "daemon/cluster/replication_throttle.h"

#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

namespace samsa::cluster {
namespace {

using replication::ConfigRecord;
using replication::ConfigResource;
using replication::MetadataImage;
using replication::TopicRecord;
using replication::Uuid;

// Kafka's default (Long.MAX_VALUE) throttles nothing, however many bytes move.
TEST(ReplicationQuota, UnlimitedByDefault) {
  ReplicationQuota q;
  EXPECT_EQ(q.limit(), ReplicationQuota::kUnlimited);
  q.record(1'000'000'000, 1'000'000);
  EXPECT_FALSE(q.exceeded(1'000'000));
  EXPECT_EQ(q.wait_ms(1'000'000), 0);
  EXPECT_EQ(q.stats(1'000'000).bytes, 1'000'000'000u) << "recorded all the same (the metric)";
}

// Exceeded once the listed bytes' rate is above the limit; the wait is when it is back under.
TEST(ReplicationQuota, ExceededAboveTheLimitUntilTheRateComesBack) {
  ReplicationQuota q;
  q.set_limit(10'000'000);
  const std::int64_t t0 = 2'000'000;
  q.record(4'000'000, t0);
  EXPECT_FALSE(q.exceeded(t0)) << "4 MB in the first second";
  q.record(4'000'000, t0 + 100);
  q.record(4'000'000, t0 + 200);
  EXPECT_TRUE(q.exceeded(t0 + 200)) << "12 MB within one second";
  EXPECT_EQ(q.wait_ms(t0 + 200), 1'000) << "12 MB at 10 MB/s: 1.2 s from the first byte";
  EXPECT_FALSE(q.exceeded(t0 + 1'200));
  EXPECT_EQ(q.wait_ms(t0 + 1'200), 0);
  q.set_limit(0);
  EXPECT_TRUE(q.exceeded(t0 + 1'200)) << "a zero limit holds after any byte";
  EXPECT_GT(q.wait_ms(t0 + 1'200), 0);
}

// Time throttled runs between holds no more than a window apart, whichever thread held.
TEST(ReplicationQuota, TimeThrottledJoinsHoldsAcrossThreads) {
  ReplicationQuota q;
  const std::int64_t t0 = 3'000'000;
  q.note_held(t0);
  q.note_held(t0 + 100);
  q.note_held(t0 + 350);
  q.note_held(t0 + 5'000);  // after a pause: a new stretch
  q.note_held(t0 + 5'200);
  auto s = q.stats(t0 + 5'200);
  EXPECT_EQ(s.holds, 5u);
  EXPECT_EQ(s.throttled_ms, 550u);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      for (int k = 0; k < 1'000; ++k)
        q.note_held(t0 + 10'000 + k * 4 + i);
    });
  for (auto& t : threads)
    t.join();
  s = q.stats(0);
  EXPECT_EQ(s.holds, 4'005u);
  // Interleaved holds over ~4 s, in whatever order the threads ran: counted once, never more
  // than the span.
  EXPECT_LE(s.throttled_ms, 550u + 4'003u);
  EXPECT_GE(s.throttled_ms, 550u + 3'900u);
}

// Which partitions a reactor throttles: the topic configs' entries for this broker, in the
// image it has now.
TEST(ReplicationThrottle, ListedFollowsTheTopicConfigsOfTheCurrentImage) {
  ReplicationQuotas quotas;
  replication::ImagePtr image;
  ReplicationThrottle th(quotas, image, 2);
  using Side = ReplicationThrottle::Side;
  EXPECT_FALSE(th.listed(Side::follower, "t", 0)) << "no image yet";
  auto img = std::make_shared<MetadataImage>();
  ASSERT_TRUE(img->apply(TopicRecord{"t", Uuid{1, 2}}));
  ASSERT_TRUE(img->apply(TopicRecord{"u", Uuid{3, 4}}));
  ASSERT_TRUE(img->apply(ConfigRecord{ConfigResource::topic, "t",
                                      "follower.replication.throttled.replicas", "0:2,1:3,2:2"}));
  ASSERT_TRUE(img->apply(
      ConfigRecord{ConfigResource::topic, "t", "leader.replication.throttled.replicas", "1:2"}));
  img->set_offset(10);
  image = img;
  EXPECT_TRUE(th.listed(Side::follower, "t", 0));
  EXPECT_FALSE(th.listed(Side::follower, "t", 1)) << "broker 3's";
  EXPECT_TRUE(th.listed(Side::follower, "t", 2));
  EXPECT_TRUE(th.listed(Side::leader, "t", 1));
  EXPECT_FALSE(th.listed(Side::leader, "t", 0));
  EXPECT_FALSE(th.listed(Side::follower, "u", 0)) << "unlisted topic";
  EXPECT_FALSE(th.listed(Side::follower, "gone", 0));
  auto next = std::make_shared<MetadataImage>(*img);
  ASSERT_TRUE(next->apply(
      ConfigRecord{ConfigResource::topic, "u", "follower.replication.throttled.replicas", "*"}));
  ASSERT_TRUE(next->apply(ConfigRecord{ConfigResource::topic, "t",
                                       "follower.replication.throttled.replicas", std::nullopt}));
  next->set_offset(11);
  image = next;
  EXPECT_TRUE(th.listed(Side::follower, "u", 7)) << "*: every partition";
  EXPECT_FALSE(th.listed(Side::follower, "t", 0)) << "removed";
}

}  // namespace
}  // namespace samsa::cluster
