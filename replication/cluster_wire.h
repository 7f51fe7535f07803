// replication/cluster_wire — Kafka's cluster messages as the state machines' types and back:
// BrokerRegistration and BrokerHeartbeat (broker <-> controller), AlterPartition (leader ->
// controller) and the replica fields of Fetch (follower -> leader). The daemon's drivers
// decode with net/kafka, convert here, call ReplicaState / ControllerState, and convert the
// answers back. Plain functions, no state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "net/kafka/api.h"
#include "replication/controller_state.h"
#include "replication/replica_state.h"

namespace samsa::replication {

// ---- BrokerRegistration (key 62) ----
BrokerRegistration registration_of(const kafka::BrokerRegistrationRequest& req);
kafka::BrokerRegistrationRequest registration_request(const BrokerRegistration& reg,
                                                      std::string cluster_id,
                                                      std::int64_t previous_broker_epoch = -1);
kafka::BrokerRegistrationResponse registration_response(const RegistrationAnswer& a);
RegistrationAnswer registration_answer_of(const kafka::BrokerRegistrationResponse& resp);

// ---- BrokerHeartbeat (key 63) ----
Heartbeat heartbeat_of(const kafka::BrokerHeartbeatRequest& req);
kafka::BrokerHeartbeatRequest heartbeat_request(const Heartbeat& hb);
kafka::BrokerHeartbeatResponse heartbeat_response(const HeartbeatAnswer& a);
HeartbeatAnswer heartbeat_answer_of(const kafka::BrokerHeartbeatResponse& resp);

// ---- AlterPartition (key 56) ----
// Adds one partition's proposal to a leader's request (NewIsr for v2, NewIsrWithEpochs for v3:
// the encoder writes the one the version has).
void add_alter_partition(kafka::AlterPartitionRequest& req, const Uuid& topic_id,
                         std::int32_t partition, const AlterPartitionProposal& p);
// The request's partitions, for ControllerState::alter_partition. v2 carries no member epochs
// (-1: not checked). request_id stays 0: answers follow the request's order.
std::vector<AlterPartitionItem> alter_partition_items(const kafka::AlterPartitionRequest& req,
                                                      std::int16_t version);
// Appends an item's answer to the response, grouped by topic in the request's order.
void add_alter_partition_answer(kafka::AlterPartitionResponse& resp, const Uuid& topic_id,
                                std::int32_t partition, const AlterPartitionAnswer& a);
// The answer for (topic, partition) in a response, with the leader's request_id; nullopt when
// the response does not mention it (a top-level error is the answer's error then).
std::optional<AlterPartitionAnswer> alter_partition_answer_of(
    const kafka::AlterPartitionResponse& resp, const Uuid& topic_id, std::int32_t partition,
    std::int64_t request_id);

// ---- Fetch, the replica's fields ----
// The replica id of a fetch (ReplicaState from v15, ReplicaId before): -1 for consumers.
std::int32_t fetch_replica_id(const kafka::FetchRequest& req, std::int16_t version);
ReplicaFetch replica_fetch_of(const kafka::FetchRequest& req,
                              const kafka::FetchRequest::FetchPartition& p, std::int16_t version);
// Fills a follower's request fields (the caller adds topics, sizes and session).
void set_replica_fields(kafka::FetchRequest& req, const ReplicaFetch& f);
kafka::FetchRequest::FetchPartition fetch_partition(std::int32_t partition, const ReplicaFetch& f,
                                                    std::int32_t max_bytes);
// The leader's answer into a response partition (error, HW, log start, diverging epoch).
void set_fetch_answer(kafka::FetchResponse::PartitionData& out, const ReplicaFetchAnswer& a);
ReplicaFetchAnswer fetch_answer_of(const kafka::FetchResponse::PartitionData& p);

}  // namespace samsa::replication
