// ProducerIdManager over a real replication::Controller (its metadata log in a temp dir): ids
// are unique and come in blocks reserved durably, the next block is reserved before the
// current one runs out, and a restart never hands out an id again.
#include "coordinator/producer_ids.h"

#include <gtest/gtest.h>

#include <set>

#include "io/log_dir.h"
#include "replication/controller.h"
#include "tests/support/io_testing.h"

namespace samsa::coordinator {
namespace {

constexpr std::int64_t kWait = 20'000'000'000;

class ProducerIdsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = io::Reactor::create({.name = "coordinator"});
    ASSERT_TRUE(r.has_value());
    reactor = std::move(*r);
    open();
  }
  void TearDown() override { close(); }

  void open() {
    auto d = io::LogDir::open(dir.path());
    ASSERT_TRUE(d.has_value()) << d.error().detail;
    log_dir = std::move(*d);
    replication::Controller::Options o;
    o.log_dir = log_dir.get();
    o.reactors = 0;  // no shards to wait for: a change counts once it is synced
    o.producer_id_block = 10;
    controller = std::make_unique<replication::Controller>(*reactor, o);
    auto ok = controller->open();
    ASSERT_TRUE(ok.has_value()) << ok.error().detail;
    // What samsad does, minus the thread hop: reserve the block through the controller.
    ids = std::make_unique<ProducerIdManager>(
        [this](std::int32_t block, std::move_only_function<void(std::int64_t)> done) {
          ++allocations;
          auto shared =
              std::make_shared<std::move_only_function<void(std::int64_t)>>(std::move(done));
          controller->allocate_producer_ids(1, -1,
                                            [shared, block](replication::ProducerIdsAnswer a) {
                                              (*shared)(a.length == block ? a.first : -1);
                                            });
        },
        10);
  }
  void close() {
    ids.reset();
    if (controller) (void)controller->close();
    controller.reset();
    log_dir.reset();
  }

  std::int64_t next() {
    std::optional<std::expected<std::int64_t, kafka::ErrorCode>> out;
    ids->next([&](std::expected<std::int64_t, kafka::ErrorCode> r) { out = r; });
    EXPECT_TRUE(reactor->run_until([&] { return out.has_value(); }, kWait));
    if (!out || !*out) return -1;
    return **out;
  }

  io::testing::TempDir dir;
  std::unique_ptr<io::Reactor> reactor;
  std::unique_ptr<io::LogDir> log_dir;
  std::unique_ptr<replication::Controller> controller;
  std::unique_ptr<ProducerIdManager> ids;
  int allocations = 0;
};

TEST_F(ProducerIdsTest, IdsAreUniqueAndComeInBlocks) {
  std::set<std::int64_t> seen;
  for (int i = 0; i < 35; ++i) {
    const std::int64_t id = next();
    ASSERT_GE(id, 0);
    EXPECT_TRUE(seen.insert(id).second) << "id " << id << " handed out twice";
  }
  // Blocks of 10 from the controller, one reserved ahead while the last ids of a block go.
  EXPECT_EQ(*seen.begin(), 0);
  EXPECT_EQ(*seen.rbegin(), 34);
  EXPECT_EQ(allocations, 4);
  EXPECT_EQ(controller->image()->next_producer_id(), 40);
}

TEST_F(ProducerIdsTest, ARestartNeverReusesAnId) {
  std::int64_t last = -1;
  for (int i = 0; i < 12; ++i)
    last = next();
  ASSERT_EQ(last, 11);
  close();
  open();
  // Everything reserved before the restart is gone for good, used or not.
  const std::int64_t after = next();
  EXPECT_GE(after, 20);
  EXPECT_EQ(controller->image()->next_producer_id(), after + 10);
}

TEST_F(ProducerIdsTest, WaitersShareOneReservation) {
  std::vector<std::int64_t> got;
  for (int i = 0; i < 5; ++i)
    ids->next(
        [&](std::expected<std::int64_t, kafka::ErrorCode> r) { got.push_back(r.value_or(-1)); });
  ASSERT_TRUE(reactor->run_until([&] { return got.size() == 5; }, kWait));
  EXPECT_EQ(got, (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(allocations, 1);
}

TEST(ProducerIds, NoBlockMeansLoadInProgress) {
  ProducerIdManager ids(
      [](std::int32_t, std::move_only_function<void(std::int64_t)> done) { done(-1); });
  std::optional<std::expected<std::int64_t, kafka::ErrorCode>> out;
  ids.next([&](std::expected<std::int64_t, kafka::ErrorCode> r) { out = r; });
  ASSERT_TRUE(out.has_value());
  ASSERT_FALSE(out->has_value());
  EXPECT_EQ(out->error(), kafka::ErrorCode::coordinator_load_in_progress);
}

}  // namespace
}  // namespace samsa::coordinator
