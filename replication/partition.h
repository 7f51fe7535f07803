// replication::Partition — what a partition means on top of its io::Log: leadership and leader
// epoch, the high watermark consumers may read up to, and the long polls waiting for data.
// (Producer-id sequences and the ISR of a cluster are added here as those issues land.)
// Owned by one reactor's Shard; every call happens on that reactor's thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "io/log.h"
#include "replication/metadata_records.h"

namespace samsa::replication {

// A parked fetch (long poll) on this partition. Woken when the high watermark moves.
struct PartitionWaiter {
  virtual void on_partition_advanced() = 0;
  PartitionWaiter* prev = nullptr;
  PartitionWaiter* next = nullptr;
  bool linked = false;

 protected:
  ~PartitionWaiter() = default;
};

class Partition final : private io::Log::Listener {
 public:
  Partition(std::string topic, Uuid topic_id, std::int32_t index, std::int32_t leader_epoch,
            std::unique_ptr<io::Log> log);
  ~Partition();

  const std::string& topic() const { return topic_; }
  const Uuid& topic_id() const { return topic_id_; }
  std::int32_t index() const { return index_; }
  std::int32_t leader_epoch() const { return leader_epoch_; }
  void set_leader_epoch(std::int32_t e) { leader_epoch_ = e; }
  io::Log& log() { return *log_; }
  const io::Log& log() const { return *log_; }

  // Leader append of a producer's batch (offsets assigned by the log).
  io::Result<io::AppendResult> append(io::AppendOp* op);

  // Consumers read below this. A single replica's high watermark is its durable end: nothing
  // a consumer has seen can vanish in a power cut.
  std::int64_t high_watermark() const { return high_watermark_; }
  std::int64_t log_start_offset() const { return log_->log_start_offset(); }
  // Last stable offset: equal to the high watermark until transactions exist.
  std::int64_t last_stable_offset() const { return high_watermark_; }

  void add_waiter(PartitionWaiter* w);
  void remove_waiter(PartitionWaiter* w);

  // Closes the log cleanly (index files written, synced).
  io::Result<void> close();

 private:
  void on_log_advanced(io::Log& log) override;

  std::string topic_;
  Uuid topic_id_;
  std::int32_t index_;
  std::int32_t leader_epoch_;
  std::unique_ptr<io::Log> log_;
  std::int64_t high_watermark_ = 0;
  PartitionWaiter* waiters_ = nullptr;
};

}  // namespace samsa::replication
