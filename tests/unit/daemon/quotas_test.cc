#include "daemon/quotas.h"

#include <gtest/gtest.h>

#include "replication/metadata_image.h"

namespace samsa::daemon {
namespace {

using replication::ClientQuotaRecord;
using replication::MetadataImage;
using replication::QuotaEntity;

// The rate is over at least (windows - 1) windows' time: a burst at start does not look like
// a huge rate, and the throttle is what brings the rate back to the quota.
TEST(RateSensor, RateAndThrottleOverTheWindows) {
  RateSensor s;
  s.record(10'000, 0);
  EXPECT_DOUBLE_EQ(s.rate(0), 1000.0);  // 10,000 over 10 s
  EXPECT_EQ(s.throttle_ms(1000.0, 0), 0);
  s.record(10'000, 500);
  // 20,000 bytes against 1,000/s over 10.5 s: (1904.76 - 1000) / 1000 * 10500 ms.
  EXPECT_NEAR(static_cast<double>(s.throttle_ms(1000.0, 500)), 9500.0, 1.0);
  // Eleven windows later the old samples are gone.
  EXPECT_DOUBLE_EQ(s.rate(12'000), 0.0);
  EXPECT_EQ(s.throttle_ms(1000.0, 12'000), 0);
  // A throttle is capped by the sensor's span.
  s.record(1'000'000'000, 13'000);
  EXPECT_EQ(s.throttle_ms(1.0, 13'000), RateSensor::kWindows * RateSensor::kWindowMs);
}

MetadataImage image_with(std::vector<std::pair<QuotaEntity, double>> quotas, std::string key) {
  MetadataImage img;
  for (auto& [e, v] : quotas)
    EXPECT_TRUE(img.apply(ClientQuotaRecord{e, key, v, false}));
  img.set_offset(7);
  return img;
}

// Kafka's order: user+client, user+default client, user, default user+client, default
// user+default client, default user, client, default client.
TEST(ClientQuotas, TheMostSpecificQuotaApplies) {
  using N = std::optional<std::string>;
  const QuotaEntity user_client{{"client-id", N("c")}, {"user", N("u")}};
  const QuotaEntity user_any{{"client-id", N()}, {"user", N("u")}};
  const QuotaEntity user{{"user", N("u")}};
  const QuotaEntity client{{"client-id", N("c")}};
  const QuotaEntity any_client{{"client-id", N()}};
  auto limit_for = [](const MetadataImage& img, std::string_view u, std::string_view c) {
    ClientQuotaCache cache;
    record_quota(cache, img, u, c, QuotaType::produce, 1);
    return cache.limit[0];
  };
  auto img = image_with({{user_client, 1}, {user_any, 2}, {user, 3}, {client, 4}, {any_client, 5}},
                        "producer_byte_rate");
  EXPECT_EQ(limit_for(img, "u", "c"), 1.0);
  EXPECT_EQ(limit_for(img, "u", "other"), 2.0);
  EXPECT_EQ(limit_for(img, "v", "c"), 4.0);
  EXPECT_EQ(limit_for(img, "v", "other"), 5.0);
  auto only_user = image_with({{user, 3}}, "producer_byte_rate");
  EXPECT_EQ(limit_for(only_user, "u", "anything"), 3.0);
  EXPECT_EQ(limit_for(only_user, "v", "anything"), std::nullopt);
  // Another key does not apply to produce.
  auto fetch_only = image_with({{user, 3}}, "consumer_byte_rate");
  EXPECT_EQ(limit_for(fetch_only, "u", "c"), std::nullopt);
}

// A user's quota is shared by all its clients (one sensor); a default applies to each client
// on its own.
TEST(ClientQuotas, SensorsAreSharedAsTheQuotaSays) {
  using N = std::optional<std::string>;
  auto img =
      image_with({{{{"user", N("u")}}, 100}, {{{"client-id", N()}}, 100}}, "producer_byte_rate");
  ClientQuotaCache a, b, c, d;
  record_quota(a, img, "u", "one", QuotaType::produce, 1);
  record_quota(b, img, "u", "two", QuotaType::produce, 1);
  record_quota(c, img, "x", "one", QuotaType::produce, 1);
  record_quota(d, img, "y", "two", QuotaType::produce, 1);
  EXPECT_EQ(a.sensor[0], b.sensor[0]);
  EXPECT_NE(c.sensor[0], d.sensor[0]);
  EXPECT_NE(a.sensor[0], c.sensor[0]);
  // Over the quota: a throttle, and the connection muted for it.
  const std::int64_t t = record_quota(a, img, "u", "one", QuotaType::produce, 100'000);
  EXPECT_GT(t, 0);
  EXPECT_GT(a.muted_until_ns, 0);
}

}  // namespace
}  // namespace samsa::daemon
