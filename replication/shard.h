// replication::Shard — the partitions one reactor owns (DESIGN.md decision 5). A partition
// belongs to the shard owner(topic, partition) picks; work for it from another reactor is
// posted to that shard's reactor, never shared under a lock.
//
// The shard follows the metadata image: apply(image) opens the logs of new partitions it owns
// (creating their directories), and closes and removes those whose topic is gone.
#pragma once

#include <cstddef>
#include <expected>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "io/cleaner.h"
#include "io/log_dir.h"
#include "io/reactor.h"
#include "io/retention.h"
#include "replication/metadata_image.h"
#include "replication/partition.h"
#include "replication/topic_config.h"

namespace samsa::replication {

class Shard {
 public:
  struct Options {
    std::size_t index = 0;
    std::size_t count = 1;
    std::vector<io::LogDir*> log_dirs;  // partitions of a new topic go to the least loaded one
    TopicDefaults defaults;
    // Runs retention on this shard's logs (and removes deleted partition directories); may
    // be null in tests.
    io::RetentionDeleter* retention = nullptr;
    // Compacts this shard's logs whose cleanup.policy has compact (null in tests).
    io::LogCleaner* cleaner = nullptr;
    PartitionOptions partition;  // idempotent producers' settings
    // producer.id.expiration.check.interval.ms
    std::int64_t producer_expiration_check_ms = 600'000;
    // A cluster node's id: only partitions with a replica here are opened, and find() gives
    // only those it leads. -1 (a single node): every partition, always led here.
    std::int32_t node_id = -1;
    // This process's broker registration: partitions are led here only while the image holds it
    // unfenced (not the previous incarnation's, whose unsynced tail a restart lost).
    Uuid incarnation_id{};
    // A cluster node's replicas each get a ReplicaState (broker_id is node_id; min.insync.replicas
    // comes from the topic), kept in step with the image by apply().
    ReplicaOptions replica;
    // The ReplicaStates' high watermarks are the partitions' (Partition::enable_replica).
    bool replica_hw = false;
  };

  Shard(io::Reactor& r, Options opts);
  ~Shard();

  // Which shard owns a partition. Stable for a given count.
  static std::size_t owner(std::string_view topic, std::int32_t partition, std::size_t count);
  bool owns(std::string_view topic, std::int32_t partition) const {
    return owner(topic, partition, opts_.count) == opts_.index;
  }

  io::Reactor& reactor() { return reactor_; }
  std::size_t index() const { return opts_.index; }
  // The partition a client names, led here, at the leader epoch the client knows (-1: not
  // checked); or Kafka's error for it, decided in this one place: UNKNOWN_TOPIC_OR_PARTITION,
  // KAFKA_STORAGE_ERROR (its log failed to open), NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH,
  // UNKNOWN_LEADER_EPOCH. With any_replica (a consumer's Fetch v11+, KIP-392) a follower replica
  // whose HW is the ISR's serves too, its leader epoch checked the same way.
  std::expected<Partition*, kafka::ErrorCode> lookup(std::string_view topic, std::int32_t partition,
                                                     std::int32_t current_leader_epoch = -1,
                                                     bool any_replica = false);
  // The partition if this node leads it (what clients may produce to and fetch from).
  Partition* find(std::string_view topic, std::int32_t partition);
  // The local replica, led here or not.
  Partition* find_replica(std::string_view topic, std::int32_t partition);
  const ImagePtr& image() const { return image_; }
  // This process's registration epoch in the image (-1 while it has none): what a leader's
  // AlterPartition and a follower's Fetch carry.
  std::int64_t broker_epoch() const { return broker_epoch_; }

  // Reconciles with a newer image (on this shard's reactor). Logs that fail to open are
  // reported and left closed; their partitions answer KAFKA_STORAGE_ERROR.
  void apply(ImagePtr image);
  // New broker defaults (config reload): every open log gets its recomputed config.
  void set_defaults(TopicDefaults defaults);
  void set_partition_options(const PartitionOptions& o);

  // Closes every log cleanly; call when no request can reach the shard any more. Logs with
  // appends in flight are closed once those finish (drive the reactor until done() is true).
  void close_all();
  bool closed() const { return partitions_.empty() && closing_.empty(); }

  std::size_t partition_count() const { return partitions_.size(); }
  template <class F>
  void for_each(F&& f) {
    for (auto& [key, p] : partitions_)
      f(*p);
  }

  // Partitions whose logs could not be opened (storage error), by "topic-partition".
  const std::map<std::string, std::string>& failed() const { return failed_; }

 private:
  using Key = std::pair<std::string, std::int32_t>;
  struct KeyLess {
    using is_transparent = void;
    bool operator()(const Key& a, const Key& b) const { return a < b; }
    bool operator()(const Key& a, const std::pair<std::string_view, std::int32_t>& b) const {
      return std::pair<std::string_view, std::int32_t>(a.first, a.second) < b;
    }
    bool operator()(const std::pair<std::string_view, std::int32_t>& a, const Key& b) const {
      return a < std::pair<std::string_view, std::int32_t>(b.first, b.second);
    }
  };

  io::LogDir* dir_for(const io::PartitionId& id);
  void set_aside_strays();
  void open_partition(const TopicState& t, const PartitionState& p);
  void open_partitions(
      const std::vector<std::pair<const TopicState*, const PartitionState*>>& parts);
  // Gives the replica its ReplicaState if it has none, and applies the partition's metadata.
  void sync_replica(Partition& part, const TopicState& t, const PartitionState& p);
  void retire(std::unique_ptr<Partition> p, bool remove_data);
  void finish_retired();
  bool retiring(std::string_view topic, std::int32_t partition) const;

  io::Reactor& reactor_;
  Options opts_;
  ImagePtr image_;
  std::map<Key, std::unique_ptr<Partition>, KeyLess> partitions_;
  struct Retired {
    std::unique_ptr<Partition> partition;
    bool remove_data;
    io::LogDir* dir;
  };
  std::map<Partition*, std::shared_ptr<io::RetentionDeleter::Registration>> retention_regs_;
  std::map<Partition*, std::shared_ptr<io::LogCleaner::Registration>> cleaner_regs_;
  std::vector<Retired> closing_;
  std::map<std::string, std::string> failed_;
  // Topics with a partition this shard should hold but has not opened (open failed, or its
  // predecessor still retiring): apply() looks at them again even when the image did not
  // change them.
  std::set<std::string, std::less<>> unsettled_;
  bool strays_checked_ = false;
  bool registered_ = true;          // this process's registration is in the image, unfenced
  std::int64_t broker_epoch_ = -1;  // this process's registration's epoch, -1 if none
  struct RetryTimer : io::Timer {
    Shard* shard = nullptr;
  } retry_timer_;
  RetryTimer expiry_timer_;  // producer.id.expiration.check.interval.ms
  void expire_producers();
};

}  // namespace samsa::replication
