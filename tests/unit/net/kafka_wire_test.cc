// Wire primitives against hand-checked byte vectors (protocol.html's type table): varints,
// classic and compact strings, bytes and arrays, nulls, tagged fields, the request header's
// classic ClientId, nullable structs; the Writer's pieces (FileRanges never copied) and
// size prefix; Records' zero-copy view.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "net/kafka/api.h"

namespace samsa::kafka {
namespace {

std::vector<std::byte> B(std::initializer_list<int> v) {
  std::vector<std::byte> out;
  for (int x : v)
    out.push_back(std::byte(static_cast<std::uint8_t>(x)));
  return out;
}

std::vector<std::byte> S(std::string_view s) {
  std::vector<std::byte> out;
  for (char c : s)
    out.push_back(std::byte(static_cast<std::uint8_t>(c)));
  return out;
}

std::vector<std::byte> cat(std::initializer_list<std::vector<std::byte>> parts) {
  std::vector<std::byte> out;
  for (const auto& p : parts)
    out.insert(out.end(), p.begin(), p.end());
  return out;
}

template <class F>
std::vector<std::byte> written(F&& f) {
  Writer w(false);
  f(w);
  return flatten(w.finish());
}

template <class M>
std::vector<std::byte> encode_body(const M& m, std::int16_t version) {
  return written([&](Writer& w) { m.encode(w, version); });
}

// ---- varints ----

TEST(KafkaWire, UnsignedVarint32) {
  struct Case {
    std::vector<std::byte> bytes;
    std::uint32_t value;
  };
  const Case cases[] = {
      {B({0x00}), 0},
      {B({0x01}), 1},
      {B({0x7f}), 127},
      {B({0x80, 0x01}), 128},
      {B({0xac, 0x02}), 300},
      {B({0xff, 0x7f}), 16383},
      {B({0x80, 0x80, 0x01}), 16384},
      {B({0xff, 0xff, 0xff, 0xff, 0x0f}), 0xffffffffu},
  };
  for (const Case& c : cases) {
    auto bytes = c.bytes;
    Reader r(bytes);
    EXPECT_EQ(r.uvarint32(), c.value);
    EXPECT_TRUE(r.ok());
    EXPECT_EQ(r.remaining(), 0u);
    EXPECT_EQ(written([&](Writer& w) { w.uvarint(c.value); }), c.bytes) << c.value;
  }
}

TEST(KafkaWire, UnsignedVarint32Malformed) {
  auto too_big = B({0xff, 0xff, 0xff, 0xff, 0x10});  // a 33rd bit
  Reader a(too_big);
  EXPECT_EQ(a.uvarint32(), 0u);
  EXPECT_EQ(a.error(), DecodeError::varint_overflow);

  auto too_long = B({0x80, 0x80, 0x80, 0x80, 0x80, 0x01});  // six bytes
  Reader b(too_long);
  b.uvarint32();
  EXPECT_EQ(b.error(), DecodeError::varint_overflow);

  auto cut = B({0x80, 0x80});
  Reader c(cut);
  c.uvarint32();
  EXPECT_EQ(c.error(), DecodeError::truncated);
  EXPECT_EQ(c.error_offset(), 2u);
}

TEST(KafkaWire, Varint64AndZigZag) {
  auto max64 = B({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01});
  Reader r(max64);
  EXPECT_EQ(r.uvarint64(), ~0ull);
  EXPECT_TRUE(r.ok());
  auto over = B({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02});
  Reader o(over);
  o.uvarint64();
  EXPECT_EQ(o.error(), DecodeError::varint_overflow);

  // zig-zag: 0, -1, 1, -2, 2 ...
  auto zz = B({0x00, 0x01, 0x02, 0x03, 0x04, 0xff, 0xff, 0xff, 0xff, 0x0f});
  Reader z(zz);
  EXPECT_EQ(z.varint32(), 0);
  EXPECT_EQ(z.varint32(), -1);
  EXPECT_EQ(z.varint32(), 1);
  EXPECT_EQ(z.varint32(), -2);
  EXPECT_EQ(z.varint32(), 2);
  EXPECT_EQ(z.varint32(), std::numeric_limits<std::int32_t>::min());
  EXPECT_TRUE(z.ok());
  EXPECT_EQ(written([](Writer& w) {
              w.varint(-1);
              w.varint(1);
              w.varint(-64);
              w.varint(64);
            }),
            B({0x01, 0x02, 0x7f, 0x80, 0x01}));
}

// ---- fixed-size values ----

TEST(KafkaWire, BigEndianScalars) {
  auto bytes = written([](Writer& w) {
    w.i8(-2);
    w.i16(0x0102);
    w.i32(-1);
    w.i64(0x0102030405060708);
    w.u16(0xfffe);
    w.u32(0x80000000u);
    w.f64(1.5);
    w.boolean(true);
    w.boolean(false);
  });
  EXPECT_EQ(bytes, B({0xfe, 0x01, 0x02, 0xff, 0xff, 0xff, 0xff, 0x01, 0x02, 0x03, 0x04,
                      0x05, 0x06, 0x07, 0x08, 0xff, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x3f,
                      0xf8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00}));
  Reader r(bytes);
  EXPECT_EQ(r.i8(), -2);
  EXPECT_EQ(r.i16(), 0x0102);
  EXPECT_EQ(r.i32(), -1);
  EXPECT_EQ(r.i64(), 0x0102030405060708);
  EXPECT_EQ(r.u16(), 0xfffe);
  EXPECT_EQ(r.u32(), 0x80000000u);
  EXPECT_EQ(r.f64(), 1.5);
  EXPECT_TRUE(r.boolean());
  EXPECT_FALSE(r.boolean());
  EXPECT_TRUE(r.ok());
  // Past the end: zero, and the error stays the first one.
  EXPECT_EQ(r.i32(), 0);
  EXPECT_EQ(r.error(), DecodeError::truncated);
  EXPECT_EQ(r.error_offset(), bytes.size());
  EXPECT_EQ(r.i8(), 0);
  EXPECT_EQ(r.error_offset(), bytes.size());
}

// ---- strings, bytes, arrays ----

TEST(KafkaWire, ClassicAndCompactStrings) {
  EXPECT_EQ(written([](Writer& w) { w.string("abc", false); }), B({0x00, 0x03, 'a', 'b', 'c'}));
  EXPECT_EQ(written([](Writer& w) { w.string("abc", true); }), B({0x04, 'a', 'b', 'c'}));
  EXPECT_EQ(written([](Writer& w) { w.string("", true); }), B({0x01}));
  EXPECT_EQ(written([](Writer& w) { w.nullable_string(std::nullopt, false, true); }),
            B({0xff, 0xff}));
  EXPECT_EQ(written([](Writer& w) { w.nullable_string(std::nullopt, true, true); }), B({0x00}));
  // Null where the version has no null: an empty string instead.
  EXPECT_EQ(written([](Writer& w) { w.nullable_string(std::nullopt, false, false); }),
            B({0x00, 0x00}));
  std::string long_string(200, 'x');
  EXPECT_EQ(written([&](Writer& w) { w.string(long_string, true); }),
            cat({B({0xc9, 0x01}), S(long_string)}));

  auto in = cat({B({0x00, 0x03}), S("abc"), B({0x04}), S("xyz"), B({0xff, 0xff}), B({0x00})});
  Reader r(in);
  std::string a, b;
  std::optional<std::string> c = "not null", d = "not null";
  r.string(a, false);
  r.string(b, true);
  r.nullable_string(c, false, true);
  r.nullable_string(d, true, true);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(a, "abc");
  EXPECT_EQ(b, "xyz");
  EXPECT_EQ(c, std::nullopt);
  EXPECT_EQ(d, std::nullopt);
}

TEST(KafkaWire, ClassicStringsAreCutAtTheirLimit) {
  std::string huge(40000, 'z');
  auto bytes = written([&](Writer& w) { w.string(huge, false); });
  ASSERT_EQ(bytes.size(), 2u + 32767);
  EXPECT_EQ(bytes[0], std::byte{0x7f});
  EXPECT_EQ(bytes[1], std::byte{0xff});
  EXPECT_EQ(Writer::string_size(huge.size(), false), bytes.size());
  EXPECT_EQ(written([&](Writer& w) { w.string(huge, true); }).size(),
            Writer::string_size(huge.size(), true));
}

TEST(KafkaWire, StringLengthErrors) {
  auto neg = B({0xff, 0xfe});  // -2
  Reader a(neg);
  std::string s;
  a.string(s, false);
  EXPECT_EQ(a.error(), DecodeError::negative_length);

  auto null = B({0xff, 0xff});
  Reader b(null);
  b.string(s, false);
  EXPECT_EQ(b.error(), DecodeError::null_not_allowed);
  Reader b2(null);
  std::optional<std::string> o;
  b2.nullable_string(o, false, /*nullable=*/false);
  EXPECT_EQ(b2.error(), DecodeError::null_not_allowed);

  auto compact_null = B({0x00});
  Reader c(compact_null);
  c.string(s, true);
  EXPECT_EQ(c.error(), DecodeError::null_not_allowed);

  auto too_long = B({0x00, 0x05, 'a', 'b', 'c'});
  Reader d(too_long);
  d.string(s, false);
  EXPECT_EQ(d.error(), DecodeError::length_too_large);
  EXPECT_EQ(d.error_offset(), 2u);
}

TEST(KafkaWire, BytesAndArrays) {
  const std::vector<std::byte> payload = B({1, 2, 3});
  EXPECT_EQ(written([&](Writer& w) { w.bytes(payload, false); }),
            B({0x00, 0x00, 0x00, 0x03, 1, 2, 3}));
  EXPECT_EQ(written([&](Writer& w) { w.bytes(payload, true); }), B({0x04, 1, 2, 3}));
  EXPECT_EQ(written([](Writer& w) { w.null_length(false, true); }), B({0xff, 0xff, 0xff, 0xff}));
  EXPECT_EQ(written([](Writer& w) { w.null_length(true, true); }), B({0x00}));
  EXPECT_EQ(written([](Writer& w) { w.null_length(true, false); }), B({0x01}));
  EXPECT_EQ(written([](Writer& w) { w.array_length(2, false); }), B({0, 0, 0, 2}));
  EXPECT_EQ(written([](Writer& w) { w.array_length(2, true); }), B({0x03}));

  auto in = B({0x00, 0x00, 0x00, 0x02, 9, 8, 0xff, 0xff, 0xff, 0xff});
  Reader r(in);
  Bytes got;
  r.bytes(got, false);
  std::optional<Bytes> none = Bytes{};
  r.nullable_bytes(none, false, true);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(got, B({9, 8}));
  EXPECT_EQ(none, std::nullopt);
}

TEST(KafkaWire, ArrayCountsAreCheckedAgainstTheInput) {
  // 2^31-1 int32 elements announced, 8 bytes present.
  auto huge = B({0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 1, 0, 0, 0, 2});
  Reader a(huge);
  EXPECT_EQ(a.array_length(false, false, 4), 0);
  EXPECT_EQ(a.error(), DecodeError::length_too_large);
  // Exactly as many as fit is fine; one more is not.
  auto two = B({0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2});
  Reader b(two);
  EXPECT_EQ(b.array_length(false, false, 4), 2);
  auto three = B({0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 2});
  Reader c(three);
  c.array_length(false, false, 4);
  EXPECT_EQ(c.error(), DecodeError::length_too_large);
  // Compact: uvarint 0xffffffff means 2^32-2 elements.
  auto compact = B({0xff, 0xff, 0xff, 0xff, 0x0f});
  Reader d(compact);
  d.array_length(true, true, 1);
  EXPECT_EQ(d.error(), DecodeError::length_too_large);
  auto neg = B({0xff, 0xff, 0xff, 0xfe});
  Reader e(neg);
  e.array_length(false, true, 1);
  EXPECT_EQ(e.error(), DecodeError::negative_length);
  auto null = B({0xff, 0xff, 0xff, 0xff});
  Reader f(null);
  EXPECT_EQ(f.array_length(false, true, 1), -1);
  EXPECT_TRUE(f.ok());
}

// ---- headers ----

TEST(KafkaWire, RequestHeaderV2KeepsClassicClientId) {
  auto frame =
      cat({B({0x00, 0x03, 0x00, 0x0c, 0x00, 0x00, 0x00, 0x07, 0x00, 0x03}), S("abc"), B({0x00})});
  Reader r(frame);
  RequestHeader h;
  ASSERT_TRUE(h.decode(r, 2));
  EXPECT_EQ(r.remaining(), 0u);
  EXPECT_EQ(h.request_api_key, 3);
  EXPECT_EQ(h.request_api_version, 12);
  EXPECT_EQ(h.correlation_id, 7);
  EXPECT_EQ(h.client_id, std::optional<std::string>("abc"));
  EXPECT_EQ(encode_body(h, 2), frame);
  // v1: the same without the tagged-field count; null ClientId is int16 -1.
  RequestHeader n;
  n.request_api_key = 3;
  n.request_api_version = 4;
  n.correlation_id = 1;
  n.client_id = std::nullopt;
  EXPECT_EQ(encode_body(n, 1), B({0, 3, 0, 4, 0, 0, 0, 1, 0xff, 0xff}));
  EXPECT_EQ(encode_body(n, 2), B({0, 3, 0, 4, 0, 0, 0, 1, 0xff, 0xff, 0x00}));
  EXPECT_EQ(encode_body(n, 0), B({0, 3, 0, 4, 0, 0, 0, 1}));
}

TEST(KafkaWire, ResponseHeaders) {
  ResponseHeader h;
  h.correlation_id = 0x01020304;
  EXPECT_EQ(encode_body(h, 0), B({1, 2, 3, 4}));
  EXPECT_EQ(encode_body(h, 1), B({1, 2, 3, 4, 0}));
}

// ---- tagged fields ----

ApiVersionsResponse small_api_versions() {
  ApiVersionsResponse m;
  m.api_keys.push_back({.api_key = 18, .min_version = 0, .max_version = 4});
  m.throttle_time_ms = 0;
  return m;
}

TEST(KafkaWire, TaggedFieldsWrittenOnlyWhenNotDefault) {
  ApiVersionsResponse m = small_api_versions();
  // error 0; ApiKeys: compact count 2 (one element), 18/0/4, element tags 0; throttle 0;
  // top-level tags: none, since FinalizedFeaturesEpoch is at its default (-1).
  const auto plain = B({0, 0, 0x02, 0, 18, 0, 0, 0, 4, 0x00, 0, 0, 0, 0, 0x00});
  EXPECT_EQ(encode_body(m, 3), plain);
  m.finalized_features_epoch = 5;                                                // tag 1, int64
  m.zk_migration_ready = true;                                                   // tag 3, bool
  const auto tagged = B({0,    0,    0x02, 0, 18, 0, 0, 0, 4, 0x00, 0, 0, 0, 0,  //
                         0x02,                                                   // two tags
                         0x01, 0x08, 0,    0, 0,  0, 0, 0, 0, 5,                 // tag 1, 8 bytes
                         0x03, 0x01, 0x01});                                     // tag 3, 1 byte
  EXPECT_EQ(encode_body(m, 3), tagged);
  EXPECT_EQ(m.encoded_size(3), tagged.size());

  auto in = tagged;
  Reader r(in);
  ApiVersionsResponse d;
  ASSERT_TRUE(d.decode(r, 3));
  EXPECT_EQ(d.finalized_features_epoch, 5);
  EXPECT_TRUE(d.zk_migration_ready);
  EXPECT_TRUE(d == m);
  // In a non-flexible version nothing of it is written.
  EXPECT_EQ(encode_body(m, 2).size(), 2u + 4 + 6 + 4);
}

TEST(KafkaWire, UnknownTaggedFieldsAreSkipped) {
  // Tag 9 (unknown, 2 bytes) before tag 1: skipped, the known one still read.
  auto in = B({0,    0,    0x02, 0,   18,  0,    0,    0, 4, 0x00, 0, 0, 0, 0,  //
               0x02, 0x09, 0x02, 'h', 'i', 0x01, 0x08, 0, 0, 0,    0, 0, 0, 0, 7});
  Reader r(in);
  ApiVersionsResponse d;
  ASSERT_TRUE(d.decode(r, 3)) << decode_error_name(r.error());
  EXPECT_EQ(r.remaining(), 0u);
  EXPECT_EQ(d.finalized_features_epoch, 7);
}

TEST(KafkaWire, KnownTaggedFieldMustFillItsSize) {
  // Tag 1 (an int64) declared as 9 bytes.
  auto in = B({0,    0,    0x02, 0, 18, 0, 0, 0, 4, 0x00, 0, 0, 0, 0,  //
               0x01, 0x01, 0x09, 0, 0,  0, 0, 0, 0, 0,    7, 0});
  Reader r(in);
  ApiVersionsResponse d;
  EXPECT_FALSE(d.decode(r, 3));
  EXPECT_EQ(r.error(), DecodeError::tagged_field_size);
  // ...and declared as 7 bytes: the int64 runs out inside its field.
  auto shorter = B({0,    0,    0x02, 0, 18, 0, 0, 0, 4, 0x00, 0, 0, 0, 0,  //
                    0x01, 0x01, 0x07, 0, 0,  0, 0, 0, 0, 7});
  Reader s(shorter);
  EXPECT_FALSE(d.decode(s, 3));
  EXPECT_EQ(s.error(), DecodeError::truncated);
  EXPECT_EQ(s.error_offset(), 17u);  // where the int64 starts
}

TEST(KafkaWire, TaggedStructField) {
  // FetchRequest v15: ReplicaState is tag 1, a struct with its own tagged-field count.
  FetchRequest f;
  f.max_wait_ms = 500;
  f.min_bytes = 1;
  f.replica_state.replica_id = 3;
  f.replica_state.replica_epoch = 9;
  const auto bytes = encode_body(f, 15);
  const auto want = B({0,    0,    1,    0xf4, 0,    0,    0,    1,  // max wait, min bytes
                       0x7f, 0xff, 0xff, 0xff, 0x00,  // max bytes (default), isolation
                       0,    0,    0,    0,    0xff, 0xff, 0xff, 0xff,  // session id, epoch
                       0x01, 0x01,                                      // topics, forgotten: empty
                       0x01,                                            // rack id ""
                       0x01, 0x01, 0x0d,                                // one tag: 1, 13 bytes
                       0,    0,    0,    3,    0,    0,    0,    0,    0, 0, 0, 9, 0x00});
  EXPECT_EQ(bytes, want);
  auto in = bytes;
  Reader r(in);
  FetchRequest d;
  ASSERT_TRUE(d.decode(r, 15));
  EXPECT_EQ(d.replica_state.replica_id, 3);
  EXPECT_EQ(d.replica_state.replica_epoch, 9);
  // v14 carries ReplicaId positionally instead, and no tag.
  EXPECT_EQ(encode_body(f, 14).size(), want.size() - 16 + 1 + 4);
}

TEST(KafkaWire, NullableStructMarker) {
  ConsumerGroupHeartbeatResponse m;
  m.error_message = std::nullopt;
  m.member_id = std::string("m");
  auto null_assignment = encode_body(m, 0);
  // throttle, error, error message null (compact 0), member id "m", epoch, interval,
  // assignment null (int8 -1), no tags.
  EXPECT_EQ(null_assignment,
            B({0, 0, 0, 0, 0, 0, 0x00, 0x02, 'm', 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0x00}));
  m.assignment.emplace();
  m.assignment->topic_partitions.push_back({.topic_id = {}, .partitions = {7}});
  auto with = encode_body(m, 0);
  std::vector<std::byte> tail(with.begin() + 17, with.end());
  EXPECT_EQ(tail, cat({B({0x01, 0x02}), std::vector<std::byte>(16), B({0x02, 0, 0, 0, 7, 0x00}),
                       B({0x00, 0x00})}));
  Reader r(with);
  ConsumerGroupHeartbeatResponse d;
  ASSERT_TRUE(d.decode(r, 0));
  EXPECT_TRUE(d == m);
}

TEST(KafkaWire, DefaultsOfAbsentFields) {
  // v4 Fetch has no CurrentLeaderEpoch, LogStartOffset, SessionEpoch, RackId: decoding gives
  // the schema's defaults, not zero.
  FetchRequest f;
  f.topics.push_back({.topic = "t", .topic_id = {}, .partitions = {{.partition = 1}}});
  f.session_epoch = 77;
  f.topics[0].partitions[0].current_leader_epoch = 5;
  auto bytes = encode_body(f, 4);
  Reader r(bytes);
  FetchRequest d;
  ASSERT_TRUE(d.decode(r, 4));
  EXPECT_EQ(d.session_epoch, -1);
  EXPECT_EQ(d.topics[0].partitions[0].current_leader_epoch, -1);
  EXPECT_EQ(d.topics[0].partitions[0].log_start_offset, -1);
  EXPECT_EQ(d.max_bytes, 0x7fffffff);
  EXPECT_EQ(d.replica_id, -1);
  MetadataRequest m;
  EXPECT_TRUE(m.allow_auto_topic_creation);
  EXPECT_EQ(MetadataResponse{}.cluster_authorized_operations,
            std::numeric_limits<std::int32_t>::min());
}

// ---- records ----

TEST(KafkaWire, ProduceRecordsAreAViewIntoTheFrame) {
  ProduceRequest p;
  p.acks = -1;
  p.timeout_ms = 1000;
  std::vector<std::byte> batch = B({0xde, 0xad, 0xbe, 0xef, 0x01});
  auto& topic = p.topic_data.emplace_back();
  topic.name = "t";
  topic.partition_data.push_back({.index = 0x01020304, .records = Records(batch)});
  auto frame = flatten(encode_request(p, 9, 5, std::string("c")));
  frame.erase(frame.begin(), frame.begin() + 4);
  auto h = decode_request_header(frame);
  ASSERT_TRUE(h.ok());
  ProduceRequest d;
  ASSERT_EQ(decode_request_body(frame, h, d), DecodeError::none);
  Records& rec = d.topic_data[0].partition_data[0].records;
  ASSERT_FALSE(rec.is_null());
  ASSERT_EQ(rec.size(), batch.size());
  // The view points into the frame: patching it patches the frame (no copy was made).
  EXPECT_GE(rec.view().data(), frame.data());
  EXPECT_LE(rec.view().data() + rec.view().size(), frame.data() + frame.size());
  rec.view()[0] = std::byte{0x11};
  EXPECT_EQ(frame[static_cast<std::size_t>(rec.view().data() - frame.data())], std::byte{0x11});
  // Null records: compact length 0 (flexible) or int32 -1.
  topic.partition_data[0].records.set_null();
  auto v9 = encode_body(p, 9);
  auto v8 = encode_body(p, 8);
  // index, records null, then the partition's, topic's and message's tagged-field counts
  EXPECT_EQ(std::vector<std::byte>(v9.end() - 8, v9.end()), B({1, 2, 3, 4, 0, 0, 0, 0}));
  EXPECT_EQ(std::vector<std::byte>(v8.end() - 8, v8.end()),
            B({1, 2, 3, 4, 0xff, 0xff, 0xff, 0xff}));
}

TEST(KafkaWire, RecordsEquality) {
  auto a = B({1, 2, 3, 4});
  auto b = B({1, 2, 3, 4});
  Records x(a), y;
  EXPECT_FALSE(x == y);  // null vs not
  y.add_bytes(std::span<const std::byte>(b).first(1));
  y.add_bytes(std::span<const std::byte>(b).subspan(1));
  EXPECT_TRUE(x == y);  // same bytes, split differently
  b[3] = std::byte{9};
  EXPECT_FALSE(x == y);
  // Owned bytes: kept alive by the Records (a copy of it shares them), encoded like spans.
  net::Buffer owned(4);
  std::memcpy(owned.data(), a.data(), 4);
  Records z;
  z.add_owned(std::move(owned));
  Records z_copy = z;
  z = Records();
  EXPECT_TRUE(z_copy == x);
  ProduceRequest p;
  p.topic_data.push_back(
      {.name = "t", .topic_id = {}, .partition_data = {{.index = 1, .records = z_copy}}});
  Writer w(false);
  p.encode(w, 9);
  auto bytes = flatten(w.finish());
  Reader r(bytes);
  ProduceRequest d;
  ASSERT_TRUE(d.decode(r, 9));
  EXPECT_TRUE(d == p);
  EXPECT_TRUE(d.topic_data[0].partition_data[0].records == x);

  Records e1, e2;
  e1.set_empty();
  e2.set_empty();
  EXPECT_TRUE(e1 == e2);
  EXPECT_FALSE(e1 == Records());
}

// A temporary file holding `content`, removed at scope exit.
class TempFile {
 public:
  explicit TempFile(const std::vector<std::byte>& content) {
    char name[] = "/tmp/samsa-kafka-wire-XXXXXX";
    fd_ = mkstemp(name);
    path_ = name;
    if (fd_ >= 0) {
      EXPECT_EQ(::write(fd_, content.data(), content.size()), static_cast<ssize_t>(content.size()));
    }
  }
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    ::unlink(path_.c_str());
  }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  std::string path_;
};

TEST(KafkaWire, FetchResponseSendsFileRangesWithoutCopying) {
  // A "segment" with three batches' worth of bytes; partitions refer to slices of it.
  std::vector<std::byte> segment(3000);
  for (std::size_t i = 0; i < segment.size(); ++i)
    segment[i] = std::byte(i * 7 + 1);
  TempFile file(segment);
  ASSERT_GE(file.fd(), 0);
  auto keep = std::make_shared<int>(0);

  for (std::int16_t version :
       {std::int16_t(4), std::int16_t(11), std::int16_t(12), std::int16_t(16)}) {
    SCOPED_TRACE(version);
    FetchResponse with_files, with_bytes;
    for (FetchResponse* r : {&with_files, &with_bytes}) {
      auto& t = r->responses.emplace_back();
      if (version <= 12) t.topic = "topic";  // later versions name topics by id
      for (int p = 0; p < 3; ++p)
        t.partitions.push_back({.partition_index = p, .high_watermark = 10});
    }
    for (int p = 0; p < 3; ++p) {
      std::uint64_t off = static_cast<std::uint64_t>(p) * 1000;
      std::uint32_t len = 900 + static_cast<std::uint32_t>(p);
      Records& rf = with_files.responses[0].partitions[static_cast<std::size_t>(p)].records;
      rf.add_file({keep, file.fd(), off, len / 2});
      rf.add_file({keep, file.fd(), off + len / 2, len - len / 2});
      with_bytes.responses[0].partitions[static_cast<std::size_t>(p)].records.add_bytes(
          std::span<const std::byte>(segment).subspan(off, len));
    }
    Writer w;
    with_files.encode(w, version);
    net::Response resp = w.finish();
    std::size_t file_pieces = 0;
    for (const auto& piece : resp.pieces()) {
      if (piece.file.fd >= 0) {
        ++file_pieces;
        EXPECT_EQ(piece.file.fd, file.fd());
      }
    }
    EXPECT_EQ(file_pieces, 6u);
    EXPECT_EQ(resp.size(), 4 + with_files.encoded_size(version));
    auto wire = flatten(resp);
    Writer wb;
    with_bytes.encode(wb, version);
    EXPECT_EQ(wire, flatten(wb.finish()));
    // The size prefix counts the file bytes too.
    Reader r(wire);
    EXPECT_EQ(r.i32(), static_cast<std::int32_t>(wire.size() - 4));
    // And the client side reads it back as one contiguous view per partition.
    std::span<std::byte> body(wire.data() + 4, wire.size() - 4);
    Reader br(body);
    FetchResponse d;
    ASSERT_TRUE(d.decode(br, version));
    EXPECT_TRUE(d == with_bytes);
  }
}

TEST(KafkaWire, ManyPartitionsFetchResponse) {
  // Thousands of partitions, each with a stored batch: the writer makes one piece per file
  // range plus the bytes around them, and the encoding matches its precomputed size.
  std::vector<std::byte> segment(64, std::byte{0x42});
  TempFile file(segment);
  auto keep = std::make_shared<int>(0);
  FetchResponse r;
  constexpr int kTopics = 10, kPartitions = 500;
  for (int t = 0; t < kTopics; ++t) {
    auto& topic = r.responses.emplace_back();
    topic.topic_id[0] = static_cast<std::uint8_t>(t + 1);
    for (int p = 0; p < kPartitions; ++p) {
      auto& part = topic.partitions.emplace_back();
      part.partition_index = p;
      part.high_watermark = 1000 + p;
      part.records.add_file({keep, file.fd(), 0, 64});
    }
  }
  const std::int16_t version = 16;
  Writer w;
  r.encode(w, version);
  net::Response resp = w.finish();
  EXPECT_EQ(resp.size(), 4 + r.encoded_size(version));
  std::size_t files = 0, buffers = 0;
  for (const auto& p : resp.pieces())
    (p.file.fd >= 0 ? files : buffers)++;
  EXPECT_EQ(files, static_cast<std::size_t>(kTopics * kPartitions));
  EXPECT_LE(buffers, files + 1);
  auto wire = flatten(resp);
  std::span<std::byte> body(wire.data() + 4, wire.size() - 4);
  Reader br(body);
  FetchResponse d;
  ASSERT_TRUE(d.decode(br, version));
  ASSERT_EQ(d.responses.size(), static_cast<std::size_t>(kTopics));
  EXPECT_EQ(d.responses[9].partitions[499].high_watermark, 1499);
  EXPECT_EQ(d.responses[9].partitions[499].records.size(), 64u);
  EXPECT_EQ(d.responses[9].partitions[499].records.view()[63], std::byte{0x42});
}

TEST(KafkaWire, WriterChunksLargeOutputWithoutCopyingIt) {
  // 1 MiB of strings: several geometric chunks, and the concatenation is what was written.
  Writer w;
  std::string s(1000, 'q');
  for (int i = 0; i < 1024; ++i) {
    s[0] = static_cast<char>('a' + i % 26);
    w.string(s, false);
  }
  EXPECT_EQ(w.size(), 4 + 1024 * 1002u);
  net::Response r = w.finish();
  EXPECT_GT(r.pieces().size(), 3u);
  EXPECT_EQ(r.size(), 4 + 1024 * 1002u);
  auto wire = flatten(r);
  Reader rd(wire);
  EXPECT_EQ(rd.i32(), 1024 * 1002);
  for (int i = 0; i < 1024; ++i) {
    std::string got;
    rd.string(got, false);
    ASSERT_EQ(got.size(), 1000u);
    ASSERT_EQ(got[0], static_cast<char>('a' + i % 26));
  }
  EXPECT_EQ(rd.remaining(), 0u);
}

TEST(KafkaWire, DecodeErrorNames) {
  EXPECT_EQ(decode_error_name(DecodeError::none), "none");
  EXPECT_EQ(decode_error_name(DecodeError::length_too_large), "length_too_large");
  EXPECT_EQ(decode_error_name(DecodeError::trailing_bytes), "trailing_bytes");
}

}  // namespace
}  // namespace samsa::kafka
