// Transactions of the Broker: where __transaction_state comes from, the transaction
// coordinator's options, and how its markers reach the partitions (TxnMarkers below, also what
// the WriteTxnMarkers handler uses). The coordinator shares the group coordinator's thread and
// its producer ids; its partitions follow leadership as the group coordinator's do
// (broker_groups.cc).
#include "daemon/txn_markers.h"

#include <memory>

#include "base/clock.h"
#include "base/log.h"
#include "daemon/broker.h"
#include "io/batch_builder.h"

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
  return o;
}

// ---------------------------------------------------------------------------------------------
// Markers

namespace {

// Kafka's markers wait for the ISR like acks=all produces, within request.timeout.ms.
constexpr std::int64_t kMarkerTimeoutMs = 30000;

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

// The coordinator's markers, written on the shards that own the partitions. A partition led
// by another broker answers NOT_LEADER_OR_FOLLOWER here (retried by the coordinator).
class ShardMarkerWriter final : public coordinator::MarkerWriter {
 public:
  explicit ShardMarkerWriter(Broker& b) : b_(b) {}

  void write(const Marker& m, std::vector<Target> targets, Done done) override {
    struct Round {
      std::vector<kafka::ErrorCode> errors;
      std::size_t left = 0;
      Done done;
    };
    auto round = std::make_shared<Round>();
    round->errors.assign(targets.size(), kafka::ErrorCode::none);
    round->left = targets.size();
    round->done = std::move(done);
    Broker* b = &b_;
    for (std::size_t i = 0; i < targets.size(); ++i) {
      const Target& t = targets[i];
      b->on_reactor(
          b->owner(t.topic, t.partition),
          [b, round, i, m, topic = t.topic, partition = t.partition](ReactorContext& ctx) mutable {
            write_marker_on_shard(ctx, topic, partition, m, [b, round, i](kafka::ErrorCode e) {
              // Counted on the coordinator's thread.
              b->on_txn_coordinator([round, i, e](coordinator::TxnCoordinator&) {
                round->errors[i] = e;
                if (--round->left == 0) round->done(std::move(round->errors));
              });
            });
          });
    }
  }

 private:
  Broker& b_;
};

}  // namespace

std::unique_ptr<coordinator::MarkerWriter> make_marker_writer(Broker& b) {
  return std::make_unique<ShardMarkerWriter>(b);
}

}  // namespace samsa::daemon
