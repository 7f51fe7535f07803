// io::BatchBuilder — writes an uncompressed RecordBatch v2 into a caller's buffer. The broker
// uses it for the batches it writes itself (metadata log, consumer offsets, transaction
// markers); tools and tests use it to produce what a client would send.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/log.h"

namespace samsa::io {

class BatchBuilder {
 public:
  using Bytes = std::optional<std::span<const std::byte>>;  // nullopt: null

  struct Header {
    std::span<const std::byte> key;
    Bytes value;
  };

  struct Options {
    std::int64_t base_offset = 0;
    std::int32_t partition_leader_epoch = -1;
    std::int64_t producer_id = -1;
    std::int16_t producer_epoch = -1;
    std::int32_t base_sequence = -1;
    bool transactional = false;
    bool control = false;
    TimestampType timestamp_type = TimestampType::create_time;
    // baseTimestamp; when unset the first record's timestamp is used.
    std::optional<std::int64_t> base_timestamp;
  };

  explicit BatchBuilder(std::span<std::byte> buffer) : BatchBuilder(buffer, Options{}) {}
  BatchBuilder(std::span<std::byte> buffer, Options opts);

  // Appends one record. Returns false, changing nothing, when it does not fit in the buffer.
  bool add(std::int64_t timestamp, Bytes key, Bytes value, std::span<const Header> headers = {});

  // Writes the header (counts, timestamps, CRC) and returns the finished batch: the first
  // size() bytes of the buffer. The builder may not be used afterwards.
  std::span<std::byte> finish();

  std::int32_t count() const { return count_; }
  std::size_t size() const { return pos_; }
  bool empty() const { return count_ == 0; }

  // An upper bound of the bytes one record takes, for sizing buffers.
  static std::size_t max_record_size(std::size_t key_len, std::size_t value_len,
                                     std::span<const Header> headers = {});

 private:
  std::span<std::byte> buf_;
  Options opts_;
  std::size_t pos_;
  std::int32_t count_ = 0;
  std::int64_t base_ts_ = -1;
  std::int64_t max_ts_ = -1;
  bool finished_ = false;
};

// Not for the hot path: builds a whole batch into a new vector (tools, tests, admin paths).
struct SimpleRecord {
  std::int64_t timestamp = 0;
  std::optional<std::string> key;
  std::optional<std::string> value;
  std::vector<std::pair<std::string, std::optional<std::string>>> headers;
};
std::vector<std::byte> build_batch(std::span<const SimpleRecord> records,
                                   BatchBuilder::Options opts = {});

// A transaction marker batch (control + transactional), as WriteTxnMarkers writes it.
std::vector<std::byte> build_txn_marker(std::int64_t producer_id, std::int16_t producer_epoch,
                                        bool commit, std::int32_t coordinator_epoch,
                                        std::int64_t timestamp);

inline std::span<const std::byte> as_bytes(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

}  // namespace samsa::io
