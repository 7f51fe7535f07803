// The quorum simulation (quorum_sim.cc says what it drives and checks): one seeded run. Its
// members are defined by section: nodes and network in quorum_sim_nodes.cc, faults and
// invariants in quorum_sim_check.cc.
#pragma once

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "quorum_disk.h"
#include "replication/quorum/raft.h"

namespace samsa::sim {

extern bool g_quorum_verbose;

// A product assertion (SAMSA_ASSERT) failed inside a node: the seed reports it as a violation.
struct AssertFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class QuorumVariant { correct, vote_before_sync, commit_old_epoch };

struct QuorumTotals {
  std::int64_t steps = 0, leaders = 0, max_epoch = 0, committed = 0, truncations = 0, snapshots = 0,
               installs = 0, kills = 0, power_cuts = 0, total_power_cuts = 0, partitions = 0,
               lost = 0, max_recovery_ms = 0, resignations = 0;
  std::vector<std::int64_t> recovery_ms;
  std::int64_t median_recovery() const {
    if (recovery_ms.empty()) return 0;
    auto v = recovery_ms;
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  }
};
extern QuorumTotals g_quorum_totals;

// Timeouts of the simulated quorum (ms of simulated time): Kafka's defaults scaled down 5x, so
// a run of a few seconds sees many elections.
constexpr std::int64_t kElectionTimeoutMs = 200;
constexpr std::int64_t kFetchTimeoutMs = 400;
constexpr std::int64_t kBackoffMaxMs = 200;
constexpr std::int64_t kFaultEndMs = 4000;
constexpr std::int64_t kEndMs = 7000;
// Liveness: after the heal, a leader commits in its own epoch within this long.
constexpr std::int64_t kRecoveryBoundMs = 2500;

class QuorumSim {
 public:
  QuorumSim(std::uint64_t seed, int voters, QuorumVariant v);
  std::optional<std::string> run();
  void add_totals() const;

 private:
  using NodeId = quorum::NodeId;
  struct Node {
    NodeId id = 0;
    bool voter = true;
    bool up = true;
    std::uint64_t incarnation = 0;  // messages to an earlier incarnation are dropped
    QuorumLog log;
    std::unique_ptr<SimSnapshots> snaps;
    std::unique_ptr<quorum::RaftNode> raft;
    // The quorum-state file: what was written, and what a power cut leaves.
    quorum::QuorumState written, durable;
    std::vector<QRec> applied;  // the state machine: committed records applied in order
    // What the invariants have checked: log offsets below `verified` agree with the history
    // (redone from the first changed offset after a truncation), and applied records below
    // applied_verified.
    std::int64_t verified = 0;
    std::int64_t log_truncations = 0;
    std::size_t applied_verified = 0;
    std::int64_t installs_seen = 0;
    std::uint64_t tick_gen = 0;
    std::int64_t next_tick = INT64_MAX;
    quorum::Role last_role = quorum::Role::unattached;
    std::int32_t last_role_epoch = -1;
    std::int32_t led_epoch = -1;  // the epoch this incarnation was last seen leading
    // Fetches the leader holds (long poll) until its log or HW moves.
    struct Parked {
      NodeId from;
      std::uint64_t from_inc;
      std::int64_t id;
      quorum::FetchRequest req;
      std::int64_t deadline;
      std::int64_t hw_seen;
    };
    std::vector<Parked> parked;
  };
  struct Event {
    std::int64_t t;
    std::uint64_t seq;
    std::function<void()> fn;
    bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
  };

  // ---- quorum_sim_nodes.cc: nodes, disks and the network ----
  std::uint64_t rnd(std::uint64_t n) { return n ? rng_() % n : 0; }
  void at(std::int64_t delay, std::function<void()> fn) {
    q_.push(Event{now_ + delay, seq_++, std::move(fn)});
  }
  void trace(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  void start_node(Node& n);
  void stop_node(Node& n, bool power_cut);
  void after_call(Node& n);
  void schedule_tick(Node& n);
  void schedule_sync(Node& n);
  bool link_ok(NodeId a, NodeId b) const;
  void deliver(NodeId from, NodeId to, std::function<void(Node&)> fn, bool is_request,
               std::function<void()> on_reset);
  std::function<void()> request_failed(NodeId from, std::uint64_t inc, std::int64_t id, NodeId to);
  void send_request(Node& n, const quorum::Outgoing& o);
  void serve_request(Node& n, NodeId from, std::uint64_t from_inc, std::int64_t id,
                     const quorum::Request& r);
  void answer_fetch(Node& n, NodeId from, std::uint64_t from_inc, std::int64_t id,
                    const quorum::FetchRequest& req, bool parked_already);
  void wake_parked(Node& n, bool expired_only = false);
  template <class Resp, class Fn>
  void respond(Node& n, NodeId to, std::uint64_t to_inc, std::int64_t id, Resp resp, Fn apply);
  void apply_committed(Node& n);
  void maybe_snapshot(Node& n);
  void client_propose();

  // ---- quorum_sim_check.cc: faults and invariants ----
  void next_fault();
  void heal();
  void check();
  void check_node(Node& n);
  void on_role_change(Node& n);
  void final_check();
  void fail(std::string what);

  std::uint64_t seed_;
  QuorumVariant variant_;
  std::mt19937_64 rng_;
  std::int64_t now_ = 0;
  std::uint64_t seq_ = 0;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> q_;
  std::vector<Node> nodes_;  // voters 1..n, then the observer
  int voters_ = 3;
  double loss_ = 0;
  std::set<std::pair<NodeId, NodeId>> cut_;  // directed links that drop everything
  bool lossy_spell_ = false;
  bool failed_ = false;
  std::string violation_;
  std::int64_t steps_ = 0;
  std::int64_t next_value_ = 1;
  std::int64_t lost_ = 0;

  // What the invariants compare against.
  std::vector<QRec> committed_;             // the committed history, as leaders' HWs reveal it
  std::map<std::int32_t, NodeId> leaders_;  // epoch -> the node that led it
  std::int64_t healed_at_ = -1;
  std::int64_t recovered_at_ = -1;  // a leader committed in its epoch after the heal
  std::int64_t first_value_after_recovery_ = -1;
  std::int64_t kills_ = 0, power_cuts_ = 0, total_power_cuts_ = 0, partitions_ = 0, snapshots_ = 0,
               resignations_ = 0;
};

}  // namespace samsa::sim
