// JoinGroup and the rebalance it drives: new, known and static members, the initial delay, the
// join and sync timeouts, and removing members.

#include "coordinator/coordinator_impl.h"

#include <cstdio>
#include <random>

#include "base/log.h"

namespace samsa::coordinator {

namespace {

std::string random_uuid() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uint64_t a = rng(), b = rng();
  a = (a & ~0xF000ull) | 0x4000ull;                         // version 4
  b = (b & 0x3FFFFFFFFFFFFFFFull) | 0x8000000000000000ull;  // IETF variant
  char buf[37];
  std::snprintf(buf, sizeof buf, "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xFFFF), static_cast<unsigned>(a & 0xFFFF),
                static_cast<unsigned>(b >> 48),
                static_cast<unsigned long long>(b & 0xFFFFFFFFFFFFull));
  return buf;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// JoinGroup

void GroupCoordinator::join_group(JoinRequest req, Done<JoinResult> done) {
  auto fail = [&](ErrorCode e) {
    JoinResult r;
    r.error = e;
    r.member_id = req.member_id;
    done(std::move(r));
  };
  if (req.group_id.empty()) return fail(ErrorCode::invalid_group_id);
  if (auto e = check_group_id(req.group_id); e != ErrorCode::none) return fail(e);
  if (req.session_timeout_ms < opts_.min_session_timeout_ms ||
      req.session_timeout_ms > opts_.max_session_timeout_ms)
    return fail(ErrorCode::invalid_session_timeout);
  if (req.rebalance_timeout_ms <= 0) req.rebalance_timeout_ms = req.session_timeout_ms;

  Group* g = find_group(req.group_id);
  const bool new_group = g == nullptr;
  if (!g) {
    // Only a member without an id may create a group.
    if (!req.member_id.empty()) return fail(ErrorCode::unknown_member_id);
    g = create_group(req.group_id);
  }
  if (g->state == GroupState::dead) return fail(ErrorCode::coordinator_not_available);
  if (!supports_protocols(*g, req.protocol_type, req.protocols)) {
    if (new_group) erase_group(g);
    return fail(ErrorCode::inconsistent_group_protocol);
  }
  if (req.member_id.empty()) {
    join_new_member(*g, req, done);
  } else {
    join_known_member(*g, req, done);
  }
}

void GroupCoordinator::join_new_member(Group& g, JoinRequest& req, Done<JoinResult>& done) {
  const std::string id =
      (req.group_instance_id ? *req.group_instance_id : req.client_id) + "-" + random_uuid();
  if (req.group_instance_id) {
    auto it = g.static_members.find(*req.group_instance_id);
    if (it != g.static_members.end()) {
      if (Member* old = g.member(it->second)) {
        req.member_id = id;
        join_static_replacement(g, *old, req, done);
        return;
      }
    }
    add_member(g, req, id, std::move(done));
    maybe_prepare_rebalance(g, "static member " + id + " joined");
    try_complete_join(g);
    return;
  }
  if (req.require_known_member_id) {
    auto p = std::make_unique<PendingMember>();
    p->timer.pending = p.get();
    p->timer.fn = &on_pending_expired;
    p->coordinator = this;
    p->group = &g;
    p->id = id;
    reactor_.arm(&p->timer, mono_ns() + std::int64_t{req.session_timeout_ms} * 1'000'000);
    g.pending.emplace(id, std::move(p));
    JoinResult r;
    r.error = ErrorCode::member_id_required;
    r.member_id = id;
    done(std::move(r));
    return;
  }
  add_member(g, req, id, std::move(done));
  maybe_prepare_rebalance(g, "member " + id + " joined");
  try_complete_join(g);
}

void GroupCoordinator::join_known_member(Group& g, JoinRequest& req, Done<JoinResult>& done) {
  auto fail = [&](ErrorCode e) {
    JoinResult r;
    r.error = e;
    r.member_id = req.member_id;
    done(std::move(r));
  };
  if (auto it = g.pending.find(req.member_id); it != g.pending.end()) {
    reactor_.disarm(&it->second->timer);
    g.pending.erase(it);
    add_member(g, req, req.member_id, std::move(done));
    maybe_prepare_rebalance(g, "member " + req.member_id + " joined");
    try_complete_join(g);
    return;
  }
  if (auto e = validate_member(g, req.member_id, req.group_instance_id); e != ErrorCode::none)
    return fail(e);
  Member& m = *g.member(req.member_id);
  const bool same = m.protocols == req.protocols;
  switch (g.state) {
    case GroupState::preparing_rebalance:
      update_member(g, m, req, std::move(done));
      try_complete_join(g);
      return;
    case GroupState::completing_rebalance:
      if (same) {
        // It missed the answer to its JoinGroup: the current generation, again.
        done(join_result(g, m, g.is_leader(m.id)));
        return;
      }
      update_member(g, m, req, std::move(done));
      maybe_prepare_rebalance(g, "member " + m.id + " rejoined with new metadata");
      try_complete_join(g);
      return;
    case GroupState::stable:
      // The leader rejoining forces a rebalance: it may have seen changes the member metadata
      // does not show (new partitions of a subscribed topic).
      if (g.is_leader(m.id) || !same) {
        update_member(g, m, req, std::move(done));
        maybe_prepare_rebalance(g, "member " + m.id + " rejoined");
        try_complete_join(g);
        return;
      }
      touch_member(m, m.session_timeout_ms);
      done(join_result(g, m, false));
      return;
    case GroupState::empty:
    case GroupState::dead:
      return fail(ErrorCode::unknown_member_id);
  }
}

// A static member (known group.instance.id) joins under a new member id: it takes over the old
// member's place, and the old id is fenced.
void GroupCoordinator::finish_static_swap(const StaticSwap& s, Done<JoinResult> cb,
                                          const std::optional<io::Error>& err) {
  Group* g = find_group(s.group_id);
  Member* m = g && g->incarnation == s.incarnation ? g->member(s.new_id) : nullptr;
  if (!m) {
    JoinResult r;
    r.error = ErrorCode::unknown_member_id;
    r.member_id = s.new_id;
    cb(std::move(r));
    return;
  }
  if (err) {
    // Undo: the old id stays the member's, as the log still says.
    m->protocols = s.old_protocols;
    m->rebalance_timeout_ms = s.old_rebalance;
    m->session_timeout_ms = s.old_session;
    auto node = g->members.extract(s.new_id);
    node.mapped()->id = s.old_id;
    node.key() = s.old_id;
    g->members.insert(std::move(node));
    if (g->is_leader(s.new_id)) g->leader = s.old_id;
    g->static_members[s.instance] = s.old_id;
    if (g->pending_sync.erase(s.new_id)) g->pending_sync.insert(s.old_id);
    JoinResult r;
    r.error = store_error(*err);
    r.member_id = s.new_id;
    r.generation = g->generation;
    cb(std::move(r));
    return;
  }
  const bool leader = g->is_leader(s.new_id);
  JoinResult r = join_result(*g, *m, leader && s.skip);
  r.skip_assignment = leader && s.skip;
  // Older clients are told the previous leader id, so a rejoining leader acts as a follower and
  // keeps the current assignment.
  if (!s.skip) r.leader = s.old_leader.value_or("");
  cb(std::move(r));
}

void GroupCoordinator::join_static_replacement(Group& g, Member& old, JoinRequest& req,
                                               Done<JoinResult>& done) {
  const std::string old_id = old.id;
  const std::string new_id = req.member_id;
  LOG_INFO("group %s: static member %s rejoined as %s (was %s)", g.id.c_str(),
           req.group_instance_id->c_str(), new_id.c_str(), old_id.c_str());
  const std::optional<std::string> old_leader = g.leader;
  std::vector<std::pair<Done<JoinResult>, JoinResult>> joins;
  if (old.awaiting_join) {
    JoinResult r;
    r.error = ErrorCode::fenced_instance_id;
    r.member_id = old_id;
    joins.emplace_back(std::exchange(old.awaiting_join, nullptr), std::move(r));
  }
  Done<SyncResult> old_sync = std::exchange(old.awaiting_sync, nullptr);

  auto node = g.members.extract(old_id);
  std::unique_ptr<Member> m = std::move(node.mapped());
  m->id = new_id;
  g.members.emplace(new_id, std::move(m));
  Member& nm = *g.member(new_id);
  if (g.is_leader(old_id)) g.leader = new_id;
  g.static_members[*req.group_instance_id] = new_id;
  if (g.pending_sync.erase(old_id)) g.pending_sync.insert(new_id);

  const auto old_protocols = nm.protocols;
  const auto old_rebalance = nm.rebalance_timeout_ms;
  const auto old_session = nm.session_timeout_ms;
  nm.protocols = req.protocols;
  nm.rebalance_timeout_ms = req.rebalance_timeout_ms;
  nm.session_timeout_ms = req.session_timeout_ms;
  nm.client_id = req.client_id;
  nm.client_host = req.client_host;
  touch_member(nm, nm.session_timeout_ms);

  for (auto& [cb, r] : joins)
    cb(std::move(r));
  if (old_sync) {
    SyncResult r;
    r.error = ErrorCode::fenced_instance_id;
    old_sync(std::move(r));
  }

  switch (g.state) {
    case GroupState::stable: {
      if (g.protocol && *g.protocol == select_protocol(g)) {
        // Nothing the assignment depends on changed: persist the new member id and answer with
        // the current generation; the rest of the group is not disturbed.
        StaticSwap swap{g.id,
                        g.incarnation,
                        *req.group_instance_id,
                        old_id,
                        new_id,
                        old_leader,
                        old_protocols,
                        old_rebalance,
                        old_session,
                        req.supports_skip_assignment};
        auto cb = std::move(done);
        store_records(g.partition, {{encode_key(GroupKey{g.id}), encode_value(group_value(g))}},
                      [this, swap = std::move(swap),
                       cb = std::move(cb)](std::optional<io::Error> err) mutable {
                        finish_static_swap(swap, std::move(cb), err);
                      });
        return;
      }
      nm.awaiting_join = std::move(done);
      maybe_prepare_rebalance(g, "static member " + new_id + " rejoined with changed metadata");
      try_complete_join(g);
      return;
    }
    case GroupState::completing_rebalance:
      // The leader may already be assigning to the old id: start over.
      nm.awaiting_join = std::move(done);
      prepare_rebalance(g, "static member " + new_id + " replaced " + old_id);
      try_complete_join(g);
      return;
    case GroupState::preparing_rebalance:
      nm.awaiting_join = std::move(done);
      try_complete_join(g);
      return;
    case GroupState::empty:
    case GroupState::dead: {
      JoinResult r;
      r.error = ErrorCode::unknown_member_id;
      r.member_id = new_id;
      done(std::move(r));
      return;
    }
  }
}

GroupCoordinator::Member& GroupCoordinator::add_member(Group& g, JoinRequest& req, std::string id,
                                                       Done<JoinResult> done) {
  auto m = std::make_unique<Member>();
  m->heartbeat.member = m.get();
  m->heartbeat.fn = &on_heartbeat_expired;
  m->coordinator = this;
  m->group = &g;
  m->id = std::move(id);
  m->instance_id = req.group_instance_id;
  m->client_id = req.client_id;
  m->client_host = req.client_host;
  m->session_timeout_ms = req.session_timeout_ms;
  m->rebalance_timeout_ms = req.rebalance_timeout_ms;
  m->protocol_type = req.protocol_type;
  m->protocols = std::move(req.protocols);
  m->awaiting_join = std::move(done);
  m->is_new = true;
  m->join_seq = g.next_join_seq++;
  if (g.members.empty()) g.protocol_type = m->protocol_type;
  if (g.state == GroupState::preparing_rebalance && g.initial_rebalance) g.new_member_added = true;
  if (m->instance_id) g.static_members[*m->instance_id] = m->id;
  if (!g.leader) g.leader = m->id;
  Member& ref = *m;
  g.members.emplace(ref.id, std::move(m));
  // A new member has no id to heartbeat with until its JoinGroup is answered; a client that
  // went away meanwhile is dropped after this longer timeout.
  touch_member(ref, opts_.new_member_join_timeout_ms);
  return ref;
}

void GroupCoordinator::update_member(Group& g, Member& m, JoinRequest& req, Done<JoinResult> done) {
  (void)g;
  m.protocols = std::move(req.protocols);
  m.rebalance_timeout_ms = req.rebalance_timeout_ms;
  m.session_timeout_ms = req.session_timeout_ms;
  if (m.awaiting_join) {
    // A second JoinGroup while the first is parked: the client gave up on the first one.
    JoinResult r;
    r.error = ErrorCode::rebalance_in_progress;
    r.member_id = m.id;
    auto old = std::exchange(m.awaiting_join, std::move(done));
    old(std::move(r));
  } else {
    m.awaiting_join = std::move(done);
  }
}

void GroupCoordinator::maybe_prepare_rebalance(Group& g, const std::string& why) {
  if (g.can_rebalance()) prepare_rebalance(g, why);
}

void GroupCoordinator::prepare_rebalance(Group& g, const std::string& why) {
  if (g.state == GroupState::completing_rebalance)
    reset_and_propagate_sync_error(g, ErrorCode::rebalance_in_progress);
  reactor_.disarm(&g.sync_timer);
  g.pending_sync.clear();
  const bool initial = g.state == GroupState::empty;
  g.initial_rebalance = initial;
  g.new_member_added = false;
  std::int64_t delay_ms;
  if (initial) {
    // A new group waits a little for more members, so a group starting up does not rebalance
    // once per member (group.initial.rebalance.delay.ms, extended while members keep coming,
    // within the rebalance timeout).
    g.initial_delay_ms = opts_.initial_rebalance_delay_ms;
    g.initial_remaining_ms = std::max<std::int64_t>(rebalance_timeout(g) - g.initial_delay_ms, 0);
    delay_ms = g.initial_delay_ms;
  } else {
    delay_ms = rebalance_timeout(g);
  }
  g.transition(GroupState::preparing_rebalance);
  reactor_.arm(&g.join_timer, mono_ns() + delay_ms * 1'000'000);
  LOG_INFO("group %s: preparing to rebalance (generation %d): %s", g.id.c_str(), g.generation,
           why.c_str());
}

void GroupCoordinator::try_complete_join(Group& g) {
  if (g.state != GroupState::preparing_rebalance || g.initial_rebalance) return;
  if (g.all_members_joined()) complete_join(g);
}

void GroupCoordinator::on_join_timer(io::Timer* t) {
  Group& g = *static_cast<Group::GroupTimer*>(t)->group;
  GroupCoordinator& c = *g.coordinator;
  if (g.state != GroupState::preparing_rebalance) return;
  if (g.initial_rebalance && g.new_member_added && g.initial_remaining_ms > 0) {
    g.new_member_added = false;
    const std::int64_t delay =
        std::min<std::int64_t>(c.opts_.initial_rebalance_delay_ms, g.initial_remaining_ms);
    g.initial_remaining_ms = std::max<std::int64_t>(g.initial_remaining_ms - g.initial_delay_ms, 0);
    g.initial_delay_ms = delay;
    c.reactor_.arm(&g.join_timer, mono_ns() + delay * 1'000'000);
    return;
  }
  c.complete_join(g);
}

void GroupCoordinator::complete_join(Group& g) {
  reactor_.disarm(&g.join_timer);
  g.initial_rebalance = false;
  // Dynamic members that did not rejoin in time are out; static ones keep their place.
  std::vector<Member*> gone;
  for (auto& [id, m] : g.members)
    if (!m->awaiting_join && !m->instance_id) gone.push_back(m.get());
  for (Member* m : gone) {
    LOG_INFO("group %s: member %s did not rejoin in time", g.id.c_str(), m->id.c_str());
    drop_member(g, std::string(m->id));
  }
  // The leader must be a member that rejoined.
  if (!g.leader || !g.member(*g.leader) || !g.member(*g.leader)->awaiting_join) {
    g.leader.reset();
    for (Member* m : g.ordered()) {
      if (m->awaiting_join) {
        g.leader = m->id;
        break;
      }
    }
  }
  if (!g.leader && !g.members.empty()) {
    // Only static members that have not rejoined are left: wait for them (or their session
    // timeouts) another rebalance timeout.
    LOG_WARN("group %s: no member rejoined; waiting another rebalance timeout", g.id.c_str());
    reactor_.arm(&g.join_timer, mono_ns() + std::int64_t{rebalance_timeout(g)} * 1'000'000);
    return;
  }
  ++g.generation;
  ++stats_.rebalances;
  if (g.members.empty()) {
    g.protocol.reset();
    g.leader.reset();
    g.transition(GroupState::empty);
    LOG_INFO("group %s: generation %d is empty", g.id.c_str(), g.generation);
    const std::string id = g.id;
    store_records(g.partition, {{encode_key(GroupKey{g.id}), encode_value(group_value(g))}},
                  [id](std::optional<io::Error> err) {
                    // The previous generation stays in the log; its members are gone, so a
                    // restart would only see them expire.
                    if (err)
                      LOG_WARN("group %s: writing the empty generation failed: %s", id.c_str(),
                               err->detail.c_str());
                  });
    return;
  }
  g.protocol = select_protocol(g);
  g.transition(GroupState::completing_rebalance);
  LOG_INFO("group %s: generation %d with %zu members, protocol %s, leader %s", g.id.c_str(),
           g.generation, g.members.size(), g.protocol->c_str(), g.leader->c_str());
  std::vector<std::pair<Done<JoinResult>, JoinResult>> answers;
  for (Member* m : g.ordered()) {
    JoinResult r = join_result(g, *m, g.is_leader(m->id));
    if (m->awaiting_join)
      answers.emplace_back(std::exchange(m->awaiting_join, nullptr), std::move(r));
    m->is_new = false;
    touch_member(*m, m->session_timeout_ms);
    g.pending_sync.insert(m->id);
  }
  // Every member must follow up with SyncGroup within the rebalance timeout.
  reactor_.arm(&g.sync_timer, mono_ns() + std::int64_t{rebalance_timeout(g)} * 1'000'000);
  for (auto& [cb, r] : answers)
    cb(std::move(r));
}

void GroupCoordinator::on_sync_timer(io::Timer* t) {
  Group& g = *static_cast<Group::GroupTimer*>(t)->group;
  GroupCoordinator& c = *g.coordinator;
  if (g.state != GroupState::completing_rebalance && g.state != GroupState::stable) return;
  if (g.pending_sync.empty()) return;
  const std::vector<std::string> late(g.pending_sync.begin(), g.pending_sync.end());
  std::string names;
  for (const auto& id : late) {
    names += (names.empty() ? "" : ", ") + id;
    c.drop_member(g, id);
  }
  c.prepare_rebalance(g, "members " + names + " did not send SyncGroup in time");
}

void GroupCoordinator::reset_and_propagate_sync_error(Group& g, ErrorCode e) {
  std::vector<Done<SyncResult>> syncs;
  for (auto& [id, m] : g.members) {
    m->assignment.clear();
    if (m->awaiting_sync) syncs.push_back(std::exchange(m->awaiting_sync, nullptr));
  }
  for (auto& s : syncs) {
    SyncResult r;
    r.error = e;
    s(std::move(r));
  }
}

void GroupCoordinator::drop_member(Group& g, const std::string& id) {
  Member* m = g.member(id);
  if (!m) return;
  reactor_.disarm(&m->heartbeat);
  Done<JoinResult> join = std::exchange(m->awaiting_join, nullptr);
  Done<SyncResult> sync = std::exchange(m->awaiting_sync, nullptr);
  if (m->instance_id) {
    auto it = g.static_members.find(*m->instance_id);
    if (it != g.static_members.end() && it->second == id) g.static_members.erase(it);
  }
  g.pending_sync.erase(id);
  g.members.erase(id);
  if (g.is_leader(id)) {
    g.leader.reset();
    auto ordered = g.ordered();
    if (!ordered.empty()) g.leader = ordered.front()->id;
  }
  // Whatever it was waiting for, it is no longer a member.
  if (join) {
    JoinResult r;
    r.error = ErrorCode::unknown_member_id;
    r.member_id = id;
    join(std::move(r));
  }
  if (sync) {
    SyncResult r;
    r.error = ErrorCode::unknown_member_id;
    sync(std::move(r));
  }
}

void GroupCoordinator::remove_member(Group& g, Member& m, const char* why) {
  const std::string id = m.id;
  LOG_INFO("group %s: removing member %s (%s)", g.id.c_str(), id.c_str(), why);
  drop_member(g, id);
  switch (g.state) {
    case GroupState::stable:
    case GroupState::completing_rebalance:
      maybe_prepare_rebalance(g, std::string("member ") + id + " left (" + why + ")");
      try_complete_join(g);
      break;
    case GroupState::preparing_rebalance:
      // The join phase may now have everyone it waits for (the initial delay still runs out).
      if (!g.initial_rebalance && g.all_members_joined()) complete_join(g);
      break;
    case GroupState::empty:
    case GroupState::dead:
      break;
  }
}

void GroupCoordinator::remove_pending_member(Group& g, const std::string& id) {
  auto it = g.pending.find(id);
  if (it == g.pending.end()) return;
  reactor_.disarm(&it->second->timer);
  g.pending.erase(it);
  try_complete_join(g);
}

void GroupCoordinator::on_heartbeat_expired(io::Timer* t) {
  Member& m = *static_cast<Member::HeartbeatTimer*>(t)->member;
  GroupCoordinator& c = *m.coordinator;
  if (!m.is_new && (m.awaiting_join || m.awaiting_sync)) {
    // Parked on a rebalance: its request is its heartbeat.
    c.touch_member(m, m.session_timeout_ms);
    return;
  }
  ++c.stats_.expired_members;
  c.remove_member(*m.group, m, "session timeout");
}

void GroupCoordinator::on_pending_expired(io::Timer* t) {
  PendingMember& p = *static_cast<PendingMember::Timer*>(t)->pending;
  const std::string id = p.id;
  p.coordinator->remove_pending_member(*p.group, id);
}

}  // namespace samsa::coordinator
