#include "coordinator/records.h"

#include <climits>

#include "base/byte_io.h"

namespace samsa::coordinator {
namespace {

constexpr std::int16_t kOffsetKeyLegacy = 0;
constexpr std::int16_t kOffsetKey = 1;
constexpr std::int16_t kGroupKey = 2;

using Writer = ByteWriter;
using Reader = ByteReader;

template <class T>
std::expected<T, std::string> finish(Reader& r, T value) {
  if (r.ok() && !r.at_end()) r.fail("trailing bytes");
  if (!r.ok()) return std::unexpected(r.error());
  return value;
}

}  // namespace

Bytes encode_key(const OffsetKey& k) {
  Writer w;
  w.i16(kOffsetKey);
  w.string(k.group);
  w.string(k.topic);
  w.i32(k.partition);
  return w.take();
}

Bytes encode_key(const GroupKey& k) {
  Writer w;
  w.i16(kGroupKey);
  w.string(k.group);
  return w.take();
}

Bytes encode_value(const OffsetValue& v) {
  Writer w;
  if (v.expire_timestamp >= 0) {
    // Only version 1 can carry an explicit expiry (OffsetCommit v2-4's retention time).
    w.i16(1);
    w.i64(v.offset);
    w.string(v.metadata);
    w.i64(v.commit_timestamp);
    w.i64(v.expire_timestamp);
  } else {
    w.i16(3);
    w.i64(v.offset);
    w.i32(v.leader_epoch);
    w.string(v.metadata);
    w.i64(v.commit_timestamp);
  }
  return w.take();
}

Bytes encode_value(const GroupValue& v) {
  Writer w;
  w.i16(3);
  w.string(v.protocol_type);
  w.i32(v.generation);
  w.nullable_string(v.protocol);
  w.nullable_string(v.leader);
  w.i64(v.current_state_timestamp);
  w.i32(static_cast<std::int32_t>(v.members.size()));
  for (const auto& m : v.members) {
    w.string(m.member_id);
    w.nullable_string(m.group_instance_id);
    w.string(m.client_id);
    w.string(m.client_host);
    w.i32(m.rebalance_timeout);
    w.i32(m.session_timeout);
    w.bytes(m.subscription);
    w.bytes(m.assignment);
  }
  return w.take();
}

std::expected<RecordKey, std::string> decode_key(std::span<const std::byte> b) {
  Reader r(b, "record key");
  const std::int16_t type = r.i16();
  if (!r.ok()) return std::unexpected(r.error());
  if (type == kOffsetKeyLegacy || type == kOffsetKey) {
    OffsetKey k;
    k.group = r.string(false);
    k.topic = r.string(false);
    k.partition = r.i32();
    return finish<RecordKey>(r, std::move(k));
  }
  if (type == kGroupKey) {
    GroupKey k;
    k.group = r.string(false);
    return finish<RecordKey>(r, std::move(k));
  }
  if (type < 0) return std::unexpected("record key: negative type " + std::to_string(type));
  return OtherKey{type};
}

std::expected<OffsetValue, std::string> decode_offset_value(std::span<const std::byte> b) {
  Reader r(b, "offset commit value");
  const std::int16_t v = r.i16();
  if (!r.ok()) return std::unexpected(r.error());
  if (v < 0 || v > 4)
    return std::unexpected("offset commit value: unknown version " + std::to_string(v));
  const bool flexible = v >= 4;
  OffsetValue out;
  out.offset = r.i64();
  if (v >= 3) out.leader_epoch = r.i32();
  out.metadata = r.string(flexible);
  out.commit_timestamp = r.i64();
  if (v == 1) out.expire_timestamp = r.i64();
  if (flexible) r.skip_tags();
  return finish(r, std::move(out));
}

std::expected<GroupValue, std::string> decode_group_value(std::span<const std::byte> b) {
  Reader r(b, "group metadata value");
  const std::int16_t v = r.i16();
  if (!r.ok()) return std::unexpected(r.error());
  if (v < 0 || v > 4)
    return std::unexpected("group metadata value: unknown version " + std::to_string(v));
  const bool flexible = v >= 4;
  GroupValue out;
  out.protocol_type = r.string(flexible);
  out.generation = r.i32();
  out.protocol = r.nullable_string(flexible);
  out.leader = r.nullable_string(flexible);
  if (v >= 2) out.current_state_timestamp = r.i64();
  // Smallest member: four empty strings, two timeouts, two empty byte arrays.
  const std::int64_t n = r.array(flexible, flexible ? 8 : 24);
  for (std::int64_t i = 0; i < n && r.ok(); ++i) {
    MemberValue m;
    m.member_id = r.string(flexible);
    if (v >= 3) m.group_instance_id = r.nullable_string(flexible);
    m.client_id = r.string(flexible);
    m.client_host = r.string(flexible);
    if (v >= 1) m.rebalance_timeout = r.i32();
    m.session_timeout = r.i32();
    m.subscription = r.bytes(flexible);
    m.assignment = r.bytes(flexible);
    if (flexible) r.skip_tags();
    // Version 0 has no rebalance timeout; Kafka takes the session timeout then.
    if (v == 0) m.rebalance_timeout = m.session_timeout;
    out.members.push_back(std::move(m));
  }
  if (flexible) r.skip_tags();
  return finish(r, std::move(out));
}

std::int32_t java_string_hash(std::string_view s) {
  std::uint32_t h = 0;
  auto add = [&h](std::uint32_t unit) { h = h * 31 + unit; };
  auto add_cp = [&add](std::uint32_t cp) {
    if (cp >= 0x10000) {
      cp -= 0x10000;
      add(0xD800 + (cp >> 10));
      add(0xDC00 + (cp & 0x3FF));
    } else {
      add(cp);
    }
  };
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    unsigned char c = p[i];
    if (c < 0x80) {
      add(c);
      ++i;
      continue;
    }
    // Well-formed sequences as Unicode's table 3-7 lists them: the second byte's range
    // depends on the lead byte (no overlongs, no surrogates, nothing above U+10FFFF).
    std::size_t len;
    std::uint32_t cp;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2, cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3, cp = c & 0x0F;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4, cp = c & 0x07;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      add(0xFFFD);
      ++i;
      continue;
    }
    std::size_t k = 1;
    for (; k < len && i + k < n; ++k) {
      unsigned char b = p[i + k];
      if (k == 1 ? (b < lo || b > hi) : (b & 0xC0) != 0x80) break;
      cp = (cp << 6) | (b & 0x3F);
    }
    if (k < len) {
      // A malformed sequence becomes one replacement character for its longest valid prefix
      // (at least the lead byte), as Java's decoder does.
      add(0xFFFD);
      i += k;
      continue;
    }
    add_cp(cp);
    i += len;
  }
  return static_cast<std::int32_t>(h);
}

std::int32_t partition_for(std::string_view group, std::int32_t partitions) {
  if (partitions <= 0) return 0;
  const std::int32_t h = java_string_hash(group);
  const std::int32_t a = h == INT32_MIN ? 0 : (h < 0 ? -h : h);
  return a % partitions;
}

std::optional<std::vector<std::string>> subscription_topics(std::span<const std::byte> metadata) {
  // ConsumerProtocolSubscription: int16 version, then topics as an int32-counted array of
  // int16-length strings in every version (later fields follow and are not needed).
  Reader r(metadata, "consumer subscription");
  const std::int16_t version = r.i16();
  if (!r.ok() || version < 0) return std::nullopt;
  const std::int64_t n = r.array(false, 2);
  std::vector<std::string> topics;
  for (std::int64_t i = 0; i < n && r.ok(); ++i)
    topics.push_back(r.string(false));
  if (!r.ok()) return std::nullopt;
  return topics;
}

}  // namespace samsa::coordinator
