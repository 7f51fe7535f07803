// Measures a subject against a baseline in the same run: each iteration runs the subject, then
// the baseline, timing both. Google Benchmark sees the subject's time (manual time), so its own
// bytes_per_second / items_per_second are the subject's; the counters add the baseline's rate
// and x_baseline (subject rate / baseline rate). Interleaving keeps the machine's noise (the
// machine is shared) out of the ratio as far as possible.
#pragma once

#include <benchmark/benchmark.h>

#include <chrono>
#include <string>

namespace samsa::perf {

enum class Unit { bytes, items };

template <class Subject, class Baseline>
void run_pair(benchmark::State& st, Unit unit, double units_per_op, Subject&& subject,
              Baseline&& baseline) {
  using clock = std::chrono::steady_clock;
  double ts = 0, tb = 0;
  for (auto _ : st) {
    const auto t0 = clock::now();
    subject();
    const auto t1 = clock::now();
    baseline();
    const auto t2 = clock::now();
    const double s = std::chrono::duration<double>(t1 - t0).count();
    st.SetIterationTime(s);
    ts += s;
    tb += std::chrono::duration<double>(t2 - t1).count();
  }
  const double n = static_cast<double>(st.iterations()) * units_per_op;
  if (unit == Unit::bytes) {
    st.SetBytesProcessed(static_cast<std::int64_t>(n));
    st.counters["baseline_bytes_per_second"] = n / tb;
  } else {
    st.SetItemsProcessed(static_cast<std::int64_t>(n));
    st.counters["baseline_items_per_second"] = n / tb;
  }
  st.counters["x_baseline"] = tb / ts;
}

}  // namespace samsa::perf
