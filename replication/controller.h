// replication::Controller — the cluster metadata's driver on this node. It runs the node's part
// of the controller quorum (quorum::RaftNode over the __cluster_metadata log, KRaft's protocol)
// and, on the quorum's leader, ControllerState, which decides every change and produces its
// records: the active controller appends them, and a change counts once the quorum commits it
// (a majority holds it durably). Every node applies committed records only, in log order, into
// the image it publishes to its reactors; a change is answered after it is committed AND every
// reactor has applied the image that holds it, so a client that created a topic can produce to
// it on any connection at once.
//
// Roles: a voter (process.roles with controller; a single node is a quorum of itself) or an
// observer (process.roles=broker: a local copy of the log in metadata.log.dir, fetched from the
// leader, replayed at start up to what was known committed, so a restarted broker serves from
// its own image at once). Peers are reached through Options::quorum.send (the daemon's
// QuorumPeers); their requests arrive through the on_* calls below.
//
// Runs on its own reactor thread ("controller"); every method is called on that thread.
#pragma once

#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/kafka_errors.h"
#include "io/log.h"
#include "io/log_dir.h"
#include "io/reactor.h"
#include "replication/controller_state.h"
#include "replication/metadata_image.h"
#include "replication/quorum/raft.h"
#include "replication/replica_log.h"
#include "replication/topic_config.h"

namespace samsa::replication {

namespace quorum {
class FileSnapshotStore;
}

class Controller {
 public:
  // How often the active controller looks for brokers whose session expired.
  static constexpr std::int64_t kTickMs = 50;
  // single: the one-node samsad (a quorum of itself; places every replica here). controller:
  // a voter of a cluster's quorum (process.roles=controller, with controller.quorum.voters);
  // while it leads, ControllerState drives registrations,
  // heartbeats, fencing, elections and placement over the registered brokers. broker: an
  // observer (a broker's local copy of the log); changes are forwarded to the active
  // controller by the daemon. combined: a voter, as controller, on a node that is a broker too
  // (process.roles=broker,controller with other voters): its first image waits for the
  // catch-up, as a broker's does, since its shards hold partitions.
  enum class Mode : std::uint8_t { single, controller, broker, combined };

  struct QuorumOptions {
    // controller.quorum.voters' ids; empty: this node alone (single, or a controller without
    // voters configured). A broker lists them, or learns the leader through `bootstrap`.
    std::vector<quorum::NodeId> voters;
    // An observer that knows no leader asks these (the ids QuorumPeers gives the bootstrap
    // servers); empty: the voters.
    std::vector<quorum::NodeId> bootstrap;
    std::int64_t election_timeout_ms = 1000;      // controller.quorum.election.timeout.ms
    std::int64_t fetch_timeout_ms = 2000;         // controller.quorum.fetch.timeout.ms
    std::int64_t election_backoff_max_ms = 1000;  // controller.quorum.election.backoff.max.ms
    // metadata.log.max.record.bytes.between.snapshots / metadata.log.max.snapshot.interval.ms
    std::int64_t snapshot_bytes = 20 << 20;
    std::int64_t snapshot_interval_ms = 3'600'000;
    std::string cluster_id;
    // Sends a request to another node (the daemon's QuorumPeers); its answer comes back
    // through on_vote_response and the like, or on_request_failed.
    std::function<void(const quorum::Outgoing&)> send;
    // The leader this node knows changed (any thread may need it: the daemon keeps a copy).
    std::function<void(quorum::NodeId leader, std::int32_t epoch)> on_leader;
  };

  struct Options {
    Mode mode = Mode::single;
    std::int64_t session_timeout_ms = 1500;  // broker.session.timeout.ms (controller mode)
    // auto.leader.rebalance.enable / leader.imbalance.check.interval.seconds (controller mode)
    bool auto_leader_rebalance = true;
    std::int64_t leader_imbalance_check_ms = 300'000;
    std::int32_t node_id = 1;
    io::LogDir* log_dir = nullptr;  // where __cluster_metadata-0 lives (metadata.log.dir)
    TopicDefaults defaults;
    std::int32_t default_partitions = 1;
    std::int16_t default_replication_factor = 1;
    bool delete_topic_enable = true;
    // Bounds checked before any record is built: partitions on this broker
    // (samsa.max.partitions) and partitions one request may add (Kafka's own cap: 10000).
    std::int64_t max_partitions = 100000;
    std::int64_t max_partitions_per_request = 10000;
    // Producer ids per AllocateProducerIds (Kafka's: 1000).
    std::int32_t producer_id_block = 1000;
    // Dynamic broker settings (ConfigRecords of broker resources) are the daemon's: it says
    // whether key=value may be set at run time (nullopt: yes; else the INVALID_REQUEST message)
    // and what a key's effective value is (for APPEND/SUBTRACT). Unset: broker changes refused.
    std::function<std::optional<std::string>(const std::string& key,
                                             const std::optional<std::string>& value)>
        validate_broker_config;
    std::function<std::string(const std::string& key)> broker_config_value;
    // Hands a new image to every reactor; each answers with applied(reactor, image->offset()).
    std::function<void(ImagePtr)> publish;
    std::size_t reactors = 1;
    QuorumOptions quorum;
  };

  Controller(io::Reactor& r, Options opts);
  ~Controller();

  // Opens the metadata log, its snapshots and the quorum state, loads the newest snapshot and
  // replays the records known committed into the first image (published before returning).
  io::Result<void> open();
  ImagePtr image() const { return image_; }
  // Reloaded settings (the state machine holds the live copy).
  void set_defaults(TopicDefaults d);
  void set_default_partitions(std::int32_t n);
  void set_delete_topic_enable(bool b);
  void set_max_partitions(std::int64_t per_broker, std::int64_t per_request);

  using CreateDone = std::function<void(std::vector<TopicOutcome>)>;
  using DeleteDone = std::function<void(std::vector<DeleteOutcome>)>;
  using ConfigDone = std::function<void(std::vector<ConfigOutcome>)>;
  using PartitionsDone = std::function<void(std::vector<PartitionsOutcome>)>;

  // Requests that change the metadata are decided on the active controller only; elsewhere
  // they answer NOT_CONTROLLER. A leader that is still committing its first record holds them
  // until it is active (a moment after an election).

  // CreateTopics: a request adding more than max_partitions_per_request partitions is refused
  // whole (POLICY_VIOLATION, as Kafka does). With partial (Metadata auto-creation) topics are
  // taken in order while they fit and the rest are refused. Each topic is created whole or not
  // at all, also across a power cut (its records share one metadata batch).
  void create_topics(std::vector<TopicSpec> specs, bool validate_only, CreateDone done,
                     bool partial = false);
  // Each entry names a topic by name or (when name is empty) by id.
  void delete_topics(std::vector<std::pair<std::string, Uuid>> topics, DeleteDone done);
  void create_partitions(std::vector<PartitionsSpec> specs, bool validate_only,
                         PartitionsDone done);
  // Topic configs and dynamic broker settings, one outcome per alteration.
  void alter_configs(std::vector<ConfigAlteration> changes, bool validate_only, ConfigDone done);
  // AlterUserScramCredentials: one outcome per user named.
  void alter_scram_credentials(std::vector<ScramAlteration> changes,
                               std::function<void(std::vector<ScramOutcome>)> done);
  // CreateAcls (one outcome per ACL) and DeleteAcls (one per filter).
  void create_acls(std::vector<AclBinding> acls, std::function<void(std::vector<AclOutcome>)> done);
  void delete_acls(std::vector<AclBindingFilter> filters,
                   std::function<void(std::vector<AclOutcome>)> done);
  void alter_client_quotas(std::vector<QuotaAlteration> changes, bool validate_only,
                           std::function<void(std::vector<QuotaOutcome>)> done);
  // AlterPartitionReassignments (ControllerState::alter_partition_reassignments), one outcome
  // per partition, committed before done runs. A single node has no other broker: every
  // target but its own replica list is INVALID_REPLICA_ASSIGNMENT.
  void alter_partition_reassignments(std::vector<ReassignmentSpec> specs, bool allow_rf_change,
                                     std::function<void(std::vector<ReassignmentOutcome>)> done);
  // Reserves a block of producer ids durably for a broker (broker_epoch -1: unchecked, the
  // single node's own coordinator); done runs once the block's record is committed.
  void allocate_producer_ids(std::int32_t broker_id, std::int64_t broker_epoch,
                             std::function<void(ProducerIdsAnswer)> done);

  // A reactor finished applying the image of this version.
  void applied(std::size_t reactor, std::int64_t version);
  // fn runs once every reactor has applied an image of at least this version, or after
  // max_wait_ms (>= 0) if that comes first: a node cut off from the quorum still answers.
  void when_applied(std::int64_t version, std::function<void()> fn, std::int64_t max_wait_ms = -1);

  // Flushes and closes the metadata log (shutdown).
  io::Result<void> close();

  Mode mode() const { return opts_.mode; }
  // This node leads the quorum and its state machine has caught up: it decides changes.
  bool active() const { return active_; }
  // Whether the first image has been published (a broker: once it knows what is committed).
  bool published() const { return published_; }

  // ---- cluster requests (replication/controller_cluster.cc) ----
  void register_broker(const BrokerRegistration& reg, std::function<void(RegistrationAnswer)> done);
  void broker_heartbeat(const Heartbeat& hb, std::function<void(HeartbeatAnswer)> done);
  // ElectLeaders (ControllerState::elect_leaders), committed before done runs. On a single
  // node every partition is led by its one replica: ELECTION_NOT_NEEDED.
  void elect_leaders(bool unclean,
                     std::optional<std::vector<std::pair<std::string, std::int32_t>>> which,
                     std::function<void(kafka::ErrorCode, std::vector<ElectionResult>)> done);
  // auto.leader.rebalance.enable and leader.imbalance.check.interval.seconds (controller mode).
  void set_leader_rebalance(bool enabled, std::int64_t interval_ms) {
    opts_.auto_leader_rebalance = enabled;
    opts_.leader_imbalance_check_ms = interval_ms;
  }
  // UnregisterBroker (ControllerState::unregister_broker), committed before done runs.
  void unregister_broker(std::int32_t id, std::function<void(UnregisterAnswer)> done);
  // A leader's ISR changes (AlterPartition), one answer per item in order; the accepted ones
  // are committed (one batch) before done runs.
  void alter_partition(std::vector<AlterPartitionItem> items,
                       std::function<void(std::vector<AlterPartitionAnswer>)> done);

  // ---- the quorum (replication/controller_quorum.cc) ----
  // Requests from other nodes. Each answer leaves only after the quorum state it depends on is
  // durable (the call returns once it is).
  quorum::VoteResponse on_vote(const quorum::VoteRequest& r);
  quorum::EpochResponse on_begin_epoch(const quorum::BeginEpochRequest& r);
  quorum::EpochResponse on_end_epoch(const quorum::EndEpochRequest& r);
  quorum::FetchSnapshotResponse on_fetch_snapshot(const quorum::FetchSnapshotRequest& r,
                                                  std::int64_t max_bytes);
  // A follower's or observer's Fetch of the log: answered at once, or held (long poll) until
  // the log or the high watermark moves or max_wait passes. records: whole batches from
  // fetch_offset.
  struct FetchReply {
    quorum::FetchAnswer answer;
    std::vector<std::byte> records;
  };
  void on_fetch(const quorum::FetchRequest& r, std::int32_t max_bytes,
                std::function<void(FetchReply)> done);
  // Answers to this node's own requests (ids from quorum::Outgoing).
  void on_vote_response(std::int64_t id, quorum::NodeId from, const quorum::VoteResponse& r);
  void on_epoch_response(std::int64_t id, quorum::NodeId from, const quorum::EpochResponse& r);
  void on_fetch_response(std::int64_t id, quorum::NodeId from, const quorum::FetchAnswer& a,
                         std::span<const std::byte> records);
  void on_fetch_snapshot_response(std::int64_t id, quorum::NodeId from,
                                  const quorum::FetchSnapshotResponse& r);
  void on_request_failed(std::int64_t id, quorum::NodeId to, bool unreachable);
  // Controlled shutdown: an active controller hands the leadership on (EndQuorumEpoch).
  void resign();
  // Shutdown: held fetches answer now and new ones are not held.
  void stop_waiting_reads();

  // What DescribeQuorum and samsactl show.
  struct QuorumView {
    quorum::Role role = quorum::Role::unattached;
    quorum::NodeId leader = -1;
    std::int32_t epoch = 0;
    std::int64_t high_watermark = -1;
    std::int64_t log_end_offset = 0;
    std::int64_t log_start_offset = 0;
    std::int64_t applied_offset = 0;  // every committed record below it is in the image
    std::optional<quorum::SnapshotId> snapshot;
    std::vector<quorum::NodeId> voters;
    std::vector<quorum::ReplicaProgress> replicas;  // the leader's view (voters and observers)
  };
  QuorumView quorum_view() const;

 private:
  struct Commit;
  struct Parked;
  // controller.cc: proposals. Appends the records a ControllerState request returned (already
  // in its working view) as batches of this leader's epoch, each group within one batch (so it
  // survives a power cut whole or not at all; groups empty: one group), groups packed into
  // batches of about kBatchBytes. then(error) runs once they are committed and applied by
  // every reactor (none), or with NOT_CONTROLLER when the leadership was lost first, or
  // KAFKA_STORAGE_ERROR when a write failed (the proposals from there on were reverted).
  void commit(std::vector<MetadataRecord> records, std::vector<std::size_t> groups,
              std::function<void(kafka::ErrorCode)> then);
  template <class Outcome>
  void commit_proposal(Proposal<std::vector<Outcome>> p,
                       std::function<void(std::vector<Outcome>)> done);
  void on_piece_done(Commit* c, std::size_t piece);
  void finish_commits();
  void fail_commits(kafka::ErrorCode why);
  // Runs fn now if this node is the active controller, later if it is becoming it, else
  // calls refuse (NOT_CONTROLLER).
  void when_active(std::function<void()> fn, std::function<void()> refuse);
  void publish();
  void run_waiters();

  // controller_cluster.cc
  void on_tick();

  // controller_quorum.cc
  io::Result<void> open_quorum();
  void load_committed();
  std::pair<std::size_t, std::size_t> replay_range(std::int64_t from, std::int64_t to);
  void drive();
  void persist(const quorum::QuorumState& s);
  void append_leader_change();
  void on_high_watermark();
  void apply_committed(std::int64_t hw);
  void activate();
  void deactivate(kafka::ErrorCode why);
  void on_log_durable();
  struct FollowerAppend;
  std::unique_ptr<FollowerAppend> own_append(std::vector<std::byte> bytes);
  void arm_raft_timer(std::int64_t next_ms);
  void wake_parked(bool expired_only);
  FetchReply fetch_now(const quorum::FetchRequest& r, std::int32_t max_bytes);
  void maybe_snapshot();
  bool install_snapshot(const quorum::SnapshotId& id, std::vector<MetadataRecord> records);
  void save_applied_offset(bool force);

  io::Reactor& reactor_;
  Options opts_;
  std::unique_ptr<io::Log> log_;
  std::unique_ptr<IoReplicaLog> raft_log_;
  std::unique_ptr<quorum::FileSnapshotStore> snapshots_;
  std::unique_ptr<quorum::RaftNode> raft_;
  std::filesystem::path quorum_state_file_;
  quorum::QuorumState persisted_;
  ImagePtr image_;
  std::vector<std::int64_t> applied_;  // per reactor
  struct Waiter {
    std::int64_t version;
    std::function<void()> fn;
    std::int64_t expire_ms = INT64_MAX;  // monotonic
  };
  // Runs the waiters whose max wait has passed; returns the next expiry (INT64_MAX: none).
  std::int64_t expire_waiters(std::int64_t now_ms);
  std::vector<Waiter> waiters_;
  // The state machine: replays what is committed on every node; decides on the active one.
  std::unique_ptr<ControllerState> state_;
  bool active_ = false;
  bool published_ = false;
  // The next offset to apply: every committed record below it is in state_.
  std::int64_t applied_offset_ = 0;
  std::int64_t applied_saved_ = 0;       // the appliedOffset last written to quorum-state
  std::int64_t applied_saved_ms_ = 0;    // when
  std::int64_t activation_offset_ = -1;  // a leader activates once its HW passes this
  std::vector<std::pair<std::function<void()>, std::function<void()>>> waiting_activation_;
  std::deque<std::unique_ptr<Commit>> commits_;    // in offset order
  std::vector<std::unique_ptr<Commit>> orphaned_;  // answered, writes still in flight
  std::int32_t last_leader_ = -2;
  std::int32_t last_leader_epoch_ = -1;
  quorum::Role last_role_ = quorum::Role::unattached;
  // Snapshots: bytes of records applied since the newest one, and when it was taken.
  std::int64_t size_at_snapshot_ = 0;  // the log's size when the newest was taken
  std::int64_t last_snapshot_ms_ = 0;
  bool snapshot_in_flight_ = false;
  struct RaftTimer : io::Timer {
    Controller* self = nullptr;
  } raft_timer_;
  std::int64_t raft_timer_at_ = INT64_MAX;
  // The active controller's session expiry and leader rebalance.
  struct TickTimer : io::Timer {
    Controller* self = nullptr;
  } tick_;
  std::int64_t next_rebalance_ms_ = 0;  // auto.leader.rebalance.enable's next check
  std::vector<std::unique_ptr<Parked>> parked_;
  bool no_waiting_reads_ = false;
  // Batches this node appends outside a commit (a follower's fetched ones, a new leader's
  // leader-change record) until their write completes.
  std::vector<std::unique_ptr<FollowerAppend>> own_appends_;
};

}  // namespace samsa::replication
