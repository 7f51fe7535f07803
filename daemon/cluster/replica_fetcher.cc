#include "daemon/cluster/replica_fetcher.h"

#include <cstring>

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

struct ReplicaFetcher::Source final : net::ClientHandler {
  ReplicaFetcher* f = nullptr;
  std::int32_t leader = -1;
  std::unique_ptr<net::ClientConnection> conn;
  bool in_flight = false;
  std::int32_t correlation = 0;
  struct Sent {
    Key key;
    Uuid topic_id{};
    std::int64_t request_id = 0;
  };
  std::vector<Sent> sent;      // the partitions of the Fetch in flight
  int unsynced = 0;            // appends from its last answer not yet durable
  std::int64_t resume_ns = 0;  // after an error: no Fetch before this (replica.fetch.backoff.ms)

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
  std::int32_t source = -1;  // whose answer they came in
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
  std::map<std::int32_t, bool> wanted;
  shard_.for_each([&](Partition& p) {
    const ReplicaState* rs = p.replica();
    if (rs && rs->role() == ReplicaRole::follower && rs->leader_id() >= 0 &&
        rs->leader_id() != opts_.node_id)
      wanted[rs->leader_id()] = true;
  });
  for (auto it = sources_.begin(); it != sources_.end();) {
    if (wanted.contains(it->first)) {
      ++it;
    } else {
      LOG_DEBUG("replica fetcher: no partition follows broker %d any more", it->first);
      it = sources_.erase(it);
    }
  }
  for (const auto& [leader, _] : wanted) {
    auto b = img.brokers().find(leader);
    const BrokerEndpoint* ep = nullptr;
    if (b != img.brokers().end())
      for (const auto& e : b->second.endpoints)
        if (e.name == opts_.listener) ep = &e;
    if (!ep) {
      LOG_WARN("replica fetcher: broker %d has no %s listener in the metadata", leader,
               opts_.listener.c_str());
      sources_.erase(leader);
      continue;
    }
    const auto port = static_cast<std::uint16_t>(ep->port);
    auto& src = sources_[leader];
    if (src) {
      src->conn->set_endpoint(ep->host, port);
      continue;
    }
    src = std::make_unique<Source>();
    src->f = this;
    src->leader = leader;
    net::ClientOptions co;
    co.host = ep->host;
    co.port = port;
    co.request_timeout_ms = opts_.max_wait_ms + 30000;
    src->conn = opts_.connect ? opts_.connect(r_, *src, std::move(co))
                              : net::ClientConnection::create(r_, *src, std::move(co));
    LOG_INFO("replica fetcher: fetching from broker %d at %s:%u", leader, ep->host.c_str(),
             unsigned(port));
  }
  for (auto& [leader, src] : sources_)
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
  shard_.for_each([&](Partition& p) {
    ReplicaState* rs = p.replica();
    if (!rs || rs->role() != ReplicaRole::follower || rs->leader_id() != s.leader) return;
    Key key{p.topic(), p.index()};
    auto it = slots_.find(key);
    if (it != slots_.end() && it->second->appending) return;
    auto f = rs->next_fetch(now);
    if (!f) return;
    if (s.sent.empty()) set_replica_fields(req, f->fetch);
    if (req.topics.empty() || req.topics.back().topic_id != p.topic_id()) {
      kafka::FetchRequest::FetchTopic t;
      t.topic = p.topic();
      t.topic_id = p.topic_id();
      req.topics.push_back(std::move(t));
    }
    req.topics.back().partitions.push_back(
        fetch_partition(p.index(), f->fetch, opts_.partition_max_bytes));
    s.sent.push_back(Source::Sent{std::move(key), p.topic_id(), f->request_id});
  });
  if (s.sent.empty()) {
    arm_retry();  // waiting for syncs, a truncation or a timed-out fetch: look again later
    return;
  }
  net::Buffer frame = kafka::flatten_to_buffer(
      kafka::encode_request(req, kFetchVersion, ++s.correlation, "samsa-replica-fetcher"));
  if (!s.conn->send(std::move(frame))) {
    s.sent.clear();
    return;
  }
  s.in_flight = true;
  ++stats_.fetches;
}

void ReplicaFetcher::on_response(Source& s, net::Buffer frame) {
  s.in_flight = false;
  std::vector<Source::Sent> sent = std::move(s.sent);
  s.sent.clear();
  auto h =
      kafka::decode_response_header(frame.span(), kafka::FetchResponse::kApiKey, kFetchVersion);
  kafka::FetchResponse resp;
  if (!h.ok() || h.header.correlation_id != s.correlation ||
      kafka::decode_response_body(frame.span(), h, kFetchVersion, resp) !=
          kafka::DecodeError::none) {
    LOG_WARN("replica fetcher: a malformed Fetch answer from broker %d; reconnecting", s.leader);
    s.conn->reconnect();
    return;
  }
  if (resp.error_code != 0) {
    LOG_WARN("replica fetcher: broker %d answered Fetch with error %d", s.leader, resp.error_code);
    s.resume_ns = mono_ns() + opts_.backoff_ms * 1'000'000;
    arm_retry();
    return;
  }
  const std::int64_t now = mono_ms();
  for (auto& t : resp.responses) {
    for (auto& pd : t.partitions) {
      const Source::Sent* m = nullptr;
      for (const auto& e : sent)
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
        slot->source = s.leader;
        ++s.unsynced;
        stats_.batches_appended += w.count;
        stats_.bytes_appended += w.bytes;
      }
    }
  }
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

void ReplicaFetcher::arm_retry() {
  if (stopped_ || retry_.armed()) return;
  r_.arm(&retry_, mono_ns() + opts_.backoff_ms * 1'000'000);
}

void ReplicaFetcher::on_retry(io::Timer* t) {
  ReplicaFetcher* self = static_cast<RetryTimer*>(t)->self;
  for (auto& [leader, src] : self->sources_)
    self->try_send(*src);
}

}  // namespace samsa::cluster
