// The quorum simulation's faults and invariants (quorum_sim.cc lists them).
#include "quorum_sim.h"

namespace samsa::sim {

using namespace samsa::replication::quorum;

void QuorumSim::fail(std::string what) {
  if (failed_) return;
  failed_ = true;
  char head[96];
  std::snprintf(head, sizeof head, "step %" PRId64 ", t=%" PRId64 " ms: ", steps_, now_);
  violation_ = head + what;
}

// ---- faults ----

void QuorumSim::next_fault() {
  if (now_ >= kFaultEndMs - 200) return;
  at(50 + static_cast<std::int64_t>(rnd(300)), [this] { next_fault(); });
  auto restart_later = [this](NodeId id, std::int64_t lo, std::int64_t span) {
    at(lo + static_cast<std::int64_t>(rnd(static_cast<std::uint64_t>(span))), [this, id] {
      Node& n = nodes_[id - 1];
      if (!n.up) start_node(n);
    });
  };
  Node& n = nodes_[rnd(nodes_.size())];
  // The leader is the interesting victim: pick it half the time.
  Node* leader = nullptr;
  for (auto& m : nodes_)
    if (m.up && m.raft->is_leader()) leader = &m;
  Node& victim = leader && rnd(2) ? *leader : n;
  switch (rnd(10)) {
    case 0:
      stop_node(victim, false);
      restart_later(victim.id, 10, 400);
      break;
    case 1:
      stop_node(victim, true);
      restart_later(victim.id, 10, 400);
      break;
    case 2:
      if (rnd(4) == 0) {
        // Every node at once (a data-centre power cut).
        ++total_power_cuts_;
        for (auto& m : nodes_) {
          stop_node(m, true);
          restart_later(m.id, 20, 300);
        }
      }
      break;
    case 3:
    case 4: {
      // Cut one node off from every other (both ways) for a while.
      ++partitions_;
      trace("node %d is cut off", victim.id);
      for (auto& m : nodes_) {
        if (m.id == victim.id) continue;
        cut_.insert({victim.id, m.id});
        cut_.insert({m.id, victim.id});
      }
      at(100 + static_cast<std::int64_t>(rnd(900)), [this, id = victim.id] {
        trace("node %d is reconnected", id);
        std::erase_if(cut_, [id](const auto& l) { return l.first == id || l.second == id; });
      });
      break;
    }
    case 5:
      // One direction only: the node hears the others, they do not hear it.
      ++partitions_;
      for (auto& m : nodes_)
        if (m.id != victim.id) cut_.insert({victim.id, m.id});
      at(100 + static_cast<std::int64_t>(rnd(600)), [this, id = victim.id] {
        std::erase_if(cut_, [id](const auto& l) { return l.first == id; });
      });
      break;
    case 7:
      // A controlled shutdown of the leader: it resigns (EndQuorumEpoch), then stops.
      if (leader) {
        ++resignations_;
        trace("node %d resigns and stops", leader->id);
        leader->raft->resign(now_);
        after_call(*leader);
        at(20 + static_cast<std::int64_t>(rnd(50)),
           [this, id = leader->id] { stop_node(nodes_[id - 1], false); });
        restart_later(leader->id, 200, 400);
      }
      break;
    case 6:
      lossy_spell_ = true;
      at(100 + static_cast<std::int64_t>(rnd(300)), [this] { lossy_spell_ = false; });
      break;
    default:
      break;  // quiet
  }
}

void QuorumSim::heal() {
  healed_at_ = now_;
  cut_.clear();
  lossy_spell_ = false;
  for (auto& n : nodes_)
    if (!n.up) start_node(n);
  trace("healed");
}

// ---- invariants ----

void QuorumSim::on_role_change(Node& n) {
  if (n.raft->role() != Role::leader) {
    trace("node %d is %s in epoch %d (leader %d, voted %d)", n.id, role_name(n.raft->role()),
          n.raft->epoch(), n.raft->leader(), n.raft->voted_for());
    return;
  }
  const std::int32_t epoch = n.raft->epoch();
  auto [it, fresh] = leaders_.emplace(epoch, n.id);
  if (!fresh && it->second != n.id) {
    fail("two leaders in epoch " + std::to_string(epoch) + ": nodes " + std::to_string(it->second) +
         " and " + std::to_string(n.id));
    return;
  }
  trace("node %d leads epoch %d (log %" PRId64 "..%" PRId64 ")", n.id, epoch,
        n.log.log_start_offset(), n.log.log_end_offset());
  // Leader completeness: it holds every committed record (those below its log start are in
  // its snapshot, which the applied-state check covers).
  const auto size = static_cast<std::int64_t>(committed_.size());
  if (n.log.log_end_offset() < size) {
    fail("node " + std::to_string(n.id) + " leads epoch " + std::to_string(epoch) +
         " without committed records: its log ends at " + std::to_string(n.log.log_end_offset()) +
         ", " + std::to_string(size) + " committed");
    return;
  }
  for (std::int64_t o = std::max<std::int64_t>(n.log.log_start_offset(), 0); o < size; ++o) {
    if (n.log.at(o) != committed_[o]) {
      fail("node " + std::to_string(n.id) + " leads epoch " + std::to_string(epoch) +
           " with committed record " + std::to_string(o) + " changed");
      return;
    }
  }
}

void QuorumSim::check_node(Node& n) {
  if (n.raft->role() != n.last_role || n.raft->epoch() != n.last_role_epoch) {
    n.last_role = n.raft->role();
    n.last_role_epoch = n.raft->epoch();
    on_role_change(n);
    if (failed_) return;
  }
  // A leader's HW extends the committed history; so does the HW a leader reached in the step
  // in which it resigned (it resigns in the same tick that may have moved its HW).
  const std::int64_t hw = n.raft->high_watermark();
  const bool led =
      n.raft->is_leader() || (n.raft->role() == replication::quorum::Role::resigned &&
                              n.raft->leader() == n.id && n.led_epoch == n.raft->epoch());
  if (n.raft->is_leader()) n.led_epoch = n.raft->epoch();
  if (led) {
    for (auto o = static_cast<std::int64_t>(committed_.size()); o < hw; ++o) {
      if (o < n.log.log_start_offset()) {
        fail("leader " + std::to_string(n.id) + " committed " + std::to_string(o) +
             " below its log start");
        return;
      }
      committed_.push_back(n.log.at(o));
    }
    if (healed_at_ >= 0 && recovered_at_ < 0 && hw > n.raft->epoch_start_offset()) {
      bool all_up = true;
      for (auto& m : nodes_)
        all_up &= m.up;
      if (all_up) {
        recovered_at_ = now_;
        first_value_after_recovery_ = next_value_;
        trace("recovered: node %d commits %" PRId64 " in epoch %d; client values from %" PRId64
              " on must commit",
              n.id, hw, n.raft->epoch(), next_value_);
      }
    }
  }
  // Every node agrees with the history below its HW (checked once per offset while its log
  // does not change there).
  if (n.log.truncations() != n.log_truncations) {
    n.log_truncations = n.log.truncations();
    n.verified = std::min(n.verified, n.log.log_end_offset());
  }
  n.verified = std::max(n.verified, n.log.log_start_offset());
  const std::int64_t upto = std::min(hw, n.log.log_end_offset());
  for (; n.verified < upto; ++n.verified) {
    if (n.verified >= static_cast<std::int64_t>(committed_.size())) {
      fail("node " + std::to_string(n.id) + " holds offset " + std::to_string(n.verified) +
           " as committed (HW " + std::to_string(hw) + ") beyond the committed history (" +
           std::to_string(committed_.size()) + ")");
      return;
    }
    if (n.log.at(n.verified) != committed_[static_cast<std::size_t>(n.verified)]) {
      fail("node " + std::to_string(n.id) + " holds committed offset " +
           std::to_string(n.verified) + " changed (epoch " +
           std::to_string(n.log.at(n.verified).epoch) + " value " +
           std::to_string(n.log.at(n.verified).value) + ", committed epoch " +
           std::to_string(committed_[n.verified].epoch) + " value " +
           std::to_string(committed_[n.verified].value) + ")");
      return;
    }
  }
  // The state machine applied a prefix of the history.
  if (n.applied.size() < n.applied_verified) n.applied_verified = 0;
  for (; n.applied_verified < n.applied.size(); ++n.applied_verified) {
    const std::size_t o = n.applied_verified;
    if (o >= committed_.size() || n.applied[o] != committed_[o]) {
      fail("node " + std::to_string(n.id) + " applied offset " + std::to_string(o) +
           " that is not the committed record");
      return;
    }
  }
}

void QuorumSim::check() {
  for (auto& n : nodes_) {
    if (!n.up || !n.raft) continue;
    check_node(n);
    if (failed_) return;
  }
}

void QuorumSim::final_check() {
  if (recovered_at_ < 0) {
    fail("no leader committed in its epoch after the heal at " + std::to_string(healed_at_) +
         " ms");
    return;
  }
  if (recovered_at_ - healed_at_ > kRecoveryBoundMs) {
    fail("a leader committed in its epoch only " + std::to_string(recovered_at_ - healed_at_) +
         " ms after the heal");
    return;
  }
  bool later_committed = false;
  for (const QRec& r : committed_)
    later_committed |= r.value >= first_value_after_recovery_;
  if (!later_committed)
    fail("no client record proposed after the recovery was committed by the end");
}

}  // namespace samsa::sim
