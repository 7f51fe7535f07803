#include "daemon/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "daemon/settings.h"

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
                         "controller.listener.names=CONTROLLER"},
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

}  // namespace
}  // namespace samsa::daemon
