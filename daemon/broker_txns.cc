// Transactions of the Broker: where __transaction_state comes from, the transaction
// coordinator's options, and how its markers reach the partitions (TxnMarkers below, also what
// the WriteTxnMarkers handler uses). The coordinator shares the group coordinator's thread and
// its producer ids; its partitions follow leadership as the group coordinator's do
// (broker_groups.cc).
#include "daemon/txn_markers.h"

#include <atomic>
#include <map>
#include <memory>

#include "base/clock.h"
#include "base/log.h"
#include "daemon/broker.h"
#include "io/batch_builder.h"
#include "net/kafka/api.h"
#include "net/kafka/gen/add_partitions_to_txn_request.h"
#include "net/kafka/gen/add_partitions_to_txn_response.h"
#include "net/kafka/gen/write_txn_markers_request.h"
#include "net/kafka/gen/write_txn_markers_response.h"
#include "net/kafka/wire.h"

namespace samsa::daemon {

replication::TopicSpec txn_state_topic_spec(const Config& cfg, bool cluster) {
  const auto partitions =
      static_cast<std::int32_t>(cfg.get_int("transaction.state.log.num.partitions"));
  const auto rf =
      static_cast<std::int16_t>(cluster && !cfg.is_set("transaction.state.log.replication.factor")
                                    ? kClusterOffsetsReplicationFactor
                                    : cfg.get_int("transaction.state.log.replication.factor"));
  // As Kafka creates it: compacted, transaction.state.log.segment.bytes (100 MiB).
  return replication::TopicSpec{
      std::string(coordinator::kTxnStateTopic),
      partitions,
      rf,
      {{"cleanup.policy", "compact"},
       {"segment.bytes", std::to_string(cfg.get_int("transaction.state.log.segment.bytes"))}}};
}

coordinator::TxnCoordinator::Options txn_coordinator_options(const Config& c) {
  coordinator::TxnCoordinator::Options o;
  o.max_timeout_ms = static_cast<std::int32_t>(c.get_int("transaction.max.timeout.ms"));
  o.abort_check_interval_ms =
      c.get_int("transaction.abort.timed.out.transaction.cleanup.interval.ms");
  o.id_expiration_ms = c.get_int("transactional.id.expiration.ms");
  o.id_expiration_check_ms =
      c.get_int("transaction.remove.expired.transaction.cleanup.interval.ms");
  return o;
}

// ---------------------------------------------------------------------------------------------
// Markers

namespace {

// Kafka's markers wait for the ISR like acks=all produces, within request.timeout.ms.
constexpr std::int64_t kMarkerTimeoutMs = 30000;

// Where another broker takes inter-broker requests (markers, verifications), by this reactor's
// image; nullptr when it is not registered there with that listener.
const replication::BrokerEndpoint* inter_broker_endpoint(const ReactorContext& ctx,
                                                         std::int32_t broker) {
  auto br = ctx.image->brokers().find(broker);
  if (br == ctx.image->brokers().end()) return nullptr;
  for (const auto& e : br->second.endpoints)
    if (e.name == ctx.settings->cluster.inter_broker_listener) return &e;
  return nullptr;
}

struct MarkerOp : replication::ProduceOp {
  std::vector<std::byte> bytes;
  std::move_only_function<void(kafka::ErrorCode)> done;
};

}  // namespace

void write_marker_on_shard(ReactorContext& shard, const std::string& topic, std::int32_t partition,
                           const coordinator::MarkerWriter::Marker& m,
                           std::move_only_function<void(kafka::ErrorCode)> done) {
  auto p = shard.shard->lookup(topic, partition);
  if (!p) {
    done(p.error());
    return;
  }
  auto* op = new MarkerOp();
  op->bytes = io::build_txn_marker(m.producer_id, m.producer_epoch, m.commit, m.coordinator_epoch,
                                   wall_ms());
  op->batch = op->bytes;
  op->acks = -1;
  op->origin = replication::AppendOrigin::marker;
  op->deadline_ns = mono_ns() + kMarkerTimeoutMs * 1'000'000;
  op->done = std::move(done);
  op->produced = [](replication::ProduceOp* base) {
    std::unique_ptr<MarkerOp> own(static_cast<MarkerOp*>(base));
    if (own->error != kafka::ErrorCode::none)
      LOG_DEBUG("marker refused: %s %s", std::string(kafka::error_name(own->error)).c_str(),
                own->message.c_str());
    own->done(own->error);
  };
  Broker& b = *shard.broker;
  // The group coordinator learns of markers on its partitions (pending TxnOffsetCommits).
  if (topic == coordinator::kOffsetsTopic) {
    auto inner = std::move(op->done);
    op->done = [&b, partition, pid = m.producer_id, commit = m.commit,
                inner = std::move(inner)](kafka::ErrorCode e) mutable {
      if (e == kafka::ErrorCode::none) {
        b.on_coordinator([partition, pid, commit](coordinator::GroupCoordinator& g) {
          g.complete_txn(partition, pid, commit);
        });
      }
      inner(e);
    };
  }
  (*p)->produce(op);
}

namespace {

// The coordinator's markers. Reactor 0 looks up each partition's leader in its image: those
// led here are written on the shards that own them, the others go to their leaders in one
// WriteTxnMarkers per broker (inter.broker.listener.name, BrokerSender), as Kafka's
// TransactionMarkerChannelManager sends them. Every outcome is counted on the coordinator's
// thread; failures are retried by the coordinator.
class ShardMarkerWriter final : public coordinator::MarkerWriter {
 public:
  explicit ShardMarkerWriter(Broker& b) : b_(b) {}

  void write(const Marker& m, std::vector<Target> targets, Done done) override {
    auto round = std::make_shared<Round>();
    round->errors.assign(targets.size(), kafka::ErrorCode::none);
    round->left = targets.size();
    round->done = std::move(done);
    round->b = &b_;
    b_.on_reactor(0, [round, m, targets = std::move(targets)](ReactorContext& ctx) mutable {
      route(ctx, round, m, std::move(targets));
    });
  }

 private:
  struct Round {
    Broker* b = nullptr;
    std::vector<kafka::ErrorCode> errors;
    std::size_t left = 0;
    Done done;
    // Any thread: target i's outcome, counted on the coordinator's thread.
    void finish(std::size_t i, kafka::ErrorCode e, const std::shared_ptr<Round>& self) {
      b->on_txn_coordinator([self, i, e](coordinator::TxnCoordinator&) {
        self->errors[i] = e;
        if (--self->left == 0) self->done(std::move(self->errors));
      });
    }
  };

  static void route(ReactorContext& ctx, const std::shared_ptr<Round>& round, const Marker& m,
                    std::vector<Target> targets) {
    Broker* b = round->b;
    const auto& s = *ctx.settings;
    std::map<std::int32_t, std::vector<std::size_t>> remote;  // leader -> target indexes
    for (std::size_t i = 0; i < targets.size(); ++i) {
      const Target& t = targets[i];
      const replication::TopicState* topic = ctx.image->topic(t.topic);
      if (!topic || t.partition < 0 ||
          static_cast<std::size_t>(t.partition) >= topic->partitions.size()) {
        round->finish(i, kafka::ErrorCode::unknown_topic_id, round);  // deleted: nothing to mark
        continue;
      }
      const std::int32_t leader = topic->partitions[static_cast<std::size_t>(t.partition)].leader;
      if (!s.clustered() || leader == s.node_id) {
        b->on_reactor(b->owner(t.topic, t.partition), [round, i, m, t](ReactorContext& shard) {
          write_marker_on_shard(shard, t.topic, t.partition, m,
                                [round, i](kafka::ErrorCode e) { round->finish(i, e, round); });
        });
      } else if (leader < 0 || !ctx.sender) {
        round->finish(i, kafka::ErrorCode::not_leader_or_follower, round);
      } else {
        remote[leader].push_back(i);
      }
    }
    for (auto& [leader, idx] : remote)
      send_remote(ctx, round, m, targets, leader, idx);
  }

  static void send_remote(ReactorContext& ctx, const std::shared_ptr<Round>& round, const Marker& m,
                          const std::vector<Target>& targets, std::int32_t leader,
                          const std::vector<std::size_t>& idx) {
    auto fail = [&](kafka::ErrorCode e) {
      for (std::size_t i : idx)
        round->finish(i, e, round);
    };
    const replication::BrokerEndpoint* ep = inter_broker_endpoint(ctx, leader);
    if (!ep) return fail(kafka::ErrorCode::not_leader_or_follower);
    kafka::WriteTxnMarkersRequest req;
    kafka::WriteTxnMarkersRequest::WritableTxnMarker wm;
    wm.producer_id = m.producer_id;
    wm.producer_epoch = m.producer_epoch;
    wm.transaction_result = m.commit;
    wm.coordinator_epoch = m.coordinator_epoch;
    std::map<std::string, std::vector<std::int32_t>> by_topic;
    for (std::size_t i : idx)
      by_topic[targets[i].topic].push_back(targets[i].partition);
    for (auto& [topic, parts] : by_topic)
      wm.topics.push_back({topic, parts});
    req.markers.push_back(std::move(wm));
    static std::atomic<std::int32_t> correlation{0};
    auto frame = kafka::flatten_to_buffer(
        kafka::encode_request(req, 1, ++correlation, "samsa-txn-coordinator"));
    // Which target each answered (topic, partition) is.
    std::map<std::pair<std::string, std::int32_t>, std::size_t> where;
    for (std::size_t i : idx)
      where[{targets[i].topic, targets[i].partition}] = i;
    ctx.sender->send(
        leader, ep->host, static_cast<std::uint16_t>(ep->port), std::move(frame),
        [round, idx, where = std::move(where)](std::optional<net::Buffer> resp) {
          std::vector<bool> answered(idx.size(), false);
          if (resp) {
            auto h = kafka::decode_response_header(resp->span(),
                                                   kafka::WriteTxnMarkersResponse::kApiKey, 1);
            kafka::WriteTxnMarkersResponse out;
            if (h.ok() &&
                kafka::decode_response_body(resp->span(), h, 1, out) == kafka::DecodeError::none) {
              for (const auto& mr : out.markers)
                for (const auto& tr : mr.topics)
                  for (const auto& pr : tr.partitions) {
                    auto it = where.find({tr.name, pr.partition_index});
                    if (it == where.end()) continue;
                    round->finish(it->second, static_cast<kafka::ErrorCode>(pr.error_code), round);
                    for (std::size_t k = 0; k < idx.size(); ++k)
                      if (idx[k] == it->second) answered[k] = true;
                  }
            }
          }
          for (std::size_t k = 0; k < idx.size(); ++k)
            if (!answered[k]) round->finish(idx[k], kafka::ErrorCode::network_exception, round);
        });
  }

  Broker& b_;
};

}  // namespace

std::unique_ptr<coordinator::MarkerWriter> make_marker_writer(Broker& b) {
  return std::make_unique<ShardMarkerWriter>(b);
}

// ---------------------------------------------------------------------------------------------
// Adding and verifying a transaction's partitions (KIP-890)

kafka::ErrorCode produce_error_of(kafka::ErrorCode e) {
  switch (e) {
    case kafka::ErrorCode::none:
    case kafka::ErrorCode::invalid_txn_state:
    case kafka::ErrorCode::invalid_producer_epoch:
      return e;
    case kafka::ErrorCode::producer_fenced:
    case kafka::ErrorCode::invalid_producer_id_mapping:
      return kafka::ErrorCode::invalid_producer_epoch;
    default:  // not coordinator, loading, unreachable, concurrent: the producer retries
      return kafka::ErrorCode::not_enough_replicas;
  }
}

void check_txn_partition(ReactorContext& shard, TxnPartitionCheck c,
                         std::move_only_function<void(kafka::ErrorCode)> done) {
  Broker* b = shard.broker;
  const std::size_t home = shard.index;
  auto reply = std::make_shared<std::move_only_function<void(kafka::ErrorCode)>>(std::move(done));
  auto answer = [b, home, reply](kafka::ErrorCode e) {
    b->on_reactor(home, [reply, e](ReactorContext&) { (*reply)(e); });
  };
  const replication::TopicState* ts = shard.image->topic(coordinator::kTxnStateTopic);
  if (!ts || ts->partitions.empty()) return answer(kafka::ErrorCode::coordinator_not_available);
  const auto n = static_cast<std::int32_t>(ts->partitions.size());
  const std::int32_t leader =
      ts->partitions[static_cast<std::size_t>(coordinator::partition_for(c.transactional_id, n))]
          .leader;
  const auto& s = *shard.settings;
  const std::string topic = c.topic;
  const std::int32_t partition = c.partition;
  if (!s.clustered() || leader == s.node_id) {
    coordinator::TxnAddRequest req;
    req.transactional_id = std::move(c.transactional_id);
    req.producer_id = c.producer_id;
    req.producer_epoch = c.producer_epoch;
    req.verify_only = !c.add;
    req.tv2 = c.add;
    req.partitions[topic].insert(partition);
    b->on_txn_coordinator([req = std::move(req), answer, topic,
                           partition](coordinator::TxnCoordinator& tc) mutable {
      tc.add_partitions(std::move(req), [answer, topic, partition](coordinator::TxnAddResult r) {
        answer(r[topic][partition]);
      });
    });
    return;
  }
  if (leader < 0) return answer(kafka::ErrorCode::coordinator_not_available);
  kafka::AddPartitionsToTxnRequest req;
  kafka::AddPartitionsToTxnRequest::AddPartitionsToTxnTransaction t;
  t.transactional_id = std::move(c.transactional_id);
  t.producer_id = c.producer_id;
  t.producer_epoch = c.producer_epoch;
  t.verify_only = !c.add;
  t.topics.push_back({topic, {partition}});
  req.transactions.push_back(std::move(t));
  b->on_reactor(
      0, [req = std::move(req), leader, answer, topic, partition](ReactorContext& ctx) mutable {
        const replication::BrokerEndpoint* ep = inter_broker_endpoint(ctx, leader);
        if (!ep || !ctx.sender) return answer(kafka::ErrorCode::coordinator_not_available);
        static std::atomic<std::int32_t> correlation{0};
        auto frame = kafka::flatten_to_buffer(
            kafka::encode_request(req, 4, ++correlation, "samsa-txn-verification"));
        ctx.sender->send(leader, ep->host, static_cast<std::uint16_t>(ep->port), std::move(frame),
                         [answer, topic, partition](std::optional<net::Buffer> resp) {
                           kafka::ErrorCode e = kafka::ErrorCode::network_exception;
                           kafka::AddPartitionsToTxnResponse out;
                           if (resp) {
                             auto h = kafka::decode_response_header(
                                 resp->span(), kafka::AddPartitionsToTxnResponse::kApiKey, 4);
                             if (h.ok() && kafka::decode_response_body(resp->span(), h, 4, out) ==
                                               kafka::DecodeError::none) {
                               e = static_cast<kafka::ErrorCode>(out.error_code);
                               for (const auto& tr : out.results_by_transaction)
                                 for (const auto& top : tr.topic_results)
                                   for (const auto& pr : top.results_by_partition)
                                     if (top.name == topic && pr.partition_index == partition)
                                       e = static_cast<kafka::ErrorCode>(pr.partition_error_code);
                             }
                           }
                           answer(e);
                         });
      });
}

}  // namespace samsa::daemon
