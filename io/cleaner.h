// io::LogCleaner — the threads "cleaner-<i>" (log.cleaner.threads) that compact logs whose
// cleanup.policy has compact. Every log.cleaner.backoff.ms (or at once after check_now()) each
// registered log is asked, on its reactor, for a pass (Log::plan_cleaning); the dirtiest plan
// goes to a free thread, which runs it (io/compaction.h: its own io_uring, its share of
// log.cleaner.dedupe.buffer.size, log.cleaner.io.max.bytes.per.second) and hands the result
// back to the log's reactor to swap in (Log::commit_cleaning). Nothing of a pass runs on a
// reactor but the planning and the swap's renames.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "io/log.h"
#include "io/reactor.h"
#include "io/txn_index.h"

namespace samsa::io {

class LogCleaner {
 public:
  struct Options {
    std::size_t threads = 1;                       // log.cleaner.threads
    std::size_t dedupe_buffer_bytes = 128u << 20;  // log.cleaner.dedupe.buffer.size (all threads)
    double io_max_bytes_per_second = 0;            // log.cleaner.io.max.bytes.per.second (0: none)
    std::int64_t backoff_ms = 15000;               // log.cleaner.backoff.ms
    std::int64_t producer_expiration_ms = 86400000;  // producer.id.expiration.ms
    bool enabled = true;                             // log.cleaner.enable
  };

  // What the log's owner tells a pass, asked on the log's reactor thread. cleanable_limit
  // bounds what may be cleaned (the partition's last stable offset: above the high watermark a
  // truncation may still remove a record, and the older value it superseded must then be there;
  // above the LSO a transaction may still abort). aborted_txns adds the aborted transactions
  // whose records in [from, upto) the pass drops (their keys supersede nothing).
  struct Bounds {
    std::function<std::int64_t()> cleanable_limit;
    std::function<void(std::int64_t from, std::int64_t upto, std::vector<AbortedTxn>& out)>
        aborted_txns;
  };
  // A registered log; the log's reactor thread owns it.
  struct Registration {
    Reactor* reactor = nullptr;
    Log* log = nullptr;
    Bounds bounds;
    bool active = true;  // reactor thread only
  };

  explicit LogCleaner(Options opts);
  ~LogCleaner();  // stop()
  LogCleaner(const LogCleaner&) = delete;
  LogCleaner& operator=(const LogCleaner&) = delete;

  void start();
  // Stops the passes in flight (their .cleaned files are removed) and joins the threads.
  void stop();

  // On the log's reactor thread; remove() on the same thread before the log goes.
  std::shared_ptr<Registration> add(Reactor& r, Log& log, Bounds bounds = {});
  void remove(const std::shared_ptr<Registration>& reg);

  // Asks every log now instead of at the next backoff; force ignores the dirty ratio.
  void check_now(bool force = false);
  void set_io_rate(double bytes_per_second);  // samsactl reload

  struct Stats {
    std::uint64_t passes = 0;  // committed
    std::uint64_t passes_failed = 0;
    std::uint64_t passes_dropped = 0;  // the log changed under the pass
    std::uint64_t bytes_read = 0, bytes_written = 0;
    std::uint64_t records_removed = 0, tombstones_removed = 0;
    double max_dirty_ratio = 0;      // of the logs asked in the last round
    std::int64_t last_pass_ms = -1;  // wall clock of the last committed pass
    std::int64_t busy_ns = 0;        // time spent in passes
    std::int64_t throttled_ns = 0;
  };
  Stats stats() const;

  struct Core;

 private:
  std::shared_ptr<Core> core_;
};

}  // namespace samsa::io
