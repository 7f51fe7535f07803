// DescribeQuorum's answer from a QuorumView (daemon/api/quorum_describe.h) and the quorum
// command's JSON made from it (admin_quorum.cc): the leader's own row, followers' and
// observers' lag and fetch times turned from monotonic into wall-clock time, the voters'
// endpoints in Nodes, and a controller that does not lead naming the leader.
#include <gtest/gtest.h>

#include "base/kafka_errors.h"
#include "daemon/admin/admin_commands.h"
#include "daemon/api/quorum_describe.h"
#include "net/kafka/api.h"

namespace samsa::daemon {
namespace {

namespace q = replication::quorum;

constexpr std::int64_t kWall = 1'700'000'000'000;
constexpr std::int64_t kMono = 50'000;

BrokerSettings controller_settings(std::int32_t id) {
  BrokerSettings s;
  s.node_id = id;
  s.cluster.role = ProcessRole::controller;
  s.cluster.controller_listener = "CONTROLLER";
  s.cluster.voters = {{100, "10.0.0.1", 9093}, {101, "10.0.0.2", 9093}, {102, "10.0.0.3", 9093}};
  return s;
}

// Node 100 leads epoch 7: 101 fetched 10 ms ago and is 5 behind, 102 has not fetched in this
// epoch, broker 1 observes 15 behind.
replication::Controller::QuorumView leader_view() {
  replication::Controller::QuorumView v;
  v.role = q::Role::leader;
  v.leader = 100;
  v.epoch = 7;
  v.high_watermark = 50;
  v.log_end_offset = 55;
  v.voters = {100, 101, 102};
  v.replicas = {{100, 55, kMono, kMono, true},
                {101, 50, kMono - 10, kMono - 10, true},
                {1, 40, kMono - 20, kMono - 30, false}};
  return v;
}

TEST(AdminQuorum, LeaderAnswersWithEveryReplicaInWallClockTime) {
  const auto a = describe_quorum_answer(leader_view(), controller_settings(100), kWall, kMono);
  ASSERT_EQ(a.error_code, 0);
  ASSERT_EQ(a.topics.size(), 1u);
  EXPECT_EQ(a.topics[0].topic_name, "__cluster_metadata");
  const auto& p = a.topics[0].partitions.at(0);
  EXPECT_EQ(p.error_code, 0);
  EXPECT_EQ(p.leader_id, 100);
  EXPECT_EQ(p.leader_epoch, 7);
  EXPECT_EQ(p.high_watermark, 50);
  ASSERT_EQ(p.current_voters.size(), 3u);
  EXPECT_EQ(p.current_voters[0].log_end_offset, 55);
  EXPECT_EQ(p.current_voters[0].last_caught_up_timestamp, kWall);
  EXPECT_EQ(p.current_voters[1].log_end_offset, 50);
  EXPECT_EQ(p.current_voters[1].last_fetch_timestamp, kWall - 10);
  EXPECT_EQ(p.current_voters[2].replica_id, 102);
  EXPECT_EQ(p.current_voters[2].log_end_offset, -1);
  EXPECT_EQ(p.current_voters[2].last_fetch_timestamp, -1);
  ASSERT_EQ(p.observers.size(), 1u);
  EXPECT_EQ(p.observers[0].replica_id, 1);
  EXPECT_EQ(p.observers[0].last_caught_up_timestamp, kWall - 30);
  // Nodes: each voter on the controller listener, from controller.quorum.voters.
  ASSERT_EQ(a.nodes.size(), 3u);
  EXPECT_EQ(a.nodes[1].node_id, 101);
  ASSERT_EQ(a.nodes[1].listeners.size(), 1u);
  EXPECT_EQ(a.nodes[1].listeners[0].name, "CONTROLLER");
  EXPECT_EQ(a.nodes[1].listeners[0].host, "10.0.0.2");
  EXPECT_EQ(a.nodes[1].listeners[0].port, 9093);
}

TEST(AdminQuorum, NodesSurviveTheWireAtV2) {
  const auto a = describe_quorum_answer(leader_view(), controller_settings(100), kWall, kMono);
  auto frame = kafka::flatten_body(kafka::encode_response(a, 2, 9));
  auto h = kafka::decode_response_header(frame, kafka::DescribeQuorumResponse::kApiKey, 2);
  ASSERT_TRUE(h.ok());
  kafka::DescribeQuorumResponse back;
  ASSERT_EQ(kafka::decode_response_body(frame, h, 2, back), kafka::DecodeError::none);
  ASSERT_EQ(back.nodes.size(), 3u);
  EXPECT_EQ(back.nodes[2].listeners.at(0).host, "10.0.0.3");
  EXPECT_FALSE(back.error_message.has_value());  // null, as Kafka sends it without an error
}

TEST(AdminQuorum, JsonHasKafkasLagAndAges) {
  const auto a = describe_quorum_answer(leader_view(), controller_settings(100), kWall, kMono);
  const json::Value j = quorum_json(a, kWall + 5);
  EXPECT_FALSE(j.find("error"));
  EXPECT_EQ(j.find("leader_id")->as_int(), 100);
  EXPECT_EQ(j.find("leader_epoch")->as_int(), 7);
  EXPECT_EQ(j.find("high_watermark")->as_int(), 50);
  // The voter furthest behind that has fetched: 101, 5 records and 10 ms behind the leader.
  EXPECT_EQ(j.find("max_follower_lag")->as_int(), 5);
  EXPECT_EQ(j.find("max_follower_lag_time_ms")->as_int(), 10);
  const auto& voters = j.find("voters")->items();
  ASSERT_EQ(voters.size(), 3u);
  EXPECT_EQ(voters[0].find("status")->as_string(), "Leader");
  EXPECT_EQ(voters[0].find("lag")->as_int(), 0);
  EXPECT_EQ(voters[1].find("status")->as_string(), "Follower");
  EXPECT_EQ(voters[1].find("lag")->as_int(), 5);
  EXPECT_EQ(voters[1].find("last_fetch_ms_ago")->as_int(), 15);
  EXPECT_EQ(voters[1].find("last_fetch_timestamp")->as_int(), kWall - 10);
  EXPECT_TRUE(voters[2].find("lag")->is_null());
  EXPECT_TRUE(voters[2].find("last_fetch_ms_ago")->is_null());
  const auto& observers = j.find("observers")->items();
  ASSERT_EQ(observers.size(), 1u);
  EXPECT_EQ(observers[0].find("status")->as_string(), "Observer");
  EXPECT_EQ(observers[0].find("lag")->as_int(), 15);
  EXPECT_EQ(observers[0].find("last_caught_up_ms_ago")->as_int(), 35);
  const auto& nodes = j.find("nodes")->items();
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[0].find("listeners")->items().at(0).find("port")->as_int(), 9093);
}

TEST(AdminQuorum, AFollowerNamesTheLeaderAndSaysItDoesNotLead) {
  replication::Controller::QuorumView v;
  v.role = q::Role::follower;
  v.leader = 100;
  v.epoch = 7;
  v.high_watermark = 50;
  v.log_end_offset = 52;
  v.voters = {100, 101, 102};
  const auto a = describe_quorum_answer(v, controller_settings(101), kWall, kMono);
  const auto& p = a.topics.at(0).partitions.at(0);
  EXPECT_EQ(p.error_code, kafka::code(kafka::ErrorCode::not_leader_or_follower));
  EXPECT_EQ(p.leader_id, 100);
  const json::Value j = quorum_json(a, kWall);
  EXPECT_EQ(j.find("leader_id")->as_int(), 100);
  ASSERT_TRUE(j.find("error"));
  EXPECT_NE(j.find("error")->as_string().find("NOT_LEADER_OR_FOLLOWER"), std::string::npos);
  EXPECT_EQ(j.find("voters")->size(), 3u);
  for (const auto& x : j.find("voters")->items())
    EXPECT_TRUE(x.find("lag")->is_null());
  EXPECT_TRUE(j.find("max_follower_lag")->is_null());
}

TEST(AdminQuorum, AnAnswerWithATopLevelErrorSaysOnlyThat) {
  kafka::DescribeQuorumResponse a;
  a.error_code = kafka::code(kafka::ErrorCode::unknown_topic_or_partition);
  a.error_message = "no such partition";
  const json::Value j = quorum_json(a, kWall);
  ASSERT_TRUE(j.find("error"));
  EXPECT_NE(j.find("error")->as_string().find("no such partition"), std::string::npos);
  EXPECT_FALSE(j.find("leader_id"));
}

}  // namespace
}  // namespace samsa::daemon
