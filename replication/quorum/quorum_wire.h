// quorum/quorum_wire — the quorum's messages (raft.h) as Kafka's KRaft RPCs and back: Vote
// (52, v2 with KIP-996's PreVote), BeginQuorumEpoch (53), EndQuorumEpoch (54), FetchSnapshot
// (59) and Fetch (1) of __cluster_metadata-0. The sender's side builds a request and reads the
// answer; the receiver's side reads a request and builds the answer. Every message names the
// one partition of the one topic; a request for anything else, or from another cluster, is
// refused here (the caller answers with the returned error). Plain functions, no state.
#pragma once

#include <cstdint>
#include <expected>
#include <span>
#include <string>

#include "base/kafka_errors.h"
#include "net/kafka/api.h"
#include "replication/quorum/raft.h"

namespace samsa::replication::quorum {

inline constexpr std::string_view kMetadataTopic = "__cluster_metadata";
// Kafka's fixed id of the metadata topic (Uuid 0,1), which Fetch v13+ names it by.
inline constexpr kafka::Uuid kMetadataTopicId = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};

// The versions this node sends (its peers are samsad nodes of the same release or newer).
inline constexpr std::int16_t kVoteVersion = 2;
inline constexpr std::int16_t kBeginEpochVersion = 1;
inline constexpr std::int16_t kEndEpochVersion = 1;
inline constexpr std::int16_t kFetchSnapshotVersion = 1;
inline constexpr std::int16_t kFetchVersion = 17;

// ---- the sender's side ----
kafka::VoteRequest vote_request(const VoteRequest& r, NodeId to, const std::string& cluster_id);
kafka::BeginQuorumEpochRequest begin_epoch_request(const BeginEpochRequest& r, NodeId to,
                                                   const std::string& cluster_id);
kafka::EndQuorumEpochRequest end_epoch_request(const EndEpochRequest& r,
                                               const std::string& cluster_id);
kafka::FetchRequest fetch_request(const FetchRequest& r, const std::string& cluster_id,
                                  std::int32_t max_bytes);
kafka::FetchSnapshotRequest fetch_snapshot_request(const FetchSnapshotRequest& r,
                                                   const std::string& cluster_id,
                                                   std::int32_t max_bytes);

// Answers; a response that does not name the metadata partition is an error value.
std::expected<VoteResponse, kafka::ErrorCode> vote_answer_of(const kafka::VoteResponse& r);
std::expected<EpochResponse, kafka::ErrorCode> epoch_answer_of(
    const kafka::BeginQuorumEpochResponse& r);
std::expected<EpochResponse, kafka::ErrorCode> epoch_answer_of(
    const kafka::EndQuorumEpochResponse& r);
// The answer and the records it carries (a view into r).
struct FetchedRecords {
  FetchAnswer answer;
  std::span<const std::byte> records;
};
std::expected<FetchedRecords, kafka::ErrorCode> fetch_answer_of(const kafka::FetchResponse& r);
std::expected<FetchSnapshotResponse, kafka::ErrorCode> fetch_snapshot_answer_of(
    const kafka::FetchSnapshotResponse& r);

// ---- the receiver's side ----
// The request's cluster id against this node's (a null or empty one is accepted, as KRaft
// does for tools); INCONSISTENT_CLUSTER_ID otherwise.
kafka::ErrorCode check_cluster(const std::optional<std::string>& theirs, const std::string& ours);

std::expected<VoteRequest, kafka::ErrorCode> vote_of(const kafka::VoteRequest& r);
kafka::VoteResponse vote_response(kafka::ErrorCode top, const VoteResponse& a);
std::expected<BeginEpochRequest, kafka::ErrorCode> begin_epoch_of(
    const kafka::BeginQuorumEpochRequest& r);
kafka::BeginQuorumEpochResponse begin_epoch_response(kafka::ErrorCode top, const EpochResponse& a);
std::expected<EndEpochRequest, kafka::ErrorCode> end_epoch_of(const kafka::EndQuorumEpochRequest& r,
                                                              std::int16_t version);
kafka::EndQuorumEpochResponse end_epoch_response(kafka::ErrorCode top, const EpochResponse& a);
// A fetch of the metadata log by a voter or an observer (replica id from ReplicaState v15+).
std::expected<FetchRequest, kafka::ErrorCode> fetch_of(const kafka::FetchRequest& r,
                                                       std::int16_t version);
// records: the bytes to carry (whole batches), viewed, not copied; they must outlive the
// response's encoding.
kafka::FetchResponse fetch_response(const FetchAnswer& a, std::span<const std::byte> records);
kafka::FetchResponse fetch_refusal(const kafka::FetchRequest& r, kafka::ErrorCode e);
std::expected<FetchSnapshotRequest, kafka::ErrorCode> fetch_snapshot_of(
    const kafka::FetchSnapshotRequest& r, std::int32_t* max_bytes);
// The answer carries a view of a.bytes: a must outlive the response's encoding.
kafka::FetchSnapshotResponse fetch_snapshot_response(kafka::ErrorCode top, const SnapshotId& id,
                                                     const FetchSnapshotResponse& a);

}  // namespace samsa::replication::quorum
