// io::OpenFiles (the segment file descriptor budget) and what it does to io::Log: logs whose
// files the budget closed read and append correctly, the budget holds, files in use stay open,
// an idle log holds no directory descriptor, and a clean close of an idle log syncs nothing.
#include "io/open_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "io/log.h"
#include "io/log_dir.h"
#include "io/reactor.h"
#include "tests/support/io_testing.h"

namespace samsa::io {
namespace {

std::size_t open_fds() {
  std::size_t n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return 0;
  while (::readdir(d))
    ++n;
  ::closedir(d);
  return n;
}

std::shared_ptr<SegmentFile> dev_null() {
  auto f = std::make_shared<SegmentFile>();
  f->fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  f->path = "/dev/null";
  return f;
}

TEST(OpenFiles, ClosesTheLeastRecentlyUsedPastTheBudget) {
  OpenFiles files;
  files.set_budget(OpenFiles::kMinBudget);
  std::vector<OpenFiles::Handle> handles(40);
  const std::size_t before = open_fds();
  for (auto& h : handles)
    files.adopt(h, dev_null());
  EXPECT_EQ(files.open(), OpenFiles::kMinBudget);
  EXPECT_EQ(files.stats().evicted, 40 - OpenFiles::kMinBudget);
  EXPECT_EQ(open_fds(), before + OpenFiles::kMinBudget) << "closed files gave their fd back";
  for (std::size_t i = 0; i < handles.size(); ++i)
    EXPECT_EQ(static_cast<bool>(handles[i]), i >= 40 - OpenFiles::kMinBudget) << i;
  // The oldest open one, used again, outlives the next eviction.
  OpenFiles::Handle& oldest = handles[40 - OpenFiles::kMinBudget];
  files.touch(oldest);
  OpenFiles::Handle extra;
  files.adopt(extra, dev_null());
  EXPECT_TRUE(oldest);
  EXPECT_FALSE(handles[40 - OpenFiles::kMinBudget + 1]);
}

TEST(OpenFiles, NeverClosesAFileSomeoneHolds) {
  OpenFiles files;
  files.set_budget(OpenFiles::kMinBudget);
  std::vector<OpenFiles::Handle> handles(OpenFiles::kMinBudget + 4);
  std::vector<std::shared_ptr<SegmentFile>> held;
  for (auto& h : handles) {
    files.adopt(h, dev_null());
    held.push_back(h.get());  // a read or write in progress on every one
  }
  EXPECT_EQ(files.open(), handles.size()) << "over budget rather than closing a busy file";
  EXPECT_GT(files.stats().busy, 0u);
  held.clear();
  OpenFiles::Handle one_more;
  files.adopt(one_more, dev_null());
  EXPECT_EQ(files.open(), OpenFiles::kMinBudget);
}

TEST(OpenFiles, AHandleGoingAwayLeavesTheList) {
  OpenFiles files;
  {
    OpenFiles::Handle h;
    files.adopt(h, dev_null());
    EXPECT_EQ(files.open(), 1u);
  }
  EXPECT_EQ(files.open(), 0u);
}

class LogBudgetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = Reactor::create({.name = "test"});
    ASSERT_TRUE(r.has_value());
    reactor = std::move(*r);
  }
  std::unique_ptr<Log> open(const std::string& name, LogConfig cfg = {}, OpenOptions o = {}) {
    auto l = Log::open(*reactor, dir / name, cfg, o);
    EXPECT_TRUE(l.has_value()) << l.error().detail;
    return l ? std::move(*l) : nullptr;
  }
  std::vector<std::byte> read_all(Log& log) {
    auto rr = log.read(log.log_start_offset(), 64u << 20, log.log_end_offset());
    EXPECT_TRUE(rr.has_value()) << rr.error().detail;
    return rr ? testing::read_bytes(*rr) : std::vector<std::byte>{};
  }
  testing::TempDir dir;
  std::unique_ptr<Reactor> reactor;
};

// 40 logs of 3 segments each under a budget of 16 files: every log reads back what was written
// and takes appends, the budget holds between calls, and the closed files are opened again.
TEST_F(LogBudgetTest, LogsWhoseFilesWereClosedReadAndAppend) {
  reactor->open_files().set_budget(OpenFiles::kMinBudget);
  LogConfig cfg;
  cfg.segment_bytes = 300;  // each batch below fills most of a segment
  std::vector<std::unique_ptr<Log>> logs;
  std::vector<std::vector<std::byte>> written(40);
  const std::size_t before = open_fds();
  for (int i = 0; i < 40; ++i) {
    logs.push_back(open("t-" + std::to_string(i), cfg));
    for (int b = 0; b < 3; ++b) {
      auto bytes = testing::make_batch(2, 1000 + b, 80, i * 10 + b);
      auto r = testing::append_sync(*reactor, *logs.back(), bytes);
      ASSERT_TRUE(r.has_value()) << r.error().detail;
      store_be<std::int64_t>(bytes.data(), r->base_offset);
      written[i].insert(written[i].end(), bytes.begin(), bytes.end());
    }
    EXPECT_EQ(logs.back()->segment_count(), 3u);
    EXPECT_LE(reactor->open_files().open(), OpenFiles::kMinBudget);
  }
  EXPECT_LE(open_fds(), before + OpenFiles::kMinBudget) << "no directory fds, no files past it";
  const std::uint64_t closed = reactor->open_files().stats().evicted;
  EXPECT_GE(closed, 40u * 3 - OpenFiles::kMinBudget);
  for (int i = 0; i < 40; ++i)
    EXPECT_EQ(read_all(*logs[i]), written[i]) << "log " << i;
  // Appends to logs whose active segment was closed, then everything again.
  for (int i = 0; i < 40; ++i) {
    auto bytes = testing::make_batch(1, 5000, 10, i);
    auto r = testing::append_sync(*reactor, *logs[i], bytes);
    ASSERT_TRUE(r.has_value()) << r.error().detail;
    store_be<std::int64_t>(bytes.data(), r->base_offset);
    written[i].insert(written[i].end(), bytes.begin(), bytes.end());
  }
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(read_all(*logs[i]), written[i]) << "log " << i;
    auto ts = logs[i]->offset_for_timestamp(1002);  // the second batch's second record
    ASSERT_TRUE(ts.has_value());
    ASSERT_TRUE(ts->has_value());
    EXPECT_EQ((*ts)->offset, 3);
  }
  EXPECT_LE(reactor->open_files().open(), OpenFiles::kMinBudget);
  EXPECT_GT(reactor->open_files().stats().opened, 40u * 3 + 40u) << "files were opened again";
  // Close and reopen (clean): the budget's closings leave nothing for recovery to find.
  for (auto& l : logs)
    ASSERT_TRUE(l->close().has_value());
  logs.clear();
  for (int i = 0; i < 40; ++i) {
    auto l = open("t-" + std::to_string(i), cfg, OpenOptions{.clean_shutdown = true});
    EXPECT_EQ(read_all(*l), written[i]) << "log " << i << " after reopening";
  }
}

// A slice (a fetch sending from the file) keeps its file open past the budget; the segment's
// file is opened afresh for later reads.
TEST_F(LogBudgetTest, SlicesKeepTheirFilesOpen) {
  reactor->open_files().set_budget(OpenFiles::kMinBudget);
  auto held_log = open("held-0");
  auto bytes = testing::make_batch(3, 1000);
  auto r = testing::append_sync(*reactor, *held_log, bytes);
  ASSERT_TRUE(r.has_value());
  auto rr = held_log->read(0, 1 << 20, held_log->log_end_offset());
  ASSERT_TRUE(rr.has_value());
  ASSERT_EQ(rr->slices.size(), 1u);
  std::vector<std::unique_ptr<Log>> others;
  for (int i = 0; i < 30; ++i)
    others.push_back(open("o-" + std::to_string(i)));
  store_be<std::int64_t>(bytes.data(), 0);
  EXPECT_EQ(testing::slice_bytes(rr->slices[0]), bytes) << "the slice's fd is still valid";
  EXPECT_EQ(read_all(*held_log), bytes);
}

// Without a budget an idle log holds one descriptor: its active segment's (the directory is
// opened only for a sync). A new log's directory entries are synced with its first group
// commit; closing a log nothing was written to syncs nothing.
TEST_F(LogBudgetTest, AnIdleLogHoldsOneDescriptorAndItsCleanCloseSyncsNothing) {
  const std::size_t before = open_fds();
  std::vector<std::unique_ptr<Log>> logs;
  for (int i = 0; i < 20; ++i)
    logs.push_back(open("idle-" + std::to_string(i)));
  EXPECT_EQ(open_fds(), before + 20);
  for (auto& l : logs) {
    ASSERT_TRUE(l->close().has_value());
    EXPECT_EQ(l->stats().fdatasyncs, 0u);
    EXPECT_EQ(l->stats().dir_fsyncs, 0u);
  }
  auto written = open("written-0");
  auto r = testing::append_sync(*reactor, *written, testing::make_batch(1, 1000));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(written->stats().dir_fsyncs, 1u) << "the new segment's entry, with the first group";
  EXPECT_EQ(written->stats().fdatasyncs, 1u);
  ASSERT_TRUE(written->close().has_value());
  EXPECT_EQ(written->stats().fdatasyncs, 1u) << "the group commit synced the data already";
}

}  // namespace
}  // namespace samsa::io
