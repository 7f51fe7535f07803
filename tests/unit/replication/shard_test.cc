// replication::Shard following metadata images: partitions opened and retired, a topic deleted
// and re-created under the same name while the old partition still drains appends, and a
// cluster node's replicas kept in step with the image by their ReplicaStates.
#include "replication/shard.h"

#include <gtest/gtest.h>

#include <optional>

#include "base/clock.h"
#include "tests/support/io_testing.h"

namespace samsa::replication {
namespace {

ImagePtr image_with(const std::string& name, Uuid id, int partitions) {
  auto img = std::make_shared<MetadataImage>();
  if (!name.empty()) {
    EXPECT_TRUE(img->apply(TopicRecord{name, id}));
    for (int p = 0; p < partitions; ++p)
      EXPECT_TRUE(img->apply(PartitionRecord{id, p, {1}, {1}, 1, 0, 0}));
  }
  return img;
}

class ShardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = io::Reactor::create({.name = "test"});
    ASSERT_TRUE(r.has_value());
    reactor = std::move(*r);
    auto d = io::LogDir::open(dir.path());
    ASSERT_TRUE(d.has_value()) << d.error().detail;
    log_dir = std::move(*d);
    Shard::Options o;
    o.log_dirs = {log_dir.get()};
    shard = std::make_unique<Shard>(*reactor, o);
  }
  void TearDown() override {
    shard->close_all();
    reactor->run_until([&] { return shard->closed(); });
    shard.reset();
  }
  io::testing::TempDir dir;
  std::unique_ptr<io::Reactor> reactor;
  std::unique_ptr<io::LogDir> log_dir;
  std::unique_ptr<Shard> shard;
};

TEST_F(ShardTest, ARecreatedTopicNeverOpensTheOldDirectory) {
  const Uuid old_id{1}, new_id{2};
  shard->apply(image_with("t", old_id, 1));
  Partition* p = shard->find("t", 0);
  ASSERT_NE(p, nullptr);
  // An append still in flight when the topic is deleted and created again at once.
  io::testing::OwnedAppend op(io::testing::make_batch(3, 1000));
  ASSERT_TRUE(p->append(&op).has_value());
  shard->apply(image_with("", {}, 0));
  shard->apply(image_with("t", new_id, 1));
  // Not opened on top of the old directory while it drains.
  EXPECT_EQ(shard->find("t", 0), nullptr);
  ASSERT_TRUE(reactor->run_until([&] { return shard->find("t", 0) != nullptr; }));
  EXPECT_EQ(op.completions, 1);
  Partition* fresh = shard->find("t", 0);
  EXPECT_EQ(fresh->topic_id(), new_id);
  EXPECT_EQ(fresh->log().log_end_offset(), 0);  // the old records are gone
  EXPECT_TRUE(std::filesystem::exists(dir / "t-0"));
}

// ---- a cluster node (node.id 1) ----

const Uuid kIncarnation{7};

ImagePtr cluster_image(std::vector<MetadataRecord> records) {
  auto img = std::make_shared<MetadataImage>();
  for (auto& r : records)
    EXPECT_TRUE(std::visit([&](auto& rec) { return bool(img->apply(rec)); }, r));
  return img;
}

std::vector<MetadataRecord> three_brokers() {
  std::vector<MetadataRecord> v;
  for (std::int32_t b = 1; b <= 3; ++b) {
    v.push_back(RegisterBrokerRecord{b, b == 1 ? kIncarnation : Uuid{9}, 10 * b, {}, {}, true});
    v.push_back(BrokerRegistrationChangeRecord{b, 10 * b, -1, 0});
  }
  v.push_back(TopicRecord{"t", Uuid{3}});
  return v;
}

class ClusterShardTest : public ShardTest {
 protected:
  void SetUp() override {
    ShardTest::SetUp();
    shard.reset();
    Shard::Options o;
    o.log_dirs = {log_dir.get()};
    o.node_id = 1;
    o.incarnation_id = kIncarnation;
    o.replica_hw = true;
    o.defaults["min.insync.replicas"] = "2";
    shard = std::make_unique<Shard>(*reactor, o);
  }
  // t-0 led here (replicas 1, 2, 3; leader epoch 4, partition epoch 6) with `records` records
  // appended and synced on this leader.
  Partition* lead(std::vector<std::int32_t> isr, int records) {
    recs.push_back(PartitionRecord{Uuid{3}, 0, {1, 2, 3}, std::move(isr), 1, 4, 6});
    shard->apply(cluster_image(recs));
    Partition* p = shard->find("t", 0);
    if (p && records > 0) append(p, records);
    return p;
  }
  void append(Partition* p, int records) {
    appends.push_back(
        std::make_unique<io::testing::OwnedAppend>(io::testing::make_batch(records, 1000)));
    const std::int64_t end = p->log().log_end_offset() + records;
    EXPECT_TRUE(p->append(appends.back().get()).has_value());
    EXPECT_TRUE(reactor->run_until([&] { return p->log().durable_end_offset() == end; }));
  }
  std::vector<MetadataRecord> recs = three_brokers();
  std::vector<std::unique_ptr<io::testing::OwnedAppend>> appends;
};

TEST_F(ClusterShardTest, ReplicasFollowTheImage) {
  auto recs = three_brokers();
  recs.push_back(PartitionRecord{Uuid{3}, 0, {1, 2, 3}, {1, 2, 3}, 1, 4, 6});
  shard->apply(cluster_image(recs));
  Partition* p = shard->find("t", 0);
  ASSERT_NE(p, nullptr);
  ASSERT_NE(p->replica(), nullptr);
  EXPECT_EQ(p->replica()->role(), ReplicaRole::leader);
  EXPECT_EQ(p->replica()->leader_epoch(), 4);
  EXPECT_EQ(p->replica()->isr(), (std::vector<std::int32_t>{1, 2, 3}));
  EXPECT_EQ(p->log().leader_epochs().latest_epoch(), 4);  // the epoch starts at election

  // The ISR shrinks (same leader epoch): still the leader, with the new ISR.
  recs.push_back(PartitionChangeRecord{Uuid{3}, 0, std::vector<std::int32_t>{1, 2}});
  shard->apply(cluster_image(recs));
  EXPECT_EQ(p->replica()->role(), ReplicaRole::leader);
  EXPECT_EQ(p->replica()->isr(), (std::vector<std::int32_t>{1, 2}));
  EXPECT_EQ(p->replica()->partition_epoch(), 7);

  // Leadership moves to broker 2: a follower of 2 in the next epoch, served to no client.
  recs.push_back(PartitionChangeRecord{Uuid{3}, 0, std::nullopt, 2});
  shard->apply(cluster_image(recs));
  EXPECT_EQ(shard->find("t", 0), nullptr);
  ASSERT_EQ(shard->find_replica("t", 0), p);
  EXPECT_EQ(p->replica()->role(), ReplicaRole::follower);
  EXPECT_EQ(p->replica()->leader_id(), 2);
  EXPECT_EQ(p->replica()->leader_epoch(), 5);
}

TEST_F(ClusterShardTest, ANewReplicaOfAFencedIncarnationDoesNotLead) {
  auto recs = three_brokers();
  recs.push_back(BrokerRegistrationChangeRecord{1, 10, 1, 0});  // this node fenced
  recs.push_back(PartitionRecord{Uuid{3}, 0, {1, 2, 3}, {1, 2, 3}, 1, 4, 6});
  shard->apply(cluster_image(recs));
  Partition* p = shard->find_replica("t", 0);
  ASSERT_NE(p, nullptr);
  ASSERT_NE(p->replica(), nullptr);
  EXPECT_EQ(p->replica()->role(), ReplicaRole::none);
  // Unfenced: the same metadata now makes it the leader.
  recs.push_back(BrokerRegistrationChangeRecord{1, 10, -1, 0});
  shard->apply(cluster_image(recs));
  EXPECT_EQ(p->replica()->role(), ReplicaRole::leader);
}

struct Waiter : PartitionWaiter {
  void on_partition_advanced() override { ++woken; }
  int woken = 0;
};

// A follower's Fetch as a leader's handler passes it: the leader records its offset (the HW
// may move) and answers from its log end.
void follower_fetch(Partition* p, std::int32_t id, std::int64_t offset) {
  ReplicaFetch f{id, 10 * id, 4, offset, 4};
  ReadArgs a;
  a.offset = offset;
  a.max_bytes = 1 << 20;
  a.replica = &f;
  ReadOutcome out;
  EXPECT_TRUE(p->read(a, out, nullptr));
  EXPECT_EQ(out.error, kafka::ErrorCode::none);
}

TEST_F(ClusterShardTest, TheHighWatermarkWaitsForTheIsr) {
  Partition* p = lead({1, 2, 3}, 5);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->high_watermark(), 0);  // synced here, but the followers have not fetched it
  Waiter w;
  p->add_waiter(&w);
  follower_fetch(p, 2, 5);
  EXPECT_EQ(p->high_watermark(), 0);  // broker 3 is in the ISR too
  follower_fetch(p, 3, 5);
  EXPECT_EQ(p->high_watermark(), 5);
  EXPECT_EQ(w.woken, 1);
}

// KIP-392: a consumer's Fetch v11+ reaches a follower replica too (lookup's any_replica), its
// leader epoch checked against the one the follower knows; it reads below the follower's HW
// and gets OFFSET_OUT_OF_RANGE past its log.
TEST_F(ClusterShardTest, AFollowerServesConsumersThroughAnyReplica) {
  using kafka::ErrorCode;
  Partition* p = lead({1, 2, 3}, 5);
  ASSERT_NE(p, nullptr);
  follower_fetch(p, 2, 5);
  follower_fetch(p, 3, 5);
  ASSERT_EQ(p->high_watermark(), 5);
  recs.push_back(PartitionChangeRecord{Uuid{3}, 0, std::nullopt, 2});  // broker 2 leads, epoch 5
  shard->apply(cluster_image(recs));
  EXPECT_EQ(shard->lookup("t", 0).error(), ErrorCode::not_leader_or_follower);
  auto f = shard->lookup("t", 0, 5, true);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(*f, p);
  EXPECT_EQ(shard->lookup("t", 0, 4, true).error(), ErrorCode::fenced_leader_epoch);
  EXPECT_EQ(shard->lookup("t", 0, 6, true).error(), ErrorCode::unknown_leader_epoch);
  EXPECT_EQ(shard->lookup("t", 1, -1, true).error(), ErrorCode::unknown_topic_or_partition);
  auto read = [&](std::int64_t offset) {
    ReadArgs a;
    a.offset = offset;
    a.max_bytes = 1 << 20;
    ReadOutcome out;
    EXPECT_TRUE(p->read(a, out, nullptr));
    return out;
  };
  const ReadOutcome all = read(0);
  EXPECT_EQ(all.error, ErrorCode::none);
  EXPECT_EQ(all.high_watermark, 5);
  EXPECT_GT(all.bytes, 0u);
  EXPECT_EQ(read(5).bytes, 0u);
  EXPECT_EQ(read(6).error, ErrorCode::offset_out_of_range);
}

// A restart before this incarnation is registered: the image still names this node the leader
// (the controller has not fenced the old incarnation yet), so the partition is opened but not
// led. Its log's unreplicated tail must not reach consumers through any_replica (cluster.faults
// saw a record served this way that the next leader never had).
TEST_F(ClusterShardTest, AnUnregisteredRestartServesNothingAboveTheReplicatedHw) {
  Partition* p = lead({1, 2, 3}, 5);
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(p->high_watermark(), 0);  // nothing replicated
  shard->close_all();
  ASSERT_TRUE(reactor->run_until([&] { return shard->closed(); }));
  Shard::Options o;
  o.log_dirs = {log_dir.get()};
  o.node_id = 1;
  o.incarnation_id = Uuid{8};  // a new process: the image still holds the old registration
  o.replica_hw = true;
  shard = std::make_unique<Shard>(*reactor, o);
  shard->apply(cluster_image(recs));
  EXPECT_EQ(shard->find("t", 0), nullptr);
  auto f = shard->lookup("t", 0, 4, true);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ((*f)->log().log_end_offset(), 5);
  EXPECT_EQ((*f)->high_watermark(), 0);
  ReadArgs a;
  a.offset = 0;
  a.max_bytes = 1 << 20;
  ReadOutcome out;
  EXPECT_TRUE((*f)->read(a, out, nullptr));
  EXPECT_EQ(out.high_watermark, 0);
  EXPECT_EQ(out.bytes, 0u);
}

// An acks=all produce through Partition::produce.
struct Produce : ProduceOp {
  std::vector<std::byte> bytes;
  std::optional<kafka::ErrorCode> outcome;
  explicit Produce(int records, std::int64_t deadline = INT64_MAX) {
    bytes = io::testing::make_batch(records, 1000);
    batch = bytes;
    acks = -1;
    deadline_ns = deadline;
    produced = [](ProduceOp* op) {
      auto* self = static_cast<Produce*>(op);
      self->outcome = self->error;
    };
  }
};

TEST_F(ClusterShardTest, AcksAllWaitsForTheIsrInOffsetOrder) {
  Partition* p = lead({1, 2, 3}, 0);
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(p->replicated());
  Produce first(5), second(3);
  p->produce(&first);
  p->produce(&second);
  ASSERT_TRUE(reactor->run_until([&] { return p->log().durable_end_offset() == 8; }));
  EXPECT_FALSE(first.outcome || second.outcome);  // synced here; the ISR has not fetched
  follower_fetch(p, 2, 5);
  follower_fetch(p, 3, 5);
  EXPECT_EQ(first.outcome, kafka::ErrorCode::none);
  EXPECT_EQ(first.result.base_offset, 0);
  EXPECT_FALSE(second.outcome);
  // Leadership moves before the ISR holds the second: the producer must retry elsewhere.
  recs.push_back(PartitionChangeRecord{Uuid{3}, 0, std::nullopt, 2});
  shard->apply(cluster_image(recs));
  EXPECT_EQ(second.outcome, kafka::ErrorCode::not_leader_or_follower);
}

TEST_F(ClusterShardTest, AnIsrBelowMinInsyncRefusesAcksAllAndHoldsTheHw) {
  Partition* p = lead({1, 2}, 0);
  ASSERT_NE(p, nullptr);
  Produce c(2);
  p->produce(&c);
  ASSERT_TRUE(reactor->run_until([&] { return p->log().durable_end_offset() == 2; }));
  EXPECT_FALSE(c.outcome);  // waits for broker 2
  // Broker 2 leaves the ISR (min.insync.replicas=2). KIP-966 keeps the HW where it is (2 stays
  // eligible to lead and must hold everything committed), so the append keeps waiting: for the
  // ISR to grow back, or its time-out, as Kafka's does with eligible leader replicas.
  recs.push_back(PartitionChangeRecord{Uuid{3}, 0, std::vector<std::int32_t>{1}});
  shard->apply(cluster_image(recs));
  EXPECT_FALSE(c.outcome);
  // Nothing more is appended with acks=all until the ISR grows again.
  Produce refused(1);
  p->produce(&refused);
  EXPECT_EQ(refused.outcome, kafka::ErrorCode::not_enough_replicas);
  EXPECT_EQ(p->log().log_end_offset(), 2);
  p->release_commit_waiters();
  EXPECT_EQ(c.outcome, kafka::ErrorCode::not_leader_or_follower);
}

TEST_F(ClusterShardTest, AcksAllTimesOutAndClosingAnswersTheRest) {
  Partition* p = lead({1, 2, 3}, 0);
  ASSERT_NE(p, nullptr);
  Produce waits(1), times_out(1, mono_ns() + 50'000'000);
  p->produce(&waits);
  p->produce(&times_out);
  ASSERT_TRUE(reactor->run_until([&] { return times_out.outcome.has_value(); }));
  EXPECT_EQ(times_out.outcome, kafka::ErrorCode::request_timed_out);  // may still commit later
  EXPECT_FALSE(waits.outcome);
  p->release_commit_waiters();
  EXPECT_EQ(waits.outcome, kafka::ErrorCode::not_leader_or_follower);
}

TEST(SingleNodeShard, HasNoReplicaState) {
  io::testing::TempDir dir;
  auto r = io::Reactor::create({.name = "test"});
  ASSERT_TRUE(r.has_value());
  auto d = io::LogDir::open(dir.path());
  ASSERT_TRUE(d.has_value());
  Shard::Options o;
  o.log_dirs = {d->get()};
  o.replica_hw = true;  // ignored without a node id
  Shard shard(**r, o);
  shard.apply(image_with("t", Uuid{1}, 1));
  Partition* p = shard.find("t", 0);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->replica(), nullptr);
  io::testing::OwnedAppend op(io::testing::make_batch(2, 1000));
  ASSERT_TRUE(p->append(&op).has_value());
  ASSERT_TRUE((*r)->run_until([&] { return p->high_watermark() == 2; }));
  shard.close_all();
  (*r)->run_until([&] { return shard.closed(); });
}

}  // namespace
}  // namespace samsa::replication
