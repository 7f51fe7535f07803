// GroupCoordinator: the classic group protocol (joins, syncs, heartbeats, leaves, session and
// rebalance timeouts, static membership) on a real reactor with real timers, and its state
// stored in real io::Logs (a PartitionStore over __consumer_offsets partitions in a temp dir).
// Timeouts are short so expiries happen quickly; no test asserts how long anything took.
#include "coordinator/coordinator.h"

#include <gtest/gtest.h>

#include "base/bytes.h"
#include "tests/support/coordinator_testing.h"
#include "tests/support/io_testing.h"

namespace samsa::coordinator {
namespace {

using kafka::ErrorCode;

using testing::bytes;
using testing::Slot;
using testing::subscription;

// TempDir first: it must exist before the harness and outlive it.
class CoordinatorTest : public ::testing::Test,
                        protected io::testing::TempDir,
                        public testing::Harness {
 protected:
  CoordinatorTest() : Harness(path()) {}
  void SetUp() override { ASSERT_TRUE(reactor); }
  void TearDown() override {
    EXPECT_FALSE(timed_out) << "a request was never answered";
    stop();
  }
  void open(bool start_now = true) { ASSERT_TRUE(Harness::open(start_now)); }
};

TEST_F(CoordinatorTest, UnavailableBeforeStartAndLoadingWhileReplaying) {
  open(false);
  EXPECT_EQ(join(join_req("g")).error, ErrorCode::coordinator_not_available);
  EXPECT_EQ(fetch("g").error, ErrorCode::coordinator_not_available);
  coord->start(kPartitions);
  // The replay runs on the reactor: nothing is loaded until it turns.
  EXPECT_FALSE(coord->loaded());
  EXPECT_EQ(join(join_req("g")).error, ErrorCode::coordinator_load_in_progress);
  EXPECT_EQ(fetch("g").error, ErrorCode::coordinator_load_in_progress);
  EXPECT_EQ(simple_commit("g", {{"t", 0, 1}})[0], ErrorCode::coordinator_load_in_progress);
  // A heartbeat while loading is answered "fine", a SyncGroup "rejoin" (as Kafka does).
  EXPECT_EQ(heartbeat("g", "m", 1), ErrorCode::none);
  EXPECT_EQ(sync("g", "m", 1).error, ErrorCode::rebalance_in_progress);
  ASSERT_TRUE(reactor->run_until([&] { return coord->loaded(); }, kWait));
  EXPECT_EQ(fetch("g").error, ErrorCode::none);
}

TEST_F(CoordinatorTest, FirstJoinNeedsAMemberIdThenFormsGenerationOne) {
  open();
  JoinRequest r = join_req("g");
  r.require_known_member_id = true;  // JoinGroup v4+
  JoinResult first = join(r);
  ASSERT_EQ(first.error, ErrorCode::member_id_required);
  ASSERT_TRUE(first.member_id.starts_with("client-"));
  EXPECT_EQ(snap("g").members.size(), 0u);  // pending, not a member yet

  r.member_id = first.member_id;
  JoinResult j = join(r);
  ASSERT_EQ(j.error, ErrorCode::none);
  EXPECT_EQ(j.member_id, first.member_id);
  EXPECT_EQ(j.generation, 1);
  EXPECT_EQ(j.leader, j.member_id);
  EXPECT_EQ(j.protocol_type, "consumer");
  EXPECT_EQ(j.protocol_name, "range");
  ASSERT_EQ(j.members.size(), 1u);  // the leader sees every member's metadata
  EXPECT_EQ(j.members[0].metadata, subscription({"t1"}));
  EXPECT_EQ(snap("g").state, GroupState::completing_rebalance);

  SyncResult s = sync("g", j.member_id, 1, {{j.member_id, bytes("assignment")}});
  ASSERT_EQ(s.error, ErrorCode::none);
  EXPECT_EQ(s.assignment, bytes("assignment"));
  EXPECT_EQ(s.protocol_name, "range");
  EXPECT_EQ(snap("g").state, GroupState::stable);
  EXPECT_EQ(heartbeat("g", j.member_id, 1), ErrorCode::none);
  // A follower-style rejoin with unchanged metadata in Stable would just get the generation;
  // the leader's rejoin forces a rebalance.
  EXPECT_EQ(sync("g", j.member_id, 1).assignment, bytes("assignment"));
}

TEST_F(CoordinatorTest, RequestValidation) {
  open();
  EXPECT_EQ(join(join_req("")).error, ErrorCode::invalid_group_id);
  JoinRequest r = join_req("g");
  r.session_timeout_ms = 5;
  EXPECT_EQ(join(r).error, ErrorCode::invalid_session_timeout);
  r.session_timeout_ms = 60001;
  EXPECT_EQ(join(r).error, ErrorCode::invalid_session_timeout);
  // Only a member without an id can create a group.
  EXPECT_EQ(join(join_req("g", "someone")).error, ErrorCode::unknown_member_id);
  EXPECT_FALSE(coord->snapshot("g"));
  r = join_req("g");
  r.protocol_type = "";
  EXPECT_EQ(join(r).error, ErrorCode::inconsistent_group_protocol);
  EXPECT_FALSE(coord->snapshot("g"));  // a failed first join leaves no group behind

  form("g", 1);
  // A second member must speak the group's protocol type and share a protocol.
  r = join_req("g");
  r.protocol_type = "connect";
  EXPECT_EQ(join(r).error, ErrorCode::inconsistent_group_protocol);
  r = join_req("g", "", {{"sticky", subscription({"t1"})}});
  EXPECT_EQ(join(r).error, ErrorCode::inconsistent_group_protocol);
  EXPECT_EQ(heartbeat("", "m", 1), ErrorCode::invalid_group_id);
  EXPECT_EQ(heartbeat("nope", "m", 1), ErrorCode::unknown_member_id);
}

TEST_F(CoordinatorTest, TwoMembersLeaderAssignsFollowerWaits) {
  open();
  auto a = join_async(join_req("g"));
  auto b = join_async(join_req("g"));
  JoinResult ja = wait(a), jb = wait(b);
  ASSERT_EQ(ja.error, ErrorCode::none);
  ASSERT_EQ(jb.error, ErrorCode::none);
  EXPECT_EQ(ja.generation, jb.generation);
  EXPECT_EQ(ja.leader, ja.member_id);  // the first to join leads
  EXPECT_EQ(jb.leader, ja.member_id);
  EXPECT_EQ(ja.members.size(), 2u);
  EXPECT_TRUE(jb.members.empty());

  // The follower's SyncGroup parks until the leader's assignment is stored.
  auto sb = sync_async("g", jb.member_id, jb.generation);
  reactor->run_once(0);
  EXPECT_FALSE(sb.ready());
  EXPECT_EQ(heartbeat("g", jb.member_id, jb.generation), ErrorCode::none);  // CompletingRebalance
  SyncResult sa = sync("g", ja.member_id, ja.generation,
                       {{ja.member_id, bytes("to-a")}, {jb.member_id, bytes("to-b")}});
  EXPECT_EQ(sa.assignment, bytes("to-a"));
  EXPECT_EQ(wait(sb).assignment, bytes("to-b"));
  EXPECT_EQ(snap("g").state, GroupState::stable);
  EXPECT_EQ(snap("g").members, (std::vector<std::string>{ja.member_id, jb.member_id}));
}

TEST_F(CoordinatorTest, LeaderAssigningNothingToAMemberGivesItAnEmptyAssignment) {
  open();
  auto a = join_async(join_req("g"));
  auto b = join_async(join_req("g"));
  JoinResult ja = wait(a), jb = wait(b);
  auto sb = sync_async("g", jb.member_id, jb.generation);
  EXPECT_EQ(sync("g", ja.member_id, ja.generation, {{ja.member_id, bytes("x")}}).error,
            ErrorCode::none);
  EXPECT_EQ(wait(sb).error, ErrorCode::none);
  EXPECT_TRUE(sb->assignment.empty());
}

TEST_F(CoordinatorTest, ProtocolIsTheOneMostMembersPreferAmongThoseAllSupport) {
  open();
  auto p1 = join_req("g", "", {{"range", {}}, {"roundrobin", {}}, {"sticky", {}}});
  auto p2 = join_req("g", "", {{"roundrobin", {}}, {"range", {}}});
  auto p3 = join_req("g", "", {{"roundrobin", {}}, {"range", {}}});
  auto a = join_async(p1), b = join_async(p2), c = join_async(p3);
  EXPECT_EQ(wait(a).protocol_name, "roundrobin");
  EXPECT_EQ(wait(b).protocol_name, "roundrobin");
  wait(c);
  // A newcomer must support the selected protocol... or any protocol all members support.
  auto d = join(join_req("g", "", {{"sticky", {}}}));
  EXPECT_EQ(d.error, ErrorCode::inconsistent_group_protocol);
}

TEST_F(CoordinatorTest, NewMemberRebalancesAStableGroup) {
  open();
  Formed f = form("g", 1);
  const std::string a = f.members[0];
  auto b = join_async(join_req("g"));
  reactor->run_once(0);
  EXPECT_FALSE(b.ready());  // waits for the existing member to rejoin
  EXPECT_EQ(snap("g").state, GroupState::preparing_rebalance);
  EXPECT_EQ(heartbeat("g", a, f.generation), ErrorCode::rebalance_in_progress);
  EXPECT_EQ(sync("g", a, f.generation).error, ErrorCode::rebalance_in_progress);
  // Committing with the old generation still works while preparing (Kafka allows it).
  CommitRequest c;
  c.group_id = "g";
  c.generation = f.generation;
  c.member_id = a;
  c.partitions = {{"t1", 0, 3}};
  EXPECT_EQ(commit(c)[0], ErrorCode::none);

  JoinResult ja = join(join_req("g", a));  // rejoin completes the join phase at once
  ASSERT_EQ(ja.error, ErrorCode::none);
  EXPECT_EQ(ja.generation, f.generation + 1);
  EXPECT_EQ(ja.leader, a);
  EXPECT_EQ(ja.members.size(), 2u);
  EXPECT_EQ(wait(b).generation, f.generation + 1);
  // Committing with a member and generation while the assignment is pending: not yet.
  c.generation = ja.generation;
  EXPECT_EQ(commit(c)[0], ErrorCode::rebalance_in_progress);
  c.generation = f.generation;
  EXPECT_EQ(commit(c)[0], ErrorCode::illegal_generation);
}

TEST_F(CoordinatorTest, SessionTimeoutExpiresASilentMember) {
  open();
  JoinRequest quick = join_req("g");
  quick.session_timeout_ms = 30;
  Formed f = form("g", 1);
  const std::string a = f.members[0];
  auto jb = join_async(quick);
  EXPECT_EQ(join(join_req("g", a)).error, ErrorCode::none);
  const std::string b = wait(jb).member_id;
  const std::int32_t gen = snap("g").generation;
  auto sb = sync_async("g", b, gen);
  ASSERT_EQ(sync("g", a, gen, {{a, bytes("x")}, {b, bytes("y")}}).error, ErrorCode::none);
  ASSERT_EQ(wait(sb).error, ErrorCode::none);
  ASSERT_EQ(snap("g").members.size(), 2u);

  // a keeps heartbeating, b goes silent.
  const auto before = coord->stats().expired_members;
  ASSERT_TRUE(reactor->run_until(
      [&] {
        heartbeat("g", a, gen);
        return snap("g").members.size() == 1;
      },
      kWait));
  EXPECT_EQ(coord->stats().expired_members, before + 1);
  EXPECT_EQ(snap("g").members, std::vector<std::string>{a});
  EXPECT_EQ(heartbeat("g", b, gen), ErrorCode::unknown_member_id);
  EXPECT_EQ(heartbeat("g", a, gen), ErrorCode::rebalance_in_progress);
  JoinResult again = join(join_req("g", a));
  EXPECT_EQ(again.generation, gen + 1);
  EXPECT_EQ(again.members.size(), 1u);
}

TEST_F(CoordinatorTest, TheLastMemberExpiringLeavesAnEmptyGroup) {
  open();
  JoinRequest r = join_req("g");
  r.session_timeout_ms = 20;
  Formed f = form("g", 1, r);
  ASSERT_TRUE(reactor->run_until([&] { return snap("g").state == GroupState::empty; }, kWait));
  EXPECT_EQ(snap("g").generation, f.generation + 1);
  EXPECT_TRUE(snap("g").members.empty());
  EXPECT_EQ(heartbeat("g", f.members[0], f.generation), ErrorCode::unknown_member_id);
}

TEST_F(CoordinatorTest, LeaveGroupRebalancesOrEmptiesTheGroup) {
  open();
  Formed f = form("g", 2);
  auto res = leave("g", {{f.members[1], std::nullopt, "bye"}});
  EXPECT_EQ(res.error, ErrorCode::none);
  ASSERT_EQ(res.members.size(), 1u);
  EXPECT_EQ(res.members[0].error, ErrorCode::none);
  EXPECT_EQ(snap("g").state, GroupState::preparing_rebalance);
  EXPECT_EQ(join(join_req("g", f.members[0])).generation, f.generation + 1);

  // Errors are per member; the request as a whole succeeds.
  res = leave("g",
              {{"nobody", std::nullopt, std::nullopt}, {f.members[1], std::nullopt, std::nullopt}});
  EXPECT_EQ(res.members[0].error, ErrorCode::unknown_member_id);
  EXPECT_EQ(res.members[1].error, ErrorCode::unknown_member_id);

  res = leave("g", {{f.members[0], std::nullopt, std::nullopt}});
  EXPECT_EQ(res.members[0].error, ErrorCode::none);
  EXPECT_EQ(snap("g").state, GroupState::empty);
  EXPECT_EQ(snap("g").generation, f.generation + 2);
  EXPECT_EQ(leave("nope", {{"m", std::nullopt, std::nullopt}}).members[0].error,
            ErrorCode::unknown_member_id);
}

TEST_F(CoordinatorTest, MembersThatDoNotRejoinInTheRebalanceTimeoutAreDropped) {
  open();
  JoinRequest r = join_req("g");
  r.rebalance_timeout_ms = 50;
  Formed f = form("g", 2, r);
  auto c = join_async(r);  // a newcomer starts a rebalance
  EXPECT_EQ(join_async(join_req("g", f.members[0])).ready(), false);
  // members[1] never rejoins (it keeps heartbeating, which is not enough).
  ASSERT_TRUE(reactor->run_until(
      [&] {
        heartbeat("g", f.members[1], f.generation);
        return c.ready();
      },
      kWait));
  EXPECT_EQ(c->error, ErrorCode::none);
  auto s = snap("g");
  EXPECT_EQ(s.generation, f.generation + 1);
  EXPECT_EQ(s.members.size(), 2u);
  EXPECT_EQ(std::count(s.members.begin(), s.members.end(), f.members[1]), 0);
  EXPECT_EQ(heartbeat("g", f.members[1], s.generation), ErrorCode::unknown_member_id);
}

TEST_F(CoordinatorTest, MembersThatDoNotSyncInTheRebalanceTimeoutAreDropped) {
  open();
  JoinRequest r = join_req("g");
  r.rebalance_timeout_ms = 50;
  auto a = join_async(r), b = join_async(r);
  JoinResult ja = wait(a), jb = wait(b);
  // Only the leader syncs; the follower's sync never comes.
  ASSERT_EQ(sync("g", ja.member_id, ja.generation,
                 {{ja.member_id, bytes("x")}, {jb.member_id, bytes("y")}})
                .error,
            ErrorCode::none);
  ASSERT_TRUE(reactor->run_until(
      [&] {
        if (snap("g").members.size() == 1) return true;
        heartbeat("g", ja.member_id, ja.generation);
        return false;
      },
      kWait));
  EXPECT_EQ(snap("g").members, std::vector<std::string>{ja.member_id});
  EXPECT_EQ(snap("g").state, GroupState::preparing_rebalance);
}

TEST_F(CoordinatorTest, PendingMemberIdExpiresIfNotUsed) {
  open();
  JoinRequest slow = join_req("g");
  slow.rebalance_timeout_ms = 600000;  // far beyond this test's wait: only expiry can end it
  Formed f = form("g", 1, slow);
  JoinRequest r = join_req("g");
  r.require_known_member_id = true;
  r.session_timeout_ms = 20;
  JoinResult first = join(r);
  ASSERT_EQ(first.error, ErrorCode::member_id_required);
  // A rebalance cannot complete while a handed-out id may still join...
  auto b = join_async(slow);
  auto a = join_async(join_req("g", f.members[0]));
  // ...until the id lapses after its session timeout.
  ASSERT_TRUE(reactor->run_until([&] { return a.ready() && b.ready(); }, 5'000'000'000));
  EXPECT_EQ(a->generation, f.generation + 1);
  EXPECT_EQ(a->members.size(), 2u);
  EXPECT_EQ(join(join_req("g", first.member_id)).error, ErrorCode::unknown_member_id);
}

TEST_F(CoordinatorTest, StaticMemberRestartKeepsTheGenerationAndFencesTheOldId) {
  open();
  JoinRequest r = join_req("g");
  r.group_instance_id = "instance-1";
  r.supports_skip_assignment = true;
  r.require_known_member_id = true;  // not applied to static members
  JoinResult j = join(r);
  ASSERT_EQ(j.error, ErrorCode::none);
  EXPECT_TRUE(j.member_id.starts_with("instance-1-"));
  ASSERT_EQ(sync("g", j.member_id, j.generation, {{j.member_id, bytes("mine")}}).error,
            ErrorCode::none);

  // The process restarts: same instance id, no member id.
  JoinResult k = join(r);
  ASSERT_EQ(k.error, ErrorCode::none);
  EXPECT_NE(k.member_id, j.member_id);
  EXPECT_EQ(k.generation, j.generation);  // no rebalance
  EXPECT_EQ(k.leader, k.member_id);
  EXPECT_TRUE(k.skip_assignment);  // the leader keeps the current assignment
  EXPECT_EQ(k.members.size(), 1u);
  EXPECT_EQ(snap("g").state, GroupState::stable);
  EXPECT_EQ(heartbeat("g", j.member_id, j.generation, "instance-1"), ErrorCode::fenced_instance_id);
  EXPECT_EQ(heartbeat("g", k.member_id, k.generation, "instance-1"), ErrorCode::none);
  EXPECT_EQ(sync("g", k.member_id, k.generation).assignment, bytes("mine"));

  // A client older than JoinGroup v9 is told the previous leader id, so it acts as a follower.
  r.supports_skip_assignment = false;
  JoinResult l = join(r);
  ASSERT_EQ(l.error, ErrorCode::none);
  EXPECT_EQ(l.leader, k.member_id);
  EXPECT_FALSE(l.skip_assignment);
  EXPECT_EQ(l.generation, j.generation);

  // Removal by instance id alone (the admin API).
  auto res = leave("g", {{"", "instance-1", std::nullopt}});
  EXPECT_EQ(res.members[0].error, ErrorCode::none);
  EXPECT_EQ(snap("g").state, GroupState::empty);
  res = leave("g", {{"", "instance-1", std::nullopt}});
  EXPECT_EQ(res.members[0].error, ErrorCode::unknown_member_id);
}

TEST_F(CoordinatorTest, StaticMemberWithChangedProtocolsRebalances) {
  open();
  JoinRequest r = join_req("g", "", {{"roundrobin", {}}, {"range", {}}});
  r.group_instance_id = "i";
  Formed f = form("g", 1, r);
  EXPECT_EQ(snap("g").protocol, "roundrobin");
  // It comes back supporting range only: the group's protocol must change, so it rebalances
  // (and, being the only member, completes the join at once).
  r.protocols = {{"range", {}}};
  JoinResult k = join(r);
  ASSERT_EQ(k.error, ErrorCode::none);
  EXPECT_EQ(k.generation, f.generation + 1);
  EXPECT_EQ(k.protocol_name, "range");
  EXPECT_EQ(snap("g").state, GroupState::completing_rebalance);
}

TEST_F(CoordinatorTest, HeartbeatAndSyncErrors) {
  open();
  Formed f = form("g", 1);
  const std::string m = f.members[0];
  EXPECT_EQ(heartbeat("g", m, f.generation + 1), ErrorCode::illegal_generation);
  EXPECT_EQ(heartbeat("g", "other", f.generation), ErrorCode::unknown_member_id);
  EXPECT_EQ(heartbeat("g", m, f.generation, "not-static"), ErrorCode::unknown_member_id);
  EXPECT_EQ(sync("g", m, f.generation + 1).error, ErrorCode::illegal_generation);
  EXPECT_EQ(sync("g", "other", f.generation).error, ErrorCode::unknown_member_id);
  EXPECT_EQ(sync("nope", m, f.generation).error, ErrorCode::unknown_member_id);
  SyncRequest s;
  s.group_id = "g";
  s.member_id = m;
  s.generation = f.generation;
  s.protocol_name = "roundrobin";
  Slot<SyncResult> out;
  coord->sync_group(s, out.cb());
  EXPECT_EQ(wait(out).error, ErrorCode::inconsistent_group_protocol);
}

TEST_F(CoordinatorTest, FollowerRejoiningWithSameMetadataGetsTheCurrentGeneration) {
  open();
  Formed f = form("g", 2);
  const std::string follower = f.members[0] == f.leader ? f.members[1] : f.members[0];
  JoinResult j = join(join_req("g", follower));
  EXPECT_EQ(j.error, ErrorCode::none);
  EXPECT_EQ(j.generation, f.generation);
  EXPECT_TRUE(j.members.empty());
  EXPECT_EQ(snap("g").state, GroupState::stable);
  // The leader rejoining forces a rebalance (it may know of changes the metadata does not show).
  auto lj = join_async(join_req("g", f.leader));
  reactor->run_once(0);
  EXPECT_EQ(snap("g").state, GroupState::preparing_rebalance);
  EXPECT_EQ(join(join_req("g", follower)).generation, f.generation + 1);
  EXPECT_EQ(wait(lj).generation, f.generation + 1);
}

TEST_F(CoordinatorTest, ShutdownAnswersParkedRequests) {
  open();
  Formed f = form("g", 1);
  auto b = join_async(join_req("g"));  // parked until the member rejoins
  reactor->run_once(0);
  ASSERT_FALSE(b.ready());
  coord->shutdown();
  ASSERT_TRUE(b.ready());
  EXPECT_EQ(b->error, ErrorCode::not_coordinator);
  EXPECT_EQ(heartbeat("g", f.members[0], f.generation), ErrorCode::coordinator_not_available);
  EXPECT_EQ(join(join_req("h")).error, ErrorCode::coordinator_not_available);
}

TEST_F(CoordinatorTest, ListAndDescribeGroups) {
  open();
  Formed f = form("stable-group", 1);
  ASSERT_EQ(simple_commit("simple-group", {{"t1", 0, 5}})[0], ErrorCode::none);
  auto p = join_async(join_req("stable-group"));  // a second member: preparing

  Slot<ListResult> all;
  coord->list_groups({}, all.cb());
  ASSERT_EQ(wait(all).error, ErrorCode::none);
  ASSERT_EQ(all->groups.size(), 2u);
  EXPECT_EQ(all->groups[0].group_id, "simple-group");
  EXPECT_EQ(all->groups[0].state, "Empty");
  EXPECT_EQ(all->groups[0].protocol_type, "");
  EXPECT_EQ(all->groups[1].group_id, "stable-group");
  EXPECT_EQ(all->groups[1].state, "PreparingRebalance");
  EXPECT_EQ(all->groups[1].protocol_type, "consumer");
  EXPECT_EQ(all->groups[1].type, "classic");

  Slot<ListResult> empty_only;
  coord->list_groups({{"empty"}, {}}, empty_only.cb());  // any case
  ASSERT_EQ(wait(empty_only).groups.size(), 1u);
  EXPECT_EQ(empty_only->groups[0].group_id, "simple-group");
  Slot<ListResult> consumer_type;
  coord->list_groups({{}, {"consumer"}}, consumer_type.cb());
  EXPECT_TRUE(wait(consumer_type).groups.empty());

  Slot<std::vector<DescribedGroup>> d;
  coord->describe_groups({"stable-group", "nope", ""}, d.cb());
  auto groups = wait(d);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].state, "PreparingRebalance");
  EXPECT_EQ(groups[0].protocol, "");  // only while Stable
  ASSERT_EQ(groups[0].members.size(), 2u);
  EXPECT_TRUE(groups[0].members[0].metadata.empty());
  EXPECT_EQ(groups[1].error, ErrorCode::group_id_not_found);
  EXPECT_EQ(groups[1].state, "Dead");
  EXPECT_EQ(groups[2].error, ErrorCode::invalid_group_id);

  EXPECT_EQ(join(join_req("stable-group", f.members[0])).error, ErrorCode::none);
  const auto gen = snap("stable-group").generation;
  auto other = wait(p).member_id;
  auto so = sync_async("stable-group", other, gen);
  sync("stable-group", f.members[0], gen, {{f.members[0], bytes("A")}, {other, bytes("B")}});
  wait(so);
  Slot<std::vector<DescribedGroup>> d2;
  coord->describe_groups({"stable-group"}, d2.cb());
  auto g = wait(d2)[0];
  EXPECT_EQ(g.state, "Stable");
  EXPECT_EQ(g.protocol, "range");
  ASSERT_EQ(g.members.size(), 2u);
  EXPECT_EQ(g.members[0].member_id, f.members[0]);
  EXPECT_EQ(g.members[0].client_host, "/127.0.0.1");
  EXPECT_EQ(g.members[0].metadata, subscription({"t1"}));
  EXPECT_EQ(g.members[0].assignment, bytes("A"));
  EXPECT_EQ(g.members[1].assignment, bytes("B"));
}

TEST_F(CoordinatorTest, InitialRebalanceWaitsForMembersJoiningTogether) {
  opts.initial_rebalance_delay_ms = 50;
  open();
  // Both join before the delay can run out (the reactor has not turned): one generation.
  auto a = join_async(join_req("g"));
  auto b = join_async(join_req("g"));
  auto c = join_async(join_req("g"));
  EXPECT_EQ(wait(a).generation, 1);
  EXPECT_EQ(wait(b).generation, 1);
  EXPECT_EQ(wait(c).generation, 1);
  EXPECT_EQ(a->members.size(), 3u);
  EXPECT_EQ(coord->stats().rebalances, 1u);
}

}  // namespace
}  // namespace samsa::coordinator
