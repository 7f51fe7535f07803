// Kafka's error codes (the numbers every response carries), as of Kafka 4.1.
#pragma once

#include <cstdint>
#include <string_view>

namespace samsa::kafka {

// X(code, enumerator, Kafka's name): one list feeds the enum and the name lookup.
#define SAMSA_KAFKA_ERROR_CODES(X)                                                      \
  X(-1, unknown_server_error, "UNKNOWN_SERVER_ERROR")                                   \
  X(0, none, "NONE")                                                                    \
  X(1, offset_out_of_range, "OFFSET_OUT_OF_RANGE")                                      \
  X(2, corrupt_message, "CORRUPT_MESSAGE")                                              \
  X(3, unknown_topic_or_partition, "UNKNOWN_TOPIC_OR_PARTITION")                        \
  X(4, invalid_fetch_size, "INVALID_FETCH_SIZE")                                        \
  X(5, leader_not_available, "LEADER_NOT_AVAILABLE")                                    \
  X(6, not_leader_or_follower, "NOT_LEADER_OR_FOLLOWER")                                \
  X(7, request_timed_out, "REQUEST_TIMED_OUT")                                          \
  X(8, broker_not_available, "BROKER_NOT_AVAILABLE")                                    \
  X(9, replica_not_available, "REPLICA_NOT_AVAILABLE")                                  \
  X(10, message_too_large, "MESSAGE_TOO_LARGE")                                         \
  X(11, stale_controller_epoch, "STALE_CONTROLLER_EPOCH")                               \
  X(12, offset_metadata_too_large, "OFFSET_METADATA_TOO_LARGE")                         \
  X(13, network_exception, "NETWORK_EXCEPTION")                                         \
  X(14, coordinator_load_in_progress, "COORDINATOR_LOAD_IN_PROGRESS")                   \
  X(15, coordinator_not_available, "COORDINATOR_NOT_AVAILABLE")                         \
  X(16, not_coordinator, "NOT_COORDINATOR")                                             \
  X(17, invalid_topic_exception, "INVALID_TOPIC_EXCEPTION")                             \
  X(18, record_list_too_large, "RECORD_LIST_TOO_LARGE")                                 \
  X(19, not_enough_replicas, "NOT_ENOUGH_REPLICAS")                                     \
  X(20, not_enough_replicas_after_append, "NOT_ENOUGH_REPLICAS_AFTER_APPEND")           \
  X(21, invalid_required_acks, "INVALID_REQUIRED_ACKS")                                 \
  X(22, illegal_generation, "ILLEGAL_GENERATION")                                       \
  X(23, inconsistent_group_protocol, "INCONSISTENT_GROUP_PROTOCOL")                     \
  X(24, invalid_group_id, "INVALID_GROUP_ID")                                           \
  X(25, unknown_member_id, "UNKNOWN_MEMBER_ID")                                         \
  X(26, invalid_session_timeout, "INVALID_SESSION_TIMEOUT")                             \
  X(27, rebalance_in_progress, "REBALANCE_IN_PROGRESS")                                 \
  X(28, invalid_commit_offset_size, "INVALID_COMMIT_OFFSET_SIZE")                       \
  X(29, topic_authorization_failed, "TOPIC_AUTHORIZATION_FAILED")                       \
  X(30, group_authorization_failed, "GROUP_AUTHORIZATION_FAILED")                       \
  X(31, cluster_authorization_failed, "CLUSTER_AUTHORIZATION_FAILED")                   \
  X(32, invalid_timestamp, "INVALID_TIMESTAMP")                                         \
  X(33, unsupported_sasl_mechanism, "UNSUPPORTED_SASL_MECHANISM")                       \
  X(34, illegal_sasl_state, "ILLEGAL_SASL_STATE")                                       \
  X(35, unsupported_version, "UNSUPPORTED_VERSION")                                     \
  X(36, topic_already_exists, "TOPIC_ALREADY_EXISTS")                                   \
  X(37, invalid_partitions, "INVALID_PARTITIONS")                                       \
  X(38, invalid_replication_factor, "INVALID_REPLICATION_FACTOR")                       \
  X(39, invalid_replica_assignment, "INVALID_REPLICA_ASSIGNMENT")                       \
  X(40, invalid_config, "INVALID_CONFIG")                                               \
  X(41, not_controller, "NOT_CONTROLLER")                                               \
  X(42, invalid_request, "INVALID_REQUEST")                                             \
  X(43, unsupported_for_message_format, "UNSUPPORTED_FOR_MESSAGE_FORMAT")               \
  X(44, policy_violation, "POLICY_VIOLATION")                                           \
  X(45, out_of_order_sequence_number, "OUT_OF_ORDER_SEQUENCE_NUMBER")                   \
  X(46, duplicate_sequence_number, "DUPLICATE_SEQUENCE_NUMBER")                         \
  X(47, invalid_producer_epoch, "INVALID_PRODUCER_EPOCH")                               \
  X(48, invalid_txn_state, "INVALID_TXN_STATE")                                         \
  X(49, invalid_producer_id_mapping, "INVALID_PRODUCER_ID_MAPPING")                     \
  X(50, invalid_transaction_timeout, "INVALID_TRANSACTION_TIMEOUT")                     \
  X(51, concurrent_transactions, "CONCURRENT_TRANSACTIONS")                             \
  X(52, transaction_coordinator_fenced, "TRANSACTION_COORDINATOR_FENCED")               \
  X(53, transactional_id_authorization_failed, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED") \
  X(54, security_disabled, "SECURITY_DISABLED")                                         \
  X(55, operation_not_attempted, "OPERATION_NOT_ATTEMPTED")                             \
  X(56, kafka_storage_error, "KAFKA_STORAGE_ERROR")                                     \
  X(57, log_dir_not_found, "LOG_DIR_NOT_FOUND")                                         \
  X(58, sasl_authentication_failed, "SASL_AUTHENTICATION_FAILED")                       \
  X(59, unknown_producer_id, "UNKNOWN_PRODUCER_ID")                                     \
  X(60, reassignment_in_progress, "REASSIGNMENT_IN_PROGRESS")                           \
  X(61, delegation_token_auth_disabled, "DELEGATION_TOKEN_AUTH_DISABLED")               \
  X(62, delegation_token_not_found, "DELEGATION_TOKEN_NOT_FOUND")                       \
  X(63, delegation_token_owner_mismatch, "DELEGATION_TOKEN_OWNER_MISMATCH")             \
  X(64, delegation_token_request_not_allowed, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED")   \
  X(65, delegation_token_authorization_failed, "DELEGATION_TOKEN_AUTHORIZATION_FAILED") \
  X(66, delegation_token_expired, "DELEGATION_TOKEN_EXPIRED")                           \
  X(67, invalid_principal_type, "INVALID_PRINCIPAL_TYPE")                               \
  X(68, non_empty_group, "NON_EMPTY_GROUP")                                             \
  X(69, group_id_not_found, "GROUP_ID_NOT_FOUND")                                       \
  X(70, fetch_session_id_not_found, "FETCH_SESSION_ID_NOT_FOUND")                       \
  X(71, invalid_fetch_session_epoch, "INVALID_FETCH_SESSION_EPOCH")                     \
  X(72, listener_not_found, "LISTENER_NOT_FOUND")                                       \
  X(73, topic_deletion_disabled, "TOPIC_DELETION_DISABLED")                             \
  X(74, fenced_leader_epoch, "FENCED_LEADER_EPOCH")                                     \
  X(75, unknown_leader_epoch, "UNKNOWN_LEADER_EPOCH")                                   \
  X(76, unsupported_compression_type, "UNSUPPORTED_COMPRESSION_TYPE")                   \
  X(77, stale_broker_epoch, "STALE_BROKER_EPOCH")                                       \
  X(78, offset_not_available, "OFFSET_NOT_AVAILABLE")                                   \
  X(79, member_id_required, "MEMBER_ID_REQUIRED")                                       \
  X(80, preferred_leader_not_available, "PREFERRED_LEADER_NOT_AVAILABLE")               \
  X(81, group_max_size_reached, "GROUP_MAX_SIZE_REACHED")                               \
  X(82, fenced_instance_id, "FENCED_INSTANCE_ID")                                       \
  X(83, eligible_leaders_not_available, "ELIGIBLE_LEADERS_NOT_AVAILABLE")               \
  X(84, election_not_needed, "ELECTION_NOT_NEEDED")                                     \
  X(85, no_reassignment_in_progress, "NO_REASSIGNMENT_IN_PROGRESS")                     \
  X(86, group_subscribed_to_topic, "GROUP_SUBSCRIBED_TO_TOPIC")                         \
  X(87, invalid_record, "INVALID_RECORD")                                               \
  X(88, unstable_offset_commit, "UNSTABLE_OFFSET_COMMIT")                               \
  X(89, throttling_quota_exceeded, "THROTTLING_QUOTA_EXCEEDED")                         \
  X(90, producer_fenced, "PRODUCER_FENCED")                                             \
  X(91, resource_not_found, "RESOURCE_NOT_FOUND")                                       \
  X(92, duplicate_resource, "DUPLICATE_RESOURCE")                                       \
  X(93, unacceptable_credential, "UNACCEPTABLE_CREDENTIAL")                             \
  X(94, inconsistent_voter_set, "INCONSISTENT_VOTER_SET")                               \
  X(95, invalid_update_version, "INVALID_UPDATE_VERSION")                               \
  X(96, feature_update_failed, "FEATURE_UPDATE_FAILED")                                 \
  X(97, principal_deserialization_failure, "PRINCIPAL_DESERIALIZATION_FAILURE")         \
  X(98, snapshot_not_found, "SNAPSHOT_NOT_FOUND")                                       \
  X(99, position_out_of_range, "POSITION_OUT_OF_RANGE")                                 \
  X(100, unknown_topic_id, "UNKNOWN_TOPIC_ID")                                          \
  X(101, duplicate_broker_registration, "DUPLICATE_BROKER_REGISTRATION")                \
  X(102, broker_id_not_registered, "BROKER_ID_NOT_REGISTERED")                          \
  X(103, inconsistent_topic_id, "INCONSISTENT_TOPIC_ID")                                \
  X(104, inconsistent_cluster_id, "INCONSISTENT_CLUSTER_ID")                            \
  X(105, transactional_id_not_found, "TRANSACTIONAL_ID_NOT_FOUND")                      \
  X(106, fetch_session_topic_id_error, "FETCH_SESSION_TOPIC_ID_ERROR")                  \
  X(107, ineligible_replica, "INELIGIBLE_REPLICA")                                      \
  X(108, new_leader_elected, "NEW_LEADER_ELECTED")                                      \
  X(109, offset_moved_to_tiered_storage, "OFFSET_MOVED_TO_TIERED_STORAGE")              \
  X(110, fenced_member_epoch, "FENCED_MEMBER_EPOCH")                                    \
  X(111, unreleased_instance_id, "UNRELEASED_INSTANCE_ID")                              \
  X(112, unsupported_assignor, "UNSUPPORTED_ASSIGNOR")                                  \
  X(113, stale_member_epoch, "STALE_MEMBER_EPOCH")                                      \
  X(114, mismatched_endpoint_type, "MISMATCHED_ENDPOINT_TYPE")                          \
  X(115, unsupported_endpoint_type, "UNSUPPORTED_ENDPOINT_TYPE")                        \
  X(116, unknown_controller_id, "UNKNOWN_CONTROLLER_ID")                                \
  X(117, unknown_subscription_id, "UNKNOWN_SUBSCRIPTION_ID")                            \
  X(118, telemetry_too_large, "TELEMETRY_TOO_LARGE")                                    \
  X(119, invalid_registration, "INVALID_REGISTRATION")                                  \
  X(120, transaction_abortable, "TRANSACTION_ABORTABLE")                                \
  X(121, invalid_record_state, "INVALID_RECORD_STATE")                                  \
  X(122, share_session_not_found, "SHARE_SESSION_NOT_FOUND")                            \
  X(123, invalid_share_session_epoch, "INVALID_SHARE_SESSION_EPOCH")                    \
  X(124, fenced_state_epoch, "FENCED_STATE_EPOCH")                                      \
  X(125, invalid_voter_key, "INVALID_VOTER_KEY")                                        \
  X(126, duplicate_voter, "DUPLICATE_VOTER")                                            \
  X(127, voter_not_found, "VOTER_NOT_FOUND")                                            \
  X(128, invalid_regular_expression, "INVALID_REGULAR_EXPRESSION")                      \
  X(129, rebootstrap_required, "REBOOTSTRAP_REQUIRED")                                  \
  X(130, streams_invalid_topology, "STREAMS_INVALID_TOPOLOGY")                          \
  X(131, streams_invalid_topology_epoch, "STREAMS_INVALID_TOPOLOGY_EPOCH")              \
  X(132, streams_topology_fenced, "STREAMS_TOPOLOGY_FENCED")                            \
  X(133, share_session_limit_reached, "SHARE_SESSION_LIMIT_REACHED")

enum class ErrorCode : std::int16_t {
#define SAMSA_KAFKA_ERROR_ENUM(code, id, name) id = code,
  SAMSA_KAFKA_ERROR_CODES(SAMSA_KAFKA_ERROR_ENUM)
#undef SAMSA_KAFKA_ERROR_ENUM
};

// Kafka's name of an error code ("UNKNOWN_TOPIC_OR_PARTITION"); empty for unknown codes.
std::string_view error_name(std::int16_t code);
inline std::string_view error_name(ErrorCode e) {
  return error_name(static_cast<std::int16_t>(e));
}

constexpr std::int16_t code(ErrorCode e) {
  return static_cast<std::int16_t>(e);
}

}  // namespace samsa::kafka
