// The records of __transaction_state, in Kafka's formats (its TransactionLogKey and
// TransactionLogValue v0 and v1), so a restart replays them and Kafka's tools can read the topic:
//   key:   int16 version (0) | string transactionalId
//   value: int16 version (0) | int64 producerId | int16 producerEpoch | int32 timeoutMs |
//          int8 status | nullable [string topic, [int32 partition]] | int64 lastUpdateMs |
//          int64 startMs
//   v1 is the same, flexible (compact strings and arrays, tagged fields), with KIP-890's tagged
//   fields: 0 PreviousProducerId, 1 NextProducerId, 2 ClientTransactionVersion (int16),
//   3 NextProducerEpoch. samsa writes v1 when one of them is set (a transaction of version 2),
//   v0 otherwise. Unlike Kafka 4.1, it writes the producer ids too, so a coordinator that takes
//   over mid-way through an epoch overflow still knows the next producer id.
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
  // KIP-890 part 2 (v1's tagged fields). previous: the producer id before an overflow gave a
  // new one; next: the new one, from Prepare* until Complete* takes it.
  std::int64_t previous_producer_id = -1;
  std::int64_t next_producer_id = -1;
  std::int16_t next_producer_epoch = -1;
  std::int16_t client_transaction_version = 0;  // 2: the producer ends with EndTxn v5+
  bool operator==(const TxnValue&) const = default;
};

Bytes encode_txn_key(std::string_view transactional_id);
Bytes encode_txn_value(const TxnValue& v);
std::expected<std::string, std::string> decode_txn_key(std::span<const std::byte> b);
std::expected<TxnValue, std::string> decode_txn_value(std::span<const std::byte> b);

}  // namespace samsa::coordinator
