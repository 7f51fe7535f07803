// Opening a log after a crash: torn and corrupt tails, missing or damaged index files, the clean
// shutdown marker, the recovery point, corruption in closed segments, leftovers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "base/bytes.h"
#include "io/log.h"
#include "io/log_dir.h"
#include "io/record_batch.h"
#include "io/segment.h"
#include "tests/support/io_testing.h"

namespace samsa::io {
namespace {

namespace fs = std::filesystem;

struct Written {
  std::int64_t base, last;
  std::vector<std::byte> bytes;
};

class Recovery : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = Reactor::create({.name = "test"});
    ASSERT_TRUE(r.has_value());
    reactor = std::move(*r);
  }
  fs::path ldir() const { return dir / "t-0"; }
  std::unique_ptr<Log> open(OpenOptions o = {}, LogConfig cfg = {}) {
    auto l = Log::open(*reactor, ldir(), cfg, o);
    EXPECT_TRUE(l.has_value()) << l.error().detail;
    return l ? std::move(*l) : nullptr;
  }
  Written append(Log& log, int records, std::int64_t ts, std::size_t value = 40) {
    Written w;
    w.bytes = testing::make_batch(records, ts, value);
    auto r = testing::append_sync(*reactor, log, w.bytes);
    EXPECT_TRUE(r.has_value());
    w.base = r->base_offset;
    w.last = r->last_offset;
    store_be<std::int64_t>(w.bytes.data(), w.base);
    return w;
  }
  // A log of `n` batches in segments of about seg_bytes, left without close() (as a crash).
  std::vector<Written> build(int n, std::uint64_t seg_bytes = 1 << 30,
                             std::uint32_t interval = 4096) {
    LogConfig cfg;
    cfg.segment_bytes = seg_bytes;
    cfg.index_interval_bytes = interval;
    auto log = open({}, cfg);
    std::vector<Written> ws;
    for (int i = 0; i < n; ++i)
      ws.push_back(append(*log, 1 + i % 3, 1000 + 10 * i));
    return ws;
  }
  std::vector<std::byte> all_bytes(Log& log) {
    auto rr = log.read(log.log_start_offset(), 1 << 26, INT64_MAX);
    EXPECT_TRUE(rr.has_value()) << rr.error().detail;
    return rr ? testing::read_bytes(*rr) : std::vector<std::byte>{};
  }
  static std::vector<std::byte> concat(const std::vector<Written>& ws, std::size_t n) {
    std::vector<std::byte> out;
    for (std::size_t i = 0; i < n; ++i)
      out.insert(out.end(), ws[i].bytes.begin(), ws[i].bytes.end());
    return out;
  }
  fs::path seg(std::int64_t base, const char* suffix) const {
    return ldir() / (detail::segment_name(base) + suffix);
  }
  static void patch(const fs::path& p, std::uint64_t pos, std::byte x) {
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(pos));
    char c;
    f.read(&c, 1);
    c = static_cast<char>(c ^ static_cast<char>(x));
    f.seekp(static_cast<std::streamoff>(pos));
    f.write(&c, 1);
  }
  testing::TempDir dir;
  std::unique_ptr<Reactor> reactor;
};

TEST_F(Recovery, TornTailAtSeveralBytePositions) {
  auto ws = build(6);
  fs::path pristine = dir / "pristine";
  fs::copy(ldir(), pristine, fs::copy_options::recursive);
  std::uint64_t last_start = concat(ws, 5).size();
  std::uint64_t full = concat(ws, 6).size();
  struct Cut {
    std::uint64_t size;
    std::size_t survivors;
  };
  std::vector<Cut> cuts = {
      {last_start + 5, 5},          // inside baseOffset
      {last_start + 11, 5},         // inside batchLength
      {last_start + 30, 5},         // inside the header, after the CRC field
      {last_start + 60, 5},         // one byte short of a full header
      {last_start + 61, 5},         // header complete, no records
      {full - 1, 5},                // one byte short
      {last_start, 5},              // exactly at a boundary: nothing torn
      {full, 6},                    // intact
      {ws[0].bytes.size() + 3, 1},  // early
      {0, 0},                       // empty file
  };
  for (const auto& c : cuts) {
    SCOPED_TRACE("cut at " + std::to_string(c.size));
    fs::remove_all(ldir());
    fs::copy(pristine, ldir(), fs::copy_options::recursive);
    fs::resize_file(seg(0, ".log"), c.size);
    ::testing::internal::CaptureStderr();
    auto log = open();
    std::string err = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(log);
    std::int64_t want_end = c.survivors ? ws[c.survivors - 1].last + 1 : 0;
    EXPECT_EQ(log->log_end_offset(), want_end);
    EXPECT_EQ(fs::file_size(seg(0, ".log")), concat(ws, c.survivors).size());
    EXPECT_EQ(all_bytes(*log), concat(ws, c.survivors));
    bool torn = c.size != concat(ws, c.survivors).size();
    if (torn) {
      EXPECT_NE(err.find(seg(0, ".log").string()), std::string::npos) << err;
      EXPECT_NE(err.find("at byte " + std::to_string(concat(ws, c.survivors).size())),
                std::string::npos)
          << err;
    }
    // The log continues where it stopped.
    auto w = append(*log, 2, 5);
    EXPECT_EQ(w.base, want_end);
    EXPECT_EQ(all_bytes(*log), [&] {
      auto v = concat(ws, c.survivors);
      v.insert(v.end(), w.bytes.begin(), w.bytes.end());
      return v;
    }());
  }
}

TEST_F(Recovery, GarbageAfterTheTailIsCut) {
  auto ws = build(4);
  {
    std::ofstream f(seg(0, ".log"), std::ios::app | std::ios::binary);
    std::string zeros(4096, '\0');
    f.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
  }
  auto log = open();
  EXPECT_EQ(log->log_end_offset(), ws.back().last + 1);
  EXPECT_EQ(fs::file_size(seg(0, ".log")), concat(ws, 4).size());
}

TEST_F(Recovery, CorruptBatchAfterTheRecoveryPointTruncatesThere) {
  auto ws = build(8, 600);  // several segments
  auto log0 = open();
  std::size_t nsegs = log0->segment_count();
  ASSERT_GE(nsegs, 3u);
  log0.reset();
  // Flip a record byte of batch 5 (CRC now wrong); with recovery point 0 everything is scanned.
  std::uint64_t pos_in_seg = 0;
  std::int64_t seg_base = 0;
  for (std::size_t i = 0; i < 5; ++i) {
    if (fs::exists(seg(ws[i + 1].base, ".log"))) {
      seg_base = ws[i + 1].base;
      pos_in_seg = 0;
    } else {
      pos_in_seg += ws[i].bytes.size();
    }
  }
  patch(seg(seg_base, ".log"), pos_in_seg + 70, std::byte{0x10});
  ::testing::internal::CaptureStderr();
  auto log = open();
  std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(log);
  EXPECT_EQ(log->log_end_offset(), ws[5].base);
  EXPECT_EQ(all_bytes(*log), concat(ws, 5));
  EXPECT_NE(err.find("CRC32C mismatch"), std::string::npos) << err;
  EXPECT_NE(err.find(seg(seg_base, ".log").string() + ": "), std::string::npos) << err;
  // Segments after the bad one are gone.
  for (const auto& w : ws) {
    if (w.base > seg_base) {
      EXPECT_FALSE(fs::exists(seg(w.base, ".log"))) << w.base;
    }
  }
}

TEST_F(Recovery, DamagedOrMissingIndexFilesAreRebuiltIdentically) {
  LogConfig cfg;
  cfg.segment_bytes = 2000;
  cfg.index_interval_bytes = 150;
  std::vector<Written> ws;
  {
    auto log = open({}, cfg);
    for (int i = 0; i < 60; ++i)
      ws.push_back(append(*log, 1 + i % 3, 1000 + 10 * i));
    ASSERT_GE(log->segment_count(), 5u);
    ASSERT_TRUE(log->close().has_value());
  }
  std::vector<std::int64_t> bases;
  for (const auto& w : ws) {
    if (fs::exists(seg(w.base, ".log"))) bases.push_back(w.base);
  }
  ASSERT_GE(bases.size(), 5u);
  auto idx1 = testing::file_bytes(seg(bases[1], ".index"));
  auto tidx2 = testing::file_bytes(seg(bases[2], ".timeindex"));
  auto idx3 = testing::file_bytes(seg(bases[3], ".index"));
  auto idx0 = testing::file_bytes(seg(bases[0], ".index"));
  ASSERT_GE(idx1.size(), 16u);
  ASSERT_GE(tidx2.size(), 24u);
  fs::remove(seg(bases[1], ".index"));               // missing
  fs::resize_file(seg(bases[2], ".timeindex"), 13);  // not whole entries
  {                                                  // positions not increasing
    auto b = idx3;
    store_be<std::int32_t>(b.data() + 4, 1 << 20);  // beyond the log file too
    std::ofstream(seg(bases[3], ".index"), std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  }
  OpenOptions o;
  o.recovery_point = ws.back().last + 1;  // nothing to scan: only the index checks run
  ::testing::internal::CaptureStderr();
  auto log = open(o, cfg);
  std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(log);
  EXPECT_NE(err.find("rebuilding the index of " + seg(bases[1], ".log").string()),
            std::string::npos)
      << err;
  EXPECT_EQ(testing::file_bytes(seg(bases[1], ".index")), idx1);
  EXPECT_EQ(testing::file_bytes(seg(bases[2], ".timeindex")), tidx2);
  EXPECT_EQ(testing::file_bytes(seg(bases[3], ".index")), idx3);
  EXPECT_EQ(testing::file_bytes(seg(bases[0], ".index")), idx0);
  EXPECT_EQ(log->log_end_offset(), ws.back().last + 1);
  EXPECT_EQ(all_bytes(*log), concat(ws, ws.size()));
  // Lookups through the rebuilt indexes.
  for (const auto& w : ws) {
    auto rr = log->read(w.last, 1, INT64_MAX, true);
    ASSERT_TRUE(rr.has_value());
    EXPECT_EQ(testing::read_bytes(*rr), w.bytes);
  }
}

TEST_F(Recovery, CleanShutdownMarkerSkipsTheScanAndIsRemoved) {
  std::vector<Written> ws;
  {
    auto d = LogDir::open(dir.path());
    ASSERT_TRUE(d.has_value());
    auto log = (*d)->open_log(*reactor, {"t", 0}, LogConfig{});
    ASSERT_TRUE(log.has_value());
    for (int i = 0; i < 5; ++i)
      ws.push_back(append(**log, 2, 100 + i));
    ASSERT_TRUE((*log)->close().has_value());
    ASSERT_TRUE((*d)->shutdown_clean().has_value());
  }
  EXPECT_TRUE(fs::exists(dir / ".kafka_cleanshutdown"));
  // Break the last batch's CRC but not its framing: only a full scan would notice.
  patch(seg(0, ".log"), concat(ws, 4).size() + 80, std::byte{0x01});
  {
    auto d = LogDir::open(dir.path());
    ASSERT_TRUE(d.has_value());
    EXPECT_TRUE((*d)->had_clean_shutdown());
    EXPECT_FALSE(fs::exists(dir / ".kafka_cleanshutdown"));
    auto log = (*d)->open_log(*reactor, {"t", 0}, LogConfig{});
    ASSERT_TRUE(log.has_value());
    EXPECT_EQ((*log)->log_end_offset(), ws.back().last + 1);  // trusted: not scanned
    // A crash now (no close, no marker)...
  }
  {
    auto d = LogDir::open(dir.path());
    ASSERT_TRUE(d.has_value());
    EXPECT_FALSE((*d)->had_clean_shutdown());
    auto log = (*d)->open_log(*reactor, {"t", 0}, LogConfig{});
    ASSERT_TRUE(log.has_value());
    EXPECT_EQ((*log)->log_end_offset(), ws.back().base);  // ...is recovered with a scan
  }
}

TEST_F(Recovery, CleanOpenOfTheActiveSegmentMatchesAFullScan) {
  LogConfig cfg;
  cfg.index_interval_bytes = 100;
  std::vector<Written> ws;
  {
    auto log = open({}, cfg);
    // Past Log::kRescannedActiveBytes: close writes the index files.
    for (int i = 0; i < 30; ++i)
      ws.push_back(append(*log, 1 + i % 4, 500 + 7 * (i % 5), 20000));
    ASSERT_TRUE(log->close().has_value());
  }
  ASSERT_TRUE(fs::exists(seg(0, ".index")));
  OpenOptions clean;
  clean.clean_shutdown = true;
  auto a = open(clean, cfg);
  EXPECT_EQ(a->log_end_offset(), ws.back().last + 1);
  auto more = append(*a, 3, 900);
  ASSERT_TRUE(a->close().has_value());
  auto idx_clean = testing::file_bytes(seg(0, ".index"));
  auto tidx_clean = testing::file_bytes(seg(0, ".timeindex"));
  a.reset();
  // The same log recovered by a full scan writes the same entries (except the final time entry
  // the first close() added in the middle, which the scan cannot know about).
  auto b = open({}, cfg);
  EXPECT_EQ(b->log_end_offset(), more.last + 1);
  ASSERT_TRUE(b->close().has_value());
  EXPECT_EQ(testing::file_bytes(seg(0, ".index")), idx_clean);
  auto tidx_scan = testing::file_bytes(seg(0, ".timeindex"));
  EXPECT_LE(tidx_scan.size(), tidx_clean.size());
  EXPECT_EQ(std::vector<std::byte>(tidx_clean.end() - 12, tidx_clean.end()),
            std::vector<std::byte>(tidx_scan.end() - 12, tidx_scan.end()));
}

// A small active segment closes without index files (Log::kRescannedActiveBytes); the clean
// open rebuilds its entries from a scan, exactly as the appends made them.
TEST_F(Recovery, ASmallActiveSegmentIsRescannedAtACleanOpen) {
  LogConfig cfg;
  cfg.index_interval_bytes = 100;
  std::vector<Written> ws;
  {
    auto log = open({}, cfg);
    for (int i = 0; i < 30; ++i)
      ws.push_back(append(*log, 1 + i % 4, 500 + 7 * (i % 5)));
    ASSERT_TRUE(log->close().has_value());
  }
  EXPECT_FALSE(fs::exists(seg(0, ".index")));
  EXPECT_FALSE(fs::exists(seg(0, ".timeindex")));
  OpenOptions clean;
  clean.clean_shutdown = true;
  auto a = open(clean, cfg);
  EXPECT_EQ(a->log_end_offset(), ws.back().last + 1);
  // Now large: this close writes the entries, those of the small part rebuilt by the scan.
  std::int64_t end = 0;
  for (int i = 0; i < 60; ++i)
    end = append(*a, 1, 900 + i, 20000).last + 1;
  ASSERT_TRUE(a->close().has_value());
  auto idx_clean = testing::file_bytes(seg(0, ".index"));
  auto tidx_clean = testing::file_bytes(seg(0, ".timeindex"));
  EXPECT_GT(idx_clean.size(), 30u * 8);
  a.reset();
  auto b = open({}, cfg);  // a full recovery scan: the same entries
  EXPECT_EQ(b->log_end_offset(), end);
  ASSERT_TRUE(b->close().has_value());
  EXPECT_EQ(testing::file_bytes(seg(0, ".index")), idx_clean);
  EXPECT_EQ(testing::file_bytes(seg(0, ".timeindex")), tidx_clean);
}

TEST_F(Recovery, CorruptClosedSegmentRefusesToOpen) {
  auto ws = build(10, 500);
  std::vector<std::int64_t> bases;
  for (const auto& w : ws) {
    if (fs::exists(seg(w.base, ".log"))) bases.push_back(w.base);
  }
  ASSERT_GE(bases.size(), 3u);
  // Closed segment 1, below the recovery point: damage a record and lose its index.
  patch(seg(bases[1], ".log"), 75, std::byte{0x04});
  fs::remove(seg(bases[1], ".index"));
  OpenOptions o;
  o.recovery_point = ws.back().last + 1;
  auto l = Log::open(*reactor, ldir(), LogConfig{}, o);
  ASSERT_FALSE(l.has_value());
  EXPECT_EQ(l.error().code, Errc::fenced);
  EXPECT_NE(l.error().detail.find(seg(bases[1], ".log").string()), std::string::npos)
      << l.error().detail;
  EXPECT_NE(l.error().detail.find("at byte 0"), std::string::npos) << l.error().detail;
  // Nothing was dropped.
  EXPECT_EQ(fs::file_size(seg(bases[2], ".log")) > 0, true);
}

TEST_F(Recovery, HeaderCorruptionFoundByAReadFencesTheLog) {
  auto ws = build(10, 500);
  std::vector<std::int64_t> bases;
  for (const auto& w : ws) {
    if (fs::exists(seg(w.base, ".log"))) bases.push_back(w.base);
  }
  ASSERT_GE(bases.size(), 3u);
  OpenOptions o;
  o.recovery_point = ws.back().last + 1;
  auto log = open(o);
  // The second batch of closed segment 0: break its magic byte.
  std::uint64_t second = ws[0].bytes.size();
  patch(seg(0, ".log"), second + 16, std::byte{0x07});
  auto rr = log->read(0, 1 << 20, INT64_MAX);
  ASSERT_FALSE(rr.has_value());
  EXPECT_EQ(rr.error().code, Errc::fenced);
  EXPECT_NE(rr.error().detail.find(seg(0, ".log").string()), std::string::npos);
  EXPECT_NE(rr.error().detail.find("at byte " + std::to_string(second)), std::string::npos)
      << rr.error().detail;
  EXPECT_TRUE(log->fenced());
  testing::OwnedAppend op(testing::make_batch(1, 1));
  auto a = log->append(&op);
  ASSERT_FALSE(a.has_value());
  EXPECT_EQ(a.error().code, Errc::fenced);
}

TEST_F(Recovery, RecoveryPointDecidesWhatIsScanned) {
  auto ws = build(10, 500);
  std::vector<std::int64_t> bases;
  for (const auto& w : ws) {
    if (fs::exists(seg(w.base, ".log"))) bases.push_back(w.base);
  }
  ASSERT_GE(bases.size(), 3u);
  // A record byte flipped in closed segment 0 (CRC wrong, framing fine).
  patch(seg(0, ".log"), 70, std::byte{0x02});
  {
    OpenOptions o;
    o.recovery_point = bases.back();  // segment 0 is trusted, not scanned
    auto log = open(o);
    EXPECT_EQ(log->log_end_offset(), ws.back().last + 1);
  }
  {
    OpenOptions o;
    o.recovery_point = 0;  // now it is the tail: everything from the bad batch on goes
    auto log = open(o);
    EXPECT_EQ(log->log_end_offset(), 0);
    EXPECT_EQ(log->segment_count(), 1u);
  }
}

TEST_F(Recovery, LeftoversAreRemovedAndOldSegmentsBelowTheStart) {
  auto ws = build(10, 500);
  std::vector<std::int64_t> bases;
  for (const auto& w : ws) {
    if (fs::exists(seg(w.base, ".log"))) bases.push_back(w.base);
  }
  ASSERT_GE(bases.size(), 3u);
  std::ofstream(ldir() / "00000000000000000777.log.deleted") << "x";
  std::ofstream(ldir() / "00000000000000000999.index") << "";  // no .log
  std::ofstream(ldir() / "leader-epoch-checkpoint.tmp") << "junk";
  OpenOptions o;
  o.log_start_offset = bases[2];
  auto log = open(o);
  EXPECT_FALSE(fs::exists(ldir() / "00000000000000000777.log.deleted"));
  EXPECT_FALSE(fs::exists(ldir() / "00000000000000000999.index"));
  EXPECT_FALSE(fs::exists(ldir() / "leader-epoch-checkpoint.tmp"));
  EXPECT_FALSE(fs::exists(seg(bases[0], ".log")));
  EXPECT_FALSE(fs::exists(seg(bases[1], ".log")));
  EXPECT_TRUE(fs::exists(seg(bases[2], ".log")));
  EXPECT_EQ(log->log_start_offset(), bases[2]);
  auto bad = log->read(bases[2] - 1, 100, INT64_MAX);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code, Errc::offset_out_of_range);
}

}  // namespace
}  // namespace samsa::io
