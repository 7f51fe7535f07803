// The records of __transaction_state, in Kafka's formats (its TransactionLogKey and
// TransactionLogValue v0), so a restart replays them and Kafka's tools can read the topic:
//   key:   int16 version (0) | string transactionalId
//   value: int16 version (0) | int64 producerId | int16 producerEpoch | int32 timeoutMs |
//          int8 status | nullable [string topic, [int32 partition]] | int64 lastUpdateMs |
//          int64 startMs
// A null value (tombstone) deletes the transactional id.
#pragma once

#include <cstdint>
#include <expected>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "coordinator/records.h"

namespace samsa::coordinator {

inline constexpr std::string_view kTxnStateTopic = "__transaction_state";

// Kafka's TransactionState, with its status byte values.
enum class TxnState : std::int8_t {
  empty = 0,
  ongoing = 1,
  prepare_commit = 2,
  prepare_abort = 3,
  complete_commit = 4,
  complete_abort = 5,
  dead = 6,
  prepare_epoch_fence = 7,
};
// Kafka's names: "Empty", "Ongoing", "PrepareCommit", ... (DescribeTransactions, tools).
std::string_view txn_state_name(TxnState s);
std::optional<TxnState> txn_state_from_name(std::string_view name);

using TopicPartitions = std::map<std::string, std::set<std::int32_t>>;

struct TxnValue {
  std::int64_t producer_id = -1;
  std::int16_t producer_epoch = -1;
  std::int32_t timeout_ms = 0;
  TxnState state = TxnState::empty;
  TopicPartitions partitions;
  std::int64_t last_update_ms = -1;
  std::int64_t start_ms = -1;
  bool operator==(const TxnValue&) const = default;
};

Bytes encode_txn_key(std::string_view transactional_id);
Bytes encode_txn_value(const TxnValue& v);
std::expected<std::string, std::string> decode_txn_key(std::span<const std::byte> b);
std::expected<TxnValue, std::string> decode_txn_value(std::span<const std::byte> b);

}  // namespace samsa::coordinator
