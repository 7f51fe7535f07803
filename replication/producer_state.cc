#include "replication/producer_state.h"

#include <cinttypes>
#include <cstdio>

#include "base/bytes.h"
#include "io/record_batch.h"

namespace samsa::replication {
namespace {

constexpr std::int16_t kNoEpoch = -1;

std::int32_t last_sequence_of(const io::BatchInfo& b) {
  // Sequences wrap at INT32_MAX (Kafka's DefaultRecordBatch.incrementSequence).
  const std::int64_t last = static_cast<std::int64_t>(b.base_sequence) + b.last_offset_delta;
  return static_cast<std::int32_t>(last > INT32_MAX ? last - INT32_MAX - 1 : last);
}

bool in_sequence(std::int32_t last, std::int32_t next) {
  return static_cast<std::int64_t>(next) == static_cast<std::int64_t>(last) + 1 ||
         (next == 0 && last == INT32_MAX);
}

std::string fmt(const char* f, auto... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, args...);
  return buf;
}

}  // namespace

void ProducerEntry::push(const ProducerBatch& b) {
  if (count == kMaxBatches) {
    batches[head] = b;
    head = static_cast<std::uint8_t>((head + 1) % kMaxBatches);
  } else {
    batches[(head + count) % kMaxBatches] = b;
    ++count;
  }
}

ProducerCheck ProducerStateTable::check(const io::BatchInfo& b) const {
  ProducerCheck out;
  if (b.producer_id < 0) return out;
  auto it = producers_.find(b.producer_id);
  if (it == producers_.end()) return out;  // unknown producer: any sequence (Kafka 4)
  const ProducerEntry& e = it->second;
  if (!b.is_transactional() && e.current_txn_first_offset >= 0 && b.producer_epoch >= e.epoch) {
    out.verdict = ProducerVerdict::invalid_txn_state;
    out.message = fmt("Expected transactional write from producer %" PRId64 " at offset %" PRId64
                      " in partition with an open transaction",
                      b.producer_id, e.current_txn_first_offset);
    return out;
  }
  const std::int32_t first = b.base_sequence;
  const std::int32_t last = last_sequence_of(b);
  if (b.producer_epoch == e.epoch) {
    for (std::size_t i = 0; i < e.count; ++i) {
      const ProducerBatch& pb = e.batch(i);
      if (pb.first_seq == first && pb.last_seq == last) {
        out.verdict = ProducerVerdict::duplicate;
        out.duplicate = pb;
        return out;
      }
    }
  }
  if (b.producer_epoch < e.epoch) {
    out.verdict = ProducerVerdict::invalid_epoch;
    out.message = fmt("Epoch of producer %" PRId64
                      " is %d, which is smaller than the last seen "
                      "epoch %d",
                      b.producer_id, b.producer_epoch, e.epoch);
    return out;
  }
  if (b.producer_epoch != e.epoch) {
    // A new epoch starts over at sequence 0 (a producer with no epoch yet takes any).
    if (first != 0 && e.epoch != kNoEpoch) {
      out.verdict = ProducerVerdict::out_of_order;
      out.message = fmt("Invalid sequence number for new epoch of producer %" PRId64
                        ": %d (request epoch), %d (seq. number), %d (current producer epoch)",
                        b.producer_id, b.producer_epoch, first, e.epoch);
    }
    return out;
  }
  // Same epoch: a producer whose batches were all removed (retention, DeleteRecords) takes any
  // sequence, as in Kafka.
  if (e.count == 0) return out;
  if (!in_sequence(e.last_seq(), first)) {
    out.verdict = ProducerVerdict::out_of_order;
    out.message = fmt("Out of order sequence number for producer %" PRId64
                      ": %d (incoming seq. number), %d (current end sequence number)",
                      b.producer_id, first, e.last_seq());
  }
  return out;
}

bool ProducerStateTable::update(const io::BatchInfo& b, std::int64_t first_offset,
                                std::int64_t last_offset, std::int64_t timestamp) {
  if (b.producer_id < 0) return false;
  ProducerEntry& e = producers_[b.producer_id];
  e.producer_id = b.producer_id;
  if (b.producer_epoch != e.epoch) {
    // A new epoch forgets the old one's batches (their sequences no longer matter).
    e.epoch = b.producer_epoch;
    e.clear_batches();
  }
  e.push(ProducerBatch{b.base_sequence, last_sequence_of(b), first_offset, last_offset, timestamp,
                       b.record_count, b.crc, b.log_append_time()});
  if (!b.is_transactional() || e.current_txn_first_offset >= 0) return false;
  e.current_txn_first_offset = first_offset;
  return true;
}

kafka::ErrorCode ProducerStateTable::check_marker(std::int64_t producer_id, std::int16_t epoch,
                                                  std::int32_t coordinator_epoch) const {
  const ProducerEntry* e = find(producer_id);
  if (!e) return kafka::ErrorCode::none;
  if (epoch < e->epoch) return kafka::ErrorCode::invalid_producer_epoch;
  if (coordinator_epoch < e->coordinator_epoch)
    return kafka::ErrorCode::transaction_coordinator_fenced;
  return kafka::ErrorCode::none;
}

std::int64_t ProducerStateTable::end_txn(std::int64_t producer_id, std::int16_t epoch,
                                         std::int32_t coordinator_epoch, std::int64_t timestamp) {
  ProducerEntry& e = producers_[producer_id];
  e.producer_id = producer_id;
  if (epoch != e.epoch) {
    e.epoch = epoch;
    e.clear_batches();
  }
  e.coordinator_epoch = coordinator_epoch;
  const std::int64_t first = e.current_txn_first_offset;
  e.current_txn_first_offset = -1;
  // A producer known only from its markers still expires like one that wrote.
  if (e.count == 0) e.last_marker_ms = timestamp;
  return first;
}

bool same_batch(const ProducerBatch& stored, const io::BatchInfo& retry,
                std::span<std::byte> retry_bytes) {
  if (stored.record_count != retry.record_count) return false;
  if (!stored.log_append_time || retry.log_append_time()) return stored.crc == retry.crc;
  const auto attrs = static_cast<std::int16_t>(retry.attributes | io::batch::kTimestampTypeBit);
  store_be<std::int16_t>(retry_bytes.data() + io::batch::kAttributes, attrs);
  store_be<std::int64_t>(retry_bytes.data() + io::batch::kMaxTimestamp, stored.timestamp);
  return io::batch::compute_crc(retry_bytes) == stored.crc;
}

std::size_t ProducerStateTable::expire(std::int64_t now_ms, std::int64_t expiration_ms) {
  std::size_t n = 0;
  for (auto it = producers_.begin(); it != producers_.end();) {
    const ProducerEntry& e = it->second;
    const std::int64_t last = e.count ? e.last_timestamp() : e.last_marker_ms;
    if (e.current_txn_first_offset < 0 && now_ms - last >= expiration_ms) {
      it = producers_.erase(it);
      ++n;
    } else {
      ++it;
    }
  }
  return n;
}

void ProducerStateTable::evict_below(std::int64_t log_start) {
  for (auto it = producers_.begin(); it != producers_.end();) {
    ProducerEntry& e = it->second;
    if (e.last_offset() < log_start && e.current_txn_first_offset < 0 && e.count) {
      it = producers_.erase(it);
      continue;
    }
    while (e.count && e.batch(0).last_offset < log_start) {
      e.head = static_cast<std::uint8_t>((e.head + 1) % ProducerEntry::kMaxBatches);
      --e.count;
    }
    ++it;
  }
}

std::vector<io::ProducerSnapshotEntry> ProducerStateTable::snapshot() const {
  std::vector<io::ProducerSnapshotEntry> out;
  out.reserve(producers_.size());
  for (const auto& [id, e] : producers_) {
    if (e.count == 0) {
      // An epoch without batches still fences older epochs.
      out.push_back({id, e.epoch, -1, -1, 0, e.last_marker_ms, e.coordinator_epoch,
                     e.current_txn_first_offset});
      continue;
    }
    for (std::size_t i = 0; i < e.count; ++i) {
      const ProducerBatch& b = e.batch(i);
      const std::int64_t delta = static_cast<std::int64_t>(b.last_seq) - b.first_seq;
      out.push_back({id, e.epoch, b.last_seq, b.last_offset,
                     static_cast<std::int32_t>(delta < 0 ? delta + INT32_MAX + 1 : delta),
                     b.timestamp, e.coordinator_epoch, e.current_txn_first_offset});
    }
  }
  return out;
}

void ProducerStateTable::load(std::span<const io::ProducerSnapshotEntry> entries) {
  producers_.clear();
  for (const auto& s : entries) {
    ProducerEntry& e = producers_[s.producer_id];
    e.producer_id = s.producer_id;
    if (s.epoch != e.epoch) {
      e.epoch = s.epoch;
      e.clear_batches();
    }
    e.coordinator_epoch = s.coordinator_epoch;
    e.current_txn_first_offset = s.current_txn_first_offset;
    if (s.last_offset < 0) {
      e.last_marker_ms = s.timestamp;
      continue;
    }
    const std::int64_t first = static_cast<std::int64_t>(s.last_sequence) - s.offset_delta;
    // Kafka's entries carry only the last offset; the batch's first offset is last minus the
    // records it held, which for idempotent batches is the sequence span.
    e.push(ProducerBatch{static_cast<std::int32_t>(first < 0 ? first + INT32_MAX + 1 : first),
                         s.last_sequence, s.last_offset - s.offset_delta, s.last_offset,
                         s.timestamp});
  }
}

const ProducerEntry* ProducerStateTable::find(std::int64_t producer_id) const {
  auto it = producers_.find(producer_id);
  return it == producers_.end() ? nullptr : &it->second;
}

}  // namespace samsa::replication
