#include "replication/metadata_records.h"

#include <cstring>
#include <random>

#include "base/byte_io.h"
#include "replication/acl_records.h"

namespace samsa::replication {
namespace {

enum Type : std::int16_t {
  kRegisterBroker = 0,
  kUnregisterBroker = 1,
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

namespace {

// ---- each record's type, version and fields ----
// A field added in a later version is written only when it holds something, so logs that do
// not use it stay readable by samsads that predate it.

void put(ByteWriter& w, const TopicRecord& rec) {
  w.i16(kTopic);
  w.i16(0);
  w.string(rec.name);
  put_uuid(w, rec.topic_id);
}

// Version 1 adds the ELR, version 2 the reassignment's adding and removing replicas.
void put(ByteWriter& w, const PartitionRecord& rec) {
  const bool v2 = !rec.adding_replicas.empty() || !rec.removing_replicas.empty();
  const bool v1 = v2 || !rec.elr.empty();
  w.i16(kPartition);
  w.i16(v2 ? 2 : v1 ? 1 : 0);
  put_uuid(w, rec.topic_id);
  w.i32(rec.partition);
  put_ints(w, rec.replicas);
  put_ints(w, rec.isr);
  w.i32(rec.leader);
  w.i32(rec.leader_epoch);
  w.i32(rec.partition_epoch);
  if (v1) put_ints(w, rec.elr);
  if (v2) {
    put_ints(w, rec.removing_replicas);
    put_ints(w, rec.adding_replicas);
  }
}

void put(ByteWriter& w, const RemoveTopicRecord& rec) {
  w.i16(kRemoveTopic);
  w.i16(0);
  put_uuid(w, rec.topic_id);
}

void put(ByteWriter& w, const ConfigRecord& rec) {
  w.i16(kConfig);
  w.i16(0);
  w.i8(static_cast<std::int8_t>(rec.resource));
  w.string(rec.resource_name);
  w.string(rec.key);
  w.nullable_string(rec.value);
}

void put(ByteWriter& w, const ProducerIdsRecord& rec) {
  w.i16(kProducerIds);
  w.i16(0);
  w.i32(rec.broker_id);
  w.i64(rec.next_producer_id);
}

void put(ByteWriter& w, const RegisterBrokerRecord& rec) {
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
}

void put(ByteWriter& w, const BrokerRegistrationChangeRecord& rec) {
  w.i16(kBrokerRegistrationChange);
  w.i16(0);
  w.i32(rec.broker_id);
  w.i64(rec.broker_epoch);
  w.i8(rec.fenced);
  w.i8(rec.in_controlled_shutdown);
}

// Version 1 adds an ELR change (always present in it), version 2 a reassignment's replica
// lists (each nullable, the ELR too).
void put(ByteWriter& w, const PartitionChangeRecord& rec) {
  const bool v2 = rec.replicas || rec.removing_replicas || rec.adding_replicas;
  const bool v1 = !v2 && rec.elr.has_value();
  w.i16(kPartitionChange);
  w.i16(v2 ? 2 : v1 ? 1 : 0);
  put_uuid(w, rec.topic_id);
  w.i32(rec.partition);
  put_opt_ints(w, rec.isr);
  w.i32(rec.leader);
  if (v1 || v2) put_opt_ints(w, rec.elr);
  if (v2) {
    put_opt_ints(w, rec.replicas);
    put_opt_ints(w, rec.removing_replicas);
    put_opt_ints(w, rec.adding_replicas);
  }
}

void put(ByteWriter& w, const UserScramCredentialRecord& rec) {
  w.i16(kUserScramCredential);
  w.i16(0);
  w.string(rec.name);
  w.i8(static_cast<std::int8_t>(rec.mechanism));
  w.string(rec.salt);
  w.string(rec.stored_key);
  w.string(rec.server_key);
  w.i32(rec.iterations);
}

void put(ByteWriter& w, const RemoveUserScramCredentialRecord& rec) {
  w.i16(kRemoveUserScramCredential);
  w.i16(0);
  w.string(rec.name);
  w.i8(static_cast<std::int8_t>(rec.mechanism));
}

void put(ByteWriter& w, const ClientQuotaRecord& rec) {
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
}

void put(ByteWriter& w, const AccessControlEntryRecord& rec) {
  w.i16(kAccessControlEntryRecordType);
  w.i16(0);
  put_acl_record_fields(w, rec);
}

void put(ByteWriter& w, const RemoveAccessControlEntryRecord& rec) {
  w.i16(kRemoveAccessControlEntryRecordType);
  w.i16(0);
  put_acl_record_fields(w, rec);
}

void put(ByteWriter& w, const UnregisterBrokerRecord& rec) {
  w.i16(kUnregisterBroker);
  w.i16(0);
  w.i32(rec.broker_id);
  w.i64(rec.broker_epoch);
}

// ---- and back: each reads the fields of its version; nullopt when they are invalid ----
using Decoded = std::optional<MetadataRecord>;

Decoded get_topic(ByteReader& in, std::int16_t) {
  TopicRecord r;
  r.name = in.string(false);
  r.topic_id = get_uuid(in);
  return r;
}

Decoded get_partition(ByteReader& in, std::int16_t version) {
  PartitionRecord r;
  r.topic_id = get_uuid(in);
  r.partition = in.i32();
  r.replicas = get_ints(in);
  r.isr = get_ints(in);
  r.leader = in.i32();
  r.leader_epoch = in.i32();
  r.partition_epoch = in.i32();
  if (version >= 1) r.elr = get_ints(in);
  if (version >= 2) {
    r.removing_replicas = get_ints(in);
    r.adding_replicas = get_ints(in);
  }
  return r;
}

Decoded get_remove_topic(ByteReader& in, std::int16_t) {
  RemoveTopicRecord r;
  r.topic_id = get_uuid(in);
  return r;
}

Decoded get_config(ByteReader& in, std::int16_t) {
  ConfigRecord r;
  r.resource = static_cast<ConfigResource>(in.i8());
  r.resource_name = in.string(false);
  r.key = in.string(false);
  r.value = in.nullable_string(false);
  return r;
}

Decoded get_producer_ids(ByteReader& in, std::int16_t) {
  ProducerIdsRecord r;
  r.broker_id = in.i32();
  r.next_producer_id = in.i64();
  return r;
}

Decoded get_register_broker(ByteReader& in, std::int16_t version) {
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
  return r;
}

Decoded get_broker_registration_change(ByteReader& in, std::int16_t) {
  BrokerRegistrationChangeRecord r;
  r.broker_id = in.i32();
  r.broker_epoch = in.i64();
  r.fenced = in.i8();
  r.in_controlled_shutdown = in.i8();
  if (r.fenced < -1 || r.fenced > 1 || r.in_controlled_shutdown < 0 || r.in_controlled_shutdown > 1)
    return std::nullopt;
  return r;
}

Decoded get_partition_change(ByteReader& in, std::int16_t version) {
  PartitionChangeRecord r;
  r.topic_id = get_uuid(in);
  r.partition = in.i32();
  r.isr = get_opt_ints(in);
  r.leader = in.i32();
  if (version >= 1) r.elr = get_opt_ints(in);
  if (version == 1 && !r.elr) return std::nullopt;  // version 1 is written only with an ELR
  if (version >= 2) {
    r.replicas = get_opt_ints(in);
    r.removing_replicas = get_opt_ints(in);
    r.adding_replicas = get_opt_ints(in);
    if (!r.replicas && !r.removing_replicas && !r.adding_replicas) return std::nullopt;
  }
  return r;
}

Decoded get_scram(ByteReader& in, std::int16_t type) {
  MetadataRecord out;
  if (!decode_scram(in, type, &out)) return std::nullopt;
  return out;
}

Decoded get_client_quota(ByteReader& in, std::int16_t) {
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
  return r;
}

Decoded get_unregister_broker(ByteReader& in, std::int16_t) {
  UnregisterBrokerRecord r;
  r.broker_id = in.i32();
  r.broker_epoch = in.i64();
  return r;
}

// The newest version of each record type samsa reads (-1: not a type it knows).
std::int16_t max_version(std::int16_t type) {
  switch (type) {
    case kPartition:
    case kPartitionChange:
      return 2;
    case kRegisterBroker:
      return 1;
    case kTopic:
    case kRemoveTopic:
    case kConfig:
    case kProducerIds:
    case kBrokerRegistrationChange:
    case kUserScramCredential:
    case kRemoveUserScramCredential:
    case kClientQuota:
    case kAccessControlEntryRecordType:
    case kRemoveAccessControlEntryRecordType:
    case kUnregisterBroker:
      return 0;
    default:
      return -1;
  }
}

Decoded get_fields(ByteReader& in, std::int16_t type, std::int16_t version) {
  switch (type) {
    case kTopic:
      return get_topic(in, version);
    case kPartition:
      return get_partition(in, version);
    case kRemoveTopic:
      return get_remove_topic(in, version);
    case kConfig:
      return get_config(in, version);
    case kProducerIds:
      return get_producer_ids(in, version);
    case kRegisterBroker:
      return get_register_broker(in, version);
    case kBrokerRegistrationChange:
      return get_broker_registration_change(in, version);
    case kPartitionChange:
      return get_partition_change(in, version);
    case kUserScramCredential:
    case kRemoveUserScramCredential:
      return get_scram(in, type);
    case kClientQuota:
      return get_client_quota(in, version);
    case kAccessControlEntryRecordType:
      return get_access_control_entry_fields(in);
    case kRemoveAccessControlEntryRecordType:
      return get_remove_access_control_entry_fields(in);
    case kUnregisterBroker:
      return get_unregister_broker(in, version);
    default:
      return std::nullopt;
  }
}

}  // namespace

std::vector<std::byte> encode_record(const MetadataRecord& r) {
  ByteWriter w;
  w.i8(0);
  std::visit([&](const auto& rec) { put(w, rec); }, r);
  return w.take();
}

std::optional<MetadataRecord> decode_record(std::span<const std::byte> value) {
  ByteReader in(value, "metadata record");
  if (in.i8() != 0) return std::nullopt;
  const auto type = in.i16();
  const auto version = in.i16();
  if (!in.ok() || version < 0 || version > max_version(type)) return std::nullopt;
  auto out = get_fields(in, type, version);
  if (!out || !in.ok() || !in.at_end()) return std::nullopt;
  return out;
}

}  // namespace samsa::replication
