// replication::ControllerState — the controller's state machine, with no I/O: every decision
// the controller makes (topics, partitions, configs, producer-id blocks, broker registrations
// and their sessions, partitions' leaders, ISRs and epochs, elections, placement) and the
// records that carry it.
//
// Decisions see every record already generated, committed or not (Kafka's QuorumController
// rule): each request is decided from the *working* view, which runs ahead of the commit, and
// its records join that view at once, so the next request sees them. Two AllocateProducerIds
// in one commit window get disjoint blocks; a CreatePartitions racing a DeleteTopics sees the
// deletion. The *committed* view follows as the driver reports commits; it is what brokers and
// reactors are shown. When a write fails, the uncommitted tail is reverted (revert_to) and the
// working view is rebuilt from the committed one plus what is still in flight.
//
// It sits behind the interface a Raft quorum will later drive unchanged:
//  - replay(record, offset): every committed record, in log order (restart, standby);
//  - the requests (create_topics, register_broker, heartbeat, alter_partition, tick, ...)
//    return the records to propose and the answer to send once they commit;
//  - commit(offset) as the quorum commits, revert_to(offset) when proposals are lost;
//  - snapshot(): records that rebuild the committed state;
//  - on_become_active / on_resign: leader events.
// MetadataQuorum is where proposals go: the single-node quorum appends them to a local log and
// commits once it is synced.
// Time is passed in. Used by one thread (the controller's).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <deque>
#include <functional>
#include <memory>

#include "base/kafka_errors.h"
#include "replication/metadata_image.h"
#include "replication/metadata_records.h"
#include "replication/replica_state.h"
#include "replication/topic_config.h"

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
  // The single-node samsad (no cluster settings): every replica on node_id, no registrations.
  bool single_node = false;
  std::int32_t node_id = 1;
  // Topic creation: defaults and bounds (checked from the counts before any record is built:
  // partitions on this broker, samsa.max.partitions, and partitions one request may add,
  // Kafka's own cap of 10000).
  TopicDefaults defaults;
  std::int32_t default_partitions = 1;
  std::int16_t default_replication_factor = 1;
  bool delete_topic_enable = true;
  std::int64_t max_partitions = 100000;
  std::int64_t max_partitions_per_request = 10000;
  // Dynamic broker settings are the daemon's: whether key=value may be set at run time
  // (nullopt: yes; else the INVALID_REQUEST message) and a key's effective value (for
  // APPEND/SUBTRACT). Unset: broker changes refused.
  std::function<std::optional<std::string>(const std::string& key,
                                           const std::optional<std::string>& value)>
      validate_broker_config;
  std::function<std::string(const std::string& key)> broker_config_value;
  // New topic ids (unset: random_uuid(); the simulation passes a seeded generator).
  std::function<Uuid()> new_topic_id;
  // Producer ids per AllocateProducerIds (Kafka's controller hands out blocks of 1000).
  std::int32_t producer_id_block = 1000;
  // Test only (the simulation's broken variant): topic, partition, config and producer-id
  // decisions read the committed view instead of the working one, as samsa's controller did
  // before issue 17. Must make the controller simulation fail.
  bool testing_decide_from_committed = false;
};

struct TopicSpec {
  std::string name;
  std::int32_t partitions = -1;          // -1: num.partitions
  std::int16_t replication_factor = -1;  // -1: default.replication.factor
  std::map<std::string, std::string> configs;
  // Replicas of each partition, chosen by the client (kafka-topics --replica-assignment);
  // empty: the controller places them. partitions and replication_factor then match them.
  std::vector<std::vector<std::int32_t>> assignments;
};

struct TopicOutcome {
  std::string name;
  kafka::ErrorCode error = kafka::ErrorCode::none;
  std::string message;
  Uuid id{};
  std::int32_t partitions = -1;
  std::int16_t replication_factor = -1;
};

struct DeleteOutcome {
  std::string name;
  Uuid id{};
  kafka::ErrorCode error = kafka::ErrorCode::none;
  std::string message;
};

// IncrementalAlterConfigs' operations (Kafka's wire codes).
enum class ConfigOpType : std::int8_t { set = 0, remove = 1, append = 2, subtract = 3 };

struct ConfigOp {
  std::string key;
  ConfigOpType op = ConfigOpType::set;
  std::optional<std::string> value;
};

// The changes to one resource, applied all together or not at all.
struct ConfigAlteration {
  ConfigResource resource = ConfigResource::topic;
  std::string name;  // topic name; for brokers this node's id, or "" for the cluster default
  std::vector<ConfigOp> ops;
  bool replace = false;  // AlterConfigs (legacy): overrides the request does not name are removed
};

struct ConfigOutcome {
  kafka::ErrorCode error = kafka::ErrorCode::none;
  std::string message;
};

// One alteration of AlterUserScramCredentials: a credential to set (derived from the salted
// password by the request's handler), or one to remove.
struct ScramAlteration {
  bool remove = false;
  UserScramCredentialRecord credential;  // remove: only name and mechanism
};

// Per user, as Kafka answers: the first error among the user's alterations (none of them is
// applied then).
struct ScramOutcome {
  std::string user;
  kafka::ErrorCode error = kafka::ErrorCode::none;
  std::string message;
};

// CreateAcls, per ACL; DeleteAcls, per filter with the ACLs it matched (each deleted).
struct AclOutcome {
  kafka::ErrorCode error = kafka::ErrorCode::none;
  std::string message;
  std::vector<AclBinding> matching;  // DeleteAcls only
};

// AlterClientQuotas: one entry's operations, applied together or not at all.
struct QuotaAlteration {
  QuotaEntity entity;  // as the request names it (any order)
  struct Op {
    std::string key;
    double value = 0;
    bool remove = false;
  };
  std::vector<Op> ops;
};

struct QuotaOutcome {
  kafka::ErrorCode error = kafka::ErrorCode::none;
  std::string message;
};

struct PartitionsSpec {
  std::string name;
  std::int32_t count = 0;  // the new total
  // Replicas of each new partition (empty: the controller picks).
  std::vector<std::vector<std::int32_t>> assignments;
};

struct PartitionsOutcome {
  std::string name;
  kafka::ErrorCode error = kafka::ErrorCode::none;
  std::string message;
};

// One partition of AlterPartitionReassignments: its target replicas, or nullopt to cancel.
struct ReassignmentSpec {
  std::string topic;
  std::int32_t partition = 0;
  std::optional<std::vector<std::int32_t>> replicas;
};

struct ReassignmentOutcome {
  kafka::ErrorCode error = kafka::ErrorCode::none;
  std::string message;
};

struct UnregisterAnswer {
  kafka::ErrorCode error = kafka::ErrorCode::none;
  std::string message;
};

// A block of producer ids: [first, first + length).
struct ProducerIdsAnswer {
  kafka::ErrorCode error = kafka::ErrorCode::none;
  std::int64_t first = -1;
  std::int32_t length = 0;
};

struct BrokerRegistration {
  std::int32_t broker_id = -1;
  Uuid incarnation_id{};
  std::vector<BrokerEndpoint> endpoints;
  std::optional<std::string> rack;
  std::vector<Uuid> log_dirs;  // directory ids (KIP-858); empty: not told
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
  // Consecutive runs of records that must share one metadata batch (whole or absent after a
  // power cut), by size; empty: all the records are one run.
  std::vector<std::size_t> groups;
  Answer answer;
};

class ControllerState {
 public:
  explicit ControllerState(ControllerStateOptions opts = {});

  ControllerStateOptions& options() { return opts_; }

  // ---- the state machine ----
  // A committed record at offset, in log order (replaying the log at start; a standby). Only
  // while nothing is proposed. Returns false when the record contradicts what came before (it
  // is skipped, as replay carries on).
  bool replay(const MetadataRecord& r, std::int64_t offset);
  // An undecodable committed record: only the offset moves.
  void skip(std::int64_t offset);
  // Every record proposed up to offset is committed: it joins the committed view.
  void commit(std::int64_t offset);
  // The proposals from offset on are lost (a failed write, a lost leadership): they leave the
  // working view, and the next proposal gets offset.
  void revert_to(std::int64_t offset);
  std::vector<MetadataRecord> snapshot() const;
  // The working view: the committed records and every proposal since (what decisions read).
  const MetadataImage& image() const { return working(); }
  // The committed view (what brokers and reactors are shown), and its last offset.
  // Sealed (its authorizer built) before it is handed out: a sealed image is never changed
  // again (the next commit copies it), so other threads may read it.
  ImagePtr committed_image() const {
    committed_->seal();
    return committed_;
  }
  std::int64_t committed_offset() const { return committed_->offset(); }
  std::size_t uncommitted() const { return pending_.size(); }
  // The offset the next proposed record gets.
  std::int64_t next_offset() const { return next_offset_; }
  // Proposals the working view refused to apply (a decision built on a stale view: a bug).
  std::uint64_t refused_proposals() const { return refused_proposals_; }
  // Brokers registered, unfenced and not shutting down (what placement spreads over).
  std::vector<std::int32_t> usable_brokers() const;
  // How many brokers placement may use (the single node: 1).
  std::int32_t live_brokers() const;
  // Replicas of `partitions` new partitions with `replication_factor` copies each over the usable
  // brokers, striped over their racks as Kafka's StripedReplicaPlacer does (each partition's
  // replicas span min(RF, racks) racks; without racks the round robin from a rotating start), so
  // leaders (first of each list) spread over racks and brokers too. nullopt when the factor
  // exceeds them.
  std::optional<std::vector<std::vector<std::int32_t>>> place(std::int32_t partitions,
                                                              std::int16_t replication_factor);

  // ---- leader events ----
  // Every broker gets a full session from now (heartbeat clocks are not in the log).
  void on_become_active(std::int64_t now_ms, std::int64_t next_offset);
  void on_resign() { active_ = false; }
  bool active() const { return active_; }

  // ---- requests (controller_topics.cc, controller_configs.cc) ----
  // CreateTopics: a request adding more than max_partitions_per_request partitions is refused
  // whole (POLICY_VIOLATION, as Kafka does). With partial (Metadata auto-creation) topics are
  // taken in order while they fit and the rest are refused. Each topic's records are one group.
  Proposal<std::vector<TopicOutcome>> create_topics(std::vector<TopicSpec> specs,
                                                    bool validate_only, bool partial = false);
  Proposal<std::vector<PartitionsOutcome>> create_partitions(std::vector<PartitionsSpec> specs,
                                                             bool validate_only);
  // Each entry names a topic by name or (when name is empty) by id.
  Proposal<std::vector<DeleteOutcome>> delete_topics(
      const std::vector<std::pair<std::string, Uuid>>& topics);
  // Topic configs and dynamic broker settings, one outcome per alteration.
  Proposal<std::vector<ConfigOutcome>> alter_configs(std::vector<ConfigAlteration> changes,
                                                     bool validate_only);
  // A block of producer ids for a broker (broker_epoch -1: the single node's own coordinator).
  Proposal<std::vector<ScramOutcome>> alter_scram_credentials(std::vector<ScramAlteration> changes);
  // CreateAcls and DeleteAcls (controller_acls.cc), with Kafka's AclControlManager rules.
  Proposal<std::vector<AclOutcome>> create_acls(const std::vector<AclBinding>& acls);
  Proposal<std::vector<AclOutcome>> delete_acls(const std::vector<AclBindingFilter>& filters);
  // AlterClientQuotas (controller_quotas.cc), Kafka's ClientQuotaControlManager rules.
  Proposal<std::vector<QuotaOutcome>> alter_client_quotas(std::vector<QuotaAlteration> changes,
                                                          bool validate_only);
  Proposal<ProducerIdsAnswer> allocate_producer_ids(std::int32_t broker_id,
                                                    std::int64_t broker_epoch);

  // ---- cluster requests (controller_state.cc) ----
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
  // `heard_only`: a preferred replica must also have been heard from by this controller since
  // it became active (auto rebalance).
  Proposal<std::vector<ElectionResult>> elect_leaders(
      bool unclean, const std::vector<std::pair<std::string, std::int32_t>>* which,
      bool heard_only = false);
  // auto.leader.rebalance.enable: preferred elections wherever they would succeed, to brokers
  // that heartbeat to this controller. A new controller gives every registered broker a full
  // session before it fences any: an unreachable one (the old controller's own broker, in
  // combined mode) would otherwise be handed leaderships it cannot serve until then.
  std::vector<MetadataRecord> rebalance_leaders();

  // ---- reassignment and decommissioning (controller_reassign.cc) ----
  // AlterPartitionReassignments, one outcome per partition in order (Kafka's rules; the
  // file's header has the life of a reassignment).
  Proposal<std::vector<ReassignmentOutcome>> alter_partition_reassignments(
      const std::vector<ReassignmentSpec>& specs, bool allow_rf_change);
  // UnregisterBroker: the broker is fenced, leaves every ISR it can and leads nothing, and its
  // registration is removed. A broker that is still running registers again.
  Proposal<UnregisterAnswer> unregister_broker(std::int32_t id);

 private:
  // The working view, caught up with the committed one after a replay.
  const MetadataImage& working() const;
  MetadataImage& working();
  // What topic, partition, config and producer-id decisions read: the working view (the
  // committed one only in the broken test variant).
  const MetadataImage& decision_view() const {
    return opts_.testing_decide_from_committed ? *committed_ : working();
  }
  // Proposes a record: it joins the working view at once (see the header comment).
  void emit(std::vector<MetadataRecord>& out, MetadataRecord r);
  // ---- leaderships, ISRs and ELRs (controller_leaders.cc) ----
  // Partition changes when broker id stops being usable (fenced or shutting down): it leaves
  // every ISR that keeps a usable member, and its leaderships move.
  void move_away_from(std::int32_t id, std::vector<MetadataRecord>& out);
  // Broker id's log dirs were replaced (its replicas hold nothing): it leaves every ISR and ELR.
  void forget_replicas(std::int32_t id, std::vector<MetadataRecord>& out);
  // Leaderless partitions with a usable ISR (else ELR) member get it as leader.
  void elect_leaderless(std::vector<MetadataRecord>& out);
  bool usable(std::int32_t id) const;
  std::size_t min_insync(const TopicState& t) const;
  // p's ISR becoming `isr` (and its leader `leader`, or kNoLeaderChange), with the ELR that
  // follows: members leaving an ISR below min.insync.replicas join it, members in the ISR leave
  // it, and an ISR at min.insync.replicas or above needs none.
  PartitionChangeRecord isr_change(const TopicState& t, const PartitionState& p,
                                   std::vector<std::int32_t> isr, std::int32_t leader) const;
  // The first usable replica in `isr`, else in p's ELR (replica order), other than `leaving`
  // (a broker on its way out); -1: none.
  std::int32_t clean_leader(const PartitionState& p, const std::vector<std::int32_t>& isr,
                            std::int32_t leaving = -1) const;
  // p's change when its ISR becomes `isr` and its leader is leader_now (-1: one is needed;
  // an ELR member elected leads with an ISR of itself); nullopt when nothing changes.
  std::optional<PartitionChangeRecord> elect_clean(const TopicState& t, const PartitionState& p,
                                                   std::vector<std::int32_t> isr,
                                                   std::int32_t leader_now,
                                                   std::int32_t leaving = -1) const;
  bool broker_registered(std::int32_t id) const;
  // Reassignment (controller_reassign.cc): why a target replica list cannot be taken; one
  // partition's outcome; and the change that completes p's reassignment once every adding
  // replica is in its ISR (nothing otherwise).
  std::optional<std::string> check_reassignment(const std::vector<std::int32_t>& target) const;
  ReassignmentOutcome reassign_one(const ReassignmentSpec& s, bool allow_rf_change,
                                   std::vector<MetadataRecord>& out);
  void complete_reassignment(const TopicState& t, const PartitionState& p,
                             std::vector<MetadataRecord>& out);
  Uuid new_topic_id();
  // Emits a new topic's records as one group; returns its id.
  Uuid emit_topic(std::vector<MetadataRecord>& out, std::vector<std::size_t>& groups,
                  const TopicSpec& s, std::int32_t partitions, std::int16_t rf);
  // Why CreatePartitions' manual assignments cannot be taken (or nullopt).
  std::optional<std::string> check_assignments(
      const std::vector<std::vector<std::int32_t>>& assignments, std::size_t rf) const;
  // One alteration of alter_configs: its outcome, and its records when it is valid.
  ConfigOutcome alter_one(const ConfigAlteration& a, bool validate_only,
                          std::vector<MetadataRecord>& records);

  ControllerStateOptions opts_;
  // Committed view (shared with the reactors once published: copied on write) and the working
  // view ahead of it; working_ is stale after a replay until first read.
  std::shared_ptr<MetadataImage> committed_;
  mutable MetadataImage working_;
  mutable bool working_stale_ = false;
  struct Pending {
    std::int64_t offset;
    MetadataRecord record;
  };
  std::deque<Pending> pending_;  // proposed, not committed, in offset order
  std::int64_t next_offset_ = 0;
  std::uint64_t refused_proposals_ = 0;
  bool active_ = false;
  std::map<std::int32_t, std::int64_t> last_heartbeat_ms_;
  std::set<std::int32_t> heard_since_active_;  // heartbeats or registrations since activation
  std::int32_t placement_start_ = 0;
};

}  // namespace samsa::replication
