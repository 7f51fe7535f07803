// Api keys, header versions, error codes, and the frame-level helpers (decode a request
// frame, encode a response frame).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "base/kafka_errors.h"
#include "net/kafka/api.h"

namespace samsa::kafka {
namespace {

std::vector<std::byte> B(std::initializer_list<int> v) {
  std::vector<std::byte> out;
  for (int x : v)
    out.push_back(std::byte(static_cast<std::uint8_t>(x)));
  return out;
}

TEST(KafkaApi, Names) {
  EXPECT_EQ(api_name(0), "Produce");
  EXPECT_EQ(api_name(1), "Fetch");
  EXPECT_EQ(api_name(18), "ApiVersions");
  EXPECT_EQ(api_name(68), "ConsumerGroupHeartbeat");
  EXPECT_EQ(api_name(92), "DeleteShareGroupOffsets");
  EXPECT_EQ(api_name(93), "");
  EXPECT_EQ(api_name(-1), "");
  EXPECT_EQ(key(ApiKey::fetch), 1);
  EXPECT_EQ(key(ApiKey::describe_topic_partitions), 75);
}

TEST(KafkaApi, HeaderVersions) {
  // Request header v2 exactly for flexible versions.
  EXPECT_EQ(request_header_version(18, 2), 1);
  EXPECT_EQ(request_header_version(18, 3), 2);
  EXPECT_EQ(request_header_version(18, 9), 2);  // a future ApiVersions: still flexible
  EXPECT_EQ(request_header_version(0, 8), 1);
  EXPECT_EQ(request_header_version(0, 9), 2);
  EXPECT_EQ(request_header_version(1, 11), 1);
  EXPECT_EQ(request_header_version(1, 12), 2);
  EXPECT_EQ(request_header_version(17, 1), 1);  // SaslHandshake: never flexible
  EXPECT_EQ(request_header_version(68, 0), 2);  // ConsumerGroupHeartbeat: flexible from 0
  EXPECT_EQ(request_header_version(7, 0), 0);   // ControlledShutdown v0
  EXPECT_EQ(request_header_version(500, 0), 1);
  // Response header v1 for flexible versions, except ApiVersions.
  EXPECT_EQ(response_header_version(18, 3), 0);
  EXPECT_EQ(response_header_version(18, 4), 0);
  EXPECT_EQ(response_header_version(3, 8), 0);
  EXPECT_EQ(response_header_version(3, 9), 1);
  EXPECT_EQ(response_header_version(1, 12), 1);
}

// The header table agrees with every generated codec's flexible versions.
TEST(KafkaApi, GeneratedApisAgreeWithTheKeyTable) {
  std::set<std::int16_t> keys;
  for (const GeneratedApi& a : kGeneratedApis) {
    SCOPED_TRACE(std::string(a.name));
    EXPECT_TRUE(keys.insert(a.key).second);
    EXPECT_EQ(api_name(a.key), a.name);
    for (int v = a.min_version; v <= a.max_version; ++v) {
      bool flex = a.first_flexible_version >= 0 && v >= a.first_flexible_version;
      EXPECT_EQ(request_header_version(a.key, static_cast<std::int16_t>(v)), flex ? 2 : 1);
    }
    bool visited = visit_api(
        a.key, [&]<class Req, class Resp>(std::type_identity<Req>, std::type_identity<Resp>) {
          EXPECT_EQ(Req::kApiKey, a.key);
          EXPECT_EQ(Resp::kApiKey, a.key);
          EXPECT_TRUE(Req::kIsRequest);
          EXPECT_FALSE(Resp::kIsRequest);
          EXPECT_EQ(Req::kMinVersion, a.min_version);
          EXPECT_EQ(Resp::kMaxVersion, a.max_version);
          EXPECT_EQ(Req::kFirstFlexibleVersion, a.first_flexible_version);
        });
    EXPECT_TRUE(visited);
  }
  EXPECT_FALSE(visit_api(4, [](auto, auto) {}));  // LeaderAndIsr: gone in Kafka 4
  EXPECT_FALSE(visit_api(-1, [](auto, auto) {}));
}

TEST(KafkaApi, ErrorCodes) {
  EXPECT_EQ(code(ErrorCode::none), 0);
  EXPECT_EQ(code(ErrorCode::unknown_topic_or_partition), 3);
  EXPECT_EQ(code(ErrorCode::not_leader_or_follower), 6);
  EXPECT_EQ(code(ErrorCode::unsupported_version), 35);
  EXPECT_EQ(code(ErrorCode::unknown_topic_id), 100);
  EXPECT_EQ(code(ErrorCode::share_session_limit_reached), 133);
  EXPECT_EQ(error_name(-1), "UNKNOWN_SERVER_ERROR");
  EXPECT_EQ(error_name(0), "NONE");
  EXPECT_EQ(error_name(ErrorCode::out_of_order_sequence_number), "OUT_OF_ORDER_SEQUENCE_NUMBER");
  EXPECT_EQ(error_name(58), "SASL_AUTHENTICATION_FAILED");
  EXPECT_EQ(error_name(129), "REBOOTSTRAP_REQUIRED");
  EXPECT_EQ(error_name(134), "");
  EXPECT_EQ(error_name(-2), "");
}

TEST(KafkaApi, DecodeRequestHeader) {
  // Metadata v9 (flexible): header v2, ClientId "ab", one tagged field in the header that we
  // do not know (skipped), then the body.
  auto frame = B({0,    3, 0, 9, 0,   0, 0, 42, 0, 2, 'a', 'b', 0x01, 0x05, 0x01, 0x7a,  //
                  0x00, 1, 0, 0, 0x00});  // body: Topics null, auto create, 2 bools, tags
  DecodedRequestHeader h = decode_request_header(frame);
  ASSERT_TRUE(h.ok()) << decode_error_name(h.error);
  EXPECT_EQ(h.header_version, 2);
  EXPECT_EQ(h.header.request_api_key, 3);
  EXPECT_EQ(h.header.request_api_version, 9);
  EXPECT_EQ(h.header.correlation_id, 42);
  EXPECT_EQ(h.header.client_id, std::optional<std::string>("ab"));
  EXPECT_EQ(h.body_offset, 16u);
  MetadataRequest m;
  ASSERT_EQ(decode_request_body(frame, h, m), DecodeError::none);
  EXPECT_EQ(m.topics, std::nullopt);
  EXPECT_TRUE(m.allow_auto_topic_creation);

  // Wrong type for the api: refused.
  FetchRequest f;
  EXPECT_EQ(decode_request_body(frame, h, f), DecodeError::unknown_api);
  // A byte too many.
  auto longer = frame;
  longer.push_back(std::byte{0});
  auto hl = decode_request_header(longer);
  std::size_t at = 0;
  EXPECT_EQ(decode_request_body(longer, hl, m, &at), DecodeError::trailing_bytes);
  EXPECT_EQ(at, frame.size());
  // A version the codec does not have.
  auto v14 = frame;
  v14[3] = std::byte{14};
  auto h14 = decode_request_header(v14);
  ASSERT_TRUE(h14.ok());
  EXPECT_EQ(decode_request_body(v14, h14, m), DecodeError::unsupported_version);
}

TEST(KafkaApi, DecodeRequestHeaderErrors) {
  auto unknown = B({0x01, 0x00, 0, 0, 0, 0, 0, 9});  // api key 256
  auto h = decode_request_header(unknown);
  EXPECT_EQ(h.error, DecodeError::unknown_api);
  EXPECT_EQ(h.header.request_api_key, 256);
  EXPECT_EQ(h.header.correlation_id, 9);

  auto frame = B({0, 18, 0, 0, 0, 0, 0, 1, 0, 3, 'a', 'b', 'c'});
  for (std::size_t cut = 0; cut < frame.size(); ++cut) {
    std::vector<std::byte> prefix(frame.begin(), frame.begin() + static_cast<std::ptrdiff_t>(cut));
    auto hp = decode_request_header(prefix);
    EXPECT_FALSE(hp.ok()) << cut;
  }
  EXPECT_TRUE(decode_request_header(frame).ok());
}

TEST(KafkaApi, EncodeResponseFrames) {
  ApiVersionsResponse av;
  av.api_keys.push_back({.api_key = 18, .min_version = 0, .max_version = 4});
  // v3 body is flexible but the header stays v0: size, correlation id, body.
  net::Response r = encode_response(av, 3, 0x0a0b0c0d);
  auto wire = flatten(r);
  EXPECT_EQ(wire, B({0, 0, 0,    19, 0x0a, 0x0b, 0x0c, 0x0d,  // size 19, correlation id
                     0, 0, 0x02, 0,  18,   0,    0,    0,    4, 0, 0, 0, 0, 0, 0}));
  // Metadata v9: header v1 (a tagged-field count after the correlation id).
  MetadataResponse md;
  auto mw = flatten(encode_response(md, 9, 7));
  std::vector<std::byte> head(mw.begin(), mw.begin() + 9);
  EXPECT_EQ(head, B({0, 0, 0, static_cast<int>(mw.size() - 4), 0, 0, 0, 7, 0x00}));
  auto body = std::span<std::byte>(mw).subspan(4);
  auto h = decode_response_header(body, 3, 9);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h.header.correlation_id, 7);
  EXPECT_EQ(h.body_offset, 5u);
  MetadataResponse back;
  EXPECT_EQ(decode_response_body(body, h, 9, back), DecodeError::none);
  EXPECT_TRUE(back == md);
}

// AlterPartitionReassignmentsResponse v1 carries AllowReplicationFactorChange between
// ThrottleTimeMs and ErrorCode (Kafka's schema): without it a v1 client (Kafka 4's
// kafka-reassign-partitions) misreads the rest of the frame.
TEST(KafkaApi, AlterPartitionReassignmentsResponseV1Layout) {
  AlterPartitionReassignmentsResponse r;
  r.allow_replication_factor_change = false;
  r.error_message = std::nullopt;
  r.responses.push_back(
      {.name = "t",
       .partitions = {{.partition_index = 3, .error_code = 0, .error_message = std::nullopt}}});
  auto body = [](const std::vector<std::byte>& w) {
    return std::vector<std::byte>(w.begin() + 9, w.end());  // size, correlation id, tags
  };
  EXPECT_EQ(body(flatten(encode_response(r, 1, 7))),
            B({0, 0, 0,   0,                 // ThrottleTimeMs
               0,                            // AllowReplicationFactorChange
               0, 0,                         // ErrorCode
               0,                            // ErrorMessage: null
               2, 2, 't',                    // one topic, "t"
               2, 0, 0,   0, 3, 0, 0, 0, 0,  // one partition: 3, no error, null message, tags
               0, 0}));                      // the topic's and the body's tags
  EXPECT_EQ(body(flatten(encode_response(r, 0, 7))),
            B({0, 0, 0, 0, 0, 0, 0, 2, 2, 't', 2, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0}));
}

TEST(KafkaApi, EncodeRequestRoundTrip) {
  FetchRequest f;
  f.max_wait_ms = 500;
  f.topics.push_back({.topic = "", .topic_id = {1, 2, 3}, .partitions = {{.partition = 4}}});
  auto wire = flatten(encode_request(f, 13, 99, std::nullopt));
  std::span<std::byte> frame = std::span<std::byte>(wire).subspan(4);
  auto h = decode_request_header(frame);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h.header.client_id, std::nullopt);
  EXPECT_EQ(h.header_version, 2);
  FetchRequest back;
  ASSERT_EQ(decode_request_body(frame, h, back), DecodeError::none);
  EXPECT_TRUE(back == f);
}

// The decode allowance: a small frame naming a great many tiny elements is charged what its
// decoded arrays allocate, and refused (over_budget) past the limit, before allocating it.
TEST(KafkaApi, DecodeAllowanceBoundsWhatAFrameMakesUsAllocate) {
  ProduceRequest p;
  p.acks = -1;
  p.timeout_ms = 1000;
  auto& t = p.topic_data.emplace_back();
  t.name = "t";
  constexpr int kParts = 100000;
  t.partition_data.resize(kParts);  // empty (null) records: ~6 bytes each on the wire
  for (int i = 0; i < kParts; ++i)
    t.partition_data[static_cast<std::size_t>(i)].index = i;
  auto wire = flatten(encode_request(p, 9, 1, std::nullopt));
  std::span<std::byte> frame = std::span<std::byte>(wire).subspan(4);
  auto h = decode_request_header(frame);
  ASSERT_TRUE(h.ok());
  const std::size_t need = kParts * sizeof(ProduceRequest::PartitionProduceData);
  EXPECT_GT(need, 5 * frame.size());  // decoded, it is several times the frame

  DecodeAllowance enough{need + 4096, 0};
  ProduceRequest back;
  ASSERT_EQ(decode_request_body(frame, h, back, nullptr, &enough), DecodeError::none);
  EXPECT_GE(enough.used, need);
  EXPECT_TRUE(back == p);

  DecodeAllowance tight{need / 2, 0};
  ProduceRequest refused;
  std::size_t at = 0;
  EXPECT_EQ(decode_request_body(frame, h, refused, &at, &tight), DecodeError::over_budget);
  EXPECT_TRUE(refused.topic_data.empty() || refused.topic_data[0].partition_data.capacity() == 0);
}

}  // namespace
}  // namespace samsa::kafka
