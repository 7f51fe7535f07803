// DescribeCluster, DescribeLogDirs and DescribeTopicPartitions: what the admin tools show about
// brokers, data directories and partitions (kafka-log-dirs, kafka-topics --describe).
#include <sys/statvfs.h>

#include <algorithm>
#include <map>

#include "daemon/api/auth.h"
#include "daemon/api/handlers/fan_out.h"
#include "daemon/api/handlers/handlers.h"
#include "daemon/broker.h"
#include "net/kafka/gen/describe_cluster_request.h"
#include "net/kafka/gen/describe_cluster_response.h"
#include "net/kafka/gen/describe_log_dirs_request.h"
#include "net/kafka/gen/describe_log_dirs_response.h"
#include "net/kafka/gen/describe_topic_partitions_request.h"
#include "net/kafka/gen/describe_topic_partitions_response.h"
#include "replication/topic_config.h"

namespace samsa::daemon::handlers {
namespace {

using kafka::ErrorCode;

using replication::AclOperation;
using replication::ResourceType;

constexpr std::int8_t kBrokerEndpoints = 1;

bool describe_cluster_allowed(const Request& r) {
  return authorized(r, AclOperation::describe, ResourceType::cluster,
                    replication::kClusterResourceName);
}

}  // namespace

void describe_cluster(RequestPtr r) {
  kafka::DescribeClusterRequest req;
  if (!r->decode(req)) return;
  const auto& s = *r->rc.settings;
  kafka::DescribeClusterResponse resp;
  resp.endpoint_type = req.endpoint_type;
  if (req.endpoint_type != kBrokerEndpoints) {
    // Controllers are asked on the controller listener, which samsa does not open (yet): the
    // answer a Kafka broker listener gives.
    resp.endpoint_type = kBrokerEndpoints;
    resp.error_code = kafka::code(ErrorCode::mismatched_endpoint_type);
    resp.error_message =
        "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type "
        "CONTROLLER";
    resp.controller_id = -1;
    r->reply(resp);
    return;
  }
  resp.cluster_id = s.cluster_id;
  resp.controller_id = s.node_id;
  const Endpoint& ep = s.advertised[std::min(r->dispatcher.listener(), s.advertised.size() - 1)];
  if (s.clustered() && r->rc.image) {
    // Every registered broker at its endpoint of this listener; fenced ones only when asked
    // (v2's IncludeFencedBrokers, as Kafka does).
    for (const auto& [id, b] : r->rc.image->brokers()) {
      if (b.fenced && !req.include_fenced_brokers) continue;
      for (const auto& e : b.endpoints) {
        if (e.name != ep.name) continue;
        kafka::DescribeClusterResponse::DescribeClusterBroker broker;
        broker.broker_id = id;
        broker.host = e.host;
        broker.port = e.port;
        broker.rack = b.rack;
        broker.is_fenced = b.fenced;
        resp.brokers.push_back(std::move(broker));
        break;
      }
    }
  } else {
    kafka::DescribeClusterResponse::DescribeClusterBroker broker;
    broker.broker_id = s.node_id;
    broker.host = ep.host;
    broker.port = ep.port;
    broker.rack = s.cluster.rack;
    broker.is_fenced = false;
    resp.brokers.push_back(std::move(broker));
  }
  if (req.include_cluster_authorized_operations)
    resp.cluster_authorized_operations = authorized_operations(
        *r, ResourceType::cluster, replication::kClusterResourceName, kClusterAclOperations);
  r->reply(resp);
}

namespace {

struct DirEntry {
  std::string dir;
  std::string topic;
  std::int32_t partition;
  std::int64_t size;
};

struct LogDirsState {
  RequestPtr req;
  // Requested partitions (all when unset), by topic.
  std::optional<std::map<std::string, std::vector<std::int32_t>, std::less<>>> wanted;
  std::vector<std::vector<DirEntry>> per_shard;
};

}  // namespace

void describe_log_dirs(RequestPtr r) {
  kafka::DescribeLogDirsRequest req;
  if (!r->decode(req)) return;
  if (!describe_cluster_allowed(*r)) {
    kafka::DescribeLogDirsResponse resp;
    resp.error_code = kafka::code(ErrorCode::cluster_authorization_failed);
    r->reply(resp);
    return;
  }
  auto st = std::make_unique<LogDirsState>();
  if (req.topics) {
    st->wanted.emplace();
    for (auto& t : *req.topics) {
      auto& parts = (*st->wanted)[t.topic];
      parts.insert(parts.end(), t.partitions.begin(), t.partitions.end());
    }
  }
  const std::size_t shards = r->rc.broker->reactor_count();
  st->per_shard.resize(shards);
  st->req = std::move(r);
  // One item per shard: each lists the partitions it owns.
  fan_out_to_shards(
      std::move(st), shards,
      [](const LogDirsState&, std::size_t i) { return std::optional<std::size_t>(i); },
      [](ReactorContext& rc, LogDirsState& s, std::size_t shard) {
        auto& out = s.per_shard[shard];
        rc.shard->for_each([&](replication::Partition& p) {
          if (s.wanted) {
            auto it = s.wanted->find(p.topic());
            if (it == s.wanted->end() ||
                std::find(it->second.begin(), it->second.end(), p.index()) == it->second.end())
              return;
          }
          out.push_back({p.dir().parent_path().string(), p.topic(), p.index(),
                         static_cast<std::int64_t>(p.size_bytes())});
        });
      },
      [](std::unique_ptr<LogDirsState> s) {
        RequestPtr r = std::move(s->req);
        kafka::DescribeLogDirsResponse resp;
        for (const auto& d : r->rc.broker->log_dirs()) {
          kafka::DescribeLogDirsResponse::DescribeLogDirsResult res;
          res.log_dir = d->root().string();
          std::map<std::string, std::vector<const DirEntry*>> by_topic;
          for (const auto& shard : s->per_shard)
            for (const auto& e : shard)
              if (e.dir == res.log_dir) by_topic[e.topic].push_back(&e);
          for (auto& [topic, entries] : by_topic) {
            std::sort(entries.begin(), entries.end(), [](const DirEntry* a, const DirEntry* b) {
              return a->partition < b->partition;
            });
            kafka::DescribeLogDirsResponse::DescribeLogDirsTopic t;
            t.name = topic;
            for (const DirEntry* e : entries) {
              kafka::DescribeLogDirsResponse::DescribeLogDirsPartition dp;
              dp.partition_index = e->partition;
              dp.partition_size = e->size;
              dp.offset_lag = 0;
              dp.is_future_key = false;
              t.partitions.push_back(dp);
            }
            res.topics.push_back(std::move(t));
          }
          struct statvfs fs {};
          if (::statvfs(res.log_dir.c_str(), &fs) == 0) {
            res.total_bytes = static_cast<std::int64_t>(fs.f_blocks) * fs.f_frsize;
            res.usable_bytes = static_cast<std::int64_t>(fs.f_bavail) * fs.f_frsize;
          } else {
            res.error_code = kafka::code(ErrorCode::kafka_storage_error);
          }
          resp.results.push_back(std::move(res));
        }
        r->reply(resp);
      });
}

// Kafka's admin client (4.x) describes topics with this, a page of partitions at a time: topics
// in name order from the cursor, at most ResponsePartitionLimit partitions (and at most 2000).
void describe_topic_partitions(RequestPtr r) {
  kafka::DescribeTopicPartitionsRequest req;
  if (!r->decode(req)) return;
  using Resp = kafka::DescribeTopicPartitionsResponse;
  const auto& image = *r->rc.image;
  Resp resp;
  std::int64_t budget = std::clamp<std::int32_t>(req.response_partition_limit, 1, 2000);
  std::vector<std::string> names;
  // Topics the principal may not describe: left out of an all-topics answer, answered
  // TOPIC_AUTHORIZATION_FAILED when named.
  if (req.topics.empty()) {
    for (const auto& [name, t] : image.topics())
      if (authorized(*r, AclOperation::describe, ResourceType::topic, name, true))
        names.push_back(name);
  } else {
    for (const auto& t : req.topics)
      names.push_back(t.name);
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
  }
  std::size_t first = 0;
  std::int32_t first_partition = 0;
  if (req.cursor) {
    first = static_cast<std::size_t>(
        std::lower_bound(names.begin(), names.end(), req.cursor->topic_name) - names.begin());
    if (first < names.size() && names[first] == req.cursor->topic_name)
      first_partition = std::max(0, req.cursor->partition_index);
  }
  for (std::size_t i = first; i < names.size(); ++i) {
    const std::string& name = names[i];
    Resp::DescribeTopicPartitionsResponseTopic out;
    out.name = name;
    out.topic_authorized_operations =
        authorized_operations(*r, ResourceType::topic, name, kTopicAclOperations);
    const replication::TopicState* t = image.topic(name);
    if (!req.topics.empty() && !authorized(*r, AclOperation::describe, ResourceType::topic, name)) {
      out.error_code = kafka::code(ErrorCode::topic_authorization_failed);
      out.topic_authorized_operations = 0;
      resp.topics.push_back(std::move(out));
      continue;
    }
    if (!t) {
      out.error_code =
          kafka::code(replication::check_topic_name(name) ? ErrorCode::invalid_topic_exception
                                                          : ErrorCode::unknown_topic_or_partition);
      resp.topics.push_back(std::move(out));
      continue;
    }
    if (budget == 0) {
      resp.next_cursor = Resp::Cursor{name, 0};
      break;
    }
    out.topic_id = t->id;
    out.is_internal = replication::is_internal_topic(name);
    std::int32_t p = i == first ? first_partition : 0;
    for (; p < static_cast<std::int32_t>(t->partitions.size()) && budget > 0; ++p, --budget) {
      const auto& ps = t->partitions[static_cast<std::size_t>(p)];
      Resp::DescribeTopicPartitionsResponsePartition rp;
      rp.partition_index = ps.partition;
      rp.leader_id = ps.leader;
      rp.leader_epoch = ps.leader_epoch;
      rp.replica_nodes = ps.replicas;
      rp.isr_nodes = ps.isr;
      rp.eligible_leader_replicas = ps.elr;
      rp.last_known_elr = std::vector<std::int32_t>{};
      if (ps.leader < 0) rp.error_code = kafka::code(ErrorCode::leader_not_available);
      out.partitions.push_back(std::move(rp));
    }
    resp.topics.push_back(std::move(out));
    if (p < static_cast<std::int32_t>(t->partitions.size())) {
      resp.next_cursor = Resp::Cursor{name, p};
      break;
    }
  }
  r->reply(resp);
}

}  // namespace samsa::daemon::handlers
