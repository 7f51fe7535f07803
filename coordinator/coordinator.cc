// GroupCoordinator's public face: construction, options, shutdown, group lookup and the checks
// every request shares, and ListGroups/DescribeGroups/DeleteGroups.

#include "coordinator/coordinator_impl.h"

#include <cctype>

#include "base/log.h"

namespace samsa::coordinator {

namespace {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

}  // namespace

std::string_view state_name(GroupState s) {
  switch (s) {
    case GroupState::empty:
      return "Empty";
    case GroupState::preparing_rebalance:
      return "PreparingRebalance";
    case GroupState::completing_rebalance:
      return "CompletingRebalance";
    case GroupState::stable:
      return "Stable";
    case GroupState::dead:
      return "Dead";
  }
  return "Dead";
}

GroupCoordinator::GroupCoordinator(io::Reactor& r, Options opts,
                                   std::unique_ptr<OffsetsStore> store,
                                   ProducerIdManager::Allocate allocate_ids)
    : reactor_(r),
      opts_(opts),
      store_(std::move(store)),
      producer_ids_(allocate_ids
                        ? std::move(allocate_ids)
                        : ProducerIdManager::Allocate([](std::int32_t, auto done) { done(-1); })) {
  expiry_timer_.self = this;
  expiry_timer_.fn = &on_expiry_timer;
  retry_timer_.self = this;
  retry_timer_.fn = &on_load_retry;
}

GroupCoordinator::~GroupCoordinator() {
  reactor_.disarm(&expiry_timer_);
  reactor_.disarm(&retry_timer_);
  for (auto& [id, g] : groups_) {
    reactor_.disarm(&g->join_timer);
    reactor_.disarm(&g->sync_timer);
    for (auto& [mid, m] : g->members)
      reactor_.disarm(&m->heartbeat);
    for (auto& [pid, p] : g->pending)
      reactor_.disarm(&p->timer);
  }
}

void GroupCoordinator::set_options(const Options& o) {
  opts_ = o;
}

bool GroupCoordinator::loaded() const {
  return partitions_ > 0 && loading_ == 0;
}

namespace {

// Join and sync requests parked on members, taken out so they can be answered once the state
// that held them is gone (answering may re-enter the coordinator).
struct ParkedAnswers {
  std::vector<GroupCoordinator::Done<JoinResult>> joins;
  std::vector<GroupCoordinator::Done<SyncResult>> syncs;

  template <class M>
  void take(M& m) {
    if (m.awaiting_join) joins.push_back(std::exchange(m.awaiting_join, nullptr));
    if (m.awaiting_sync) syncs.push_back(std::exchange(m.awaiting_sync, nullptr));
  }
  void fail(ErrorCode e) {
    for (auto& j : joins) {
      JoinResult r;
      r.error = e;
      j(std::move(r));
    }
    for (auto& s : syncs) {
      SyncResult r;
      r.error = e;
      s(std::move(r));
    }
  }
};

}  // namespace

void GroupCoordinator::shutdown() {
  if (shutting_down_) return;
  shutting_down_ = true;
  reactor_.disarm(&expiry_timer_);
  reactor_.disarm(&retry_timer_);
  ParkedAnswers parked;
  for (auto& [id, g] : groups_)
    for (auto& [mid, m] : g->members)
      parked.take(*m);
  parked.fail(ErrorCode::not_coordinator);
}

// ---------------------------------------------------------------------------------------------
// Groups

ErrorCode GroupCoordinator::check_group_id(std::string_view group_id) const {
  if (shutting_down_ || partitions_ <= 0) return ErrorCode::coordinator_not_available;
  switch (slots_[static_cast<std::size_t>(partition_of(group_id))].state) {
    case LoadState::inactive:
      return ErrorCode::not_coordinator;
    case LoadState::loading:
      return ErrorCode::coordinator_load_in_progress;
    case LoadState::failed:
      return ErrorCode::coordinator_not_available;
    case LoadState::loaded:
      break;
  }
  return ErrorCode::none;
}

GroupCoordinator::Group* GroupCoordinator::find_group(std::string_view group_id) {
  auto it = groups_.find(std::string(group_id));
  return it == groups_.end() ? nullptr : it->second.get();
}

const GroupCoordinator::Group* GroupCoordinator::find_group(std::string_view group_id) const {
  auto it = groups_.find(std::string(group_id));
  return it == groups_.end() ? nullptr : it->second.get();
}

GroupCoordinator::Group* GroupCoordinator::create_group(const std::string& group_id) {
  auto g = std::make_unique<Group>();
  g->coordinator = this;
  g->id = group_id;
  g->incarnation = next_incarnation_++;
  g->partition = partition_of(group_id);
  g->state_timestamp_ms = wall_ms();
  g->join_timer.group = g.get();
  g->join_timer.fn = &on_join_timer;
  g->sync_timer.group = g.get();
  g->sync_timer.fn = &on_sync_timer;
  Group* raw = g.get();
  groups_[group_id] = std::move(g);
  return raw;
}

void GroupCoordinator::erase_group(Group* g, ErrorCode parked_error) {
  reactor_.disarm(&g->join_timer);
  reactor_.disarm(&g->sync_timer);
  ParkedAnswers parked;
  for (auto& [mid, m] : g->members) {
    reactor_.disarm(&m->heartbeat);
    parked.take(*m);
  }
  for (auto& [pid, p] : g->pending)
    reactor_.disarm(&p->timer);
  groups_.erase(g->id);
  parked.fail(parked_error);
}

std::optional<GroupCoordinator::GroupSnapshot> GroupCoordinator::snapshot(
    std::string_view group) const {
  const Group* g = find_group(group);
  if (!g) return std::nullopt;
  GroupSnapshot s;
  s.state = g->state;
  s.generation = g->generation;
  s.protocol_type = g->protocol_type;
  s.protocol = g->protocol;
  s.leader = g->leader;
  for (const Member* m : g->ordered())
    s.members.push_back(m->id);
  s.offsets = g->offsets.size();
  return s;
}

ErrorCode GroupCoordinator::validate_member(const Group& g, const std::string& member_id,
                                            const std::optional<std::string>& instance_id) const {
  if (instance_id) {
    auto it = g.static_members.find(*instance_id);
    if (it == g.static_members.end()) return ErrorCode::unknown_member_id;
    if (it->second != member_id) return ErrorCode::fenced_instance_id;
    return ErrorCode::none;
  }
  return g.member(member_id) ? ErrorCode::none : ErrorCode::unknown_member_id;
}

void GroupCoordinator::touch_member(Member& m, std::int64_t timeout_ms) {
  reactor_.arm(&m.heartbeat, mono_ns() + timeout_ms * 1'000'000);
}

std::int32_t GroupCoordinator::rebalance_timeout(const Group& g) const {
  std::int32_t t = 0;
  for (const auto& [id, m] : g.members)
    t = std::max(t, m->rebalance_timeout_ms);
  return t;
}

bool GroupCoordinator::supports_protocols(const Group& g, const std::string& type,
                                          const std::vector<Protocol>& protocols) const {
  if (g.state == GroupState::empty && g.members.empty()) return !type.empty() && !protocols.empty();
  if (g.protocol_type != type) return false;
  for (const auto& p : protocols) {
    std::size_t n = 0;
    for (const auto& [id, m] : g.members)
      n += m->supports(p.name);
    if (n == g.members.size()) return true;
  }
  return false;
}

// The protocol every member supports that most members prefer (each votes for the first of
// its own list that all support); ties go to the earliest member's preference.
std::string GroupCoordinator::select_protocol(const Group& g) const {
  auto members = g.ordered();
  if (members.empty()) return {};
  std::vector<std::string> candidates;
  for (const auto& p : members.front()->protocols) {
    bool all =
        std::all_of(members.begin(), members.end(), [&](Member* m) { return m->supports(p.name); });
    if (all) candidates.push_back(p.name);
  }
  if (candidates.empty()) return {};
  std::map<std::string, std::size_t> votes;
  for (Member* m : members) {
    for (const auto& p : m->protocols) {
      if (std::find(candidates.begin(), candidates.end(), p.name) != candidates.end()) {
        ++votes[p.name];
        break;
      }
    }
  }
  std::string best = candidates.front();
  for (const auto& c : candidates)
    if (votes[c] > votes[best]) best = c;
  return best;
}

std::optional<std::set<std::string>> GroupCoordinator::subscribed_topics(const Group& g) const {
  if (g.protocol_type != kConsumerProtocol) return std::nullopt;
  if (g.members.empty()) return std::set<std::string>{};
  if (!g.protocol) return std::nullopt;
  std::set<std::string> out;
  for (const auto& [id, m] : g.members) {
    const Bytes* md = m->metadata(*g.protocol);
    if (!md) return std::nullopt;
    auto topics = subscription_topics(*md);
    if (!topics) return std::nullopt;
    out.insert(topics->begin(), topics->end());
  }
  return out;
}

JoinResult GroupCoordinator::join_result(const Group& g, const Member& m, bool with_members) const {
  JoinResult r;
  r.generation = g.generation;
  if (!g.protocol_type.empty()) r.protocol_type = g.protocol_type;
  r.protocol_name = g.protocol;
  r.leader = g.leader.value_or("");
  r.member_id = m.id;
  if (with_members && g.protocol) {
    for (const Member* o : g.ordered()) {
      const Bytes* md = o->metadata(*g.protocol);
      r.members.push_back({o->id, o->instance_id, md ? *md : Bytes{}});
    }
  }
  return r;
}

// ---------------------------------------------------------------------------------------------
// ListGroups, DescribeGroups, DeleteGroups

void GroupCoordinator::list_groups(ListRequest req, Done<ListResult> done) {
  ListResult res;
  if (shutting_down_ || partitions_ <= 0) {
    res.error = ErrorCode::coordinator_not_available;
    return done(std::move(res));
  }
  if (loading_ > 0) res.error = ErrorCode::coordinator_load_in_progress;
  for (const auto& [id, g] : groups_) {
    if (g->state == GroupState::dead) continue;
    if (!serving(g->partition)) continue;
    const std::string_view state = state_name(g->state);
    if (!req.states.empty() &&
        std::none_of(req.states.begin(), req.states.end(),
                     [&](const std::string& s) { return iequals(s, state); }))
      continue;
    if (!req.types.empty() &&
        std::none_of(req.types.begin(), req.types.end(),
                     [](const std::string& s) { return iequals(s, "classic"); }))
      continue;
    res.groups.push_back({g->id, g->protocol_type, std::string(state), "classic"});
  }
  std::sort(res.groups.begin(), res.groups.end(),
            [](const ListedGroup& a, const ListedGroup& b) { return a.group_id < b.group_id; });
  done(std::move(res));
}

void GroupCoordinator::describe_groups(std::vector<std::string> groups,
                                       Done<std::vector<DescribedGroup>> done) {
  std::vector<DescribedGroup> out;
  for (auto& id : groups) {
    DescribedGroup d;
    d.group_id = id;
    if (id.empty()) {
      d.error = ErrorCode::invalid_group_id;
    } else if (auto e = check_group_id(id); e != ErrorCode::none) {
      d.error = e;
    } else if (const Group* g = find_group(id); !g || g->state == GroupState::dead) {
      d.state = "Dead";
      d.error = ErrorCode::group_id_not_found;  // the handler answers NONE before v6
    } else {
      d.state = std::string(state_name(g->state));
      d.protocol_type = g->protocol_type;
      const bool stable = g->state == GroupState::stable;
      if (stable && g->protocol) d.protocol = *g->protocol;
      for (const Member* m : g->ordered()) {
        DescribedMember dm;
        dm.member_id = m->id;
        dm.group_instance_id = m->instance_id;
        dm.client_id = m->client_id;
        dm.client_host = m->client_host;
        if (stable && g->protocol) {
          if (const Bytes* md = m->metadata(*g->protocol)) dm.metadata = *md;
          dm.assignment = m->assignment;
        }
        d.members.push_back(std::move(dm));
      }
    }
    out.push_back(std::move(d));
  }
  done(std::move(out));
}

void GroupCoordinator::delete_groups(std::vector<std::string> groups,
                                     Done<std::vector<DeleteGroupResult>> done) {
  struct Shared {
    std::vector<DeleteGroupResult> results;
    std::size_t pending = 1;
    Done<std::vector<DeleteGroupResult>> done;
    void step() {
      if (--pending == 0) done(std::move(results));
    }
  };
  auto shared = std::make_shared<Shared>();
  shared->done = std::move(done);
  shared->results.resize(groups.size());
  for (std::size_t i = 0; i < groups.size(); ++i) {
    DeleteGroupResult& r = shared->results[i];
    r.group_id = groups[i];
    if (r.group_id.empty()) {
      r.error = ErrorCode::invalid_group_id;
      continue;
    }
    if (auto e = check_group_id(r.group_id); e != ErrorCode::none) {
      r.error = e;
      continue;
    }
    Group* g = find_group(r.group_id);
    if (!g || g->state == GroupState::dead) {
      r.error = ErrorCode::group_id_not_found;
      continue;
    }
    if (g->state != GroupState::empty) {
      r.error = ErrorCode::non_empty_group;
      continue;
    }
    std::vector<std::pair<Bytes, std::optional<Bytes>>> records;
    for (const auto& [tp, v] : g->offsets)
      records.emplace_back(encode_key(OffsetKey{g->id, tp.first, tp.second}), std::nullopt);
    records.emplace_back(encode_key(GroupKey{g->id}), std::nullopt);
    // Dead while the tombstones are written: nothing may join or commit meanwhile.
    g->transition(GroupState::dead);
    ++shared->pending;
    const std::string group_id = g->id;
    const std::uint64_t inc = g->incarnation;
    store_records(g->partition, records,
                  [this, shared, i, group_id, inc](std::optional<io::Error> err) {
                    Group* g = find_group(group_id);
                    if (g && g->incarnation == inc) {
                      if (err) {
                        g->transition(GroupState::empty);
                        shared->results[i].error = store_error(*err);
                      } else {
                        erase_group(g);
                        LOG_INFO("group %s: deleted", group_id.c_str());
                      }
                    }
                    shared->step();
                  });
  }
  shared->step();
}

}  // namespace samsa::coordinator
