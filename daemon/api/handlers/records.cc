// DeleteRecords (raise a partition's log start) and OffsetForLeaderEpoch (where a leader epoch
// ended, from the log's leader-epoch cache), each done by the shard that owns the partition.
#include <type_traits>

#include "base/log.h"
#include "daemon/api/auth.h"
#include "daemon/api/handlers/fan_out.h"
#include "daemon/api/handlers/handlers.h"
#include "daemon/broker.h"
#include "io/leader_epoch.h"
#include "net/kafka/gen/delete_records_request.h"
#include "net/kafka/gen/delete_records_response.h"
#include "net/kafka/gen/offset_for_leader_epoch_request.h"
#include "net/kafka/gen/offset_for_leader_epoch_response.h"
#include "replication/topic_config.h"

namespace samsa::daemon::handlers {
namespace {

using kafka::ErrorCode;

// One partition of a request, resolved against the image on the request's reactor.
struct Item {
  std::string_view topic;  // into the image the state holds
  std::int32_t partition = 0;
  std::int64_t in = 0;  // DeleteRecords: the offset; OffsetForLeaderEpoch: the epoch
  std::int32_t current_epoch = -1;
  std::size_t shard = SIZE_MAX;  // SIZE_MAX: answered without the shard (error set)
  ErrorCode error = ErrorCode::none;
  std::int64_t out = -1;  // low watermark / end offset
  std::int32_t out_epoch = -1;
};

struct State {
  RequestPtr req;
  replication::ImagePtr image;
  std::vector<Item> items;
};

std::optional<std::size_t> shard_of(const State& s, std::size_t i) {
  if (s.items[i].shard == SIZE_MAX) return std::nullopt;
  return s.items[i].shard;
}

// Resolves (topic, partition): the owning shard, or the error.
void resolve(const Broker& b, const replication::MetadataImage& image, std::string_view topic,
             Item& it) {
  const replication::TopicState* t = image.topic(topic);
  if (!t || it.partition < 0 || static_cast<std::size_t>(it.partition) >= t->partitions.size()) {
    it.error = ErrorCode::unknown_topic_or_partition;
    return;
  }
  it.topic = t->name;
  it.shard = b.owner(it.topic, it.partition);
}

void delete_on_shard(Item& it, ReactorContext& rc) {
  auto p = rc.shard->lookup(it.topic, it.partition);
  if (!p) {
    it.error = p.error();
    return;
  }
  // -1: everything below the high watermark.
  auto r = (*p)->delete_records(it.in);
  if (!r) {
    it.error = r.error();
    return;
  }
  it.out = *r;
}

void epoch_on_shard(Item& it, ReactorContext& rc) {
  auto p = rc.shard->lookup(it.topic, it.partition, it.current_epoch);
  if (!p) {
    it.error = p.error();
    return;
  }
  auto end = (*p)->end_offset_for(static_cast<std::int32_t>(it.in));
  it.out_epoch = end.epoch;
  it.out = end.end_offset;
}

// Both apis: one Item per partition the request names, made on this reactor by
// item(request, image, topic, partition), done by on_shard(item, shard) on the partition's
// owner, and answered in the request's order: topic_result(topic) for each topic, holding
// partition_result(item) for each of its partitions.
template <class Resp, class Req, class MakeItem, class TopicResult, class PartitionResult>
void per_partition(RequestPtr r, Req req, MakeItem item, void (*on_shard)(Item&, ReactorContext&),
                   TopicResult topic_result, PartitionResult partition_result) {
  auto st = std::make_unique<State>();
  st->image = r->rc.image;
  std::size_t n = 0;
  for (const auto& t : req.topics)
    n += t.partitions.size();
  // One item per partition entry and an answer of about the same size, within the request
  // budget (a frame naming a million partitions is refused here, not allocated).
  using Result = std::invoke_result_t<PartitionResult, const Item&>;
  if (!r->charge(n * (sizeof(Item) + sizeof(Result)), "its partitions' state")) return;
  st->items.reserve(n);
  for (const auto& t : req.topics) {
    for (const auto& p : t.partitions)
      st->items.push_back(item(*r, *st->image, t, p));
  }
  auto topics = std::make_shared<Req>(std::move(req));
  st->req = std::move(r);
  fan_out_to_shards(
      std::move(st), n, shard_of,
      [on_shard](ReactorContext& rc, State& s, std::size_t i) { on_shard(s.items[i], rc); },
      [topics, topic_result, partition_result](std::unique_ptr<State> s) {
        Resp resp;
        std::size_t i = 0;
        for (const auto& t : topics->topics) {
          auto tr = topic_result(t);
          for (std::size_t k = 0; k < t.partitions.size(); ++k)
            tr.partitions.push_back(partition_result(s->items[i++]));
          resp.topics.push_back(std::move(tr));
        }
        s->req->reply(resp);
      });
}

}  // namespace

void delete_records(RequestPtr r) {
  kafka::DeleteRecordsRequest req;
  if (!r->decode(req)) return;
  using Resp = kafka::DeleteRecordsResponse;
  per_partition<Resp>(
      std::move(r), std::move(req),
      [](const Request& r, const replication::MetadataImage& image, const auto& t, const auto& p) {
        Item it;
        it.partition = p.partition_index;
        it.in = p.offset;
        resolve(*r.rc.broker, image, t.name, it);
        if (!authorized(r, replication::AclOperation::delete_, replication::ResourceType::topic,
                        t.name)) {
          it.error = ErrorCode::topic_authorization_failed;
          it.shard = SIZE_MAX;
        } else if (it.error == ErrorCode::none && replication::is_internal_topic(t.name)) {
          // Kafka refuses it too: the broker's own records live there.
          it.error = ErrorCode::invalid_topic_exception;
          it.shard = SIZE_MAX;
        } else if (it.error == ErrorCode::none) {
          const auto* topic = image.topic(t.name);
          const auto policy = replication::topic_config_value(
              topic->configs, r.rc.settings->topic_defaults, "cleanup.policy");
          if (policy.find("delete") == std::string::npos) {
            // Kafka: records of a compact-only topic cannot be deleted.
            it.error = ErrorCode::policy_violation;
            it.shard = SIZE_MAX;
          }
        }
        return it;
      },
      delete_on_shard,
      [](const auto& t) {
        Resp::DeleteRecordsTopicResult tr;
        tr.name = t.name;
        return tr;
      },
      [](const Item& it) {
        Resp::DeleteRecordsPartitionResult pr;
        pr.partition_index = it.partition;
        pr.low_watermark = it.error == ErrorCode::none ? it.out : -1;
        pr.error_code = kafka::code(it.error);
        return pr;
      });
}

void offset_for_leader_epoch(RequestPtr r) {
  kafka::OffsetForLeaderEpochRequest req;
  if (!r->decode(req)) return;
  using Resp = kafka::OffsetForLeaderEpochResponse;
  // Kafka: a follower (replica id set) needs CLUSTER_ACTION on the cluster, a client DESCRIBE
  // on each topic.
  const bool follower = req.replica_id >= 0;
  const bool follower_allowed =
      !follower ||
      authorized(*r, replication::AclOperation::cluster_action, replication::ResourceType::cluster,
                 replication::kClusterResourceName);
  per_partition<Resp>(
      std::move(r), std::move(req),
      [follower, follower_allowed](const Request& r, const replication::MetadataImage& image,
                                   const auto& t, const auto& p) {
        Item it;
        it.partition = p.partition;
        it.in = p.leader_epoch;
        it.current_epoch = p.current_leader_epoch;
        const bool allowed = follower ? follower_allowed
                                      : authorized(r, replication::AclOperation::describe,
                                                   replication::ResourceType::topic, t.topic);
        if (!allowed) {
          it.error = follower ? ErrorCode::cluster_authorization_failed
                              : ErrorCode::topic_authorization_failed;
          return it;
        }
        resolve(*r.rc.broker, image, t.topic, it);
        return it;
      },
      epoch_on_shard,
      [](const auto& t) {
        Resp::OffsetForLeaderTopicResult tr;
        tr.topic = t.topic;
        return tr;
      },
      [](const Item& it) {
        Resp::EpochEndOffset pr;
        pr.error_code = kafka::code(it.error);
        pr.partition = it.partition;
        pr.leader_epoch = it.error == ErrorCode::none ? it.out_epoch : -1;
        pr.end_offset = it.error == ErrorCode::none ? it.out : -1;
        return pr;
      });
}

}  // namespace samsa::daemon::handlers
