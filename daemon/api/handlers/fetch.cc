// Fetch: every partition is read on the shard that owns it; the answer refers to the stored
// batches as file ranges (sent without re-encoding). With less than min_bytes available the
// request parks: each shard hangs a waiter on its partitions, the first one whose high
// watermark moves wakes the request (or max_wait_ms expires it), the waiters come off, and the
// request reads again.
//
// Incremental fetch sessions (KIP-227, daemon/fetch_sessions.h): a full fetch with epoch 0
// opens a session on this reactor; an incremental one names the session and its next epoch,
// carries only changed partitions, and is answered with only the partitions that have records,
// errors or moved offsets. The request then reads every partition of the session.
//
// A follower's fetch (replica id >= 0) of a partition whose leader has a ReplicaState (a
// cluster node) goes through ReplicaState::on_replica_fetch: its offset is recorded (the HW may
// move, which wakes the partition's long polls), it reads up to the log end rather than the HW,
// and a diverged follower gets the diverging epoch instead of records. Its long poll also
// wakes when the leader's log end moves.
//
// KIP-392: a consumer's Fetch v11+ is served by any replica here whose HW is the ISR's, leader
// or follower (up to that replica's HW or last stable offset; Shard::lookup's any_replica).
// With replica.selector.class, a leader answers a consumer in another rack with the follower
// in its rack to fetch from (PreferredReadReplica, no records, at once).
#include <algorithm>
#include <deque>
#include <tuple>

#include "base/clock.h"
#include "base/log.h"
#include "daemon/api/auth.h"
#include "daemon/api/fetch_sessions.h"
#include "daemon/api/handlers/handlers.h"
#include "daemon/api/handlers/leader_hint.h"
#include "daemon/broker.h"
#include "net/kafka/gen/fetch_request.h"
#include "net/kafka/gen/fetch_response.h"
#include "replication/cluster_wire.h"
#include "replication/replica_selector.h"

namespace samsa::daemon::handlers {
namespace {

using kafka::ErrorCode;

struct FetchCtx;

struct Part final : replication::PartitionWaiter, io::ReadAheadPool::Waiter {
  FetchCtx* ctx = nullptr;
  std::size_t group = 0;
  std::string_view topic;  // resolved name (image-owned; the image outlives the request)
  std::int32_t partition = 0;
  std::int64_t fetch_offset = 0;
  std::int32_t max_bytes = 0;
  std::int32_t leader_epoch = -1;
  // A follower's fetch: its replica fields.
  bool replica = false;
  replication::ReplicaFetch rf;
  // A consumer's Fetch v11+: a follower replica here serves it too (KIP-392). Per read (shard
  // thread): whether a follower served it, or the replica this leader sent it to instead.
  bool any_replica = false;
  bool from_follower = false;
  std::int32_t preferred = -1;
  // How the client named the topic (the answer repeats it): a view into the request body, or
  // into the context's copy of a session's names (a session can change while the fetch waits).
  std::string_view asked_topic;
  replication::Uuid asked_topic_id{};
  // The last read's outcome, written on the shard thread.
  replication::ReadOutcome out;
  replication::Partition* parked_on = nullptr;  // shard thread only
  // A cold read in progress (shard thread only): the pool buffer its bytes come into.
  io::ReadAhead* ra = nullptr;
  ReactorContext* shard_rc = nullptr;

  void on_partition_advanced() override;
  void on_read_ahead(io::ReadAhead* got) override;
};

struct Group {
  std::size_t shard = 0;
  std::vector<std::size_t> parts;
  bool wake_sent = false;   // shard thread only
  std::size_t pending = 0;  // parts of this round not finished yet (shard thread only)
};

void move_to_back(std::vector<SessionPartition>& v, const std::vector<Part>& parts,
                  const std::vector<std::size_t>& with_data, bool by_id);

enum class Phase : std::uint8_t { reading, parking, parked, unparking };

struct FetchCtx final : ParkedRequest {
  RequestPtr req;
  replication::ImagePtr image;  // pins the topic names parts point at
  kafka::FetchRequest body;
  // One copy per topic of the names a session's partitions carry (deque: views stay valid).
  std::deque<std::string> session_topics;
  std::vector<Part> parts;
  std::vector<Group> groups;
  std::size_t origin = 0;
  std::size_t pending = 0;  // groups not yet back from the current phase (origin thread)
  Phase phase = Phase::reading;
  bool woken = false;
  bool expired = false;
  bool final_read = false;
  std::int64_t deadline_ns = 0;
  // Fetch sessions: the session this request reads (incremental), or whether a full fetch
  // opens one when it answers.
  std::int32_t session_id = 0;
  bool incremental = false;
  bool open_session = false;
  bool by_id = false;  // topics named by id (v13+)
  // replica.selector.class and a consumer naming its rack: leaders may send it elsewhere. The
  // listener it came through (a preferred replica must be reachable on it).
  bool select_replica = false;
  std::string listener;
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

void back_to_origin(FetchCtx* ctx);

// One part of a group is done with this round on its shard.
void part_done(Part& p) {
  Group& g = p.ctx->groups[p.group];
  if (--g.pending == 0) back_to_origin(p.ctx);
}

// Reads a part. Batches already in memory (the active segment's recent ones) come at once; a
// cold read gets a buffer from the shard's pool and its bytes through io_uring (Log::fill),
// never with a read on this thread, and finishes the part later. Returns false then.
bool read_part(Part& p, ReactorContext& rc);

void finish_cold(Part& p) {
  p.shard_rc->read_ahead->release(p.ra);
  p.ra = nullptr;
  part_done(p);
}

void continue_cold(Part& p) {
  if (read_part(p, *p.shard_rc)) finish_cold(p);
}

void Part::on_read_ahead(io::ReadAhead* got) {
  ra = got;
  continue_cold(*this);
}

// KIP-392: the follower in the consumer's rack this leader's selector names, answered with
// the leader's offsets and no records, as Kafka answers (the consumer fetches there next).
bool redirect(Part& p, replication::Partition& part, ReactorContext& rc) {
  const replication::ReplicaState* rs = part.replica();
  if (!p.ctx->select_replica || !part.leader_here() || !rs) return false;
  p.preferred = replication::preferred_read_replica(
      *rs, rc.shard->image()->brokers(),
      {p.ctx->body.rack_id, p.ctx->listener, p.fetch_offset, mono_ms()});
  if (p.preferred < 0) return false;
  p.out.error = ErrorCode::none;
  p.out.high_watermark = part.high_watermark();
  p.out.last_stable = part.last_stable_offset();
  p.out.log_start = part.log_start_offset();
  p.out.aborted.clear();
  return true;
}

bool read_part(Part& p, ReactorContext& rc) {
  p.out.slices.clear();
  p.out.bytes = 0;
  p.out.diverging.reset();
  p.preferred = -1;
  p.from_follower = false;
  auto part = rc.shard->lookup(p.topic, p.partition, p.leader_epoch, p.any_replica);
  if (!part) {
    p.out.error = part.error();
    return true;
  }
  if (redirect(p, **part, rc)) return true;
  p.from_follower = !(*part)->leader_here();
  replication::ReadArgs args;
  args.offset = p.fetch_offset;
  args.max_bytes = p.max_bytes;
  args.read_committed = p.ctx->body.isolation_level == 1;
  args.replica = p.replica ? &p.rf : nullptr;
  args.refuse_replicas = rc.shutting_down;
  // Without a pool buffer yet, an empty one: what is in memory is read, anything else asked.
  // (The test-only hook reads the old way, blocking, to prove the no-blocking test can fail.)
  io::ReadAhead probe(0);
  io::ReadAhead* ra = rc.settings->testing_blocking_reads ? nullptr : p.ra ? p.ra : &probe;
  if ((*part)->read(args, p.out, ra)) {
    // The leader side of replication throttles (daemon/cluster/replication_throttle.h).
    if (p.replica && rc.throttle) rc.throttle->on_leader_read(**part, p.rf.replica_id, p.out);
    return true;
  }
  p.shard_rc = &rc;
  if (!p.ra) {
    p.ra = rc.read_ahead->acquire(&p);
    if (!p.ra) return false;  // on_read_ahead continues it
    return read_part(p, rc);  // asks its own buffer this time
  }
  Part* self = &p;
  (*part)->fill(*p.ra, [self](std::optional<std::string> err) {
    if (err) {
      LOG_ERROR("fetch from %.*s-%d: %s", static_cast<int>(self->topic.size()), self->topic.data(),
                self->partition, err->c_str());
      self->out.error = ErrorCode::kafka_storage_error;
      finish_cold(*self);
      return;
    }
    continue_cold(*self);
  });
  return false;
}

void back_to_origin(FetchCtx* ctx) {
  broker_of(ctx).on_reactor(ctx->origin, [ctx](ReactorContext&) {
    if (--ctx->pending != 0) return;
    switch (ctx->phase) {
      case Phase::reading: {
        std::size_t total = 0;
        bool errors = false;  // or a preferred read replica: both are answered at once
        for (const auto& p : ctx->parts) {
          total += p.out.bytes;
          errors |= p.out.error != ErrorCode::none || p.preferred >= 0;
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
      // One extra count for this loop, so cold parts finishing early cannot end the round
      // while it still runs.
      g.pending = g.parts.size() + 1;
      for (std::size_t pi : g.parts) {
        Part& p = ctx->parts[pi];
        p.group = gi;
        if (read_part(p, rc)) --g.pending;
      }
      if (--g.pending == 0) back_to_origin(ctx);
      return;
    case Phase::parking: {
      g.wake_sent = false;
      bool moved = false;
      for (std::size_t pi : g.parts) {
        Part& p = ctx->parts[pi];
        auto found = rc.shard->lookup(p.topic, p.partition, -1, p.any_replica);
        replication::Partition* part = found ? *found : nullptr;
        if (!part || part->moved_since(p.out, p.replica)) {
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

// Whether a session's partition goes into an incremental answer (Kafka's rule): it has
// records or an error, or an offset the client has not been told yet. Updates what the
// session remembers as told.
bool must_answer(SessionPartition& sp, const Part& p) {
  bool changed = !sp.answered || p.out.error != ErrorCode::none || !p.out.slices.empty() ||
                 p.preferred >= 0 || sp.high_watermark != p.out.high_watermark ||
                 sp.last_stable_offset != p.out.last_stable ||
                 sp.broker_log_start != p.out.log_start;
  sp.answered = true;
  sp.high_watermark = p.out.high_watermark;
  sp.last_stable_offset = p.out.last_stable;
  sp.broker_log_start = p.out.log_start;
  return changed;
}

SessionPartition session_partition_of(const Part& p) {
  SessionPartition sp;
  sp.topic = p.asked_topic;
  sp.topic_id = p.asked_topic_id;
  sp.partition = p.partition;
  sp.fetch_offset = p.fetch_offset;
  sp.max_bytes = p.max_bytes;
  sp.current_leader_epoch = p.leader_epoch;
  return sp;
}

// One part's entry in the answer (appended to its topic's), its records as file ranges within
// what is left of the response's budget: the first partition with data is sent whole (a batch
// larger than every limit must still get through), later ones only while they fit. Returns
// the record bytes it carries.
std::uint64_t encode_part(Request& r, std::int8_t isolation, const Part& p, std::size_t& budget,
                          bool& any, kafka::FetchResponse& resp) {
  kafka::FetchResponse::PartitionData pd;
  pd.partition_index = p.partition;
  pd.error_code = kafka::code(p.out.error);
  pd.high_watermark = p.out.high_watermark;
  pd.last_stable_offset = p.out.last_stable;
  pd.log_start_offset = p.out.log_start;
  pd.preferred_read_replica = p.preferred;
  if (isolation == 0) {
    pd.aborted_transactions = std::nullopt;
  } else {
    // read_committed: the aborted transactions the records overlap (the consumer drops theirs).
    pd.aborted_transactions.emplace();
    for (const io::AbortedTxn& a : p.out.aborted) {
      kafka::FetchResponse::AbortedTransaction at;
      at.producer_id = a.producer_id;
      at.first_offset = a.first_offset;
      pd.aborted_transactions->push_back(at);
    }
  }
  pd.records.set_empty();
  if (p.out.diverging) {
    pd.diverging_epoch.epoch = p.out.diverging->epoch;
    pd.diverging_epoch.end_offset = p.out.diverging->end_offset;
  }
  std::uint64_t sent_bytes = 0;
  if (p.out.error == ErrorCode::none) {
    for (const auto& sl : p.out.slices) {
      if (any && sl.length > budget) break;
      pd.records.add_file(net::FileRange{sl.file, sl.file->fd, sl.position, sl.length});
      budget -= std::min<std::size_t>(budget, sl.length);
      sent_bytes += sl.length;
      any = true;
    }
  } else {
    pd.high_watermark = -1;
    pd.last_stable_offset = -1;
    pd.log_start_offset = -1;
    if (p.out.error == ErrorCode::not_leader_or_follower)
      leader_hint(r, p.topic, p.partition, pd.current_leader, resp.node_endpoints);
    // Kafka answers a partition it cannot find with an empty list, not null.
    if (p.out.error == ErrorCode::unknown_topic_or_partition ||
        p.out.error == ErrorCode::unknown_topic_id)
      pd.aborted_transactions.emplace();
  }
  resp.responses.back().partitions.push_back(std::move(pd));
  return sent_bytes;
}

void respond(FetchCtx* raw) {
  std::unique_ptr<FetchCtx> ctx(raw);
  Request& r = *ctx->req;
  const auto& s = *r.rc.settings;
  kafka::FetchResponse resp;
  resp.session_id = 0;
  // Which parts the answer carries, in order.
  std::vector<std::size_t> order(ctx->parts.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  FetchSession* session = nullptr;
  if (ctx->incremental) {
    session = r.rc.fetch_sessions->find(ctx->session_id);
    if (!session) {  // evicted while this request waited
      resp.error_code = kafka::code(ErrorCode::fetch_session_id_not_found);
      ctx->req->reply(resp);
      return;
    }
    session->last_used_ms = wall_ms();
    resp.session_id = session->id;
    std::vector<std::size_t> keep;
    for (std::size_t i : order) {
      Part& p = ctx->parts[i];
      SessionPartition* sp =
          session->find(p.asked_topic, p.asked_topic_id, ctx->by_id, p.partition);
      if (!sp || must_answer(*sp, p)) keep.push_back(i);
    }
    order = std::move(keep);
  }
  std::size_t budget =
      static_cast<std::size_t>(std::max(0, std::min(ctx->body.max_bytes, s.fetch_max_bytes)));
  bool any = false;
  std::uint64_t sent_total = 0;
  std::vector<std::size_t> with_data;
  auto& follower_reads = r.rc.metrics.follower_reads();
  bool from_follower = false;
  for (std::size_t oi = 0; oi < order.size(); ++oi) {
    Part& p = ctx->parts[order[oi]];
    // Consecutive partitions of one topic share its entry.
    if (resp.responses.empty() || oi == 0 ||
        ctx->parts[order[oi - 1]].asked_topic != p.asked_topic ||
        ctx->parts[order[oi - 1]].asked_topic_id != p.asked_topic_id) {
      kafka::FetchResponse::FetchableTopicResponse tr;
      tr.topic = p.asked_topic;
      tr.topic_id = p.asked_topic_id;
      resp.responses.push_back(std::move(tr));
    }
    const std::uint64_t sent = encode_part(r, ctx->body.isolation_level, p, budget, any, resp);
    sent_total += sent;
    if (sent) {
      with_data.push_back(order[oi]);
      r.rc.metrics.add_bytes_out(p.topic, sent);
    }
    if (p.from_follower) {
      from_follower = true;
      follower_reads.bytes += sent;
    }
    if (p.preferred >= 0) ++follower_reads.redirects;
  }
  if (from_follower) ++follower_reads.requests;
  if (session) {
    // Partitions that brought records go to the back of the session's order: under the
    // response limit every partition gets its turn.
    move_to_back(session->partitions, ctx->parts, with_data, ctx->by_id);
  } else if (ctx->open_session) {
    std::vector<SessionPartition> sps;
    sps.reserve(ctx->parts.size());
    for (const Part& p : ctx->parts) {
      SessionPartition sp = session_partition_of(p);
      must_answer(sp, p);
      sps.push_back(std::move(sp));
    }
    if (FetchSession* created = r.rc.fetch_sessions->create(
            std::move(sps), ctx->body.replica_id >= 0 || ctx->body.replica_state.replica_id >= 0,
            wall_ms())) {
      resp.session_id = created->id;
    }
  }
  // Fetch quota: a consumer's bytes (followers are not throttled here: Kafka's replication
  // throttles are another mechanism).
  if (ctx->body.replica_id < 0 && ctx->body.replica_state.replica_id < 0)
    resp.throttle_time_ms = r.throttle(QuotaType::fetch, static_cast<std::int64_t>(sent_total));
  ctx->req->reply(resp);
}

}  // namespace

namespace {

// A partition named twice in one request is read once, from the position given last, and
// answered where it was first named (Kafka keeps the partitions in an insertion-ordered map).
void merge_repeated(std::vector<Part>& parts, bool by_id) {
  if (parts.size() < 2) return;
  std::vector<std::size_t> idx(parts.size());
  for (std::size_t i = 0; i < idx.size(); ++i)
    idx[i] = i;
  auto key = [&](std::size_t i) {
    const Part& p = parts[i];
    return std::tuple(by_id ? std::string_view() : std::string_view(p.asked_topic),
                      by_id ? p.asked_topic_id : replication::Uuid{}, p.partition);
  };
  std::stable_sort(idx.begin(), idx.end(),
                   [&](std::size_t a, std::size_t b) { return key(a) < key(b); });
  std::vector<bool> drop(parts.size(), false);
  bool any = false;
  for (std::size_t k = 1; k < idx.size(); ++k) {
    if (key(idx[k]) != key(idx[k - 1])) continue;
    // idx[k] came later in the request than the run's survivor (idx[k - 1]): it gives the
    // position to read from.
    Part& keep = parts[idx[k - 1]];
    const Part& later = parts[idx[k]];
    keep.fetch_offset = later.fetch_offset;
    keep.max_bytes = later.max_bytes;
    keep.leader_epoch = later.leader_epoch;
    keep.rf = later.rf;
    drop[idx[k]] = true;
    any = true;
    idx[k] = idx[k - 1];  // the run's survivor carries on
  }
  if (!any) return;
  std::size_t out = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (drop[i]) continue;
    if (out != i) parts[out] = std::move(parts[i]);
    ++out;
  }
  parts.resize(out);
}

// Moves the session partitions behind parts[with_data...] to the back, in that order, keeping
// the others' order. The parts were made from the session in its order, so a part's index is
// its partition's, in one pass; only a session changed meanwhile (another request with its id
// while this one waited) needs the search per partition.
void move_to_back(std::vector<SessionPartition>& v, const std::vector<Part>& parts,
                  const std::vector<std::size_t>& with_data, bool by_id) {
  if (with_data.empty()) return;
  auto same = [by_id](const SessionPartition& sp, const Part& p) {
    return sp.partition == p.partition &&
           (by_id ? sp.topic_id == p.asked_topic_id : sp.topic == p.asked_topic);
  };
  bool aligned = v.size() == parts.size();
  for (std::size_t i : with_data)
    aligned = aligned && same(v[i], parts[i]);
  if (!aligned) {
    for (std::size_t i : with_data) {
      auto it = std::find_if(v.begin(), v.end(),
                             [&](const SessionPartition& sp) { return same(sp, parts[i]); });
      if (it != v.end()) std::rotate(it, it + 1, v.end());
    }
    return;
  }
  std::vector<bool> moved(v.size(), false);
  for (std::size_t i : with_data)
    moved[i] = true;
  std::vector<SessionPartition> out;
  out.reserve(v.size());
  for (std::size_t i = 0; i < v.size(); ++i)
    if (!moved[i]) out.push_back(std::move(v[i]));
  for (std::size_t i : with_data)
    out.push_back(std::move(v[i]));
  v = std::move(out);
}

// Answers a session error at once: no partitions, the error at the top, no session.
void session_error(RequestPtr r, ErrorCode e) {
  kafka::FetchResponse resp;
  resp.error_code = kafka::code(e);
  resp.session_id = 0;
  r->reply(resp);
}

// Which session this request belongs to (Fetch v7+; KIP-227's request kinds): an incremental
// fetch applies its changes to its session and gets it back; a full one closes the session it
// names and may open a new one. An unknown session or a wrong epoch is answered here (false).
bool join_session(FetchCtx& c, FetchSession*& session) {
  auto* ctx = &c;
  Request& req = *ctx->req;
  const auto& body = ctx->body;
  session = nullptr;
  if (req.version() >= 7) {
    auto& cache = *req.rc.fetch_sessions;
    if (body.session_id != 0 && body.session_epoch > 0) {
      session = cache.find(body.session_id);
      if (!session) {
        ++cache.stats().not_found;
        session_error(std::move(ctx->req), ErrorCode::fetch_session_id_not_found);
        return false;
      }
      if (session->next_epoch != body.session_epoch) {
        ++cache.stats().bad_epoch;
        session_error(std::move(ctx->req), ErrorCode::invalid_fetch_session_epoch);
        return false;
      }
      session->next_epoch = session->next_epoch == INT32_MAX ? 1 : session->next_epoch + 1;
      session->last_used_ms = wall_ms();
      // The request's partitions are the changes; forgotten ones leave the session.
      for (const auto& t : body.topics) {
        for (const auto& fp : t.partitions) {
          SessionPartition* sp = session->find(t.topic, t.topic_id, ctx->by_id, fp.partition);
          if (!sp) {
            SessionPartition fresh;
            fresh.topic = t.topic;
            fresh.topic_id = t.topic_id;
            fresh.partition = fp.partition;
            session->partitions.push_back(std::move(fresh));
            sp = &session->partitions.back();
          }
          sp->fetch_offset = fp.fetch_offset;
          sp->max_bytes = fp.partition_max_bytes;
          sp->current_leader_epoch = fp.current_leader_epoch;
          sp->last_fetched_epoch = fp.last_fetched_epoch;
          sp->log_start_offset = fp.log_start_offset;
        }
      }
      for (const auto& f : body.forgotten_topics_data)
        for (std::int32_t p : f.partitions)
          session->remove(f.topic, f.topic_id, ctx->by_id, p);
      ctx->incremental = true;
      ctx->session_id = session->id;
    } else {
      // A full fetch: it closes the session it names; epoch 0 opens a new one.
      if (body.session_id != 0) cache.remove(body.session_id);
      ctx->open_session = body.session_epoch == 0;
    }
  }

  return true;
}

// One Part per partition the request (or its session) names, resolved against the image.
void add_parts(FetchCtx& c, const FetchSession* session) {
  auto* ctx = &c;
  FetchCtx* raw = ctx;
  Request& req = *ctx->req;
  const auto& body = ctx->body;
  const auto& image = *ctx->image;
  std::size_t pi = 0;
  const std::int32_t replica_id = replication::fetch_replica_id(body, req.version());
  const std::int64_t replica_epoch = req.version() >= 15 ? body.replica_state.replica_epoch : -1;
  // A follower needs CLUSTER_ACTION on the cluster; a consumer READ on each topic (asked once
  // per run of partitions of one topic).
  const bool follower_allowed =
      replica_id < 0 ||
      authorized(req, replication::AclOperation::cluster_action, replication::ResourceType::cluster,
                 replication::kClusterResourceName);
  std::string_view last_asked;
  bool last_allowed = true;
  auto allowed = [&](std::string_view topic) {
    if (replica_id >= 0) return follower_allowed;
    if (topic != last_asked || last_asked.empty()) {
      last_asked = topic;
      last_allowed =
          authorized(req, replication::AclOperation::read, replication::ResourceType::topic, topic);
    }
    return last_allowed;
  };
  auto add = [&](std::string_view name, const replication::Uuid& id, std::int32_t partition,
                 std::int64_t fetch_offset, std::int32_t partition_max_bytes,
                 std::int32_t leader_epoch, std::int32_t last_fetched_epoch,
                 std::int64_t log_start_offset) {
    const replication::TopicState* topic = ctx->by_id ? image.topic(id) : image.topic(name);
    Part& p = ctx->parts[pi];
    p.ctx = raw;
    p.partition = partition;
    p.fetch_offset = fetch_offset;
    p.asked_topic = name;
    p.asked_topic_id = id;
    // No partition may bring more than the whole response may carry (at least one batch
    // still comes: the log's read never returns less).
    p.max_bytes = std::min({partition_max_bytes, body.max_bytes, req.rc.settings->fetch_max_bytes});
    p.leader_epoch = leader_epoch;
    if (replica_id >= 0) {
      p.replica = true;
      p.log_end = true;
      p.rf = replication::ReplicaFetch{replica_id,   replica_epoch,      leader_epoch,
                                       fetch_offset, last_fetched_epoch, log_start_offset};
    } else {
      // Kafka's FetchParams: a consumer without client metadata (before v11) reads from leaders.
      p.any_replica = req.version() >= 11;
    }
    if (!(ctx->by_id && !topic) && !allowed(topic ? std::string_view(topic->name) : name)) {
      p.out.error = ErrorCode::topic_authorization_failed;
    } else if (!topic) {
      p.out.error =
          ctx->by_id ? ErrorCode::unknown_topic_id : ErrorCode::unknown_topic_or_partition;
    } else if (partition < 0 || static_cast<std::size_t>(partition) >= topic->partitions.size()) {
      p.out.error = ErrorCode::unknown_topic_or_partition;
    } else {
      p.topic = topic->name;
    }
    ++pi;
  };
  if (session) {
    for (const auto& sp : session->partitions) {
      if (ctx->session_topics.empty() || ctx->session_topics.back() != sp.topic)
        ctx->session_topics.emplace_back(sp.topic);
      add(ctx->session_topics.back(), sp.topic_id, sp.partition, sp.fetch_offset, sp.max_bytes,
          sp.current_leader_epoch, sp.last_fetched_epoch, sp.log_start_offset);
    }
  } else {
    for (const auto& t : body.topics)
      for (const auto& fp : t.partitions)
        add(t.topic, t.topic_id, fp.partition, fp.fetch_offset, fp.partition_max_bytes,
            fp.current_leader_epoch, fp.last_fetched_epoch, fp.log_start_offset);
    merge_repeated(ctx->parts, ctx->by_id);
  }
}

// The parts each shard reads, one Group per shard.
void group_by_shard(FetchCtx& c) {
  auto* ctx = &c;
  Request& req = *ctx->req;
  std::vector<std::size_t> group_of_shard(req.rc.broker->reactor_count(), SIZE_MAX);
  for (std::size_t i = 0; i < ctx->parts.size(); ++i) {
    Part& p = ctx->parts[i];
    if (p.topic.empty()) continue;
    std::size_t shard = req.rc.broker->owner(p.topic, p.partition);
    if (group_of_shard[shard] == SIZE_MAX) {
      group_of_shard[shard] = ctx->groups.size();
      ctx->groups.push_back(Group{shard, {}, false});
    }
    p.group = group_of_shard[shard];
    ctx->groups[p.group].parts.push_back(i);
  }
}

}  // namespace

void fetch(RequestPtr r) {
  auto ctx = std::make_unique<FetchCtx>();
  if (!r->decode(ctx->body)) return;
  ctx->origin = r->rc.index;
  ctx->req = std::move(r);
  Request& req = *ctx->req;
  ctx->image = req.rc.image;
  FetchCtx* raw = ctx.get();
  ctx->timer.ctx = raw;
  ctx->timer.fn = [](io::Timer* t) { static_cast<FetchCtx::Expiry*>(t)->ctx->expire(); };
  ctx->deadline_ns = mono_ns() + std::int64_t{std::max(ctx->body.max_wait_ms, 0)} * 1'000'000;
  ctx->by_id = req.version() >= 13;
  const auto& s = *req.rc.settings;
  ctx->select_replica = s.cluster.rack_aware_selector && req.version() >= 11 &&
                        !ctx->body.rack_id.empty() &&
                        replication::fetch_replica_id(ctx->body, req.version()) < 0;
  if (ctx->select_replica)
    ctx->listener = s.advertised[std::min(req.dispatcher.listener(), s.advertised.size() - 1)].name;
  FetchSession* session = nullptr;
  if (!join_session(*ctx, session)) return;
  std::size_t n = 0;
  if (session) {
    n = session->partitions.size();
  } else {
    for (const auto& t : ctx->body.topics)
      n += t.partitions.size();
  }
  // Per-partition state and answers, bounded by the reactor's request budget.
  if (!req.charge(n * (sizeof(Part) + sizeof(kafka::FetchResponse::PartitionData)),
                  "its partitions' state")) {
    return;
  }
  ctx->parts.resize(n);
  add_parts(*ctx, session);
  group_by_shard(*ctx);
  ctx.release();
  if (raw->groups.empty()) {
    respond(raw);
    return;
  }
  start_round(raw, Phase::reading);
}

}  // namespace samsa::daemon::handlers
