#include "daemon/settings.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <filesystem>

#include "base/log.h"

namespace samsa::daemon {

std::expected<std::vector<Endpoint>, std::string> parse_listeners(
    const std::vector<std::string>& items) {
  std::vector<Endpoint> out;
  for (const auto& item : items) {
    auto sep = item.find("://");
    if (sep == std::string::npos)
      return std::unexpected("listener " + item + ": expected NAME://host:port");
    Endpoint e;
    e.name = item.substr(0, sep);
    std::string rest = item.substr(sep + 3);
    std::string port;
    if (!rest.empty() && rest.front() == '[') {
      auto close = rest.find(']');
      if (close == std::string::npos || close + 1 >= rest.size() || rest[close + 1] != ':')
        return std::unexpected("listener " + item + ": bad IPv6 address");
      e.host = rest.substr(1, close - 1);
      port = rest.substr(close + 2);
    } else {
      auto colon = rest.rfind(':');
      if (colon == std::string::npos) return std::unexpected("listener " + item + ": no port");
      e.host = rest.substr(0, colon);
      port = rest.substr(colon + 1);
    }
    unsigned p = 0;
    auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (ec != std::errc() || ptr != port.data() + port.size() || p > 65535)
      return std::unexpected("listener " + item + ": bad port " + port);
    e.port = static_cast<std::uint16_t>(p);
    if (e.name.empty()) return std::unexpected("listener " + item + ": empty name");
    out.push_back(std::move(e));
  }
  return out;
}

const char* process_roles_name(ProcessRole r) {
  switch (r) {
    case ProcessRole::broker:
      return "broker";
    case ProcessRole::controller:
      return "controller";
    case ProcessRole::combined:
      return "broker,controller";
  }
  return "?";
}

std::expected<ProcessRole, std::string> cluster_role(const Config& c) {
  bool broker = false, controller = false;
  for (const auto& r : c.get_list("process.roles")) {
    if (r == "broker") {
      broker = true;
    } else if (r == "controller") {
      controller = true;
    } else {
      return std::unexpected("process.roles: unknown role \"" + r +
                             "\" (expected broker, controller or both)");
    }
  }
  if (broker == controller) return ProcessRole::combined;  // both (or empty: the default)
  return broker ? ProcessRole::broker : ProcessRole::controller;
}

namespace {

using Checked = std::expected<void, std::string>;

// controller.quorum.voters (id@host:port), sorted by id: read first, since whether a combined
// node is alone depends on them.
Checked read_voters(const Config& c, BrokerSettings& settings) {
  ClusterSettings& cl = settings.cluster;
  for (const auto& v : c.get_list("controller.quorum.voters")) {
    const std::string bad = "controller.quorum.voters: " + v + ": expected id@host:port";
    const auto at = v.find('@');
    if (at == std::string::npos) return std::unexpected(bad);
    int id = -1;
    auto [ptr, ec] = std::from_chars(v.data(), v.data() + at, id);
    auto ep = parse_listeners({"C://" + v.substr(at + 1)});
    if (ec != std::errc() || ptr != v.data() + at || id < 0 || !ep || ep->front().host.empty())
      return std::unexpected(bad);
    if (std::any_of(cl.voters.begin(), cl.voters.end(),
                    [&](const QuorumNode& n) { return n.id == id; }))
      return std::unexpected("controller.quorum.voters: node " + std::to_string(id) +
                             " is named twice");
    cl.voters.push_back({id, ep->front().host, ep->front().port});
  }
  std::sort(cl.voters.begin(), cl.voters.end(),
            [](const QuorumNode& a, const QuorumNode& b) { return a.id < b.id; });
  return {};
}

// Where a broker node first looks for the controller: the first bootstrap server, else the
// first voter.
Checked read_controller_address(const Config& c, ClusterSettings& cl) {
  auto servers = c.get_list("controller.quorum.bootstrap.servers");
  if (servers.empty()) {
    if (cl.voters.empty())
      return std::unexpected(
          "controller.quorum.bootstrap.servers: must name the controller (host:port) when "
          "process.roles=broker");
    cl.controller_host = cl.voters.front().host;
    cl.controller_port = cl.voters.front().port;
    return {};
  }
  auto ep = parse_listeners({"C://" + servers.front()});
  if (!ep || ep->front().host.empty())
    return std::unexpected("controller.quorum.bootstrap.servers: " + servers.front() +
                           ": expected host:port");
  cl.controller_host = ep->front().host;
  cl.controller_port = ep->front().port;
  return {};
}

// A cluster node's listeners: a controller serves only controller listeners, a broker none, a
// combined node both (its brokers' traffic on the others).
Checked check_cluster_listeners(const Config& c, BrokerSettings& s) {
  ClusterSettings& cl = s.cluster;
  const char* role = process_roles_name(cl.role);
  for (const auto& e : s.listeners) {
    if (cl.role == ProcessRole::controller && !e.controller)
      return std::unexpected("listeners: " + e.name +
                             " is not in controller.listener.names; a node with "
                             "process.roles=controller serves only controller listeners");
    if (cl.role == ProcessRole::broker && e.controller)
      return std::unexpected("listeners: " + e.name +
                             " is a controller listener (controller.listener.names); a node with "
                             "process.roles=broker must not listen on it");
  }
  if (cl.role == ProcessRole::controller) return {};
  const auto is = [&](bool controller) {
    return std::any_of(s.listeners.begin(), s.listeners.end(),
                       [&](const Endpoint& e) { return e.controller == controller; });
  };
  if (cl.role == ProcessRole::combined && !is(true))
    return std::unexpected(std::string("listeners: a node with process.roles=") + role +
                           " and other voters needs a controller listener (" +
                           cl.controller_listener + ")");
  if (!is(false)) return std::unexpected("listeners: no client listener left");
  const std::string ibl = c.get_string("inter.broker.listener.name");
  if (ibl.empty()) {
    cl.inter_broker_listener =
        std::find_if(s.listeners.begin(), s.listeners.end(), [](const Endpoint& e) {
          return !e.controller;
        })->name;
    return {};
  }
  cl.inter_broker_listener = ibl;
  auto it = std::find_if(s.listeners.begin(), s.listeners.end(),
                         [&](const Endpoint& e) { return e.name == ibl; });
  if (it == s.listeners.end())
    return std::unexpected("inter.broker.listener.name: " + ibl + " is not one of the listeners");
  if (it->controller)
    return std::unexpected("inter.broker.listener.name: " + ibl +
                           " is a controller listener; brokers replicate over a client listener");
  return {};
}

// broker.*, replica.* and the node's role: which listeners it opens, where its controller is.
Checked read_cluster(const Config& c, BrokerSettings& settings) {
  BrokerSettings* s = &settings;
  auto controller_names = c.get_list("controller.listener.names");
  for (auto& e : s->listeners)
    e.controller = std::find(controller_names.begin(), controller_names.end(), e.name) !=
                   controller_names.end();
  auto roles = cluster_role(c);
  if (!roles) return std::unexpected(roles.error());
  s->cluster.role = *roles;
  ClusterSettings& cl = s->cluster;
  cl.session_timeout_ms = c.get_int("broker.session.timeout.ms");
  cl.heartbeat_interval_ms = c.get_int("broker.heartbeat.interval.ms");
  cl.auto_leader_rebalance = c.get_bool("auto.leader.rebalance.enable");
  cl.leader_imbalance_check_ms = c.get_int("leader.imbalance.check.interval.seconds") * 1000;
  cl.replica_lag_time_max_ms = c.get_int("replica.lag.time.max.ms");
  cl.replica_fetch_wait_max_ms = static_cast<std::int32_t>(c.get_int("replica.fetch.wait.max.ms"));
  cl.replica_fetch_max_bytes = static_cast<std::int32_t>(c.get_int("replica.fetch.max.bytes"));
  cl.replica_fetch_response_max_bytes =
      static_cast<std::int32_t>(c.get_int("replica.fetch.response.max.bytes"));
  cl.replica_fetch_backoff_ms = static_cast<std::int32_t>(c.get_int("replica.fetch.backoff.ms"));
  cl.leader_throttled_rate = c.get_int("leader.replication.throttled.rate");
  cl.follower_throttled_rate = c.get_int("follower.replication.throttled.rate");
  cl.testing_ack_from_memory =
      c.get_bool("samsa.testing.hooks") && c.get_bool("samsa.testing.replica.ack.from.memory");
  if (auto rack = c.get_string("broker.rack"); !rack.empty()) cl.rack = std::move(rack);
  const std::string selector = c.get_string("replica.selector.class");
  if (selector == "org.apache.kafka.common.replica.RackAwareReplicaSelector") {
    cl.rack_aware_selector = true;
  } else if (!selector.empty()) {
    return std::unexpected("replica.selector.class: " + selector +
                           ": samsa's selector is Kafka's "
                           "org.apache.kafka.common.replica.RackAwareReplicaSelector; leave it "
                           "empty for leaders never to send consumers to a follower");
  }
  // Kafka's single-node configs name only this node as voter: it stays the single node.
  cl.multi_node = cl.role != ProcessRole::combined ||
                  std::any_of(cl.voters.begin(), cl.voters.end(),
                              [&](const QuorumNode& n) { return n.id != s->node_id; });
  if (!cl.multi_node) {
    // Only the client listeners serve Kafka clients; a CONTROLLER listener (Kafka's single-node
    // configs have one) is the quorum's and is not opened by a single node.
    std::erase_if(s->listeners, [](const Endpoint& e) { return e.controller; });
    if (s->listeners.empty()) return std::unexpected("listeners: no client listener left");
    return {};
  }
  const char* role = process_roles_name(cl.role);
  if (!c.is_set("node.id") && !c.is_set("broker.id"))
    return std::unexpected(std::string("node.id: must be set when process.roles=") + role);
  if (controller_names.empty())
    return std::unexpected(std::string("controller.listener.names: must be set when "
                                       "process.roles=") +
                           role);
  cl.controller_listener = controller_names.front();
  if (cl.heartbeat_interval_ms >= cl.session_timeout_ms)
    return std::unexpected("broker.heartbeat.interval.ms (" +
                           std::to_string(cl.heartbeat_interval_ms) +
                           ") must be below broker.session.timeout.ms (" +
                           std::to_string(cl.session_timeout_ms) + ")");
  if (auto r = check_cluster_listeners(c, *s); !r) return r;
  if (cl.role != ProcessRole::controller)
    if (auto r = read_controller_address(c, cl); !r) return r;
  return {};
}

// authorizer.class.name, super.users, allow.everyone.if.no.acl.found.
Checked read_authorizer(const Config& c, BrokerSettings& s) {
  const std::string cls = c.get_string("authorizer.class.name");
  if (cls == "org.apache.kafka.metadata.authorizer.StandardAuthorizer") {
    s.authorizer_enabled = true;
  } else if (!cls.empty()) {
    return std::unexpected("authorizer.class.name: " + cls +
                           ": samsa's authorizer is Kafka's StandardAuthorizer "
                           "(org.apache.kafka.metadata.authorizer.StandardAuthorizer); leave it "
                           "empty for no authorization");
  }
  auto su = replication::parse_super_users(c.get_string("super.users"));
  if (!su) return std::unexpected("super.users: " + su.error());
  s.authorizer.super_users = std::move(*su);
  s.authorizer.allow_everyone_if_no_acl_found = c.get_bool("allow.everyone.if.no.acl.found");
  return {};
}

// Each listener's protocol, TLS context and SASL users (daemon/listener_security.h).
Checked read_security(const Config& c, BrokerSettings& s) {
  auto sec = read_listener_security(c, s.listeners);
  if (!sec) return std::unexpected(sec.error());
  s.security = std::move(*sec);
  if (auto a = read_authorizer(c, s); !a) return a;
  if (!s.clustered()) return {};
  // How this node reaches the others: brokers on the inter-broker listener, the quorum on the
  // controller listener.
  const ClusterSettings& cl = s.cluster;
  if (!cl.inter_broker_listener.empty()) {
    auto ib = read_client_security(c, cl.inter_broker_listener, false,
                                   "sasl.mechanism.inter.broker.protocol");
    if (!ib) return std::unexpected(ib.error());
    s.inter_broker_client = std::move(*ib);
  }
  if (!cl.controller_listener.empty()) {
    auto ctl =
        read_client_security(c, cl.controller_listener, true, "sasl.mechanism.controller.protocol");
    if (!ctl) return std::unexpected(ctl.error());
    s.controller_client = std::move(*ctl);
  }
  return {};
}

// controller.quorum.*: the bootstrap servers (host:port), Kafka's timeouts and the snapshot
// settings (the voters: read_voters).
Checked read_quorum(const Config& c, BrokerSettings& settings) {
  ClusterSettings& cl = settings.cluster;
  for (const auto& b : c.get_list("controller.quorum.bootstrap.servers")) {
    auto ep = parse_listeners({"C://" + b});
    if (!ep || ep->front().host.empty())
      return std::unexpected("controller.quorum.bootstrap.servers: " + b + ": expected host:port");
    cl.bootstrap.push_back(
        {-1 - static_cast<std::int32_t>(cl.bootstrap.size()), ep->front().host, ep->front().port});
  }
  if (settings.cluster_controller() && !cl.voters.empty() &&
      std::none_of(cl.voters.begin(), cl.voters.end(),
                   [&](const QuorumNode& n) { return n.id == settings.node_id; }))
    return std::unexpected("controller.quorum.voters: this controller (node.id " +
                           std::to_string(settings.node_id) + ") is not one of them");
  if (cl.role == ProcessRole::broker && cl.voters.empty() && cl.bootstrap.empty())
    return std::unexpected(
        "controller.quorum.bootstrap.servers or controller.quorum.voters: must name the "
        "controllers when process.roles=broker");
  cl.election_timeout_ms = c.get_int("controller.quorum.election.timeout.ms");
  cl.fetch_timeout_ms = c.get_int("controller.quorum.fetch.timeout.ms");
  cl.election_backoff_max_ms = c.get_int("controller.quorum.election.backoff.max.ms");
  cl.snapshot_bytes = c.get_int("metadata.log.max.record.bytes.between.snapshots");
  cl.snapshot_interval_ms = c.get_int("metadata.log.max.snapshot.interval.ms");
  return {};
}

// samsa.net.backend and, for dpdk, samsa.dpdk.* (the stack has one address: listeners name it).
Checked read_backend(const Config& c, BrokerSettings& settings) {
  BrokerSettings* s = &settings;
  s->backend.name = c.get_string("samsa.net.backend");
  if (s->backend.name == "dpdk") {
    auto& d = s->backend.dpdk;
    d.eal_args = c.get_string("samsa.dpdk.eal.args");
    d.ip = c.get_string("samsa.dpdk.ip");
    d.netmask = c.get_string("samsa.dpdk.netmask");
    d.gateway = c.get_string("samsa.dpdk.gateway");
    d.mtu = static_cast<std::uint32_t>(c.get_int("samsa.dpdk.mtu"));
    d.idle_poll_us = static_cast<std::uint32_t>(c.get_int("samsa.dpdk.idle.poll.us"));
    d.mbufs = static_cast<std::uint32_t>(c.get_int("samsa.dpdk.mbufs"));
    d.tx_zero_copy = c.get_bool("samsa.dpdk.tx.zero.copy");
    // Next to the data it serves: a restart on the same data finds its predecessor's clients.
    if (const auto dirs = c.log_dirs(); !dirs.empty())
      d.connection_journal = (std::filesystem::path(dirs.front()) / "dpdk-connections").string();
    in_addr a{};
    if (d.eal_args.empty())
      return std::unexpected(
          "samsa.dpdk.eal.args: empty; samsa.net.backend=dpdk needs the device and memory, e.g. "
          "--no-huge -m 512 --vdev=net_af_xdp0,iface=eth1,start_queue=0,queue_count=1");
    if (inet_pton(AF_INET, d.ip.c_str(), &a) != 1)
      return std::unexpected("samsa.dpdk.ip: \"" + d.ip +
                             "\" is not an IPv4 address (samsa.net.backend=dpdk needs one)");
    if (inet_pton(AF_INET, d.netmask.c_str(), &a) != 1)
      return std::unexpected("samsa.dpdk.netmask: \"" + d.netmask + "\" is not a netmask");
    if (!d.gateway.empty() && inet_pton(AF_INET, d.gateway.c_str(), &a) != 1)
      return std::unexpected("samsa.dpdk.gateway: \"" + d.gateway + "\" is not an IPv4 address");
    // The userspace stack has one address; a listener names it or every address.
    for (auto& e : s->listeners) {
      if (e.protocol == SecurityProtocol::ssl || e.protocol == SecurityProtocol::sasl_ssl)
        return std::unexpected("listeners: " + e.name + " is " +
                               security_protocol_name(e.protocol) +
                               ", and TLS is not served on samsa.net.backend=dpdk (the "
                               "userspace stack has no TLS): use the uring backend, or a "
                               "PLAINTEXT or SASL_PLAINTEXT listener");
      if (e.host.empty() || e.host == "0.0.0.0") continue;
      if (e.host != d.ip)
        return std::unexpected("listeners: " + e.name + " listens on " + e.host +
                               ", but with samsa.net.backend=dpdk the broker's only address "
                               "is samsa.dpdk.ip " +
                               d.ip);
    }
  }
  return {};
}

// A listener on every interface advertises the host name, as Kafka does, if it resolves here;
// else localhost, which local clients can use (Kafka's shipped config advertises localhost for
// the same reason: containers and fresh VMs often have a name nothing resolves), or 127.0.0.1
// where even localhost does not resolve (a minimal root without /etc/hosts: clients given a
// name they cannot resolve cannot connect at all). Looked up once per process: a slow resolver
// must not slow every settings rebuild.
const std::string& default_advertised_host() {
  static const std::string host = [] {
    auto resolves = [](const char* n, int* rc) {
      addrinfo hints{};
      hints.ai_socktype = SOCK_STREAM;
      addrinfo* res = nullptr;
      *rc = getaddrinfo(n, nullptr, &hints, &res);
      if (res) freeaddrinfo(res);
      return *rc == 0;
    };
    int rc = 0, local_rc = 0;
    char name[256] = {};
    const bool named = gethostname(name, sizeof name - 1) == 0 && name[0] != '\0';
    if (named && resolves(name, &rc)) return std::string(name);
    const std::string local = resolves("localhost", &local_rc) ? "localhost" : "127.0.0.1";
    LOG_WARN(
        "this machine's host name %s does not resolve here (%s): listeners without a host "
        "advertise %s, which only local clients can reach; set advertised.listeners "
        "(e.g. PLAINTEXT://<an address clients reach>:9092) for the others",
        named ? name : "(none)", named ? gai_strerror(rc) : "gethostname failed", local.c_str());
    return local;
  }();
  return host;
}

// What Metadata tells clients: for each listener, its entry of advertised.listeners (matched by
// name, as Kafka does) or the listener itself, the host filled in.
Checked read_advertised(const Config& c, BrokerSettings& settings) {
  BrokerSettings* s = &settings;
  s->advertised = s->listeners;
  if (c.is_set("advertised.listeners")) {
    auto a = parse_listeners(c.get_list("advertised.listeners"));
    if (!a) return std::unexpected("advertised.listeners: " + a.error());
    for (const auto& e : *a) {
      auto it = std::find_if(s->advertised.begin(), s->advertised.end(),
                             [&](const Endpoint& l) { return l.name == e.name; });
      if (it == s->advertised.end()) {
        // A CONTROLLER listener that a single node does not open (read_cluster).
        if (std::ranges::count(c.get_list("controller.listener.names"), e.name)) continue;
        return std::unexpected("advertised.listeners: " + e.name + " is not one of the listeners");
      }
      it->host = e.host;
      it->port = e.port;
    }
  }
  for (auto& e : s->advertised) {
    if ((e.host.empty() || e.host == "0.0.0.0") && s->backend.name == "dpdk") {
      e.host = s->backend.dpdk.ip;  // the kernel's host name would point clients past the stack
    } else if (e.host.empty() || e.host == "0.0.0.0" || e.host == "::") {
      e.host = default_advertised_host();
    }
  }
  return {};
}

// The broker-wide defaults of topic configs (log.* and friends under their topic names).
void read_topic_defaults(const Config& c, BrokerSettings& s) {
  auto& d = s.topic_defaults;
  d["cleanup.policy"] = c.get_string("log.cleanup.policy");
  d["delete.retention.ms"] = std::to_string(c.get_int("log.cleaner.delete.retention.ms"));
  d["min.cleanable.dirty.ratio"] = c.get_string("log.cleaner.min.cleanable.ratio");
  d["min.compaction.lag.ms"] = std::to_string(c.get_int("log.cleaner.min.compaction.lag.ms"));
  d["max.compaction.lag.ms"] = std::to_string(c.get_int("log.cleaner.max.compaction.lag.ms"));
  d["file.delete.delay.ms"] = std::to_string(c.get_int("log.segment.delete.delay.ms"));
  d["flush.messages"] = std::to_string(c.get_int("log.flush.interval.messages"));
  if (c.get_string("log.flush.interval.ms") != "")
    d["flush.ms"] = std::to_string(c.get_int("log.flush.interval.ms"));
  d["index.interval.bytes"] = std::to_string(c.get_int("log.index.interval.bytes"));
  d["max.message.bytes"] = std::to_string(c.get_int("message.max.bytes"));
  d["message.timestamp.type"] = c.get_string("log.message.timestamp.type");
  d["message.timestamp.before.max.ms"] =
      std::to_string(c.get_int("log.message.timestamp.before.max.ms"));
  d["message.timestamp.after.max.ms"] =
      std::to_string(c.get_int("log.message.timestamp.after.max.ms"));
  d["min.insync.replicas"] = std::to_string(c.get_int("min.insync.replicas"));
  d["retention.bytes"] = std::to_string(c.get_int("log.retention.bytes"));
  d["retention.ms"] = std::to_string(c.log_retention_ms());
  d["segment.bytes"] = std::to_string(c.get_int("log.segment.bytes"));
  d["segment.index.bytes"] = std::to_string(c.get_int("log.index.size.max.bytes"));
  d["segment.ms"] = std::to_string(c.log_roll_ms());
}

}  // namespace

std::expected<std::shared_ptr<const BrokerSettings>, std::string> make_settings(
    const Config& c, const std::string& cluster_id) {
  auto s = std::make_shared<BrokerSettings>();
  s->node_id = static_cast<std::int32_t>(c.get_int("node.id"));
  if (c.is_set("broker.id") && !c.is_set("node.id"))
    s->node_id = static_cast<std::int32_t>(c.get_int("broker.id"));
  s->cluster_id = cluster_id;
  auto l = parse_listeners(c.get_list("listeners"));
  if (!l) return std::unexpected("listeners: " + l.error());
  if (l->empty()) return std::unexpected("listeners: at least one listener is needed");
  s->listeners = std::move(*l);
  for (auto step :
       {&read_voters, &read_cluster, &read_security, &read_quorum, &read_backend, &read_advertised})
    if (auto r = step(c, *s); !r) return std::unexpected(r.error());
  s->auto_create_topics = c.get_bool("auto.create.topics.enable");
  s->delete_topic_enable = c.get_bool("delete.topic.enable");
  s->num_partitions = static_cast<std::int32_t>(c.get_int("num.partitions"));
  s->default_replication_factor =
      static_cast<std::int16_t>(c.get_int("default.replication.factor"));
  s->message_max_bytes = static_cast<std::int32_t>(c.get_int("message.max.bytes"));
  s->fetch_max_bytes = static_cast<std::int32_t>(c.get_int("fetch.max.bytes"));
  s->socket_request_max_bytes = static_cast<std::uint32_t>(c.get_int("socket.request.max.bytes"));
  s->connections_max_idle_ms = c.get_int("connections.max.idle.ms");
  s->queued_max_requests = static_cast<std::uint32_t>(c.get_int("queued.max.requests"));
  auto qb = c.get_int("queued.max.request.bytes");
  s->queued_max_request_bytes = qb < 0 ? (256ull << 20) : static_cast<std::uint64_t>(qb);

  s->max_partitions = c.get_int("samsa.max.partitions");
  s->max_partitions_per_request = c.get_int("samsa.max.partitions.per.request");
  s->log_max_open_files = c.get_int("samsa.log.max.open.files");
  s->reactor_stall_threshold_ns = c.get_int("samsa.reactor.stall.threshold.us") * 1000;
  s->reactor_turn_budget_ns = c.get_int("samsa.reactor.turn.budget.us") * 1000;
  s->reactor_stall_watch_period_ns = c.get_int("samsa.reactor.stall.watch.period.us") * 1000;
  s->config = std::make_shared<const Config>(c);
  s->partition.producer_expiration_ms = c.get_int("producer.id.expiration.ms");
  s->partition.txn_verification = c.get_bool("transaction.partition.verification.enable");
  s->transaction_version = static_cast<std::int16_t>(c.get_int("samsa.transaction.version"));
  s->partition.sequence_check =
      !c.get_bool("samsa.testing.hooks") || c.get_bool("samsa.testing.producer.sequence.check");
  s->producer_expiration_check_ms = c.get_int("producer.id.expiration.check.interval.ms");
  s->testing_blocking_reads =
      c.get_bool("samsa.testing.hooks") && c.get_bool("samsa.testing.blocking.reads");
  s->fetch_session_slots =
      static_cast<std::int32_t>(c.get_int("max.incremental.fetch.session.cache.slots"));
  s->fetch_session_eviction_ms = c.get_int("samsa.fetch.session.eviction.ms");

  read_topic_defaults(c, *s);
  if (auto bad = replication::validate_topic_config(
          "min.cleanable.dirty.ratio", s->topic_defaults["min.cleanable.dirty.ratio"])) {
    return std::unexpected("log.cleaner.min.cleanable.ratio: " + *bad);
  }
  return std::shared_ptr<const BrokerSettings>(std::move(s));
}

}  // namespace samsa::daemon
