// CreateTopics, DeleteTopics, CreatePartitions and ElectLeaders: validated and committed by the
// controller thread; answered from the origin reactor once every reactor has applied the change.
#include "base/log.h"
#include "daemon/api/auth.h"
#include "daemon/api/handlers/handlers.h"
#include "daemon/api/handlers/round_trip.h"
#include "daemon/broker.h"
#include "net/kafka/gen/create_partitions_request.h"
#include "net/kafka/gen/create_partitions_response.h"
#include "net/kafka/gen/create_topics_request.h"
#include "net/kafka/gen/create_topics_response.h"
#include "net/kafka/gen/delete_topics_request.h"
#include "net/kafka/gen/delete_topics_response.h"
#include "net/kafka/gen/elect_leaders_request.h"
#include "net/kafka/gen/elect_leaders_response.h"
#include "replication/topic_config.h"

namespace samsa::daemon::handlers {
namespace {

using kafka::ErrorCode;
using replication::AclOperation;
using replication::ResourceType;

// CREATE on the cluster, or on the topic (Kafka's rule for creating a topic).
bool may_create(const Request& r, std::string_view topic) {
  return authorized(r, AclOperation::create, ResourceType::cluster,
                    replication::kClusterResourceName, true) ||
         authorized(r, AclOperation::create, ResourceType::topic, topic);
}

}  // namespace

void create_topics(RequestPtr r) {
  auto req = std::make_shared<kafka::CreateTopicsRequest>();
  if (!r->decode(*req)) return;
  std::vector<replication::TopicSpec> specs;
  // Requests the controller must not see (bad manual assignments) are answered here.
  std::vector<std::optional<replication::TopicOutcome>> early(req->topics.size());
  for (std::size_t i = 0; i < req->topics.size(); ++i) {
    const auto& t = req->topics[i];
    if (!may_create(*r, t.name)) {
      early[i] =
          replication::TopicOutcome{t.name, ErrorCode::topic_authorization_failed, "", {}, -1, -1};
      continue;
    }
    replication::TopicSpec spec{t.name, t.num_partitions, t.replication_factor, {}};
    for (const auto& c : t.configs) {
      if (c.value) spec.configs[c.name] = *c.value;
    }
    if (!t.assignments.empty()) {
      // Manual assignment: its shape is checked here; which brokers it names, by the
      // controller (ControllerState::check_assignments: registered, each once, one RF).
      bool ok = t.num_partitions == -1 && t.replication_factor == -1;
      for (std::size_t p = 0; ok && p < t.assignments.size(); ++p) {
        const auto& a = t.assignments[p];
        if (a.partition_index != static_cast<std::int32_t>(p) || a.broker_ids.empty()) ok = false;
        spec.assignments.push_back(a.broker_ids);
      }
      if (!ok) {
        replication::TopicOutcome o;
        o.name = t.name;
        o.error = ErrorCode::invalid_replica_assignment;
        o.message =
            "Replica assignments must be given for partitions 0..n-1 in order, each naming "
            "brokers, with numPartitions and replicationFactor set to -1.";
        early[i] = std::move(o);
        continue;
      }
      spec.partitions = static_cast<std::int32_t>(spec.assignments.size());
      spec.replication_factor = static_cast<std::int16_t>(spec.assignments.front().size());
    }
    specs.push_back(std::move(spec));
  }

  auto answer = [req, early](RequestPtr r, std::vector<replication::TopicOutcome> out) {
    const auto& s = *r->rc.settings;
    kafka::CreateTopicsResponse resp;
    std::size_t next = 0;
    for (std::size_t i = 0; i < req->topics.size(); ++i) {
      const replication::TopicOutcome& o = early[i] ? *early[i] : out[next++];
      kafka::CreateTopicsResponse::CreatableTopicResult res;
      res.name = o.name;
      res.error_code = kafka::code(o.error);
      res.error_message = o.message.empty() ? std::nullopt : std::optional(o.message);
      res.topic_id = o.id;
      if (o.error == ErrorCode::none &&
          !authorized(*r, AclOperation::describe_configs, ResourceType::topic, o.name, true)) {
        // Created, but its configs are not the principal's to see (Kafka's answer).
        res.num_partitions = o.partitions;
        res.replication_factor = o.replication_factor;
        res.topic_config_error_code = kafka::code(ErrorCode::topic_authorization_failed);
        res.configs.emplace();
      } else if (o.error == ErrorCode::none) {
        res.num_partitions = o.partitions;
        res.replication_factor = o.replication_factor;
        std::map<std::string, std::string> overrides;
        for (const auto& c : req->topics[i].configs)
          if (c.value) overrides[c.name] = *c.value;
        std::vector<kafka::CreateTopicsResponse::CreatableTopicConfigs> configs;
        for (const auto& k : replication::topic_config_keys()) {
          kafka::CreateTopicsResponse::CreatableTopicConfigs cfg;
          cfg.name = std::string(k.name);
          cfg.value = replication::topic_config_value(overrides, s.topic_defaults, k.name);
          cfg.config_source = topic_config_source(s, overrides, k);
          configs.push_back(std::move(cfg));
        }
        res.configs = std::move(configs);
      } else {
        res.configs.emplace();  // Kafka: an empty list for a topic it did not create
      }
      resp.topics.push_back(std::move(res));
    }
    r->reply(resp);
  };
  if (specs.empty()) {
    answer(std::move(r), {});
    return;
  }
  const bool validate_only = req->validate_only;
  via_controller<std::vector<replication::TopicOutcome>>(
      std::move(r),
      [specs = std::move(specs), validate_only](replication::Controller& c, auto done) mutable {
        c.create_topics(std::move(specs), validate_only, std::move(done));
      },
      std::move(answer));
}

void delete_topics(RequestPtr r) {
  kafka::DeleteTopicsRequest req;
  if (!r->decode(req)) return;
  std::vector<std::pair<std::string, replication::Uuid>> named;
  if (r->version() >= 6) {
    for (const auto& t : req.topics)
      named.emplace_back(t.name.value_or(""), t.topic_id);
  } else {
    for (const auto& n : req.topic_names)
      named.emplace_back(n, replication::Uuid{});
  }
  // Kafka's controller: a topic the principal may not describe is TOPIC_AUTHORIZATION_FAILED
  // (named by id, without its name) whether it exists or not; one it may describe but not
  // delete too; the rest go to the controller (UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID).
  std::vector<std::pair<std::string, replication::Uuid>> topics;
  std::vector<std::optional<replication::DeleteOutcome>> early(named.size());
  for (std::size_t i = 0; i < named.size(); ++i) {
    const auto& [name, id] = named[i];
    const replication::TopicState* t =
        name.empty() ? r->rc.image->topic(id) : r->rc.image->topic(name);
    const std::string_view resource = t ? std::string_view(t->name) : name;
    if (!resource.empty() &&
        (!authorized(*r, AclOperation::describe, ResourceType::topic, resource) ||
         (t && !authorized(*r, AclOperation::delete_, ResourceType::topic, resource)))) {
      early[i] = replication::DeleteOutcome{name, id, ErrorCode::topic_authorization_failed, ""};
      continue;
    }
    topics.push_back(named[i]);
  }
  via_controller<std::vector<replication::DeleteOutcome>>(
      std::move(r),
      [topics = std::move(topics)](replication::Controller& c, auto done) mutable {
        c.delete_topics(std::move(topics), std::move(done));
      },
      [early = std::move(early)](RequestPtr r, std::vector<replication::DeleteOutcome> decided) {
        std::vector<replication::DeleteOutcome> out;
        std::size_t next = 0;
        for (const auto& e : early)
          out.push_back(e ? *e : decided[next++]);
        kafka::DeleteTopicsResponse resp;
        for (const auto& o : out) {
          kafka::DeleteTopicsResponse::DeletableTopicResult res;
          res.name = o.name.empty() ? std::nullopt : std::optional(o.name);
          res.topic_id = o.id;
          res.error_code = kafka::code(o.error);
          res.error_message = o.message.empty() ? std::nullopt : std::optional(o.message);
          if (o.error == kafka::ErrorCode::none) LOG_INFO("deleted topic %s", o.name.c_str());
          resp.responses.push_back(std::move(res));
        }
        r->reply(resp);
      });
}

void create_partitions(RequestPtr r) {
  kafka::CreatePartitionsRequest req;
  if (!r->decode(req)) return;
  if (!r->charge(req.topics.size() * (sizeof(replication::PartitionsSpec) +
                                      sizeof(replication::PartitionsOutcome) + 64),
                 "its topics"))
    return;
  std::vector<replication::PartitionsSpec> specs;
  specs.reserve(req.topics.size());
  std::vector<std::string> denied;  // ALTER on the topic
  for (auto& t : req.topics) {
    if (!authorized(*r, AclOperation::alter, ResourceType::topic, t.name)) {
      denied.push_back(std::move(t.name));
      continue;
    }
    replication::PartitionsSpec s;
    s.name = std::move(t.name);
    s.count = t.count;
    if (t.assignments) {
      for (auto& a : *t.assignments)
        s.assignments.push_back(std::move(a.broker_ids));
    }
    specs.push_back(std::move(s));
  }
  const bool validate_only = req.validate_only;
  via_controller<std::vector<replication::PartitionsOutcome>>(
      std::move(r),
      [specs = std::move(specs), validate_only](replication::Controller& c, auto done) mutable {
        c.create_partitions(std::move(specs), validate_only, std::move(done));
      },
      [denied = std::move(denied)](RequestPtr r, std::vector<replication::PartitionsOutcome> out) {
        kafka::CreatePartitionsResponse resp;
        for (const auto& name : denied)
          resp.results.push_back(
              {name, kafka::code(ErrorCode::topic_authorization_failed), std::nullopt});
        for (auto& o : out) {
          kafka::CreatePartitionsResponse::CreatePartitionsTopicResult res;
          res.name = std::move(o.name);
          res.error_code = kafka::code(o.error);
          res.error_message = o.error == ErrorCode::none || o.message.empty()
                                  ? std::nullopt
                                  : std::optional(o.message);
          if (o.error == ErrorCode::none)
            LOG_INFO("added partitions to topic %s", res.name.c_str());
          resp.results.push_back(std::move(res));
        }
        r->reply(resp);
      });
}

// ElectLeaders: preferred (type 0; v0 has no type) or unclean (type 1) elections, decided and
// committed by the controller (replication::ControllerState::elect_leaders).
void elect_leaders(RequestPtr r) {
  kafka::ElectLeadersRequest req;
  if (!r->decode(req)) return;
  if (req.election_type != 0 && req.election_type != 1) {
    kafka::ElectLeadersResponse resp;
    resp.error_code = kafka::code(ErrorCode::invalid_request);
    r->reply(resp);
    return;
  }
  if (!authorized(*r, AclOperation::alter, ResourceType::cluster,
                  replication::kClusterResourceName)) {
    // Kafka: the error at the top and for every partition named.
    kafka::ElectLeadersResponse resp;
    resp.error_code = kafka::code(ErrorCode::cluster_authorization_failed);
    if (req.topic_partitions)
      for (const auto& t : *req.topic_partitions) {
        auto& res = resp.replica_election_results.emplace_back();
        res.topic = t.topic;
        for (std::int32_t p : t.partitions)
          res.partition_result.push_back(
              {p, kafka::code(ErrorCode::cluster_authorization_failed), std::nullopt});
      }
    r->reply(resp);
    return;
  }
  std::optional<std::vector<std::pair<std::string, std::int32_t>>> which;
  if (req.topic_partitions) {
    std::size_t n = 0;
    for (const auto& t : *req.topic_partitions)
      n += t.partitions.size();
    if (!r->charge(n * (sizeof(replication::ElectionResult) + 64), "its partitions")) return;
    which.emplace();
    for (const auto& t : *req.topic_partitions)
      for (std::int32_t p : t.partitions)
        which->emplace_back(t.topic, p);
  }
  const bool unclean = req.election_type == 1;
  using Result = std::pair<ErrorCode, std::vector<replication::ElectionResult>>;
  via_controller<Result>(
      std::move(r),
      [unclean, which = std::move(which)](replication::Controller& c, auto done) mutable {
        c.elect_leaders(unclean, std::move(which),
                        [done = std::move(done)](
                            ErrorCode e, std::vector<replication::ElectionResult> out) mutable {
                          done(Result{e, std::move(out)});
                        });
      },
      [](RequestPtr r, Result res) {
        kafka::ElectLeadersResponse resp;
        resp.error_code = kafka::code(res.first);
        for (auto& o : res.second) {
          if (resp.replica_election_results.empty() ||
              resp.replica_election_results.back().topic != o.topic) {
            resp.replica_election_results.emplace_back();
            resp.replica_election_results.back().topic = o.topic;
          }
          kafka::ElectLeadersResponse::PartitionResult pr;
          pr.partition_id = o.partition;
          pr.error_code = kafka::code(o.error);
          pr.error_message = o.message.empty() ? std::nullopt : std::optional(std::move(o.message));
          resp.replica_election_results.back().partition_result.push_back(std::move(pr));
        }
        r->reply(resp);
      });
}

}  // namespace samsa::daemon::handlers
