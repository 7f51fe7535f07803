// Internal to the coordinator library (not a public header): the group state GroupCoordinator
// keeps and the helpers its source files share. GroupCoordinator's methods live in
// coordinator.cc (construction, shutdown, group lookup and the helpers every request uses,
// ListGroups/DescribeGroups/DeleteGroups), join.cc (JoinGroup and the rebalance it drives),
// membership.cc (SyncGroup, Heartbeat, LeaveGroup), offsets.cc (OffsetCommit, OffsetFetch,
// OffsetDelete, offset expiry) and persistence.cc (replaying and writing __consumer_offsets).
#pragma once

#include <algorithm>
#include <string_view>

#include "base/clock.h"
#include "coordinator/coordinator.h"

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
  // TxnOffsetCommits awaiting their transaction's marker, per producer id.
  std::map<std::int64_t, std::map<std::pair<std::string, std::int32_t>, OffsetValue>> pending_txn;
  bool has_pending(const std::string& topic, std::int32_t partition) const {
    for (const auto& [pid, m] : pending_txn)
      if (m.contains({topic, partition})) return true;
    return false;
  }
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

constexpr std::string_view kConsumerProtocol = "consumer";

// Errors of a failed write, as Kafka reports a failed append to its own topic.
ErrorCode store_error(const io::Error& e);

}  // namespace samsa::coordinator
