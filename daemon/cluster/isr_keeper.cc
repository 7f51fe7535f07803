#include "daemon/cluster/isr_keeper.h"

#include "base/clock.h"
#include "base/log.h"
#include "net/kafka/api.h"
#include "net/kafka/gen/alter_partition_request.h"
#include "net/kafka/gen/alter_partition_response.h"
#include "net/kafka/wire.h"
#include "replication/cluster_wire.h"

namespace samsa::cluster {

// The partitions, shards and replica state machines it drives.
using namespace samsa::replication;
namespace {

// v3: the new ISR names each member's broker epoch, so the controller refuses a member that
// restarted since it fetched (KIP-903).
constexpr std::int16_t kAlterPartitionVersion = 3;

}  // namespace

IsrKeeper::IsrKeeper(io::Reactor& r, Shard& shard, Options o, Send send)
    : r_(r), shard_(shard), opts_(o), send_(std::move(send)) {
  timer_.self = this;
  timer_.fn = &IsrKeeper::on_tick;
}

IsrKeeper::~IsrKeeper() {
  stop();
  *alive_ = false;
}

void IsrKeeper::start() {
  if (!stopped_) return;
  stopped_ = false;
  r_.arm(&timer_, mono_ns() + opts_.interval_ms * 1'000'000);
}

void IsrKeeper::stop() {
  stopped_ = true;
  if (timer_.armed()) r_.disarm(&timer_);
}

void IsrKeeper::on_tick(io::Timer* t) {
  IsrKeeper* self = static_cast<TickTimer*>(t)->self;
  self->tick();
  if (!self->stopped_) self->r_.arm(t, mono_ns() + self->opts_.interval_ms * 1'000'000);
}

void IsrKeeper::tick() {
  const ImagePtr& image = shard_.image();
  if (!image || shard_.broker_epoch() < 0) return;
  const std::int64_t now = mono_ms();
  kafka::AlterPartitionRequest req;
  req.broker_id = opts_.node_id;
  req.broker_epoch = shard_.broker_epoch();
  std::vector<Sent> sent;
  shard_.for_each([&](Partition& p) {
    ReplicaState* rs = p.replica();
    if (!rs || rs->role() != ReplicaRole::leader) return;
    auto prop = rs->poll_isr(now, image->brokers());
    if (!prop) return;
    add_alter_partition(req, p.topic_id(), p.index(), *prop);
    sent.push_back(Sent{p.topic(), p.index(), p.topic_id(), prop->request_id, rs->isr().size()});
  });
  if (sent.empty()) return;
  ++stats_.requests;
  // Without its size prefix: the link adds its own.
  auto frame = kafka::flatten_body(
      kafka::encode_request(req, kAlterPartitionVersion, next_correlation_++, "samsa-isr"));
  for (const auto& s : sent)
    LOG_DEBUG("AlterPartition %s-%d (request %lld)", s.topic.c_str(), s.partition,
              static_cast<long long>(s.request_id));
  send_(std::move(frame), [this, alive = std::weak_ptr<bool>(alive_), sent = std::move(sent)](
                              std::optional<std::vector<std::byte>> answer) mutable {
    if (alive.expired()) return;
    on_answer(sent, std::move(answer));
  });
}

void IsrKeeper::on_answer(const std::vector<Sent>& sent,
                          std::optional<std::vector<std::byte>> frame) {
  // No answer: each proposal stays pending and poll_isr sends it again after its retry time.
  if (!frame) {
    ++stats_.unreached;
    return;
  }
  auto h = kafka::decode_response_header(*frame, kafka::AlterPartitionResponse::kApiKey,
                                         kAlterPartitionVersion);
  kafka::AlterPartitionResponse resp;
  if (!h.ok() || kafka::decode_response_body(*frame, h, kAlterPartitionVersion, resp) !=
                     kafka::DecodeError::none) {
    LOG_WARN("AlterPartition: the controller's answer does not decode; the proposals retry");
    ++stats_.unreached;
    return;
  }
  const std::int64_t now = mono_ms();
  for (const auto& s : sent) {
    Partition* p = shard_.find_replica(s.topic, s.partition);
    if (!p || !p->replica() || p->topic_id() != s.topic_id) continue;
    auto a = alter_partition_answer_of(resp, s.topic_id, s.partition, s.request_id);
    if (!a) continue;
    if (a->error == kafka::ErrorCode::none) {
      if (a->isr.size() < s.isr_before) ++stats_.shrinks;
      if (a->isr.size() > s.isr_before) ++stats_.expands;
      LOG_INFO("ISR of %s-%d is now %zu of its replicas (partition epoch %d)", s.topic.c_str(),
               s.partition, a->isr.size(), a->partition_epoch);
    } else {
      ++stats_.refusals;
      LOG_INFO("AlterPartition %s-%d refused: %s", s.topic.c_str(), s.partition,
               std::string(kafka::error_name(a->error)).c_str());
    }
    p->on_alter_partition_answer(*a, now);
  }
}

}  // namespace samsa::cluster
