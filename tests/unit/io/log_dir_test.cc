// io::LogDir: lock file, partition discovery, Kafka's checkpoint files, the clean-shutdown
// marker and when it may be written.
#include "io/log_dir.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "io/checkpoint.h"
#include "io/retention.h"
#include "tests/support/io_testing.h"

namespace samsa::io {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class LogDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = Reactor::create({.name = "test"});
    ASSERT_TRUE(r.has_value());
    reactor = std::move(*r);
  }
  testing::TempDir dir;
  std::unique_ptr<Reactor> reactor;
};

TEST(PartitionId, ParsesKafkaDirectoryNames) {
  EXPECT_EQ(PartitionId::parse("orders-0"), (PartitionId{"orders", 0}));
  EXPECT_EQ(PartitionId::parse("my-topic-12"), (PartitionId{"my-topic", 12}));
  EXPECT_EQ(PartitionId::parse("__consumer_offsets-49"), (PartitionId{"__consumer_offsets", 49}));
  EXPECT_FALSE(PartitionId::parse("orders"));
  EXPECT_FALSE(PartitionId::parse("orders-"));
  EXPECT_FALSE(PartitionId::parse("-3"));
  EXPECT_FALSE(PartitionId::parse("orders-01"));
  EXPECT_FALSE(PartitionId::parse("orders-0.5c1d2e-delete"));
  EXPECT_FALSE(PartitionId::parse("orders-x"));
  EXPECT_EQ((PartitionId{"a.b", 7}).dir_name(), "a.b-7");
}

// A topic deletion renames its partitions "<topic>-<p>.<id>-delete" and removes them in the
// background; a stop or a power cut in between leaves them, and the next start removes them.
TEST_F(LogDirTest, DeletedPartitionsLeftBehindAreRemovedAfterOpen) {
  fs::create_directories(dir / "a-3.0f0f-delete");
  std::ofstream(dir / "a-3.0f0f-delete" / "00000000000000000000.log") << "old";
  fs::create_directories(dir / "b-0.1a2b-stray");  // set aside for an operator: kept
  fs::create_directories(dir / "a-0");
  auto d = LogDir::open(dir.path());
  ASSERT_TRUE(d.has_value()) << d.error().detail;
  ASSERT_EQ((*d)->left_to_delete().size(), 1u);
  EXPECT_EQ((*d)->left_to_delete()[0].filename(), "a-3.0f0f-delete");
  RetentionDeleter del({.check_interval_ms = 3600 * 1000, .checkpoint_interval_ms = 3600 * 1000},
                       {d->get()});
  del.start();
  for (int i = 0; i < 500 && fs::exists(dir / "a-3.0f0f-delete"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_FALSE(fs::exists(dir / "a-3.0f0f-delete"));
  EXPECT_TRUE(fs::exists(dir / "b-0.1a2b-stray"));
  EXPECT_TRUE(fs::exists(dir / "a-0"));
  del.stop();
}

TEST_F(LogDirTest, DiscoversPartitionsAndWritesKafkaCheckpoints) {
  fs::create_directories(dir / "b-1");
  fs::create_directories(dir / "a-0");
  fs::create_directories(dir / "not a partition");
  fs::create_directories(dir / "a-3.0f0f-delete");
  auto d = LogDir::open(dir.path());
  ASSERT_TRUE(d.has_value()) << d.error().detail;
  EXPECT_FALSE((*d)->had_clean_shutdown());
  auto ps = (*d)->partitions();
  ASSERT_EQ(ps.size(), 2u);
  EXPECT_EQ(ps[0], (PartitionId{"a", 0}));
  EXPECT_EQ(ps[1], (PartitionId{"b", 1}));

  auto a = (*d)->open_log(*reactor, {"a", 0}, LogConfig{});
  auto b = (*d)->open_log(*reactor, {"b", 1}, LogConfig{});
  auto c = (*d)->open_log(*reactor, {"c", 4}, LogConfig{});  // new
  ASSERT_TRUE(a && b && c);
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(testing::append_sync(*reactor, **a, testing::make_batch(2, i)));
  ASSERT_TRUE(testing::append_sync(*reactor, **c, testing::make_batch(5, 1)));
  ASSERT_TRUE((*a)->delete_records(2).has_value());  // also writes the checkpoints
  ASSERT_TRUE((*d)->write_checkpoints().has_value());
  EXPECT_EQ(slurp(dir / "recovery-point-offset-checkpoint"), "0\n3\na 0 6\nb 1 0\nc 4 5\n");
  EXPECT_EQ(slurp(dir / "log-start-offset-checkpoint"), "0\n3\na 0 2\nb 1 0\nc 4 0\n");
  EXPECT_EQ((*d)->partitions().size(), 3u);
  EXPECT_FALSE(fs::exists(dir / "recovery-point-offset-checkpoint.tmp"));

  // A closed and destroyed log keeps its entry.
  ASSERT_TRUE((*c)->close().has_value());
  c->reset();
  ASSERT_TRUE((*d)->write_checkpoints().has_value());
  EXPECT_NE(slurp(dir / "recovery-point-offset-checkpoint").find("c 4 5\n"), std::string::npos);
}

TEST_F(LogDirTest, TheLockKeepsASecondOwnerOut) {
  auto d = LogDir::open(dir.path());
  ASSERT_TRUE(d.has_value());
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto d2 = LogDir::open(dir.path());
    bool refused = !d2.has_value() && d2.error().detail.find("locked") != std::string::npos;
    ::_exit(refused ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  d->reset();  // released: a new owner gets in
  auto d3 = LogDir::open(dir.path());
  EXPECT_TRUE(d3.has_value());
}

TEST_F(LogDirTest, CleanShutdownOnlyWhenEveryLogIsClosed) {
  fs::create_directories(dir / "idle-0");  // found but never opened in this run
  {
    auto d = LogDir::open(dir.path());
    ASSERT_TRUE(d.has_value());
    auto a = (*d)->open_log(*reactor, {"a", 0}, LogConfig{});
    ASSERT_TRUE(a.has_value());
    ASSERT_TRUE(testing::append_sync(*reactor, **a, testing::make_batch(2, 1)));
    auto r = (*d)->shutdown_clean();
    ASSERT_FALSE(r.has_value());
    EXPECT_NE(r.error().detail.find("a-0 was not closed"), std::string::npos) << r.error().detail;
    ASSERT_TRUE((*a)->close().has_value());
    r = (*d)->shutdown_clean();
    ASSERT_FALSE(r.has_value());
    EXPECT_NE(r.error().detail.find("idle-0 was not opened"), std::string::npos)
        << r.error().detail;
    EXPECT_FALSE(fs::exists(dir / ".kafka_cleanshutdown"));
    auto idle = (*d)->open_log(*reactor, {"idle", 0}, LogConfig{});
    ASSERT_TRUE(idle.has_value());
    ASSERT_TRUE((*idle)->close().has_value());
    ASSERT_TRUE((*d)->shutdown_clean().has_value());
    EXPECT_TRUE(fs::exists(dir / ".kafka_cleanshutdown"));
  }
  auto d = LogDir::open(dir.path());
  ASSERT_TRUE(d.has_value());
  EXPECT_TRUE((*d)->had_clean_shutdown());
  EXPECT_FALSE(fs::exists(dir / ".kafka_cleanshutdown"));  // a crash from here is unclean
  OpenOptions o = (*d)->open_options({"a", 0});
  EXPECT_TRUE(o.clean_shutdown);
  EXPECT_EQ(o.recovery_point, 2);
  EXPECT_EQ(o.log_start_offset, 0);
}

TEST_F(LogDirTest, DamagedCheckpointsAreIgnoredNotFatal) {
  fs::create_directories(dir / "a-0");
  std::ofstream(dir / "recovery-point-offset-checkpoint") << "0\n2\na 0 17\n";  // short
  std::ofstream(dir / "log-start-offset-checkpoint") << "1\n0\n";               // version 1
  ::testing::internal::CaptureStderr();
  auto d = LogDir::open(dir.path());
  std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(d.has_value());
  EXPECT_NE(err.find("ignoring recovery-point-offset-checkpoint"), std::string::npos) << err;
  OpenOptions o = (*d)->open_options({"a", 0});
  EXPECT_EQ(o.recovery_point, 0);  // scan everything: slow, never wrong
  EXPECT_EQ(o.log_start_offset, -1);
}

TEST(Checkpoint, ReadsWhatItWritesAndRejectsMalformedFiles) {
  testing::TempDir d;
  auto f = d / "cp";
  ASSERT_TRUE(write_checkpoint(f, {{"x", "1", "2"}, {"y", "0", "9"}}).has_value());
  auto r = read_checkpoint(f, 3);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, (std::vector<std::vector<std::string>>{{"x", "1", "2"}, {"y", "0", "9"}}));
  EXPECT_EQ(read_checkpoint(d / "missing", 3).error().code, Errc::not_found);
  std::ofstream(f, std::ios::trunc) << "0\n1\nx 1\n";
  auto bad = read_checkpoint(f, 3);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().detail.find("line 3"), std::string::npos);
  std::ofstream(f, std::ios::trunc) << "0\n1\nx 1 2\ny 2 3\n";
  EXPECT_FALSE(read_checkpoint(f, 3).has_value());
}

}  // namespace
}  // namespace samsa::io
