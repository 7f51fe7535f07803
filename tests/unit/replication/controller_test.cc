// replication::Controller: partition limits checked before any record is built, each topic
// committed whole in one metadata batch, CreatePartitions, and config alterations (Kafka's
// incremental operations, AlterConfigs' replacement, broker settings through the daemon's hook,
// one change at a time). Also the shard side: config changes reach the open logs.
#include "replication/controller.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <new>
#include <set>

#include "base/clock.h"
#include "io/log_dir.h"
#include "io/record_batch.h"
#include "replication/shard.h"
#include "tests/support/io_testing.h"

// Counts heap allocations (the limit checks must come before anything per partition is built).
static std::atomic<std::uint64_t> g_allocated_bytes{0};
[[gnu::noinline]] void* operator new(std::size_t n) {
  g_allocated_bytes.fetch_add(n, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void operator delete(void* p) noexcept {
  std::free(p);
}
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace samsa::replication {
namespace {

using kafka::ErrorCode;

class ControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = io::Reactor::create({.name = "test"});
    ASSERT_TRUE(r.has_value());
    reactor = std::move(*r);
    auto d = io::LogDir::open(dir.path());
    ASSERT_TRUE(d.has_value()) << d.error().detail;
    log_dir = std::move(*d);
    open_controller();
  }
  void TearDown() override {
    // Let deferred applied() calls run: a reactor does not free tasks it never ran.
    reactor->run_until([] { return false; }, 10'000'000);
    if (controller) {
      ASSERT_TRUE(controller->close().has_value());
    }
  }
  void open_controller(Controller::Mode mode = Controller::Mode::single) {
    Controller::Options o;
    o.mode = mode;
    o.session_timeout_ms = 300;
    o.log_dir = log_dir.get();
    o.max_partitions = 100;
    o.max_partitions_per_request = 50;
    o.default_partitions = 2;
    o.reactors = 1;
    // One "reactor" that applies every image at once.
    o.publish = [this](ImagePtr img) {
      published = img;
      reactor->defer_fn([this, v = img->offset()] { controller->applied(0, v); });
    };
    o.validate_broker_config =
        [](const std::string& key,
           const std::optional<std::string>& value) -> std::optional<std::string> {
      if (key != "log.retention.ms")
        return "Cannot update these configs dynamically: Set(" + key + ")";
      if (value && *value == "bad") return "Invalid value bad for configuration " + key;
      return std::nullopt;
    };
    o.broker_config_value = [](const std::string&) { return std::string("1"); };
    if (controller) {
      ASSERT_TRUE(controller->close().has_value());
    }
    controller = std::make_unique<Controller>(*reactor, o);
    ASSERT_TRUE(controller->open().has_value());
    // A quorum of one elects itself and commits its leader-change record, then decides.
    ASSERT_TRUE(reactor->run_until([&] { return controller->active(); }, 5'000'000'000));
  }
  template <class T, class Start>
  T wait(Start start) {
    std::optional<T> out;
    start([&](T v) { out = std::move(v); });
    EXPECT_TRUE(reactor->run_until([&] { return out.has_value(); }));
    return out ? std::move(*out) : T{};
  }
  std::vector<TopicOutcome> create(std::vector<TopicSpec> specs, bool partial = false) {
    return wait<std::vector<TopicOutcome>>([&](auto done) {
      controller->create_topics(std::move(specs), false, std::move(done), partial);
    });
  }
  std::vector<PartitionsOutcome> add_partitions(std::string name, std::int32_t count) {
    return wait<std::vector<PartitionsOutcome>>([&](auto done) {
      controller->create_partitions({{name, count, {}}}, false, std::move(done));
    });
  }
  std::vector<ConfigOutcome> alter(std::vector<ConfigAlteration> a) {
    return wait<std::vector<ConfigOutcome>>(
        [&](auto done) { controller->alter_configs(std::move(a), false, std::move(done)); });
  }
  std::int64_t metadata_end() { return controller->image()->offset(); }

  // A broker node's observer of this controller's quorum (node 7, its own log dir), run until
  // it has caught up; checks the leader tracks it, closes it, and returns its image.
  ImagePtr observe(std::size_t& fetches) {
    io::testing::TempDir broker_dir;
    auto bd = io::LogDir::open(broker_dir.path());
    EXPECT_TRUE(bd.has_value());
    if (!bd) return nullptr;
    Controller::Options bo;
    bo.mode = Controller::Mode::broker;
    bo.node_id = 7;
    bo.log_dir = bd->get();
    bo.quorum.voters = {1};
    ImagePtr broker_image;
    bo.publish = [&](ImagePtr img) { broker_image = img; };
    std::unique_ptr<Controller> follower;
    bo.quorum.send = [&](const quorum::Outgoing& o) {
      const auto* f = std::get_if<quorum::FetchRequest>(&o.request);
      EXPECT_NE(f, nullptr) << "an observer only fetches";
      if (!f) return;
      EXPECT_EQ(o.to, 1);
      EXPECT_EQ(f->replica, 7);
      ++fetches;
      // Delivered later, as a network would: never inside the sender's call.
      reactor->defer_fn([&, req = *f, id = o.id] {
        controller->on_fetch(req, 1 << 20, [&, id](Controller::FetchReply rep) {
          reactor->defer_fn([&, id, rep = std::move(rep)] {
            if (follower) follower->on_fetch_response(id, 1, rep.answer, rep.records);
          });
        });
      });
    };
    follower = std::make_unique<Controller>(*reactor, bo);
    EXPECT_TRUE(follower->open().has_value());
    const std::int64_t end = metadata_end();
    EXPECT_TRUE(reactor->run_until([&] { return broker_image && broker_image->offset() >= end; },
                                   5'000'000'000));
    const auto view = controller->quorum_view();
    EXPECT_EQ(view.role, quorum::Role::leader);
    EXPECT_EQ(view.leader, 1);
    bool observer_seen = false;
    for (const auto& r : view.replicas)
      if (r.id == 7 && !r.voter) observer_seen = true;
    EXPECT_TRUE(observer_seen) << "the leader tracks the observer's progress (DescribeQuorum)";
    // Closing while a fetch is held: it is answered, nothing dangles.
    controller->stop_waiting_reads();
    reactor->run_until([] { return false; }, 20'000'000);
    EXPECT_TRUE(follower->close().has_value());
    follower.reset();
    reactor->run_until([] { return false; }, 20'000'000);
    return broker_image;
  }

  io::testing::TempDir dir;
  std::unique_ptr<io::Reactor> reactor;
  std::unique_ptr<io::LogDir> log_dir;
  std::unique_ptr<Controller> controller;
  ImagePtr published;
};

TEST_F(ControllerTest, TenMillionPartitionsAreRefusedBeforeAnythingIsBuilt) {
  const std::int64_t before = metadata_end();
  const std::uint64_t allocated = g_allocated_bytes.load();
  std::optional<std::vector<TopicOutcome>> out;
  controller->create_topics({{"huge", 10'000'000, 1, {}}}, false,
                            [&](std::vector<TopicOutcome> o) { out = std::move(o); });
  // Answered synchronously, with a few hundred bytes of work, nothing written.
  ASSERT_TRUE(out.has_value());
  EXPECT_LT(g_allocated_bytes.load() - allocated, 4096u);
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].error, ErrorCode::policy_violation);
  EXPECT_EQ((*out)[0].message, "Excessively large number of partitions per request.");
  EXPECT_EQ(metadata_end(), before);
  // The same for an addition of partitions.
  ASSERT_EQ(create({{"t", 2, 1, {}}})[0].error, ErrorCode::none);
  const std::uint64_t a2 = g_allocated_bytes.load();
  std::optional<std::vector<PartitionsOutcome>> po;
  controller->create_partitions({{"t", 2'000'000'000, {}}}, false,
                                [&](std::vector<PartitionsOutcome> o) { po = std::move(o); });
  ASSERT_TRUE(po.has_value());
  EXPECT_LT(g_allocated_bytes.load() - a2, 4096u);
  EXPECT_EQ((*po)[0].error, ErrorCode::policy_violation);
}

TEST_F(ControllerTest, TheRequestCapCountsEveryTopicAndRefusesTheWholeRequest) {
  auto out = create({{"a", 30, 1, {}}, {"b", 30, 1, {}}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].error, ErrorCode::policy_violation);
  EXPECT_EQ(out[1].error, ErrorCode::policy_violation);
  EXPECT_EQ(controller->image()->topics().size(), 0u);
  // Default partition counts (-1) count too: 26 x 2 = 52 > 50.
  std::vector<TopicSpec> many;
  for (int i = 0; i < 26; ++i)
    many.push_back({"d" + std::to_string(i), -1, -1, {}});
  out = create(many);
  EXPECT_EQ(out[0].error, ErrorCode::policy_violation);
  EXPECT_EQ(controller->image()->partition_count(), 0);
}

TEST_F(ControllerTest, TheBrokerLimitCountsPartitionsInFlight) {
  ASSERT_EQ(create({{"a", 40, 1, {}}})[0].error, ErrorCode::none);
  // Two requests whose records are not committed yet: together they would pass 100.
  std::optional<std::vector<TopicOutcome>> x, y;
  controller->create_topics({{"b", 40, 1, {}}}, false, [&](auto o) { x = std::move(o); });
  controller->create_topics({{"c", 40, 1, {}}}, false, [&](auto o) { y = std::move(o); });
  ASSERT_TRUE(reactor->run_until([&] { return x && y; }));
  EXPECT_EQ((*x)[0].error, ErrorCode::none);
  EXPECT_EQ((*y)[0].error, ErrorCode::policy_violation);
  EXPECT_NE((*y)[0].message.find("samsa.max.partitions (100)"), std::string::npos)
      << (*y)[0].message;
  EXPECT_EQ(controller->image()->partition_count(), 80);
  EXPECT_EQ(add_partitions("a", 61)[0].error, ErrorCode::policy_violation);
  EXPECT_EQ(add_partitions("a", 60)[0].error, ErrorCode::none);
  EXPECT_EQ(controller->image()->partition_count(), 100);
}

TEST_F(ControllerTest, AutoCreationTakesWholeTopicsInOrderWhileTheyFit) {
  std::vector<TopicSpec> specs;
  for (int i = 0; i < 1000; ++i)
    specs.push_back({"auto-" + std::to_string(1000 + i), 3, 1, {}});
  auto out = create(specs, true);
  ASSERT_EQ(out.size(), 1000u);
  // 50 per request / 3 = 16 topics.
  for (int i = 0; i < 1000; ++i)
    EXPECT_EQ(out[i].error, i < 16 ? ErrorCode::none : ErrorCode::policy_violation) << i;
  EXPECT_EQ(controller->image()->partition_count(), 48);
  for (const auto& [name, t] : controller->image()->topics())
    EXPECT_EQ(t->partitions.size(), 3u) << name;
}

// Reads the metadata log back: batch index of every record, in order.
std::vector<std::pair<int, MetadataRecord>> batches_of(io::Log& log) {
  std::vector<std::pair<int, MetadataRecord>> out;
  auto rr = log.read(log.log_start_offset(), 64u << 20, log.log_end_offset(), true);
  EXPECT_TRUE(rr.has_value());
  std::vector<std::byte> storage;
  int batch = 0;
  for (const auto& s : rr->slices) {
    auto bytes = io::testing::slice_bytes(s);
    std::size_t pos = 0;
    while (pos + io::batch::kHeaderSize <= bytes.size()) {
      io::BatchInfo info = io::batch::parse_header(bytes.data() + pos);
      std::span<const std::byte> b(bytes.data() + pos, static_cast<std::size_t>(info.length));
      if (info.attributes & io::batch::kControlBit) {  // the quorum's leader-change record
        pos += static_cast<std::size_t>(info.length);
        continue;
      }
      auto recs = io::batch::records_of(b, storage);
      EXPECT_TRUE(recs.has_value());
      io::batch::RecordReader reader(*recs, info.record_count);
      while (auto r = reader.next()) {
        if (!*r) break;
        auto m = decode_record(*(*r)->value);
        EXPECT_TRUE(m.has_value());
        out.emplace_back(batch, *m);
      }
      ++batch;
      pos += static_cast<std::size_t>(info.length);
    }
  }
  return out;
}

TEST_F(ControllerTest, EachTopicsRecordsShareOneBatchSoATopicIsWholeOrAbsent) {
  ASSERT_TRUE(controller->close().has_value());
  controller.reset();
  // Large enough limits for topics that fill more than one packed batch.
  {
    Controller::Options opts;
    opts.log_dir = log_dir.get();
    opts.max_partitions = 200'000;
    opts.max_partitions_per_request = 30'000;
    opts.reactors = 1;
    opts.publish = [this](ImagePtr img) {
      reactor->defer_fn([this, v = img->offset()] { controller->applied(0, v); });
    };
    controller = std::make_unique<Controller>(*reactor, opts);
    ASSERT_TRUE(controller->open().has_value());
  }
  std::vector<TopicSpec> specs;
  for (int i = 0; i < 3; ++i)
    specs.push_back({"wide-" + std::string(200, 'a' + i), 9000, 1, {{"retention.ms", "1000"}}});
  auto out = create(specs);
  for (const auto& o2 : out)
    ASSERT_EQ(o2.error, ErrorCode::none) << o2.message;
  // Read the metadata log back once the controller has closed it.
  ASSERT_TRUE(controller->close().has_value());
  controller.reset();
  auto l = io::Log::open(*reactor, dir.path() / "__cluster_metadata-0", io::LogConfig{});
  ASSERT_TRUE(l.has_value()) << l.error().detail;
  auto recs = batches_of(**l);
  std::map<Uuid, int> topic_batch;
  int batches = 0;
  for (const auto& [b, r] : recs) {
    batches = std::max(batches, b + 1);
    if (auto* t = std::get_if<TopicRecord>(&r)) topic_batch[t->topic_id] = b;
    if (auto* p = std::get_if<PartitionRecord>(&r)) {
      ASSERT_TRUE(topic_batch.contains(p->topic_id));
      EXPECT_EQ(topic_batch[p->topic_id], b) << "a partition record left its topic's batch";
    }
  }
  EXPECT_EQ(topic_batch.size(), 3u);
  EXPECT_GE(batches, 3) << "9000 partitions each: more than one packed batch";
  ASSERT_TRUE((*l)->close().has_value());
}

TEST_F(ControllerTest, CreatePartitionsAnswersAsKafkaDoes) {
  ASSERT_EQ(create({{"t", 2, 1, {}}})[0].error, ErrorCode::none);
  auto o = add_partitions("t", 1);
  EXPECT_EQ(o[0].error, ErrorCode::invalid_partitions);
  EXPECT_EQ(o[0].message, "The topic t currently has 2 partition(s); 1 would not be an increase.");
  o = add_partitions("t", 2);
  EXPECT_EQ(o[0].message, "Topic already has 2 partition(s).");
  EXPECT_EQ(add_partitions("nosuch", 3)[0].error, ErrorCode::unknown_topic_or_partition);
  // Two additions in flight at once build on each other.
  std::optional<std::vector<PartitionsOutcome>> x, y;
  controller->create_partitions({{"t", 4, {}}}, false, [&](auto v) { x = std::move(v); });
  controller->create_partitions({{"t", 5, {}}}, false, [&](auto v) { y = std::move(v); });
  ASSERT_TRUE(reactor->run_until([&] { return x && y; }));
  EXPECT_EQ((*x)[0].error, ErrorCode::none);
  EXPECT_EQ((*y)[0].error, ErrorCode::none);
  EXPECT_EQ(controller->image()->topic("t")->partitions.size(), 5u);
  o = wait<std::vector<PartitionsOutcome>>([&](auto done) {
    controller->create_partitions({{"t", 7, {{1}, {2}}}}, false, std::move(done));
  });
  EXPECT_EQ(o[0].error, ErrorCode::invalid_replica_assignment);
  o = wait<std::vector<PartitionsOutcome>>([&](auto done) {
    controller->create_partitions({{"t", 7, {{1}}}}, false, std::move(done));
  });
  EXPECT_EQ(o[0].error, ErrorCode::invalid_replica_assignment);
}

TEST_F(ControllerTest, IncrementalOperationsOnTopicConfigs) {
  ASSERT_EQ(create({{"t", 1, 1, {{"retention.ms", "5000"}}}})[0].error, ErrorCode::none);
  using Op = ConfigOpType;
  auto topic = [&](std::vector<ConfigOp> ops, bool replace = false) {
    return alter({{ConfigResource::topic, "t", std::move(ops), replace}})[0];
  };
  auto configs = [&] { return controller->image()->topic("t")->configs; };
  EXPECT_EQ(topic({{"cleanup.policy", Op::append, "compact"}}).error, ErrorCode::none);
  EXPECT_EQ(configs().at("cleanup.policy"), "delete,compact");
  EXPECT_EQ(topic({{"cleanup.policy", Op::append, "compact"}}).error, ErrorCode::none);
  EXPECT_EQ(configs().at("cleanup.policy"), "delete,compact") << "no duplicates";
  EXPECT_EQ(topic({{"cleanup.policy", Op::subtract, "delete"}}).error, ErrorCode::none);
  EXPECT_EQ(configs().at("cleanup.policy"), "compact");
  auto r = topic({{"retention.ms", Op::append, "1"}});
  EXPECT_EQ(r.error, ErrorCode::invalid_config);
  EXPECT_EQ(r.message, "Can't APPEND to key retention.ms because its type is not LIST.");
  r = topic({{"retention.ms", Op::set, "abc"}});
  EXPECT_EQ(r.message,
            "Invalid value abc for configuration retention.ms: Not a number of type LONG");
  // A resource's operations apply together or not at all.
  r = topic({{"segment.ms", Op::set, "1000"}, {"retention.ms", Op::set, "-5"}});
  EXPECT_EQ(r.error, ErrorCode::invalid_config);
  EXPECT_FALSE(configs().contains("segment.ms"));
  EXPECT_EQ(topic({{"retention.ms", Op::remove, std::nullopt}}).error, ErrorCode::none);
  EXPECT_FALSE(configs().contains("retention.ms"));
  // AlterConfigs (legacy) replaces every override.
  EXPECT_EQ(topic({{"segment.ms", Op::set, "1000"}}, true).error, ErrorCode::none);
  EXPECT_EQ(configs(), (std::map<std::string, std::string>{{"segment.ms", "1000"}}));
  EXPECT_EQ(
      alter({{ConfigResource::topic, "nosuch", {{"retention.ms", Op::set, "1"}}, false}})[0].error,
      ErrorCode::unknown_topic_or_partition);
}

TEST_F(ControllerTest, AWaitForAnImageEndsAtItsMaxWait) {
  // An image this node may never reach (cut off from the quorum): the wait ends anyway.
  bool bounded = false;
  auto unbounded = std::make_shared<bool>(false);  // still waiting when the test ends
  controller->when_applied(metadata_end() + 1000, [&] { bounded = true; }, 50);
  controller->when_applied(metadata_end() + 1000, [unbounded] { *unbounded = true; });
  EXPECT_TRUE(reactor->run_until([&] { return bounded; }, 2'000'000'000));
  EXPECT_FALSE(*unbounded);
  bool reached = false;  // one already reached runs at once
  controller->when_applied(metadata_end(), [&] { reached = true; }, 10'000);
  EXPECT_TRUE(reached);
}

TEST_F(ControllerTest, ConcurrentAppendsBothLand) {
  ASSERT_EQ(create({{"t", 1, 1, {}}})[0].error, ErrorCode::none);
  std::optional<std::vector<ConfigOutcome>> x, y;
  controller->alter_configs(
      {{ConfigResource::topic,
        "t",
        {{"leader.replication.throttled.replicas", ConfigOpType::append, "0:1"}},
        false}},
      false, [&](auto v) { x = std::move(v); });
  controller->alter_configs(
      {{ConfigResource::topic,
        "t",
        {{"leader.replication.throttled.replicas", ConfigOpType::append, "1:1"}},
        false}},
      false, [&](auto v) { y = std::move(v); });
  ASSERT_TRUE(reactor->run_until([&] { return x && y; }));
  EXPECT_EQ(controller->image()->topic("t")->configs.at("leader.replication.throttled.replicas"),
            "0:1,1:1");
}

TEST_F(ControllerTest, BrokerSettingsGoThroughTheDaemonsHookAndPersist) {
  using Op = ConfigOpType;
  auto broker = [&](std::string name, std::vector<ConfigOp> ops) {
    return alter({{ConfigResource::broker, std::move(name), std::move(ops), false}})[0];
  };
  EXPECT_EQ(broker("1", {{"log.retention.ms", Op::set, "1000"}}).error, ErrorCode::none);
  EXPECT_EQ(broker("", {{"log.retention.ms", Op::set, "2000"}}).error, ErrorCode::none);
  auto r = broker("1", {{"log.dirs", Op::set, "/x"}});
  EXPECT_EQ(r.error, ErrorCode::invalid_request);
  EXPECT_EQ(r.message, "Cannot update these configs dynamically: Set(log.dirs)");
  EXPECT_EQ(broker("1", {{"log.retention.ms", Op::set, "bad"}}).error, ErrorCode::invalid_request);
  r = broker("2", {{"log.retention.ms", Op::set, "1"}});
  EXPECT_EQ(r.message, "Unexpected broker id, expected 1 or empty string, but received 2");
  EXPECT_EQ(published->broker_configs("1").at("log.retention.ms"), "1000");
  EXPECT_EQ(published->broker_configs("").at("log.retention.ms"), "2000");
  // Replayed from the metadata log by the next controller.
  open_controller();
  EXPECT_EQ(controller->image()->broker_configs("1").at("log.retention.ms"), "1000");
  EXPECT_EQ(controller->image()->broker_configs("").at("log.retention.ms"), "2000");
  EXPECT_EQ(broker("1", {{"log.retention.ms", Op::remove, std::nullopt}}).error, ErrorCode::none);
  EXPECT_TRUE(controller->image()->broker_configs("1").empty());
}

// Topic config changes reach the open logs without a restart: overrides through a new image,
// broker defaults through set_defaults (dynamic broker settings, SIGHUP). Retention then acts at
// the next retention pass, as in Kafka.
// A cluster's controller: brokers register fenced and are unfenced by a caught-up heartbeat;
// CreateTopics spreads replicas and leaders over them (INVALID_REPLICATION_FACTOR beyond them);
// a silent broker is fenced after the session timeout and its leaderships move with the leader
// epoch bumped; topic records and the state machine's records share the log, which a broker
// node rebuilds the same image from (an observer's Fetch of the quorum's log).
TEST_F(ControllerTest, ClusterModeRegistersPlacesFencesAndServesItsLog) {
  open_controller(Controller::Mode::controller);
  std::map<std::int32_t, std::int64_t> epochs;
  for (std::int32_t id : {1, 2, 3}) {
    BrokerRegistration reg{id, random_uuid(), {{"PLAINTEXT", "h", 9000 + id, 0}}, std::nullopt};
    auto a = wait<RegistrationAnswer>(
        [&](auto done) { controller->register_broker(reg, std::move(done)); });
    ASSERT_EQ(a.error, ErrorCode::none);
    epochs[id] = a.broker_epoch;
  }
  EXPECT_EQ(create({{"early", 1, 1, {}}}).front().error, ErrorCode::invalid_replication_factor)
      << "registered brokers are fenced until caught up";
  auto beat = [&](std::int32_t id) {
    return wait<HeartbeatAnswer>([&](auto done) {
      controller->broker_heartbeat({id, epochs[id], metadata_end(), false, false}, std::move(done));
    });
  };
  for (std::int32_t id : {1, 2, 3})
    EXPECT_FALSE(beat(id).is_fenced);
  auto out = create({{"t", 3, 3, {}}});
  ASSERT_EQ(out.front().error, ErrorCode::none) << out.front().message;
  const TopicState* t = controller->image()->topic("t");
  ASSERT_NE(t, nullptr);
  std::set<std::int32_t> leaders;
  for (const auto& p : t->partitions) {
    EXPECT_EQ(p.replicas.size(), 3u);
    leaders.insert(p.leader);
  }
  EXPECT_EQ(leaders, (std::set<std::int32_t>{1, 2, 3}));
  EXPECT_EQ(create({{"rf4", 1, 4, {}}}).front().error, ErrorCode::invalid_replication_factor);

  // Broker 1 falls silent; 2 and 3 keep beating past the session timeout.
  const std::int32_t p1 = [&] {
    for (const auto& p : t->partitions)
      if (p.leader == 1) return p.partition;
    return -1;
  }();
  const std::int64_t until = mono_ms() + 600;
  while (mono_ms() < until) {
    beat(2);
    beat(3);
    reactor->run_until([] { return false; }, 50'000'000);
  }
  const auto& b1 = controller->image()->brokers().at(1);
  EXPECT_TRUE(b1.fenced);
  const auto& moved = controller->image()->topic("t")->partitions[static_cast<std::size_t>(p1)];
  EXPECT_NE(moved.leader, 1);
  EXPECT_GE(moved.leader, 2);
  EXPECT_EQ(moved.leader_epoch, 1);
  EXPECT_EQ(moved.isr.size(), 2u);

  // A broker node (an observer of the quorum) fetches the committed log with KRaft's Fetch
  // and replays it into the same image.
  std::size_t fetches = 0;
  ImagePtr broker_image = observe(fetches);
  ASSERT_NE(broker_image, nullptr);
  EXPECT_GT(fetches, 0u);
  EXPECT_EQ(broker_image->brokers().size(), 3u);
  EXPECT_TRUE(broker_image->brokers().at(1).fenced);
  EXPECT_EQ(broker_image->topic("t")->partitions[static_cast<std::size_t>(p1)].leader,
            moved.leader);
}

TEST(ShardConfig, ConfigChangesReachOpenLogs) {
  auto r = io::Reactor::create({.name = "test"});
  ASSERT_TRUE(r.has_value());
  io::Reactor& reactor = **r;
  io::testing::TempDir dir;
  auto ld = io::LogDir::open(dir.path());
  ASSERT_TRUE(ld.has_value());
  Shard::Options so;
  so.log_dirs = {ld->get()};
  auto shard = std::make_unique<Shard>(reactor, so);
  auto image = std::make_shared<MetadataImage>();
  const Uuid id = random_uuid();
  image->apply(TopicRecord{"t", id});
  image->apply(PartitionRecord{id, 0, {1}, {1}, 1, 0, 0});
  shard->apply(image);
  ASSERT_NE(shard->find("t", 0), nullptr);
  const io::Log& log = shard->find("t", 0)->log();
  EXPECT_TRUE(log.config().fsync);
  auto next = std::make_shared<MetadataImage>(*image);
  next->apply(ConfigRecord{ConfigResource::topic, "t", "max.message.bytes", "2000"});
  next->apply(ConfigRecord{ConfigResource::topic, "t", "retention.ms", "1000"});
  next->apply(ConfigRecord{ConfigResource::topic, "t", "flush.messages", "500"});
  next->apply(ConfigRecord{ConfigResource::topic, "t", "flush.ms", "250"});
  shard->apply(next);
  EXPECT_EQ(log.config().max_batch_bytes, 2000u);
  EXPECT_EQ(log.config().retention_ms, 1000);
  EXPECT_FALSE(log.config().fsync);
  EXPECT_EQ(log.config().flush_messages, 500);
  EXPECT_EQ(log.config().flush_ms, 250);
  shard->set_defaults({{"retention.bytes", "4096"}, {"flush.messages", "1"}});
  EXPECT_EQ(log.config().retention_bytes, 4096) << "a broker default without an override";
  EXPECT_FALSE(log.config().fsync) << "the topic's override still wins";
  shard->close_all();
  ASSERT_TRUE(reactor.run_until([&] { return shard->closed(); }));
}

}  // namespace
}  // namespace samsa::replication
