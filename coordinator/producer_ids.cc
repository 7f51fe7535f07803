#include "coordinator/producer_ids.h"

#include "base/log.h"

namespace samsa::coordinator {

void ProducerIdManager::next(Done done) {
  if (next_ >= end_ && prefetched_ >= 0) {
    next_ = prefetched_;
    end_ = prefetched_ + block_;
    prefetched_ = -1;
  }
  if (next_ < end_) {
    const std::int64_t id = next_++;
    // Ask for the next block before this one runs out.
    if (prefetched_ < 0 && !requesting_ && (end_ - next_) * 10 < block_) request_block();
    done(id);
    return;
  }
  waiting_.push_back(std::move(done));
  if (!requesting_) request_block();
}

void ProducerIdManager::request_block() {
  requesting_ = true;
  ++blocks_requested_;
  allocate_(block_, [this](std::int64_t first) { on_block(first); });
}

void ProducerIdManager::on_block(std::int64_t first) {
  requesting_ = false;
  if (first < 0) {
    LOG_WARN(
        "no producer id block could be reserved; InitProducerId answers "
        "COORDINATOR_LOAD_IN_PROGRESS");
    auto waiting = std::move(waiting_);
    waiting_.clear();
    for (auto& w : waiting)
      w(std::unexpected(kafka::ErrorCode::coordinator_load_in_progress));
    return;
  }
  if (next_ < end_) {
    prefetched_ = first;
  } else {
    next_ = first;
    end_ = first + block_;
  }
  auto waiting = std::move(waiting_);
  waiting_.clear();
  for (auto& w : waiting)
    next(std::move(w));
}

}  // namespace samsa::coordinator
