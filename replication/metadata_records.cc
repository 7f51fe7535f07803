#include "replication/metadata_records.h"

#include <cstring>
#include <random>

#include "base/byte_io.h"
#include "replication/acl_records.h"

namespace samsa::replication {
namespace {

enum Type : std::int16_t {
  kRegisterBroker = 0,
  kTopic = 2,
  kPartition = 3,
  kConfig = 4,
  kPartitionChange = 5,
  kRemoveTopic = 9,
  kProducerIds = 15,
  kBrokerRegistrationChange = 17,
  kUserScramCredential = 11,
  kRemoveUserScramCredential = 22,
  kClientQuota = 14,
};

void put_uuid(ByteWriter& w, const Uuid& u) {
  w.raw(u.data(), u.size());
}

Uuid get_uuid(ByteReader& r) {
  Uuid u{};
  auto b = r.raw(u.size());
  for (std::size_t i = 0; i < b.size(); ++i)
    u[i] = static_cast<std::uint8_t>(b[i]);
  return u;
}

void put_ints(ByteWriter& w, const std::vector<std::int32_t>& v) {
  w.i32(static_cast<std::int32_t>(v.size()));
  for (auto x : v)
    w.i32(x);
}

std::vector<std::int32_t> get_ints(ByteReader& r) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(r.array(false, 4)));
  for (auto& x : v)
    x = r.i32();
  return v;
}

void put_opt_ints(ByteWriter& w, const std::optional<std::vector<std::int32_t>>& v) {
  if (!v) {
    w.i32(-1);
    return;
  }
  put_ints(w, *v);
}

// A null array is int32 -1 (PartitionChangeRecord's "ISR unchanged").
std::optional<std::vector<std::int32_t>> get_opt_ints(ByteReader& r) {
  auto n = r.i32();
  if (n == -1) return std::nullopt;
  if (n < 0) {
    r.fail("negative array length");
    return std::vector<std::int32_t>{};
  }
  std::vector<std::int32_t> v;
  for (std::int32_t i = 0; i < n && r.ok(); ++i)
    v.push_back(r.i32());
  return v;
}

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

// The SCRAM credential records' fields (after the frame header); false on a bad mechanism.
bool decode_scram(ByteReader& in, std::int16_t type, MetadataRecord* out) {
  if (type == kRemoveUserScramCredential) {
    RemoveUserScramCredentialRecord r;
    r.name = in.string(false);
    r.mechanism = static_cast<ScramMechanism>(in.i8());
    *out = std::move(r);
    return true;
  }
  UserScramCredentialRecord r;
  r.name = in.string(false);
  r.mechanism = static_cast<ScramMechanism>(in.i8());
  r.salt = in.string(false);
  r.stored_key = in.string(false);
  r.server_key = in.string(false);
  r.iterations = in.i32();
  if (r.mechanism != ScramMechanism::sha256 && r.mechanism != ScramMechanism::sha512) return false;
  *out = std::move(r);
  return true;
}

}  // namespace

Uuid random_uuid() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  Uuid u;
  for (;;) {
    std::uint64_t a = rng(), b = rng();
    for (int i = 0; i < 8; ++i) {
      u[i] = static_cast<std::uint8_t>(a >> (8 * i));
      u[8 + i] = static_cast<std::uint8_t>(b >> (8 * i));
    }
    u[6] = (u[6] & 0x0f) | 0x40;  // version 4
    u[8] = (u[8] & 0x3f) | 0x80;  // IETF variant
    // Kafka reserves the zero id and the "metadata topic" id (all zeros but the last byte 1),
    // and ids whose text starts with '-' confuse command-line tools.
    if (u != kZeroUuid && uuid_to_string(u)[0] != '-') return u;
  }
}

std::string uuid_to_string(const Uuid& u) {
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (auto byte : u) {
    acc = (acc << 8) | byte;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(kB64[(acc >> bits) & 0x3f]);
    }
  }
  if (bits > 0) out.push_back(kB64[(acc << (6 - bits)) & 0x3f]);
  return out;
}

std::optional<Uuid> uuid_from_string(std::string_view s) {
  if (s.size() != 22) return std::nullopt;
  Uuid u{};
  std::uint32_t acc = 0;
  int bits = 0;
  std::size_t k = 0;
  for (char c : s) {
    const char* p = std::char_traits<char>::find(kB64, 64, c);
    if (!p) return std::nullopt;
    acc = (acc << 6) | static_cast<std::uint32_t>(p - kB64);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      if (k < 16) u[k++] = static_cast<std::uint8_t>(acc >> bits);
    }
  }
  return u;
}

std::vector<std::byte> encode_record(const MetadataRecord& r) {
  ByteWriter w;
  w.i8(0);
  std::visit(
      [&](const auto& rec) {
        using R = std::decay_t<decltype(rec)>;
        if constexpr (std::is_same_v<R, TopicRecord>) {
          w.i16(kTopic);
          w.i16(0);
          w.string(rec.name);
          put_uuid(w, rec.topic_id);
        } else if constexpr (std::is_same_v<R, PartitionRecord>) {
          // Version 1 adds the ELR; written only when there is one, so that logs without
          // any stay readable by samsads that predate it.
          const bool v1 = !rec.elr.empty();
          w.i16(kPartition);
          w.i16(v1 ? 1 : 0);
          put_uuid(w, rec.topic_id);
          w.i32(rec.partition);
          put_ints(w, rec.replicas);
          put_ints(w, rec.isr);
          w.i32(rec.leader);
          w.i32(rec.leader_epoch);
          w.i32(rec.partition_epoch);
          if (v1) put_ints(w, rec.elr);
        } else if constexpr (std::is_same_v<R, RemoveTopicRecord>) {
          w.i16(kRemoveTopic);
          w.i16(0);
          put_uuid(w, rec.topic_id);
        } else if constexpr (std::is_same_v<R, ConfigRecord>) {
          w.i16(kConfig);
          w.i16(0);
          w.i8(static_cast<std::int8_t>(rec.resource));
          w.string(rec.resource_name);
          w.string(rec.key);
          w.nullable_string(rec.value);
        } else if constexpr (std::is_same_v<R, ProducerIdsRecord>) {
          w.i16(kProducerIds);
          w.i16(0);
          w.i32(rec.broker_id);
          w.i64(rec.next_producer_id);
        } else if constexpr (std::is_same_v<R, RegisterBrokerRecord>) {
          const bool v1 = !rec.log_dirs.empty();  // version 1 adds the directory ids
          w.i16(kRegisterBroker);
          w.i16(v1 ? 1 : 0);
          w.i32(rec.broker_id);
          put_uuid(w, rec.incarnation_id);
          w.i64(rec.broker_epoch);
          w.i32(static_cast<std::int32_t>(rec.endpoints.size()));
          for (const auto& e : rec.endpoints) {
            w.string(e.name);
            w.string(e.host);
            w.i32(e.port);
            w.i16(e.security_protocol);
          }
          w.nullable_string(rec.rack);
          w.i8(rec.fenced ? 1 : 0);
          if (v1) {
            w.i32(static_cast<std::int32_t>(rec.log_dirs.size()));
            for (const auto& d : rec.log_dirs)
              put_uuid(w, d);
          }
        } else if constexpr (std::is_same_v<R, BrokerRegistrationChangeRecord>) {
          w.i16(kBrokerRegistrationChange);
          w.i16(0);
          w.i32(rec.broker_id);
          w.i64(rec.broker_epoch);
          w.i8(rec.fenced);
          w.i8(rec.in_controlled_shutdown);
        } else if constexpr (std::is_same_v<R, PartitionChangeRecord>) {
          const bool v1 = rec.elr.has_value();  // version 1 adds an ELR change
          w.i16(kPartitionChange);
          w.i16(v1 ? 1 : 0);
          put_uuid(w, rec.topic_id);
          w.i32(rec.partition);
          put_opt_ints(w, rec.isr);
          w.i32(rec.leader);
          if (v1) put_opt_ints(w, rec.elr);
        } else if constexpr (std::is_same_v<R, UserScramCredentialRecord>) {
          w.i16(kUserScramCredential);
          w.i16(0);
          w.string(rec.name);
          w.i8(static_cast<std::int8_t>(rec.mechanism));
          w.string(rec.salt);
          w.string(rec.stored_key);
          w.string(rec.server_key);
          w.i32(rec.iterations);
        } else if constexpr (std::is_same_v<R, RemoveUserScramCredentialRecord>) {
          w.i16(kRemoveUserScramCredential);
          w.i16(0);
          w.string(rec.name);
          w.i8(static_cast<std::int8_t>(rec.mechanism));
        } else if constexpr (std::is_same_v<R, ClientQuotaRecord>) {
          w.i16(kClientQuota);
          w.i16(0);
          w.i32(static_cast<std::int32_t>(rec.entity.size()));
          for (const auto& [type, name] : rec.entity) {
            w.string(type);
            w.nullable_string(name);
          }
          w.string(rec.key);
          std::uint64_t bits = 0;
          std::memcpy(&bits, &rec.value, sizeof bits);
          w.i64(static_cast<std::int64_t>(bits));
          w.i8(rec.remove ? 1 : 0);
        } else if constexpr (std::is_same_v<R, AccessControlEntryRecord>) {
          w.i16(kAccessControlEntryRecordType);
          w.i16(0);
          put_acl_record_fields(w, rec);
        } else if constexpr (std::is_same_v<R, RemoveAccessControlEntryRecord>) {
          w.i16(kRemoveAccessControlEntryRecordType);
          w.i16(0);
          put_acl_record_fields(w, rec);
        }
      },
      r);
  return w.take();
}

std::optional<MetadataRecord> decode_record(std::span<const std::byte> value) {
  ByteReader in(value, "metadata record");
  if (in.i8() != 0) return std::nullopt;
  auto type = in.i16();
  auto version = in.i16();
  // Version 1 of a partition, partition change and broker registration adds a field.
  const bool versioned = type == kPartition || type == kPartitionChange || type == kRegisterBroker;
  if (!in.ok() || version < 0 || version > (versioned ? 1 : 0)) return std::nullopt;
  MetadataRecord out;
  switch (type) {
    case kTopic: {
      TopicRecord r;
      r.name = in.string(false);
      r.topic_id = get_uuid(in);
      out = std::move(r);
      break;
    }
    case kPartition: {
      PartitionRecord r;
      r.topic_id = get_uuid(in);
      r.partition = in.i32();
      r.replicas = get_ints(in);
      r.isr = get_ints(in);
      r.leader = in.i32();
      r.leader_epoch = in.i32();
      r.partition_epoch = in.i32();
      if (version >= 1) r.elr = get_ints(in);
      out = std::move(r);
      break;
    }
    case kRemoveTopic: {
      RemoveTopicRecord r;
      r.topic_id = get_uuid(in);
      out = r;
      break;
    }
    case kConfig: {
      ConfigRecord r;
      r.resource = static_cast<ConfigResource>(in.i8());
      r.resource_name = in.string(false);
      r.key = in.string(false);
      r.value = in.nullable_string(false);
      out = std::move(r);
      break;
    }
    case kProducerIds: {
      ProducerIdsRecord r;
      r.broker_id = in.i32();
      r.next_producer_id = in.i64();
      out = r;
      break;
    }
    case kRegisterBroker: {
      RegisterBrokerRecord r;
      r.broker_id = in.i32();
      r.incarnation_id = get_uuid(in);
      r.broker_epoch = in.i64();
      auto n = in.array(false, 10);
      for (std::int32_t i = 0; i < n && in.ok(); ++i) {
        BrokerEndpoint e;
        e.name = in.string(false);
        e.host = in.string(false);
        e.port = in.i32();
        e.security_protocol = in.i16();
        r.endpoints.push_back(std::move(e));
      }
      r.rack = in.nullable_string(false);
      auto f = in.i8();
      if (f != 0 && f != 1) return std::nullopt;
      r.fenced = f == 1;
      if (version >= 1) {
        auto dirs = in.array(false, 16);
        for (std::int32_t i = 0; i < dirs && in.ok(); ++i)
          r.log_dirs.push_back(get_uuid(in));
      }
      out = std::move(r);
      break;
    }
    case kBrokerRegistrationChange: {
      BrokerRegistrationChangeRecord r;
      r.broker_id = in.i32();
      r.broker_epoch = in.i64();
      r.fenced = in.i8();
      r.in_controlled_shutdown = in.i8();
      if (r.fenced < -1 || r.fenced > 1 || r.in_controlled_shutdown < 0 ||
          r.in_controlled_shutdown > 1)
        return std::nullopt;
      out = r;
      break;
    }
    case kPartitionChange: {
      PartitionChangeRecord r;
      r.topic_id = get_uuid(in);
      r.partition = in.i32();
      r.isr = get_opt_ints(in);
      r.leader = in.i32();
      if (version >= 1) {
        r.elr = get_opt_ints(in);
        if (!r.elr) return std::nullopt;  // version 1 is written only with an ELR change
      }
      out = std::move(r);
      break;
    }
    case kUserScramCredential:
    case kRemoveUserScramCredential:
      if (!decode_scram(in, type, &out)) return std::nullopt;
      break;
    case kClientQuota: {
      ClientQuotaRecord r;
      const auto n = static_cast<std::size_t>(in.array(false, 4));
      for (std::size_t i = 0; in.ok() && i < n; ++i) {
        std::string type = in.string(false);
        auto name = in.nullable_string(false);
        r.entity.emplace_back(std::move(type), std::move(name));
      }
      r.key = in.string(false);
      const auto bits = static_cast<std::uint64_t>(in.i64());
      std::memcpy(&r.value, &bits, sizeof bits);
      const std::int8_t remove = in.i8();
      if (remove != 0 && remove != 1) return std::nullopt;
      r.remove = remove == 1;
      out = std::move(r);
      break;
    }
    case kAccessControlEntryRecordType:
      out = get_access_control_entry_fields(in);
      break;
    case kRemoveAccessControlEntryRecordType:
      out = get_remove_access_control_entry_fields(in);
      break;
    default:
      return std::nullopt;
  }
  if (!in.ok() || !in.at_end()) return std::nullopt;
  return out;
}

}  // namespace samsa::replication
