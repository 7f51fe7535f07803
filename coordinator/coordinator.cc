#include "coordinator/coordinator.h"

#include <algorithm>
#include <cctype>
#include <random>

#include "base/clock.h"
#include "base/log.h"
#include "io/batch_builder.h"
#include "io/record_batch.h"

namespace samsa::coordinator {

// A member of a classic group. Owned by its Group (unique_ptr, so the embedded timer stays put).
struct GroupCoordinator::Member {
  struct HeartbeatTimer : io::Timer {
    Member* member = nullptr;
  } heartbeat;
  GroupCoordinator* coordinator = nullptr;
  Group* group = nullptr;
  std::string id;
  std::optional<std::string> instance_id;
  std::string client_id;
  std::string client_host;
  std::int32_t session_timeout_ms = 0;
  std::int32_t rebalance_timeout_ms = 0;
  std::string protocol_type;
  std::vector<Protocol> protocols;
  Bytes assignment;
  Done<JoinResult> awaiting_join;
  Done<SyncResult> awaiting_sync;
  // Joined but not yet answered its first JoinGroup: it has no id to heartbeat with, so it gets
  // new_member_join_timeout_ms instead of its session timeout.
  bool is_new = false;
  std::uint64_t join_seq = 0;

  const Bytes* metadata(std::string_view protocol) const {
    for (const auto& p : protocols)
      if (p.name == protocol) return &p.metadata;
    return nullptr;
  }
  bool supports(std::string_view protocol) const { return metadata(protocol) != nullptr; }
};

// A member id handed out with MEMBER_ID_REQUIRED, not yet used to join.
struct GroupCoordinator::PendingMember {
  struct Timer : io::Timer {
    PendingMember* pending = nullptr;
  } timer;
  GroupCoordinator* coordinator = nullptr;
  Group* group = nullptr;
  std::string id;
};

struct GroupCoordinator::Group {
  struct GroupTimer : io::Timer {
    Group* group = nullptr;
  };
  GroupCoordinator* coordinator = nullptr;
  std::string id;
  std::uint64_t incarnation = 0;  // tells a re-created group from the one a write started for
  std::int32_t partition = 0;
  GroupState state = GroupState::empty;
  std::int64_t state_timestamp_ms = -1;
  std::string protocol_type;  // "" until a member joins (and for groups that only commit)
  std::optional<std::string> protocol;
  std::int32_t generation = 0;
  std::optional<std::string> leader;
  std::map<std::string, std::unique_ptr<Member>> members;
  std::map<std::string, std::unique_ptr<PendingMember>> pending;
  std::map<std::string, std::string> static_members;  // group.instance.id -> member id
  std::set<std::string> pending_sync;  // members that have not sent SyncGroup this generation
  std::map<std::pair<std::string, std::int32_t>, OffsetValue> offsets;
  std::uint64_t next_join_seq = 0;

  GroupTimer join_timer;  // rebalance timeout, or the initial delay
  bool initial_rebalance = false;
  bool new_member_added = false;
  std::int64_t initial_delay_ms = 0;
  std::int64_t initial_remaining_ms = 0;
  GroupTimer sync_timer;

  Member* member(const std::string& member_id) {
    auto it = members.find(member_id);
    return it == members.end() ? nullptr : it->second.get();
  }
  const Member* member(const std::string& member_id) const {
    auto it = members.find(member_id);
    return it == members.end() ? nullptr : it->second.get();
  }
  bool is_leader(const std::string& member_id) const { return leader && *leader == member_id; }
  bool all_members_joined() const {
    if (!pending.empty()) return false;
    for (const auto& [id, m] : members)
      if (!m->awaiting_join) return false;
    return true;
  }
  bool can_rebalance() const {
    return state == GroupState::stable || state == GroupState::completing_rebalance ||
           state == GroupState::empty;
  }
  // Members in join order.
  std::vector<Member*> ordered() const {
    std::vector<Member*> out;
    out.reserve(members.size());
    for (const auto& [id, m] : members)
      out.push_back(m.get());
    std::sort(out.begin(), out.end(),
              [](Member* a, Member* b) { return a->join_seq < b->join_seq; });
    return out;
  }
  void transition(GroupState s) {
    state = s;
    state_timestamp_ms = wall_ms();
  }
};

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

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

constexpr std::string_view kConsumerProtocol = "consumer";

// Errors of a failed write, as Kafka reports a failed append to its own topic.
ErrorCode store_error(const io::Error& e) {
  switch (e.code) {
    case io::Errc::batch_too_large:
      return ErrorCode::invalid_commit_offset_size;
    case io::Errc::not_found:
      return ErrorCode::not_coordinator;
    default:
      return ErrorCode::coordinator_not_available;
  }
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
  rewrite_timer_.self = this;
  rewrite_timer_.fn = &on_rewrite_timer;
}

GroupCoordinator::~GroupCoordinator() {
  reactor_.disarm(&expiry_timer_);
  reactor_.disarm(&retry_timer_);
  reactor_.disarm(&rewrite_timer_);
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
  if (partitions_ > 0 && !shutting_down_ && opts_.state_rewrite_interval_ms > 0 &&
      !rewrite_timer_.armed())
    reactor_.arm(&rewrite_timer_, mono_ns() + opts_.state_rewrite_interval_ms * 1'000'000);
}

bool GroupCoordinator::loaded() const {
  return partitions_ > 0 && loading_ == 0;
}

// ---------------------------------------------------------------------------------------------
// Loading

void GroupCoordinator::start(std::int32_t partitions) {
  if (partitions_ > 0 || partitions <= 0) return;
  partitions_ = partitions;
  load_state_.assign(static_cast<std::size_t>(partitions), LoadState::loading);
  load_failed_before_.assign(static_cast<std::size_t>(partitions), false);
  loading_ = static_cast<std::size_t>(partitions);
  LOG_INFO("group coordinator: loading %d partitions of %s", partitions, kOffsetsTopic.data());
  for (std::int32_t p = 0; p < partitions; ++p)
    load_partition(p);
  reactor_.arm(&expiry_timer_, mono_ns() + opts_.offsets_retention_check_interval_ms * 1'000'000);
  if (opts_.state_rewrite_interval_ms > 0)
    reactor_.arm(&rewrite_timer_, mono_ns() + opts_.state_rewrite_interval_ms * 1'000'000);
}

void GroupCoordinator::load_partition(std::int32_t p) {
  store_->load(
      p, [this, p](std::span<const std::byte> batch) { replay_batch(p, batch); },
      [this, p](std::optional<io::Error> err) { on_loaded(p, std::move(err)); });
}

void GroupCoordinator::replay_batch(std::int32_t p, std::span<const std::byte> batch) {
  if (batch.size() < io::batch::kHeaderSize) return;
  const io::BatchInfo info = io::batch::parse_header(batch.data());
  if (info.is_control()) return;
  std::vector<std::byte> storage;
  auto records = io::batch::records_of(batch, storage);
  if (!records) {
    LOG_ERROR("%s-%d: skipping an unreadable batch at offset %lld: %s", kOffsetsTopic.data(), p,
              static_cast<long long>(info.base_offset), records.error().detail.c_str());
    return;
  }
  io::batch::RecordReader reader(*records, info.record_count);
  for (;;) {
    auto rec = reader.next();
    if (!rec) {
      LOG_ERROR("%s-%d: malformed record in the batch at offset %lld: %s", kOffsetsTopic.data(), p,
                static_cast<long long>(info.base_offset), rec.error().detail.c_str());
      return;
    }
    if (!*rec) break;
    const io::batch::Record& r = **rec;
    ++stats_.records_loaded;
    if (!r.key) continue;
    auto key = decode_key(*r.key);
    if (!key) {
      LOG_WARN("%s-%d: skipping a record at offset %lld: %s", kOffsetsTopic.data(), p,
               static_cast<long long>(info.base_offset + r.offset_delta), key.error().c_str());
      continue;
    }
    if (auto* ok = std::get_if<OffsetKey>(&*key)) {
      Group* g = find_group(ok->group);
      if (!r.value) {
        if (g) g->offsets.erase({ok->topic, ok->partition});
        continue;
      }
      auto v = decode_offset_value(*r.value);
      if (!v) {
        LOG_WARN("%s-%d: skipping the offset of %s at offset %lld: %s", kOffsetsTopic.data(), p,
                 ok->group.c_str(), static_cast<long long>(info.base_offset + r.offset_delta),
                 v.error().c_str());
        continue;
      }
      if (!g) g = create_group(ok->group);
      g->offsets[{ok->topic, ok->partition}] = std::move(*v);
    } else if (auto* gk = std::get_if<GroupKey>(&*key)) {
      if (!r.value) {
        // The group is gone; offsets written after the tombstone (there are none in what
        // Kafka writes) would re-create it as a group that only commits.
        if (Group* g = find_group(gk->group)) erase_group(g);
        continue;
      }
      auto v = decode_group_value(*r.value);
      if (!v) {
        LOG_WARN("%s-%d: skipping the metadata of group %s: %s", kOffsetsTopic.data(), p,
                 gk->group.c_str(), v.error().c_str());
        continue;
      }
      apply_group_value(p, gk->group, std::move(*v));
    }
  }
}

void GroupCoordinator::apply_group_value(std::int32_t p, const std::string& group_id,
                                         GroupValue v) {
  Group* g = find_group(group_id);
  if (!g) g = create_group(group_id);
  g->partition = p;
  for (auto& [id, m] : g->members)
    reactor_.disarm(&m->heartbeat);
  g->members.clear();
  g->static_members.clear();
  g->pending_sync.clear();
  g->protocol_type = v.protocol_type;
  g->generation = v.generation;
  g->protocol = v.protocol;
  g->leader = v.leader;
  g->state_timestamp_ms = v.current_state_timestamp;
  for (auto& mv : v.members) {
    auto m = std::make_unique<Member>();
    m->heartbeat.member = m.get();
    m->heartbeat.fn = &on_heartbeat_expired;
    m->coordinator = this;
    m->group = g;
    m->id = mv.member_id;
    m->instance_id = mv.group_instance_id;
    m->client_id = mv.client_id;
    m->client_host = mv.client_host;
    m->session_timeout_ms = mv.session_timeout;
    m->rebalance_timeout_ms = mv.rebalance_timeout;
    m->protocol_type = v.protocol_type;
    if (v.protocol) m->protocols.push_back({*v.protocol, std::move(mv.subscription)});
    m->assignment = std::move(mv.assignment);
    m->join_seq = g->next_join_seq++;
    if (m->instance_id) g->static_members[*m->instance_id] = m->id;
    g->members.emplace(m->id, std::move(m));
  }
  // A group with members was Stable when it was written: the members resume heartbeating (or
  // expire) as if nothing happened.
  g->state = g->members.empty() ? GroupState::empty : GroupState::stable;
}

void GroupCoordinator::on_loaded(std::int32_t p, std::optional<io::Error> err) {
  auto& st = load_state_[static_cast<std::size_t>(p)];
  if (err) {
    // Said once per partition; the retries that follow (every load_retry_ms) stay quiet.
    if (!load_failed_before_[static_cast<std::size_t>(p)]) {
      LOG_ERROR("group coordinator: loading %s-%d failed (%s); retrying", kOffsetsTopic.data(), p,
                err->detail.c_str());
      load_failed_before_[static_cast<std::size_t>(p)] = true;
    }
    st = LoadState::failed;
    // Drop what was replayed so far: the retry starts over.
    std::vector<Group*> doomed;
    for (auto& [id, g] : groups_)
      if (g->partition == p) doomed.push_back(g.get());
    for (Group* g : doomed)
      erase_group(g);
    if (!retry_timer_.armed())
      reactor_.arm(&retry_timer_, mono_ns() + opts_.load_retry_ms * 1'000'000);
    return;
  }
  st = LoadState::loaded;
  --loading_;
  if (load_failed_before_[static_cast<std::size_t>(p)])
    LOG_INFO("group coordinator: loaded %s-%d after all", kOffsetsTopic.data(), p);
  std::size_t groups = 0;
  for (auto& [id, g] : groups_) {
    if (g->partition != p) continue;
    ++groups;
    for (auto& [mid, m] : g->members)
      touch_member(*m, m->session_timeout_ms);
  }
  LOG_DEBUG("group coordinator: loaded %s-%d: %zu groups", kOffsetsTopic.data(), p, groups);
  if (loading_ == 0)
    LOG_INFO("group coordinator: loaded %zu groups from %d partitions", groups_.size(),
             partitions_);
}

void GroupCoordinator::on_load_retry(io::Timer* t) {
  auto* self = static_cast<RetryTimer*>(t)->self;
  if (self->shutting_down_) return;
  for (std::int32_t p = 0; p < self->partitions_; ++p) {
    auto& st = self->load_state_[static_cast<std::size_t>(p)];
    if (st != LoadState::failed) continue;
    st = LoadState::loading;
    self->load_partition(p);
  }
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
  reactor_.disarm(&rewrite_timer_);
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
  switch (load_state_[static_cast<std::size_t>(partition_of(group_id))]) {
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

void GroupCoordinator::erase_group(Group* g) {
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
  parked.fail(ErrorCode::unknown_member_id);
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
        const std::string group_id = g.id;
        const std::uint64_t inc = g.incarnation;
        const std::string instance = *req.group_instance_id;
        const bool skip = req.supports_skip_assignment;
        auto cb = std::move(done);
        store_records(g.partition, {{encode_key(GroupKey{g.id}), encode_value(group_value(g))}},
                      [this, group_id, inc, instance, old_id, new_id, old_leader, old_protocols,
                       old_rebalance, old_session, skip,
                       cb = std::move(cb)](std::optional<io::Error> err) mutable {
                        Group* g = find_group(group_id);
                        Member* m = g && g->incarnation == inc ? g->member(new_id) : nullptr;
                        if (!m) {
                          JoinResult r;
                          r.error = ErrorCode::unknown_member_id;
                          r.member_id = new_id;
                          cb(std::move(r));
                          return;
                        }
                        if (err) {
                          // Undo: the old id stays the member's, as the log still says.
                          m->protocols = old_protocols;
                          m->rebalance_timeout_ms = old_rebalance;
                          m->session_timeout_ms = old_session;
                          auto node = g->members.extract(new_id);
                          node.mapped()->id = old_id;
                          node.key() = old_id;
                          g->members.insert(std::move(node));
                          if (g->is_leader(new_id)) g->leader = old_id;
                          g->static_members[instance] = old_id;
                          if (g->pending_sync.erase(new_id)) g->pending_sync.insert(old_id);
                          JoinResult r;
                          r.error = store_error(*err);
                          r.member_id = new_id;
                          r.generation = g->generation;
                          cb(std::move(r));
                          return;
                        }
                        const bool leader = g->is_leader(new_id);
                        JoinResult r = join_result(*g, *m, leader && skip);
                        r.skip_assignment = leader && skip;
                        // Older clients are told the previous leader id, so a rejoining leader acts
                        // as a follower and keeps the current assignment.
                        if (!skip) r.leader = old_leader.value_or("");
                        cb(std::move(r));
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

// ---------------------------------------------------------------------------------------------
// Offsets

void GroupCoordinator::commit_offsets(CommitRequest req, Done<CommitResult> done) {
  CommitResult out(req.partitions.size(), ErrorCode::none);
  auto fail_all = [&](ErrorCode e) {
    std::fill(out.begin(), out.end(), e);
    done(std::move(out));
  };
  if (req.group_id.empty()) return fail_all(ErrorCode::invalid_group_id);
  if (auto e = check_group_id(req.group_id); e != ErrorCode::none) return fail_all(e);
  Group* g = find_group(req.group_id);
  if (!g) {
    if (req.generation >= 0) {
      return fail_all(req.group_id_not_found_for_unknown_group ? ErrorCode::group_id_not_found
                                                               : ErrorCode::illegal_generation);
    }
    // A consumer that does not use group management (or an admin tool) commits into a group
    // of its own.
    g = create_group(req.group_id);
  }
  if (g->state == GroupState::dead) return fail_all(ErrorCode::coordinator_not_available);
  if (!(req.generation < 0 && g->state == GroupState::empty)) {
    if (req.generation >= 0 || !req.member_id.empty() || req.group_instance_id) {
      if (auto e = validate_member(*g, req.member_id, req.group_instance_id); e != ErrorCode::none)
        return fail_all(e);
      if (req.generation != g->generation) return fail_all(ErrorCode::illegal_generation);
    } else if (g->state != GroupState::empty) {
      // Without member id and generation only an Empty group takes commits.
      return fail_all(ErrorCode::unknown_member_id);
    }
    if (g->state == GroupState::completing_rebalance)
      return fail_all(ErrorCode::rebalance_in_progress);
    if (Member* m = g->member(req.member_id)) touch_member(*m, m->session_timeout_ms);
  }

  const std::int64_t now = wall_ms();
  std::vector<std::pair<Bytes, std::optional<Bytes>>> records;
  std::vector<std::pair<std::size_t, OffsetValue>> values;  // request index -> value
  for (std::size_t i = 0; i < req.partitions.size(); ++i) {
    const CommitPartition& p = req.partitions[i];
    const std::string md = p.metadata.value_or("");
    if (md.size() > static_cast<std::size_t>(opts_.max_metadata_bytes)) {
      out[i] = ErrorCode::offset_metadata_too_large;
      continue;
    }
    OffsetValue v;
    v.offset = p.offset;
    v.leader_epoch = p.leader_epoch;
    v.metadata = md;
    v.commit_timestamp = now;
    if (req.retention_time_ms > 0) v.expire_timestamp = now + req.retention_time_ms;
    records.emplace_back(encode_key(OffsetKey{g->id, p.topic, p.partition}), encode_value(v));
    values.emplace_back(i, std::move(v));
  }
  if (records.empty()) return done(std::move(out));
  const std::string group_id = g->id;
  const std::uint64_t inc = g->incarnation;
  store_records(
      g->partition, records,
      [this, group_id, inc, req = std::move(req), values = std::move(values), out = std::move(out),
       done = std::move(done)](std::optional<io::Error> err) mutable {
        Group* g = find_group(group_id);
        const bool same = g && g->incarnation == inc && g->state != GroupState::dead;
        for (auto& [i, v] : values) {
          if (err) {
            out[i] = store_error(*err);
          } else if (same) {
            const CommitPartition& p = req.partitions[i];
            g->offsets[{p.topic, p.partition}] = std::move(v);
          }
        }
        done(std::move(out));
      });
}

void GroupCoordinator::fetch_offsets(FetchRequest req, Done<FetchResult> done) {
  FetchResult res;
  if (req.group_id.empty()) {
    res.error = ErrorCode::invalid_group_id;
    return done(std::move(res));
  }
  if (auto e = check_group_id(req.group_id); e != ErrorCode::none) {
    res.error = e;
    return done(std::move(res));
  }
  // Commits become visible only once durable and there are no transactional offsets yet, so
  // every offset answered is stable: require_stable needs nothing more.
  const Group* g = find_group(req.group_id);
  if (g && g->state == GroupState::dead) g = nullptr;
  auto put = [&](const std::string& topic, std::int32_t partition, const OffsetValue* v) {
    FetchedOffset o;
    o.topic = topic;
    o.partition = partition;
    if (v) {
      o.offset = v->offset;
      o.leader_epoch = v->leader_epoch;
      o.metadata = v->metadata;
    }
    res.offsets.push_back(std::move(o));
  };
  if (!req.topics) {
    if (g)
      for (const auto& [tp, v] : g->offsets)
        put(tp.first, tp.second, &v);
  } else {
    for (const auto& t : *req.topics) {
      for (std::int32_t p : t.partitions) {
        const OffsetValue* v = nullptr;
        if (g) {
          auto it = g->offsets.find({t.topic, p});
          if (it != g->offsets.end()) v = &it->second;
        }
        put(t.topic, p, v);
      }
    }
  }
  done(std::move(res));
}

void GroupCoordinator::delete_offsets(OffsetDeleteRequest req, Done<OffsetDeleteResult> done) {
  OffsetDeleteResult res;
  res.partitions.assign(req.partitions.size(), ErrorCode::none);
  auto fail = [&](ErrorCode e) {
    res.error = e;
    res.partitions.clear();
    done(std::move(res));
  };
  if (req.group_id.empty()) return fail(ErrorCode::invalid_group_id);
  if (auto e = check_group_id(req.group_id); e != ErrorCode::none) return fail(e);
  Group* g = find_group(req.group_id);
  if (!g || g->state == GroupState::dead) return fail(ErrorCode::group_id_not_found);
  std::optional<std::set<std::string>> subscribed;
  if (g->state != GroupState::empty) {
    if (g->protocol_type != kConsumerProtocol) return fail(ErrorCode::non_empty_group);
    subscribed = subscribed_topics(*g);
  }
  std::vector<std::pair<Bytes, std::optional<Bytes>>> records;
  std::vector<std::pair<std::string, std::int32_t>> deleted;
  for (std::size_t i = 0; i < req.partitions.size(); ++i) {
    const auto& [topic, partition] = req.partitions[i];
    if (g->state != GroupState::empty && (!subscribed || subscribed->count(topic))) {
      res.partitions[i] = ErrorCode::group_subscribed_to_topic;
      continue;
    }
    if (g->offsets.count({topic, partition})) {
      records.emplace_back(encode_key(OffsetKey{g->id, topic, partition}), std::nullopt);
      deleted.emplace_back(topic, partition);
    }
  }
  if (records.empty()) return done(std::move(res));
  const std::string group_id = g->id;
  const std::uint64_t inc = g->incarnation;
  store_records(g->partition, records,
                [this, group_id, inc, deleted = std::move(deleted), res = std::move(res),
                 done = std::move(done)](std::optional<io::Error> err) mutable {
                  if (err) {
                    res.error = store_error(*err);
                    res.partitions.clear();
                    done(std::move(res));
                    return;
                  }
                  Group* g = find_group(group_id);
                  if (g && g->incarnation == inc)
                    for (const auto& tp : deleted)
                      g->offsets.erase(tp);
                  done(std::move(res));
                });
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
    if (load_state_[static_cast<std::size_t>(g->partition)] != LoadState::loaded) continue;
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

// ---------------------------------------------------------------------------------------------
// Offsets expiry

void GroupCoordinator::on_expiry_timer(io::Timer* t) {
  auto* self = static_cast<ExpiryTimer*>(t)->self;
  self->expire_offsets(wall_ms());
  self->reactor_.arm(t, mono_ns() + self->opts_.offsets_retention_check_interval_ms * 1'000'000);
}

void GroupCoordinator::expire_offsets(std::int64_t now_ms) {
  if (shutting_down_ || partitions_ <= 0) return;
  std::vector<Group*> candidates;
  for (auto& [id, g] : groups_) {
    if (g->state == GroupState::dead) continue;
    if (load_state_[static_cast<std::size_t>(g->partition)] != LoadState::loaded) continue;
    candidates.push_back(g.get());
  }
  for (Group* g : candidates) {
    // Kafka's rules: offsets of an Empty group age from the moment it became empty (or from
    // their commit, for groups that never had members); a Stable consumer group loses only
    // the offsets of topics it no longer subscribes to; an explicit expiry always applies.
    std::optional<std::set<std::string>> keep_topics;
    bool from_empty = false;
    if (g->protocol_type.empty()) {
      from_empty = false;
    } else if (g->state == GroupState::empty) {
      from_empty = g->state_timestamp_ms >= 0;
    } else if (g->state == GroupState::stable && g->protocol_type == kConsumerProtocol) {
      keep_topics = subscribed_topics(*g);
      if (!keep_topics) continue;
    } else {
      continue;
    }
    std::vector<std::pair<std::string, std::int32_t>> expired;
    for (const auto& [tp, v] : g->offsets) {
      if (keep_topics && keep_topics->count(tp.first)) continue;
      bool gone;
      if (v.expire_timestamp >= 0) {
        gone = now_ms >= v.expire_timestamp;
      } else {
        const std::int64_t base = from_empty ? g->state_timestamp_ms : v.commit_timestamp;
        gone = now_ms - base >= opts_.offsets_retention_ms;
      }
      if (gone) expired.push_back(tp);
    }
    const bool drop_group = g->state == GroupState::empty && g->members.empty() &&
                            g->pending.empty() && expired.size() == g->offsets.size();
    if (expired.empty() && !drop_group) continue;
    std::vector<std::pair<Bytes, std::optional<Bytes>>> records;
    std::vector<std::pair<std::pair<std::string, std::int32_t>, std::int64_t>> stamps;
    for (const auto& tp : expired) {
      records.emplace_back(encode_key(OffsetKey{g->id, tp.first, tp.second}), std::nullopt);
      stamps.emplace_back(tp, g->offsets[tp].commit_timestamp);
    }
    if (drop_group) records.emplace_back(encode_key(GroupKey{g->id}), std::nullopt);
    LOG_INFO("group %s: expiring %zu committed offsets%s", g->id.c_str(), expired.size(),
             drop_group ? " and the group" : "");
    const std::string group_id = g->id;
    const std::uint64_t inc = g->incarnation;
    store_records(g->partition, records,
                  [this, group_id, inc, stamps = std::move(stamps),
                   drop_group](std::optional<io::Error> err) {
                    if (err) {
                      LOG_WARN("group %s: writing expired offsets failed: %s", group_id.c_str(),
                               err->detail.c_str());
                      return;
                    }
                    Group* g = find_group(group_id);
                    if (!g || g->incarnation != inc) return;
                    // A commit that landed meanwhile wins over the expiry.
                    for (const auto& [tp, ts] : stamps) {
                      auto it = g->offsets.find(tp);
                      if (it != g->offsets.end() && it->second.commit_timestamp == ts)
                        g->offsets.erase(it);
                    }
                    if (drop_group && g->state == GroupState::empty && g->members.empty() &&
                        g->offsets.empty())
                      erase_group(g);
                  });
  }
}

// ---------------------------------------------------------------------------------------------
// Storage

GroupValue GroupCoordinator::group_value(const Group& g) const {
  GroupValue v;
  v.protocol_type = g.protocol_type;
  v.generation = g.generation;
  v.protocol = g.protocol;
  v.leader = g.leader;
  v.current_state_timestamp = g.state_timestamp_ms;
  if (g.state == GroupState::empty || g.state == GroupState::dead) return v;
  for (const Member* m : g.ordered()) {
    MemberValue mv;
    mv.member_id = m->id;
    mv.group_instance_id = m->instance_id;
    mv.client_id = m->client_id;
    mv.client_host = m->client_host;
    mv.rebalance_timeout = m->rebalance_timeout_ms;
    mv.session_timeout = m->session_timeout_ms;
    if (g.protocol)
      if (const Bytes* md = m->metadata(*g.protocol)) mv.subscription = *md;
    mv.assignment = m->assignment;
    v.members.push_back(std::move(mv));
  }
  return v;
}

void GroupCoordinator::store_records(
    std::int32_t partition, const std::vector<std::pair<Bytes, std::optional<Bytes>>>& records,
    OffsetsStore::AppendDone done) {
  std::size_t size = io::batch::kHeaderSize;
  for (const auto& [k, v] : records)
    size += io::BatchBuilder::max_record_size(k.size(), v ? v->size() : 0);
  std::vector<std::byte> buf(size);
  io::BatchBuilder b(buf);
  const std::int64_t now = wall_ms();
  for (const auto& [k, v] : records) {
    io::BatchBuilder::Bytes value = std::nullopt;
    if (v) value = std::span<const std::byte>(*v);
    b.add(now, std::span<const std::byte>(k), value);
  }
  buf.resize(b.finish().size());
  ++stats_.batches_written;
  std::vector<std::string> keys;
  keys.reserve(records.size());
  for (const auto& [k, v] : records) {
    keys.emplace_back(reinterpret_cast<const char*>(k.data()), k.size());
    ++in_flight_keys_[keys.back()];
  }
  store_->append(
      partition, std::move(buf),
      [this, keys = std::move(keys), done = std::move(done)](std::optional<io::Error> err) mutable {
        for (const auto& k : keys) {
          auto it = in_flight_keys_.find(k);
          if (it != in_flight_keys_.end() && --it->second == 0) in_flight_keys_.erase(it);
        }
        done(std::move(err));
      });
}

void GroupCoordinator::on_rewrite_timer(io::Timer* t) {
  auto* self = static_cast<RewriteTimer*>(t)->self;
  if (self->shutting_down_) return;
  self->rewrite_state();
  if (self->opts_.state_rewrite_interval_ms > 0)
    self->reactor_.arm(t, mono_ns() + self->opts_.state_rewrite_interval_ms * 1'000'000);
}

void GroupCoordinator::rewrite_state() {
  if (shutting_down_ || partitions_ <= 0) return;
  // Batches stay well below the topic's max.message.bytes (1 MiB by default).
  constexpr std::size_t kChunkBytes = 512u << 10;
  std::vector<std::vector<const Group*>> by_partition(static_cast<std::size_t>(partitions_));
  for (const auto& [id, g] : groups_)
    if (g->state != GroupState::dead)
      by_partition[static_cast<std::size_t>(g->partition)].push_back(g.get());
  std::size_t total = 0;
  for (std::int32_t p = 0; p < partitions_; ++p) {
    if (load_state_[static_cast<std::size_t>(p)] != LoadState::loaded) continue;
    std::vector<std::pair<Bytes, std::optional<Bytes>>> chunk;
    std::size_t chunk_bytes = 0;
    auto add = [&](Bytes key, Bytes value) {
      if (in_flight_keys_.count(std::string(reinterpret_cast<const char*>(key.data()), key.size())))
        return;
      chunk_bytes += key.size() + value.size() + 32;
      chunk.emplace_back(std::move(key), std::move(value));
      if (chunk_bytes >= kChunkBytes) {
        total += chunk.size();
        store_records(p, chunk, [p](std::optional<io::Error> err) {
          if (err)
            LOG_WARN("rewriting the state of %s-%d failed: %s", kOffsetsTopic.data(), p,
                     err->detail.c_str());
        });
        chunk.clear();
        chunk_bytes = 0;
      }
    };
    for (const Group* g : by_partition[static_cast<std::size_t>(p)]) {
      const bool settled = g->state == GroupState::stable || g->state == GroupState::empty;
      if (settled && (!g->protocol_type.empty() || g->generation > 0))
        add(encode_key(GroupKey{g->id}), encode_value(group_value(*g)));
      for (const auto& [tp, v] : g->offsets)
        add(encode_key(OffsetKey{g->id, tp.first, tp.second}), encode_value(v));
    }
    if (!chunk.empty()) {
      total += chunk.size();
      store_records(p, chunk, [p](std::optional<io::Error> err) {
        if (err)
          LOG_WARN("rewriting the state of %s-%d failed: %s", kOffsetsTopic.data(), p,
                   err->detail.c_str());
      });
    }
  }
  stats_.records_rewritten += total;
  LOG_INFO("group coordinator: rewrote %zu records of live state", total);
}

}  // namespace samsa::coordinator
