// log_torture — drives io::Log for crash and power-loss tests, and checks what survived.
//
//   log_torture write --dir D [--seed S] [--producers K] [--segment-bytes N] [--no-fsync]
//                     [--max-batches M]
//     Opens (recovering) the log directory D, partition "torture-0", and appends deterministic
//     batches with K appends in flight (default 8). Batch i (its index in the log's batch sequence)
//     is a pure function of (S, i): 1-6 records, 100 B - 16 KiB, the first record's key "b<i>", so
//     a restarted writer finds where it stopped. For every batch acknowledged as durable it writes
//     "ACK <i> <base_offset> <last_offset>\n" to stdout with one write(2), in acknowledgement
//     order. Runs until killed; SIGTERM/SIGINT or M batches appended in this run end it with a
//     clean shutdown (exit 0). The retention thread writes checkpoints every 50 ms, so crashes
//     also hit checkpoint writes and the recovery point is exercised.
//
//   log_torture check --dir D --acks FILE [--seed S]
//     Opens D (running recovery) and checks: batches are contiguous from the log start, batch i
//     is byte-identical to the regenerated batch i (with its offsets), the segment files hold
//     exactly those batches and nothing after the last one, and every ACK line of FILE names a
//     batch that is there with those offsets. Prints "OK batches=.. acked=.. lost=0" or every
//     violation and a FAIL line; exit 0 only if all hold (1: violations, 2: could not check).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "base/log.h"
#include "io/batch_builder.h"
#include "io/log.h"
#include "io/log_dir.h"
#include "io/record_batch.h"
#include "io/retention.h"

namespace samsa::io {
namespace {

constexpr std::size_t kMaxBatch = 16 * 1024;
const PartitionId kPartition{"torture", 0};

struct Args {
  std::string mode, dir, acks;
  std::uint64_t seed = 1;
  int producers = 8;
  std::uint64_t segment_bytes = 1 << 20;
  bool fsync = true;
  std::int64_t max_batches = -1;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "log_torture: %s\n"
               "usage: log_torture write --dir D [--seed S] [--producers K] [--segment-bytes N] "
               "[--no-fsync] [--max-batches M]\n"
               "       log_torture check --dir D --acks FILE [--seed S]\n",
               why);
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  if (argc < 2) usage("missing mode");
  a.mode = argv[1];
  if (a.mode != "write" && a.mode != "check") usage("mode must be write or check");
  for (int i = 2; i < argc; ++i) {
    std::string k = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value for " + k).c_str());
      return argv[++i];
    };
    try {
      if (k == "--dir") {
        a.dir = val();
      } else if (k == "--acks") {
        a.acks = val();
      } else if (k == "--seed") {
        a.seed = std::stoull(val());
      } else if (k == "--producers") {
        a.producers = std::stoi(val());
      } else if (k == "--segment-bytes") {
        a.segment_bytes = std::stoull(val());
      } else if (k == "--no-fsync") {
        a.fsync = false;
      } else if (k == "--max-batches") {
        a.max_batches = std::stoll(val());
      } else {
        usage(("unknown option " + k).c_str());
      }
    } catch (const std::exception&) {
      usage(("bad value for " + k).c_str());
    }
  }
  if (a.dir.empty()) usage("--dir is required");
  if (a.mode == "check" && a.acks.empty()) usage("--acks is required for check");
  if (a.producers < 1) usage("--producers must be at least 1");
  return a;
}

std::uint64_t splitmix(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Batch i for seed: written into buf, returned as the span it fills (base offset 0).
std::span<std::byte> generate(std::uint64_t seed, std::int64_t i, std::span<std::byte> buf) {
  std::uint64_t s = seed * 0xD1B54A32D192ED03ull ^ static_cast<std::uint64_t>(i + 1);
  int records = 1 + static_cast<int>(splitmix(s) % 6);
  std::size_t target = 100 + splitmix(s) % (kMaxBatch - 100);
  std::size_t overhead = batch::kHeaderSize + static_cast<std::size_t>(records) * 40;
  std::size_t per = target > overhead ? (target - overhead) / static_cast<std::size_t>(records) : 1;
  BatchBuilder b(buf);
  std::vector<std::byte> value(per);
  for (int j = 0; j < records; ++j) {
    for (std::size_t k = 0; k < per; k += 8) {
      std::uint64_t x = splitmix(s);
      std::memcpy(value.data() + k, &x, std::min<std::size_t>(8, per - k));
    }
    std::string key = j == 0 ? "b" + std::to_string(i) : "r" + std::to_string(j);
    std::string hv = std::to_string(splitmix(s) % 1000);
    BatchBuilder::Header h[] = {{as_bytes("h"), as_bytes(hv)}};
    std::span<const BatchBuilder::Header> hs =
        splitmix(s) % 3 == 0 ? std::span(h) : std::span(h, 0);
    std::int64_t ts = 1'600'000'000'000LL + i * 16 + j;
    if (!b.add(ts, as_bytes(key), std::span<const std::byte>(value), hs)) std::abort();
  }
  return b.finish();
}

std::vector<std::byte> generate(std::uint64_t seed, std::int64_t i) {
  std::vector<std::byte> buf(kMaxBatch + 1024);
  auto s = generate(seed, i, buf);
  buf.resize(s.size());
  return buf;
}

LogConfig config(const Args& a) {
  LogConfig c;
  c.segment_bytes = a.segment_bytes;
  c.fsync = a.fsync;
  c.retention_ms = -1;
  c.segment_ms = INT64_MAX / 4;
  return c;
}

// The batch index stored in a batch's first record key ("b<i>").
std::optional<std::int64_t> batch_index(std::span<const std::byte> b) {
  auto info = batch::parse_header(b.data());
  batch::RecordReader rr(b.subspan(batch::kHeaderSize), info.record_count);
  auto r = rr.next();
  if (!r || !*r || !(*r)->key) return std::nullopt;
  std::string k(reinterpret_cast<const char*>((*r)->key->data()), (*r)->key->size());
  if (k.size() < 2 || k[0] != 'b') return std::nullopt;
  try {
    return std::stoll(k.substr(1));
  } catch (...) {
    return std::nullopt;
  }
}

std::vector<std::byte> read_slice(const Slice& s) {
  std::vector<std::byte> out(s.length);
  std::size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::pread(s.file->fd, out.data() + done, out.size() - done,
                        static_cast<off_t>(s.position + done));
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  out.resize(done);
  return out;
}

void write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      std::_Exit(3);  // stdout gone: nobody is listening for acks
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

volatile sig_atomic_t g_stop = 0;

// One in-flight append slot ("producer"): its own buffer, refilled with the next batch each time
// the previous one is acknowledged.
struct Producer : AppendOp {
  std::vector<std::byte> buf = std::vector<std::byte>(kMaxBatch + 1024);
  std::int64_t index = -1;
};

// The writer's state, touched only on the reactor thread (done callbacks included).
struct Writer {
  const Args* args = nullptr;
  Log* log = nullptr;
  std::int64_t next_i = 0;
  std::int64_t appended = 0;
  int in_flight = 0;
  int failed = 0;

  bool submit(Producer* p) {
    if (g_stop || (args->max_batches >= 0 && appended >= args->max_batches)) return false;
    p->index = next_i;  // taken at append time, so log positions follow batch indexes
    p->batch = generate(args->seed, p->index, p->buf);
    auto r = log->append(p);
    if (!r) {
      std::fprintf(stderr, "append of batch %" PRId64 " refused: %s\n", p->index,
                   r.error().detail.c_str());
      ++failed;
      g_stop = 1;
      return false;
    }
    ++next_i;
    ++appended;
    ++in_flight;
    return true;
  }
};
Writer g_writer;

void on_acked(AppendOp* op) {
  auto* p = static_cast<Producer*>(op);
  Writer& w = g_writer;
  --w.in_flight;
  if (op->error) {
    std::fprintf(stderr, "batch %" PRId64 " failed: %s\n", p->index, op->error->detail.c_str());
    ++w.failed;
    g_stop = 1;
    return;
  }
  char line[96];
  int n = std::snprintf(line, sizeof line, "ACK %" PRId64 " %" PRId64 " %" PRId64 "\n", p->index,
                        op->result.base_offset, op->result.last_offset);
  write_all(1, line, static_cast<std::size_t>(n));
  w.submit(p);
}

int run_write(const Args& a) {
  ::signal(SIGPIPE, SIG_IGN);
  struct sigaction sa {};
  sa.sa_handler = [](int) { g_stop = 1; };
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);

  auto reactor = Reactor::create({.name = "torture"});
  if (!reactor) {
    std::fprintf(stderr, "reactor: %s\n", std::strerror(-reactor.error()));
    return 2;
  }
  auto dir = LogDir::open(a.dir);
  if (!dir) {
    std::fprintf(stderr, "log dir: %s\n", dir.error().detail.c_str());
    return 2;
  }
  auto opened = (*dir)->open_log(**reactor, kPartition, config(a));
  if (!opened) {
    std::fprintf(stderr, "open: %s\n", opened.error().detail.c_str());
    return 2;
  }
  Log& log = **opened;

  // Where the previous run stopped: the index in the last batch's first key.
  std::int64_t next_i = 0;
  if (log.log_end_offset() > log.log_start_offset()) {
    auto rr = log.read(log.log_end_offset() - 1, 1, INT64_MAX, true);
    if (!rr || rr->slices.empty()) {
      std::fprintf(stderr, "reading the last batch failed\n");
      return 2;
    }
    auto bytes = read_slice(rr->slices.back());
    auto idx = batch_index(bytes);
    if (!idx) {
      std::fprintf(stderr, "the last batch has no \"b<i>\" key\n");
      return 2;
    }
    next_i = *idx + 1;
  }
  std::fprintf(stderr,
               "log_torture write: offsets %" PRId64 "..%" PRId64 ", next batch %" PRId64 "\n",
               log.log_start_offset(), log.log_end_offset(), next_i);

  RetentionDeleter deleter({.check_interval_ms = 1000, .checkpoint_interval_ms = 50}, {dir->get()});
  auto reg = deleter.add(**reactor, log);
  deleter.start();

  g_writer.args = &a;
  g_writer.log = &log;
  g_writer.next_i = next_i;
  std::vector<std::unique_ptr<Producer>> ps;
  for (int k = 0; k < a.producers; ++k) {
    ps.push_back(std::make_unique<Producer>());
    ps.back()->durability = Durability::durable;
    ps.back()->done = &on_acked;
  }
  for (auto& p : ps)
    g_writer.submit(p.get());
  while (g_writer.in_flight > 0)
    (*reactor)->run_once(100'000'000);

  deleter.remove(reg);
  deleter.stop();
  if (g_writer.failed) return 1;
  const Log::Stats& st = log.stats();
  std::fprintf(
      stderr,
      "log_torture write: %llu appends, %llu groups, %llu writev, %llu fdatasyncs "
      "(%.4f per batch), %llu rolls\n",
      static_cast<unsigned long long>(st.appends), static_cast<unsigned long long>(st.groups),
      static_cast<unsigned long long>(st.write_submissions),
      static_cast<unsigned long long>(st.fdatasyncs),
      st.appends ? static_cast<double>(st.fdatasyncs) / static_cast<double>(st.appends) : 0.0,
      static_cast<unsigned long long>(st.rolls));
  auto c = log.close();
  if (!c) {
    std::fprintf(stderr, "close: %s\n", c.error().detail.c_str());
    return 1;
  }
  opened->reset();
  auto sc = (*dir)->shutdown_clean();
  if (!sc) {
    std::fprintf(stderr, "clean shutdown: %s\n", sc.error().detail.c_str());
    return 1;
  }
  std::fprintf(stderr, "log_torture write: appended %" PRId64 " batches, clean shutdown\n",
               g_writer.appended);
  return 0;
}

int run_check(const Args& a) {
  struct Ack {
    std::int64_t base, last;
  };
  std::multimap<std::int64_t, Ack> acks;
  {
    std::ifstream f(a.acks);
    if (!f) {
      std::fprintf(stderr, "cannot read %s\n", a.acks.c_str());
      return 2;
    }
    std::string line;
    while (std::getline(f, line)) {
      std::istringstream ls(line);
      std::string tag;
      std::int64_t i, b, l;
      if (ls >> tag >> i >> b >> l && tag == "ACK") acks.emplace(i, Ack{b, l});
    }
  }
  auto reactor = Reactor::create({.name = "check"});
  if (!reactor) return 2;
  auto dir = LogDir::open(a.dir);
  if (!dir) {
    std::fprintf(stderr, "log dir: %s\n", dir.error().detail.c_str());
    return 2;
  }
  auto opened = (*dir)->open_log(**reactor, kPartition, config(a));
  if (!opened) {
    std::printf("FAIL open: %s\n", opened.error().detail.c_str());
    return 1;
  }
  Log& log = **opened;

  std::vector<std::string> violations;
  std::vector<Ack> found;  // by batch index
  std::int64_t offset = log.log_start_offset();
  std::uint64_t total_bytes = 0;
  if (offset != 0) violations.push_back("log start is " + std::to_string(offset) + ", not 0");
  while (offset < log.log_end_offset()) {
    auto rr = log.read(offset, 4 << 20, INT64_MAX, true);
    if (!rr) {
      violations.push_back("read at " + std::to_string(offset) + ": " + rr.error().detail);
      break;
    }
    if (rr->slices.empty()) {
      violations.push_back("read at " + std::to_string(offset) + " returned nothing");
      break;
    }
    for (const Slice& s : rr->slices) {
      auto bytes = read_slice(s);
      total_bytes += bytes.size();
      std::size_t pos = 0;
      while (pos < bytes.size()) {
        std::span<const std::byte> rest(bytes.data() + pos, bytes.size() - pos);
        auto info = rest.size() >= batch::kHeaderSize
                        ? batch::check_header(rest.first(batch::kHeaderSize), 0)
                        : Result<BatchInfo>(std::unexpected(Error{Errc::invalid_length, "short"}));
        if (!info || static_cast<std::size_t>(info->length) > rest.size()) {
          violations.push_back("unparsable batch at offset " + std::to_string(offset));
          pos = bytes.size();
          break;
        }
        auto b = rest.first(static_cast<std::size_t>(info->length));
        auto i = static_cast<std::int64_t>(found.size());
        if (info->base_offset != offset) {
          violations.push_back("batch " + std::to_string(i) + " starts at offset " +
                               std::to_string(info->base_offset) + ", expected " +
                               std::to_string(offset));
        }
        auto want = generate(a.seed, i);
        store_be<std::int64_t>(want.data(), info->base_offset);
        if (want.size() != b.size() || !std::equal(b.begin(), b.end(), want.begin())) {
          violations.push_back("batch " + std::to_string(i) + " at offset " +
                               std::to_string(info->base_offset) +
                               " differs from the generated batch");
        }
        if (!Log::validate_batch(b, 0)) {
          violations.push_back("batch " + std::to_string(i) + " fails validation");
        }
        std::int64_t last = info->base_offset + info->last_offset_delta;
        found.push_back({info->base_offset, last});
        offset = last + 1;
        pos += b.size();
      }
    }
  }
  if (offset != log.log_end_offset()) {
    violations.push_back("batches end at " + std::to_string(offset) + " but the log end is " +
                         std::to_string(log.log_end_offset()));
  }
  // The segment files hold the batches and nothing else (the tail is a batch boundary).
  std::uint64_t file_bytes = 0;
  for (const auto& de : std::filesystem::directory_iterator((*dir)->partition_dir(kPartition))) {
    if (de.path().extension() == ".log") file_bytes += de.file_size();
  }
  if (file_bytes != total_bytes) {
    violations.push_back("segment files hold " + std::to_string(file_bytes) +
                         " bytes, the batches " + std::to_string(total_bytes));
  }
  std::int64_t lost = 0;
  std::size_t distinct = 0;
  std::int64_t prev = -1;
  for (const auto& [i, ack] : acks) {
    if (i != prev) ++distinct;
    prev = i;
    if (i < 0 || static_cast<std::size_t>(i) >= found.size()) {
      ++lost;
      violations.push_back("ACK " + std::to_string(i) + " " + std::to_string(ack.base) + " " +
                           std::to_string(ack.last) + ": missing (the log has " +
                           std::to_string(found.size()) + " batches)");
    } else if (found[static_cast<std::size_t>(i)].base != ack.base ||
               found[static_cast<std::size_t>(i)].last != ack.last) {
      ++lost;
      violations.push_back("ACK " + std::to_string(i) + " " + std::to_string(ack.base) + " " +
                           std::to_string(ack.last) + ": the log has it at " +
                           std::to_string(found[static_cast<std::size_t>(i)].base) + ".." +
                           std::to_string(found[static_cast<std::size_t>(i)].last));
    }
  }
  for (const auto& v : violations)
    std::printf("VIOLATION %s\n", v.c_str());
  std::printf(
      "%s batches=%zu acked=%zu lost=%" PRId64 "%s\n", violations.empty() ? "OK" : "FAIL",
      found.size(), distinct, lost,
      violations.empty() ? "" : (" violations=" + std::to_string(violations.size())).c_str());
  return violations.empty() ? 0 : 1;
}

}  // namespace
}  // namespace samsa::io

int main(int argc, char** argv) {
  auto a = samsa::io::parse(argc, argv);
  return a.mode == "write" ? samsa::io::run_write(a) : samsa::io::run_check(a);
}
