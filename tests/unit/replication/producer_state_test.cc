// Idempotent producers' state: the sequence and epoch rules of KIP-98/KIP-360 as Kafka 4 applies
// them, duplicates among the last five batches, expiry, eviction, and snapshot round trips.
#include "replication/producer_state.h"

#include <gtest/gtest.h>

namespace samsa::replication {
namespace {

io::BatchInfo batch(std::int64_t pid, std::int16_t epoch, std::int32_t first_seq, int records,
                    std::int64_t ts = 1000) {
  io::BatchInfo b{};
  b.producer_id = pid;
  b.producer_epoch = epoch;
  b.base_sequence = first_seq;
  b.record_count = records;
  b.last_offset_delta = records - 1;
  b.max_timestamp = ts;
  return b;
}

// Appends b at the next offsets and returns its first offset.
struct Table {
  ProducerStateTable t;
  std::int64_t next = 0;
  std::int64_t append(const io::BatchInfo& b, std::int64_t ts = 1000) {
    const std::int64_t first = next;
    t.update(b, first, first + b.last_offset_delta, ts);
    next += b.record_count;
    return first;
  }
  ProducerVerdict verdict(const io::BatchInfo& b) const { return t.check(b).verdict; }
};

TEST(ProducerState, UnknownProducerIsAcceptedAtAnySequence) {
  Table s;
  EXPECT_EQ(s.verdict(batch(7, 0, 0, 3)), ProducerVerdict::append);
  EXPECT_EQ(s.verdict(batch(7, 0, 1234, 3)), ProducerVerdict::append);
  EXPECT_EQ(s.verdict(batch(7, 5, 99, 1)), ProducerVerdict::append);
}

TEST(ProducerState, NonIdempotentBatchesAreNeverChecked) {
  Table s;
  s.append(batch(-1, -1, -1, 5));
  EXPECT_EQ(s.t.size(), 0u);
  EXPECT_EQ(s.verdict(batch(-1, -1, -1, 5)), ProducerVerdict::append);
}

TEST(ProducerState, InSequenceBatchesAppendAndAGapIsOutOfOrder) {
  Table s;
  s.append(batch(7, 0, 0, 3));
  EXPECT_EQ(s.verdict(batch(7, 0, 3, 2)), ProducerVerdict::append);
  auto gap = s.t.check(batch(7, 0, 4, 2));
  EXPECT_EQ(gap.verdict, ProducerVerdict::out_of_order);
  EXPECT_NE(gap.message.find("4 (incoming seq. number), 2 (current end sequence number)"),
            std::string::npos)
      << gap.message;
  EXPECT_EQ(s.verdict(batch(7, 0, 2, 2)), ProducerVerdict::out_of_order);  // overlaps
}

TEST(ProducerState, EachOfTheLastFiveBatchesIsADuplicateWithItsOffsets) {
  Table s;
  std::vector<std::int64_t> firsts;
  for (int i = 0; i < 7; ++i)
    firsts.push_back(s.append(batch(7, 2, i * 10, 10)));
  for (int i = 2; i < 7; ++i) {
    auto c = s.t.check(batch(7, 2, i * 10, 10));
    ASSERT_EQ(c.verdict, ProducerVerdict::duplicate) << "batch " << i;
    EXPECT_EQ(c.duplicate.first_offset, firsts[static_cast<std::size_t>(i)]);
    EXPECT_EQ(c.duplicate.last_offset, firsts[static_cast<std::size_t>(i)] + 9);
  }
  // Older than the five remembered: no longer recognised, and behind the sequence.
  EXPECT_EQ(s.verdict(batch(7, 2, 10, 10)), ProducerVerdict::out_of_order);
  // Same first sequence, different last: not a duplicate.
  EXPECT_EQ(s.verdict(batch(7, 2, 60, 5)), ProducerVerdict::out_of_order);
  // A duplicate must carry the same epoch.
  EXPECT_EQ(s.verdict(batch(7, 3, 60, 10)), ProducerVerdict::out_of_order);
}

TEST(ProducerState, EpochRules) {
  Table s;
  s.append(batch(7, 4, 0, 5));
  auto stale = s.t.check(batch(7, 3, 5, 1));
  EXPECT_EQ(stale.verdict, ProducerVerdict::invalid_epoch);
  EXPECT_NE(stale.message.find("smaller than the last seen epoch 4"), std::string::npos);
  EXPECT_EQ(s.verdict(batch(7, 5, 0, 1)), ProducerVerdict::append);        // new epoch at 0
  EXPECT_EQ(s.verdict(batch(7, 5, 3, 1)), ProducerVerdict::out_of_order);  // not at 0
  s.append(batch(7, 5, 0, 2));
  EXPECT_EQ(s.verdict(batch(7, 5, 2, 1)), ProducerVerdict::append);
  EXPECT_EQ(s.verdict(batch(7, 4, 5, 1)), ProducerVerdict::invalid_epoch);
  // The old epoch's batches are gone: its sequences are no duplicates any more.
  EXPECT_EQ(s.verdict(batch(7, 5, 0, 5)), ProducerVerdict::out_of_order);
}

TEST(ProducerState, SequencesWrapAtInt32Max) {
  Table s;
  s.append(batch(7, 0, INT32_MAX - 1, 2));  // sequences MAX-1, MAX
  EXPECT_EQ(s.verdict(batch(7, 0, 0, 1)), ProducerVerdict::append);
  s.append(batch(7, 0, INT32_MAX, 3));  // MAX, 0, 1
  EXPECT_EQ(s.t.find(7)->last_seq(), 1);
  EXPECT_EQ(s.verdict(batch(7, 0, 2, 1)), ProducerVerdict::append);
  EXPECT_EQ(s.verdict(batch(7, 0, INT32_MAX, 3)), ProducerVerdict::duplicate);
}

TEST(ProducerState, ExpiryAndEviction) {
  Table s;
  s.append(batch(1, 0, 0, 10), 1'000);
  s.append(batch(2, 0, 0, 10), 50'000);
  EXPECT_EQ(s.t.expire(60'000, 30'000), 1u);
  EXPECT_EQ(s.t.find(1), nullptr);
  ASSERT_NE(s.t.find(2), nullptr);
  // Once forgotten, the producer is new again: any sequence.
  EXPECT_EQ(s.verdict(batch(1, 0, 777, 1)), ProducerVerdict::append);
  // Batches wholly below the log start are dropped; a producer left without any goes.
  s.append(batch(2, 0, 10, 10));  // offsets 20..29
  s.t.evict_below(20);            // its first batch held 10..19
  ASSERT_NE(s.t.find(2), nullptr);
  EXPECT_EQ(s.t.find(2)->count, 1u);
  s.t.evict_below(30);
  EXPECT_EQ(s.t.find(2), nullptr);
}

TEST(ProducerState, SnapshotRoundTripKeepsEveryRule) {
  Table s;
  for (int i = 0; i < 6; ++i)
    s.append(batch(7, 1, i * 4, 4));
  s.append(batch(8, 0, 100, 1));
  ProducerStateTable back;
  back.load(s.t.snapshot());
  for (const auto& b :
       {batch(7, 1, 8, 4), batch(7, 1, 20, 4), batch(7, 1, 24, 1), batch(7, 1, 26, 1),
        batch(7, 0, 24, 1), batch(8, 0, 100, 1), batch(8, 0, 101, 1), batch(8, 0, 105, 1)}) {
    auto a = s.t.check(b);
    auto c = back.check(b);
    EXPECT_EQ(a.verdict, c.verdict) << b.producer_id << " " << b.base_sequence;
    EXPECT_EQ(a.duplicate.first_offset, c.duplicate.first_offset);
    EXPECT_EQ(a.duplicate.last_offset, c.duplicate.last_offset);
  }
  // Kafka reads the same file keeping the last entry per producer: the newest batch is last.
  auto entries = s.t.snapshot();
  std::int64_t last7 = -1;
  for (const auto& e : entries)
    if (e.producer_id == 7) last7 = e.last_offset;
  EXPECT_EQ(last7, s.t.find(7)->last_offset());
}

}  // namespace
}  // namespace samsa::replication
