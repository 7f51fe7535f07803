#include "daemon/api/fetch_sessions.h"

#include <algorithm>
#include <random>

namespace samsa::daemon {

SessionPartition* FetchSession::find(std::string_view topic, const replication::Uuid& id,
                                     bool by_id, std::int32_t partition) {
  for (auto& p : partitions) {
    if (p.partition != partition) continue;
    if (by_id ? p.topic_id == id : p.topic == topic) return &p;
  }
  return nullptr;
}

void FetchSession::remove(std::string_view topic, const replication::Uuid& id, bool by_id,
                          std::int32_t partition) {
  std::erase_if(partitions, [&](const SessionPartition& p) {
    return p.partition == partition && (by_id ? p.topic_id == id : p.topic == topic);
  });
}

FetchSession* FetchSessionCache::find(std::int32_t id) {
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : it->second.get();
}

void FetchSessionCache::remove(std::int32_t id) {
  sessions_.erase(id);
}

std::int32_t FetchSessionCache::new_id() {
  // Positive, never 0, low byte = reactor index + 1 (ids from another reactor are not ours),
  // the rest a random start plus a counter so ids are not reused soon.
  static thread_local std::mt19937 rng{std::random_device{}()};
  if (counter_ == 0) counter_ = rng() & 0x7fffff;
  for (;;) {
    counter_ = (counter_ + 1) & 0x7fffff;
    const auto id = static_cast<std::int32_t>((counter_ << 8) | ((reactor_ + 1) & 0xff));
    if (id > 0 && !sessions_.contains(id)) return id;
  }
}

bool FetchSessionCache::make_room(std::size_t want, bool privileged, std::int64_t now_ms) {
  if (max_sessions_ == 0) return false;
  if (sessions_.size() < max_sessions_) return true;
  // The least recently used stale session goes first.
  auto stale = sessions_.end();
  for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
    if (now_ms - it->second->last_used_ms < eviction_ms_) continue;
    if (stale == sessions_.end() || it->second->last_used_ms < stale->second->last_used_ms)
      stale = it;
  }
  if (stale != sessions_.end()) {
    sessions_.erase(stale);
    ++stats_.evicted;
    return true;
  }
  // Else the smallest consumer session, if the newcomer is privileged or larger.
  auto smallest = sessions_.end();
  for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
    if (it->second->privileged) continue;
    if (smallest == sessions_.end() ||
        it->second->partitions.size() < smallest->second->partitions.size())
      smallest = it;
  }
  if (smallest != sessions_.end() && (privileged || smallest->second->partitions.size() < want)) {
    sessions_.erase(smallest);
    ++stats_.evicted;
    return true;
  }
  return false;
}

FetchSession* FetchSessionCache::create(std::vector<SessionPartition> partitions, bool privileged,
                                        std::int64_t now_ms) {
  if (!make_room(partitions.size(), privileged, now_ms)) {
    ++stats_.no_slot;
    return nullptr;
  }
  auto s = std::make_unique<FetchSession>();
  s->id = new_id();
  s->privileged = privileged;
  s->last_used_ms = now_ms;
  s->partitions = std::move(partitions);
  FetchSession* raw = s.get();
  sessions_.emplace(s->id, std::move(s));
  ++stats_.created;
  return raw;
}

}  // namespace samsa::daemon
