// The KRaft quorum apis (Vote, BeginQuorumEpoch, EndQuorumEpoch, DescribeQuorum,
// FetchSnapshot) against bytes assembled here field by field from Kafka 4.1.1's message
// definitions, so the codecs are checked against the format and not only against themselves
// (kafka_roundtrip_test.cc and kafka_malformed_test.cc run every version of every message
// generically, these included). Also their frames (header versions, trailing bytes, cuts), the
// tagged-field rules and a snapshot chunk sent from a file.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "net/kafka/api.h"
#include "net/kafka/gen/testing.h"

namespace samsa::kafka {
namespace {

// Kafka's encodings written out by hand (big-endian integers, unsigned varints), independent
// of kafka::Writer so that a mistake there cannot hide here.
class Wire {
 public:
  Wire& i8(std::int8_t v) { return put(static_cast<std::uint8_t>(v), 1); }
  Wire& i16(std::int16_t v) { return put(static_cast<std::uint16_t>(v), 2); }
  Wire& i32(std::int32_t v) { return put(static_cast<std::uint32_t>(v), 4); }
  Wire& i64(std::int64_t v) { return put(static_cast<std::uint64_t>(v), 8); }
  Wire& u16(std::uint16_t v) { return put(v, 2); }
  Wire& boolean(bool v) { return i8(v ? 1 : 0); }
  Wire& uvarint(std::uint64_t v) {
    for (; v >= 0x80; v >>= 7)
      out_.push_back(std::byte(static_cast<std::uint8_t>((v & 0x7f) | 0x80)));
    out_.push_back(std::byte(static_cast<std::uint8_t>(v)));
    return *this;
  }
  Wire& uuid(const Uuid& u) {
    for (std::uint8_t b : u)
      out_.push_back(std::byte(b));
    return *this;
  }
  Wire& raw(std::span<const std::byte> b) {
    out_.insert(out_.end(), b.begin(), b.end());
    return *this;
  }
  // Flexible versions: lengths and counts are uvarint(n + 1), null is 0.
  Wire& compact_string(std::string_view s) { return uvarint(s.size() + 1).text(s); }
  Wire& compact_array(std::size_t n) { return uvarint(n + 1); }
  Wire& compact_null() { return uvarint(0); }
  // Older versions: int16 string lengths, int32 array counts, -1 for null.
  Wire& classic_string(std::string_view s) {
    return i16(static_cast<std::int16_t>(s.size())).text(s);
  }
  Wire& classic_array(std::int32_t n) { return i32(n); }
  Wire& classic_null_string() { return i16(-1); }
  // The tagged-field section of a struct without tagged fields.
  Wire& no_tags() { return uvarint(0); }
  // One tagged field: tag, size, value. The section's count comes first (uvarint).
  Wire& tagged(std::uint32_t tag, const Wire& value) {
    return uvarint(tag).uvarint(value.size()).raw(value.bytes());
  }

  const std::vector<std::byte>& bytes() const { return out_; }
  std::size_t size() const { return out_.size(); }

 private:
  Wire& put(std::uint64_t v, int n) {
    for (int i = n - 1; i >= 0; --i)
      out_.push_back(std::byte(static_cast<std::uint8_t>(v >> (8 * i))));
    return *this;
  }
  Wire& text(std::string_view s) {
    for (char c : s)
      out_.push_back(std::byte(static_cast<std::uint8_t>(c)));
    return *this;
  }
  std::vector<std::byte> out_;
};

constexpr std::string_view kTopic = "__cluster_metadata";
constexpr std::string_view kClusterId = "ZqqUBnXeSEO2CTr6e5bCjQ";

Uuid uuid_of(std::uint8_t seed) {
  Uuid u{};
  for (std::size_t i = 0; i < u.size(); ++i)
    u[i] = static_cast<std::uint8_t>(seed + i);
  return u;
}

std::string hex(const std::vector<std::byte>& b) {
  std::string s;
  char buf[4];
  for (std::byte x : b) {
    std::snprintf(buf, sizeof buf, "%02x ", static_cast<unsigned>(x));
    s += buf;
  }
  return s;
}

template <class M>
std::vector<std::byte> encode_body(const M& m, std::int16_t version) {
  Writer w(false);
  m.encode(w, version);
  return flatten(w.finish());
}

// Decodes `in` (kept alive by the caller: records view it) as one whole message.
template <class M>
::testing::AssertionResult decodes_whole(std::vector<std::byte>& in, std::int16_t version, M& out) {
  Reader r(in);
  if (!out.decode(r, version))
    return ::testing::AssertionFailure()
           << decode_error_name(r.error()) << " at byte " << r.error_offset();
  if (r.remaining() != 0) return ::testing::AssertionFailure() << r.remaining() << " left over";
  return ::testing::AssertionSuccess();
}

// m encodes to exactly `want`, says so in encoded_size, and `want` decodes back to m.
template <class M>
void expect_wire(const M& m, std::int16_t version, const Wire& want) {
  SCOPED_TRACE(std::string(M::kName) + " v" + std::to_string(version));
  EXPECT_EQ(hex(encode_body(m, version)), hex(want.bytes()));
  EXPECT_EQ(m.encoded_size(version), want.size());
  std::vector<std::byte> in = want.bytes();
  M back;
  ASSERT_TRUE(decodes_whole(in, version, back));
  EXPECT_TRUE(back == m);
}

// ---- Vote ----

VoteRequest vote_request() {
  VoteRequest m;
  m.cluster_id = std::string(kClusterId);
  m.voter_id = 2;
  auto& t = m.topics.emplace_back();
  t.topic_name = kTopic;
  t.partitions.push_back({.partition_index = 0,
                          .replica_epoch = 7,
                          .replica_id = 1,
                          .replica_directory_id = uuid_of(0x10),
                          .voter_directory_id = uuid_of(0x20),
                          .last_offset_epoch = 6,
                          .last_offset = 1234,
                          .pre_vote = true});
  return m;
}

// VoteRequest v2 up to the message's tagged-field section.
Wire vote_request_v2_wire() {
  Wire w;
  w.compact_string(kClusterId)  // ClusterId
      .i32(2)                   // VoterId
      .compact_array(1)         // Topics
      .compact_string(kTopic)   //   TopicName
      .compact_array(1)         //   Partitions
      .i32(0)                   //     PartitionIndex
      .i32(7)                   //     ReplicaEpoch
      .i32(1)                   //     ReplicaId
      .uuid(uuid_of(0x10))      //     ReplicaDirectoryId
      .uuid(uuid_of(0x20))      //     VoterDirectoryId
      .i32(6)                   //     LastOffsetEpoch
      .i64(1234)                //     LastOffset
      .boolean(true)            //     PreVote
      .no_tags()                //   (partition)
      .no_tags();               // (topic)
  return w;
}

TEST(KafkaQuorumWire, VoteRequestV2PreVote) {
  Wire w = vote_request_v2_wire();
  w.no_tags();
  EXPECT_EQ(w.size(), 1 + 22 + 4 + 1 + 1 + 18 + 1 + 12 + 32 + 12 + 1 + 3);
  expect_wire(vote_request(), 2, w);
}

TEST(KafkaQuorumWire, VoteRequestV0HasNoVoterNorPreVote) {
  Wire w;
  w.compact_string(kClusterId).compact_array(1).compact_string(kTopic).compact_array(1);
  w.i32(0).i32(7).i32(1).i32(6).i64(1234).no_tags().no_tags().no_tags();
  VoteRequest m = vote_request();
  EXPECT_EQ(hex(encode_body(m, 0)), hex(w.bytes()));
  std::vector<std::byte> in = w.bytes();
  VoteRequest back;
  ASSERT_TRUE(decodes_whole(in, 0, back));
  EXPECT_EQ(back.voter_id, -1);  // Kafka's default: "not known to the sender"
  EXPECT_FALSE(back.topics[0].partitions[0].pre_vote);
  EXPECT_EQ(back.topics[0].partitions[0].replica_directory_id, Uuid{});
  EXPECT_EQ(back.topics[0].partitions[0].last_offset, 1234);
}

TEST(KafkaQuorumWire, VoteResponseV1NodeEndpointsAreTagged) {
  VoteResponse m;
  auto& t = m.topics.emplace_back();
  t.topic_name = kTopic;
  t.partitions.push_back({.partition_index = 0,
                          .error_code = 0,
                          .leader_id = 3,
                          .leader_epoch = 8,
                          .vote_granted = true});
  m.node_endpoints.push_back({.node_id = 3, .host = "ctl-3", .port = 9093});

  Wire body;
  body.i16(0).compact_array(1).compact_string(kTopic).compact_array(1);
  body.i32(0).i16(0).i32(3).i32(8).boolean(true).no_tags().no_tags();
  Wire endpoints;  // tag 0: []NodeEndpoint
  endpoints.compact_array(1).i32(3).compact_string("ctl-3").u16(9093).no_tags();
  Wire v1 = body;
  v1.uvarint(1).tagged(0, endpoints);
  expect_wire(m, 1, v1);
  expect_wire(m, 2, v1);

  // v0 has no NodeEndpoints: the section stays empty.
  Wire v0 = body;
  v0.no_tags();
  EXPECT_EQ(hex(encode_body(m, 0)), hex(v0.bytes()));
  // Port is a uint16: 65535 is a port, not -1.
  m.node_endpoints[0].port = 65535;
  EXPECT_EQ(encode_body(m, 1)[v1.size() - 3], std::byte{0xff});
}

// ---- BeginQuorumEpoch, EndQuorumEpoch: v0 is not flexible ----

BeginQuorumEpochRequest begin_request() {
  BeginQuorumEpochRequest m;
  m.cluster_id = std::nullopt;
  m.voter_id = 2;
  auto& t = m.topics.emplace_back();
  t.topic_name = kTopic;
  t.partitions.push_back({.partition_index = 0,
                          .voter_directory_id = uuid_of(0x30),
                          .leader_id = 1,
                          .leader_epoch = 9});
  m.leader_endpoints.push_back({.name = "CONTROLLER", .host = "ctl-1", .port = 9093});
  return m;
}

TEST(KafkaQuorumWire, BeginQuorumEpochRequestV0ClassicAndV1Flexible) {
  Wire v0;
  v0.classic_null_string()     // ClusterId
      .classic_array(1)        // Topics
      .classic_string(kTopic)  //   TopicName
      .classic_array(1)        //   Partitions
      .i32(0)                  //     PartitionIndex
      .i32(1)                  //     LeaderId
      .i32(9);                 //     LeaderEpoch
  BeginQuorumEpochRequest m = begin_request();
  EXPECT_EQ(hex(encode_body(m, 0)), hex(v0.bytes()));
  std::vector<std::byte> in = v0.bytes();
  BeginQuorumEpochRequest back;
  ASSERT_TRUE(decodes_whole(in, 0, back));
  EXPECT_EQ(back.cluster_id, std::nullopt);
  EXPECT_EQ(back.voter_id, -1);
  EXPECT_TRUE(back.leader_endpoints.empty());

  Wire v1;
  v1.compact_null()      // ClusterId
      .i32(2)            // VoterId
      .compact_array(1)  // Topics
      .compact_string(kTopic)
      .compact_array(1)     //   Partitions
      .i32(0)               //     PartitionIndex
      .uuid(uuid_of(0x30))  //     VoterDirectoryId
      .i32(1)               //     LeaderId
      .i32(9)               //     LeaderEpoch
      .no_tags()
      .no_tags()
      .compact_array(1)  // LeaderEndpoints
      .compact_string("CONTROLLER")
      .compact_string("ctl-1")
      .u16(9093)
      .no_tags()
      .no_tags();
  expect_wire(m, 1, v1);
}

TEST(KafkaQuorumWire, BeginQuorumEpochResponse) {
  BeginQuorumEpochResponse m;
  m.error_code = 0;
  auto& t = m.topics.emplace_back();
  t.topic_name = kTopic;
  t.partitions.push_back(
      {.partition_index = 0, .error_code = 6, .leader_id = 1, .leader_epoch = 9});
  Wire v0;
  v0.i16(0).classic_array(1).classic_string(kTopic).classic_array(1);
  v0.i32(0).i16(6).i32(1).i32(9);
  expect_wire(m, 0, v0);

  m.node_endpoints.push_back({.node_id = 1, .host = "ctl-1", .port = 9093});
  Wire endpoints;
  endpoints.compact_array(1).i32(1).compact_string("ctl-1").u16(9093).no_tags();
  Wire v1;
  v1.i16(0).compact_array(1).compact_string(kTopic).compact_array(1);
  v1.i32(0).i16(6).i32(1).i32(9).no_tags().no_tags();
  v1.uvarint(1).tagged(0, endpoints);
  expect_wire(m, 1, v1);
}

TEST(KafkaQuorumWire, EndQuorumEpochRequestSuccessorsThenCandidates) {
  EndQuorumEpochRequest m;
  m.cluster_id = "c";
  auto& t = m.topics.emplace_back();
  t.topic_name = kTopic;
  auto& p = t.partitions.emplace_back();
  p.partition_index = 0;
  p.leader_id = 1;
  p.leader_epoch = 9;
  p.preferred_successors = {3, 2};
  Wire v0;
  v0.classic_string("c").classic_array(1).classic_string(kTopic).classic_array(1);
  v0.i32(0).i32(1).i32(9).classic_array(2).i32(3).i32(2);  // PreferredSuccessors
  expect_wire(m, 0, v0);

  // v1 names candidates by id and directory instead, and the leader's endpoints.
  p.preferred_successors.clear();
  p.preferred_candidates.push_back({.candidate_id = 3, .candidate_directory_id = uuid_of(0x40)});
  m.leader_endpoints.push_back({.name = "CONTROLLER", .host = "ctl-1", .port = 9093});
  Wire v1;
  v1.compact_string("c").compact_array(1).compact_string(kTopic).compact_array(1);
  v1.i32(0).i32(1).i32(9);
  v1.compact_array(1).i32(3).uuid(uuid_of(0x40)).no_tags();  // PreferredCandidates
  v1.no_tags().no_tags();
  v1.compact_array(1).compact_string("CONTROLLER").compact_string("ctl-1").u16(9093).no_tags();
  v1.no_tags();
  expect_wire(m, 1, v1);
}

TEST(KafkaQuorumWire, EndQuorumEpochResponse) {
  EndQuorumEpochResponse m;
  m.error_code = 0;
  auto& t = m.topics.emplace_back();
  t.topic_name = kTopic;
  t.partitions.push_back(
      {.partition_index = 0, .error_code = 0, .leader_id = -1, .leader_epoch = 9});
  Wire v0;
  v0.i16(0).classic_array(1).classic_string(kTopic).classic_array(1);
  v0.i32(0).i16(0).i32(-1).i32(9);
  expect_wire(m, 0, v0);
  Wire v1;
  v1.i16(0).compact_array(1).compact_string(kTopic).compact_array(1);
  v1.i32(0).i16(0).i32(-1).i32(9).no_tags().no_tags().no_tags();
  expect_wire(m, 1, v1);
}

// ---- DescribeQuorum ----

TEST(KafkaQuorumWire, DescribeQuorumRequestLiteralBytes) {
  std::vector<std::byte> want = {std::byte{0x02}, std::byte{0x13}};  // Topics: 1; name: 18
  for (char c : kTopic)
    want.push_back(std::byte(static_cast<std::uint8_t>(c)));
  for (int b : {0x02, 0, 0, 0, 0, 0x00, 0x00, 0x00})  // Partitions: 1, index 0, three tags
    want.push_back(std::byte(static_cast<std::uint8_t>(b)));
  DescribeQuorumRequest m;
  m.topics.push_back({.topic_name = std::string(kTopic), .partitions = {{.partition_index = 0}}});
  for (std::int16_t v = 0; v <= 2; ++v) {
    EXPECT_EQ(hex(encode_body(m, v)), hex(want)) << "v" << v;  // the same in every version
    std::vector<std::byte> in = want;
    DescribeQuorumRequest back;
    ASSERT_TRUE(decodes_whole(in, v, back));
    EXPECT_TRUE(back == m);
  }
}

DescribeQuorumResponse describe_response() {
  DescribeQuorumResponse m;
  m.error_code = 0;
  m.error_message = std::nullopt;
  auto& p = m.topics.emplace_back(DescribeQuorumResponse::TopicData{.topic_name = "t"})
                .partitions.emplace_back();
  p.partition_index = 0;
  p.error_code = 0;
  p.error_message = "ok";
  p.leader_id = 1;
  p.leader_epoch = 9;
  p.high_watermark = 500;
  p.current_voters.push_back({.replica_id = 1,
                              .replica_directory_id = uuid_of(0x50),
                              .log_end_offset = 510,
                              .last_fetch_timestamp = -1,
                              .last_caught_up_timestamp = 1700000000000});
  p.observers.push_back({.replica_id = 4,
                         .replica_directory_id = uuid_of(0x60),
                         .log_end_offset = 480,
                         .last_fetch_timestamp = 1699999999000,
                         .last_caught_up_timestamp = 1699999998000});
  auto& n = m.nodes.emplace_back();
  n.node_id = 1;
  n.listeners.push_back({.name = "CONTROLLER", .host = "ctl-1", .port = 9093});
  return m;
}

TEST(KafkaQuorumWire, DescribeQuorumResponseV2WithNodes) {
  Wire w;
  w.i16(0)                   // ErrorCode
      .compact_null()        // ErrorMessage: null
      .compact_array(1)      // Topics
      .compact_string("t")   //   TopicName
      .compact_array(1)      //   Partitions
      .i32(0)                //     PartitionIndex
      .i16(0)                //     ErrorCode
      .compact_string("ok")  //     ErrorMessage
      .i32(1)                //     LeaderId
      .i32(9)                //     LeaderEpoch
      .i64(500)              //     HighWatermark
      .compact_array(1)      //     CurrentVoters
      .i32(1)                //       ReplicaId
      .uuid(uuid_of(0x50))   //       ReplicaDirectoryId
      .i64(510)              //       LogEndOffset
      .i64(-1)               //       LastFetchTimestamp
      .i64(1700000000000)    //       LastCaughtUpTimestamp
      .no_tags()
      .compact_array(1)  //     Observers
      .i32(4)
      .uuid(uuid_of(0x60))
      .i64(480)
      .i64(1699999999000)
      .i64(1699999998000)
      .no_tags()
      .no_tags()         //   (partition)
      .no_tags()         // (topic)
      .compact_array(1)  // Nodes
      .i32(1)            //   NodeId
      .compact_array(1)  //   Listeners
      .compact_string("CONTROLLER")
      .compact_string("ctl-1")
      .u16(9093)
      .no_tags()
      .no_tags()
      .no_tags();  // (message)
  expect_wire(describe_response(), 2, w);
}

TEST(KafkaQuorumWire, DescribeQuorumResponseV0AndV1ReplicaState) {
  DescribeQuorumResponse m = describe_response();
  auto replica = [](Wire& w, std::int32_t id, std::int64_t leo) { w.i32(id).i64(leo); };
  Wire v0;
  v0.i16(0).compact_array(1).compact_string("t").compact_array(1);
  v0.i32(0).i16(0).i32(1).i32(9).i64(500);
  v0.compact_array(1);
  replica(v0, 1, 510);
  v0.no_tags().compact_array(1);
  replica(v0, 4, 480);
  v0.no_tags().no_tags().no_tags().no_tags();
  EXPECT_EQ(hex(encode_body(m, 0)), hex(v0.bytes()));
  std::vector<std::byte> in = v0.bytes();
  DescribeQuorumResponse back;
  ASSERT_TRUE(decodes_whole(in, 0, back));
  const auto& voter = back.topics[0].partitions[0].current_voters[0];
  EXPECT_EQ(voter.last_fetch_timestamp, -1);  // v0 does not carry them: Kafka's default
  EXPECT_EQ(voter.last_caught_up_timestamp, -1);
  EXPECT_EQ(back.error_message, std::optional<std::string>(""));  // v2+: "" by default
  EXPECT_TRUE(back.nodes.empty());

  // v1: the two timestamps, still no directory ids, messages or nodes.
  Wire v1;
  v1.i16(0).compact_array(1).compact_string("t").compact_array(1);
  v1.i32(0).i16(0).i32(1).i32(9).i64(500);
  v1.compact_array(1).i32(1).i64(510).i64(-1).i64(1700000000000).no_tags();
  v1.compact_array(1).i32(4).i64(480).i64(1699999999000).i64(1699999998000).no_tags();
  v1.no_tags().no_tags().no_tags();
  EXPECT_EQ(hex(encode_body(m, 1)), hex(v1.bytes()));
}

// ---- FetchSnapshot ----

TEST(KafkaQuorumWire, FetchSnapshotRequestTaggedClusterIdAndDirectory) {
  FetchSnapshotRequest m;
  m.cluster_id = std::string(kClusterId);
  m.replica_id = 2;
  auto& p = m.topics.emplace_back(FetchSnapshotRequest::TopicSnapshot{.name = std::string(kTopic)})
                .partitions.emplace_back();
  p.partition = 0;
  p.current_leader_epoch = 9;
  p.snapshot_id = {.end_offset = 4000, .epoch = 8};
  p.position = 65536;
  p.replica_directory_id = uuid_of(0x70);

  auto build = [&](bool with_directory) {
    Wire directory;
    directory.uuid(uuid_of(0x70));
    Wire cluster;
    cluster.compact_string(kClusterId);
    Wire w;
    w.i32(2)                     // ReplicaId
        .i32(0x7fffffff)         // MaxBytes (the default, still written)
        .compact_array(1)        // Topics
        .compact_string(kTopic)  //   Name
        .compact_array(1)        //   Partitions
        .i32(0)                  //     Partition
        .i32(9)                  //     CurrentLeaderEpoch
        .i64(4000)               //     SnapshotId.EndOffset
        .i32(8)                  //     SnapshotId.Epoch
        .no_tags()               //     (SnapshotId)
        .i64(65536);             //     Position
    if (with_directory)
      w.uvarint(1).tagged(0, directory);  //     ReplicaDirectoryId: tag 0 (v1+)
    else
      w.no_tags();
    w.no_tags()      // (topic)
        .uvarint(1)  // ClusterId: tag 0 of the message
        .tagged(0, cluster);
    return w;
  };
  expect_wire(m, 1, build(true));
  EXPECT_EQ(hex(encode_body(m, 0)), hex(build(false).bytes()));

  // Null ClusterId (the default) is not written at all: neither tag, size nor the 23 bytes of
  // the string, and the message's section counts no field.
  m.cluster_id.reset();
  EXPECT_EQ(encode_body(m, 1).back(), std::byte{0x00});
  EXPECT_EQ(encode_body(m, 1).size(), build(true).size() - 1 - 1 - 23);
}

std::vector<std::byte> snapshot_chunk() {
  std::vector<std::byte> b(300);
  for (std::size_t i = 0; i < b.size(); ++i)
    b[i] = std::byte(static_cast<std::uint8_t>(i * 13 + 5));
  return b;
}

// The snapshot chunk of FetchSnapshotResponse v1, as built by hand: UnalignedRecords is a
// compact length (uvarint 301 = 0xad 0x02) and the bytes.
Wire fetch_snapshot_response_wire(const std::vector<std::byte>& chunk, bool with_leader,
                                  bool with_endpoints) {
  Wire leader;
  leader.i32(1).i32(9).no_tags();
  Wire endpoints;
  endpoints.compact_array(1).i32(1).compact_string("ctl-1").u16(9093).no_tags();
  Wire w;
  w.i32(0)                     // ThrottleTimeMs
      .i16(0)                  // ErrorCode
      .compact_array(1)        // Topics
      .compact_string(kTopic)  //   Name
      .compact_array(1)        //   Partitions
      .i32(0)                  //     Index
      .i16(0)                  //     ErrorCode
      .i64(4000)               //     SnapshotId.EndOffset
      .i32(8)                  //     SnapshotId.Epoch
      .no_tags()
      .i64(123456)                //     Size
      .i64(1024)                  //     Position
      .uvarint(chunk.size() + 1)  //     UnalignedRecords
      .raw(chunk);
  if (with_leader)
    w.uvarint(1).tagged(0, leader);  //     CurrentLeader: tag 0
  else
    w.no_tags();
  w.no_tags();  // (topic)
  if (with_endpoints)
    w.uvarint(1).tagged(0, endpoints);  // NodeEndpoints: tag 0 (v1+)
  else
    w.no_tags();
  return w;
}

FetchSnapshotResponse fetch_snapshot_response() {
  FetchSnapshotResponse m;
  auto& p = m.topics.emplace_back(FetchSnapshotResponse::TopicSnapshot{.name = std::string(kTopic)})
                .partitions.emplace_back();
  p.index = 0;
  p.snapshot_id = {.end_offset = 4000, .epoch = 8};
  p.current_leader = {.leader_id = 1, .leader_epoch = 9};
  p.size = 123456;
  p.position = 1024;
  m.node_endpoints.push_back({.node_id = 1, .host = "ctl-1", .port = 9093});
  return m;
}

TEST(KafkaQuorumWire, FetchSnapshotResponseV1WithSnapshotBytes) {
  std::vector<std::byte> chunk = snapshot_chunk();
  FetchSnapshotResponse m = fetch_snapshot_response();
  m.topics[0].partitions[0].unaligned_records.add_bytes(chunk);
  // The chunk's compact length: 301 as an unsigned varint.
  EXPECT_EQ(hex(Wire().uvarint(chunk.size() + 1).bytes()), "ad 02 ");
  expect_wire(m, 1, fetch_snapshot_response_wire(chunk, true, true));

  // v0: no NodeEndpoints. A CurrentLeader of (0, 0) is Kafka's default here: not written.
  m.topics[0].partitions[0].current_leader = {};
  EXPECT_EQ(hex(encode_body(m, 0)), hex(fetch_snapshot_response_wire(chunk, false, false).bytes()));
}

TEST(KafkaQuorumWire, FetchSnapshotChunkIsReadInPlace) {
  std::vector<std::byte> chunk = snapshot_chunk();
  std::vector<std::byte> in = fetch_snapshot_response_wire(chunk, true, true).bytes();
  FetchSnapshotResponse back;
  ASSERT_TRUE(decodes_whole(in, 1, back));
  std::span<std::byte> view = back.topics[0].partitions[0].unaligned_records.view();
  ASSERT_EQ(view.size(), chunk.size());
  EXPECT_GE(view.data(), in.data());  // a view into the frame, not a copy
  EXPECT_LE(view.data() + view.size(), in.data() + in.size());
  EXPECT_TRUE(std::equal(view.begin(), view.end(), chunk.begin()));
}

TEST(KafkaQuorumWire, FetchSnapshotChunkSentFromAFile) {
  std::vector<std::byte> snapshot(5000);
  for (std::size_t i = 0; i < snapshot.size(); ++i)
    snapshot[i] = std::byte(static_cast<std::uint8_t>(i * 7 + 1));
  int fd = memfd_create("snapshot", 0);
  ASSERT_GE(fd, 0);
  auto closer = std::shared_ptr<void>(nullptr, [fd](void*) { ::close(fd); });
  ASSERT_EQ(::write(fd, snapshot.data(), snapshot.size()), static_cast<ssize_t>(snapshot.size()));

  FetchSnapshotResponse m = fetch_snapshot_response();
  m.topics[0].partitions[0].unaligned_records.add_file({closer, fd, 1024, 300});
  Writer w(false);
  m.encode(w, 1);
  net::Response resp = w.finish();
  std::size_t file_pieces = 0;
  for (const auto& piece : resp.pieces())
    file_pieces += piece.file.fd == fd;
  EXPECT_EQ(file_pieces, 1u);  // sent from the file, never copied into the response
  std::vector<std::byte> chunk(snapshot.begin() + 1024, snapshot.begin() + 1324);
  EXPECT_EQ(hex(flatten(resp)), hex(fetch_snapshot_response_wire(chunk, true, true).bytes()));
  EXPECT_EQ(m.encoded_size(1), resp.size());
}

TEST(KafkaQuorumWire, UnalignedRecordsIsNeverNull) {
  // Not nullable in any version: the default is an empty chunk, which is what decoding an
  // empty one gives back, so a default message survives its round trip.
  FetchSnapshotResponse m;
  m.topics.emplace_back().partitions.emplace_back();
  EXPECT_FALSE(m.topics[0].partitions[0].unaligned_records.is_null());
  for (std::int16_t v = 0; v <= 1; ++v) {
    std::vector<std::byte> in = encode_body(m, v);
    FetchSnapshotResponse back;
    ASSERT_TRUE(decodes_whole(in, v, back));
    EXPECT_TRUE(back == m) << "v" << v;
  }
  // A null one cannot be said on the wire: it is written as empty.
  FetchSnapshotResponse with_null = m;
  with_null.topics[0].partitions[0].unaligned_records.set_null();
  EXPECT_EQ(encode_body(with_null, 1), encode_body(m, 1));
}

// ---- tagged fields ----

TEST(KafkaQuorumWire, UnknownTagsAreSkippedKnownTagsMustFillTheirSize) {
  Wire unknown = vote_request_v2_wire();
  unknown.uvarint(1).tagged(5, Wire().i8(1).i8(2).i8(3));  // a tag this version does not know
  std::vector<std::byte> in = unknown.bytes();
  VoteRequest back;
  ASSERT_TRUE(decodes_whole(in, 2, back));
  EXPECT_TRUE(back == vote_request());

  VoteResponse m;
  m.node_endpoints.push_back({.node_id = 3, .host = "ctl-3", .port = 9093});
  Wire endpoints;
  endpoints.compact_array(1).i32(3).compact_string("ctl-3").u16(9093).no_tags();
  auto with_size = [&](std::size_t size, bool extra_byte) {
    Wire w;
    w.i16(0).compact_array(0).uvarint(1).uvarint(0).uvarint(size).raw(endpoints.bytes());
    if (extra_byte) w.i8(0);
    return w.bytes();
  };
  in = with_size(endpoints.size(), false);
  VoteResponse ok;
  ASSERT_TRUE(decodes_whole(in, 1, ok));
  EXPECT_TRUE(ok == m);
  // A v0 reader knows no tag 0: skipped, whatever it holds.
  VoteResponse v0;
  ASSERT_TRUE(decodes_whole(in, 0, v0));
  EXPECT_TRUE(v0.node_endpoints.empty());
  // Declared one byte longer than the value: refused, not half-read.
  in = with_size(endpoints.size() + 1, true);
  VoteResponse longer;
  Reader r(in);
  EXPECT_FALSE(longer.decode(r, 1));
  EXPECT_EQ(r.error(), DecodeError::tagged_field_size);
  // One byte shorter: the value runs out inside its field.
  in = with_size(endpoints.size() - 1, false);
  VoteResponse shorter;
  Reader rs(in);
  EXPECT_FALSE(shorter.decode(rs, 1));
  EXPECT_NE(rs.error(), DecodeError::none);
}

// ---- frames ----

// A decode of `frame` that must fail, whatever the failure.
template <class F>
void expect_every_cut_refused(const std::vector<std::byte>& frame, F&& decode) {
  for (std::size_t cut = 0; cut < frame.size(); ++cut) {
    std::vector<std::byte> prefix(frame.begin(), frame.begin() + static_cast<std::ptrdiff_t>(cut));
    EXPECT_NE(decode(prefix), DecodeError::none) << "cut at " << cut;
  }
}

template <class Req>
void check_request_frames(std::int16_t v, bool flex) {
  testing::Filler filler(static_cast<std::uint32_t>(v) + 100);
  Req req;
  testing::fill(req, v, filler);
  std::vector<std::byte> frame = flatten(encode_request(req, v, 77, std::string("samsa")));
  frame.erase(frame.begin(), frame.begin() + 4);
  auto decode = [](std::vector<std::byte>& f, Req& out) {
    auto h = decode_request_header(f);
    return h.ok() ? decode_request_body(f, h, out) : h.error;
  };
  auto h = decode_request_header(frame);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h.header_version, flex ? 2 : 1);
  Req back;
  ASSERT_EQ(decode(frame, back), DecodeError::none);
  EXPECT_TRUE(back == req);
  std::vector<std::byte> longer = frame;
  longer.push_back(std::byte{0});
  Req extra;
  EXPECT_EQ(decode(longer, extra), DecodeError::trailing_bytes);
  expect_every_cut_refused(frame, [&](std::vector<std::byte>& f) {
    Req partial;
    return decode(f, partial);
  });
}

template <class Resp>
void check_response_frames(std::int16_t v, bool flex) {
  testing::Filler filler(static_cast<std::uint32_t>(v) + 200);
  Resp resp;
  testing::fill(resp, v, filler);
  std::vector<std::byte> frame = flatten(encode_response(resp, v, 77));
  frame.erase(frame.begin(), frame.begin() + 4);
  auto decode = [v](std::vector<std::byte>& f, Resp& out) {
    auto h = decode_response_header(f, Resp::kApiKey, v);
    return h.ok() ? decode_response_body(f, h, v, out) : h.error;
  };
  auto h = decode_response_header(frame, Resp::kApiKey, v);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h.body_offset, flex ? 5u : 4u);  // response header v1 adds its tag section
  Resp back;
  ASSERT_EQ(decode(frame, back), DecodeError::none);
  EXPECT_TRUE(back == resp);
  std::vector<std::byte> longer = frame;
  longer.push_back(std::byte{0});
  Resp extra;
  EXPECT_EQ(decode(longer, extra), DecodeError::trailing_bytes);
  expect_every_cut_refused(frame, [&](std::vector<std::byte>& f) {
    Resp partial;
    return decode(f, partial);
  });
}

// Every version of each quorum api as a whole frame: the header version Kafka uses for it, a
// byte too many refused as trailing, every cut refused.
TEST(KafkaQuorumWire, FramesOfEveryVersion) {
  for (std::int16_t key : {52, 53, 54, 55, 59}) {
    bool known = visit_api(
        key, [&]<class Req, class Resp>(std::type_identity<Req>, std::type_identity<Resp>) {
          for (int iv = Req::kMinVersion; iv <= Req::kMaxVersion; ++iv) {
            const auto v = static_cast<std::int16_t>(iv);
            SCOPED_TRACE(std::string(Req::kName) + " v" + std::to_string(v));
            const bool flex = Req::kFirstFlexibleVersion >= 0 && v >= Req::kFirstFlexibleVersion;
            check_request_frames<Req>(v, flex);
            check_response_frames<Resp>(v, flex);
          }
        });
    EXPECT_TRUE(known) << "no codec for api key " << key;
  }
}

}  // namespace
}  // namespace samsa::kafka
