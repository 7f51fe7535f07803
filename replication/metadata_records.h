// Records of the __cluster_metadata log (DESIGN.md decision 9). The broker's view of topics,
// partitions and configs is whatever replaying these records produces; the Raft controller
// quorum will later replicate the same records, so the state machine never changes shape.
//
// Each record's value is: int8 frame version (0), int16 record type, int16 record version,
// then the fields (big-endian; strings as int16 length + bytes, -1 for null; arrays as int32
// count + items). Record keys are empty.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "replication/acl.h"

namespace samsa::replication {

using Uuid = std::array<std::uint8_t, 16>;
inline constexpr Uuid kZeroUuid{};
Uuid random_uuid();
// Kafka's textual form: URL-safe base64 without padding (22 characters).
std::string uuid_to_string(const Uuid& u);
std::optional<Uuid> uuid_from_string(std::string_view s);

struct TopicRecord {
  std::string name;
  Uuid topic_id{};
};

struct PartitionRecord {
  Uuid topic_id{};
  std::int32_t partition = 0;
  std::vector<std::int32_t> replicas;
  std::vector<std::int32_t> isr;
  std::int32_t leader = -1;
  std::int32_t leader_epoch = 0;
  std::int32_t partition_epoch = 0;
  // KIP-966's eligible leader replicas: out of the ISR, yet holding every committed record.
  std::vector<std::int32_t> elr;
  // A reassignment in progress (Kafka's fields): replicas being added (not yet in the ISR)
  // and being removed once they are. Both empty: none.
  std::vector<std::int32_t> removing_replicas;
  std::vector<std::int32_t> adding_replicas;
};

struct RemoveTopicRecord {
  Uuid topic_id{};
};

enum class ConfigResource : std::int8_t { broker = 4, topic = 2 };

struct ConfigRecord {
  ConfigResource resource = ConfigResource::topic;
  std::string resource_name;  // topic name, or broker id ("" for cluster-wide)
  std::string key;
  std::optional<std::string> value;  // nullopt deletes the override
};

struct ProducerIdsRecord {
  std::int32_t broker_id = 0;
  std::int64_t next_producer_id = 0;  // first id of the next block to hand out
};

// A listener a broker serves on (RegisterBrokerRecord's EndPoints).
struct BrokerEndpoint {
  std::string name;  // listener name, e.g. "PLAINTEXT"
  std::string host;
  std::int32_t port = 0;
  std::int16_t security_protocol = 0;
  bool operator==(const BrokerEndpoint&) const = default;
};

// A broker registered (or re-registered after a restart: a new incarnation gets a new epoch).
// Its epoch is what its heartbeats, fetches and ISR memberships are checked against.
struct RegisterBrokerRecord {
  std::int32_t broker_id = -1;
  Uuid incarnation_id{};
  std::int64_t broker_epoch = -1;
  std::vector<BrokerEndpoint> endpoints;
  std::optional<std::string> rack;
  bool fenced = true;  // a new registration is fenced until it has caught up with the metadata
  // The directory ids of its log dirs (KIP-858; meta.properties' directory.id). A restart with
  // a different id means the disk that held its replicas is gone.
  std::vector<Uuid> log_dirs;
};

// Kafka's BrokerRegistrationChangeRecord: fencing and controlled shutdown of a registration.
struct BrokerRegistrationChangeRecord {
  std::int32_t broker_id = -1;
  std::int64_t broker_epoch = -1;
  std::int8_t fenced = 0;                  // 1 fenced, -1 unfenced, 0 unchanged
  std::int8_t in_controlled_shutdown = 0;  // 1 entered controlled shutdown, 0 unchanged
};

// Kafka's PartitionChangeRecord: a leader and/or ISR change. Replaying it bumps the partition
// epoch, and the leader epoch when the leader changes.
inline constexpr std::int32_t kNoLeaderChange = -2;
struct PartitionChangeRecord {
  Uuid topic_id{};
  std::int32_t partition = 0;
  std::optional<std::vector<std::int32_t>> isr;  // nullopt: unchanged
  std::int32_t leader = kNoLeaderChange;         // -1: no leader
  std::optional<std::vector<std::int32_t>> elr;  // nullopt: unchanged
  // Reassignment (nullopt: unchanged): the new replica list, and what is being added and
  // removed (empty lists when a reassignment completes or is cancelled).
  std::optional<std::vector<std::int32_t>> replicas;
  std::optional<std::vector<std::int32_t>> removing_replicas;
  std::optional<std::vector<std::int32_t>> adding_replicas;
};

// Kafka's UnregisterBrokerRecord (1): a decommissioned broker's registration is removed.
struct UnregisterBrokerRecord {
  std::int32_t broker_id = -1;
  std::int64_t broker_epoch = -1;
};

// Kafka's ScramMechanism ids.
enum class ScramMechanism : std::int8_t { sha256 = 1, sha512 = 2 };

// Kafka's UserScramCredentialRecord: a user's SCRAM credential for one mechanism (never the
// password: what RFC 5802's server stores). A new one for the same user and mechanism
// replaces it.
struct UserScramCredentialRecord {
  std::string name;
  ScramMechanism mechanism = ScramMechanism::sha256;
  std::string salt;
  std::string stored_key;
  std::string server_key;
  std::int32_t iterations = 0;
};

struct RemoveUserScramCredentialRecord {
  std::string name;
  ScramMechanism mechanism = ScramMechanism::sha256;
};

// Kafka's AccessControlEntryRecord (18): an ACL was created; its id is what
// RemoveAccessControlEntryRecord (19) names. Fields: acl_records.h.
struct AccessControlEntryRecord {
  Uuid id{};
  AclBinding binding;
  bool operator==(const AccessControlEntryRecord&) const = default;
};

struct RemoveAccessControlEntryRecord {
  Uuid id{};
  bool operator==(const RemoveAccessControlEntryRecord&) const = default;
};

// Kafka's ClientQuotaRecord (14): one quota of one entity set (or removed). The entity is
// its (type, name) pairs sorted by type: "user" and/or "client-id" (a null name is that
// type's default), or "ip".
using QuotaEntity = std::vector<std::pair<std::string, std::optional<std::string>>>;
struct ClientQuotaRecord {
  QuotaEntity entity;
  std::string key;  // producer_byte_rate, consumer_byte_rate, request_percentage, ...
  double value = 0;
  bool remove = false;
  bool operator==(const ClientQuotaRecord&) const = default;
};

using MetadataRecord =
    std::variant<TopicRecord, PartitionRecord, RemoveTopicRecord, ConfigRecord, ProducerIdsRecord,
                 RegisterBrokerRecord, BrokerRegistrationChangeRecord, PartitionChangeRecord,
                 UserScramCredentialRecord, RemoveUserScramCredentialRecord,
                 AccessControlEntryRecord, RemoveAccessControlEntryRecord, ClientQuotaRecord,
                 UnregisterBrokerRecord>;

std::vector<std::byte> encode_record(const MetadataRecord& r);
// nullopt on malformed input (the caller reports the offset).
std::optional<MetadataRecord> decode_record(std::span<const std::byte> value);

}  // namespace samsa::replication
