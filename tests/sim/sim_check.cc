// The simulation's invariants, checked after every step, and the final check after healing.
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

// ---- invariants ----

void Sim::check() {
  // At most one leader per epoch.
  for (auto& b : b_) {
    if (!b.up || b.rs->role() != ReplicaRole::leader) continue;
    auto [it, fresh] = leaders_.emplace(b.rs->leader_epoch(), b.id);
    if (!fresh && it->second != b.id) {
      fail("brokers " + std::to_string(it->second) + " and " + std::to_string(b.id) +
           " both led epoch " + std::to_string(b.rs->leader_epoch()));
      return;
    }
  }
  // Logs below each replica's HW equal the committed history (which they extend).
  for (auto& b : b_) {
    const auto low = b.log.take_low();
    b.verified = std::min(b.verified, low);
    b.durable_verified = std::min(b.durable_verified, low);
    if (!b.up) continue;
    const auto& h = b.log.history();
    const std::int64_t hw = b.rs->high_watermark();
    if (hw > h.size()) {
      fail("broker " + std::to_string(b.id) + " has HW " + std::to_string(hw) +
           " above its log end " + std::to_string(h.size()));
      return;
    }
    if (hw <= b.verified) continue;
    for (std::int64_t o = committed_.size(); o < hw; ++o)
      committed_.push(h.recs[static_cast<std::size_t>(o)]);
    if (h.ph[static_cast<std::size_t>(hw)] != committed_.ph[static_cast<std::size_t>(hw)]) {
      fail("broker " + std::to_string(b.id) + ": records below its HW " + std::to_string(hw) +
           " differ from the committed history (lost or changed): " + first_difference(h, hw));
      return;
    }
    b.verified = hw;
  }
  // Every member of the committed ISR holds the committed history on disk.
  if (auto p = committed_partition(); p && !g_loss_only) {
    const std::int64_t n = committed_.size();
    for (std::int32_t id : p->isr) {
      Broker& b = b_[id - 1];
      if (b.durable_verified >= n) continue;
      const auto& h = b.log.history();
      if (b.log.durable_end_offset() < n ||
          h.ph[static_cast<std::size_t>(n)] != committed_.ph[static_cast<std::size_t>(n)]) {
        fail("ISR member " + std::to_string(id) + " (leader epoch " +
             std::to_string(p->leader_epoch) + ") lacks committed offsets below " +
             std::to_string(n) + " on disk (durable end " +
             std::to_string(b.log.durable_end_offset()) + "): a leader elected now loses them");
        return;
      }
      b.durable_verified = n;
    }
  }
  // Acknowledged records are committed.
  for (; acked_checked_ < acked_.size(); ++acked_checked_) {
    const auto& a = acked_[acked_checked_];
    if (a.first >= committed_.size() ||
        committed_.recs[static_cast<std::size_t>(a.first)].value != a.second) {
      fail("acknowledged record " + std::to_string(a.second) + " at offset " +
           std::to_string(a.first) + " is not in the committed history");
      return;
    }
  }
  // A follower done truncating holds a prefix of its leader's log.
  for (auto& f : b_) {
    if (!f.up || f.rs->role() != ReplicaRole::follower || !f.rs->truncation_done()) continue;
    Broker& l = b_[f.rs->leader_id() - 1];
    if (!l.up || l.rs->role() != ReplicaRole::leader ||
        l.rs->leader_epoch() != f.rs->leader_epoch())
      continue;
    const auto& fh = f.log.history();
    const auto& lh = l.log.history();
    if (fh.size() > lh.size() ||
        fh.ph[static_cast<std::size_t>(fh.size())] != lh.ph[static_cast<std::size_t>(fh.size())]) {
      fail("follower " + std::to_string(f.id) + " (log end " + std::to_string(fh.size()) +
           ") is not a prefix of leader " + std::to_string(l.id) + " (log end " +
           std::to_string(lh.size()) + ") after truncation");
      return;
    }
  }
}

// Where a log first departs from the committed history (only when reporting a failure).
std::string Sim::first_difference(const History& h, std::int64_t n) const {
  for (std::int64_t o = 0; o < n; ++o) {
    const Rec& got = h.recs[static_cast<std::size_t>(o)];
    const Rec& want = committed_.recs[static_cast<std::size_t>(o)];
    if (got.epoch == want.epoch && got.value == want.value) continue;
    bool acked = false;
    for (const auto& a : acked_)
      acked = acked || (a.first == o && a.second == want.value);
    return "offset " + std::to_string(o) + " held record " + std::to_string(want.value) +
           " (epoch " + std::to_string(want.epoch) + (acked ? ", acknowledged" : "") +
           "), now record " + std::to_string(got.value) + " (epoch " + std::to_string(got.epoch) +
           ")";
  }
  return "no difference found";
}

void Sim::final_check() {
  // Healed: some leader must serve every acknowledged record below its visible HW.
  for (auto& b : b_) {
    if (!b.up || b.rs->role() != ReplicaRole::leader) continue;
    auto vis = b.rs->visible_high_watermark();
    std::int64_t need = 0;
    for (const auto& a : acked_)
      need = std::max(need, a.first + 1);
    if (vis && *vis >= need &&
        b.log.history().ph[static_cast<std::size_t>(need)] ==
            committed_.ph[static_cast<std::size_t>(need)])
      return;
  }
  std::string state;
  for (auto& b : b_) {
    state += " broker " + std::to_string(b.id) + (b.up ? "" : " down") + " role " +
             std::to_string(b.up ? static_cast<int>(b.rs->role()) : -1) + " epoch " +
             std::to_string(b.up ? b.rs->leader_epoch() : -1) + " hw " +
             std::to_string(b.up ? b.rs->high_watermark() : -1) + " end " +
             std::to_string(b.log.log_end_offset()) + ";";
  }
  if (auto p = committed_partition())
    state += " metadata leader " + std::to_string(p->leader) + " epoch " +
             std::to_string(p->leader_epoch) + " isr size " + std::to_string(p->isr.size());
  fail("no leader serves every acknowledged record after healing:" + state);
}

}  // namespace samsa::sim
