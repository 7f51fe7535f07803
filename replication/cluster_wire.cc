#include "replication/cluster_wire.h"

namespace samsa::replication {

using kafka::ErrorCode;

namespace {

ErrorCode error_of(std::int16_t code) {
  return static_cast<ErrorCode>(code);
}

std::int16_t code_of(ErrorCode e) {
  return static_cast<std::int16_t>(e);
}

}  // namespace

// ---- BrokerRegistration ----

BrokerRegistration registration_of(const kafka::BrokerRegistrationRequest& req) {
  BrokerRegistration r;
  r.broker_id = req.broker_id;
  r.incarnation_id = req.incarnation_id;
  for (const auto& l : req.listeners)
    r.endpoints.push_back({l.name, l.host, l.port, l.security_protocol});
  r.rack = req.rack;
  r.log_dirs.assign(req.log_dirs.begin(), req.log_dirs.end());
  return r;
}

kafka::BrokerRegistrationRequest registration_request(const BrokerRegistration& reg,
                                                      std::string cluster_id,
                                                      std::int64_t previous_broker_epoch) {
  kafka::BrokerRegistrationRequest req;
  req.broker_id = reg.broker_id;
  req.cluster_id = std::move(cluster_id);
  req.incarnation_id = reg.incarnation_id;
  for (const auto& e : reg.endpoints) {
    kafka::BrokerRegistrationRequest::Listener l;
    l.name = e.name;
    l.host = e.host;
    l.port = static_cast<std::uint16_t>(e.port);
    l.security_protocol = e.security_protocol;
    req.listeners.push_back(std::move(l));
  }
  req.rack = reg.rack;
  req.log_dirs.assign(reg.log_dirs.begin(), reg.log_dirs.end());
  req.previous_broker_epoch = previous_broker_epoch;
  return req;
}

kafka::BrokerRegistrationResponse registration_response(const RegistrationAnswer& a) {
  kafka::BrokerRegistrationResponse resp;
  resp.error_code = code_of(a.error);
  resp.broker_epoch = a.broker_epoch;
  return resp;
}

RegistrationAnswer registration_answer_of(const kafka::BrokerRegistrationResponse& resp) {
  return RegistrationAnswer{error_of(resp.error_code), resp.broker_epoch};
}

// ---- BrokerHeartbeat ----

Heartbeat heartbeat_of(const kafka::BrokerHeartbeatRequest& req) {
  return Heartbeat{req.broker_id, req.broker_epoch, req.current_metadata_offset, req.want_fence,
                   req.want_shut_down};
}

kafka::BrokerHeartbeatRequest heartbeat_request(const Heartbeat& hb) {
  kafka::BrokerHeartbeatRequest req;
  req.broker_id = hb.broker_id;
  req.broker_epoch = hb.broker_epoch;
  req.current_metadata_offset = hb.current_metadata_offset;
  req.want_fence = hb.want_fence;
  req.want_shut_down = hb.want_shut_down;
  return req;
}

kafka::BrokerHeartbeatResponse heartbeat_response(const HeartbeatAnswer& a) {
  kafka::BrokerHeartbeatResponse resp;
  resp.error_code = code_of(a.error);
  resp.is_caught_up = a.is_caught_up;
  resp.is_fenced = a.is_fenced;
  resp.should_shut_down = a.should_shut_down;
  return resp;
}

HeartbeatAnswer heartbeat_answer_of(const kafka::BrokerHeartbeatResponse& resp) {
  return HeartbeatAnswer{error_of(resp.error_code), resp.is_caught_up, resp.is_fenced,
                         resp.should_shut_down};
}

// ---- AlterPartition ----

void add_alter_partition(kafka::AlterPartitionRequest& req, const Uuid& topic_id,
                         std::int32_t partition, const AlterPartitionProposal& p) {
  kafka::AlterPartitionRequest::TopicData* t = nullptr;
  for (auto& x : req.topics)
    if (x.topic_id == topic_id) t = &x;
  if (!t) {
    req.topics.emplace_back();
    t = &req.topics.back();
    t->topic_id = topic_id;
  }
  kafka::AlterPartitionRequest::PartitionData d;
  d.partition_index = partition;
  d.leader_epoch = p.leader_epoch;
  d.partition_epoch = p.partition_epoch;
  for (const auto& m : p.new_isr) {
    d.new_isr.push_back(m.broker_id);
    d.new_isr_with_epochs.push_back({m.broker_id, m.broker_epoch});
  }
  t->partitions.push_back(std::move(d));
}

std::vector<AlterPartitionItem> alter_partition_items(const kafka::AlterPartitionRequest& req,
                                                      std::int16_t version) {
  std::vector<AlterPartitionItem> out;
  for (const auto& t : req.topics) {
    for (const auto& d : t.partitions) {
      AlterPartitionItem it;
      it.broker_id = req.broker_id;
      it.broker_epoch = req.broker_epoch;
      it.topic_id = t.topic_id;
      it.partition = d.partition_index;
      it.proposal.leader_epoch = d.leader_epoch;
      it.proposal.partition_epoch = d.partition_epoch;
      if (version >= 3) {
        for (const auto& m : d.new_isr_with_epochs)
          it.proposal.new_isr.push_back({m.broker_id, m.broker_epoch});
      } else {
        for (std::int32_t id : d.new_isr)
          it.proposal.new_isr.push_back({id, -1});
      }
      out.push_back(std::move(it));
    }
  }
  return out;
}

void add_alter_partition_answer(kafka::AlterPartitionResponse& resp, const Uuid& topic_id,
                                std::int32_t partition, const AlterPartitionAnswer& a) {
  if (resp.topics.empty() || resp.topics.back().topic_id != topic_id) {
    resp.topics.emplace_back();
    resp.topics.back().topic_id = topic_id;
  }
  kafka::AlterPartitionResponse::PartitionData d;
  d.partition_index = partition;
  d.error_code = code_of(a.error);
  d.leader_id = a.leader_id;
  d.leader_epoch = a.leader_epoch;
  d.isr = a.isr;
  d.partition_epoch = a.partition_epoch;
  resp.topics.back().partitions.push_back(std::move(d));
}

std::optional<AlterPartitionAnswer> alter_partition_answer_of(
    const kafka::AlterPartitionResponse& resp, const Uuid& topic_id, std::int32_t partition,
    std::int64_t request_id) {
  if (resp.error_code != 0)
    return AlterPartitionAnswer{request_id, error_of(resp.error_code), -1, -1, {}, -1};
  for (const auto& t : resp.topics) {
    if (t.topic_id != topic_id) continue;
    for (const auto& d : t.partitions) {
      if (d.partition_index != partition) continue;
      return AlterPartitionAnswer{request_id, error_of(d.error_code), d.leader_id, d.leader_epoch,
                                  d.isr,      d.partition_epoch};
    }
  }
  return std::nullopt;
}

// ---- Fetch ----

std::int32_t fetch_replica_id(const kafka::FetchRequest& req, std::int16_t version) {
  return version >= 15 ? req.replica_state.replica_id : req.replica_id;
}

ReplicaFetch replica_fetch_of(const kafka::FetchRequest& req,
                              const kafka::FetchRequest::FetchPartition& p, std::int16_t version) {
  ReplicaFetch f;
  f.replica_id = fetch_replica_id(req, version);
  f.broker_epoch = version >= 15 ? req.replica_state.replica_epoch : -1;
  f.current_leader_epoch = p.current_leader_epoch;
  f.fetch_offset = p.fetch_offset;
  f.last_fetched_epoch = p.last_fetched_epoch;
  f.log_start_offset = p.log_start_offset;
  return f;
}

void set_replica_fields(kafka::FetchRequest& req, const ReplicaFetch& f) {
  // Both forms: the encoder writes the one the version carries.
  req.replica_id = f.replica_id;
  req.replica_state.replica_id = f.replica_id;
  req.replica_state.replica_epoch = f.broker_epoch;
}

kafka::FetchRequest::FetchPartition fetch_partition(std::int32_t partition, const ReplicaFetch& f,
                                                    std::int32_t max_bytes) {
  kafka::FetchRequest::FetchPartition p;
  p.partition = partition;
  p.current_leader_epoch = f.current_leader_epoch;
  p.fetch_offset = f.fetch_offset;
  p.last_fetched_epoch = f.last_fetched_epoch;
  p.log_start_offset = f.log_start_offset;
  p.partition_max_bytes = max_bytes;
  return p;
}

void set_fetch_answer(kafka::FetchResponse::PartitionData& out, const ReplicaFetchAnswer& a) {
  out.error_code = code_of(a.error);
  out.high_watermark = a.high_watermark;
  out.log_start_offset = a.log_start_offset;
  if (a.diverging) {
    out.diverging_epoch.epoch = a.diverging->epoch;
    out.diverging_epoch.end_offset = a.diverging->end_offset;
  }
}

ReplicaFetchAnswer fetch_answer_of(const kafka::FetchResponse::PartitionData& p) {
  ReplicaFetchAnswer a;
  a.error = error_of(p.error_code);
  a.high_watermark = p.high_watermark;
  a.log_start_offset = p.log_start_offset;
  // The tagged field is absent (epoch -1, end -1) when the logs did not diverge.
  if (p.diverging_epoch.epoch >= 0 || p.diverging_epoch.end_offset >= 0)
    a.diverging =
        io::LeaderEpochCache::EpochEnd{p.diverging_epoch.epoch, p.diverging_epoch.end_offset};
  return a;
}

}  // namespace samsa::replication
