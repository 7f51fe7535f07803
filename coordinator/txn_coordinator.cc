#include "coordinator/txn_coordinator.h"
#include "coordinator/txn_coordinator_impl.h"

#include <algorithm>
#include <cinttypes>

#include "base/assert.h"
#include "base/clock.h"
#include "base/log.h"
#include "io/batch_builder.h"
#include "io/record_batch.h"

namespace samsa::coordinator {

namespace {

std::vector<std::byte> one_record_batch(const Bytes& key, const std::optional<Bytes>& value) {
  std::vector<std::byte> buf(io::batch::kHeaderSize + io::BatchBuilder::max_record_size(
                                                          key.size(), value ? value->size() : 0));
  io::BatchBuilder b(buf);
  io::BatchBuilder::Bytes v = std::nullopt;
  if (value) v = std::span<const std::byte>(*value);
  b.add(wall_ms(), std::span<const std::byte>(key), v);
  buf.resize(b.finish().size());
  return buf;
}

}  // namespace

TxnCoordinator::TxnCoordinator(io::Reactor& r, Options opts, std::unique_ptr<OffsetsStore> store,
                               ProducerIdManager& ids, std::unique_ptr<MarkerWriter> markers)
    : reactor_(r), opts_(opts), store_(std::move(store)), ids_(ids), markers_(std::move(markers)) {
  abort_timer_.self = this;
  abort_timer_.fn = &TxnCoordinator::on_abort_timer;
}

std::int64_t TxnCoordinator::now_ms() const {
  return opts_.clock ? opts_.clock() : wall_ms();
}

TxnCoordinator::~TxnCoordinator() {
  if (abort_timer_.armed()) reactor_.disarm(&abort_timer_);
  for (auto& [id, t] : txns_) {
    if (t->retry.armed()) reactor_.disarm(&t->retry);
    fail_parked(*t, ErrorCode::coordinator_not_available);
  }
}

// ---------------------------------------------------------------------------------------------
// Leadership and loading

void TxnCoordinator::start(std::int32_t partitions, Leadership leadership) {
  if (partitions_ > 0 || partitions <= 0) return;
  partitions_ = partitions;
  slots_.assign(static_cast<std::size_t>(partitions), Slot{});
  if (leadership == Leadership::all) {
    LOG_INFO("transaction coordinator: loading %d partitions of %s", partitions,
             kTxnStateTopic.data());
    for (std::int32_t p = 0; p < partitions; ++p)
      activate(p, 0);
  }
  reactor_.arm(&abort_timer_, mono_ns() + opts_.abort_check_interval_ms * 1'000'000);
}

bool TxnCoordinator::loaded() const {
  return std::none_of(slots_.begin(), slots_.end(),
                      [](const Slot& s) { return s.state == LoadState::loading; });
}

void TxnCoordinator::activate(std::int32_t p, std::int32_t leader_epoch) {
  if (shutting_down_ || p < 0 || p >= partitions_) return;
  Slot& s = slots_[static_cast<std::size_t>(p)];
  if (leader_epoch < s.epoch) return;  // stale
  if (s.state != LoadState::inactive && s.state != LoadState::failed) {
    s.epoch = leader_epoch;
    return;
  }
  s.state = LoadState::loading;
  s.epoch = leader_epoch;
  ++s.term;
  load_partition(p);
}

void TxnCoordinator::deactivate(std::int32_t p, std::int32_t leader_epoch) {
  if (p < 0 || p >= partitions_) return;
  Slot& s = slots_[static_cast<std::size_t>(p)];
  if (leader_epoch < s.epoch) return;
  s.epoch = leader_epoch;
  if (s.state == LoadState::inactive) return;
  s.state = LoadState::inactive;
  ++s.term;
  unload_partition(p);
}

void TxnCoordinator::unload_partition(std::int32_t p) {
  std::size_t n = 0;
  for (auto it = txns_.begin(); it != txns_.end();) {
    if (it->second->partition != p) {
      ++it;
      continue;
    }
    if (it->second->retry.armed()) reactor_.disarm(&it->second->retry);
    fail_parked(*it->second, ErrorCode::not_coordinator);
    it = txns_.erase(it);
    ++n;
  }
  LOG_INFO("transaction coordinator: unloaded %s-%d: %zu transactional ids", kTxnStateTopic.data(),
           p, n);
}

void TxnCoordinator::shutdown() {
  shutting_down_ = true;
}

void TxnCoordinator::load_partition(std::int32_t p) {
  const std::uint64_t term = slots_[static_cast<std::size_t>(p)].term;
  store_->load(
      p,
      [this, p, term](std::span<const std::byte> batch) {
        if (slots_[static_cast<std::size_t>(p)].term == term) replay_batch(p, batch);
      },
      [this, p, term](std::optional<io::Error> err) { on_loaded(p, term, std::move(err)); });
}

void TxnCoordinator::replay_batch(std::int32_t p, std::span<const std::byte> batch) {
  if (batch.size() < io::batch::kHeaderSize) return;
  const io::BatchInfo info = io::batch::parse_header(batch.data());
  if (info.is_control()) return;
  std::vector<std::byte> storage;
  auto records = io::batch::records_of(batch, storage);
  if (!records) {
    LOG_ERROR("%s-%d: skipping an unreadable batch at offset %" PRId64 ": %s",
              kTxnStateTopic.data(), p, info.base_offset, records.error().detail.c_str());
    return;
  }
  io::batch::RecordReader reader(*records, info.record_count);
  for (;;) {
    auto rec = reader.next();
    if (!rec || !*rec) break;
    const io::batch::Record& r = **rec;
    if (!r.key) continue;
    auto id = decode_txn_key(*r.key);
    if (!id) {
      LOG_WARN("%s-%d: skipping a record at offset %" PRId64 ": %s", kTxnStateTopic.data(), p,
               info.base_offset + r.offset_delta, id.error().c_str());
      continue;
    }
    if (!r.value) {
      txns_.erase(*id);
      continue;
    }
    auto v = decode_txn_value(*r.value);
    if (!v) {
      LOG_WARN("%s-%d: skipping the state of %s: %s", kTxnStateTopic.data(), p, id->c_str(),
               v.error().c_str());
      continue;
    }
    auto& t = txns_[*id];
    if (!t) t = new_txn(*id, p);
    t->v = std::move(*v);
  }
}

void TxnCoordinator::on_loaded(std::int32_t p, std::uint64_t term, std::optional<io::Error> err) {
  Slot& s = slots_[static_cast<std::size_t>(p)];
  if (s.term != term) return;
  if (err) {
    LOG_WARN("transaction coordinator: loading %s-%d: %s; retrying", kTxnStateTopic.data(), p,
             err->detail.c_str());
    unload_partition(p);
    // Loaded again by the abort timer's next pass (rare: a partition that cannot be read).
    s.state = LoadState::failed;
    return;
  }
  s.state = LoadState::loaded;
  std::size_t n = 0, resumed = 0;
  for (auto& [id, t] : txns_) {
    if (t->partition != p) continue;
    ++n;
    // A transaction left between its Prepare* and its Complete*: finish writing its markers.
    if (t->v.state == TxnState::prepare_commit || t->v.state == TxnState::prepare_abort) {
      send_markers(*t);
      ++resumed;
    }
  }
  LOG_INFO(
      "transaction coordinator: loaded %s-%d (coordinator epoch %d): %zu transactional ids, "
      "%zu completions resumed",
      kTxnStateTopic.data(), p, s.epoch, n, resumed);
}

// ---------------------------------------------------------------------------------------------
// Requests

ErrorCode TxnCoordinator::check_id(std::string_view id) const {
  if (shutting_down_ || partitions_ == 0) return ErrorCode::coordinator_not_available;
  if (id.empty()) return ErrorCode::invalid_request;
  const Slot& s = slots_[static_cast<std::size_t>(partition_of(id))];
  switch (s.state) {
    case LoadState::inactive:
      return ErrorCode::not_coordinator;
    case LoadState::loading:
    case LoadState::failed:
      return ErrorCode::coordinator_load_in_progress;
    case LoadState::loaded:
      break;
  }
  return ErrorCode::none;
}

std::unique_ptr<TxnCoordinator::Txn> TxnCoordinator::new_txn(const std::string& id,
                                                             std::int32_t p) {
  auto t = std::make_unique<Txn>();
  t->id = id;
  t->partition = p;
  t->retry.self = this;
  t->retry.txn = t.get();
  // The next round of markers (or of the completion) after a failed one.
  t->retry.fn = [](io::Timer* timer) {
    auto* rt = static_cast<Txn::RetryTimer*>(timer);
    rt->txn->busy = false;
    rt->self->send_markers(*rt->txn);
  };
  return t;
}

TxnCoordinator::Txn* TxnCoordinator::find(std::string_view id) {
  auto it = txns_.find(std::string(id));
  return it == txns_.end() ? nullptr : it->second.get();
}

void TxnCoordinator::transition(Txn& t, TxnValue next,
                                std::move_only_function<void(ErrorCode)> done) {
  SAMSA_ASSERT(!t.busy);
  t.busy = true;
  next.last_update_ms = now_ms();
  const std::uint64_t term = slots_[static_cast<std::size_t>(t.partition)].term;
  // Encoded before the call: its callback takes `next` by move, and argument evaluation order
  // is unspecified (the simulation caught records written from a moved-from value).
  auto batch = one_record_batch(encode_txn_key(t.id), encode_txn_value(next));
  LOG_DEBUG("transaction coordinator: writing %s %s epoch %d", t.id.c_str(),
            std::string(txn_state_name(next.state)).c_str(), next.producer_epoch);
  store_->append(t.partition, std::move(batch),
                 [this, id = t.id, p = t.partition, term, next = std::move(next),
                  done = std::move(done)](std::optional<io::Error> err) mutable {
                   // Leadership moved meanwhile: the new coordinator replays whatever the log kept.
                   Txn* t = find(id);
                   if (!t || slots_[static_cast<std::size_t>(p)].term != term) {
                     done(ErrorCode::not_coordinator);
                     return;
                   }
                   t->busy = false;
                   if (err) {
                     LOG_WARN("transaction coordinator: writing the state of %s: %s", id.c_str(),
                              err->detail.c_str());
                     done(err->code == io::Errc::not_found ? ErrorCode::not_coordinator
                                                           : ErrorCode::coordinator_not_available);
                     drain_parked(id);
                     return;
                   }
                   t->v = std::move(next);
                   done(ErrorCode::none);
                   drain_parked(id);
                 });
}

void TxnCoordinator::fail_parked(Txn& t, ErrorCode e) {
  auto parked = std::move(t.parked);
  t.parked.clear();
  for (auto& [req, done] : parked) {
    TxnAddResult out;
    for (const auto& [topic, ps] : req.partitions)
      for (std::int32_t p : ps)
        out[topic][p] = e;
    done(std::move(out));
  }
}

void TxnCoordinator::drain_parked(const std::string& id) {
  Txn* t = find(id);
  if (!t || t->busy || t->parked.empty() || t->v.state == TxnState::prepare_commit ||
      t->v.state == TxnState::prepare_abort)
    return;
  auto parked = std::move(t->parked);
  t->parked.clear();
  // Adds of one producer at one epoch become one transition (one write): with version 2 each
  // partition's leader asks on its own, so a transaction's first produce request brings one
  // add per partition at once, and one at a time they would queue behind each other's writes.
  std::vector<std::pair<TxnAddRequest, Done<TxnAddResult>>> singles;
  std::map<std::pair<std::int64_t, std::int16_t>,
           std::vector<std::pair<TxnAddRequest, Done<TxnAddResult>>>>
      groups;
  for (auto& [req, done] : parked) {
    if (req.verify_only) {
      singles.emplace_back(std::move(req), std::move(done));
    } else {
      groups[{req.producer_id, req.producer_epoch}].emplace_back(std::move(req), std::move(done));
    }
  }
  for (auto& [key, reqs] : groups) {
    if (reqs.size() == 1) {
      singles.push_back(std::move(reqs.front()));
      continue;
    }
    TxnAddRequest all = reqs.front().first;
    for (std::size_t i = 1; i < reqs.size(); ++i) {
      for (const auto& [topic, ps] : reqs[i].first.partitions)
        all.partitions[topic].insert(ps.begin(), ps.end());
      all.tv2 = all.tv2 || reqs[i].first.tv2;
    }
    auto waiting = std::make_shared<decltype(reqs)>(std::move(reqs));
    add_partitions(std::move(all), [waiting](TxnAddResult res) {
      for (auto& [req, done] : *waiting) {
        TxnAddResult out;
        for (const auto& [topic, ps] : req.partitions)
          for (std::int32_t p : ps)
            out[topic][p] = res[topic][p];
        done(std::move(out));
      }
    });
  }
  for (auto& [req, done] : singles)
    add_partitions(std::move(req), std::move(done));
}

void TxnCoordinator::init_producer_id(TxnInitRequest req, Done<TxnInitResult> done) {
  if (ErrorCode e = check_id(req.transactional_id); e != ErrorCode::none) {
    done({e});
    return;
  }
  if (req.timeout_ms <= 0 || req.timeout_ms > opts_.max_timeout_ms) {
    done({ErrorCode::invalid_transaction_timeout});
    return;
  }
  Txn* t = find(req.transactional_id);
  if (!t) {
    // A new transactional id: a producer id of its own, at epoch 0.
    ids_.next([this, req = std::move(req),
               done = std::move(done)](std::expected<std::int64_t, ErrorCode> pid) mutable {
      if (!pid) return done({pid.error()});
      if (ErrorCode e = check_id(req.transactional_id); e != ErrorCode::none) return done({e});
      if (find(req.transactional_id)) return done({ErrorCode::concurrent_transactions});
      auto& slot = txns_[req.transactional_id];
      slot = new_txn(req.transactional_id, partition_of(req.transactional_id));
      Txn& nt = *slot;
      nt.v = TxnValue{*pid, -1, req.timeout_ms, TxnState::empty, {}, now_ms(), -1};
      TxnValue next = nt.v;
      next.producer_epoch = 0;
      transition(nt, next, [done = std::move(done), pid = *pid](ErrorCode e) mutable {
        if (e != ErrorCode::none) return done({e});
        done({ErrorCode::none, pid, 0});
      });
    });
    return;
  }
  if (t->busy) return done({ErrorCode::concurrent_transactions});
  // KIP-360: a producer naming its id and epoch must be the current one.
  if (req.producer_id >= 0 &&
      (req.producer_id != t->v.producer_id || req.producer_epoch != t->v.producer_epoch))
    return done({ErrorCode::producer_fenced});
  switch (t->v.state) {
    case TxnState::ongoing:
      // A new incarnation of the producer: its predecessor's transaction is aborted (and the
      // predecessor fenced); the client retries and gets its epoch once that is done.
      fence_and_abort(*t, "a new producer with its transactional id started");
      return done({ErrorCode::concurrent_transactions});
    case TxnState::prepare_commit:
    case TxnState::prepare_abort:
    case TxnState::prepare_epoch_fence:
      return done({ErrorCode::concurrent_transactions});
    default:
      break;
  }
  TxnValue next = t->v;
  next.timeout_ms = req.timeout_ms;
  next.state = TxnState::empty;
  next.partitions.clear();
  next.start_ms = -1;
  auto finish = [this, id = t->id, done = std::move(done)](TxnValue next) mutable {
    Txn* t = find(id);
    if (!t || t->busy) return done({ErrorCode::concurrent_transactions});
    const std::int64_t pid = next.producer_id;
    const std::int16_t epoch = next.producer_epoch;
    transition(*t, std::move(next), [done = std::move(done), pid, epoch](ErrorCode e) mutable {
      if (e != ErrorCode::none) return done({e});
      done({ErrorCode::none, pid, epoch});
    });
  };
  if (t->v.producer_epoch < INT16_MAX - 1) {
    ++next.producer_epoch;
    finish(std::move(next));
    return;
  }
  // The epoch is exhausted: a new producer id starts at epoch 0, as in Kafka.
  ids_.next([next = std::move(next),
             finish = std::move(finish)](std::expected<std::int64_t, ErrorCode> pid) mutable {
    if (!pid) {
      next.producer_id = -1;
      next.producer_epoch = -1;
    } else {
      next.producer_id = *pid;
      next.producer_epoch = 0;
    }
    finish(std::move(next));
  });
}

void TxnCoordinator::add_partitions(TxnAddRequest req, Done<TxnAddResult> done) {
  // Owns a copy of the partitions: it outlives req in the write's callback.
  auto all = [parts = req.partitions](ErrorCode e) {
    TxnAddResult out;
    for (const auto& [topic, ps] : parts)
      for (std::int32_t p : ps)
        out[topic][p] = e;
    return out;
  };
  if (ErrorCode e = check_id(req.transactional_id); e != ErrorCode::none) return done(all(e));
  Txn* t = find(req.transactional_id);
  if (!t) return done(all(ErrorCode::invalid_producer_id_mapping));
  const bool completing = t->busy || t->v.state == TxnState::prepare_commit ||
                          t->v.state == TxnState::prepare_abort ||
                          t->v.state == TxnState::prepare_epoch_fence;
  // The next transaction's first add usually meets the previous one completing (with version
  // 2 under the producer id it is about to get, after an epoch overflow): it waits for that,
  // bounded, instead of CONCURRENT_TRANSACTIONS (the Java client would back off 20 ms each).
  if (!req.verify_only && completing &&
      (req.producer_id == t->v.producer_id || req.producer_id == t->v.next_producer_id)) {
    // Bounded (a producer's pipelined batches over many partitions stay well below it).
    constexpr std::size_t kMaxParked = 256;
    if (t->parked.size() < kMaxParked) {
      t->parked.emplace_back(std::move(req), std::move(done));
      return;
    }
    return done(all(ErrorCode::concurrent_transactions));
  }
  if (t->v.producer_id != req.producer_id) return done(all(ErrorCode::invalid_producer_id_mapping));
  if (t->v.producer_epoch != req.producer_epoch) return done(all(ErrorCode::producer_fenced));
  if (req.verify_only) {
    TxnAddResult out;
    for (const auto& [topic, parts] : req.partitions) {
      auto it = t->v.partitions.find(topic);
      for (std::int32_t p : parts) {
        const bool in = t->v.state == TxnState::ongoing && it != t->v.partitions.end() &&
                        it->second.contains(p);
        out[topic][p] = in ? ErrorCode::none : ErrorCode::invalid_txn_state;
      }
    }
    return done(std::move(out));
  }
  TxnValue next = t->v;
  if (next.state != TxnState::ongoing) {
    next.state = TxnState::ongoing;
    next.partitions.clear();
    next.start_ms = now_ms();
    next.client_transaction_version = req.tv2 ? 2 : 0;
    next.previous_producer_id = -1;
  }
  bool added = false;
  for (const auto& [topic, parts] : req.partitions)
    for (std::int32_t p : parts)
      added |= next.partitions[topic].insert(p).second;
  if (!added && t->v.state == TxnState::ongoing) return done(all(ErrorCode::none));
  transition(*t, std::move(next),
             [done = std::move(done), all = std::move(all)](ErrorCode e) mutable { done(all(e)); });
}

// ---------------------------------------------------------------------------------------------
// Timeouts and expiration

void TxnCoordinator::abort_timed_out(std::int64_t now_ms) {
  std::vector<Txn*> due;
  for (auto& [id, t] : txns_) {
    if (t->busy || slots_[static_cast<std::size_t>(t->partition)].state != LoadState::loaded)
      continue;
    if (t->v.state == TxnState::ongoing && t->v.start_ms >= 0 &&
        now_ms - t->v.start_ms > t->v.timeout_ms)
      due.push_back(t.get());
  }
  for (Txn* t : due) {
    ++stats_.timed_out;
    fence_and_abort(*t, "it ran longer than its transaction.timeout.ms");
  }
}

void TxnCoordinator::expire_ids(std::int64_t now_ms) {
  std::vector<std::string> due;
  for (const auto& [id, t] : txns_) {
    if (t->busy || !t->parked.empty() ||
        slots_[static_cast<std::size_t>(t->partition)].state != LoadState::loaded)
      continue;
    const TxnState st = t->v.state;
    if (st != TxnState::empty && st != TxnState::complete_commit && st != TxnState::complete_abort)
      continue;
    if (t->v.last_update_ms >= 0 && now_ms - t->v.last_update_ms > opts_.id_expiration_ms)
      due.push_back(id);
  }
  for (const std::string& id : due) {
    Txn& t = *find(id);
    t.busy = true;  // requests meanwhile get CONCURRENT_TRANSACTIONS, then start afresh
    const std::uint64_t term = slots_[static_cast<std::size_t>(t.partition)].term;
    store_->append(t.partition, one_record_batch(encode_txn_key(id), std::nullopt),
                   [this, id, p = t.partition, term](std::optional<io::Error> err) {
                     Txn* t = find(id);
                     if (!t || slots_[static_cast<std::size_t>(p)].term != term) return;
                     if (err) {
                       t->busy = false;  // tried again at the next check
                       return;
                     }
                     LOG_INFO(
                         "transaction coordinator: transactional id %s expired (producer "
                         "%" PRId64 ")",
                         id.c_str(), t->v.producer_id);
                     if (t->retry.armed()) reactor_.disarm(&t->retry);
                     fail_parked(*t, ErrorCode::concurrent_transactions);
                     txns_.erase(id);
                     ++stats_.expired;
                   });
  }
}

void TxnCoordinator::on_abort_timer(io::Timer* timer) {
  auto* self = static_cast<AbortTimer*>(timer)->self;
  if (self->shutting_down_) return;
  for (std::size_t p = 0; p < self->slots_.size(); ++p) {
    if (self->slots_[p].state != LoadState::failed) continue;
    self->slots_[p].state = LoadState::inactive;
    self->activate(static_cast<std::int32_t>(p), self->slots_[p].epoch);
  }
  const std::int64_t now = self->now_ms();
  self->abort_timed_out(now);
  if (now - self->last_expiration_check_ms_ >= self->opts_.id_expiration_check_ms) {
    self->last_expiration_check_ms_ = now;
    self->expire_ids(now);
  }
  self->reactor_.arm(&self->abort_timer_,
                     mono_ns() + self->opts_.abort_check_interval_ms * 1'000'000);
}

// ---------------------------------------------------------------------------------------------
// DescribeTransactions, ListTransactions

void TxnCoordinator::describe(std::vector<std::string> ids, Done<std::vector<DescribedTxn>> done) {
  std::vector<DescribedTxn> out;
  for (auto& id : ids) {
    DescribedTxn d;
    d.transactional_id = id;
    d.error = check_id(id);
    if (d.error == ErrorCode::none) {
      if (const Txn* t = find(id)) {
        d.state = std::string(txn_state_name(t->v.state));
        d.timeout_ms = t->v.timeout_ms;
        d.start_ms = t->v.start_ms;
        d.producer_id = t->v.producer_id;
        d.producer_epoch = t->v.producer_epoch;
        d.partitions = t->v.partitions;
      } else {
        d.error = ErrorCode::transactional_id_not_found;
      }
    }
    out.push_back(std::move(d));
  }
  done(std::move(out));
}

void TxnCoordinator::list(TxnListRequest req, Done<std::vector<ListedTxn>> done) {
  std::vector<ListedTxn> out;
  const std::int64_t now = now_ms();
  for (const auto& [id, t] : txns_) {
    if (slots_[static_cast<std::size_t>(t->partition)].state != LoadState::loaded) continue;
    const std::string_view state = txn_state_name(t->v.state);
    if (!req.states.empty() && std::none_of(req.states.begin(), req.states.end(), [&](auto& s) {
          return txn_state_from_name(s) == t->v.state;
        }))
      continue;
    if (!req.producer_ids.empty() && std::find(req.producer_ids.begin(), req.producer_ids.end(),
                                               t->v.producer_id) == req.producer_ids.end())
      continue;
    if (req.duration_filter_ms >= 0 &&
        (t->v.start_ms < 0 || now - t->v.start_ms <= req.duration_filter_ms))
      continue;
    out.push_back({id, t->v.producer_id, std::string(state)});
  }
  done(std::move(out));
}

}  // namespace samsa::coordinator
