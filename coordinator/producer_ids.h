// coordinator::ProducerIdManager — hands out producer ids for InitProducerId. Ids come in
// blocks reserved durably by the controller (a ProducerIdsRecord in the metadata log), so an
// id is never handed out twice, even across restarts; the next block is requested when the
// current one is 90% used, so callers rarely wait. Lives on the coordinator thread; every
// method and callback runs there.
#pragma once

#include <cstdint>
#include <expected>
#include <functional>
#include <vector>

#include "base/kafka_errors.h"

namespace samsa::coordinator {

class ProducerIdManager {
 public:
  // Reserves `block` ids; done(first id of the block) on this thread, or done(-1) on failure.
  using Allocate =
      std::function<void(std::int32_t block, std::move_only_function<void(std::int64_t)> done)>;
  using Done = std::move_only_function<void(std::expected<std::int64_t, kafka::ErrorCode>)>;

  static constexpr std::int32_t kBlockSize = 1000;  // Kafka's block size

  explicit ProducerIdManager(Allocate allocate, std::int32_t block = kBlockSize)
      : allocate_(std::move(allocate)), block_(block) {}

  // The next id; COORDINATOR_LOAD_IN_PROGRESS (retriable, as Kafka answers) when no block
  // could be reserved.
  void next(Done done);

  std::uint64_t blocks_requested() const { return blocks_requested_; }

 private:
  void request_block();
  void on_block(std::int64_t first);

  Allocate allocate_;
  std::int32_t block_;
  std::int64_t next_ = 0;
  std::int64_t end_ = 0;          // current block: [next_, end_)
  std::int64_t prefetched_ = -1;  // first id of a block reserved ahead, or -1
  bool requesting_ = false;
  std::vector<Done> waiting_;
  std::uint64_t blocks_requested_ = 0;
};

}  // namespace samsa::coordinator
