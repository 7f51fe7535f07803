// The drain planner (daemon/admin/drain_plan.h) over metadata images built from records: an
// unknown broker, the least loaded replacement, fenced and shutting-down brokers passed over,
// the drained broker's place in the replica list kept, the rack rules (its own rack first, then
// a rack new to the partition), partitions short of brokers named, and reassignments already
// in progress.
#include "daemon/admin/drain_plan.h"

#include <gtest/gtest.h>

#include <map>

namespace samsa::daemon {
namespace {

using replication::BrokerRegistrationChangeRecord;
using replication::MetadataImage;
using replication::PartitionRecord;
using replication::RegisterBrokerRecord;
using replication::TopicRecord;
using replication::Uuid;
using Ids = std::vector<std::int32_t>;

Uuid topic_id(int n) {
  Uuid u{};
  u[0] = static_cast<std::uint8_t>(n);
  u[15] = 1;
  return u;
}

struct Cluster {
  MetadataImage image;
  int topics = 0;

  // Registered and unfenced, with an optional rack.
  void broker(std::int32_t id, std::optional<std::string> rack = std::nullopt, bool fenced = false,
              bool shutting_down = false) {
    RegisterBrokerRecord r;
    r.broker_id = id;
    r.broker_epoch = 10 + id;
    r.rack = std::move(rack);
    r.incarnation_id = topic_id(100 + id);
    ASSERT_TRUE(image.apply(r));
    if (!fenced) {
      ASSERT_TRUE(image.apply(BrokerRegistrationChangeRecord{id, 10 + id, -1, 0}));
    }
    if (shutting_down) {
      ASSERT_TRUE(image.apply(BrokerRegistrationChangeRecord{id, 10 + id, 0, 1}));
    }
  }

  // A topic whose partition i has replicas parts[i] (all in the ISR, the first leading).
  void topic(const std::string& name, const std::vector<Ids>& parts) {
    const Uuid id = topic_id(++topics);
    ASSERT_TRUE(image.apply(TopicRecord{name, id}));
    for (std::size_t i = 0; i < parts.size(); ++i) {
      PartitionRecord p;
      p.topic_id = id;
      p.partition = static_cast<std::int32_t>(i);
      p.replicas = parts[i];
      p.isr = parts[i];
      p.leader = parts[i].front();
      ASSERT_TRUE(image.apply(p));
    }
  }

  void moving(const std::string& name, const Ids& replicas, const Ids& adding,
              const Ids& removing) {
    const Uuid id = topic_id(++topics);
    ASSERT_TRUE(image.apply(TopicRecord{name, id}));
    PartitionRecord p;
    p.topic_id = id;
    p.replicas = replicas;
    p.isr = replicas;
    p.leader = replicas.front();
    p.adding_replicas = adding;
    p.removing_replicas = removing;
    ASSERT_TRUE(image.apply(p));
  }
};

std::map<std::string, Ids> targets(const DrainPlan& p) {
  std::map<std::string, Ids> out;
  for (const auto& m : p.moves)
    out[m.topic + "-" + std::to_string(m.partition)] = m.target;
  return out;
}

TEST(DrainPlan, UnknownBroker) {
  Cluster c;
  c.broker(1);
  auto p = plan_drain(c.image, 7);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error(), "broker 7 is not registered");
}

TEST(DrainPlan, NothingToMove) {
  Cluster c;
  c.broker(1);
  c.broker(2);
  c.topic("t", {{2}});
  auto p = plan_drain(c.image, 1);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->partitions, 0u);
  EXPECT_TRUE(p->moves.empty());
}

TEST(DrainPlan, LeastLoadedAndPlaceKept) {
  Cluster c;
  for (int b = 1; b <= 5; ++b)
    c.broker(b);
  // Broker 3 already holds 3 replicas, 4 holds 1, 5 none.
  c.topic("busy", {{3, 4}, {3}, {3}});
  c.topic("t", {{1, 2}, {2, 1}, {1, 2}, {2, 1}});
  auto p = plan_drain(c.image, 1);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->partitions, 4u);
  auto t = targets(*p);
  // 5 (0), then 4 and 5 (1 each, lower id first), then 4: 3 stays the busiest.
  EXPECT_EQ(t["t-0"], (Ids{5, 2}));
  EXPECT_EQ(t["t-1"], (Ids{2, 4}));
  EXPECT_EQ(t["t-2"], (Ids{5, 2}));
  EXPECT_EQ(t["t-3"], (Ids{2, 4}));
  for (const auto& m : p->moves)
    EXPECT_EQ(m.from.size(), m.target.size());
}

TEST(DrainPlan, PassesOverFencedShuttingDownAndHolders) {
  Cluster c;
  c.broker(1);
  c.broker(2);
  c.broker(3, std::nullopt, true);         // fenced
  c.broker(4, std::nullopt, false, true);  // in controlled shutdown
  c.broker(5);
  c.topic("t", {{1, 2}, {1, 5}});
  auto p = plan_drain(c.image, 1);
  ASSERT_TRUE(p);
  auto t = targets(*p);
  EXPECT_EQ(t["t-0"], (Ids{5, 2}));
  EXPECT_EQ(t["t-1"], (Ids{2, 5}));
}

TEST(DrainPlan, ShortOfBrokersNamed) {
  Cluster c;
  c.broker(1);
  c.broker(2);
  c.broker(3);
  c.broker(4, std::nullopt, true);
  c.topic("ok", {{1, 2}});
  c.topic("full", {{1, 2, 3}, {3, 2, 1}});
  auto p = plan_drain(c.image, 1);
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().find("full-0 (replication factor 3), full-1 (replication factor 3)"),
            std::string::npos)
      << p.error();
  EXPECT_NE(p.error().find("usable: 2, 3"), std::string::npos) << p.error();
  EXPECT_EQ(p.error().find("ok-0"), std::string::npos) << p.error();
}

TEST(DrainPlan, OwnRackFirst) {
  Cluster c;
  c.broker(1, "a");
  c.broker(2, "b");
  c.broker(3, "c");
  c.broker(4, "a");
  c.broker(5, "d");
  c.topic("load", {{4}, {4}, {4}});  // 4 is the busiest, still the one in rack a
  c.topic("t", {{1, 2, 3}});
  auto p = plan_drain(c.image, 1);
  ASSERT_TRUE(p);
  EXPECT_EQ(targets(*p)["t-0"], (Ids{4, 2, 3}));
}

TEST(DrainPlan, NewRackBeforeATakenOne) {
  Cluster c;
  c.broker(1, "a");
  c.broker(2, "b");
  c.broker(3, "c");
  c.broker(4, "b");
  c.broker(5, "d");
  c.topic("load", {{5}, {5}});  // 5 is busier than 4, but 4's rack already holds t-0
  c.topic("t", {{2, 1, 3}});
  auto p = plan_drain(c.image, 1);
  ASSERT_TRUE(p);
  EXPECT_EQ(targets(*p)["t-0"], (Ids{2, 5, 3}));
}

TEST(DrainPlan, WithoutRacksLoadDecides) {
  Cluster c;
  c.broker(1);
  c.broker(2);
  c.broker(3);
  c.broker(4);
  c.topic("load", {{3}, {3}});
  c.topic("t", {{1, 2}});
  auto p = plan_drain(c.image, 1);
  ASSERT_TRUE(p);
  EXPECT_EQ(targets(*p)["t-0"], (Ids{4, 2}));
}

TEST(DrainPlan, ReassignmentsInProgress) {
  Cluster c;
  for (int b = 1; b <= 4; ++b)
    c.broker(b);
  // Already moving off 1 ([1,2] to [2,3]): left alone, still counted.
  c.moving("away", {2, 3, 1}, {3}, {1});
  // Moving onto 1 ([2,3] to [2,1]): the target changes to replace 1.
  c.moving("onto", {2, 1, 3}, {1}, {3});
  auto p = plan_drain(c.image, 1);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->partitions, 2u);
  EXPECT_EQ(p->moving_away, (std::vector<std::string>{"away-0"}));
  ASSERT_EQ(p->moves.size(), 1u);
  EXPECT_EQ(p->moves[0].from, (Ids{2, 1}));
  EXPECT_EQ(p->moves[0].target, (Ids{2, 4}));  // 3 is in away-0's target, 4 in none
}

}  // namespace
}  // namespace samsa::daemon
