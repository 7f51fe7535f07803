// BrokerSettings — the typed snapshot of the configuration that request handlers read. Built
// from Config at start and on every reload, then handed to each reactor as an immutable
// shared_ptr, so handlers never parse strings or take a lock.
#pragma once

#include <cstdint>
#include <expected>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/config.h"
#include "daemon/listener_security.h"
#include "net/backend.h"
#include "replication/acl.h"
#include "replication/partition.h"
#include "replication/topic_config.h"

namespace samsa::daemon {

struct Endpoint {
  std::string name;  // listener name, e.g. PLAINTEXT
  std::string host;  // "" = every interface
  std::uint16_t port = 0;
  bool controller = false;  // one of controller.listener.names (the quorum's, not clients')
  SecurityProtocol protocol = SecurityProtocol::plaintext;  // listener.security.protocol.map
};

// Parses "NAME://host:port,..." (host may be empty or a bracketed IPv6 address).
std::expected<std::vector<Endpoint>, std::string> parse_listeners(
    const std::vector<std::string>& items);

// process.roles: absent or "broker,controller" is the single node samsad has always been (its
// CONTROLLER listener, if any, is not opened) unless controller.quorum.voters names other
// nodes: then it is a combined node of a cluster, a voter and a broker at once. "broker" or
// "controller" alone make this process one node of a cluster (replication/README.md).
enum class ProcessRole : std::uint8_t { combined, broker, controller };

// A node of the controller quorum as configuration names it.
struct QuorumNode {
  std::int32_t id = -1;  // bootstrap servers, whose ids are not known: -1, -2, ...
  std::string host;
  std::uint16_t port = 0;
};

struct ClusterSettings {
  ProcessRole role = ProcessRole::combined;
  // One node of a cluster: role broker or controller, or combined with other voters.
  bool multi_node = false;
  // broker: where the controller listens (the first of controller.quorum.bootstrap.servers, or
  // of the voters).
  std::string controller_host;
  std::uint16_t controller_port = 0;
  std::string controller_listener;           // controller.listener.names' first name
  std::string inter_broker_listener;         // inter.broker.listener.name (default: first listener)
  std::int64_t session_timeout_ms = 1500;    // broker.session.timeout.ms
  std::int64_t heartbeat_interval_ms = 250;  // broker.heartbeat.interval.ms
  bool auto_leader_rebalance = true;         // auto.leader.rebalance.enable
  std::int64_t leader_imbalance_check_ms = 300'000;  // leader.imbalance.check.interval.seconds
  // The controller quorum (controller.quorum.*; Kafka's names and defaults).
  std::vector<QuorumNode> voters;     // sorted by id
  std::vector<QuorumNode> bootstrap;  // controller.quorum.bootstrap.servers
  std::int64_t election_timeout_ms = 1000;
  std::int64_t fetch_timeout_ms = 2000;
  std::int64_t election_backoff_max_ms = 1000;
  std::int64_t snapshot_bytes = 20 << 20;  // metadata.log.max.record.bytes.between.snapshots
  std::int64_t snapshot_interval_ms = 3'600'000;
  // Follower fetching and the ISR (replica.*; Kafka's names).
  std::int64_t replica_lag_time_max_ms = 30000;
  std::int32_t replica_fetch_wait_max_ms = 500;
  std::int32_t replica_fetch_max_bytes = 1 << 20;
  std::int32_t replica_fetch_response_max_bytes = 10 << 20;
  std::int32_t replica_fetch_backoff_ms = 100;
  // Replication throttles (bytes/s; INT64_MAX: none), Kafka's dynamic broker settings.
  std::int64_t leader_throttled_rate = INT64_MAX;    // leader.replication.throttled.rate
  std::int64_t follower_throttled_rate = INT64_MAX;  // follower.replication.throttled.rate
  // samsa.testing.replica.ack.from.memory (with samsa.testing.hooks)
  bool testing_ack_from_memory = false;
  // broker.rack: sent in the registration; placement spreads replicas over racks, and clients
  // see it in Metadata and DescribeCluster.
  std::optional<std::string> rack;
  // replica.selector.class = RackAwareReplicaSelector (KIP-392): a leader tells consumers in
  // another rack to fetch from an in-sync follower in theirs (PreferredReadReplica).
  bool rack_aware_selector = false;
};

struct BrokerSettings {
  std::int32_t node_id = 1;
  ClusterSettings cluster;
  // One node of a cluster rather than the single node.
  bool clustered() const { return cluster.multi_node; }
  // A cluster node with the broker role (process.roles has broker): it holds replicas, links
  // to the active controller, forwards changes to it and follows its partitions' leaders.
  bool cluster_broker() const {
    return cluster.multi_node && cluster.role != ProcessRole::controller;
  }
  // A cluster node with the controller role: a voter that serves the controller listeners.
  bool cluster_controller() const {
    return cluster.multi_node && cluster.role != ProcessRole::broker;
  }
  // Serves no clients (process.roles=controller).
  bool controller_only() const { return cluster.role == ProcessRole::controller; }
  std::string cluster_id;
  std::vector<Endpoint> listeners;
  // What Metadata tells clients: one per listener, in the same order (a dispatcher's listener
  // index names both).
  std::vector<Endpoint> advertised;
  // Each listener's TLS context, SASL mechanisms and users (same order as listeners).
  std::vector<ListenerSecurity> security;
  // A cluster node's own connections: to other brokers (inter.broker.listener.name) and to the
  // controller quorum (controller.listener.names); null where that listener is PLAINTEXT.
  std::shared_ptr<const net::ClientSecurity> inter_broker_client;
  std::shared_ptr<const net::ClientSecurity> controller_client;
  // authorizer.class.name set: every request is checked against the image's ACLs, with
  // super.users and allow.everyone.if.no.acl.found.
  bool authorizer_enabled = false;
  replication::AuthorizerOptions authorizer;
  net::BackendOptions backend;  // samsa.net.backend and samsa.dpdk.*
  bool auto_create_topics = true;
  bool delete_topic_enable = true;
  std::int32_t num_partitions = 1;
  std::int16_t default_replication_factor = 1;
  std::int32_t message_max_bytes = 1048588;
  std::int32_t fetch_max_bytes = 57671680;
  std::uint32_t socket_request_max_bytes = 104857600;
  std::int64_t connections_max_idle_ms = 600000;
  std::uint32_t queued_max_requests = 500;
  std::uint64_t queued_max_request_bytes = 256u << 20;
  std::int64_t max_partitions = 100000;
  std::int64_t max_partitions_per_request = 10000;
  std::int64_t log_max_open_files = 0;  // samsa.log.max.open.files (0: half the fd limit)
  std::int64_t reactor_stall_threshold_ns = 1'000'000;     // samsa.reactor.stall.threshold.us
  std::int64_t reactor_stall_watch_period_ns = 5'000'000;  // samsa.reactor.stall.watch.period.us
  std::int64_t reactor_turn_budget_ns = 500'000;           // samsa.reactor.turn.budget.us
  // samsa.transaction.version: the transaction.version feature level ApiVersions finalizes
  // (2: Java 4 clients end every transaction with an epoch bump, KIP-890 part 2).
  std::int16_t transaction_version = 2;
  replication::TopicDefaults topic_defaults;  // broker defaults of topic configs
  replication::PartitionOptions partition;    // idempotent producers
  std::int32_t fetch_session_slots = 1000;    // broker-wide
  bool testing_blocking_reads = false;        // samsa.testing.blocking.reads (with hooks)
  std::int64_t fetch_session_eviction_ms = 120000;
  std::int64_t producer_expiration_check_ms = 600'000;
  // The configuration these settings were made from (DescribeConfigs reads its layers).
  std::shared_ptr<const Config> config;
};

// The role as process.roles spells it ("broker", "controller", "broker,controller").
const char* process_roles_name(ProcessRole r);

// process.roles as a role; an error names an unknown role.
std::expected<ProcessRole, std::string> cluster_role(const Config& c);

// Validates and derives everything; errors name the key.
std::expected<std::shared_ptr<const BrokerSettings>, std::string> make_settings(
    const Config& c, const std::string& cluster_id);

}  // namespace samsa::daemon
