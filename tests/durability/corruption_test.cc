// Corruption outcomes (io/README.md, "Corruption"):
//  - in the tail (from the segment holding the recovery point on): recovery truncates at the
//    first bad batch, with a warning naming the file and byte; acknowledged data below the
//    recovery point is untouched, only what follows the bad batch goes;
//  - in a closed segment below the recovery point: nothing is ever dropped. A damaged batch
//    header fences the log on the read that meets it (error naming file and byte); a damaged
//    record body is served as stored and fails the CRC check every client makes; an open that
//    has to rebuild such a segment's index refuses, naming file and byte.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <random>

#include "base/bytes.h"
#include "io/log.h"
#include "io/log_dir.h"
#include "io/record_batch.h"
#include "io/segment.h"
#include "tests/support/io_testing.h"

namespace samsa::io {
namespace {

namespace fs = std::filesystem;

struct Batch {
  std::int64_t base, last;
  std::vector<std::byte> bytes;
  fs::path file;
  std::uint64_t position;
};

class Corruption : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = Reactor::create({.name = "test"});
    ASSERT_TRUE(r.has_value());
    reactor = std::move(*r);
    cfg.segment_bytes = 16 * 1024;
    cfg.index_interval_bytes = 1024;
    // N acknowledged batches, checkpointed (the recovery point covers them), then a "crash".
    auto d = LogDir::open(root());
    ASSERT_TRUE(d.has_value());
    auto log = (*d)->open_log(*reactor, {"c", 0}, cfg);
    ASSERT_TRUE(log.has_value());
    std::mt19937 rng(3);
    for (int i = 0; i < 60; ++i) {
      auto bytes =
          testing::make_batch(1 + static_cast<int>(rng() % 4), 1000 + i, 100 + rng() % 900, i);
      auto r = testing::append_sync(*reactor, **log, bytes);
      ASSERT_TRUE(r.has_value());
      store_be<std::int64_t>(bytes.data(), r->base_offset);
      acked.push_back({r->base_offset, r->last_offset, std::move(bytes), {}, 0});
    }
    ASSERT_TRUE((*d)->write_checkpoints().has_value());
    // Where each batch lives.
    for (auto& b : acked) {
      auto rr = (*log)->read(b.base, 1, INT64_MAX, true);
      ASSERT_TRUE(rr.has_value());
      b.file = rr->slices[0].file->path;
      b.position = rr->slices[0].position;
    }
    ASSERT_GE((*log)->segment_count(), 4u);
    fs::copy(root(), pristine(), fs::copy_options::recursive);
  }
  fs::path root() const { return dir / "data"; }
  fs::path pristine() const { return dir / "pristine"; }
  fs::path pdir() const { return root() / "c-0"; }
  void restore() {
    fs::remove_all(root());
    fs::copy(pristine(), root(), fs::copy_options::recursive);
  }
  static void flip(const fs::path& p, std::uint64_t pos, std::uint8_t mask) {
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(pos));
    char c;
    f.read(&c, 1);
    c = static_cast<char>(c ^ static_cast<char>(mask));
    f.seekp(static_cast<std::streamoff>(pos));
    f.write(&c, 1);
  }
  std::map<fs::path, std::uintmax_t> sizes() const {
    std::map<fs::path, std::uintmax_t> m;
    for (const auto& de : fs::directory_iterator(pdir())) {
      if (de.path().extension() == ".log") m[de.path()] = de.file_size();
    }
    return m;
  }
  Result<std::unique_ptr<Log>> reopen() {
    auto d = LogDir::open(root());
    if (!d) return std::unexpected(d.error());
    logdir = std::move(*d);
    return logdir->open_log(*reactor, {"c", 0}, cfg);
  }
  testing::TempDir dir;
  std::unique_ptr<Reactor> reactor;
  std::unique_ptr<LogDir> logdir;
  LogConfig cfg;
  std::vector<Batch> acked;
};

// Unacknowledged batches at the tail (written, never synced or acknowledged: what a power cut
// leaves behind), one of them damaged: recovery cuts there and keeps every acknowledged batch.
TEST_F(Corruption, FlipInTheUnacknowledgedTailTruncatesThereOnly) {
  const Batch& last = acked.back();
  std::uint64_t tail_start = last.position + last.bytes.size();
  // Three more batches continuing the offsets, appended behind the engine's back.
  std::vector<std::vector<std::byte>> extra;
  std::int64_t next = last.last + 1;
  for (int i = 0; i < 3; ++i) {
    auto b = testing::make_batch(3, 5000 + i, 300, 100 + i);
    store_be<std::int64_t>(b.data(), next);
    next += 3;
    extra.push_back(std::move(b));
  }
  std::vector<std::uint64_t> starts;
  {
    std::ofstream f(pristine() / "c-0" / last.file.filename(), std::ios::app | std::ios::binary);
    std::uint64_t pos = tail_start;
    for (const auto& b : extra) {
      starts.push_back(pos);
      f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
      pos += b.size();
    }
  }
  // Damage the second extra batch at several places: length, magic, CRC field, a record.
  for (std::uint64_t off : {std::uint64_t{9}, std::uint64_t{16}, std::uint64_t{19},
                            std::uint64_t{61}, std::uint64_t{200}, extra[1].size() - 1}) {
    SCOPED_TRACE("byte " + std::to_string(off) + " of the damaged batch");
    restore();
    auto seg = pdir() / last.file.filename();
    flip(seg, starts[1] + off, 0x20);
    ::testing::internal::CaptureStderr();
    auto log = reopen();
    std::string err = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(log.has_value()) << log.error().detail;
    // Cut at the damaged batch: the undamaged unacknowledged one before it may stay.
    EXPECT_EQ((*log)->log_end_offset(), last.last + 1 + 3);
    EXPECT_EQ(fs::file_size(seg), starts[1]);
    EXPECT_NE(err.find(seg.string()), std::string::npos) << err;
    EXPECT_NE(err.find("at byte " + std::to_string(starts[1])), std::string::npos) << err;
    for (const auto& b : acked) {
      auto rr = (*log)->read(b.base, 1, INT64_MAX, true);
      ASSERT_TRUE(rr.has_value()) << rr.error().detail;
      EXPECT_EQ(testing::read_bytes(*rr), b.bytes);
    }
  }
}

// A damaged batch header in a closed segment: the open trusts the segment (it is below the
// recovery point and its index is sound); the first read that meets the header fences the log,
// naming the file and the byte. Nothing is truncated, then or on the next open.
TEST_F(Corruption, HeaderFlipInAClosedSegmentFencesTheReadThatMeetsIt) {
  const Batch& victim = acked[3];  // in the first (closed) segment
  ASSERT_EQ(victim.file, acked[0].file);
  for (std::uint64_t off : {std::uint64_t{1}, std::uint64_t{7}, std::uint64_t{10},
                            std::uint64_t{16}, std::uint64_t{25}}) {
    SCOPED_TRACE("header byte " + std::to_string(off));
    restore();
    auto before = sizes();
    auto seg = pdir() / victim.file.filename();
    flip(seg, victim.position + off, 0x40);
    auto log = reopen();
    ASSERT_TRUE(log.has_value()) << log.error().detail;
    EXPECT_EQ((*log)->log_end_offset(), acked.back().last + 1);
    auto rr = (*log)->read(0, 1 << 20, INT64_MAX);
    ASSERT_FALSE(rr.has_value());
    EXPECT_EQ(rr.error().code, Errc::fenced);
    EXPECT_NE(rr.error().detail.find(seg.string()), std::string::npos) << rr.error().detail;
    EXPECT_NE(rr.error().detail.find("at byte " + std::to_string(victim.position)),
              std::string::npos)
        << rr.error().detail;
    EXPECT_TRUE((*log)->fenced());
    testing::OwnedAppend op(testing::make_batch(1, 1));
    EXPECT_FALSE((*log)->append(&op).has_value());
    log->reset();
    EXPECT_EQ(sizes(), before);  // nothing dropped
  }
}

// Random single-byte damage anywhere in a closed segment's log file: whatever the byte, either a
// read fences naming the file, or the bytes come back as stored with exactly one batch failing
// its CRC (what a consumer checks). The log never gets shorter. The one exception is Kafka's
// format: partitionLeaderEpoch (bytes 12-15 of a batch) is outside the CRC by design, so damage
// there is served unnoticed (counted, not failed).
TEST_F(Corruption, RandomFlipsInAClosedSegmentAreNeverDroppedSilently) {
  std::mt19937_64 rng(11);
  const fs::path seg_name = acked[0].file.filename();
  std::uint64_t seg_size = fs::file_size(pristine() / "c-0" / seg_name);
  int fenced = 0, crc = 0, epoch_field = 0;
  for (int round = 0; round < 60; ++round) {
    restore();
    std::uint64_t pos = rng() % seg_size;
    SCOPED_TRACE("byte " + std::to_string(pos));
    bool in_epoch = false;
    for (const auto& b : acked) {
      if (b.file.filename() == seg_name && pos >= b.position + 12 && pos < b.position + 16) {
        in_epoch = true;
      }
    }
    flip(pdir() / seg_name, pos, static_cast<std::uint8_t>(1u << (rng() % 8)));
    auto before = sizes();
    auto log = reopen();
    ASSERT_TRUE(log.has_value()) << log.error().detail;
    EXPECT_EQ((*log)->log_end_offset(), acked.back().last + 1);
    auto rr = (*log)->read(0, 1 << 24, INT64_MAX);
    if (!rr) {
      EXPECT_EQ(rr.error().code, Errc::fenced);
      EXPECT_NE(rr.error().detail.find((pdir() / seg_name).string()), std::string::npos);
      ++fenced;
    } else {
      auto got = testing::read_bytes(*rr);
      std::size_t p = 0;
      int bad = 0;
      for (const auto& b : acked) {
        ASSERT_LE(p + b.bytes.size(), got.size());
        std::span<const std::byte> mine(got.data() + p, b.bytes.size());
        if (!std::equal(mine.begin(), mine.end(), b.bytes.begin())) {
          ++bad;
          EXPECT_EQ(Log::validate_batch(mine, 0).has_value(), in_epoch);
        }
        p += b.bytes.size();
      }
      EXPECT_EQ(p, got.size());
      EXPECT_EQ(bad, 1);
      ++(in_epoch ? epoch_field : crc);
    }
    log->reset();
    EXPECT_EQ(sizes(), before);
  }
  std::printf(
      "random flips: %d fenced a read, %d served with a failing CRC, %d in the "
      "leader-epoch field (outside the CRC)\n",
      fenced, crc, epoch_field);
  EXPECT_GT(fenced, 0);
  EXPECT_GT(crc, 0);
}

// When the index of such a segment has to be rebuilt (lost in a power cut), the open scans it
// with CRCs and refuses, naming the file and the damaged batch's byte.
TEST_F(Corruption, BodyFlipFoundWhileRebuildingAnIndexRefusesTheOpen) {
  const Batch& victim = acked[2];
  restore();
  auto seg = pdir() / victim.file.filename();
  flip(seg, victim.position + 70, 0x01);
  fs::remove(fs::path(seg).replace_extension(".index"));
  auto before = sizes();
  auto log = reopen();
  ASSERT_FALSE(log.has_value());
  EXPECT_EQ(log.error().code, Errc::fenced);
  EXPECT_NE(log.error().detail.find(seg.string()), std::string::npos) << log.error().detail;
  EXPECT_NE(log.error().detail.find("at byte " + std::to_string(victim.position)),
            std::string::npos)
      << log.error().detail;
  EXPECT_EQ(sizes(), before);
}

}  // namespace
}  // namespace samsa::io
