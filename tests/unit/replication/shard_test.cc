// replication::Shard following metadata images: partitions opened and retired, and a topic
// deleted and re-created under the same name while the old partition still drains appends.
#include "replication/shard.h"

#include <gtest/gtest.h>

#include "io/testing.h"

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

}  // namespace
}  // namespace samsa::replication
