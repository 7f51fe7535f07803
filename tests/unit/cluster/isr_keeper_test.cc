// cluster::IsrKeeper: a leader whose follower stopped fetching proposes the smaller ISR to
// the controller as a real AlterPartition v3 frame, and the controller's answer (a real
// response frame) makes the leader's ReplicaState take it, so the HW moves past the follower.
#include "daemon/cluster/isr_keeper.h"

#include <gtest/gtest.h>

#include "base/clock.h"
#include "net/kafka/api.h"
#include "net/kafka/gen/alter_partition_request.h"
#include "net/kafka/gen/alter_partition_response.h"
#include "replication/cluster_wire.h"
#include "tests/support/io_testing.h"

namespace samsa::cluster {
namespace {

using namespace samsa::replication;

const Uuid kIncarnation{7};
const Uuid kTopic{3};

ImagePtr image_of(const std::vector<MetadataRecord>& records) {
  auto img = std::make_shared<MetadataImage>();
  for (const auto& r : records)
    EXPECT_TRUE(std::visit([&](const auto& rec) { return bool(img->apply(rec)); }, r));
  return img;
}

std::vector<std::byte> flatten(net::Response r) {
  std::vector<std::byte> out;
  for (auto& p : r.pieces())
    out.insert(out.end(), p.bytes.data(), p.bytes.data() + p.bytes.size());
  return out;
}

class IsrKeeperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = io::Reactor::create({.name = "test"});
    ASSERT_TRUE(r.has_value());
    reactor = std::move(*r);
    auto d = io::LogDir::open(dir.path());
    ASSERT_TRUE(d.has_value());
    log_dir = std::move(*d);
    Shard::Options o;
    o.log_dirs = {log_dir.get()};
    o.node_id = 1;
    o.incarnation_id = kIncarnation;
    o.replica_hw = true;
    o.replica.replica_lag_time_max_ms = 100;
    shard = std::make_unique<Shard>(*reactor, o);
    for (std::int32_t b = 1; b <= 3; ++b) {
      recs.push_back(
          RegisterBrokerRecord{b, b == 1 ? kIncarnation : Uuid{9}, 10 * b, {}, {}, true});
      recs.push_back(BrokerRegistrationChangeRecord{b, 10 * b, -1, 0});
    }
    recs.push_back(TopicRecord{"t", kTopic});
    recs.push_back(PartitionRecord{kTopic, 0, {1, 2, 3}, {1, 2, 3}, 1, 4, 6});
    shard->apply(image_of(recs));
  }
  void TearDown() override {
    keeper.reset();
    shard->close_all();
    reactor->run_until([&] { return shard->closed(); });
  }
  io::testing::TempDir dir;
  std::unique_ptr<io::Reactor> reactor;
  std::unique_ptr<io::LogDir> log_dir;
  std::unique_ptr<Shard> shard;
  std::unique_ptr<IsrKeeper> keeper;
  std::vector<MetadataRecord> recs;
};

TEST_F(IsrKeeperTest, ALaggingFollowerLeavesTheIsrThroughTheController) {
  Partition* p = shard->find("t", 0);
  ASSERT_NE(p, nullptr);
  io::testing::OwnedAppend op(io::testing::make_batch(4, 1000));
  ASSERT_TRUE(p->append(&op).has_value());
  ASSERT_TRUE(reactor->run_until([&] { return p->log().durable_end_offset() == 4; }));

  std::vector<std::vector<std::byte>> sent;
  IsrKeeper::Done answer;
  keeper = std::make_unique<IsrKeeper>(*reactor, *shard,
                                       IsrKeeper::Options{.node_id = 1, .interval_ms = 10},
                                       [&](std::vector<std::byte> frame, IsrKeeper::Done done) {
                                         sent.push_back(std::move(frame));
                                         answer = std::move(done);
                                       });
  keeper->start();
  // Broker 2 keeps up, broker 3 never fetches: after replica.lag.time.max.ms it is proposed out.
  const std::int64_t until = mono_ms() + 5000;
  ASSERT_TRUE(reactor->run_until([&] {
    ReplicaFetch f{2, 20, 4, 4, 4};
    p->replica()->on_replica_fetch(f, mono_ms());
    return !sent.empty() || mono_ms() > until;
  }));
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(p->high_watermark(), 0);  // broker 3 still holds it back

  // What the controller receives.
  auto h = kafka::decode_request_header(sent[0]);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h.header.request_api_version, 3);
  kafka::AlterPartitionRequest req;
  ASSERT_EQ(kafka::decode_request_body(sent[0], h, req), kafka::DecodeError::none);
  EXPECT_EQ(req.broker_id, 1);
  EXPECT_EQ(req.broker_epoch, 10);
  auto items = alter_partition_items(req, 3);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].topic_id, kTopic);
  EXPECT_EQ(items[0].proposal.leader_epoch, 4);
  EXPECT_EQ(items[0].proposal.partition_epoch, 6);
  ASSERT_EQ(items[0].proposal.new_isr.size(), 2u);
  EXPECT_EQ(items[0].proposal.new_isr[1], (IsrMember{2, 20}));

  // The controller accepts; its answer arrives after the metadata (as the link delivers it).
  recs.push_back(PartitionChangeRecord{kTopic, 0, std::vector<std::int32_t>{1, 2}});
  shard->apply(image_of(recs));
  kafka::AlterPartitionResponse resp;
  add_alter_partition_answer(resp, kTopic, 0,
                             AlterPartitionAnswer{0, kafka::ErrorCode::none, 1, 4, {1, 2}, 7});
  auto frame = flatten(kafka::encode_response(resp, 3, h.header.correlation_id));
  answer(std::vector<std::byte>(frame.begin() + 4, frame.end()));
  EXPECT_EQ(p->replica()->isr(), (std::vector<std::int32_t>{1, 2}));
  EXPECT_EQ(p->high_watermark(), 4);  // the ISR (1 and 2) holds everything
  EXPECT_EQ(keeper->stats().shrinks, 1u);
  EXPECT_EQ(keeper->stats().requests, 1u);
}

TEST_F(IsrKeeperTest, AnUnreachableControllerIsAskedAgain) {
  std::vector<std::vector<std::byte>> sent;
  keeper = std::make_unique<IsrKeeper>(*reactor, *shard,
                                       IsrKeeper::Options{.node_id = 1, .interval_ms = 10},
                                       [&](std::vector<std::byte> frame, IsrKeeper::Done done) {
                                         sent.push_back(std::move(frame));
                                         done(std::nullopt);
                                       });
  keeper->start();
  // Neither follower fetches: one proposal, unanswered, goes again after its retry time.
  const std::int64_t until = mono_ms() + 5000;
  ASSERT_TRUE(reactor->run_until([&] { return sent.size() >= 2 || mono_ms() > until; }));
  ASSERT_GE(sent.size(), 2u);
  EXPECT_EQ(keeper->stats().unreached, sent.size());
  EXPECT_EQ(shard->find("t", 0)->replica()->isr(), (std::vector<std::int32_t>{1, 2, 3}));
}

}  // namespace
}  // namespace samsa::cluster
