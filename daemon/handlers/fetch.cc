// Fetch: every partition is read on the shard that owns it; the answer refers to the stored
// batches as file ranges (sent without re-encoding). With less than min_bytes available the
// request parks: each shard hangs a waiter on its partitions, the first one whose high
// watermark moves wakes the request (or max_wait_ms expires it), the waiters come off, and the
// request reads again.
//
// Fetch sessions (KIP-227) are declined: the answer's session id is 0, so clients send full
// fetch requests, which is what this handler serves.
#include "base/clock.h"
#include "base/log.h"
#include "daemon/broker.h"
#include "daemon/handlers/handlers.h"
#include "net/kafka/gen/fetch_request.h"
#include "net/kafka/gen/fetch_response.h"

namespace samsa::daemon::handlers {
namespace {

using kafka::ErrorCode;

struct FetchCtx;

struct Part final : replication::PartitionWaiter {
  FetchCtx* ctx = nullptr;
  std::size_t group = 0;
  std::string_view topic;  // resolved name (image-owned; the image outlives the request)
  std::int32_t partition = 0;
  std::int64_t fetch_offset = 0;
  std::int32_t max_bytes = 0;
  std::int32_t leader_epoch = -1;
  // Results of the last read, written on the shard thread.
  ErrorCode error = ErrorCode::none;
  std::int64_t high_watermark = -1;
  std::int64_t last_stable = -1;
  std::int64_t log_start = -1;
  std::vector<io::Slice> slices;
  std::size_t bytes = 0;
  replication::Partition* parked_on = nullptr;  // shard thread only

  void on_partition_advanced() override;
};

struct Group {
  std::size_t shard = 0;
  std::vector<std::size_t> parts;
  bool wake_sent = false;  // shard thread only
};

enum class Phase : std::uint8_t { reading, parking, parked, unparking };

struct FetchCtx final : ParkedRequest {
  RequestPtr req;
  replication::ImagePtr image;  // pins the topic names parts point at
  kafka::FetchRequest body;
  std::vector<Part> parts;
  std::vector<Group> groups;
  std::size_t origin = 0;
  std::size_t pending = 0;  // groups not yet back from the current phase (origin thread)
  Phase phase = Phase::reading;
  bool woken = false;
  bool expired = false;
  bool final_read = false;
  std::int64_t deadline_ns = 0;
  struct Expiry : io::Timer {
    FetchCtx* ctx = nullptr;
  } timer;

  void expire() override;
};

void start_round(FetchCtx* ctx, Phase phase);
void respond(FetchCtx* ctx);

Broker& broker_of(FetchCtx* ctx) {
  return *ctx->req->rc.broker;
}

// ---- shard side ----

void read_part(Part& p, ReactorContext& rc) {
  p.slices.clear();
  p.bytes = 0;
  p.error = ErrorCode::none;
  replication::Partition* part = rc.shard->find(p.topic, p.partition);
  if (!part) {
    const auto* t = rc.image->topic(p.topic);
    if (!t || static_cast<std::size_t>(p.partition) >= t->partitions.size()) {
      p.error = ErrorCode::unknown_topic_or_partition;
    } else if (rc.shard->failed().contains(std::string(p.topic) + "-" +
                                           std::to_string(p.partition))) {
      p.error = ErrorCode::kafka_storage_error;
    } else {
      p.error = ErrorCode::not_leader_or_follower;
    }
    return;
  }
  if (p.leader_epoch >= 0 && p.leader_epoch != part->leader_epoch()) {
    p.error = p.leader_epoch < part->leader_epoch() ? ErrorCode::fenced_leader_epoch
                                                    : ErrorCode::unknown_leader_epoch;
    return;
  }
  p.high_watermark = part->high_watermark();
  p.last_stable = part->last_stable_offset();
  p.log_start = part->log_start_offset();
  const std::int64_t limit = p.ctx->body.isolation_level == 1 ? p.last_stable : p.high_watermark;
  if (p.fetch_offset < p.log_start || p.fetch_offset > part->log().log_end_offset()) {
    p.error = ErrorCode::offset_out_of_range;
    return;
  }
  if (p.fetch_offset >= limit) return;
  auto r = part->log().read(p.fetch_offset, static_cast<std::size_t>(std::max(p.max_bytes, 0)),
                            limit, true);
  if (!r) {
    p.error = r.error().code == io::Errc::offset_out_of_range ? ErrorCode::offset_out_of_range
                                                              : ErrorCode::kafka_storage_error;
    if (p.error == ErrorCode::kafka_storage_error)
      LOGF_ERROR(
          (log::Fields{
              .topic = p.topic, .partition = p.partition, .error_code = kafka::code(p.error)}),
          "fetch from %.*s-%d: %s", static_cast<int>(p.topic.size()), p.topic.data(), p.partition,
          r.error().detail.c_str());
    return;
  }
  p.slices = std::move(r->slices);
  for (const auto& s : p.slices)
    p.bytes += s.length;
}

void back_to_origin(FetchCtx* ctx) {
  broker_of(ctx).on_reactor(ctx->origin, [ctx](ReactorContext&) {
    if (--ctx->pending != 0) return;
    switch (ctx->phase) {
      case Phase::reading: {
        std::size_t total = 0;
        bool errors = false;
        for (const auto& p : ctx->parts) {
          total += p.bytes;
          errors |= p.error != ErrorCode::none;
        }
        const bool enough = total >= static_cast<std::size_t>(std::max(ctx->body.min_bytes, 0));
        if (enough || errors || ctx->final_read || ctx->expired || mono_ns() >= ctx->deadline_ns ||
            ctx->req->rc.shutting_down) {
          respond(ctx);
        } else {
          ctx->woken = false;
          start_round(ctx, Phase::parking);
        }
        return;
      }
      case Phase::parking:
        ctx->phase = Phase::parked;
        if (ctx->woken || ctx->expired) start_round(ctx, Phase::unparking);
        return;
      case Phase::unparking:
        ctx->final_read = ctx->expired;
        start_round(ctx, Phase::reading);
        return;
      case Phase::parked:
        return;
    }
  });
}

void wake(FetchCtx* ctx) {
  broker_of(ctx).on_reactor(ctx->origin, [ctx](ReactorContext&) {
    ctx->woken = true;
    if (ctx->phase == Phase::parked) start_round(ctx, Phase::unparking);
  });
}

void Part::on_partition_advanced() {
  // Shard thread; the partition has already unlinked this waiter.
  parked_on = nullptr;
  Group& g = ctx->groups[group];
  if (g.wake_sent) return;
  g.wake_sent = true;
  wake(ctx);
}

void run_group(FetchCtx* ctx, std::size_t gi, Phase phase, ReactorContext& rc) {
  Group& g = ctx->groups[gi];
  switch (phase) {
    case Phase::reading:
      for (std::size_t pi : g.parts)
        read_part(ctx->parts[pi], rc);
      break;
    case Phase::parking: {
      g.wake_sent = false;
      bool moved = false;
      for (std::size_t pi : g.parts) {
        Part& p = ctx->parts[pi];
        replication::Partition* part = rc.shard->find(p.topic, p.partition);
        if (!part || part->high_watermark() != p.high_watermark) {
          moved = true;  // changed since the read: no need to wait
          continue;
        }
        part->add_waiter(&p);
        p.parked_on = part;
      }
      if (moved) {
        g.wake_sent = true;
        wake(ctx);
      }
      break;
    }
    case Phase::unparking:
      for (std::size_t pi : g.parts) {
        Part& p = ctx->parts[pi];
        if (p.parked_on && p.linked) p.parked_on->remove_waiter(&p);
        p.parked_on = nullptr;
      }
      break;
    case Phase::parked:
      break;
  }
  back_to_origin(ctx);
}

// ---- origin side ----

void start_round(FetchCtx* ctx, Phase phase) {
  ctx->phase = phase;
  ctx->pending = ctx->groups.size();
  Broker& b = broker_of(ctx);
  if (phase == Phase::parking) {
    ctx->req->rc.park(ctx);
    ctx->req->rc.reactor->arm(&ctx->timer, ctx->deadline_ns);
  } else if (phase == Phase::unparking) {
    ctx->req->rc.unpark(ctx);
    ctx->req->rc.reactor->disarm(&ctx->timer);
  }
  // Everything is posted, even to this reactor: completions come back through
  // back_to_origin, which must never run inside this loop.
  for (std::size_t gi = 0; gi < ctx->groups.size(); ++gi) {
    b.reactor(ctx->groups[gi].shard).reactor->post_fn([ctx, gi, phase, &b] {
      run_group(ctx, gi, phase, b.reactor(ctx->groups[gi].shard));
    });
  }
}

void FetchCtx::expire() {
  expired = true;
  if (phase == Phase::parked) start_round(this, Phase::unparking);
}

void respond(FetchCtx* raw) {
  std::unique_ptr<FetchCtx> ctx(raw);
  Request& r = *ctx->req;
  const auto& s = *r.rc.settings;
  kafka::FetchResponse resp;
  resp.session_id = 0;
  std::size_t budget =
      static_cast<std::size_t>(std::max(0, std::min(ctx->body.max_bytes, s.fetch_max_bytes)));
  bool any = false;
  std::size_t pi = 0;
  for (const auto& t : ctx->body.topics) {
    kafka::FetchResponse::FetchableTopicResponse tr;
    tr.topic = t.topic;
    tr.topic_id = t.topic_id;
    for (std::size_t i = 0; i < t.partitions.size(); ++i) {
      Part& p = ctx->parts[pi++];
      kafka::FetchResponse::PartitionData pd;
      pd.partition_index = p.partition;
      pd.error_code = kafka::code(p.error);
      pd.high_watermark = p.high_watermark;
      pd.last_stable_offset = p.last_stable;
      pd.log_start_offset = p.log_start;
      if (ctx->body.isolation_level == 0) pd.aborted_transactions = std::nullopt;
      pd.records.set_empty();
      if (p.error == ErrorCode::none) {
        // The response limit: the first partition with data is sent whole (a batch larger
        // than every limit must still get through); later ones only while they fit.
        std::uint64_t sent = 0;
        for (const auto& sl : p.slices) {
          if (any && sl.length > budget) break;
          pd.records.add_file(net::FileRange{sl.file, sl.file->fd, sl.position, sl.length});
          budget -= std::min<std::size_t>(budget, sl.length);
          sent += sl.length;
          any = true;
        }
        if (sent) r.rc.metrics.add_bytes_out(p.topic, sent);
      } else {
        pd.high_watermark = -1;
        pd.last_stable_offset = -1;
        pd.log_start_offset = -1;
        // Kafka answers a partition it cannot find with an empty list, not null.
        if (p.error == ErrorCode::unknown_topic_or_partition ||
            p.error == ErrorCode::unknown_topic_id)
          pd.aborted_transactions.emplace();
      }
      tr.partitions.push_back(std::move(pd));
    }
    resp.responses.push_back(std::move(tr));
  }
  ctx->req->reply(resp);
}

}  // namespace

void fetch(RequestPtr r) {
  auto ctx = std::make_unique<FetchCtx>();
  if (!r->decode(ctx->body)) return;
  ctx->origin = r->rc.index;
  ctx->req = std::move(r);
  Request& req = *ctx->req;
  ctx->image = req.rc.image;
  const auto& image = *ctx->image;
  FetchCtx* raw = ctx.get();
  ctx->timer.ctx = raw;
  ctx->timer.fn = [](io::Timer* t) { static_cast<FetchCtx::Expiry*>(t)->ctx->expire(); };
  ctx->deadline_ns = mono_ns() + std::int64_t{std::max(ctx->body.max_wait_ms, 0)} * 1'000'000;

  std::size_t n = 0;
  for (const auto& t : ctx->body.topics)
    n += t.partitions.size();
  // Per-partition state and answers, bounded by the reactor's request budget.
  if (!req.charge(n * (sizeof(Part) + sizeof(kafka::FetchResponse::PartitionData)),
                  "its partitions' state")) {
    return;
  }
  ctx->parts.resize(n);
  std::vector<std::size_t> group_of_shard(req.rc.broker->reactor_count(), SIZE_MAX);
  std::size_t pi = 0;
  for (const auto& t : ctx->body.topics) {
    const replication::TopicState* topic =
        req.version() >= 13 ? image.topic(t.topic_id) : image.topic(t.topic);
    for (const auto& fp : t.partitions) {
      Part& p = ctx->parts[pi];
      p.ctx = raw;
      p.partition = fp.partition;
      p.fetch_offset = fp.fetch_offset;
      // No partition may bring more than the whole response may carry (at least one batch
      // still comes: the log's read never returns less).
      p.max_bytes =
          std::min({fp.partition_max_bytes, ctx->body.max_bytes, req.rc.settings->fetch_max_bytes});
      p.leader_epoch = fp.current_leader_epoch;
      if (!topic) {
        p.error = req.version() >= 13 ? ErrorCode::unknown_topic_id
                                      : ErrorCode::unknown_topic_or_partition;
      } else if (fp.partition < 0 ||
                 static_cast<std::size_t>(fp.partition) >= topic->partitions.size()) {
        p.error = ErrorCode::unknown_topic_or_partition;
      } else {
        p.topic = topic->name;
        std::size_t shard = req.rc.broker->owner(p.topic, fp.partition);
        if (group_of_shard[shard] == SIZE_MAX) {
          group_of_shard[shard] = ctx->groups.size();
          ctx->groups.push_back(Group{shard, {}, false});
        }
        p.group = group_of_shard[shard];
        ctx->groups[p.group].parts.push_back(pi);
      }
      ++pi;
    }
  }
  ctx.release();
  if (raw->groups.empty()) {
    respond(raw);
    return;
  }
  start_round(raw, Phase::reading);
}

}  // namespace samsa::daemon::handlers
