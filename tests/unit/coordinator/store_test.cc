// PartitionStore with the logs on another reactor thread, as in samsad (shards own the
// __consumer_offsets logs, the coordinator thread reaches them by posting): appends come back
// on the coordinator's thread once durable, loads replay every batch in order across several
// read chunks, missing partitions are errors, and a coordinator over it survives a restart.
#include "coordinator/store.h"

#include <gtest/gtest.h>

#include "coordinator/coordinator.h"
#include "io/batch_builder.h"
#include "io/record_batch.h"
#include "tests/support/coordinator_testing.h"
#include "tests/support/io_testing.h"

namespace samsa::coordinator {
namespace {

using kafka::ErrorCode;
using testing::Slot;

constexpr std::int64_t kWait = 30'000'000'000;

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = io::Reactor::create({.name = "coordinator"});
    ASSERT_TRUE(r.has_value());
    home = std::move(*r);
  }
  io::testing::TempDir dir;
  std::unique_ptr<io::Reactor> home;
};

std::vector<std::byte> batch_of(int first, int n) {
  std::vector<io::SimpleRecord> recs;
  for (int i = 0; i < n; ++i) {
    io::SimpleRecord r;
    r.timestamp = 1000 + first + i;
    r.key = "k" + std::to_string(first + i);
    r.value = std::string(40, static_cast<char>('a' + (first + i) % 26));
    recs.push_back(std::move(r));
  }
  return io::build_batch(recs);
}

TEST_F(StoreTest, AppendsAndLoadsAcrossThreads) {
  testing::ShardThread shard(dir.path(), 2);
  ASSERT_TRUE(shard.ok());
  PartitionStore store(*home, shard.run_on());

  // Enough bytes that a load needs several read chunks (1 MiB each).
  constexpr int kBatches = 600;
  constexpr int kPerBatch = 40;
  int acked = 0;
  bool wrong_thread = false;
  std::optional<io::Error> first_error;
  for (int b = 0; b < kBatches; ++b) {
    store.append(1, batch_of(b * kPerBatch, kPerBatch), [&](std::optional<io::Error> err) {
      if (io::Reactor::current() != home.get()) wrong_thread = true;
      if (err && !first_error) first_error = err;
      ++acked;
    });
  }
  ASSERT_TRUE(home->run_until([&] { return acked == kBatches; }, kWait));
  EXPECT_FALSE(wrong_thread);
  ASSERT_FALSE(first_error) << first_error->detail;

  std::vector<std::int64_t> bases;
  int records = 0;
  bool in_order = true;
  bool loaded = false;
  std::optional<io::Error> load_error;
  store.load(
      1,
      [&](std::span<const std::byte> batch) {
        if (io::Reactor::current() != home.get()) wrong_thread = true;
        auto info = io::Log::validate_batch(batch, 0);
        ASSERT_TRUE(info.has_value());
        if (!bases.empty() && info->base_offset != bases.back() + kPerBatch) in_order = false;
        bases.push_back(info->base_offset);
        std::vector<std::byte> storage;
        auto recs = io::batch::records_of(batch, storage);
        ASSERT_TRUE(recs.has_value());
        io::batch::RecordReader rr(*recs, info->record_count);
        while (auto r = rr.next()) {
          if (!*r) break;
          const std::string key(reinterpret_cast<const char*>((*r)->key->data()),
                                (*r)->key->size());
          if (key != "k" + std::to_string(records)) in_order = false;
          ++records;
        }
      },
      [&](std::optional<io::Error> err) {
        load_error = err;
        loaded = true;
      });
  ASSERT_TRUE(home->run_until([&] { return loaded; }, kWait));
  EXPECT_FALSE(load_error);
  EXPECT_FALSE(wrong_thread);
  EXPECT_EQ(bases.size(), static_cast<std::size_t>(kBatches));
  EXPECT_EQ(records, kBatches * kPerBatch);
  EXPECT_TRUE(in_order);

  // Partition 0 is empty: a load with nothing to visit.
  int visited = 0;
  loaded = false;
  store.load(
      0, [&](std::span<const std::byte>) { ++visited; },
      [&](std::optional<io::Error> err) {
        load_error = err;
        loaded = true;
      });
  ASSERT_TRUE(home->run_until([&] { return loaded; }, kWait));
  EXPECT_FALSE(load_error);
  EXPECT_EQ(visited, 0);
}

TEST_F(StoreTest, MissingPartitionsAndBadBatchesAreErrors) {
  testing::ShardThread shard(dir.path(), 1);
  ASSERT_TRUE(shard.ok());
  PartitionStore store(*home, shard.run_on());
  std::optional<std::optional<io::Error>> a, l, bad;
  store.append(5, batch_of(0, 1), [&](std::optional<io::Error> e) { a = e; });
  store.load(
      5, [](std::span<const std::byte>) {}, [&](std::optional<io::Error> e) { l = e; });
  auto corrupt = batch_of(0, 1);
  corrupt.back() ^= std::byte{1};  // the CRC no longer matches
  store.append(0, corrupt, [&](std::optional<io::Error> e) { bad = e; });
  ASSERT_TRUE(home->run_until([&] { return a && l && bad; }, kWait));
  ASSERT_TRUE(*a);
  EXPECT_EQ((*a)->code, io::Errc::not_found);
  ASSERT_TRUE(*l);
  EXPECT_EQ((*l)->code, io::Errc::not_found);
  ASSERT_TRUE(*bad);
  EXPECT_EQ((*bad)->code, io::Errc::corrupt_batch);
}

TEST_F(StoreTest, CoordinatorOverShardThreadsSurvivesARestart) {
  GroupCoordinator::Options opts;
  opts.initial_rebalance_delay_ms = 0;
  constexpr std::int32_t kParts = 8;
  auto commit_all = [&](GroupCoordinator& c, int round) {
    // Many groups, many partitions each: several batches per offsets partition.
    int done = 0, failed = 0;
    for (int g = 0; g < 40; ++g) {
      CommitRequest r;
      r.group_id = "group-" + std::to_string(g);
      for (int p = 0; p < 50; ++p)
        r.partitions.push_back({"topic", p, round * 1000 + g * 50 + p});
      c.commit_offsets(std::move(r), [&](CommitResult res) {
        for (auto e : res)
          failed += e != ErrorCode::none;
        ++done;
      });
    }
    EXPECT_TRUE(home->run_until([&] { return done == 40; }, kWait));
    EXPECT_EQ(failed, 0);
  };
  auto check_all = [&](GroupCoordinator& c, int round) {
    int bad = 0, done = 0;
    for (int g = 0; g < 40; ++g) {
      FetchRequest f;
      f.group_id = "group-" + std::to_string(g);
      c.fetch_offsets(f, [&, g](FetchResult res) {
        if (res.error != ErrorCode::none || res.offsets.size() != 50) ++bad;
        for (const auto& o : res.offsets)
          if (o.offset != round * 1000 + g * 50 + o.partition) ++bad;
        ++done;
      });
    }
    EXPECT_TRUE(home->run_until([&] { return done == 40; }, kWait));
    EXPECT_EQ(bad, 0);
  };
  {
    testing::ShardThread shard(dir.path(), kParts);
    ASSERT_TRUE(shard.ok());
    GroupCoordinator c(*home, opts, std::make_unique<PartitionStore>(*home, shard.run_on()));
    c.start(kParts);
    ASSERT_TRUE(home->run_until([&] { return c.loaded(); }, kWait));
    commit_all(c, 1);
    commit_all(c, 2);  // the later commits win on replay
    check_all(c, 2);
  }
  testing::ShardThread shard(dir.path(), kParts);
  ASSERT_TRUE(shard.ok());
  GroupCoordinator c(*home, opts, std::make_unique<PartitionStore>(*home, shard.run_on()));
  c.start(kParts);
  ASSERT_TRUE(home->run_until([&] { return c.loaded(); }, kWait));
  EXPECT_EQ(c.group_count(), 40u);
  EXPECT_EQ(c.stats().records_loaded, 2u * 40 * 50);
  check_all(c, 2);
}

}  // namespace
}  // namespace samsa::coordinator
