// Deterministic simulation of replication: the production state machines (ReplicaState on
// every broker, ControllerState on the controller) driven over a seeded fake network (loss,
// delays that reorder, isolation) and fake disks (a crash loses what was not synced), with one
// controller, three brokers, a partition with RF=3 and min.insync.replicas=2, a client
// producing with acks=all and a consumer reading up to the high watermark. Faults: broker
// crashes and restarts, isolations, controller crashes, power cuts of every node at once.
//
// Invariants, checked after every step (every event the simulation processes):
//  - at most one broker leads each leader epoch;
//  - no offset below any replica's high watermark is ever lost or changed: every replica's log
//    below its HW equals the committed history, and every member of the controller's committed
//    ISR holds on disk (synced) the committed history up to the highest HW any replica reached;
//  - acknowledged acks=all records are part of that history (so they are never lost);
//  - a follower whose truncation is done holds a prefix of its leader's log;
//  - the consumer never sees the high watermark go back, nor a record that later changes.
// After the faults stop, the cluster must heal: a leader serving every acknowledged record.
//
// Usage: replication_sim [--seeds N] [--first-seed S] [--broken-hw] [--expect-violation] [-v]
//   SAMSA_SIM_SEEDS overrides the default seed count (2000). --broken-hw advances the HW on the
//   leader alone (ReplicaOptions::testing_hw_leader_only); with --expect-violation the run
//   succeeds only if some seed breaks an invariant (the test's teeth). A failure prints its seed;
//   `--first-seed S --seeds 1 -v` replays it with a trace.
//
// This file holds the options and the loop over seeds; the simulation is the Sim class of
// sim.h, defined in sim_cluster.cc, sim_faults.cc and sim_check.cc.
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/log.h"
#include "sim.h"

using namespace samsa::sim;

namespace samsa::sim {

bool g_verbose = false;
bool g_loss_only = false;
Stats g_stats;

}  // namespace samsa::sim

int main(int argc, char** argv) {
  std::uint64_t seeds = 2000, first = 1;
  if (const char* e = std::getenv("SAMSA_SIM_SEEDS")) seeds = std::strtoull(e, nullptr, 10);
  Variant variant = Variant::correct;
  bool expect_violation = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--seeds" && i + 1 < argc) {
      seeds = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--first-seed" && i + 1 < argc) {
      first = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--broken-hw") {
      variant = Variant::hw_leader_only;
    } else if (a == "--memory-acks") {
      variant = Variant::fetch_from_memory;
    } else if (a == "--loss-only") {
      g_loss_only = true;
    } else if (a == "--expect-violation") {
      expect_violation = true;
    } else if (a == "-v") {
      g_verbose = true;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--seeds N] [--first-seed S] [--broken-hw | --memory-acks] "
                   "[--loss-only] [--expect-violation] [-v]\n",
                   argv[0]);
      return 2;
    }
  }
  std::string flags;
  if (variant == Variant::hw_leader_only) flags += " --broken-hw";
  if (variant == Variant::fetch_from_memory) flags += " --memory-acks";
  if (g_loss_only) flags += " --loss-only";
  // The epoch cache logs each empty epoch it replaces; thousands of elections make that noise.
  if (!g_verbose) samsa::log::set_level(samsa::log::Level::error);
  const auto t0 = std::chrono::steady_clock::now();
  for (std::uint64_t s = first; s < first + seeds; ++s) {
    Sim sim(s, variant);
    auto v = sim.run();
    sim.add_stats();
    if (v) {
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("seed %" PRIu64 " violates an invariant at %s\n", s, v->what.c_str());
      std::printf("(%" PRIu64 " seeds run in %.1f s; replay: %s --first-seed %" PRIu64
                  " --seeds 1%s -v)\n",
                  s - first + 1, secs, argv[0], s, flags.c_str());
      return expect_violation ? 0 : 1;
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const Stats& st = g_stats;
  std::printf("%" PRIu64 " seeds (%" PRIu64 "..%" PRIu64 "), no invariant broken, %.1f s\n", seeds,
              first, first + seeds - 1, secs);
  std::printf("  %" PRId64 " steps checked, %" PRId64
              " acks=all records acknowledged (longest log %" PRId64 "), %" PRId64
              " leaderships, %" PRId64 " truncations\n",
              st.steps, st.acked, st.max_offset, st.leaderships, st.truncations);
  std::printf("  faults: %" PRId64 " broker crashes, %" PRId64 " isolations, %" PRId64
              " controller crashes, %" PRId64 " broker-to-broker link cuts, %" PRId64
              " controlled shutdowns, %" PRId64 " power cuts of every node\n",
              st.broker_crashes, st.isolations, st.controller_crashes, st.link_cuts,
              st.controlled_shutdowns, st.power_cuts);
  if (expect_violation) {
    std::printf("expected a violation (--expect-violation) and saw none\n");
    return 1;
  }
  return 0;
}
