// Consumer groups of the Broker: where __consumer_offsets comes from and which of its
// partitions this node's group coordinator serves. A single node creates the topic through its
// own controller and serves every partition. A cluster broker asks the controller for the topic
// (as any client's CreateTopics would go), and its coordinator serves exactly the partitions this
// broker leads, following the metadata images the reactors apply (Kafka's onElection and
// onResignation).
#include <cstdint>

#include "base/clock.h"
#include "base/log.h"
#include "daemon/broker.h"
#include "net/kafka/api.h"
#include "net/kafka/gen/create_topics_request.h"
#include "net/kafka/gen/create_topics_response.h"
#include "net/kafka/wire.h"

namespace samsa::daemon {

replication::TopicSpec offsets_topic_spec(const Config& cfg, bool cluster) {
  const auto partitions = static_cast<std::int32_t>(cfg.get_int("offsets.topic.num.partitions"));
  // A cluster without the setting gets Kafka's default of 3 copies: samsa's default of 1 is for
  // the single node, where there is no other copy to have.
  const auto rf =
      static_cast<std::int16_t>(cluster && !cfg.is_set("offsets.topic.replication.factor")
                                    ? kClusterOffsetsReplicationFactor
                                    : cfg.get_int("offsets.topic.replication.factor"));
  // As Kafka creates it: compacted (the log cleaner drops superseded offsets and group records,
  // the coordinator's tombstones delete expired ones), 100 MiB segments. Topics an older samsa
  // created carry retention.ms / retention.bytes overrides; a compact-only policy ignores them.
  return replication::TopicSpec{std::string(coordinator::kOffsetsTopic),
                                partitions,
                                rf,
                                {{"cleanup.policy", "compact"}, {"segment.bytes", "104857600"}}};
}

void Broker::start_group_coordinator() {
  const auto s = settings();
  if (s->controller_only()) return;  // a controller node serves no clients' groups
  if (s->cluster_broker()) {
    // The reactors start the coordinator once their image has the topic (follow_offsets_leaders).
    offsets_retry_.self = this;
    offsets_retry_.fn = [](io::Timer* t) {
      auto* self = static_cast<OffsetsRetry*>(t)->self;
      self->create_offsets_topic();
    };
    on_controller([this](replication::Controller&) { create_offsets_topic(); });
    return;
  }
  ensure_internal_topic(offsets_topic_spec(config(), false), true, [this](std::int32_t n) {
    on_coordinator([n](coordinator::GroupCoordinator& g) { g.start(n); });
  });
  // __transaction_state is created when the first transactional id looks for its coordinator
  // (want_txn_state_topic), as Kafka does; once it exists it is served from the start.
  ensure_internal_topic(txn_state_topic_spec(config(), false), false, [this](std::int32_t n) {
    on_txn_coordinator([n](coordinator::TxnCoordinator& t) { t.start(n); });
  });
}

// A single node: creates an internal topic through its own controller (create: else only if
// it exists already), then begin(its partition count) starts the coordinator serving it.
void Broker::ensure_internal_topic(replication::TopicSpec spec, bool create,
                                   std::function<void(std::int32_t)> begin) {
  on_controller(
      [spec = std::move(spec), create, begin = std::move(begin)](replication::Controller& c) {
        const std::int32_t partitions = spec.partitions;
        if (const auto* t = c.image()->topic(spec.name)) {
          const auto n = static_cast<std::int32_t>(t->partitions.size());
          if (n != partitions)
            LOG_WARN("%s has %d partitions, the configuration says %d; keeping %d",
                     spec.name.c_str(), n, partitions, n);
          begin(n);
          return;
        }
        if (!create) return;
        c.create_topics({spec}, false,
                        [&c, name = spec.name, begin](std::vector<replication::TopicOutcome> out) {
                          const auto& o = out.front();
                          if (o.error == kafka::ErrorCode::none) {
                            LOG_INFO("created %s with %d partitions", name.c_str(), o.partitions);
                            begin(o.partitions);
                          } else if (const auto* t = c.image()->topic(name)) {
                            begin(static_cast<std::int32_t>(t->partitions.size()));
                          } else {
                            LOG_ERROR("cannot create %s (%s): its coordinator is unavailable",
                                      name.c_str(), o.message.c_str());
                          }
                        });
      });
}

void Broker::want_txn_state_topic() {
  if (txn_topic_wanted_.exchange(true) || settings()->controller_only()) return;
  if (settings()->cluster_broker()) {
    on_controller([this](replication::Controller&) { create_offsets_topic(); });
    return;
  }
  ensure_internal_topic(txn_state_topic_spec(config(), false), true, [this](std::int32_t n) {
    on_txn_coordinator([n](coordinator::TxnCoordinator& t) { t.start(n); });
  });
}

// Controller thread of a cluster broker: asks the controller for __consumer_offsets until this
// broker's image has it. Like Kafka, it is not created with fewer replicas than
// offsets.topic.replication.factor: while fewer brokers are registered and unfenced, it waits
// (said once) and asks again every second.
void Broker::create_offsets_topic() {
  if (stopping_.load() || !controller_) return;
  // __transaction_state the same way, once __consumer_offsets exists and a transactional id
  // asked for its coordinator.
  replication::TopicSpec spec = offsets_topic_spec(config(), true);
  if (controller_->image()->topic(spec.name)) {
    if (!txn_topic_wanted_.load()) return;
    spec = txn_state_topic_spec(config(), true);
  }
  if (controller_->image()->topic(spec.name)) return;
  std::size_t live = 0;
  for (const auto& [id, b] : controller_->image()->brokers())
    live += !b.fenced;
  auto again = [this] {
    if (!stopping_.load()) controller_reactor_->arm(&offsets_retry_, mono_ns() + 1'000'000'000);
  };
  if (live < static_cast<std::size_t>(spec.replication_factor)) {
    if (!offsets_wait_logged_) {
      LOG_WARN(
          "%s needs %d live brokers (offsets.topic.replication.factor), %zu are registered "
          "and unfenced: consumer groups wait until enough brokers have joined",
          spec.name.c_str(), spec.replication_factor, live);
      offsets_wait_logged_ = true;
    }
    again();
    return;
  }
  kafka::CreateTopicsRequest req;
  kafka::CreateTopicsRequest::CreatableTopic t;
  t.name = spec.name;
  t.num_partitions = spec.partitions;
  t.replication_factor = spec.replication_factor;
  for (const auto& [k, v] : spec.configs) {
    kafka::CreateTopicsRequest::CreatableTopicConfig c;
    c.name = k;
    c.value = v;
    t.configs.push_back(std::move(c));
  }
  req.topics.push_back(std::move(t));
  constexpr std::int16_t kVersion = 7;
  auto frame = kafka::flatten_body(kafka::encode_request(req, kVersion, 0, "samsa-broker"));
  // Answered on the controller thread once the image holds the outcome, or (link down) on the
  // link's: the outcome is handled on the controller thread either way.
  forward_to_controller(std::move(frame), [this, again, name = spec.name,
                                           partitions = spec.partitions,
                                           rf = spec.replication_factor](auto answer) {
    on_controller([this, again, name, partitions, rf,
                   resp = std::move(answer)](replication::Controller&) mutable {
      std::string why = "the controller could not be reached";
      if (resp) {
        auto h =
            kafka::decode_response_header(*resp, kafka::CreateTopicsResponse::kApiKey, kVersion);
        kafka::CreateTopicsResponse out;
        if (h.ok() &&
            kafka::decode_response_body(*resp, h, kVersion, out) == kafka::DecodeError::none &&
            !out.topics.empty()) {
          const auto e = static_cast<kafka::ErrorCode>(out.topics.front().error_code);
          if (e == kafka::ErrorCode::none) {
            LOG_INFO("created %s with %d partitions of %d replicas", name.c_str(), partitions, rf);
            create_offsets_topic();  // the next internal topic, if one is missing
            return;
          }
          if (e == kafka::ErrorCode::topic_already_exists) {
            create_offsets_topic();  // another broker's doing
            return;
          }
          why = std::string(kafka::error_name(e)) + ": " +
                out.topics.front().error_message.value_or("");
        } else {
          why = "an answer that does not decode";
        }
      }
      if (!offsets_error_logged_) {
        LOG_WARN("cannot create %s yet (%s); consumer groups wait, asking again every second",
                 name.c_str(), why.c_str());
        offsets_error_logged_ = true;
      }
      again();
    });
  });
}

namespace {

struct LeaderChange {
  std::int32_t partition;
  std::int32_t epoch;
  bool leads;
};

// Which partitions of an internal topic this shard's replicas started or stopped leading since
// `led` (updated); start: the topic's partition count the first time this reactor sees it.
std::vector<LeaderChange> leader_changes(ReactorContext& ctx, std::string_view topic,
                                         std::map<std::int32_t, std::int32_t>& led, bool& seen,
                                         std::int32_t& start) {
  std::vector<LeaderChange> changes;
  start = 0;
  const replication::TopicState* t = ctx.image->topic(topic);
  if (!t) {
    for (const auto& [p, epoch] : led)
      changes.push_back({p, INT32_MAX, false});
    led.clear();
    return changes;
  }
  if (!seen) {
    seen = true;
    start = static_cast<std::int32_t>(t->partitions.size());
  }
  for (const auto& ps : t->partitions) {
    if (!ctx.shard->owns(topic, ps.partition)) continue;
    const bool leads = ctx.shard->find(topic, ps.partition) != nullptr;
    auto it = led.find(ps.partition);
    if (leads && (it == led.end() || it->second != ps.leader_epoch)) {
      led[ps.partition] = ps.leader_epoch;
      changes.push_back({ps.partition, ps.leader_epoch, true});
    } else if (!leads && it != led.end()) {
      led.erase(it);
      changes.push_back({ps.partition, ps.leader_epoch, false});
    }
  }
  return changes;
}

}  // namespace

// A cluster broker's reactor, after applying an image: tells the coordinator which partitions
// of __consumer_offsets this shard's replicas now lead (and in which leader epoch) and which they
// stopped leading. "Leads" is what Shard::find says: this process's registration, unfenced, is
// the partition's leader, so the coordinator writes exactly where clients may produce.
void Broker::follow_offsets_leaders(ReactorContext& ctx) {
  std::int32_t start = 0;
  auto changes =
      leader_changes(ctx, coordinator::kOffsetsTopic, ctx.offsets_led, ctx.offsets_seen, start);
  if (changes.empty() && start == 0) return;
  // start() ignores repeats, so every reactor may send it; each sends it before its own
  // elections, and the coordinator's queue keeps one sender's order.
  on_coordinator([start, changes = std::move(changes)](coordinator::GroupCoordinator& g) {
    if (start > 0) g.start(start, coordinator::GroupCoordinator::Leadership::elected);
    for (const LeaderChange& c : changes) {
      if (c.leads) {
        g.activate(c.partition, c.epoch);
      } else {
        g.deactivate(c.partition, c.epoch);
      }
    }
  });
}

// The same for __transaction_state: the transaction coordinator serves the transactional ids
// of the partitions led here, with the leader epoch as its coordinator epoch.
void Broker::follow_txn_leaders(ReactorContext& ctx) {
  std::int32_t start = 0;
  auto changes = leader_changes(ctx, coordinator::kTxnStateTopic, ctx.txn_led, ctx.txn_seen, start);
  if (changes.empty() && start == 0) return;
  on_txn_coordinator([start, changes = std::move(changes)](coordinator::TxnCoordinator& t) {
    if (start > 0) t.start(start, coordinator::TxnCoordinator::Leadership::elected);
    for (const LeaderChange& c : changes) {
      if (c.leads) {
        t.activate(c.partition, c.epoch);
      } else {
        t.deactivate(c.partition, c.epoch);
      }
    }
  });
}

}  // namespace samsa::daemon
