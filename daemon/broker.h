// daemon::Broker — one samsad process: the reactor threads (each with its io_uring ring, its
// connections and its shard of partitions), the controller thread that owns cluster metadata,
// and the retention thread. Built by start(), torn down by shutdown().
//
// Threads: "reactor-N" (one per samsa.reactors), "controller", "coordinator" (consumer groups),
// "retention"; the main thread only waits for signals.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <expected>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/coordinator.h"
#include "daemon/config.h"
#include "daemon/fetch_sessions.h"
#include "daemon/settings.h"
#include "io/log_dir.h"
#include "io/offload.h"
#include "io/reactor.h"
#include "io/retention.h"
#include "net/memory_budget.h"
#include "net/transport.h"
#include "replication/controller.h"
#include "replication/shard.h"

namespace samsa::net {
class DpdkStack;
}

namespace samsa::daemon {

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
  replication::ImagePtr image;
  std::shared_ptr<const BrokerSettings> settings;
  std::vector<std::unique_ptr<KafkaDispatcher>> dispatchers;  // one per listener
  std::vector<std::unique_ptr<net::Transport>> transports;    // one per listener
  std::atomic<std::uint64_t> turns{0};
  // queued.max.request.bytes / reactors: frames, decoded requests and their handling.
  net::MemoryBudget budget;
  // Incremental fetch sessions opened on this reactor (KIP-227).
  std::unique_ptr<FetchSessionCache> fetch_sessions;
  ParkedRequest* parked = nullptr;  // intrusive list
  bool shutting_down = false;

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
  static std::expected<std::unique_ptr<Broker>, std::string> start(Config cfg);
  ~Broker();

  // SIGHUP / samsactl reload: re-reads the config file and applies what can change live.
  std::expected<void, std::string> reload();
  // Dynamic broker settings: the image's broker ConfigRecords ("" = cluster default, this
  // node's id = its own) become Config's dynamic layers, and the settings they produce reach
  // every reactor, the controller and the coordinator, as reload() does. Called on the
  // controller thread by every publish (a no-op unless those records changed), so a change made
  // through IncrementalAlterConfigs or samsactl is answered only once the reactors have it.
  void apply_dynamic_configs(const replication::MetadataImage& image);
  // Graceful stop: no new connections, answer what is in flight (bounded by
  // samsa.shutdown.timeout.ms), close logs cleanly, write checkpoints and the clean marker.
  void shutdown();
  // Every reactor loop has turned since the last call (the systemd watchdog asks).
  bool healthy();
  std::string status_line() const;

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

  const std::string& cluster_id() const { return cluster_id_; }
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
  std::expected<void, std::string> init(Config cfg);
  void run_reactor(ReactorThread* t);
  void run_controller();
  void run_coordinator();
  // Creates __consumer_offsets if needed (through the controller), then starts the coordinator.
  void start_group_coordinator();
  void publish(replication::ImagePtr image);
  // Installs new settings (listeners stay as started) everywhere; config_mu_ held.
  void apply_settings(std::shared_ptr<const BrokerSettings> next);
  // What the controller asks about dynamic broker settings (validation, current values).
  std::optional<std::string> check_broker_config(const std::string& key,
                                                 const std::optional<std::string>& value);
  std::string broker_config_value(const std::string& key);
  std::expected<std::string, std::string> load_or_create_meta();

  // config_ and settings_ change after start-up only under config_mu_ (reload on the main
  // thread, dynamic settings on the controller thread); threads read settings_ copies.
  std::mutex config_mu_;
  Config config_;
  std::shared_ptr<const BrokerSettings> settings_;
  replication::MetadataImage::ConfigMap applied_dynamic_default_;
  replication::MetadataImage::ConfigMap applied_dynamic_broker_;
  std::string cluster_id_;
  std::vector<std::unique_ptr<io::LogDir>> log_dirs_;
  std::unique_ptr<io::RetentionDeleter> retention_;
  std::unique_ptr<io::Offload> offload_;  // "offload-N" threads

  // samsa.net.backend=dpdk: the device and TCP/IP stack, polled by reactor 0.
  std::unique_ptr<net::DpdkStack> dpdk_;
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
  std::string coordinator_error_;
  bool coordinator_ready_ = false;

  std::mutex mu_;  // start-up and shutdown hand-offs only
  std::condition_variable cv_;
  std::vector<std::uint64_t> last_turns_;
  std::atomic<bool> stopping_{false};
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

}  // namespace samsa::daemon
