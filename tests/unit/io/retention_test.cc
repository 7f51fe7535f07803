// Retention: retention.ms and retention.bytes on closed segments, the *.deleted rename and the
// retention thread's delayed unlink, slices that outlive their segment.
#include "io/retention.h"

#include <gtest/gtest.h>

#include <dirent.h>

#include <fstream>

#include "base/bytes.h"
#include "base/clock.h"
#include "io/log.h"
#include "io/log_dir.h"
#include "io/segment.h"
#include "tests/support/io_testing.h"

namespace samsa::io {
namespace {

namespace fs = std::filesystem;

class Retention : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = Reactor::create({.name = "test"});
    ASSERT_TRUE(r.has_value());
    reactor = std::move(*r);
  }
  fs::path ldir() const { return dir / "t-0"; }
  std::unique_ptr<Log> open(LogConfig cfg) {
    auto l = Log::open(*reactor, ldir(), cfg);
    EXPECT_TRUE(l.has_value()) << l.error().detail;
    return l ? std::move(*l) : nullptr;
  }
  std::int64_t append(Log& log, std::int64_t ts, std::size_t value = 200) {
    auto r = testing::append_sync(*reactor, log, testing::make_batch(1, ts, value));
    EXPECT_TRUE(r.has_value());
    return r->base_offset;
  }
  std::vector<std::int64_t> bases() const {
    std::vector<std::int64_t> out;
    for (const auto& de : fs::directory_iterator(ldir())) {
      if (auto b = detail::parse_segment_name(de.path().filename().string(), ".log")) {
        out.push_back(*b);
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  std::size_t count_deleted() const {
    std::size_t n = 0;
    for (const auto& de : fs::directory_iterator(ldir())) {
      if (de.path().string().ends_with(".deleted")) ++n;
    }
    return n;
  }
  testing::TempDir dir;
  std::unique_ptr<Reactor> reactor;
};

TEST_F(Retention, RetentionMsRemovesSegmentsWhoseNewestRecordIsTooOld) {
  LogConfig cfg;
  cfg.segment_bytes = 1000;  // ~4 batches a segment
  cfg.retention_ms = 3600 * 1000;
  cfg.segment_ms = INT64_MAX / 4;
  auto log = open(cfg);
  std::int64_t now = wall_ms();
  for (int i = 0; i < 12; ++i)
    append(*log, now - 10 * 3600 * 1000 + i);     // ten hours old
  std::int64_t fresh = append(*log, now - 1000);  // makes its segment young
  for (int i = 0; i < 3; ++i)
    append(*log, now - 10 * 3600 * 1000);  // old again
  auto before = bases();
  ASSERT_GE(before.size(), 4u);
  auto files = log->apply_retention(now);
  auto after = bases();
  ASSERT_FALSE(after.empty());
  // Everything before the segment holding the fresh record went.
  EXPECT_LE(after.front(), fresh);
  EXPECT_EQ(log->log_start_offset(), after.front());
  EXPECT_EQ(files.size(), 3 * (before.size() - after.size()));
  for (const auto& f : files) {
    EXPECT_TRUE(f.string().ends_with(".deleted"));
    EXPECT_TRUE(fs::exists(f));
  }
  // Nothing fresh was touched, and a second pass finds nothing.
  EXPECT_TRUE(log->apply_retention(now).empty());
}

// Kafka's rule: once everything in the active segment is expired (and acknowledged), the log
// rolls and the old segment goes too; the log continues at the same offset.
TEST_F(Retention, AWhollyExpiredActiveSegmentIsRolledAndRemoved) {
  LogConfig cfg;
  cfg.retention_ms = 60'000;
  cfg.segment_ms = INT64_MAX / 4;
  auto log = open(cfg);
  for (int i = 0; i < 5; ++i)
    append(*log, 1000);  // 1970: long expired
  auto files = log->apply_retention(wall_ms());
  // The .log renamed *.deleted: a segment rolled only to be removed never gets index files.
  EXPECT_EQ(files.size(), 1u);
  EXPECT_EQ(log->segment_count(), 1u);
  EXPECT_EQ(log->log_start_offset(), 5);
  EXPECT_EQ(log->log_end_offset(), 5);
  EXPECT_EQ(bases(), std::vector<std::int64_t>{5});
  EXPECT_EQ(append(*log, wall_ms()), 5);
  // The fresh segment is not expired: nothing more goes.
  EXPECT_TRUE(log->apply_retention(wall_ms()).empty());
  EXPECT_EQ(log->log_start_offset(), 5);
}

TEST_F(Retention, TheActiveSegmentStaysWhileAppendsAreInFlightOrWhenEmpty) {
  LogConfig cfg;
  cfg.retention_ms = 1;
  cfg.segment_ms = INT64_MAX / 4;
  auto log = open(cfg);
  EXPECT_TRUE(log->apply_retention(wall_ms()).empty());  // empty: nothing to roll
  append(*log, 1000);
  testing::OwnedAppend op(testing::make_batch(1, 1000));
  ASSERT_TRUE(log->append(&op).has_value());
  EXPECT_TRUE(log->apply_retention(wall_ms()).empty());
  EXPECT_EQ(log->log_start_offset(), 0);
  ASSERT_TRUE(reactor->run_until([&] { return op.completions == 1; }));
  EXPECT_FALSE(log->apply_retention(wall_ms()).empty());
  EXPECT_EQ(log->log_start_offset(), 2);
}

TEST_F(Retention, RetentionBytesKeepsTheNewestWithinTheLimit) {
  LogConfig cfg;
  cfg.segment_bytes = 1000;
  cfg.retention_bytes = 2500;
  cfg.retention_ms = -1;
  auto log = open(cfg);
  for (int i = 0; i < 30; ++i)
    append(*log, 1000 + i);
  std::uint64_t total = log->size_bytes();
  ASSERT_GT(total, 5000u);
  auto files = log->apply_retention(wall_ms());
  EXPECT_FALSE(files.empty());
  // Kafka's rule: drop the oldest while what remains without it is still >= retention.bytes.
  std::uint64_t size = log->size_bytes();
  EXPECT_GE(size, 2500u);
  auto b = bases();
  std::uint64_t oldest = fs::file_size(ldir() / (detail::segment_name(b.front()) + ".log"));
  EXPECT_LT(size - oldest, 2500u);
}

TEST_F(Retention, SlicesStayReadableAfterTheirSegmentIsDeleted) {
  LogConfig cfg;
  cfg.segment_bytes = 1000;
  cfg.retention_bytes = 0;
  auto log = open(cfg);
  for (int i = 0; i < 12; ++i)
    append(*log, 1000 + i);
  auto rr = log->read(0, 1 << 20, INT64_MAX);
  ASSERT_TRUE(rr.has_value());
  auto before = testing::read_bytes(*rr);
  auto files = log->apply_retention(wall_ms());
  ASSERT_FALSE(files.empty());
  for (const auto& f : files)
    ASSERT_EQ(::unlink(f.c_str()), 0);
  EXPECT_FALSE(fs::exists(ldir() / "00000000000000000000.log"));
  EXPECT_EQ(testing::read_bytes(*rr), before);  // the slices hold the open files
  auto gone = log->read(0, 100, INT64_MAX);
  ASSERT_FALSE(gone.has_value());
  EXPECT_EQ(gone.error().code, Errc::offset_out_of_range);
}

bool thread_named(const std::string& name) {
  for (const auto& de : fs::directory_iterator("/proc/self/task")) {
    std::ifstream f(de.path() / "comm");
    std::string comm;
    std::getline(f, comm);
    if (comm == name) return true;
  }
  return false;
}

TEST_F(Retention, DeleterThreadRenamesThenUnlinksAfterTheDelay) {
  LogConfig cfg;
  cfg.segment_bytes = 1000;
  cfg.retention_bytes = 0;
  cfg.file_delete_delay_ms = 3600 * 1000;  // far away: stop() has to do it
  cfg.segment_ms = INT64_MAX / 4;          // the pass also rolls by segment.ms; not here
  auto log = open(cfg);
  for (int i = 0; i < 12; ++i)
    append(*log, 1000 + i);
  std::size_t segs = log->segment_count();
  RetentionDeleter del({.check_interval_ms = 3600 * 1000, .checkpoint_interval_ms = 3600 * 1000});
  auto reg = del.add(*reactor, *log);
  del.start();
  EXPECT_TRUE(reactor->run_until([&] { return thread_named("retention"); }, 5'000'000'000));
  del.check_now();
  ASSERT_TRUE(reactor->run_until([&] { return del.stats().log_checks == 1; }));
  // retention.bytes=0: every segment goes, the active one rolled first (Kafka's rule).
  EXPECT_EQ(log->segment_count(), 1u);
  EXPECT_EQ(log->log_start_offset(), 12);
  // Renamed, not yet unlinked: three files a segment, but the active one rolled only to be
  // removed has no index files.
  const std::size_t files = 3 * segs - 2;
  EXPECT_EQ(count_deleted(), files);
  EXPECT_EQ(del.stats().files_renamed, files);
  EXPECT_EQ(del.stats().files_unlinked, 0u);
  del.remove(reg);
  del.stop();
  EXPECT_EQ(count_deleted(), 0u);
  EXPECT_EQ(del.stats().files_unlinked, files);
}

TEST_F(Retention, DeleterUnlinksWhenTheDelayPassesAndWritesCheckpoints) {
  testing::TempDir root;
  auto ld = LogDir::open(root.path());
  ASSERT_TRUE(ld.has_value());
  LogConfig cfg;
  cfg.segment_bytes = 1000;
  cfg.retention_bytes = 0;
  cfg.file_delete_delay_ms = 0;
  cfg.segment_ms = INT64_MAX / 4;  // after the first pass the log must not change any more
  auto log = (*ld)->open_log(*reactor, {"r", 2}, cfg);
  ASSERT_TRUE(log.has_value());
  for (int i = 0; i < 12; ++i)
    append(**log, 1000 + i);
  RetentionDeleter del({.check_interval_ms = 20, .checkpoint_interval_ms = 20}, {ld->get()});
  auto reg = del.add(*reactor, **log);
  del.start();
  ASSERT_TRUE(reactor->run_until([&] {
    auto s = del.stats();
    return s.files_unlinked > 0 && s.files_unlinked == s.files_renamed && s.checkpoint_writes > 0;
  }));
  // A checkpoint written after that pass carries the raised start.
  auto writes = del.stats().checkpoint_writes;
  ASSERT_TRUE(reactor->run_until([&] { return del.stats().checkpoint_writes > writes; }));
  for (const auto& de : fs::directory_iterator(root / "r-2")) {
    EXPECT_FALSE(de.path().string().ends_with(".deleted")) << de.path();
  }
  std::ifstream f(root / "log-start-offset-checkpoint");
  std::string v, n, line;
  std::getline(f, v);
  std::getline(f, n);
  std::getline(f, line);
  EXPECT_EQ(v, "0");
  EXPECT_EQ(n, "1");
  EXPECT_EQ(line, "r 2 " + std::to_string((*log)->log_start_offset()));
  // After remove() the thread no longer touches the log, even once it is gone.
  del.remove(reg);
  log->reset();
  del.check_now();
  auto passes = del.stats().passes;
  ASSERT_TRUE(reactor->run_until([&] { return del.stats().passes > passes + 2; }));
  del.stop();
}

}  // namespace
}  // namespace samsa::io
