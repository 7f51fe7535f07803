#include "replication/cluster_wire.h"

#include <gtest/gtest.h>

namespace samsa::replication {
namespace {

using kafka::ErrorCode;

// Encodes m at version and decodes it again: every conversion below goes through the wire.
template <class M>
M through_wire(const M& m, std::int16_t version) {
  kafka::Writer w(false);
  m.encode(w, version);
  auto bytes = kafka::flatten(w.finish());
  EXPECT_EQ(bytes.size(), m.encoded_size(version));
  kafka::Reader r(bytes);
  M out;
  EXPECT_TRUE(out.decode(r, version));
  EXPECT_EQ(r.remaining(), 0u);
  return out;
}

const Uuid kTopic{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
const Uuid kOther{16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1};

TEST(ClusterWire, RegistrationAndHeartbeatRoundTripEveryVersion) {
  BrokerRegistration reg{3, kOther, {{"REPLICATION", "10.0.0.3", 9093, 0}}, "rack-b"};
  for (std::int16_t v = kafka::BrokerRegistrationRequest::kMinVersion;
       v <= kafka::BrokerRegistrationRequest::kMaxVersion; ++v) {
    auto back = registration_of(through_wire(registration_request(reg, "cluster-1", 41), v));
    EXPECT_EQ(back.broker_id, 3);
    EXPECT_EQ(back.incarnation_id, kOther);
    ASSERT_EQ(back.endpoints.size(), 1u);
    EXPECT_EQ(back.endpoints[0], reg.endpoints[0]);
    EXPECT_EQ(back.rack, "rack-b");
    auto a = registration_answer_of(
        through_wire(registration_response({ErrorCode::duplicate_broker_registration, 77}), v));
    EXPECT_EQ(a.error, ErrorCode::duplicate_broker_registration);
    EXPECT_EQ(a.broker_epoch, 77);
  }
  for (std::int16_t v = 0; v <= 1; ++v) {
    auto hb = heartbeat_of(through_wire(heartbeat_request({2, 55, 120, false, true}), v));
    EXPECT_EQ(hb.broker_id, 2);
    EXPECT_EQ(hb.broker_epoch, 55);
    EXPECT_EQ(hb.current_metadata_offset, 120);
    EXPECT_FALSE(hb.want_fence);
    EXPECT_TRUE(hb.want_shut_down);
    auto a = heartbeat_answer_of(
        through_wire(heartbeat_response({ErrorCode::none, true, false, true}), v));
    EXPECT_EQ(a.error, ErrorCode::none);
    EXPECT_TRUE(a.is_caught_up);
    EXPECT_FALSE(a.is_fenced);
    EXPECT_TRUE(a.should_shut_down);
  }
}

TEST(ClusterWire, AlterPartitionCarriesMemberEpochsFromV3) {
  kafka::AlterPartitionRequest req;
  req.broker_id = 1;
  req.broker_epoch = 10;
  add_alter_partition(req, kTopic, 0, {0, 4, 9, {{1, 10}, {2, 20}}});
  add_alter_partition(req, kTopic, 3, {0, 5, 2, {{1, 10}}});
  add_alter_partition(req, kOther, 1, {0, 1, 1, {{1, 10}, {3, 30}}});
  ASSERT_EQ(req.topics.size(), 2u);
  for (std::int16_t v = 2; v <= 3; ++v) {
    auto items = alter_partition_items(through_wire(req, v), v);
    ASSERT_EQ(items.size(), 3u);
    EXPECT_EQ(items[0].broker_id, 1);
    EXPECT_EQ(items[0].broker_epoch, 10);
    EXPECT_EQ(items[0].topic_id, kTopic);
    EXPECT_EQ(items[0].proposal.leader_epoch, 4);
    EXPECT_EQ(items[0].proposal.partition_epoch, 9);
    ASSERT_EQ(items[0].proposal.new_isr.size(), 2u);
    EXPECT_EQ(items[0].proposal.new_isr[1].broker_id, 2);
    EXPECT_EQ(items[0].proposal.new_isr[1].broker_epoch, v >= 3 ? 20 : -1);
    EXPECT_EQ(items[1].partition, 3);
    EXPECT_EQ(items[2].topic_id, kOther);
  }
  kafka::AlterPartitionResponse resp;
  add_alter_partition_answer(resp, kTopic, 0, {0, ErrorCode::none, 1, 4, {1, 2}, 10});
  add_alter_partition_answer(resp, kTopic, 3, {0, ErrorCode::invalid_update_version, 1, 5, {1}, 3});
  add_alter_partition_answer(resp, kOther, 1, {0, ErrorCode::ineligible_replica, 1, 1, {1}, 1});
  for (std::int16_t v = 2; v <= 3; ++v) {
    auto back = through_wire(resp, v);
    auto a = alter_partition_answer_of(back, kTopic, 0, 42);
    ASSERT_TRUE(a.has_value());
    EXPECT_EQ(a->request_id, 42);
    EXPECT_EQ(a->error, ErrorCode::none);
    EXPECT_EQ(a->isr, (std::vector<std::int32_t>{1, 2}));
    EXPECT_EQ(a->partition_epoch, 10);
    EXPECT_EQ(alter_partition_answer_of(back, kTopic, 3, 1)->error,
              ErrorCode::invalid_update_version);
    EXPECT_EQ(alter_partition_answer_of(back, kOther, 1, 1)->error, ErrorCode::ineligible_replica);
    EXPECT_FALSE(alter_partition_answer_of(back, kOther, 2, 1).has_value());
  }
  kafka::AlterPartitionResponse whole;
  whole.error_code = static_cast<std::int16_t>(ErrorCode::stale_broker_epoch);
  EXPECT_EQ(alter_partition_answer_of(through_wire(whole, 3), kTopic, 0, 7)->error,
            ErrorCode::stale_broker_epoch);
}

TEST(ClusterWire, FetchCarriesTheReplicaAndTheDivergingEpoch) {
  ReplicaFetch f{2, 88, 6, 1234, 5, 77};
  for (std::int16_t v : {12, 14, 15, 17}) {
    SCOPED_TRACE(v);
    kafka::FetchRequest req;
    set_replica_fields(req, f);
    req.topics.emplace_back();
    req.topics.back().topic = "t";
    req.topics.back().topic_id = kTopic;
    req.topics.back().partitions.push_back(fetch_partition(0, f, 1 << 20));
    auto back = through_wire(req, v);
    EXPECT_EQ(fetch_replica_id(back, v), 2);
    auto got = replica_fetch_of(back, back.topics[0].partitions[0], v);
    EXPECT_EQ(got.replica_id, 2);
    EXPECT_EQ(got.broker_epoch, v >= 15 ? 88 : -1);
    EXPECT_EQ(got.current_leader_epoch, 6);
    EXPECT_EQ(got.fetch_offset, 1234);
    EXPECT_EQ(got.last_fetched_epoch, 5);
    EXPECT_EQ(got.log_start_offset, 77);  // KIP-392: the leader knows what the follower holds
  }
  // A consumer's fetch has no replica.
  kafka::FetchRequest consumer;
  EXPECT_EQ(fetch_replica_id(through_wire(consumer, 17), 17), -1);

  kafka::FetchResponse resp;
  resp.responses.emplace_back();
  resp.responses.back().topic_id = kTopic;
  resp.responses.back().partitions.emplace_back();
  resp.responses.back().partitions.emplace_back();
  ReplicaFetchAnswer diverged;
  diverged.diverging = io::LeaderEpochCache::EpochEnd{4, 900};
  diverged.high_watermark = 850;
  diverged.log_start_offset = 0;
  set_fetch_answer(resp.responses.back().partitions[0], diverged);
  ReplicaFetchAnswer plain;
  plain.high_watermark = 851;
  plain.log_start_offset = 0;
  set_fetch_answer(resp.responses.back().partitions[1], plain);
  auto back = through_wire(resp, 16);
  auto a = fetch_answer_of(back.responses[0].partitions[0]);
  ASSERT_TRUE(a.diverging.has_value());
  EXPECT_EQ(a.diverging->epoch, 4);
  EXPECT_EQ(a.diverging->end_offset, 900);
  EXPECT_EQ(a.high_watermark, 850);
  auto b = fetch_answer_of(back.responses[0].partitions[1]);
  EXPECT_FALSE(b.diverging.has_value());
  EXPECT_EQ(b.high_watermark, 851);
}

}  // namespace
}  // namespace samsa::replication
