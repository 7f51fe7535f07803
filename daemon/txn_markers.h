// Writing transaction markers on this broker's partitions: the transaction coordinator's
// MarkerWriter and the WriteTxnMarkers handler both come here (daemon/broker_txns.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/kafka_errors.h"
#include "coordinator/txn_coordinator.h"

namespace samsa::daemon {

class Broker;
struct ReactorContext;

// On the shard that owns the partition: appends marker m (acks=all, AppendOrigin::marker) to
// the partition this node leads; done(error) on that shard once it is held by the ISR (or was
// refused). A marker on __consumer_offsets also completes the group coordinator's pending
// transactional offsets.
void write_marker_on_shard(ReactorContext& shard, const std::string& topic, std::int32_t partition,
                           const coordinator::MarkerWriter::Marker& m,
                           std::move_only_function<void(kafka::ErrorCode)> done);

// KIP-890's verification, from the shard that owns a partition: asks the transaction
// coordinator of transactional_id (this broker's, or another's with AddPartitionsToTxn v4's
// verify-only form) whether topic-partition is in the producer's ongoing transaction.
// done(error) on that shard's reactor: none, or the error a Produce answers with (the
// coordinator's own errors become NOT_ENOUGH_REPLICAS, retriable, as Kafka maps them).
void verify_txn_partition(ReactorContext& shard, std::string transactional_id,
                          std::int64_t producer_id, std::int16_t producer_epoch, std::string topic,
                          std::int32_t partition,
                          std::move_only_function<void(kafka::ErrorCode)> done);

// The coordinator's MarkerWriter over this broker's shards.
std::unique_ptr<coordinator::MarkerWriter> make_marker_writer(Broker& b);

}  // namespace samsa::daemon
