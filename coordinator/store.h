// Where the coordinator keeps its records: the partitions of __consumer_offsets. The logs
// belong to the reactor shards, not to the coordinator thread, so the coordinator reaches
// them only through this interface; every callback runs on the coordinator's thread.
//
// PartitionStore is the implementation over replication::Partition objects that live on other
// threads: the daemon supplies how to run a function on the thread that owns a partition
// (posting to its shard), tests supply logs of their own.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "io/log.h"
#include "io/reactor.h"

namespace samsa::replication {
class Partition;
}

namespace samsa::coordinator {

class OffsetsStore {
 public:
  using AppendDone = std::move_only_function<void(std::optional<io::Error>)>;
  using BatchVisitor = std::move_only_function<void(std::span<const std::byte> batch)>;
  using LoadDone = std::move_only_function<void(std::optional<io::Error>)>;

  virtual ~OffsetsStore() = default;

  // Appends one RecordBatch v2 to the partition; done runs once the batch is durable (fsynced
  // where the topic asks for it), or with the error that kept it from being.
  virtual void append(std::int32_t partition, std::vector<std::byte> batch, AppendDone done) = 0;
  // Reads the partition from its start up to its end as of the call: visit runs for every
  // batch in log order, then done.
  virtual void load(std::int32_t partition, BatchVisitor visit, LoadDone done) = 0;
};

class PartitionStore final : public OffsetsStore {
 public:
  // Runs fn on the thread that owns partition p of __consumer_offsets, with that partition, or
  // with nullptr if it is not open there.
  using PartitionFn = std::move_only_function<void(replication::Partition*)>;
  using RunOn = std::function<void(std::int32_t partition, PartitionFn fn)>;

  // home: the coordinator's reactor (results are posted to it).
  // topic: the internal topic the partitions belong to (its name goes into errors).
  PartitionStore(io::Reactor& home, RunOn run_on, std::string topic = "__consumer_offsets")
      : home_(home), run_on_(std::move(run_on)), topic_(std::move(topic)) {}

  void append(std::int32_t partition, std::vector<std::byte> batch, AppendDone done) override;
  void load(std::int32_t partition, BatchVisitor visit, LoadDone done) override;

 private:
  struct Load;
  void load_step(Load* l);
  void load_chunk(Load* l, io::ReadResult rr);

  io::Reactor& home_;
  RunOn run_on_;
  std::string topic_;
};

}  // namespace samsa::coordinator
