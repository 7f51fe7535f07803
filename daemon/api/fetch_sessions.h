// daemon::FetchSessionCache — incremental fetch sessions (KIP-227), one cache per reactor.
//
// A consumer or follower that fetches many partitions opens a session with a full fetch
// (session id 0, epoch 0); the broker remembers the partitions and what it last told the client
// about each (high watermark, last stable offset, log start). Later fetches name the session and
// the next epoch and carry only partitions whose fetch position changed (plus forgotten ones);
// answers carry only partitions with records, errors, or changed offsets.
//
// Sessions live on the reactor that created them, so no state is shared between threads. A
// client whose next fetch lands on another reactor (a reconnect) gets FETCH_SESSION_ID_NOT_FOUND
// and opens a new session, as after an eviction. Session ids carry the reactor's index in their
// low byte, so ids never collide between reactors.
//
// Eviction follows Kafka's FetchSessionCache: a full cache makes room by evicting the least
// recently used session idle longer than the eviction time; failing that, a follower's session,
// or a session larger than the smallest one, evicts the smallest consumer session. Otherwise the
// new full fetch gets no session (id 0).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "replication/metadata_records.h"

namespace samsa::daemon {

struct SessionPartition {
  std::string topic;             // name (the key before Fetch v13)
  replication::Uuid topic_id{};  // the key from v13 on
  std::int32_t partition = 0;
  // What the client asked last.
  std::int64_t fetch_offset = 0;
  std::int32_t max_bytes = 0;
  std::int32_t current_leader_epoch = -1;
  std::int32_t last_fetched_epoch = -1;
  std::int64_t log_start_offset = -1;  // a follower's
  // What the broker answered last (an answer repeats a partition only when these change).
  std::int64_t high_watermark = -1;
  std::int64_t last_stable_offset = -1;
  std::int64_t broker_log_start = -1;
  bool answered = false;
};

struct FetchSession {
  std::int32_t id = 0;
  std::int32_t next_epoch = 1;  // what the next incremental fetch must carry
  bool privileged = false;      // a follower's session
  std::int64_t last_used_ms = 0;
  // Insertion order is the session's order; partitions that returned data move to the end so
  // every partition gets its turn under the response size limit.
  std::vector<SessionPartition> partitions;

  SessionPartition* find(std::string_view topic, const replication::Uuid& id, bool by_id,
                         std::int32_t partition);
  void remove(std::string_view topic, const replication::Uuid& id, bool by_id,
              std::int32_t partition);
};

class FetchSessionCache {
 public:
  struct Stats {
    std::uint64_t created = 0;
    std::uint64_t evicted = 0;
    std::uint64_t not_found = 0;
    std::uint64_t bad_epoch = 0;
    std::uint64_t no_slot = 0;  // full fetches that got no session
  };

  FetchSessionCache(std::size_t reactor_index, std::size_t max_sessions, std::int64_t eviction_ms)
      : reactor_(reactor_index), max_sessions_(max_sessions), eviction_ms_(eviction_ms) {}

  void configure(std::size_t max_sessions, std::int64_t eviction_ms) {
    max_sessions_ = max_sessions;
    eviction_ms_ = eviction_ms;
  }
  FetchSession* find(std::int32_t id);
  // A new session for `partitions`, evicting another if the cache is full and the policy
  // allows; nullptr when there is no room.
  FetchSession* create(std::vector<SessionPartition> partitions, bool privileged,
                       std::int64_t now_ms);
  void remove(std::int32_t id);

  std::size_t size() const { return sessions_.size(); }
  Stats& stats() { return stats_; }

 private:
  std::int32_t new_id();
  bool make_room(std::size_t want_partitions, bool privileged, std::int64_t now_ms);

  std::size_t reactor_;
  std::size_t max_sessions_;
  std::int64_t eviction_ms_;
  std::uint32_t counter_ = 0;
  std::map<std::int32_t, std::unique_ptr<FetchSession>> sessions_;
  Stats stats_;
};

}  // namespace samsa::daemon
