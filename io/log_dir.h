// io::LogDir — one of the broker's log.dirs: the partition directories `<topic>-<partition>`
// in it, its lock file, Kafka's checkpoint files (recovery-point-offset-checkpoint,
// log-start-offset-checkpoint, cleaner-offset-checkpoint) and the clean-shutdown marker
// `.kafka_cleanshutdown`.
//
// Thread-safe (one mutex; nothing here is on the hot path). Logs on any reactor publish their
// recovery point and log start offset through a PartitionState of atomics, so appends never
// take the mutex; the retention thread (or a shutdown) writes the checkpoints from those.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/log.h"

namespace samsa::io {

struct PartitionId {
  std::string topic;
  std::int32_t partition = 0;
  auto operator<=>(const PartitionId&) const = default;
  // "<topic>-<partition>", the directory name.
  std::string dir_name() const { return topic + "-" + std::to_string(partition); }
  // Parses a directory name; nullopt for names that are not a partition (e.g. Kafka's
  // "<topic>-<p>.<id>-delete" directories of deleted topics).
  static std::optional<PartitionId> parse(std::string_view dir_name);
};

class LogDir {
 public:
  // What a Log publishes about itself; read by checkpoint writers on any thread.
  struct PartitionState {
    std::atomic<std::int64_t> recovery_point{0};
    std::atomic<std::int64_t> log_start_offset{0};
    std::atomic<bool> closed_cleanly{false};
    // Compaction's first dirty offset (cleaner-offset-checkpoint); -1: never cleaned.
    std::atomic<std::int64_t> cleaner_offset{-1};
  };

  // Opens (creating if absent) the log directory: takes its lock file (`.lock`, flock; a second
  // process fails here), reads the checkpoints, notes and removes the clean-shutdown marker
  // (so a crash from now on is not mistaken for a clean stop), and lists partition dirs.
  static Result<std::unique_ptr<LogDir>> open(std::filesystem::path root);
  ~LogDir();
  LogDir(const LogDir&) = delete;
  LogDir& operator=(const LogDir&) = delete;

  const std::filesystem::path& root() const { return root_; }
  // The previous run stopped cleanly (marker present at open).
  bool had_clean_shutdown() const { return clean_; }
  // Partition directories found at open plus those created since, in order.
  std::vector<PartitionId> partitions() const;
  // How many partitions() would list, without copying them (placing a new partition).
  std::size_t partition_count() const;
  std::filesystem::path partition_dir(const PartitionId& id) const { return root_ / id.dir_name(); }

  // How to open a partition's log: recovery point and log start from the checkpoints, and
  // whether the last stop was clean.
  OpenOptions open_options(const PartitionId& id);
  // Log::open with open_options(id); the log then reports to this LogDir.
  Result<std::unique_ptr<Log>> open_log(Reactor& r, const PartitionId& id, LogConfig cfg);

  // Writes both checkpoint files atomically from the attached logs (and the last known values
  // of partitions not open now).
  Result<void> write_checkpoints();
  // Writes the checkpoints and the clean-shutdown marker. Refuses (and writes no marker) unless
  // every attached log has been closed cleanly and every partition dir found at open was opened
  // in this run: the marker tells the next start to skip recovery for all of them.
  Result<void> shutdown_clean();
  // From now on (a clean stop), Log::close() of this dir's logs writes their active segment's
  // index files without syncing them one by one; shutdown_clean() syncs the whole file system
  // once (syncfs) before it writes the marker that makes the next start trust them. Without
  // the marker those files are not trusted anyway (the active segment is always scanned).
  void defer_close_syncs() { close_syncs_deferred_.store(true, std::memory_order_release); }
  bool close_syncs_deferred() const {
    return close_syncs_deferred_.load(std::memory_order_acquire);
  }
  void note_unsynced_close() { unsynced_closes_.store(true, std::memory_order_release); }
  // Drops a partition's checkpoint entries (topic deletion).
  void forget(const PartitionId& id);
  // Directories of deleted partitions ("<topic>-<p>.<id>-delete") found at open: a stop or a
  // power cut came before their removal finished. The RetentionDeleter removes them.
  const std::vector<std::filesystem::path>& left_to_delete() const { return left_to_delete_; }

  // Called by Log::open / ~Log.
  std::shared_ptr<PartitionState> attach(const PartitionId& id, std::int64_t recovery_point,
                                         std::int64_t log_start_offset);
  void detach(const PartitionId& id, const std::shared_ptr<PartitionState>& s);

  struct Stats {
    std::uint64_t checkpoint_writes = 0;
  };
  Stats stats() const;

  // What opening a partition's log found (Log::open reports it; start-up logs one line per
  // log dir and systemd's STATUS shows the progress).
  struct OpenSummary {
    std::size_t segments = 0;
    std::uint64_t bytes = 0;
    std::size_t scanned_segments = 0;  // read in full with CRC checks (not trusted)
    bool truncated = false;            // a torn or corrupt tail was cut
  };
  void note_opened(const OpenSummary& s);
  struct RecoverySummary {
    bool clean = false;      // the previous run stopped cleanly: nothing was scanned
    std::size_t found = 0;   // partition directories present at open
    std::size_t opened = 0;  // logs opened since (new partitions included)
    std::size_t segments = 0;
    std::uint64_t bytes = 0;
    std::size_t scanned_segments = 0;
    std::size_t truncated = 0;  // partitions whose tail was cut
  };
  RecoverySummary recovery_summary() const;

 private:
  LogDir() = default;
  struct Entry {
    std::int64_t recovery_point = -1;
    std::int64_t log_start_offset = -1;
    std::int64_t cleaner_offset = -1;
    std::shared_ptr<PartitionState> live;  // attached log, if any
    bool opened_this_run = false;
    bool closed_cleanly = false;  // copied from `live` when the log detaches
    bool dir_found_at_open = false;
  };
  Result<void> write_checkpoints_locked();

  std::filesystem::path root_;
  int lock_fd_ = -1;
  bool clean_ = false;
  std::atomic<bool> close_syncs_deferred_{false};
  std::atomic<bool> unsynced_closes_{false};
  mutable std::mutex mu_;
  std::map<PartitionId, Entry> entries_;
  std::vector<std::filesystem::path> left_to_delete_;  // set at open, then read-only
  Stats stats_;
  RecoverySummary recovery_;
};

}  // namespace samsa::io
