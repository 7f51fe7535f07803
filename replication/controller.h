// replication::Controller — the single writer of cluster metadata: it drives ControllerState
// (which decides every change and produces its records) over the __cluster_metadata log. It
// appends the records (durably), reports each commit to the state machine, publishes the
// committed image to every reactor, and answers a change only after its records are synced
// AND every reactor has applied the image, so a client that created a topic can produce to it
// on any connection at once. A failed write reverts the state machine's uncommitted tail.
//
// Runs on its own reactor thread ("controller"); every method is called on that thread.
// (A Raft quorum will later sit between "append" and "commit"; the records do not change.)
#pragma once

#include <cstdint>
#include <deque>
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
#include "replication/topic_config.h"

namespace samsa::replication {

// What a metadata Fetch gets from the controller's log (committed records only).
struct MetadataRead {
  kafka::ErrorCode error = kafka::ErrorCode::none;
  std::int64_t high_watermark = 0;  // next offset to commit
  std::int64_t log_start_offset = 0;
  std::vector<std::byte> batches;  // whole record batches from the asked offset
};

class Controller {
 public:
  // How often the controller looks for brokers whose session expired.
  static constexpr std::int64_t kTickMs = 50;
  // single: the one-node samsad (places every replica here). controller: a cluster's
  // controller node (ControllerState drives registrations, heartbeats, fencing, elections and
  // placement over the registered brokers; the log is served to brokers). broker: no log of
  // its own; the image is built from the controller's log as the broker fetches it
  // (apply_fetched), and changes are forwarded to the controller by the daemon.
  enum class Mode : std::uint8_t { single, controller, broker };

  struct Options {
    Mode mode = Mode::single;
    std::int64_t session_timeout_ms = 1500;  // broker.session.timeout.ms (controller mode)
    // auto.leader.rebalance.enable / leader.imbalance.check.interval.seconds (controller mode)
    bool auto_leader_rebalance = true;
    std::int64_t leader_imbalance_check_ms = 300'000;
    std::int32_t node_id = 1;
    io::LogDir* log_dir = nullptr;  // where __cluster_metadata-0 lives
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
  };

  Controller(io::Reactor& r, Options opts);
  ~Controller();

  // Opens the metadata log and replays it into the first image (published before returning).
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
  // Reserves a block of producer ids durably for a broker (broker_epoch -1: unchecked, the
  // single node's own coordinator); done runs once the block's record is synced.
  void allocate_producer_ids(std::int32_t broker_id, std::int64_t broker_epoch,
                             std::function<void(ProducerIdsAnswer)> done);

  // A reactor finished applying the image of this version.
  void applied(std::size_t reactor, std::int64_t version);

  // Flushes and closes the metadata log (shutdown).
  io::Result<void> close();

  Mode mode() const { return opts_.mode; }

  // ---- controller mode (replication/controller_cluster.cc) ----
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
  // A leader's ISR changes (AlterPartition), one answer per item in order; the accepted ones
  // are committed (one batch) before done runs.
  void alter_partition(std::vector<AlterPartitionItem> items,
                       std::function<void(std::vector<AlterPartitionAnswer>)> done);
  // Committed metadata from offset: at once when there is some, else once some commits or
  // max_wait_ms passes.
  void read_metadata(std::int64_t offset, std::int32_t max_bytes, std::int32_t max_wait_ms,
                     std::function<void(MetadataRead)> done);

  // Shutdown: parked metadata reads answer now and new ones no longer wait (so the daemon's
  // drain is not held up by brokers' long polls).
  void stop_waiting_reads();

  // ---- broker mode ----
  // Record batches fetched from the controller's log, in order from the image's offset + 1,
  // and the controller's high watermark. Publishes the new image (the first call publishes
  // even when nothing changed: the reactors open their listeners on the first image).
  void apply_fetched(std::span<const std::byte> batches, std::int64_t high_watermark);
  // fn runs once every reactor has applied an image of at least this version.
  void when_applied(std::int64_t version, std::function<void()> fn);
  bool published() const { return published_; }

 private:
  struct Commit;
  // Appends the records a ControllerState request returned (already in its working view), each
  // group within one batch (so it survives a power cut whole or not at all; groups empty: one
  // group), groups packed into batches of about kBatchBytes. then(ok) runs once they are
  // synced, committed and applied by every reactor; ok false when a write failed (the state
  // machine's proposals from there on were reverted).
  void commit(std::vector<MetadataRecord> records, std::vector<std::size_t> groups,
              std::function<void(bool)> then);
  void on_piece_done(Commit* c, std::size_t piece);
  void on_committed(Commit* c);
  void publish();
  void run_waiters();
  void on_tick();
  void serve_parked_reads();
  MetadataRead read_now(std::int64_t offset, std::int32_t max_bytes);

  io::Reactor& reactor_;
  Options opts_;
  std::unique_ptr<io::Log> log_;
  ImagePtr image_;
  std::vector<std::int64_t> applied_;  // per reactor
  struct Waiter {
    std::int64_t version;
    std::function<void()> fn;
  };
  std::vector<Waiter> waiters_;
  // Single and controller modes: the state machine (decisions, working and committed views).
  std::unique_ptr<ControllerState> state_;
  // Controller mode.
  struct TickTimer : io::Timer {
    Controller* self = nullptr;
  } tick_;
  std::int64_t next_rebalance_ms_ = 0;  // auto.leader.rebalance.enable's next check
  struct ParkedRead {
    std::int64_t offset;
    std::int32_t max_bytes;
    std::int64_t deadline_ms;
    std::function<void(MetadataRead)> done;
  };
  std::vector<ParkedRead> parked_reads_;
  bool no_waiting_reads_ = false;
  // Broker mode.
  bool published_ = false;
};

}  // namespace samsa::replication
