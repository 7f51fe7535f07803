// The __consumer_offsets record formats against bytes written out by hand from Kafka's record
// schemas (OffsetCommitKey/Value, GroupMetadataKey/Value), the group -> partition mapping
// against Java's String.hashCode, the consumer subscription's topic list, and
// __transaction_state's TransactionLogValue v0 and v1 (KIP-890's tagged fields).
#include "coordinator/records.h"
#include "coordinator/txn_records.h"

#include <gtest/gtest.h>

#include <climits>
#include <initializer_list>

namespace samsa::coordinator {
namespace {

Bytes b(std::initializer_list<int> v) {
  Bytes out;
  for (int x : v)
    out.push_back(static_cast<std::byte>(x));
  return out;
}

// Appends the ASCII bytes of s.
void put(Bytes& out, std::string_view s) {
  for (char c : s)
    out.push_back(static_cast<std::byte>(c));
}

Bytes cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const auto& p : parts)
    out.insert(out.end(), p.begin(), p.end());
  return out;
}

Bytes str(std::string_view s) {  // int16 length + bytes
  Bytes out = b({0, static_cast<int>(s.size())});
  put(out, s);
  return out;
}

Bytes cstr(std::string_view s) {  // compact: uvarint(length + 1) + bytes (short strings only)
  Bytes out = b({static_cast<int>(s.size() + 1)});
  put(out, s);
  return out;
}

TEST(Records, OffsetCommitKeyIsTypeOneThenGroupTopicPartition) {
  const Bytes want = cat({b({0x00, 0x01}), str("g"), str("t"), b({0x00, 0x00, 0x00, 0x01})});
  EXPECT_EQ(encode_key(OffsetKey{"g", "t", 1}), want);
  auto k = decode_key(want);
  ASSERT_TRUE(k.has_value()) << k.error();
  EXPECT_EQ(std::get<OffsetKey>(*k), (OffsetKey{"g", "t", 1}));
  // Type 0 is the same key as written by Kafka 0.8.2-era brokers.
  Bytes legacy = want;
  legacy[1] = std::byte{0};
  auto l = decode_key(legacy);
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(std::get<OffsetKey>(*l), (OffsetKey{"g", "t", 1}));
}

TEST(Records, GroupMetadataKeyIsTypeTwoThenGroup) {
  const Bytes want = cat({b({0x00, 0x02}), str("grp")});
  EXPECT_EQ(encode_key(GroupKey{"grp"}), want);
  auto k = decode_key(want);
  ASSERT_TRUE(k.has_value());
  EXPECT_EQ(std::get<GroupKey>(*k).group, "grp");
}

TEST(Records, OtherKeyTypesAreRecognisedButNotInterpreted) {
  // Type 3 is ConsumerGroupMetadataKey (KIP-848): skipped on replay, not an error.
  auto k = decode_key(cat({b({0x00, 0x03}), str("grp")}));
  ASSERT_TRUE(k.has_value());
  EXPECT_EQ(std::get<OtherKey>(*k).type, 3);
  EXPECT_FALSE(decode_key(b({0x00})).has_value());
  EXPECT_FALSE(decode_key(b({0xff, 0xff})).has_value());
  // A key with bytes after its last field is malformed.
  EXPECT_FALSE(decode_key(cat({b({0x00, 0x02}), str("grp"), b({0x00})})).has_value());
  // A string running past the end.
  EXPECT_FALSE(decode_key(b({0x00, 0x02, 0x00, 0x09, 'a'})).has_value());
}

TEST(Records, OffsetCommitValueVersion3) {
  const Bytes want = cat({b({0x00, 0x03}), b({0, 0, 0, 0, 0, 0, 0, 5}), b({0, 0, 0, 7}), str("m"),
                          b({1, 2, 3, 4, 5, 6, 7, 8})});
  OffsetValue v{5, 7, "m", 0x0102030405060708, -1};
  EXPECT_EQ(encode_value(v), want);
  auto d = decode_offset_value(want);
  ASSERT_TRUE(d.has_value()) << d.error();
  EXPECT_EQ(*d, v);
}

TEST(Records, OffsetCommitValueWithAnExpiryIsVersion1) {
  const Bytes want = cat({b({0x00, 0x01}), b({0, 0, 0, 0, 0, 0, 0, 9}), str(""),
                          b({0, 0, 0, 0, 0, 0, 0, 2}), b({0, 0, 0, 0, 0, 0, 0, 3})});
  OffsetValue v{9, -1, "", 2, 3};
  EXPECT_EQ(encode_value(v), want);
  auto d = decode_offset_value(want);
  ASSERT_TRUE(d.has_value()) << d.error();
  EXPECT_EQ(*d, v);
}

TEST(Records, OffsetCommitValueOlderAndFlexibleVersionsDecode) {
  // v0 and v2: offset, metadata, commit timestamp.
  for (int version : {0, 2}) {
    auto d = decode_offset_value(cat(
        {b({0x00, version}), b({0, 0, 0, 0, 0, 0, 1, 0}), str("md"), b({0, 0, 0, 0, 0, 0, 0, 4})}));
    ASSERT_TRUE(d.has_value()) << d.error();
    EXPECT_EQ(d->offset, 256);
    EXPECT_EQ(d->leader_epoch, -1);
    EXPECT_EQ(d->metadata, "md");
    EXPECT_EQ(d->commit_timestamp, 4);
  }
  // v4: compact metadata, then tagged fields (one unknown tag of 2 bytes, skipped).
  auto d =
      decode_offset_value(cat({b({0x00, 0x04}), b({0, 0, 0, 0, 0, 0, 0, 42}), b({0, 0, 0, 3}),
                               cstr("x"), b({0, 0, 0, 0, 0, 0, 0, 6}), b({1, 9, 2, 0xaa, 0xbb})}));
  ASSERT_TRUE(d.has_value()) << d.error();
  EXPECT_EQ(*d, (OffsetValue{42, 3, "x", 6, -1}));
  EXPECT_FALSE(decode_offset_value(b({0x00, 0x05, 0, 0})).has_value());     // unknown version
  EXPECT_FALSE(decode_offset_value(b({0x00, 0x03, 0, 0, 0})).has_value());  // truncated
}

GroupValue sample_group() {
  GroupValue v;
  v.protocol_type = "consumer";
  v.generation = 1;
  v.protocol = "range";
  v.leader = "m1";
  v.current_state_timestamp = 1000;
  MemberValue m;
  m.member_id = "m1";
  m.client_id = "c";
  m.client_host = "/h";
  m.rebalance_timeout = 300000;
  m.session_timeout = 10000;
  m.subscription = b({0xaa});
  m.assignment = b({0xbb, 0xcc});
  v.members.push_back(m);
  return v;
}

TEST(Records, GroupMetadataValueVersion3) {
  const Bytes want =
      cat({b({0x00, 0x03}), str("consumer"), b({0, 0, 0, 1}), str("range"), str("m1"),
           b({0, 0, 0, 0, 0, 0, 0x03, 0xe8}), b({0, 0, 0, 1}),
           // member: id, instance id (null), client id, host, timeouts, bytes
           str("m1"), b({0xff, 0xff}), str("c"), str("/h"), b({0x00, 0x04, 0x93, 0xe0}),
           b({0x00, 0x00, 0x27, 0x10}), b({0, 0, 0, 1, 0xaa}), b({0, 0, 0, 2, 0xbb, 0xcc})});
  EXPECT_EQ(encode_value(sample_group()), want);
  auto d = decode_group_value(want);
  ASSERT_TRUE(d.has_value()) << d.error();
  EXPECT_EQ(*d, sample_group());

  GroupValue s = sample_group();
  s.members[0].group_instance_id = "i";
  auto rt = decode_group_value(encode_value(s));
  ASSERT_TRUE(rt.has_value());
  EXPECT_EQ(*rt, s);

  // An empty generation: no protocol, no leader, no members.
  GroupValue e;
  e.protocol_type = "consumer";
  e.generation = 4;
  const Bytes empty =
      cat({b({0x00, 0x03}), str("consumer"), b({0, 0, 0, 4}), b({0xff, 0xff}), b({0xff, 0xff}),
           b({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}), b({0, 0, 0, 0})});
  EXPECT_EQ(encode_value(e), empty);
}

TEST(Records, GroupMetadataValueOlderAndFlexibleVersionsDecode) {
  // v0: no state timestamp, no instance id, no rebalance timeout (the session timeout stands in).
  auto v0 = decode_group_value(
      cat({b({0x00, 0x00}), str("consumer"), b({0, 0, 0, 1}), str("range"), str("m1"),
           b({0, 0, 0, 1}), str("m1"), str("c"), str("/h"), b({0x00, 0x00, 0x27, 0x10}),
           b({0, 0, 0, 1, 0xaa}), b({0, 0, 0, 2, 0xbb, 0xcc})}));
  ASSERT_TRUE(v0.has_value()) << v0.error();
  GroupValue want = sample_group();
  want.current_state_timestamp = -1;
  want.members[0].rebalance_timeout = 10000;
  EXPECT_EQ(*v0, want);

  // v2: adds the state timestamp and the rebalance timeout (v1), not the instance id.
  auto v2 = decode_group_value(
      cat({b({0x00, 0x02}), str("consumer"), b({0, 0, 0, 1}), str("range"), str("m1"),
           b({0, 0, 0, 0, 0, 0, 0x03, 0xe8}), b({0, 0, 0, 1}), str("m1"), str("c"), str("/h"),
           b({0x00, 0x04, 0x93, 0xe0}), b({0x00, 0x00, 0x27, 0x10}), b({0, 0, 0, 1, 0xaa}),
           b({0, 0, 0, 2, 0xbb, 0xcc})}));
  ASSERT_TRUE(v2.has_value()) << v2.error();
  EXPECT_EQ(*v2, sample_group());

  // v4: compact strings, bytes and arrays; tagged fields after each member and at the end.
  auto v4 = decode_group_value(
      cat({b({0x00, 0x04}), cstr("consumer"), b({0, 0, 0, 1}), cstr("range"), cstr("m1"),
           b({0, 0, 0, 0, 0, 0, 0x03, 0xe8}), b({2}), cstr("m1"), b({0}), cstr("c"), cstr("/h"),
           b({0x00, 0x04, 0x93, 0xe0}), b({0x00, 0x00, 0x27, 0x10}), b({2, 0xaa}),
           b({3, 0xbb, 0xcc}), b({0}), b({0})}));
  ASSERT_TRUE(v4.has_value()) << v4.error();
  EXPECT_EQ(*v4, sample_group());

  // A member count larger than the bytes can hold is refused before anything is allocated.
  EXPECT_FALSE(decode_group_value(
                   cat({b({0x00, 0x03}), str("consumer"), b({0, 0, 0, 1}), b({0xff, 0xff}),
                        b({0xff, 0xff}), b({0, 0, 0, 0, 0, 0, 0, 0}), b({0x7f, 0xff, 0xff, 0xff})}))
                   .has_value());
}

TEST(Records, JavaStringHashCode) {
  EXPECT_EQ(java_string_hash(""), 0);
  EXPECT_EQ(java_string_hash("hello"), 99162322);
  EXPECT_EQ(java_string_hash("test-group-xyz"), -149815856);
  EXPECT_EQ(java_string_hash("polygenelubricants"), INT32_MIN);
  // Non-ASCII: UTF-16 code units, surrogate pairs above the BMP.
  EXPECT_EQ(java_string_hash("\xc3\xa9"), 233);                   // é
  EXPECT_EQ(java_string_hash("\xf0\x9f\x98\x80"), 1772899);       // U+1F600, D83D DE00
  EXPECT_EQ(java_string_hash("\xff"), 0xFFFD);                    // malformed: one U+FFFD
  EXPECT_EQ(java_string_hash("\xe0\x80"), 0xFFFD * 31 + 0xFFFD);  // E0 80: two maximal subparts
}

TEST(Records, PartitionForIsKafkasAbsHashModPartitions) {
  EXPECT_EQ(partition_for("hello", 50), 22);
  EXPECT_EQ(partition_for("test-group-xyz", 50), 6);      // negative hash: abs first
  EXPECT_EQ(partition_for("polygenelubricants", 50), 0);  // abs(INT32_MIN) is taken as 0
  EXPECT_EQ(partition_for("kcat-group", 50), 29);
  EXPECT_EQ(partition_for("\xf0\x9f\x98\x80", 50), 49);
  for (int n : {1, 3, 7, 50})
    EXPECT_LT(partition_for("abcdefghij", n), n);
}

TEST(Records, SubscriptionTopics) {
  // ConsumerProtocolSubscription v1: version, topics, user data, owned partitions.
  auto t = subscription_topics(cat(
      {b({0x00, 0x01}), b({0, 0, 0, 2}), str("a"), str("bc"), b({0, 0, 0, 0}), b({0, 0, 0, 0})}));
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(*t, (std::vector<std::string>{"a", "bc"}));
  EXPECT_FALSE(subscription_topics(b({0x00, 0x00, 0, 0, 0, 5})).has_value());
  EXPECT_FALSE(subscription_topics(b({0x00})).has_value());
}

TEST(TxnRecords, ValueV1IsFlexibleWithKip890TaggedFields) {
  TxnValue v;
  v.producer_id = 5;
  v.producer_epoch = 3;
  v.timeout_ms = 60000;
  v.state = TxnState::ongoing;
  v.partitions["t"] = {0};
  v.last_update_ms = 7;
  v.start_ms = 6;
  v.client_transaction_version = 2;
  // Version 1, fixed fields, compact array of {compact string, compact int32 array, no tags},
  // the timestamps, then one tagged field: tag 2 (ClientTransactionVersion), 2 bytes.
  const Bytes want =
      b({0, 1, 0, 0, 0, 0, 0, 0, 0, 5, 0, 3, 0, 0, 0xEA, 0x60, 1, 2, 2, 't', 2, 0, 0, 0,
         0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0,    0,    0, 6, 1, 2,   2, 0, 2});
  EXPECT_EQ(encode_txn_value(v), want);
  auto back = decode_txn_value(want);
  ASSERT_TRUE(back.has_value()) << back.error();
  EXPECT_EQ(*back, v);
  // Every tagged field, in tag order, round trips; so does v0 (none set).
  v.previous_producer_id = 4;
  v.next_producer_id = 9;
  v.next_producer_epoch = 0;
  auto all = decode_txn_value(encode_txn_value(v));
  ASSERT_TRUE(all.has_value()) << all.error();
  EXPECT_EQ(*all, v);
  TxnValue v0 = v;
  v0.previous_producer_id = v0.next_producer_id = -1;
  v0.next_producer_epoch = -1;
  v0.client_transaction_version = 0;
  const Bytes e0 = encode_txn_value(v0);
  EXPECT_EQ(e0[1], std::byte{0}) << "without KIP-890 fields: version 0";
  auto back0 = decode_txn_value(e0);
  ASSERT_TRUE(back0.has_value());
  EXPECT_EQ(*back0, v0);
  // Kafka writes null partitions for Empty: read as none. Unknown tags are skipped.
  Bytes nul = b({0, 1, 0, 0, 0, 0, 0, 0, 0, 5, 0, 3, 0, 0, 0xEA, 0x60, 0, 0, 0,
                 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 6,    1,    9, 1, 0x55});
  auto n = decode_txn_value(nul);
  ASSERT_TRUE(n.has_value()) << n.error();
  EXPECT_TRUE(n->partitions.empty());
  EXPECT_EQ(n->state, TxnState::empty);
  nul.pop_back();
  EXPECT_FALSE(decode_txn_value(nul).has_value()) << "a truncated tagged field is an error";
}

}  // namespace
}  // namespace samsa::coordinator
