// net/dpdk/conn_journal.h: what one process writes, the next one reads after it died.
#include "net/dpdk/conn_journal.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <string>

namespace samsa::net::dpdk {
namespace {

std::string fresh_path(const char* name) {
  auto dir = std::filesystem::temp_directory_path() /
             ("samsa-journal-" + std::to_string(::getpid()) + "-" + name);
  std::filesystem::remove_all(dir);
  return (dir / "sub" / "dpdk-connections").string();  // its folder is created too
}

// Odd ones outbound (a fetcher's), even ones accepted: the kind survives too.
ConnTuple tuple(std::uint32_t i) {
  return {0x0200630a, 0x0100630a + (i << 24), 9092, static_cast<std::uint16_t>(40000 + i),
          i % 2 == 1};
}

TEST(ConnJournal, AFirstOpenFindsNothingAndAReopenFindsWhatWasOpen) {
  const std::string path = fresh_path("reopen");
  {
    ConnJournal j;
    auto prev = j.open(path);
    ASSERT_TRUE(prev) << prev.error();
    EXPECT_TRUE(prev->empty());
    const int a = j.add(tuple(1));
    const int b = j.add(tuple(2));
    const int c = j.add(tuple(3));
    ASSERT_GE(a, 0);
    ASSERT_GE(b, 0);
    ASSERT_GE(c, 0);
    j.remove(b);  // closed: not remembered
    EXPECT_EQ(j.used(), 2u);
  }
  auto tuples = [](const std::vector<ConnJournal::Inherited>& v) {
    std::vector<ConnTuple> out;
    for (const auto& x : v)
      out.push_back(x.t);
    return out;
  };
  int slot_of_1 = -1;
  {
    ConnJournal next;
    auto prev = next.open(path);
    ASSERT_TRUE(prev) << prev.error();
    const auto ts = tuples(*prev);
    ASSERT_EQ(ts.size(), 2u);
    EXPECT_NE(std::find(ts.begin(), ts.end(), tuple(1)), ts.end());
    EXPECT_NE(std::find(ts.begin(), ts.end(), tuple(3)), ts.end());
    EXPECT_EQ(next.used(), 2u);  // kept until dealt with
    for (const auto& x : *prev)
      if (x.t == tuple(1)) slot_of_1 = x.slot;
    next.remove(slot_of_1);  // dealt with; tuple(3) is not (this process "dies" first)
    next.add(tuple(4));
  }
  // What a process did not deal with passes on, with its own open connections.
  ConnJournal third;
  auto again = third.open(path);
  ASSERT_TRUE(again);
  const auto ts = tuples(*again);
  ASSERT_EQ(ts.size(), 2u);
  EXPECT_NE(std::find(ts.begin(), ts.end(), tuple(3)), ts.end());
  EXPECT_NE(std::find(ts.begin(), ts.end(), tuple(4)), ts.end());
}

TEST(ConnJournal, SurvivesAKillDashNine) {
  const std::string path = fresh_path("kill");
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ConnJournal j;
    if (!j.open(path)) ::_exit(1);
    j.add(tuple(7));
    ::kill(::getpid(), SIGKILL);  // no destructor, no munmap, no msync
    ::_exit(2);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  ConnJournal j;
  auto prev = j.open(path);
  ASSERT_TRUE(prev) << prev.error();
  ASSERT_EQ(prev->size(), 1u);
  EXPECT_EQ(prev->front().t, tuple(7));
}

TEST(ConnJournal, AFullJournalRemembersNoMoreAndSlotsAreReused) {
  ConnJournal j;
  ASSERT_TRUE(j.open(fresh_path("full")));
  std::vector<int> slots;
  for (std::size_t i = 0; i < ConnJournal::kSlots; ++i)
    slots.push_back(j.add(tuple(static_cast<std::uint32_t>(i % 200))));
  EXPECT_EQ(j.add(tuple(1)), -1);
  j.remove(slots[5]);
  EXPECT_EQ(j.add(tuple(1)), slots[5]);
  j.remove(-1);  // a connection that got no slot
  EXPECT_EQ(j.used(), ConnJournal::kSlots);
}

TEST(ConnJournal, AnUnwritablePlaceIsAnError) {
  ConnJournal j;
  auto r = j.open("/proc/samsa-no-such-dir/dpdk-connections");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("/proc/samsa-no-such-dir"), std::string::npos);
  EXPECT_EQ(j.add(tuple(1)), -1);  // not open: nothing remembered, nothing breaks
}

}  // namespace
}  // namespace samsa::net::dpdk
