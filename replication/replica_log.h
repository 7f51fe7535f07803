// replication::ReplicaLog — what the replication state machines (replica_state.h) need from a
// partition's log: its ends, its leader epochs and truncation. Appends stay with the driver
// (the leader's produce path, the follower's fetcher), which owns the batch bytes.
// IoReplicaLog puts an io::Log behind it; the simulation test puts a fake disk behind it that
// loses unsynced writes on a crash.
// Used on the thread that owns the log (a reactor).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "io/leader_epoch.h"
#include "io/log.h"

namespace samsa::replication {

class ReplicaLog {
 public:
  virtual ~ReplicaLog() = default;
  virtual std::int64_t log_start_offset() const = 0;
  virtual std::int64_t log_end_offset() const = 0;
  // Everything below is on stable storage: what a follower may report as its fetch offset.
  virtual std::int64_t durable_end_offset() const = 0;
  // What a follower's fetch can be given now. Appends accepted but not yet written are not
  // (io::Log writes them a moment later), so a follower is caught up when it reaches this, not
  // the log end: under a steady acks=all load the log end is always a little ahead.
  virtual std::int64_t readable_end_offset() const { return log_end_offset(); }
  // The newest leader epoch in the log's epoch cache (the epoch of its last batch).
  virtual std::optional<std::int32_t> latest_epoch() const = 0;
  // OffsetsForLeaderEpoch: the largest epoch <= epoch and where it ends ({-1, -1} if none).
  virtual io::LeaderEpochCache::EpochEnd end_offset_for(std::int32_t epoch) const = 0;
  // Records that `epoch` starts at `start_offset` (leader election; a follower's first batch of
  // a new epoch).
  virtual io::Result<void> assign_epoch(std::int32_t epoch, std::int64_t start_offset) = 0;
  // Drops every offset >= offset; Errc::busy while appends are in flight (call again later).
  virtual io::Result<void> truncate_to(std::int64_t offset) = 0;
};

// An io::Log as a ReplicaLog (the daemon's).
class IoReplicaLog final : public ReplicaLog {
 public:
  // after_truncate runs after every successful truncation (the partition rebuilds the state
  // it derives from the log).
  explicit IoReplicaLog(io::Log& log, std::function<void()> after_truncate = {})
      : log_(log), after_truncate_(std::move(after_truncate)) {}
  std::int64_t log_start_offset() const override { return log_.log_start_offset(); }
  std::int64_t log_end_offset() const override { return log_.log_end_offset(); }
  std::int64_t durable_end_offset() const override { return log_.durable_end_offset(); }
  std::int64_t readable_end_offset() const override { return log_.written_end_offset(); }
  std::optional<std::int32_t> latest_epoch() const override {
    return log_.leader_epochs().latest_epoch();
  }
  io::LeaderEpochCache::EpochEnd end_offset_for(std::int32_t epoch) const override {
    return log_.leader_epochs().end_offset_for(epoch, log_.log_end_offset());
  }
  io::Result<void> assign_epoch(std::int32_t epoch, std::int64_t start_offset) override {
    return log_.leader_epochs().assign(epoch, start_offset);
  }
  io::Result<void> truncate_to(std::int64_t offset) override {
    auto r = log_.truncate_to(offset);
    if (r && after_truncate_) after_truncate_();
    return r;
  }

 private:
  io::Log& log_;
  std::function<void()> after_truncate_;
};

}  // namespace samsa::replication
