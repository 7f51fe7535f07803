// Produce: decoded and checked here (Kafka's request-level rules), each partition's batch
// handed to its partition on the shard that owns it (Shard::lookup, Partition::produce: the
// acks check, the append, acks=all's wait for the ISR and its timeout), and the answer sent
// when every shard is done.
//
// Allocation per request: the context below and one vector of partition slots; nothing per
// record. The batch bytes are the request frame's own: the log patches offsets in them and
// writes them from there.
#include <algorithm>

#include "base/bytes.h"
#include "base/clock.h"
#include "base/log.h"
#include "daemon/api/auth.h"
#include "daemon/api/handlers/fan_out.h"
#include "daemon/api/handlers/handlers.h"
#include "daemon/api/handlers/leader_hint.h"
#include "daemon/broker.h"
#include "daemon/txn_markers.h"
#include "io/record_batch.h"
#include "net/kafka/gen/produce_request.h"
#include "net/kafka/gen/produce_response.h"
#include "replication/topic_config.h"

namespace samsa::daemon::handlers {
namespace {

using kafka::ErrorCode;
using replication::AclOperation;
using replication::ResourceType;

struct ProduceCtx;

// One partition of the request: what Partition::produce takes and answers in.
struct Slot : replication::ProduceOp {
  std::string_view topic;
  std::int32_t partition = 0;
  std::size_t shard = SIZE_MAX;  // SIZE_MAX: answered without its shard (the error is set)
  ItemDone done;
};

struct ProduceCtx {
  RequestPtr req;
  replication::ImagePtr image;  // pins the topic names slots point at
  kafka::ProduceRequest body;
  std::vector<Slot> slots;       // in request order: topics, then their partitions
  std::int64_t start_ns = 0;     // when the request arrived (acks=all's timeout counts from it)
  std::int32_t throttle_ms = 0;  // the produce quota's throttle time (daemon/quotas.h)
};

// Shard thread: Partition::produce's answer.
void on_produced(replication::ProduceOp* op) {
  static_cast<Slot*>(op)->done();
}

void start_produce(ProduceCtx& ctx, Slot& s, replication::Partition& p) {
  s.acks = ctx.body.acks;
  s.deadline_ns = ctx.start_ns + std::max<std::int64_t>(ctx.body.timeout_ms, 0) * 1'000'000;
  s.produced = &on_produced;
  p.produce(&s);
}

// Shard thread: one partition goes to its partition. A transaction's first batch there waits
// for its coordinator to confirm the partition is in the transaction (KIP-890).
void produce_on_shard(ReactorContext& shard_ctx, ProduceCtx& ctx, std::size_t i,
                      ItemDone item_done) {
  Slot& s = ctx.slots[i];
  s.done = item_done;
  auto p = shard_ctx.shard->lookup(s.topic, s.partition);
  if (!p) {
    s.error = p.error();
    s.done();
    return;
  }
  const io::BatchInfo info = io::batch::parse_header(s.batch.data());
  // Transaction version 2's clients (Produce v12+) never send AddPartitionsToTxn: the first
  // batch of a transaction on a partition adds the partition (KIP-890 part 2).
  const bool add = ctx.req->version() >= 12;
  if (!(*p)->needs_verification(info, add)) {
    start_produce(ctx, s, **p);
    return;
  }
  if (!ctx.body.transactional_id) {
    s.error = ErrorCode::invalid_txn_state;
    s.message = "a transactional batch in a request without a transactional id";
    s.done();
    return;
  }
  const std::uint64_t token = (*p)->begin_verification(info.producer_id, info.producer_epoch, add);
  TxnPartitionCheck c{*ctx.body.transactional_id, info.producer_id, info.producer_epoch,
                      std::string(s.topic),       s.partition,      add};
  check_txn_partition(
      shard_ctx, std::move(c),
      [&shard_ctx, &ctx, &s, token, add, pid = info.producer_id](ErrorCode e) {
        auto again = shard_ctx.shard->lookup(s.topic, s.partition);
        if (again) (*again)->end_verification(pid, token);
        e = produce_error_of(e);
        if (e != ErrorCode::none) {
          s.error = e;
          s.message = add ? "the transaction coordinator did not add the partition to the "
                            "transaction"
                          : "the transaction coordinator did not confirm the partition is in "
                            "the transaction";
          s.done();
          return;
        }
        if (!again) {
          s.error = again.error();
          s.done();
          return;
        }
        s.verification = token;
        start_produce(ctx, s, **again);
      });
}

void respond(std::unique_ptr<ProduceCtx> ctx) {
  RequestPtr& r = ctx->req;
  if (ctx->body.acks == 0) {
    // No answer to carry an error: like Kafka, close the connection so the producer notices
    // (and refreshes its metadata) instead of losing records silently.
    for (const Slot& s : ctx->slots) {
      if (s.error == ErrorCode::none) continue;
      LOG_WARN("acks=0 produce to %.*s-%d from %s failed with %s%s%s; closing the connection",
               static_cast<int>(s.topic.size()), s.topic.data(), s.partition,
               r->conn->peer().c_str(), std::string(kafka::error_name(s.error)).c_str(),
               s.message.empty() ? "" : ": ", s.message.c_str());
      r->fail("acks=0 produce failed");
      return;
    }
    r->skip();
    return;
  }
  kafka::ProduceResponse resp;
  std::size_t si = 0;
  for (const auto& t : ctx->body.topic_data) {
    kafka::ProduceResponse::TopicProduceResponse tr;
    tr.name = t.name;
    tr.topic_id = t.topic_id;
    for (std::size_t i = 0; i < t.partition_data.size(); ++i) {
      const Slot& s = ctx->slots[si++];
      kafka::ProduceResponse::PartitionProduceResponse pr;
      pr.index = s.partition;
      pr.error_code = kafka::code(s.error);
      if (s.error == ErrorCode::none) {
        pr.base_offset = s.result.base_offset;
        pr.log_append_time_ms = s.result.log_append_time;
        pr.log_start_offset = s.result.log_start_offset;
      } else {
        pr.base_offset = -1;
        pr.log_start_offset = s.error_log_start;
        if (!s.message.empty()) pr.error_message = s.message;
        if (s.error == ErrorCode::not_leader_or_follower)
          leader_hint(*r, s.topic, s.partition, pr.current_leader, resp.node_endpoints);
      }
      tr.partition_responses.push_back(std::move(pr));
    }
    resp.responses.push_back(std::move(tr));
  }
  resp.throttle_time_ms = ctx->throttle_ms;
  r->reply(resp);
}

}  // namespace

void produce(RequestPtr r) {
  auto ctx = std::make_unique<ProduceCtx>();
  if (!r->decode(ctx->body)) return;
  ctx->start_ns = mono_ns();
  // Produce quota: the request's bytes, recorded as it arrives (Kafka reads one request at a
  // time per connection; samsa takes several, so the mute must start before the next one is
  // taken). acks=0 has no answer to carry the throttle time; its connection is muted alike.
  ctx->throttle_ms = r->throttle(QuotaType::produce, static_cast<std::int64_t>(r->frame.size()));
  ctx->req = std::move(r);
  Request& req = *ctx->req;
  ctx->image = req.rc.image;
  const auto& image = *ctx->image;
  const auto& body = ctx->body;
  const bool acks_ok = body.acks == 0 || body.acks == 1 || body.acks == -1;

  std::size_t n = 0;
  for (const auto& t : body.topic_data)
    n += t.partition_data.size();
  // One slot per partition entry, and an answer of about the same size: bounded by the
  // reactor's request budget (a frame naming a million empty partitions is refused here).
  if (!req.charge(n * (sizeof(Slot) + sizeof(kafka::ProduceResponse::PartitionProduceResponse)),
                  "its partitions' state")) {
    return;
  }
  ctx->slots.resize(n);
  // Kafka's order: the transactional id, then each topic (before whether it exists: a
  // principal that may not write learns nothing of it).
  const bool txn_allowed =
      !body.transactional_id ||
      authorized(req, AclOperation::write, ResourceType::transactional_id, *body.transactional_id);
  std::size_t si = 0;
  for (const auto& t : body.topic_data) {
    const replication::TopicState* topic =
        req.version() >= 13 ? image.topic(t.topic_id) : image.topic(t.name);
    const bool by_unknown_id = req.version() >= 13 && !topic;
    const bool allowed =
        by_unknown_id || authorized(req, AclOperation::write, ResourceType::topic,
                                    topic ? std::string_view(topic->name) : t.name);
    for (const auto& pd : t.partition_data) {
      Slot& s = ctx->slots[si++];
      s.partition = pd.index;
      s.topic = topic ? std::string_view(topic->name) : std::string_view(t.name);
      if (!acks_ok) {
        s.error = ErrorCode::invalid_required_acks;
      } else if (!txn_allowed) {
        s.error = ErrorCode::transactional_id_authorization_failed;
      } else if (!allowed) {
        s.error = ErrorCode::topic_authorization_failed;
      } else if (!topic) {
        s.error = req.version() >= 13 ? ErrorCode::unknown_topic_id
                                      : ErrorCode::unknown_topic_or_partition;
      } else if (pd.index < 0 || static_cast<std::size_t>(pd.index) >= topic->partitions.size()) {
        s.error = ErrorCode::unknown_topic_or_partition;
      } else if (replication::is_internal_topic(topic->name)) {
        s.error = ErrorCode::invalid_topic_exception;
        s.message = "Cannot append to internal topic " + topic->name;
      } else if (pd.records.is_null()) {
        s.error = ErrorCode::invalid_record;
        s.message = "no record batch";
      } else if (auto why = io::batch::check_single_batch(pd.records.view())) {
        s.error = ErrorCode::invalid_record;
        s.message = std::move(*why);
      }
      if (s.error == ErrorCode::none) {
        s.batch = pd.records.view();
        s.shard = req.rc.broker->owner(s.topic, pd.index);
      }
    }
  }
  fan_out_to_shards_async(
      std::move(ctx), n,
      [](const ProduceCtx& c, std::size_t i) -> std::optional<std::size_t> {
        if (c.slots[i].shard == SIZE_MAX) return std::nullopt;
        return c.slots[i].shard;
      },
      &produce_on_shard, [](std::unique_ptr<ProduceCtx> c) { respond(std::move(c)); });
}

net::Response produce_v0_2_unsupported(const Request& r) {
  // Produce v0-2 request: acks int16, timeout int32, [topic string, [partition int32,
  // message_set bytes]]. Response: [topic string, [partition int32, error int16, base_offset
  // int64, (v2) log_append_time int64]], (v1+) throttle_time_ms int32.
  kafka::Writer w;
  kafka::ResponseHeader h;
  h.correlation_id = r.correlation_id();
  h.encode(w, 0);
  kafka::Reader in(const_cast<net::Buffer&>(r.frame).span().subspan(r.header.body_offset));
  in.i16();  // acks
  in.i32();  // timeout
  const std::int32_t topics = in.i32();
  std::vector<std::pair<std::string, std::vector<std::int32_t>>> seen;
  for (std::int32_t t = 0; in.ok() && t < topics; ++t) {
    std::string name;
    in.string(name, false);
    const std::int32_t parts = in.i32();
    std::vector<std::int32_t> ids;
    for (std::int32_t p = 0; in.ok() && p < parts; ++p) {
      const std::int32_t id = in.i32();
      const std::int32_t len = in.i32();
      if (len > 0) in.take(static_cast<std::size_t>(len));
      if (in.ok()) ids.push_back(id);
    }
    if (in.ok()) seen.emplace_back(std::move(name), std::move(ids));
  }
  w.i32(static_cast<std::int32_t>(seen.size()));
  for (const auto& [name, ids] : seen) {
    w.string(name, false);
    w.i32(static_cast<std::int32_t>(ids.size()));
    for (auto id : ids) {
      w.i32(id);
      w.i16(kafka::code(ErrorCode::unsupported_version));
      w.i64(-1);
      if (r.version() >= 2) w.i64(-1);
    }
  }
  if (r.version() >= 1) w.i32(0);
  return w.finish();
}

}  // namespace samsa::daemon::handlers
