#include "daemon/cluster/replica_fetcher.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "base/clock.h"
#include "base/log.h"
#include "io/record_batch.h"
#include "net/kafka/api.h"
#include "net/kafka/gen/fetch_request.h"
#include "net/kafka/gen/fetch_response.h"
#include "net/kafka/wire.h"
#include "replication/cluster_wire.h"

namespace samsa::cluster {

// The partitions, shards and replica state machines it drives.
using namespace samsa::replication;
using Side = ReplicationThrottle::Side;
namespace {

// v16: topics by id, ReplicaState (broker epoch), DivergingEpoch; every samsad serves it.
constexpr std::int16_t kFetchVersion = 16;

// The whole batches at the front of buf: their byte length, first base offset and the offset
// after the last one (a leader may cut the last batch of a response short, as Kafka's may).
struct WholeBatches {
  std::size_t bytes = 0;
  std::int64_t base = -1;
  std::int64_t end = -1;
  std::size_t count = 0;
};

WholeBatches whole_batches(std::span<const std::byte> buf) {
  WholeBatches w;
  while (w.bytes + io::batch::kHeaderSize <= buf.size()) {
    io::BatchInfo info = io::batch::parse_header(buf.data() + w.bytes);
    if (info.length < static_cast<std::int32_t>(io::batch::kHeaderSize) ||
        w.bytes + static_cast<std::size_t>(info.length) > buf.size())
      break;
    if (w.base < 0) w.base = info.base_offset;
    w.end = info.base_offset + info.last_offset_delta + 1;
    w.bytes += static_cast<std::size_t>(info.length);
    ++w.count;
  }
  return w;
}

}  // namespace

struct ReplicaFetcher::Sent {
  Key key;
  Uuid topic_id{};
  std::int64_t request_id = 0;
  std::int64_t fetch_offset = 0;
  std::int32_t leader_epoch = -1;
  std::int64_t reserved = 0;  // the follower throttle's reservation for it
  std::int64_t got = 0;       // record bytes its answer brought
};

struct ReplicaFetcher::Source final : net::ClientHandler {
  ReplicaFetcher* f = nullptr;
  std::int32_t leader = -1;
  bool throttled_lane = false;  // carries the partitions the follower throttle lists
  std::unique_ptr<net::ClientConnection> conn;
  bool in_flight = false;
  std::int32_t correlation = 0;
  std::vector<Sent> sent;      // the partitions of the Fetch in flight
  int unsynced = 0;            // appends from its last answer not yet durable
  std::int64_t resume_ns = 0;  // after an error: no Fetch before this (replica.fetch.backoff.ms)

  ~Source() { f->settle(sent, mono_ms()); }  // a Fetch in flight returns its share

  void on_connected(net::ClientConnection&) override { f->try_send(*this); }
  void on_response(net::ClientConnection&, net::Buffer frame) override {
    f->on_response(*this, std::move(frame));
  }
  void on_disconnected(net::ClientConnection&, int error) override {
    if (in_flight) {
      LOG_DEBUG("replica fetcher: connection to broker %d lost: %s", leader, std::strerror(error));
    }
    // No answer will come: the partitions may fetch again as soon as a connection is back.
    for (const auto& e : sent)
      if (Partition* p = f->shard_.find_replica(e.key.first, e.key.second))
        if (ReplicaState* rs = p->replica()) rs->abandon_fetch();
    f->settle(sent, mono_ms());
    in_flight = false;
    sent.clear();
  }
};

struct ReplicaFetcher::Slot {
  struct Op : io::AppendOp {
    Slot* slot = nullptr;
  };
  ReplicaFetcher* f = nullptr;
  Key key;
  Op op;
  std::vector<std::byte> bytes;  // the batches being appended (the op's span points here)
  bool appending = false;
  SourceKey source;  // whose answer they came in
};

ReplicaFetcher::ReplicaFetcher(io::Reactor& r, Shard& shard, Options o)
    : r_(r), shard_(shard), opts_(std::move(o)) {
  retry_.self = this;
  retry_.fn = &ReplicaFetcher::on_retry;
}

ReplicaFetcher::~ReplicaFetcher() {
  stop();
}

void ReplicaFetcher::stop() {
  stopped_ = true;
  sources_.clear();
  r_.disarm(&retry_);
}

void ReplicaFetcher::reconcile() {
  if (stopped_ || !shard_.image()) return;
  const MetadataImage& img = *shard_.image();
  std::set<SourceKey> wanted;
  std::set<Key> lane;
  std::map<Key, Lag> lag;
  const bool limited = opts_.throttle && opts_.throttle->quota(Side::follower).limit() !=
                                             ReplicationQuota::kUnlimited;
  shard_.for_each([&](Partition& p) {
    const ReplicaState* rs = p.replica();
    if (!rs || rs->role() != ReplicaRole::follower || rs->leader_id() < 0 ||
        rs->leader_id() == opts_.node_id)
      return;
    Key key{p.topic(), p.index()};
    const bool listed = limited && opts_.throttle->listed(Side::follower, p.topic(), p.index());
    wanted.insert(SourceKey{rs->leader_id(), listed});
    if (auto it = lag_.find(key); it != lag_.end()) lag.insert(*it);
    if (listed) lane.insert(std::move(key));
  });
  lag_ = std::move(lag);
  throttled_lane_ = std::move(lane);
  std::erase_if(sources_, [&](const auto& kv) {
    if (wanted.contains(kv.first)) return false;
    LOG_DEBUG("replica fetcher: no partition follows broker %d any more%s", kv.first.first,
              kv.first.second ? " (throttled replicas)" : "");
    return true;
  });
  for (const SourceKey& key : wanted) {
    const std::int32_t leader = key.first;
    auto b = img.brokers().find(leader);
    const BrokerEndpoint* ep = nullptr;
    if (b != img.brokers().end())
      for (const auto& e : b->second.endpoints)
        if (e.name == opts_.listener) ep = &e;
    if (!ep) {
      LOG_WARN("replica fetcher: broker %d has no %s listener in the metadata", leader,
               opts_.listener.c_str());
      sources_.erase(key);
      continue;
    }
    const auto port = static_cast<std::uint16_t>(ep->port);
    auto& src = sources_[key];
    if (src) {
      src->conn->set_endpoint(ep->host, port);
      continue;
    }
    src = std::make_unique<Source>();
    src->f = this;
    src->leader = leader;
    src->throttled_lane = key.second;
    net::ClientOptions co;
    co.host = ep->host;
    co.port = port;
    co.request_timeout_ms = opts_.max_wait_ms + 30000;
    src->conn = opts_.connect ? opts_.connect(r_, *src, std::move(co))
                              : net::ClientConnection::create(r_, *src, std::move(co));
    LOG_INFO("replica fetcher: fetching from broker %d at %s:%u%s", leader, ep->host.c_str(),
             unsigned(port), key.second ? " (throttled replicas)" : "");
  }
  for (auto& [key, src] : sources_)
    try_send(*src);
}

void ReplicaFetcher::try_send(Source& s) {
  if (stopped_ || s.in_flight || s.unsynced > 0 || !s.conn->connected()) return;
  if (mono_ns() < s.resume_ns) {
    arm_retry();
    return;
  }
  kafka::FetchRequest req;
  req.max_wait_ms = opts_.max_wait_ms;
  req.min_bytes = 1;
  req.max_bytes = opts_.max_bytes;
  req.isolation_level = 0;
  req.session_id = 0;
  req.session_epoch = -1;  // no fetch session: every request names its partitions
  const std::int64_t now = mono_ms();
  s.sent.clear();
  bool held = false;
  shard_.for_each([&](Partition& p) {
    ReplicaState* rs = p.replica();
    if (!rs || rs->role() != ReplicaRole::follower || rs->leader_id() != s.leader) return;
    Key key{p.topic(), p.index()};
    if (!throttled_lane_.empty() && throttled_lane_.contains(key) != s.throttled_lane) return;
    auto it = slots_.find(key);
    if (it != slots_.end() && it->second->appending) return;
    std::int64_t reserved = 0;
    if (held_back(p, now, reserved)) {
      held = true;
      return;
    }
    auto f = rs->next_fetch(now);
    if (!f) {
      if (reserved > 0) opts_.throttle->quota(Side::follower).settle(reserved, 0, now);
      return;
    }
    if (s.sent.empty()) set_replica_fields(req, f->fetch);
    if (req.topics.empty() || req.topics.back().topic_id != p.topic_id()) {
      kafka::FetchRequest::FetchTopic t;
      t.topic = p.topic();
      t.topic_id = p.topic_id();
      req.topics.push_back(std::move(t));
    }
    req.topics.back().partitions.push_back(
        fetch_partition(p.index(), f->fetch, opts_.partition_max_bytes));
    s.sent.push_back(Sent{std::move(key), p.topic_id(), f->request_id, f->fetch.fetch_offset,
                          rs->leader_epoch(), reserved, 0});
  });
  if (held) {
    // Look again when the rate is back under the limit, and let a Fetch that goes without the
    // held partitions wait at the leader no longer than that.
    ReplicationQuota& q = opts_.throttle->quota(Side::follower);
    q.note_held(now);
    const std::int64_t wait = std::clamp<std::int64_t>(q.wait_ms(now), 1, opts_.backoff_ms);
    arm_retry(wait);
    req.max_wait_ms = std::min<std::int32_t>(req.max_wait_ms, static_cast<std::int32_t>(wait));
  }
  if (s.sent.empty()) {
    // Waiting for syncs, a truncation, a timed-out fetch or the throttle: look again later.
    if (!held) arm_retry();
    return;
  }
  net::Buffer frame = kafka::flatten_to_buffer(
      kafka::encode_request(req, kFetchVersion, ++s.correlation, "samsa-replica-fetcher"));
  if (!s.conn->send(std::move(frame))) {
    settle(s.sent, now);
    s.sent.clear();
    return;
  }
  s.in_flight = true;
  ++stats_.fetches;
}

void ReplicaFetcher::on_response(Source& s, net::Buffer frame) {
  s.in_flight = false;
  std::vector<Sent> sent = std::move(s.sent);
  s.sent.clear();
  auto h =
      kafka::decode_response_header(frame.span(), kafka::FetchResponse::kApiKey, kFetchVersion);
  kafka::FetchResponse resp;
  if (!h.ok() || h.header.correlation_id != s.correlation ||
      kafka::decode_response_body(frame.span(), h, kFetchVersion, resp) !=
          kafka::DecodeError::none) {
    LOG_WARN("replica fetcher: a malformed Fetch answer from broker %d; reconnecting", s.leader);
    settle(sent, mono_ms());
    s.conn->reconnect();
    return;
  }
  if (resp.error_code != 0) {
    LOG_WARN("replica fetcher: broker %d answered Fetch with error %d", s.leader, resp.error_code);
    s.resume_ns = mono_ns() + opts_.backoff_ms * 1'000'000;
    settle(sent, mono_ms());
    arm_retry();
    return;
  }
  const std::int64_t now = mono_ms();
  for (auto& t : resp.responses) {
    for (auto& pd : t.partitions) {
      Sent* m = nullptr;
      for (auto& e : sent)
        if (e.topic_id == t.topic_id && e.key.second == pd.partition_index) m = &e;
      if (!m) continue;
      Partition* p = shard_.find_replica(m->key.first, m->key.second);
      if (!p || !p->replica()) continue;
      std::span<std::byte> recs = pd.records.view();
      const WholeBatches w = whole_batches(recs);
      FollowerFetchResponse fr{m->request_id, fetch_answer_of(pd), w.count ? w.base : -1,
                               w.count ? w.end : -1};
      // An error (not the leader any more, a fenced epoch) waits for the metadata to catch up:
      // ask again only after the backoff, not in a tight loop.
      if (fr.answer.error != kafka::ErrorCode::none &&
          fr.answer.error != kafka::ErrorCode::offset_out_of_range)
        s.resume_ns = mono_ns() + opts_.backoff_ms * 1'000'000;
      if (fr.answer.error == kafka::ErrorCode::none && !fr.answer.diverging) {
        note_lag(m->key, m->leader_epoch, fr.answer.high_watermark,
                 w.count ? w.end : m->fetch_offset, w.count > 0);
        m->got = static_cast<std::int64_t>(w.bytes);
      }
      const FollowerStep step = p->on_fetch_response(fr, now);
      if (step == FollowerStep::truncated) ++stats_.truncations;
      if (step == FollowerStep::append) {
        auto& slot = slots_[m->key];
        if (!slot) {
          slot = std::make_unique<Slot>();
          slot->f = this;
          slot->key = m->key;
          slot->op.slot = slot.get();
          slot->op.done = [](io::AppendOp* op) {
            Slot* sl = static_cast<Slot::Op*>(op)->slot;
            sl->f->on_appended(*sl);
          };
        }
        slot->bytes.assign(recs.begin(), recs.begin() + static_cast<std::ptrdiff_t>(w.bytes));
        slot->op.batch = std::span<std::byte>(slot->bytes);
        slot->op.durability =
            opts_.testing_from_memory ? io::Durability::written : io::Durability::durable;
        slot->op.error.reset();
        slot->op.next = nullptr;
        auto r = p->append_replicated(&slot->op);
        if (!r) {
          ++stats_.append_errors;
          LOG_WARN("replica fetcher: %s-%d: appending %zu bytes at %lld: %s", m->key.first.c_str(),
                   m->key.second, w.bytes, static_cast<long long>(w.base),
                   r.error().detail.c_str());
          continue;
        }
        slot->appending = true;
        slot->source = SourceKey{s.leader, s.throttled_lane};
        ++s.unsynced;
        stats_.batches_appended += w.count;
        stats_.bytes_appended += w.bytes;
      }
    }
  }
  settle(sent, now);
  try_send(s);
}

void ReplicaFetcher::on_appended(Slot& slot) {
  slot.appending = false;
  if (slot.op.error) {
    ++stats_.append_errors;
    LOG_WARN("replica fetcher: %s-%d: replicated append failed: %s", slot.key.first.c_str(),
             slot.key.second, slot.op.error->detail.c_str());
  }
  // (The partition published its new HW when the log advanced, before this completion.)
  auto it = sources_.find(slot.source);
  if (it == sources_.end()) return;
  if (it->second->unsynced > 0) --it->second->unsynced;
  try_send(*it->second);
}

bool ReplicaFetcher::held_back(const Partition& p, std::int64_t now_ms, std::int64_t& reserved) {
  if (!opts_.throttle) return false;
  ReplicationQuota& q = opts_.throttle->quota(Side::follower);
  if (q.limit() == ReplicationQuota::kUnlimited) return false;
  if (auto it = lag_.find(Key{p.topic(), p.index()});
      it != lag_.end() && it->second.caught_up && p.replica() &&
      it->second.leader_epoch == p.replica()->leader_epoch())
    return false;
  if (!opts_.throttle->listed(Side::follower, p.topic(), p.index())) return false;
  if (q.exceeded(now_ms)) return true;
  // Counted before the Fetch goes, so the next partition here and the fetchers of the other
  // reactors see it in flight (replication_throttle.h).
  reserved = opts_.partition_max_bytes;
  q.reserve(reserved, now_ms);
  return false;
}

void ReplicaFetcher::settle(std::vector<Sent>& sent, std::int64_t now_ms) {
  if (!opts_.throttle) return;
  ReplicationQuota& q = opts_.throttle->quota(Side::follower);
  for (auto& e : sent) {
    if (e.reserved > 0) {
      q.settle(e.reserved, e.got, now_ms);
    } else if (e.got > 0 && opts_.throttle->listed(Side::follower, e.key.first, e.key.second)) {
      q.record(e.got, now_ms);  // Kafka's follower records every listed partition's bytes
    }
    e.reserved = e.got = 0;
  }
}

void ReplicaFetcher::note_lag(const Key& key, std::int32_t leader_epoch,
                              std::int64_t high_watermark, std::int64_t next_offset,
                              bool brought_records) {
  // As Kafka's fetcher: the lag moves with answers that bring records (or when unknown), so a
  // partition held back at the leader keeps the lag it had.
  auto it = lag_.find(key);
  if (it != lag_.end() && it->second.leader_epoch == leader_epoch && !brought_records) return;
  lag_[key] = Lag{leader_epoch, high_watermark - next_offset <= 0};
}

void ReplicaFetcher::arm_retry(std::int64_t delay_ms) {
  if (stopped_) return;
  const std::int64_t at = mono_ns() + delay_ms * 1'000'000;
  if (retry_.armed() && retry_.deadline_ns <= at) return;
  r_.arm(&retry_, at);
}

void ReplicaFetcher::on_retry(io::Timer* t) {
  ReplicaFetcher* self = static_cast<RetryTimer*>(t)->self;
  for (auto& [key, src] : self->sources_)
    self->try_send(*src);
}

}  // namespace samsa::cluster
