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

// KIP-890, from the reactor of a partition's leader: asks the transaction coordinator of
// c.transactional_id (this broker's, or another's with AddPartitionsToTxn v4's broker form)
// to add c's partition to the producer's transaction (c.add: transaction version 2, whose
// clients never send AddPartitionsToTxn) or to confirm it is in the ongoing one (version 1's
// verification). done(error) on the asking reactor with the coordinator's error as it is
// (NETWORK_EXCEPTION when it could not be reached); callers map it to their API's errors.
struct TxnPartitionCheck {
  std::string transactional_id;
  std::int64_t producer_id = -1;
  std::int16_t producer_epoch = -1;
  std::string topic;
  std::int32_t partition = 0;
  bool add = false;
};
void check_txn_partition(ReactorContext& shard, TxnPartitionCheck c,
                         std::move_only_function<void(kafka::ErrorCode)> done);
// What a Produce answers for the coordinator's verdict (Kafka's AddPartitionsToTxnManager
// mapping): fenced and unknown producers as INVALID_PRODUCER_EPOCH, the coordinator's own
// troubles as NOT_ENOUGH_REPLICAS (retriable).
kafka::ErrorCode produce_error_of(kafka::ErrorCode e);
// The coordinator's MarkerWriter over this broker's shards.
std::unique_ptr<coordinator::MarkerWriter> make_marker_writer(Broker& b);

}  // namespace samsa::daemon
