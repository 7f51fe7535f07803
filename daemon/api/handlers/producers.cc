// DescribeProducers: each partition's idempotent producers as its shard holds them (producer
// id, epoch, last sequence and timestamp), what `kafka-transactions describe-producers` prints.
#include "daemon/api/auth.h"
#include "daemon/api/handlers/fan_out.h"
#include "daemon/api/handlers/handlers.h"
#include "net/kafka/gen/describe_producers_request.h"
#include "net/kafka/gen/describe_producers_response.h"

namespace samsa::daemon::handlers {
namespace {

using kafka::DescribeProducersResponse;
using kafka::ErrorCode;

struct Item {
  std::string_view topic;  // empty: the topic or partition is unknown
  std::int32_t partition = 0;
  ErrorCode error = ErrorCode::none;
  bool unknown_topic = false;
  std::vector<DescribeProducersResponse::ProducerState> producers;
};

struct Ctx {
  RequestPtr req;
  replication::ImagePtr image;  // pins the names items point at
  kafka::DescribeProducersRequest body;
  std::vector<Item> items;
};

void describe(ReactorContext& shard, Item& it) {
  auto p = shard.shard->lookup(it.topic, it.partition);
  if (!p) {
    it.error = p.error();
    return;
  }
  (*p)->producers().for_each([&](const replication::ProducerEntry& e) {
    DescribeProducersResponse::ProducerState ps;
    ps.producer_id = e.producer_id;
    ps.producer_epoch = e.epoch;
    ps.last_sequence = e.last_seq();
    ps.last_timestamp = e.last_timestamp();
    ps.coordinator_epoch = e.coordinator_epoch;
    ps.current_txn_start_offset = e.current_txn_first_offset;
    it.producers.push_back(ps);
  });
}

void respond(std::unique_ptr<Ctx> ctx) {
  DescribeProducersResponse resp;
  std::size_t i = 0;
  for (const auto& t : ctx->body.topics) {
    DescribeProducersResponse::TopicResponse tr;
    tr.name = t.name;
    for (std::size_t k = 0; k < t.partition_indexes.size(); ++k) {
      Item& it = ctx->items[i++];
      DescribeProducersResponse::PartitionResponse pr;
      pr.partition_index = it.partition;
      pr.error_code = kafka::code(it.error);
      // Kafka's topic lookup fills in its default text; its replica lookup (a known topic
      // without that partition) leaves the message null.
      if (it.unknown_topic) pr.error_message = "This server does not host this topic-partition.";
      pr.active_producers = std::move(it.producers);
      tr.partitions.push_back(std::move(pr));
    }
    resp.topics.push_back(std::move(tr));
  }
  ctx->req->reply(resp);
}

}  // namespace

void describe_producers(RequestPtr r) {
  auto ctx = std::make_unique<Ctx>();
  if (!r->decode(ctx->body)) return;
  ctx->req = std::move(r);
  ctx->image = ctx->req->rc.image;
  for (const auto& t : ctx->body.topics) {
    const replication::TopicState* topic = ctx->image->topic(t.name);
    const bool allowed = authorized(*ctx->req, replication::AclOperation::read,
                                    replication::ResourceType::topic, t.name);
    for (std::int32_t p : t.partition_indexes) {
      Item it;
      it.partition = p;
      if (!allowed) {
        it.error = ErrorCode::topic_authorization_failed;
      } else if (!topic || p < 0 || static_cast<std::size_t>(p) >= topic->partitions.size()) {
        it.error = ErrorCode::unknown_topic_or_partition;
        it.unknown_topic = !topic;
      } else {
        it.topic = topic->name;
      }
      ctx->items.push_back(std::move(it));
    }
  }
  const std::size_t n = ctx->items.size();
  fan_out_to_shards(
      std::move(ctx), n,
      [](Ctx& c, std::size_t i) -> std::optional<std::size_t> {
        const Item& it = c.items[i];
        if (it.error != ErrorCode::none) return std::nullopt;
        return c.req->rc.broker->owner(it.topic, it.partition);
      },
      [](ReactorContext& shard, Ctx& c, std::size_t i) { describe(shard, c.items[i]); },
      [](std::unique_ptr<Ctx> c) { respond(std::move(c)); });
}

}  // namespace samsa::daemon::handlers
