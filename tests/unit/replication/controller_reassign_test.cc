// Partition reassignment and broker unregistration in ControllerState (KIP-455's life of a
// reassignment, Kafka's validation) and the records that carry them through the log.
#include <gtest/gtest.h>

#include "replication/controller_state.h"

namespace samsa::replication {
namespace {

using kafka::ErrorCode;
using Ids = std::vector<std::int32_t>;

const Uuid kTopic{5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5};

Uuid make_id(int a, int b) {
  Uuid u{};
  u[0] = static_cast<std::uint8_t>(a);
  u[1] = static_cast<std::uint8_t>(b);
  return u;
}

// Brokers 1..4 registered and unfenced; topic "t" with one partition on 1, 2, 3 (1 leads).
struct Cluster {
  ControllerState cs{[] {
    ControllerStateOptions o;
    o.new_topic_id = [] { return kTopic; };
    return o;
  }()};
  std::int64_t epoch[5] = {-1, -1, -1, -1, -1};

  Cluster() {
    cs.on_become_active(0, 0);
    for (int b = 1; b <= 4; ++b) {
      auto reg = cs.register_broker({b, make_id(b, 1), {}, std::nullopt}, 0);
      EXPECT_EQ(reg.answer.error, ErrorCode::none);
      epoch[b] = reg.answer.broker_epoch;
      cs.heartbeat({b, epoch[b], cs.next_offset(), false, false}, 0);
    }
    TopicSpec spec{"t", 1, 3, {}, {{1, 2, 3}}};
    auto t = cs.create_topics({spec}, false);
    EXPECT_EQ(t.answer.at(0).error, ErrorCode::none);
  }
  const PartitionState& p() const { return cs.image().topic(kTopic)->partitions[0]; }
  ReassignmentOutcome reassign(std::optional<Ids> target, bool allow_rf_change = true) {
    auto out = cs.alter_partition_reassignments({{"t", 0, std::move(target)}}, allow_rf_change);
    return out.answer.at(0);
  }
  // The leader's AlterPartition putting `isr` in place.
  AlterPartitionAnswer alter_isr(const Ids& isr) {
    AlterPartitionItem item;
    item.broker_id = p().leader;
    item.broker_epoch = epoch[p().leader];
    item.topic_id = kTopic;
    item.proposal.leader_epoch = p().leader_epoch;
    item.proposal.partition_epoch = p().partition_epoch;
    for (std::int32_t b : isr)
      item.proposal.new_isr.push_back({b, epoch[b]});
    return cs.alter_partition(item).answer;
  }
};

TEST(ControllerReassign, ANewReplicaIsAddedThenTheOldOneRemovedOnceItJoinsTheIsr) {
  Cluster c;
  ASSERT_EQ(c.reassign(Ids{4, 2, 3}).error, ErrorCode::none);
  EXPECT_EQ(c.p().replicas, (Ids{4, 2, 3, 1}));
  EXPECT_EQ(c.p().adding, (Ids{4}));
  EXPECT_EQ(c.p().removing, (Ids{1}));
  EXPECT_EQ(c.p().leader, 1);  // the old leader serves while the new replica catches up
  // The leader adds 4 to the ISR: that completes the reassignment in the same batch, and the
  // leadership leaves the removed replica for the first target replica in the ISR.
  auto a = c.alter_isr({1, 2, 3, 4});
  EXPECT_EQ(a.error, ErrorCode::none);
  EXPECT_EQ(c.p().replicas, (Ids{4, 2, 3}));
  EXPECT_TRUE(c.p().adding.empty());
  EXPECT_TRUE(c.p().removing.empty());
  EXPECT_EQ(c.p().isr, (Ids{2, 3, 4}));
  EXPECT_EQ(c.p().leader, 4);
  EXPECT_EQ(a.leader_id, 4);  // the answer tells the old leader where the partition went
}

TEST(ControllerReassign, AReassignmentWithNothingToAddCompletesAtOnce) {
  Cluster c;
  ASSERT_EQ(c.reassign(Ids{2, 3}).error, ErrorCode::none);
  EXPECT_EQ(c.p().replicas, (Ids{2, 3}));
  EXPECT_EQ(c.p().isr, (Ids{2, 3}));
  EXPECT_EQ(c.p().leader, 2);
  EXPECT_FALSE(c.p().reassigning());
  // Reordering only: the preferred leader changes, the leader does not.
  ASSERT_EQ(c.reassign(Ids{3, 2}).error, ErrorCode::none);
  EXPECT_EQ(c.p().replicas, (Ids{3, 2}));
  EXPECT_EQ(c.p().leader, 2);
}

TEST(ControllerReassign, CancellingReturnsToTheOriginalReplicas) {
  Cluster c;
  EXPECT_EQ(c.reassign(std::nullopt).error, ErrorCode::no_reassignment_in_progress);
  ASSERT_EQ(c.reassign(Ids{4, 2, 3}).error, ErrorCode::none);
  ASSERT_EQ(c.reassign(std::nullopt).error, ErrorCode::none);
  // Kafka's PartitionReassignmentRevert: the replicas without the adding ones, in the order
  // the reassignment gave them (the original order is not kept in the metadata).
  EXPECT_EQ(c.p().replicas, (Ids{2, 3, 1}));
  EXPECT_FALSE(c.p().reassigning());
  EXPECT_EQ(c.p().leader, 1);
}

TEST(ControllerReassign, ANewTargetStartsFromTheOriginalReplicas) {
  Cluster c;
  ASSERT_EQ(c.reassign(Ids{4, 2, 3}).error, ErrorCode::none);
  ASSERT_EQ(c.reassign(Ids{1, 2, 4}).error, ErrorCode::none);
  EXPECT_EQ(c.p().replicas, (Ids{1, 2, 4, 3}));
  EXPECT_EQ(c.p().adding, (Ids{4}));
  EXPECT_EQ(c.p().removing, (Ids{3}));
}

TEST(ControllerReassign, TargetsAreValidated) {
  Cluster c;
  EXPECT_EQ(c.reassign(Ids{}).error, ErrorCode::invalid_replica_assignment);
  EXPECT_EQ(c.reassign(Ids{1, 1, 2}).error, ErrorCode::invalid_replica_assignment);
  EXPECT_EQ(c.reassign(Ids{1, 2, 9}).error, ErrorCode::invalid_replica_assignment);
  EXPECT_EQ(c.reassign(Ids{1, 2}, false).error, ErrorCode::invalid_replication_factor);
  auto unknown = c.cs.alter_partition_reassignments({{"nope", 0, Ids{1}}, {"t", 7, Ids{1}}}, true);
  EXPECT_EQ(unknown.answer.at(0).error, ErrorCode::unknown_topic_or_partition);
  EXPECT_EQ(unknown.answer.at(1).error, ErrorCode::unknown_topic_or_partition);
  EXPECT_TRUE(unknown.records.empty());
  EXPECT_EQ(c.p().replicas, (Ids{1, 2, 3}));
}

TEST(ControllerReassign, AFencedLeaderBeingRemovedIsReplacedByATargetReplica) {
  Cluster c;
  ASSERT_EQ(c.reassign(Ids{4, 2, 3}).error, ErrorCode::none);
  c.cs.heartbeat({1, c.epoch[1], c.cs.next_offset(), true, false}, 1);  // 1 fenced
  EXPECT_NE(c.p().leader, 1);
  const std::int32_t leader = c.p().leader;
  ASSERT_TRUE(leader == 2 || leader == 3);
  EXPECT_EQ(c.alter_isr({2, 3, 4}).error, ErrorCode::none);
  EXPECT_EQ(c.p().replicas, (Ids{4, 2, 3}));
  EXPECT_FALSE(c.p().reassigning());
  EXPECT_EQ(c.p().leader, leader);  // a leader in the target keeps leading
}

TEST(ControllerReassign, SnapshotsAndRecordsCarryAReassignmentInProgress) {
  Cluster c;
  ASSERT_EQ(c.reassign(Ids{4, 2, 3}).error, ErrorCode::none);
  c.cs.commit(c.cs.next_offset() - 1);
  ControllerState replayed;
  std::int64_t offset = 0;
  for (const auto& r : c.cs.snapshot()) {
    auto decoded = decode_record(encode_record(r));
    ASSERT_TRUE(decoded.has_value());
    ASSERT_TRUE(replayed.replay(*decoded, offset++));
  }
  const PartitionState& p = replayed.image().topic(kTopic)->partitions[0];
  EXPECT_EQ(p.replicas, (Ids{4, 2, 3, 1}));
  EXPECT_EQ(p.adding, (Ids{4}));
  EXPECT_EQ(p.removing, (Ids{1}));
  PartitionChangeRecord change{kTopic, 0, Ids{2, 3}, kNoLeaderChange};
  change.replicas = Ids{2, 3};
  change.adding_replicas = Ids{};
  change.removing_replicas = Ids{};
  auto back = decode_record(encode_record(change));
  ASSERT_TRUE(back.has_value());
  const auto& got = std::get<PartitionChangeRecord>(*back);
  EXPECT_EQ(got.replicas, change.replicas);
  EXPECT_EQ(got.adding_replicas, change.adding_replicas);
  EXPECT_EQ(got.isr, change.isr);
  EXPECT_FALSE(got.elr.has_value());
}

TEST(ControllerReassign, UnregisteringABrokerMovesItsLeadershipsAndRemovesIt) {
  Cluster c;
  auto u = c.cs.unregister_broker(1);
  EXPECT_EQ(u.answer.error, ErrorCode::none);
  EXPECT_FALSE(c.cs.image().brokers().contains(1));
  EXPECT_NE(c.p().leader, 1);
  EXPECT_FALSE(contains(c.p().isr, 1));
  EXPECT_EQ(c.cs.unregister_broker(1).answer.error, ErrorCode::broker_id_not_registered);
  // It comes back as a new registration.
  auto reg = c.cs.register_broker({1, make_id(1, 2), {}, std::nullopt}, 1);
  EXPECT_EQ(reg.answer.error, ErrorCode::none);
  auto back = decode_record(encode_record(UnregisterBrokerRecord{3, 77}));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(std::get<UnregisterBrokerRecord>(*back).broker_epoch, 77);
}

}  // namespace
}  // namespace samsa::replication
