#include "replication/partition.h"

#include "base/bytes.h"
#include "base/log.h"
#include "io/leader_epoch.h"

namespace samsa::replication {

Partition::Partition(std::string topic, Uuid topic_id, std::int32_t index,
                     std::int32_t leader_epoch, std::unique_ptr<io::Log> log)
    : topic_(std::move(topic)),
      topic_id_(topic_id),
      index_(index),
      leader_epoch_(leader_epoch),
      log_(std::move(log)) {
  high_watermark_ = log_->durable_end_offset();
  log_->set_listener(this);
}

Partition::~Partition() {
  log_->set_listener(nullptr);
  // Parked fetches must not keep pointing here; wake them so they re-resolve the partition.
  while (PartitionWaiter* w = waiters_) {
    remove_waiter(w);
    w->on_partition_advanced();
  }
}

io::Result<io::AppendResult> Partition::append(io::AppendOp* op) {
  // The leader stamps its epoch into partitionLeaderEpoch (outside the CRC, as in Kafka):
  // followers and OffsetForLeaderEpoch rely on it to find where logs diverge.
  if (op->batch.size() >= 16) store_be<std::int32_t>(op->batch.data() + 12, leader_epoch_);
  auto r = log_->append(op);
  // The first batch of a new epoch starts that epoch in leader-epoch-checkpoint (rare: once
  // per leadership change, so its small synchronous file write stays off the common path).
  if (r) {
    auto& epochs = log_->leader_epochs();
    auto latest = epochs.latest_epoch();
    if (!latest || *latest < leader_epoch_) {
      if (auto a = epochs.assign(leader_epoch_, r->base_offset); !a)
        LOG_WARN("%s-%d: leader epoch checkpoint: %s", topic_.c_str(), index_,
                 a.error().detail.c_str());
    }
  }
  return r;
}

void Partition::add_waiter(PartitionWaiter* w) {
  if (w->linked) return;
  w->prev = nullptr;
  w->next = waiters_;
  if (waiters_) waiters_->prev = w;
  waiters_ = w;
  w->linked = true;
}

void Partition::remove_waiter(PartitionWaiter* w) {
  if (!w->linked) return;
  if (w->prev) {
    w->prev->next = w->next;
  } else {
    waiters_ = w->next;
  }
  if (w->next) w->next->prev = w->prev;
  w->prev = w->next = nullptr;
  w->linked = false;
}

void Partition::on_log_advanced(io::Log& log) {
  std::int64_t hw = log.durable_end_offset();
  if (hw == high_watermark_) return;
  high_watermark_ = hw;
  // Waking may make a waiter unlink itself (or others); detach the list first.
  PartitionWaiter* w = waiters_;
  waiters_ = nullptr;
  while (w) {
    PartitionWaiter* next = w->next;
    w->prev = w->next = nullptr;
    w->linked = false;
    w->on_partition_advanced();
    w = next;
  }
}

io::Result<void> Partition::close() {
  return log_->close();
}

}  // namespace samsa::replication
