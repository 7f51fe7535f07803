// coordinator::GroupCoordinator — Kafka's classic consumer group protocol (JoinGroup,
// SyncGroup, Heartbeat, LeaveGroup) and committed offsets, for every group whose
// __consumer_offsets partition this node leads (on a single node: all of them; on a cluster
// broker: those activate() names, as leadership moves).
//
// Threading: one thread ("coordinator") with its own io::Reactor owns this object; every
// method is called on that thread and every callback is invoked on it, either before the call
// returns (answers known at once) or later (a JoinGroup parked until the rebalance completes, a
// commit acknowledged once its batch is durable). Session, rebalance and initial-delay timeouts
// are timers on that reactor. State is kept in memory and written to __consumer_offsets through
// an OffsetsStore; start() (or activate(), partition by partition) replays those partitions
// (last write wins, tombstones delete), groups of a partition still loading answer
// COORDINATOR_LOAD_IN_PROGRESS, and those of a partition led elsewhere NOT_COORDINATOR.
//
// The request structs are the protocol's content without its wire versions; the daemon maps
// versions (MEMBER_ID_REQUIRED from JoinGroup v4, per-member LeaveGroup from v3, ...) onto
// them. Error codes are Kafka's.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/kafka_errors.h"
#include "coordinator/producer_ids.h"
#include "coordinator/records.h"
#include "coordinator/store.h"
#include "io/reactor.h"

namespace samsa::coordinator {

using kafka::ErrorCode;

enum class GroupState : std::uint8_t {
  empty,
  preparing_rebalance,
  completing_rebalance,
  stable,
  dead
};
// Kafka's names: "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead".
std::string_view state_name(GroupState s);

struct Protocol {
  std::string name;
  Bytes metadata;
  bool operator==(const Protocol&) const = default;
};

struct JoinRequest {
  std::string group_id;
  std::string member_id;  // "" for a member joining for the first time
  std::optional<std::string> group_instance_id;
  std::string client_id;
  std::string client_host;
  std::int32_t session_timeout_ms = 0;
  std::int32_t rebalance_timeout_ms = 0;
  std::string protocol_type;
  std::vector<Protocol> protocols;
  // JoinGroup v4+: a new dynamic member first gets MEMBER_ID_REQUIRED with its id.
  bool require_known_member_id = false;
  // JoinGroup v9+: a rejoining static leader may be told to keep the current assignment.
  bool supports_skip_assignment = false;
};

struct JoinMember {
  std::string member_id;
  std::optional<std::string> group_instance_id;
  Bytes metadata;
};

struct JoinResult {
  ErrorCode error = ErrorCode::none;
  std::int32_t generation = -1;
  std::optional<std::string> protocol_type;
  std::optional<std::string> protocol_name;
  std::string leader;
  std::string member_id;
  bool skip_assignment = false;
  std::vector<JoinMember> members;  // the leader's answer only
};

struct SyncRequest {
  std::string group_id;
  std::int32_t generation = -1;
  std::string member_id;
  std::optional<std::string> group_instance_id;
  std::optional<std::string> protocol_type;  // v5+, checked when given
  std::optional<std::string> protocol_name;
  std::vector<std::pair<std::string, Bytes>> assignments;  // the leader's
};

struct SyncResult {
  ErrorCode error = ErrorCode::none;
  std::optional<std::string> protocol_type;
  std::optional<std::string> protocol_name;
  Bytes assignment;
};

struct HeartbeatRequest {
  std::string group_id;
  std::int32_t generation = -1;
  std::string member_id;
  std::optional<std::string> group_instance_id;
};

struct LeaveMember {
  std::string member_id;  // "" with an instance id: an administrative removal
  std::optional<std::string> group_instance_id;
  std::optional<std::string> reason;
};

struct LeaveRequest {
  std::string group_id;
  std::vector<LeaveMember> members;
};

struct LeaveMemberResult {
  std::string member_id;
  std::optional<std::string> group_instance_id;
  ErrorCode error = ErrorCode::none;
};

struct LeaveResult {
  ErrorCode error = ErrorCode::none;
  std::vector<LeaveMemberResult> members;  // in request order
};

struct CommitPartition {
  std::string topic;
  std::int32_t partition = 0;
  std::int64_t offset = 0;
  std::int32_t leader_epoch = -1;
  std::optional<std::string> metadata;
};

struct CommitRequest {
  std::string group_id;
  std::int32_t generation = -1;  // -1: a commit from outside group management
  std::string member_id;
  std::optional<std::string> group_instance_id;
  std::int64_t retention_time_ms = -1;  // OffsetCommit v2-4; -1: the broker's retention
  std::vector<CommitPartition> partitions;
  // OffsetCommit v9+ answers GROUP_ID_NOT_FOUND (older versions ILLEGAL_GENERATION) for a
  // member commit to a group that does not exist.
  bool group_id_not_found_for_unknown_group = false;
  // TxnOffsetCommit (KIP-98, KIP-447): the offsets are written in the producer's transaction
  // and become visible only once its COMMIT marker reaches the group's partition.
  std::int64_t producer_id = -1;
  std::int16_t producer_epoch = -1;
};

// One error per requested partition, in request order.
using CommitResult = std::vector<ErrorCode>;

struct FetchTopic {
  std::string topic;
  std::vector<std::int32_t> partitions;
};

struct FetchRequest {
  std::string group_id;
  std::optional<std::vector<FetchTopic>> topics;  // nullopt: every committed offset
  bool require_stable = false;
};

struct FetchedOffset {
  std::string topic;
  std::int32_t partition = 0;
  std::int64_t offset = -1;
  std::int32_t leader_epoch = -1;
  std::string metadata;
  ErrorCode error = ErrorCode::none;
};

struct FetchResult {
  ErrorCode error = ErrorCode::none;  // group-level
  std::vector<FetchedOffset> offsets;
};

struct ListRequest {
  std::vector<std::string> states;  // Kafka's state names, any case; empty: all
  std::vector<std::string> types;   // "classic"/"consumer", any case; empty: all
};

struct ListedGroup {
  std::string group_id;
  std::string protocol_type;
  std::string state;
  std::string type = "classic";
};

struct ListResult {
  ErrorCode error = ErrorCode::none;
  std::vector<ListedGroup> groups;
};

struct DescribedMember {
  std::string member_id;
  std::optional<std::string> group_instance_id;
  std::string client_id;
  std::string client_host;
  Bytes metadata;    // only while Stable
  Bytes assignment;  // only while Stable
};

struct DescribedGroup {
  ErrorCode error = ErrorCode::none;
  std::string group_id;
  std::string state;
  std::string protocol_type;
  std::string protocol;  // the selected protocol, only while Stable
  std::vector<DescribedMember> members;
};

struct DeleteGroupResult {
  std::string group_id;
  ErrorCode error = ErrorCode::none;
};

struct OffsetDeleteRequest {
  std::string group_id;
  std::vector<std::pair<std::string, std::int32_t>> partitions;
};

struct OffsetDeleteResult {
  ErrorCode error = ErrorCode::none;  // group-level
  std::vector<ErrorCode> partitions;  // in request order
};

class GroupCoordinator {
 public:
  struct Options {
    std::int32_t initial_rebalance_delay_ms = 3000;              // group.initial.rebalance.delay.ms
    std::int32_t min_session_timeout_ms = 6000;                  // group.min.session.timeout.ms
    std::int32_t max_session_timeout_ms = 1800000;               // group.max.session.timeout.ms
    std::int64_t offsets_retention_ms = 7LL * 24 * 3600 * 1000;  // offsets.retention.minutes
    std::int64_t offsets_retention_check_interval_ms = 600000;
    std::int32_t max_metadata_bytes = 4096;  // offset.metadata.max.bytes
    // How long a member that joined but has not received its first JoinGroup answer may stay
    // without a heartbeat (Kafka's fixed 5 minutes).
    std::int32_t new_member_join_timeout_ms = 300000;
    // Where the logs are retried when a partition failed to load.
    std::int64_t load_retry_ms = 1000;
  };

  template <class T>
  using Done = std::move_only_function<void(T)>;

  // allocate_ids reserves producer id blocks (the controller, in samsad); without it
  // InitProducerId always answers COORDINATOR_LOAD_IN_PROGRESS.
  GroupCoordinator(io::Reactor& r, Options opts, std::unique_ptr<OffsetsStore> store,
                   ProducerIdManager::Allocate allocate_ids = {});
  ~GroupCoordinator();
  GroupCoordinator(const GroupCoordinator&) = delete;
  GroupCoordinator& operator=(const GroupCoordinator&) = delete;

  // Who leads the partitions of __consumer_offsets.
  enum class Leadership : std::uint8_t {
    all,      // a single node: every partition, from start() on
    elected,  // a cluster broker: those activate() names, until deactivate()
  };
  // Starts serving with the offsets topic's partition count. Until then every group answers
  // COORDINATOR_NOT_AVAILABLE. Leadership::all replays every partition now; with
  // Leadership::elected no partition is served until activate() (groups of the others answer
  // NOT_COORDINATOR). Later calls do nothing.
  void start(std::int32_t partitions, Leadership leadership = Leadership::all);
  // This node leads partition p in leader_epoch (Kafka's onElection): p is replayed (its groups
  // answer COORDINATOR_LOAD_IN_PROGRESS meanwhile), then served. A partition already loading
  // or served only takes the newer epoch; an epoch older than p's last activation or
  // resignation is stale and ignored.
  void activate(std::int32_t p, std::int32_t leader_epoch);
  // This node no longer leads p as of leader_epoch (Kafka's onResignation): p's groups are
  // dropped from memory (requests parked in them are answered NOT_COORDINATOR), a replay in
  // flight is discarded when it ends, writes in flight are answered NOT_COORDINATOR, and p's
  // groups answer NOT_COORDINATOR until the next activate(). Stale when leader_epoch is older
  // than the epoch p is served in: ignored then.
  void deactivate(std::int32_t p, std::int32_t leader_epoch);
  // p is loading or served (activated and not resigned since).
  bool active(std::int32_t p) const;
  // p has been replayed and is served.
  bool serving(std::int32_t p) const;
  // Stops serving: parked JoinGroup/SyncGroup requests are answered NOT_COORDINATOR at once,
  // new requests get COORDINATOR_NOT_AVAILABLE; writes in flight still complete.
  void shutdown();

  bool started() const { return partitions_ > 0; }
  // Every partition this node leads has been replayed.
  bool loaded() const;
  std::int32_t partitions() const { return partitions_; }
  std::int32_t partition_of(std::string_view group) const {
    return partition_for(group, partitions_);
  }
  const Options& options() const { return opts_; }
  void set_options(const Options& o);

  void join_group(JoinRequest req, Done<JoinResult> done);
  void sync_group(SyncRequest req, Done<SyncResult> done);
  void heartbeat(HeartbeatRequest req, Done<ErrorCode> done);
  void leave_group(LeaveRequest req, Done<LeaveResult> done);
  void commit_offsets(CommitRequest req, Done<CommitResult> done);
  void fetch_offsets(FetchRequest req, Done<FetchResult> done);
  void list_groups(ListRequest req, Done<ListResult> done);
  void describe_groups(std::vector<std::string> groups, Done<std::vector<DescribedGroup>> done);
  void delete_groups(std::vector<std::string> groups, Done<std::vector<DeleteGroupResult>> done);
  void delete_offsets(OffsetDeleteRequest req, Done<OffsetDeleteResult> done);
  // A transaction marker of producer_id was written to partition p of __consumer_offsets: the
  // offsets its TxnOffsetCommits left pending there are committed (commit) or dropped.
  void complete_txn(std::int32_t p, std::int64_t producer_id, bool commit);
  // Producer ids of idempotent producers (InitProducerId without a transactional id) are
  // handed out on this thread too (DESIGN.md: the coordinator owns producer ids).
  ProducerIdManager& producer_ids() { return producer_ids_; }

  // Runs the offsets expiry now (normally on a timer): Empty groups' offsets older than the
  // retention are deleted, and with them groups left with nothing.
  void expire_offsets(std::int64_t now_ms);

  // For tests and the admin socket: a group's state, generation and member ids (join order).
  struct GroupSnapshot {
    GroupState state = GroupState::dead;
    std::int32_t generation = 0;
    std::string protocol_type;
    std::optional<std::string> protocol;
    std::optional<std::string> leader;
    std::vector<std::string> members;
    std::size_t offsets = 0;
  };
  std::optional<GroupSnapshot> snapshot(std::string_view group) const;
  std::size_t group_count() const { return groups_.size(); }

  struct Stats {
    std::uint64_t rebalances = 0;       // generations completed
    std::uint64_t expired_members = 0;  // session timeouts
    std::uint64_t records_loaded = 0;
    std::uint64_t batches_written = 0;
    std::uint64_t partitions_loaded = 0;    // replays completed (activations that served)
    std::uint64_t partitions_unloaded = 0;  // resignations of loading or served partitions
  };
  const Stats& stats() const { return stats_; }

 private:
  struct Member;
  struct Group;
  struct PendingMember;
  enum class LoadState : std::uint8_t { inactive, loading, loaded, failed };
  // One partition of __consumer_offsets as this coordinator sees it.
  struct Slot {
    LoadState state = LoadState::inactive;
    // The leader epoch of the last activation or resignation.
    std::int32_t epoch = -1;
    // Bumped by every activation and resignation: a replay or a write started under an older
    // term finds its partition handed over since (a stale load is not applied, a write that
    // raced a resignation is answered NOT_COORDINATOR).
    std::uint64_t term = 0;
    bool failed_before = false;  // the load error was logged
    std::int64_t load_started_ns = 0;
  };

  // Common checks for a request about group_id: the coordinator serves, the partition is loaded.
  ErrorCode check_group_id(std::string_view group_id) const;
  Group* find_group(std::string_view group_id);
  const Group* find_group(std::string_view group_id) const;
  Group* create_group(const std::string& group_id);
  // Answers the requests parked in the group with parked_error.
  void erase_group(Group* g, ErrorCode parked_error = ErrorCode::unknown_member_id);

  // Loading.
  void load_partition(std::int32_t p);
  void unload_partition(std::int32_t p);
  void replay_batch(std::int32_t p, std::span<const std::byte> batch);
  void on_loaded(std::int32_t p, std::optional<io::Error> err);
  void apply_group_value(std::int32_t p, const std::string& group_id, GroupValue v);

  // Membership.
  void join_new_member(Group& g, JoinRequest& req, Done<JoinResult>& done);
  void join_known_member(Group& g, JoinRequest& req, Done<JoinResult>& done);
  void join_static_replacement(Group& g, Member& old, JoinRequest& req, Done<JoinResult>& done);
  // A static member's new id, stored while the group stayed stable: what to answer, or to undo
  // when the write failed.
  struct StaticSwap {
    std::string group_id;
    std::uint64_t incarnation = 0;
    std::string instance, old_id, new_id;
    std::optional<std::string> old_leader;
    std::vector<Protocol> old_protocols;
    std::int32_t old_rebalance = 0;
    std::int32_t old_session = 0;
    bool skip = false;
  };
  void finish_static_swap(const StaticSwap& s, Done<JoinResult> cb,
                          const std::optional<io::Error>& err);
  Member& add_member(Group& g, JoinRequest& req, std::string id, Done<JoinResult> done);
  void update_member(Group& g, Member& m, JoinRequest& req, Done<JoinResult> done);
  // Takes a member out (answering whatever it waits for with UNKNOWN_MEMBER_ID); remove_member
  // then moves the group on (rebalance, or completing a join that waited only for it).
  void drop_member(Group& g, const std::string& id);
  void remove_member(Group& g, Member& m, const char* why);
  void remove_pending_member(Group& g, const std::string& id);
  void maybe_prepare_rebalance(Group& g, const std::string& why);
  void prepare_rebalance(Group& g, const std::string& why);
  void try_complete_join(Group& g);
  void complete_join(Group& g);
  void complete_sync(Group& g, std::int32_t generation, std::map<std::string, Bytes> assignments,
                     std::optional<io::Error> err);
  void reset_and_propagate_sync_error(Group& g, ErrorCode e);
  JoinResult join_result(const Group& g, const Member& m, bool with_members) const;
  std::string select_protocol(const Group& g) const;
  bool supports_protocols(const Group& g, const std::string& type,
                          const std::vector<Protocol>& protocols) const;
  // Validates member id and instance id against the group (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID).
  ErrorCode validate_member(const Group& g, const std::string& member_id,
                            const std::optional<std::string>& instance_id) const;
  void touch_member(Member& m, std::int64_t timeout_ms);
  std::int32_t rebalance_timeout(const Group& g) const;
  std::optional<std::set<std::string>> subscribed_topics(const Group& g) const;

  // Timers.
  static void on_heartbeat_expired(io::Timer* t);
  static void on_pending_expired(io::Timer* t);
  static void on_join_timer(io::Timer* t);
  static void on_sync_timer(io::Timer* t);
  static void on_expiry_timer(io::Timer* t);
  static void on_load_retry(io::Timer* t);

  // Storage.
  GroupValue group_value(const Group& g) const;
  // producer_id/epoch: a transactional batch of that producer (TxnOffsetCommit).
  void store_records(std::int32_t partition,
                     const std::vector<std::pair<Bytes, std::optional<Bytes>>>& records,
                     OffsetsStore::AppendDone done, std::int64_t producer_id = -1,
                     std::int16_t producer_epoch = -1);
  // TxnOffsetCommit's member checks (Kafka's: a named member must exist, a given generation
  // must be the group's); none to go ahead.
  ErrorCode check_txn_commit(const Group& g, const CommitRequest& req) const;

  io::Reactor& reactor_;
  Options opts_;
  std::unique_ptr<OffsetsStore> store_;
  ProducerIdManager producer_ids_;
  std::int32_t partitions_ = 0;
  Leadership leadership_ = Leadership::all;
  std::vector<Slot> slots_;
  std::size_t loading_ = 0;  // partitions loading or failed (retried)
  bool shutting_down_ = false;
  std::uint64_t next_incarnation_ = 1;
  std::unordered_map<std::string, std::unique_ptr<Group>> groups_;
  struct ExpiryTimer : io::Timer {
    GroupCoordinator* self = nullptr;
  } expiry_timer_;
  struct RetryTimer : io::Timer {
    GroupCoordinator* self = nullptr;
  } retry_timer_;
  Stats stats_;
};

}  // namespace samsa::coordinator
