#include "base/log.h"
#include "daemon/broker.h"
#include "daemon/handlers/handlers.h"
#include "daemon/handlers/round_trip.h"
#include "net/kafka/gen/metadata_request.h"
#include "net/kafka/gen/metadata_response.h"
#include "replication/topic_config.h"

namespace samsa::daemon::handlers {
namespace {

using kafka::ErrorCode;
using kafka::MetadataRequest;
using kafka::MetadataResponse;

constexpr std::string_view kOffsetsTopic = "__consumer_offsets";
// What Kafka reports without an authorizer when a client asks (KIP-430): every operation that
// applies to a topic (READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS,
// ALTER_CONFIGS) and to the cluster (CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS,
// ALTER_CONFIGS, IDEMPOTENT_WRITE).
constexpr std::int32_t kTopicOperations = 3576;
constexpr std::int32_t kClusterOperations = 8096;

MetadataResponse::MetadataResponseTopic describe(const replication::TopicState& t) {
  MetadataResponse::MetadataResponseTopic out;
  out.name = t.name;
  out.topic_id = t.id;
  out.is_internal = t.name == kOffsetsTopic;
  out.partitions.reserve(t.partitions.size());
  for (const auto& p : t.partitions) {
    MetadataResponse::MetadataResponsePartition mp;
    mp.partition_index = p.partition;
    mp.leader_id = p.leader;
    mp.leader_epoch = p.leader_epoch;
    mp.replica_nodes = p.replicas;
    mp.isr_nodes = p.isr;
    if (p.leader < 0) mp.error_code = kafka::code(ErrorCode::leader_not_available);
    out.partitions.push_back(std::move(mp));
  }
  return out;
}

void answer(RequestPtr r, const MetadataRequest& req) {
  const auto& image = *r->rc.image;
  const auto& s = *r->rc.settings;
  const std::int16_t v = r->version();
  MetadataResponse resp;
  // Advertise the endpoint of the listener this client connected through.
  const Endpoint& ep = s.advertised[std::min(r->dispatcher.listener(), s.advertised.size() - 1)];
  resp.brokers.push_back({s.node_id, ep.host, ep.port, std::nullopt});
  resp.cluster_id = s.cluster_id;
  resp.controller_id = s.node_id;
  if (req.include_cluster_authorized_operations)
    resp.cluster_authorized_operations = kClusterOperations;
  auto add = [&](const replication::TopicState& t) { resp.topics.push_back(describe(t)); };

  const bool all = !req.topics || (v == 0 && req.topics->empty());
  if (all) {
    for (const auto& [name, t] : image.topics())
      add(*t);
  } else {
    for (const auto& want : *req.topics) {
      const replication::TopicState* t =
          want.name ? image.topic(*want.name) : image.topic(want.topic_id);
      if (t) {
        add(*t);
        continue;
      }
      MetadataResponse::MetadataResponseTopic miss;
      miss.name = want.name;
      miss.topic_id = want.topic_id;
      if (!want.name) {
        miss.error_code = kafka::code(ErrorCode::unknown_topic_id);
      } else if (replication::check_topic_name(*want.name)) {
        miss.error_code = kafka::code(ErrorCode::invalid_topic_exception);
      } else {
        miss.error_code = kafka::code(ErrorCode::unknown_topic_or_partition);
      }
      resp.topics.push_back(std::move(miss));
    }
  }
  // Kafka fills in the operations for every topic it answers about, found or not.
  if (req.include_topic_authorized_operations)
    for (auto& t : resp.topics)
      t.topic_authorized_operations = kTopicOperations;
  r->reply(resp);
}

}  // namespace

void metadata(RequestPtr r) {
  MetadataRequest req;
  if (!r->decode(req)) return;
  const auto& s = *r->rc.settings;
  const bool allow_create =
      s.auto_create_topics && (r->version() < 4 || req.allow_auto_topic_creation);
  std::vector<replication::TopicSpec> create;
  if (allow_create && req.topics && !(r->version() == 0 && req.topics->empty())) {
    for (const auto& want : *req.topics) {
      if (!want.name || r->rc.image->topic(*want.name)) continue;
      if (replication::check_topic_name(*want.name)) continue;
      if (want.name->starts_with("__")) continue;  // internal names are created by the broker
      create.push_back({*want.name, s.num_partitions, s.default_replication_factor, {}});
    }
  }
  if (create.empty()) {
    answer(std::move(r), req);
    return;
  }
  // Auto-create, then answer from the image that holds the new topics (the controller answers
  // only once every reactor has applied it).
  via_controller<std::vector<replication::TopicOutcome>>(
      std::move(r),
      [create = std::move(create)](replication::Controller& c, auto done) mutable {
        c.create_topics(std::move(create), false, std::move(done));
      },
      [req = std::move(req)](RequestPtr r, std::vector<replication::TopicOutcome> out) {
        for (const auto& o : out) {
          if (o.error == ErrorCode::none) {
            LOG_INFO("auto-created topic %s with %d partitions", o.name.c_str(), o.partitions);
          } else if (o.error != ErrorCode::topic_already_exists) {
            LOG_WARN("auto-creating topic %s failed: %s", o.name.c_str(), o.message.c_str());
          }
        }
        answer(std::move(r), req);
      });
}

}  // namespace samsa::daemon::handlers
