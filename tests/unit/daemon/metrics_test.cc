// The Prometheus exposition: histogram buckets cumulative and ending in +Inf, counters named
// *_total, label values escaped, and merging across reactors.
#include "daemon/metrics.h"

#include <gtest/gtest.h>

#include <sstream>

namespace samsa::daemon {
namespace {

std::string line_of(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  std::string l;
  while (std::getline(in, l))
    if (l.rfind(prefix, 0) == 0) return l;
  return {};
}

TEST(Histogram, BucketsAreUpperBounds) {
  LatencyHistogram h;
  h.record(0);
  h.record(10'000);          // == the first bound: first bucket
  h.record(10'001);          // second bucket
  h.record(31'000'000'000);  // above every bound
  EXPECT_EQ(h.counts()[0], 2u);
  EXPECT_EQ(h.counts()[1], 1u);
  EXPECT_EQ(h.counts()[LatencyHistogram::kBuckets], 1u);
  EXPECT_EQ(h.count(), 4u);
  LatencyHistogram g;
  g.record(5);
  g.merge(h);
  EXPECT_EQ(g.count(), 5u);
  EXPECT_EQ(g.counts()[0], 3u);
}

TEST(Metrics, ExpositionOfTwoReactors) {
  BrokerSample s;
  s.version = "9.9";
  s.node_id = 3;
  s.cluster_id = "c\"l\\u\nster";
  for (int i = 0; i < 2; ++i) {
    ReactorSample r;
    r.index = static_cast<std::size_t>(i);
    LatencyHistogram h;
    h.record(20'000);   // 20 µs
    h.record(700'000);  // 0.7 ms
    r.requests.push_back({{0, 9}, h});
    r.topic_bytes_out["orders"] = 100;
    PartitionSample p;
    p.topic = "orders";
    p.partition = i;
    p.high_watermark = 50;
    p.size_bytes = 4096;
    p.bytes_in = 1000;
    r.partitions.push_back(p);
    r.io.fsync.record(200'000);
    r.io.group_commit_appends.record(3);
    r.connections = 2;
    r.backpressure_pauses = 1;
    s.reactors.push_back(r);
  }
  s.reactors.push_back(std::nullopt);  // a reactor that did not answer
  s.groups = std::vector<GroupSample>{{"g", "Stable", 1, {{"orders", 0, 45}, {"orders", 1, -1}}}};
  cluster::ReplicationQuota::Stats leader, follower;
  follower.bytes = 5'000'000;
  follower.throttled_ms = 2'500;
  follower.holds = 7;
  follower.rate = 1e7;
  s.replication_throttles = {leader, follower};
  const std::string t = render_prometheus(s);

  EXPECT_EQ(line_of(t, "samsa_requests_total{"),
            "samsa_requests_total{api=\"Produce\",version=\"9\"} 4");
  EXPECT_EQ(
      line_of(t,
              "samsa_request_duration_seconds_bucket{api=\"Produce\",version=\"9\",le=\"1e-05\"}"),
      "samsa_request_duration_seconds_bucket{api=\"Produce\",version=\"9\",le=\"1e-05\"} 0");
  EXPECT_EQ(
      line_of(
          t, "samsa_request_duration_seconds_bucket{api=\"Produce\",version=\"9\",le=\"2.5e-05\"}"),
      "samsa_request_duration_seconds_bucket{api=\"Produce\",version=\"9\",le=\"2.5e-05\"} 2");
  EXPECT_EQ(
      line_of(t,
              "samsa_request_duration_seconds_bucket{api=\"Produce\",version=\"9\",le=\"+Inf\"}"),
      "samsa_request_duration_seconds_bucket{api=\"Produce\",version=\"9\",le=\"+Inf\"} 4");
  EXPECT_EQ(line_of(t, "samsa_request_duration_seconds_count"),
            "samsa_request_duration_seconds_count{api=\"Produce\",version=\"9\"} 4");
  EXPECT_EQ(line_of(t, "samsa_topic_bytes_out_total"),
            "samsa_topic_bytes_out_total{topic=\"orders\"} 200");
  EXPECT_EQ(line_of(t, "samsa_topic_bytes_in_total"),
            "samsa_topic_bytes_in_total{topic=\"orders\"} 2000");
  EXPECT_EQ(line_of(t, "samsa_group_lag{"),
            "samsa_group_lag{group=\"g\",topic=\"orders\",partition=\"0\"} 5");
  EXPECT_EQ(line_of(t, "samsa_log_fsync_duration_seconds_count"),
            "samsa_log_fsync_duration_seconds_count 2");
  EXPECT_EQ(line_of(t, "samsa_connections "), "samsa_connections 4");
  EXPECT_EQ(line_of(t, "samsa_reactor_up{reactor=\"2\"}"), "samsa_reactor_up{reactor=\"2\"} 0");
  EXPECT_NE(t.find("cluster_id=\"c\\\"l\\\\u\\nster\""), std::string::npos);
  EXPECT_EQ(line_of(t, "samsa_replication_throttled_bytes_total{side=\"follower\"}"),
            "samsa_replication_throttled_bytes_total{side=\"follower\"} 5000000");
  EXPECT_EQ(line_of(t, "samsa_replication_throttled_seconds_total{side=\"follower\"}"),
            "samsa_replication_throttled_seconds_total{side=\"follower\"} 2.5");
  EXPECT_EQ(line_of(t, "samsa_replication_throttled_seconds_total{side=\"leader\"}"),
            "samsa_replication_throttled_seconds_total{side=\"leader\"} 0");
  EXPECT_EQ(line_of(t, "samsa_replication_throttle_holds_total{side=\"follower\"}"),
            "samsa_replication_throttle_holds_total{side=\"follower\"} 7");
  // Every family is declared once, and every counter ends in _total.
  std::istringstream in(t);
  std::string l;
  while (std::getline(in, l)) {
    if (l.rfind("# TYPE ", 0) != 0) continue;
    std::istringstream f(l.substr(7));
    std::string name, type;
    f >> name >> type;
    if (type == "counter") {
      EXPECT_TRUE(name.ends_with("_total")) << name;
    }
    EXPECT_EQ(t.find("# TYPE " + name + " "), t.rfind("# TYPE " + name + " ")) << name;
  }
}

}  // namespace
}  // namespace samsa::daemon
