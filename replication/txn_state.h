// replication::PartitionTxns — one partition's transactions as its log holds them (KIP-98):
//   - the ongoing ones: the first offset of each producer's open transaction;
//   - the completed ones whose marker the high watermark has not passed yet: a new leader
//     without the marker would still see them open, so they hold the LSO like ongoing ones;
//   - the aborted ones (Kafka's aborted-transaction index, the `.txnindex` files of
//     io/txn_index.h), which read_committed fetches return so consumers drop their records.
// The last stable offset is the smallest first offset of the first two kinds, capped by the
// high watermark. Producer ids, epochs and which transaction a batch belongs to are the
// ProducerStateTable's; this class only keeps offsets.
//
// Owned by the partition's reactor thread. Entries are appended to the index files as markers
// are written (page cache; rare: once per aborted transaction and partition); the files a
// producer snapshot covers are synced before it is written (files_to_sync).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "io/txn_index.h"

namespace samsa::replication {

class PartitionTxns {
 public:
  PartitionTxns(std::filesystem::path dir, std::string name)
      : dir_(std::move(dir)), name_(std::move(name)) {}

  // (Re)builds the aborted list from the index files, keeping the entries whose marker lies in
  // [log_start, replay_from): the log is replayed from replay_from next, which re-adds the
  // others (their file entries are dropped, so nothing is written twice). Forgets the ongoing
  // and unreplicated transactions (the replay and the producer snapshot bring them back).
  void load(std::int64_t log_start, std::int64_t replay_from);

  // A producer's transaction began at first_offset (its first transactional batch here).
  void begin(std::int64_t producer_id, std::int64_t first_offset);
  // Its marker, written at marker_offset while the active segment began at segment_base, ended
  // the transaction that began at first_offset. An abort goes to the index.
  void end(std::int64_t producer_id, std::int64_t first_offset, std::int64_t marker_offset,
           bool abort, std::int64_t segment_base);
  // Completed transactions whose markers are below hw stop holding the LSO.
  void on_high_watermark(std::int64_t hw);

  // The last stable offset for a high watermark of hw.
  std::int64_t last_stable(std::int64_t hw) const;
  // Aborted transactions a read of [from, upto) must report (Kafka's collectAbortedTxns:
  // marker at or after from, first offset below upto), oldest marker first.
  void aborted_in(std::int64_t from, std::int64_t upto, std::vector<io::AbortedTxn>& out) const;
  // Forgets aborted transactions whose markers are below the log start (retention,
  // DeleteRecords) and removes index files left with none.
  void evict_below(std::int64_t log_start);
  // Index files appended to since the last call, with a base below `below` (the ones a
  // producer snapshot at `below` covers): sync them before writing it.
  std::vector<std::int64_t> files_to_sync(std::int64_t below);

  std::size_t ongoing() const { return ongoing_.size(); }
  std::size_t aborted() const { return aborted_.size(); }
  // First offsets of the open transactions (and of those completed above the HW), ascending.
  template <class F>
  void for_each_open(F&& f) const {
    for (const auto& [first, pid] : ongoing_)
      f(pid, first);
  }

 private:
  std::filesystem::path dir_;
  std::string name_;                                   // "<topic>-<partition>", for log lines
  std::map<std::int64_t, std::int64_t> ongoing_;       // first offset -> producer id
  std::map<std::int64_t, std::int64_t> unreplicated_;  // marker offset -> first offset
  std::vector<io::AbortedTxn> aborted_;                // by last_offset (marker order)
  std::map<std::int64_t, std::int64_t> file_last_;     // index file base -> last marker
  std::set<std::int64_t> unsynced_;                    // index file bases
};

}  // namespace samsa::replication
