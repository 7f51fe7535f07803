// io::LeaderEpochCache on its own: Kafka's checkpoint format and OffsetsForLeaderEpoch answers.
#include "io/leader_epoch.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tests/support/io_testing.h"

namespace samsa::io {
namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(LeaderEpochCache, AssignsTruncatesAndPersists) {
  testing::TempDir d;
  auto file = d / "leader-epoch-checkpoint";
  auto c = LeaderEpochCache::load(file);
  ASSERT_TRUE(c.has_value());
  EXPECT_FALSE(c->latest_epoch().has_value());
  ASSERT_TRUE(c->assign(0, 0).has_value());
  ASSERT_TRUE(c->assign(0, 5).has_value());  // same epoch, later offset: nothing changes
  ASSERT_TRUE(c->assign(3, 100).has_value());
  ASSERT_TRUE(c->assign(5, 250).has_value());
  EXPECT_EQ(slurp(file), "0\n3\n0 0\n3 100\n5 250\n");
  EXPECT_EQ(c->epoch_for_offset(99), 0);
  EXPECT_EQ(c->epoch_for_offset(100), 3);
  EXPECT_EQ(c->epoch_for_offset(1000), 5);

  // OffsetsForLeaderEpoch.
  EXPECT_EQ(c->end_offset_for(5, 400).epoch, 5);
  EXPECT_EQ(c->end_offset_for(5, 400).end_offset, 400);
  EXPECT_EQ(c->end_offset_for(3, 400).end_offset, 250);
  EXPECT_EQ(c->end_offset_for(4, 400).epoch, 3);  // unknown epoch: the one below it
  EXPECT_EQ(c->end_offset_for(4, 400).end_offset, 250);
  EXPECT_EQ(c->end_offset_for(9, 400).epoch, -1);  // above everything
  EXPECT_EQ(c->end_offset_for(-1, 400).end_offset, -1);

  // A new leader at a lower start offset replaces what conflicts.
  ASSERT_TRUE(c->assign(6, 200).has_value());
  EXPECT_EQ(slurp(file), "0\n3\n0 0\n3 100\n6 200\n");
  ASSERT_TRUE(c->truncate_from_end(150).has_value());
  EXPECT_EQ(slurp(file), "0\n2\n0 0\n3 100\n");
  ASSERT_TRUE(c->truncate_from_start(120).has_value());
  EXPECT_EQ(slurp(file), "0\n1\n3 120\n");

  auto again = LeaderEpochCache::load(file);
  ASSERT_TRUE(again.has_value());
  ASSERT_EQ(again->entries().size(), 1u);
  EXPECT_EQ(again->entries()[0], (EpochEntry{3, 120}));
}

// Opening a log trims the loaded entries in memory only (a write per partition made a broker
// with thousands of them start in seconds); the next load trims the same again and the next
// change writes the trimmed list.
TEST(LeaderEpochCache, TrimOnLoadLeavesTheFileUntilTheNextChange) {
  testing::TempDir d;
  auto file = d / "leader-epoch-checkpoint";
  {
    auto c = LeaderEpochCache::load(file);
    ASSERT_TRUE(c.has_value());
    ASSERT_TRUE(c->assign(2, 0).has_value());
    ASSERT_TRUE(c->assign(4, 50).has_value());
    ASSERT_TRUE(c->assign(7, 90).has_value());  // a leader's epoch begun at its log end
  }
  const std::string written = "0\n3\n2 0\n4 50\n7 90\n";
  for (int load = 0; load < 2; ++load) {
    auto c = LeaderEpochCache::load(file);
    ASSERT_TRUE(c.has_value());
    c->trim_loaded(10, 90);  // log 10..90: epoch 7 holds nothing, epoch 2 now starts at 10
    EXPECT_EQ(c->latest_epoch(), 4);
    EXPECT_EQ(c->epoch_for_offset(10), 2);
    EXPECT_EQ(c->end_offset_for(4, 90).end_offset, 90);
    EXPECT_EQ(slurp(file), written) << "load " << load;
  }
  auto c = LeaderEpochCache::load(file);
  ASSERT_TRUE(c.has_value());
  c->trim_loaded(10, 90);
  ASSERT_TRUE(c->assign(8, 90).has_value());
  EXPECT_EQ(slurp(file), "0\n3\n2 10\n4 50\n8 90\n");
}

TEST(LeaderEpochCache, MalformedFileIsAnErrorNamingIt) {
  testing::TempDir d;
  auto file = d / "leader-epoch-checkpoint";
  std::ofstream(file) << "0\n2\n1 0\n";  // count says 2, one entry
  auto c = LeaderEpochCache::load(file);
  ASSERT_FALSE(c.has_value());
  EXPECT_NE(c.error().detail.find(file.string()), std::string::npos);
  std::ofstream(file, std::ios::trunc) << "0\n2\n5 0\n3 10\n";  // epochs going down
  c = LeaderEpochCache::load(file);
  ASSERT_FALSE(c.has_value());
  EXPECT_NE(c.error().detail.find("must increase"), std::string::npos);
}

}  // namespace
}  // namespace samsa::io
