// ListOffsets: earliest (-2), latest (-1: the high watermark, or the last stable offset for
// read_committed), max timestamp (-3), earliest local (-4), latest tiered (-5: no tiered
// storage, so -1) and by timestamp (the first record at or after it), each answered by the
// shard that owns the partition (Shard::lookup, Partition::list_offset).
#include <map>
#include <utility>

#include "base/log.h"
#include "daemon/api/auth.h"
#include "daemon/api/handlers/fan_out.h"
#include "daemon/api/handlers/handlers.h"
#include "daemon/broker.h"
#include "net/kafka/gen/list_offsets_request.h"
#include "net/kafka/gen/list_offsets_response.h"

namespace samsa::daemon::handlers {
namespace {

using kafka::ErrorCode;

using replication::kEarliestLocalOffset;
using replication::kEarliestOffset;
using replication::kLatestOffset;
using replication::kLatestTieredOffset;
using replication::kMaxTimestampOffset;

// The first version that knows each negative timestamp (Kafka's ReplicaManager): any other
// negative value, or a known one below its version, is UNSUPPORTED_VERSION.
bool timestamp_supported(std::int64_t ts, std::int16_t version) {
  switch (ts) {
    case kLatestOffset:
    case kEarliestOffset:
      return true;
    case kMaxTimestampOffset:
      return version >= 7;
    case kEarliestLocalOffset:
      return version >= 8;
    case kLatestTieredOffset:
      return version >= 9;
    default:
      return ts >= 0;  // -6 (earliest pending upload) needs v11, which is not served
  }
}

struct Item {
  std::string_view topic;
  std::int32_t partition = 0;
  std::int64_t timestamp = 0;
  std::int32_t leader_epoch = -1;
  ErrorCode error = ErrorCode::none;
  std::int64_t out_offset = -1;
  std::int64_t out_timestamp = -1;
  std::int32_t out_epoch = -1;
  bool repeated = false;  // a later mention of a partition already listed: not answered
};

struct Ctx {
  RequestPtr req;
  replication::ImagePtr image;
  kafka::ListOffsetsRequest body;
  std::vector<Item> items;
};

// Answers it, or returns false when a timestamp lookup needs file bytes that `ra` does not
// hold (with ra's want set: fill it and ask again). Never reads a file itself.
bool lookup(Item& it, std::int8_t isolation, ReactorContext& rc, io::ReadAhead* ra) {
  auto p = rc.shard->lookup(it.topic, it.partition, it.leader_epoch);
  if (!p) {
    it.error = p.error();
    return true;
  }
  const replication::OffsetAnswer a = (*p)->list_offset(it.timestamp, isolation == 1, ra);
  if (!a.ready) return false;
  it.error = a.error;
  it.out_offset = a.offset;
  it.out_timestamp = a.timestamp;
  it.out_epoch = a.leader_epoch;
  return true;
}

// A lookup whose bytes are not in memory: it takes a buffer from the shard's pool, has the
// log fill it through io_uring and asks again, until answered.
struct ColdLookup final : io::ReadAheadPool::Waiter {
  Item* it = nullptr;
  std::int8_t isolation = 0;
  ReactorContext* rc = nullptr;
  ItemDone done;
  io::ReadAhead* ra = nullptr;

  void on_read_ahead(io::ReadAhead* got) override {
    ra = got;
    step();
  }
  void step() {
    if (lookup(*it, isolation, *rc, ra)) {
      finish();
      return;
    }
    auto p = rc->shard->lookup(it->topic, it->partition);
    if (!p) {
      it->error = p.error();
      finish();
      return;
    }
    (*p)->fill(*ra, [this](std::optional<std::string> err) {
      if (err) {
        LOG_ERROR("ListOffsets on %.*s-%d: %s", static_cast<int>(it->topic.size()),
                  it->topic.data(), it->partition, err->c_str());
        it->error = ErrorCode::kafka_storage_error;
        finish();
        return;
      }
      step();
    });
  }
  void finish() {
    rc->read_ahead->release(ra);
    auto d = std::move(done);
    delete this;
    d();
  }
};

void respond(std::unique_ptr<Ctx> ctx) {
  kafka::ListOffsetsResponse resp;
  std::size_t i = 0;
  for (const auto& t : ctx->body.topics) {
    kafka::ListOffsetsResponse::ListOffsetsTopicResponse tr;
    tr.name = t.name;
    for (std::size_t k = 0; k < t.partitions.size(); ++k) {
      const Item& it = ctx->items[i++];
      if (it.repeated) continue;
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
  // A partition named twice gets one answer, INVALID_REQUEST, as in Kafka.
  std::map<std::pair<std::string_view, std::int32_t>, int> mentions;
  for (const auto& t : ctx->body.topics)
    for (const auto& p : t.partitions)
      ++mentions[{t.name, p.partition_index}];
  std::map<std::pair<std::string_view, std::int32_t>, bool> listed;
  const std::int16_t version = ctx->req->version();
  for (const auto& t : ctx->body.topics) {
    const replication::TopicState* topic = ctx->image->topic(t.name);
    const bool allowed = authorized(*ctx->req, replication::AclOperation::describe,
                                    replication::ResourceType::topic, t.name);
    for (const auto& p : t.partitions) {
      Item it;
      it.partition = p.partition_index;
      it.timestamp = p.timestamp;
      it.leader_epoch = p.current_leader_epoch;
      const std::pair<std::string_view, std::int32_t> tp{t.name, p.partition_index};
      if (mentions[tp] > 1) {
        it.error = ErrorCode::invalid_request;
        it.repeated = std::exchange(listed[tp], true);
      } else if (!allowed) {
        it.error = ErrorCode::topic_authorization_failed;
      } else if (!topic || p.partition_index < 0 ||
                 static_cast<std::size_t>(p.partition_index) >= topic->partitions.size()) {
        it.error = ErrorCode::unknown_topic_or_partition;
      } else if (!timestamp_supported(p.timestamp, version)) {
        it.error = ErrorCode::unsupported_version;
      } else {
        it.topic = topic->name;
      }
      ctx->items.push_back(it);
    }
  }
  const std::size_t n = ctx->items.size();
  const std::int8_t isolation = ctx->body.isolation_level;
  fan_out_to_shards_async(
      std::move(ctx), n,
      [](Ctx& c, std::size_t i) -> std::optional<std::size_t> {
        const Item& it = c.items[i];
        if (it.error != ErrorCode::none) return std::nullopt;
        return c.req->rc.broker->owner(it.topic, it.partition);
      },
      [isolation](ReactorContext& shard, Ctx& c, std::size_t i, auto item_done) {
        // What is in memory is answered at once; a cold lookup waits for its bytes.
        io::ReadAhead probe(0);
        if (lookup(c.items[i], isolation, shard, &probe)) {
          item_done();
          return;
        }
        auto* cold = new ColdLookup();
        cold->it = &c.items[i];
        cold->isolation = isolation;
        cold->rc = &shard;
        cold->done = std::move(item_done);
        if (io::ReadAhead* ra = shard.read_ahead->acquire(cold)) cold->on_read_ahead(ra);
      },
      [](std::unique_ptr<Ctx> c) { respond(std::move(c)); });
}

}  // namespace samsa::daemon::handlers
