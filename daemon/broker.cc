// The Broker's start-up: log dirs and meta.properties, the threads started in order, recovery
// waited for; and what it reports about itself (health, status). Its threads' loops are in
// broker_threads.cc, settings changes in broker_reload.cc, the stop in broker_shutdown.cc.
#include "daemon/broker.h"

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/clock.h"
#include "base/log.h"
#include "daemon/admin/admin.h"
#include "daemon/api/dispatch.h"
#include "daemon/broker_internal.h"
#include "daemon/cluster/cluster_link.h"
#include "daemon/cluster/controller_channel.h"
#include "io/checkpoint.h"

namespace samsa::daemon {

std::size_t session_slots_per_reactor(const BrokerSettings& s, std::size_t reactors) {
  const auto slots = static_cast<std::size_t>(std::max(0, s.fetch_session_slots));
  return (slots + reactors - 1) / reactors;
}

namespace {

constexpr const char* kMetaFile = "meta.properties";

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::expected<std::unique_ptr<Broker>, std::string> Broker::start(
    Config cfg, std::function<void(const std::string&)> progress,
    std::function<bool()> stop_requested) {
  std::unique_ptr<Broker> b(new Broker());
  b->stop_requested_ = std::move(stop_requested);
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
    if (auto dir = props->find("directory.id"); dir != props->end())
      if (auto u = replication::uuid_from_string(dir->second)) dir_ids_.push_back(*u);
  }
  // samsa.cluster.id: what Kafka's `kafka-storage format -t` gives every node of a cluster.
  const std::string configured = config_.get_string("samsa.cluster.id");
  if (!configured.empty() && !cluster.empty() && configured != cluster)
    return std::unexpected("samsa.cluster.id is " + configured +
                           " but the log dirs belong to "
                           "cluster " +
                           cluster);
  if (cluster.empty()) cluster = configured;
  auto pre = cluster.empty() ? make_settings(config_, "") : nullptr;
  if (pre && *pre && (*pre)->cluster_controller() && (*pre)->cluster.voters.size() > 1)
    return std::unexpected(
        "samsa.cluster.id: must be set on the voters of a controller quorum (the same id on "
        "every node, as kafka-storage format -t gives it); e.g. " +
        replication::uuid_to_string(replication::random_uuid()));
  if (pre && *pre && (*pre)->cluster.role == ProcessRole::broker) {
    // A new broker joins the controller's cluster (Kafka formats its storage with that id),
    // asking over the network backend its clients use (it may be the only route to it).
    const auto& host = (*pre)->cluster.controller_host;
    const auto port = (*pre)->cluster.controller_port;
    auto id = cluster::controller_cluster_id(*backend_, host, port, 60'000);
    if (!id) return std::unexpected(id.error());
    cluster = *id;
  }
  if (cluster.empty()) cluster = replication::uuid_to_string(replication::random_uuid());
  for (const auto& d : log_dirs_) {
    auto path = d->root() / kMetaFile;
    if (std::filesystem::exists(path)) continue;
    // Atomic and durable before any data goes into the dir: a power cut leaves no file (the
    // next start writes it) or the whole file, never an empty one that stops every start.
    // The directory id tells the controller this disk from a replacement (KIP-858): a broker
    // that comes back with a new one lost its replicas' data (ControllerState::forget_replicas).
    const replication::Uuid dir_id = replication::random_uuid();
    dir_ids_.push_back(dir_id);
    const std::string text = "#\n#written by samsad\ncluster.id=" + cluster +
                             "\ndirectory.id=" + replication::uuid_to_string(dir_id) +
                             "\nnode.id=" + std::to_string(node) + "\nversion=1\n";
    if (auto r = io::write_file_atomically(path, text); !r)
      return std::unexpected("cannot write " + path.string() + ": " + r.error().detail);
  }
  return cluster;
}

// Before touching any data: the network backend (a device and address must be ours), and no
// other broker on the listeners' ports.
std::expected<void, std::string> Broker::open_network() {
  auto s = make_settings(config_, "");
  if (!s) return std::unexpected(s.error());
  auto b = net::Backend::create((*s)->backend);
  if (!b) return std::unexpected(b.error());
  backend_ = std::move(*b);
  // Another broker may hold the port (or the log dirs: open_log_dirs). The settings name the
  // listeners this node opens (a single node does not open its CONTROLLER listener).
  for (const auto& e : (*s)->listeners) {
    // A process killed a moment ago keeps its listening socket until the kernel has torn
    // down its io_uring (10-20 ms here): wait that out briefly before calling the port taken.
    std::string why;
    bool free = false;
    for (int attempt = 0; attempt < 40 && !free; ++attempt) {
      if (attempt) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      free = backend_->address_free(e.host, e.port, &why);
    }
    if (!free) return std::unexpected("listener " + e.name + ": " + why);
  }
  return {};
}

std::expected<std::vector<io::LogDir*>, std::string> Broker::open_log_dirs() {
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
  return dirs;
}

// The retention thread over the log dirs, and the offload threads: rare blocking file work
// (index files of rolled segments, producer snapshots, epoch checkpoints) runs there, never on
// a reactor.
std::expected<void, std::string> Broker::start_background(const std::vector<io::LogDir*>& dirs) {
  io::RetentionDeleter::Options ro;
  ro.check_interval_ms = config_.get_int("log.retention.check.interval.ms");
  ro.checkpoint_interval_ms = config_.get_int("log.flush.offset.checkpoint.interval.ms");
  retention_ = std::make_unique<io::RetentionDeleter>(ro, dirs);
  retention_->start();
  io::LogCleaner::Options co;
  co.enabled = config_.get_bool("log.cleaner.enable");
  co.threads = static_cast<std::size_t>(config_.get_int("log.cleaner.threads"));
  co.dedupe_buffer_bytes =
      static_cast<std::size_t>(config_.get_int("log.cleaner.dedupe.buffer.size"));
  co.io_max_bytes_per_second =
      static_cast<double>(config_.get_int("log.cleaner.io.max.bytes.per.second"));
  co.backoff_ms = config_.get_int("log.cleaner.backoff.ms");
  co.producer_expiration_ms = config_.get_int("producer.id.expiration.ms");
  cleaner_ = std::make_unique<io::LogCleaner>(co);
  cleaner_->start();
  {
    std::string why;
    offload_ = io::Offload::start("offload", 2, &why);
    if (!offload_) return std::unexpected(why);
  }
  if (settings_->reactor_stall_threshold_ns > 0 && settings_->reactor_stall_watch_period_ns > 0) {
    stall_watch_ = std::make_unique<io::StallWatch>(settings_->reactor_stall_watch_period_ns);
    stall_watch_->start();
  }

  return {};
}

// Segment file descriptors all reactors may keep open: samsa.log.max.open.files, or half the
// process's descriptor limit (its soft limit raised to the hard one first, as a broker with
// many partitions needs), the other half left to connections, index files and io_uring.
std::size_t Broker::segment_file_budget() const {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    rlimit raised = lim;
    raised.rlim_cur = lim.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
  }
  const std::int64_t set = settings_->log_max_open_files;
  if (set > 0) return static_cast<std::size_t>(set);
  if (lim.rlim_cur == RLIM_INFINITY) return 0;
  return static_cast<std::size_t>(lim.rlim_cur / 2);
}

std::expected<void, std::string> Broker::start_reactors() {
  std::size_t n = static_cast<std::size_t>(config_.get_int("samsa.reactors"));
  if (n == 0) {
    // The CPUs this process may run on (taskset, systemd's CPUAffinity=), not the machine's:
    // two reactors pinned to one core preempt each other in the middle of their turns.
    cpu_set_t set;
    n = ::sched_getaffinity(0, sizeof set, &set) == 0
            ? static_cast<std::size_t>(CPU_COUNT(&set))
            : static_cast<std::size_t>(std::max<long>(1, sysconf(_SC_NPROCESSORS_ONLN)));
    n = std::max<std::size_t>(n, 1);
  }
  last_turns_.assign(n, 0);
  const std::size_t files = segment_file_budget();
  LOG_INFO("segment files: at most %zu open (samsa.log.max.open.files%s)", files,
           settings_->log_max_open_files > 0 ? "" : ": half the descriptor limit");
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
    ctx->open_files_budget = files / n;
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

  return {};
}

// The coordinator thread, then the controller's: it replays the metadata log and publishes the
// first image; every reactor then opens (recovers) its partitions' logs and starts listening.
// Progress is reported every second meanwhile.
std::expected<void, std::string> Broker::start_controller_and_coordinator(
    const std::function<void(const std::string&)>& progress) {
  coordinator_thread_ = std::thread([this] { run_coordinator(); });
  {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return coordinator_ready_ || !coordinator_error_.empty(); });
    if (!coordinator_error_.empty()) return std::unexpected(coordinator_error_);
  }

  controller_thread_ = std::thread([this] { run_controller(); });
  {
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
      if (stop_requested_ && stop_requested_())
        return std::unexpected(std::string(kStoppedDuringStart));
      if (!progress) continue;
      lk.unlock();
      progress(progress_line());
      lk.lock();
    }
    if (!controller_error_.empty()) return std::unexpected(controller_error_);
    for (auto& t : reactors_)
      if (!t->error.empty()) return std::unexpected(t->error);
  }
  return {};
}

std::expected<void, std::string> Broker::init(Config cfg,
                                              std::function<void(const std::string&)> progress) {
  config_ = std::move(cfg);
  start_wall_ms_ = wall_ms();
  start_mono_ns_ = mono_ns();
  testing_hooks_ = config_.get_bool("samsa.testing.hooks");
  if (auto r = open_network(); !r) return r;
  auto dirs = open_log_dirs();
  if (!dirs) return std::unexpected(dirs.error());
  auto cluster = load_or_create_meta();
  if (!cluster) return std::unexpected(cluster.error());
  cluster_id_ = *cluster;
  auto settings = make_settings(config_, cluster_id_);
  if (!settings) return std::unexpected(settings.error());
  settings_ = *settings;
  replication_quotas_.leader.set_limit(settings_->cluster.leader_throttled_rate);
  replication_quotas_.follower.set_limit(settings_->cluster.follower_throttled_rate);
  // Before recovery, so `samsactl status` can show its progress.
  if (auto e = start_admin(); !e.empty()) return std::unexpected(e);
  if (auto r = start_background(*dirs); !r) return r;
  if (auto r = start_reactors(); !r) return r;
  if (auto r = start_controller_and_coordinator(progress); !r) return r;
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
  // The network backend: which device, address and queues, if it has any.
  const std::string net = backend_->summary();
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

}  // namespace samsa::daemon
