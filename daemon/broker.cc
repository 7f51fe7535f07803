#include "daemon/broker.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "base/clock.h"
#include "base/log.h"
#include "base/thread.h"
#include "daemon/admin.h"
#include "daemon/dispatch.h"
#include "io/checkpoint.h"
#include "net/dpdk/dpdk_transport.h"
#include "net/uring_transport.h"

namespace samsa::daemon {

namespace {

// The DPDK backend's counters in one line (the log every minute, at shutdown, and the status).
std::string dpdk_stats_text(const net::DpdkStats& s) {
  char b[512];
  const double busy = s.poll_total_ns ? 100.0 * static_cast<double>(s.poll_busy_ns) /
                                            static_cast<double>(s.poll_total_ns)
                                      : 0.0;
  std::snprintf(
      b, sizeof b,
      "rx %llu packets %llu bytes, tx %llu packets %llu bytes, dropped rx %llu tx %llu "
      "ip %llu, tcp retransmits %llu, connections %llu (half-open %llu, accepted %llu, "
      "resets received %llu, half-open dropped %llu), poll busy %.1f%%, sleeps %llu, mbufs "
      "free %u/%u",
      static_cast<unsigned long long>(s.rx_packets), static_cast<unsigned long long>(s.rx_bytes),
      static_cast<unsigned long long>(s.tx_packets), static_cast<unsigned long long>(s.tx_bytes),
      static_cast<unsigned long long>(s.rx_dropped), static_cast<unsigned long long>(s.tx_dropped),
      static_cast<unsigned long long>(s.ip_dropped),
      static_cast<unsigned long long>(s.tcp_retransmits),
      static_cast<unsigned long long>(s.tcp_connections),
      static_cast<unsigned long long>(s.tcp_half_open),
      static_cast<unsigned long long>(s.tcp_accepted),
      static_cast<unsigned long long>(s.tcp_resets_received),
      static_cast<unsigned long long>(s.tcp_syn_dropped), busy,
      static_cast<unsigned long long>(s.sleeps), s.mbufs_free, s.mbufs_total);
  return b;
}

}  // namespace
namespace {

constexpr const char* kMetaFile = "meta.properties";

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
// Each reactor keeps its share of the broker's fetch sessions (rounded up: never 0 unless
// sessions are off).
std::size_t session_slots_per_reactor(const BrokerSettings& s, std::size_t reactors) {
  const auto slots = static_cast<std::size_t>(std::max(0, s.fetch_session_slots));
  return (slots + reactors - 1) / reactors;
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::expected<std::unique_ptr<Broker>, std::string> Broker::start(
    Config cfg, std::function<void(const std::string&)> progress) {
  std::unique_ptr<Broker> b(new Broker());
  if (auto r = b->init(std::move(cfg), std::move(progress)); !r) {
    b->shutdown();
    return std::unexpected(r.error());
  }
  return b;
}

Broker::~Broker() {
  shutdown();
}

// meta.properties, as Kafka's KRaft nodes keep it in every log dir: the cluster id (made up on
// first start) and this node's id, which must not change under existing data.
std::expected<std::string, std::string> Broker::load_or_create_meta() {
  const std::int64_t node = settings_ ? settings_->node_id : config_.get_int("node.id");
  std::string cluster;
  for (const auto& d : log_dirs_) {
    auto path = d->root() / kMetaFile;
    if (!std::filesystem::exists(path)) continue;
    auto props = parse_properties(read_text(path));
    if (!props) return std::unexpected(path.string() + ": " + props.error());
    auto id = props->find("cluster.id");
    auto n = props->find("node.id");
    if (id == props->end()) return std::unexpected(path.string() + ": no cluster.id");
    if (n != props->end() && n->second != std::to_string(node))
      return std::unexpected(path.string() + ": data belongs to node.id " + n->second +
                             ", configured node.id is " + std::to_string(node));
    if (!cluster.empty() && cluster != id->second)
      return std::unexpected("log dirs belong to different clusters (" + cluster + ", " +
                             id->second + ")");
    cluster = id->second;
  }
  if (cluster.empty()) cluster = replication::uuid_to_string(replication::random_uuid());
  for (const auto& d : log_dirs_) {
    auto path = d->root() / kMetaFile;
    if (std::filesystem::exists(path)) continue;
    // Atomic and durable before any data goes into the dir: a power cut leaves no file (the
    // next start writes it) or the whole file, never an empty one that stops every start.
    const std::string text = "#\n#written by samsad\ncluster.id=" + cluster + "\ndirectory.id=" +
                             replication::uuid_to_string(replication::random_uuid()) +
                             "\nnode.id=" + std::to_string(node) + "\nversion=1\n";
    if (auto r = io::write_file_atomically(path, text); !r)
      return std::unexpected("cannot write " + path.string() + ": " + r.error().detail);
  }
  return cluster;
}

std::expected<void, std::string> Broker::init(Config cfg,
                                              std::function<void(const std::string&)> progress) {
  config_ = std::move(cfg);
  start_wall_ms_ = wall_ms();
  start_mono_ns_ = mono_ns();
  testing_hooks_ = config_.get_bool("samsa.testing.hooks");
  // Before touching any data: the DPDK device and address must be ours (the stack's own
  // listeners need no kernel port) ...
  const bool dpdk = config_.get_string("samsa.net.backend") == "dpdk";
  if (dpdk) {
    auto s = make_settings(config_, "");
    if (!s) return std::unexpected(s.error());
#if SAMSA_HAVE_DPDK
    const DpdkSettings& d = (*s)->dpdk;
    net::DpdkOptions o{d.eal_args, d.ip, d.netmask, d.gateway, d.mtu, d.idle_poll_us, d.mbufs};
    auto stack = net::DpdkStack::create(o);
    if (!stack) return std::unexpected("samsa.net.backend=dpdk: " + stack.error());
    dpdk_ = std::move(*stack);
#else
    return std::unexpected(
        "samsa.net.backend=dpdk: this samsad was built without the DPDK backend (libdpdk-dev "
        "and lwIP's sources were missing at build time; see net/dpdk/README.md)");
#endif
  }
  // ... and another broker may hold the port (or the log dirs, below).
  if (auto listeners = parse_listeners(config_.get_list("listeners")); listeners && !dpdk) {
    const auto controller_names = config_.get_list("controller.listener.names");
    for (const auto& e : *listeners) {
      if (std::find(controller_names.begin(), controller_names.end(), e.name) !=
          controller_names.end())
        continue;  // not opened by this broker (see settings.cc)
      // A process killed a moment ago keeps its listening socket until the kernel has torn
      // down its io_uring (10-20 ms here): wait that out briefly before calling the port taken.
      std::string why;
      bool free = false;
      for (int attempt = 0; attempt < 40 && !free; ++attempt) {
        if (attempt) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        free = net::check_address_free(e.host, e.port, &why);
      }
      if (!free) return std::unexpected("listener " + e.name + ": " + why);
    }
  }
  std::vector<io::LogDir*> dirs;
  for (const auto& d : config_.log_dirs()) {
    std::error_code ec;
    std::filesystem::create_directories(d, ec);
    if (ec) return std::unexpected("log.dirs: cannot create " + d + ": " + ec.message());
    auto ld = io::LogDir::open(d);
    if (!ld) return std::unexpected("log.dirs: " + d + ": " + ld.error().detail);
    dirs.push_back(ld->get());
    log_dirs_.push_back(std::move(*ld));
  }
  auto cluster = load_or_create_meta();
  if (!cluster) return std::unexpected(cluster.error());
  cluster_id_ = *cluster;
  auto settings = make_settings(config_, cluster_id_);
  if (!settings) return std::unexpected(settings.error());
  settings_ = *settings;
  // Before recovery, so `samsactl status` can show its progress.
  if (auto e = start_admin(); !e.empty()) return std::unexpected(e);

  io::RetentionDeleter::Options ro;
  ro.check_interval_ms = config_.get_int("log.retention.check.interval.ms");
  ro.checkpoint_interval_ms = config_.get_int("log.flush.offset.checkpoint.interval.ms");
  retention_ = std::make_unique<io::RetentionDeleter>(ro, dirs);
  retention_->start();
  // Rare blocking file work (index files of rolled segments, producer snapshots, epoch
  // checkpoints) runs here, never on a reactor.
  {
    std::string why;
    offload_ = io::Offload::start("offload", 2, &why);
    if (!offload_) return std::unexpected(why);
  }

  std::size_t n = static_cast<std::size_t>(config_.get_int("samsa.reactors"));
  if (n == 0) n = std::max<long>(1, sysconf(_SC_NPROCESSORS_ONLN));
  last_turns_.assign(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    auto ctx = std::make_unique<ReactorContext>();
    ctx->broker = this;
    ctx->index = i;
    ctx->settings = settings_;
    // Each reactor holds its share of queued.max.request.bytes; decoding and handling may run
    // an eighth over it (at most 16 MiB), so a small request always decodes while frames fill
    // the share.
    const std::uint64_t share = settings_->queued_max_request_bytes / n;
    ctx->budget.set_capacity(share, std::min<std::uint64_t>(share / 8, 16u << 20));
    // Eight cold reads at once per reactor, each up to a partition's default fetch size (1 MiB)
    // plus the index walk to its first batch.
    ctx->read_ahead = std::make_unique<io::ReadAheadPool>(8, (1u << 20) + (256u << 10));
    ctx->fetch_sessions = std::make_unique<FetchSessionCache>(
        i, session_slots_per_reactor(*settings_, n), settings_->fetch_session_eviction_ms);
    contexts_.push_back(std::move(ctx));
    auto t = std::make_unique<ReactorThread>();
    t->ctx = contexts_.back().get();
    reactors_.push_back(std::move(t));
  }
  for (auto& t : reactors_) {
    ReactorThread* raw = t.get();
    t->thread = std::thread([this, raw] { run_reactor(raw); });
  }
  {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] {
      for (auto& t : reactors_)
        if (!t->reactor && t->error.empty()) return false;
      return true;
    });
    for (auto& t : reactors_)
      if (!t->error.empty()) return std::unexpected(t->error);
  }

  coordinator_thread_ = std::thread([this] { run_coordinator(); });
  {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return coordinator_ready_ || !coordinator_error_.empty(); });
    if (!coordinator_error_.empty()) return std::unexpected(coordinator_error_);
  }

  controller_thread_ = std::thread([this] { run_controller(); });
  {
    // The controller replays the metadata log and publishes the first image; every reactor
    // then opens (recovers) its partitions' logs and starts listening. Progress is reported
    // every second meanwhile.
    const std::int64_t hold_until =
        testing_hooks_ ? mono_ms() + config().get_int("samsa.testing.startup.delay.ms") : 0;
    std::unique_lock lk(mu_);
    auto done = [&] {
      if (!controller_error_.empty()) return true;
      if (!controller_ready_) return false;
      for (auto& t : reactors_)
        if (!t->ready && t->error.empty()) return false;
      return mono_ms() >= hold_until;
    };
    while (!cv_.wait_for(lk, std::chrono::seconds(1), done)) {
      if (!progress) continue;
      lk.unlock();
      progress(progress_line());
      lk.lock();
    }
    if (!controller_error_.empty()) return std::unexpected(controller_error_);
    for (auto& t : reactors_)
      if (!t->error.empty()) return std::unexpected(t->error);
  }
  recovery_ms_ = (mono_ns() - start_mono_ns_) / 1'000'000;
  log_recovery_summary();
  std::string where;
  const auto s = this->settings();  // the controller thread may replace settings_ by now
  for (const auto& e : s->listeners)
    where += (where.empty() ? "" : ", ") + e.name + "://" + e.host + ":" + std::to_string(e.port);
  start_group_coordinator();
  state_.store(State::serving, std::memory_order_release);
  LOG_INFO("samsad %s node %d cluster %s: %zu reactors, listening on %s", SAMSA_VERSION, s->node_id,
           cluster_id_.c_str(), reactors_.size(), where.c_str());
  return {};
}

void Broker::run_reactor(ReactorThread* t) {
  ReactorContext& ctx = *t->ctx;
  const std::string name = "reactor-" + std::to_string(ctx.index);
  set_thread_name(name);
  auto r = io::Reactor::create({.name = name});
  {
    std::lock_guard lk(mu_);
    if (!r) {
      t->error = name + ": io_uring setup failed: " + std::strerror(-r.error());
    } else {
      t->reactor = std::move(*r);
      t->reactor->set_offload(offload_.get());
      ctx.reactor = t->reactor.get();
      replication::Shard::Options so;
      so.index = ctx.index;
      so.count = contexts_.size();
      for (auto& d : log_dirs_)
        so.log_dirs.push_back(d.get());
      so.defaults = settings_->topic_defaults;
      so.retention = retention_.get();
      so.partition = settings_->partition;
      so.producer_expiration_check_ms = settings_->producer_expiration_check_ms;
      ctx.shard = std::make_unique<replication::Shard>(*ctx.reactor, std::move(so));
    }
  }
  cv_.notify_all();
  if (!ctx.reactor) return;

  struct Beat : io::Timer {
    ReactorContext* ctx;
    net::DpdkStack* dpdk;  // reactor 0 only: its counters go to the log every minute
    std::uint64_t beats = 0, last_packets = 0;
  } beat;
  beat.ctx = &ctx;
  beat.dpdk = ctx.index == 0 ? dpdk_.get() : nullptr;
  ctx.metrics.set_started(mono_ns());
  // The watchdog counts loop turns; an idle loop must still show it is alive.
  beat.fn = [](io::Timer* tm) {
    auto* b = static_cast<Beat*>(tm);
    b->ctx->turns.fetch_add(1, std::memory_order_relaxed);
    const std::int64_t now = mono_ns();
    b->ctx->metrics.on_beat(*b->ctx->reactor, now);
    if (b->dpdk && ++b->beats % 60 == 0) {
      const net::DpdkStats st = b->dpdk->stats();
      if (st.rx_packets + st.tx_packets != b->last_packets)
        LOG_INFO("dpdk: %s", dpdk_stats_text(st).c_str());
      b->last_packets = st.rx_packets + st.tx_packets;
    }
    b->ctx->reactor->arm(tm, now + 1'000'000'000);
  };
  ctx.reactor->arm(&beat, mono_ns() + 1'000'000'000);
  // One reactor polls the DPDK device (one queue pair) and hands the others their
  // connections' bytes through their queues.
  if (dpdk_ && ctx.index == 0) dpdk_->attach(*ctx.reactor);

  ctx.reactor->run();

  ctx.reactor->disarm(&beat);
  // Transports must be destroyed on their reactor (they drain kernel-held buffers).
  ctx.transports.clear();
  if (dpdk_ && ctx.index == 0) dpdk_->detach();
  ctx.dispatchers.clear();
  ctx.shard.reset();
}

void Broker::run_controller() {
  set_thread_name("controller");
  auto r = io::Reactor::create({.name = "controller"});
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
  controller_ = std::make_unique<replication::Controller>(*reactor, std::move(co));
  if (auto o = controller_->open(); !o) {
    std::lock_guard lk(mu_);
    controller_error_ = "metadata log: " + o.error().detail;
    cv_.notify_all();
    controller_.reset();
    return;
  }
  {
    std::lock_guard lk(mu_);
    controller_ready_ = true;
  }
  cv_.notify_all();
  LoopBeat beat(*reactor, controller_beats_);
  reactor->run();
  beat.stop();
  if (auto c = controller_->close(); !c)
    LOG_ERROR("closing the metadata log: %s", c.error().detail.c_str());
  controller_.reset();
}

// Also used by daemon/admin_ops.cc when settings change.
coordinator::GroupCoordinator::Options coordinator_options(const Config& c) {
  coordinator::GroupCoordinator::Options o;
  o.initial_rebalance_delay_ms =
      static_cast<std::int32_t>(c.get_int("group.initial.rebalance.delay.ms"));
  o.min_session_timeout_ms = static_cast<std::int32_t>(c.get_int("group.min.session.timeout.ms"));
  o.max_session_timeout_ms = static_cast<std::int32_t>(c.get_int("group.max.session.timeout.ms"));
  o.offsets_retention_ms = c.get_int("offsets.retention.minutes") * 60'000;
  // __consumer_offsets keeps offsets.retention.minutes of records (see start_group_coordinator).
  o.state_rewrite_interval_ms = o.offsets_retention_ms / 4;
  return o;
}

void Broker::run_coordinator() {
  set_thread_name("coordinator");
  auto r = io::Reactor::create({.name = "coordinator"});
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
    auto allocate_ids = [this](std::int32_t block,
                               std::move_only_function<void(std::int64_t)> done) {
      auto shared = std::make_shared<std::move_only_function<void(std::int64_t)>>(std::move(done));
      on_controller([this, block, shared](replication::Controller& c) {
        c.allocate_producer_ids(block, [this, shared](std::int64_t first) {
          on_coordinator([shared, first](coordinator::GroupCoordinator&) { (*shared)(first); });
        });
      });
    };
    coordinator_ = std::make_unique<coordinator::GroupCoordinator>(
        *reactor, coordinator_options(config()), std::move(store), std::move(allocate_ids));
    coordinator_ready_ = true;
  }
  cv_.notify_all();
  LoopBeat beat(*reactor, coordinator_beats_);
  reactor->run();
  beat.stop();
  coordinator_.reset();
}

void Broker::start_group_coordinator() {
  const Config cfg = config();
  const auto partitions = static_cast<std::int32_t>(cfg.get_int("offsets.topic.num.partitions"));
  const auto rf = static_cast<std::int16_t>(cfg.get_int("offsets.topic.replication.factor"));
  const std::string retention_ms = std::to_string(coordinator_options(cfg).offsets_retention_ms);
  on_controller([this, partitions, rf, retention_ms](replication::Controller& c) {
    auto begin = [this](std::int32_t n) {
      on_coordinator([n](coordinator::GroupCoordinator& g) { g.start(n); });
    };
    const std::string name(coordinator::kOffsetsTopic);
    if (const auto* t = c.image()->topic(name)) {
      const auto n = static_cast<std::int32_t>(t->partitions.size());
      if (n != partitions)
        LOG_WARN("%s has %d partitions, offsets.topic.num.partitions says %d; keeping %d",
                 name.c_str(), n, partitions, n);
      begin(n);
      return;
    }
    // cleanup.policy=compact as Kafka has it. samsa's logs do not compact yet and their
    // retention ignores the policy, so the topic keeps offsets.retention.minutes of records
    // and no size limit: the coordinator rewrites its live state every quarter of that, so
    // retention only ever drops superseded records (Kafka ignores retention.ms on a
    // compact-only topic, so the override stays harmless once compaction lands).
    replication::TopicSpec spec{name,
                                partitions,
                                rf,
                                {{"cleanup.policy", "compact"},
                                 {"segment.bytes", "104857600"},
                                 {"retention.ms", retention_ms},
                                 {"retention.bytes", "-1"}}};
    c.create_topics({std::move(spec)}, false,
                    [&c, name, begin](std::vector<replication::TopicOutcome> out) {
                      const auto& o = out.front();
                      if (o.error == kafka::ErrorCode::none) {
                        LOG_INFO("created %s with %d partitions", name.c_str(), o.partitions);
                        begin(o.partitions);
                      } else if (const auto* t = c.image()->topic(name)) {
                        begin(static_cast<std::int32_t>(t->partitions.size()));
                      } else {
                        LOG_ERROR("cannot create %s (%s): consumer groups are unavailable",
                                  name.c_str(), o.message.c_str());
                      }
                    });
  });
}

// Controller thread: hand the image to every reactor; each applies it to its shard, starts
// listening the first time, and reports back.
void Broker::publish(replication::ImagePtr image) {
  // Settings the image changes are posted first: a reactor has them before it sees the image
  // (each reactor's queue runs in order), so the change's answer waits for them too.
  apply_dynamic_configs(*image);
  const std::int64_t version = image->offset();
  for (std::size_t i = 0; i < reactors_.size(); ++i) {
    ReactorThread* t = reactors_[i].get();
    t->ctx->reactor->post_fn([this, t, image, version] {
      ReactorContext& ctx = *t->ctx;
      if (!ctx.shard) return;
      ctx.image = image;
      ctx.shard->apply(image);
      if (!t->ready && !ctx.shutting_down) {
        std::string error;
        for (std::size_t l = 0; l < ctx.settings->listeners.size() && error.empty(); ++l) {
          const Endpoint& e = ctx.settings->listeners[l];
          ctx.dispatchers.push_back(std::make_unique<KafkaDispatcher>(ctx, l));
          std::unique_ptr<net::Transport> tr;
#if SAMSA_HAVE_DPDK
          if (dpdk_) tr = net::DpdkTransport::create(*ctx.reactor, *ctx.dispatchers.back(), *dpdk_);
#endif
          if (!tr) tr = net::UringTransport::create(*ctx.reactor, *ctx.dispatchers.back());
          net::ListenerConfig lc;
          lc.host = e.host;
          lc.port = e.port;
          lc.limits.max_frame_bytes = ctx.settings->socket_request_max_bytes;
          lc.limits.max_inflight_requests = ctx.settings->queued_max_requests;
          lc.limits.max_inflight_bytes = ctx.settings->queued_max_request_bytes;
          lc.limits.idle_timeout_ms = ctx.settings->connections_max_idle_ms;
          lc.budget = &ctx.budget;
          if (!tr->listen(lc, &error)) {
            error =
                "listener " + e.name + "://" + e.host + ":" + std::to_string(e.port) + ": " + error;
          }
          ctx.transports.push_back(std::move(tr));
        }
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

std::expected<std::vector<Broker::ConfigChanged>, std::string> Broker::reload() {
  std::lock_guard lk(config_mu_);
  std::vector<std::string> warnings;
  Config next_config = config_;
  auto changed = next_config.reload_file(&warnings);
  for (const auto& w : warnings)
    LOG_WARN("%s", w.c_str());
  if (!changed) return std::unexpected(changed.error());
  auto settings = make_settings(next_config, cluster_id_);
  if (!settings) return std::unexpected(settings.error());
  config_ = std::move(next_config);
  std::vector<ConfigChanged> out;
  for (const auto& key : *changed) {
    const ConfigKey* k = Config::find_key(key);
    ConfigChanged c{key, config_.get_string(key), !k || k->dynamic};
    if (!c.applied)
      LOG_WARN("config %s changed in the file; it takes effect at the next restart", key.c_str());
    else
      LOG_INFO("config %s is now %s", key.c_str(), c.value.c_str());
    out.push_back(std::move(c));
  }
  apply_settings(*settings);
  return out;
}

void Broker::apply_dynamic_configs(const replication::MetadataImage& image) {
  std::lock_guard lk(config_mu_);
  const auto& defaults = image.broker_configs("");
  const auto& own = image.broker_configs(std::to_string(settings_->node_id));
  if (defaults == applied_dynamic_default_ && own == applied_dynamic_broker_) return;
  Config next = config_;
  auto feed = [&](Config::Layer layer, const replication::MetadataImage::ConfigMap& want) {
    std::vector<std::string> gone;
    for (const auto& [k, v] : next.layer_values(layer))
      if (!want.contains(k)) gone.push_back(k);
    for (const auto& k : gone)
      (void)next.set_dynamic(k, std::nullopt, layer);
    for (const auto& [k, v] : want) {
      // Records are validated before they are written; one that no longer validates (a key
      // an older samsa knew) is skipped, never fatal.
      if (auto r = next.set_dynamic(k, v, layer); !r)
        LOG_WARN("dynamic config %s=%s ignored: %s", k.c_str(), v.c_str(), r.error().c_str());
    }
  };
  feed(Config::Layer::dynamic_default, defaults);
  feed(Config::Layer::dynamic, own);
  auto settings = make_settings(next, cluster_id_);
  if (!settings) {
    LOG_ERROR("dynamic configs not applied: %s", settings.error().c_str());
    return;
  }
  for (const auto& [key, before] : config_.effective()) {
    std::string after = next.get_string(key);
    if (after != config_.get_string(key))
      LOG_INFO("config %s is now %s (dynamic)", key.c_str(), after.c_str());
  }
  config_ = std::move(next);
  applied_dynamic_default_ = defaults;
  applied_dynamic_broker_ = own;
  apply_settings(*settings);
}

void Broker::apply_settings(std::shared_ptr<const BrokerSettings> made) {
  if (auto lvl = log::parse_level(config_.get_string("samsa.log.level"))) log::set_level(*lvl);
  // Listener-level settings stay as started; topic defaults and request-path settings apply now.
  auto next = std::make_shared<BrokerSettings>(*made);
  if (settings_) {
    next->listeners = settings_->listeners;
    next->advertised = settings_->advertised;
  }
  settings_ = next;
  const std::size_t n = reactors_.size();
  for (auto& t : reactors_) {
    if (!t->ctx->reactor) continue;
    t->ctx->reactor->post_fn([ctx = t->ctx, next, n] {
      ctx->settings = next;
      if (ctx->shard) {
        ctx->shard->set_defaults(next->topic_defaults);
        ctx->shard->set_partition_options(next->partition);
      }
      ctx->fetch_sessions->configure(session_slots_per_reactor(*next, n),
                                     next->fetch_session_eviction_ms);
    });
  }
  if (coordinator_reactor_) {
    on_coordinator(
        [o = coordinator_options(config_)](coordinator::GroupCoordinator& g) { g.set_options(o); });
  }
  if (controller_reactor_) {
    on_controller([next](replication::Controller& c) {
      c.set_defaults(next->topic_defaults);
      c.set_default_partitions(next->num_partitions);
      c.set_delete_topic_enable(next->delete_topic_enable);
      c.set_max_partitions(next->max_partitions, next->max_partitions_per_request);
    });
  }
}

std::optional<std::string> Broker::check_broker_config(const std::string& key,
                                                       const std::optional<std::string>& value) {
  if (auto why = Config::check_dynamic(key, value)) return why;
  if (!value) return std::nullopt;
  // Values that pass alone but not together (make_settings' derived checks) are refused too.
  std::lock_guard lk(config_mu_);
  Config trial = config_;
  if (auto r = trial.set_dynamic(key, value, Config::Layer::dynamic); !r) return r.error();
  if (auto s = make_settings(trial, cluster_id_); !s) return s.error();
  return std::nullopt;
}

std::string Broker::broker_config_value(const std::string& key) {
  std::lock_guard lk(config_mu_);
  return config_.get_string(key);
}

bool Broker::healthy() {
  bool ok = true;
  for (std::size_t i = 0; i < contexts_.size(); ++i) {
    std::uint64_t now = contexts_[i]->turns.load(std::memory_order_relaxed);
    if (now == last_turns_[i]) ok = false;
    last_turns_[i] = now;
  }
  auto advanced = [&](const std::atomic<std::uint64_t>& beats, std::uint64_t& last) {
    const std::uint64_t now = beats.load(std::memory_order_relaxed);
    const bool moved = now != last;
    last = now;
    return moved;
  };
  ok &= advanced(controller_beats_, last_controller_beats_);
  ok &= advanced(coordinator_beats_, last_coordinator_beats_);
  return ok;
}

std::string Broker::status_line() const {
  // The network backend: which device, address and queues (samsa.net.backend=dpdk).
  std::string net;
  if (dpdk_) {
    const net::DpdkInfo i = dpdk_->info();
    net = "; dpdk " + i.device + " (" + i.driver + ")" +
          (i.interface.empty() ? "" : " on " + i.interface) + " as " + i.ip + ", " +
          std::to_string(i.rx_queues) + "/" + std::to_string(i.tx_queues) +
          " rx/tx queues polled by " + i.polled_by;
  }
  // systemd's STATUS once serving: where, how much, and what start-up had to do.
  std::string where;
  {
    std::lock_guard lk(config_mu_);
    for (const auto& e : settings_->listeners)
      where += (where.empty() ? "" : ", ") + e.name + "://" +
               (e.host.empty() ? std::string("0.0.0.0") : e.host) + ":" + std::to_string(e.port);
  }
  std::size_t partitions = 0, scanned = 0, found = 0;
  bool clean = true;
  for (const auto& r : recovery_) {
    partitions += r.opened;
    scanned += r.scanned_segments;
    found += r.found;
    clean &= r.clean;
  }
  std::string how = found == 0 ? "new data dir"
                    : clean && scanned == 0
                        ? "clean start, recovery skipped"
                        : "recovered " + std::to_string(scanned) + " segments in " +
                              std::to_string(recovery_ms_) + " ms";
  return std::string(state_name(state())) + " on " + where + "; " + std::to_string(partitions) +
         " partitions in " + std::to_string(log_dirs_.size()) + " log dir" +
         (log_dirs_.size() == 1 ? "" : "s") + "; " + how + net;
}

void Broker::shutdown() {
  if (stopping_.exchange(true)) return;
  state_.store(State::stopping, std::memory_order_release);
  // The admin thread first: it reaches into every other thread.
  admin_.reset();
  const std::int64_t timeout_ms = config().get_int("samsa.shutdown.timeout.ms");
  std::vector<ReactorThread*> running;
  for (auto& t : reactors_)
    if (t->ctx->reactor && t->thread.joinable()) running.push_back(t.get());

  // 1. Stop accepting and expire long polls; 2. wait for in-flight requests to be answered.
  std::atomic<std::size_t> busy{0};
  auto count_busy = [&](bool first) {
    busy.store(0);
    std::atomic<std::size_t> left{running.size()};
    for (ReactorThread* t : running) {
      t->ctx->reactor->post_fn([t, &busy, &left, first] {
        ReactorContext& ctx = *t->ctx;
        if (first) {
          ctx.shutting_down = true;
          for (auto& tr : ctx.transports)
            tr->stop_accepting();
        }
        while (ctx.parked) {
          ParkedRequest* p = ctx.parked;
          ctx.unpark(p);
          p->expire();
        }
        std::size_t n = 0;
        for (auto& d : ctx.dispatchers)
          n += d->in_flight();
        busy.fetch_add(n);
        left.fetch_sub(1);
      });
    }
    while (left.load() != 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return busy.load();
  };
  // Group requests parked in the coordinator (a JoinGroup waits up to its rebalance timeout)
  // are answered now, so the wait below is for real work only.
  if (coordinator_reactor_) on_coordinator([](coordinator::GroupCoordinator& g) { g.shutdown(); });
  const std::int64_t end = mono_ms() + timeout_ms;
  bool first = true;
  while (!running.empty() && count_busy(first) != 0 && mono_ms() < end) {
    first = false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!running.empty() && busy.load() != 0)
    LOG_WARN("shutdown: %zu requests still in flight after %lld ms; closing anyway", busy.load(),
             static_cast<long long>(timeout_ms));

  // 3. No more requests: close every connection on every reactor.
  {
    std::atomic<std::size_t> left{running.size()};
    for (ReactorThread* t : running) {
      t->ctx->reactor->post_fn([t, &left] {
        for (auto& tr : t->ctx->transports)
          tr->close_all();
        left.fetch_sub(1);
      });
    }
    while (left.load() != 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // 4. The controller (it may still be finishing a change), the coordinator (its writes in
  // flight complete on the shards, which are still running), then the shards' logs.
  if (controller_thread_.joinable()) {
    if (controller_reactor_) controller_reactor_->stop();
    controller_thread_.join();
  }
  if (coordinator_thread_.joinable()) {
    if (coordinator_reactor_) coordinator_reactor_->stop();
    coordinator_thread_.join();
  }
  for (ReactorThread* t : running) {
    t->ctx->reactor->post_fn([t] {
      ReactorContext& ctx = *t->ctx;
      ctx.shard->close_all();
      struct Poll : io::Timer {
        ReactorContext* ctx;
      };
      auto* poll = new Poll();
      poll->ctx = &ctx;
      poll->fn = [](io::Timer* tm) {
        auto* p = static_cast<Poll*>(tm);
        if (p->ctx->shard->closed()) {
          p->ctx->reactor->stop();
          delete p;
          return;
        }
        p->ctx->reactor->arm(tm, mono_ns() + 2'000'000);
      };
      ctx.reactor->arm(poll, mono_ns());
    });
  }
  for (auto& t : reactors_)
    if (t->thread.joinable()) t->thread.join();
  if (controller_thread_.joinable()) {
    if (controller_reactor_) controller_reactor_->stop();
    controller_thread_.join();
  }
  if (coordinator_thread_.joinable()) {
    if (coordinator_reactor_) coordinator_reactor_->stop();
    coordinator_thread_.join();
  }
  if (retention_) retention_->stop();
  // The reactors are done; what they handed the offload is finished before the clean marker.
  offload_.reset();
  bool clean = true;
  for (auto& t : reactors_)
    clean &= t->ctx->reactor != nullptr;
  for (auto& d : log_dirs_) {
    auto r = clean ? d->shutdown_clean() : d->write_checkpoints();
    if (!r) LOG_WARN("log dir %s: %s", d->root().c_str(), r.error().detail.c_str());
  }
  if (dpdk_) LOG_INFO("dpdk: %s", dpdk_stats_text(dpdk_->stats()).c_str());
  dpdk_.reset();  // every reactor thread that used it has ended
  reactors_.clear();
  contexts_.clear();
  log_dirs_.clear();
}

}  // namespace samsa::daemon
