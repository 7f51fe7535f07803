// truncate_to, truncate_fully_and_start_at, delete_records, and the leader-epoch checkpoint kept
// in step with them.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "base/bytes.h"
#include "io/leader_epoch.h"
#include "io/log.h"
#include "io/log_dir.h"
#include "io/segment.h"
#include "tests/support/io_testing.h"

namespace samsa::io {
namespace {

namespace fs = std::filesystem;

struct Written {
  std::int64_t base, last;
  std::vector<std::byte> bytes;
  std::int64_t max_ts;
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class Truncate : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = Reactor::create({.name = "test"});
    ASSERT_TRUE(r.has_value());
    reactor = std::move(*r);
    auto d = LogDir::open(dir.path());
    ASSERT_TRUE(d.has_value());
    logdir = std::move(*d);
  }
  fs::path ldir() const { return dir / "t-0"; }
  std::unique_ptr<Log> open(LogConfig cfg = {}) {
    auto l = logdir->open_log(*reactor, {"t", 0}, cfg);
    EXPECT_TRUE(l.has_value()) << l.error().detail;
    return l ? std::move(*l) : nullptr;
  }
  Written append(Log& log, int records, std::int64_t ts) {
    Written w;
    w.bytes = testing::make_batch(records, ts, 50);
    auto r = testing::append_sync(*reactor, log, w.bytes);
    EXPECT_TRUE(r.has_value());
    w.base = r->base_offset;
    w.last = r->last_offset;
    w.max_ts = ts + records - 1;
    store_be<std::int64_t>(w.bytes.data(), w.base);
    return w;
  }
  static std::vector<std::byte> concat(const std::vector<Written>& ws, std::size_t n) {
    std::vector<std::byte> out;
    for (std::size_t i = 0; i < n; ++i)
      out.insert(out.end(), ws[i].bytes.begin(), ws[i].bytes.end());
    return out;
  }
  std::vector<std::byte> all(Log& log) {
    auto rr = log.read(log.log_start_offset(), 1 << 26, INT64_MAX);
    EXPECT_TRUE(rr.has_value()) << rr.error().detail;
    return rr ? testing::read_bytes(*rr) : std::vector<std::byte>{};
  }
  fs::path seg(std::int64_t base, const char* suffix) const {
    return ldir() / (detail::segment_name(base) + suffix);
  }
  testing::TempDir dir;
  std::unique_ptr<Reactor> reactor;
  std::unique_ptr<LogDir> logdir;
};

TEST_F(Truncate, ToABoundaryAndMidBatchInTheActiveSegment) {
  auto log = open();
  std::vector<Written> ws;
  ws.push_back(append(*log, 3, 100));  // 0..2
  ws.push_back(append(*log, 1, 900));  // 3 (largest timestamp)
  ws.push_back(append(*log, 5, 200));  // 4..8
  ws.push_back(append(*log, 2, 300));  // 9..10
  ASSERT_TRUE(log->truncate_to(9).has_value());
  EXPECT_EQ(log->log_end_offset(), 9);
  EXPECT_EQ(all(*log), concat(ws, 3));
  ASSERT_TRUE(log->truncate_to(6).has_value());  // inside 4..8: the whole batch goes
  EXPECT_EQ(log->log_end_offset(), 4);
  EXPECT_EQ(log->durable_end_offset(), 4);
  EXPECT_EQ(log->recovery_point(), 4);
  EXPECT_EQ(fs::file_size(seg(0, ".log")), concat(ws, 2).size());
  EXPECT_EQ(all(*log), concat(ws, 2));
  auto mx = log->max_timestamp();
  ASSERT_TRUE(mx && *mx);
  EXPECT_EQ((*mx)->offset, 3);
  ASSERT_TRUE(log->truncate_to(3).has_value());  // drops the largest timestamp too
  mx = log->max_timestamp();
  ASSERT_TRUE(mx && *mx);
  EXPECT_EQ((*mx)->timestamp, 102);
  auto w = append(*log, 2, 400);
  EXPECT_EQ(w.base, 3);
  ws.resize(1);
  ws.push_back(w);
  EXPECT_EQ(all(*log), concat(ws, 2));
  // The recovery-point checkpoint was lowered at once.
  EXPECT_NE(slurp(dir / "recovery-point-offset-checkpoint").find("t 0 3\n"), std::string::npos)
      << slurp(dir / "recovery-point-offset-checkpoint");
  // No-ops and refusals.
  EXPECT_TRUE(log->truncate_to(100).has_value());
  EXPECT_EQ(log->log_end_offset(), 5);
}

TEST_F(Truncate, IntoAClosedSegmentReopensItForAppends) {
  LogConfig cfg;
  cfg.segment_bytes = 800;
  cfg.index_interval_bytes = 100;
  auto log = open(cfg);
  std::vector<Written> ws;
  for (int i = 0; i < 30; ++i)
    ws.push_back(append(*log, 1 + i % 3, 1000 + 10 * i));
  ASSERT_GE(log->segment_count(), 4u);
  std::vector<std::int64_t> bases;
  for (const auto& w : ws) {
    if (fs::exists(seg(w.base, ".log"))) bases.push_back(w.base);
  }
  // Cut in the middle of segment 1.
  std::size_t cut_batch = 0;
  while (ws[cut_batch].base < bases[1])
    ++cut_batch;
  cut_batch += 2;
  ASSERT_LT(ws[cut_batch].base, bases[2]);
  ASSERT_TRUE(log->truncate_to(ws[cut_batch].base + 0).has_value());
  EXPECT_EQ(log->log_end_offset(), ws[cut_batch].base);
  EXPECT_EQ(log->segment_count(), 2u);
  for (std::size_t i = 2; i < bases.size(); ++i)
    EXPECT_FALSE(fs::exists(seg(bases[i], ".log")));
  EXPECT_EQ(all(*log), concat(ws, cut_batch));
  // Appending continues in segment 1 and rolls on as before.
  std::vector<Written> more;
  for (int i = 0; i < 20; ++i)
    more.push_back(append(*log, 2, 5000 + i));
  EXPECT_EQ(more[0].base, ws[cut_batch].base);
  std::vector<Written> expect(ws.begin(), ws.begin() + static_cast<std::ptrdiff_t>(cut_batch));
  expect.insert(expect.end(), more.begin(), more.end());
  EXPECT_EQ(all(*log), concat(expect, expect.size()));
  for (const auto& w : expect) {
    auto rr = log->read(w.last, 1, INT64_MAX, true);
    ASSERT_TRUE(rr.has_value()) << rr.error().detail;
    EXPECT_EQ(testing::read_bytes(*rr), w.bytes);
  }
  // A crash and a full recovery see the same log.
  log.reset();
  OpenOptions o;
  auto again = Log::open(*reactor, ldir(), cfg, o);
  ASSERT_TRUE(again.has_value()) << again.error().detail;
  EXPECT_EQ((*again)->log_end_offset(), more.back().last + 1);
  EXPECT_EQ(all(**again), concat(expect, expect.size()));
}

TEST_F(Truncate, BelowTheStartIsRefusedAndFullRestartWorks) {
  auto log = open();
  for (int i = 0; i < 5; ++i)
    append(*log, 2, 10 + i);
  ASSERT_TRUE(log->delete_records(4).has_value());
  auto bad = log->truncate_to(2);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code, Errc::offset_out_of_range);
  ASSERT_TRUE(log->truncate_fully_and_start_at(100).has_value());
  EXPECT_EQ(log->log_start_offset(), 100);
  EXPECT_EQ(log->log_end_offset(), 100);
  EXPECT_FALSE(fs::exists(seg(0, ".log")));
  EXPECT_TRUE(fs::exists(seg(100, ".log")));
  auto w = append(*log, 1, 1);
  EXPECT_EQ(w.base, 100);
  EXPECT_NE(slurp(dir / "log-start-offset-checkpoint").find("t 0 100\n"), std::string::npos);
  log.reset();
  auto again = open();
  EXPECT_EQ(again->log_start_offset(), 100);
  EXPECT_EQ(again->log_end_offset(), 101);
}

TEST_F(Truncate, DeleteRecordsRaisesTheStartAndDropsWholeSegments) {
  LogConfig cfg;
  cfg.segment_bytes = 600;
  auto log = open(cfg);
  std::vector<Written> ws;
  for (int i = 0; i < 20; ++i)
    ws.push_back(append(*log, 2, 1000 + i));
  std::vector<std::int64_t> bases;
  for (const auto& w : ws) {
    if (fs::exists(seg(w.base, ".log"))) bases.push_back(w.base);
  }
  ASSERT_GE(bases.size(), 4u);
  std::int64_t target = bases[2] + 1;  // inside the first batch of segment 2
  auto r = log->delete_records(target);
  ASSERT_TRUE(r.has_value()) << r.error().detail;
  EXPECT_EQ(*r, target);
  EXPECT_EQ(log->log_start_offset(), target);
  EXPECT_NE(slurp(dir / "log-start-offset-checkpoint").find("t 0 " + std::to_string(target)),
            std::string::npos);
  // Segments 0 and 1 are renamed, waiting for the retention thread; 2 (holding target) stays.
  EXPECT_FALSE(fs::exists(seg(bases[0], ".log")));
  EXPECT_TRUE(fs::exists(ldir() / (detail::segment_name(bases[0]) + ".log.deleted")));
  EXPECT_TRUE(fs::exists(seg(bases[2], ".log")));
  auto files = log->apply_retention(0);
  EXPECT_EQ(files.size(), 6u);  // .log, .index, .timeindex of two segments
  // Below the start: out of range; at it: the batch holding it, whole.
  auto below = log->read(target - 1, 100, INT64_MAX);
  ASSERT_FALSE(below.has_value());
  EXPECT_EQ(below.error().code, Errc::offset_out_of_range);
  auto at = log->read(target, 1, INT64_MAX, true);
  ASSERT_TRUE(at.has_value());
  EXPECT_EQ(at->slices[0].first_offset, bases[2]);
  auto ts = log->offset_for_timestamp(0);
  ASSERT_TRUE(ts && *ts);
  EXPECT_EQ((*ts)->offset, target);  // not a record below the start
  // Too far; and going back is a no-op.
  auto far = log->delete_records(log->log_end_offset() + 1);
  ASSERT_FALSE(far.has_value());
  EXPECT_EQ(far.error().code, Errc::offset_out_of_range);
  EXPECT_EQ(*log->delete_records(1), target);
  // The active segment is never removed, even when everything is deleted.
  ASSERT_TRUE(log->delete_records(log->log_end_offset()).has_value());
  EXPECT_GE(log->segment_count(), 1u);
  EXPECT_TRUE(log->read(log->log_end_offset(), 100, INT64_MAX).has_value());
  // A restart keeps the start offset (checkpoint).
  std::int64_t start = log->log_start_offset();
  log.reset();
  auto again = open(cfg);
  EXPECT_EQ(again->log_start_offset(), start);
}

TEST_F(Truncate, LeaderEpochsFollowTruncationAndDeletion) {
  LogConfig cfg;
  cfg.segment_bytes = 500;
  auto log = open(cfg);
  LeaderEpochCache& e = log->leader_epochs();
  ASSERT_TRUE(e.assign(1, 0).has_value());
  for (int i = 0; i < 5; ++i)
    append(*log, 2, i);  // 0..9
  ASSERT_TRUE(e.assign(2, 10).has_value());
  for (int i = 0; i < 5; ++i)
    append(*log, 2, i);  // 10..19
  ASSERT_TRUE(e.assign(4, 20).has_value());
  for (int i = 0; i < 5; ++i)
    append(*log, 2, i);  // 20..29
  EXPECT_EQ(slurp(ldir() / "leader-epoch-checkpoint"), "0\n3\n1 0\n2 10\n4 20\n");
  EXPECT_EQ(e.end_offset_for(2, log->log_end_offset()).end_offset, 20);
  EXPECT_EQ(e.end_offset_for(3, log->log_end_offset()).epoch, 2);
  EXPECT_EQ(e.end_offset_for(4, log->log_end_offset()).end_offset, 30);
  ASSERT_TRUE(log->truncate_to(14).has_value());
  EXPECT_EQ(slurp(ldir() / "leader-epoch-checkpoint"), "0\n2\n1 0\n2 10\n");
  ASSERT_TRUE(log->delete_records(6).has_value());
  EXPECT_EQ(slurp(ldir() / "leader-epoch-checkpoint"), "0\n2\n1 6\n2 10\n");
  log.reset();
  auto again = open(cfg);
  ASSERT_EQ(again->leader_epochs().entries().size(), 2u);
  EXPECT_EQ(again->leader_epochs().entries()[1], (EpochEntry{2, 10}));
}

}  // namespace
}  // namespace samsa::io
