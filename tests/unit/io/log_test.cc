// io::Log on real files: appends, segments and their index files, rolling, reads by offset and by
// timestamp, bad input.
#include "io/log.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "base/bytes.h"
#include "base/clock.h"
#include "io/compression.h"
#include "io/offload.h"
#include "io/record_batch.h"
#include "io/segment.h"
#include "tests/support/io_testing.h"

namespace samsa::io {
namespace {

using testing::OwnedAppend;

struct Batch {  // what the test appended, for a model of the log
  std::int64_t base, last;
  std::vector<std::byte> bytes;  // with the offset the log assigned
  std::vector<std::int64_t> timestamps;
};

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = Reactor::create({.name = "test"});
    ASSERT_TRUE(r.has_value());
    reactor = std::move(*r);
  }
  std::filesystem::path ldir() const { return dir / "t-0"; }
  std::unique_ptr<Log> open(LogConfig cfg = {}, OpenOptions o = {}) {
    auto l = Log::open(*reactor, ldir(), cfg, o);
    EXPECT_TRUE(l.has_value()) << l.error().detail;
    return l ? std::move(*l) : nullptr;
  }
  // Appends a batch of `records` records with timestamps ts, ts+step, ...
  Batch append(Log& log, int records, std::int64_t ts, std::size_t value = 16,
               std::int64_t step = 1) {
    std::vector<SimpleRecord> rs;
    Batch b;
    for (int i = 0; i < records; ++i) {
      rs.push_back({ts + i * step, "k" + std::to_string(i), std::string(value, 'v'), {}});
      b.timestamps.push_back(ts + i * step);
    }
    b.bytes = build_batch(rs);
    auto r = testing::append_sync(*reactor, log, b.bytes);
    EXPECT_TRUE(r.has_value()) << r.error().detail;
    b.base = r->base_offset;
    b.last = r->last_offset;
    store_be<std::int64_t>(b.bytes.data(), b.base);
    return b;
  }
  // Queues every batch in one loop turn (one group commit, split where segments roll or at
  // 1024 batches), then waits for all of them.
  std::vector<Batch> append_all(Log& log, std::vector<std::vector<SimpleRecord>> batches) {
    std::vector<std::unique_ptr<OwnedAppend>> ops;
    std::vector<Batch> out;
    for (auto& rs : batches) {
      Batch b;
      for (auto& r : rs)
        b.timestamps.push_back(r.timestamp);
      ops.push_back(std::make_unique<OwnedAppend>(build_batch(rs)));
      auto r = log.append(ops.back().get());
      EXPECT_TRUE(r.has_value()) << r.error().detail;
      b.base = r->base_offset;
      b.last = r->last_offset;
      b.bytes = ops.back()->bytes;  // already carries its offset
      out.push_back(std::move(b));
    }
    EXPECT_TRUE(reactor->run_until([&] {
      return std::all_of(ops.begin(), ops.end(), [](auto& o) { return o->completions == 1; });
    }));
    for (auto& o : ops)
      EXPECT_FALSE(o->error.has_value());
    return out;
  }
  static std::vector<SimpleRecord> records(int n, std::int64_t ts, std::size_t value = 16,
                                           std::int64_t step = 1) {
    std::vector<SimpleRecord> rs;
    for (int i = 0; i < n; ++i) {
      rs.push_back({ts + i * step, "k" + std::to_string(i), std::string(value, 'v'), {}});
    }
    return rs;
  }
  testing::TempDir dir;
  std::unique_ptr<Reactor> reactor;
};

std::vector<std::byte> concat(const std::vector<Batch>& bs, std::size_t from, std::size_t to) {
  std::vector<std::byte> out;
  for (std::size_t i = from; i < to; ++i) {
    out.insert(out.end(), bs[i].bytes.begin(), bs[i].bytes.end());
  }
  return out;
}

TEST_F(LogTest, AppendAssignsOffsetsAndReadsBackTheSameBytes) {
  auto log = open();
  std::vector<Batch> bs;
  bs.push_back(append(*log, 3, 1000));
  bs.push_back(append(*log, 1, 2000));
  bs.push_back(append(*log, 5, 3000));
  EXPECT_EQ(bs[0].base, 0);
  EXPECT_EQ(bs[0].last, 2);
  EXPECT_EQ(bs[1].base, 3);
  EXPECT_EQ(bs[2].base, 4);
  EXPECT_EQ(bs[2].last, 8);
  EXPECT_EQ(log->log_end_offset(), 9);
  EXPECT_EQ(log->written_end_offset(), 9);
  EXPECT_EQ(log->durable_end_offset(), 9);
  EXPECT_EQ(log->recovery_point(), 9);
  auto rr = log->read(0, 1 << 20, INT64_MAX);
  ASSERT_TRUE(rr.has_value());
  ASSERT_EQ(rr->slices.size(), 1u);
  EXPECT_EQ(rr->slices[0].first_offset, 0);
  EXPECT_EQ(rr->slices[0].last_offset, 8);
  EXPECT_EQ(rr->next_offset, 9);
  EXPECT_EQ(testing::read_bytes(*rr), concat(bs, 0, 3));
  // The file holds exactly the batches, each still valid (CRC untouched by the offset patch).
  auto file = testing::file_bytes(ldir() / "00000000000000000000.log");
  EXPECT_EQ(file, concat(bs, 0, 3));
  for (const auto& b : bs)
    EXPECT_TRUE(Log::validate_batch(b.bytes, 1 << 20).has_value());
}

TEST_F(LogTest, KafkaFileLayoutAndIndexEntriesAfterRoll) {
  LogConfig cfg;
  cfg.index_interval_bytes = 300;
  cfg.segment_bytes = 4000;
  auto log = open(cfg);
  EXPECT_TRUE(std::filesystem::exists(ldir() / "00000000000000000000.log"));
  // The active segment's index files are written when it is closed (none for a new segment).
  EXPECT_FALSE(std::filesystem::exists(ldir() / "00000000000000000000.index"));
  EXPECT_FALSE(std::filesystem::exists(ldir() / "00000000000000000000.timeindex"));
  std::vector<Batch> bs;
  for (int i = 0; i < 40; ++i)
    bs.push_back(append(*log, 2, 10000 + 100 * i, 60));
  ASSERT_GE(log->segment_count(), 3u);
  EXPECT_EQ(log->stats().rolls, log->segment_count() - 1);

  // Walk every closed segment: the index entries follow Kafka's rule and point at batch starts.
  std::int64_t seg_base = 0;
  std::size_t bi = 0;
  for (std::size_t s = 0; s + 1 < log->segment_count(); ++s) {
    auto name = detail::segment_name(seg_base);
    auto logf = testing::file_bytes(ldir() / (name + ".log"));
    auto idx = testing::file_bytes(ldir() / (name + ".index"));
    auto tidx = testing::file_bytes(ldir() / (name + ".timeindex"));
    ASSERT_LE(logf.size(), cfg.segment_bytes);
    // Expected entries from the batches in this segment.
    std::vector<std::byte> want_idx, want_tidx;
    std::uint64_t pos = 0, since = 0;
    std::int64_t max_ts = -1, max_off = -1, last_tidx_ts = -1;
    std::size_t first = bi;
    while (pos < logf.size()) {
      const Batch& b = bs[bi];
      std::int64_t bmax = b.timestamps.back();
      if (bmax > max_ts) max_ts = bmax, max_off = b.last;
      if (since > cfg.index_interval_bytes) {
        std::byte e[8];
        store_be<std::int32_t>(e, static_cast<std::int32_t>(b.last - seg_base));
        store_be<std::int32_t>(e + 4, static_cast<std::int32_t>(pos));
        want_idx.insert(want_idx.end(), e, e + 8);
        if (max_ts > last_tidx_ts) {
          std::byte t[12];
          store_be<std::int64_t>(t, max_ts);
          store_be<std::int32_t>(t + 8, static_cast<std::int32_t>(max_off - seg_base));
          want_tidx.insert(want_tidx.end(), t, t + 12);
          last_tidx_ts = max_ts;
        }
        since = 0;
      }
      since += b.bytes.size();
      pos += b.bytes.size();
      ++bi;
    }
    ASSERT_EQ(pos, logf.size());
    EXPECT_EQ(logf, concat(bs, first, bi));
    if (max_ts > last_tidx_ts) {  // the final entry a closed segment gets
      std::byte t[12];
      store_be<std::int64_t>(t, max_ts);
      store_be<std::int32_t>(t + 8, static_cast<std::int32_t>(max_off - seg_base));
      want_tidx.insert(want_tidx.end(), t, t + 12);
    }
    EXPECT_FALSE(want_idx.empty());
    EXPECT_EQ(idx, want_idx) << name;
    EXPECT_EQ(tidx, want_tidx) << name;
    seg_base = bs[bi].base;
    EXPECT_TRUE(std::filesystem::exists(ldir() / (detail::segment_name(seg_base) + ".log")));
  }
}

// Compares every read against a model of the log built from what was appended.
void check_reads(Log& log, const std::vector<Batch>& bs, std::mt19937_64& rng, int rounds) {
  std::int64_t leo = bs.back().last + 1;
  std::vector<std::size_t> seg_of(bs.size());
  {
    // Batches belong to the segment whose file holds them: recover it from the reads.
    std::size_t seg = 0;
    for (std::size_t i = 0; i < bs.size(); ++i) {
      auto rr = log.read(bs[i].base, 1, INT64_MAX, true);
      ASSERT_TRUE(rr.has_value()) << rr.error().detail;
      ASSERT_EQ(rr->slices.size(), 1u);
      if (i > 0 && rr->slices[0].position == 0) ++seg;
      seg_of[i] = seg;
    }
  }
  for (int round = 0; round < rounds; ++round) {
    std::int64_t offset = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(leo + 1));
    std::size_t max_bytes = rng() % 3 == 0 ? rng() % 200 : rng() % 20000;
    if (rng() % 2) {  // exactly k batches' worth from the start, give or take a byte
      std::size_t i = 0, k = rng() % 40;
      while (i < bs.size() && bs[i].last < offset)
        ++i;
      max_bytes = 0;
      for (; i < bs.size() && k > 0; ++i, --k)
        max_bytes += bs[i].bytes.size();
      max_bytes += static_cast<std::size_t>(static_cast<int>(rng() % 3) - 1);
    }
    std::int64_t max_offset =
        rng() % 3 == 0 ? static_cast<std::int64_t>(rng() % (leo + 2)) : INT64_MAX;
    bool min_one = rng() % 2;
    auto rr = log.read(offset, max_bytes, max_offset, min_one);
    ASSERT_TRUE(rr.has_value()) << rr.error().detail;
    // Model.
    std::vector<std::byte> want;
    std::vector<std::pair<std::int64_t, std::int64_t>> want_slices;  // first, last per segment
    std::int64_t next = offset;
    std::size_t i = 0;
    while (i < bs.size() && bs[i].last < offset)
      ++i;
    std::size_t total = 0;
    for (; i < bs.size(); ++i) {
      if (bs[i].last >= max_offset) break;
      bool first = want.empty();
      if (total + bs[i].bytes.size() > max_bytes && !(min_one && first)) break;
      if (first || seg_of[i] != seg_of[i - 1]) want_slices.push_back({bs[i].base, bs[i].last});
      want_slices.back().second = bs[i].last;
      want.insert(want.end(), bs[i].bytes.begin(), bs[i].bytes.end());
      total += bs[i].bytes.size();
      next = bs[i].last + 1;
    }
    SCOPED_TRACE("read(" + std::to_string(offset) + ", " + std::to_string(max_bytes) + ", " +
                 std::to_string(max_offset) + ", " + std::to_string(min_one) + ")");
    ASSERT_EQ(rr->slices.size(), want_slices.size());
    for (std::size_t s = 0; s < want_slices.size(); ++s) {
      EXPECT_EQ(rr->slices[s].first_offset, want_slices[s].first);
      EXPECT_EQ(rr->slices[s].last_offset, want_slices[s].second);
    }
    EXPECT_EQ(rr->next_offset, next);
    EXPECT_EQ(testing::read_bytes(*rr), want);
  }
}

TEST_F(LogTest, ReadsMatchAModelAcrossSegmentsIndexAndRing) {
  LogConfig cfg;
  cfg.index_interval_bytes = 500;
  cfg.segment_bytes = 100000;  // a few closed segments and an active one beyond the ring
  auto log = open(cfg);
  std::mt19937_64 rng(42);
  // > 1024 batches in the active segment, so reads there use both the ring and the index.
  std::vector<std::vector<SimpleRecord>> in;
  for (int i = 0; i < 2600; ++i) {
    in.push_back(
        records(1 + static_cast<int>(rng() % 4), 1000 + i, static_cast<std::size_t>(rng() % 120)));
  }
  auto bs = append_all(*log, in);
  ASSERT_GE(log->segment_count(), 3u);
  check_reads(*log, bs, rng, 3000);
}

TEST_F(LogTest, ReadEdgeCases) {
  auto log = open();
  std::vector<Batch> bs;
  bs.push_back(append(*log, 3, 1000));  // 0..2
  bs.push_back(append(*log, 1, 1000));  // 3
  bs.push_back(append(*log, 5, 1000));  // 4..8
  // Mid-batch offset: the whole batch comes back.
  auto rr = log->read(1, 1 << 20, INT64_MAX);
  ASSERT_TRUE(rr.has_value());
  EXPECT_EQ(rr->slices[0].first_offset, 0);
  EXPECT_EQ(testing::read_bytes(*rr), concat(bs, 0, 3));
  // max_bytes smaller than the first batch: one batch with min_one, none without.
  rr = log->read(0, 1, INT64_MAX, true);
  EXPECT_EQ(testing::read_bytes(*rr), concat(bs, 0, 1));
  EXPECT_EQ(rr->next_offset, 3);
  rr = log->read(0, 1, INT64_MAX, false);
  EXPECT_TRUE(rr->slices.empty());
  EXPECT_EQ(rr->next_offset, 0);
  // Exactly two batches' worth.
  rr = log->read(0, bs[0].bytes.size() + bs[1].bytes.size(), INT64_MAX, false);
  EXPECT_EQ(testing::read_bytes(*rr), concat(bs, 0, 2));
  // max_offset: only batches that end below it.
  rr = log->read(0, 1 << 20, 4);
  EXPECT_EQ(rr->next_offset, 4);
  rr = log->read(0, 1 << 20, 3);
  EXPECT_EQ(rr->next_offset, 3);
  rr = log->read(0, 1 << 20, 2);
  EXPECT_TRUE(rr->slices.empty());
  // At the end: empty; past it: out of range.
  rr = log->read(9, 1 << 20, INT64_MAX);
  ASSERT_TRUE(rr.has_value());
  EXPECT_TRUE(rr->slices.empty());
  EXPECT_EQ(rr->next_offset, 9);
  auto bad = log->read(10, 1 << 20, INT64_MAX);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code, Errc::offset_out_of_range);
}

TEST_F(LogTest, RollsOnSegmentBytes) {
  LogConfig cfg;
  cfg.segment_bytes = 1000;
  auto log = open(cfg);
  std::vector<Batch> bs;
  for (int i = 0; i < 12; ++i)
    bs.push_back(append(*log, 3, 1000 + i, 60));  // ~300 B each
  std::size_t per = (1000 / bs[0].bytes.size());
  EXPECT_EQ(log->segment_count(), (12 + per - 1) / per);
  for (const auto& de : std::filesystem::directory_iterator(ldir())) {
    if (de.path().extension() == ".log") {
      EXPECT_LE(de.file_size(), 1000u);
    }
  }
  // A batch larger than segment.bytes still goes in (alone).
  auto big = append(*log, 1, 5000, 3000);
  EXPECT_EQ(big.base, bs.back().last + 1);
  auto rr = log->read(big.base, 1 << 20, INT64_MAX);
  EXPECT_EQ(testing::read_bytes(*rr), big.bytes);
}

TEST_F(LogTest, RollsOnSegmentMsByRecordTimestamps) {
  LogConfig cfg;
  cfg.segment_ms = 1000;
  auto log = open(cfg);
  append(*log, 1, 100000);
  append(*log, 1, 100500);
  EXPECT_EQ(log->segment_count(), 1u);
  append(*log, 1, 101001);  // more than segment.ms after the segment's first batch
  EXPECT_EQ(log->segment_count(), 2u);
  EXPECT_TRUE(std::filesystem::exists(ldir() / "00000000000000000002.log"));
  // maybe_roll: the active segment's first batch is ancient by the wall clock.
  log->maybe_roll(wall_ms());
  EXPECT_EQ(log->segment_count(), 3u);
  // ...but an empty active segment never rolls.
  log->maybe_roll(wall_ms() + 10'000'000);
  EXPECT_EQ(log->segment_count(), 3u);
}

TEST_F(LogTest, RollsOnFullIndex) {
  LogConfig cfg;
  cfg.index_interval_bytes = 1;  // every batch after the first gets an entry
  cfg.segment_index_bytes = 24;  // 3 offset entries, 2 time entries
  auto log = open(cfg);
  for (int i = 0; i < 9; ++i)
    append(*log, 1, 1000 + i);
  // Batch 1: no entry, 2: entries 1, 3: entries 2 (time index full) -> next append rolls.
  EXPECT_EQ(log->segment_count(), 3u);
  auto idx = testing::file_bytes(ldir() / "00000000000000000000.index");
  auto tidx = testing::file_bytes(ldir() / "00000000000000000000.timeindex");
  EXPECT_EQ(idx.size(), 16u);
  EXPECT_EQ(tidx.size(), 24u);
}

TEST_F(LogTest, OffsetForTimestampIsRecordPrecise) {
  LogConfig cfg;
  cfg.index_interval_bytes = 200;
  cfg.segment_bytes = 3000;
  auto log = open(cfg);
  std::mt19937_64 rng(7);
  // Timestamps mostly rising, with records out of order inside and across batches.
  std::vector<std::vector<SimpleRecord>> in;
  for (int i = 0; i < 300; ++i) {
    std::int64_t base = 10000 + i * 10 + static_cast<std::int64_t>(rng() % 25) - 12;
    in.push_back(records(1 + static_cast<int>(rng() % 4), base, 20,
                         static_cast<std::int64_t>(rng() % 7) - 3));
  }
  auto bs = append_all(*log, in);
  ASSERT_GT(log->segment_count(), 3u);
  for (std::int64_t ts = 9900; ts < 13100; ts += 3) {
    std::optional<OffsetAndTimestamp> want;
    for (const auto& b : bs) {
      for (std::size_t r = 0; r < b.timestamps.size() && !want; ++r) {
        if (b.timestamps[r] >= ts) {
          want = OffsetAndTimestamp{b.base + static_cast<std::int64_t>(r), b.timestamps[r]};
        }
      }
      if (want) break;
    }
    auto got = log->offset_for_timestamp(ts);
    ASSERT_TRUE(got.has_value()) << got.error().detail;
    ASSERT_EQ(got->has_value(), want.has_value()) << ts;
    if (want) {
      EXPECT_EQ((*got)->offset, want->offset) << ts;
      EXPECT_EQ((*got)->timestamp, want->timestamp) << ts;
    }
  }
  // The largest timestamp, first occurrence.
  std::optional<OffsetAndTimestamp> mx;
  for (const auto& b : bs) {
    for (std::size_t r = 0; r < b.timestamps.size(); ++r) {
      if (!mx || b.timestamps[r] > mx->timestamp) {
        mx = OffsetAndTimestamp{b.base + static_cast<std::int64_t>(r), b.timestamps[r]};
      }
    }
  }
  auto got = log->max_timestamp();
  ASSERT_TRUE(got.has_value() && got->has_value());
  EXPECT_EQ((*got)->offset, mx->offset);
  EXPECT_EQ((*got)->timestamp, mx->timestamp);
}

#if SAMSA_HAVE_COMPRESSION
// Rewrites an uncompressed batch as a compressed one (what a producer with compression sends).
std::vector<std::byte> compress_batch(const std::vector<std::byte>& plain, Codec c) {
  auto z = compress(c, std::span(plain).subspan(batch::kHeaderSize));
  EXPECT_TRUE(z.has_value());
  // Sized once and copied into: gcc 12 at -O3 raises a false -Warray-bounds on a vector insert
  // that grows the vector here.
  std::vector<std::byte> out(batch::kHeaderSize + z->size());
  std::memcpy(out.data(), plain.data(), batch::kHeaderSize);
  std::memcpy(out.data() + batch::kHeaderSize, z->data(), z->size());
  store_be<std::int32_t>(out.data() + batch::kLength, static_cast<std::int32_t>(out.size() - 12));
  auto attrs = load_be<std::int16_t>(out.data() + batch::kAttributes);
  store_be<std::int16_t>(out.data() + batch::kAttributes,
                         static_cast<std::int16_t>(attrs | static_cast<int>(c)));
  batch::update_crc(out);
  return out;
}

TEST_F(LogTest, OffsetForTimestampLooksInsideCompressedBatches) {
  auto log = open();
  for (Codec c : {Codec::gzip, Codec::snappy, Codec::lz4, Codec::zstd}) {
    std::vector<SimpleRecord> rs;
    std::int64_t t0 = 50000 * static_cast<int>(c);
    for (int i = 0; i < 10; ++i)
      rs.push_back({t0 + 100 * i, "k", std::string(30, 'z'), {}});
    auto bytes = compress_batch(build_batch(rs), c);
    ASSERT_TRUE(Log::validate_batch(bytes, 1 << 20).has_value());
    auto r = testing::append_sync(*reactor, *log, bytes);
    ASSERT_TRUE(r.has_value()) << r.error().detail;
    auto got = log->offset_for_timestamp(t0 + 450);  // record 5 of this batch
    ASSERT_TRUE(got.has_value()) << got.error().detail;
    ASSERT_TRUE(got->has_value());
    EXPECT_EQ((*got)->offset, r->base_offset + 5) << codec_name(c);
    EXPECT_EQ((*got)->timestamp, t0 + 500);
  }
}
#endif

TEST_F(LogTest, LogAppendTimeStampsTheBatch) {
  LogConfig cfg;
  cfg.timestamp_type = TimestampType::log_append_time;
  auto log = open(cfg);
  std::int64_t before = wall_ms();
  OwnedAppend op(testing::make_batch(2, 5));
  auto r = log->append(&op);
  ASSERT_TRUE(r.has_value());
  std::int64_t after = wall_ms();
  EXPECT_GE(r->log_append_time, before);
  EXPECT_LE(r->log_append_time, after);
  ASSERT_TRUE(reactor->run_until([&] { return op.completions == 1; }));
  auto rr = log->read(0, 1 << 20, INT64_MAX);
  auto stored = testing::read_bytes(*rr);
  auto info = Log::validate_batch(stored, 1 << 20);
  ASSERT_TRUE(info.has_value()) << info.error().detail;  // CRC recomputed
  EXPECT_TRUE(info->log_append_time());
  EXPECT_EQ(info->max_timestamp, r->log_append_time);
  auto ts = log->offset_for_timestamp(before);
  ASSERT_TRUE(ts && *ts);
  EXPECT_EQ((*ts)->offset, 0);
  EXPECT_EQ((*ts)->timestamp, r->log_append_time);
}

TEST_F(LogTest, BadInputLeavesTheLogUntouched) {
  auto log = open();
  append(*log, 2, 1000);
  auto size_before = std::filesystem::file_size(ldir() / "00000000000000000000.log");
  auto leo = log->log_end_offset();
  auto appends = log->stats().appends;
  auto good = testing::make_batch(3, 1000);
  struct Case {
    const char* name;
    std::function<void(std::vector<std::byte>&)> mutate;
    Errc code;
  };
  std::vector<Case> cases = {
      {"crc", [](auto& b) { b[100] ^= std::byte{0x40}; }, Errc::corrupt_batch},
      {"magic", [](auto& b) { b[batch::kMagic] = std::byte{0}; }, Errc::invalid_magic},
      {"truncated", [](auto& b) { b.pop_back(); }, Errc::invalid_length},
      {"too short", [](auto& b) { b.erase(b.begin() + 30, b.end()); }, Errc::invalid_length},
      {"trailing bytes", [](auto& b) { b.push_back(std::byte{0}); }, Errc::invalid_length},
      {"absurd count",
       [](auto& b) {
         store_be<std::int32_t>(b.data() + batch::kRecordCount, 0x7fffffff);
         store_be<std::int32_t>(b.data() + batch::kLastOffsetDelta, 0x7ffffffe);
         batch::update_crc(b);
       },
       Errc::invalid_record_count},
      {"count vs delta",
       [](auto& b) {
         store_be<std::int32_t>(b.data() + batch::kLastOffsetDelta, 7);
         batch::update_crc(b);
       },
       Errc::invalid_record_count},
  };
  for (auto& c : cases) {
    auto b = good;
    c.mutate(b);
    auto original = b;
    OwnedAppend op(b);
    auto r = log->append(&op);
    ASSERT_FALSE(r.has_value()) << c.name;
    EXPECT_EQ(r.error().code, c.code) << c.name << ": " << r.error().detail;
    EXPECT_FALSE(r.error().detail.empty());
    EXPECT_EQ(op.bytes, original) << c.name << ": the caller's bytes were changed";
    for (int i = 0; i < 3; ++i)
      reactor->run_once(0);
    EXPECT_EQ(op.completions, 0) << c.name;
    EXPECT_EQ(log->log_end_offset(), leo) << c.name;
    EXPECT_EQ(std::filesystem::file_size(ldir() / "00000000000000000000.log"), size_before);
    EXPECT_EQ(log->stats().appends, appends);
  }
  // The log still works.
  auto b = append(*log, 1, 1000);
  EXPECT_EQ(b.base, leo);
}

TEST_F(LogTest, AppendReplicatedKeepsOffsetsAndChecksContinuity) {
  auto log = open();
  BatchBuilder::Options o;
  o.base_offset = 0;
  auto b0 = build_batch(std::vector<SimpleRecord>{{1, "a", "x", {}}, {2, "b", "y", {}}}, o);
  o.base_offset = 2;
  auto b1 = build_batch(std::vector<SimpleRecord>{{3, "c", "z", {}}}, o);
  std::vector<std::byte> both = b0;
  both.insert(both.end(), b1.begin(), b1.end());
  OwnedAppend op(both);
  auto r = log->append_replicated(&op);
  ASSERT_TRUE(r.has_value()) << r.error().detail;
  EXPECT_EQ(r->base_offset, 0);
  EXPECT_EQ(r->last_offset, 2);
  ASSERT_TRUE(reactor->run_until([&] { return op.completions == 1; }));
  EXPECT_EQ(testing::read_bytes(*log->read(0, 1 << 20, INT64_MAX)), both);
  // A gap is refused.
  o.base_offset = 5;
  OwnedAppend gap(build_batch(std::vector<SimpleRecord>{{3, "c", "z", {}}}, o));
  auto g = log->append_replicated(&gap);
  ASSERT_FALSE(g.has_value());
  EXPECT_EQ(g.error().code, Errc::offset_out_of_range);
  EXPECT_EQ(log->log_end_offset(), 3);
}

TEST_F(LogTest, ListenerHearsAdvances) {
  struct L : Log::Listener {
    int calls = 0;
    std::int64_t durable = -1;
    void on_log_advanced(Log& log) override {
      ++calls;
      durable = log.durable_end_offset();
    }
  } l;
  auto log = open();
  log->set_listener(&l);
  append(*log, 4, 1);
  EXPECT_GE(l.calls, 1);
  EXPECT_EQ(l.durable, 4);
  log->set_listener(nullptr);
}

TEST_F(LogTest, CloseThenAppendIsRefused) {
  auto log = open();
  append(*log, 1, 1);
  ASSERT_TRUE(log->close().has_value());
  OwnedAppend op(testing::make_batch(1, 1));
  auto r = log->append(&op);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, Errc::fenced);
}

// Kafka's LogValidator: the stored maxTimestamp is the records' largest (rewritten, CRC
// recomputed) and CreateTime records must lie within message.timestamp.before/after.max.ms of
// the broker's clock. Records with timestamp -1 (NO_TIMESTAMP) are stored as they are.
TEST_F(LogTest, MaxTimestampIsRewrittenToTheRecords) {
  auto log = open();
  OwnedAppend op(testing::make_batch(3, 1000));
  store_be<std::int64_t>(op.bytes.data() + batch::kMaxTimestamp, 7);
  batch::update_crc(op.bytes);
  auto r = log->append(&op);
  ASSERT_TRUE(r.has_value()) << r.error().detail;
  ASSERT_TRUE(reactor->run_until([&] { return op.completions == 1; }));
  auto rr = log->read(0, 1 << 20, INT64_MAX);
  auto stored = testing::read_bytes(*rr);
  auto info = Log::validate_batch(stored, 1 << 20);
  ASSERT_TRUE(info.has_value()) << info.error().detail;
  EXPECT_EQ(info->max_timestamp, 1002);
  auto mt = log->max_timestamp();
  ASSERT_TRUE(mt && *mt);
  EXPECT_EQ((*mt)->timestamp, 1002);
}

TEST_F(LogTest, RecordsWithoutTimestampsAreStored) {
  auto log = open();
  std::vector<SimpleRecord> rs = {{-1, "a", "1", {}}, {-1, "b", "2", {}}};
  auto bytes = build_batch(rs);
  auto r = testing::append_sync(*reactor, *log, bytes);
  ASSERT_TRUE(r.has_value()) << r.error().detail;
  EXPECT_EQ(r->last_offset, 1);
  auto rr = log->read(0, 1 << 20, INT64_MAX);
  auto stored = testing::read_bytes(*rr);
  auto info = Log::validate_batch(stored, 1 << 20);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->max_timestamp, -1);
}

TEST_F(LogTest, TimestampBoundsRefuseRecordsOutOfRange) {
  LogConfig cfg;
  cfg.timestamp_before_max_ms = 60'000;
  cfg.timestamp_after_max_ms = 60'000;
  auto log = open(cfg);
  const std::int64_t now = wall_ms();
  for (std::int64_t ts : {now - 3'600'000, now + 3'600'000}) {
    OwnedAppend op(testing::make_batch(2, ts));
    auto r = log->append(&op);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code, Errc::invalid_timestamp);
    EXPECT_NE(r.error().detail.find("message.timestamp.before.max.ms 60000"), std::string::npos)
        << r.error().detail;
  }
  EXPECT_EQ(log->log_end_offset(), 0);
  // Inside the window, and without timestamps: accepted.
  EXPECT_TRUE(testing::append_sync(*reactor, *log, testing::make_batch(2, now)).has_value());
  std::vector<SimpleRecord> none = {{-1, "a", "1", {}}};
  EXPECT_TRUE(testing::append_sync(*reactor, *log, build_batch(none)).has_value());
}

TEST_F(LogTest, DefaultAfterMaxIsOneHourAndLogAppendTimeIgnoresBounds) {
  {
    auto log = open();
    OwnedAppend op(testing::make_batch(1, wall_ms() + 2 * 3'600'000));
    auto r = log->append(&op);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code, Errc::invalid_timestamp);
  }
  std::filesystem::remove_all(ldir());
  LogConfig cfg;
  cfg.timestamp_type = TimestampType::log_append_time;
  auto log = open(cfg);
  EXPECT_TRUE(
      testing::append_sync(*reactor, *log, testing::make_batch(1, wall_ms() + 2 * 3'600'000))
          .has_value());
}

// A roll never writes or syncs on the reactor: the old segment's index files go to the
// offload, the segment is served from memory meanwhile, and the recovery point stays below it
// until its files are on disk.
TEST_F(LogTest, RollWritesIndexFilesOnTheOffload) {
  std::string why;
  auto off = Offload::start("test-offload", 1, &why);
  ASSERT_TRUE(off) << why;
  reactor->set_offload(off.get());
  // Hold the offload thread so the index job waits behind it.
  std::atomic<bool> release{false};
  // Whatever fails below, the offload thread is let go (its destructor joins it).
  struct Release {
    std::atomic<bool>& r;
    ~Release() { r = true; }
  } guard{release};
  off->run(
      *reactor, 0,
      [&] {
        while (!release.load())
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        return 0;
      },
      [](int) {});
  LogConfig cfg;
  cfg.segment_bytes = 700;
  auto log = open(cfg);
  std::vector<Batch> bs;
  for (int i = 0; i < 6; ++i)
    bs.push_back(append(*log, 5, 1000 + i * 10, 40));
  ASSERT_GE(log->segment_count(), 2u);
  // Written and synced, but not trusted past the first closed segment yet.
  EXPECT_EQ(log->durable_end_offset(), 30);
  EXPECT_EQ(log->recovery_point(), 0);
  EXPECT_FALSE(log->idle());
  EXPECT_TRUE(testing::file_bytes(ldir() / "00000000000000000000.index").empty());
  // Served from memory meanwhile: reads and timestamp lookups find the closed segment.
  auto rr = log->read(2, 1 << 20, INT64_MAX);
  ASSERT_TRUE(rr.has_value()) << rr.error().detail;
  EXPECT_EQ(rr->slices.front().first_offset, 0);
  auto ts = log->offset_for_timestamp(1011);
  ASSERT_TRUE(ts && *ts);
  EXPECT_EQ((*ts)->offset, 6);
  release = true;
  ASSERT_TRUE(reactor->run_until([&] { return log->idle(); }));
  EXPECT_EQ(log->recovery_point(), 30);
  EXPECT_FALSE(testing::file_bytes(ldir() / "00000000000000000000.timeindex").empty());
  ASSERT_TRUE(log->close().has_value());
  reactor->set_offload(nullptr);
}

// Cold reads with a ReadAhead never read a file themselves: they ask (would_block), the bytes
// come in through io_uring (Log::fill), and asking again gives what a blocking read gives (or
// a prefix of it, when the read crosses into a segment the ReadAhead does not hold).
TEST_F(LogTest, ReadsWithAReadAheadMatchBlockingReads) {
  LogConfig cfg;
  cfg.segment_bytes = 3000;
  cfg.index_interval_bytes = 200;
  auto log = open(cfg);
  std::vector<std::vector<SimpleRecord>> batches;
  for (int i = 0; i < 60; ++i)
    batches.push_back(records(1 + i % 4, 1000 + i * 10, 40 + (i * 37) % 200));
  auto bs = append_all(*log, batches);
  ASSERT_GE(log->segment_count(), 5u);
  std::mt19937 rng(7);
  ReadAhead ra(4096);
  int fills = 0;
  auto read_async = [&](std::int64_t off, std::size_t max) {
    for (int round = 0; round < 10; ++round) {
      auto r = log->read(off, max, INT64_MAX, true, &ra);
      if (r || r.error().code != Errc::would_block) return r;
      bool done = false;
      std::optional<std::string> err;
      log->fill(ra, [&](std::optional<std::string> e) {
        err = std::move(e);
        done = true;
      });
      EXPECT_TRUE(reactor->run_until([&] { return done; }));
      EXPECT_FALSE(err.has_value()) << *err;
      ++fills;
    }
    ADD_FAILURE() << "still blocked after 10 fills";
    return log->read(off, max, INT64_MAX, true);
  };
  for (int i = 0; i < 200; ++i) {
    const std::int64_t off = static_cast<std::int64_t>(rng() % log->log_end_offset());
    const std::size_t max = 100 + rng() % 6000;
    auto want = log->read(off, max, INT64_MAX, true);
    auto got = read_async(off, max);
    ASSERT_TRUE(want && got) << off;
    ASSERT_FALSE(got->slices.empty());
    ASSERT_LE(got->slices.size(), want->slices.size());
    for (std::size_t k = 0; k + 1 < got->slices.size(); ++k) {
      EXPECT_EQ(got->slices[k].position, want->slices[k].position);
      EXPECT_EQ(got->slices[k].length, want->slices[k].length);
    }
    const auto& g = got->slices.back();
    const auto& w = want->slices[got->slices.size() - 1];
    EXPECT_EQ(g.position, w.position) << off;
    EXPECT_LE(g.length, w.length);
    EXPECT_EQ(g.first_offset, w.first_offset);
  }
  EXPECT_GT(fills, 0);
  EXPECT_EQ(log->stats().read_ahead_fills, static_cast<std::uint64_t>(fills));
  // Timestamp lookups too, including one that decodes a batch far into a segment.
  for (std::int64_t ts : {1000, 1055, 1313, 1599, 5000}) {
    auto want = log->offset_for_timestamp(ts);
    std::optional<OffsetAndTimestamp> got;
    for (int round = 0; round < 10; ++round) {
      auto r = log->offset_for_timestamp(ts, &ra);
      if (r) {
        got = *r;
        break;
      }
      ASSERT_EQ(r.error().code, Errc::would_block) << r.error().detail;
      bool done = false;
      log->fill(ra, [&](std::optional<std::string>) { done = true; });
      ASSERT_TRUE(reactor->run_until([&] { return done; }));
    }
    ASSERT_TRUE(want.has_value());
    EXPECT_EQ(want->has_value(), got.has_value()) << ts;
    if (*want && got) {
      EXPECT_EQ((*want)->offset, got->offset) << ts;
      EXPECT_EQ((*want)->timestamp, got->timestamp) << ts;
    }
  }
}

}  // namespace
}  // namespace samsa::io
