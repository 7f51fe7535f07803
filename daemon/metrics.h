// Broker metrics in Prometheus' text format (samsactl metrics, samsa.metrics.listen).
//
// Each reactor owns a ReactorMetrics (plain integers, no atomics: only its thread writes it) and
// the io::Reactor's IoMetrics (fsync latency, group commit sizes). Collection posts a task to
// every reactor, which copies its counters and the state of its partitions into a
// ReactorSample; the coordinator contributes committed offsets for group lag; the admin thread
// merges the samples and renders the exposition. Nothing on the request path takes a lock.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/histogram.h"
#include "coordinator/txn_coordinator.h"
#include "daemon/cluster/replication_throttle.h"
#include "io/cleaner.h"
#include "io/reactor.h"
#include "net/backend.h"

namespace samsa::replication {
class Partition;
}

namespace samsa::daemon {

struct ReactorContext;

inline constexpr std::size_t kMaxApiKey = 128;
inline constexpr std::size_t kMaxApiVersion = 32;

// Counters of one reactor thread. Written only on that thread.
class ReactorMetrics {
 public:
  struct Api {
    std::array<LatencyHistogram, kMaxApiVersion> by_version;
  };
  struct Topic {
    std::uint64_t bytes_out = 0;  // record bytes sent to fetchers
  };
  // KIP-392: consumer Fetch requests this broker answered with a follower replica's records
  // (and those record bytes), and partitions its leaders sent to a preferred read replica.
  struct FollowerReads {
    std::uint64_t requests = 0;
    std::uint64_t bytes = 0;
    std::uint64_t redirects = 0;
  };

  // A request answered (or dropped) ns after it was decoded.
  void record_request(std::int16_t api, std::int16_t version, std::uint64_t ns) {
    if (api < 0 || static_cast<std::size_t>(api) >= kMaxApiKey || version < 0 ||
        static_cast<std::size_t>(version) >= kMaxApiVersion)
      return;
    auto& a = apis_[static_cast<std::size_t>(api)];
    if (!a) a = std::make_unique<Api>();  // once per api and reactor
    a->by_version[static_cast<std::size_t>(version)].record(ns);
  }
  void add_bytes_out(std::string_view topic, std::uint64_t bytes);
  FollowerReads& follower_reads() { return follower_reads_; }
  const FollowerReads& follower_reads() const { return follower_reads_; }

  // The reactor's 1 s beat: loop utilisation over the last beat.
  void on_beat(const io::Reactor& r, std::int64_t now_ns);
  double utilisation() const { return utilisation_; }
  std::int64_t started_ns() const { return started_ns_; }
  void set_started(std::int64_t ns) { started_ns_ = last_beat_ns_ = ns; }

  const std::array<std::unique_ptr<Api>, kMaxApiKey>& apis() const { return apis_; }
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, Topic, Hash, std::equal_to<>>& topics() { return topics_; }

 private:
  std::array<std::unique_ptr<Api>, kMaxApiKey> apis_;
  std::unordered_map<std::string, Topic, Hash, std::equal_to<>> topics_;
  FollowerReads follower_reads_;
  double utilisation_ = 0;
  std::int64_t started_ns_ = 0;
  std::int64_t last_beat_ns_ = 0;
  std::uint64_t last_idle_ns_ = 0;
};

// What a reactor reports at collection time (built on its thread, read on the admin thread).
struct PartitionSample {
  std::string topic;
  std::int32_t partition = 0;
  std::int32_t leader_epoch = 0;
  std::int64_t log_start = 0;
  std::int64_t log_end = 0;
  std::int64_t high_watermark = 0;
  std::int64_t last_stable = 0;  // read_committed consumers read below this
  std::size_t open_txns = 0;     // transactions open here (or ended above the HW)
  std::size_t aborted_txns = 0;  // entries of the aborted-transaction index
  std::uint64_t size_bytes = 0;
  std::size_t segments = 0;
  std::size_t producers = 0;               // idempotent producers the partition tracks
  std::uint64_t bytes_in = 0;              // bytes written to the log since it was opened
  std::uint64_t batches_in = 0;            // appends since it was opened
  std::uint64_t duplicate_mismatches = 0;  // Partition::duplicate_mismatches
  bool fenced = false;
  std::string dir;
  // On a cluster node, the replica's state (ReplicaState): why an ISR or a HW does not move.
  struct Follower {
    std::int32_t id = -1;
    std::int64_t fetch_offset = -1;   // -1: not fetched in this leader epoch
    std::int64_t last_fetch_ms = -1;  // ago; -1: never
    std::int64_t caught_up_ms = -1;   // ago; -1: never
  };
  std::string role;  // "leader", "follower", "none"; empty: not replicated
  std::int32_t leader = -1;
  std::int32_t partition_epoch = -1;
  std::int64_t durable_end = 0;
  std::vector<std::int32_t> isr;
  std::vector<std::int32_t> maximal_isr;
  std::vector<Follower> followers;       // leader only
  std::int64_t fetch_in_flight_ms = -1;  // follower: age of its fetch in flight; -1: none
  std::int64_t pending_truncation = -1;  // follower: a truncation waiting for idle; -1: none
  // cleanup.policy has compact: the cleaner's view of the log (io::Log::CompactionInfo).
  bool compacted = false;
  double dirty_ratio = 0;
  std::int64_t first_dirty = 0;
  std::int64_t last_clean_ms = -1;  // ago; -1: not since the log was opened
  std::uint64_t clean_passes = 0;
};

// One partition's sample, on its reactor's thread.
PartitionSample sample_partition(replication::Partition& p);

struct ReactorSample {
  std::size_t index = 0;
  double utilisation = 0;
  std::uint64_t idle_ns = 0;
  std::uint64_t alive_ns = 0;
  std::uint64_t turns = 0;
  std::uint64_t stalls = 0;  // io::Reactor::stalls()
  std::int64_t longest_turn_ns = 0;
  std::uint64_t turn_yields = 0;  // io::TurnQueue::yields()
  std::vector<std::pair<std::pair<std::int16_t, std::int16_t>, LatencyHistogram>> requests;
  std::map<std::string, std::uint64_t> topic_bytes_out;
  std::vector<PartitionSample> partitions;
  std::map<std::string, std::string> failed_partitions;
  io::Reactor::IoMetrics io;
  std::size_t open_segment_files = 0;  // io::OpenFiles of the reactor
  std::size_t open_segment_files_budget = 0;
  io::OpenFiles::Stats segment_files;
  std::uint64_t connections = 0;
  std::uint64_t accepted = 0;
  std::uint64_t closed = 0;
  std::uint64_t backpressure_pauses = 0;
  std::uint64_t net_bytes_in = 0;
  std::uint64_t net_bytes_out = 0;
  std::uint64_t in_flight = 0;
  // A cluster broker's replication (Kafka's ReplicaManager metrics).
  std::uint64_t led_partitions = 0;
  std::uint64_t under_replicated = 0;    // led here with an ISR smaller than the replicas
  std::uint64_t under_min_isr = 0;       // led here with an ISR below min.insync.replicas
  std::uint64_t offline_partitions = 0;  // reactor 0 only: partitions with no leader (image)
  std::uint64_t isr_shrinks = 0;
  std::uint64_t isr_expands = 0;
  std::uint64_t replica_fetches = 0;
  std::uint64_t replica_bytes_in = 0;
  std::uint64_t replica_truncations = 0;
  ReactorMetrics::FollowerReads follower_reads;
};

// On the reactor's thread.
ReactorSample sample_reactor(ReactorContext& ctx, bool with_partitions = true);

struct GroupOffsetSample {
  std::string topic;
  std::int32_t partition = 0;
  std::int64_t committed = -1;
};
struct GroupSample {
  std::string group;
  std::string state;
  std::size_t members = 0;
  std::vector<GroupOffsetSample> offsets;
};

// The transaction coordinator's counters (its thread's), for the transactional ids this node
// coordinates.
struct TxnCoordinatorSample {
  coordinator::TxnCoordinator::Stats stats;
  std::size_t transactional_ids = 0;
};

// io_uring's worker threads of this process now ("iou-wrk-N" in /proc/self/task): the kernel
// starts one per punted request (buffered writes, fdatasync), up to the per-ring cap.
std::size_t count_io_workers();

struct BrokerSample {
  std::string version;
  std::int32_t node_id = 0;
  std::string cluster_id;
  double uptime_s = 0;
  double start_time_s = 0;     // unix time
  std::size_t io_workers = 0;  // io_uring's worker threads now (count_io_workers)
  std::vector<std::optional<ReactorSample>> reactors;  // nullopt: did not answer in time
  std::optional<std::vector<GroupSample>> groups;
  std::optional<TxnCoordinatorSample> txn;
  std::int64_t metadata_offset = -1;
  std::size_t topics = 0;
  const net::Backend* backend = nullptr;  // its own families (dpdk: samsa_dpdk_*)
  std::optional<io::LogCleaner::Stats> cleaner;
  // A cluster broker's replication throttles, leader side then follower side.
  std::optional<std::array<cluster::ReplicationQuota::Stats, 2>> replication_throttles;
};

// Prometheus text exposition format 0.0.4.
std::string render_prometheus(const BrokerSample& s);

// Lag of a committed offset against a partition's high watermark (never negative).
inline std::int64_t lag_of(std::int64_t high_watermark, std::int64_t committed) {
  return committed < 0 || high_watermark < committed ? 0 : high_watermark - committed;
}

}  // namespace samsa::daemon
