// Deterministic simulation of the controller quorum (issue 19): the production RaftNode
// (replication/quorum/raft.h) on 3 or 5 voters and an observer (a broker's copy of the
// metadata log), over a seeded network that delays, reorders and loses messages and can be cut
// between any two nodes, with fake disks whose syncs take time. A client proposes records to
// whichever node leads. Nodes take snapshots of what they applied and drop the log below them;
// a node that falls behind a leader's log start loads its snapshot. Faults: kill -9 (the
// written log survives, memory does not), power cuts (only synced log records and quorum
// states survive; a power cut of every node at once too), network partitions of one node or a
// minority, lossy spells; each node restarts from its disk.
//
// Invariants, checked after every step:
//  - at most one leader per epoch;
//  - a committed record is never lost or changed: every node's log agrees with the committed
//    history below its high watermark, and a newly elected leader holds the whole history;
//  - state machines apply identical prefixes (each node's applied records, snapshots included,
//    are a prefix of the committed history);
//  - liveness: once the faults stop and every node is up and connected, a leader commits a
//    record of its own epoch within a bounded simulated time, and the client's records after
//    that are committed.
//
// Usage: quorum_sim [--seeds N] [--first-seed S] [--voters 3|5|both]
//                   [--broken vote-before-sync|commit-old-epoch] [--expect-violation] [-v]
//   SAMSA_SIM_SEEDS overrides the default seed count (5000). The broken variants answer votes
//   before the quorum state is synced, or count a record of an earlier epoch as committed from
//   replicas alone (Raft's figure 8); with --expect-violation the run succeeds only if some
//   seed breaks an invariant.
#include "quorum_sim.h"

#include <chrono>
#include <cinttypes>
#include <cstdlib>

#include "base/assert.h"
#include "base/log.h"

namespace samsa::sim {

bool g_quorum_verbose = false;
QuorumTotals g_quorum_totals;

}  // namespace samsa::sim

int main(int argc, char** argv) {
  using namespace samsa::sim;
  std::uint64_t seeds = 5000, first = 1;
  if (const char* e = std::getenv("SAMSA_SIM_SEEDS")) seeds = std::strtoull(e, nullptr, 10);
  bool expect_violation = false;
  QuorumVariant variant = QuorumVariant::correct;
  std::string voters = "both";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--seeds" && i + 1 < argc) {
      seeds = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--first-seed" && i + 1 < argc) {
      first = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--voters" && i + 1 < argc) {
      voters = argv[++i];
    } else if (a == "--broken" && i + 1 < argc) {
      std::string b = argv[++i];
      if (b == "vote-before-sync") {
        variant = QuorumVariant::vote_before_sync;
      } else if (b == "commit-old-epoch") {
        variant = QuorumVariant::commit_old_epoch;
      } else {
        std::fprintf(stderr, "unknown broken variant %s\n", b.c_str());
        return 2;
      }
    } else if (a == "--expect-violation") {
      expect_violation = true;
    } else if (a == "-v") {
      g_quorum_verbose = true;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--seeds N] [--first-seed S] [--voters 3|5|both] "
                   "[--broken vote-before-sync|commit-old-epoch] [--expect-violation] [-v]\n",
                   argv[0]);
      return 2;
    }
  }
  if (!g_quorum_verbose) samsa::log::set_level(samsa::log::Level::error);
  samsa::set_assert_handler([](const char* expr, const char* file, int line, const char* why) {
    throw AssertFailed(std::string(expr) + " (" + file + ":" + std::to_string(line) + ")" +
                       (why ? std::string(": ") + why : std::string()));
  });
  const auto t0 = std::chrono::steady_clock::now();
  for (std::uint64_t s = first; s < first + seeds; ++s) {
    const int n = voters == "3" ? 3 : voters == "5" ? 5 : (s % 2 ? 3 : 5);
    QuorumSim sim(s, n, variant);
    if (auto v = sim.run()) {
      std::printf("seed %" PRIu64 " (%d voters) violates an invariant at %s\n", s, n, v->c_str());
      std::printf("(replay: %s --first-seed %" PRIu64 " --seeds 1 --voters %d%s -v)\n", argv[0], s,
                  n,
                  variant == QuorumVariant::vote_before_sync   ? " --broken vote-before-sync"
                  : variant == QuorumVariant::commit_old_epoch ? " --broken commit-old-epoch"
                                                               : "");
      return expect_violation ? 0 : 1;
    }
    sim.add_totals();
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const QuorumTotals& t = g_quorum_totals;
  std::printf("%" PRIu64 " seeds (%" PRIu64 "..%" PRIu64 "), no invariant broken, %.1f s\n", seeds,
              first, first + seeds - 1, secs);
  std::printf("  %" PRId64 " steps, %" PRId64 " elections won (%" PRId64 " epochs), %" PRId64
              " records committed, %" PRId64 " truncations, %" PRId64 " snapshots taken, %" PRId64
              " loaded from a leader\n",
              t.steps, t.leaders, t.max_epoch, t.committed, t.truncations, t.snapshots, t.installs);
  std::printf("  faults: %" PRId64 " kills, %" PRId64 " power cuts (%" PRId64
              " of every node), %" PRId64 " leaders resigned and stopped, %" PRId64
              " partitions, %" PRId64 " messages lost\n",
              t.kills, t.power_cuts, t.total_power_cuts, t.resignations, t.partitions, t.lost);
  std::printf("  after the faults: a leader committed in its epoch within %" PRId64
              " ms at most (median %" PRId64 " ms)\n",
              t.max_recovery_ms, t.median_recovery());
  if (expect_violation) {
    std::printf("expected a violation (--expect-violation) and saw none\n");
    return 1;
  }
  return 0;
}
