// replication::ControllerState — the cluster controller's state machine, with no I/O: broker
// registrations and their sessions (heartbeats; fencing after broker.session.timeout.ms),
// partitions' leaders, ISRs and epochs, elections from the ISR when a leader is fenced or shuts
// down (unclean election off), AlterPartition validation, and replica placement for new topics.
//
// It sits behind the interface a Raft quorum will later drive unchanged:
//  - replay(record, offset): every committed record, in log order (standby controllers, restart);
//  - the active controller's requests (register_broker, heartbeat, alter_partition, tick, ...)
//    return the records to propose and the answer to send once they commit; the records are
//    replayed here at once (the active controller's view runs ahead of the commit, as Kafka's
//    does), so the next request sees them;
//  - snapshot(): records that rebuild the committed state;
//  - on_become_active / on_resign: leader events. After a resignation the driver rebuilds the
//    state from the committed snapshot and log (proposals not committed are gone).
// MetadataQuorum is where proposals go: the single-node quorum appends them to a local log and
// commits once it is synced.
// Time is passed in. Used by one thread (the controller's).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "net/kafka/errors.h"
#include "replication/metadata_image.h"
#include "replication/metadata_records.h"
#include "replication/replica_state.h"

namespace samsa::replication {

// Where the active controller's records go.
class MetadataQuorum {
 public:
  virtual ~MetadataQuorum() = default;
  // Appends the records as one batch (whole or absent after a failure); returns the offset the
  // last one gets. They are committed once committed_offset() reaches it.
  virtual std::int64_t propose(std::span<const MetadataRecord> records) = 0;
  virtual std::int64_t committed_offset() const = 0;
};

struct ControllerStateOptions {
  // broker.session.timeout.ms: samsa's default allows failover within 2 s (Kafka's is 9 s, with
  // broker.heartbeat.interval.ms 2 s against samsa's 250 ms).
  std::int64_t session_timeout_ms = 1500;
  // unclean.leader.election.enable: off; a partition whose ISR has no live member stays
  // without a leader (its last ISR member is kept in the ISR) until one returns.
  bool unclean_leader_election = false;
};

struct BrokerRegistration {
  std::int32_t broker_id = -1;
  Uuid incarnation_id{};
  std::vector<BrokerEndpoint> endpoints;
  std::optional<std::string> rack;
};

struct RegistrationAnswer {
  kafka::ErrorCode error = kafka::ErrorCode::none;
  std::int64_t broker_epoch = -1;
};

struct Heartbeat {
  std::int32_t broker_id = -1;
  std::int64_t broker_epoch = -1;
  std::int64_t current_metadata_offset = -1;  // how far the broker has applied the metadata
  bool want_fence = false;
  bool want_shut_down = false;
};

struct HeartbeatAnswer {
  kafka::ErrorCode error = kafka::ErrorCode::none;
  bool is_caught_up = false;
  bool is_fenced = true;
  bool should_shut_down = false;
};

// One partition of an AlterPartition request.
struct AlterPartitionItem {
  std::int32_t broker_id = -1;  // the request's BrokerId (the leader)
  std::int64_t broker_epoch = -1;
  Uuid topic_id{};
  std::int32_t partition = 0;
  AlterPartitionProposal proposal;
};

// One partition's outcome of ElectLeaders.
struct ElectionResult {
  std::string topic;
  std::int32_t partition = 0;
  kafka::ErrorCode error = kafka::ErrorCode::none;
  std::string message;
};

template <class Answer>
struct Proposal {
  std::vector<MetadataRecord> records;  // to propose; the answer goes out once they commit
  Answer answer;
};

class ControllerState {
 public:
  explicit ControllerState(ControllerStateOptions opts = {}) : opts_(opts) {}

  // ---- the state machine ----
  // A committed record at offset (or, on the active controller, one it proposed).
  void replay(const MetadataRecord& r, std::int64_t offset);
  std::vector<MetadataRecord> snapshot() const;
  const MetadataImage& image() const { return image_; }
  // The offset the next proposed record gets. A driver whose log also takes records from
  // elsewhere (topic and config changes of replication::Controller) moves it to the log's end.
  std::int64_t next_offset() const { return next_offset_; }
  void advance_next_offset(std::int64_t o) { next_offset_ = std::max(next_offset_, o); }
  // Brokers registered, unfenced and not shutting down (what placement spreads over).
  std::vector<std::int32_t> usable_brokers() const;
  // Replicas of `partitions` new partitions with `replication_factor` copies each over the usable
  // brokers, round robin from a rotating start, so leaders (first of each list) spread too.
  // nullopt when the factor exceeds the usable brokers.
  std::optional<std::vector<std::vector<std::int32_t>>> place(std::int32_t partitions,
                                                              std::int16_t replication_factor);

  // ---- leader events ----
  // Every broker gets a full session from now (heartbeat clocks are not in the log).
  void on_become_active(std::int64_t now_ms, std::int64_t next_offset);
  void on_resign() { active_ = false; }
  bool active() const { return active_; }

  // ---- the active controller's requests ----
  Proposal<RegistrationAnswer> register_broker(const BrokerRegistration& req, std::int64_t now_ms);
  Proposal<HeartbeatAnswer> heartbeat(const Heartbeat& hb, std::int64_t now_ms);
  Proposal<AlterPartitionAnswer> alter_partition(const AlterPartitionItem& req);
  // Brokers silent for broker.session.timeout.ms are fenced (their leaderships move).
  std::vector<MetadataRecord> tick(std::int64_t now_ms);
  // ElectLeaders. Preferred: the first replica leads again when it is in the ISR and usable
  // (ELECTION_NOT_NEEDED when it leads, PREFERRED_LEADER_NOT_AVAILABLE otherwise). Unclean: a
  // partition with no leader gets a usable ISR member, or else the first usable replica (the
  // ISR becomes that replica alone: records only the old ISR held may be lost), or
  // ELIGIBLE_LEADERS_NOT_AVAILABLE. `which` null: every partition, with results only for
  // those an election was needed for (as Kafka answers a null list).
  Proposal<std::vector<ElectionResult>> elect_leaders(
      bool unclean, const std::vector<std::pair<std::string, std::int32_t>>* which);
  // auto.leader.rebalance.enable: preferred elections wherever they would succeed.
  std::vector<MetadataRecord> rebalance_leaders();
  // A topic with partitions x replication_factor replicas spread over the unfenced brokers
  // (round robin from a rotating start), leaders first in each list. INVALID_REPLICATION_FACTOR
  // when it exceeds them.
  Proposal<kafka::ErrorCode> create_topic(const std::string& name, Uuid id, std::int32_t partitions,
                                          std::int16_t replication_factor);

 private:
  // Records applied to the view at once (see the header comment).
  void emit(std::vector<MetadataRecord>& out, MetadataRecord r);
  // Partition changes when broker id stops being usable (fenced or shutting down): it leaves
  // every ISR that keeps a usable member, and its leaderships move.
  void move_away_from(std::int32_t id, std::vector<MetadataRecord>& out);
  // Leaderless partitions whose ISR holds a usable broker get it as leader.
  void elect_leaderless(std::vector<MetadataRecord>& out);
  bool usable(std::int32_t id) const;

  ControllerStateOptions opts_;
  MetadataImage image_;
  std::int64_t next_offset_ = 0;
  bool active_ = false;
  std::map<std::int32_t, std::int64_t> last_heartbeat_ms_;
  std::int32_t placement_start_ = 0;
};

}  // namespace samsa::replication
