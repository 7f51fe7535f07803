// replication::Partition on a real log: idempotent producers' duplicates and errors, and the
// producer state surviving clean restarts (snapshot at the log end) and crashes (snapshots at
// rolls plus the batches after them).
#include "replication/partition.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>

#include "base/bytes.h"
#include "io/producer_snapshot.h"
#include "io/record_batch.h"
#include "tests/support/io_testing.h"

namespace samsa::replication {
namespace {

using kafka::ErrorCode;

struct Op : io::AppendOp {
  std::vector<std::byte> bytes;
  int completions = 0;
  std::int64_t durable_at_done = -1;
  io::Log* log = nullptr;
  explicit Op(std::vector<std::byte> b, io::Log* l) : bytes(std::move(b)), log(l) {
    batch = bytes;
    durability = io::Durability::durable;
    done = [](io::AppendOp* self) {
      auto* o = static_cast<Op*>(self);
      ++o->completions;
      o->durable_at_done = o->log->durable_end_offset();
    };
  }
};

std::vector<std::byte> idem_batch(std::int64_t pid, std::int16_t epoch, std::int32_t seq,
                                  int records, char value = 'v') {
  std::vector<io::SimpleRecord> rs;
  for (int i = 0; i < records; ++i)
    rs.push_back({1000 + i, "k" + std::to_string(seq + i), std::string(32, value), {}});
  io::BatchBuilder::Options o;
  o.producer_id = pid;
  o.producer_epoch = epoch;
  o.base_sequence = seq;
  return io::build_batch(rs, o);
}

class PartitionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = io::Reactor::create({.name = "test"});
    ASSERT_TRUE(r.has_value());
    reactor = std::move(*r);
  }
  std::filesystem::path ldir() const { return dir / "t-0"; }
  std::unique_ptr<Partition> open(PartitionOptions po = {}, io::LogConfig cfg = {}) {
    auto l = io::Log::open(*reactor, ldir(), cfg, {});
    EXPECT_TRUE(l.has_value()) << l.error().detail;
    if (!l) return nullptr;
    return std::make_unique<Partition>(*reactor, "t", Uuid{}, 0, 0, std::move(*l), po);
  }
  // Appends and waits; returns the result or the error.
  std::expected<io::AppendResult, AppendError> append(Partition& p, std::vector<std::byte> b) {
    Op op(std::move(b), &p.log());
    auto r = p.append(&op);
    if (!r) return r;
    EXPECT_TRUE(reactor->run_until([&] { return op.completions == 1; }));
    EXPECT_FALSE(op.error.has_value());
    return op.result;
  }
  // The producer state after a clean restart, from a snapshot at the log end (`records` records
  // a batch: large batches make the active segment too big to replay) or from replaying a small
  // active segment (no snapshot written at close).
  void clean_restart_keeps_producers(int records, bool snapshot) {
    const std::int64_t end = 4 * records;
    {
      auto p = open();
      for (int i = 0; i < 4; ++i)
        ASSERT_TRUE(append(*p, idem_batch(9, 0, i * records, records)).has_value());
      ASSERT_EQ(p->log().active_segment_bytes() > io::Log::kRescannedActiveBytes, snapshot);
      ASSERT_TRUE(p->close().has_value());
    }
    EXPECT_EQ(std::filesystem::exists(io::producer_snapshot_path(ldir(), end)), snapshot);
    auto p = open();
    ASSERT_NE(p->producers().find(9), nullptr);
    EXPECT_EQ(p->producers().find(9)->count, 4u);
    auto dup = append(*p, idem_batch(9, 0, records, records));
    ASSERT_TRUE(dup.has_value());
    EXPECT_EQ(dup->base_offset, records);
    auto gap = append(*p, idem_batch(9, 0, static_cast<std::int32_t>(end) + 1, 1));
    ASSERT_FALSE(gap.has_value());
    EXPECT_EQ(gap.error().code, ErrorCode::out_of_order_sequence_number);
    EXPECT_TRUE(append(*p, idem_batch(9, 0, static_cast<std::int32_t>(end), 1)).has_value());
  }
  io::testing::TempDir dir;
  std::unique_ptr<io::Reactor> reactor;
};

TEST_F(PartitionTest, DuplicateGetsTheOriginalOffsetsAndIsNotStoredAgain) {
  auto p = open();
  ASSERT_EQ(append(*p, idem_batch(9, 0, 0, 5))->base_offset, 0);
  ASSERT_EQ(append(*p, idem_batch(9, 0, 5, 5))->base_offset, 5);
  auto dup = append(*p, idem_batch(9, 0, 0, 5));
  ASSERT_TRUE(dup.has_value());
  EXPECT_EQ(dup->base_offset, 0);
  EXPECT_EQ(dup->last_offset, 4);
  EXPECT_EQ(p->log().log_end_offset(), 10);
  ASSERT_EQ(append(*p, idem_batch(9, 0, 10, 1))->base_offset, 10);
}

TEST_F(PartitionTest, DuplicateAnswersOnlyOnceTheOriginalIsDurable) {
  auto p = open();
  Op first(idem_batch(9, 0, 0, 3), &p->log());
  Op retry(idem_batch(9, 0, 0, 3), &p->log());
  ASSERT_TRUE(p->append(&first).has_value());
  auto r = p->append(&retry);  // same loop turn: the original is not even written yet
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(retry.completions, 0);
  ASSERT_TRUE(reactor->run_until([&] { return first.completions && retry.completions; }));
  EXPECT_GE(retry.durable_at_done, 3);
  EXPECT_EQ(retry.result.base_offset, 0);
  EXPECT_EQ(p->log().log_end_offset(), 3);
}

// Issue 17: two producers given one producer id send batches with the same id, epoch and
// sequences. The second one's is not a retry of the first's: answering it as a duplicate would
// acknowledge records that are stored nowhere. It is refused (and counted); a real retry still
// gets the original offsets.
TEST_F(PartitionTest, ABatchRepeatingSequencesWithOtherContentsIsRefusedNotAcknowledged) {
  auto p = open();
  ASSERT_EQ(append(*p, idem_batch(9, 0, 0, 5))->base_offset, 0);
  ASSERT_EQ(append(*p, idem_batch(9, 0, 5, 5))->base_offset, 5);
  Op other(idem_batch(9, 0, 0, 5, 'w'), &p->log());
  auto r = p->append(&other);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::out_of_order_sequence_number);
  reactor->run_until([] { return false; }, 20'000'000);
  EXPECT_EQ(other.completions, 0);  // never answered as appended
  EXPECT_EQ(p->duplicate_mismatches(), 1u);
  EXPECT_EQ(p->log().log_end_offset(), 10);
  auto retry = append(*p, idem_batch(9, 0, 5, 5));
  ASSERT_TRUE(retry.has_value());
  EXPECT_EQ(retry->base_offset, 5);
  EXPECT_EQ(p->duplicate_mismatches(), 1u);
}

TEST_F(PartitionTest, TheContentsCheckHoldsAfterARestartFromASnapshot) {
  {
    auto p = open();
    for (int i = 0; i < 3; ++i)
      ASSERT_TRUE(append(*p, idem_batch(9, 0, i * 2, 2)).has_value());
    ASSERT_TRUE(p->close().has_value());
  }
  // The snapshot keeps no contents: the log's copy of the batch decides.
  auto p = open();
  auto other = append(*p, idem_batch(9, 0, 2, 2, 'w'));
  ASSERT_FALSE(other.has_value());
  EXPECT_EQ(other.error().code, ErrorCode::out_of_order_sequence_number);
  auto retry = append(*p, idem_batch(9, 0, 2, 2));
  ASSERT_TRUE(retry.has_value());
  EXPECT_EQ(retry->base_offset, 2);
  EXPECT_EQ(p->log().log_end_offset(), 6);
}

// A follower's copy of a LogAppendTime batch carries the leader's stamp (attributes and
// maxTimestamp, so another CRC); once the follower leads, the producer's retry of it is still
// recognised.
TEST_F(PartitionTest, ARetryOfALogAppendTimeBatchIsRecognisedOnAFollowerCopy) {
  io::LogConfig cfg;
  cfg.timestamp_type = io::TimestampType::log_append_time;
  auto leader = open({}, cfg);
  ASSERT_TRUE(append(*leader, idem_batch(9, 0, 0, 3)).has_value());
  auto stored = leader->log().read(0, 1 << 20, 3, true);
  ASSERT_TRUE(stored.has_value());
  ASSERT_EQ(stored->slices.size(), 1u);
  std::vector<std::byte> copy(stored->slices[0].length);
  ASSERT_EQ(::pread(stored->slices[0].file->fd, copy.data(), copy.size(),
                    static_cast<off_t>(stored->slices[0].position)),
            static_cast<ssize_t>(copy.size()));
  auto l = io::Log::open(*reactor, dir / "t-1", cfg, {});
  ASSERT_TRUE(l.has_value());
  Partition follower(*reactor, "t", Uuid{}, 1, 0, std::move(*l));
  Op rep(copy, &follower.log());
  ASSERT_TRUE(follower.append_replicated(&rep).has_value());
  ASSERT_TRUE(reactor->run_until([&] { return rep.completions == 1; }));
  auto retry = append(follower, idem_batch(9, 0, 0, 3));
  ASSERT_TRUE(retry.has_value());
  EXPECT_EQ(retry->base_offset, 0);
  auto other = append(follower, idem_batch(9, 0, 0, 3, 'w'));
  ASSERT_FALSE(other.has_value());
  EXPECT_EQ(follower.duplicate_mismatches(), 1u);
}

TEST_F(PartitionTest, SequenceAndEpochErrorsStoreNothing) {
  auto p = open();
  ASSERT_TRUE(append(*p, idem_batch(9, 2, 0, 2)).has_value());
  auto gap = append(*p, idem_batch(9, 2, 5, 1));
  ASSERT_FALSE(gap.has_value());
  EXPECT_EQ(gap.error().code, ErrorCode::out_of_order_sequence_number);
  auto stale = append(*p, idem_batch(9, 1, 2, 1));
  ASSERT_FALSE(stale.has_value());
  EXPECT_EQ(stale.error().code, ErrorCode::invalid_producer_epoch);
  EXPECT_EQ(p->log().log_end_offset(), 2);
  // A new epoch starts at 0; an unknown producer anywhere.
  EXPECT_TRUE(append(*p, idem_batch(9, 3, 0, 1)).has_value());
  EXPECT_TRUE(append(*p, idem_batch(10, 0, 500, 1)).has_value());
}

TEST_F(PartitionTest, CleanRestartLoadsTheSnapshotAtTheLogEnd) {
  clean_restart_keeps_producers(6000, true);
}

TEST_F(PartitionTest, CleanRestartReplaysASmallActiveSegmentInsteadOfASnapshot) {
  clean_restart_keeps_producers(2, false);
}

TEST_F(PartitionTest, CrashRestartReplaysTheBatchesAfterTheLastRollSnapshot) {
  io::LogConfig cfg;
  cfg.segment_bytes = 600;  // a roll every few batches: snapshots land between the batches
  {
    auto p = open({}, cfg);
    for (int i = 0; i < 12; ++i)
      ASSERT_TRUE(append(*p, idem_batch(9, 0, i * 2, 2)).has_value());
    EXPECT_GE(p->log().segment_count(), 3u);
    // No close(): the process dies here. (The log is idle, so dropping it is safe.)
  }
  auto snaps = io::list_producer_snapshots(ldir());
  ASSERT_FALSE(snaps.empty());
  EXPECT_LT(snaps.back(), 24);  // the newest is at the last roll, below the log end
  auto p = open({}, cfg);
  // All of the last five batches are recognised, whether before or after that snapshot.
  for (int i = 7; i < 12; ++i) {
    auto dup = append(*p, idem_batch(9, 0, i * 2, 2));
    ASSERT_TRUE(dup.has_value());
    EXPECT_EQ(dup->base_offset, i * 2) << "batch " << i;
  }
  EXPECT_EQ(p->log().log_end_offset(), 24);
  EXPECT_TRUE(append(*p, idem_batch(9, 0, 24, 1)).has_value());
}

TEST_F(PartitionTest, SnapshotsAboveTheLogEndAndDamagedOnesAreDiscarded) {
  {
    auto p = open();
    ASSERT_TRUE(append(*p, idem_batch(9, 0, 0, 3)).has_value());
  }
  // A snapshot a crash left behind for batches that never became durable, and a torn one.
  std::vector<io::ProducerSnapshotEntry> ghost = {{9, 0, 99, 900, 0, 1000, -1, -1}};
  ASSERT_TRUE(io::write_producer_snapshot(ldir(), 1000, ghost).has_value());
  std::ofstream(io::producer_snapshot_path(ldir(), 2)) << "torn";
  auto p = open();
  EXPECT_FALSE(std::filesystem::exists(io::producer_snapshot_path(ldir(), 1000)));
  EXPECT_FALSE(std::filesystem::exists(io::producer_snapshot_path(ldir(), 2)));
  auto dup = append(*p, idem_batch(9, 0, 0, 3));
  ASSERT_TRUE(dup.has_value());
  EXPECT_EQ(dup->base_offset, 0);
  EXPECT_EQ(p->log().log_end_offset(), 3);
}

TEST_F(PartitionTest, WithoutTheSequenceCheckRetriesAreStoredTwice) {
  PartitionOptions po;
  po.sequence_check = false;
  auto p = open(po);
  ASSERT_TRUE(append(*p, idem_batch(9, 0, 0, 3)).has_value());
  auto again = append(*p, idem_batch(9, 0, 0, 3));
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->base_offset, 3);
  EXPECT_EQ(p->log().log_end_offset(), 6);
}

}  // namespace
}  // namespace samsa::replication
