// RecordBatch v2 (Kafka's magic 2) as bytes: field positions, header parsing, validation, and a
// reader over the records of an uncompressed (or decompressed) batch. Nothing here allocates
// except records_of() on a compressed batch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "io/log.h"

namespace samsa::io::batch {

// Byte positions of the header fields (all big-endian).
inline constexpr std::size_t kBaseOffset = 0;
inline constexpr std::size_t kLength = 8;  // bytes after this field
inline constexpr std::size_t kPartitionLeaderEpoch = 12;
inline constexpr std::size_t kMagic = 16;
inline constexpr std::size_t kCrc = 17;
inline constexpr std::size_t kAttributes = 21;  // the CRC covers from here to the end
inline constexpr std::size_t kLastOffsetDelta = 23;
inline constexpr std::size_t kBaseTimestamp = 27;
inline constexpr std::size_t kMaxTimestamp = 35;
inline constexpr std::size_t kProducerId = 43;
inline constexpr std::size_t kProducerEpoch = 51;
inline constexpr std::size_t kBaseSequence = 53;
inline constexpr std::size_t kRecordCount = 57;
inline constexpr std::size_t kHeaderSize = 61;
inline constexpr std::size_t kLogOverhead = 12;  // baseOffset + length: what precedes "length"

inline constexpr std::int16_t kTimestampTypeBit = 0x08;
inline constexpr std::int16_t kTransactionalBit = 0x10;
inline constexpr std::int16_t kControlBit = 0x20;

// Smallest possible record: length, attributes, timestampDelta, offsetDelta, key length,
// value length and header count, one byte each.
inline constexpr std::size_t kMinRecordSize = 7;

// Reads the header fields of the batch starting at p (at least kHeaderSize bytes), without
// checking anything.
BatchInfo parse_header(const std::byte* p);

// Which batches a check accepts. `produced`: what a producer may send (recordCount ==
// lastOffsetDelta + 1, record offset deltas 0..n-1). `stored`: also what compaction leaves in
// a log (Kafka's rules): records removed from a batch keep their offset deltas, so deltas only
// increase and recordCount <= lastOffsetDelta + 1, and a batch kept for its producer's state
// may hold no record at all. Logs, followers and recovery read `stored` batches.
enum class Form : std::uint8_t { produced, stored };

// The checks that need only the 61 header bytes: magic, batchLength (at least a header, at
// most max_batch_bytes; 0 means no limit), lastOffsetDelta >= 0 and the record count (see
// Form). Recovery scans run these before trusting a length to skip ahead.
Result<BatchInfo> check_header(std::span<const std::byte> header, std::uint32_t max_batch_bytes,
                               Form form = Form::produced);

// Record timestamps of a batch, as validate() finds them. Uncompressed batches: exact, from
// every record. Compressed batches (not decompressed on the append path): from the header,
// baseTimestamp as the smallest and maxTimestamp as the largest.
struct RecordTimestamps {
  std::int64_t max = -1;             // what Kafka stores as the batch's maxTimestamp
  std::int64_t min_set = INT64_MAX;  // smallest timestamp other than -1 (NO_TIMESTAMP)
  std::int64_t max_set = INT64_MIN;  // largest timestamp other than -1
};

// Kafka's request-level rule for Produce v3+: the bytes hold exactly one whole record batch.
// nullopt, or why not (the Produce answer's INVALID_RECORD message). What is inside the batch
// is validate()'s to check.
std::optional<std::string> check_single_batch(std::span<const std::byte> records);

// Full validation of exactly one batch occupying all of `b`: header checks, CRC32C over
// attributes..end, and for uncompressed batches the framing of every record (offset deltas
// 0..n-1, lengths). A maxTimestamp that disagrees with the records is not an error (Kafka
// rewrites it): the records' own timestamps go to *ts when given.
Result<BatchInfo> validate(std::span<const std::byte> b, std::uint32_t max_batch_bytes,
                           RecordTimestamps* ts = nullptr, Form form = Form::produced);

// CRC32C of a complete batch as Kafka defines it (attributes .. end).
std::uint32_t compute_crc(std::span<const std::byte> b);
// Recomputes and stores the CRC (after changing attributes or maxTimestamp).
void update_crc(std::span<std::byte> b);

struct Header {
  std::span<const std::byte> key;
  std::optional<std::span<const std::byte>> value;  // nullopt: null value
};

struct Record {
  std::int8_t attributes = 0;
  std::int64_t timestamp_delta = 0;
  std::int32_t offset_delta = 0;
  std::optional<std::span<const std::byte>> key;    // nullopt: null key
  std::optional<std::span<const std::byte>> value;  // nullopt: null value (tombstone)
  std::int32_t header_count = 0;
  std::span<const std::byte> headers;  // header_count encoded headers; walk with HeaderReader
};

// Walks `count` records of an uncompressed records section (what follows the 61-byte header).
class RecordReader {
 public:
  RecordReader(std::span<const std::byte> records, std::int32_t count)
      : data_(records), left_(count) {}
  // The next record, nullopt after the last one, or an error naming what is malformed and
  // where (byte position within the records section).
  Result<std::optional<Record>> next();
  // Bytes not consumed yet (non-zero after the last record means trailing garbage).
  std::size_t remaining() const { return data_.size() - pos_; }

 private:
  std::span<const std::byte> data_;
  std::size_t pos_ = 0;
  std::int32_t left_;
};

class HeaderReader {
 public:
  HeaderReader(std::span<const std::byte> headers, std::int32_t count)
      : data_(headers), left_(count) {}
  Result<std::optional<Header>> next();
  std::size_t remaining() const { return data_.size() - pos_; }

 private:
  std::span<const std::byte> data_;
  std::size_t pos_ = 0;
  std::int32_t left_;
};

// The records section of a complete batch: a view into `b` when uncompressed, else the
// decompressed bytes placed in `storage` (at most max_out bytes).
Result<std::span<const std::byte>> records_of(std::span<const std::byte> b,
                                              std::vector<std::byte>& storage,
                                              std::size_t max_out = 64u << 20);

// A transaction marker: the one record of a control batch (Kafka's EndTransactionMarker).
// Key: int16 version (0) | int16 type; value: int16 version (0) | int32 coordinatorEpoch.
// Other control types (KRaft's leader change, snapshot header/footer) are not markers.
enum class ControlType : std::int16_t { abort = 0, commit = 1 };
struct TxnMarker {
  ControlType type = ControlType::abort;
  std::int32_t coordinator_epoch = -1;
};
// The marker a complete control batch holds; Errc::invalid_record when it holds none (another
// control type, a malformed record).
Result<TxnMarker> parse_txn_marker(std::span<const std::byte> b);

}  // namespace samsa::io::batch
