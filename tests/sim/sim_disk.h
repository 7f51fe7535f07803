// The simulation's fake disks: a replica's log (SimLog, a ReplicaLog whose unsynced records a
// crash takes back) and the controller's metadata log (SimQuorum, a single-node MetadataQuorum
// that commits what is synced), plus History, a log prefix comparable in O(1).
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "io/leader_epoch.h"
#include "replication/controller_state.h"
#include "replication/replica_log.h"

namespace samsa::sim {

using namespace samsa::replication;

inline std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

// A record of the simulated partition: the leader epoch it was written in and a unique value.
struct Rec {
  std::int32_t epoch;
  std::int64_t value;
};

// A prefix of a log, comparable in O(1): ph[i] hashes the first i records.
struct History {
  std::vector<Rec> recs;
  std::vector<std::uint64_t> ph{0};
  void push(Rec r) {
    recs.push_back(r);
    ph.push_back(mix(mix(ph.back(), static_cast<std::uint64_t>(r.epoch)),
                     static_cast<std::uint64_t>(r.value)));
  }
  void cut(std::int64_t n) {
    recs.resize(static_cast<std::size_t>(n));
    ph.resize(static_cast<std::size_t>(n) + 1);
  }
  std::int64_t size() const { return static_cast<std::int64_t>(recs.size()); }
};

// The fake disk under a replica: records are written at once and synced by a later event; a
// crash keeps only the synced prefix. Like io::Log, truncation needs the log idle and is synced.
class SimLog final : public ReplicaLog {
 public:
  SimLog() : epochs_(*io::LeaderEpochCache::load("/nonexistent/samsa-sim/leader-epoch")) {
    epochs_.set_writer([](const std::filesystem::path&, std::vector<std::vector<std::string>>) {});
  }
  std::int64_t log_start_offset() const override { return 0; }
  std::int64_t log_end_offset() const override { return h_.size(); }
  std::int64_t durable_end_offset() const override { return durable_; }
  std::optional<std::int32_t> latest_epoch() const override { return epochs_.latest_epoch(); }
  io::LeaderEpochCache::EpochEnd end_offset_for(std::int32_t epoch) const override {
    return epochs_.end_offset_for(epoch, h_.size());
  }
  io::Result<void> assign_epoch(std::int32_t epoch, std::int64_t start) override {
    return epochs_.assign(epoch, start);
  }
  io::Result<void> truncate_to(std::int64_t offset) override {
    if (!idle()) return std::unexpected(io::Error{io::Errc::busy, "sync in flight"});
    if (offset >= h_.size()) {
      (void)epochs_.truncate_from_end(h_.size());  // as io::Log: an epoch with no record goes
      return {};
    }
    h_.cut(offset);
    durable_ = std::min(durable_, offset);
    (void)epochs_.truncate_from_end(offset);
    low_ = std::min(low_, offset);
    ++truncations_;
    return {};
  }
  bool idle() const { return !syncing_ && durable_ == h_.size(); }

  void append(Rec r) { h_.push(r); }
  // Group commit: one sync in flight, covering what was written when it started.
  bool start_sync() {
    if (syncing_ || durable_ == h_.size()) return false;
    syncing_ = true;
    sync_target_ = h_.size();
    return true;
  }
  void finish_sync() {
    if (!syncing_) return;
    syncing_ = false;
    durable_ = std::max(durable_, std::min(sync_target_, h_.size()));
  }
  // A clean stop syncs everything written.
  void flush() {
    syncing_ = false;
    durable_ = h_.size();
  }
  void crash() {
    syncing_ = false;
    h_.cut(durable_);
    (void)epochs_.truncate_from_end(durable_);
    low_ = std::min(low_, durable_);
  }
  const History& history() const { return h_; }
  // The lowest log end since the checker last looked (truncations and crashes).
  std::int64_t take_low() {
    auto l = low_;
    low_ = INT64_MAX;
    return l;
  }
  std::int64_t truncations() const { return truncations_; }

 private:
  History h_;
  std::int64_t durable_ = 0;
  bool syncing_ = false;
  std::int64_t sync_target_ = 0;
  io::LeaderEpochCache epochs_;
  std::int64_t low_ = INT64_MAX;
  std::int64_t truncations_ = 0;
};

// The controller's metadata log on its own fake disk.
class SimQuorum final : public MetadataQuorum {
 public:
  std::int64_t propose(std::span<const MetadataRecord> records) override {
    for (const auto& r : records)
      recs_.push_back(r);
    return static_cast<std::int64_t>(recs_.size()) - 1;
  }
  std::int64_t committed_offset() const override { return durable_ - 1; }
  bool start_sync() {
    if (syncing_ || durable_ == static_cast<std::int64_t>(recs_.size())) return false;
    syncing_ = true;
    target_ = static_cast<std::int64_t>(recs_.size());
    return true;
  }
  void finish_sync() {
    if (!syncing_) return;
    syncing_ = false;
    durable_ = target_;
  }
  void crash() {
    syncing_ = false;
    recs_.resize(static_cast<std::size_t>(durable_));
  }
  const std::vector<MetadataRecord>& records() const { return recs_; }

 private:
  std::vector<MetadataRecord> recs_;
  std::int64_t durable_ = 0;
  bool syncing_ = false;
  std::int64_t target_ = 0;
};

}  // namespace samsa::sim
