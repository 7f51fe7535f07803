#include "replication/quorum/snapshot_file.h"

#include <gtest/gtest.h>

#include <fstream>

#include "base/bytes.h"
#include "io/batch_builder.h"
#include "io/record_batch.h"
#include "replication/quorum/control_records.h"
#include "tests/support/io_testing.h"

namespace samsa::replication::quorum {
namespace {

using io::testing::TempDir;

// An image of `n` records: topics, partitions and configs with 2 KB values, so a few thousand
// of them fill several 1 MiB batches.
std::vector<MetadataRecord> image(int n) {
  std::vector<MetadataRecord> out;
  for (int i = 0; i < n; ++i) {
    Uuid id{};
    id[0] = static_cast<std::uint8_t>(i);
    id[1] = static_cast<std::uint8_t>(i >> 8);
    switch (i % 3) {
      case 0:
        out.push_back(TopicRecord{"topic-" + std::to_string(i), id});
        break;
      case 1:
        out.push_back(PartitionRecord{id, i, {1, 2, 3}, {1, 2}, 1, i, i + 1});
        break;
      default:
        out.push_back(ConfigRecord{ConfigResource::topic, "topic-" + std::to_string(i), "k",
                                   std::string(2000, static_cast<char>('a' + i % 26))});
    }
  }
  return out;
}

std::vector<std::vector<std::byte>> encoded(const std::vector<MetadataRecord>& rs) {
  std::vector<std::vector<std::byte>> out;
  for (const auto& r : rs)
    out.push_back(encode_record(r));
  return out;
}

void touch(const std::filesystem::path& p) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << "x";
}

// Byte positions of the batches in a snapshot's bytes.
std::vector<std::size_t> batch_starts(std::span<const std::byte> b) {
  std::vector<std::size_t> out;
  for (std::size_t pos = 0; pos + io::batch::kLogOverhead <= b.size();) {
    out.push_back(pos);
    pos += io::batch::kLogOverhead +
           static_cast<std::size_t>(load_be<std::int32_t>(b.data() + pos + io::batch::kLength));
  }
  return out;
}

void expect_refused(std::span<const std::byte> bytes, std::string_view words) {
  auto r = decode_snapshot(bytes, "snap");
  ASSERT_FALSE(r) << "accepted";
  EXPECT_EQ(r.error().detail.rfind("snap: at byte ", 0), 0u) << r.error().detail;
  EXPECT_NE(r.error().detail.find(words), std::string::npos) << r.error().detail;
}

TEST(QuorumSnapshotFile, NamesAreKafkas) {
  EXPECT_EQ(snapshot_file_name({1234, 7}), "00000000000000001234-0000000007.checkpoint");
  EXPECT_EQ(snapshot_file_name({0, 0}), "00000000000000000000-0000000000.checkpoint");
  EXPECT_EQ(parse_snapshot_file_name("00000000000000001234-0000000007.checkpoint"),
            (SnapshotId{1234, 7}));
  EXPECT_EQ(parse_snapshot_file_name("09223372036854775807-2147483647.checkpoint"),
            (SnapshotId{INT64_MAX, INT32_MAX}));
  for (const char* bad : {
           "00000000000000001234-0000000007.checkpoint.part",
           "00000000000000001234-0000000007.checkpoint.deleted",
           "0000000000000001234-0000000007.checkpoint",     // 19 digits
           "00000000000000001234-000000007.checkpoint",     // 9 digits
           "00000000000000001234_0000000007.checkpoint",    // separator
           "0000000000000000123x-0000000007.checkpoint",    // not a digit
           "-0000000000000001234-0000000007.checkpoint",    // sign
           "00000000000000001234-2147483648.checkpoint",    // epoch past int32
           "99999999999999999999-0000000001.checkpoint",    // offset past int64
           "00000000000000001234-0000000007.checkpoint2",   // suffix
           "00000000000000000000.log", "quorum-state", "",  //
       }) {
    EXPECT_FALSE(parse_snapshot_file_name(bad)) << bad;
  }
}

TEST(QuorumSnapshotFile, EncodeWriteReadRoundTripsThousandsOfRecords) {
  TempDir d;
  const auto recs = image(4000);
  const SnapshotId id{12345, 6};
  const auto bytes = encode_snapshot(recs, id, 1700000000000);
  EXPECT_EQ(bytes, encode_snapshot(recs, id, 1700000000000)) << "not deterministic";

  // Layout: header control batch, several data batches of at most 1 MiB, footer control batch;
  // offsets continuous from 0; every batch of the snapshot's epoch.
  const auto starts = batch_starts(bytes);
  ASSERT_GE(starts.size(), 5u);
  std::int64_t next = 0;
  std::size_t data_records = 0;
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const std::size_t end = i + 1 < starts.size() ? starts[i + 1] : bytes.size();
    auto b = std::span(bytes).subspan(starts[i], end - starts[i]);
    auto info = io::batch::validate(b, 0);
    ASSERT_TRUE(info) << info.error().detail;
    EXPECT_EQ(info->base_offset, next);
    EXPECT_EQ(info->partition_leader_epoch, 6);
    EXPECT_LE(b.size(), kSnapshotBatchBytes);
    next += info->record_count;
    const bool edge = i == 0 || i + 1 == starts.size();
    EXPECT_EQ(info->is_control(), edge) << "batch " << i;
    if (!edge) data_records += static_cast<std::size_t>(info->record_count);
  }
  EXPECT_EQ(data_records, recs.size());
  auto header = decode_control_batch(std::span(bytes).first(starts[1]));
  ASSERT_TRUE(header);
  EXPECT_EQ(std::get<SnapshotHeaderRecord>(*header).last_contained_log_timestamp, 1700000000000);
  auto footer = decode_control_batch(std::span(bytes).subspan(starts.back()));
  ASSERT_TRUE(footer);
  EXPECT_EQ(control_type(*footer), ControlRecordType::snapshot_footer);

  auto path = write_snapshot_file(d.path(), id, bytes);
  ASSERT_TRUE(path) << path.error().detail;
  EXPECT_EQ(*path, d / "00000000000000012345-0000000006.checkpoint");
  EXPECT_FALSE(std::filesystem::exists(d / "00000000000000012345-0000000006.checkpoint.part"));
  EXPECT_EQ(std::filesystem::file_size(*path), bytes.size());
  auto back = read_snapshot_file(*path);
  ASSERT_TRUE(back) << back.error().detail;
  EXPECT_EQ(encoded(*back), encoded(recs));
}

TEST(QuorumSnapshotFile, EmptyImageAndOversizedRecord) {
  auto empty = decode_snapshot(encode_snapshot({}, {0, 0}, -1), "empty");
  ASSERT_TRUE(empty) << empty.error().detail;
  EXPECT_TRUE(empty->empty());
  // A record larger than a batch's budget gets a batch of its own.
  std::vector<MetadataRecord> recs = image(3);
  PartitionRecord big;
  big.replicas.assign(300000, 7);  // 1.2 MB
  recs.insert(recs.begin() + 1, big);
  const auto bytes = encode_snapshot(recs, {10, 1}, 5);
  EXPECT_EQ(batch_starts(bytes).size(), 5u);  // header, [r0], [big], [r1 r2], footer
  auto back = decode_snapshot(bytes, "big");
  ASSERT_TRUE(back) << back.error().detail;
  EXPECT_EQ(encoded(*back), encoded(recs));
}

TEST(QuorumSnapshotFile, FlippedByteInADataBatchFailsItsCrc) {
  TempDir d;
  const auto bytes = encode_snapshot(image(3000), {3000, 2}, 1);
  const auto starts = batch_starts(bytes);
  auto bad = bytes;
  bad[starts[2] + 500] ^= std::byte{0x10};  // inside the second data batch's records
  auto path = write_snapshot_file(d.path(), {3000, 2}, bad);
  ASSERT_TRUE(path);
  auto r = read_snapshot_file(*path);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, io::Errc::corrupt_batch);
  EXPECT_NE(r.error().detail.find(path->string()), std::string::npos) << r.error().detail;
  EXPECT_NE(r.error().detail.find("at byte " + std::to_string(starts[2])), std::string::npos)
      << r.error().detail;
  EXPECT_NE(r.error().detail.find("CRC32C mismatch"), std::string::npos) << r.error().detail;
}

TEST(QuorumSnapshotFile, TruncatedFilesAreRefused) {
  const auto bytes = encode_snapshot(image(3000), {3000, 2}, 1);
  const auto starts = batch_starts(bytes);
  const std::span<const std::byte> all(bytes);
  expect_refused({}, "empty");
  expect_refused(all.first(30), "less than a batch header");
  expect_refused(all.first(starts[2] + 1000), "truncated: the batch is");
  // Cut exactly between batches: every batch whole, the footer gone.
  expect_refused(all.first(starts.back()), "no snapshot footer");
  expect_refused(all.first(bytes.size() - 1), "truncated");
}

TEST(QuorumSnapshotFile, HeaderNotFirstAndOtherMisplacedBatchesAreRefused) {
  const std::vector<MetadataRecord> recs = image(3);
  const auto good = encode_snapshot(recs, {3, 1}, 1);
  const auto starts = batch_starts(good);
  ASSERT_EQ(starts.size(), 3u);
  const std::span<const std::byte> g(good);
  const auto header = g.first(starts[1]);
  const auto data = g.subspan(starts[1], starts[2] - starts[1]);
  const auto footer = g.subspan(starts[2]);
  auto cat = [](std::initializer_list<std::span<const std::byte>> parts) {
    std::vector<std::byte> out;
    for (auto p : parts)
      out.insert(out.end(), p.begin(), p.end());
    return out;
  };
  // A data batch first (its offsets renumbered from 0 so only the order is wrong).
  std::vector<io::SimpleRecord> rs;
  for (const auto& r : recs) {
    auto v = encode_record(r);
    rs.push_back({1, std::nullopt, std::string(reinterpret_cast<const char*>(v.data()), v.size())});
  }
  const auto data0 = io::build_batch(rs);
  expect_refused(cat({data0, header, footer}),
                 "first batch is a data batch, expected SNAPSHOT_HEADER");
  expect_refused(cat({footer}), "first batch is SNAPSHOT_FOOTER, expected SNAPSHOT_HEADER");
  const auto header1 = build_control_batch(SnapshotHeaderRecord{1}, {1, 1, 1});
  expect_refused(cat({header, header1, data, footer}),
                 "a control batch is SNAPSHOT_HEADER, expected SNAPSHOT_FOOTER");
  expect_refused(cat({header, data, footer, footer}), "bytes after the snapshot footer");
  expect_refused(cat({header, footer}), "base offset 4, expected 1");
  expect_refused(cat({header, data, data, footer}), "base offset 1, expected 4");
  // A leader-change record inside a snapshot.
  const auto lc = build_control_batch(LeaderChangeMessage{1, {1}, {1}}, {1, 1, 1});
  expect_refused(cat({header, lc, footer}), "a control batch is LEADER_CHANGE");
  // A data record that is not a metadata record.
  std::vector<io::SimpleRecord> junk = {{1, std::nullopt, std::string("\x07junk"), {}}};
  io::BatchBuilder::Options o;
  o.base_offset = 1;
  const auto junk_batch = io::build_batch(junk, o);
  auto bad_footer = build_control_batch(SnapshotFooterRecord{}, {2, 1, 1});
  expect_refused(cat({header, junk_batch, bad_footer}),
                 "record at offset 1 is not a metadata record");
  EXPECT_TRUE(decode_snapshot(cat({header, data, footer}), "ok"));
}

TEST(QuorumSnapshotFile, ReadingAMissingFileIsNotFound) {
  TempDir d;
  auto r = read_snapshot_file(d / snapshot_file_name({1, 1}));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, io::Errc::not_found);
}

TEST(QuorumSnapshotFile, ListIgnoresJunkAndPartFilesAndDeleteBeforeKeepsNewer) {
  TempDir d;
  for (SnapshotId id : {SnapshotId{300, 3}, SnapshotId{100, 1}, SnapshotId{200, 2}})
    touch(d / snapshot_file_name(id));
  for (const char* junk : {"00000000000000000400-0000000004.checkpoint.part",
                           "00000000000000000500-0000000004.checkpoint.deleted",
                           "0000000000000000600-0000000004.checkpoint", "quorum-state",
                           "00000000000000000000.log", "leader-epoch-checkpoint", "junk"})
    touch(d / junk);
  std::filesystem::create_directory(d / snapshot_file_name({700, 5}));
  auto ids = list_snapshots(d.path());
  ASSERT_TRUE(ids) << ids.error().detail;
  EXPECT_EQ(*ids, (std::vector<SnapshotId>{{100, 1}, {200, 2}, {300, 3}}));

  auto n = delete_snapshots_before(d.path(), {200, 2});
  ASSERT_TRUE(n) << n.error().detail;
  EXPECT_EQ(*n, 1u);
  ids = list_snapshots(d.path());
  EXPECT_EQ(*ids, (std::vector<SnapshotId>{{200, 2}, {300, 3}}));
  EXPECT_TRUE(std::filesystem::exists(d / "quorum-state"));

  auto parts = remove_partial_snapshots(d.path());
  ASSERT_TRUE(parts) << parts.error().detail;
  EXPECT_EQ(*parts, 1u);
  EXPECT_FALSE(std::filesystem::exists(d / "00000000000000000400-0000000004.checkpoint.part"));
  EXPECT_TRUE(std::filesystem::exists(d / "junk"));
  EXPECT_FALSE(list_snapshots(d / "absent"));
}

TEST(QuorumSnapshotFile, WriteRefusesWhileAnotherWriteOfTheSameSnapshotIsInProgress) {
  TempDir d;
  const auto bytes = encode_snapshot(image(3), {3, 1}, 1);
  const auto part = d / "00000000000000000003-0000000001.checkpoint.part";
  touch(part);
  auto r = write_snapshot_file(d.path(), {3, 1}, bytes);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().detail.find(part.string()), std::string::npos) << r.error().detail;
  EXPECT_TRUE(std::filesystem::exists(part)) << "the other writer's file is not ours to remove";
  EXPECT_FALSE(std::filesystem::exists(d / snapshot_file_name({3, 1})));
  EXPECT_FALSE(write_snapshot_file(d / "absent", {3, 1}, bytes));
  EXPECT_FALSE(write_snapshot_file(d.path(), {-1, -1}, bytes));
}

}  // namespace
}  // namespace samsa::replication::quorum
