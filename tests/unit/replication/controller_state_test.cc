#include "replication/controller_state.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>

namespace samsa::replication {
namespace {

using kafka::ErrorCode;

Uuid incarnation(int broker, int n) {
  Uuid u{};
  u[0] = static_cast<std::uint8_t>(broker);
  u[1] = static_cast<std::uint8_t>(n);
  return u;
}

const Uuid kTopic{9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9};

// An active controller with brokers 1..3 registered and unfenced, at time 0.
ControllerStateOptions fixed_topic_id() {
  ControllerStateOptions o{1500, false};
  o.new_topic_id = [] { return kTopic; };
  return o;
}

ErrorCode create_one(ControllerState& cs, std::string name, std::int32_t partitions,
                     std::int16_t rf) {
  auto p = cs.create_topics({{std::move(name), partitions, rf, {}}}, false);
  return p.answer.at(0).error;
}

struct Cluster {
  ControllerState cs{fixed_topic_id()};
  std::int64_t epoch[4] = {-1, -1, -1, -1};
  Cluster() {
    cs.on_become_active(0, 0);
    for (int b = 1; b <= 3; ++b) {
      auto r = cs.register_broker({b, incarnation(b, 1), {}, std::nullopt}, 0);
      EXPECT_EQ(r.answer.error, ErrorCode::none);
      epoch[b] = r.answer.broker_epoch;
      auto h = cs.heartbeat({b, epoch[b], cs.next_offset(), false, false}, 0);
      EXPECT_FALSE(h.answer.is_fenced);
    }
  }
  const PartitionState& p() const { return cs.image().topic(kTopic)->partitions[0]; }
  void create() { ASSERT_EQ(create_one(cs, "t", 1, 3), ErrorCode::none); }
};

TEST(ControllerState, RegistrationStartsFencedAndAHeartbeatCaughtUpUnfences) {
  ControllerState cs;
  cs.on_become_active(0, 100);
  auto r = cs.register_broker({1, incarnation(1, 1), {{"PLAINTEXT", "h", 9092, 0}}, "r1"}, 0);
  ASSERT_EQ(r.answer.error, ErrorCode::none);
  EXPECT_EQ(r.answer.broker_epoch, 100);  // the offset of its registration record
  ASSERT_EQ(r.records.size(), 1u);
  EXPECT_TRUE(cs.image().brokers().at(1).fenced);
  // The same incarnation again (a retry): same epoch, nothing written.
  auto again = cs.register_broker({1, incarnation(1, 1), {}, std::nullopt}, 1);
  EXPECT_EQ(again.answer.broker_epoch, 100);
  EXPECT_TRUE(again.records.empty());
  auto behind = cs.heartbeat({1, 100, 99, false, false}, 2);
  EXPECT_TRUE(behind.answer.is_fenced);
  EXPECT_FALSE(behind.answer.is_caught_up);
  auto caught_up = cs.heartbeat({1, 100, 100, false, false}, 3);
  EXPECT_FALSE(caught_up.answer.is_fenced);
  EXPECT_EQ(caught_up.records.size(), 1u);
  EXPECT_EQ(cs.heartbeat({1, 99, 100, false, false}, 4).answer.error,
            ErrorCode::stale_broker_epoch);
  // Another process with the same id while this one is alive is refused.
  EXPECT_EQ(cs.register_broker({1, incarnation(1, 2), {}, std::nullopt}, 5).answer.error,
            ErrorCode::duplicate_broker_registration);
}

TEST(ControllerState, PlacementNeedsEnoughBrokers) {
  Cluster c;
  EXPECT_EQ(create_one(c.cs, "big", 1, 4), ErrorCode::invalid_replication_factor);
  c.create();
  EXPECT_EQ(c.p().replicas.size(), 3u);
  EXPECT_EQ(c.p().isr, c.p().replicas);
  EXPECT_EQ(c.p().leader, c.p().replicas[0]);
  EXPECT_EQ(create_one(c.cs, "t", 1, 1), ErrorCode::topic_already_exists);
}

TEST(ControllerState, SessionExpiryFencesAndElectsFromTheIsr) {
  Cluster c;
  c.create();
  const std::int32_t leader = c.p().leader;
  for (int b = 1; b <= 3; ++b)
    if (b != leader) c.cs.heartbeat({b, c.epoch[b], c.cs.next_offset(), false, false}, 1400);
  EXPECT_TRUE(c.cs.tick(1499).empty());
  auto recs = c.cs.tick(1500);
  ASSERT_FALSE(recs.empty());
  EXPECT_TRUE(c.cs.image().brokers().at(leader).fenced);
  EXPECT_NE(c.p().leader, leader);
  EXPECT_GE(c.p().leader, 1);
  EXPECT_EQ(c.p().leader_epoch, 1);
  EXPECT_EQ(c.p().isr.size(), 2u);
  EXPECT_EQ(std::count(c.p().isr.begin(), c.p().isr.end(), leader), 0);
}

TEST(ControllerState, TheLastIsrMemberStaysAndLeadsAgainWhenItReturns) {
  Cluster c;
  c.create();
  const auto replicas = c.p().replicas;
  // Followers fenced first, then the leader: no clean candidate is left.
  for (std::int32_t b : {replicas[1], replicas[2], replicas[0]})
    c.cs.heartbeat({b, c.epoch[b], c.cs.next_offset(), true, false}, 10);
  EXPECT_EQ(c.p().leader, -1);
  EXPECT_EQ(c.p().isr, (std::vector<std::int32_t>{replicas[0]}));
  const auto epoch_before = c.p().leader_epoch;
  // A fenced follower coming back does not lead (unclean election is off).
  c.cs.heartbeat({replicas[1], c.epoch[replicas[1]], c.cs.next_offset(), false, false}, 20);
  EXPECT_EQ(c.p().leader, -1);
  // The last ISR member restarts (new incarnation) and, once caught up, leads again.
  auto r = c.cs.register_broker({replicas[0], incarnation(replicas[0], 2), {}, std::nullopt}, 30);
  ASSERT_EQ(r.answer.error, ErrorCode::none);
  c.cs.heartbeat({replicas[0], r.answer.broker_epoch, c.cs.next_offset(), false, false}, 31);
  EXPECT_EQ(c.p().leader, replicas[0]);
  EXPECT_GT(c.p().leader_epoch, epoch_before);
}

TEST(ControllerState, APowerCutOfEveryBrokerKeepsTheIsrWholeAndAFollowerMayLead) {
  Cluster c;
  c.create();
  const auto replicas = c.p().replicas;
  const std::int32_t leader = c.p().leader;
  // Every broker's session expires in the same tick.
  auto recs = c.cs.tick(1500);
  ASSERT_FALSE(recs.empty());
  for (int b = 1; b <= 3; ++b)
    EXPECT_TRUE(c.cs.image().brokers().at(b).fenced);
  EXPECT_EQ(c.p().leader, -1);
  EXPECT_EQ(c.p().isr, replicas);  // each of them holds every acknowledged record on disk
  // A follower restarts first (a new incarnation) and, once caught up, leads.
  const std::int32_t first = replicas[1] != leader ? replicas[1] : replicas[2];
  auto r = c.cs.register_broker({first, incarnation(first, 2), {}, std::nullopt}, 1600);
  ASSERT_EQ(r.answer.error, ErrorCode::none);
  EXPECT_EQ(c.p().isr, replicas);
  c.cs.heartbeat({first, r.answer.broker_epoch, c.cs.next_offset(), false, false}, 1601);
  EXPECT_EQ(c.p().leader, first);
  EXPECT_EQ(c.p().leader_epoch, 2);  // no leader (1), then the follower (2)
}

TEST(ControllerState, ARestartedLeaderLosesItsLeadershipBeforeRegisteringAgain) {
  Cluster c;
  c.create();
  const std::int32_t leader = c.p().leader;
  // The old incarnation's session has expired by the time it registers again.
  for (int b = 1; b <= 3; ++b)
    if (b != leader) c.cs.heartbeat({b, c.epoch[b], c.cs.next_offset(), false, false}, 1400);
  auto r = c.cs.register_broker({leader, incarnation(leader, 2), {}, std::nullopt}, 1600);
  ASSERT_EQ(r.answer.error, ErrorCode::none);
  EXPECT_GT(r.answer.broker_epoch, c.epoch[leader]);
  EXPECT_NE(c.p().leader, leader);
  EXPECT_EQ(c.p().leader_epoch, 1);
}

TEST(ControllerState, AlterPartitionIsValidated) {
  Cluster c;
  c.create();
  const std::int32_t l = c.p().leader;
  const std::int32_t f1 = c.p().replicas[1], f2 = c.p().replicas[2];
  auto req = [&](std::vector<IsrMember> isr, std::int32_t le, std::int32_t pe) {
    return AlterPartitionItem{l, c.epoch[l], kTopic, 0, {7, le, pe, std::move(isr)}};
  };
  auto shrink = req({{l, c.epoch[l]}, {f1, c.epoch[f1]}}, 0, 0);
  auto stale = shrink;
  stale.broker_epoch = 1;
  EXPECT_EQ(c.cs.alter_partition(stale).answer.error, ErrorCode::stale_broker_epoch);
  auto not_leader = shrink;
  not_leader.broker_id = f1;
  not_leader.broker_epoch = c.epoch[f1];
  EXPECT_EQ(c.cs.alter_partition(not_leader).answer.error, ErrorCode::not_leader_or_follower);
  EXPECT_EQ(c.cs.alter_partition(req({{l, -1}}, -1, 0)).answer.error,
            ErrorCode::fenced_leader_epoch);
  EXPECT_EQ(c.cs.alter_partition(req({{f1, -1}}, 0, 0)).answer.error,
            ErrorCode::invalid_request);  // the leader must stay in the ISR
  auto ok = c.cs.alter_partition(shrink);
  EXPECT_EQ(ok.answer.error, ErrorCode::none);
  EXPECT_EQ(ok.answer.request_id, 7);
  EXPECT_EQ(ok.answer.partition_epoch, 1);
  EXPECT_EQ(ok.answer.isr.size(), 2u);
  ASSERT_EQ(ok.records.size(), 1u);
  EXPECT_EQ(c.p().leader_epoch, 0);  // an ISR change keeps the leader epoch
  // A repeat of an applied change is refused (the leader waits for the metadata).
  EXPECT_EQ(c.cs.alter_partition(shrink).answer.error, ErrorCode::invalid_update_version);
  // Adding a member registered under another epoch, or fenced, is refused.
  EXPECT_EQ(c.cs.alter_partition(req({{l, c.epoch[l]}, {f1, -1}, {f2, 12345}}, 0, 1)).answer.error,
            ErrorCode::ineligible_replica);
  c.cs.heartbeat({f2, c.epoch[f2], c.cs.next_offset(), true, false}, 5);
  EXPECT_EQ(
      c.cs.alter_partition(req({{l, c.epoch[l]}, {f1, -1}, {f2, c.epoch[f2]}}, 0, 1)).answer.error,
      ErrorCode::ineligible_replica);
}

TEST(ControllerState, PreferredLeadersReturnOnceBackInTheIsr) {
  Cluster c;
  c.create();
  const auto replicas = c.p().replicas;
  const std::int32_t preferred = replicas[0];
  using Parts = std::vector<std::pair<std::string, std::int32_t>>;
  const Parts t0{{"t", 0}};
  auto elect = [&](const Parts* which) { return c.cs.elect_leaders(false, which); };
  auto one = elect(&t0);
  ASSERT_EQ(one.answer.size(), 1u);
  EXPECT_EQ(one.answer[0].error, ErrorCode::election_not_needed);
  EXPECT_TRUE(elect(nullptr).answer.empty());  // a null list names only elections needed
  // The preferred leader is fenced: leadership moves, and it cannot come back while fenced.
  c.cs.heartbeat({preferred, c.epoch[preferred], c.cs.next_offset(), true, false}, 10);
  const std::int32_t other = c.p().leader;
  ASSERT_NE(other, preferred);
  auto fenced = elect(&t0);
  EXPECT_EQ(fenced.answer[0].error, ErrorCode::preferred_leader_not_available);
  EXPECT_NE(fenced.answer[0].message.find("not a live broker"), std::string::npos);
  // Back and unfenced but not yet in the ISR: still not.
  c.cs.heartbeat({preferred, c.epoch[preferred], c.cs.next_offset(), false, false}, 20);
  auto behind = elect(&t0);
  EXPECT_EQ(behind.answer[0].error, ErrorCode::preferred_leader_not_available);
  EXPECT_NE(behind.answer[0].message.find("not in the ISR"), std::string::npos);
  EXPECT_TRUE(c.cs.rebalance_leaders().empty());
  // The leader adds it back to the ISR: the automatic rebalance makes it lead again.
  std::vector<IsrMember> isr;
  for (std::int32_t id : c.p().isr)
    isr.push_back({id, c.epoch[id]});
  isr.push_back({preferred, c.epoch[preferred]});
  auto grow = c.cs.alter_partition(AlterPartitionItem{
      other, c.epoch[other], kTopic, 0, {1, c.p().leader_epoch, c.p().partition_epoch, isr}});
  ASSERT_EQ(grow.answer.error, ErrorCode::none);
  const std::int32_t epoch_before = c.p().leader_epoch;
  auto moves = c.cs.rebalance_leaders();
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(c.p().leader, preferred);
  EXPECT_EQ(c.p().leader_epoch, epoch_before + 1);
  EXPECT_TRUE(c.cs.rebalance_leaders().empty());
  const Parts unknown{{"t", 5}, {"nope", 0}};
  auto u = elect(&unknown);
  ASSERT_EQ(u.answer.size(), 2u);
  EXPECT_EQ(u.answer[0].error, ErrorCode::unknown_topic_or_partition);
  EXPECT_EQ(u.answer[1].error, ErrorCode::unknown_topic_or_partition);
}

TEST(ControllerState, AnUncleanElectionTakesALiveReplicaOutsideTheIsr) {
  Cluster c;
  c.create();
  const auto replicas = c.p().replicas;
  using Parts = std::vector<std::pair<std::string, std::int32_t>>;
  const Parts t0{{"t", 0}};
  EXPECT_EQ(c.cs.elect_leaders(true, &t0).answer[0].error, ErrorCode::election_not_needed);
  for (std::int32_t b : {replicas[1], replicas[2], replicas[0]})
    c.cs.heartbeat({b, c.epoch[b], c.cs.next_offset(), true, false}, 10);
  ASSERT_EQ(c.p().leader, -1);
  EXPECT_EQ(c.cs.elect_leaders(true, &t0).answer[0].error,
            ErrorCode::eligible_leaders_not_available);
  // Only a replica outside the ISR comes back: the clean path leaves the partition offline,
  // the unclean election gives it to that replica, alone in the ISR.
  c.cs.heartbeat({replicas[1], c.epoch[replicas[1]], c.cs.next_offset(), false, false}, 20);
  ASSERT_EQ(c.p().leader, -1);
  auto u = c.cs.elect_leaders(true, &t0);
  EXPECT_EQ(u.answer[0].error, ErrorCode::none);
  EXPECT_EQ(c.p().leader, replicas[1]);
  EXPECT_EQ(c.p().isr, (std::vector<std::int32_t>{replicas[1]}));
}

TEST(ControllerState, ControlledShutdownMovesLeadershipThenLetsTheBrokerStop) {
  Cluster c;
  c.create();
  const std::int32_t l = c.p().leader;
  auto h = c.cs.heartbeat({l, c.epoch[l], c.cs.next_offset(), false, true}, 10);
  EXPECT_TRUE(h.answer.should_shut_down);
  EXPECT_NE(c.p().leader, l);
  EXPECT_TRUE(c.cs.image().brokers().at(l).in_controlled_shutdown);
  EXPECT_TRUE(c.cs.image().brokers().at(l).fenced);
}

// Issue 17: decisions read the working view (every record proposed, committed or not), so two
// requests decided before either commits never take the same ids, names or partitions.
TEST(ControllerState, ProducerIdBlocksInOneCommitWindowAreDisjoint) {
  Cluster c;
  auto a = c.cs.allocate_producer_ids(1, c.epoch[1]);
  auto b = c.cs.allocate_producer_ids(2, c.epoch[2]);
  ASSERT_EQ(a.answer.error, ErrorCode::none);
  ASSERT_EQ(b.answer.error, ErrorCode::none);
  EXPECT_EQ(a.answer.first, 0);
  EXPECT_EQ(a.answer.length, 1000);
  EXPECT_EQ(b.answer.first, 1000);
  // Nothing is committed yet; the committed view still says 0.
  EXPECT_EQ(c.cs.committed_image()->next_producer_id(), 0);
  c.cs.commit(c.cs.next_offset() - 1);
  EXPECT_EQ(c.cs.committed_image()->next_producer_id(), 2000);
  // A broker that is not registered with that epoch gets none.
  EXPECT_EQ(c.cs.allocate_producer_ids(1, c.epoch[1] + 100).answer.error,
            ErrorCode::stale_broker_epoch);
  EXPECT_EQ(c.cs.allocate_producer_ids(7, -1).answer.error, ErrorCode::stale_broker_epoch);
}

TEST(ControllerState, TopicRequestsSeeWhatIsStillBeingCommitted) {
  Cluster c;
  c.cs.options().new_topic_id = random_uuid;
  ASSERT_EQ(create_one(c.cs, "x.y", 1, 1), ErrorCode::none);
  EXPECT_EQ(create_one(c.cs, "x.y", 1, 1), ErrorCode::topic_already_exists);
  EXPECT_EQ(create_one(c.cs, "x_y", 1, 1), ErrorCode::invalid_topic_exception);
  // A deletion not yet committed hides the topic from CreatePartitions and AlterConfigs.
  auto d = c.cs.delete_topics({{"x.y", kZeroUuid}});
  ASSERT_EQ(d.answer.at(0).error, ErrorCode::none);
  EXPECT_EQ(c.cs.create_partitions({{"x.y", 3, {}}}, false).answer.at(0).error,
            ErrorCode::unknown_topic_or_partition);
  EXPECT_EQ(
      c.cs.alter_configs(
              {{ConfigResource::topic, "x.y", {{"retention.ms", ConfigOpType::set, "1"}}}}, false)
          .answer.at(0)
          .error,
      ErrorCode::unknown_topic_or_partition);
  EXPECT_EQ(c.cs.delete_topics({{"x.y", kZeroUuid}}).answer.at(0).error,
            ErrorCode::unknown_topic_or_partition);
  // And the name is free again.
  EXPECT_EQ(create_one(c.cs, "x_y", 1, 1), ErrorCode::none);
  EXPECT_EQ(c.cs.refused_proposals(), 0u);
}

TEST(ControllerState, AFailedWriteRevertsTheUncommittedTail) {
  Cluster c;
  c.cs.commit(c.cs.next_offset() - 1);
  const std::int64_t committed = c.cs.committed_offset();
  auto a = c.cs.allocate_producer_ids(1, c.epoch[1]);
  ASSERT_EQ(create_one(c.cs, "t", 1, 3), ErrorCode::none);
  ASSERT_NE(c.cs.image().topic("t"), nullptr);
  // The write of both failed: they leave the working view and their offsets are free again.
  c.cs.revert_to(committed + 1);
  EXPECT_EQ(c.cs.image().topic("t"), nullptr);
  EXPECT_EQ(c.cs.image().next_producer_id(), 0);
  EXPECT_EQ(c.cs.next_offset(), committed + 1);
  EXPECT_EQ(c.cs.uncommitted(), 0u);
  // The block was never answered, so it may be handed out now.
  EXPECT_EQ(c.cs.allocate_producer_ids(1, c.epoch[1]).answer.first, a.answer.first);
}

TEST(ControllerState, SnapshotAndRecordsReplayToTheSameState) {
  Cluster c;
  c.create();
  c.cs.heartbeat({2, c.epoch[2], c.cs.next_offset(), true, false}, 10);
  // A snapshot holds the committed state.
  c.cs.commit(c.cs.next_offset() - 1);
  ControllerState from_snapshot;
  std::int64_t off = 0;
  for (const auto& r : c.cs.snapshot()) {
    auto bytes = encode_record(r);
    auto back = decode_record(bytes);
    ASSERT_TRUE(back.has_value());
    from_snapshot.replay(*back, off++);
  }
  const auto& a = c.cs.image();
  const auto& b = from_snapshot.image();
  ASSERT_EQ(a.brokers().size(), b.brokers().size());
  for (const auto& [id, s] : a.brokers()) {
    EXPECT_EQ(b.brokers().at(id).epoch, s.epoch);
    EXPECT_EQ(b.brokers().at(id).fenced, s.fenced);
  }
  const auto& pa = a.topic(kTopic)->partitions[0];
  const auto& pb = b.topic(kTopic)->partitions[0];
  EXPECT_EQ(pa.leader, pb.leader);
  EXPECT_EQ(pa.isr, pb.isr);
  EXPECT_EQ(pa.leader_epoch, pb.leader_epoch);
  EXPECT_EQ(pa.partition_epoch, pb.partition_epoch);
}

TEST(ControllerState, ATopicTakesTheClientsReplicaAssignment) {
  Cluster c;
  auto ok = c.cs.create_topics({{"manual", 2, 3, {}, {{3, 1, 2}, {2, 3, 1}}}}, false);
  ASSERT_EQ(ok.answer.at(0).error, ErrorCode::none);
  const auto* t = c.cs.image().topic("manual");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->partitions[0].replicas, (std::vector<std::int32_t>{3, 1, 2}));
  EXPECT_EQ(t->partitions[0].leader, 3);
  EXPECT_EQ(t->partitions[1].replicas, (std::vector<std::int32_t>{2, 3, 1}));
  for (const auto& bad : std::vector<std::vector<std::vector<std::int32_t>>>{
           {{1, 1, 2}},          // a broker twice
           {{1, 2, 4}},          // not registered
           {{1, 2, 3}, {1, 2}},  // replication factors differ
       }) {
    auto p = c.cs.create_topics({{"bad",
                                  static_cast<std::int32_t>(bad.size()),
                                  static_cast<std::int16_t>(bad.front().size()),
                                  {},
                                  bad}},
                                false);
    EXPECT_EQ(p.answer.at(0).error, ErrorCode::invalid_replica_assignment);
    EXPECT_TRUE(p.records.empty());
  }
}

// An active controller with the given brokers (id, rack) registered and unfenced.
ControllerState with_brokers(const std::vector<std::pair<int, std::optional<std::string>>>& bs) {
  ControllerState cs{ControllerStateOptions{1500, false}};
  cs.on_become_active(0, 0);
  for (const auto& [b, rack] : bs) {
    auto r = cs.register_broker({b, incarnation(b, 1), {}, rack}, 0);
    EXPECT_EQ(r.answer.error, ErrorCode::none);
    EXPECT_FALSE(cs.heartbeat({b, r.answer.broker_epoch, cs.next_offset(), false, false}, 0)
                     .answer.is_fenced);
  }
  return cs;
}

std::set<std::string> racks_of(const ControllerState& cs, const std::vector<std::int32_t>& rs) {
  std::set<std::string> out;
  for (std::int32_t b : rs)
    out.insert(cs.image().brokers().at(b).rack.value_or(""));
  return out;
}

// Without broker.rack the placement is the round robin from a start rotating per request, as
// it always was.
TEST(ControllerState, PlacementWithoutRacksIsTheRotatingRoundRobin) {
  auto cs = with_brokers({{1, std::nullopt}, {2, std::nullopt}, {3, std::nullopt}});
  using V = std::vector<std::vector<std::int32_t>>;
  EXPECT_EQ(cs.place(3, 2), (V{{1, 2}, {2, 3}, {3, 1}}));
  EXPECT_EQ(cs.place(2, 3), (V{{2, 3, 1}, {3, 1, 2}}));
  EXPECT_EQ(cs.place(1, 1), (V{{3}}));
  EXPECT_EQ(cs.place(1, 1), (V{{1}}));
  EXPECT_EQ(cs.place(1, 4), std::nullopt);
}

// Kafka's StripedReplicaPlacer: with racks, each partition's replicas span min(RF, racks) racks,
// and leaders and replicas spread evenly over racks and brokers, across requests too.
TEST(ControllerState, PlacementStripesReplicasOverRacks) {
  auto cs = with_brokers({{1, "a"}, {2, "a"}, {3, "b"}, {4, "b"}, {5, "c"}, {6, "c"}});
  for (std::int16_t rf : {1, 2, 3, 4, 6}) {
    std::map<std::int32_t, int> leads, holds;
    std::map<std::string, int> rack_leads;
    // 60 single-partition topics, then 10 topics of 6 partitions.
    std::vector<std::vector<std::int32_t>> all;
    for (int t = 0; t < 60; ++t)
      all.push_back(cs.place(1, rf)->front());
    for (int t = 0; t < 10; ++t) {
      auto placed = cs.place(6, rf);
      ASSERT_TRUE(placed);
      all.insert(all.end(), placed->begin(), placed->end());
    }
    for (const auto& r : all) {
      ASSERT_EQ(r.size(), static_cast<std::size_t>(rf));
      EXPECT_EQ(std::set<std::int32_t>(r.begin(), r.end()).size(), r.size()) << "a broker twice";
      EXPECT_EQ(racks_of(cs, r).size(), std::min<std::size_t>(rf, 3)) << "rf " << rf;
      ++leads[r[0]];
      ++rack_leads[cs.image().brokers().at(r[0]).rack.value()];
      for (std::int32_t b : r)
        ++holds[b];
    }
    for (int b = 1; b <= 6; ++b) {
      EXPECT_EQ(leads[b], 20) << "broker " << b << " rf " << rf;
      EXPECT_EQ(holds[b], 20 * rf) << "broker " << b << " rf " << rf;
    }
    for (const auto& [rack, n] : rack_leads)
      EXPECT_EQ(n, 40) << "rack " << rack;
  }
}

// Racks of unequal size still get one replica each first; a broker in no rack counts as one
// more rack, as Kafka's placer counts it.
TEST(ControllerState, PlacementWithUnequalRacks) {
  auto cs = with_brokers({{1, "a"}, {2, "a"}, {3, "a"}, {4, "b"}, {5, std::nullopt}});
  std::map<std::int32_t, int> leads;
  for (int t = 0; t < 30; ++t) {
    const auto r = cs.place(1, 4).value().front();
    EXPECT_EQ(std::set<std::int32_t>(r.begin(), r.end()).size(), 4u);
    EXPECT_EQ(racks_of(cs, r).size(), 3u);  // "a", "b" and none
    ++leads[r[0]];
  }
  // Leaders spread over the three racks alike, and over the brokers of each.
  EXPECT_EQ(leads[4], 10);
  EXPECT_EQ(leads[5], 10);
  EXPECT_EQ(leads[1] + leads[2] + leads[3], 10);
  for (int b = 1; b <= 3; ++b)
    EXPECT_GE(leads[b], 3);
  EXPECT_EQ(cs.place(1, 6), std::nullopt);
}

ScramAlteration upsert(std::string user, ScramMechanism m, std::int32_t iterations) {
  return {false,
          {std::move(user), m, "salt", std::string(32, 's'), std::string(32, 'k'), iterations}};
}

ScramAlteration removal(std::string user, ScramMechanism m) {
  return {true, {std::move(user), m, "", "", "", 0}};
}

// AlterUserScramCredentials as Kafka's ScramControlManager decides it: one outcome per user,
// a user's changes all or nothing, and the credentials in the snapshot.
TEST(ControllerState, ScramCredentialsAreAlteredPerUserAllOrNothing) {
  ControllerState cs{fixed_topic_id()};
  cs.on_become_active(0, 0);
  auto p = cs.alter_scram_credentials(
      {upsert("alice", ScramMechanism::sha256, 8192), upsert("alice", ScramMechanism::sha512, 4096),
       removal("bob", ScramMechanism::sha256), upsert("carol", ScramMechanism::sha512, 4096),
       upsert("carol", ScramMechanism::sha512, 4096), upsert("dave", ScramMechanism::sha512, 100),
       upsert("dave", ScramMechanism::sha256, 4096)});
  ASSERT_EQ(p.answer.size(), 4u);
  EXPECT_EQ(p.answer[0].user, "alice");
  EXPECT_EQ(p.answer[0].error, ErrorCode::none);
  EXPECT_EQ(p.answer[1].error, ErrorCode::resource_not_found);
  EXPECT_EQ(p.answer[2].error, ErrorCode::duplicate_resource);
  EXPECT_EQ(p.answer[3].error, ErrorCode::unacceptable_credential);
  EXPECT_EQ(p.answer[3].message, "Too few iterations");
  EXPECT_EQ(p.records.size(), 2u);  // alice's two; dave's good one goes with his bad one
  const MetadataImage& img = cs.image();
  ASSERT_NE(img.scram_credential("alice", ScramMechanism::sha256), nullptr);
  EXPECT_EQ(img.scram_credential("alice", ScramMechanism::sha256)->iterations, 8192);
  EXPECT_EQ(img.scram_credential("dave", ScramMechanism::sha256), nullptr);

  p = cs.alter_scram_credentials({removal("alice", ScramMechanism::sha256),
                                  upsert("bob", ScramMechanism::sha256, 16384),
                                  upsert("erin", ScramMechanism::sha256, 16385)});
  EXPECT_EQ(p.answer[0].error, ErrorCode::none);
  EXPECT_EQ(p.answer[1].error, ErrorCode::none);
  EXPECT_EQ(p.answer[2].message, "Too many iterations");
  EXPECT_EQ(cs.image().scram_credential("alice", ScramMechanism::sha256), nullptr);
  EXPECT_NE(cs.image().scram_credential("alice", ScramMechanism::sha512), nullptr);
  EXPECT_EQ(cs.image().scram_credentials().size(), 2u);
}

AclBinding acl(std::string topic, std::string principal, AclOperation op,
               AclPermissionType perm = AclPermissionType::allow,
               PatternType pattern = PatternType::literal) {
  return {ResourceType::topic, std::move(topic), pattern, std::move(principal), "*", op, perm};
}

// CreateAcls and DeleteAcls as Kafka's AclControlManager decides them: each ACL alone, an
// identical ACL stored once, every filter listing what it matched; the ACLs in the snapshot,
// and the committed image's authorizer deciding over them.
TEST(ControllerState, AclsAreCreatedOnceDeletedByFilterAndKeptInTheSnapshot) {
  ControllerState cs{fixed_topic_id()};
  cs.on_become_active(0, 0);
  auto p = cs.create_acls(
      {acl("t", "User:alice", AclOperation::read), acl("t", "User:alice", AclOperation::read),
       acl("", "User:alice", AclOperation::read), acl("t", "alice", AclOperation::read),
       acl("p-", "User:*", AclOperation::write, AclPermissionType::allow, PatternType::prefixed),
       acl("p-x", "User:bob", AclOperation::all, AclPermissionType::deny)});
  ASSERT_EQ(p.answer.size(), 6u);
  EXPECT_EQ(p.answer[0].error, ErrorCode::none);
  EXPECT_EQ(p.answer[1].error, ErrorCode::none);  // the same ACL again: no second record
  EXPECT_EQ(p.answer[2].error, kAclValidationError);
  EXPECT_EQ(p.answer[3].error, kAclValidationError);
  EXPECT_EQ(p.records.size(), 3u);
  EXPECT_EQ(cs.create_acls({acl("t", "User:alice", AclOperation::read)}).records.size(), 0u);

  cs.commit(cs.next_offset() - 1);
  ImagePtr img = cs.committed_image();
  ASSERT_TRUE(img->sealed());
  const Authorizer& az = img->authorizer();
  AuthorizerOptions opts;
  EXPECT_TRUE(
      az.authorize(opts, "User:alice", "1.2.3.4", AclOperation::read, ResourceType::topic, "t"));
  EXPECT_FALSE(
      az.authorize(opts, "User:bob", "1.2.3.4", AclOperation::read, ResourceType::topic, "t"));
  EXPECT_TRUE(az.authorize(opts, "User:bob", "h", AclOperation::write, ResourceType::topic, "p-y"));
  EXPECT_FALSE(
      az.authorize(opts, "User:bob", "h", AclOperation::write, ResourceType::topic, "p-x"));

  // The snapshot rebuilds the same ACLs.
  ControllerState from_snapshot;
  std::int64_t off = 0;
  for (const auto& r : cs.snapshot()) {
    auto back = decode_record(encode_record(r));
    ASSERT_TRUE(back.has_value());
    from_snapshot.replay(*back, off++);
  }
  EXPECT_EQ(from_snapshot.committed_image()->acls(), img->acls());

  // Two filters matching one ACL both list it; it is removed once. An invalid filter fails
  // alone.
  AclBindingFilter by_name;
  by_name.resource_type = ResourceType::topic;
  by_name.resource_name = "t";
  AclBindingFilter alice;
  alice.principal = "User:alice";
  AclBindingFilter bad;
  bad.resource_type = ResourceType::unknown;
  auto d = cs.delete_acls({by_name, alice, bad});
  ASSERT_EQ(d.answer.size(), 3u);
  EXPECT_EQ(d.answer[0].matching.size(), 1u);
  EXPECT_EQ(d.answer[1].matching.size(), 1u);
  EXPECT_EQ(d.answer[2].error, kAclValidationError);
  EXPECT_EQ(d.records.size(), 1u);
  cs.commit(cs.next_offset() - 1);
  EXPECT_EQ(cs.committed_image()->acls().size(), 2u);
  // The image handed out before is unchanged (copy on write).
  EXPECT_EQ(img->acls().size(), 3u);
  EXPECT_FALSE(cs.committed_image()->authorizer().authorize(
      opts, "User:alice", "h", AclOperation::read, ResourceType::topic, "t"));
}

}  // namespace
}  // namespace samsa::replication
