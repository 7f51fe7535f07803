// KRaft's control records: the one-record control batches (RecordBatch v2 with the control
// attribute) that the metadata log and its snapshots carry besides metadata records. A new
// leader's first batch is a LeaderChangeMessage; a snapshot starts with a SnapshotHeaderRecord
// and ends with a SnapshotFooterRecord.
//
// The record key is Kafka's ControlRecordType (int16 version 0, int16 type); the value is the
// message in Kafka's flexible encoding of its schema version 0 (compact arrays and strings with
// unsigned-varint lengths + 1, a tagged-field section closing every struct). Unknown tagged
// fields are skipped on reading, as Kafka does; none are written.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "io/log.h"

namespace samsa::replication::quorum {

// Kafka's ControlRecordType values (0 and 1 are transaction markers, not KRaft's).
enum class ControlRecordType : std::int16_t {
  abort = 0,
  commit = 1,
  leader_change = 2,
  snapshot_header = 3,
  snapshot_footer = 4,
  kraft_version = 5,
  kraft_voters = 6,
};
const char* control_type_name(ControlRecordType t);

// LeaderChangeMessage v0.
struct LeaderChangeMessage {
  std::int32_t leader_id = -1;
  std::vector<std::int32_t> voters;
  std::vector<std::int32_t> granting_voters;
  bool operator==(const LeaderChangeMessage&) const = default;
};

struct SnapshotHeaderRecord {
  std::int64_t last_contained_log_timestamp = -1;
  bool operator==(const SnapshotHeaderRecord&) const = default;
};

struct SnapshotFooterRecord {
  bool operator==(const SnapshotFooterRecord&) const = default;
};

struct KRaftVersionRecord {
  std::int16_t kraft_version = 0;
  bool operator==(const KRaftVersionRecord&) const = default;
};

// VotersRecord v0 (KIP-853's voter set).
struct VotersRecord {
  struct Endpoint {
    std::string name;
    std::string host;
    std::uint16_t port = 0;
    bool operator==(const Endpoint&) const = default;
  };
  struct Voter {
    std::int32_t voter_id = -1;
    std::array<std::uint8_t, 16> directory_id{};
    std::vector<Endpoint> endpoints;
    std::int16_t min_supported_version = 0;
    std::int16_t max_supported_version = 0;
    bool operator==(const Voter&) const = default;
  };
  std::vector<Voter> voters;
  bool operator==(const VotersRecord&) const = default;
};

using ControlMessage = std::variant<LeaderChangeMessage, SnapshotHeaderRecord, SnapshotFooterRecord,
                                    KRaftVersionRecord, VotersRecord>;

ControlRecordType control_type(const ControlMessage& m);

// The record's key (4 bytes) and value.
std::vector<std::byte> encode_control_key(ControlRecordType t);
std::vector<std::byte> encode_control_value(const ControlMessage& m);
// A key and value back to the message. Errc::corrupt_batch, saying what is wrong, for a key
// that is not version 0 of 4 bytes, a transaction marker or unknown type, a message version
// other than 0, a truncated value or bytes after it.
io::Result<ControlMessage> decode_control_record(std::span<const std::byte> key,
                                                 std::span<const std::byte> value);

struct ControlBatchOptions {
  std::int64_t base_offset = 0;
  std::int32_t partition_leader_epoch = -1;
  std::int64_t timestamp = -1;  // the record's (and batch's) timestamp
};

// Bytes a control batch holding m takes (exactly).
std::size_t control_batch_size(const ControlMessage& m);
// Writes the batch into buffer (at least control_batch_size(m) bytes) and returns it: a prefix
// of buffer. Errc::invalid_length when buffer is too small (nothing useful written).
io::Result<std::span<std::byte>> build_control_batch(std::span<std::byte> buffer,
                                                     const ControlMessage& m,
                                                     const ControlBatchOptions& opts);
// The same into a new vector (snapshots, tests; not the hot path).
std::vector<std::byte> build_control_batch(const ControlMessage& m,
                                           const ControlBatchOptions& opts);

// The control attribute of the batch whose header starts `batch` (false with fewer than the
// header's 61 bytes).
bool is_control_batch(std::span<const std::byte> batch);
// Exactly one whole batch: validated (length, CRC, framing), a control batch of one record,
// that record decoded. Errors name what is wrong.
io::Result<ControlMessage> decode_control_batch(std::span<const std::byte> batch);

}  // namespace samsa::replication::quorum
