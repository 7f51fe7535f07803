// Producer snapshot files: Kafka's byte layout, CRC, damage detection, naming and listing.
#include "io/producer_snapshot.h"

#include <gtest/gtest.h>

#include <fstream>

#include "base/bytes.h"
#include "tests/support/io_testing.h"

namespace samsa::io {
namespace {

std::vector<ProducerSnapshotEntry> sample() {
  return {{1000, 3, 41, 520, 9, 1700000000000, -1, -1}, {1001, 0, 0, 521, 0, 1700000000001, 5, 77}};
}

TEST(ProducerSnapshot, LayoutIsKafkasVersion1) {
  auto b = encode_producer_snapshot(sample());
  ASSERT_EQ(b.size(), 2u + 4 + 4 + 2 * 46);
  EXPECT_EQ(load_be<std::int16_t>(b.data()), 1);
  EXPECT_EQ(load_be<std::int32_t>(b.data() + 6), 2);
  // First entry, field by field (ProducerSnapshot.json's order).
  const std::byte* e = b.data() + 10;
  EXPECT_EQ(load_be<std::int64_t>(e), 1000);
  EXPECT_EQ(load_be<std::int16_t>(e + 8), 3);
  EXPECT_EQ(load_be<std::int32_t>(e + 10), 41);
  EXPECT_EQ(load_be<std::int64_t>(e + 14), 520);
  EXPECT_EQ(load_be<std::int32_t>(e + 22), 9);
  EXPECT_EQ(load_be<std::int64_t>(e + 26), 1700000000000);
  EXPECT_EQ(load_be<std::int32_t>(e + 34), -1);
  EXPECT_EQ(load_be<std::int64_t>(e + 38), -1);
  auto back = decode_producer_snapshot(b);
  ASSERT_TRUE(back.has_value()) << back.error().detail;
  EXPECT_EQ(*back, sample());
}

TEST(ProducerSnapshot, EmptySnapshotRoundTrips) {
  auto b = encode_producer_snapshot({});
  auto back = decode_producer_snapshot(b);
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(back->empty());
}

TEST(ProducerSnapshot, EveryDamageIsDetected) {
  const auto good = encode_producer_snapshot(sample());
  // Every single-bit flip, and every truncation, is refused.
  for (std::size_t i = 0; i < good.size(); ++i) {
    auto b = good;
    b[i] ^= std::byte{0x10};
    EXPECT_FALSE(decode_producer_snapshot(b).has_value()) << "flip at " << i;
  }
  for (std::size_t n = 0; n < good.size(); ++n) {
    std::vector<std::byte> b(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_FALSE(decode_producer_snapshot(b).has_value()) << "cut at " << n;
  }
}

TEST(ProducerSnapshot, FilesAreNamedByOffsetAndListedInOrder) {
  testing::TempDir dir;
  ASSERT_TRUE(write_producer_snapshot(dir.path(), 4096, sample()).has_value());
  ASSERT_TRUE(write_producer_snapshot(dir.path(), 12, {}).has_value());
  std::ofstream(dir / "00000000000000000012.log") << "x";  // not a snapshot
  EXPECT_TRUE(std::filesystem::exists(dir / "00000000000000004096.snapshot"));
  EXPECT_EQ(list_producer_snapshots(dir.path()), (std::vector<std::int64_t>{12, 4096}));
  auto r = read_producer_snapshot(producer_snapshot_path(dir.path(), 4096));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, sample());
  std::ofstream(dir / "00000000000000000099.snapshot") << "garbage";
  auto bad = read_producer_snapshot(dir / "00000000000000000099.snapshot");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().detail.find("00000000000000000099.snapshot"), std::string::npos);
}

}  // namespace
}  // namespace samsa::io
