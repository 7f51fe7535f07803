// The replication simulation (see replication_sim.cc for what it drives and checks): one seeded
// run of a controller, three brokers and a client. Its members are defined by section:
// network, controller, brokers and client in sim_cluster.cc, faults in sim_faults.cc,
// invariants in sim_check.cc.
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
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "io/leader_epoch.h"
#include "replication/controller_state.h"
#include "replication/replica_state.h"
#include "sim_disk.h"
#include "sim_nodes.h"

namespace samsa::sim {

constexpr int kBrokers = 3;
constexpr int kController = 0;
constexpr int kClient = 100;
constexpr std::int64_t kFaultEndMs = 3000;
constexpr std::int64_t kEndMs = 6000;

extern bool g_verbose;
// Leave out the check that every ISR member holds the committed history on disk (the precursor
// of a loss), so a broken variant has to show the loss itself: a record below some HW changed.
extern bool g_loss_only;

enum class Variant { correct, hw_leader_only, fetch_from_memory };

struct Violation {
  std::string what;
};

// Totals over the seeds run, to show the faults did happen.
struct Stats {
  std::int64_t steps = 0, acked = 0, broker_crashes = 0, isolations = 0, controller_crashes = 0,
               power_cuts = 0, link_cuts = 0, controlled_shutdowns = 0, leaderships = 0,
               truncations = 0, max_offset = 0;
};
extern Stats g_stats;

class Sim {
 public:
  Sim(std::uint64_t seed, Variant v) : seed_(seed), variant_(v), rng_(seed) {
    loss_ = static_cast<double>(rnd(6)) / 100.0;  // 0..5 % per message
    for (int i = 0; i < kBrokers; ++i)
      b_[i].id = i + 1;
  }

  std::optional<Violation> run() {
    start_controller();
    for (auto& b : b_)
      start_broker(b);
    at(1, [this] { tick(); });
    at(300, [this] { next_fault(); });
    at(5, [this] { client_produce(); });
    at(7, [this] { client_read(); });
    at(kFaultEndMs, [this] { heal(); });
    while (!q_.empty() && !failed_) {
      auto ev = q_.top();
      q_.pop();
      now_ = ev.t;
      if (now_ > kEndMs) break;
      ++steps_;
      ev.fn();
      if (!failed_) check();
    }
    if (!failed_) final_check();
    if (failed_) return violation_;
    return std::nullopt;
  }
  void add_stats() const {
    g_stats.steps += steps_;
    g_stats.acked += static_cast<std::int64_t>(acked_.size());
    g_stats.leaderships += static_cast<std::int64_t>(leaders_.size());
    for (const auto& b : b_)
      g_stats.truncations += b.log.truncations();
    g_stats.max_offset = std::max(g_stats.max_offset, committed_.size());
  }

 private:
  struct Event {
    std::int64_t t;
    std::uint64_t seq;
    std::function<void()> fn;
    bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
  };

  std::uint64_t rnd(std::uint64_t n) { return rng_() % n; }
  void at(std::int64_t delay, std::function<void()> fn) {
    q_.push(Event{now_ + delay, seq_++, std::move(fn)});
  }
  void trace(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    if (!g_verbose) return;
    std::printf("[%6" PRId64 "] ", now_);
    va_list ap;
    va_start(ap, fmt);
    std::vprintf(fmt, ap);
    va_end(ap);
    std::printf("\n");
  }
  void fail(std::string what) {
    if (failed_) return;
    failed_ = true;
    char head[128];
    std::snprintf(head, sizeof head, "step %" PRId64 " (t=%" PRId64 " ms): ", steps_, now_);
    violation_ = Violation{head + what};
  }

  // ---- network (sim_cluster.cc) ----
  bool cut(int a, int b) const { return cut_links_.contains({std::min(a, b), std::max(a, b)}); }
  bool reachable(int node) const;
  void send(int from, int to, Msg m);

  // ---- controller (sim_cluster.cc) ----
  void start_controller();
  void crash_controller();
  void propose(const std::vector<MetadataRecord>& recs);
  void answer_later(int to, Msg m);
  void controller_receive(int from, Msg m);
  void controller_tick();
  void controller_committed();
  std::optional<PartitionState> committed_partition() const;
  void publish(bool always);

  // ---- brokers (sim_cluster.cc) ----
  void start_broker(Broker& b);
  void crash_broker(Broker& b, bool clean = false);
  void broker_apply_metadata(Broker& b);
  void broker_receive(Broker& b, int from, Msg m);
  void leader_progress(Broker& b);
  void broker_tick(Broker& b);

  // ---- client (sim_cluster.cc) ----
  int client_leader() const { return client_part_ ? client_part_->leader : -1; }
  void client_receive(Msg m);
  void client_produce();
  void client_read();

  // ---- faults (sim_faults.cc) ----
  void tick();
  void next_fault();
  void heal();

  // ---- invariants (sim_check.cc) ----
  void check();
  std::string first_difference(const History& h, std::int64_t n) const;
  void final_check();

  std::uint64_t seed_;
  Variant variant_;
  std::mt19937_64 rng_;
  double loss_ = 0;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> q_;
  std::uint64_t seq_ = 0;
  std::int64_t now_ = 0;
  std::int64_t steps_ = 0;
  bool failed_ = false;
  Violation violation_;
  bool faults_on_ = true;
  std::set<std::pair<int, int>> cut_links_;
  Controller ctl_;
  Broker b_[kBrokers];
  Uuid topic_id_{};  // topic t's, once the controller created it
  bool topic_created_ = false;
  // Client
  std::int64_t client_meta_offset_ = -1;
  std::optional<PartitionState> client_part_;
  std::int64_t next_value_ = 1;
  std::optional<std::int64_t> read_in_flight_;
  std::int64_t read_id_ = 0;
  std::int64_t read_sent_ms_ = 0;
  std::int32_t consumer_epoch_ = -1;
  std::int64_t consumer_hw_ = 0;
  // Checker
  History committed_;
  std::map<std::int32_t, std::int32_t> leaders_;
  std::vector<std::pair<std::int64_t, std::int64_t>> acked_;  // offset, value
  std::size_t acked_checked_ = 0;
};

}  // namespace samsa::sim
