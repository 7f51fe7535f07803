// replication::Controller — the single writer of cluster metadata. It validates topic changes,
// appends them as records to the __cluster_metadata log (durably), applies them to a new
// MetadataImage and publishes it to every reactor. A change is answered only after the records
// are synced AND every reactor has applied the image, so a client that created a topic can
// produce to it on any connection at once.
//
// Runs on its own reactor thread ("controller"); every method is called on that thread.
// (A Raft quorum will later sit between "append" and "apply"; the records do not change.)
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

#include "io/log.h"
#include "io/log_dir.h"
#include "io/reactor.h"
#include "net/kafka/errors.h"
#include "replication/controller_state.h"
#include "replication/metadata_image.h"
#include "replication/topic_config.h"

namespace samsa::replication {

struct TopicSpec {
  std::string name;
  std::int32_t partitions = -1;          // -1: num.partitions
  std::int16_t replication_factor = -1;  // -1: default.replication.factor
  std::map<std::string, std::string> configs;
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
    std::int32_t node_id = 1;
    io::LogDir* log_dir = nullptr;  // where __cluster_metadata-0 lives
    TopicDefaults defaults;
    std::int32_t default_partitions = 1;
    std::int16_t default_replication_factor = 1;
    std::int32_t live_brokers = 1;
    bool delete_topic_enable = true;
    // Bounds checked before any record is built: partitions on this broker
    // (samsa.max.partitions) and partitions one request may add (Kafka's own cap: 10000).
    std::int64_t max_partitions = 100000;
    std::int64_t max_partitions_per_request = 10000;
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
  void set_defaults(TopicDefaults d) { opts_.defaults = std::move(d); }
  void set_default_partitions(std::int32_t n) { opts_.default_partitions = n; }
  void set_delete_topic_enable(bool b) { opts_.delete_topic_enable = b; }
  void set_max_partitions(std::int64_t per_broker, std::int64_t per_request) {
    opts_.max_partitions = per_broker;
    opts_.max_partitions_per_request = per_request;
  }

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
  // Reserves a block of producer ids durably; done(first id) or done(-1) on failure.
  void allocate_producer_ids(std::int32_t block, std::function<void(std::int64_t)> done);

  // A reactor finished applying the image of this version.
  void applied(std::size_t reactor, std::int64_t version);

  // Flushes and closes the metadata log (shutdown).
  io::Result<void> close();

  Mode mode() const { return opts_.mode; }

  // ---- controller mode (replication/controller_cluster.cc) ----
  void register_broker(const BrokerRegistration& reg, std::function<void(RegistrationAnswer)> done);
  void broker_heartbeat(const Heartbeat& hb, std::function<void(HeartbeatAnswer)> done);
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
  struct Pending;
  struct Commit;
  // Appends records as one batch; calls then(ok) after they are synced and applied.
  void commit(std::vector<MetadataRecord> records, std::function<void(bool)> then);
  // Several groups of records: each group stays within one batch (so it survives a power cut
  // whole or not at all); groups are packed into batches of about kBatchBytes.
  // in_state: the records came from state_ (already in its view); others are replayed into it
  // once committed.
  void commit_groups(std::vector<std::vector<MetadataRecord>> groups,
                     std::function<void(bool)> then, bool in_state = false);
  void on_piece_done(Commit* c);
  void on_committed(Commit* c);
  // The partition count a topic will have once changes in flight commit.
  std::int32_t pending_partitions(const TopicState& t) const;
  void publish();
  void run_waiters();
  // Controller mode: the records a ControllerState request returned (already in its view).
  void commit_state(std::vector<MetadataRecord> records, std::function<void(bool)> then);
  void on_tick();
  void serve_parked_reads();
  MetadataRead read_now(std::int64_t offset, std::int32_t max_bytes);
  // The replicas of n new partitions with rf copies (single: this node; controller: spread over
  // the usable brokers); nullopt when rf exceeds them.
  std::optional<std::vector<std::vector<std::int32_t>>> place(std::int32_t n, std::int16_t rf);
  std::int32_t live_brokers() const;
  bool broker_registered(std::int32_t id) const;

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
  // Topics being created or deleted by changes not yet committed (names reserved).
  std::map<std::string, int> in_flight_names_;
  // Partitions being added by changes not yet committed: in total, and per existing topic.
  std::int64_t in_flight_partitions_ = 0;
  std::map<std::string, std::int32_t> pending_counts_;
  // Config changes wait for the one being committed (see alter_configs).
  bool config_busy_ = false;
  std::deque<std::function<void()>> config_queue_;

  // Controller mode.
  std::unique_ptr<ControllerState> state_;
  struct TickTimer : io::Timer {
    Controller* self = nullptr;
  } tick_;
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
