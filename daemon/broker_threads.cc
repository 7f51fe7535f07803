// The Broker's threads: each reactor's loop and shard, the controller's and the group
// coordinator's loops, and the hand-off of every metadata image to the reactors (which open
// their listeners on the first one).
#include <cstring>

#include "base/clock.h"
#include "base/log.h"
#include "base/thread.h"
#include "daemon/api/dispatch.h"
#include "daemon/api/quorum_describe.h"
#include "daemon/broker.h"
#include "daemon/broker_internal.h"
#include "daemon/cluster/cluster_link.h"
#include "daemon/txn_markers.h"
#include "net/kafka/gen/allocate_producer_ids_request.h"
#include "net/kafka/gen/allocate_producer_ids_response.h"
#include "net/kafka/wire.h"

namespace samsa::daemon {

// A backend's outbound connections with this node's security for the listener they reach
// (TLS and a SASL login on a secured inter-broker or controller listener).
static net::ClientFactory secured(net::ClientFactory f,
                                  std::shared_ptr<const net::ClientSecurity> s) {
  if (!s) return f;
  return [f = std::move(f), s = std::move(s)](io::Reactor& r, net::ClientHandler& h,
                                              net::ClientOptions o) {
    o.security = s;
    return f ? f(r, h, std::move(o)) : net::ClientConnection::create(r, h, std::move(o));
  };
}
namespace {

// How long a forwarded answer waits for this node's image to show the change it made.
constexpr std::int64_t kForwardApplyWaitMs = 5000;

// A 1 s timer on a loop that counts its firings: the watchdog's proof that the loop turns.
// Created and stopped on the loop's own thread.
struct LoopBeat : io::Timer {
  LoopBeat(io::Reactor& r, std::atomic<std::uint64_t>& beats) : r_(r), beats_(beats) {
    fn = [](io::Timer* t) {
      auto* self = static_cast<LoopBeat*>(t);
      self->beats_.fetch_add(1, std::memory_order_relaxed);
      self->r_.arm(t, mono_ns() + 1'000'000'000);
    };
    r_.arm(this, mono_ns() + 1'000'000'000);
  }
  void stop() { r_.disarm(this); }
  io::Reactor& r_;
  std::atomic<std::uint64_t>& beats_;
};

}  // namespace

// The reactor's shard of partitions and, on a cluster broker, what it says to other brokers:
// its replica fetcher and ISR keeper. mu_ held (start-up reads the Broker's members).
void Broker::make_shard(ReactorContext& ctx) {
  replication::Shard::Options so;
  so.index = ctx.index;
  so.count = contexts_.size();
  for (auto& d : log_dirs_)
    so.log_dirs.push_back(d.get());
  so.defaults = settings_->topic_defaults;
  so.retention = retention_.get();
  so.cleaner = cleaner_.get();
  so.partition = settings_->partition;
  so.producer_expiration_check_ms = settings_->producer_expiration_check_ms;
  so.node_id = settings_->clustered() ? settings_->node_id : -1;
  so.incarnation_id = incarnation_;
  so.replica.replica_lag_time_max_ms = settings_->cluster.replica_lag_time_max_ms;
  so.replica.testing_fetch_from_memory = settings_->cluster.testing_ack_from_memory;
  // A cluster broker's partitions publish the ISR's high watermark: consumers read and
  // acks=all answers only what every ISR member holds on disk.
  so.replica_hw = settings_->cluster_broker();
  ctx.shard = std::make_unique<replication::Shard>(*ctx.reactor, std::move(so));
  if (!settings_->cluster_broker()) return;
  cluster::ReplicaFetcher::Options fo;
  fo.node_id = settings_->node_id;
  fo.listener = settings_->cluster.inter_broker_listener;
  fo.max_wait_ms = settings_->cluster.replica_fetch_wait_max_ms;
  fo.partition_max_bytes = settings_->cluster.replica_fetch_max_bytes;
  fo.max_bytes = settings_->cluster.replica_fetch_response_max_bytes;
  fo.backoff_ms = settings_->cluster.replica_fetch_backoff_ms;
  fo.testing_from_memory = settings_->cluster.testing_ack_from_memory;
  // Followers reach their leaders over the network backend (and so does the controller
  // link, start_link).
  fo.connect = secured(backend_->client_factory(), settings_->inter_broker_client);
  ctx.throttle = std::make_unique<cluster::ReplicationThrottle>(
      replication_quotas_, ctx.shard->image(), settings_->node_id);
  fo.throttle = ctx.throttle.get();
  ctx.fetcher = std::make_unique<cluster::ReplicaFetcher>(*ctx.reactor, *ctx.shard, std::move(fo));
  if (ctx.index == 0)
    ctx.sender = std::make_unique<cluster::BrokerSender>(
        *ctx.reactor, secured(backend_->client_factory(), settings_->inter_broker_client));
  cluster::IsrKeeper::Options ko;
  ko.node_id = settings_->node_id;
  const std::size_t index = ctx.index;
  ctx.isr_keeper = std::make_unique<cluster::IsrKeeper>(
      *ctx.reactor, *ctx.shard, ko,
      [this, index](std::vector<std::byte> frame, cluster::IsrKeeper::Done done) {
        forward_to_controller(std::move(frame), [this, index, done](auto resp) {
          on_reactor(index, [done, resp = std::move(resp)](ReactorContext&) mutable {
            done(std::move(resp));
          });
        });
      });
  ctx.isr_keeper->start();
}

io::Reactor::Options Broker::reactor_options(std::string name) const {
  io::Reactor::Options o;
  o.name = std::move(name);
  o.stall_threshold_ns = settings_->reactor_stall_threshold_ns;
  o.turn_budget_ns = settings_->reactor_turn_budget_ns;
  return o;
}

void Broker::run_watched(io::Reactor& r) {
  if (stall_watch_) stall_watch_->watch(&r);
  r.run();
  if (stall_watch_) stall_watch_->unwatch(&r);
}

void Broker::run_reactor(ReactorThread* t) {
  ReactorContext& ctx = *t->ctx;
  const std::string name = "reactor-" + std::to_string(ctx.index);
  set_thread_name(name);
  auto r = io::Reactor::create(reactor_options(name));
  {
    std::lock_guard lk(mu_);
    if (!r) {
      t->error = name + ": io_uring setup failed: " + std::strerror(-r.error());
    } else {
      t->reactor = std::move(*r);
      t->reactor->set_offload(offload_.get());
      t->reactor->open_files().set_budget(ctx.open_files_budget);
      ctx.reactor = t->reactor.get();
      ctx.turn_queue = std::make_unique<io::TurnQueue>(*ctx.reactor);
      make_shard(ctx);
    }
  }
  cv_.notify_all();
  if (!ctx.reactor) return;

  struct Beat : io::Timer {
    ReactorContext* ctx;
    const net::Backend* backend;  // reactor 0 only: its counters go to the log every minute
    std::uint64_t beats = 0, last_traffic = 0;
  } beat;
  beat.ctx = &ctx;
  beat.backend = ctx.index == 0 ? backend_.get() : nullptr;
  ctx.metrics.set_started(mono_ns());
  // The watchdog counts loop turns; an idle loop must still show it is alive.
  beat.fn = [](io::Timer* tm) {
    auto* b = static_cast<Beat*>(tm);
    b->ctx->turns.fetch_add(1, std::memory_order_relaxed);
    const std::int64_t now = mono_ns();
    b->ctx->metrics.on_beat(*b->ctx->reactor, now);
    if (b->backend && ++b->beats % 60 == 0) {
      const std::uint64_t traffic = b->backend->traffic();
      if (traffic != b->last_traffic) LOG_INFO("%s", b->backend->stats_line().c_str());
      b->last_traffic = traffic;
    }
    b->ctx->reactor->arm(tm, now + 1'000'000'000);
  };
  ctx.reactor->arm(&beat, mono_ns() + 1'000'000'000);
  // A backend with a device has one reactor poll it and hand the others their connections'
  // bytes through their queues.
  backend_->attach(ctx.index, *ctx.reactor);

  run_watched(*ctx.reactor);

  ctx.reactor->disarm(&beat);
  // Transports must be destroyed on their reactor (they drain kernel-held buffers).
  ctx.transports.clear();
  backend_->detach(ctx.index);
  ctx.dispatchers.clear();
  ctx.isr_keeper.reset();
  ctx.fetcher.reset();   // its appends completed when the shard closed its logs
  ctx.throttle.reset();  // it reads the shard's image
  ctx.sender.reset();
  ctx.shard.reset();
  ctx.turn_queue.reset();
}

void Broker::run_controller() {
  set_thread_name("controller");
  auto r = io::Reactor::create(reactor_options("controller"));
  if (!r) {
    std::lock_guard lk(mu_);
    controller_error_ =
        std::string("controller: io_uring setup failed: ") + std::strerror(-r.error());
    cv_.notify_all();
    return;
  }
  io::Reactor* reactor = r->get();
  {
    std::lock_guard lk(mu_);
    controller_reactor_owned_ = std::move(*r);
    controller_reactor_ = reactor;
  }
  replication::Controller::Options co;
  using Mode = replication::Controller::Mode;
  co.mode = !settings_->clustered()                              ? Mode::single
            : settings_->cluster.role == ProcessRole::broker     ? Mode::broker
            : settings_->cluster.role == ProcessRole::controller ? Mode::controller
                                                                 : Mode::combined;
  co.session_timeout_ms = settings_->cluster.session_timeout_ms;
  co.auto_leader_rebalance = settings_->cluster.auto_leader_rebalance;
  co.leader_imbalance_check_ms = settings_->cluster.leader_imbalance_check_ms;
  const Mode co_mode = co.mode;
  co.node_id = settings_->node_id;
  co.log_dir = log_dirs_.front().get();
  co.defaults = settings_->topic_defaults;
  co.default_partitions = settings_->num_partitions;
  co.default_replication_factor = settings_->default_replication_factor;
  co.delete_topic_enable = settings_->delete_topic_enable;
  co.max_partitions = settings_->max_partitions;
  co.max_partitions_per_request = settings_->max_partitions_per_request;
  co.validate_broker_config = [this](const std::string& key,
                                     const std::optional<std::string>& value) {
    return check_broker_config(key, value);
  };
  co.broker_config_value = [this](const std::string& key) { return broker_config_value(key); };
  co.reactors = reactors_.size();
  co.publish = [this](replication::ImagePtr img) { publish(std::move(img)); };
  set_quorum_options(co);
  controller_ = std::make_unique<replication::Controller>(*reactor, std::move(co));
  if (auto o = controller_->open(); !o) {
    std::lock_guard lk(mu_);
    controller_error_ = "metadata log: " + o.error().detail;
    cv_.notify_all();
    controller_.reset();
    return;
  }
  // A broker node's image comes from the controller: the link fetches it (the reactors start
  // listening once it has caught up the first time). A combined node's voter listens at once.
  if (co_mode == Mode::combined) open_controller_listeners();
  if (co_mode == Mode::broker || co_mode == Mode::combined) start_link();
  {
    std::lock_guard lk(mu_);
    controller_ready_ = true;
  }
  cv_.notify_all();
  LoopBeat beat(*reactor, controller_beats_);
  run_watched(*reactor);
  beat.stop();
  if (auto c = controller_->close(); !c)
    LOG_ERROR("closing the metadata log: %s", c.error().detail.c_str());
  controller_.reset();
}

// The controller quorum: this node's voters, bootstrap servers and timeouts; its peers are
// reached over the network backend from reactor 0 (QuorumPeers), the answers come back to the
// controller thread.
void Broker::set_quorum_options(replication::Controller::Options& co) {
  const ClusterSettings& cl = settings_->cluster;
  auto& q = co.quorum;
  q.cluster_id = cluster_id_;
  q.election_timeout_ms = cl.election_timeout_ms;
  q.fetch_timeout_ms = cl.fetch_timeout_ms;
  q.election_backoff_max_ms = cl.election_backoff_max_ms;
  q.snapshot_bytes = cl.snapshot_bytes;
  q.snapshot_interval_ms = cl.snapshot_interval_ms;
  if (!settings_->clustered()) return;  // a quorum of itself, no peers
  cluster::QuorumPeers::Options po;
  po.node_id = settings_->node_id;
  po.cluster_id = cluster_id_;
  for (const auto& v : cl.voters) {
    q.voters.push_back(v.id);
    if (v.id != settings_->node_id) po.peers[v.id] = {v.host, v.port};
  }
  if (cl.role == ProcessRole::broker && cl.voters.empty())
    for (const auto& b : cl.bootstrap) {
      q.bootstrap.push_back(b.id);
      po.peers[b.id] = {b.host, b.port};
    }
  po.reactor = contexts_.front()->reactor;
  po.factory = secured(backend_->client_factory(), settings_->controller_client);
  po.on_controller = [this](std::function<void(replication::Controller&)> fn) {
    on_controller(std::move(fn));
  };
  po.request_timeout_ms = std::max<std::int64_t>(cl.fetch_timeout_ms, 2000) + 1000;
  quorum_peers_ = std::make_unique<cluster::QuorumPeers>(std::move(po));
  q.send = [this](const replication::quorum::Outgoing& o) { quorum_peers_->send(o); };
  // A broker's link talks to whichever controller leads.
  q.on_leader = [this](replication::quorum::NodeId leader, std::int32_t) {
    if (!link_ || leader < 0) return;
    if (auto ep = controller_endpoint(leader)) link_->set_controller(ep->host, ep->port);
  };
}

void Broker::start_link() {
  const auto s = settings();
  cluster::ClusterLink::Options lo;
  lo.node_id = s->node_id;
  lo.incarnation_id = incarnation_;
  lo.cluster_id = cluster_id_;
  lo.log_dirs = dir_ids_;
  lo.host = s->cluster.controller_host;
  lo.port = s->cluster.controller_port;
  lo.heartbeat_interval_ms = s->cluster.heartbeat_interval_ms;
  lo.rack = s->cluster.rack;
  for (const auto& e : s->advertised)
    if (!e.controller)
      lo.endpoints.push_back({e.name, e.host, e.port, static_cast<std::int16_t>(e.protocol)});
  // The controller is reached over the network backend from reactor 0 (which drives its
  // device). The link stops before the reactors do (Broker::shutdown).
  lo.channel = cluster::reactor_controller_channel(
      *contexts_.front()->reactor, secured(backend_->client_factory(), s->controller_client));
  link_ = std::make_unique<cluster::ClusterLink>(std::move(lo));
  // The leader the observer already knows (quorum-state), on this (the controller's) thread.
  if (const auto leader = controller_->quorum_view().leader; leader >= 0)
    if (auto ep = controller_endpoint(leader)) link_->set_controller(ep->host, ep->port);
  link_->start();
}

// Where controller `id` listens: a voter's configured address (this node's own too, on a
// combined node), else what the quorum's answers told QuorumPeers.
std::optional<QuorumNode> Broker::controller_endpoint(std::int32_t id) const {
  if (auto ep = quorum_endpoint(*settings(), id)) return ep;
  if (quorum_peers_)
    if (auto ep = quorum_peers_->endpoint(id)) return QuorumNode{id, ep->host, ep->port};
  return std::nullopt;
}

void Broker::forward_to_controller(
    std::vector<std::byte> frame, std::function<void(std::optional<std::vector<std::byte>>)> done) {
  if (!link_) {
    done(std::nullopt);
    return;
  }
  link_->forward(
      std::move(frame), [this, done = std::move(done)](std::optional<std::vector<std::byte>> resp,
                                                       std::int64_t target) {
        if (!resp) {
          done(std::nullopt);
          return;
        }
        // The change is committed: the answer waits for this node's image to show it, but
        // not forever. A broker cut off from the quorum answers after the wait; the client
        // may then read a Metadata without the change for a while (and asks again).
        on_controller([done, resp = std::move(resp), target](replication::Controller& c) {
          c.when_applied(
              target, [done, resp] { done(resp); }, kForwardApplyWaitMs);
        });
      });
}

// Also used by apply_settings (broker_reload.cc) when settings change.
coordinator::GroupCoordinator::Options coordinator_options(const Config& c) {
  coordinator::GroupCoordinator::Options o;
  o.initial_rebalance_delay_ms =
      static_cast<std::int32_t>(c.get_int("group.initial.rebalance.delay.ms"));
  o.min_session_timeout_ms = static_cast<std::int32_t>(c.get_int("group.min.session.timeout.ms"));
  o.max_session_timeout_ms = static_cast<std::int32_t>(c.get_int("group.max.session.timeout.ms"));
  o.offsets_retention_ms = c.get_int("offsets.retention.minutes") * 60'000;
  return o;
}

void Broker::run_coordinator() {
  set_thread_name("coordinator");
  auto r = io::Reactor::create(reactor_options("coordinator"));
  if (!r) {
    std::lock_guard lk(mu_);
    coordinator_error_ =
        std::string("coordinator: io_uring setup failed: ") + std::strerror(-r.error());
    cv_.notify_all();
    return;
  }
  io::Reactor* reactor = r->get();
  // The offsets topic's logs belong to the shards: the store runs its work on the owner.
  auto store = std::make_unique<coordinator::PartitionStore>(
      *reactor, [this](std::int32_t p, coordinator::PartitionStore::PartitionFn fn) {
        on_reactor(owner(coordinator::kOffsetsTopic, p),
                   [p, fn = std::move(fn)](ReactorContext& ctx) mutable {
                     fn(ctx.shard ? ctx.shard->find(coordinator::kOffsetsTopic, p) : nullptr);
                   });
      });
  {
    std::lock_guard lk(mu_);
    coordinator_reactor_owned_ = std::move(*r);
    coordinator_reactor_ = reactor;
    // Producer id blocks are reserved durably by the controller.
    const bool broker_node = settings_->cluster_broker();
    const std::int32_t node_id = settings_->node_id;
    auto allocate_ids = [this, broker_node, node_id](
                            std::int32_t block, std::move_only_function<void(std::int64_t)> done) {
      auto shared = std::make_shared<std::move_only_function<void(std::int64_t)>>(std::move(done));
      // Only a whole block of the size asked for is taken.
      auto deliver = [this, shared, block](const replication::ProducerIdsAnswer& a) {
        const bool ok = a.error == kafka::ErrorCode::none && a.first >= 0 && a.length == block;
        if (!ok && a.error != kafka::ErrorCode::none)
          LOG_WARN("the controller reserved no producer ids: %s",
                   std::string(kafka::error_name(a.error)).c_str());
        on_coordinator([shared, first = ok ? a.first : -1](coordinator::GroupCoordinator&) {
          (*shared)(first);
        });
      };
      if (broker_node) {
        // A broker node asks the controller (AllocateProducerIds), as Kafka's brokers do.
        kafka::AllocateProducerIdsRequest req;
        req.broker_id = node_id;
        req.broker_epoch = link_ ? link_->broker_epoch() : -1;
        auto frame = kafka::flatten_body(kafka::encode_request(req, 0, 0, "samsa-broker"));
        forward_to_controller(std::move(frame), [deliver](auto resp) {
          replication::ProducerIdsAnswer a{kafka::ErrorCode::network_exception, -1, 0};
          if (resp) {
            auto h = kafka::decode_response_header(*resp,
                                                   kafka::AllocateProducerIdsResponse::kApiKey, 0);
            kafka::AllocateProducerIdsResponse r;
            if (h.ok() && kafka::decode_response_body(*resp, h, 0, r) == kafka::DecodeError::none)
              a = {static_cast<kafka::ErrorCode>(r.error_code), r.producer_id_start,
                   r.producer_id_len};
          }
          deliver(a);
        });
        return;
      }
      on_controller([node_id, deliver](replication::Controller& c) {
        c.allocate_producer_ids(node_id, -1, deliver);
      });
    };
    coordinator_ = std::make_unique<coordinator::GroupCoordinator>(
        *reactor, coordinator_options(config()), std::move(store), std::move(allocate_ids));
    auto txn_store = std::make_unique<coordinator::PartitionStore>(
        *reactor,
        [this](std::int32_t p, coordinator::PartitionStore::PartitionFn fn) {
          on_reactor(owner(coordinator::kTxnStateTopic, p),
                     [p, fn = std::move(fn)](ReactorContext& ctx) mutable {
                       fn(ctx.shard ? ctx.shard->find(coordinator::kTxnStateTopic, p) : nullptr);
                     });
        },
        std::string(coordinator::kTxnStateTopic));
    txn_coordinator_ = std::make_unique<coordinator::TxnCoordinator>(
        *reactor, txn_coordinator_options(config()), std::move(txn_store),
        coordinator_->producer_ids(), make_marker_writer(*this));
    coordinator_ready_ = true;
  }
  cv_.notify_all();
  LoopBeat beat(*reactor, coordinator_beats_);
  run_watched(*reactor);
  beat.stop();
  txn_coordinator_.reset();
  coordinator_.reset();
}

// On reactor `ctx`: listens on the listeners not yet open (all of them at the first image), or
// only on the controller listeners (a combined node's voter answers the quorum before its
// shards have an image). The first error, naming the listener, or "".
std::string Broker::open_listeners(ReactorContext& ctx, bool controller_only) {
  const auto& listeners = ctx.settings->listeners;
  std::string error;
  for (std::size_t l = 0; l < listeners.size() && error.empty(); ++l) {
    const Endpoint& e = listeners[l];
    if (controller_only && !e.controller) continue;
    if (std::any_of(ctx.dispatchers.begin(), ctx.dispatchers.end(),
                    [l](const auto& d) { return d->listener() == l; }))
      continue;  // opened already
    ctx.dispatchers.push_back(std::make_unique<KafkaDispatcher>(ctx, l));
    std::unique_ptr<net::Transport> tr =
        backend_->make_transport(*ctx.reactor, *ctx.dispatchers.back());
    net::ListenerConfig lc;
    lc.host = e.host;
    lc.port = e.port;
    lc.limits.max_frame_bytes = ctx.settings->socket_request_max_bytes;
    lc.limits.max_inflight_requests = ctx.settings->queued_max_requests;
    lc.limits.max_inflight_bytes = ctx.settings->queued_max_request_bytes;
    lc.limits.idle_timeout_ms = ctx.settings->connections_max_idle_ms;
    lc.budget = &ctx.budget;
    if (ctx.settings->security[l].tls()) {
      // The reactor's settings at accept time: a reload's new certificates serve the next
      // connection.
      lc.tls = [&ctx, l]() -> std::shared_ptr<const net::tls::Context> {
        const auto& sec = ctx.settings->security;
        return l < sec.size() ? sec[l].tls_context : nullptr;
      };
      lc.tls_handshake_timeout_ms = ctx.settings->security[l].handshake_timeout_ms;
      lc.tls_max_pending = ctx.settings->security[l].max_pending_handshakes;
    }
    if (!tr->listen(lc, &error))
      error = "listener " + e.name + "://" + e.host + ":" + std::to_string(e.port) + ": " + error;
    ctx.transports.push_back(std::move(tr));
  }
  return error;
}

// A combined node's controller listeners, from the controller thread once its log is open:
// its peers' votes and fetches cannot wait for the first image, which needs a quorum. Handlers
// see an empty image until then (no topic, no broker), and the shard none at all.
void Broker::open_controller_listeners() {
  for (auto& t : reactors_) {
    ReactorThread* rt = t.get();
    rt->ctx->reactor->post_fn([this, rt] {
      ReactorContext& ctx = *rt->ctx;
      if (rt->ready || ctx.shutting_down) return;
      if (!ctx.image) ctx.image = std::make_shared<replication::MetadataImage>();
      std::string error = open_listeners(ctx, true);
      if (error.empty()) return;
      std::lock_guard lk(mu_);
      rt->error = error;
      cv_.notify_all();
    });
  }
}

// Controller thread: hand the image to every reactor; each applies it to its shard, starts
// listening the first time, and reports back.
void Broker::publish(replication::ImagePtr image) {
  // Settings the image changes are posted first: a reactor has them before it sees the image
  // (each reactor's queue runs in order), so the change's answer waits for them too.
  apply_dynamic_configs(*image);
  const std::int64_t version = image->offset();
  // A broker node's heartbeats report how far its reactors have applied the metadata.
  if (link_ && controller_)
    controller_->when_applied(version, [this, version] {
      if (link_) link_->set_applied(version);
    });
  for (std::size_t i = 0; i < reactors_.size(); ++i) {
    ReactorThread* t = reactors_[i].get();
    t->ctx->reactor->post_fn([this, t, image, version] {
      ReactorContext& ctx = *t->ctx;
      if (!ctx.shard) return;
      ctx.image = image;
      ctx.shard->apply(image);
      if (ctx.fetcher) ctx.fetcher->reconcile();
      if (ctx.settings->cluster_broker()) {
        follow_offsets_leaders(ctx);
        follow_txn_leaders(ctx);
      }
      if (!t->ready && !ctx.shutting_down) {
        std::string error = open_listeners(ctx, false);
        std::lock_guard lk(mu_);
        if (!error.empty()) t->error = error;
        t->ready = true;
        cv_.notify_all();
      }
      const std::size_t idx = ctx.index;
      controller_reactor_->post_fn([this, idx, version] {
        if (controller_) controller_->applied(idx, version);
      });
    });
  }
}

}  // namespace samsa::daemon
