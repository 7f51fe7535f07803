#include "daemon/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "daemon/settings.h"
#include "tests/unit/tls/test_certs.h"

namespace samsa::daemon {
namespace {

TEST(Properties, JavaSyntax) {
  auto p = parse_properties(
      "# comment\n"
      "! also a comment\n"
      "a=1\n"
      "  b : two  \n"
      "c three\n"
      "d=con\\\n"
      "    tinued\n"
      "e=tab\\tand\\u0041\n"
      "f\\=g=h\n"
      "empty=\n");
  ASSERT_TRUE(p.has_value()) << p.error();
  EXPECT_EQ(p->at("a"), "1");
  EXPECT_EQ(p->at("b"), "two");
  EXPECT_EQ(p->at("c"), "three");
  EXPECT_EQ(p->at("d"), "continued");
  EXPECT_EQ(p->at("e"), "tab\tandA");
  EXPECT_EQ(p->at("f=g"), "h");
  EXPECT_EQ(p->at("empty"), "");
  EXPECT_EQ(p->size(), 7u);
}

struct TempFile {
  std::string path;
  explicit TempFile(const std::string& text) {
    char tmpl[] = "/tmp/samsa-config-XXXXXX";
    int fd = mkstemp(tmpl);
    path = tmpl;
    std::ofstream(path) << text;
    close(fd);
  }
  ~TempFile() { unlink(path.c_str()); }
};

TEST(Config, PrecedenceOverrideDynamicFileDefault) {
  TempFile f("num.partitions=3\nlog.segment.bytes=1000\nsomething.unknown=1\n");
  std::vector<std::string> warnings;
  auto c = Config::load(f.path, {"num.partitions=5"}, &warnings);
  ASSERT_TRUE(c.has_value()) << c.error();
  EXPECT_EQ(c->get_int("num.partitions"), 5);
  EXPECT_EQ(c->source("num.partitions"), Config::Layer::override_);
  EXPECT_EQ(c->get_int("log.segment.bytes"), 1000);
  EXPECT_EQ(c->source("log.segment.bytes"), Config::Layer::file);
  EXPECT_EQ(c->get_int("message.max.bytes"), 1048588);
  EXPECT_EQ(c->source("message.max.bytes"), Config::Layer::defaults);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("something.unknown"), std::string::npos);

  ASSERT_TRUE(c->set_dynamic("log.segment.bytes", "2000").has_value());
  EXPECT_EQ(c->get_int("log.segment.bytes"), 2000);
  ASSERT_TRUE(c->set_dynamic("num.partitions", "9").has_value());
  EXPECT_EQ(c->get_int("num.partitions"), 5) << "--override beats dynamic settings";
  EXPECT_FALSE(c->set_dynamic("listeners", "PLAINTEXT://:1").has_value()) << "static key";
}

// Kafka's two dynamic layers: this broker's own values beat the cluster-wide defaults, and
// --override still beats both (DESIGN.md decision 4).
TEST(Config, DynamicLayersBrokerOverClusterDefault) {
  TempFile f("log.retention.ms=500\n");
  auto c = Config::load(f.path, {"message.max.bytes=4000"}, nullptr);
  ASSERT_TRUE(c.has_value()) << c.error();
  using L = Config::Layer;
  ASSERT_TRUE(c->set_dynamic("log.retention.ms", "2000", L::dynamic_default).has_value());
  EXPECT_EQ(c->get_int("log.retention.ms"), 2000);
  EXPECT_EQ(c->source("log.retention.ms"), L::dynamic_default);
  ASSERT_TRUE(c->set_dynamic("log.retention.ms", "1000", L::dynamic).has_value());
  EXPECT_EQ(c->get_int("log.retention.ms"), 1000);
  EXPECT_EQ(c->source("log.retention.ms"), L::dynamic);
  EXPECT_EQ(c->layer_value("log.retention.ms", L::dynamic_default), "2000");
  EXPECT_EQ(c->layer_value("log.retention.ms", L::file), "500");
  EXPECT_FALSE(c->layer_value("log.retention.ms", L::defaults).has_value());
  ASSERT_TRUE(c->set_dynamic("log.retention.ms", std::nullopt, L::dynamic).has_value());
  EXPECT_EQ(c->get_int("log.retention.ms"), 2000) << "back to the cluster default";
  ASSERT_TRUE(c->set_dynamic("message.max.bytes", "9000", L::dynamic_default).has_value());
  EXPECT_EQ(c->get_int("message.max.bytes"), 4000) << "--override beats dynamic settings";
  EXPECT_FALSE(c->set_dynamic("log.retention.ms", "1", L::file).has_value()) << "not dynamic";
  EXPECT_EQ(c->layer_values(L::dynamic_default).size(), 2u);
}

// What IncrementalAlterConfigs answers for a broker setting, in Kafka's words.
TEST(Config, CheckDynamicSpeaksKafka) {
  EXPECT_EQ(Config::check_dynamic("log.dirs", "/x"),
            "Cannot update these configs dynamically: Set(log.dirs)");
  EXPECT_EQ(Config::check_dynamic("message.max.bytes", "abc"),
            "Invalid value abc for configuration message.max.bytes: Not a number of type INT");
  EXPECT_EQ(
      Config::check_dynamic("log.flush.interval.messages", "0"),
      "Invalid value 0 for configuration log.flush.interval.messages: Value must be at least 1");
  EXPECT_EQ(
      Config::check_dynamic("log.message.timestamp.type", "Now"),
      "Invalid value Now for configuration log.message.timestamp.type: String must be one of: "
      "CreateTime, LogAppendTime");
  EXPECT_EQ(Config::check_dynamic("no.such.key", "1"), "Unknown broker config name: no.such.key");
  EXPECT_FALSE(Config::check_dynamic("log.retention.ms", "1000").has_value());
  EXPECT_FALSE(Config::check_dynamic("log.retention.ms", std::nullopt).has_value());
  EXPECT_TRUE(Config::check_dynamic("listeners", std::nullopt).has_value()) << "static";
}

// The replication throttles' rates: Kafka's LONG settings, at least 0, Long.MAX_VALUE (no
// throttle) by default, dynamic per broker and cluster-wide.
TEST(Config, ReplicationThrottledRates) {
  auto c = Config::load("", {}, nullptr);
  ASSERT_TRUE(c.has_value());
  for (const char* key :
       {"leader.replication.throttled.rate", "follower.replication.throttled.rate"}) {
    const ConfigKey* k = Config::find_key(key);
    ASSERT_NE(k, nullptr) << key;
    EXPECT_TRUE(k->dynamic);
    EXPECT_EQ(k->type, ConfigType::int64);
    EXPECT_EQ(c->get_int(key), INT64_MAX);
    EXPECT_FALSE(Config::check_dynamic(key, "0").has_value()) << "0 is a valid throttle";
    EXPECT_FALSE(Config::check_dynamic(key, "9223372036854775807").has_value());
    EXPECT_EQ(
        Config::check_dynamic(key, "-1"),
        "Invalid value -1 for configuration " + std::string(key) + ": Value must be at least 0");
    EXPECT_EQ(
        Config::check_dynamic(key, "10MB"),
        "Invalid value 10MB for configuration " + std::string(key) + ": Not a number of type LONG");
  }
  using L = Config::Layer;
  ASSERT_TRUE(c->set_dynamic("follower.replication.throttled.rate", "20000000", L::dynamic_default)
                  .has_value());
  ASSERT_TRUE(
      c->set_dynamic("follower.replication.throttled.rate", "10000000", L::dynamic).has_value());
  auto s = make_settings(*c, "cid");
  ASSERT_TRUE(s.has_value()) << s.error();
  EXPECT_EQ((*s)->cluster.follower_throttled_rate, 10'000'000) << "the broker's own wins";
  EXPECT_EQ((*s)->cluster.leader_throttled_rate, INT64_MAX);
}

// Settings carry a snapshot of the configuration they were made from (DescribeConfigs reads its
// layers) and the partition limits.
TEST(Settings, CarryTheConfigAndThePartitionLimits) {
  auto c = Config::load("", {"samsa.max.partitions=123", "samsa.max.partitions.per.request=45"},
                        nullptr);
  ASSERT_TRUE(c.has_value());
  auto s = make_settings(*c, "cid");
  ASSERT_TRUE(s.has_value()) << s.error();
  EXPECT_EQ((*s)->max_partitions, 123);
  EXPECT_EQ((*s)->max_partitions_per_request, 45);
  ASSERT_NE((*s)->config, nullptr);
  EXPECT_EQ((*s)->config->source("samsa.max.partitions"), Config::Layer::override_);
  auto d = Config::load("", {}, nullptr);
  auto sd = make_settings(*d, "cid");
  EXPECT_EQ((*sd)->max_partitions, 100000) << "documented default";
  EXPECT_EQ((*sd)->max_partitions_per_request, 10000);
}

TEST(Config, InvalidValuesNameTheKey) {
  for (const char* o : {"num.partitions=zero", "num.partitions=0", "auto.create.topics.enable=yes",
                        "samsa.net.backend=carrier-pigeon", "log.segment.bytes=13"}) {
    auto c = Config::load("", {o}, nullptr);
    ASSERT_FALSE(c.has_value()) << o;
    std::string key(o, std::string_view(o).find('='));
    EXPECT_NE(c.error().find(key), std::string::npos) << c.error();
  }
  EXPECT_FALSE(Config::load("/nonexistent/samsa.properties", {}, nullptr).has_value());
}

TEST(Config, ReloadReportsChangesAndKeepsOldValuesOnError) {
  TempFile f("num.partitions=3\n");
  auto c = Config::load(f.path, {}, nullptr);
  ASSERT_TRUE(c.has_value());
  std::ofstream(f.path) << "num.partitions=4\n";
  auto changed = c->reload_file(nullptr);
  ASSERT_TRUE(changed.has_value());
  EXPECT_EQ(*changed, std::vector<std::string>{"num.partitions"});
  EXPECT_EQ(c->get_int("num.partitions"), 4);
  std::ofstream(f.path) << "num.partitions=-1\n";
  EXPECT_FALSE(c->reload_file(nullptr).has_value());
  EXPECT_EQ(c->get_int("num.partitions"), 4);
}

TEST(Config, KafkaRetentionFallbacks) {
  EXPECT_EQ(Config::load("", {}, nullptr)->log_retention_ms(), 168LL * 3600 * 1000);
  EXPECT_EQ(Config::load("", {"log.retention.hours=1"}, nullptr)->log_retention_ms(), 3600000);
  EXPECT_EQ(Config::load("", {"log.retention.minutes=2", "log.retention.hours=1"}, nullptr)
                ->log_retention_ms(),
            120000);
  EXPECT_EQ(Config::load("", {"log.retention.ms=5", "log.retention.minutes=2"}, nullptr)
                ->log_retention_ms(),
            5);
  EXPECT_EQ(Config::load("", {"log.retention.ms=-1"}, nullptr)->log_retention_ms(), -1);
}

TEST(Settings, ListenersAndControllerListenersAreSeparated) {
  auto c = Config::load("",
                        {"listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://:9093,V6://[::1]:19092",
                         "controller.listener.names=CONTROLLER",
                         "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:"
                         "PLAINTEXT,V6:PLAINTEXT"},
                        nullptr);
  ASSERT_TRUE(c.has_value());
  auto s = make_settings(*c, "cluster");
  ASSERT_TRUE(s.has_value()) << s.error();
  ASSERT_EQ((*s)->listeners.size(), 2u);
  EXPECT_EQ((*s)->listeners[0].host, "127.0.0.1");
  EXPECT_EQ((*s)->listeners[0].port, 9092);
  EXPECT_EQ((*s)->listeners[1].host, "::1");
  EXPECT_EQ((*s)->advertised[0].host, "127.0.0.1");
  EXPECT_FALSE(parse_listeners({"PLAINTEXT://host"}).has_value());
  EXPECT_FALSE(parse_listeners({"PLAINTEXT://host:99999"}).has_value());
  EXPECT_FALSE(parse_listeners({"host:9092"}).has_value());
}

std::string settings_error(std::vector<std::string> overrides) {
  auto c = Config::load("", overrides, nullptr);
  if (!c) return "config: " + c.error();
  auto s = make_settings(*c, "cid");
  return s ? std::string() : s.error();
}

// Listener security: each listener's protocol from its name or the map, and every setting that
// cannot be served stops the start with the key named.
TEST(Settings, ListenerSecurityProtocolsAndTheirErrors) {
  auto c = Config::load("",
                        {"listeners=PLAINTEXT://:9092,INTERNAL://:9093,SASL_PLAINTEXT://:9094",
                         "listener.security.protocol.map=INTERNAL:SASL_PLAINTEXT,"
                         "SASL_PLAINTEXT:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT",
                         "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
                         "listener.name.internal.plain.sasl.jaas.config=org.apache.kafka.common."
                         "security.plain.PlainLoginModule required user_a=\"pw\";",
                         "listener.name.internal.connections.max.reauth.ms=60000"},
                        nullptr);
  ASSERT_TRUE(c.has_value()) << c.error();
  auto s = make_settings(*c, "cid");
  ASSERT_TRUE(s.has_value()) << s.error();
  const auto& sec = (*s)->security;
  ASSERT_EQ(sec.size(), 3u);
  EXPECT_EQ((*s)->listeners[1].protocol, SecurityProtocol::sasl_plaintext);
  EXPECT_EQ(sec[0].protocol, SecurityProtocol::plaintext);
  EXPECT_TRUE(sec[1].sasl());
  EXPECT_EQ(sec[1].reauth_ms, 60000);
  EXPECT_EQ(sec[2].reauth_ms, 0);
  ASSERT_TRUE(sec[1].plain_users);
  EXPECT_EQ(sec[1].plain_users->at("a"), "pw");
  EXPECT_TRUE(sec[2].plain_users->empty());  // no JAAS config for that listener
  EXPECT_TRUE(Config::sensitive("listener.name.internal.plain.sasl.jaas.config"));
  EXPECT_TRUE(Config::sensitive("ssl.key.password"));
  EXPECT_FALSE(Config::sensitive("ssl.keystore.location"));
  ASSERT_NE(Config::find_key("listener.name.x.ssl.keystore.location"), nullptr);
  EXPECT_EQ(Config::find_key("listener.name.x.log.dirs"), nullptr);

  EXPECT_NE(settings_error({"listeners=OTHER://:9092"}).find("OTHER has no security protocol"),
            std::string::npos);
  EXPECT_NE(settings_error({"listeners=X://:9092", "listener.security.protocol.map=X:TLS"})
                .find("expected LISTENER_NAME:PROTOCOL"),
            std::string::npos);
  EXPECT_NE(settings_error({"listeners=SSL://:9092"}).find("ssl.keystore.location: must be set"),
            std::string::npos);
  EXPECT_NE(
      settings_error({"listeners=SSL://:9092", "ssl.keystore.type=JKS", "ssl.keystore.location=/x"})
          .find("ssl.keystore.type: JKS is not served"),
      std::string::npos);
  EXPECT_NE(settings_error({"listeners=SSL://:9092", "ssl.keystore.location=/nonexistent.pem"})
                .find("listener SSL: "),
            std::string::npos);
  EXPECT_NE(settings_error({"listeners=SASL_PLAINTEXT://:9092", "sasl.enabled.mechanisms=GSSAPI"})
                .find("GSSAPI is not served"),
            std::string::npos);
  EXPECT_NE(settings_error({"listeners=SASL_PLAINTEXT://:9092",
                            "listener.name.sasl_plaintext.plain.sasl.jaas.config=nonsense",
                            "sasl.enabled.mechanisms=PLAIN"})
                .find("plain.sasl.jaas.config"),
            std::string::npos);
  // A keystore that works (inline PEM), so what stops the start is the backend.
  net::tls::testing::TestCa ca;
  auto id = ca.issue({"CN=broker", {"localhost"}, {}, false, 1});
  const std::vector<std::string> ssl = {"listeners=SSL://10.0.0.1:9092",
                                        "ssl.keystore.key=" + id.key_pem,
                                        "ssl.keystore.certificate.chain=" + id.cert_pem};
  EXPECT_EQ(settings_error(ssl), "");
  auto dpdk = ssl;
  for (const char* kv :
       {"samsa.net.backend=dpdk", "samsa.dpdk.eal.args=--no-huge", "samsa.dpdk.ip=10.0.0.1"})
    dpdk.emplace_back(kv);
  EXPECT_NE(settings_error(dpdk).find("TLS is not served on samsa.net.backend=dpdk"),
            std::string::npos)
      << settings_error(dpdk);
}

// process.roles: both (or absent) is the single node as always; broker or controller alone need
// the cluster settings, and inconsistent combinations stop the start with the key named.
// broker.rack goes in the registration; replica.selector.class takes Kafka's
// RackAwareReplicaSelector (KIP-392) or nothing.
TEST(Settings, RackAndReplicaSelector) {
  auto d = make_settings(*Config::load("", {}, nullptr), "cid");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ((*d)->cluster.rack, std::nullopt);
  EXPECT_FALSE((*d)->cluster.rack_aware_selector) << "Kafka's default: leaders serve";
  auto c = Config::load(
      "",
      {"broker.rack=eu-west-1a",
       "replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector"},
      nullptr);
  auto s = make_settings(*c, "cid");
  ASSERT_TRUE(s.has_value()) << s.error();
  EXPECT_EQ((*s)->cluster.rack, "eu-west-1a");
  EXPECT_TRUE((*s)->cluster.rack_aware_selector);
  EXPECT_NE(
      settings_error({"replica.selector.class=com.example.Nearest"}).find("replica.selector.class"),
      std::string::npos);
}

TEST(Settings, ClusterRolesAndTheirInconsistencies) {
  // Kafka's single-node config: the CONTROLLER listener is accepted and not opened.
  auto c = Config::load("",
                        {"process.roles=broker,controller", "controller.listener.names=CONTROLLER",
                         "listeners=PLAINTEXT://:9092,CONTROLLER://:9093",
                         "controller.quorum.bootstrap.servers=localhost:9093"},
                        nullptr);
  ASSERT_TRUE(c.has_value());
  auto s = make_settings(*c, "cid");
  ASSERT_TRUE(s.has_value()) << s.error();
  EXPECT_FALSE((*s)->clustered());
  ASSERT_EQ((*s)->listeners.size(), 1u);
  EXPECT_EQ((*s)->listeners[0].name, "PLAINTEXT");

  const std::vector<std::string> broker = {
      "process.roles=broker", "node.id=2", "controller.listener.names=CONTROLLER",
      "listeners=PLAINTEXT://127.0.0.1:9092", "controller.quorum.bootstrap.servers=ctl:9093"};
  auto b = Config::load("", broker, nullptr);
  auto bs = make_settings(*b, "cid");
  ASSERT_TRUE(bs.has_value()) << bs.error();
  EXPECT_EQ((*bs)->cluster.role, ProcessRole::broker);
  EXPECT_EQ((*bs)->cluster.controller_host, "ctl");
  EXPECT_EQ((*bs)->cluster.controller_port, 9093);
  EXPECT_EQ((*bs)->cluster.inter_broker_listener, "PLAINTEXT");
  EXPECT_EQ((*bs)->cluster.session_timeout_ms, 1500) << "samsa's default: failover within 2 s";
  EXPECT_EQ((*bs)->cluster.heartbeat_interval_ms, 250);

  auto with = [&](std::vector<std::string> base, std::vector<std::string> more) {
    for (auto& m : more)
      base.push_back(std::move(m));
    return settings_error(base);
  };
  EXPECT_NE(settings_error({"process.roles=broker,gateway"}).find("process.roles"),
            std::string::npos);
  EXPECT_NE(with({"process.roles=broker", "controller.listener.names=CONTROLLER",
                  "controller.quorum.bootstrap.servers=ctl:9093"},
                 {})
                .find("node.id"),
            std::string::npos);
  EXPECT_NE(with(broker, {"controller.quorum.bootstrap.servers="})
                .find("controller.quorum.bootstrap.servers"),
            std::string::npos);
  EXPECT_NE(with(broker, {"controller.listener.names="}).find("controller.listener.names"),
            std::string::npos);
  EXPECT_NE(with(broker, {"listeners=PLAINTEXT://:9092,CONTROLLER://:9093"})
                .find("is a controller listener"),
            std::string::npos);
  EXPECT_NE(
      with(broker, {"inter.broker.listener.name=INTERNAL"}).find("inter.broker.listener.name"),
      std::string::npos);
  EXPECT_NE(
      with(broker, {"broker.heartbeat.interval.ms=2000"}).find("broker.heartbeat.interval.ms"),
      std::string::npos);
  const std::vector<std::string> controller = {"process.roles=controller", "node.id=100",
                                               "controller.listener.names=CONTROLLER",
                                               "listeners=CONTROLLER://127.0.0.1:9093"};
  auto cs = make_settings(*Config::load("", controller, nullptr), "cid");
  ASSERT_TRUE(cs.has_value()) << cs.error();
  EXPECT_EQ((*cs)->cluster.role, ProcessRole::controller);
  ASSERT_EQ((*cs)->listeners.size(), 1u) << "a controller listens on its controller listener";
  EXPECT_NE(with(controller, {"listeners=CONTROLLER://:9093,PLAINTEXT://:9092"})
                .find("only controller listeners"),
            std::string::npos);
  EXPECT_NE(
      with(controller, {"controller.quorum.voters=1@a:9093,2@b:9093"}).find("not one of them"),
      std::string::npos);

  // Combined mode: Kafka's single-node voters (this node alone) stay the single node; with
  // other voters the node is a voter and a broker of a cluster, and opens both listeners.
  const std::vector<std::string> combined = {"process.roles=broker,controller", "node.id=1",
                                             "controller.listener.names=CONTROLLER",
                                             "listeners=PLAINTEXT://:9092,CONTROLLER://:9093"};
  EXPECT_EQ(with(combined, {"controller.quorum.voters=1@localhost:9093"}), "");
  auto single = make_settings(*Config::load(
                                  "",
                                  [&] {
                                    auto v = combined;
                                    v.push_back("controller.quorum.voters=1@localhost:9093");
                                    return v;
                                  }(),
                                  nullptr),
                              "cid");
  ASSERT_TRUE(single.has_value()) << single.error();
  EXPECT_FALSE((*single)->clustered());
  EXPECT_EQ((*single)->listeners.size(), 1u) << "a single node does not open CONTROLLER";
  auto three = combined;
  three.push_back("controller.quorum.voters=1@a:9093,2@b:9093,3@c:9093");
  auto ms = make_settings(*Config::load("", three, nullptr), "cid");
  ASSERT_TRUE(ms.has_value()) << ms.error();
  EXPECT_TRUE((*ms)->clustered());
  EXPECT_TRUE((*ms)->cluster_broker());
  EXPECT_TRUE((*ms)->cluster_controller());
  ASSERT_EQ((*ms)->listeners.size(), 2u);
  EXPECT_FALSE((*ms)->listeners[0].controller);
  EXPECT_TRUE((*ms)->listeners[1].controller);
  EXPECT_EQ((*ms)->cluster.inter_broker_listener, "PLAINTEXT");
  EXPECT_EQ((*ms)->cluster.controller_host, "a") << "the link starts at the first voter";
  ASSERT_EQ((*ms)->advertised.size(), 2u) << "one advertised endpoint per listener";
  EXPECT_NE(with(three, {"listeners=PLAINTEXT://:9092"}).find("needs a controller listener"),
            std::string::npos);
  EXPECT_NE(with(three, {"inter.broker.listener.name=CONTROLLER"}).find("is a controller listener"),
            std::string::npos);
  EXPECT_NE(with(three, {"node.id=4"}).find("not one of them"), std::string::npos);
}

}  // namespace
}  // namespace samsa::daemon
