// Committed offsets and what the coordinator writes to __consumer_offsets: commit/fetch rules,
// acknowledgement only once durable, the records on disk in Kafka's format, replay after a
// restart (last write wins, tombstones delete), group and offset deletion, expiry, and storage
// failures. The partitions are real io::Logs in a temp dir.
#include <gtest/gtest.h>

#include "base/clock.h"
#include "coordinator/coordinator.h"
#include "io/compaction.h"
#include "io/record_batch.h"
#include "tests/support/coordinator_testing.h"
#include "tests/support/io_testing.h"

namespace samsa::coordinator {
namespace {

using kafka::ErrorCode;
using testing::bytes;
using testing::Slot;
using testing::subscription;

struct StoredRecord {
  Bytes key;
  std::optional<Bytes> value;
};

// Every record of a partition's log, in order.
std::vector<StoredRecord> stored(replication::Partition& p) {
  std::vector<StoredRecord> out;
  auto rr = p.log().read(p.log_start_offset(), 64u << 20, p.high_watermark(), true);
  if (!rr) return out;
  const std::vector<std::byte> all = io::testing::read_bytes(*rr);
  std::span<const std::byte> rest(all);
  while (rest.size() >= io::batch::kHeaderSize) {
    const io::BatchInfo info = io::batch::parse_header(rest.data());
    const auto batch = rest.first(static_cast<std::size_t>(info.length));
    std::vector<std::byte> storage;
    auto recs = io::batch::records_of(batch, storage);
    if (!recs) break;
    io::batch::RecordReader reader(*recs, info.record_count);
    for (;;) {
      auto r = reader.next();
      if (!r || !*r) break;
      StoredRecord s;
      if ((*r)->key) s.key.assign((*r)->key->begin(), (*r)->key->end());
      if ((*r)->value) s.value = Bytes((*r)->value->begin(), (*r)->value->end());
      out.push_back(std::move(s));
    }
    rest = rest.subspan(batch.size());
  }
  return out;
}

class OffsetsTest : public ::testing::Test,
                    protected io::testing::TempDir,
                    public testing::Harness {
 protected:
  OffsetsTest() : Harness(path()) {}
  void SetUp() override { ASSERT_TRUE(reactor); }
  void TearDown() override {
    EXPECT_FALSE(timed_out) << "a request was never answered";
    stop();
  }
  void open(bool start_now = true) { ASSERT_TRUE(Harness::open(start_now)); }
  void restart() { ASSERT_TRUE(Harness::restart()); }

  std::vector<ErrorCode> delete_offsets(const std::string& group,
                                        std::vector<std::pair<std::string, std::int32_t>> parts,
                                        ErrorCode* group_error = nullptr) {
    Slot<OffsetDeleteResult> s;
    coord->delete_offsets({group, std::move(parts)}, s.cb());
    auto r = wait(s);
    if (group_error) *group_error = r.error;
    return r.partitions;
  }
  std::vector<ErrorCode> delete_groups(std::vector<std::string> groups) {
    Slot<std::vector<DeleteGroupResult>> s;
    coord->delete_groups(std::move(groups), s.cb());
    std::vector<ErrorCode> out;
    for (auto& r : wait(s))
      out.push_back(r.error);
    return out;
  }
  replication::Partition& partition_of(const std::string& group) {
    return *logs->partition(coord->partition_of(group));
  }
};

TEST_F(OffsetsTest, SimpleCommitThenFetch) {
  open();
  auto res = simple_commit("g", {{"t1", 0, 10, -1, "meta"}, {"t1", 1, 20}, {"t2", 0, 5, 3}});
  EXPECT_EQ(res, (CommitResult{ErrorCode::none, ErrorCode::none, ErrorCode::none}));
  auto f = fetch("g", std::vector<FetchTopic>{{"t1", {0, 1, 7}}, {"t2", {0}}});
  ASSERT_EQ(f.error, ErrorCode::none);
  ASSERT_EQ(f.offsets.size(), 4u);
  EXPECT_EQ(f.offsets[0].offset, 10);
  EXPECT_EQ(f.offsets[0].metadata, "meta");
  EXPECT_EQ(f.offsets[1].offset, 20);
  EXPECT_EQ(f.offsets[2].offset, -1);  // nothing committed: -1, no error
  EXPECT_EQ(f.offsets[2].error, ErrorCode::none);
  EXPECT_EQ(f.offsets[3].offset, 5);
  EXPECT_EQ(f.offsets[3].leader_epoch, 3);
  EXPECT_EQ(fetch("g").offsets.size(), 3u);  // every committed offset
  EXPECT_TRUE(fetch("unknown").offsets.empty());
  EXPECT_EQ(committed("unknown", "t1", 0), -1);
  EXPECT_EQ(fetch("").error, ErrorCode::invalid_group_id);
  EXPECT_EQ(simple_commit("", {{"t1", 0, 1}})[0], ErrorCode::invalid_group_id);

  // The last commit wins; the group that only commits is an Empty group without protocol.
  simple_commit("g", {{"t1", 0, 11}});
  EXPECT_EQ(committed("g", "t1", 0), 11);
  EXPECT_EQ(snap("g").state, GroupState::empty);
  EXPECT_EQ(snap("g").protocol_type, "");
}

TEST_F(OffsetsTest, CommitIsAcknowledgedOnlyOnceDurable) {
  open();
  replication::Partition& p = partition_of("g");
  const std::int64_t before = p.log().durable_end_offset();
  CommitRequest r;
  r.group_id = "g";
  r.partitions = {{"t1", 0, 99}};
  std::int64_t durable_at_ack = -1;
  Slot<CommitResult> s;
  coord->commit_offsets(r, [&, cb = s.cb()](CommitResult res) mutable {
    durable_at_ack = p.log().durable_end_offset();
    cb(std::move(res));
  });
  EXPECT_FALSE(s.ready());  // nothing is acknowledged before the write and its fsync
  EXPECT_EQ(wait(s)[0], ErrorCode::none);
  EXPECT_EQ(durable_at_ack, before + 1);
  EXPECT_EQ(p.log().stats().fdatasyncs, 1u);
}

TEST_F(OffsetsTest, MemberCommitsAreCheckedAgainstTheGroup) {
  open();
  Formed f = form("g", 2);
  ASSERT_TRUE(f.ok);
  CommitRequest r;
  r.group_id = "g";
  r.generation = f.generation;
  r.member_id = f.members[0];
  r.partitions = {{"t1", 0, 7}};
  EXPECT_EQ(commit(r)[0], ErrorCode::none);
  EXPECT_EQ(committed("g", "t1", 0), 7);

  CommitRequest bad = r;
  bad.generation = f.generation - 1;
  EXPECT_EQ(commit(bad)[0], ErrorCode::illegal_generation);
  bad = r;
  bad.member_id = "stranger";
  EXPECT_EQ(commit(bad)[0], ErrorCode::unknown_member_id);
  bad = r;
  bad.group_instance_id = "not-static";
  EXPECT_EQ(commit(bad)[0], ErrorCode::unknown_member_id);
  bad = r;
  bad.generation = -1;
  bad.member_id = "";  // a group-less commit into a group with members
  EXPECT_EQ(commit(bad)[0], ErrorCode::unknown_member_id);
  bad = r;
  bad.generation = -1;  // a member id without the generation
  EXPECT_EQ(commit(bad)[0], ErrorCode::illegal_generation);

  // A member commit to a group that does not exist.
  bad = r;
  bad.group_id = "other";
  EXPECT_EQ(commit(bad)[0], ErrorCode::illegal_generation);
  bad.group_id_not_found_for_unknown_group = true;  // OffsetCommit v9+
  EXPECT_EQ(commit(bad)[0], ErrorCode::group_id_not_found);
  EXPECT_FALSE(coord->snapshot("other"));
  EXPECT_EQ(committed("g", "t1", 0), 7);
}

TEST_F(OffsetsTest, OversizedMetadataIsRefusedPerPartition) {
  opts.max_metadata_bytes = 8;
  open();
  auto res = simple_commit("g", {{"t", 0, 1, -1, "short"}, {"t", 1, 1, -1, "far too long"}});
  EXPECT_EQ(res, (CommitResult{ErrorCode::none, ErrorCode::offset_metadata_too_large}));
  EXPECT_EQ(committed("g", "t", 0), 1);
  EXPECT_EQ(committed("g", "t", 1), -1);
}

TEST_F(OffsetsTest, RecordsOnDiskAreKafkasFormat) {
  open();
  ASSERT_EQ(simple_commit("g", {{"t1", 0, 42, 5, "md"}})[0], ErrorCode::none);
  auto recs = stored(partition_of("g"));
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].key, encode_key(OffsetKey{"g", "t1", 0}));
  ASSERT_TRUE(recs[0].value);
  EXPECT_EQ((*recs[0].value)[1], std::byte{3});  // OffsetCommitValue version 3
  auto v = decode_offset_value(*recs[0].value);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->offset, 42);
  EXPECT_EQ(v->leader_epoch, 5);
  EXPECT_EQ(v->metadata, "md");
  EXPECT_GT(v->commit_timestamp, 0);
  // Only the group's own partition holds it.
  for (std::int32_t p = 0; p < kPartitions; ++p)
    if (p != coord->partition_of("g")) {
      EXPECT_TRUE(stored(*logs->partition(p)).empty());
    }

  Formed f = form("h", 2);
  auto hrecs = stored(partition_of("h"));
  ASSERT_FALSE(hrecs.empty());
  EXPECT_EQ(hrecs.back().key, encode_key(GroupKey{"h"}));
  ASSERT_TRUE(hrecs.back().value);
  auto gv = decode_group_value(*hrecs.back().value);
  ASSERT_TRUE(gv.has_value()) << gv.error();
  EXPECT_EQ((*hrecs.back().value)[1], std::byte{3});  // GroupMetadataValue version 3
  EXPECT_EQ(gv->protocol_type, "consumer");
  EXPECT_EQ(gv->generation, f.generation);
  EXPECT_EQ(gv->protocol, "range");
  EXPECT_EQ(gv->leader, f.leader);
  ASSERT_EQ(gv->members.size(), 2u);
  EXPECT_EQ(gv->members[0].member_id, f.members[0]);
  EXPECT_EQ(gv->members[0].subscription, subscription({"t1"}));
  EXPECT_EQ(gv->members[0].assignment, bytes("a0"));
  EXPECT_EQ(gv->members[1].assignment, bytes("a1"));
  EXPECT_EQ(gv->members[0].client_host, "/127.0.0.1");

  // Deleting writes tombstones (null values) for the offsets and the group.
  leave("h",
        {{f.members[0], std::nullopt, std::nullopt}, {f.members[1], std::nullopt, std::nullopt}});
  simple_commit("h", {{"t9", 3, 1}});
  EXPECT_EQ(delete_groups({"h"}), std::vector<ErrorCode>{ErrorCode::none});
  hrecs = stored(partition_of("h"));
  ASSERT_GE(hrecs.size(), 2u);
  EXPECT_EQ(hrecs[hrecs.size() - 2].key, encode_key(OffsetKey{"h", "t9", 3}));
  EXPECT_FALSE(hrecs[hrecs.size() - 2].value);
  EXPECT_EQ(hrecs.back().key, encode_key(GroupKey{"h"}));
  EXPECT_FALSE(hrecs.back().value);
}

TEST_F(OffsetsTest, ReplayRestoresOffsetsAndGroups) {
  open();
  Formed f = form("g", 2);
  ASSERT_TRUE(f.ok);
  CommitRequest r;
  r.group_id = "g";
  r.generation = f.generation;
  r.member_id = f.members[1];
  r.partitions = {{"t1", 0, 100}, {"t1", 1, 200}};
  ASSERT_EQ(commit(r), (CommitResult{ErrorCode::none, ErrorCode::none}));
  r.partitions = {{"t1", 0, 150}};  // overwrites
  ASSERT_EQ(commit(r)[0], ErrorCode::none);
  ASSERT_EQ(simple_commit("simple", {{"t2", 4, 44, -1, "x"}})[0], ErrorCode::none);

  restart();
  EXPECT_EQ(committed("g", "t1", 0), 150);
  EXPECT_EQ(committed("g", "t1", 1), 200);
  auto s = fetch("simple", std::vector<FetchTopic>{{"t2", {4}}});
  ASSERT_EQ(s.offsets.size(), 1u);
  EXPECT_EQ(s.offsets[0].offset, 44);
  EXPECT_EQ(s.offsets[0].metadata, "x");

  // The group comes back Stable, as it was written: same generation, members, assignment.
  auto g = snap("g");
  EXPECT_EQ(g.state, GroupState::stable);
  EXPECT_EQ(g.generation, f.generation);
  EXPECT_EQ(g.members, f.members);
  EXPECT_EQ(g.leader, f.leader);
  EXPECT_EQ(heartbeat("g", f.members[0], f.generation), ErrorCode::none);
  EXPECT_EQ(sync("g", f.members[1], f.generation).assignment, bytes("a1"));
  // And a newcomer rebalances it as usual.
  auto c = join_async(join_req("g"));
  auto m0 = join_async(join_req("g", f.members[0]));
  auto m1 = join_async(join_req("g", f.members[1]));
  EXPECT_EQ(wait(m0).generation, f.generation + 1);
  EXPECT_EQ(wait(m1).generation, f.generation + 1);
  EXPECT_EQ(wait(c).generation, f.generation + 1);
  EXPECT_EQ(m0->members.size(), 3u);
}

TEST_F(OffsetsTest, ReplayedMembersThatNeverHeartbeatExpire) {
  open();
  JoinRequest r = join_req("g");
  r.session_timeout_ms = 3000;
  Formed f = form("g", 1, r);
  ASSERT_TRUE(f.ok);
  restart();
  EXPECT_EQ(snap("g").state, GroupState::stable);
  ASSERT_TRUE(reactor->run_until([&] { return snap("g").state == GroupState::empty; }, kWait));
  EXPECT_EQ(snap("g").generation, f.generation + 1);
  restart();
  EXPECT_EQ(snap("g").state, GroupState::empty);
  EXPECT_EQ(snap("g").generation, f.generation + 1);
}

TEST_F(OffsetsTest, TombstonesDeleteOnReplay) {
  open();
  simple_commit("g", {{"t", 0, 1}, {"t", 1, 2}});
  EXPECT_EQ(delete_offsets("g", {{"t", 0}}), std::vector<ErrorCode>{ErrorCode::none});
  EXPECT_EQ(committed("g", "t", 0), -1);
  restart();
  EXPECT_EQ(committed("g", "t", 0), -1);
  EXPECT_EQ(committed("g", "t", 1), 2);

  EXPECT_EQ(delete_groups({"g"}), std::vector<ErrorCode>{ErrorCode::none});
  EXPECT_FALSE(coord->snapshot("g"));
  EXPECT_EQ(committed("g", "t", 1), -1);
  restart();
  EXPECT_FALSE(coord->snapshot("g"));
  EXPECT_EQ(committed("g", "t", 1), -1);
  // The name is free again.
  simple_commit("g", {{"t", 1, 3}});
  restart();
  EXPECT_EQ(committed("g", "t", 1), 3);
}

TEST_F(OffsetsTest, DeleteGroupsChecksEachGroup) {
  open();
  form("busy", 1);
  simple_commit("idle", {{"t", 0, 1}});
  EXPECT_EQ(delete_groups({"busy", "nope", "", "idle"}),
            (std::vector<ErrorCode>{ErrorCode::non_empty_group, ErrorCode::group_id_not_found,
                                    ErrorCode::invalid_group_id, ErrorCode::none}));
  EXPECT_TRUE(coord->snapshot("busy"));
  EXPECT_FALSE(coord->snapshot("idle"));
  Slot<std::vector<DescribedGroup>> d;
  coord->describe_groups({"idle"}, d.cb());
  EXPECT_EQ(wait(d)[0].error, ErrorCode::group_id_not_found);
}

TEST_F(OffsetsTest, OffsetDeleteRespectsSubscriptions) {
  open();
  Formed f = form("g", 1);  // subscribed to t1
  CommitRequest r;
  r.group_id = "g";
  r.generation = f.generation;
  r.member_id = f.members[0];
  r.partitions = {{"t1", 0, 5}, {"t2", 0, 6}};
  ASSERT_EQ(commit(r), (CommitResult{ErrorCode::none, ErrorCode::none}));
  EXPECT_EQ(delete_offsets("g", {{"t1", 0}, {"t2", 0}, {"t3", 0}}),
            (std::vector<ErrorCode>{ErrorCode::group_subscribed_to_topic, ErrorCode::none,
                                    ErrorCode::none}));
  EXPECT_EQ(committed("g", "t1", 0), 5);
  EXPECT_EQ(committed("g", "t2", 0), -1);

  ErrorCode ge;
  delete_offsets("nope", {{"t1", 0}}, &ge);
  EXPECT_EQ(ge, ErrorCode::group_id_not_found);
  // A non-consumer group with members cannot lose offsets at all.
  JoinRequest c = join_req("connect-group");
  c.protocol_type = "connect";
  form("connect-group", 1, c);
  delete_offsets("connect-group", {{"t1", 0}}, &ge);
  EXPECT_EQ(ge, ErrorCode::non_empty_group);
  // Once empty, anything goes.
  leave("g", {{f.members[0], std::nullopt, std::nullopt}});
  EXPECT_EQ(delete_offsets("g", {{"t1", 0}}), std::vector<ErrorCode>{ErrorCode::none});
  EXPECT_EQ(committed("g", "t1", 0), -1);
}

TEST_F(OffsetsTest, OffsetsExpireAfterTheRetention) {
  opts.offsets_retention_ms = 3600'000;
  open();
  const std::int64_t now = wall_ms();
  simple_commit("simple", {{"t", 0, 1}});
  CommitRequest x;
  x.group_id = "explicit";
  x.retention_time_ms = 100;  // OffsetCommit v2-4: its own expiry
  x.partitions = {{"t", 0, 2}};
  ASSERT_EQ(commit(x)[0], ErrorCode::none);
  Formed f = form("consumers", 1);  // subscribed to t1 only
  CommitRequest m;
  m.group_id = "consumers";
  m.generation = f.generation;
  m.member_id = f.members[0];
  m.partitions = {{"t1", 0, 3}, {"t2", 0, 4}};
  ASSERT_EQ(commit(m), (CommitResult{ErrorCode::none, ErrorCode::none}));

  // Before the retention: only the explicit expiry applies.
  coord->expire_offsets(now + 1000);
  ASSERT_TRUE(reactor->run_until([&] { return !coord->snapshot("explicit"); }, kWait));
  EXPECT_EQ(committed("simple", "t", 0), 1);
  EXPECT_EQ(committed("consumers", "t2", 0), 4);

  // After it: the simple group goes entirely; the stable consumer group keeps what it
  // subscribes to.
  coord->expire_offsets(now + 2 * 3600'000);
  ASSERT_TRUE(reactor->run_until([&] { return !coord->snapshot("simple"); }, kWait));
  ASSERT_TRUE(reactor->run_until([&] { return committed("consumers", "t2", 0) == -1; }, kWait));
  EXPECT_EQ(committed("consumers", "t1", 0), 3);
  EXPECT_EQ(snap("consumers").state, GroupState::stable);

  restart();
  EXPECT_FALSE(coord->snapshot("simple"));
  EXPECT_FALSE(coord->snapshot("explicit"));
  EXPECT_EQ(committed("consumers", "t1", 0), 3);
  EXPECT_EQ(committed("consumers", "t2", 0), -1);
}

// What time retention does to __consumer_offsets (until the log compacts it): everything
// written before some offset goes. delete_records is that cut, made at once.
// __consumer_offsets is compacted (as Kafka has it): the cleaner drops superseded commits and
// keeps every group's latest records however old, so a restart replays the same state.
TEST_F(OffsetsTest, CompactionKeepsTheLiveState) {
  open();
  for (std::size_t p = 0; p < logs->size(); ++p) {
    auto& log = logs->partition(static_cast<std::int32_t>(p))->log();
    io::LogConfig c = log.config();
    c.segment_bytes = 300;
    c.cleanup_compact = true;
    c.cleanup_delete = false;
    log.set_config(c);
  }
  ASSERT_EQ(simple_commit("s", {{"t2", 0, 7, -1, "m"}})[0], ErrorCode::none);
  Formed f = form("g", 2);
  for (std::int64_t o = 1; o <= 40; ++o) {
    CommitRequest r;
    r.group_id = "g";
    r.generation = f.generation;
    r.member_id = f.members[0];
    r.partitions = {{"t1", 0, o}, {"t1", 1, 100 + o}};
    ASSERT_EQ(commit(r), (CommitResult{ErrorCode::none, ErrorCode::none}));
  }
  ASSERT_TRUE(reactor->run_until([&] { return logs->idle(); }, kWait));
  const std::int32_t gp = coord->partition_of("g");
  auto& glog = logs->partition(gp)->log();
  const std::uint64_t before = glog.size_bytes();
  for (std::size_t p = 0; p < logs->size(); ++p) {
    auto& log = logs->partition(static_cast<std::int32_t>(p))->log();
    auto plan = log.plan_cleaning({.now_ms = wall_ms(), .force = true});
    if (!plan) continue;
    io::OffsetMap map(1 << 20);
    io::CleanerIo cio;
    auto res = io::clean_segments(*plan, map, cio);
    ASSERT_TRUE(res.has_value()) << res.error().detail;
    ASSERT_TRUE(log.commit_cleaning(*plan, *res).has_value());
  }
  EXPECT_LT(glog.size_bytes(), before / 3) << "40 commits of 2 offsets: most are superseded";
  restart();
  EXPECT_EQ(committed("g", "t1", 0), 40);
  EXPECT_EQ(committed("g", "t1", 1), 140);
  auto fs = fetch("s", std::vector<FetchTopic>{{"t2", {0}}});
  ASSERT_EQ(fs.offsets.size(), 1u);
  EXPECT_EQ(fs.offsets[0].offset, 7);
  EXPECT_EQ(fs.offsets[0].metadata, "m");
  EXPECT_EQ(snap("g").state, GroupState::stable);
  EXPECT_EQ(snap("g").generation, f.generation);
  EXPECT_EQ(snap("g").members, f.members);
}

TEST_F(OffsetsTest, StorageFailuresAreReported) {
  open();
  const std::int32_t p = coord->partition_of("g");
  logs->hide(p);
  EXPECT_EQ(simple_commit("g", {{"t", 0, 1}})[0], ErrorCode::not_coordinator);
  EXPECT_EQ(committed("g", "t", 0), -1);

  // The leader's assignment cannot be stored: everyone waiting hears it, the group rebalances.
  auto a = join_async(join_req("g"));
  auto b = join_async(join_req("g"));
  JoinResult ja = wait(a), jb = wait(b);
  auto sb = sync_async("g", jb.member_id, jb.generation);
  auto sa = sync("g", ja.member_id, ja.generation, {{ja.member_id, bytes("x")}});
  EXPECT_EQ(sa.error, ErrorCode::not_coordinator);
  EXPECT_EQ(wait(sb).error, ErrorCode::not_coordinator);
  EXPECT_EQ(snap("g").state, GroupState::preparing_rebalance);

  logs->hide(-1);
  EXPECT_EQ(simple_commit("other", {{"t", 0, 1}})[0], ErrorCode::none);
  auto ra = join_async(join_req("g", ja.member_id));
  auto rb = join_async(join_req("g", jb.member_id));
  EXPECT_EQ(wait(ra).error, ErrorCode::none);
  EXPECT_EQ(wait(rb).error, ErrorCode::none);
}

TEST_F(OffsetsTest, AFailedLoadIsRetried) {
  open();
  ASSERT_EQ(simple_commit("g", {{"t", 0, 77}})[0], ErrorCode::none);
  stop();
  open(false);
  logs->hide(partition_for("g", kPartitions));
  coord->start(kPartitions);
  ASSERT_TRUE(reactor->run_until(
      [&] { return fetch("g").error == ErrorCode::coordinator_not_available; }, kWait));
  EXPECT_FALSE(coord->loaded());
  logs->hide(-1);
  ASSERT_TRUE(reactor->run_until([&] { return coord->loaded(); }, kWait));
  EXPECT_EQ(committed("g", "t", 0), 77);
}

}  // namespace
}  // namespace samsa::coordinator
