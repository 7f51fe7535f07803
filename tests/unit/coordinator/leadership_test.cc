// GroupCoordinator on a cluster broker (Leadership::elected): partitions of __consumer_offsets
// are served only between activate() and deactivate(), as leadership moves (Kafka's
// onElection/onResignation). Real io::Logs in a temp dir, a real reactor; the "other broker"
// is simulated only by which calls are made, the logs hold what a new leader would hold.
#include <gtest/gtest.h>

#include "coordinator/coordinator.h"
#include "tests/support/coordinator_testing.h"
#include "tests/support/io_testing.h"

namespace samsa::coordinator {
namespace {

using kafka::ErrorCode;
using testing::Slot;
using Leadership = GroupCoordinator::Leadership;

class LeadershipTest : public ::testing::Test,
                       protected io::testing::TempDir,
                       public testing::Harness {
 protected:
  LeadershipTest() : Harness(path()) {}
  void SetUp() override {
    ASSERT_TRUE(reactor);
    ASSERT_TRUE(Harness::open(false));
    coord->start(kPartitions, Leadership::elected);
  }
  void TearDown() override {
    EXPECT_FALSE(timed_out) << "a request was never answered";
    stop();
  }

  // A group name whose partition is p.
  std::string group_on(std::int32_t p, const std::string& prefix = "g") {
    for (int i = 0;; ++i) {
      std::string g = prefix + std::to_string(i);
      if (coord->partition_of(g) == p) return g;
    }
  }
  bool load(std::int32_t p, std::int32_t epoch) {
    coord->activate(p, epoch);
    return reactor->run_until([&] { return coord->serving(p); }, kWait);
  }
  // The writes a test started (an empty generation, say) land before the next step.
  void settle() {
    reactor->run_until([&] { return logs->idle(); }, kWait);
    for (int i = 0; i < 3; ++i)
      reactor->run_once(0);
  }
  Slot<CommitResult> commit_async(const std::string& group, std::int64_t offset) {
    CommitRequest r;
    r.group_id = group;
    r.partitions = {{"t1", 0, offset}};
    Slot<CommitResult> s;
    coord->commit_offsets(std::move(r), s.cb());
    return s;
  }
  std::vector<DescribedGroup> describe(const std::string& group) {
    Slot<std::vector<DescribedGroup>> s;
    coord->describe_groups({group}, s.cb());
    return wait(s);
  }
  std::vector<DeleteGroupResult> remove(const std::string& group) {
    Slot<std::vector<DeleteGroupResult>> s;
    coord->delete_groups({group}, s.cb());
    return wait(s);
  }
  ListResult list() {
    Slot<ListResult> s;
    coord->list_groups({}, s.cb());
    return wait(s);
  }
};

TEST_F(LeadershipTest, NothingIsServedUntilThisNodeLeadsThePartition) {
  const std::string g = group_on(1);
  EXPECT_TRUE(coord->started());
  EXPECT_TRUE(coord->loaded());  // nothing to load
  EXPECT_FALSE(coord->active(1));
  EXPECT_EQ(join(join_req(g)).error, ErrorCode::not_coordinator);
  EXPECT_EQ(fetch(g).error, ErrorCode::not_coordinator);
  EXPECT_EQ(simple_commit(g, {{"t1", 0, 5}})[0], ErrorCode::not_coordinator);
  EXPECT_EQ(heartbeat(g, "m", 1), ErrorCode::not_coordinator);
  EXPECT_EQ(describe(g).at(0).error, ErrorCode::not_coordinator);
  EXPECT_EQ(remove(g).at(0).error, ErrorCode::not_coordinator);
  // ListGroups lists what this node coordinates: nothing, and that is no error.
  ListResult l = list();
  EXPECT_EQ(l.error, ErrorCode::none);
  EXPECT_TRUE(l.groups.empty());

  coord->activate(1, 0);
  EXPECT_TRUE(coord->active(1));
  EXPECT_FALSE(coord->serving(1));
  EXPECT_FALSE(coord->loaded());
  EXPECT_EQ(fetch(g).error, ErrorCode::coordinator_load_in_progress);
  EXPECT_EQ(list().error, ErrorCode::coordinator_load_in_progress);
  ASSERT_TRUE(reactor->run_until([&] { return coord->serving(1); }, kWait));
  EXPECT_TRUE(coord->loaded());
  EXPECT_EQ(simple_commit(g, {{"t1", 0, 5}})[0], ErrorCode::none);
  EXPECT_EQ(committed(g, "t1", 0), 5);
  // Another partition's groups are still someone else's.
  EXPECT_EQ(fetch(group_on(2)).error, ErrorCode::not_coordinator);
  EXPECT_EQ(coord->stats().partitions_loaded, 1u);
}

TEST_F(LeadershipTest, ResignationDropsTheGroupsAndReElectionReplaysThem) {
  const std::int32_t p = 3;
  const std::string g = group_on(p);
  const std::string other = group_on(0);
  ASSERT_TRUE(load(p, 1));
  ASSERT_TRUE(load(0, 1));
  Formed f = form(g, 2);
  ASSERT_TRUE(f.ok);
  CommitRequest c;
  c.group_id = g;
  c.generation = f.generation;
  c.member_id = f.members[0];
  c.partitions = {{"t1", 0, 42}};
  ASSERT_EQ(commit(c)[0], ErrorCode::none);
  EXPECT_EQ(simple_commit(other, {{"t1", 1, 7}})[0], ErrorCode::none);
  // A third member's JoinGroup parks until the others rejoin.
  auto parked = join_async(join_req(g));
  reactor->run_once(0);
  ASSERT_FALSE(parked.ready());

  coord->deactivate(p, 2);
  // Parked requests go and look for the new coordinator.
  ASSERT_TRUE(parked.ready());
  EXPECT_EQ(parked->error, ErrorCode::not_coordinator);
  EXPECT_FALSE(coord->active(p));
  EXPECT_FALSE(coord->snapshot(g));
  EXPECT_EQ(heartbeat(g, f.members[0], f.generation), ErrorCode::not_coordinator);
  EXPECT_EQ(fetch(g).error, ErrorCode::not_coordinator);
  c.partitions = {{"t1", 0, 43}};
  EXPECT_EQ(commit(c)[0], ErrorCode::not_coordinator);
  // The partition it still leads is untouched.
  EXPECT_EQ(committed(other, "t1", 1), 7);
  EXPECT_EQ(coord->stats().partitions_unloaded, 1u);
  settle();

  // Elected again (the log holds what the last leader wrote): the group comes back as it was
  // written, Stable with its two members, and its offsets.
  ASSERT_TRUE(load(p, 3));
  auto s = snap(g);
  EXPECT_EQ(s.state, GroupState::stable);
  EXPECT_EQ(s.members, f.members);
  EXPECT_EQ(s.generation, f.generation);
  EXPECT_EQ(committed(g, "t1", 0), 42);
  EXPECT_EQ(heartbeat(g, f.members[1], f.generation), ErrorCode::none);
}

TEST_F(LeadershipTest, ALoadOvertakenByAResignationIsNotApplied) {
  const std::int32_t p = 2;
  const std::string g = group_on(p);
  ASSERT_TRUE(load(p, 1));
  ASSERT_EQ(simple_commit(g, {{"t1", 0, 9}})[0], ErrorCode::none);
  coord->deactivate(p, 2);
  ASSERT_FALSE(coord->snapshot(g));

  // Elected in epoch 3, then resigned in epoch 4 while the replay is still in flight: the
  // replay ends, and nothing of it reaches memory.
  coord->activate(p, 3);
  ASSERT_TRUE(coord->active(p));
  coord->deactivate(p, 4);
  settle();
  EXPECT_FALSE(coord->snapshot(g));
  EXPECT_FALSE(coord->active(p));
  EXPECT_TRUE(coord->loaded());
  EXPECT_EQ(fetch(g).error, ErrorCode::not_coordinator);

  // A late election in an epoch older than that resignation is stale.
  coord->activate(p, 3);
  EXPECT_FALSE(coord->active(p));
  // A newer one loads.
  ASSERT_TRUE(load(p, 5));
  EXPECT_EQ(committed(g, "t1", 0), 9);
  // So does a resignation older than the election in force: ignored.
  coord->deactivate(p, 4);
  EXPECT_TRUE(coord->serving(p));
  EXPECT_EQ(committed(g, "t1", 0), 9);
}

TEST_F(LeadershipTest, ANewerEpochWhileLeadingKeepsTheStateInMemory) {
  const std::int32_t p = 1;
  const std::string g = group_on(p);
  ASSERT_TRUE(load(p, 1));
  Formed f = form(g, 1);
  ASSERT_TRUE(f.ok);
  coord->activate(p, 2);  // still the leader, in a new epoch: nothing to replay
  EXPECT_TRUE(coord->serving(p));
  EXPECT_EQ(coord->stats().partitions_loaded, 1u);
  EXPECT_EQ(heartbeat(g, f.members[0], f.generation), ErrorCode::none);
  coord->deactivate(p, 1);  // older than epoch 2
  EXPECT_TRUE(coord->serving(p));
  coord->deactivate(p, 2);
  EXPECT_FALSE(coord->active(p));
  EXPECT_EQ(heartbeat(g, f.members[0], f.generation), ErrorCode::not_coordinator);
}

TEST_F(LeadershipTest, AWriteThatRacedTheResignationIsAnsweredNotCoordinator) {
  const std::int32_t p = 0;
  const std::string g = group_on(p);
  ASSERT_TRUE(load(p, 1));
  // The commit's batch is on its way to the log when leadership moves: its answer must send
  // the client to the new coordinator, not claim a commit this node can no longer vouch for.
  auto pending = commit_async(g, 11);
  ASSERT_FALSE(pending.ready());
  coord->deactivate(p, 2);
  EXPECT_EQ(wait(pending).at(0), ErrorCode::not_coordinator);
  settle();
  // The batch did land in this node's log (a new leader that copied it would have it).
  ASSERT_TRUE(load(p, 3));
  EXPECT_EQ(committed(g, "t1", 0), 11);
}

TEST_F(LeadershipTest, AResignationWhileAMemberWaitsForItsAssignment) {
  const std::int32_t p = 2;
  const std::string g = group_on(p);
  ASSERT_TRUE(load(p, 1));
  auto a = join_async(join_req(g));
  auto b = join_async(join_req(g));
  JoinResult ja = wait(a), jb = wait(b);
  ASSERT_EQ(ja.error, ErrorCode::none);
  const bool a_leads = ja.leader == ja.member_id;
  const JoinResult& follower = a_leads ? jb : ja;
  auto sync = sync_async(g, follower.member_id, follower.generation);
  reactor->run_once(0);
  ASSERT_FALSE(sync.ready());
  coord->deactivate(p, 2);
  ASSERT_TRUE(sync.ready());
  EXPECT_EQ(sync->error, ErrorCode::not_coordinator);
}

TEST_F(LeadershipTest, SingleNodeStartStillLoadsEveryPartition) {
  // A second coordinator over the same logs, started as a single node does.
  GroupCoordinator single(*reactor, opts,
                          std::make_unique<PartitionStore>(*reactor, logs->run_on()));
  single.start(kPartitions);
  ASSERT_TRUE(reactor->run_until([&] { return single.loaded(); }, kWait));
  for (std::int32_t p = 0; p < kPartitions; ++p)
    EXPECT_TRUE(single.serving(p)) << p;
  single.shutdown();
}

}  // namespace
}  // namespace samsa::coordinator
