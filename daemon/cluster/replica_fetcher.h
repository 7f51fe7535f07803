// replication::ReplicaFetcher — the follower side of data replication on one reactor: one
// outbound connection (net::ClientConnection, of whichever backend Options::connect makes) per
// source broker that leads a partition this
// shard follows, at the leader's inter-broker listener as the image gives it. Each connection
// carries one Fetch at a time with the replica fields (ReplicaState: node id and broker epoch;
// per partition the leader epoch and the last fetched epoch, from ReplicaState::next_fetch).
// The batches that come back are appended with io::Log::append_replicated (the leader's
// offsets, never reassigned) as durable appends; the next Fetch on that connection goes out
// only once every one of them is synced, so the offset a follower reports is on disk. A
// diverging-epoch answer truncates through ReplicaState::on_fetch_response.
//
// Thread: the shard's reactor; every call on it. reconcile() after each Shard::apply.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

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
  struct Source;
  struct Slot;
  using Key = std::pair<std::string, std::int32_t>;

  void try_send(Source& s);
  void on_response(Source& s, net::Buffer frame);
  void on_appended(Slot& slot);
  void arm_retry();
  static void on_retry(io::Timer* t);

  io::Reactor& r_;
  replication::Shard& shard_;
  Options opts_;
  Stats stats_;
  bool stopped_ = false;
  std::map<std::int32_t, std::unique_ptr<Source>> sources_;  // by leader id
  std::map<Key, std::unique_ptr<Slot>> slots_;               // follower partitions' appends
  struct RetryTimer : io::Timer {
    ReplicaFetcher* self = nullptr;
  } retry_;
};

}  // namespace samsa::cluster
