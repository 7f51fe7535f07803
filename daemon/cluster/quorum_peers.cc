#include "daemon/cluster/quorum_peers.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <deque>
#include <thread>

#include "base/log.h"
#include "net/kafka/api.h"
#include "net/kafka/gen/begin_quorum_epoch_request.h"
#include "net/kafka/gen/begin_quorum_epoch_response.h"
#include "net/kafka/gen/end_quorum_epoch_request.h"
#include "net/kafka/gen/end_quorum_epoch_response.h"
#include "net/kafka/gen/fetch_request.h"
#include "net/kafka/gen/fetch_response.h"
#include "net/kafka/gen/fetch_snapshot_request.h"
#include "net/kafka/gen/fetch_snapshot_response.h"
#include "net/kafka/gen/vote_request.h"
#include "net/kafka/gen/vote_response.h"
#include "replication/controller.h"
#include "replication/quorum/quorum_wire.h"

namespace samsa::cluster {

namespace q = replication::quorum;
using replication::Controller;

namespace {

// Refused or reset: the node is gone (its process died, its port is closed), not slow.
bool gone(int error) {
  return error == ECONNREFUSED || error == ECONNRESET || error == EPIPE || error == EHOSTUNREACH;
}

template <class Req>
net::Buffer frame_of(const Req& req, std::int16_t version, std::int32_t correlation) {
  return kafka::flatten_to_buffer(kafka::encode_request(req, version, correlation, "samsa-quorum"));
}

template <class Resp>
std::optional<Resp> decode(net::Buffer& frame, std::int16_t version) {
  auto h = kafka::decode_response_header(frame.span(), Resp::kApiKey, version);
  Resp r;
  if (!h.ok() ||
      kafka::decode_response_body(frame.span(), h, version, r) != kafka::DecodeError::none)
    return std::nullopt;
  return r;
}

}  // namespace

struct QuorumPeers::Lane final : net::ClientHandler {
  struct Sent {
    q::Outgoing out;
    std::int16_t version = 0;
  };

  Lane(QuorumPeers& o, q::NodeId p, const Endpoint& e) : owner(o), peer(p) {
    net::ClientOptions co;
    co.host = e.host;
    co.port = e.port;
    co.request_timeout_ms = owner.opts_.request_timeout_ms;
    co.connect_timeout_ms = 1000;
    co.backoff_min_ms = 20;
    co.backoff_max_ms = 500;
    conn = owner.opts_.factory ? owner.opts_.factory(*owner.opts_.reactor, *this, co)
                               : net::ClientConnection::create(*owner.opts_.reactor, *this, co);
  }

  void submit(const q::Outgoing& o) {
    if (!conn->connected()) {
      if (last_error != 0) {
        owner.fail(o, gone(last_error));  // the next attempt is backing off
        return;
      }
      waiting.push_back(o);  // the first connection is being made
      return;
    }
    transmit(o);
  }

  void transmit(const q::Outgoing& o) {
    const std::int32_t corr = next_correlation++;
    const auto& cid = owner.opts_.cluster_id;
    net::Buffer frame;
    std::int16_t version = 0;
    if (const auto* v = std::get_if<q::VoteRequest>(&o.request)) {
      version = q::kVoteVersion;
      frame = frame_of(q::vote_request(*v, o.to, cid), version, corr);
    } else if (const auto* b = std::get_if<q::BeginEpochRequest>(&o.request)) {
      version = q::kBeginEpochVersion;
      frame = frame_of(q::begin_epoch_request(*b, o.to, cid), version, corr);
    } else if (const auto* e = std::get_if<q::EndEpochRequest>(&o.request)) {
      version = q::kEndEpochVersion;
      frame = frame_of(q::end_epoch_request(*e, cid), version, corr);
    } else if (const auto* f = std::get_if<q::FetchRequest>(&o.request)) {
      version = q::kFetchVersion;
      frame = frame_of(q::fetch_request(*f, cid, owner.opts_.fetch_max_bytes), version, corr);
    } else if (const auto* s = std::get_if<q::FetchSnapshotRequest>(&o.request)) {
      version = q::kFetchSnapshotVersion;
      frame = frame_of(q::fetch_snapshot_request(*s, cid, 1 << 20), version, corr);
    }
    if (!conn->send(std::move(frame))) {
      owner.fail(o, false);
      return;
    }
    sent.push_back(Sent{o, version});
  }

  void on_connected(net::ClientConnection&) override {
    last_error = 0;
    auto w = std::move(waiting);
    waiting.clear();
    for (const auto& o : w)
      transmit(o);
  }

  void on_response(net::ClientConnection& c, net::Buffer frame) override {
    if (sent.empty()) {
      c.reconnect();
      return;
    }
    Sent s = std::move(sent.front());
    sent.pop_front();
    if (!deliver(s, frame)) {
      LOG_WARN("quorum: an answer from node %d does not decode; reconnecting", peer);
      owner.fail(s.out, false);
      c.reconnect();
    }
  }

  void on_disconnected(net::ClientConnection&, int error) override {
    last_error = error == 0 ? ECONNRESET : error;
    auto lost = std::move(sent);
    sent.clear();
    auto w = std::move(waiting);
    waiting.clear();
    for (const auto& s : lost)
      owner.fail(s.out, gone(last_error));
    for (const auto& o : w)
      owner.fail(o, gone(last_error));
  }

  // Hands the answer to the controller thread; false when it does not decode.
  bool deliver(const Sent& s, net::Buffer& frame);
  void learn_endpoints(const std::vector<kafka::FetchResponse::NodeEndpoint>& eps);

  QuorumPeers& owner;
  q::NodeId peer;
  std::unique_ptr<net::ClientConnection> conn;
  std::deque<Sent> sent;
  std::vector<q::Outgoing> waiting;
  int last_error = 0;
  std::int32_t next_correlation = 1;
};

bool QuorumPeers::Lane::deliver(const Sent& s, net::Buffer& frame) {
  const std::int64_t id = s.out.id;
  const q::NodeId from = s.out.to;
  auto post = [this](std::function<void(Controller&)> fn) {
    owner.opts_.on_controller(std::move(fn));
  };
  auto failed = [&] {
    post([id, from](Controller& c) { c.on_request_failed(id, from, false); });
    return true;
  };
  if (std::holds_alternative<q::VoteRequest>(s.out.request)) {
    auto r = decode<kafka::VoteResponse>(frame, s.version);
    if (!r) return false;
    auto a = q::vote_answer_of(*r);
    if (!a) return failed();
    post([id, from, a = *a](Controller& c) { c.on_vote_response(id, from, a); });
  } else if (std::holds_alternative<q::BeginEpochRequest>(s.out.request)) {
    auto r = decode<kafka::BeginQuorumEpochResponse>(frame, s.version);
    if (!r) return false;
    auto a = q::epoch_answer_of(*r);
    if (!a) return failed();
    post([id, from, a = *a](Controller& c) { c.on_epoch_response(id, from, a); });
  } else if (std::holds_alternative<q::EndEpochRequest>(s.out.request)) {
    auto r = decode<kafka::EndQuorumEpochResponse>(frame, s.version);
    if (!r) return false;
    auto a = q::epoch_answer_of(*r);
    if (!a) return failed();
    post([id, from, a = *a](Controller& c) { c.on_epoch_response(id, from, a); });
  } else if (std::holds_alternative<q::FetchRequest>(s.out.request)) {
    auto r = decode<kafka::FetchResponse>(frame, s.version);
    if (!r) return false;
    learn_endpoints(r->node_endpoints);
    auto a = q::fetch_answer_of(*r);
    if (!a) return failed();
    // Copied out of the frame: metadata is small, and the controller thread owns it from here.
    std::vector<std::byte> records(a->records.begin(), a->records.end());
    post([id, from, answer = a->answer, records = std::move(records)](Controller& c) {
      c.on_fetch_response(id, from, answer, records);
    });
  } else {
    auto r = decode<kafka::FetchSnapshotResponse>(frame, s.version);
    if (!r) return false;
    auto a = q::fetch_snapshot_answer_of(*r);
    if (!a) return failed();
    post([id, from, a = std::move(*a)](Controller& c) {
      c.on_fetch_snapshot_response(id, from, a);
    });
  }
  return true;
}

void QuorumPeers::Lane::learn_endpoints(
    const std::vector<kafka::FetchResponse::NodeEndpoint>& eps) {
  for (const auto& e : eps)
    if (e.node_id != owner.opts_.node_id && !owner.opts_.peers.contains(e.node_id) &&
        !e.host.empty() && e.port > 0)
      owner.add_peer(e.node_id, Endpoint{e.host, static_cast<std::uint16_t>(e.port)});
}

void QuorumPeers::add_peer(q::NodeId id, Endpoint e) {
  LOG_INFO("quorum: node %d is at %s:%u", id, e.host.c_str(), e.port);
  {
    std::lock_guard lk(peers_mu_);
    opts_.peers[id] = e;
  }
  // Lanes that reached it through a bootstrap server go to it directly from now on.
  for (auto* lanes : {&control_, &fetch_})
    if (auto it = lanes->find(id); it != lanes->end())
      it->second->conn->set_endpoint(e.host, e.port);
}

QuorumPeers::QuorumPeers(Options o) : opts_(std::move(o)) {}

QuorumPeers::~QuorumPeers() = default;

void QuorumPeers::send(const q::Outgoing& o) {
  opts_.reactor->post_fn([this, o] { send_on_reactor(o); });
}

void QuorumPeers::learn(q::NodeId id, Endpoint e) {
  opts_.reactor->post_fn([this, id, e = std::move(e)] {
    if (!opts_.peers.contains(id)) add_peer(id, e);
  });
}

std::optional<QuorumPeers::Endpoint> QuorumPeers::endpoint(q::NodeId id) const {
  std::lock_guard lk(peers_mu_);
  auto it = opts_.peers.find(id);
  if (it == opts_.peers.end()) return std::nullopt;
  return it->second;
}

void QuorumPeers::send_on_reactor(const q::Outgoing& o) {
  if (stopped_) {
    fail(o, false);
    return;
  }
  const bool fetch = std::holds_alternative<q::FetchRequest>(o.request) ||
                     std::holds_alternative<q::FetchSnapshotRequest>(o.request);
  Lane* lane = lane_for(o.to, fetch);
  if (!lane) {
    fail(o, true);  // no address known for it (yet)
    return;
  }
  lane->submit(o);
}

QuorumPeers::Lane* QuorumPeers::lane_for(q::NodeId id, bool fetch) {
  auto& lanes = fetch ? fetch_ : control_;
  if (auto it = lanes.find(id); it != lanes.end()) return it->second.get();
  auto ep = opts_.peers.find(id);
  if (ep == opts_.peers.end()) {
    // A node known by id only (the leader named in quorum-state after a restart): ask through
    // a bootstrap server, which answers for itself or names the leader and where it is.
    ep = std::find_if(opts_.peers.begin(), opts_.peers.end(),
                      [](const auto& p) { return p.first < 0; });
    if (ep == opts_.peers.end()) return nullptr;
  }
  auto lane = std::make_unique<Lane>(*this, id, ep->second);
  Lane* raw = lane.get();
  lanes.emplace(id, std::move(lane));
  return raw;
}

void QuorumPeers::fail(const q::Outgoing& o, bool unreachable) {
  opts_.on_controller([id = o.id, to = o.to, unreachable](Controller& c) {
    c.on_request_failed(id, to, unreachable);
  });
}

void QuorumPeers::stop() {
  std::atomic<bool> done{false};
  opts_.reactor->post_fn([this, &done] {
    stopped_ = true;
    control_.clear();
    fetch_.clear();
    done.store(true);
  });
  while (!done.load())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

}  // namespace samsa::cluster
