// Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete, and their expiry.

#include "coordinator/coordinator_impl.h"

#include "base/log.h"

namespace samsa::coordinator {

// ---------------------------------------------------------------------------------------------
// Offsets

void GroupCoordinator::commit_offsets(CommitRequest req, Done<CommitResult> done) {
  CommitResult out(req.partitions.size(), ErrorCode::none);
  auto fail_all = [&](ErrorCode e) {
    std::fill(out.begin(), out.end(), e);
    done(std::move(out));
  };
  if (req.group_id.empty()) return fail_all(ErrorCode::invalid_group_id);
  if (auto e = check_group_id(req.group_id); e != ErrorCode::none) return fail_all(e);
  Group* g = find_group(req.group_id);
  if (!g) {
    if (req.generation >= 0) {
      return fail_all(req.group_id_not_found_for_unknown_group ? ErrorCode::group_id_not_found
                                                               : ErrorCode::illegal_generation);
    }
    // A consumer that does not use group management (or an admin tool) commits into a group
    // of its own.
    g = create_group(req.group_id);
  }
  if (g->state == GroupState::dead) return fail_all(ErrorCode::coordinator_not_available);
  if (req.producer_id >= 0) {
    if (auto e = check_txn_commit(*g, req); e != ErrorCode::none) return fail_all(e);
  } else if (!(req.generation < 0 && g->state == GroupState::empty)) {
    if (req.generation >= 0 || !req.member_id.empty() || req.group_instance_id) {
      if (auto e = validate_member(*g, req.member_id, req.group_instance_id); e != ErrorCode::none)
        return fail_all(e);
      if (req.generation != g->generation) return fail_all(ErrorCode::illegal_generation);
    } else if (g->state != GroupState::empty) {
      // Without member id and generation only an Empty group takes commits.
      return fail_all(ErrorCode::unknown_member_id);
    }
    if (g->state == GroupState::completing_rebalance)
      return fail_all(ErrorCode::rebalance_in_progress);
    if (Member* m = g->member(req.member_id)) touch_member(*m, m->session_timeout_ms);
  }

  const std::int64_t now = wall_ms();
  std::vector<std::pair<Bytes, std::optional<Bytes>>> records;
  std::vector<std::pair<std::size_t, OffsetValue>> values;  // request index -> value
  for (std::size_t i = 0; i < req.partitions.size(); ++i) {
    const CommitPartition& p = req.partitions[i];
    const std::string md = p.metadata.value_or("");
    if (md.size() > static_cast<std::size_t>(opts_.max_metadata_bytes)) {
      out[i] = ErrorCode::offset_metadata_too_large;
      continue;
    }
    OffsetValue v;
    v.offset = p.offset;
    v.leader_epoch = p.leader_epoch;
    v.metadata = md;
    v.commit_timestamp = now;
    if (req.retention_time_ms > 0) v.expire_timestamp = now + req.retention_time_ms;
    records.emplace_back(encode_key(OffsetKey{g->id, p.topic, p.partition}), encode_value(v));
    values.emplace_back(i, std::move(v));
  }
  if (records.empty()) return done(std::move(out));
  const std::string group_id = g->id;
  const std::uint64_t inc = g->incarnation;
  const std::int64_t pid = req.producer_id;
  const std::int16_t epoch = req.producer_epoch;
  store_records(
      g->partition, records,
      [this, group_id, inc, req = std::move(req), values = std::move(values), out = std::move(out),
       done = std::move(done)](std::optional<io::Error> err) mutable {
        Group* g = find_group(group_id);
        const bool same = g && g->incarnation == inc && g->state != GroupState::dead;
        for (auto& [i, v] : values) {
          if (err) {
            out[i] = store_error(*err);
          } else if (same) {
            const CommitPartition& p = req.partitions[i];
            if (req.producer_id >= 0) {
              g->pending_txn[req.producer_id][{p.topic, p.partition}] = std::move(v);
            } else {
              g->offsets[{p.topic, p.partition}] = std::move(v);
            }
          }
        }
        done(std::move(out));
      },
      pid, epoch);
}

ErrorCode GroupCoordinator::check_txn_commit(const Group& g, const CommitRequest& req) const {
  if (!req.member_id.empty() && !g.member(req.member_id)) return ErrorCode::unknown_member_id;
  if (req.group_instance_id) {
    auto it = g.static_members.find(*req.group_instance_id);
    if (it != g.static_members.end() && it->second != req.member_id)
      return ErrorCode::fenced_instance_id;
  }
  if (req.generation >= 0 && req.generation != g.generation) return ErrorCode::illegal_generation;
  return ErrorCode::none;
}

void GroupCoordinator::complete_txn(std::int32_t p, std::int64_t producer_id, bool commit) {
  for (auto& [id, g] : groups_) {
    if (g->partition != p) continue;
    auto it = g->pending_txn.find(producer_id);
    if (it == g->pending_txn.end()) continue;
    if (commit) {
      for (auto& [tp, v] : it->second)
        g->offsets[tp] = std::move(v);
    }
    g->pending_txn.erase(it);
  }
}

void GroupCoordinator::fetch_offsets(FetchRequest req, Done<FetchResult> done) {
  FetchResult res;
  if (req.group_id.empty()) {
    res.error = ErrorCode::invalid_group_id;
    return done(std::move(res));
  }
  if (auto e = check_group_id(req.group_id); e != ErrorCode::none) {
    res.error = e;
    return done(std::move(res));
  }
  // Commits become visible once durable, transactional ones once their transaction commits;
  // require_stable refuses a partition with one still pending (UNSTABLE_OFFSET_COMMIT,
  // retriable: the consumer asks again once the transaction has ended).
  const Group* g = find_group(req.group_id);
  if (g && g->state == GroupState::dead) g = nullptr;
  auto put = [&](const std::string& topic, std::int32_t partition, const OffsetValue* v) {
    FetchedOffset o;
    o.topic = topic;
    o.partition = partition;
    if (v) {
      o.offset = v->offset;
      o.leader_epoch = v->leader_epoch;
      o.metadata = v->metadata;
    }
    res.offsets.push_back(std::move(o));
  };
  if (!req.topics) {
    if (g)
      for (const auto& [tp, v] : g->offsets)
        put(tp.first, tp.second, &v);
  } else {
    for (const auto& t : *req.topics) {
      for (std::int32_t p : t.partitions) {
        const OffsetValue* v = nullptr;
        if (g) {
          auto it = g->offsets.find({t.topic, p});
          if (it != g->offsets.end()) v = &it->second;
        }
        put(t.topic, p, v);
        if (req.require_stable && g && g->has_pending(t.topic, p)) {
          res.offsets.back() =
              FetchedOffset{t.topic, p, -1, -1, "", ErrorCode::unstable_offset_commit};
        }
      }
    }
  }
  done(std::move(res));
}

void GroupCoordinator::delete_offsets(OffsetDeleteRequest req, Done<OffsetDeleteResult> done) {
  OffsetDeleteResult res;
  res.partitions.assign(req.partitions.size(), ErrorCode::none);
  auto fail = [&](ErrorCode e) {
    res.error = e;
    res.partitions.clear();
    done(std::move(res));
  };
  if (req.group_id.empty()) return fail(ErrorCode::invalid_group_id);
  if (auto e = check_group_id(req.group_id); e != ErrorCode::none) return fail(e);
  Group* g = find_group(req.group_id);
  if (!g || g->state == GroupState::dead) return fail(ErrorCode::group_id_not_found);
  std::optional<std::set<std::string>> subscribed;
  if (g->state != GroupState::empty) {
    if (g->protocol_type != kConsumerProtocol) return fail(ErrorCode::non_empty_group);
    subscribed = subscribed_topics(*g);
  }
  std::vector<std::pair<Bytes, std::optional<Bytes>>> records;
  std::vector<std::pair<std::string, std::int32_t>> deleted;
  for (std::size_t i = 0; i < req.partitions.size(); ++i) {
    const auto& [topic, partition] = req.partitions[i];
    if (g->state != GroupState::empty && (!subscribed || subscribed->count(topic))) {
      res.partitions[i] = ErrorCode::group_subscribed_to_topic;
      continue;
    }
    if (g->offsets.count({topic, partition})) {
      records.emplace_back(encode_key(OffsetKey{g->id, topic, partition}), std::nullopt);
      deleted.emplace_back(topic, partition);
    }
  }
  if (records.empty()) return done(std::move(res));
  const std::string group_id = g->id;
  const std::uint64_t inc = g->incarnation;
  store_records(g->partition, records,
                [this, group_id, inc, deleted = std::move(deleted), res = std::move(res),
                 done = std::move(done)](std::optional<io::Error> err) mutable {
                  if (err) {
                    res.error = store_error(*err);
                    res.partitions.clear();
                    done(std::move(res));
                    return;
                  }
                  Group* g = find_group(group_id);
                  if (g && g->incarnation == inc)
                    for (const auto& tp : deleted)
                      g->offsets.erase(tp);
                  done(std::move(res));
                });
}

// ---------------------------------------------------------------------------------------------
// Offsets expiry

void GroupCoordinator::on_expiry_timer(io::Timer* t) {
  auto* self = static_cast<ExpiryTimer*>(t)->self;
  self->expire_offsets(wall_ms());
  self->reactor_.arm(t, mono_ns() + self->opts_.offsets_retention_check_interval_ms * 1'000'000);
}

void GroupCoordinator::expire_offsets(std::int64_t now_ms) {
  if (shutting_down_ || partitions_ <= 0) return;
  std::vector<Group*> candidates;
  for (auto& [id, g] : groups_) {
    if (g->state == GroupState::dead) continue;
    if (!serving(g->partition)) continue;
    candidates.push_back(g.get());
  }
  for (Group* g : candidates) {
    // Kafka's rules: offsets of an Empty group age from the moment it became empty (or from
    // their commit, for groups that never had members); a Stable consumer group loses only
    // the offsets of topics it no longer subscribes to; an explicit expiry always applies.
    std::optional<std::set<std::string>> keep_topics;
    bool from_empty = false;
    if (g->protocol_type.empty()) {
      from_empty = false;
    } else if (g->state == GroupState::empty) {
      from_empty = g->state_timestamp_ms >= 0;
    } else if (g->state == GroupState::stable && g->protocol_type == kConsumerProtocol) {
      keep_topics = subscribed_topics(*g);
      if (!keep_topics) continue;
    } else {
      continue;
    }
    std::vector<std::pair<std::string, std::int32_t>> expired;
    for (const auto& [tp, v] : g->offsets) {
      if (keep_topics && keep_topics->count(tp.first)) continue;
      bool gone;
      if (v.expire_timestamp >= 0) {
        gone = now_ms >= v.expire_timestamp;
      } else {
        const std::int64_t base = from_empty ? g->state_timestamp_ms : v.commit_timestamp;
        gone = now_ms - base >= opts_.offsets_retention_ms;
      }
      if (gone) expired.push_back(tp);
    }
    const bool drop_group = g->state == GroupState::empty && g->members.empty() &&
                            g->pending.empty() && expired.size() == g->offsets.size();
    if (expired.empty() && !drop_group) continue;
    std::vector<std::pair<Bytes, std::optional<Bytes>>> records;
    std::vector<std::pair<std::pair<std::string, std::int32_t>, std::int64_t>> stamps;
    for (const auto& tp : expired) {
      records.emplace_back(encode_key(OffsetKey{g->id, tp.first, tp.second}), std::nullopt);
      stamps.emplace_back(tp, g->offsets[tp].commit_timestamp);
    }
    if (drop_group) records.emplace_back(encode_key(GroupKey{g->id}), std::nullopt);
    LOG_INFO("group %s: expiring %zu committed offsets%s", g->id.c_str(), expired.size(),
             drop_group ? " and the group" : "");
    const std::string group_id = g->id;
    const std::uint64_t inc = g->incarnation;
    store_records(g->partition, records,
                  [this, group_id, inc, stamps = std::move(stamps),
                   drop_group](std::optional<io::Error> err) {
                    if (err) {
                      LOG_WARN("group %s: writing expired offsets failed: %s", group_id.c_str(),
                               err->detail.c_str());
                      return;
                    }
                    Group* g = find_group(group_id);
                    if (!g || g->incarnation != inc) return;
                    // A commit that landed meanwhile wins over the expiry.
                    for (const auto& [tp, ts] : stamps) {
                      auto it = g->offsets.find(tp);
                      if (it != g->offsets.end() && it->second.commit_timestamp == ts)
                        g->offsets.erase(it);
                    }
                    if (drop_group && g->state == GroupState::empty && g->members.empty() &&
                        g->offsets.empty())
                      erase_group(g);
                  });
  }
}

}  // namespace samsa::coordinator
