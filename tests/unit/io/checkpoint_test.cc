// io/checkpoint.h: the atomic and durable file operations every file samsad writes goes
// through. That they survive a power cut is the power-loss tests' job
// (tests/durability/samsad_powerloss.py); here: what each call leaves behind, and its errors.
#include "io/checkpoint.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

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

TEST(Checkpoint, WriteFileAtomicallyReplacesTheWholeFile) {
  testing::TempDir dir;
  auto f = dir / "meta.properties";
  ASSERT_TRUE(write_file_atomically(f, "cluster.id=a\nnode.id=1\n").has_value());
  EXPECT_EQ(slurp(f), "cluster.id=a\nnode.id=1\n");
  ASSERT_TRUE(write_file_atomically(f, "x").has_value());
  EXPECT_EQ(slurp(f), "x");
  EXPECT_FALSE(fs::exists(dir / "meta.properties.tmp"));
  auto bad = write_file_atomically(dir / "no-such-dir" / "f", "x");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code, Errc::io_error);
  EXPECT_NE(bad.error().detail.find("no-such-dir"), std::string::npos) << bad.error().detail;
}

TEST(Checkpoint, CheckpointFilesRoundTrip) {
  testing::TempDir dir;
  auto f = dir / "recovery-point-offset-checkpoint";
  EXPECT_EQ(read_checkpoint(f, 3).error().code, Errc::not_found);
  ASSERT_TRUE(write_checkpoint(f, {{"a", "0", "5"}, {"b", "1", "7"}}).has_value());
  EXPECT_EQ(slurp(f), "0\n2\na 0 5\nb 1 7\n");
  auto back = read_checkpoint(f, 3);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, (std::vector<std::vector<std::string>>{{"a", "0", "5"}, {"b", "1", "7"}}));
  // A file cut short (what a torn non-atomic write would leave) is refused, naming the line.
  std::ofstream(f, std::ios::trunc) << "0\n2\na 0 5\n";
  auto torn = read_checkpoint(f, 3);
  ASSERT_FALSE(torn.has_value());
  EXPECT_NE(torn.error().detail.find("line 4"), std::string::npos) << torn.error().detail;
}

TEST(Checkpoint, CreateDirectoriesDurablyMakesEveryMissingLevel) {
  testing::TempDir dir;
  auto deep = dir / "a" / "b" / "c";
  auto made = create_directories_durably(deep);
  ASSERT_TRUE(made.has_value()) << made.error().detail;
  EXPECT_TRUE(*made);
  EXPECT_TRUE(fs::is_directory(deep));
  made = create_directories_durably(deep);
  ASSERT_TRUE(made.has_value());
  EXPECT_FALSE(*made);                                             // already there
  made = create_directories_durably(dir.path() / "d" / "e" / "");  // trailing separator
  ASSERT_TRUE(made.has_value()) << made.error().detail;
  EXPECT_TRUE(*made);
  EXPECT_TRUE(fs::is_directory(dir / "d" / "e"));

  std::ofstream(dir / "file") << "x";
  auto bad = create_directories_durably(dir / "file" / "sub");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code, Errc::io_error);
  EXPECT_NE(bad.error().detail.find("/file: Not a directory"), std::string::npos)
      << bad.error().detail;
}

TEST(Checkpoint, RenameDurablyMovesWithinAndAcrossDirectories) {
  testing::TempDir dir;
  fs::create_directories(dir / "t-0");
  std::ofstream(dir / "t-0" / "00000000000000000000.log") << "data";
  ASSERT_TRUE(rename_durably(dir / "t-0", dir / "t-0.abc-delete").has_value());
  EXPECT_FALSE(fs::exists(dir / "t-0"));
  EXPECT_EQ(slurp(dir / "t-0.abc-delete" / "00000000000000000000.log"), "data");
  fs::create_directories(dir / "other");
  ASSERT_TRUE(rename_durably(dir / "t-0.abc-delete", dir / "other" / "moved").has_value());
  EXPECT_TRUE(fs::is_directory(dir / "other" / "moved"));

  auto bad = rename_durably(dir / "missing", dir / "x");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code, Errc::io_error);
  EXPECT_NE(bad.error().detail.find("missing"), std::string::npos) << bad.error().detail;
}

TEST(Checkpoint, RemoveDurably) {
  testing::TempDir dir;
  std::ofstream(dir / ".kafka_cleanshutdown") << "";
  ASSERT_TRUE(remove_durably(dir / ".kafka_cleanshutdown").has_value());
  EXPECT_FALSE(fs::exists(dir / ".kafka_cleanshutdown"));
  EXPECT_TRUE(remove_durably(dir / ".kafka_cleanshutdown").has_value());  // gone already: fine
  fs::create_directories(dir / "d" / "e");
  auto bad = remove_durably(dir / "d");  // a directory with something in it is not a file
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code, Errc::io_error);
}

}  // namespace
}  // namespace samsa::io
