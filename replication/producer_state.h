// replication::ProducerStateTable — one partition's idempotent producers (KIP-98, KIP-360), as
// Kafka's ProducerStateManager keeps them: per producer id its epoch and the sequence ranges and
// offsets of its last five batches. A leader asks check() before appending a client's batch:
//   - a batch that repeats one of the five (same epoch, same first and last sequence) is a
//     duplicate candidate; it is answered with the original offsets and not stored again only
//     when its contents are the original's too (same_batch: record count and CRC). A batch
//     with a known producer id and sequences but other contents is not a retry: two producers
//     share the id, and acknowledging it would lose its records without a word;
//   - an older epoch is INVALID_PRODUCER_EPOCH;
//   - a new epoch must start at sequence 0, unless the partition knows nothing of the producer;
//   - in the same epoch the first sequence must follow the last one (wrapping at INT32_MAX),
//     else OUT_OF_ORDER_SEQUENCE_NUMBER;
//   - a producer the partition holds no state for is accepted at any sequence (Kafka 4);
//   - a non-transactional batch of a producer with a transaction open here is
//     INVALID_TXN_STATE (KIP-98).
// Transactions: the first transactional batch of a producer opens its transaction here
// (current_txn_first_offset); its marker (end_txn) closes it, after check_marker.
// update() records every appended batch (leader appends, replay from the log, followers).
// Batches without a producer id (-1) are not idempotent and are never checked.
//
// Owned by the partition's reactor thread. No allocation per batch once a producer is known.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/kafka_errors.h"
#include "io/log.h"
#include "io/producer_snapshot.h"

namespace samsa::replication {

struct ProducerBatch {
  std::int32_t first_seq = -1;
  std::int32_t last_seq = -1;
  std::int64_t first_offset = -1;
  std::int64_t last_offset = -1;
  std::int64_t timestamp = -1;  // the batch's max timestamp
  // What a retry must match. -1: unknown (loaded from a snapshot, which keeps no contents;
  // the log's copy of the batch is asked then).
  std::int32_t record_count = -1;
  std::uint32_t crc = 0;
  // crc is of a batch the log stamped with LogAppendTime (a follower's or a replayed copy): a
  // retry is compared after the same stamp. A leader's own appends keep the producer's CRC.
  bool log_append_time = false;
};

// Whether retry (prepared by the log, not yet appended) has the contents of the stored batch:
// same record count and CRC. For a stored LogAppendTime copy the retry's bytes are stamped
// the same way first (its attributes and maxTimestamp change: call only for a batch that will
// not be appended). stored must have known contents (record_count >= 0).
bool same_batch(const ProducerBatch& stored, const io::BatchInfo& retry,
                std::span<std::byte> retry_bytes);

struct ProducerEntry {
  static constexpr std::size_t kMaxBatches = 5;
  std::int64_t producer_id = -1;
  std::int16_t epoch = -1;
  std::int32_t coordinator_epoch = -1;
  std::int64_t current_txn_first_offset = -1;
  // Wall clock of the last marker, what expiry measures for a producer with no batches here.
  std::int64_t last_marker_ms = -1;
  // The last batches, oldest first (a small ring; count <= kMaxBatches).
  std::array<ProducerBatch, kMaxBatches> batches{};
  std::uint8_t head = 0;
  std::uint8_t count = 0;

  const ProducerBatch& batch(std::size_t i) const { return batches[(head + i) % kMaxBatches]; }
  const ProducerBatch* last() const { return count ? &batch(count - 1u) : nullptr; }
  std::int32_t last_seq() const { return count ? last()->last_seq : -1; }
  std::int64_t last_offset() const { return count ? last()->last_offset : -1; }
  std::int64_t last_timestamp() const { return count ? last()->timestamp : -1; }
  void push(const ProducerBatch& b);
  void clear_batches() { head = count = 0; }
};

enum class ProducerVerdict : std::uint8_t {
  append,
  duplicate,
  out_of_order,
  invalid_epoch,
  invalid_txn_state
};

struct ProducerCheck {
  ProducerVerdict verdict = ProducerVerdict::append;
  ProducerBatch duplicate;  // for ProducerVerdict::duplicate
  std::string message;      // for the errors
};

class ProducerStateTable {
 public:
  // What a client's batch would do. Pure: nothing changes until update().
  ProducerCheck check(const io::BatchInfo& b) const;
  // Records an appended batch holding offsets [first_offset, last_offset]; timestamp is what
  // expiry measures (the batch's max timestamp, or the append time when it has none). True when
  // the batch opened a transaction (the producer's first transactional batch since its last
  // marker): the caller records it in PartitionTxns.
  bool update(const io::BatchInfo& b, std::int64_t first_offset, std::int64_t last_offset,
              std::int64_t timestamp);

  // Whether a transaction marker of this producer, epoch and coordinator epoch may be written:
  // INVALID_PRODUCER_EPOCH for an older producer epoch, TRANSACTION_COORDINATOR_FENCED for an
  // older coordinator epoch (a zombie coordinator), else none.
  kafka::ErrorCode check_marker(std::int64_t producer_id, std::int16_t epoch,
                                std::int32_t coordinator_epoch) const;
  // A marker written at marker_offset: the producer takes its epoch (a bumped one forgets
  // the old epoch's batches) and coordinator epoch, and its transaction closes. Returns the
  // first offset of the transaction it closed, or -1 when none was open here.
  std::int64_t end_txn(std::int64_t producer_id, std::int16_t epoch, std::int32_t coordinator_epoch,
                       std::int64_t timestamp);

  // Drops producers whose last batch is older than expiration_ms (by its timestamp against
  // now_ms), as producer.id.expiration.ms does. Returns how many.
  std::size_t expire(std::int64_t now_ms, std::int64_t expiration_ms);
  // Drops batches (and producers left without any) wholly below the log start offset.
  void evict_below(std::int64_t log_start);
  void clear() { producers_.clear(); }

  // Snapshot entries: every producer's remembered batches, oldest first.
  std::vector<io::ProducerSnapshotEntry> snapshot() const;
  void load(std::span<const io::ProducerSnapshotEntry> entries);

  std::size_t size() const { return producers_.size(); }
  const ProducerEntry* find(std::int64_t producer_id) const;
  template <class F>
  void for_each(F&& f) const {
    for (const auto& [id, e] : producers_)
      f(e);
  }

 private:
  std::unordered_map<std::int64_t, ProducerEntry> producers_;
};

}  // namespace samsa::replication
