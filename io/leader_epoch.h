// io::LeaderEpochCache — the partition's leader-epoch-checkpoint: for each leader epoch, the
// first offset written in it. Followers use it (through OffsetsForLeaderEpoch) to find where
// their log diverged from a new leader's. Every change is written to the file atomically:
// before the call returns, or, once its Log has a writer set (a serving log: the write goes
// to the offload, in order), shortly after. Changes are rare: one per leader election. A cut
// that loses the newest entry is repaired by the next append of that epoch (the leader
// assigns it again) and by recovery, which trims entries past the log end.
// Owned by its Log; used on the log's reactor thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "io/log.h"

namespace samsa::io {

struct EpochEntry {
  std::int32_t epoch = 0;
  std::int64_t start_offset = 0;
  bool operator==(const EpochEntry&) const = default;
};

class LeaderEpochCache {
 public:
  // Loads `file` (absent: empty cache). A malformed file is an error naming file and line.
  static Result<LeaderEpochCache> load(std::filesystem::path file);

  // Records that `epoch` starts at `start_offset`. No-op when it is already the latest epoch
  // (with an equal or lower start). Entries that conflict (epoch >= epoch, or start offset >=
  // start_offset) are dropped first, so the entries stay increasing in both.
  Result<void> assign(std::int32_t epoch, std::int64_t start_offset);
  // The log was truncated to end_offset: epochs that start at or after it are gone.
  Result<void> truncate_from_end(std::int64_t end_offset);
  // The log start moved to start_offset: epochs wholly below it are dropped and the one
  // covering it now starts there.
  Result<void> truncate_from_start(std::int64_t start_offset);
  // Both, on the entries just loaded, in memory only: a log being opened trims what it no
  // longer holds (an epoch begun at its end with no record yet, say) and every later load trims
  // the same again, so the file keeps them until the next change writes it (Kafka flushes these
  // asynchronously too). A write here cost a file sync, a rename and a directory sync for each
  // partition opened: seconds for a broker with thousands of partitions.
  void trim_loaded(std::int64_t start_offset, std::int64_t end_offset);
  // Forgets everything (the log was emptied and restarted).
  Result<void> clear();

  std::optional<std::int32_t> latest_epoch() const;
  std::optional<EpochEntry> latest() const;
  // The epoch whose range contains offset, if known.
  std::optional<std::int32_t> epoch_for_offset(std::int64_t offset) const;

  // OffsetsForLeaderEpoch: for a requested epoch, the largest known epoch <= it and the offset
  // where that epoch ended (the start of the next higher epoch, or log_end_offset when it is the
  // latest). {-1, -1} when the requested epoch is undefined (negative) or above every known one.
  struct EpochEnd {
    std::int32_t epoch = -1;
    std::int64_t end_offset = -1;
  };
  EpochEnd end_offset_for(std::int32_t requested_epoch, std::int64_t log_end_offset) const;

  std::span<const EpochEntry> entries() const { return entries_; }
  // Writes go through w instead of inline (w must write them in call order).
  using Writer =
      std::function<void(const std::filesystem::path&, std::vector<std::vector<std::string>>)>;
  void set_writer(Writer w) { writer_ = std::move(w); }
  const std::filesystem::path& file() const { return file_; }

 private:
  Result<void> flush();
  // In memory: true when an entry changed.
  bool drop_from_end(std::int64_t end_offset);
  bool drop_below(std::int64_t start_offset);
  std::filesystem::path file_;
  std::vector<EpochEntry> entries_;
  Writer writer_;
};

}  // namespace samsa::io
