// Moving partitions and retiring brokers: AlterPartitionReassignments and UnregisterBroker,
// decided and committed by the controller (replication/controller_reassign.cc; a broker
// forwards them), and ListPartitionReassignments, answered from this node's image. Kafka's
// rules: ALTER on the cluster to change, DESCRIBE to list.
#include <map>

#include "daemon/api/auth.h"
#include "daemon/api/handlers/handlers.h"
#include "daemon/api/handlers/round_trip.h"
#include "net/kafka/api.h"
#include "replication/controller.h"

namespace samsa::daemon::handlers {
namespace {

using kafka::ErrorCode;
using replication::AclOperation;
using replication::ResourceType;

bool may(Request& r, AclOperation op) {
  return authorized(r, op, ResourceType::cluster, replication::kClusterResourceName);
}

std::optional<std::string> message_of(const std::string& s) {
  return s.empty() ? std::nullopt : std::optional<std::string>(s);
}

}  // namespace

void alter_partition_reassignments(RequestPtr r) {
  kafka::AlterPartitionReassignmentsRequest req;
  if (!r->decode(req)) return;
  if (!may(*r, AclOperation::alter)) {
    kafka::AlterPartitionReassignmentsResponse resp;
    resp.allow_replication_factor_change = req.allow_replication_factor_change;
    resp.error_code = kafka::code(ErrorCode::cluster_authorization_failed);
    resp.error_message = std::nullopt;
    r->reply(resp);
    return;
  }
  std::vector<replication::ReassignmentSpec> specs;
  std::size_t n = 0;
  for (const auto& t : req.topics)
    n += t.partitions.size();
  if (!r->charge(n * (sizeof(replication::ReassignmentSpec) + 64), "its partitions")) return;
  for (const auto& t : req.topics)
    for (const auto& p : t.partitions)
      specs.push_back({t.name, p.partition_index, p.replicas});
  const bool allow_rf_change = req.allow_replication_factor_change;
  using Result = std::vector<replication::ReassignmentOutcome>;
  via_controller<Result>(
      std::move(r),
      [specs, allow_rf_change](replication::Controller& c, auto done) mutable {
        c.alter_partition_reassignments(std::move(specs), allow_rf_change, std::move(done));
      },
      [specs, allow_rf_change](RequestPtr r, Result out) {
        // Kafka echoes the option (response v1+); a v1 client reads it before ErrorCode.
        kafka::AlterPartitionReassignmentsResponse resp;
        resp.allow_replication_factor_change = allow_rf_change;
        resp.error_message = std::nullopt;
        for (std::size_t i = 0; i < specs.size() && i < out.size(); ++i) {
          if (resp.responses.empty() || resp.responses.back().name != specs[i].topic) {
            resp.responses.emplace_back();
            resp.responses.back().name = specs[i].topic;
          }
          resp.responses.back().partitions.push_back(
              {specs[i].partition, kafka::code(out[i].error), message_of(out[i].message)});
        }
        r->reply(resp);
      });
}

void list_partition_reassignments(RequestPtr r) {
  kafka::ListPartitionReassignmentsRequest req;
  if (!r->decode(req)) return;
  kafka::ListPartitionReassignmentsResponse resp;
  resp.error_message = std::nullopt;
  if (!may(*r, AclOperation::describe)) {
    resp.error_code = kafka::code(ErrorCode::cluster_authorization_failed);
    r->reply(resp);
    return;
  }
  const replication::MetadataImage& image = *r->rc.image;
  auto add = [&](const replication::TopicState& t, const replication::PartitionState& p) {
    if (!p.reassigning()) return;
    if (resp.topics.empty() || resp.topics.back().name != t.name) {
      resp.topics.emplace_back();
      resp.topics.back().name = t.name;
    }
    resp.topics.back().partitions.push_back({p.partition, p.replicas, p.adding, p.removing});
  };
  if (!req.topics) {
    for (const auto& [name, t] : image.topics())
      for (const auto& p : t->partitions)
        add(*t, p);
  } else {
    // Kafka lists what is moving among the partitions named; unknown ones are left out.
    for (const auto& wanted : *req.topics) {
      const replication::TopicState* t = image.topic(wanted.name);
      if (!t) continue;
      for (std::int32_t i : wanted.partition_indexes)
        if (i >= 0 && static_cast<std::size_t>(i) < t->partitions.size())
          add(*t, t->partitions[static_cast<std::size_t>(i)]);
    }
  }
  r->reply(resp);
}

void unregister_broker(RequestPtr r) {
  kafka::UnregisterBrokerRequest req;
  if (!r->decode(req)) return;
  if (!may(*r, AclOperation::alter)) {
    kafka::UnregisterBrokerResponse resp;
    resp.error_code = kafka::code(ErrorCode::cluster_authorization_failed);
    resp.error_message = std::nullopt;
    r->reply(resp);
    return;
  }
  via_controller<replication::UnregisterAnswer>(
      std::move(r),
      [id = req.broker_id](replication::Controller& c, auto done) mutable {
        c.unregister_broker(id, std::move(done));
      },
      [](RequestPtr r, replication::UnregisterAnswer a) {
        kafka::UnregisterBrokerResponse resp;
        resp.error_code = kafka::code(a.error);
        resp.error_message = message_of(a.message);
        r->reply(resp);
      });
}

}  // namespace samsa::daemon::handlers
