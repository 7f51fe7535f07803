// flush.messages / flush.ms (LogConfig::fsync, flush_messages, flush_ms): how far unsynced data
// may lag, that the recovery point (and its checkpoint) still advances when groups do not sync,
// and that a config change never completes an append without the sync it was accepted with.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <sstream>

#include "base/clock.h"
#include "io/log.h"
#include "io/log_dir.h"
#include "tests/support/io_testing.h"

namespace samsa::io {
namespace {

using testing::OwnedAppend;

// An append whose completion records what the log had made durable by then.
struct WatchedAppend : OwnedAppend {
  Log* log = nullptr;
  std::int64_t recovery_point_at_done = -1;
  std::uint64_t fdatasyncs_at_done = 0;
  explicit WatchedAppend(Log& l, std::vector<std::byte> b, Durability d = Durability::durable)
      : OwnedAppend(std::move(b), d), log(&l) {
    done = [](AppendOp* self) {
      auto* w = static_cast<WatchedAppend*>(self);
      ++w->completions;
      w->recovery_point_at_done = w->log->recovery_point();
      w->fdatasyncs_at_done = w->log->stats().fdatasyncs;
    };
  }
};

// Runs fn at the end of the loop turn, after the hooks queued later (the reactor runs hooks
// last-queued first): queued before an append, it runs once the group is submitted.
struct TurnEndCall : TurnHook {
  std::function<void()> fn;
  void on_turn_end() override { fn(); }
};

class Flush : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = Reactor::create({.name = "test"});
    ASSERT_TRUE(r.has_value());
    reactor = std::move(*r);
  }
  std::unique_ptr<Log> open(LogConfig cfg) {
    auto l = Log::open(*reactor, dir / "t-0", cfg);
    EXPECT_TRUE(l.has_value()) << l.error().detail;
    return l ? std::move(*l) : nullptr;
  }
  static LogConfig relaxed(std::int64_t messages, std::int64_t ms = INT64_MAX) {
    LogConfig c;
    c.fsync = false;
    c.flush_messages = messages;
    c.flush_ms = ms;
    return c;
  }
  testing::TempDir dir;
  std::unique_ptr<Reactor> reactor;
};

TEST_F(Flush, FlushMessagesSyncsOnceThatManyRecordsAreUnsynced) {
  auto log = open(relaxed(10));
  const auto s0 = log->stats().fdatasyncs;
  // 3 records per batch: 3, 6, 9 unsynced, then 12 >= 10 makes that group sync.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(testing::append_sync(*reactor, *log, testing::make_batch(3, i)).has_value());
    EXPECT_EQ(log->stats().fdatasyncs, s0) << "batch " << i;
    EXPECT_EQ(log->recovery_point(), 0);
  }
  ASSERT_TRUE(testing::append_sync(*reactor, *log, testing::make_batch(3, 4)).has_value());
  EXPECT_EQ(log->stats().fdatasyncs, s0 + 1);
  EXPECT_EQ(log->recovery_point(), 12);
  // The count starts again from the recovery point.
  ASSERT_TRUE(testing::append_sync(*reactor, *log, testing::make_batch(3, 5)).has_value());
  EXPECT_EQ(log->recovery_point(), 12);
  EXPECT_EQ(log->durable_end_offset(), 15);  // acknowledged once written, as Kafka does
}

TEST_F(Flush, FlushMessagesMovesTheRecoveryPointCheckpoint) {
  auto d = LogDir::open(dir.path());
  ASSERT_TRUE(d.has_value()) << d.error().detail;
  auto l = (*d)->open_log(*reactor, PartitionId{"t", 0}, relaxed(5));
  ASSERT_TRUE(l.has_value()) << l.error().detail;
  Log& log = **l;
  auto checkpointed = [&]() -> std::string {
    EXPECT_TRUE((*d)->write_checkpoints().has_value());
    std::ifstream f(dir / "recovery-point-offset-checkpoint");
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  ASSERT_TRUE(testing::append_sync(*reactor, log, testing::make_batch(4, 1)).has_value());
  EXPECT_EQ(checkpointed(), "0\n1\nt 0 0\n");
  ASSERT_TRUE(testing::append_sync(*reactor, log, testing::make_batch(4, 2)).has_value());
  EXPECT_EQ(log.recovery_point(), 8);
  EXPECT_EQ(checkpointed(), "0\n1\nt 0 8\n");
  ASSERT_TRUE(log.close().has_value());
}

TEST_F(Flush, FlushMsBoundsHowLongUnsyncedDataWaits) {
  auto log = open(relaxed(INT64_MAX, 80));
  const auto s0 = log->stats().fdatasyncs;
  const std::int64_t t0 = mono_ms();
  ASSERT_TRUE(testing::append_sync(*reactor, *log, testing::make_batch(2, 1)).has_value());
  EXPECT_EQ(log->recovery_point(), 0);
  // Nothing else happens on this reactor: only the log's own timer can sync it.
  ASSERT_TRUE(reactor->run_until([&] { return log->recovery_point() == 2; }, 5'000'000'000));
  const std::int64_t waited = mono_ms() - t0;
  EXPECT_GE(waited, 75);
  EXPECT_LT(waited, 2000);
  EXPECT_EQ(log->stats().fdatasyncs, s0 + 1);
  // Synced and quiet: no timer left to fire.
  const auto s1 = log->stats().fdatasyncs;
  reactor->run_until([] { return false; }, 200'000'000);
  EXPECT_EQ(log->stats().fdatasyncs, s1);
}

TEST_F(Flush, FlushMsSyncsEveryFileRolledSinceTheLastSync) {
  LogConfig cfg = relaxed(INT64_MAX, 50);
  cfg.segment_bytes = 300;  // about two batches per segment
  auto log = open(cfg);
  const auto s0 = log->stats().fdatasyncs;
  for (int i = 0; i < 6; ++i)
    ASSERT_TRUE(testing::append_sync(*reactor, *log, testing::make_batch(1, i, 100)).has_value());
  ASSERT_GE(log->segment_count(), 3u);
  ASSERT_TRUE(reactor->run_until([&] { return log->recovery_point() == 6; }, 5'000'000'000));
  // Every segment file was synced at least once (a slow machine may have run a flush.ms sync
  // in the middle of the appends: then some files are synced by each).
  EXPECT_GE(log->stats().fdatasyncs - s0, log->segment_count());
}

TEST_F(Flush, TurningFsyncOffNeverCompletesAStagedAppendWithoutItsSync) {
  auto log = open(LogConfig{});
  ASSERT_TRUE(testing::append_sync(*reactor, *log, testing::make_batch(1, 1)).has_value());
  WatchedAppend op(*log, testing::make_batch(3, 2));
  ASSERT_TRUE(log->append(&op).has_value());
  log->set_config(relaxed(10000));  // flush.messages 1 -> 10000 before the group is submitted
  ASSERT_TRUE(reactor->run_until([&] { return op.completions == 1; }));
  ASSERT_FALSE(op.error);
  EXPECT_EQ(op.recovery_point_at_done, 4) << "completed before its fdatasync";
  // Appends accepted after the change do not sync.
  const auto s1 = log->stats().fdatasyncs;
  ASSERT_TRUE(testing::append_sync(*reactor, *log, testing::make_batch(3, 3)).has_value());
  EXPECT_EQ(log->stats().fdatasyncs, s1);
  EXPECT_EQ(log->recovery_point(), 4);
}

TEST_F(Flush, TurningFsyncOffNeverCompletesAnInFlightAppendWithoutItsSync) {
  auto log = open(LogConfig{});
  ASSERT_TRUE(testing::append_sync(*reactor, *log, testing::make_batch(1, 1)).has_value());
  for (int round = 0; round < 20; ++round) {
    log->set_config(LogConfig{});
    TurnEndCall change;
    change.fn = [&] { log->set_config(relaxed(10000)); };  // once the group is in flight
    reactor->at_turn_end(&change);
    WatchedAppend op(*log, testing::make_batch(3, 2));
    ASSERT_TRUE(log->append(&op).has_value());
    const std::int64_t end = op.result.last_offset + 1;
    ASSERT_TRUE(reactor->run_until([&] { return op.completions == 1; }));
    ASSERT_FALSE(op.error);
    ASSERT_GE(op.recovery_point_at_done, end) << "round " << round;
    ASSERT_EQ(log->recovery_point(), end);
  }
}

TEST_F(Flush, TurningFsyncOnNeverClaimsASyncThatDidNotHappen) {
  auto log = open(relaxed(INT64_MAX));
  ASSERT_TRUE(testing::append_sync(*reactor, *log, testing::make_batch(1, 1)).has_value());
  const auto s0 = log->stats().fdatasyncs;
  TurnEndCall change;
  change.fn = [&] { log->set_config(LogConfig{}); };  // fsync on while an unsynced group flies
  reactor->at_turn_end(&change);
  WatchedAppend op(*log, testing::make_batch(2, 2));
  ASSERT_TRUE(log->append(&op).has_value());
  ASSERT_TRUE(reactor->run_until([&] { return op.completions == 1; }));
  EXPECT_TRUE(op.recovery_point_at_done < 3 || op.fdatasyncs_at_done > s0)
      << "the recovery point reached " << op.recovery_point_at_done << " without an fdatasync";
  // Turning fsync on syncs what was left unsynced without waiting for another append.
  ASSERT_TRUE(reactor->run_until([&] { return log->recovery_point() == 3; }, 5'000'000'000));
  EXPECT_GT(log->stats().fdatasyncs, s0);
}

TEST_F(Flush, CloseSyncsSegmentsRolledWithoutASync) {
  LogConfig cfg = relaxed(INT64_MAX);
  cfg.segment_bytes = 300;
  auto log = open(cfg);
  for (int i = 0; i < 6; ++i)
    ASSERT_TRUE(testing::append_sync(*reactor, *log, testing::make_batch(1, i, 100)).has_value());
  ASSERT_GE(log->segment_count(), 3u);
  EXPECT_EQ(log->recovery_point(), 0);
  const auto s0 = log->stats().fdatasyncs;
  ASSERT_TRUE(log->close().has_value());
  EXPECT_EQ(log->recovery_point(), 6);
  EXPECT_EQ(log->stats().fdatasyncs - s0, log->segment_count());
}

}  // namespace
}  // namespace samsa::io
