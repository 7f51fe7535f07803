// The log cleaner on a real log: `--keys` keys x `--versions` versions (1 M x 10, ~1 GiB by
// default) written to one partition, then one cleaning pass (io::clean_segments, as a
// cleaner-<i> thread runs it). Reported, each against a baseline measured in the same run:
//   - cleaning MB/s (input bytes / wall time) vs a plain copy of the same segments through the
//     same CleanerIo (read everything, write it out, fdatasync): clean_x_copy;
//   - the cleaner thread's CPU seconds per GB of input;
//   - acks=all append latency on another partition (one append in flight, 1 KiB batches,
//     fdatasync each) while the pass runs vs the same probe with the cleaner idle: p50 and p99
//     ratios.
// Run it alone (nothing else of ours on the machine) and quote the load average with it.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/log.h"
#include "io/batch_builder.h"
#include "io/compaction.h"
#include "io/log.h"
#include "io/reactor.h"

namespace {

using namespace samsa;
namespace fs = std::filesystem;

struct Args {
  std::int64_t keys = 1'000'000;
  int versions = 10;
  std::size_t value_bytes = 80;
  int batch_records = 200;
  std::uint64_t segment_bytes = 128u << 20;
  std::string dir = "/var/tmp";
  double probe_seconds = 5;
};

double thread_cpu_s() {
  rusage ru{};
  getrusage(RUSAGE_THREAD, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

double loadavg() {
  double l[1] = {0};
  getloadavg(l, 1);
  return l[0];
}

// Writes keys x versions records in random key order per version, then closes (syncs) the log.
io::LogConfig compacted(const Args& a) {
  io::LogConfig cfg;
  cfg.segment_bytes = a.segment_bytes;
  cfg.cleanup_compact = true;
  cfg.cleanup_delete = false;
  return cfg;
}

void fill(io::Reactor& r, const fs::path& dir, const Args& a) {
  io::LogConfig cfg = compacted(a);
  cfg.fsync = false;  // close() syncs it all; the pass is what is measured
  auto log = io::Log::open(r, dir, cfg);
  if (!log) std::abort();
  std::mt19937_64 rng(42);
  std::vector<std::int64_t> order(static_cast<std::size_t>(a.keys));
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = static_cast<std::int64_t>(i);
  std::string value(a.value_bytes, 'v');
  std::vector<io::SimpleRecord> recs;
  struct Op : io::AppendOp {
    std::vector<std::byte> bytes;
    bool done_flag = false;
  };
  std::vector<std::unique_ptr<Op>> inflight;
  for (int v = 0; v < a.versions; ++v) {
    std::shuffle(order.begin(), order.end(), rng);
    for (std::size_t i = 0; i < order.size();) {
      recs.clear();
      for (int n = 0; n < a.batch_records && i < order.size(); ++n, ++i) {
        char key[24];
        std::snprintf(key, sizeof key, "key-%08" PRId64, order[i]);
        std::snprintf(value.data(), value.size(), "%d-%" PRIu64, v, rng());
        recs.push_back(io::SimpleRecord{wall_ms(), key, value, {}});
      }
      auto op = std::make_unique<Op>();
      op->bytes = io::build_batch(recs);
      op->batch = op->bytes;
      op->durability = io::Durability::written;
      op->done = [](io::AppendOp* o) { static_cast<Op*>(o)->done_flag = true; };
      if (!(*log)->append(op.get())) std::abort();
      inflight.push_back(std::move(op));
      if (inflight.size() >= 256) {
        r.run_until([&] {
          return std::all_of(inflight.begin(), inflight.end(),
                             [](const auto& o) { return o->done_flag; });
        });
        inflight.clear();
      }
    }
  }
  r.run_until([&] { return (*log)->idle(); });
  if (!(*log)->close()) std::abort();
}

struct Latency {
  double p50_ms = 0, p99_ms = 0;
  std::size_t n = 0;
};

// One acks=all append in flight on another log until stop, each timed.
Latency probe(io::Reactor& r, io::Log& log, const std::atomic<bool>& stop, double max_s) {
  std::vector<io::SimpleRecord> recs{{0, "probe", std::string(1000, 'p'), {}}};
  std::vector<double> ms;
  const std::int64_t end = mono_ns() + static_cast<std::int64_t>(max_s * 1e9);
  struct Op : io::AppendOp {
    std::vector<std::byte> bytes;
    bool done_flag = false;
  } op;
  while (!stop.load() && mono_ns() < end) {
    recs[0].timestamp = wall_ms();
    op.bytes = io::build_batch(recs);
    op.batch = op.bytes;
    op.durability = io::Durability::durable;
    op.done_flag = false;
    op.done = [](io::AppendOp* o) { static_cast<Op*>(o)->done_flag = true; };
    const std::int64_t t0 = mono_ns();
    if (!log.append(&op)) std::abort();
    r.run_until([&] { return op.done_flag; });
    ms.push_back(static_cast<double>(mono_ns() - t0) / 1e6);
  }
  Latency l;
  l.n = ms.size();
  if (ms.empty()) return l;
  std::sort(ms.begin(), ms.end());
  l.p50_ms = ms[ms.size() / 2];
  l.p99_ms = ms[std::min(ms.size() - 1, ms.size() * 99 / 100)];
  return l;
}

// false (after the usage) on an unknown flag.
bool parse_args(int argc, char** argv, Args& a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--keys")
      a.keys = std::stoll(v);
    else if (k == "--versions")
      a.versions = std::stoi(v);
    else if (k == "--value-bytes")
      a.value_bytes = std::stoul(v);
    else if (k == "--segment-bytes")
      a.segment_bytes = std::stoull(v);
    else if (k == "--dir")
      a.dir = v;
    else if (k == "--probe-seconds")
      a.probe_seconds = std::stod(v);
    else {
      std::fprintf(stderr,
                   "usage: cleaner_bench [--keys N] [--versions N] [--value-bytes N] "
                   "[--segment-bytes N] [--dir D] [--probe-seconds S]\n");
      return false;
    }
  }
  return true;
}

// Baseline: a plain copy of the plan's segments through the same io (read, write, fdatasync).
// Seconds.
double copy_seconds(const io::CleanPlan& plan, const fs::path& out) {
  io::CleanerIo cio;
  std::vector<std::byte> buf(1u << 20);
  const std::int64_t t0 = mono_ns();
  for (const auto& s : plan.segments) {
    int fd = ::open(out.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    for (std::uint64_t pos = 0; pos < s.size;) {
      auto n = cio.read(s.file->fd, buf.data(), buf.size(), pos, s.file->path);
      if (!n || *n == 0) break;
      (void)cio.write(fd, buf.data(), *n, pos, out);
      pos += *n;
    }
    (void)cio.sync(fd, out);
    ::close(fd);
  }
  const double secs = static_cast<double>(mono_ns() - t0) / 1e9;
  fs::remove(out);
  return secs;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!parse_args(argc, argv, a)) return 2;
  samsa::log::set_level(samsa::log::Level::warn);
  char tmpl[4096];
  std::snprintf(tmpl, sizeof tmpl, "%s/samsa-cleaner-bench-XXXXXX", a.dir.c_str());
  if (!mkdtemp(tmpl)) return 1;
  const fs::path root = tmpl;
  auto reactor = io::Reactor::create({.name = "bench"});
  if (!reactor) return 1;
  io::Reactor& r = **reactor;
  std::printf("load average at start %.2f\n", loadavg());
  const std::int64_t t_fill = mono_ns();
  fill(r, root / "t-0", a);
  std::printf("wrote %" PRId64 " keys x %d versions in %.1f s\n", a.keys, a.versions,
              static_cast<double>(mono_ns() - t_fill) / 1e9);

  auto log = io::Log::open(r, root / "t-0", compacted(a),
                           io::OpenOptions{.recovery_point = INT64_MAX, .clean_shutdown = true});
  auto other = io::Log::open(r, root / "p-0", io::LogConfig{});
  if (!log || !other) return 1;
  auto plan = (*log)->plan_cleaning({.now_ms = wall_ms(), .force = true});
  if (!plan) {
    std::fprintf(stderr, "nothing to clean (segments too large for the data?)\n");
    return 1;
  }
  const double gb = static_cast<double>(plan->total_bytes) / 1e9;
  std::printf("cleanable: %zu segments, %.3f GB\n", plan->segments.size(), gb);

  // Baselines: a plain copy of the same bytes, and the probe with the cleaner idle.
  const double copy_s = copy_seconds(*plan, root / "copy");
  std::atomic<bool> stop{false};
  const Latency idle = probe(r, **other, stop, a.probe_seconds);

  // The pass on its own thread, the probe meanwhile.
  io::OffsetMap map(128u << 20);
  io::CleanerIo cio;
  io::Result<io::CleanResult> res = std::unexpected(io::Error{io::Errc::busy, ""});
  double clean_s = 0, cpu_s = 0;
  std::thread cleaner([&] {
    const double c0 = thread_cpu_s();
    const std::int64_t t0 = mono_ns();
    res = io::clean_segments(*plan, map, cio);
    clean_s = static_cast<double>(mono_ns() - t0) / 1e9;
    cpu_s = thread_cpu_s() - c0;
    stop.store(true);
  });
  const Latency busy = probe(r, **other, stop, 3600);
  cleaner.join();
  if (!res) {
    std::fprintf(stderr, "pass failed: %s\n", res.error().detail.c_str());
    return 1;
  }
  if (!(*log)->commit_cleaning(*plan, *res)) return 1;
  std::printf("pass: %.2f s, %" PRIu64 " -> %" PRIu64
              " records, %.3f GB -> %.3f GB written, "
              "%" PRIu64 " keys in the map\n",
              clean_s, res->stats.records_read, res->stats.records_kept, gb,
              static_cast<double>(res->stats.bytes_written) / 1e9, res->stats.map_keys);
  std::printf("cleaning  %.1f MB/s   copy baseline %.1f MB/s   clean_x_copy %.2f\n",
              gb * 1e3 / clean_s, gb * 1e3 / copy_s, copy_s / clean_s);
  std::printf("cleaner CPU %.2f s/GB of input\n", cpu_s / gb);
  std::printf(
      "append probe (acks=all, other partition): idle p50 %.2f ms p99 %.2f ms (%zu); "
      "while cleaning p50 %.2f ms p99 %.2f ms (%zu); p50_x %.2f p99_x %.2f\n",
      idle.p50_ms, idle.p99_ms, idle.n, busy.p50_ms, busy.p99_ms, busy.n, busy.p50_ms / idle.p50_ms,
      busy.p99_ms / idle.p99_ms);
  std::printf("load average at end %.2f\n", loadavg());
  log->reset();
  other->reset();
  fs::remove_all(root);
  return 0;
}
