// SyncGroup, Heartbeat and LeaveGroup.

#include "coordinator/coordinator_impl.h"

#include "base/log.h"

namespace samsa::coordinator {

// ---------------------------------------------------------------------------------------------
// SyncGroup, Heartbeat, LeaveGroup

void GroupCoordinator::sync_group(SyncRequest req, Done<SyncResult> done) {
  auto fail = [&](ErrorCode e) {
    SyncResult r;
    r.error = e;
    done(std::move(r));
  };
  if (req.group_id.empty()) return fail(ErrorCode::invalid_group_id);
  if (auto e = check_group_id(req.group_id); e != ErrorCode::none) {
    // A loading coordinator has lost the rebalance in progress: the member must rejoin, which
    // REBALANCE_IN_PROGRESS tells every client version.
    return fail(e == ErrorCode::coordinator_load_in_progress ? ErrorCode::rebalance_in_progress
                                                             : e);
  }
  Group* g = find_group(req.group_id);
  if (!g) return fail(ErrorCode::unknown_member_id);
  if (g->state == GroupState::dead) return fail(ErrorCode::coordinator_not_available);
  if (auto e = validate_member(*g, req.member_id, req.group_instance_id); e != ErrorCode::none)
    return fail(e);
  if (req.generation != g->generation) return fail(ErrorCode::illegal_generation);
  if ((req.protocol_type && !g->protocol_type.empty() && *req.protocol_type != g->protocol_type) ||
      (req.protocol_name && g->protocol && *req.protocol_name != *g->protocol))
    return fail(ErrorCode::inconsistent_group_protocol);
  Member& m = *g->member(req.member_id);
  switch (g->state) {
    case GroupState::empty:
    case GroupState::dead:
      return fail(ErrorCode::unknown_member_id);
    case GroupState::preparing_rebalance:
      return fail(ErrorCode::rebalance_in_progress);
    case GroupState::stable: {
      g->pending_sync.erase(m.id);
      touch_member(m, m.session_timeout_ms);
      SyncResult r;
      if (!g->protocol_type.empty()) r.protocol_type = g->protocol_type;
      r.protocol_name = g->protocol;
      r.assignment = m.assignment;
      done(std::move(r));
      return;
    }
    case GroupState::completing_rebalance:
      break;
  }
  if (m.awaiting_sync) {
    SyncResult r;
    r.error = ErrorCode::rebalance_in_progress;
    std::exchange(m.awaiting_sync, nullptr)(std::move(r));
  }
  m.awaiting_sync = std::move(done);
  g->pending_sync.erase(m.id);
  touch_member(m, m.session_timeout_ms);
  if (!g->is_leader(m.id)) return;

  std::map<std::string, Bytes> assignments;
  for (auto& [id, bytes] : req.assignments)
    if (g->member(id)) assignments[id] = std::move(bytes);
  for (auto& [id, mm] : g->members) {
    if (!assignments.count(id)) {
      LOG_WARN("group %s: the leader assigned nothing to member %s", g->id.c_str(), id.c_str());
      assignments[id] = {};
    }
  }
  GroupValue v = group_value(*g);
  for (auto& mv : v.members)
    mv.assignment = assignments[mv.member_id];
  const std::string group_id = g->id;
  const std::uint64_t inc = g->incarnation;
  const std::int32_t generation = g->generation;
  store_records(g->partition, {{encode_key(GroupKey{g->id}), encode_value(v)}},
                [this, group_id, inc, generation,
                 assignments = std::move(assignments)](std::optional<io::Error> err) mutable {
                  Group* g = find_group(group_id);
                  if (!g || g->incarnation != inc) return;
                  complete_sync(*g, generation, std::move(assignments), std::move(err));
                });
}

void GroupCoordinator::complete_sync(Group& g, std::int32_t generation,
                                     std::map<std::string, Bytes> assignments,
                                     std::optional<io::Error> err) {
  // Members may have come or gone while the write was in flight; then a new rebalance has
  // already answered everyone waiting.
  if (g.state != GroupState::completing_rebalance || g.generation != generation) return;
  if (err) {
    LOG_WARN("group %s: storing the assignment of generation %d failed: %s", g.id.c_str(),
             generation, err->detail.c_str());
    reset_and_propagate_sync_error(g, store_error(*err));
    maybe_prepare_rebalance(g, "storing the assignment failed");
    return;
  }
  std::vector<std::pair<Done<SyncResult>, SyncResult>> answers;
  for (auto& [id, m] : g.members) {
    m->assignment = std::move(assignments[id]);
    if (m->awaiting_sync) {
      SyncResult r;
      if (!g.protocol_type.empty()) r.protocol_type = g.protocol_type;
      r.protocol_name = g.protocol;
      r.assignment = m->assignment;
      answers.emplace_back(std::exchange(m->awaiting_sync, nullptr), std::move(r));
      touch_member(*m, m->session_timeout_ms);
    }
  }
  g.transition(GroupState::stable);
  LOG_INFO("group %s: generation %d is stable", g.id.c_str(), generation);
  for (auto& [cb, r] : answers)
    cb(std::move(r));
}

void GroupCoordinator::heartbeat(HeartbeatRequest req, Done<ErrorCode> done) {
  if (req.group_id.empty()) return done(ErrorCode::invalid_group_id);
  if (auto e = check_group_id(req.group_id); e != ErrorCode::none) {
    // While loading, the group's state is unknown; answering "fine" keeps members from
    // rejoining needlessly (they learn of a rebalance at their next heartbeat).
    return done(e == ErrorCode::coordinator_load_in_progress ? ErrorCode::none : e);
  }
  Group* g = find_group(req.group_id);
  if (!g) return done(ErrorCode::unknown_member_id);
  if (g->state == GroupState::dead) return done(ErrorCode::coordinator_not_available);
  if (auto e = validate_member(*g, req.member_id, req.group_instance_id); e != ErrorCode::none)
    return done(e);
  if (req.generation != g->generation) return done(ErrorCode::illegal_generation);
  Member& m = *g->member(req.member_id);
  switch (g->state) {
    case GroupState::empty:
    case GroupState::dead:
      return done(ErrorCode::unknown_member_id);
    case GroupState::preparing_rebalance:
      touch_member(m, m.session_timeout_ms);
      return done(ErrorCode::rebalance_in_progress);
    case GroupState::completing_rebalance:
    case GroupState::stable:
      touch_member(m, m.session_timeout_ms);
      return done(ErrorCode::none);
  }
}

void GroupCoordinator::leave_group(LeaveRequest req, Done<LeaveResult> done) {
  LeaveResult res;
  if (req.group_id.empty()) {
    res.error = ErrorCode::invalid_group_id;
    return done(std::move(res));
  }
  if (auto e = check_group_id(req.group_id); e != ErrorCode::none) {
    res.error = e;
    return done(std::move(res));
  }
  Group* g = find_group(req.group_id);
  if (g && g->state == GroupState::dead) {
    res.error = ErrorCode::coordinator_not_available;
    return done(std::move(res));
  }
  for (auto& lm : req.members) {
    LeaveMemberResult r{lm.member_id, lm.group_instance_id, ErrorCode::none};
    const std::string why = lm.reason ? "left the group: " + *lm.reason : "left the group";
    if (!g) {
      r.error = ErrorCode::unknown_member_id;
    } else if (lm.member_id.empty()) {
      // An administrative removal names the static member by instance id only.
      auto it = lm.group_instance_id ? g->static_members.find(*lm.group_instance_id)
                                     : g->static_members.end();
      if (it == g->static_members.end()) {
        r.error = ErrorCode::unknown_member_id;
      } else {
        remove_member(*g, *g->member(it->second), why.c_str());
      }
    } else if (g->pending.count(lm.member_id)) {
      remove_pending_member(*g, lm.member_id);
    } else if (auto e = validate_member(*g, lm.member_id, lm.group_instance_id);
               e != ErrorCode::none) {
      r.error = e;
    } else {
      remove_member(*g, *g->member(lm.member_id), why.c_str());
    }
    res.members.push_back(std::move(r));
  }
  done(std::move(res));
}

}  // namespace samsa::coordinator
