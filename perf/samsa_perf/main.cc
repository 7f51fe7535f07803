// samsa-perf: a load generator for any Kafka-compatible broker, on librdkafka. `samsa-perf
// --help` lists the settings; perf/README.md explains the measurements.
//
// Threads: the main thread is the monitor (progress line, results); each producer has a sending
// thread (perf-send-N) and a polling thread (perf-poll-N, the only one that runs its delivery
// callbacks); each consumer has one (perf-cons-N); librdkafka adds its own per client.
// With --processes K the parent only spawns K copies of itself (--worker i/K, each running its
// share), reads their ticks and results through pipes and merges them.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/thread.h"
#include "perf/samsa_perf/client.h"
#include "perf/samsa_perf/options.h"
#include "perf/samsa_perf/run.h"
#include "perf/samsa_perf/stats.h"

namespace samsa::perf {
namespace {

constexpr const char* kReportFdEnv = "SAMSA_PERF_REPORT_FD";

void print_summary(std::FILE* out, const RunResult& r) {
  auto percentiles = [&](const char* what, const Histogram& h) {
    if (h.count())
      std::fprintf(out,
                   "  %s ms: p50 %.3f  p99 %.3f  p99.9 %.3f  p99.99 %.3f  max %.3f "
                   "(%llu samples)\n",
                   what, h.percentile(0.5) / 1e6, h.percentile(0.99) / 1e6,
                   h.percentile(0.999) / 1e6, h.percentile(0.9999) / 1e6, h.max() / 1e6,
                   static_cast<unsigned long long>(h.count()));
  };
  auto side = [&](const char* name, const Side& s, const char* lat) {
    if (!s.present) return;
    std::fprintf(out, "%s: %llu records, %.1f MB in %.2f s: %.0f records/s, %.1f MB/s", name,
                 static_cast<unsigned long long>(s.records), s.bytes / 1e6, s.seconds,
                 s.records_per_s(), s.mb_per_s());
    if (s.errors) std::fprintf(out, ", %llu errors", static_cast<unsigned long long>(s.errors));
    std::fprintf(out, "\n");
    percentiles(lat, s.latency);
    percentiles("produce latency from the produce() call", s.call_latency);
  };
  side("produce", r.produce, "produce latency");
  side("consume", r.consume, "end-to-end latency");
  std::fprintf(out, "client CPU: %.2f s\n", r.client_cpu_s);
  if (!r.error.empty()) std::fprintf(out, "error: %s\n", r.error.c_str());
}

bool write_all(int fd, const std::string& s) {
  std::size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    off += static_cast<std::size_t>(n);
  }
  return true;
}

// A child of --processes: runs its share and reports through the pipe.
int child_main(const Options& o, int fd) {
  RunResult r = run_local(o, [&](const Tick& t) { write_all(fd, tick_line(t)); });
  std::string out;
  if (!r.error.empty()) out += "E " + r.error + "\n";
  out += side_line("produce", r.produce);
  out += side_line("consume", r.consume);
  char cpu[64];
  std::snprintf(cpu, sizeof cpu, "C %.4f\n", r.client_cpu_s);
  out += cpu;
  out += "D\n";
  write_all(fd, out);
  ::close(fd);
  return r.error.empty() ? 0 : 1;
}

// The parent of --processes: spawns K children running the same command with --worker i/K,
// merges their ticks (the k-th of each) and results.
RunResult parent_run(const Options& o, int argc, char** argv) {
  struct Child {
    pid_t pid = -1;
    int fd = -1;
    std::string buf;
    RunResult r;
    bool done = false;
  };
  std::vector<Child> kids(static_cast<std::size_t>(o.processes));
  for (int i = 0; i < o.processes; ++i) {
    int p[2];
    if (::pipe(p) != 0) std::abort();
    std::vector<std::string> args(argv, argv + argc);
    args.push_back("--worker");
    args.push_back(std::to_string(i) + "/" + std::to_string(o.processes));
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(p[0]);
      ::setenv(kReportFdEnv, std::to_string(p[1]).c_str(), 1);
      std::vector<char*> cargs;
      for (auto& a : args)
        cargs.push_back(a.data());
      cargs.push_back(nullptr);
      ::execv("/proc/self/exe", cargs.data());
      _exit(127);
    }
    ::close(p[1]);
    kids[static_cast<std::size_t>(i)].pid = pid;
    kids[static_cast<std::size_t>(i)].fd = p[0];
  }
  RunResult merged;
  std::size_t printed = 0;
  Tick prev;
  for (;;) {
    std::vector<pollfd> fds;
    for (auto& k : kids)
      if (k.fd >= 0) fds.push_back({k.fd, POLLIN, 0});
    if (fds.empty()) break;
    ::poll(fds.data(), fds.size(), 1000);
    for (auto& k : kids) {
      if (k.fd < 0) continue;
      char buf[65536];
      const ssize_t n = ::read(k.fd, buf, sizeof buf);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        ::close(k.fd);
        k.fd = -1;
        continue;
      }
      k.buf.append(buf, static_cast<std::size_t>(n));
      std::size_t nl;
      while ((nl = k.buf.find('\n')) != std::string::npos) {
        if (!apply_line(std::string_view(k.buf).substr(0, nl), k.r, k.done))
          merged.error += "bad line from a child; ";
        k.buf.erase(0, nl + 1);
      }
      if (!k.done) continue;
    }
    // Print the k-th tick once every child has sent it.
    std::size_t have = SIZE_MAX;
    for (auto& k : kids)
      have = std::min(have, k.r.timeline.size());
    while (printed < have) {
      Tick sum;
      for (auto& k : kids) {
        const Tick& t = k.r.timeline[printed];
        sum.t = std::max(sum.t, t.t);
        sum.p_records += t.p_records;
        sum.p_bytes += t.p_bytes;
        sum.c_records += t.c_records;
        sum.c_bytes += t.c_bytes;
        sum.p99_produce_ns = std::max(sum.p99_produce_ns, t.p99_produce_ns);
        sum.p99_e2e_ns = std::max(sum.p99_e2e_ns, t.p99_e2e_ns);
      }
      merged.timeline.push_back(sum);
      if (!o.quiet)
        std::fprintf(stderr, "%s (p99: the worst of %d processes)\n",
                     progress_line(sum, prev, o.mode != Mode::consume, o.mode != Mode::produce,
                                   o.mode == Mode::e2e)
                         .c_str(),
                     o.processes);
      prev = sum;
      ++printed;
    }
  }
  for (auto& k : kids) {
    int status = 0;
    ::waitpid(k.pid, &status, 0);
    if (!k.done) merged.error += "a child process ended without results; ";
    merged.produce.add(k.r.produce);
    merged.consume.add(k.r.consume);
    merged.client_cpu_s += k.r.client_cpu_s;
    merged.error += k.r.error;
  }
  return merged;
}

int main_impl(int argc, char** argv) {
  auto parsed = parse_options(argc, argv);
  if (!parsed) return 2;
  Options& o = *parsed;
  set_thread_name("perf-main");
  ::signal(SIGPIPE, SIG_IGN);

  if (o.workers > 1) {
    const char* fd = std::getenv(kReportFdEnv);
    if (!fd) {
      std::fprintf(stderr, "samsa-perf: --worker is internal to --processes\n");
      return 2;
    }
    return child_main(o, std::atoi(fd));
  }

  if (o.create) {
    if (auto c = create_topics(o); !c) {
      std::fprintf(stderr, "samsa-perf: %s\n", c.error().c_str());
      return 1;
    }
    rd_kafka_wait_destroyed(5000);
  }

  RunResult r;
  if (o.processes > 1) {
    r = parent_run(o, argc, argv);
  } else {
    Tick prev;
    r = run_local(o, [&](const Tick& t) {
      if (!o.quiet)
        std::fprintf(stderr, "%s\n",
                     progress_line(t, prev, o.mode != Mode::consume, o.mode != Mode::produce,
                                   o.mode == Mode::e2e)
                         .c_str());
      prev = t;
    });
  }
  print_summary(o.json == "-" ? stderr : stdout, r);
  if (!o.json.empty() && !write_json(o.json, o, r)) {
    std::fprintf(stderr, "samsa-perf: cannot write %s\n", o.json.c_str());
    return 1;
  }
  return r.error.empty() ? 0 : 1;
}

}  // namespace
}  // namespace samsa::perf

int main(int argc, char** argv) {
  return samsa::perf::main_impl(argc, argv);
}
