// One process's share of a run: its producers and consumers (o.worker of o.workers), the
// window, the monitor that ticks once a second, and the merged result.
#pragma once

#include <functional>

#include "perf/samsa_perf/options.h"
#include "perf/samsa_perf/stats.h"

namespace samsa::perf {

// Runs on the calling thread (the monitor) until the work is done; on_tick gets the
// cumulative totals once a second.
RunResult run_local(const Options& o, const std::function<void(const Tick&)>& on_tick);

}  // namespace samsa::perf
