// cluster::ClusterLink — a broker node's connection to the cluster's controller (process.roles=
// broker): it registers (its advertised listeners, a new incarnation id per process), heartbeats
// every broker.heartbeat.interval.ms and forwards the changes only the controller may commit
// (CreateTopics and the like, daemon/api/handlers/controller_apis.cc). The metadata log itself
// is followed by the node's replication::Controller, an observer of the quorum.
//
// Thread: "cluster-link", owned by the Broker. Blocking exchanges with deadlines through a
// ControllerChannel (controller_channel.h: the network backend's outbound connection on reactor
// 0). One connection, one request at a time (heartbeat, forwarded request and the controller's
// high watermark after it).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <expected>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "base/kafka_errors.h"
#include "daemon/cluster/controller_channel.h"
#include "replication/metadata_records.h"

namespace samsa::cluster {

class ClusterLink {
 public:
  struct Options {
    std::int32_t node_id = -1;
    replication::Uuid incarnation_id{};  // this process's (the shards check it too)
    std::string cluster_id;
    std::vector<replication::Uuid> log_dirs;  // directory ids, registered (KIP-858)
    std::string host;                         // the controller
    std::uint16_t port = 0;
    std::int64_t heartbeat_interval_ms = 250;
    std::vector<replication::BrokerEndpoint> endpoints;  // advertised listeners
    std::optional<std::string> rack;                     // broker.rack
    // How the controller is reached (reactor_controller_channel over the network backend).
    std::unique_ptr<ControllerChannel> channel;
  };
  // The controller's answer frame (correlation id first, no size prefix), or nullopt when it
  // could not be reached; and the metadata offset the broker must have applied before it
  // answers its client (the answer's effect is then in its image).
  using ForwardDone = std::function<void(std::optional<std::vector<std::byte>>, std::int64_t)>;

  explicit ClusterLink(Options o);
  ~ClusterLink();
  void start();
  void stop();  // pending forwards get nullopt

  // Controlled shutdown (SIGTERM): heartbeats ask the controller to move this broker's
  // leaderships away; returns once it says the broker may stop (true) or after timeout_ms.
  bool controlled_shutdown(std::int64_t timeout_ms);

  // A request frame (header and body, no size prefix) for the controller; any thread.
  void forward(std::vector<std::byte> frame, ForwardDone done);
  // This broker's epoch with the controller (-1 while not registered); any thread.
  std::int64_t broker_epoch() const { return epoch_.load(std::memory_order_acquire); }
  // The offset the broker's image has reached (heartbeats report it); any thread.
  void set_applied(std::int64_t offset) { applied_.store(offset, std::memory_order_release); }
  // The quorum's leader moved (the node's observer learnt it): the link talks to it from now
  // on; any thread.
  void set_controller(const std::string& host, std::uint16_t port);

 private:
  void run();
  bool connect_controller();
  void disconnect();
  // Sends a complete frame (with size prefix) and reads the answer frame (without it).
  std::optional<std::vector<std::byte>> exchange(std::span<const std::byte> frame,
                                                 std::int64_t timeout_ms);
  bool do_register();
  bool do_heartbeat();
  std::optional<std::int64_t> controller_high_watermark();
  bool do_forward();

  Options opts_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  // Ends the exchange in flight: set on stop and when the active controller moves (one that
  // was isolated may hold a request until its time-out; it could not commit it anyway).
  std::atomic<bool> interrupt_{false};
  std::atomic<std::int64_t> applied_{-1};
  std::atomic<bool> want_shut_down_{false};
  std::atomic<bool> may_shut_down_{false};
  std::atomic<bool> connected_{false};          // to the controller (controlled_shutdown reads it)
  std::unique_ptr<ControllerChannel> channel_;  // used on the link thread only
  std::int32_t next_correlation_ = 1;
  // -1: not registered. Written by the link thread, read by any (broker_epoch()).
  std::atomic<std::int64_t> epoch_{-1};
  bool fenced_ = true;
  std::int64_t registered_ms_ = 0;
  std::int64_t next_heartbeat_ms_ = 0;
  std::int64_t unreachable_log_ms_ = 0;  // rate limit of connection-failure lines
  kafka::ErrorCode last_refusal_ = kafka::ErrorCode::none;
  std::int64_t last_refusal_ms_ = 0;

  // Forwards the controller cannot take (unreachable) are given up after a while, and at once
  // while shutting down with no controller: a client request must not wait for a controller
  // that is gone (nor hold up the stop).
  void expire_waiting();

  struct Forward {
    std::vector<std::byte> frame;
    ForwardDone done;
    std::int64_t queued_ms = 0;
  };
  // Where the active controller is: set_controller() writes next_*, the link thread moves it
  // into opts_.host/port between exchanges (under mu_).
  std::string next_host_;
  std::uint16_t next_port_ = 0;
  bool moved_ = false;
  void follow_controller();
  std::mutex mu_;  // guards queue_ and the controller's address (forwards arrive from reactors;
                   // never on a data path)
  std::condition_variable wake_;  // a forward was queued
  std::deque<Forward> queue_;
};

}  // namespace samsa::cluster
