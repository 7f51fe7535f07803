#include "net/kafka/api.h"

namespace samsa::kafka {

namespace {

struct KnownApi {
  std::string_view name;
  std::int16_t first_flexible_version;  // -1: none
};

// Indexed by api key; Kafka 4.1.1's message definitions.
constexpr KnownApi kKnownApis[] = {
    {"Produce", 9},
    {"Fetch", 12},
    {"ListOffsets", 6},
    {"Metadata", 9},
    {"LeaderAndIsr", -1},
    {"StopReplica", -1},
    {"UpdateMetadata", -1},
    {"ControlledShutdown", -1},
    {"OffsetCommit", 8},
    {"OffsetFetch", 6},
    {"FindCoordinator", 3},
    {"JoinGroup", 6},
    {"Heartbeat", 4},
    {"LeaveGroup", 4},
    {"SyncGroup", 4},
    {"DescribeGroups", 5},
    {"ListGroups", 3},
    {"SaslHandshake", -1},
    {"ApiVersions", 3},
    {"CreateTopics", 5},
    {"DeleteTopics", 4},
    {"DeleteRecords", 2},
    {"InitProducerId", 2},
    {"OffsetForLeaderEpoch", 4},
    {"AddPartitionsToTxn", 3},
    {"AddOffsetsToTxn", 3},
    {"EndTxn", 3},
    {"WriteTxnMarkers", 1},
    {"TxnOffsetCommit", 3},
    {"DescribeAcls", 2},
    {"CreateAcls", 2},
    {"DeleteAcls", 2},
    {"DescribeConfigs", 4},
    {"AlterConfigs", 2},
    {"AlterReplicaLogDirs", 2},
    {"DescribeLogDirs", 2},
    {"SaslAuthenticate", 2},
    {"CreatePartitions", 2},
    {"CreateDelegationToken", 2},
    {"RenewDelegationToken", 2},
    {"ExpireDelegationToken", 2},
    {"DescribeDelegationToken", 2},
    {"DeleteGroups", 2},
    {"ElectLeaders", 2},
    {"IncrementalAlterConfigs", 1},
    {"AlterPartitionReassignments", 0},
    {"ListPartitionReassignments", 0},
    {"OffsetDelete", -1},
    {"DescribeClientQuotas", 1},
    {"AlterClientQuotas", 1},
    {"DescribeUserScramCredentials", 0},
    {"AlterUserScramCredentials", 0},
    {"Vote", 0},
    {"BeginQuorumEpoch", 1},
    {"EndQuorumEpoch", 1},
    {"DescribeQuorum", 0},
    {"AlterPartition", 0},
    {"UpdateFeatures", 0},
    {"Envelope", 0},
    {"FetchSnapshot", 0},
    {"DescribeCluster", 0},
    {"DescribeProducers", 0},
    {"BrokerRegistration", 0},
    {"BrokerHeartbeat", 0},
    {"UnregisterBroker", 0},
    {"DescribeTransactions", 0},
    {"ListTransactions", 0},
    {"AllocateProducerIds", 0},
    {"ConsumerGroupHeartbeat", 0},
    {"ConsumerGroupDescribe", 0},
    {"ControllerRegistration", 0},
    {"GetTelemetrySubscriptions", 0},
    {"PushTelemetry", 0},
    {"AssignReplicasToDirs", 0},
    {"ListConfigResources", 0},
    {"DescribeTopicPartitions", 0},
    {"ShareGroupHeartbeat", 0},
    {"ShareGroupDescribe", 0},
    {"ShareFetch", 0},
    {"ShareAcknowledge", 0},
    {"AddRaftVoter", 0},
    {"RemoveRaftVoter", 0},
    {"UpdateRaftVoter", 0},
    {"InitializeShareGroupState", 0},
    {"ReadShareGroupState", 0},
    {"WriteShareGroupState", 0},
    {"DeleteShareGroupState", 0},
    {"ReadShareGroupStateSummary", 0},
    {"StreamsGroupHeartbeat", 0},
    {"StreamsGroupDescribe", 0},
    {"DescribeShareGroupOffsets", 0},
    {"AlterShareGroupOffsets", 0},
    {"DeleteShareGroupOffsets", 0},
};

const KnownApi* find(std::int16_t key) {
  if (key < 0 || key >= static_cast<std::int16_t>(std::size(kKnownApis))) return nullptr;
  return &kKnownApis[key];
}

bool flexible(std::int16_t key, std::int16_t version) {
  const KnownApi* a = find(key);
  return a && a->first_flexible_version >= 0 && version >= a->first_flexible_version;
}

}  // namespace

std::string_view api_name(std::int16_t key) {
  const KnownApi* a = find(key);
  return a ? a->name : std::string_view();
}

std::int16_t request_header_version(std::int16_t key, std::int16_t version) {
  if (key == kafka::key(ApiKey::controlled_shutdown) && version == 0) return 0;
  return flexible(key, version) ? 2 : 1;
}

std::int16_t response_header_version(std::int16_t key, std::int16_t version) {
  if (key == kafka::key(ApiKey::api_versions)) return 0;
  return flexible(key, version) ? 1 : 0;
}

DecodedRequestHeader decode_request_header(std::span<std::byte> frame) {
  DecodedRequestHeader out;
  Reader peek(frame);
  std::int16_t key = peek.i16();
  std::int16_t version = peek.i16();
  if (!peek.ok()) {
    out.error = peek.error();
    out.error_offset = peek.error_offset();
    return out;
  }
  if (!find(key)) {
    // Still report what identifies the request, for logs.
    out.header.request_api_key = key;
    out.header.request_api_version = version;
    out.header.correlation_id = peek.i32();
    out.error = DecodeError::unknown_api;
    return out;
  }
  out.header_version = request_header_version(key, version);
  Reader r(frame);
  if (!out.header.decode(r, out.header_version)) {
    out.error = r.error();
    out.error_offset = r.error_offset();
    return out;
  }
  out.body_offset = r.position();
  return out;
}

DecodedResponseHeader decode_response_header(std::span<std::byte> frame, std::int16_t key,
                                             std::int16_t version) {
  DecodedResponseHeader out;
  Reader r(frame);
  if (!out.header.decode(r, response_header_version(key, version))) {
    out.error = r.error();
    out.error_offset = r.error_offset();
    return out;
  }
  out.body_offset = r.position();
  return out;
}

}  // namespace samsa::kafka
