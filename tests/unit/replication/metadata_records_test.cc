#include "replication/metadata_records.h"

#include <gtest/gtest.h>

#include "replication/metadata_image.h"

namespace samsa::replication {
namespace {

std::vector<std::byte> bytes(std::initializer_list<int> v) {
  std::vector<std::byte> out;
  for (int x : v)
    out.push_back(static_cast<std::byte>(x));
  return out;
}

TEST(MetadataRecords, TopicRecordBytesAreAsDocumented) {
  Uuid id{};
  for (int i = 0; i < 16; ++i)
    id[i] = static_cast<std::uint8_t>(i + 1);
  auto b = encode_record(TopicRecord{"ab", id});
  // frame version 0, type 2, version 0, "ab" (int16 length), 16 id bytes
  auto want = bytes({0, 0, 2, 0, 0, 0, 2, 'a', 'b'});
  for (int i = 0; i < 16; ++i)
    want.push_back(static_cast<std::byte>(i + 1));
  EXPECT_EQ(b, want);
}

TEST(MetadataRecords, EveryRecordRoundTripsAndEveryPrefixIsRejected) {
  Uuid id = random_uuid();
  std::vector<MetadataRecord> recs = {
      TopicRecord{"orders", id},
      PartitionRecord{id, 3, {1, 2}, {1}, 1, 7, 9},
      RemoveTopicRecord{id},
      ConfigRecord{ConfigResource::topic, "orders", "retention.ms", "1000"},
      ConfigRecord{ConfigResource::broker, "", "num.partitions", std::nullopt},
      ProducerIdsRecord{1, 123456789012},
      RegisterBrokerRecord{2, id, 77, {{"PLAINTEXT", "10.0.0.2", 9092, 0}}, "rack-a", true},
      RegisterBrokerRecord{3, id, 78, {}, std::nullopt, false},
      BrokerRegistrationChangeRecord{2, 77, -1, 0},
      BrokerRegistrationChangeRecord{2, 77, 1, 1},
      PartitionChangeRecord{id, 3, std::vector<std::int32_t>{1, 2}, 2},
      PartitionChangeRecord{id, 3, std::nullopt, kNoLeaderChange},
      PartitionChangeRecord{id, 3, std::vector<std::int32_t>{}, -1},
      // Version 1: an ELR, directory ids.
      PartitionRecord{id, 4, {1, 2, 3}, {1}, 1, 7, 9, {2, 3}},
      RegisterBrokerRecord{4, id, 79, {}, std::nullopt, true, {id, random_uuid()}},
      PartitionChangeRecord{id, 3, std::vector<std::int32_t>{1}, kNoLeaderChange,
                            std::vector<std::int32_t>{2}},
      PartitionChangeRecord{id, 3, std::nullopt, 2, std::vector<std::int32_t>{}},
      UserScramCredentialRecord{"alice", ScramMechanism::sha512, "salt", std::string(64, 's'),
                                std::string(64, 'k'), 4096},
      RemoveUserScramCredentialRecord{"alice", ScramMechanism::sha256},
      AccessControlEntryRecord{id,
                               {ResourceType::topic, "orders", PatternType::prefixed, "User:alice",
                                "10.0.0.1", AclOperation::read, AclPermissionType::allow}},
      RemoveAccessControlEntryRecord{id},
      ClientQuotaRecord{
          {{"client-id", std::nullopt}, {"user", "alice"}}, "producer_byte_rate", 1048576.0, false},
      ClientQuotaRecord{{{"ip", "10.0.0.1"}}, "connection_creation_rate", 0.5, true},
  };
  for (const auto& r : recs) {
    auto b = encode_record(r);
    auto d = decode_record(b);
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(encode_record(*d), b);
    for (std::size_t n = 0; n < b.size(); ++n)
      EXPECT_FALSE(decode_record(std::span(b).first(n)).has_value()) << "prefix " << n;
    auto longer = b;
    longer.push_back(std::byte{0});
    EXPECT_FALSE(decode_record(longer).has_value());
  }
  EXPECT_FALSE(decode_record(bytes({0, 0, 99, 0, 0})).has_value());  // unknown type
}

TEST(MetadataRecords, TheNewFieldsTakeVersionOneOnlyWhenPresent) {
  // Logs without an ELR or directory ids stay readable by samsads that predate them.
  auto version = [](const MetadataRecord& r) {
    auto b = encode_record(r);
    return std::to_integer<int>(b[3]) << 8 | std::to_integer<int>(b[4]);
  };
  Uuid id = random_uuid();
  EXPECT_EQ(version(PartitionRecord{id, 0, {1}, {1}, 1, 0, 0}), 0);
  EXPECT_EQ(version(PartitionRecord{id, 0, {1, 2}, {1}, 1, 0, 0, {2}}), 1);
  EXPECT_EQ(version(PartitionChangeRecord{id, 0, std::nullopt, 2}), 0);
  EXPECT_EQ(version(PartitionChangeRecord{id, 0, std::nullopt, 2, std::vector<std::int32_t>{}}), 1);
  EXPECT_EQ(version(RegisterBrokerRecord{1, id, 5, {}, std::nullopt, true}), 0);
  EXPECT_EQ(version(RegisterBrokerRecord{1, id, 5, {}, std::nullopt, true, {id}}), 1);
  // A version this samsad does not know is refused, not misread.
  auto b = encode_record(PartitionRecord{id, 0, {1}, {1}, 1, 0, 0});
  b[4] = std::byte{2};
  EXPECT_FALSE(decode_record(b).has_value());
}

TEST(MetadataImage, PartitionChangesMoveEpochsAndBrokerChangesNeedTheCurrentEpoch) {
  MetadataImage img;
  Uuid id = random_uuid();
  ASSERT_TRUE(img.apply(TopicRecord{"t", id}));
  ASSERT_TRUE(img.apply(PartitionRecord{id, 0, {1, 2, 3}, {1, 2, 3}, 1, 4, 9}));
  ASSERT_TRUE(img.apply(PartitionChangeRecord{id, 0, std::vector<std::int32_t>{1, 2}, -2}));
  const auto& p = img.topic(id)->partitions[0];
  EXPECT_EQ(p.isr, (std::vector<std::int32_t>{1, 2}));
  EXPECT_EQ(p.leader_epoch, 4);  // an ISR change keeps the leader epoch
  EXPECT_EQ(p.partition_epoch, 10);
  ASSERT_TRUE(img.apply(PartitionChangeRecord{id, 0, std::nullopt, 2}));
  EXPECT_EQ(img.topic(id)->partitions[0].leader, 2);
  EXPECT_EQ(img.topic(id)->partitions[0].leader_epoch, 5);
  EXPECT_EQ(img.topic(id)->partitions[0].partition_epoch, 11);
  EXPECT_FALSE(img.apply(PartitionChangeRecord{id, 1, std::nullopt, 2}));  // no such partition

  ASSERT_TRUE(img.apply(RegisterBrokerRecord{1, id, 5, {}, std::nullopt, true}));
  EXPECT_TRUE(img.brokers().at(1).fenced);
  EXPECT_FALSE(img.apply(BrokerRegistrationChangeRecord{1, 4, -1, 0}));  // stale epoch
  ASSERT_TRUE(img.apply(BrokerRegistrationChangeRecord{1, 5, -1, 0}));
  EXPECT_FALSE(img.brokers().at(1).fenced);
  EXPECT_FALSE(img.apply(RegisterBrokerRecord{1, id, 5, {}, std::nullopt, true}));  // not newer
  ASSERT_TRUE(img.apply(RegisterBrokerRecord{1, id, 8, {}, std::nullopt, true}));
  EXPECT_EQ(img.brokers().at(1).epoch, 8);
}

TEST(MetadataRecords, UuidTextIsKafkasBase64) {
  Uuid u{};
  EXPECT_EQ(uuid_to_string(u), "AAAAAAAAAAAAAAAAAAAAAA");
  for (int i = 0; i < 100; ++i) {
    Uuid r = random_uuid();
    auto s = uuid_to_string(r);
    EXPECT_EQ(s.size(), 22u);
    EXPECT_NE(s[0], '-');
    EXPECT_EQ(uuid_from_string(s), r);
  }
  EXPECT_FALSE(uuid_from_string("not a uuid").has_value());
}

TEST(MetadataImage, ReplayBuildsTopicsAndRefusesContradictions) {
  MetadataImage img;
  Uuid id = random_uuid();
  EXPECT_TRUE(img.apply(TopicRecord{"t", id}));
  EXPECT_FALSE(img.apply(TopicRecord{"t", random_uuid()}));            // name taken
  EXPECT_FALSE(img.apply(PartitionRecord{id, 1, {1}, {1}, 1, 0, 0}));  // partitions in order
  EXPECT_TRUE(img.apply(PartitionRecord{id, 0, {1}, {1}, 1, 0, 0}));
  EXPECT_TRUE(img.apply(ConfigRecord{ConfigResource::topic, "t", "segment.bytes", "1024"}));
  EXPECT_FALSE(img.apply(PartitionRecord{random_uuid(), 0, {1}, {1}, 1, 0, 0}));
  ASSERT_NE(img.topic("t"), nullptr);
  EXPECT_EQ(img.topic(id), img.topic("t"));
  EXPECT_EQ(img.topic("t")->partitions.size(), 1u);
  EXPECT_EQ(img.topic("t")->configs.at("segment.bytes"), "1024");
  EXPECT_TRUE(img.apply(RemoveTopicRecord{id}));
  EXPECT_EQ(img.topic("t"), nullptr);
  EXPECT_EQ(img.topic(id), nullptr);
}

}  // namespace
}  // namespace samsa::replication
