// The records of __consumer_offsets, in Kafka's formats, so a data directory stays readable by
// Kafka's own tools and a samsa node can replay what Kafka wrote:
//
//   key   int16 type, then the key's fields:
//           type 0 or 1  OffsetCommitKey   {group, topic, partition}      (samsa writes 1)
//           type 2       GroupMetadataKey  {group}
//           type 3+      records of the consumer (KIP-848) and share protocols: skipped
//   value int16 version, then the value's fields; a null value is a tombstone
//           OffsetCommitValue v0-4 (samsa writes v3, or v1 when the commit carries an expiry)
//           GroupMetadataValue v0-4 (samsa writes v3)
// Strings are int16-length (v4: compact, with tagged fields), bytes int32-length.
//
// Also here: which __consumer_offsets partition a group lives in (Kafka's rule, which uses
// Java's String.hashCode), and the topic list inside a consumer's subscription metadata.
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace samsa::coordinator {

using Bytes = std::vector<std::byte>;

inline constexpr std::string_view kOffsetsTopic = "__consumer_offsets";

struct OffsetKey {
  std::string group;
  std::string topic;
  std::int32_t partition = 0;
  bool operator==(const OffsetKey&) const = default;
};

struct GroupKey {
  std::string group;
  bool operator==(const GroupKey&) const = default;
};

// A key of a record type samsa does not interpret (consumer-protocol groups, share groups).
struct OtherKey {
  std::int16_t type = 0;
  bool operator==(const OtherKey&) const = default;
};

using RecordKey = std::variant<OffsetKey, GroupKey, OtherKey>;

struct OffsetValue {
  std::int64_t offset = -1;
  std::int32_t leader_epoch = -1;
  std::string metadata;
  std::int64_t commit_timestamp = -1;
  std::int64_t expire_timestamp = -1;  // kept only by version 1
  bool operator==(const OffsetValue&) const = default;
};

struct MemberValue {
  std::string member_id;
  std::optional<std::string> group_instance_id;
  std::string client_id;
  std::string client_host;
  std::int32_t rebalance_timeout = -1;
  std::int32_t session_timeout = 0;
  Bytes subscription;  // the member's metadata for the group's protocol
  Bytes assignment;
  bool operator==(const MemberValue&) const = default;
};

struct GroupValue {
  std::string protocol_type;
  std::int32_t generation = 0;
  std::optional<std::string> protocol;
  std::optional<std::string> leader;
  std::int64_t current_state_timestamp = -1;
  std::vector<MemberValue> members;
  bool operator==(const GroupValue&) const = default;
};

Bytes encode_key(const OffsetKey& k);
Bytes encode_key(const GroupKey& k);
Bytes encode_value(const OffsetValue& v);
Bytes encode_value(const GroupValue& v);

// Errors name what is malformed ("offset value v3: truncated at byte 12").
std::expected<RecordKey, std::string> decode_key(std::span<const std::byte> b);
std::expected<OffsetValue, std::string> decode_offset_value(std::span<const std::byte> b);
std::expected<GroupValue, std::string> decode_group_value(std::span<const std::byte> b);

// Java's String.hashCode of the UTF-16 form of a UTF-8 string (malformed bytes count as
// U+FFFD, as Java's decoder makes them).
std::int32_t java_string_hash(std::string_view utf8);
// Kafka's partitionFor: abs(hashCode) % partitions, with abs(INT32_MIN) taken as 0.
std::int32_t partition_for(std::string_view group, std::int32_t partitions);

// The topics of a ConsumerProtocolSubscription (any version), nullopt if it does not parse.
std::optional<std::vector<std::string>> subscription_topics(std::span<const std::byte> metadata);

}  // namespace samsa::coordinator
