// Group commit: appends of one loop turn share one writev + one fdatasync; one group in flight per
// log; written vs durable completions; failures fence the log.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#include "io/log.h"
#include "tests/support/io_testing.h"

// Counts heap allocations in this binary (the hot-path test below wants none).
static std::atomic<std::uint64_t> g_allocations{0};
[[gnu::noinline]] void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
// Not inlined: gcc would see malloc/free under new/delete and report a mismatch.
[[gnu::noinline]] void operator delete(void* p) noexcept {
  std::free(p);
}
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace samsa::io {
namespace {

using testing::OwnedAppend;

class GroupCommit : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = Reactor::create({.name = "test"});
    ASSERT_TRUE(r.has_value());
    reactor = std::move(*r);
  }
  std::unique_ptr<Log> open(LogConfig cfg = {}) {
    auto l = Log::open(*reactor, dir / "t-0", cfg);
    EXPECT_TRUE(l.has_value()) << l.error().detail;
    return l ? std::move(*l) : nullptr;
  }
  // The first group after open also syncs the directory (new segment files): start after it.
  void warm_up(Log& log) {
    ASSERT_TRUE(testing::append_sync(*reactor, log, testing::make_batch(1, 1)));
  }
  testing::TempDir dir;
  std::unique_ptr<Reactor> reactor;
};

TEST_F(GroupCommit, AppendsOfOneTurnShareOneWriteAndOneFdatasync) {
  auto log = open();
  warm_up(*log);
  Log::Stats s0 = log->stats();
  constexpr int kN = 50;
  std::vector<std::unique_ptr<OwnedAppend>> ops;
  std::vector<int> order;
  for (int i = 0; i < kN; ++i) {
    ops.push_back(std::make_unique<OwnedAppend>(testing::make_batch(2, 100 + i, 100)));
    ops.back()->done = [](AppendOp* self) { ++static_cast<OwnedAppend*>(self)->completions; };
    ASSERT_TRUE(log->append(ops.back().get()).has_value());
  }
  EXPECT_EQ(log->stats().write_submissions, s0.write_submissions);  // nothing until turn end
  EXPECT_EQ(log->written_end_offset(), 1);
  ASSERT_TRUE(reactor->run_until([&] { return ops.back()->completions == 1; }));
  for (auto& op : ops) {
    EXPECT_EQ(op->completions, 1);
    EXPECT_FALSE(op->error.has_value());
  }
  Log::Stats s1 = log->stats();
  EXPECT_EQ(s1.appends - s0.appends, static_cast<std::uint64_t>(kN));
  EXPECT_EQ(s1.groups - s0.groups, 1u);
  EXPECT_EQ(s1.write_submissions - s0.write_submissions, 1u);
  EXPECT_EQ(s1.fdatasyncs - s0.fdatasyncs, 1u);
  EXPECT_EQ(s1.dir_fsyncs, s0.dir_fsyncs);
  EXPECT_EQ(log->durable_end_offset(), 1 + 2 * kN);
}

// Appends arriving while a group is in flight wait for it and then go together.
TEST_F(GroupCommit, AppendsDuringFlightFormTheNextGroup) {
  auto log = open();
  warm_up(*log);
  Log::Stats s0 = log->stats();
  struct Ctx {
    Log* log;
    std::vector<std::unique_ptr<OwnedAppend>>* later;
    bool in_flight_seen = false;
  };
  std::vector<std::unique_ptr<OwnedAppend>> first, later;
  for (int i = 0; i < 10; ++i) {
    first.push_back(std::make_unique<OwnedAppend>(testing::make_batch(1, i)));
    later.push_back(std::make_unique<OwnedAppend>(testing::make_batch(1, i)));
  }
  // A written-durability op in the first group appends the later ones from its completion:
  // the write is done, its fdatasync still runs, so the group is in flight.
  struct Trigger : OwnedAppend {
    using OwnedAppend::OwnedAppend;
    Ctx* ctx = nullptr;
  };
  Ctx ctx{log.get(), &later};
  Trigger trig(testing::make_batch(1, 99), Durability::written);
  trig.ctx = &ctx;
  trig.done = [](AppendOp* self) {
    auto* t = static_cast<Trigger*>(self);
    ++t->completions;
    t->ctx->in_flight_seen = !t->ctx->log->idle() &&
                             t->ctx->log->durable_end_offset() < t->ctx->log->written_end_offset();
    for (auto& op : *t->ctx->later)
      EXPECT_TRUE(t->ctx->log->append(op.get()).has_value());
  };
  for (auto& op : first)
    ASSERT_TRUE(log->append(op.get()).has_value());
  ASSERT_TRUE(log->append(&trig).has_value());
  ASSERT_TRUE(reactor->run_until([&] { return later.back()->completions == 1; }));
  EXPECT_TRUE(ctx.in_flight_seen);
  Log::Stats s1 = log->stats();
  EXPECT_EQ(s1.groups - s0.groups, 2u);
  EXPECT_EQ(s1.write_submissions - s0.write_submissions, 2u);
  EXPECT_EQ(s1.fdatasyncs - s0.fdatasyncs, 2u);
  for (auto& op : first)
    EXPECT_EQ(op->completions, 1);
}

TEST_F(GroupCommit, WrittenCompletesAtTheWriteDurableAtTheSync) {
  auto log = open();
  warm_up(*log);
  struct Probe : OwnedAppend {
    using OwnedAppend::OwnedAppend;
    Log* log = nullptr;
    std::int64_t written_seen = -1, durable_seen = -1;
  };
  auto probe_done = [](AppendOp* self) {
    auto* p = static_cast<Probe*>(self);
    ++p->completions;
    p->written_seen = p->log->written_end_offset();
    p->durable_seen = p->log->durable_end_offset();
  };
  Probe w(testing::make_batch(1, 1), Durability::written);
  Probe d(testing::make_batch(1, 1), Durability::durable);
  w.log = d.log = log.get();
  w.done = d.done = probe_done;
  ASSERT_TRUE(log->append(&d).has_value());  // durable first: the written one still wins
  ASSERT_TRUE(log->append(&w).has_value());
  ASSERT_TRUE(reactor->run_until([&] { return d.completions == 1; }));
  EXPECT_EQ(w.written_seen, 3);
  EXPECT_EQ(w.durable_seen, 1);  // the fdatasync had not completed yet
  EXPECT_EQ(d.durable_seen, 3);
}

TEST_F(GroupCommit, OneGroupSpanningSegmentsSyncsEachAndTheDirectory) {
  LogConfig cfg;
  cfg.segment_bytes = 1000;
  auto log = open(cfg);
  warm_up(*log);
  Log::Stats s0 = log->stats();
  std::vector<std::unique_ptr<OwnedAppend>> ops;
  for (int i = 0; i < 20; ++i) {
    ops.push_back(std::make_unique<OwnedAppend>(testing::make_batch(2, i, 150)));  // ~400 B
    ASSERT_TRUE(log->append(ops.back().get()).has_value());
  }
  std::size_t segs = log->segment_count();
  ASSERT_GE(segs, 5u);
  ASSERT_TRUE(reactor->run_until([&] { return ops.back()->completions == 1; }));
  Log::Stats s1 = log->stats();
  EXPECT_EQ(s1.groups - s0.groups, 1u);
  EXPECT_EQ(s1.write_submissions - s0.write_submissions, segs);  // one run per segment
  EXPECT_EQ(s1.fdatasyncs - s0.fdatasyncs, segs);
  EXPECT_EQ(s1.dir_fsyncs - s0.dir_fsyncs, 1u);
  std::vector<std::byte> want;
  auto first = testing::make_batch(1, 1);
  store_be<std::int64_t>(first.data(), 0);
  want.insert(want.end(), first.begin(), first.end());
  for (auto& op : ops)
    want.insert(want.end(), op->bytes.begin(), op->bytes.end());
  EXPECT_EQ(testing::read_bytes(*log->read(0, 1 << 24, INT64_MAX)), want);
}

// 64 producers, each appending again as soon as its previous batch is durable: every group
// commit carries all 64, so one fdatasync covers 64 batches.
TEST_F(GroupCommit, SixtyFourProducersShareFdatasyncs) {
  auto log = open();
  warm_up(*log);
  Log::Stats s0 = log->stats();
  constexpr int kProducers = 64, kTotal = 64 * 40;
  struct Producer : OwnedAppend {
    using OwnedAppend::OwnedAppend;
    Log* log = nullptr;
    int* left = nullptr;
  };
  int left = kTotal - kProducers;
  std::vector<std::unique_ptr<Producer>> ps;
  for (int i = 0; i < kProducers; ++i) {
    ps.push_back(std::make_unique<Producer>(testing::make_batch(4, i, 200)));
    ps.back()->log = log.get();
    ps.back()->left = &left;
    ps.back()->done = [](AppendOp* self) {
      auto* p = static_cast<Producer*>(self);
      ++p->completions;
      EXPECT_FALSE(p->error.has_value());
      if (*p->left > 0) {
        --*p->left;
        EXPECT_TRUE(p->log->append(p).has_value());  // same op, same bytes: a new batch
      }
    };
  }
  for (auto& p : ps)
    ASSERT_TRUE(log->append(p.get()).has_value());
  int total = 0;
  ASSERT_TRUE(reactor->run_until([&] {
    total = 0;
    for (auto& p : ps)
      total += p->completions;
    return total == kTotal;
  }));
  Log::Stats s1 = log->stats();
  double per_batch =
      static_cast<double>(s1.fdatasyncs - s0.fdatasyncs) / static_cast<double>(kTotal);
  std::printf("64 in flight: %d batches, %llu groups, %llu fdatasyncs, %.4f fdatasyncs/batch\n",
              kTotal, static_cast<unsigned long long>(s1.groups - s0.groups),
              static_cast<unsigned long long>(s1.fdatasyncs - s0.fdatasyncs), per_batch);
  EXPECT_EQ(s1.groups - s0.groups, static_cast<std::uint64_t>(kTotal / kProducers));
  EXPECT_EQ(s1.fdatasyncs - s0.fdatasyncs, s1.groups - s0.groups);
  EXPECT_EQ(log->durable_end_offset(), 1 + 4 * kTotal);
}

// Appending, group submission and completion allocate nothing once warm (the sparse index is
// kept empty here so its amortized growth does not blur the count).
TEST_F(GroupCommit, TheAppendPathDoesNotAllocate) {
  LogConfig cfg;
  cfg.index_interval_bytes = 1u << 30;
  auto log = open(cfg);
  warm_up(*log);
  std::vector<std::unique_ptr<OwnedAppend>> ops;
  for (int i = 0; i < 64; ++i) {
    ops.push_back(std::make_unique<OwnedAppend>(testing::make_batch(3, i, 100)));
  }
  auto round = [&] {
    for (auto& op : ops) {
      op->completions = 0;
      ASSERT_TRUE(log->append(op.get()).has_value());
    }
    ASSERT_TRUE(reactor->run_until([&] { return ops.back()->completions == 1; }));
  };
  std::uint64_t cold = g_allocations.load();
  round();                                // warm: vectors reach their working sizes
  EXPECT_GT(g_allocations.load(), cold);  // the counter sees the library's allocations
  // The ring of recent batches grows with use up to its 1024 entries: warm means that too.
  for (int r = 0; r < 16; ++r)
    round();
  std::uint64_t before = g_allocations.load();
  for (int r = 0; r < 5; ++r)
    round();
  EXPECT_EQ(g_allocations.load() - before, 0u);
  EXPECT_EQ(log->stats().appends, 1u + 22 * 64);
}

TEST_F(GroupCommit, WithoutFsyncDurableMeansWritten) {
  LogConfig cfg;
  cfg.fsync = false;
  auto log = open(cfg);
  Log::Stats s0 = log->stats();
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(testing::append_sync(*reactor, *log, testing::make_batch(1, i)).has_value());
  }
  EXPECT_EQ(log->stats().fdatasyncs, s0.fdatasyncs);
  EXPECT_EQ(log->stats().dir_fsyncs, s0.dir_fsyncs);
  EXPECT_EQ(log->durable_end_offset(), 5);
  EXPECT_EQ(log->recovery_point(), 0);  // nothing is known to be on disk
  ASSERT_TRUE(log->close().has_value());
  EXPECT_EQ(log->recovery_point(), 5);
}

TEST_F(GroupCommit, TruncationAndCloseRefuseWhileAppendsAreInFlight) {
  auto log = open();
  warm_up(*log);
  OwnedAppend op(testing::make_batch(3, 1));
  ASSERT_TRUE(log->append(&op).has_value());
  auto t = log->truncate_to(0);
  ASSERT_FALSE(t.has_value());
  EXPECT_EQ(t.error().code, Errc::busy);
  auto c = log->close();
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().code, Errc::busy);
  ASSERT_TRUE(reactor->run_until([&] { return op.completions == 1; }));
  EXPECT_TRUE(log->idle());
  EXPECT_TRUE(log->truncate_to(1).has_value());
  EXPECT_EQ(log->log_end_offset(), 1);
}

// A write that hits RLIMIT_FSIZE is first short (the bytes up to the limit), then fails with
// EFBIG: the log resubmits the rest, then fences; every op of the group and every op queued
// behind it gets the error, and later appends are refused. Runs in a child process so the limit
// does not touch the test runner.
TEST_F(GroupCommit, WriteFailureFencesTheLog) {
  testing::TempDir d;
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto check = [](bool ok, const char* what) {
      if (!ok) {
        std::fprintf(stderr, "child: %s\n", what);
        std::fflush(stderr);
        ::_exit(1);
      }
    };
    ::signal(SIGXFSZ, SIG_IGN);
    auto r = Reactor::create({.name = "child"});
    check(r.has_value(), "reactor");
    auto l = Log::open(**r, d / "t-0", LogConfig{});
    check(l.has_value(), "open");
    Log& log = **l;
    check(testing::append_sync(**r, log, testing::make_batch(1, 1)).has_value(), "first append");
    std::uint64_t size = std::filesystem::file_size(d / "t-0" / "00000000000000000000.log");
    rlimit lim{size + 2500, size + 2500};
    check(::setrlimit(RLIMIT_FSIZE, &lim) == 0, "setrlimit");
    std::vector<std::unique_ptr<OwnedAppend>> ops;
    for (int i = 0; i < 10; ++i) {  // ~1 KiB each: the limit falls inside the third
      ops.push_back(std::make_unique<OwnedAppend>(testing::make_batch(1, i, 1000)));
      check(log.append(ops.back().get()).has_value(), "append accepted");
    }
    check((*r)->run_until([&] { return ops.back()->completions == 1; }), "completions");
    for (auto& op : ops) {
      check(op->completions == 1, "each op completes once");
      check(op->error.has_value(), "each op has an error");
      check(op->error->detail.find("write") != std::string::npos, "error names the write");
    }
    check(log.fenced(), "log fenced");
    check(log.stats().short_writes >= 1, "a short write was seen and resubmitted");
    check(log.durable_end_offset() == 1, "nothing acknowledged past the failure");
    OwnedAppend after(testing::make_batch(1, 1));
    auto a = log.append(&after);
    check(!a.has_value() && a.error().code == Errc::fenced, "later append refused as fenced");
    auto rd = log.read(0, 100, INT64_MAX);
    check(!rd.has_value() && rd.error().code == Errc::fenced, "reads refused");
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died, status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace samsa::io
