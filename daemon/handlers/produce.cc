// Produce: each partition's batch is appended on the shard that owns the partition; the
// answer goes out when every shard is done (acks=1: written; acks=all: synced, and on a
// cluster's replicated partition held by the whole ISR, at least min.insync.replicas of it).
//
// Allocation per request: the context below and one vector of partition slots; nothing per
// record. The batch bytes are the request frame's own: the log patches offsets in them and
// writes them from there.
#include <algorithm>

#include "base/bytes.h"
#include "base/clock.h"
#include "base/log.h"
#include "daemon/broker.h"
#include "daemon/handlers/handlers.h"
#include "daemon/handlers/leader_hint.h"
#include "io/record_batch.h"
#include "net/kafka/gen/produce_request.h"
#include "net/kafka/gen/produce_response.h"
#include "replication/topic_config.h"

namespace samsa::daemon::handlers {
namespace {

using kafka::ErrorCode;

struct ProduceCtx;

struct Slot : io::AppendOp {
  ProduceCtx* ctx = nullptr;
  std::size_t group = 0;  // index into ProduceCtx::groups
  std::string_view topic;
  std::int32_t partition = 0;
  ErrorCode error = ErrorCode::none;
  std::string message;
  std::int64_t error_log_start = -1;  // what an error answer reports as the log start
  // acks=all on a replicated partition: after the local sync, waiting for the ISR.
  replication::Partition* part = nullptr;
  struct Commit : replication::CommitWaiter {
    Slot* slot = nullptr;
  } commit;
};

// Partitions of one request that live on one shard.
struct Group {
  std::size_t shard = 0;
  std::vector<std::size_t> slots;
  std::size_t pending = 0;  // touched only on the shard's thread
  // Slots waiting for the ISR, and the request's timeout for them (shard thread only).
  std::size_t waiting = 0;
  struct Timeout : io::Timer {
    ProduceCtx* ctx = nullptr;
    std::size_t group = 0;
  } timeout;
};

struct ProduceCtx {
  RequestPtr req;
  replication::ImagePtr image;  // pins the topic names slots point at
  kafka::ProduceRequest body;
  std::vector<Slot> slots;  // in request order: topics, then their partitions
  std::vector<Group> groups;
  std::size_t pending_groups = 0;  // touched only on the origin thread
  std::size_t origin = 0;
  std::int64_t start_ns = 0;  // when the request arrived (acks=all's timeout counts from it)
};

void respond(std::unique_ptr<ProduceCtx> ctx);

// Origin thread: one shard finished its partitions.
void group_done(ProduceCtx* ctx) {
  if (--ctx->pending_groups == 0) respond(std::unique_ptr<ProduceCtx>(ctx));
}

// Shard thread: one more partition of group gi is finished.
void group_step(ProduceCtx* ctx, std::size_t gi) {
  if (--ctx->groups[gi].pending != 0) return;
  ctx->req->rc.broker->on_reactor(ctx->origin, [ctx](ReactorContext&) { group_done(ctx); });
}

void slot_done(Slot& s) {
  group_step(s.ctx, s.group);
}

io::Reactor& shard_reactor(ProduceCtx* ctx, std::size_t gi);

// Shard thread: the ISR holds the slot's records, or it never will (see wait_committed).
void on_committed(replication::CommitWaiter* w, ErrorCode outcome) {
  Slot& s = *static_cast<Slot::Commit*>(w)->slot;
  Group& g = s.ctx->groups[s.group];
  if (outcome != ErrorCode::none) s.error = outcome;
  if (--g.waiting == 0 && g.timeout.armed()) shard_reactor(s.ctx, s.group).disarm(&g.timeout);
  slot_done(s);
}

// Shard thread: the request's timeout passed with slots still waiting for the ISR
// (REQUEST_TIMED_OUT, as Kafka's produce purgatory answers; the records may still commit).
void on_timeout(io::Timer* t) {
  auto* to = static_cast<Group::Timeout*>(t);
  ProduceCtx* ctx = to->ctx;
  Group& g = ctx->groups[to->group];
  ++g.pending;  // the loop below must not see the context freed
  for (std::size_t si : g.slots) {
    Slot& s = ctx->slots[si];
    if (!s.commit.linked) continue;
    s.part->cancel_commit_wait(&s.commit);
    s.error = ErrorCode::request_timed_out;
    --g.waiting;
    slot_done(s);
  }
  group_step(ctx, to->group);
}

void on_appended(io::AppendOp* op) {
  auto& s = *static_cast<Slot*>(op);
  if (s.error == ErrorCode::none && op->error) {
    s.error = replication::kafka_error_of(op->error->code);
    s.message = op->error->detail;
    LOG_ERROR("append to %.*s-%d failed after acceptance: %s", static_cast<int>(s.topic.size()),
              s.topic.data(), s.partition, op->error->detail.c_str());
  }
  if (s.error == ErrorCode::none && s.part) {
    // Synced here; an acks=all answer also needs the ISR to hold it.
    Group& g = s.ctx->groups[s.group];
    s.commit.slot = &s;
    s.commit.last_offset = s.result.last_offset;
    s.commit.fn = &on_committed;
    ++g.waiting;
    if (!g.timeout.armed()) {
      g.timeout.ctx = s.ctx;
      g.timeout.group = s.group;
      g.timeout.fn = &on_timeout;
      const std::int64_t ms = std::max<std::int32_t>(s.ctx->body.timeout_ms, 0);
      shard_reactor(s.ctx, s.group).arm(&g.timeout, s.ctx->start_ns + ms * 1'000'000);
    }
    s.part->wait_committed(&s.commit);
    return;
  }
  slot_done(s);
}

io::Reactor& shard_reactor(ProduceCtx* ctx, std::size_t gi) {
  return *ctx->req->rc.broker->reactor(ctx->groups[gi].shard).reactor;
}

// Shard thread: append every partition of group g.
void run_group(ProduceCtx* ctx, std::size_t gi, ReactorContext& shard_ctx) {
  Group& g = ctx->groups[gi];
  // One extra step for this function itself, so the group cannot finish (and the context be
  // freed) while the loop below still walks it.
  g.pending = g.slots.size() + 1;
  const bool wait_sync = ctx->body.acks == -1;
  for (std::size_t si : g.slots) {
    Slot& s = ctx->slots[si];
    replication::Partition* p = shard_ctx.shard->find(s.topic, s.partition);
    if (!p) {
      auto failed =
          shard_ctx.shard->failed().find(std::string(s.topic) + "-" + std::to_string(s.partition));
      s.error = failed != shard_ctx.shard->failed().end() ? ErrorCode::kafka_storage_error
                                                          : ErrorCode::not_leader_or_follower;
      slot_done(s);
      continue;
    }
    if (wait_sync && p->replicated()) {
      // Kafka checks min.insync.replicas before appending: NOT_ENOUGH_REPLICAS stores nothing.
      s.error = p->check_acks_all();
      if (s.error != ErrorCode::none) {
        slot_done(s);
        continue;
      }
      s.part = p;
    }
    s.durability = wait_sync ? io::Durability::durable : io::Durability::written;
    s.done = &on_appended;
    auto r = p->append(&s);
    if (!r) {
      s.error = r.error().code;
      s.message = std::move(r.error().message);
      s.error_log_start = r.error().log_start_offset;
      LOG_DEBUG("produce to %.*s-%d rejected: %s", static_cast<int>(s.topic.size()), s.topic.data(),
                s.partition, s.message.c_str());
      slot_done(s);
      continue;
    }
    s.result = *r;
  }
  group_step(ctx, gi);
}

// Kafka's request-level rule for Produce v3+: exactly one record batch per partition
// (INVALID_RECORD). Everything inside the batch (magic, lengths, CRC, counts, size limit) is the
// log's to check when it appends.
ErrorCode precheck(std::span<const std::byte> records, std::string& why) {
  if (records.empty()) {
    why = "no record batch";
    return ErrorCode::invalid_record;
  }
  if (records.size() >= io::batch::kLogOverhead) {
    const std::int32_t len = load_be<std::int32_t>(records.data() + io::batch::kLength);
    if (len >= 0 && io::batch::kLogOverhead + static_cast<std::uint64_t>(len) < records.size()) {
      why = "exactly one record batch per partition is allowed";
      return ErrorCode::invalid_record;
    }
    // Kafka's batch iterator stops at a batch the bytes do not hold whole: no batch at all.
    if (len >= 0 && io::batch::kLogOverhead + static_cast<std::uint64_t>(len) > records.size()) {
      why = "no complete record batch";
      return ErrorCode::invalid_record;
    }
  } else {
    why = "no complete record batch";
    return ErrorCode::invalid_record;
  }
  return ErrorCode::none;
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
  r->reply(resp);
}

}  // namespace

void produce(RequestPtr r) {
  auto ctx = std::make_unique<ProduceCtx>();
  if (!r->decode(ctx->body)) return;
  ctx->origin = r->rc.index;
  ctx->start_ns = mono_ns();
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
  std::vector<std::size_t> group_of_shard(req.rc.broker->reactor_count(), SIZE_MAX);
  std::size_t si = 0;
  for (const auto& t : body.topic_data) {
    const replication::TopicState* topic =
        req.version() >= 13 ? image.topic(t.topic_id) : image.topic(t.name);
    for (const auto& pd : t.partition_data) {
      Slot& s = ctx->slots[si];
      s.ctx = ctx.get();
      s.partition = pd.index;
      s.topic = topic ? std::string_view(topic->name) : std::string_view(t.name);
      if (!acks_ok) {
        s.error = ErrorCode::invalid_required_acks;
      } else if (body.transactional_id) {
        s.error = ErrorCode::transactional_id_authorization_failed;
        s.message = "transactions are not supported by samsa yet";
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
      } else {
        s.error = precheck(pd.records.view(), s.message);
      }
      if (s.error == ErrorCode::none) {
        s.batch = pd.records.view();
        std::size_t shard = req.rc.broker->owner(s.topic, pd.index);
        if (group_of_shard[shard] == SIZE_MAX) {
          group_of_shard[shard] = ctx->groups.size();
          ctx->groups.push_back(Group{shard, {}, 0});
        }
        s.group = group_of_shard[shard];
        ctx->groups[s.group].slots.push_back(si);
      }
      ++si;
    }
  }
  if (ctx->groups.empty()) {
    respond(std::move(ctx));
    return;
  }
  ctx->pending_groups = ctx->groups.size();
  ProduceCtx* raw = ctx.release();
  Broker& b = *raw->req->rc.broker;
  const std::size_t origin = raw->origin;
  const std::size_t groups = raw->groups.size();
  std::size_t local = SIZE_MAX;
  // Other shards' groups are posted (they run later); the local one runs last and inline,
  // because if every partition in it is rejected at once it may answer and free the context.
  for (std::size_t gi = 0; gi < groups; ++gi) {
    if (raw->groups[gi].shard == origin) {
      local = gi;
      continue;
    }
    b.on_reactor(raw->groups[gi].shard, [raw, gi](ReactorContext& rc) { run_group(raw, gi, rc); });
  }
  if (local != SIZE_MAX) run_group(raw, local, b.reactor(origin));
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
