// ListOffsets: earliest (-2), latest (-1: the high watermark, or the last stable offset for
// read_committed), max timestamp (-3), earliest local (-4), latest tiered (-5: no tiered
// storage, so -1) and by timestamp (the first record at or after it), each answered by the
// shard that owns the partition.
#include "base/log.h"
#include "daemon/broker.h"
#include "daemon/handlers/handlers.h"
#include "net/kafka/gen/list_offsets_request.h"
#include "net/kafka/gen/list_offsets_response.h"

namespace samsa::daemon::handlers {
namespace {

using kafka::ErrorCode;

constexpr std::int64_t kLatest = -1, kEarliest = -2, kMaxTimestamp = -3, kEarliestLocal = -4,
                       kLatestTiered = -5;

struct Item {
  std::string_view topic;
  std::int32_t partition = 0;
  std::int64_t timestamp = 0;
  std::int32_t leader_epoch = -1;
  ErrorCode error = ErrorCode::none;
  std::int64_t out_offset = -1;
  std::int64_t out_timestamp = -1;
  std::int32_t out_epoch = -1;
};

struct Ctx {
  RequestPtr req;
  replication::ImagePtr image;
  kafka::ListOffsetsRequest body;
  std::vector<Item> items;
  std::vector<std::pair<std::size_t, std::vector<std::size_t>>> groups;  // shard -> items
  std::size_t pending = 0;
};

void lookup(Item& it, std::int8_t isolation, ReactorContext& rc) {
  replication::Partition* p = rc.shard->find(it.topic, it.partition);
  if (!p) {
    it.error = ErrorCode::not_leader_or_follower;
    return;
  }
  if (it.leader_epoch >= 0 && it.leader_epoch != p->leader_epoch()) {
    it.error = it.leader_epoch < p->leader_epoch() ? ErrorCode::fenced_leader_epoch
                                                   : ErrorCode::unknown_leader_epoch;
    return;
  }
  it.out_epoch = p->leader_epoch();
  switch (it.timestamp) {
    case kLatest:
      it.out_offset = isolation == 1 ? p->last_stable_offset() : p->high_watermark();
      return;
    case kEarliest:
    case kEarliestLocal:
      it.out_offset = p->log_start_offset();
      return;
    case kLatestTiered:
      it.out_offset = -1;
      it.out_epoch = -1;
      return;
    case kMaxTimestamp: {
      auto r = p->log().max_timestamp();
      if (!r) {
        it.error = ErrorCode::kafka_storage_error;
      } else if (*r) {
        it.out_offset = (*r)->offset;
        it.out_timestamp = (*r)->timestamp;
      }
      return;
    }
    default:
      break;
  }
  if (it.timestamp < 0) {
    it.error = ErrorCode::invalid_request;
    return;
  }
  auto r = p->log().offset_for_timestamp(it.timestamp);
  if (!r) {
    it.error = ErrorCode::kafka_storage_error;
    LOGF_ERROR(
        (log::Fields{
            .topic = it.topic, .partition = it.partition, .error_code = kafka::code(it.error)}),
        "ListOffsets by timestamp on %.*s-%d: %s", static_cast<int>(it.topic.size()),
        it.topic.data(), it.partition, r.error().detail.c_str());
    return;
  }
  const std::int64_t limit = isolation == 1 ? p->last_stable_offset() : p->high_watermark();
  if (*r && (*r)->offset < limit) {
    it.out_offset = (*r)->offset;
    it.out_timestamp = (*r)->timestamp;
  }
}

void respond(Ctx* raw) {
  std::unique_ptr<Ctx> ctx(raw);
  kafka::ListOffsetsResponse resp;
  std::size_t i = 0;
  for (const auto& t : ctx->body.topics) {
    kafka::ListOffsetsResponse::ListOffsetsTopicResponse tr;
    tr.name = t.name;
    for (std::size_t k = 0; k < t.partitions.size(); ++k) {
      const Item& it = ctx->items[i++];
      kafka::ListOffsetsResponse::ListOffsetsPartitionResponse pr;
      pr.partition_index = it.partition;
      pr.error_code = kafka::code(it.error);
      pr.offset = it.out_offset;
      pr.timestamp = it.out_timestamp;
      pr.leader_epoch = it.out_epoch;
      tr.partitions.push_back(std::move(pr));
    }
    resp.topics.push_back(std::move(tr));
  }
  ctx->req->reply(resp);
}

}  // namespace

void list_offsets(RequestPtr r) {
  auto ctx = std::make_unique<Ctx>();
  if (!r->decode(ctx->body)) return;
  ctx->req = std::move(r);
  ctx->image = ctx->req->rc.image;
  Broker& b = *ctx->req->rc.broker;
  std::vector<std::size_t> group_of(b.reactor_count(), SIZE_MAX);
  for (const auto& t : ctx->body.topics) {
    const replication::TopicState* topic = ctx->image->topic(t.name);
    for (const auto& p : t.partitions) {
      Item it;
      it.partition = p.partition_index;
      it.timestamp = p.timestamp;
      it.leader_epoch = p.current_leader_epoch;
      if (!topic || p.partition_index < 0 ||
          static_cast<std::size_t>(p.partition_index) >= topic->partitions.size()) {
        it.error = ErrorCode::unknown_topic_or_partition;
      } else {
        it.topic = topic->name;
        std::size_t shard = b.owner(it.topic, it.partition);
        if (group_of[shard] == SIZE_MAX) {
          group_of[shard] = ctx->groups.size();
          ctx->groups.push_back({shard, {}});
        }
        ctx->groups[group_of[shard]].second.push_back(ctx->items.size());
      }
      ctx->items.push_back(it);
    }
  }
  Ctx* raw = ctx.release();
  if (raw->groups.empty()) {
    respond(raw);
    return;
  }
  raw->pending = raw->groups.size();
  const std::size_t origin = raw->req->rc.index;
  const std::int8_t isolation = raw->body.isolation_level;
  for (std::size_t gi = 0; gi < raw->groups.size(); ++gi) {
    b.reactor(raw->groups[gi].first).reactor->post_fn([raw, gi, isolation, origin, &b] {
      auto& g = raw->groups[gi];
      for (std::size_t i : g.second)
        lookup(raw->items[i], isolation, b.reactor(g.first));
      b.on_reactor(origin, [raw](ReactorContext&) {
        if (--raw->pending == 0) respond(raw);
      });
    });
  }
}

}  // namespace samsa::daemon::handlers
