// The simulation's faults: what breaks when, and the healing after kFaultEndMs.
#include "sim.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace samsa::sim {

// ---- faults ----

void Sim::tick() {
  controller_tick();
  for (auto& b : b_)
    broker_tick(b);
  at(2, [this] { tick(); });
}

void Sim::next_fault() {
  if (!faults_on_) return;
  const auto k = rnd(100);
  Broker& b = b_[rnd(kBrokers)];
  const std::int64_t downtime = 30 + static_cast<std::int64_t>(rnd(600));
  if (k < 30) {
    if (b.up) {
      crash_broker(b);
      at(downtime, [this, &b] {
        if (!b.up) start_broker(b);
      });
    }
  } else if (k < 55) {
    if (b.up && !b.isolated) {
      b.isolated = true;
      ++g_stats.isolations;
      trace("broker %d isolated", b.id);
      at(downtime, [this, &b] {
        b.isolated = false;
        trace("broker %d healed", b.id);
      });
    }
  } else if (k < 65) {
    crash_controller();
    at(downtime, [this] {
      if (!ctl_.up) start_controller();
    });
  } else if (k < 70) {
    if (!ctl_.isolated) {
      ctl_.isolated = true;
      ++g_stats.isolations;
      trace("controller isolated");
      at(downtime, [this] { ctl_.isolated = false; });
    }
  } else if (k < 80) {
    // Two brokers lose each other (both still reach the controller and the client).
    int x = static_cast<int>(rnd(kBrokers)) + 1, y = static_cast<int>(rnd(kBrokers)) + 1;
    if (x != y) {
      std::pair<int, int> link{std::min(x, y), std::max(x, y)};
      cut_links_.insert(link);
      ++g_stats.link_cuts;
      trace("link %d-%d cut", x, y);
      at(downtime, [this, link] { cut_links_.erase(link); });
    }
  } else if (k < 80 + 7) {
    if (b.up && !b.stopping && b.broker_epoch >= 0) {
      trace("broker %d asks for a controlled shutdown", b.id);
      b.stopping = true;
      b.restart_after_ms = downtime;
    }
  } else if (k < 94) {
    // A power cut of every node at once.
    trace("power cut");
    ++g_stats.power_cuts;
    crash_controller();
    for (auto& x : b_)
      crash_broker(x);
    for (auto& x : b_)
      at(20 + static_cast<std::int64_t>(rnd(400)), [this, &x] {
        if (!x.up) start_broker(x);
      });
    at(20 + static_cast<std::int64_t>(rnd(400)), [this] {
      if (!ctl_.up) start_controller();
    });
  }
  at(50 + static_cast<std::int64_t>(rnd(250)), [this] { next_fault(); });
}

void Sim::heal() {
  faults_on_ = false;
  loss_ = 0;
  trace("faults stop, healing");
  if (!ctl_.up) start_controller();
  ctl_.isolated = false;
  cut_links_.clear();
  for (auto& b : b_) {
    b.isolated = false;
    if (!b.up) start_broker(b);
  }
}

}  // namespace samsa::sim
