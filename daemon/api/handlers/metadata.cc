#include <algorithm>
#include <set>

#include "base/log.h"
#include "daemon/api/auth.h"
#include "daemon/api/handlers/handlers.h"
#include "daemon/api/handlers/round_trip.h"
#include "daemon/broker.h"
#include "net/kafka/gen/create_topics_request.h"
#include "net/kafka/gen/create_topics_response.h"
#include "net/kafka/gen/metadata_request.h"
#include "net/kafka/gen/metadata_response.h"
#include "net/kafka/wire.h"
#include "replication/topic_config.h"

namespace samsa::daemon::handlers {
namespace {

using kafka::ErrorCode;
using kafka::MetadataRequest;
using kafka::MetadataResponse;
using replication::AclOperation;
using replication::ResourceType;

constexpr std::string_view kOffsetsTopic = "__consumer_offsets";
// CREATE on the cluster, or on the topic (Kafka's rule for creating a topic).
bool may_create_topic(const Request& r, std::string_view name) {
  return authorized(r, AclOperation::create, ResourceType::cluster,
                    replication::kClusterResourceName, true) ||
         authorized(r, AclOperation::create, ResourceType::topic, name);
}

// A replica is offline when its broker is not registered or fenced (a cluster node's view;
// a single node has no registrations and no offline replicas).
bool offline(const replication::MetadataImage& image, std::int32_t id) {
  auto it = image.brokers().find(id);
  return it == image.brokers().end() || it->second.fenced;
}

MetadataResponse::MetadataResponseTopic describe(const replication::TopicState& t,
                                                 const replication::MetadataImage& image,
                                                 bool clustered) {
  MetadataResponse::MetadataResponseTopic out;
  out.name = t.name;
  out.topic_id = t.id;
  out.is_internal = replication::is_internal_topic(t.name);
  out.partitions.reserve(t.partitions.size());
  for (const auto& p : t.partitions) {
    MetadataResponse::MetadataResponsePartition mp;
    mp.partition_index = p.partition;
    mp.leader_id = p.leader;
    mp.leader_epoch = p.leader_epoch;
    mp.replica_nodes = p.replicas;
    mp.isr_nodes = p.isr;
    if (clustered)
      for (auto id : p.replicas)
        if (offline(image, id)) mp.offline_replicas.push_back(id);
    if (p.leader < 0) mp.error_code = kafka::code(ErrorCode::leader_not_available);
    out.partitions.push_back(std::move(mp));
  }
  return out;
}

// failed: topics whose auto-creation was refused, with the reason (sorted by name).
// unsent_from: new topics named from this index on were not even offered to the controller
// (one request creates at most samsa.max.partitions.per.request partitions).
void answer(RequestPtr r, const MetadataRequest& req,
            const std::vector<std::pair<std::string, ErrorCode>>& failed = {},
            std::size_t unsent_from = SIZE_MAX) {
  const auto& image = *r->rc.image;
  const auto& s = *r->rc.settings;
  const std::int16_t v = r->version();
  MetadataResponse resp;
  // Advertise the endpoint of the listener this client connected through.
  const Endpoint& ep = s.advertised[std::min(r->dispatcher.listener(), s.advertised.size() - 1)];
  const bool clustered = s.clustered();
  if (clustered) {
    // Every live broker, at its endpoint of the listener this client came through (as Kafka
    // does; a broker without one is left out).
    for (const auto& [id, b] : image.brokers()) {
      if (b.fenced) continue;
      for (const auto& e : b.endpoints)
        if (e.name == ep.name) {
          resp.brokers.push_back({id, e.host, e.port, b.rack});
          break;
        }
    }
  } else {
    resp.brokers.push_back({s.node_id, ep.host, ep.port, s.cluster.rack});
  }
  resp.cluster_id = s.cluster_id;
  // KRaft brokers name a live broker (clients cannot reach the controller): this one when the
  // answer lists it, else the first listed. Naming one the list lacks (this broker while still
  // fenced) leaves an admin client waiting for a controller it cannot find.
  resp.controller_id = s.node_id;
  if (clustered) {
    const bool listed = std::any_of(resp.brokers.begin(), resp.brokers.end(),
                                    [&](const auto& b) { return b.node_id == s.node_id; });
    if (!listed) resp.controller_id = resp.brokers.empty() ? -1 : resp.brokers.front().node_id;
  }
  if (req.include_cluster_authorized_operations)
    resp.cluster_authorized_operations = authorized_operations(
        *r, ResourceType::cluster, replication::kClusterResourceName, kClusterAclOperations);
  auto add = [&](const replication::TopicState& t) {
    resp.topics.push_back(describe(t, image, clustered));
  };

  const bool all = !req.topics || (v == 0 && req.topics->empty());
  if (all) {
    // Topics the principal may not describe are left out, without a log line each.
    for (const auto& [name, t] : image.topics())
      if (authorized(*r, AclOperation::describe, ResourceType::topic, name, true)) add(*t);
  } else {
    const bool auto_create = s.auto_create_topics && !s.controller_only() &&
                             (r->version() < 4 || req.allow_auto_topic_creation);
    for (std::size_t i = 0; i < req.topics->size(); ++i) {
      const auto& want = (*req.topics)[i];
      const replication::TopicState* t =
          want.name ? image.topic(*want.name) : image.topic(want.topic_id);
      MetadataResponse::MetadataResponseTopic miss;
      miss.name = want.name;
      miss.topic_id = want.topic_id;
      // Kafka: a topic the principal may not describe is TOPIC_AUTHORIZATION_FAILED whether it
      // exists or not; a missing one it may not create, when auto-creation was asked for, too.
      if (t || want.name) {
        const std::string_view name = t ? std::string_view(t->name) : *want.name;
        const bool denied = !authorized(*r, AclOperation::describe, ResourceType::topic, name) ||
                            (!t && auto_create && !may_create_topic(*r, name));
        if (denied) {
          // Named by id: the name is not told (an id is not secret, Kafka says).
          miss.error_code = kafka::code(ErrorCode::topic_authorization_failed);
          resp.topics.push_back(std::move(miss));
          continue;
        }
      }
      if (t) {
        add(*t);
        continue;
      }
      auto f = want.name ? std::lower_bound(
                               failed.begin(), failed.end(), *want.name,
                               [](const auto& e, const std::string& n) { return e.first < n; })
                         : failed.end();
      if (f != failed.end() && want.name && f->first == *want.name) {
        miss.error_code = kafka::code(f->second);
      } else if (!want.name) {
        miss.error_code = kafka::code(ErrorCode::unknown_topic_id);
      } else if (replication::check_topic_name(*want.name)) {
        miss.error_code = kafka::code(ErrorCode::invalid_topic_exception);
      } else if (i >= unsent_from && !want.name->starts_with("__")) {
        miss.error_code = kafka::code(ErrorCode::policy_violation);
      } else {
        miss.error_code = kafka::code(ErrorCode::unknown_topic_or_partition);
      }
      resp.topics.push_back(std::move(miss));
    }
  }
  // Kafka fills in the operations for every topic it answers about, found or not.
  if (req.include_topic_authorized_operations)
    for (auto& t : resp.topics)
      t.topic_authorized_operations =
          t.name ? authorized_operations(*r, ResourceType::topic, *t.name, kTopicAclOperations) : 0;
  r->reply(resp);
}

// A broker node: the topics go to the controller as a CreateTopics request, and the answer is
// made from this broker's image once it holds them.
void forward_create(RequestPtr r, MetadataRequest req,
                    const std::vector<replication::TopicSpec>& create, std::size_t unsent_from) {
  constexpr std::int16_t kVersion = 7;
  kafka::CreateTopicsRequest ct;
  for (const auto& c : create) {
    kafka::CreateTopicsRequest::CreatableTopic t;
    t.name = c.name;
    t.num_partitions = c.partitions;
    t.replication_factor = c.replication_factor;
    ct.topics.push_back(std::move(t));
  }
  auto frame = kafka::flatten_body(kafka::encode_request(ct, kVersion, 0, "samsa-broker"));
  Broker& b = *r->rc.broker;
  const std::size_t origin = r->rc.index;
  auto shared = std::make_shared<MetadataRequest>(std::move(req));
  Request* raw = r.release();
  b.forward_to_controller(std::move(frame), [&b, origin, raw, shared, unsent_from](
                                                std::optional<std::vector<std::byte>> resp) {
    std::vector<std::pair<std::string, ErrorCode>> failed;
    if (resp) {
      auto h = kafka::decode_response_header(*resp, kafka::CreateTopicsResponse::kApiKey, kVersion);
      kafka::CreateTopicsResponse out;
      if (h.ok() &&
          kafka::decode_response_body(*resp, h, kVersion, out) == kafka::DecodeError::none) {
        for (const auto& t : out.topics) {
          const auto e = static_cast<ErrorCode>(t.error_code);
          if (e == ErrorCode::none) {
            LOG_INFO("auto-created topic %s through the controller", t.name.c_str());
          } else if (e != ErrorCode::topic_already_exists) {
            failed.emplace_back(t.name, e);
          }
        }
      }
    }
    std::sort(failed.begin(), failed.end());
    b.on_reactor(origin,
                 [raw, shared, failed = std::move(failed), unsent_from](ReactorContext&) mutable {
                   answer(RequestPtr(raw), *shared, failed, unsent_from);
                 });
  });
}

}  // namespace

void metadata(RequestPtr r) {
  MetadataRequest req;
  if (!r->decode(req)) return;
  const auto& s = *r->rc.settings;
  // A broker node's auto-creation goes to the controller (forward_create); a controller node
  // creates none on its own.
  const bool allow_create = s.auto_create_topics && !s.controller_only() &&
                            (r->version() < 4 || req.allow_auto_topic_creation);
  std::vector<replication::TopicSpec> create;
  std::size_t unsent_from = SIZE_MAX;
  if (allow_create && req.topics && !(r->version() == 0 && req.topics->empty())) {
    // A request may name millions of topics: offer the controller only as many as it could
    // create (each takes num.partitions of the per-request cap), so nothing here grows with
    // the names beyond them.
    const auto most = static_cast<std::size_t>(s.max_partitions_per_request /
                                               std::max<std::int64_t>(1, s.num_partitions));
    std::set<std::string_view> named;
    for (std::size_t i = 0; i < req.topics->size(); ++i) {
      const auto& want = (*req.topics)[i];
      if (!want.name || r->rc.image->topic(*want.name)) continue;
      if (replication::check_topic_name(*want.name)) continue;
      // answer() tells the client why (TOPIC_AUTHORIZATION_FAILED).
      if (!authorized(*r, AclOperation::describe, ResourceType::topic, *want.name, true) ||
          !may_create_topic(*r, *want.name))
        continue;
      if (want.name->starts_with("__")) continue;  // internal names are created by the broker
      if (named.contains(*want.name)) continue;
      if (create.size() == most) {
        unsent_from = i;
        break;
      }
      named.insert(*want.name);
      create.push_back({*want.name, s.num_partitions, s.default_replication_factor, {}});
    }
    // The specs, their outcomes and the names they copy, within the request budget.
    std::size_t bytes = 0;
    for (const auto& c : create)
      bytes += sizeof(replication::TopicSpec) + sizeof(replication::TopicOutcome) +
               2 * c.name.size() + 64;
    if (!r->charge(bytes, "the topics it auto-creates")) return;
  }
  if (create.empty()) {
    answer(std::move(r), req, {}, unsent_from);
    return;
  }
  if (s.cluster_broker()) {
    forward_create(std::move(r), std::move(req), create, unsent_from);
    return;
  }
  // Auto-create, then answer from the image that holds the new topics (the controller answers
  // only once every reactor has applied it).
  via_controller<std::vector<replication::TopicOutcome>>(
      std::move(r),
      [create = std::move(create)](replication::Controller& c, auto done) mutable {
        // Topics are created in order while they fit samsa.max.partitions and the per-request
        // cap; the rest are answered with the reason (each topic is whole or absent).
        c.create_topics(std::move(create), false, std::move(done), true);
      },
      [req = std::move(req), unsent_from](RequestPtr r,
                                          std::vector<replication::TopicOutcome> out) {
        std::vector<std::pair<std::string, ErrorCode>> failed;
        std::size_t created = 0;
        const replication::TopicOutcome* one = nullptr;
        for (auto& o : out) {
          if (o.error == ErrorCode::none) {
            ++created;
            one = &o;
          } else if (o.error != ErrorCode::topic_already_exists) {
            // One line for the first refusal: a request may name thousands of topics.
            if (failed.empty())
              LOG_WARN("auto-creating topic %s failed: %s", o.name.c_str(), o.message.c_str());
            failed.emplace_back(std::move(o.name), o.error);
          }
        }
        if (created == 1) {
          LOG_INFO("auto-created topic %s with %d partitions", one->name.c_str(), one->partitions);
        } else if (created > 1) {
          LOG_INFO("auto-created %zu topics", created);
        }
        if (failed.size() > 1) LOG_WARN("auto-creation refused %zu topics", failed.size());
        if (unsent_from != SIZE_MAX)
          LOG_WARN(
              "auto-creation: %zu topics named after the first %zu new ones were not "
              "considered (samsa.max.partitions.per.request)",
              req.topics->size() - unsent_from, out.size());
        std::sort(failed.begin(), failed.end());
        answer(std::move(r), req, failed, unsent_from);
      });
}

}  // namespace samsa::daemon::handlers
