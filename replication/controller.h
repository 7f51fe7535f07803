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
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/log.h"
#include "io/log_dir.h"
#include "io/reactor.h"
#include "net/kafka/errors.h"
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

struct ConfigChange {
  ConfigResource resource = ConfigResource::topic;
  std::string name;  // topic name, or "" for broker-wide
  std::string key;
  std::optional<std::string> value;  // nullopt: remove the override
};

class Controller {
 public:
  struct Options {
    std::int32_t node_id = 1;
    io::LogDir* log_dir = nullptr;  // where __cluster_metadata-0 lives
    TopicDefaults defaults;
    std::int32_t default_partitions = 1;
    std::int16_t default_replication_factor = 1;
    std::int32_t live_brokers = 1;
    bool delete_topic_enable = true;
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

  using CreateDone = std::function<void(std::vector<TopicOutcome>)>;
  using DeleteDone = std::function<void(std::vector<DeleteOutcome>)>;
  using ConfigDone = std::function<void(std::vector<std::pair<kafka::ErrorCode, std::string>>)>;

  void create_topics(std::vector<TopicSpec> specs, bool validate_only, CreateDone done);
  // Each entry names a topic by name or (when name is empty) by id.
  void delete_topics(std::vector<std::pair<std::string, Uuid>> topics, DeleteDone done);
  void alter_configs(std::vector<ConfigChange> changes, bool validate_only, ConfigDone done);
  // Reserves a block of producer ids durably; done(first id) or done(-1) on failure.
  void allocate_producer_ids(std::int32_t block, std::function<void(std::int64_t)> done);

  // A reactor finished applying the image of this version.
  void applied(std::size_t reactor, std::int64_t version);

  // Flushes and closes the metadata log (shutdown).
  io::Result<void> close();

 private:
  struct Pending;
  struct Commit;
  // Appends records as one batch; calls then(ok) after they are synced and applied.
  void commit(std::vector<MetadataRecord> records, std::function<void(bool)> then);
  void on_committed(Commit* c);
  void publish();
  void run_waiters();

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
};

}  // namespace samsa::replication
