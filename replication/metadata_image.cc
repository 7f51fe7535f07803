#include "replication/metadata_image.h"

#include "base/assert.h"

namespace samsa::replication {

const TopicState* MetadataImage::topic(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second.get();
}

const TopicState* MetadataImage::topic(const Uuid& id) const {
  auto it = name_by_id_.find(id);
  return it == name_by_id_.end() ? nullptr : topic(it->second);
}

const MetadataImage::ConfigMap& MetadataImage::broker_configs(std::string_view resource) const {
  static const ConfigMap empty;
  auto it = broker_configs_.find(std::string(resource));
  return it == broker_configs_.end() ? empty : it->second;
}

// Copy-on-write at the topic level: a topic still shared with an older image (published, so
// other threads may read it) is copied once; after that this image owns it alone and the
// following records of the same commit change it in place. Without this, a topic with n
// partitions cost n copies of the topic (quadratic: seconds for 10,000 partitions).
TopicState* MetadataImage::writable(std::shared_ptr<const TopicState>& slot) {
  // use_count() == 1: only this image (not yet published) holds it; nobody can start sharing
  // it meanwhile, since no other thread can see this image.
  if (slot.use_count() != 1) slot = std::make_shared<TopicState>(*slot);
  return const_cast<TopicState*>(slot.get());
}

void apply_partition_change(PartitionState& p, const PartitionChangeRecord& r) {
  if (r.isr) p.isr = *r.isr;
  if (r.elr) p.elr = *r.elr;
  if (r.replicas) p.replicas = *r.replicas;
  if (r.removing_replicas) p.removing = *r.removing_replicas;
  if (r.adding_replicas) p.adding = *r.adding_replicas;
  if (r.leader != kNoLeaderChange && r.leader != p.leader) {
    p.leader = r.leader;
    ++p.leader_epoch;
  }
  ++p.partition_epoch;
}

bool MetadataImage::apply(const MetadataRecord& rec) {
  return std::visit([&](const auto& r) { return on(r); }, rec);
}

bool MetadataImage::on(const TopicRecord& r) {
  if (by_name_.contains(r.name) || name_by_id_.contains(r.topic_id)) return false;
  auto t = std::make_shared<TopicState>();
  t->name = r.name;
  t->id = r.topic_id;
  by_name_.emplace(r.name, std::move(t));
  name_by_id_.emplace(r.topic_id, r.name);
  return true;
}

bool MetadataImage::on(const PartitionRecord& r) {
  auto id = name_by_id_.find(r.topic_id);
  if (id == name_by_id_.end() || r.partition < 0) return false;
  auto& slot = by_name_[id->second];
  auto p = static_cast<std::size_t>(r.partition);
  if (p > slot->partitions.size()) return false;  // partitions are added in order
  TopicState* t = writable(slot);
  PartitionState ps{r.partition, r.replicas,          r.isr,
                    r.leader,    r.leader_epoch,      r.partition_epoch,
                    r.elr,       r.removing_replicas, r.adding_replicas};
  if (p == t->partitions.size()) {
    t->partitions.push_back(std::move(ps));
    ++partition_count_;
  } else {
    t->partitions.writable(p) = std::move(ps);
  }
  return true;
}

bool MetadataImage::on(const RemoveTopicRecord& r) {
  auto id = name_by_id_.find(r.topic_id);
  if (id == name_by_id_.end()) return false;
  if (auto t = by_name_.find(id->second); t != by_name_.end())
    partition_count_ -= static_cast<std::int64_t>(t->second->partitions.size());
  by_name_.erase(id->second);
  name_by_id_.erase(id);
  return true;
}

bool MetadataImage::on(const ConfigRecord& r) {
  if (r.resource == ConfigResource::broker) {
    auto& layer = broker_configs_[r.resource_name];
    if (r.value) {
      layer[r.key] = *r.value;
    } else {
      layer.erase(r.key);
      if (layer.empty()) broker_configs_.erase(r.resource_name);
    }
    return true;
  }
  auto it = by_name_.find(r.resource_name);
  if (it == by_name_.end()) return false;
  TopicState* t = writable(it->second);
  if (r.value) {
    t->configs[r.key] = *r.value;
  } else {
    t->configs.erase(r.key);
  }
  return true;
}

bool MetadataImage::on(const ProducerIdsRecord& r) {
  // Blocks only move forward: a record that does not would hand out ids again.
  if (r.next_producer_id <= next_producer_id_) return false;
  next_producer_id_ = r.next_producer_id;
  return true;
}

bool MetadataImage::on(const RegisterBrokerRecord& r) {
  if (r.broker_id < 0) return false;
  auto& b = brokers_[r.broker_id];
  if (b.id >= 0 && r.broker_epoch <= b.epoch) return false;  // epochs only grow
  b = BrokerState{r.broker_id, r.incarnation_id, r.broker_epoch, r.endpoints,
                  r.rack,      r.fenced,         false,          r.log_dirs};
  return true;
}

bool MetadataImage::on(const UnregisterBrokerRecord& r) {
  auto it = brokers_.find(r.broker_id);
  if (it == brokers_.end() || it->second.epoch != r.broker_epoch) return false;
  brokers_.erase(it);
  return true;
}

bool MetadataImage::on(const BrokerRegistrationChangeRecord& r) {
  auto it = brokers_.find(r.broker_id);
  if (it == brokers_.end() || it->second.epoch != r.broker_epoch) return false;
  if (r.fenced != 0) it->second.fenced = r.fenced > 0;
  // Controlled shutdown ends with the registration (the next one starts clear).
  if (r.in_controlled_shutdown) it->second.in_controlled_shutdown = true;
  return true;
}

bool MetadataImage::on(const PartitionChangeRecord& r) {
  auto id = name_by_id_.find(r.topic_id);
  if (id == name_by_id_.end() || r.partition < 0) return false;
  auto& slot = by_name_[id->second];
  auto p = static_cast<std::size_t>(r.partition);
  if (p >= slot->partitions.size()) return false;
  TopicState* t = writable(slot);
  apply_partition_change(t->partitions.writable(p), r);
  return true;
}

bool MetadataImage::on(const UserScramCredentialRecord& r) {
  if (r.name.empty()) return false;
  scram_[{r.name, r.mechanism}] = r;
  return true;
}

bool MetadataImage::on(const RemoveUserScramCredentialRecord& r) {
  return scram_.erase({r.name, r.mechanism}) > 0;
}

bool MetadataImage::on(const ClientQuotaRecord& r) {
  if (r.entity.empty() || r.key.empty()) return false;
  if (!r.remove) {
    quotas_[r.entity][r.key] = r.value;
  } else if (auto it = quotas_.find(r.entity); it != quotas_.end()) {
    it->second.erase(r.key);
    if (it->second.empty()) quotas_.erase(it);
  }
  return true;
}

bool MetadataImage::on(const AccessControlEntryRecord& r) {
  if (acls().contains(r.id)) return false;
  writable_acls().emplace(r.id, r.binding);
  return true;
}

bool MetadataImage::on(const RemoveAccessControlEntryRecord& r) {
  if (!acls().contains(r.id)) return false;
  writable_acls().erase(r.id);
  return true;
}

const std::map<Uuid, AclBinding>& MetadataImage::acls() const {
  static const std::map<Uuid, AclBinding> none;
  return acls_ ? *acls_ : none;
}

const Authorizer& MetadataImage::authorizer() const {
  static const Authorizer none;
  SAMSA_ASSERT_MSG(sealed(), "an image's authorizer is asked for before the image is sealed");
  return authorizer_ ? *authorizer_ : none;
}

// Copy-on-write as for topics: an ACL map shared with a published image is copied once.
std::map<Uuid, AclBinding>& MetadataImage::writable_acls() {
  if (!acls_ || acls_.use_count() != 1)
    acls_ = std::make_shared<std::map<Uuid, AclBinding>>(acls_ ? *acls_ : acls());
  authorizer_.reset();
  return const_cast<std::map<Uuid, AclBinding>&>(*acls_);
}

void MetadataImage::seal() {
  if (sealed()) return;
  std::vector<AclBinding> bindings;
  bindings.reserve(acls_->size());
  for (const auto& [id, b] : *acls_)
    bindings.push_back(b);
  authorizer_ = std::make_shared<const Authorizer>(std::move(bindings), AuthorizerOptions{});
}

const UserScramCredentialRecord* MetadataImage::scram_credential(std::string_view user,
                                                                 ScramMechanism m) const {
  auto it = scram_.find(ScramKey{std::string(user), m});
  return it == scram_.end() ? nullptr : &it->second;
}

}  // namespace samsa::replication
