// Kafka api keys, request/response headers and helpers to decode a request frame and encode
// a response frame around the generated message codecs.
//
//   auto h = kafka::decode_request_header(frame);            // frame: without the size prefix
//   if (!h.ok()) ...                                           // h.error, h.error_offset
//   kafka::visit_api(h.header.request_api_key, [&]<class Req, class Resp>(
//       std::type_identity<Req>, std::type_identity<Resp>) {
//     Req req;
//     if (kafka::decode_request_body(frame, h, req) != kafka::DecodeError::none) ...
//     Resp resp = ...;
//     conn.respond(seq, kafka::encode_response(resp, h.header.request_api_version,
//                                              h.header.correlation_id));
//   });
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "net/buffer.h"
#include "net/kafka/gen/api_table.h"
#include "net/kafka/gen/request_header.h"
#include "net/kafka/gen/response_header.h"
#include "net/kafka/wire.h"

namespace samsa::kafka {

// Every api key Kafka 4.1 defines (4-7 are the ZooKeeper-era inter-broker APIs 4.0 removed).
enum class ApiKey : std::int16_t {
  produce = 0,
  fetch = 1,
  list_offsets = 2,
  metadata = 3,
  leader_and_isr = 4,
  stop_replica = 5,
  update_metadata = 6,
  controlled_shutdown = 7,
  offset_commit = 8,
  offset_fetch = 9,
  find_coordinator = 10,
  join_group = 11,
  heartbeat = 12,
  leave_group = 13,
  sync_group = 14,
  describe_groups = 15,
  list_groups = 16,
  sasl_handshake = 17,
  api_versions = 18,
  create_topics = 19,
  delete_topics = 20,
  delete_records = 21,
  init_producer_id = 22,
  offset_for_leader_epoch = 23,
  add_partitions_to_txn = 24,
  add_offsets_to_txn = 25,
  end_txn = 26,
  write_txn_markers = 27,
  txn_offset_commit = 28,
  describe_acls = 29,
  create_acls = 30,
  delete_acls = 31,
  describe_configs = 32,
  alter_configs = 33,
  alter_replica_log_dirs = 34,
  describe_log_dirs = 35,
  sasl_authenticate = 36,
  create_partitions = 37,
  create_delegation_token = 38,
  renew_delegation_token = 39,
  expire_delegation_token = 40,
  describe_delegation_token = 41,
  delete_groups = 42,
  elect_leaders = 43,
  incremental_alter_configs = 44,
  alter_partition_reassignments = 45,
  list_partition_reassignments = 46,
  offset_delete = 47,
  describe_client_quotas = 48,
  alter_client_quotas = 49,
  describe_user_scram_credentials = 50,
  alter_user_scram_credentials = 51,
  vote = 52,
  begin_quorum_epoch = 53,
  end_quorum_epoch = 54,
  describe_quorum = 55,
  alter_partition = 56,
  update_features = 57,
  envelope = 58,
  fetch_snapshot = 59,
  describe_cluster = 60,
  describe_producers = 61,
  broker_registration = 62,
  broker_heartbeat = 63,
  unregister_broker = 64,
  describe_transactions = 65,
  list_transactions = 66,
  allocate_producer_ids = 67,
  consumer_group_heartbeat = 68,
  consumer_group_describe = 69,
  controller_registration = 70,
  get_telemetry_subscriptions = 71,
  push_telemetry = 72,
  assign_replicas_to_dirs = 73,
  list_config_resources = 74,
  describe_topic_partitions = 75,
  share_group_heartbeat = 76,
  share_group_describe = 77,
  share_fetch = 78,
  share_acknowledge = 79,
  add_raft_voter = 80,
  remove_raft_voter = 81,
  update_raft_voter = 82,
  initialize_share_group_state = 83,
  read_share_group_state = 84,
  write_share_group_state = 85,
  delete_share_group_state = 86,
  read_share_group_state_summary = 87,
  streams_group_heartbeat = 88,
  streams_group_describe = 89,
  describe_share_group_offsets = 90,
  alter_share_group_offsets = 91,
  delete_share_group_offsets = 92,
};

constexpr std::int16_t key(ApiKey k) {
  return static_cast<std::int16_t>(k);
}

// "Produce", "Fetch", ...; empty for keys Kafka does not define.
std::string_view api_name(std::int16_t key);

// Request header version for a request of this api and version: 2 for flexible versions,
// else 1 (0 only for ControlledShutdown v0). Keys Kafka does not define get 1.
std::int16_t request_header_version(std::int16_t key, std::int16_t version);
// Response header version: 1 for flexible versions, else 0; ApiVersions always 0 (a client
// must be able to read the error of a version the broker does not know).
std::int16_t response_header_version(std::int16_t key, std::int16_t version);

struct DecodedRequestHeader {
  RequestHeader header;
  std::int16_t header_version = 0;
  std::size_t body_offset = 0;  // where the body starts in the frame
  DecodeError error = DecodeError::none;
  std::size_t error_offset = 0;
  bool ok() const { return error == DecodeError::none; }
};

// Decodes the request header at the start of `frame` (a frame without its size prefix). For
// api keys Kafka does not define the error is unknown_api, with api key, version and
// correlation id still filled in when the frame has them (so the caller can log or close).
DecodedRequestHeader decode_request_header(std::span<std::byte> frame);

// Decodes the body that follows the header: all the rest of the frame must be exactly one
// message of version h.header.request_api_version. Records fields view `frame`.
template <class Req>
DecodeError decode_request_body(std::span<std::byte> frame, const DecodedRequestHeader& h, Req& out,
                                std::size_t* error_offset = nullptr,
                                DecodeAllowance* allowance = nullptr) {
  DecodeError e = DecodeError::none;
  std::size_t at = h.body_offset;
  if (h.header.request_api_key != Req::kApiKey) {
    e = DecodeError::unknown_api;
  } else {
    Reader r(frame.subspan(h.body_offset), h.body_offset, allowance);
    if (!out.decode(r, h.header.request_api_version)) {
      e = r.error();
      at = r.error_offset();
    } else if (r.remaining() != 0) {
      e = DecodeError::trailing_bytes;
      at = h.body_offset + r.position();
    }
  }
  if (error_offset) *error_offset = at;
  return e;
}

// A complete response frame (size prefix, header, body) for a request's correlation id.
template <class Resp>
net::Response encode_response(const Resp& body, std::int16_t version, std::int32_t correlation_id) {
  Writer w;
  ResponseHeader h;
  h.correlation_id = correlation_id;
  h.encode(w, response_header_version(Resp::kApiKey, version));
  body.encode(w, version);
  return w.finish();
}

// A complete request frame (size prefix, header, body): the client side, for tests and tools.
template <class Req>
net::Response encode_request(const Req& body, std::int16_t version, std::int32_t correlation_id,
                             std::optional<std::string> client_id) {
  Writer w;
  RequestHeader h;
  h.request_api_key = Req::kApiKey;
  h.request_api_version = version;
  h.correlation_id = correlation_id;
  h.client_id = std::move(client_id);
  h.encode(w, request_header_version(Req::kApiKey, version));
  body.encode(w, version);
  return w.finish();
}

struct DecodedResponseHeader {
  ResponseHeader header;
  std::size_t body_offset = 0;
  DecodeError error = DecodeError::none;
  std::size_t error_offset = 0;
  bool ok() const { return error == DecodeError::none; }
};

// The client side: a response frame's header, given the request it answers.
DecodedResponseHeader decode_response_header(std::span<std::byte> frame, std::int16_t key,
                                             std::int16_t version);

template <class Resp>
DecodeError decode_response_body(std::span<std::byte> frame, const DecodedResponseHeader& h,
                                 std::int16_t version, Resp& out) {
  Reader r(frame.subspan(h.body_offset), h.body_offset);
  if (!out.decode(r, version)) return r.error();
  return r.remaining() ? DecodeError::trailing_bytes : DecodeError::none;
}

}  // namespace samsa::kafka
