// io::RetentionDeleter — the background thread "retention". Every
// log.retention.check.interval.ms it asks each registered log, on that log's reactor (logs are
// reactor-owned), to apply retention and segment.ms rolling; the segments a log drops come back
// as *.deleted files, which this thread unlinks file.delete.delay.ms later. Every
// log.flush.offset.checkpoint.interval.ms it writes the checkpoints of its LogDirs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

#include "io/log.h"
#include "io/reactor.h"

namespace samsa::io {

class LogDir;

class RetentionDeleter {
 public:
  struct Options {
    std::int64_t check_interval_ms = 300000;      // log.retention.check.interval.ms
    std::int64_t checkpoint_interval_ms = 60000;  // log.flush.offset.checkpoint.interval.ms
  };

  // A registered log; the log's reactor thread owns it.
  struct Registration {
    Reactor* reactor = nullptr;
    Log* log = nullptr;
    bool active = true;  // read and written only on the reactor's thread
  };

  RetentionDeleter(Options opts, std::vector<LogDir*> dirs = {});
  ~RetentionDeleter();  // stop()
  RetentionDeleter(const RetentionDeleter&) = delete;
  RetentionDeleter& operator=(const RetentionDeleter&) = delete;

  void start();
  // Joins the thread and unlinks every *.deleted file still waiting (readers holding slices
  // keep their open file descriptors, so this is safe at any time).
  void stop();

  // Call on the log's reactor thread. Pass the result to remove() on the same thread before the
  // log is destroyed.
  std::shared_ptr<Registration> add(Reactor& r, Log& log);
  void remove(const std::shared_ptr<Registration>& reg);

  // Runs a retention pass now instead of at the next interval.
  void check_now();
  // Unlinks files after delay_ms (files of truncated or deleted logs, from any thread); a
  // directory is removed with everything in it (partitions of deleted topics).
  void schedule_unlink(std::vector<std::filesystem::path> files, std::int64_t delay_ms);

  struct Stats {
    std::uint64_t passes = 0;         // retention passes started
    std::uint64_t log_checks = 0;     // apply_retention calls completed on reactors
    std::uint64_t files_renamed = 0;  // *.deleted files received from logs
    std::uint64_t files_unlinked = 0;
    std::uint64_t checkpoint_writes = 0;
    std::uint64_t checkpoint_errors = 0;
  };
  Stats stats() const;

  struct Core;

 private:
  std::shared_ptr<Core> core_;
};

}  // namespace samsa::io
