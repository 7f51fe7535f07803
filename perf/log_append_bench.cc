// Durable appends of 1 KiB records in 16 KiB batches: samsa's io::Log (io_uring, group commit:
// one write + one fdatasync per loop turn and log) against a baseline where the same producers
// each pwrite + fdatasync their own batches, measured in the same run, plus the ceiling: the
// same bytes written sequentially with one fdatasync at the end.
//
// Each benchmark reports the three rates and the ratios (samsa/baseline, samsa/ceiling) and
// fdatasync calls per batch. A samsa/ceiling ratio above 1 means the benchmark is broken.
// Run with --benchmark_repetitions=5 (the default below) and read the medians.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/log.h"
#include "io/batch_builder.h"
#include "io/log.h"
#include "io/reactor.h"

namespace {

using namespace samsa;
namespace fs = std::filesystem;

constexpr std::size_t kRecordBytes = 1024;
constexpr std::size_t kRecordsPerBatch = 15;    // 15 x (1 KiB + framing) + header ~ 16 KiB
constexpr std::size_t kTotalBytes = 16u << 20;  // per measurement and method

std::vector<std::byte> make_batch() {
  std::vector<io::SimpleRecord> recs(kRecordsPerBatch);
  for (std::size_t i = 0; i < recs.size(); ++i) {
    recs[i].timestamp = wall_ms();
    recs[i].key = "key-" + std::to_string(i);
    recs[i].value = std::string(kRecordBytes, static_cast<char>('a' + i % 26));
  }
  return io::build_batch(recs);
}

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/samsa-bench-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

// samsa: `producers` closed-loop producers, each keeping one batch in flight, spread evenly over
// `partitions` logs on one reactor. Returns seconds; fills fdatasyncs.
double run_samsa(int producers, int partitions, std::size_t batches, std::uint64_t& fsyncs) {
  TempDir dir;
  auto reactor = io::Reactor::create({.name = "bench"});
  if (!reactor) std::abort();
  io::Reactor& r = **reactor;
  std::vector<std::unique_ptr<io::Log>> logs;
  for (int p = 0; p < partitions; ++p) {
    auto log = io::Log::open(r, dir.path / ("bench-" + std::to_string(p)), io::LogConfig{});
    if (!log) std::abort();
    logs.push_back(std::move(*log));
  }
  const auto tmpl = make_batch();
  struct Producer : io::AppendOp {
    std::vector<std::byte> bytes;
    io::Log* log = nullptr;
    std::size_t* left = nullptr;
    std::size_t* done_count = nullptr;
  };
  std::size_t left = batches, done = 0;
  std::vector<Producer> prods(static_cast<std::size_t>(producers));
  auto submit = [](Producer& p) {
    p.batch = p.bytes;
    if (!p.log->append(&p)) std::abort();
  };
  for (int i = 0; i < producers; ++i) {
    Producer& p = prods[static_cast<std::size_t>(i)];
    p.bytes = tmpl;
    p.log = logs[static_cast<std::size_t>(i % partitions)].get();
    p.left = &left;
    p.done_count = &done;
    p.durability = io::Durability::durable;
    p.done = [](io::AppendOp* op) {
      auto* p = static_cast<Producer*>(op);
      if (op->error) std::abort();
      ++*p->done_count;
      if (*p->left > 0) {
        --*p->left;
        p->batch = p->bytes;
        if (!p->log->append(p)) std::abort();
      }
    };
  }
  const std::int64_t t0 = mono_ns();
  for (auto& p : prods) {
    if (left == 0) break;
    --left;
    submit(p);
  }
  r.run_until([&] { return done == batches; }, 120'000'000'000);
  const double secs = static_cast<double>(mono_ns() - t0) / 1e9;
  fsyncs = 0;
  for (auto& l : logs)
    fsyncs += l->stats().fdatasyncs;
  for (auto& l : logs) {
    r.run_until([&] { return l->idle(); });
    (void)l->close();
  }
  return secs;
}

// Baseline: one thread per producer; each pwrite()s its batch at the next free position of its
// partition's file and fdatasync()s before taking the next.
double run_baseline(int producers, int partitions, std::size_t batches) {
  TempDir dir;
  std::vector<int> fds;
  std::vector<std::atomic<std::uint64_t>> pos(static_cast<std::size_t>(partitions));
  for (int p = 0; p < partitions; ++p) {
    auto path = dir.path / ("base-" + std::to_string(p) + ".log");
    fds.push_back(::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644));
  }
  const auto tmpl = make_batch();
  std::atomic<std::int64_t> left{static_cast<std::int64_t>(batches)};
  const std::int64_t t0 = mono_ns();
  std::vector<std::thread> threads;
  for (int i = 0; i < producers; ++i) {
    threads.emplace_back([&, i] {
      const std::size_t part = static_cast<std::size_t>(i % partitions);
      while (left.fetch_sub(1) > 0) {
        std::uint64_t at = pos[part].fetch_add(tmpl.size());
        if (::pwrite(fds[part], tmpl.data(), tmpl.size(), static_cast<off_t>(at)) !=
            static_cast<ssize_t>(tmpl.size()))
          std::abort();
        if (::fdatasync(fds[part]) != 0) std::abort();
      }
    });
  }
  for (auto& t : threads)
    t.join();
  const double secs = static_cast<double>(mono_ns() - t0) / 1e9;
  for (int fd : fds)
    ::close(fd);
  return secs;
}

// Ceiling: the same bytes, one sequential writer, one fdatasync at the end.
double run_ceiling(std::size_t batches) {
  TempDir dir;
  const auto tmpl = make_batch();
  int fd = ::open((dir.path / "ceiling.log").c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  std::vector<std::byte> chunk;
  for (int i = 0; i < 64; ++i)
    chunk.insert(chunk.end(), tmpl.begin(), tmpl.end());
  const std::int64_t t0 = mono_ns();
  std::size_t written = 0;
  const std::size_t total = batches * tmpl.size();
  while (written < total) {
    std::size_t n = std::min(chunk.size(), total - written);
    if (::write(fd, chunk.data(), n) != static_cast<ssize_t>(n)) std::abort();
    written += n;
  }
  if (::fdatasync(fd) != 0) std::abort();
  const double secs = static_cast<double>(mono_ns() - t0) / 1e9;
  ::close(fd);
  return secs;
}

void BM_DurableAppend(benchmark::State& state) {
  const int producers = static_cast<int>(state.range(0));
  const int partitions = static_cast<int>(state.range(1));
  const std::size_t batch_bytes = make_batch().size();
  const std::size_t batches = kTotalBytes / batch_bytes;
  double samsa_s = 0, base_s = 0, ceil_s = 0;
  std::uint64_t fsyncs = 0;
  for (auto _ : state) {
    samsa_s = run_samsa(producers, partitions, batches, fsyncs);
    base_s = run_baseline(producers, partitions, batches);
    ceil_s = run_ceiling(batches);
    state.SetIterationTime(samsa_s);
  }
  const double mb = static_cast<double>(batches * batch_bytes) / 1e6;
  state.counters["samsa_MBps"] = mb / samsa_s;
  state.counters["baseline_MBps"] = mb / base_s;
  state.counters["ceiling_MBps"] = mb / ceil_s;
  state.counters["x_baseline"] = base_s / samsa_s;
  state.counters["x_ceiling"] = ceil_s / samsa_s;
  state.counters["fsync_per_batch"] = static_cast<double>(fsyncs) / static_cast<double>(batches);
  state.SetBytesProcessed(static_cast<std::int64_t>(batches * batch_bytes) *
                          static_cast<std::int64_t>(state.iterations()));
}

BENCHMARK(BM_DurableAppend)
    ->ArgNames({"producers", "partitions"})
    ->Args({1, 1})
    ->Args({8, 1})
    ->Args({64, 1})
    ->Args({64, 64})
    ->Iterations(1)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  samsa::log::set_level(samsa::log::Level::warn);  // one "opened log" line per log is noise here
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
