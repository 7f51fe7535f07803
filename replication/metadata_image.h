// MetadataImage — the cluster's state as replaying __cluster_metadata produces it: topics with
// ids, partitions with replicas/leader/epochs, topic config overrides, producer-id blocks.
// Images are immutable once published; a change produces a new image (copy-on-write at the
// topic level) that the controller hands to every reactor.
#pragma once

#include <compare>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "replication/acl.h"
#include "replication/metadata_records.h"

namespace samsa::replication {

struct PartitionState {
  std::int32_t partition = 0;
  std::vector<std::int32_t> replicas;
  std::vector<std::int32_t> isr;
  std::int32_t leader = -1;
  std::int32_t leader_epoch = 0;
  std::int32_t partition_epoch = 0;
  std::vector<std::int32_t> elr;  // eligible leader replicas (KIP-966)
  // A reassignment in progress: replicas (the target's, then those leaving) holds both.
  std::vector<std::int32_t> removing;
  std::vector<std::int32_t> adding;
  bool reassigning() const { return !removing.empty() || !adding.empty(); }
};

// A registered broker as the metadata says (RegisterBrokerRecord, then its changes).
struct BrokerState {
  std::int32_t id = -1;
  Uuid incarnation_id{};
  std::int64_t epoch = -1;
  std::vector<BrokerEndpoint> endpoints;
  std::optional<std::string> rack;
  bool fenced = true;
  bool in_controlled_shutdown = false;
  std::vector<Uuid> log_dirs;  // directory ids it registered with
};

// A topic's partitions, each shared between the images that hold it until one of them changes
// it: a commit that changes 30,000 partitions spread over 1,000 topics of 1,000 partitions
// copies 30,000 partition states, not 1,000,000 (the controller at scale, issue 23). Read like
// a vector; only MetadataImage changes it (push_back, writable).
class PartitionList {
  using Slot = std::shared_ptr<const PartitionState>;

 public:
  class const_iterator {
   public:
    using iterator_category = std::random_access_iterator_tag;
    using value_type = PartitionState;
    using difference_type = std::ptrdiff_t;
    using pointer = const PartitionState*;
    using reference = const PartitionState&;
    const_iterator() = default;
    explicit const_iterator(std::vector<Slot>::const_iterator it) : it_(it) {}
    reference operator*() const { return **it_; }
    pointer operator->() const { return it_->get(); }
    reference operator[](difference_type n) const { return *it_[n]; }
    const_iterator& operator++() {
      ++it_;
      return *this;
    }
    const_iterator operator++(int) {
      auto c = *this;
      ++it_;
      return c;
    }
    const_iterator& operator--() {
      --it_;
      return *this;
    }
    const_iterator operator--(int) {
      auto c = *this;
      --it_;
      return c;
    }
    const_iterator& operator+=(difference_type n) {
      it_ += n;
      return *this;
    }
    const_iterator& operator-=(difference_type n) {
      it_ -= n;
      return *this;
    }
    friend const_iterator operator+(const_iterator a, difference_type n) { return a += n; }
    friend const_iterator operator+(difference_type n, const_iterator a) { return a += n; }
    friend const_iterator operator-(const_iterator a, difference_type n) { return a -= n; }
    friend difference_type operator-(const const_iterator& a, const const_iterator& b) {
      return a.it_ - b.it_;
    }
    friend auto operator<=>(const const_iterator&, const const_iterator&) = default;
    friend bool operator==(const const_iterator&, const const_iterator&) = default;

   private:
    std::vector<Slot>::const_iterator it_;
  };
  using iterator = const_iterator;
  using value_type = PartitionState;
  using size_type = std::size_t;

  PartitionList() = default;
  PartitionList(std::initializer_list<PartitionState> ps) {
    for (const auto& p : ps)
      push_back(p);
  }
  std::size_t size() const { return slots_.size(); }
  bool empty() const { return slots_.empty(); }
  const PartitionState& operator[](std::size_t i) const { return *slots_[i]; }
  const PartitionState& at(std::size_t i) const { return *slots_.at(i); }
  const PartitionState& front() const { return *slots_.front(); }
  const PartitionState& back() const { return *slots_.back(); }
  const_iterator begin() const { return const_iterator(slots_.begin()); }
  const_iterator end() const { return const_iterator(slots_.end()); }
  void reserve(std::size_t n) { slots_.reserve(n); }
  void push_back(PartitionState p) {
    slots_.push_back(std::make_shared<const PartitionState>(std::move(p)));
  }
  // Partition i, copied first if another list (an older image's) still shares it. Only for an
  // image nobody else can see yet: use_count() == 1 cannot change under us then.
  PartitionState& writable(std::size_t i) {
    Slot& s = slots_.at(i);
    if (s.use_count() != 1) s = std::make_shared<const PartitionState>(*s);
    return const_cast<PartitionState&>(*s);
  }

 private:
  std::vector<Slot> slots_;
};

struct TopicState {
  std::string name;
  Uuid id{};
  PartitionList partitions;                    // index == partition number
  std::map<std::string, std::string> configs;  // overrides only
};

struct UuidHash {
  std::size_t operator()(const Uuid& u) const {
    std::uint64_t a, b;
    std::memcpy(&a, u.data(), 8);
    std::memcpy(&b, u.data() + 8, 8);
    return a ^ (b * 0x9e3779b97f4a7c15ull);
  }
};

// Whether a replica list (replicas, ISR, ELR) holds broker id.
inline bool contains(const std::vector<std::int32_t>& ids, std::int32_t id) {
  for (std::int32_t x : ids)
    if (x == id) return true;
  return false;
}

// Replays a PartitionChangeRecord (shared with the controller's state machine): the partition
// epoch always moves, the leader epoch moves when the leader does.
void apply_partition_change(PartitionState& p, const PartitionChangeRecord& r);

class MetadataImage {
 public:
  // Applies one record; returns false (and changes nothing) if it contradicts the image, e.g.
  // a partition of an unknown topic. Replay logs and skips such records.
  bool apply(const MetadataRecord& r);

  const TopicState* topic(std::string_view name) const;
  const TopicState* topic(const Uuid& id) const;
  const std::map<std::string, std::shared_ptr<const TopicState>, std::less<>>& topics() const {
    return by_name_;
  }
  // Dynamic broker settings by resource name: "" holds the cluster-wide defaults, "<node id>"
  // one broker's own (Kafka's two dynamic layers).
  using ConfigMap = std::map<std::string, std::string>;
  const std::map<std::string, ConfigMap>& broker_configs() const { return broker_configs_; }
  const ConfigMap& broker_configs(std::string_view resource) const;
  // Partitions of every topic (what samsa.max.partitions bounds).
  std::int64_t partition_count() const { return partition_count_; }
  std::int64_t next_producer_id() const { return next_producer_id_; }
  const std::map<std::int32_t, BrokerState>& brokers() const { return brokers_; }
  // SCRAM credentials by user and mechanism (AlterUserScramCredentials).
  using ScramKey = std::pair<std::string, ScramMechanism>;
  const std::map<ScramKey, UserScramCredentialRecord, std::less<>>& scram_credentials() const {
    return scram_;
  }
  const UserScramCredentialRecord* scram_credential(std::string_view user, ScramMechanism m) const;

  // Client quotas (ClientQuotaRecord) by entity: each entity's keys and values.
  using QuotaMap = std::map<QuotaEntity, std::map<std::string, double>>;
  const QuotaMap& client_quotas() const { return quotas_; }

  // ACLs by id (AccessControlEntryRecord), and the authorizer over them. The authorizer is
  // rebuilt by seal(), not per record: replaying n ACL records must not build it n times.
  // Every image handed to other threads is sealed (ControllerState::committed_image); asking
  // an unsealed one (the controller's working view) for its authorizer is a bug.
  const std::map<Uuid, AclBinding>& acls() const;
  const Authorizer& authorizer() const;
  bool sealed() const { return !acls_ || authorizer_; }
  void seal();

  // Offset of the last record applied (the image's version).
  std::int64_t offset() const { return offset_; }
  void set_offset(std::int64_t o) { offset_ = o; }

 private:
  // apply(), one record type each.
  bool on(const TopicRecord& r);
  bool on(const PartitionRecord& r);
  bool on(const RemoveTopicRecord& r);
  bool on(const ConfigRecord& r);
  bool on(const ProducerIdsRecord& r);
  bool on(const RegisterBrokerRecord& r);
  bool on(const UnregisterBrokerRecord& r);
  bool on(const BrokerRegistrationChangeRecord& r);
  bool on(const PartitionChangeRecord& r);
  bool on(const UserScramCredentialRecord& r);
  bool on(const RemoveUserScramCredentialRecord& r);
  bool on(const ClientQuotaRecord& r);
  bool on(const AccessControlEntryRecord& r);
  bool on(const RemoveAccessControlEntryRecord& r);
  TopicState* writable(std::shared_ptr<const TopicState>& slot);
  std::map<Uuid, AclBinding>& writable_acls();
  std::map<std::string, std::shared_ptr<const TopicState>, std::less<>> by_name_;
  std::unordered_map<Uuid, std::string, UuidHash> name_by_id_;
  std::map<std::string, ConfigMap> broker_configs_;
  std::map<std::int32_t, BrokerState> brokers_;
  std::map<ScramKey, UserScramCredentialRecord, std::less<>> scram_;
  QuotaMap quotas_;
  std::shared_ptr<const std::map<Uuid, AclBinding>> acls_;  // copied on write; null: none yet
  std::shared_ptr<const Authorizer> authorizer_;            // null: stale (or no ACLs)
  std::int64_t partition_count_ = 0;
  std::int64_t next_producer_id_ = 0;
  std::int64_t offset_ = -1;
};

using ImagePtr = std::shared_ptr<const MetadataImage>;

}  // namespace samsa::replication
