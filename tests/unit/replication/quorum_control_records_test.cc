#include "replication/quorum/control_records.h"

#include <gtest/gtest.h>

#include "base/bytes.h"
#include "io/batch_builder.h"
#include "io/record_batch.h"

namespace samsa::replication::quorum {
namespace {

std::vector<std::byte> bytes(std::initializer_list<int> v) {
  std::vector<std::byte> out;
  for (int x : v)
    out.push_back(static_cast<std::byte>(x));
  return out;
}

TEST(QuorumControlRecords, LeaderChangeValueIsKafkasFlexibleEncoding) {
  // LeaderChangeMessage v0 from its schema: Version int16, LeaderId int32, Voters and
  // GrantingVoters as compact arrays (unsigned varint count + 1) of Voter {VoterId int32,
  // tagged fields}, then the message's tagged fields (none: a zero count).
  const auto got = encode_control_value(LeaderChangeMessage{1, {1, 2, 3}, {1, 2}});
  const auto want = bytes({
      0x00, 0x00,                    // Version 0
      0x00, 0x00, 0x00, 0x01,        // LeaderId 1
      0x04,                          // Voters: 3 elements
      0x00, 0x00, 0x00, 0x01, 0x00,  // VoterId 1, no tagged fields
      0x00, 0x00, 0x00, 0x02, 0x00,  // VoterId 2
      0x00, 0x00, 0x00, 0x03, 0x00,  // VoterId 3
      0x03,                          // GrantingVoters: 2 elements
      0x00, 0x00, 0x00, 0x01, 0x00,  //
      0x00, 0x00, 0x00, 0x02, 0x00,  //
      0x00,                          // no tagged fields
  });
  EXPECT_EQ(got, want);
  EXPECT_EQ(encode_control_key(ControlRecordType::leader_change), bytes({0, 0, 0, 2}));
  auto back = decode_control_record(encode_control_key(ControlRecordType::leader_change), want);
  ASSERT_TRUE(back) << back.error().detail;
  EXPECT_EQ(std::get<LeaderChangeMessage>(*back), (LeaderChangeMessage{1, {1, 2, 3}, {1, 2}}));
}

TEST(QuorumControlRecords, SnapshotHeaderAndFooterValues) {
  EXPECT_EQ(encode_control_value(SnapshotHeaderRecord{0x0102030405060708}),
            bytes({0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0}));
  EXPECT_EQ(encode_control_value(SnapshotFooterRecord{}), bytes({0, 0, 0}));
  EXPECT_EQ(encode_control_value(KRaftVersionRecord{1}), bytes({0, 0, 0, 1, 0}));
  EXPECT_EQ(encode_control_key(ControlRecordType::snapshot_header), bytes({0, 0, 0, 3}));
  EXPECT_EQ(encode_control_key(ControlRecordType::snapshot_footer), bytes({0, 0, 0, 4}));
}

TEST(QuorumControlRecords, EveryTypeRoundTripsThroughABatch) {
  VotersRecord voters;
  VotersRecord::Voter v;
  v.voter_id = 3;
  v.directory_id[0] = 0xaa;
  v.directory_id[15] = 0x55;
  v.endpoints = {{"CONTROLLER", "10.0.0.3", 9093}, {"EXTERNAL", "c3.example", 65535}};
  v.min_supported_version = 0;
  v.max_supported_version = 1;
  voters.voters = {v, VotersRecord::Voter{}};
  const std::vector<ControlMessage> msgs = {
      LeaderChangeMessage{2, {1, 2, 3}, {2, 3}},
      LeaderChangeMessage{-1, {}, {}},
      SnapshotHeaderRecord{1700000000123},
      SnapshotFooterRecord{},
      KRaftVersionRecord{1},
      voters,
  };
  for (const auto& m : msgs) {
    SCOPED_TRACE(control_type_name(control_type(m)));
    auto b = build_control_batch(m, {42, 7, 1234});
    ASSERT_EQ(b.size(), control_batch_size(m));
    ASSERT_TRUE(is_control_batch(b));
    auto info = io::batch::validate(b, 0);
    ASSERT_TRUE(info) << info.error().detail;
    EXPECT_TRUE(info->is_control());
    EXPECT_EQ(info->base_offset, 42);
    EXPECT_EQ(info->partition_leader_epoch, 7);
    EXPECT_EQ(info->record_count, 1);
    EXPECT_EQ(info->max_timestamp, 1234);
    auto back = decode_control_batch(b);
    ASSERT_TRUE(back) << back.error().detail;
    EXPECT_EQ(*back, m);
  }
}

TEST(QuorumControlRecords, BuildIntoABufferThatIsTooSmall) {
  const ControlMessage m = LeaderChangeMessage{1, {1}, {1}};
  std::vector<std::byte> buf(control_batch_size(m) - 1);
  auto r = build_control_batch(buf, m, {});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().detail.find("too small"), std::string::npos) << r.error().detail;
  buf.resize(control_batch_size(m) + 10);
  auto ok = build_control_batch(buf, m, {});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->size(), control_batch_size(m));
}

TEST(QuorumControlRecords, UnknownTaggedFieldsAreSkipped) {
  auto value = encode_control_value(SnapshotFooterRecord{});
  // One tagged field: tag 9, 2 bytes.
  value.back() = std::byte{1};
  for (int x : {9, 2, 0xde, 0xad})
    value.push_back(static_cast<std::byte>(x));
  auto back = decode_control_record(encode_control_key(ControlRecordType::snapshot_footer), value);
  ASSERT_TRUE(back) << back.error().detail;
  EXPECT_EQ(control_type(*back), ControlRecordType::snapshot_footer);
}

TEST(QuorumControlRecords, MalformedRecordsAreRefusedWithAReason) {
  const auto key = encode_control_key(ControlRecordType::leader_change);
  const auto value = encode_control_value(LeaderChangeMessage{1, {1, 2}, {1}});
  auto expect_error = [](const io::Result<ControlMessage>& r, std::string_view words) {
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().detail.find(words), std::string::npos) << r.error().detail;
  };
  for (std::size_t n = 0; n < value.size(); ++n) {
    auto r = decode_control_record(key, std::span(value).first(n));
    EXPECT_FALSE(r) << "prefix of " << n << " bytes accepted";
  }
  auto longer = value;
  longer.push_back(std::byte{0});
  expect_error(decode_control_record(key, longer), "bytes after the message");
  auto v1 = value;
  v1[1] = std::byte{1};
  expect_error(decode_control_record(key, v1), "version 1 is not supported");
  expect_error(decode_control_record(bytes({0, 0, 0, 1}), value), "not a KRaft control record");
  expect_error(decode_control_record(bytes({0, 1, 0, 2}), value), "key version 1");
  expect_error(decode_control_record(bytes({0, 0, 2}), value), "key of 3 bytes");

  // A data batch, a control batch of two records, a damaged CRC.
  io::SimpleRecord rec{0, "k", "v", {}};
  std::vector<io::SimpleRecord> two(2, rec);
  expect_error(decode_control_batch(io::build_batch(two)), "not a control batch");
  io::BatchBuilder::Options o;
  o.control = true;
  expect_error(decode_control_batch(io::build_batch(two, o)), "2 records");
  auto b = build_control_batch(SnapshotFooterRecord{}, {});
  b.back() ^= std::byte{1};
  auto bad_crc = decode_control_batch(b);
  ASSERT_FALSE(bad_crc);
  EXPECT_EQ(bad_crc.error().code, io::Errc::corrupt_batch);
}

}  // namespace
}  // namespace samsa::replication::quorum
