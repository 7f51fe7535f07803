#include "replication/txn_state.h"

#include <algorithm>
#include <cinttypes>

#include "base/assert.h"
#include "base/log.h"

namespace samsa::replication {

void PartitionTxns::load(std::int64_t log_start, std::int64_t replay_from) {
  ongoing_.clear();
  unreplicated_.clear();
  aborted_.clear();
  file_last_.clear();
  unsynced_.clear();
  for (std::int64_t base : io::list_txn_indexes(dir_)) {
    bool torn = false;
    auto entries = io::read_txn_index(io::txn_index_path(dir_, base), &torn);
    if (!entries) {
      // Rebuilt only from what the replay covers: say so, the loss is the older entries'.
      LOG_ERROR(
          "%s: %s; aborted transactions it listed are not reported to read_committed "
          "consumers",
          name_.c_str(), entries.error().detail.c_str());
      entries = std::vector<io::AbortedTxn>{};
      torn = true;
    }
    std::vector<io::AbortedTxn> keep;
    for (const auto& e : *entries)
      if (e.last_offset >= log_start && e.last_offset < replay_from) keep.push_back(e);
    if (torn || keep.size() != entries->size()) {
      if (auto r = io::rewrite_txn_index(dir_, base, keep); !r)
        LOG_WARN("%s: %s", name_.c_str(), r.error().detail.c_str());
    }
    if (keep.empty()) continue;
    file_last_[base] = keep.back().last_offset;
    aborted_.insert(aborted_.end(), keep.begin(), keep.end());
  }
  std::sort(aborted_.begin(), aborted_.end(),
            [](const auto& a, const auto& b) { return a.last_offset < b.last_offset; });
}

void PartitionTxns::begin(std::int64_t producer_id, std::int64_t first_offset) {
  ongoing_.emplace(first_offset, producer_id);
}

void PartitionTxns::end(std::int64_t producer_id, std::int64_t first_offset,
                        std::int64_t marker_offset, bool abort, std::int64_t segment_base) {
  auto it = ongoing_.find(first_offset);
  SAMSA_ASSERT_MSG(it != ongoing_.end() && it->second == producer_id,
                   "a marker ends a transaction this partition holds open");
  ongoing_.erase(it);
  unreplicated_.emplace(marker_offset, first_offset);
  if (!abort) return;
  SAMSA_ASSERT(aborted_.empty() || aborted_.back().last_offset < marker_offset);
  // Kafka records the LSO as of the marker: the first offset still open once this one closed.
  std::int64_t lso = marker_offset + 1;
  if (!ongoing_.empty()) lso = std::min(lso, ongoing_.begin()->first);
  const io::AbortedTxn e{producer_id, first_offset, marker_offset, lso};
  aborted_.push_back(e);
  file_last_[segment_base] = marker_offset;
  unsynced_.insert(segment_base);
  if (auto r = io::append_txn_index(dir_, segment_base, e); !r) {
    // Memory still has it; a restart rebuilds it unless a producer snapshot passed it.
    LOG_ERROR("%s: aborted transaction index: %s", name_.c_str(), r.error().detail.c_str());
  }
}

void PartitionTxns::on_high_watermark(std::int64_t hw) {
  while (!unreplicated_.empty() && unreplicated_.begin()->first < hw)
    unreplicated_.erase(unreplicated_.begin());
}

std::int64_t PartitionTxns::last_stable(std::int64_t hw) const {
  std::int64_t lso = hw;
  if (!ongoing_.empty()) lso = std::min(lso, ongoing_.begin()->first);
  for (const auto& [marker, first] : unreplicated_) {
    if (marker >= hw) lso = std::min(lso, first);
  }
  return lso;
}

void PartitionTxns::aborted_in(std::int64_t from, std::int64_t upto,
                               std::vector<io::AbortedTxn>& out) const {
  auto it =
      std::lower_bound(aborted_.begin(), aborted_.end(), from,
                       [](const io::AbortedTxn& e, std::int64_t o) { return e.last_offset < o; });
  for (; it != aborted_.end(); ++it) {
    if (it->first_offset < upto) out.push_back(*it);
  }
}

void PartitionTxns::evict_below(std::int64_t log_start) {
  auto keep =
      std::lower_bound(aborted_.begin(), aborted_.end(), log_start,
                       [](const io::AbortedTxn& e, std::int64_t o) { return e.last_offset < o; });
  aborted_.erase(aborted_.begin(), keep);
  for (auto it = file_last_.begin(); it != file_last_.end();) {
    if (it->second >= log_start) break;
    if (auto r = io::rewrite_txn_index(dir_, it->first, {}); !r)
      LOG_WARN("%s: %s", name_.c_str(), r.error().detail.c_str());
    unsynced_.erase(it->first);
    it = file_last_.erase(it);
  }
}

std::vector<std::int64_t> PartitionTxns::files_to_sync(std::int64_t below) {
  std::vector<std::int64_t> out;
  for (auto it = unsynced_.begin(); it != unsynced_.end() && *it < below;) {
    out.push_back(*it);
    it = unsynced_.erase(it);
  }
  return out;
}

}  // namespace samsa::replication
