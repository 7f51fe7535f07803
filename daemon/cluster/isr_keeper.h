// replication::IsrKeeper — the leader side of ISR changes on one reactor (Kafka's
// AlterPartitionManager). Every interval it asks each partition this shard leads whether its
// ISR must change (ReplicaState::poll_isr: a follower behind for replica.lag.time.max.ms
// leaves, a caught-up one joins), sends the proposals to the controller as one AlterPartition
// request (v3: members with their broker epochs) and hands each partition its answer
// (ReplicaState::on_alter_partition_answer). The high watermark waits for the maximal ISR, so
// until a lagging follower is out of the committed ISR acks=all waits for it; this is what lets
// it go.
//
// The keeper does not know how the controller is reached: the daemon gives it a Send that
// forwards the request frame (its broker's cluster link) and calls back on this reactor.
//
// Thread: the shard's reactor; every call on it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/reactor.h"
#include "replication/shard.h"

namespace samsa::cluster {

class IsrKeeper {
 public:
  // The controller's answer frame (correlation id first, no size prefix), or nullopt when it
  // could not be reached. Runs on the keeper's reactor.
  using Done = std::function<void(std::optional<std::vector<std::byte>>)>;
  // Sends a request frame (header and body, no size prefix) to the controller.
  using Send = std::function<void(std::vector<std::byte>, Done)>;

  struct Options {
    std::int32_t node_id = -1;
    std::int64_t interval_ms = 100;
  };
  struct Stats {
    std::uint64_t requests = 0;   // AlterPartition requests sent
    std::uint64_t shrinks = 0;    // ISR changes the controller accepted that removed a member
    std::uint64_t expands = 0;    // ... that added one
    std::uint64_t refusals = 0;   // partitions answered with an error
    std::uint64_t unreached = 0;  // requests that got no answer (the controller unreachable)
  };

  IsrKeeper(io::Reactor& r, replication::Shard& shard, Options o, Send send);
  ~IsrKeeper();
  IsrKeeper(const IsrKeeper&) = delete;
  IsrKeeper& operator=(const IsrKeeper&) = delete;

  void start();
  void stop();
  const Stats& stats() const { return stats_; }

 private:
  struct Sent {
    std::string topic;
    std::int32_t partition = 0;
    replication::Uuid topic_id{};
    std::int64_t request_id = 0;
    std::size_t isr_before = 0;
  };
  struct TickTimer : io::Timer {
    IsrKeeper* self = nullptr;
  };
  static void on_tick(io::Timer* t);
  void tick();
  void on_answer(const std::vector<Sent>& sent, std::optional<std::vector<std::byte>> frame);

  io::Reactor& r_;
  replication::Shard& shard_;
  Options opts_;
  Send send_;
  Stats stats_;
  bool stopped_ = true;
  std::int32_t next_correlation_ = 1;
  TickTimer timer_;
  // Answers arriving after the keeper is gone (the link answers every forward, even at stop)
  // see the token expired.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace samsa::cluster
