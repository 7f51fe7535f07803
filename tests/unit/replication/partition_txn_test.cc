// replication::Partition's transactions on a real log: the last stable offset, markers, the
// aborted-transaction index (.txnindex files) and read_committed reads, through clean
// restarts, crashes, followers' copies and retention; and the refusals Kafka gives.
#include <gtest/gtest.h>
#include <unistd.h>

#include "io/batch_builder.h"
#include "io/producer_snapshot.h"
#include "io/record_batch.h"
#include "io/txn_index.h"
#include "replication/partition.h"
#include "tests/support/io_testing.h"

namespace samsa::replication {
namespace {

using kafka::ErrorCode;

struct Op : io::AppendOp {
  std::vector<std::byte> bytes;
  int completions = 0;
  explicit Op(std::vector<std::byte> b) : bytes(std::move(b)) {
    batch = bytes;
    durability = io::Durability::durable;
    done = [](io::AppendOp* self) { ++static_cast<Op*>(self)->completions; };
  }
};

std::vector<std::byte> txn_batch(std::int64_t pid, std::int16_t epoch, std::int32_t seq,
                                 int records, bool transactional = true) {
  std::vector<io::SimpleRecord> rs;
  for (int i = 0; i < records; ++i)
    rs.push_back({1000 + i, "k" + std::to_string(seq + i), std::string(16, 'v'), {}});
  io::BatchBuilder::Options o;
  o.producer_id = pid;
  o.producer_epoch = epoch;
  o.base_sequence = seq;
  o.transactional = transactional;
  return io::build_batch(rs, o);
}

std::vector<std::byte> marker(std::int64_t pid, std::int16_t epoch, bool commit,
                              std::int32_t coordinator_epoch = 0) {
  return io::build_txn_marker(pid, epoch, commit, coordinator_epoch, 5000);
}

class PartitionTxnTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = io::Reactor::create({.name = "test"});
    ASSERT_TRUE(r.has_value());
    reactor = std::move(*r);
  }
  std::filesystem::path ldir(int i = 0) const { return dir / ("t-" + std::to_string(i)); }
  // Verification (KIP-890) off unless a test turns it on: its own test covers it.
  std::unique_ptr<Partition> open(io::LogConfig cfg = {}, int i = 0, bool verify = false) {
    auto l = io::Log::open(*reactor, ldir(i), cfg, {});
    EXPECT_TRUE(l.has_value()) << l.error().detail;
    if (!l) return nullptr;
    PartitionOptions po;
    po.txn_verification = verify;
    return std::make_unique<Partition>(*reactor, "t", Uuid{}, i, 0, std::move(*l), po);
  }
  std::expected<io::AppendResult, AppendError> append(Partition& p, std::vector<std::byte> b,
                                                      AppendOrigin origin = AppendOrigin::client,
                                                      std::uint64_t verification = 0) {
    Op op(std::move(b));
    auto r = p.append(&op, origin, verification);
    if (!r) return r;
    EXPECT_TRUE(reactor->run_until([&] { return op.completions == 1; }));
    EXPECT_FALSE(op.error.has_value());
    return op.result;
  }
  std::int64_t end_txn(Partition& p, std::int64_t pid, std::int16_t epoch, bool commit) {
    auto r = append(p, marker(pid, epoch, commit), AppendOrigin::marker);
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
    return r ? r->base_offset : -1;
  }
  ReadOutcome read_committed(Partition& p, std::int64_t from) {
    ReadArgs a;
    a.offset = from;
    a.max_bytes = 1 << 20;
    a.read_committed = true;
    ReadOutcome out;
    EXPECT_TRUE(p.read(a, out, nullptr));
    return out;
  }
  // The whole log's bytes, for a follower to copy.
  std::vector<std::byte> log_bytes(Partition& p) {
    auto rr = p.log().read(0, 1 << 20, p.log().log_end_offset(), true);
    EXPECT_TRUE(rr.has_value());
    std::vector<std::byte> out;
    for (const auto& s : rr->slices) {
      std::vector<std::byte> b(s.length);
      EXPECT_EQ(::pread(s.file->fd, b.data(), b.size(), static_cast<off_t>(s.position)),
                static_cast<ssize_t>(b.size()));
      out.insert(out.end(), b.begin(), b.end());
    }
    return out;
  }
  io::testing::TempDir dir;
  std::unique_ptr<io::Reactor> reactor;
};

TEST_F(PartitionTxnTest, TheLastStableOffsetWaitsForTheMarker) {
  auto p = open();
  ASSERT_TRUE(append(*p, txn_batch(-1, -1, -1, 2, false)).has_value());  // 0..1, plain
  ASSERT_EQ(append(*p, txn_batch(7, 0, 0, 3))->base_offset, 2);          // 2..4, open
  ASSERT_TRUE(append(*p, txn_batch(-1, -1, -1, 1, false)).has_value());  // 5
  EXPECT_EQ(p->high_watermark(), 6);
  EXPECT_EQ(p->last_stable_offset(), 2);
  EXPECT_EQ(p->txns().ongoing(), 1u);
  // read_committed stops below the open transaction; ListOffsets says the same.
  auto out = read_committed(*p, 0);
  ASSERT_FALSE(out.slices.empty());
  EXPECT_EQ(out.last_stable, 2);
  EXPECT_EQ(out.slices.back().last_offset, 1);
  EXPECT_EQ(p->list_offset(kLatestOffset, true, nullptr).offset, 2);
  EXPECT_EQ(p->list_offset(kLatestOffset, false, nullptr).offset, 6);
  EXPECT_EQ(end_txn(*p, 7, 0, true), 6);
  EXPECT_EQ(p->last_stable_offset(), 7);
  EXPECT_EQ(p->txns().ongoing(), 0u);
  EXPECT_TRUE(read_committed(*p, 0).aborted.empty());
  EXPECT_TRUE(io::list_txn_indexes(ldir()).empty());  // a commit indexes nothing
}

TEST_F(PartitionTxnTest, AnAbortIsIndexedAndReportedToReadCommittedReads) {
  auto p = open();
  ASSERT_TRUE(append(*p, txn_batch(7, 0, 0, 3)).has_value());  // 0..2
  ASSERT_TRUE(append(*p, txn_batch(8, 0, 0, 2)).has_value());  // 3..4, another producer
  ASSERT_TRUE(append(*p, txn_batch(7, 0, 3, 1)).has_value());  // 5
  EXPECT_EQ(end_txn(*p, 7, 0, false), 6);
  EXPECT_EQ(p->last_stable_offset(), 3);  // producer 8's transaction is still open
  EXPECT_EQ(end_txn(*p, 8, 0, true), 7);
  EXPECT_EQ(p->last_stable_offset(), 8);
  auto out = read_committed(*p, 0);
  ASSERT_EQ(out.aborted.size(), 1u);
  EXPECT_EQ(out.aborted[0], (io::AbortedTxn{7, 0, 6, 3}));
  // A read after the marker needs no entry; one ending before the first offset neither.
  EXPECT_TRUE(read_committed(*p, 7).aborted.empty());
  ASSERT_EQ(io::list_txn_indexes(ldir()), std::vector<std::int64_t>{0});
  auto file = io::read_txn_index(io::txn_index_path(ldir(), 0));
  ASSERT_TRUE(file.has_value());
  EXPECT_EQ(*file, out.aborted);
}

TEST_F(PartitionTxnTest, OpenAndAbortedTransactionsSurviveACleanRestart) {
  {
    auto p = open();
    ASSERT_TRUE(append(*p, txn_batch(7, 0, 0, 2)).has_value());
    end_txn(*p, 7, 0, false);                                    // aborted: 0..1, marker 2
    ASSERT_TRUE(append(*p, txn_batch(7, 0, 2, 2)).has_value());  // open at 3
    ASSERT_TRUE(p->close().has_value());
  }
  auto p = open();
  EXPECT_EQ(p->last_stable_offset(), 3);
  ASSERT_EQ(p->txns().ongoing(), 1u);
  EXPECT_EQ(p->producers().find(7)->current_txn_first_offset, 3);
  auto out = read_committed(*p, 0);
  ASSERT_EQ(out.aborted.size(), 1u);
  EXPECT_EQ(out.aborted[0].last_offset, 2);
  end_txn(*p, 7, 0, true);
  EXPECT_EQ(p->last_stable_offset(), p->high_watermark());
}

// A crash: no close, the snapshot is the last roll's; the log after it is replayed and the
// index entries it covers are rebuilt, once each.
TEST_F(PartitionTxnTest, ACrashRebuildsTheIndexFromTheLogWithoutDuplicates) {
  io::LogConfig cfg;
  cfg.segment_bytes = 400;
  std::vector<io::AbortedTxn> before;
  {
    auto p = open(cfg);
    for (int i = 0; i < 8; ++i) {
      ASSERT_TRUE(append(*p, txn_batch(7, 0, i * 2, 2)).has_value());
      end_txn(*p, 7, 0, i % 2 == 0);
    }
    ASSERT_TRUE(append(*p, txn_batch(7, 0, 16, 1)).has_value());  // left open
    EXPECT_GE(p->log().segment_count(), 3u);
    before = read_committed(*p, 0).aborted;
    ASSERT_EQ(before.size(), 4u);
  }
  ASSERT_FALSE(io::list_producer_snapshots(ldir()).empty());
  auto p = open(cfg);
  EXPECT_EQ(read_committed(*p, 0).aborted, before);
  EXPECT_EQ(p->txns().ongoing(), 1u);
  EXPECT_EQ(p->last_stable_offset(), p->log().log_end_offset() - 1);
  std::size_t on_disk = 0;
  for (std::int64_t base : io::list_txn_indexes(ldir()))
    on_disk += io::read_txn_index(io::txn_index_path(ldir(), base))->size();
  EXPECT_EQ(on_disk, before.size());
}

TEST_F(PartitionTxnTest, KafkasRefusals) {
  auto p = open();
  ASSERT_TRUE(append(*p, txn_batch(7, 3, 0, 2)).has_value());
  // A plain batch of a producer inside a transaction.
  auto plain = append(*p, txn_batch(7, 3, 2, 1, false));
  ASSERT_FALSE(plain.has_value());
  EXPECT_EQ(plain.error().code, ErrorCode::invalid_txn_state);
  // Control batches come only from the coordinator.
  auto forged = append(*p, marker(7, 3, true));
  ASSERT_FALSE(forged.has_value());
  EXPECT_EQ(forged.error().code, ErrorCode::invalid_record);
  // A marker of an older producer epoch; of an older coordinator epoch.
  ASSERT_TRUE(append(*p, marker(7, 3, false, 5), AppendOrigin::marker).has_value());
  auto stale = append(*p, marker(7, 2, true, 5), AppendOrigin::marker);
  ASSERT_FALSE(stale.has_value());
  EXPECT_EQ(stale.error().code, ErrorCode::invalid_producer_epoch);
  auto zombie = append(*p, marker(7, 3, true, 4), AppendOrigin::marker);
  ASSERT_FALSE(zombie.has_value());
  EXPECT_EQ(zombie.error().code, ErrorCode::transaction_coordinator_fenced);
  // A fenced producer's data.
  auto fenced = append(*p, txn_batch(7, 2, 0, 1));
  ASSERT_FALSE(fenced.has_value());
  EXPECT_EQ(fenced.error().code, ErrorCode::invalid_producer_epoch);
  EXPECT_EQ(p->log().log_end_offset(), 3);
}

// A follower copies the leader's bytes: its LSO and index are the leader's.
TEST_F(PartitionTxnTest, AFollowerCopyKnowsTheSameTransactions) {
  auto leader = open({}, 0);
  ASSERT_TRUE(append(*leader, txn_batch(7, 0, 0, 2)).has_value());
  end_txn(*leader, 7, 0, false);
  ASSERT_TRUE(append(*leader, txn_batch(8, 0, 0, 2)).has_value());
  auto follower = open({}, 1);
  Op rep(log_bytes(*leader));
  ASSERT_TRUE(follower->append_replicated(&rep).has_value());
  ASSERT_TRUE(reactor->run_until([&] { return rep.completions == 1; }));
  EXPECT_EQ(follower->last_stable_offset(), 3);
  EXPECT_EQ(read_committed(*follower, 0).aborted, read_committed(*leader, 0).aborted);
  EXPECT_EQ(io::list_txn_indexes(ldir(1)), std::vector<std::int64_t>{0});
}

TEST_F(PartitionTxnTest, RetentionDropsTheEntriesAndFilesBelowTheLogStart) {
  io::LogConfig cfg;
  cfg.segment_bytes = 300;
  auto p = open(cfg);
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(append(*p, txn_batch(7, 0, i * 2, 2)).has_value());
    end_txn(*p, 7, 0, false);
  }
  const auto files = io::list_txn_indexes(ldir());
  ASSERT_GE(files.size(), 2u);
  const auto all = read_committed(*p, 0).aborted;
  ASSERT_EQ(all.size(), 6u);
  ASSERT_TRUE(p->delete_records(files.back()).has_value());
  p->expire_producers(0);
  auto left = io::list_txn_indexes(ldir());
  EXPECT_LT(left.size(), files.size());
  for (const auto& e : read_committed(*p, p->log_start_offset()).aborted)
    EXPECT_GE(e.last_offset, p->log_start_offset());
  std::size_t kept = 0;
  for (const auto& e : all)
    kept += e.last_offset >= p->log_start_offset();
  EXPECT_LT(kept, all.size());
  EXPECT_EQ(p->txns().aborted(), kept);
}

// KIP-890: a transaction's first batch here needs the coordinator's word (a token), once; a
// marker voids a token given before it, so a late batch of an ended transaction is refused.
TEST_F(PartitionTxnTest, AFirstTransactionalBatchNeedsAVerification) {
  auto p = open({}, 0, true);
  const auto first = txn_batch(7, 0, 0, 1);
  EXPECT_TRUE(p->needs_verification(io::batch::parse_header(first.data())));
  auto unverified = append(*p, first);
  ASSERT_FALSE(unverified.has_value());
  EXPECT_EQ(unverified.error().code, ErrorCode::invalid_txn_state);
  // Pipelined batches of one transaction share the guard; a newer epoch replaces it.
  const std::uint64_t old_epoch = p->begin_verification(7, 0);
  EXPECT_EQ(p->begin_verification(7, 0), old_epoch);
  const std::uint64_t token = p->begin_verification(7, 1);
  EXPECT_NE(token, old_epoch);
  p->end_verification(7, token);
  EXPECT_FALSE(append(*p, txn_batch(7, 1, 0, 1), AppendOrigin::client, old_epoch).has_value());
  ASSERT_TRUE(append(*p, txn_batch(7, 1, 0, 1), AppendOrigin::client, token).has_value());
  // Open now: the next batches need nothing.
  EXPECT_FALSE(p->needs_verification(io::batch::parse_header(txn_batch(7, 1, 1, 1).data())));
  ASSERT_TRUE(append(*p, txn_batch(7, 1, 1, 1)).has_value());
  // While an answer is pending, later batches wait behind it (no overtaking).
  const std::uint64_t before_marker = p->begin_verification(7, 1);
  EXPECT_TRUE(p->needs_verification(io::batch::parse_header(txn_batch(7, 1, 2, 1).data())));
  // A token given before the marker is void after it.
  end_txn(*p, 7, 1, false);
  p->end_verification(7, before_marker);
  auto late = append(*p, txn_batch(7, 1, 2, 1), AppendOrigin::client, before_marker);
  ASSERT_FALSE(late.has_value());
  EXPECT_EQ(late.error().code, ErrorCode::invalid_txn_state);
  EXPECT_EQ(p->last_stable_offset(), p->high_watermark());
}

}  // namespace
}  // namespace samsa::replication
