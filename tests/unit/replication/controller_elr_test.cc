// KIP-966's eligible leader replicas and KIP-858's directory ids in ControllerState: who may
// lead when the ISR has nobody left, and why a broker whose disk was replaced never does.
#include <gtest/gtest.h>

#include "replication/controller_state.h"

namespace samsa::replication {
namespace {

using kafka::ErrorCode;
using Ids = std::vector<std::int32_t>;

const Uuid kTopic{7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7};

Uuid make_id(int a, int b) {
  Uuid u{};
  u[0] = static_cast<std::uint8_t>(a);
  u[1] = static_cast<std::uint8_t>(b);
  return u;
}

// Brokers 1..3, each with one log dir, and topic "t": RF 3, min.insync.replicas=2.
ControllerStateOptions elr_options() {
  ControllerStateOptions o;
  o.new_topic_id = [] { return kTopic; };
  return o;
}

struct ElrCluster {
  ControllerState cs{elr_options()};
  std::int64_t epoch[4] = {-1, -1, -1, -1};
  int incarnations[4] = {0, 0, 0, 0};
  std::int64_t now = 0;
  Ids r;  // the partition's replicas, leader first

  ElrCluster() {
    cs.on_become_active(0, 0);
    for (int b = 1; b <= 3; ++b)
      start(b, make_id(b, 0));
    auto t = cs.create_topics({{"t", 1, 3, {{"min.insync.replicas", "2"}}}}, false);
    EXPECT_EQ(t.answer.at(0).error, ErrorCode::none);
    r = p().replicas;
  }
  const PartitionState& p() const { return cs.image().topic(kTopic)->partitions[0]; }
  // A (re)start of broker b with log dir `dir`, caught up with the metadata.
  void start(int b, const Uuid& dir) {
    auto reg = cs.register_broker({b, make_id(b, 100 + ++incarnations[b]), {}, std::nullopt,
                                   {dir}},
                                  now);
    ASSERT_EQ(reg.answer.error, ErrorCode::none);
    epoch[b] = reg.answer.broker_epoch;
    cs.heartbeat({b, epoch[b], cs.next_offset(), false, false}, now);
  }
  void fence(int b) { cs.heartbeat({b, epoch[b], cs.next_offset(), true, false}, now); }
};

TEST(ControllerElr, MembersLeavingBelowMinIsrBecomeEligibleAndOneLeadsWhenTheIsrCannot) {
  ElrCluster c;
  c.fence(c.r[2]);
  EXPECT_EQ(c.p().isr, (Ids{c.r[0], c.r[1]}));
  EXPECT_TRUE(c.p().elr.empty());  // at min.insync.replicas: it may lack acknowledged records
  c.fence(c.r[1]);
  EXPECT_EQ(c.p().isr, (Ids{c.r[0]}));
  EXPECT_EQ(c.p().elr, (Ids{c.r[1]}));  // left below the minimum: holds every acknowledgement
  c.fence(c.r[0]);
  EXPECT_EQ(c.p().leader, -1);
  EXPECT_EQ(c.p().isr, (Ids{c.r[0]}));  // the last member stays
  // The replica that left at the minimum returns first: not eligible.
  c.start(c.r[2], make_id(c.r[2], 0));
  EXPECT_EQ(c.p().leader, -1);
  // The eligible one returns: it leads alone; the fenced ISR member keeps its eligibility.
  c.start(c.r[1], make_id(c.r[1], 0));
  EXPECT_EQ(c.p().leader, c.r[1]);
  EXPECT_EQ(c.p().isr, (Ids{c.r[1]}));
  EXPECT_EQ(c.p().elr, (Ids{c.r[0]}));
}

TEST(ControllerElr, TheIsrReachingMinIsrClearsTheElr) {
  ElrCluster c;
  c.fence(c.r[2]);
  c.fence(c.r[1]);
  ASSERT_EQ(c.p().elr, (Ids{c.r[1]}));
  c.start(c.r[1], make_id(c.r[1], 0));
  auto grow = c.cs.alter_partition(
      {c.r[0], c.epoch[c.r[0]], kTopic, 0,
       {1, c.p().leader_epoch, c.p().partition_epoch, {{c.r[0], -1}, {c.r[1], c.epoch[c.r[1]]}}}});
  ASSERT_EQ(grow.answer.error, ErrorCode::none);
  EXPECT_EQ(c.p().isr, (Ids{c.r[0], c.r[1]}));
  EXPECT_TRUE(c.p().elr.empty());
}

TEST(ControllerElr, AReplacedDiskIsNotElectedWhileTheOtherIsrMembersAreDown) {
  ElrCluster c;
  const auto replicas = c.r;
  c.now = 1500;
  c.cs.tick(c.now);  // every session expires at once: the ISR stays whole
  ASSERT_EQ(c.p().leader, -1);
  ASSERT_EQ(c.p().isr, replicas);
  // The old leader returns with an empty, new disk: it leaves the ISR and does not lead.
  c.start(replicas[0], make_id(replicas[0], 1));
  EXPECT_EQ(c.p().leader, -1);
  EXPECT_EQ(c.p().isr, (Ids{replicas[1], replicas[2]}));
  // An ISR member with its disk returns and leads.
  c.start(replicas[1], make_id(replicas[1], 0));
  EXPECT_EQ(c.p().leader, replicas[1]);
}

TEST(ControllerElr, ALastIsrMemberWithAReplacedDiskWaitsForTheElrOrAnUncleanElection) {
  for (bool unclean : {false, true}) {
    ElrCluster c;
    const auto replicas = c.r;
    c.fence(replicas[2]);
    c.fence(replicas[1]);
    c.fence(replicas[0]);
    ASSERT_EQ(c.p().isr, (Ids{replicas[0]}));
    ASSERT_EQ(c.p().elr, (Ids{replicas[1]}));
    c.start(replicas[0], make_id(replicas[0], 1));  // its disk was replaced
    EXPECT_EQ(c.p().leader, -1);
    EXPECT_TRUE(c.p().isr.empty());
    EXPECT_EQ(c.p().elr, (Ids{replicas[1]}));
    if (unclean) {
      // The operator's choice: the empty replica leads, and nobody else is eligible now.
      auto e = c.cs.elect_leaders(true, nullptr);
      ASSERT_EQ(e.answer.size(), 1u);
      EXPECT_EQ(e.answer[0].error, ErrorCode::none);
      EXPECT_EQ(c.p().leader, replicas[0]);
      EXPECT_EQ(c.p().isr, (Ids{replicas[0]}));
      EXPECT_TRUE(c.p().elr.empty());
    } else {
      c.start(replicas[1], make_id(replicas[1], 0));
      EXPECT_EQ(c.p().leader, replicas[1]);
      EXPECT_EQ(c.p().isr, (Ids{replicas[1]}));
    }
  }
}

TEST(ControllerElr, SnapshotsCarryTheElrAndTheDirectoryIds) {
  ElrCluster c;
  c.fence(c.r[2]);
  c.fence(c.r[1]);
  c.cs.commit(c.cs.next_offset() - 1);
  ControllerState replayed;
  std::int64_t off = 0;
  for (const auto& rec : c.cs.snapshot())
    ASSERT_TRUE(replayed.replay(rec, off++));
  const auto& p = replayed.image().topic(kTopic)->partitions[0];
  EXPECT_EQ(p.elr, c.p().elr);
  EXPECT_EQ(replayed.image().brokers().at(1).log_dirs, (std::vector<Uuid>{make_id(1, 0)}));
}

}  // namespace
}  // namespace samsa::replication
