// __consumer_offsets: replaying its partitions at start and writing records. The topic is
// compacted by the log cleaner (cleanup.policy=compact), so superseded records go and the live
// ones stay however old they are.

#include "coordinator/coordinator_impl.h"

#include "base/log.h"
#include "io/batch_builder.h"
#include "io/record_batch.h"

namespace samsa::coordinator {

ErrorCode store_error(const io::Error& e) {
  switch (e.code) {
    case io::Errc::batch_too_large:
      return ErrorCode::invalid_commit_offset_size;
    case io::Errc::not_found:
      return ErrorCode::not_coordinator;
    default:
      return ErrorCode::coordinator_not_available;
  }
}

// ---------------------------------------------------------------------------------------------
// Loading

void GroupCoordinator::start(std::int32_t partitions, Leadership leadership) {
  if (partitions_ > 0 || partitions <= 0) return;
  partitions_ = partitions;
  leadership_ = leadership;
  slots_.assign(static_cast<std::size_t>(partitions), Slot{});
  if (leadership == Leadership::all) {
    LOG_INFO("group coordinator: loading %d partitions of %s", partitions, kOffsetsTopic.data());
    for (std::int32_t p = 0; p < partitions; ++p) {
      Slot& s = slots_[static_cast<std::size_t>(p)];
      s.state = LoadState::loading;
      s.term = 1;
      s.load_started_ns = mono_ns();
      ++loading_;
    }
    for (std::int32_t p = 0; p < partitions; ++p)
      load_partition(p);
  } else {
    LOG_INFO("group coordinator: %s has %d partitions; serving those led here",
             kOffsetsTopic.data(), partitions);
  }
  reactor_.arm(&expiry_timer_, mono_ns() + opts_.offsets_retention_check_interval_ms * 1'000'000);
}

bool GroupCoordinator::active(std::int32_t p) const {
  return p >= 0 && p < partitions_ &&
         slots_[static_cast<std::size_t>(p)].state != LoadState::inactive;
}

bool GroupCoordinator::serving(std::int32_t p) const {
  return p >= 0 && p < partitions_ &&
         slots_[static_cast<std::size_t>(p)].state == LoadState::loaded;
}

void GroupCoordinator::activate(std::int32_t p, std::int32_t leader_epoch) {
  if (shutting_down_ || p < 0 || p >= partitions_) return;
  Slot& s = slots_[static_cast<std::size_t>(p)];
  if (leader_epoch < s.epoch) {
    LOG_DEBUG("group coordinator: %s-%d: election in leader epoch %d is older than %d; ignored",
              kOffsetsTopic.data(), p, leader_epoch, s.epoch);
    return;
  }
  // Still the leader in a newer epoch: the state in memory is the log's, nothing to replay.
  if (s.state != LoadState::inactive) {
    s.epoch = leader_epoch;
    return;
  }
  s.state = LoadState::loading;
  s.epoch = leader_epoch;
  ++s.term;
  s.failed_before = false;
  s.load_started_ns = mono_ns();
  ++loading_;
  LOG_INFO("group coordinator: loading %s-%d (leader epoch %d)", kOffsetsTopic.data(), p,
           leader_epoch);
  load_partition(p);
}

void GroupCoordinator::deactivate(std::int32_t p, std::int32_t leader_epoch) {
  if (p < 0 || p >= partitions_) return;
  Slot& s = slots_[static_cast<std::size_t>(p)];
  if (leader_epoch < s.epoch) {
    LOG_DEBUG("group coordinator: %s-%d: resignation in leader epoch %d is older than %d; ignored",
              kOffsetsTopic.data(), p, leader_epoch, s.epoch);
    return;
  }
  s.epoch = leader_epoch;
  if (s.state == LoadState::inactive) return;
  if (s.state != LoadState::loaded) --loading_;
  s.state = LoadState::inactive;
  ++s.term;
  ++stats_.partitions_unloaded;
  unload_partition(p);
}

void GroupCoordinator::unload_partition(std::int32_t p) {
  std::vector<Group*> doomed;
  for (auto& [id, g] : groups_)
    if (g->partition == p) doomed.push_back(g.get());
  // Members waiting in JoinGroup or SyncGroup look for the new coordinator.
  for (Group* g : doomed)
    erase_group(g, ErrorCode::not_coordinator);
  LOG_INFO("group coordinator: unloaded %s-%d (leader epoch %d): %zu groups", kOffsetsTopic.data(),
           p, slots_[static_cast<std::size_t>(p)].epoch, doomed.size());
}

void GroupCoordinator::load_partition(std::int32_t p) {
  // Callbacks of a load that a resignation overtook find a newer term and change nothing.
  const std::uint64_t term = slots_[static_cast<std::size_t>(p)].term;
  store_->load(
      p,
      [this, p, term](std::span<const std::byte> batch) {
        if (slots_[static_cast<std::size_t>(p)].term == term) replay_batch(p, batch);
      },
      [this, p, term](std::optional<io::Error> err) {
        if (slots_[static_cast<std::size_t>(p)].term == term) on_loaded(p, std::move(err));
      });
}

void GroupCoordinator::replay_batch(std::int32_t p, std::span<const std::byte> batch) {
  if (batch.size() < io::batch::kHeaderSize) return;
  const io::BatchInfo info = io::batch::parse_header(batch.data());
  if (info.is_control()) {
    // A transaction's marker: its pending offsets are committed or dropped, as when it was
    // written.
    if (auto m = io::batch::parse_txn_marker(batch); m && info.producer_id >= 0)
      complete_txn(p, info.producer_id, m->type == io::batch::ControlType::commit);
    return;
  }
  std::vector<std::byte> storage;
  auto records = io::batch::records_of(batch, storage);
  if (!records) {
    LOG_ERROR("%s-%d: skipping an unreadable batch at offset %lld: %s", kOffsetsTopic.data(), p,
              static_cast<long long>(info.base_offset), records.error().detail.c_str());
    return;
  }
  io::batch::RecordReader reader(*records, info.record_count);
  for (;;) {
    auto rec = reader.next();
    if (!rec) {
      LOG_ERROR("%s-%d: malformed record in the batch at offset %lld: %s", kOffsetsTopic.data(), p,
                static_cast<long long>(info.base_offset), rec.error().detail.c_str());
      return;
    }
    if (!*rec) break;
    const io::batch::Record& r = **rec;
    ++stats_.records_loaded;
    if (!r.key) continue;
    auto key = decode_key(*r.key);
    if (!key) {
      LOG_WARN("%s-%d: skipping a record at offset %lld: %s", kOffsetsTopic.data(), p,
               static_cast<long long>(info.base_offset + r.offset_delta), key.error().c_str());
      continue;
    }
    if (auto* ok = std::get_if<OffsetKey>(&*key)) {
      Group* g = find_group(ok->group);
      if (!r.value) {
        if (g) g->offsets.erase({ok->topic, ok->partition});
        continue;
      }
      auto v = decode_offset_value(*r.value);
      if (!v) {
        LOG_WARN("%s-%d: skipping the offset of %s at offset %lld: %s", kOffsetsTopic.data(), p,
                 ok->group.c_str(), static_cast<long long>(info.base_offset + r.offset_delta),
                 v.error().c_str());
        continue;
      }
      if (!g) g = create_group(ok->group);
      if (info.is_transactional() && info.producer_id >= 0) {
        g->pending_txn[info.producer_id][{ok->topic, ok->partition}] = std::move(*v);
      } else {
        g->offsets[{ok->topic, ok->partition}] = std::move(*v);
      }
    } else if (auto* gk = std::get_if<GroupKey>(&*key)) {
      if (!r.value) {
        // The group is gone; offsets written after the tombstone (there are none in what
        // Kafka writes) would re-create it as a group that only commits.
        if (Group* g = find_group(gk->group)) erase_group(g);
        continue;
      }
      auto v = decode_group_value(*r.value);
      if (!v) {
        LOG_WARN("%s-%d: skipping the metadata of group %s: %s", kOffsetsTopic.data(), p,
                 gk->group.c_str(), v.error().c_str());
        continue;
      }
      apply_group_value(p, gk->group, std::move(*v));
    }
  }
}

void GroupCoordinator::apply_group_value(std::int32_t p, const std::string& group_id,
                                         GroupValue v) {
  Group* g = find_group(group_id);
  if (!g) g = create_group(group_id);
  g->partition = p;
  for (auto& [id, m] : g->members)
    reactor_.disarm(&m->heartbeat);
  g->members.clear();
  g->static_members.clear();
  g->pending_sync.clear();
  g->protocol_type = v.protocol_type;
  g->generation = v.generation;
  g->protocol = v.protocol;
  g->leader = v.leader;
  g->state_timestamp_ms = v.current_state_timestamp;
  for (auto& mv : v.members) {
    auto m = std::make_unique<Member>();
    m->heartbeat.member = m.get();
    m->heartbeat.fn = &on_heartbeat_expired;
    m->coordinator = this;
    m->group = g;
    m->id = mv.member_id;
    m->instance_id = mv.group_instance_id;
    m->client_id = mv.client_id;
    m->client_host = mv.client_host;
    m->session_timeout_ms = mv.session_timeout;
    m->rebalance_timeout_ms = mv.rebalance_timeout;
    m->protocol_type = v.protocol_type;
    if (v.protocol) m->protocols.push_back({*v.protocol, std::move(mv.subscription)});
    m->assignment = std::move(mv.assignment);
    m->join_seq = g->next_join_seq++;
    if (m->instance_id) g->static_members[*m->instance_id] = m->id;
    g->members.emplace(m->id, std::move(m));
  }
  // A group with members was Stable when it was written: the members resume heartbeating (or
  // expire) as if nothing happened.
  g->state = g->members.empty() ? GroupState::empty : GroupState::stable;
}

void GroupCoordinator::on_loaded(std::int32_t p, std::optional<io::Error> err) {
  Slot& slot = slots_[static_cast<std::size_t>(p)];
  if (err) {
    // Said once per partition; the retries that follow (every load_retry_ms) stay quiet.
    if (!slot.failed_before) {
      LOG_ERROR("group coordinator: loading %s-%d failed (%s); retrying", kOffsetsTopic.data(), p,
                err->detail.c_str());
      slot.failed_before = true;
    }
    slot.state = LoadState::failed;
    // Drop what was replayed so far: the retry starts over.
    std::vector<Group*> doomed;
    for (auto& [id, g] : groups_)
      if (g->partition == p) doomed.push_back(g.get());
    for (Group* g : doomed)
      erase_group(g);
    if (!retry_timer_.armed())
      reactor_.arm(&retry_timer_, mono_ns() + opts_.load_retry_ms * 1'000'000);
    return;
  }
  slot.state = LoadState::loaded;
  --loading_;
  ++stats_.partitions_loaded;
  if (slot.failed_before)
    LOG_INFO("group coordinator: loaded %s-%d after all", kOffsetsTopic.data(), p);
  std::size_t groups = 0;
  for (auto& [id, g] : groups_) {
    if (g->partition != p) continue;
    ++groups;
    for (auto& [mid, m] : g->members)
      touch_member(*m, m->session_timeout_ms);
  }
  if (leadership_ == Leadership::elected) {
    LOG_INFO("group coordinator: loaded %s-%d (leader epoch %d): %zu groups in %lld ms",
             kOffsetsTopic.data(), p, slot.epoch, groups,
             static_cast<long long>((mono_ns() - slot.load_started_ns) / 1'000'000));
    return;
  }
  LOG_DEBUG("group coordinator: loaded %s-%d: %zu groups", kOffsetsTopic.data(), p, groups);
  if (loading_ == 0)
    LOG_INFO("group coordinator: loaded %zu groups from %d partitions", groups_.size(),
             partitions_);
}

void GroupCoordinator::on_load_retry(io::Timer* t) {
  auto* self = static_cast<RetryTimer*>(t)->self;
  if (self->shutting_down_) return;
  for (std::int32_t p = 0; p < self->partitions_; ++p) {
    Slot& s = self->slots_[static_cast<std::size_t>(p)];
    if (s.state != LoadState::failed) continue;
    s.state = LoadState::loading;
    self->load_partition(p);
  }
}

// ---------------------------------------------------------------------------------------------
// Storage

GroupValue GroupCoordinator::group_value(const Group& g) const {
  GroupValue v;
  v.protocol_type = g.protocol_type;
  v.generation = g.generation;
  v.protocol = g.protocol;
  v.leader = g.leader;
  v.current_state_timestamp = g.state_timestamp_ms;
  if (g.state == GroupState::empty || g.state == GroupState::dead) return v;
  for (const Member* m : g.ordered()) {
    MemberValue mv;
    mv.member_id = m->id;
    mv.group_instance_id = m->instance_id;
    mv.client_id = m->client_id;
    mv.client_host = m->client_host;
    mv.rebalance_timeout = m->rebalance_timeout_ms;
    mv.session_timeout = m->session_timeout_ms;
    if (g.protocol)
      if (const Bytes* md = m->metadata(*g.protocol)) mv.subscription = *md;
    mv.assignment = m->assignment;
    v.members.push_back(std::move(mv));
  }
  return v;
}

void GroupCoordinator::store_records(
    std::int32_t partition, const std::vector<std::pair<Bytes, std::optional<Bytes>>>& records,
    OffsetsStore::AppendDone done, std::int64_t producer_id, std::int16_t producer_epoch) {
  std::size_t size = io::batch::kHeaderSize;
  for (const auto& [k, v] : records)
    size += io::BatchBuilder::max_record_size(k.size(), v ? v->size() : 0);
  std::vector<std::byte> buf(size);
  io::BatchBuilder::Options bo;
  if (producer_id >= 0) {
    bo.producer_id = producer_id;
    bo.producer_epoch = producer_epoch;
    bo.transactional = true;
  }
  io::BatchBuilder b(buf, bo);
  const std::int64_t now = wall_ms();
  for (const auto& [k, v] : records) {
    io::BatchBuilder::Bytes value = std::nullopt;
    if (v) value = std::span<const std::byte>(*v);
    b.add(now, std::span<const std::byte>(k), value);
  }
  buf.resize(b.finish().size());
  ++stats_.batches_written;
  const std::uint64_t term = slots_[static_cast<std::size_t>(partition)].term;
  store_->append(
      partition, std::move(buf),
      [this, partition, term, done = std::move(done)](std::optional<io::Error> err) mutable {
        // Leadership moved while the batch was written: whether the new leader has
        // it is not ours to say, so the client asks the new coordinator again.
        if (!err && slots_[static_cast<std::size_t>(partition)].term != term)
          err = io::Error{io::Errc::not_found, std::string(kOffsetsTopic) + "-" +
                                                   std::to_string(partition) +
                                                   " is no longer led here"};
        done(std::move(err));
      });
}

}  // namespace samsa::coordinator
