#include "replication/shard.h"

#include <algorithm>
#include <charconv>
#include <functional>

#include "base/clock.h"
#include "base/log.h"
#include "io/checkpoint.h"

namespace samsa::replication {
namespace {

std::string hex(const Uuid& u) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (auto b : u) {
    s.push_back(d[b >> 4]);
    s.push_back(d[b & 15]);
  }
  return s;
}

}  // namespace

Shard::Shard(io::Reactor& r, Options opts) : reactor_(r), opts_(std::move(opts)) {
  retry_timer_.shard = this;
  retry_timer_.fn = [](io::Timer* t) { static_cast<RetryTimer*>(t)->shard->finish_retired(); };
  expiry_timer_.shard = this;
  expiry_timer_.fn = [](io::Timer* t) { static_cast<RetryTimer*>(t)->shard->expire_producers(); };
  reactor_.arm(&expiry_timer_, mono_ns() + opts_.producer_expiration_check_ms * 1'000'000);
}

Shard::~Shard() {
  reactor_.disarm(&retry_timer_);
  reactor_.disarm(&expiry_timer_);
  // The background threads' tasks already posted must find these inactive.
  for (auto& [p, reg] : retention_regs_)
    opts_.retention->remove(reg);
  for (auto& [p, reg] : cleaner_regs_)
    opts_.cleaner->remove(reg);
}

void Shard::expire_producers() {
  const std::int64_t now = wall_ms();
  std::size_t n = 0;
  for (auto& [key, p] : partitions_)
    n += p->expire_producers(now);
  if (n) LOG_DEBUG("shard %zu: %zu idle producers expired", opts_.index, n);
  reactor_.arm(&expiry_timer_, mono_ns() + opts_.producer_expiration_check_ms * 1'000'000);
}

void Shard::set_partition_options(const PartitionOptions& o) {
  opts_.partition = o;
  for (auto& [key, p] : partitions_)
    p->set_options(o);
}

std::size_t Shard::owner(std::string_view topic, std::int32_t partition, std::size_t count) {
  if (count <= 1) return 0;
  // FNV-1a over the name, then the partition: stable across runs and builds (std::hash is not
  // guaranteed to be).
  std::uint64_t h = 1469598103934665603ull;
  for (char c : topic) {
    h ^= static_cast<std::uint8_t>(c);
    h *= 1099511628211ull;
  }
  h ^= static_cast<std::uint32_t>(partition);
  h *= 1099511628211ull;
  return static_cast<std::size_t>(h % count);
}

Partition* Shard::find_replica(std::string_view topic, std::int32_t partition) {
  auto it = partitions_.find(std::pair<std::string_view, std::int32_t>(topic, partition));
  return it == partitions_.end() ? nullptr : it->second.get();
}

Partition* Shard::find(std::string_view topic, std::int32_t partition) {
  Partition* p = find_replica(topic, partition);
  return p && p->leader_here() ? p : nullptr;
}

std::expected<Partition*, kafka::ErrorCode> Shard::lookup(std::string_view topic,
                                                          std::int32_t partition,
                                                          std::int32_t current_leader_epoch,
                                                          bool any_replica) {
  using kafka::ErrorCode;
  Partition* p = find(topic, partition);
  if (!p && any_replica) {
    // A follower's HW is the leader's capped by what it holds on disk: what it serves below it
    // is committed. (Without replica_hw its HW would be its own log's.)
    p = find_replica(topic, partition);
    if (p && !p->replicated()) p = nullptr;
  }
  if (!p) {
    const TopicState* t = image_ ? image_->topic(topic) : nullptr;
    if (!t || partition < 0 || static_cast<std::size_t>(partition) >= t->partitions.size())
      return std::unexpected(ErrorCode::unknown_topic_or_partition);
    if (failed_.contains(std::string(topic) + "-" + std::to_string(partition)))
      return std::unexpected(ErrorCode::kafka_storage_error);
    return std::unexpected(ErrorCode::not_leader_or_follower);
  }
  // KIP-320: a client that knows an older leader epoch is fenced; a newer one, we lag.
  if (current_leader_epoch >= 0 && current_leader_epoch != p->leader_epoch()) {
    return std::unexpected(current_leader_epoch < p->leader_epoch()
                               ? ErrorCode::fenced_leader_epoch
                               : ErrorCode::unknown_leader_epoch);
  }
  return p;
}

io::LogDir* Shard::dir_for(const io::PartitionId& id) {
  io::LogDir* best = nullptr;
  std::size_t best_count = SIZE_MAX;
  for (io::LogDir* d : opts_.log_dirs) {
    if (std::filesystem::exists(d->partition_dir(id))) return d;
    std::size_t n = d->partition_count();
    if (n < best_count) {
      best = d;
      best_count = n;
    }
  }
  return best;
}

void Shard::open_partition(const TopicState& t, const PartitionState& p) {
  io::PartitionId id{t.name, p.partition};
  io::LogDir* dir = dir_for(id);
  if (!dir) return;
  auto log = dir->open_log(reactor_, id, make_log_config(t.configs, opts_.defaults));
  if (!log) {
    LOGF_ERROR((log::Fields{.topic = t.name, .partition = p.partition, .error_code = 56}),
               "cannot open partition %s: %s %s", id.dir_name().c_str(),
               io::errc_name(log.error().code), log.error().detail.c_str());
    failed_[id.dir_name()] = log.error().detail;
    return;
  }
  failed_.erase(id.dir_name());
  auto part = std::make_unique<Partition>(reactor_, t.name, t.id, p.partition, p.leader_epoch,
                                          std::move(*log), opts_.partition);
  if (opts_.retention) retention_regs_[part.get()] = opts_.retention->add(reactor_, part->log());
  if (opts_.cleaner) {
    // Only what every replica holds and no open transaction may still abort is compacted:
    // below the last stable offset (see io::LogCleaner::Bounds).
    Partition* pp = part.get();
    io::LogCleaner::Bounds b;
    b.cleanable_limit = [pp] { return pp->last_stable_offset(); };
    b.aborted_txns = [pp](std::int64_t from, std::int64_t upto, std::vector<io::AbortedTxn>& out) {
      pp->txns().aborted_in(from, upto, out);
    };
    cleaner_regs_[pp] = opts_.cleaner->add(reactor_, part->log(), std::move(b));
  }
  part->set_leader_here(opts_.node_id < 0 || (registered_ && p.leader == opts_.node_id));
  partitions_.emplace(Key{t.name, p.partition}, std::move(part));
}

void Shard::sync_replica(Partition& part, const TopicState& t, const PartitionState& p) {
  if (opts_.node_id < 0) return;  // a single node: no replication, as before
  if (!part.replica()) {
    ReplicaOptions o = opts_.replica;
    o.broker_id = opts_.node_id;
    part.enable_replica(o, opts_.replica_hw);
  }
  ReplicaState& rs = *part.replica();
  std::int32_t min_isr = 1;
  const std::string v = topic_config_value(t.configs, opts_.defaults, "min.insync.replicas");
  std::from_chars(v.data(), v.data() + v.size(), min_isr);
  rs.set_min_insync_replicas(min_isr);
  rs.set_broker_epoch(broker_epoch_);
  // Leading needs this process's registration, unfenced, in the image: an earlier incarnation's
  // leadership is not ours (its unsynced tail may be gone). The controller moves it to a new
  // epoch, which we then apply; following or stopping is always safe.
  if (p.leader == opts_.node_id && !registered_) return;
  part.apply_metadata(p, mono_ms());
}

void Shard::apply(ImagePtr image) {
  // Images share unchanged topics (copy-on-write), so a topic whose state is the very object
  // the previous image held needs nothing: with 100,000 partitions, walking every one on each
  // CreateTopics would make creating them quadratic.
  const ImagePtr prev = std::move(image_);
  image_ = std::move(image);
  auto unchanged = [&](const std::string& name, const TopicState* t) {
    return prev && t && prev->topic(name) == t;
  };
  // Close partitions whose topic is gone or was re-created under a new id, and remove the
  // replicas a reassignment moved off this node (Kafka's StopReplica with deletion).
  for (auto it = partitions_.begin(); it != partitions_.end();) {
    const std::string name = it->first.first;
    const auto topic_end =
        partitions_.upper_bound(std::pair<std::string_view, std::int32_t>(name, INT32_MAX));
    const TopicState* t = image_->topic(name);
    if (unchanged(name, t)) {
      it = topic_end;
      continue;
    }
    while (it != topic_end) {
      const auto index = static_cast<std::size_t>(it->first.second);
      bool gone = !t || t->id != it->second->topic_id() || index >= t->partitions.size() ||
                  (opts_.node_id >= 0 && !contains(t->partitions[index].replicas, opts_.node_id));
      if (gone) {
        auto p = std::move(it->second);
        it = partitions_.erase(it);
        retire(std::move(p), true);
      } else {
        ++it;
      }
    }
  }
  if (!strays_checked_) {
    strays_checked_ = true;
    set_aside_strays();
  }
  const bool was_registered = registered_;
  const std::int64_t was_epoch = broker_epoch_;
  registered_ = opts_.node_id < 0;
  broker_epoch_ = -1;
  if (!registered_) {
    auto b = image_->brokers().find(opts_.node_id);
    const bool mine =
        b != image_->brokers().end() && b->second.incarnation_id == opts_.incarnation_id;
    if (mine) broker_epoch_ = b->second.epoch;
    registered_ = mine && !b->second.fenced;
  }
  const bool same_registration = was_registered == registered_ && was_epoch == broker_epoch_;
  std::vector<std::pair<const TopicState*, const PartitionState*>> to_open;
  for (const auto& [name, topic] : image_->topics()) {
    if (same_registration && unchanged(name, topic.get()) && !unsettled_.contains(name)) continue;
    bool settled = true;
    for (const auto& p : topic->partitions) {
      if (!owns(name, p.partition)) continue;
      if (opts_.node_id >= 0 &&
          std::find(p.replicas.begin(), p.replicas.end(), opts_.node_id) == p.replicas.end())
        continue;  // no replica here
      const bool leads = opts_.node_id < 0 || (registered_ && p.leader == opts_.node_id);
      if (Partition* existing = find_replica(name, p.partition)) {
        existing->set_leader_epoch(p.leader_epoch);
        existing->set_leader_here(leads);
        existing->log().set_config(make_log_config(topic->configs, opts_.defaults));
        sync_replica(*existing, *topic, p);
        continue;
      }
      settled = false;  // settled once it is open (looked at again on the next image)
      // A deleted topic re-created under the same name while the old partition still drains
      // its appends: the new one opens once the old directory has been renamed away
      // (finish_retired), never on top of it.
      if (retiring(name, p.partition)) continue;
      to_open.emplace_back(topic.get(), &p);
    }
    if (settled) {
      unsettled_.erase(name);
    } else {
      unsettled_.insert(name);
    }
  }
  open_partitions(to_open);
  finish_retired();
}

// New partitions' directories are made first, all of them, and each log dir they went to is
// synced once (instead of once per partition): a created partition's directory is as durable
// as before, before its log opens. Its segment files' entries are synced with its first
// group commit or its close, as a rolled segment's are (io/README.md, "Power cuts").
void Shard::open_partitions(
    const std::vector<std::pair<const TopicState*, const PartitionState*>>& parts) {
  if (parts.empty()) return;
  std::vector<io::LogDir*> made_in;
  for (auto [t, p] : parts) {
    io::PartitionId id{t->name, p->partition};
    io::LogDir* dir = dir_for(id);
    if (!dir) continue;
    auto made = io::make_directory(dir->partition_dir(id));
    if (!made) continue;  // open_partition reports it
    if (*made && std::find(made_in.begin(), made_in.end(), dir) == made_in.end())
      made_in.push_back(dir);
  }
  for (io::LogDir* d : made_in) {
    if (auto r = io::fsync_dir(d->root()); !r)
      LOG_ERROR("syncing %s: %s", d->root().c_str(), r.error().detail.c_str());
  }
  for (auto [t, p] : parts) {
    open_partition(*t, *p);
    if (Partition* opened = find_replica(t->name, p->partition))
      sync_replica(*opened, *t, *p);
    else
      unsettled_.insert(t->name);
  }
}

// Partition directories on disk that the metadata does not know or places elsewhere (a crash
// between deleting a topic and renaming its directories, a replica moved away while this node
// was down, or a directory copied in by hand) are renamed
// "<dir>.<id>-stray", as Kafka does: out of the way, never deleted without an operator.
void Shard::set_aside_strays() {
  for (io::LogDir* d : opts_.log_dirs) {
    for (const auto& id : d->partitions()) {
      if (!owns(id.topic, id.partition) || id.topic == "__cluster_metadata") continue;
      const TopicState* t = image_->topic(id.topic);
      // A replica reassigned away while this node was down is a stray too (as in Kafka).
      if (t && static_cast<std::size_t>(id.partition) < t->partitions.size() &&
          (opts_.node_id < 0 ||
           contains(t->partitions[static_cast<std::size_t>(id.partition)].replicas, opts_.node_id)))
        continue;
      std::filesystem::path from = d->partition_dir(id);
      if (!std::filesystem::exists(from)) continue;
      std::filesystem::path to = from;
      to += "." + hex(random_uuid()) + "-stray";
      if (auto r = io::rename_durably(from, to); !r) {
        LOG_ERROR("stray partition directory %s could not be set aside: %s", from.c_str(),
                  r.error().detail.c_str());
      } else {
        d->forget(id);
        LOG_WARN("partition directory %s is not in the cluster metadata; renamed to %s",
                 from.c_str(), to.filename().c_str());
      }
    }
  }
}

void Shard::set_defaults(TopicDefaults defaults) {
  opts_.defaults = std::move(defaults);
  if (!image_) return;
  for (auto& [key, p] : partitions_) {
    if (const TopicState* t = image_->topic(key.first))
      p->log().set_config(make_log_config(t->configs, opts_.defaults));
  }
}

void Shard::retire(std::unique_ptr<Partition> p, bool remove_data) {
  if (auto it = retention_regs_.find(p.get()); it != retention_regs_.end()) {
    opts_.retention->remove(it->second);
    retention_regs_.erase(it);
  }
  if (auto it = cleaner_regs_.find(p.get()); it != cleaner_regs_.end()) {
    opts_.cleaner->remove(it->second);
    cleaner_regs_.erase(it);
  }
  io::PartitionId id{p->topic(), p->index()};
  io::LogDir* dir = nullptr;
  for (io::LogDir* d : opts_.log_dirs)
    if (d->root() == p->log().dir().parent_path()) dir = d;
  closing_.push_back(Retired{std::move(p), remove_data, dir});
}

bool Shard::retiring(std::string_view topic, std::int32_t partition) const {
  for (const auto& r : closing_)
    if (r.partition->topic() == topic && r.partition->index() == partition) return true;
  return false;
}

void Shard::finish_retired() {
  std::vector<io::PartitionId> reopen;
  // A log with appends in flight cannot close yet; look again shortly.
  for (auto it = closing_.begin(); it != closing_.end();) {
    Partition& p = *it->partition;
    if (!p.log().idle()) {
      ++it;
      continue;
    }
    std::filesystem::path dir = p.log().dir();
    if (auto r = p.close(); !r) {
      LOG_WARN("closing %s: %s", dir.c_str(), r.error().detail.c_str());
    }
    Uuid id = p.topic_id();
    io::PartitionId pid{p.topic(), p.index()};
    bool remove = it->remove_data;
    io::LogDir* ld = it->dir;
    it = closing_.erase(it);            // destroys the Partition and its Log
    if (remove) reopen.push_back(pid);  // (close_all keeps its data and reopens nothing)
    if (remove) {
      // Kafka's convention: rename to "<topic>-<p>.<id>-delete" at once, durably (neither a
      // restart nor a power cut resurrects it; a tree left half-removed is removed at the next
      // start), remove the tree in the background.
      std::filesystem::path doomed = dir;
      doomed += "." + hex(id) + "-delete";
      if (auto r = io::rename_durably(dir, doomed); !r) {
        LOG_ERROR("cannot rename %s for deletion: %s", dir.c_str(), r.error().detail.c_str());
      } else {
        if (ld) ld->forget(pid);
        LOG_INFO("deleted partition %s", pid.dir_name().c_str());
        if (opts_.retention) opts_.retention->schedule_unlink({doomed}, 0);
      }
    }
  }
  // Partitions of a re-created topic that waited for the old directory to go.
  for (const auto& pid : reopen) {
    const TopicState* t = image_ ? image_->topic(pid.topic) : nullptr;
    if (!t || pid.partition >= static_cast<std::int32_t>(t->partitions.size())) continue;
    const PartitionState& ps = t->partitions[static_cast<std::size_t>(pid.partition)];
    // Only a replica placed here (a reassignment moved others away for good).
    if (opts_.node_id >= 0 && !contains(ps.replicas, opts_.node_id)) continue;
    if (!owns(pid.topic, pid.partition) || find_replica(pid.topic, pid.partition)) continue;
    if (retiring(pid.topic, pid.partition)) continue;
    open_partition(*t, ps);
    if (Partition* opened = find_replica(pid.topic, pid.partition)) sync_replica(*opened, *t, ps);
  }
  if (!closing_.empty() && !retry_timer_.armed())
    reactor_.arm(&retry_timer_, mono_ns() + 5'000'000);
}

void Shard::close_all() {
  for (auto it = partitions_.begin(); it != partitions_.end();) {
    auto p = std::move(it->second);
    it = partitions_.erase(it);
    retire(std::move(p), false);
  }
  finish_retired();
}

}  // namespace samsa::replication
