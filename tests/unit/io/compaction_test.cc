// Compaction on real files: the cleaning pass (io/compaction.cc), its swap into the log and the
// completion of an interrupted swap (io/log_clean.cc), and what readers see of the gaps it
// leaves. CompactionModel is the property test: random keyed writes, deletes, cleanings and
// reopens against a model, checked after every cleaning.
#include "io/compaction.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <random>

#include "base/bytes.h"
#include "base/clock.h"
#include "io/batch_builder.h"
#include "io/checkpoint.h"
#include "io/compression.h"
#include "io/log.h"
#include "io/record_batch.h"
#include "io/segment.h"
#include "tests/support/io_testing.h"

namespace samsa::io {
namespace {

namespace fs = std::filesystem;

struct Rec {
  std::int64_t offset;
  std::string key;
  std::optional<std::string> value;
  std::int64_t timestamp;
};

struct BatchSeen {
  BatchInfo info;
  std::vector<Rec> records;
};

// Every batch from the log start, through Log::read in small steps (so reads start in gaps).
std::vector<BatchSeen> read_all(Log& log, std::size_t step = 300) {
  std::vector<BatchSeen> out;
  std::int64_t next = log.log_start_offset();
  std::vector<std::byte> storage;
  while (next < log.log_end_offset()) {
    auto rr = log.read(next, step, INT64_MAX, true);
    EXPECT_TRUE(rr.has_value()) << rr.error().detail;
    if (!rr || rr->slices.empty()) break;
    auto bytes = testing::read_bytes(*rr);
    std::size_t pos = 0;
    while (pos < bytes.size()) {
      BatchInfo bi = batch::parse_header(bytes.data() + pos);
      std::span<const std::byte> b(bytes.data() + pos, static_cast<std::size_t>(bi.length));
      auto v = batch::validate(b, 0, nullptr, batch::Form::stored);
      EXPECT_TRUE(v.has_value()) << (v ? "" : v.error().detail);
      BatchSeen seen{bi, {}};
      if (bi.base_offset + bi.last_offset_delta >= next) {
        auto recs = batch::records_of(b, storage);
        EXPECT_TRUE(recs.has_value());
        batch::RecordReader rd(*recs, bi.record_count);
        for (;;) {
          auto r = rd.next();
          EXPECT_TRUE(r.has_value());
          if (!r || !*r) break;
          const auto& rec = **r;
          auto str = [](std::span<const std::byte> s) {
            return std::string(reinterpret_cast<const char*>(s.data()), s.size());
          };
          seen.records.push_back(Rec{bi.base_offset + rec.offset_delta,
                                     rec.key ? str(*rec.key) : std::string("<null>"),
                                     rec.value ? std::optional(str(*rec.value)) : std::nullopt,
                                     bi.base_timestamp + rec.timestamp_delta});
        }
        out.push_back(std::move(seen));
      }
      pos += static_cast<std::size_t>(bi.length);
    }
    EXPECT_GT(rr->next_offset, next);
    next = rr->next_offset;
  }
  return out;
}

std::vector<Rec> records_of(const std::vector<BatchSeen>& batches) {
  std::vector<Rec> out;
  for (const auto& b : batches)
    out.insert(out.end(), b.records.begin(), b.records.end());
  return out;
}

// Recompresses an uncompressed batch with codec c.
std::vector<std::byte> compressed(std::vector<std::byte> b, Codec c) {
  std::span<const std::byte> body(b.data() + batch::kHeaderSize, b.size() - batch::kHeaderSize);
  auto packed = compress(c, body);
  EXPECT_TRUE(packed.has_value());
  std::vector<std::byte> out(b.begin(), b.begin() + batch::kHeaderSize);
  out.insert(out.end(), packed->begin(), packed->end());
  auto attrs = load_be<std::int16_t>(out.data() + batch::kAttributes);
  store_be<std::int16_t>(out.data() + batch::kAttributes,
                         static_cast<std::int16_t>(attrs | static_cast<int>(c)));
  store_be<std::int32_t>(out.data() + batch::kLength,
                         static_cast<std::int32_t>(out.size() - batch::kLogOverhead));
  batch::update_crc(out);
  return out;
}

class Compaction : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = Reactor::create({.name = "test"});
    ASSERT_TRUE(r.has_value());
    reactor = std::move(*r);
    cfg.segment_bytes = 600;
    cfg.cleanup_compact = true;
    cfg.cleanup_delete = false;
    cfg.min_cleanable_dirty_ratio = 0;
    open();
  }
  fs::path ldir() const { return (shm ? shm->path() : dir.path()) / "t-0"; }
  void open(OpenOptions o = {}) {
    log.reset();
    auto l = Log::open(*reactor, ldir(), cfg, o);
    ASSERT_TRUE(l.has_value()) << l.error().detail;
    log = std::move(*l);
  }
  // The log's segment files, in offset order.
  std::vector<fs::path> segment_files() const {
    std::vector<fs::path> logs;
    for (const auto& e : fs::directory_iterator(ldir()))
      if (e.path().extension() == ".log") logs.push_back(e.path());
    std::sort(logs.begin(), logs.end());
    return logs;
  }
  // A clean reopen keeps the first dirty offset, as the cleaner checkpoint would.
  void reopen(bool clean) {
    auto first_dirty = log->compaction_info().first_dirty;
    if (clean) {
      ASSERT_TRUE(log->close().has_value());
    }
    open(OpenOptions{.recovery_point = clean ? log->log_end_offset() : 0,
                     .clean_shutdown = clean,
                     .cleaner_offset = first_dirty});
  }
  std::int64_t put(const std::string& key, std::optional<std::string> value,
                   BatchBuilder::Options bo = {}, std::int64_t ts = -1) {
    SimpleRecord r;
    r.timestamp = ts >= 0 ? ts : wall_ms();
    r.key = key;
    r.value = std::move(value);
    auto res = testing::append_sync(*reactor, *log, build_batch({&r, 1}, bo));
    EXPECT_TRUE(res.has_value()) << res.error().detail;
    return res ? res->base_offset : -1;
  }
  // Fills the active segment with filler keys until it rolls, so everything before is closed.
  void roll() {
    const auto n = log->segment_count();
    for (int i = 0; log->segment_count() == n; ++i)
      put("filler-" + std::to_string(fill_++), std::string(100, 'f'));
  }
  // One pass, not committed: its plan (null when nothing was planned) and what it left.
  struct Pass {
    std::unique_ptr<CleanPlan> plan;
    Result<CleanResult> result = std::unexpected(Error{Errc::not_found, "nothing planned"});
  };
  Pass run_pass(const Log::CleanRequest& req, std::size_t map_bytes = 1 << 20) {
    Pass p;
    p.plan = log->plan_cleaning(req);
    if (!p.plan) return p;
    p.plan->aborted = aborted;
    OffsetMap map(map_bytes);
    CleanerIo io;
    p.result = clean_segments(*p.plan, map, io);
    return p;
  }
  // One pass (forced), committed. False when nothing was planned.
  bool clean(std::size_t map_bytes = 1 << 20, std::int64_t now = -1,
             std::int64_t producer_expiration_ms = 86400000, CleanResult* out = nullptr,
             std::int64_t limit = INT64_MAX) {
    Pass p = run_pass({.now_ms = now >= 0 ? now : wall_ms(),
                       .cleanable_limit = limit,
                       .producer_expiration_ms = producer_expiration_ms,
                       .force = true},
                      map_bytes);
    if (!p.plan) return false;
    EXPECT_TRUE(p.result.has_value()) << p.result.error().detail;
    if (!p.result) {
      log->abort_cleaning(*p.plan);
      return false;
    }
    auto c = log->commit_cleaning(*p.plan, *p.result);
    EXPECT_TRUE(c.has_value()) << c.error().detail;
    if (out) *out = *p.result;
    return true;
  }
  // Latest record per key (filler keys included), as the log shows it.
  std::map<std::string, Rec> latest(const std::vector<Rec>& rs) {
    std::map<std::string, Rec> m;
    for (const auto& r : rs)
      m.insert_or_assign(r.key, r);
    return m;
  }

  std::unique_ptr<Reactor> reactor;
  testing::TempDir dir;
  std::unique_ptr<testing::TempDir> shm;  // the property test's files, on tmpfs when there is one
  LogConfig cfg;
  std::unique_ptr<Log> log;
  std::vector<AbortedTxn> aborted;  // what the partition's index would give the passes
  int fill_ = 0;
};

TEST_F(Compaction, KeepsTheLatestRecordOfEachKeyAtItsOffset) {
  std::map<std::int64_t, std::pair<std::string, std::string>> written;
  for (int v = 0; v < 5; ++v)
    for (int k = 0; k < 8; ++k) {
      std::string key = "key" + std::to_string(k), val = "v" + std::to_string(v);
      written[put(key, val)] = {key, val};
    }
  roll();
  const auto before = latest(records_of(read_all(*log)));
  const auto size_before = log->size_bytes();
  ASSERT_TRUE(clean());
  auto after = read_all(*log);
  auto recs = records_of(after);
  EXPECT_EQ(latest(recs).size(), before.size());
  for (const auto& [k, r] : latest(recs)) {
    EXPECT_EQ(r.offset, before.at(k).offset) << k;
    EXPECT_EQ(r.value, before.at(k).value) << k;
  }
  std::map<std::string, int> count;
  for (const auto& r : recs) {
    if (r.key.starts_with("key")) {
      ++count[r.key];
      EXPECT_EQ(written.at(r.offset).second, *r.value) << "record moved from its offset";
    }
  }
  for (const auto& [k, n] : count)
    EXPECT_EQ(n, 1) << k;
  EXPECT_LT(log->size_bytes(), size_before);
  for (std::size_t i = 1; i < recs.size(); ++i)
    ASSERT_GT(recs[i].offset, recs[i - 1].offset);
  EXPECT_EQ(log->compaction_info().passes, 1u);
  // Nothing more to clean below the active segment until it rolls again.
  Log::CleanRequest req{.now_ms = wall_ms(), .force = true};
  EXPECT_FALSE(log->plan_cleaning(req));
}

TEST_F(Compaction, GapsAreServedToReadersAndSurviveReopening) {
  for (int v = 0; v < 6; ++v)
    for (int k = 0; k < 4; ++k)
      put("key" + std::to_string(k), "v" + std::to_string(v), {}, 1000 + v * 10 + k);
  roll();
  // Newer values of the fillers that closed the last segment, in segments left out of the pass
  // (as the high watermark leaves them): the cleaned segment ends in a gap, and a closed
  // segment, not the active one, follows it.
  const std::int64_t limit = log->log_end_offset();
  for (int i = 0, n = fill_; i < n; ++i)
    put("filler-" + std::to_string(i), "again", {}, 2000 + i);
  roll();
  ASSERT_TRUE(clean(1 << 20, -1, 86400000, nullptr, limit));
  const auto view = records_of(read_all(*log));
  // Every offset of the log is a valid place to start: the gaps answer with the next batch.
  for (std::int64_t o = 0; o < log->log_end_offset(); ++o) {
    auto rr = log->read(o, 1, INT64_MAX, true);
    ASSERT_TRUE(rr.has_value()) << o << ": " << rr.error().detail;
    ASSERT_FALSE(rr->slices.empty()) << o;
    EXPECT_GE(rr->slices[0].last_offset, o);
  }
  // The same through a ReadAhead (a reactor's cold read): a read starting in the gap at the
  // end of one segment is answered from the next, without fills chasing the two files.
  for (std::int64_t o = 0; o < log->log_end_offset(); ++o) {
    ReadAhead ra(4096);
    int fills = 0;
    for (;;) {
      auto rr = log->read(o, 1, INT64_MAX, true, &ra);
      if (rr) {
        ASSERT_FALSE(rr->slices.empty()) << o;
        EXPECT_GE(rr->slices[0].last_offset, o);
        break;
      }
      ASSERT_EQ(rr.error().code, Errc::would_block) << rr.error().detail;
      ASSERT_LT(++fills, 4) << "offset " << o << ": fills keep chasing";
      bool filled = false;
      log->fill(ra, [&](std::optional<std::string> err) {
        EXPECT_FALSE(err) << *err;
        filled = true;
      });
      ASSERT_TRUE(reactor->run_until([&] { return filled; }));
    }
  }
  // ListOffsets by timestamp lands on the first surviving record at or after it.
  auto t = log->offset_for_timestamp(1000);
  ASSERT_TRUE(t.has_value() && t->has_value());
  EXPECT_EQ((*t)->offset, view.front().offset);
  EXPECT_EQ((*t)->timestamp, view.front().timestamp);
  std::size_t added = 0;
  for (bool clean_stop : {true, false}) {
    reopen(clean_stop);
    EXPECT_EQ(records_of(read_all(*log)).size(), view.size() + added) << clean_stop;
    const std::int64_t leo = log->log_end_offset();
    EXPECT_EQ(put("after" + std::to_string(added++), "x"), leo);
  }
}

TEST_F(Compaction, TombstonesStayForDeleteRetentionThenGo) {
  cfg.delete_retention_ms = 60000;
  open();
  put("a", "1");
  put("b", "1");
  put("a", std::nullopt);
  roll();
  const std::int64_t now = wall_ms();
  ASSERT_TRUE(clean(1 << 20, now));
  auto m = latest(records_of(read_all(*log)));
  ASSERT_TRUE(m.count("a"));
  EXPECT_FALSE(m.at("a").value) << "the tombstone is kept (and the older value is gone)";
  EXPECT_EQ(m.at("b").value, "1");
  roll();
  ASSERT_TRUE(clean(1 << 20, now + 30000));
  EXPECT_TRUE(latest(records_of(read_all(*log))).count("a")) << "horizon not reached yet";
  roll();
  ASSERT_TRUE(clean(1 << 20, now + 61000));
  m = latest(records_of(read_all(*log)));
  EXPECT_FALSE(m.count("a")) << "past delete.retention.ms the tombstone goes";
  EXPECT_EQ(m.at("b").value, "1");
}

TEST_F(Compaction, TheLastBatchOfAProducerStaysEmptyUntilItExpires) {
  BatchBuilder::Options p{.producer_id = 7, .producer_epoch = 2, .base_sequence = 0};
  put("k", "a", p);
  p.base_sequence = 1;
  const std::int64_t last = put("k", "b", p);
  put("k", "c");  // supersedes the producer's last record
  roll();
  ASSERT_TRUE(clean());
  const BatchSeen* kept = nullptr;
  auto batches = read_all(*log);
  for (const auto& b : batches)
    if (b.info.producer_id == 7) kept = &b;
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(kept->info.base_offset, last);
  EXPECT_EQ(kept->info.record_count, 0);
  EXPECT_EQ(kept->info.base_sequence, 1);
  EXPECT_EQ(kept->info.producer_epoch, 2);
  int producer_batches = 0;
  for (const auto& b : batches)
    producer_batches += b.info.producer_id == 7;
  EXPECT_EQ(producer_batches, 1) << "the earlier batch of the producer goes";
  // It survives a reopen's scan (the producer state is rebuilt from it).
  reopen(false);
  std::int64_t seen_last = -1;
  ASSERT_TRUE(log->scan_batch_headers(0,
                                      [&](const BatchInfo& b) {
                                        if (b.producer_id == 7)
                                          seen_last = b.base_offset + b.last_offset_delta;
                                        return true;
                                      })
                  .has_value());
  EXPECT_EQ(seen_last, last);
  // Once the producer has expired, the empty batch goes too.
  roll();
  ASSERT_TRUE(clean(1 << 20, wall_ms(), /*producer_expiration_ms=*/0));
  for (const auto& b : read_all(*log))
    EXPECT_NE(b.info.producer_id, 7);
}

TEST_F(Compaction, AbortedTransactionsRecordsGoAndSupersedeNothing) {
  put("k", "committed");
  put("j", "committed");
  BatchBuilder::Options t{
      .producer_id = 9, .producer_epoch = 0, .base_sequence = 0, .transactional = true};
  const std::int64_t first = put("k", "aborted", t);
  t.base_sequence = 1;
  put("j", "aborted", t);
  auto marker =
      testing::append_sync(*reactor, *log, build_txn_marker(9, 0, /*commit=*/false, 0, wall_ms()));
  ASSERT_TRUE(marker.has_value());
  // A committed transaction of the same producer after it: its value wins.
  t.base_sequence = 2;
  put("j", "txn-committed", t);
  ASSERT_TRUE(
      testing::append_sync(*reactor, *log, build_txn_marker(9, 0, true, 0, wall_ms())).has_value());
  roll();
  aborted = {AbortedTxn{9, first, marker->base_offset, first}};
  ASSERT_TRUE(clean());
  auto batches = read_all(*log);
  auto m = latest(records_of(batches));
  EXPECT_EQ(m.at("k").value, "committed") << "an aborted value superseded a committed one";
  EXPECT_EQ(m.at("j").value, "txn-committed");
  int markers = 0;
  for (const auto& b : batches) {
    markers += b.info.is_control();
    for (const auto& r : b.records)
      EXPECT_NE(r.value, "aborted") << "aborted record kept at " << r.offset;
  }
  EXPECT_EQ(markers, 2) << "markers stay";
}

TEST_F(Compaction, TheLastBatchOfAGroupStaysSoReadersReachTheEnd) {
  put("k", "v");
  // One key rewritten until the segment rolls: the closed segment's last batch is superseded by
  // the first of the next, so the pass drops it.
  const auto n = log->segment_count();
  std::int64_t last_closed = -1, rolled_at = -1;
  for (int v = 0; log->segment_count() == n; ++v) {
    last_closed = rolled_at;
    rolled_at = put("x", "v" + std::to_string(v));
  }
  roll();
  ASSERT_TRUE(clean());
  // Nothing after the gap, as when the segments after it are truncated away (a power cut, or a
  // follower's truncation, takes whatever followed the cleaned range).
  ASSERT_TRUE(log->truncate_to(rolled_at).has_value());
  ASSERT_EQ(log->log_end_offset(), rolled_at);
  for (std::int64_t o = 0; o < rolled_at; ++o) {
    auto rr = log->read(o, 1, INT64_MAX, true);
    ASSERT_TRUE(rr.has_value()) << o << ": " << rr.error().detail;
    ASSERT_FALSE(rr->slices.empty()) << "a reader at " << o << " could never reach " << rolled_at;
    EXPECT_GE(rr->slices[0].last_offset, o);
  }
  auto batches = read_all(*log);
  ASSERT_FALSE(batches.empty());
  const BatchInfo& tail = batches.back().info;
  EXPECT_EQ(tail.base_offset, last_closed);
  EXPECT_EQ(tail.record_count, 0);
  EXPECT_EQ(tail.producer_id, -1);
  EXPECT_EQ(records_of(batches).size(), 1u) << "only k's record is the latest of its key";
}

TEST_F(Compaction, WritesLostToAPowerCutAreNotTakenForAGap) {
  for (int i = 0; i < 4; ++i)
    roll();
  const std::vector<fs::path> logs = segment_files();
  ASSERT_GE(logs.size(), 4u);
  log.reset();
  // As unsynced writes vanish: the files after the first are left empty (their creation was
  // durable, their data not). Nothing is torn, so only their emptiness tells.
  for (std::size_t i = 1; i < logs.size(); ++i)
    fs::resize_file(logs[i], 0);
  open(OpenOptions{.recovery_point = 0, .clean_shutdown = false});
  ASSERT_TRUE(log);
  EXPECT_EQ(log->segment_count(), 1u) << "the empty segments go";
  const auto batches = read_all(*log);
  ASSERT_FALSE(batches.empty());
  const BatchInfo& last = batches.back().info;
  EXPECT_EQ(log->log_end_offset(), last.base_offset + last.last_offset_delta + 1)
      << "the log ends where the surviving data ends, not at a lost segment's base";
  for (std::int64_t o = 0; o < log->log_end_offset(); ++o) {
    auto rr = log->read(o, 1, INT64_MAX, true);
    ASSERT_TRUE(rr.has_value() && !rr->slices.empty()) << o;
  }
  const std::int64_t leo = log->log_end_offset();
  EXPECT_EQ(put("after", "x"), leo);
}

TEST_F(Compaction, AnEmptySegmentWithDataAfterItIsKept) {
  // An older cleaner could leave a cleaned group empty; with data after it, recovery (which
  // may scan it: the recovery point is checkpointed lazily) must not take it for lost writes.
  for (int i = 0; i < 4; ++i)
    roll();
  const std::vector<fs::path> logs = segment_files();
  ASSERT_GE(logs.size(), 4u);
  const std::int64_t leo = log->log_end_offset();
  const auto segments = log->segment_count();
  log.reset();
  fs::resize_file(logs[1], 0);
  open(OpenOptions{.recovery_point = 0, .clean_shutdown = false});
  ASSERT_TRUE(log);
  EXPECT_EQ(log->segment_count(), segments);
  EXPECT_EQ(log->log_end_offset(), leo) << "the data after the empty segment stays";
}

TEST_F(Compaction, CompressedBatchesAreRecompressedWithTheirCodec) {
  for (Codec c : {Codec::gzip, Codec::snappy, Codec::lz4, Codec::zstd}) {
    std::vector<SimpleRecord> rs;
    for (int i = 0; i < 6; ++i)
      rs.push_back(SimpleRecord{2000 + i,
                                "c" + std::to_string(i % 3),
                                std::string(codec_name(c)) + std::to_string(i),
                                {}});
    auto res = testing::append_sync(*reactor, *log, compressed(build_batch(rs), c));
    ASSERT_TRUE(res.has_value()) << res.error().detail;
  }
  put("c0", "plain");  // supersedes c0 in every compressed batch
  roll();
  ASSERT_TRUE(clean());
  int compressed_batches = 0;
  for (const auto& b : read_all(*log)) {
    if (b.info.compression() == 0) continue;
    ++compressed_batches;
    for (const auto& r : b.records)
      EXPECT_NE(r.key, "c0");
  }
  EXPECT_EQ(compressed_batches, 1) << "only the last batch holds the latest c1 and c2";
  auto m = latest(records_of(read_all(*log)));
  EXPECT_EQ(m.at("c0").value, "plain");
  EXPECT_EQ(m.at("c1").value, "zstd4");
  EXPECT_EQ(m.at("c2").value, "zstd5");
  // The max-timestamp lookup still answers from the rewritten batches.
  auto mt = log->max_timestamp();
  ASSERT_TRUE(mt.has_value() && mt->has_value());
}

TEST_F(Compaction, ATinyKeyMapCleansInSeveralPasses) {
  std::map<std::string, std::string> model;
  for (int v = 0; v < 3; ++v)
    for (int k = 0; k < 60; ++k) {
      std::string key = "key" + std::to_string(k), val = std::to_string(v);
      put(key, val);
      model[key] = val;
    }
  roll();
  int passes = 0;
  CleanResult res;
  // 40 slots: 36 keys a pass.
  while (clean(40 * 24, -1, 86400000, &res) && passes < 100) {
    ++passes;
    EXPECT_LE(res.stats.map_keys, 36u);
  }
  EXPECT_GT(passes, 3);
  std::map<std::string, int> count;
  for (const auto& r : records_of(read_all(*log))) {
    if (!r.key.starts_with("key")) continue;
    EXPECT_EQ(*r.value, model.at(r.key));
    ++count[r.key];
  }
  EXPECT_EQ(count.size(), model.size());
  for (const auto& [k, n] : count)
    EXPECT_EQ(n, 1) << k;
}

TEST_F(Compaction, SmallCleanedSegmentsAreMerged) {
  for (int v = 0; v < 40; ++v)
    put("same", std::string(150, static_cast<char>('a' + v % 26)));
  roll();
  const auto before = log->segment_count();
  ASSERT_GT(before, 8u);
  ASSERT_TRUE(clean());
  roll();
  ASSERT_TRUE(clean());
  // (Each cleaned group keeps its last batch, emptied: 61 bytes, so 600-byte segments hold
  // about ten of them.)
  EXPECT_LE(log->segment_count(), before / 3) << "from " << before;
}

TEST_F(Compaction, APassTheLogOutranIsDropped) {
  for (int v = 0; v < 4; ++v)
    put("k", std::to_string(v));
  roll();
  Pass p = run_pass({.now_ms = wall_ms(), .force = true});
  ASSERT_TRUE(p.plan);
  ASSERT_TRUE(p.result.has_value());
  ASSERT_TRUE(log->truncate_to(2).has_value());
  auto c = log->commit_cleaning(*p.plan, *p.result);
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().code, Errc::busy);
  EXPECT_FALSE(fs::exists(cleaned_path(ldir(), 0, ".log")));
  EXPECT_EQ(records_of(read_all(*log)).size(), 2u);
}

// A stop after the manifest: the next open completes the swap. A stop before it: the old
// segments stay and the .cleaned files go.
TEST_F(Compaction, AnInterruptedSwapIsCompletedOrForgotten) {
  for (bool committed : {false, true}) {
    for (int v = 0; v < 5; ++v)
      for (int k = 0; k < 3; ++k)
        put("key" + std::to_string(k), std::to_string(v));
    roll();
    const auto before = records_of(read_all(*log));
    Pass p = run_pass({.now_ms = wall_ms(), .force = true});
    ASSERT_TRUE(p.plan);
    ASSERT_TRUE(p.result.has_value());
    const auto& res = p.result;
    ASSERT_FALSE(res->groups.empty());
    if (committed) {
      std::string m;
      for (const auto& g : res->groups)
        m += std::to_string(g.base) + " " + std::to_string(g.end) + "\n";
      ASSERT_TRUE(write_file_atomically(ldir() / kSwapManifest, m).has_value());
      // As far as the renames went: the first old segment already renamed away.
      fs::rename(ldir() / (detail::segment_name(res->groups[0].base) + ".log"),
                 ldir() / (detail::segment_name(res->groups[0].base) + ".log.deleted"));
    }
    log->abort_cleaning(*p.plan);
    reopen(false);
    EXPECT_FALSE(fs::exists(ldir() / kSwapManifest));
    EXPECT_FALSE(fs::exists(cleaned_path(ldir(), res->groups[0].base, ".log")));
    auto after = records_of(read_all(*log));
    if (committed) {
      EXPECT_LT(after.size(), before.size());
      auto lb = latest(before), la = latest(after);
      for (const auto& [k, r] : lb) {
        EXPECT_EQ(la.at(k).offset, r.offset);
        EXPECT_EQ(la.at(k).value, r.value);
      }
    } else {
      EXPECT_EQ(after.size(), before.size());
    }
  }
}

TEST_F(Compaction, AFollowerTakesTheGappedBatchesOfACompactedLeader) {
  put("solo", "1");  // stays, with a gap after it
  for (int v = 0; v < 5; ++v)
    for (int k = 0; k < 3; ++k)
      put("key" + std::to_string(k), std::to_string(v));
  roll();
  ASSERT_TRUE(clean());
  auto follower = Log::open(*reactor, dir / "f-0", cfg);
  ASSERT_TRUE(follower.has_value());
  std::int64_t next = 0;
  while (next < log->log_end_offset()) {
    auto rr = log->read(next, 400, INT64_MAX, true);
    ASSERT_TRUE(rr.has_value());
    testing::OwnedAppend op(testing::read_bytes(*rr));
    auto a = (*follower)->append_replicated(&op);
    ASSERT_TRUE(a.has_value()) << a.error().detail;
    ASSERT_TRUE(reactor->run_until([&] { return op.completions > 0; }));
    next = (*follower)->log_end_offset();
    EXPECT_EQ(next, rr->next_offset);
  }
  EXPECT_EQ(records_of(read_all(**follower)).size(), records_of(read_all(*log)).size());
  // A follower truncating into a gap ends exactly there.
  auto recs = records_of(read_all(**follower));
  std::int64_t gap = -1;
  for (std::size_t i = 1; i < recs.size() && gap < 0; ++i)
    if (recs[i].offset > recs[i - 1].offset + 1) gap = recs[i - 1].offset + 1;
  ASSERT_GE(gap, 0);
  ASSERT_TRUE((*follower)->truncate_to(gap).has_value());
  EXPECT_EQ((*follower)->log_end_offset(), gap);
}

// log.cleaner.io.max.bytes.per.second: the pass's reads and writes sleep to stay under it.
TEST(CleanerIo, ThrottlesToItsRate) {
  testing::TempDir d;
  const auto p = d / "f";
  int fd = ::open(p.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  std::vector<std::byte> buf(1u << 20);
  CleanerIo unthrottled;
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(unthrottled.write(fd, buf.data(), buf.size(), i * buf.size(), p).has_value());
  EXPECT_EQ(unthrottled.throttled_ns, 0);
  CleanerIo io(8u << 20);  // 8 MiB/s: the first second's budget, then 4 MiB more take ~0.5 s
  for (int i = 0; i < 12; ++i)
    ASSERT_TRUE(io.read(fd, buf.data(), buf.size(), (i % 4) * buf.size(), p).has_value());
  EXPECT_GT(io.throttled_ns, 300'000'000) << "12 MiB at 8 MiB/s";
  EXPECT_EQ(io.bytes_read, 12u << 20);
  ::close(fd);
}

// ---------------------------------------------------------------------------------------------
// The property test: random writes, deletes, cleanings (with small key maps and random clocks)
// and reopens; after every cleaning, reading from offset 0 gives each key's latest value at its
// original offset, or nothing once its tombstone is past delete.retention.ms, and nothing twice.

class CompactionModel : public Compaction {
 protected:
  void run_seed(std::uint32_t seed) {
    std::mt19937 rng(seed);
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
    const int keys = 2 + pick(20);
    std::map<std::int64_t, Rec> history;          // every record written, by offset
    std::map<std::string, std::int64_t> last_of;  // key -> offset of its latest record
    std::int64_t clock = 1'000'000;
    const int ops = 40 + pick(80);
    for (int i = 0; i < ops; ++i) {
      const int what = pick(100);
      if (what < 65) {
        std::string key = "k" + std::to_string(pick(keys));
        std::optional<std::string> val;
        if (pick(10) > 0)
          val = std::string(static_cast<std::size_t>(pick(60)), 'v') + std::to_string(i);
        clock += pick(3);
        std::int64_t off = put(key, val, {}, clock);
        ASSERT_GE(off, 0);
        history[off] = Rec{off, key, val, clock};
        last_of[key] = off;
      } else if (what < 75) {
        roll();
      } else if (what < 95) {
        clock += pick(3) * 30000;  // delete.retention.ms is 60 s
        const std::size_t map_bytes =
            pick(2) ? (1u << 16) : static_cast<std::size_t>(16 + pick(24)) * 24;
        clean(map_bytes, clock);
        check(history, last_of, clock, seed);
        if (::testing::Test::HasFatalFailure()) return;
      } else {
        reopen(pick(2) == 0);
      }
    }
  }

  void check(const std::map<std::int64_t, Rec>& history,
             const std::map<std::string, std::int64_t>& last_of, std::int64_t clock,
             std::uint32_t seed) {
    auto recs = records_of(read_all(*log, 1 + rng_step_++ % 700));
    std::map<std::string, std::int64_t> seen_last;
    std::int64_t prev = -1;
    for (const auto& r : recs) {
      ASSERT_GT(r.offset, prev) << "seed " << seed << ": offsets must increase";
      prev = r.offset;
      if (r.key.starts_with("filler")) continue;
      auto h = history.find(r.offset);
      ASSERT_NE(h, history.end()) << "seed " << seed << ": offset " << r.offset << " invented";
      ASSERT_EQ(h->second.key, r.key) << "seed " << seed;
      ASSERT_EQ(h->second.value, r.value) << "seed " << seed;
      seen_last[r.key] = r.offset;
    }
    for (const auto& [key, off] : last_of) {
      const Rec& latest = history.at(off);
      auto it = seen_last.find(key);
      if (it == seen_last.end()) {
        // Only a tombstone may vanish, and only once its delete horizon can have passed.
        ASSERT_FALSE(latest.value) << "seed " << seed << ": key " << key << " lost its value";
        ASSERT_GE(clock, latest.timestamp + 60000)
            << "seed " << seed << ": tombstone of " << key << " removed before delete.retention.ms";
        continue;
      }
      ASSERT_EQ(it->second, off) << "seed " << seed << ": key " << key
                                 << " shows an older record as its latest";
    }
  }
  int rng_step_ = 0;
};

TEST_F(CompactionModel, RandomHistories) {
  cfg.delete_retention_ms = 60000;
  cfg.segment_bytes = 400;
  const char* env = std::getenv("SAMSA_COMPACTION_SEEDS");
#if defined(__SANITIZE_ADDRESS__)
  const int default_seeds = 200;  // the sanitizer build runs the same histories, fewer of them
#else
  const int default_seeds = 2000;
#endif
  const int seeds = env ? std::atoi(env) : default_seeds;
  // Thousands of histories: fdatasync on a real disk would make them minutes.
  if (fs::is_directory("/dev/shm")) {
    const char* old = std::getenv("TMPDIR");
    std::string keep = old ? old : "";
    ::setenv("TMPDIR", "/dev/shm", 1);
    shm = std::make_unique<testing::TempDir>();
    if (old) {
      ::setenv("TMPDIR", keep.c_str(), 1);
    } else {
      ::unsetenv("TMPDIR");
    }
  }
  for (int s = 0; s < seeds; ++s) {
    std::error_code ec;
    log.reset();
    fs::remove_all(ldir(), ec);
    open();
    run_seed(static_cast<std::uint32_t>(s));
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace samsa::io
