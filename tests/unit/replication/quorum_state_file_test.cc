#include "replication/quorum/quorum_state_file.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/support/io_testing.h"

namespace samsa::replication::quorum {
namespace {

using io::testing::TempDir;
using namespace std::string_literals;

void put(const std::filesystem::path& p, std::string_view text) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
}

std::string get(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

QuorumStateFile sample() {
  QuorumStateFile s;
  s.cluster_id = "MkU3OEVBNTcwNTJENDM2Qk";
  s.state = QuorumState{5, 2, 1};
  s.applied_offset = 1234;
  s.voters = {1, 2, 3};
  return s;
}

constexpr std::string_view kGood =
    R"({"clusterId":"","leaderId":1,"leaderEpoch":5,"votedId":-1,"appliedOffset":0,)"
    R"("currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0})";

// The error's detail names the file and contains `words`.
void expect_refused(const TempDir& d, std::string_view text, std::string_view words) {
  SCOPED_TRACE(std::string(text));
  const auto file = d / "quorum-state";
  put(file, text);
  auto r = read_quorum_state(file);
  ASSERT_FALSE(r) << "accepted";
  EXPECT_NE(r.error().detail.find(file.string()), std::string::npos) << r.error().detail;
  EXPECT_NE(r.error().detail.find(words), std::string::npos) << r.error().detail;
}

TEST(QuorumStateFile, WriteThenReadRoundTrips) {
  TempDir d;
  const auto file = d / "quorum-state";
  ASSERT_TRUE(write_quorum_state(file, sample()));
  EXPECT_EQ(get(file),
            R"({"clusterId":"MkU3OEVBNTcwNTJENDM2Qk","leaderId":1,"leaderEpoch":5,"votedId":2,)"
            R"("appliedOffset":1234,"currentVoters":[{"voterId":1},{"voterId":2},)"
            R"({"voterId":3}],"data_version":0})");
  auto r = read_quorum_state(file);
  ASSERT_TRUE(r) << r.error().detail;
  EXPECT_EQ(*r, sample());
  // Rewriting replaces it, and nothing is left beside it.
  auto next = sample();
  next.state = QuorumState{6, -1, -1};
  next.cluster_id = "quote\" and \\ and \n";
  ASSERT_TRUE(write_quorum_state(file, next));
  r = read_quorum_state(file);
  ASSERT_TRUE(r) << r.error().detail;
  EXPECT_EQ(*r, next);
  std::vector<std::string> names;
  for (const auto& de : std::filesystem::directory_iterator(d.path()))
    names.push_back(de.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"quorum-state"});
}

TEST(QuorumStateFile, KafkasExampleAndAnyMemberOrderAndWhitespaceRead) {
  TempDir d;
  put(d / "quorum-state", kGood);
  auto r = read_quorum_state(d / "quorum-state");
  ASSERT_TRUE(r) << r.error().detail;
  EXPECT_EQ(r->state, (QuorumState{5, -1, 1}));
  EXPECT_EQ(r->voters, (std::vector<NodeId>{1, 2, 3}));
  EXPECT_EQ(r->applied_offset, 0);
  put(d / "quorum-state",
      "{ \"data_version\" : 0,\n \"currentVoters\" : [ ],\n \"appliedOffset\": 7, \"votedId\": 3, "
      "\"leaderEpoch\": 2, \"leaderId\": -1, \"clusterId\": \"c\\u0041\" }\n");
  r = read_quorum_state(d / "quorum-state");
  ASSERT_TRUE(r) << r.error().detail;
  EXPECT_EQ(r->state, (QuorumState{2, 3, -1}));
  EXPECT_EQ(r->cluster_id, "cA");
  EXPECT_EQ(r->applied_offset, 7);
  EXPECT_TRUE(r->voters.empty());
}

TEST(QuorumStateFile, AbsentFileIsTheEmptyState) {
  TempDir d;
  auto r = read_quorum_state(d / "quorum-state");
  ASSERT_TRUE(r) << r.error().detail;
  EXPECT_EQ(*r, QuorumStateFile{});
  EXPECT_EQ(r->state.epoch, 0);
  EXPECT_EQ(r->state.voted_for, -1);
  EXPECT_EQ(r->state.leader, -1);
}

TEST(QuorumStateFile, GarbageAndTruncationAreErrors) {
  TempDir d;
  expect_refused(d, "", "ends early");
  expect_refused(d, "\x01\x02garbage", "malformed JSON at byte 0");
  expect_refused(d, "[1,2]", "holds an array");
  for (std::size_t n : {1ul, 10ul, kGood.size() / 2, kGood.size() - 1}) {
    expect_refused(d, kGood.substr(0, n), "malformed JSON");
  }
  expect_refused(d, std::string(kGood) + "}", "unexpected text after");
  expect_refused(d, std::string(kGood) + "\0\0\0"s, "unexpected text after");
}

TEST(QuorumStateFile, MissingUnknownDuplicateAndMistypedFieldsAreErrors) {
  TempDir d;
  expect_refused(d,
                 R"({"clusterId":"","leaderId":1,"leaderEpoch":5,"appliedOffset":0,)"
                 R"("currentVoters":[],"data_version":0})",
                 "missing field votedId");
  expect_refused(d, R"({"clusterId":"","leaderId":1})", "missing field leaderEpoch");
  expect_refused(d,
                 R"({"clusterId":"","leaderId":"1","leaderEpoch":5,"votedId":-1,)"
                 R"("appliedOffset":0,"currentVoters":[],"data_version":0})",
                 "field leaderId is a string, expected an integer");
  expect_refused(d,
                 R"({"clusterId":"","leaderId":1,"leaderEpoch":5.5,"votedId":-1,)"
                 R"("appliedOffset":0,"currentVoters":[],"data_version":0})",
                 "leaderEpoch = 5.5 is not an integer");
  expect_refused(d,
                 R"({"clusterId":"","leaderId":1,"leaderEpoch":4294967301,"votedId":-1,)"
                 R"("appliedOffset":0,"currentVoters":[],"data_version":0})",
                 "out of range");
  expect_refused(d,
                 R"({"clusterId":7,"leaderId":1,"leaderEpoch":5,"votedId":-1,)"
                 R"("appliedOffset":0,"currentVoters":[],"data_version":0})",
                 "field clusterId is a number, expected a string");
  expect_refused(d,
                 R"({"clusterId":"","leaderId":1,"leaderEpoch":5,"votedId":-1,)"
                 R"("appliedOffset":0,"currentVoters":{"voterId":1},"data_version":0})",
                 "currentVoters is an object, expected an array");
  expect_refused(d,
                 R"({"clusterId":"","leaderId":1,"leaderEpoch":5,"votedId":-1,)"
                 R"("appliedOffset":0,"currentVoters":[{"voterId":null}],"data_version":0})",
                 "currentVoters[0].voterId is null");
  expect_refused(d,
                 R"({"clusterId":"","leaderId":1,"leaderEpoch":5,"votedId":-1,"votedId":2,)"
                 R"("appliedOffset":0,"currentVoters":[],"data_version":0})",
                 "votedId appears twice");
  expect_refused(d,
                 R"({"clusterId":"","leaderId":1,"leaderEpoch":5,"votedId":-1,"extra":true,)"
                 R"("appliedOffset":0,"currentVoters":[],"data_version":0})",
                 "unknown field extra");
  expect_refused(d,
                 R"({"clusterId":"","leaderId":1,"leaderEpoch":5,"votedId":-1,)"
                 R"("appliedOffset":0,"currentVoters":[],"data_version":1})",
                 "data_version 1 is not supported");
}

TEST(QuorumStateFile, InconsistentStatesAreErrorsOnReadAndWrite) {
  TempDir d;
  const auto file = d / "quorum-state";
  expect_refused(d,
                 R"({"clusterId":"","leaderId":1,"leaderEpoch":-1,"votedId":-1,)"
                 R"("appliedOffset":0,"currentVoters":[],"data_version":0})",
                 "leaderEpoch -1 is negative");
  expect_refused(d,
                 R"({"clusterId":"","leaderId":-1,"leaderEpoch":0,"votedId":2,)"
                 R"("appliedOffset":0,"currentVoters":[],"data_version":0})",
                 "vote in leaderEpoch 0");
  expect_refused(d,
                 R"({"clusterId":"","leaderId":4,"leaderEpoch":3,"votedId":-1,)"
                 R"("appliedOffset":0,"currentVoters":[{"voterId":1}],"data_version":0})",
                 "leaderId 4 is not among currentVoters");
  expect_refused(d,
                 R"({"clusterId":"","leaderId":1,"leaderEpoch":3,"votedId":-1,)"
                 R"("appliedOffset":0,"currentVoters":[{"voterId":1},{"voterId":1}],)"
                 R"("data_version":0})",
                 "voterId 1 appears twice");
  expect_refused(d,
                 R"({"clusterId":"","leaderId":1,"leaderEpoch":3,"votedId":-1,)"
                 R"("appliedOffset":-5,"currentVoters":[],"data_version":0})",
                 "appliedOffset -5 is negative");

  // A state that could not be read back is never written; the old file stays.
  ASSERT_TRUE(write_quorum_state(file, sample()));
  auto bad = sample();
  bad.state.voted_for = 9;
  auto w = write_quorum_state(file, bad);
  ASSERT_FALSE(w);
  EXPECT_NE(w.error().detail.find("votedId 9 is not among currentVoters"), std::string::npos)
      << w.error().detail;
  auto r = read_quorum_state(file);
  ASSERT_TRUE(r) << r.error().detail;
  EXPECT_EQ(*r, sample());
}

TEST(QuorumStateFile, LeftoverTemporaryFileOfAnInterruptedWriteIsIgnored) {
  TempDir d;
  const auto file = d / "quorum-state";
  ASSERT_TRUE(write_quorum_state(file, sample()));
  // A write cut short before its rename: a torn temporary file beside the real one.
  put(d / "quorum-state.tmp", R"({"clusterId":"","leaderId":1,"leaderEp)");
  auto r = read_quorum_state(file);
  ASSERT_TRUE(r) << r.error().detail;
  EXPECT_EQ(*r, sample());
  // The next write goes through it and replaces both.
  auto next = sample();
  next.state = QuorumState{9, 3, -1};
  ASSERT_TRUE(write_quorum_state(file, next));
  r = read_quorum_state(file);
  ASSERT_TRUE(r) << r.error().detail;
  EXPECT_EQ(*r, next);
  EXPECT_FALSE(std::filesystem::exists(d / "quorum-state.tmp"));
  // Only a temporary file (the cut came before the first rename): still the empty state.
  TempDir e;
  put(e / "quorum-state.tmp", quorum_state_json(sample()));
  r = read_quorum_state(e / "quorum-state");
  ASSERT_TRUE(r) << r.error().detail;
  EXPECT_EQ(*r, QuorumStateFile{});
}

TEST(QuorumStateFile, UnreadablePathIsAnErrorNotTheEmptyState) {
  TempDir d;
  std::filesystem::create_directory(d / "quorum-state");
  auto r = read_quorum_state(d / "quorum-state");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().detail.find("quorum-state"), std::string::npos) << r.error().detail;
}

}  // namespace
}  // namespace samsa::replication::quorum
