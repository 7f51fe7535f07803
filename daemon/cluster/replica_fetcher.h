// replication::ReplicaFetcher — the follower side of data replication on one reactor: one
// outbound connection (net::ClientConnection, of whichever backend Options::connect makes) per
// source broker that leads a partition this
// shard follows, at the leader's inter-broker listener as the image gives it. Each connection
// carries one Fetch at a time with the replica fields (ReplicaState: node id and broker epoch;
// per partition the leader epoch and the last fetched epoch, from ReplicaState::next_fetch).
// The batches that come back are appended with io::Log::append_replicated (the leader's
// offsets, never reassigned) as durable appends; the next Fetch on that connection goes out
// only once every one of them is synced, so the offset a follower reports is on disk. A
// diverging-epoch answer truncates through ReplicaState::on_fetch_response. With a follower
// replication throttle (replication_throttle.h) a listed partition that has not caught up is left
// out of the Fetch while the broker's follower rate is exceeded, and the Fetch that goes without
// it waits at the leader no longer than the rate needs to come back under. While the rate is
// limited, the listed partitions travel on a connection of their own to each leader: a Fetch
// waits for its appends to sync, and the unlisted partitions' Fetch must not wait behind a
// catching-up replica's large ones.
//
// Thread: the shard's reactor; every call on it. reconcile() after each Shard::apply.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "daemon/cluster/replication_throttle.h"
#include "io/log.h"
#include "io/reactor.h"
#include "net/client_connection.h"
#include "replication/shard.h"

namespace samsa::cluster {

class ReplicaFetcher {
 public:
  struct Options {
    std::int32_t node_id = -1;
    std::string listener;  // inter.broker.listener.name: which endpoint of a leader to use
    std::int32_t max_wait_ms = 500;              // replica.fetch.wait.max.ms
    std::int32_t max_bytes = 10 << 20;           // replica.fetch.response.max.bytes
    std::int32_t partition_max_bytes = 1 << 20;  // replica.fetch.max.bytes
    std::int64_t backoff_ms = 100;  // replica.fetch.backoff.ms: retry when nothing could go
    // Test-only (ReplicaOptions::testing_fetch_from_memory): appends are answered once written,
    // not synced, and the next Fetch does not wait for them (Kafka's followers).
    bool testing_from_memory = false;
    // Makes the connection to a leader on the network backend that runs
    // (net::Backend::client_factory); empty: the uring one.
    net::ClientFactory connect;
    // The reactor's replication throttles (null: none).
    ReplicationThrottle* throttle = nullptr;
  };
  struct Stats {
    std::uint64_t fetches = 0;
    std::uint64_t batches_appended = 0;
    std::uint64_t bytes_appended = 0;
    std::uint64_t truncations = 0;
    std::uint64_t append_errors = 0;
  };

  ReplicaFetcher(io::Reactor& r, replication::Shard& shard, Options o);
  ~ReplicaFetcher();
  ReplicaFetcher(const ReplicaFetcher&) = delete;
  ReplicaFetcher& operator=(const ReplicaFetcher&) = delete;

  // The shard applied a new image: connections to the leaders of the partitions it follows
  // now (new ones opened, endpoints updated, unused ones closed), and fetches resumed.
  void reconcile();
  // Stops fetching (shutdown): connections close; appends in flight still complete.
  void stop();
  // Connections open to source brokers (for tests and metrics).
  std::size_t source_count() const { return sources_.size(); }
  const Stats& stats() const { return stats_; }

 private:
  struct Sent;  // a partition of a Fetch in flight
  struct Source;
  struct Slot;
  using Key = std::pair<std::string, std::int32_t>;
  // A connection: the leader, and whether it carries the partitions the follower throttle lists
  // (their own lane, so their appends never hold up the Fetch of the others).
  using SourceKey = std::pair<std::int32_t, bool>;

  void try_send(Source& s);
  void on_response(Source& s, net::Buffer frame);
  void on_appended(Slot& slot);
  // Whether the follower throttle holds p back from this Fetch; if not, what it reserved of the
  // quota for p's bytes (0: none).
  bool held_back(const replication::Partition& p, std::int64_t now_ms, std::int64_t& reserved);
  // The Fetch's partitions are answered (their got bytes; 0 when it failed): reservations
  // settled, listed partitions' bytes recorded.
  void settle(std::vector<Sent>& sent, std::int64_t now_ms);
  // Kafka's isReplicaInSync from a partition's answer: caught up with the leader's HW.
  void note_lag(const Key& key, std::int32_t leader_epoch, std::int64_t high_watermark,
                std::int64_t next_offset, bool brought_records);
  void arm_retry(std::int64_t delay_ms);
  void arm_retry() { arm_retry(opts_.backoff_ms); }
  static void on_retry(io::Timer* t);

  io::Reactor& r_;
  replication::Shard& shard_;
  Options opts_;
  Stats stats_;
  bool stopped_ = false;
  std::map<SourceKey, std::unique_ptr<Source>> sources_;
  std::set<Key> throttled_lane_;  // listed partitions while the follower rate is limited
  std::map<Key, std::unique_ptr<Slot>> slots_;  // follower partitions' appends
  // Per partition, whether it had caught up with its leader at the last answer that brought
  // records (in that leader epoch): such a partition is never throttled.
  struct Lag {
    std::int32_t leader_epoch = -1;
    bool caught_up = false;
  };
  std::map<Key, Lag> lag_;
  struct RetryTimer : io::Timer {
    ReplicaFetcher* self = nullptr;
  } retry_;
};

}  // namespace samsa::cluster
