#include "perf/samsa_perf/run.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <expected>
#include <functional>
#include <limits>
#include <memory>
#include <thread>

#include "base/clock.h"
#include "perf/samsa_perf/client.h"
#include "perf/samsa_perf/clients.h"

namespace samsa::perf {

namespace {

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

std::uint64_t p99(Histogram& scratch, const std::vector<Counters*>& cs) {
  scratch.clear();
  for (auto* c : cs)
    scratch.merge(c->latency);
  return scratch.percentile(0.99);
}

Side side_of(const std::vector<Counters*>& cs, double seconds) {
  Side s;
  s.present = true;
  s.seconds = seconds;
  for (auto* c : cs) {
    s.records += c->get(c->window_records);
    s.bytes += c->get(c->window_bytes);
    s.total_records += c->get(c->records);
    s.total_bytes += c->get(c->bytes);
    s.errors += c->get(c->errors);
    s.latency.merge(c->latency);
    s.call_latency.merge(c->call_latency);
  }
  return s;
}

using Consumers = std::vector<std::unique_ptr<Consumer>>;
using Producers = std::vector<std::unique_ptr<Producer>>;

// This process's consumers: every (topic, partition) goes to consumer j % consumers, over all
// processes, starting where the mode says (watermarks asked where needed).
std::expected<Consumers, std::string> make_consumers(const Options& o, rd_kafka_t* meta,
                                                     const std::vector<std::string>& names,
                                                     const std::vector<int>& partitions) {
  const int local_consumers = o.consumers / o.workers;
  std::vector<std::unique_ptr<Consumer>> consumers;
  if (o.mode != Mode::produce) {
    std::vector<std::vector<Consumer::Assignment>> parts(static_cast<std::size_t>(local_consumers));
    int j = 0;
    for (int t = 0; t < static_cast<int>(names.size()); ++t) {
      for (int p = 0; p < partitions[static_cast<std::size_t>(t)]; ++p, ++j) {
        const int g = j % o.consumers;
        const int local = g - o.worker * local_consumers;
        if (local < 0 || local >= local_consumers) continue;
        Consumer::Assignment a{t, p, RD_KAFKA_OFFSET_BEGINNING, -1};
        const bool need_marks = o.mode == Mode::e2e || o.from_end || o.until_end;
        if (need_marks) {
          auto wm = watermarks(meta, names[static_cast<std::size_t>(t)], p, 30000);
          if (!wm) {
            return std::unexpected(wm.error());
          }
          if (o.mode == Mode::e2e || o.from_end) a.start = wm->second;
          if (o.mode == Mode::consume && o.until_end)
            a.target = wm->second, a.start = o.from_end ? wm->second : wm->first;
        }
        parts[static_cast<std::size_t>(local)].push_back(a);
      }
    }
    for (int i = 0; i < local_consumers; ++i)
      if (!parts[static_cast<std::size_t>(i)].empty())
        consumers.push_back(std::make_unique<Consumer>(
            o, o.worker * local_consumers + i, std::move(parts[static_cast<std::size_t>(i)])));
  }

  return consumers;
}

// Ticks each second until the work is done (the mode says what done is).
void monitor(const Options& o, const Window& w, Producers& producers, Consumers& consumers,
             rd_kafka_t* meta, const std::vector<std::string>& names,
             const std::function<void(std::int64_t)>& tick) {
  std::int64_t next_tick = w.start + 1'000'000'000;
  std::int64_t producers_done_at = 0;
  const auto drain_ns = static_cast<std::int64_t>(o.drain_s * 1e9);
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const std::int64_t now = mono_ns();
    if (now >= next_tick) {
      tick(now);
      next_tick += 1'000'000'000;
    }
    const bool producers_done =
        std::all_of(producers.begin(), producers.end(), [](auto& p) { return p->finished(); });
    if (o.mode == Mode::produce) {
      if (producers_done) break;
      continue;
    }
    if (o.mode == Mode::consume) {
      const bool all =
          std::all_of(consumers.begin(), consumers.end(), [](auto& c) { return c->finished(); });
      if (all || (!o.until_end && now >= w.end) || (o.until_end && now >= w.end + drain_ns)) break;
      continue;
    }
    // e2e: once every producer is done, consume up to the end offsets of that moment.
    if (producers_done && producers_done_at == 0) {
      producers_done_at = now;
      for (auto& c : consumers) {
        std::vector<std::int64_t> targets;
        for (const auto& a : c->assignment()) {
          auto wm = watermarks(meta, names[static_cast<std::size_t>(a.topic)], a.partition, 10000);
          targets.push_back(wm ? wm->second : -1);
        }
        c->set_targets(targets);
      }
    }
    if (producers_done_at) {
      const bool all =
          std::all_of(consumers.begin(), consumers.end(), [](auto& c) { return c->finished(); });
      if (all || now >= producers_done_at + drain_ns) break;
    }
  }
}

// The run's figures, over the measured window (or until the end offsets).
void summarize(RunResult& r, const Options& o, const Window& w, const std::vector<Counters*>& pc,
               const std::vector<Counters*>& cc, Producers& producers, Consumers& consumers,
               std::int64_t consume_start) {
  const double window_s = static_cast<double>(w.end - w.begin) / 1e9;
  if (!producers.empty()) {
    double secs = window_s;
    std::int64_t last = 0;
    for (auto* c : pc)
      last = std::max(last, c->last_ns.load());
    if (o.records > 0) secs = static_cast<double>(last - w.begin) / 1e9;
    r.produce = side_of(pc, secs);
    if (o.records > 0)
      r.produce.records = r.produce.total_records, r.produce.bytes = r.produce.total_bytes;
    for (auto& p : producers)
      if (!p->error().empty()) {
        std::fprintf(stderr, "samsa-perf: producer: %s\n", p->error().c_str());
        r.produce.errors += static_cast<std::uint64_t>(p->in_flight());
      }
  }
  if (!consumers.empty()) {
    double secs = window_s;
    if (o.mode == Mode::consume && o.until_end) {
      std::int64_t last = 0;
      for (auto* c : cc)
        last = std::max(last, c->last_ns.load());
      secs = last > consume_start ? static_cast<double>(last - consume_start) / 1e9 : 0;
    }
    r.consume = side_of(cc, secs);
    if (o.mode == Mode::consume && o.until_end) {
      r.consume.records = r.consume.total_records;
      r.consume.bytes = r.consume.total_bytes;
      for (auto& c : consumers)
        if (!c->reached_end()) r.error += "consumer stopped before reaching the end offsets; ";
    }
  }
}

}  // namespace

RunResult run_local(const Options& o, const std::function<void(const Tick&)>& on_tick) {
  RunResult r;
  const double cpu0 = cpu_seconds();
  const auto names = o.topic_names();

  // Partition counts, and watermarks where consumers need them.
  auto meta = make_client(RD_KAFKA_PRODUCER, {{"bootstrap.servers", o.bootstrap}}, nullptr);
  if (!meta) {
    r.error = meta.error();
    return r;
  }
  std::vector<int> partitions;
  for (const auto& n : names) {
    auto pc = partition_count(meta->get(), n, 30000);
    if (!pc) {
      r.error = pc.error();
      return r;
    }
    partitions.push_back(*pc);
  }

  auto made = make_consumers(o, meta->get(), names, partitions);
  if (!made) {
    r.error = made.error();
    return r;
  }
  Consumers consumers = std::move(*made);
  const int local_producers = o.producers / o.workers;
  Producers producers;
  for (int i = 0; i < local_producers; ++i)
    producers.push_back(
        std::make_unique<Producer>(o, o.worker * local_producers + i, o.producers, partitions));

  Window w;
  w.start = mono_ns() + 50'000'000;
  w.begin = w.start + static_cast<std::int64_t>(o.warmup_s * 1e9);
  w.end = w.begin + static_cast<std::int64_t>(o.duration_s * 1e9);
  if (o.records > 0) w.end = std::numeric_limits<std::int64_t>::max() / 2;

  const std::int64_t consume_start = mono_ns();
  for (auto& c : consumers) {
    if (auto s = c->start(w, o.mode == Mode::e2e); !s) {
      r.error = s.error();
      return r;
    }
  }
  for (auto& p : producers) {
    if (auto s = p->start(w); !s) {
      r.error = s.error();
      return r;
    }
  }

  std::vector<Counters*> pc, cc;
  for (auto& p : producers)
    pc.push_back(&p->counters());
  for (auto& c : consumers)
    cc.push_back(&c->counters());
  Histogram scratch;
  auto tick = [&](std::int64_t now) {
    Tick t;
    t.t = static_cast<double>(now - w.start) / 1e9;
    for (auto* c : pc) {
      t.p_records += c->get(c->records);
      t.p_bytes += c->get(c->bytes);
    }
    for (auto* c : cc) {
      t.c_records += c->get(c->records);
      t.c_bytes += c->get(c->bytes);
    }
    if (!pc.empty()) t.p99_produce_ns = p99(scratch, pc);
    if (o.mode == Mode::e2e) t.p99_e2e_ns = p99(scratch, cc);
    r.timeline.push_back(t);
    on_tick(t);
  };

  monitor(o, w, producers, consumers, meta->get(), names, tick);
  for (auto& c : consumers)
    c->stop();
  for (auto& c : consumers)
    c->join();
  for (auto& p : producers)
    p->join();
  tick(mono_ns());

  summarize(r, o, w, pc, cc, producers, consumers, consume_start);
  producers.clear();
  consumers.clear();
  r.client_cpu_s = cpu_seconds() - cpu0;
  r.window_begin_ns = w.begin;
  r.window_end_ns = w.end;
  return r;
}

}  // namespace samsa::perf
