// What a run measures: per-client counters (one writer thread each, read by the monitor), the
// merged result of one side (produce or consume), the per-second timeline, and their text form
// for the pipe from a child process (--processes) to its parent.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/log_linear_histogram.h"

namespace samsa::perf {

using Histogram = LogLinearHistogram<>;  // 0.8% precision

// Written only by the thread that owns the client (a producer's poller, a consumer's loop);
// read by anyone. Loads and stores are relaxed: totals for a progress line need no ordering.
struct Counters {
  std::atomic<std::uint64_t> records{0}, bytes{0}, errors{0};     // everything acked / consumed
  std::atomic<std::uint64_t> window_records{0}, window_bytes{0};  // inside the window
  std::atomic<std::int64_t> first_ns{0}, last_ns{0};  // monotonic time of first and last record
  Histogram latency;       // records whose send time lies inside the window
  Histogram call_latency;  // the same records, from their produce() call (--call-latency)

  static void bump(std::atomic<std::uint64_t>& a, std::uint64_t n) {
    a.store(a.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  std::uint64_t get(const std::atomic<std::uint64_t>& a) const {
    return a.load(std::memory_order_relaxed);
  }
};

// One side of a run, merged over clients (and processes).
struct Side {
  bool present = false;
  std::uint64_t records = 0, bytes = 0;  // inside the window (or the whole run, see seconds)
  std::uint64_t total_records = 0, total_bytes = 0;
  std::uint64_t errors = 0;
  double seconds = 0;  // the window's length, or first-to-last record for --until-end
  Histogram latency;
  Histogram call_latency;  // empty unless --call-latency

  void add(const Side& o);  // merges another process's side (seconds: the longest)
  double records_per_s() const { return seconds > 0 ? records / seconds : 0; }
  double mb_per_s() const { return seconds > 0 ? bytes / seconds / 1e6 : 0; }
};

// Cumulative totals at one second of the run.
struct Tick {
  double t = 0;
  std::uint64_t p_records = 0, p_bytes = 0, c_records = 0, c_bytes = 0;
  std::uint64_t p99_produce_ns = 0, p99_e2e_ns = 0;  // so far
};

struct RunResult {
  Side produce, consume;
  std::vector<Tick> timeline;
  double client_cpu_s = 0;  // user+system CPU of samsa-perf's process(es)
  // The measured window (monotonic ns; a single-process run's, 0 when merged from several).
  std::int64_t window_begin_ns = 0, window_end_ns = 0;
  std::string error;  // non-empty: the run failed
};

// Line protocol child -> parent: "T ..." ticks, "S produce|consume ..." sides, "C cpu",
// "E message", "D" (done).
std::string tick_line(const Tick& t);
std::string side_line(const char* name, const Side& s);
// Applies one line to the result being merged; false if malformed. Ticks are summed into
// timeline[index] (p99s: the largest over processes).
bool apply_line(std::string_view line, RunResult& r, bool& done);

// The progress line printed each second.
std::string progress_line(const Tick& now, const Tick& prev, bool produce, bool consume, bool e2e);

// Writes the results as JSON (config included) to path ("-" for stdout).
struct Options;
bool write_json(const std::string& path, const Options& o, const RunResult& r);

}  // namespace samsa::perf
