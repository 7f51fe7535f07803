#include "replication/quorum/quorum_wire.h"

namespace samsa::replication::quorum {

using kafka::ErrorCode;

namespace {

ErrorCode error_of(std::int16_t code) {
  return static_cast<ErrorCode>(code);
}

// The one partition a quorum message names: the metadata topic's partition 0.
template <class Topics>
auto find_partition(const Topics& topics) -> decltype(&topics.front().partitions.front()) {
  for (const auto& t : topics)
    if (t.topic_name == kMetadataTopic)
      for (const auto& p : t.partitions)
        if (p.partition_index == 0) return &p;
  return nullptr;
}

template <class Msg>
auto one_partition(Msg& m) -> decltype(m.topics.emplace_back().partitions.emplace_back()) {
  auto& t = m.topics.emplace_back();
  t.topic_name = std::string(kMetadataTopic);
  auto& p = t.partitions.emplace_back();
  p.partition_index = 0;
  return p;
}

// Answers name the partition (its error) and carry the top-level error.
template <class Resp>
std::expected<const typename Resp::PartitionData*, ErrorCode> answer_partition(const Resp& r) {
  if (r.error_code != 0) return std::unexpected(error_of(r.error_code));
  const auto* p = find_partition(r.topics);
  if (!p) return std::unexpected(ErrorCode::unknown_topic_or_partition);
  return p;
}

}  // namespace

// ---- the sender's side ----

kafka::VoteRequest vote_request(const VoteRequest& r, NodeId to, const std::string& cluster_id) {
  kafka::VoteRequest k;
  k.cluster_id = cluster_id;
  k.voter_id = to;
  auto& p = one_partition(k);
  p.replica_epoch = r.epoch;
  p.replica_id = r.candidate;
  p.last_offset_epoch = r.last_epoch;
  p.last_offset = r.last_offset;
  p.pre_vote = r.pre_vote;
  return k;
}

kafka::BeginQuorumEpochRequest begin_epoch_request(const BeginEpochRequest& r, NodeId to,
                                                   const std::string& cluster_id) {
  kafka::BeginQuorumEpochRequest k;
  k.cluster_id = cluster_id;
  k.voter_id = to;
  auto& p = one_partition(k);
  p.leader_id = r.leader;
  p.leader_epoch = r.epoch;
  return k;
}

kafka::EndQuorumEpochRequest end_epoch_request(const EndEpochRequest& r,
                                               const std::string& cluster_id) {
  kafka::EndQuorumEpochRequest k;
  k.cluster_id = cluster_id;
  auto& p = one_partition(k);
  p.leader_id = r.leader;
  p.leader_epoch = r.epoch;
  p.preferred_successors = r.preferred_successors;  // v0
  for (NodeId id : r.preferred_successors) {
    kafka::EndQuorumEpochRequest::ReplicaInfo c;
    c.candidate_id = id;
    p.preferred_candidates.push_back(c);  // v1
  }
  return k;
}

kafka::FetchRequest fetch_request(const FetchRequest& r, const std::string& cluster_id,
                                  std::int32_t max_bytes) {
  kafka::FetchRequest k;
  k.cluster_id = cluster_id;
  k.replica_id = r.replica;  // v14 and older
  k.replica_state.replica_id = r.replica;
  k.max_wait_ms = r.max_wait_ms;
  k.min_bytes = 0;
  k.max_bytes = max_bytes;
  auto& t = k.topics.emplace_back();
  t.topic = std::string(kMetadataTopic);
  t.topic_id = kMetadataTopicId;
  auto& p = t.partitions.emplace_back();
  p.partition = 0;
  p.current_leader_epoch = r.epoch;
  p.fetch_offset = r.fetch_offset;
  p.last_fetched_epoch = r.last_fetched_epoch;
  p.partition_max_bytes = max_bytes;
  return k;
}

kafka::FetchSnapshotRequest fetch_snapshot_request(const FetchSnapshotRequest& r,
                                                   const std::string& cluster_id,
                                                   std::int32_t max_bytes) {
  kafka::FetchSnapshotRequest k;
  k.cluster_id = cluster_id;
  k.replica_id = r.replica;
  k.max_bytes = max_bytes;
  auto& t = k.topics.emplace_back();
  t.name = std::string(kMetadataTopic);
  auto& p = t.partitions.emplace_back();
  p.partition = 0;
  p.current_leader_epoch = r.epoch;
  p.snapshot_id.end_offset = r.id.end_offset;
  p.snapshot_id.epoch = r.id.epoch;
  p.position = r.position;
  return k;
}

std::expected<VoteResponse, ErrorCode> vote_answer_of(const kafka::VoteResponse& r) {
  auto p = answer_partition(r);
  if (!p) return std::unexpected(p.error());
  VoteResponse a;
  a.error = error_of((*p)->error_code);
  a.epoch = (*p)->leader_epoch;
  a.leader = (*p)->leader_id;
  a.granted = (*p)->vote_granted;
  return a;
}

template <class Resp>
static std::expected<EpochResponse, ErrorCode> epoch_answer(const Resp& r) {
  auto p = answer_partition(r);
  if (!p) return std::unexpected(p.error());
  EpochResponse a;
  a.error = error_of((*p)->error_code);
  a.epoch = (*p)->leader_epoch;
  a.leader = (*p)->leader_id;
  return a;
}

std::expected<EpochResponse, ErrorCode> epoch_answer_of(const kafka::BeginQuorumEpochResponse& r) {
  return epoch_answer(r);
}

std::expected<EpochResponse, ErrorCode> epoch_answer_of(const kafka::EndQuorumEpochResponse& r) {
  return epoch_answer(r);
}

std::expected<FetchedRecords, ErrorCode> fetch_answer_of(const kafka::FetchResponse& r) {
  if (r.error_code != 0) return std::unexpected(error_of(r.error_code));
  for (const auto& t : r.responses) {
    if (t.topic != kMetadataTopic && t.topic_id != kMetadataTopicId) continue;
    for (const auto& p : t.partitions) {
      if (p.partition_index != 0) continue;
      FetchedRecords out;
      FetchAnswer& a = out.answer;
      a.error = error_of(p.error_code);
      a.epoch = p.current_leader.leader_epoch;
      a.leader = p.current_leader.leader_id;
      a.high_watermark = p.high_watermark;
      a.log_start_offset = p.log_start_offset;
      if (p.diverging_epoch.epoch >= 0)
        a.diverging = FetchAnswer::Diverging{p.diverging_epoch.epoch, p.diverging_epoch.end_offset};
      if (p.snapshot_id.end_offset >= 0)
        a.snapshot = SnapshotId{p.snapshot_id.end_offset, p.snapshot_id.epoch};
      out.records = p.records.view();
      return out;
    }
  }
  return std::unexpected(ErrorCode::unknown_topic_or_partition);
}

std::expected<FetchSnapshotResponse, ErrorCode> fetch_snapshot_answer_of(
    const kafka::FetchSnapshotResponse& r) {
  if (r.error_code != 0) return std::unexpected(error_of(r.error_code));
  for (const auto& t : r.topics) {
    if (t.name != kMetadataTopic) continue;
    for (const auto& p : t.partitions) {
      if (p.index != 0) continue;
      FetchSnapshotResponse a;
      a.error = error_of(p.error_code);
      a.epoch = p.current_leader.leader_epoch;
      a.leader = p.current_leader.leader_id;
      a.size = p.size;
      a.position = p.position;
      const auto v = p.unaligned_records.view();
      a.bytes.assign(v.begin(), v.end());
      return a;
    }
  }
  return std::unexpected(ErrorCode::unknown_topic_or_partition);
}

// ---- the receiver's side ----

ErrorCode check_cluster(const std::optional<std::string>& theirs, const std::string& ours) {
  if (!theirs || theirs->empty() || ours.empty() || *theirs == ours) return ErrorCode::none;
  return ErrorCode::inconsistent_cluster_id;
}

std::expected<VoteRequest, ErrorCode> vote_of(const kafka::VoteRequest& r) {
  const auto* p = find_partition(r.topics);
  if (!p) return std::unexpected(ErrorCode::unknown_topic_or_partition);
  VoteRequest v;
  v.epoch = p->replica_epoch;
  v.candidate = p->replica_id;
  v.last_epoch = p->last_offset_epoch;
  v.last_offset = p->last_offset;
  v.pre_vote = p->pre_vote;
  return v;
}

kafka::VoteResponse vote_response(ErrorCode top, const VoteResponse& a) {
  kafka::VoteResponse k;
  k.error_code = kafka::code(top);
  if (top != ErrorCode::none) return k;
  auto& p = one_partition(k);
  p.error_code = kafka::code(a.error);
  p.leader_id = a.leader;
  p.leader_epoch = a.epoch;
  p.vote_granted = a.granted;
  return k;
}

std::expected<BeginEpochRequest, ErrorCode> begin_epoch_of(
    const kafka::BeginQuorumEpochRequest& r) {
  const auto* p = find_partition(r.topics);
  if (!p) return std::unexpected(ErrorCode::unknown_topic_or_partition);
  return BeginEpochRequest{p->leader_epoch, p->leader_id};
}

template <class Resp>
static Resp epoch_response(ErrorCode top, const EpochResponse& a) {
  Resp k;
  k.error_code = kafka::code(top);
  if (top != ErrorCode::none) return k;
  auto& p = one_partition(k);
  p.error_code = kafka::code(a.error);
  p.leader_id = a.leader;
  p.leader_epoch = a.epoch;
  return k;
}

kafka::BeginQuorumEpochResponse begin_epoch_response(ErrorCode top, const EpochResponse& a) {
  return epoch_response<kafka::BeginQuorumEpochResponse>(top, a);
}

std::expected<EndEpochRequest, ErrorCode> end_epoch_of(const kafka::EndQuorumEpochRequest& r,
                                                       std::int16_t version) {
  const auto* p = find_partition(r.topics);
  if (!p) return std::unexpected(ErrorCode::unknown_topic_or_partition);
  EndEpochRequest e;
  e.epoch = p->leader_epoch;
  e.leader = p->leader_id;
  if (version >= 1)
    for (const auto& c : p->preferred_candidates)
      e.preferred_successors.push_back(c.candidate_id);
  else
    e.preferred_successors = p->preferred_successors;
  return e;
}

kafka::EndQuorumEpochResponse end_epoch_response(ErrorCode top, const EpochResponse& a) {
  return epoch_response<kafka::EndQuorumEpochResponse>(top, a);
}

std::expected<FetchRequest, ErrorCode> fetch_of(const kafka::FetchRequest& r,
                                                std::int16_t version) {
  for (const auto& t : r.topics) {
    const bool ours = version >= 13 ? t.topic_id == kMetadataTopicId : t.topic == kMetadataTopic;
    if (!ours) continue;
    for (const auto& p : t.partitions) {
      if (p.partition != 0) continue;
      FetchRequest f;
      f.replica = version >= 15 ? r.replica_state.replica_id : r.replica_id;
      f.epoch = p.current_leader_epoch;
      f.fetch_offset = p.fetch_offset;
      f.last_fetched_epoch = p.last_fetched_epoch;
      f.max_wait_ms = r.max_wait_ms;
      return f;
    }
  }
  return std::unexpected(ErrorCode::unknown_topic_or_partition);
}

static kafka::FetchResponse::PartitionData& metadata_partition(kafka::FetchResponse& k) {
  auto& t = k.responses.emplace_back();
  t.topic = std::string(kMetadataTopic);
  t.topic_id = kMetadataTopicId;
  auto& p = t.partitions.emplace_back();
  p.partition_index = 0;
  return p;
}

kafka::FetchResponse fetch_response(const FetchAnswer& a, std::span<const std::byte> records) {
  kafka::FetchResponse k;
  auto& p = metadata_partition(k);
  p.error_code = kafka::code(a.error);
  p.high_watermark = a.high_watermark;
  p.last_stable_offset = a.high_watermark;
  p.log_start_offset = a.log_start_offset;
  p.current_leader.leader_id = a.leader;
  p.current_leader.leader_epoch = a.epoch;
  if (a.diverging) {
    p.diverging_epoch.epoch = a.diverging->epoch;
    p.diverging_epoch.end_offset = a.diverging->end_offset;
  }
  if (a.snapshot) {
    p.snapshot_id.end_offset = a.snapshot->end_offset;
    p.snapshot_id.epoch = a.snapshot->epoch;
  }
  p.records.set_empty();
  p.records.add_bytes(records);
  return k;
}

kafka::FetchResponse fetch_refusal(const kafka::FetchRequest& r, ErrorCode e) {
  kafka::FetchResponse k;
  for (const auto& t : r.topics) {
    auto& tr = k.responses.emplace_back();
    tr.topic = t.topic;
    tr.topic_id = t.topic_id;
    for (const auto& p : t.partitions) {
      auto& pd = tr.partitions.emplace_back();
      pd.partition_index = p.partition;
      pd.error_code = kafka::code(e);
      pd.records.set_empty();
    }
  }
  return k;
}

std::expected<FetchSnapshotRequest, ErrorCode> fetch_snapshot_of(
    const kafka::FetchSnapshotRequest& r, std::int32_t* max_bytes) {
  *max_bytes = r.max_bytes;
  for (const auto& t : r.topics) {
    if (t.name != kMetadataTopic) continue;
    for (const auto& p : t.partitions) {
      if (p.partition != 0) continue;
      FetchSnapshotRequest f;
      f.replica = r.replica_id;
      f.epoch = p.current_leader_epoch;
      f.id = SnapshotId{p.snapshot_id.end_offset, p.snapshot_id.epoch};
      f.position = p.position;
      return f;
    }
  }
  return std::unexpected(ErrorCode::unknown_topic_or_partition);
}

kafka::FetchSnapshotResponse fetch_snapshot_response(ErrorCode top, const SnapshotId& id,
                                                     const FetchSnapshotResponse& a) {
  kafka::FetchSnapshotResponse k;
  k.error_code = kafka::code(top);
  if (top != ErrorCode::none) return k;
  auto& t = k.topics.emplace_back();
  t.name = std::string(kMetadataTopic);
  auto& p = t.partitions.emplace_back();
  p.index = 0;
  p.error_code = kafka::code(a.error);
  p.current_leader.leader_id = a.leader;
  p.current_leader.leader_epoch = a.epoch;
  p.size = a.size;
  p.position = a.position;
  p.snapshot_id.end_offset = id.end_offset;
  p.snapshot_id.epoch = id.epoch;
  p.unaligned_records.set_empty();
  p.unaligned_records.add_bytes(a.bytes);
  return k;
}

}  // namespace samsa::replication::quorum
