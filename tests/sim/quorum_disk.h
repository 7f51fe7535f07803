// The quorum simulation's fake disks (quorum_sim.cc): a node's metadata log (QuorumLog, a
// ReplicaLog with a movable start, whose unsynced tail a power cut takes back) and its
// snapshots (SimSnapshots, a SnapshotStore that installs a received snapshot by restarting the
// log at its end).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "io/leader_epoch.h"
#include "replication/quorum/raft.h"
#include "replication/replica_log.h"

namespace samsa::sim {

using namespace samsa::replication;
using quorum::SnapshotId;

// A record of the simulated metadata log: the epoch it was written in and a unique value
// (negative: a leader-change record, -epoch).
struct QRec {
  std::int32_t epoch = 0;
  std::int64_t value = 0;
  bool operator==(const QRec&) const = default;
};

class QuorumLog final : public ReplicaLog {
 public:
  QuorumLog() : epochs_(*io::LeaderEpochCache::load("/nonexistent/samsa-sim/quorum-epochs")) {
    epochs_.set_writer([](const std::filesystem::path&, std::vector<std::vector<std::string>>) {});
  }
  std::int64_t log_start_offset() const override { return start_; }
  std::int64_t log_end_offset() const override { return start_ + size(); }
  std::int64_t durable_end_offset() const override { return durable_; }
  std::optional<std::int32_t> latest_epoch() const override { return epochs_.latest_epoch(); }
  io::LeaderEpochCache::EpochEnd end_offset_for(std::int32_t epoch) const override {
    return epochs_.end_offset_for(epoch, log_end_offset());
  }
  io::Result<void> assign_epoch(std::int32_t epoch, std::int64_t start) override {
    return epochs_.assign(epoch, start);
  }
  io::Result<void> truncate_to(std::int64_t offset) override {
    if (syncing_) return std::unexpected(io::Error{io::Errc::busy, "sync in flight"});
    if (offset >= log_end_offset()) return {};
    recs_.resize(static_cast<std::size_t>(std::max<std::int64_t>(offset - start_, 0)));
    durable_ = std::min(durable_, log_end_offset());
    (void)epochs_.truncate_from_end(log_end_offset());
    ++truncations_;
    return {};
  }
  std::int64_t size() const { return static_cast<std::int64_t>(recs_.size()); }
  const QRec& at(std::int64_t offset) const {
    return recs_[static_cast<std::size_t>(offset - start_)];
  }

  void append(QRec r) { recs_.push_back(r); }
  bool start_sync() {
    if (syncing_ || durable_ == log_end_offset()) return false;
    syncing_ = true;
    sync_target_ = log_end_offset();
    return true;
  }
  void finish_sync() {
    if (!syncing_) return;
    syncing_ = false;
    durable_ = std::max(durable_, std::min(sync_target_, log_end_offset()));
  }
  bool syncing() const { return syncing_; }
  // kill -9: the page cache keeps what was written (the restart's recovery syncs it).
  void kill() {
    syncing_ = false;
    durable_ = log_end_offset();
  }
  // Power cut: only what was synced survives.
  void power_cut() {
    syncing_ = false;
    recs_.resize(static_cast<std::size_t>(durable_ - start_));
    (void)epochs_.truncate_from_end(log_end_offset());
  }
  // Everything below offset is in a durable snapshot: drop it.
  void delete_prefix(std::int64_t offset) {
    if (offset <= start_ || offset > durable_) return;
    recs_.erase(recs_.begin(), recs_.begin() + (offset - start_));
    start_ = offset;
    (void)epochs_.truncate_from_start(offset);
  }
  // A snapshot from the leader was installed: the log restarts empty at its end.
  void restart_at(std::int64_t offset, std::int32_t epoch) {
    syncing_ = false;
    recs_.clear();
    start_ = durable_ = offset;
    (void)epochs_.clear();
    (void)epoch;
  }
  std::int64_t truncations() const { return truncations_; }

 private:
  std::vector<QRec> recs_;
  std::int64_t start_ = 0;
  std::int64_t durable_ = 0;
  bool syncing_ = false;
  std::int64_t sync_target_ = 0;
  io::LeaderEpochCache epochs_;
  std::int64_t truncations_ = 0;
};

// Snapshot bytes: the records below end_offset as (epoch, value) pairs, then a checksum.
inline std::vector<std::byte> encode_snapshot(std::span<const QRec> recs) {
  std::vector<std::byte> out(recs.size() * sizeof(QRec) + 8);
  std::uint64_t sum = 1469598103934665603ull;
  for (std::size_t i = 0; i < recs.size(); ++i) {
    std::memcpy(out.data() + i * sizeof(QRec), &recs[i], sizeof(QRec));
    sum = (sum ^ static_cast<std::uint64_t>(recs[i].value)) * 1099511628211ull +
          static_cast<std::uint64_t>(recs[i].epoch);
  }
  std::memcpy(out.data() + recs.size() * sizeof(QRec), &sum, 8);
  return out;
}
inline std::optional<std::vector<QRec>> decode_snapshot(std::span<const std::byte> b) {
  if (b.size() < 8 || (b.size() - 8) % sizeof(QRec) != 0) return std::nullopt;
  std::vector<QRec> recs((b.size() - 8) / sizeof(QRec));
  std::uint64_t sum = 1469598103934665603ull, stored = 0;
  for (std::size_t i = 0; i < recs.size(); ++i) {
    std::memcpy(&recs[i], b.data() + i * sizeof(QRec), sizeof(QRec));
    sum = (sum ^ static_cast<std::uint64_t>(recs[i].value)) * 1099511628211ull +
          static_cast<std::uint64_t>(recs[i].epoch);
  }
  std::memcpy(&stored, b.data() + recs.size() * sizeof(QRec), 8);
  if (sum != stored) return std::nullopt;
  return recs;
}

class SimSnapshots final : public quorum::SnapshotStore {
 public:
  explicit SimSnapshots(QuorumLog& log) : log_(log) {}
  std::optional<SnapshotId> latest() const override {
    if (durable_.empty()) return std::nullopt;
    return durable_.rbegin()->first;
  }
  std::int64_t size(const SnapshotId& id) const override {
    auto it = durable_.find(id);
    return it == durable_.end() ? -1 : static_cast<std::int64_t>(it->second.size());
  }
  std::vector<std::byte> read(const SnapshotId& id, std::int64_t position,
                              std::int64_t max_bytes) const override {
    const auto& b = durable_.at(id);
    const auto from = static_cast<std::size_t>(std::min<std::int64_t>(position, b.size()));
    const auto n = std::min<std::size_t>(b.size() - from, static_cast<std::size_t>(max_bytes));
    return {b.begin() + from, b.begin() + from + n};
  }
  void begin(const SnapshotId& id) override {
    receiving_ = id;
    buf_.clear();
  }
  void write(std::span<const std::byte> bytes) override {
    buf_.insert(buf_.end(), bytes.begin(), bytes.end());
  }
  bool finish() override {
    auto recs = decode_snapshot(buf_);
    if (!recs || static_cast<std::int64_t>(recs->size()) != receiving_.end_offset) return false;
    // Written and synced before the log restarts at its end (the daemon: rename after fsync).
    durable_[receiving_] = buf_;
    log_.restart_at(receiving_.end_offset, receiving_.epoch);
    installed = std::move(*recs);
    ++installs;
    return true;
  }
  // Taken locally from the applied state (durable at once: the driver's write is synced
  // before the log prefix is deleted).
  void take(std::span<const QRec> applied, std::int32_t epoch) {
    durable_[SnapshotId{static_cast<std::int64_t>(applied.size()), epoch}] =
        encode_snapshot(applied);
    while (durable_.size() > 2)
      durable_.erase(durable_.begin());
  }
  // Set by finish(): the state the node's state machine restarts from.
  std::vector<QRec> installed;
  std::int64_t installs = 0;
  const std::map<SnapshotId, std::vector<std::byte>>& all() const { return durable_; }

 private:
  QuorumLog& log_;
  std::map<SnapshotId, std::vector<std::byte>> durable_;
  SnapshotId receiving_;
  std::vector<std::byte> buf_;
};

}  // namespace samsa::sim
