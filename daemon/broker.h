// daemon::Broker — one samsad process: the reactor threads (each with its io_uring ring, its
// connections and its shard of partitions), the controller thread that owns cluster metadata,
// and the retention thread. Built by start(), torn down by shutdown().
//
// Threads: "reactor-N" (one per samsa.reactors), "controller", "coordinator" (consumer groups),
// "retention", "admin" (the admin socket and metrics listener, daemon/admin.h); the main thread
// only waits for signals and pings systemd's watchdog.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <expected>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/coordinator.h"
#include "coordinator/txn_coordinator.h"
#include "daemon/api/fetch_sessions.h"
#include "daemon/cluster/broker_sender.h"
#include "daemon/cluster/isr_keeper.h"
#include "daemon/cluster/quorum_peers.h"
#include "daemon/cluster/replica_fetcher.h"
#include "daemon/cluster/replication_throttle.h"
#include "daemon/config.h"
#include "daemon/metrics.h"
#include "daemon/settings.h"
#include "io/log_dir.h"
#include "io/offload.h"
#include "io/reactor.h"
#include "io/retention.h"
#include "io/stall_watch.h"
#include "io/turn_queue.h"
#include "net/backend.h"
#include "net/memory_budget.h"
#include "net/transport.h"
#include "replication/controller.h"
#include "replication/shard.h"

namespace samsa::cluster {
class ClusterLink;
}  // namespace samsa::cluster

namespace samsa::daemon {

class AdminServer;
class Broker;
class KafkaDispatcher;

// A request parked on this reactor (a long-polling fetch); shutdown expires them so they
// answer at once instead of waiting out their max wait.
struct ParkedRequest {
  virtual void expire() = 0;
  ParkedRequest* parked_prev = nullptr;
  ParkedRequest* parked_next = nullptr;

 protected:
  ~ParkedRequest() = default;
};

// What one reactor thread owns. Only that thread touches it after start-up, except
// `turns` (read by the watchdog).
struct ReactorContext {
  Broker* broker = nullptr;
  std::size_t index = 0;
  io::Reactor* reactor = nullptr;
  std::unique_ptr<replication::Shard> shard;
  // A cluster broker's replication throttles on this shard: the fetcher's (follower side) and
  // the Fetch handler's (leader side, a follower's read).
  std::unique_ptr<cluster::ReplicationThrottle> throttle;
  // A cluster broker's follower side: fetches its followed partitions from their leaders.
  std::unique_ptr<cluster::ReplicaFetcher> fetcher;
  // Requests to other brokers (reactor 0 of a cluster broker only: the transaction
  // coordinator's WriteTxnMarkers).
  std::unique_ptr<cluster::BrokerSender> sender;
  // A cluster broker's leader side of ISR changes: AlterPartition through the cluster link.
  std::unique_ptr<cluster::IsrKeeper> isr_keeper;
  replication::ImagePtr image;
  std::shared_ptr<const BrokerSettings> settings;
  std::vector<std::unique_ptr<KafkaDispatcher>> dispatchers;  // one per listener
  std::vector<std::unique_ptr<net::Transport>> transports;    // one per listener
  std::atomic<std::uint64_t> turns{0};
  ReactorMetrics metrics;
  // queued.max.request.bytes / reactors: frames, decoded requests and their handling.
  net::MemoryBudget budget;
  // Incremental fetch sessions opened on this reactor (KIP-227).
  std::unique_ptr<FetchSessionCache> fetch_sessions;
  // Buffers for cold reads of this shard's logs (io/read_ahead.h): a fixed few, so many cold
  // readers at once cost a fixed amount of memory; readers wait for one in turn.
  std::unique_ptr<io::ReadAheadPool> read_ahead;
  // Per-partition work of requests (daemon/api/handlers/fan_out.h), split across loop turns
  // when large; made and destroyed on the reactor's thread, with the reactor.
  std::unique_ptr<io::TurnQueue> turn_queue;
  // Segment file descriptors this reactor's logs may keep open (io/open_files.h; 0: no limit).
  std::size_t open_files_budget = 0;
  ParkedRequest* parked = nullptr;  // intrusive list
  bool shutting_down = false;
  // A cluster broker: the partitions of __consumer_offsets this shard leads, with their leader
  // epochs, as last told to the group coordinator (Broker::follow_offsets_leaders).
  std::map<std::int32_t, std::int32_t> offsets_led;
  bool offsets_seen = false;  // the coordinator was told the topic's partition count
  // The same for __transaction_state and the transaction coordinator.
  std::map<std::int32_t, std::int32_t> txn_led;
  bool txn_seen = false;

  void park(ParkedRequest* p) {
    p->parked_prev = nullptr;
    p->parked_next = parked;
    if (parked) parked->parked_prev = p;
    parked = p;
  }
  void unpark(ParkedRequest* p) {
    if (p->parked_prev) {
      p->parked_prev->parked_next = p->parked_next;
    } else if (parked == p) {
      parked = p->parked_next;
    }
    if (p->parked_next) p->parked_next->parked_prev = p->parked_prev;
    p->parked_prev = p->parked_next = nullptr;
  }
};

class Broker {
 public:
  // progress (optional) is called about once a second while the logs are being recovered,
  // with a line for systemd's STATUS. stop_requested (optional) is asked as often: true ends
  // the start-up (shut down, kStoppedDuringStart), so SIGTERM works while a node waits for
  // its quorum or recovers a large log.
  static std::expected<std::unique_ptr<Broker>, std::string> start(
      Config cfg, std::function<void(const std::string&)> progress = {},
      std::function<bool()> stop_requested = {});
  static constexpr std::string_view kStoppedDuringStart = "stopped during start-up";
  ~Broker();

  // SIGHUP / samsactl reload: re-reads the config file and applies what can change live.
  // Returns the keys whose effective value changed (applied: false when it needs a restart).
  struct ConfigChanged {
    std::string key;
    std::string value;
    bool applied = true;
  };
  std::expected<std::vector<ConfigChanged>, std::string> reload();
  // Graceful stop: no new connections, answer what is in flight (bounded by
  // samsa.shutdown.timeout.ms), close logs cleanly, write checkpoints and the clean marker.
  void shutdown();
  // Every reactor loop, the controller's and the coordinator's have turned since the last call
  // (the systemd watchdog asks).
  bool healthy();
  std::string status_line() const;
  // The network backend (samsa.net.backend), made by init().
  const net::Backend& backend() const { return *backend_; }
  const io::LogCleaner* cleaner() const { return cleaner_.get(); }
  // The replication throttles' quotas (leader.replication.throttled.rate and the follower's).
  const cluster::ReplicationQuotas& replication_quotas() const { return replication_quotas_; }
  io::LogCleaner* cleaner() { return cleaner_.get(); }

  // ---- for the admin socket (daemon/admin_ops.cc, daemon/admin_commands.cc) ----
  enum class State : std::uint8_t { starting, serving, draining, drained, stopping };
  State state() const { return state_.load(std::memory_order_acquire); }
  static const char* state_name(State s);
  // Start-up progress ("recovering logs: 12/53 partitions opened"); any thread.
  std::string progress_line() const;
  // Snapshots of the configuration and of the settings derived from it; any thread.
  Config config() const;
  std::shared_ptr<const BrokerSettings> settings() const;
  std::int64_t start_wall_ms() const { return start_wall_ms_; }
  std::int64_t start_mono_ns() const { return start_mono_ns_; }
  // What recovery found in each log dir (filled when start-up finished) and how long it took.
  const std::vector<io::LogDir::RecoverySummary>& recovery() const { return recovery_; }
  std::int64_t recovery_ms() const { return recovery_ms_; }
  bool testing_hooks() const { return testing_hooks_; }
  // Dynamic broker settings: the image's broker ConfigRecords ("" = cluster default, this
  // node's id = its own) become Config's dynamic layers, and the settings they produce reach
  // every reactor, the controller and the coordinator, as reload() does. Called on the
  // controller thread by every publish (a no-op unless those records changed), so a change made
  // through IncrementalAlterConfigs or samsactl is answered only once the reactors have it.
  void apply_dynamic_configs(const replication::MetadataImage& image);
  // Stop accepting clients, close connections once their requests are answered, flush; done is
  // called on some broker thread with what happened.
  struct DrainResult {
    std::size_t connections = 0;  // connections open when the drain began
    std::size_t in_flight = 0;    // requests in flight then
    std::size_t left = 0;         // requests still unanswered at the timeout
    std::int64_t elapsed_ms = 0;
    std::string flush_error;
  };
  void drain(std::function<void(DrainResult)> done);
  // fdatasync of everything in every log dir (syncfs) and the checkpoints written; blocking,
  // for the admin thread. Returns an error message, empty on success.
  std::string flush_logs();

  std::size_t reactor_count() const { return reactors_.size(); }
  ReactorContext& reactor(std::size_t i) { return *reactors_[i]->ctx; }
  // The shard that owns a partition.
  std::size_t owner(std::string_view topic, std::int32_t partition) const {
    return replication::Shard::owner(topic, partition, reactors_.size());
  }
  // Runs f(ctx) on the shard's reactor: at once when called on that reactor, else posted.
  template <class F>
  void on_reactor(std::size_t i, F&& f);
  // Runs f(controller) on the controller thread.
  template <class F>
  void on_controller(F&& f);
  // Runs f(coordinator) on the group coordinator's thread.
  template <class F>
  void on_coordinator(F&& f);
  // FindCoordinator for a transactional id found no __transaction_state: create it (once;
  // any thread). Kafka creates it on that first request too.
  void want_txn_state_topic();
  // Runs f(txn coordinator) on the same thread (the transaction coordinator lives there too).
  template <class F>
  void on_txn_coordinator(F&& f);

  const std::string& cluster_id() const { return cluster_id_; }
  // A broker node (process.roles=broker): sends a request frame to the controller and calls
  // done(its answer frame, or nullopt) once this broker's image holds what the controller had
  // committed when it answered; any thread.
  void forward_to_controller(std::vector<std::byte> frame,
                             std::function<void(std::optional<std::vector<std::byte>>)> done);
  // The log.dirs (fixed after start-up; DescribeLogDirs lists them).
  const std::vector<std::unique_ptr<io::LogDir>>& log_dirs() const { return log_dirs_; }

 private:
  struct ReactorThread {
    std::thread thread;
    ReactorContext* ctx = nullptr;
    std::unique_ptr<io::Reactor> reactor;
    bool ready = false;
    std::string error;
  };
  Broker() = default;
  std::function<bool()> stop_requested_;
  std::expected<void, std::string> init(Config cfg,
                                        std::function<void(const std::string&)> progress);
  // init's steps, in order.
  std::expected<void, std::string> open_network();
  std::expected<std::vector<io::LogDir*>, std::string> open_log_dirs();
  std::expected<void, std::string> start_background(const std::vector<io::LogDir*>& dirs);
  std::expected<void, std::string> start_reactors();
  std::size_t segment_file_budget() const;
  std::expected<void, std::string> start_controller_and_coordinator(
      const std::function<void(const std::string&)>& progress);
  void run_reactor(ReactorThread* t);
  // Every reactor thread's loop options (name, stall threshold) and its run, watched by
  // stall_watch_ while it runs.
  io::Reactor::Options reactor_options(std::string name) const;
  void run_watched(io::Reactor& r);
  void make_shard(ReactorContext& ctx);
  // shutdown's steps, in order.
  void drain_requests(const std::vector<ReactorThread*>& running);
  void close_connections(const std::vector<ReactorThread*>& running);
  void close_logs(const std::vector<ReactorThread*>& running);
  void run_controller();
  void run_coordinator();
  // Creates __consumer_offsets if needed (through the controller), then starts the coordinator
  // (broker_groups.cc). A cluster broker's coordinator starts, and follows the leaders of the
  // topic's partitions, from the images its reactors apply (follow_offsets_leaders).
  void start_group_coordinator();
  void create_offsets_topic();
  void follow_offsets_leaders(ReactorContext& ctx);
  // The same for __transaction_state and the transaction coordinator (broker_txns.cc).
  void follow_txn_leaders(ReactorContext& ctx);
  void ensure_internal_topic(replication::TopicSpec spec, bool create,
                             std::function<void(std::int32_t)> begin);
  std::atomic<bool> txn_topic_wanted_{false};
  void publish(replication::ImagePtr image);
  std::string open_listeners(ReactorContext& ctx, bool controller_only);
  void open_controller_listeners();
  // Installs new settings (listeners stay as started) everywhere; config_mu_ held.
  void apply_settings(std::shared_ptr<const BrokerSettings> next);
  // What the controller asks about dynamic broker settings (validation, current values).
  std::optional<std::string> check_broker_config(const std::string& key,
                                                 const std::optional<std::string>& value);
  std::string broker_config_value(const std::string& key);
  std::expected<std::string, std::string> load_or_create_meta();
  // Starts the admin thread (socket and metrics listener); an error only for a metrics
  // listener that cannot bind (the socket's own trouble is logged: samsad runs without it).
  std::string start_admin();
  void log_recovery_summary();

  // config_ and settings_ change on reload (main or admin thread) and with dynamic configs
  // (controller thread): guarded by config_mu_ once the threads run. Never on a request path.
  mutable std::mutex config_mu_;
  Config config_;
  std::shared_ptr<const BrokerSettings> settings_;
  replication::MetadataImage::ConfigMap applied_dynamic_default_;
  replication::MetadataImage::ConfigMap applied_dynamic_broker_;
  std::vector<replication::Uuid> dir_ids_;  // each log dir's meta.properties directory.id
  std::string cluster_id_;
  std::vector<std::unique_ptr<io::LogDir>> log_dirs_;
  std::unique_ptr<io::RetentionDeleter> retention_;
  std::unique_ptr<io::LogCleaner> cleaner_;      // compaction: the "cleaner-<i>" threads
  std::unique_ptr<io::Offload> offload_;         // "offload-N" threads
  std::unique_ptr<io::StallWatch> stall_watch_;  // "stall-watch": stacks of stalled reactors

  // samsa.net.backend: makes every transport and outbound connection (net/backend.h).
  std::unique_ptr<net::Backend> backend_;
  // Shared by every reactor's ReplicationThrottle: declared before the reactors, so it outlives
  // them.
  cluster::ReplicationQuotas replication_quotas_;
  std::vector<std::unique_ptr<ReactorThread>> reactors_;
  std::vector<std::unique_ptr<ReactorContext>> contexts_;
  std::thread controller_thread_;
  std::unique_ptr<io::Reactor> controller_reactor_owned_;  // outlives the thread: late posts land
  io::Reactor* controller_reactor_ = nullptr;
  std::unique_ptr<replication::Controller> controller_;
  std::string controller_error_;
  bool controller_ready_ = false;
  std::thread coordinator_thread_;
  std::unique_ptr<io::Reactor> coordinator_reactor_owned_;  // outlives the thread, as above
  io::Reactor* coordinator_reactor_ = nullptr;
  std::unique_ptr<coordinator::GroupCoordinator> coordinator_;
  std::unique_ptr<coordinator::TxnCoordinator> txn_coordinator_;  // uses coordinator_'s ids
  std::string coordinator_error_;
  bool coordinator_ready_ = false;

  std::mutex mu_;  // start-up and shutdown hand-offs only
  std::condition_variable cv_;
  std::vector<std::uint64_t> last_turns_;
  std::atomic<bool> stopping_{false};

  // Liveness of the controller and coordinator loops (a 1 s beat each), for the watchdog.
  std::atomic<std::uint64_t> controller_beats_{0};
  std::atomic<std::uint64_t> coordinator_beats_{0};
  std::uint64_t last_controller_beats_ = 0;
  std::uint64_t last_coordinator_beats_ = 0;

  std::atomic<State> state_{State::starting};
  std::int64_t start_wall_ms_ = 0;
  std::int64_t start_mono_ns_ = 0;
  std::int64_t recovery_ms_ = 0;
  std::vector<io::LogDir::RecoverySummary> recovery_;
  bool testing_hooks_ = false;
  std::unique_ptr<AdminServer> admin_;
  // A cluster node with the broker role: the "cluster-link" thread (started by the controller
  // thread once the broker's controller object is open, stopped by shutdown()).
  std::unique_ptr<cluster::ClusterLink> link_;
  // This node's connections to the other members of the controller quorum (not on a single
  // node): made before the controller opens, stopped before it stops.
  std::unique_ptr<cluster::QuorumPeers> quorum_peers_;
  // This process's registration (a broker leads only under its own, unfenced).
  replication::Uuid incarnation_ = replication::random_uuid();
  void start_link();
  void set_quorum_options(replication::Controller::Options& co);
  std::optional<QuorumNode> controller_endpoint(std::int32_t id) const;
  // A cluster broker asks for __consumer_offsets again every second until its image has it
  // (create_offsets_topic; controller thread only, as are the two flags).
  struct OffsetsRetry : io::Timer {
    Broker* self = nullptr;
  } offsets_retry_;
  bool offsets_wait_logged_ = false;
  bool offsets_error_logged_ = false;
};

template <class F>
void Broker::on_reactor(std::size_t i, F&& f) {
  ReactorContext& ctx = *contexts_[i];
  if (io::Reactor::current() == ctx.reactor) {
    f(ctx);
  } else {
    ctx.reactor->post_fn([&ctx, f = std::forward<F>(f)]() mutable { f(ctx); });
  }
}

template <class F>
void Broker::on_controller(F&& f) {
  controller_reactor_->post_fn([this, f = std::forward<F>(f)]() mutable { f(*controller_); });
}

template <class F>
void Broker::on_coordinator(F&& f) {
  coordinator_reactor_->post_fn([this, f = std::forward<F>(f)]() mutable { f(*coordinator_); });
}

template <class F>
void Broker::on_txn_coordinator(F&& f) {
  coordinator_reactor_->post_fn([this, f = std::forward<F>(f)]() mutable { f(*txn_coordinator_); });
}

// The group coordinator's options from the configuration (start and every settings change).
coordinator::GroupCoordinator::Options coordinator_options(const Config& c);

// offsets.topic.replication.factor on a cluster whose configuration does not set it (Kafka's
// default; a single node keeps samsa's 1).
inline constexpr std::int16_t kClusterOffsetsReplicationFactor = 3;
// __consumer_offsets as samsad creates it (broker_groups.cc).
replication::TopicSpec offsets_topic_spec(const Config& cfg, bool cluster);
// __transaction_state as samsad creates it, and the transaction coordinator's options
// (broker_txns.cc).
replication::TopicSpec txn_state_topic_spec(const Config& cfg, bool cluster);
coordinator::TxnCoordinator::Options txn_coordinator_options(const Config& c);

}  // namespace samsa::daemon
