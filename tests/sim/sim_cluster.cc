// The simulation's cluster: the fake network, the controller, the brokers and the client.
#include "sim.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace samsa::sim {

// ---- network ----

bool Sim::reachable(int node) const {
  if (node == kClient) return true;
  if (node == kController) return ctl_.up && !ctl_.isolated;
  const Broker& b = b_[node - 1];
  return b.up && !b.isolated;
}

void Sim::send(int from, int to, Msg m) {
  if (!reachable(from) || !reachable(to) || cut(from, to)) return;
  if (static_cast<double>(rnd(10000)) / 10000.0 < loss_) return;
  std::int64_t delay = 1 + static_cast<std::int64_t>(rnd(5));
  if (rnd(100) < 5) delay += 10 + static_cast<std::int64_t>(rnd(60));  // reorders
  const std::int32_t inc = to == kController ? ctl_.incarnation
                           : to == kClient   ? 0
                                             : b_[to - 1].incarnation;
  at(delay, [this, from, to, inc, m = std::move(m)]() mutable {
    if (!reachable(to) || !reachable(from) || cut(from, to)) return;
    if (to == kController) {
      if (ctl_.incarnation == inc) controller_receive(from, std::move(m));
    } else if (to == kClient) {
      client_receive(std::move(m));
    } else if (b_[to - 1].incarnation == inc) {
      broker_receive(b_[to - 1], from, std::move(m));
    }
  });
}

// ---- controller ----

void Sim::start_controller() {
  ctl_.up = true;
  ++ctl_.incarnation;
  ctl_.cs = std::make_unique<ControllerState>(ControllerStateOptions{300, false});
  ctl_.committed = MetadataImage{};
  ctl_.answers.clear();
  ctl_.syncing = false;
  std::int64_t off = 0;
  for (const auto& r : ctl_.quorum.records()) {
    ctl_.cs->replay(r, off);
    (void)ctl_.committed.apply(r);
    ctl_.committed.set_offset(off);
    ++off;
  }
  ctl_.applied = off - 1;
  ctl_.published = -1;
  ctl_.cs->on_become_active(now_, off);
  if (off == 0) {
    // First start: the topic is created once the brokers have registered (see tick).
  }
  trace("controller up (incarnation %d, %" PRId64 " records)", ctl_.incarnation, off);
}

void Sim::crash_controller() {
  if (!ctl_.up) return;
  ++g_stats.controller_crashes;
  ctl_.up = false;
  ctl_.quorum.crash();
  ctl_.cs.reset();
  trace("controller crashed");
}

void Sim::propose(const std::vector<MetadataRecord>& recs) {
  if (recs.empty()) return;
  ctl_.quorum.propose(recs);
}

// Answers go out once everything proposed so far is committed (no answer rests on a view
// that a crash could take back).
void Sim::answer_later(int to, Msg m) {
  ctl_.answers.push_back({ctl_.cs->next_offset() - 1, to, std::move(m)});
}

void Sim::controller_receive(int from, Msg m) {
  auto& cs = *ctl_.cs;
  if (auto* r = std::get_if<RegisterReq>(&m)) {
    auto p = cs.register_broker(r->reg, now_);
    trace("controller: register %d -> %s epoch %" PRId64 " (%zu records)", r->reg.broker_id,
          std::string(kafka::error_name(p.answer.error)).c_str(), p.answer.broker_epoch,
          p.records.size());
    propose(p.records);
    answer_later(from, RegisterResp{p.answer, 0});
  } else if (auto* h = std::get_if<HeartbeatReq>(&m)) {
    auto p = cs.heartbeat(h->hb, now_);
    if (!p.records.empty() || p.answer.error != ErrorCode::none)
      trace("controller: heartbeat %d -> %s fenced %d (%zu records)", h->hb.broker_id,
            std::string(kafka::error_name(p.answer.error)).c_str(), p.answer.is_fenced,
            p.records.size());
    propose(p.records);
    answer_later(from, HeartbeatResp{p.answer});
  } else if (auto* a = std::get_if<AlterReq>(&m)) {
    auto p = cs.alter_partition(a->item);
    propose(p.records);
    answer_later(from, AlterResp{p.answer});
  }
}

void Sim::controller_tick() {
  if (!ctl_.up) return;
  auto& cs = *ctl_.cs;
  propose(cs.tick(now_));
  if (!topic_created_ && cs.image().topic("t") == nullptr) {
    int live = 0;
    for (const auto& [id, b] : cs.image().brokers())
      live += !b.fenced;
    if (live == kBrokers) {
      auto p = cs.create_topics({{"t", 1, 3, {}}}, false);
      if (p.answer.at(0).error == ErrorCode::none) propose(p.records);
    }
  }
  if (!ctl_.syncing && ctl_.quorum.start_sync()) {
    ctl_.syncing = true;
    const auto inc = ctl_.incarnation;
    at(1 + static_cast<std::int64_t>(rnd(4)), [this, inc] {
      if (!ctl_.up || ctl_.incarnation != inc) return;
      ctl_.syncing = false;
      ctl_.quorum.finish_sync();
      controller_committed();
    });
  }
  if (!ctl_.answers.empty()) controller_committed();
  if (now_ >= ctl_.next_publish_ms) {
    ctl_.next_publish_ms = now_ + 50;
    publish(true);
  }
}

void Sim::controller_committed() {
  const auto committed = ctl_.quorum.committed_offset();
  const auto& recs = ctl_.quorum.records();
  while (ctl_.applied < committed) {
    ++ctl_.applied;
    (void)ctl_.committed.apply(recs[static_cast<std::size_t>(ctl_.applied)]);
    ctl_.committed.set_offset(ctl_.applied);
  }
  ctl_.cs->commit(committed);
  if (const TopicState* t = ctl_.committed.topic("t")) {
    topic_created_ = true;
    topic_id_ = t->id;  // the id the controller gave it: brokers' AlterPartition names it
  }
  std::vector<Controller::Answer> keep;
  for (auto& a : ctl_.answers) {
    if (a.offset <= committed)
      send(kController, a.to, std::move(a.msg));
    else
      keep.push_back(std::move(a));
  }
  ctl_.answers = std::move(keep);
  publish(false);
}

std::optional<PartitionState> Sim::committed_partition() const {
  const TopicState* t = ctl_.committed.topic("t");
  if (!t || t->partitions.empty()) return std::nullopt;
  return t->partitions[0];
}

void Sim::publish(bool always) {
  if (!always && ctl_.published == ctl_.applied) return;
  ctl_.published = ctl_.applied;
  MetadataMsg m{ctl_.applied, committed_partition(), ctl_.committed.brokers()};
  for (int i = 1; i <= kBrokers; ++i)
    send(kController, i, m);
  send(kController, kClient, m);
}

// ---- brokers ----

void Sim::start_broker(Broker& b) {
  b.up = true;
  ++b.incarnation;
  b.incarnation_id = Uuid{};
  b.incarnation_id[0] = static_cast<std::uint8_t>(b.id);
  b.incarnation_id[1] = static_cast<std::uint8_t>(b.incarnation);
  b.incarnation_id[2] = static_cast<std::uint8_t>(b.incarnation >> 8);
  ReplicaOptions o;
  o.broker_id = b.id;
  o.replica_lag_time_max_ms = 200;
  o.min_insync_replicas = 2;
  o.alter_partition_retry_ms = 100;
  o.fetch_timeout_ms = 100;
  o.testing_hw_leader_only = variant_ == Variant::hw_leader_only;
  o.testing_fetch_from_memory = variant_ == Variant::fetch_from_memory;
  b.rs = std::make_unique<ReplicaState>(o, b.log);
  b.broker_epoch = -1;
  b.meta_offset = -1;
  b.part.reset();
  b.brokers.clear();
  b.pending.clear();
  b.syncing = false;
  b.stopping = false;
  b.next_register_ms = now_;
  trace("broker %d up (log end %" PRId64 ")", b.id, b.log.log_end_offset());
}

void Sim::crash_broker(Broker& b, bool clean) {
  if (!b.up) return;
  if (!clean) ++g_stats.broker_crashes;
  b.up = false;
  b.log.crash();
  b.rs.reset();
  b.pending.clear();
  trace("broker %d crashed (kept %" PRId64 ")", b.id, b.log.log_end_offset());
}

void Sim::broker_apply_metadata(Broker& b) {
  // Roles only once the metadata holds this incarnation's registration: a restarted broker
  // must not act on leaderships of its previous life.
  if (b.broker_epoch < 0 || b.meta_offset < b.broker_epoch || !b.part) return;
  const auto before_role = b.rs->role();
  const auto before_epoch = b.rs->leader_epoch();
  b.rs->apply_metadata(*b.part, now_);
  if (b.rs->role() != before_role || b.rs->leader_epoch() != before_epoch)
    trace("broker %d: %s epoch %d (isr size %zu, log end %" PRId64 ")", b.id,
          b.rs->role() == ReplicaRole::leader     ? "leader"
          : b.rs->role() == ReplicaRole::follower ? "follower"
                                                  : "none",
          b.rs->leader_epoch(), b.rs->isr().size(), b.log.log_end_offset());
  if (b.rs->role() != ReplicaRole::leader && !b.pending.empty()) {
    for (const auto& p : b.pending)
      send(b.id, kClient, ProduceResp{p.value, ErrorCode::not_leader_or_follower});
    b.pending.clear();
  }
}

void Sim::broker_receive(Broker& b, int from, Msg m) {
  auto& rs = *b.rs;
  if (auto* md = std::get_if<MetadataMsg>(&m)) {
    if (md->offset <= b.meta_offset) return;
    b.meta_offset = md->offset;
    b.part = md->part;
    b.brokers = md->brokers;
    broker_apply_metadata(b);
  } else if (auto* rr = std::get_if<RegisterResp>(&m)) {
    if (b.broker_epoch >= 0 || rr->a.error != ErrorCode::none) return;
    b.broker_epoch = rr->a.broker_epoch;
    rs.set_broker_epoch(b.broker_epoch);
    b.next_heartbeat_ms = now_;
    broker_apply_metadata(b);
  } else if (auto* hr = std::get_if<HeartbeatResp>(&m)) {
    if (hr->a.error == ErrorCode::stale_broker_epoch) b.broker_epoch = -1;  // register again
    if (b.stopping && hr->a.should_shut_down) {
      // Controlled shutdown done: its leaderships moved; flush and stop, restart later.
      trace("broker %d stops after controlled shutdown", b.id);
      ++g_stats.controlled_shutdowns;
      b.log.flush();
      crash_broker(b, true);
      b.stopping = false;
      at(b.restart_after_ms, [this, &b] {
        if (!b.up) start_broker(b);
      });
    }
  } else if (auto* ar = std::get_if<AlterResp>(&m)) {
    if (ar->a.error != ErrorCode::none)
      trace("broker %d: AlterPartition refused: %s", b.id,
            std::string(kafka::error_name(ar->a.error)).c_str());
    rs.on_alter_partition_answer(ar->a, now_);
  } else if (auto* fr = std::get_if<FetchReq>(&m)) {
    auto a = rs.on_replica_fetch(fr->f.fetch, now_);
    FetchResp resp{FollowerFetchResponse{fr->f.request_id, a, -1, -1}, {}};
    if (a.error == ErrorCode::none && !a.diverging) {
      const auto& h = b.log.history();
      const std::int64_t from_off = fr->f.fetch.fetch_offset;
      const std::int64_t to_off = std::min(h.size(), from_off + 8);
      resp.r.records_base = from_off;
      resp.r.records_end = std::max(from_off, to_off);
      for (std::int64_t o = from_off; o < to_off; ++o)
        resp.recs.push_back(h.recs[static_cast<std::size_t>(o)]);
    }
    send(b.id, from, std::move(resp));
    leader_progress(b);
  } else if (auto* fp = std::get_if<FetchResp>(&m)) {
    auto step = rs.on_fetch_response(fp->r, now_);
    if (step == FollowerStep::append) {
      for (std::size_t i = 0; i < fp->recs.size(); ++i) {
        b.log.append(fp->recs[i]);
        rs.note_replicated_batch(fp->recs[i].epoch,
                                 fp->r.records_base + static_cast<std::int64_t>(i));
      }
      b.next_fetch_ms = now_;
    } else if (step == FollowerStep::truncated) {
      trace("broker %d truncated to %" PRId64, b.id, b.log.log_end_offset());
      b.next_fetch_ms = now_;
    } else {
      b.next_fetch_ms = now_ + 5;  // nothing new: poll again shortly (Kafka long-polls)
    }
  } else if (auto* pr = std::get_if<ProduceReq>(&m)) {
    auto err = rs.check_produce(true);
    if (err != ErrorCode::none) {
      send(b.id, kClient, ProduceResp{pr->value, err});
      return;
    }
    b.log.append(Rec{rs.leader_epoch(), pr->value});
    b.pending.push_back({b.log.log_end_offset() - 1, pr->value});
  } else if (auto* rd = std::get_if<ReadReq>(&m)) {
    ReadResp resp{rd->id, rs.check_leader_epoch(rd->current_leader_epoch), rs.leader_epoch(), -1,
                  0};
    if (resp.error == ErrorCode::none) {
      auto vis = rs.visible_high_watermark();
      if (!vis) {
        resp.error = ErrorCode::offset_not_available;
      } else {
        resp.hw = *vis;
        resp.prefix_hash = b.log.history().ph[static_cast<std::size_t>(*vis)];
      }
    }
    send(b.id, kClient, resp);
  }
}

// The HW may have moved: answer the acks=all produces it covers.
void Sim::leader_progress(Broker& b) {
  if (b.pending.empty()) return;
  std::vector<Broker::Pending> keep;
  for (const auto& p : b.pending) {
    auto out = b.rs->acks_all_outcome(p.last_offset);
    if (!out) {
      keep.push_back(p);
      continue;
    }
    if (*out == ErrorCode::none) {
      acked_.push_back({p.last_offset, p.value});
      const Rec& r = b.log.history().recs[static_cast<std::size_t>(p.last_offset)];
      if (r.value != p.value) fail("acknowledged record is not the one the leader appended");
    }
    send(b.id, kClient, ProduceResp{p.value, *out});
  }
  b.pending = std::move(keep);
}

void Sim::broker_tick(Broker& b) {
  if (!b.up) return;
  auto& rs = *b.rs;
  if (b.broker_epoch < 0) {
    if (now_ >= b.next_register_ms) {
      b.next_register_ms = now_ + 50;
      send(b.id, kController, RegisterReq{{b.id, b.incarnation_id, {}, std::nullopt}});
    }
  } else if (now_ >= b.next_heartbeat_ms) {
    b.next_heartbeat_ms = now_ + 50;
    send(b.id, kController, HeartbeatReq{{b.id, b.broker_epoch, b.meta_offset, false, b.stopping}});
  }
  if (!b.syncing && b.log.start_sync()) {
    b.syncing = true;
    const auto inc = b.incarnation;
    at(1 + static_cast<std::int64_t>(rnd(5)), [this, &b, inc] {
      if (!b.up || b.incarnation != inc) return;
      b.syncing = false;
      b.log.finish_sync();
      b.rs->on_log_advanced();
      leader_progress(b);
    });
  }
  if (rs.role() == ReplicaRole::follower && now_ >= b.next_fetch_ms) {
    if (auto f = rs.next_fetch(now_)) send(b.id, f->leader_id, FetchReq{*f});
  }
  if (rs.role() == ReplicaRole::leader && now_ >= b.next_isr_ms) {
    b.next_isr_ms = now_ + 10;
    if (auto p = rs.poll_isr(now_, b.brokers)) {
      AlterPartitionItem item{b.id, b.broker_epoch, topic_id_, 0, *p};
      trace("broker %d proposes ISR of %zu at partition epoch %d", b.id, p->new_isr.size(),
            p->partition_epoch);
      send(b.id, kController, AlterReq{item});
    }
    leader_progress(b);
  }
}

// ---- client ----

void Sim::client_receive(Msg m) {
  if (auto* md = std::get_if<MetadataMsg>(&m)) {
    if (md->offset > client_meta_offset_) {
      client_meta_offset_ = md->offset;
      client_part_ = md->part;
    }
  } else if (auto* rr = std::get_if<ReadResp>(&m)) {
    if (!read_in_flight_ || rr->id != *read_in_flight_) return;  // stale
    read_in_flight_.reset();
    if (rr->error != ErrorCode::none) return;
    if (rr->epoch < consumer_epoch_) {
      fail("consumer answered by leader epoch " + std::to_string(rr->epoch) + " after " +
           std::to_string(consumer_epoch_));
      return;
    }
    consumer_epoch_ = rr->epoch;
    if (rr->hw < consumer_hw_) {
      fail("consumer saw the high watermark go back from " + std::to_string(consumer_hw_) + " to " +
           std::to_string(rr->hw));
      return;
    }
    consumer_hw_ = rr->hw;
    if (rr->hw > committed_.size() ||
        committed_.ph[static_cast<std::size_t>(rr->hw)] != rr->prefix_hash)
      fail("consumer read records below the HW that differ from the committed history");
  }
}

void Sim::client_produce() {
  if (faults_on_ || now_ < kEndMs - 1500) {
    int leader = client_leader();
    if (leader > 0) send(kClient, leader, ProduceReq{next_value_++});
  }
  at(5 + static_cast<std::int64_t>(rnd(15)), [this] { client_produce(); });
}

void Sim::client_read() {
  if (read_in_flight_ && now_ - read_sent_ms_ > 100) read_in_flight_.reset();
  int leader = client_leader();
  if (!read_in_flight_ && leader > 0) {
    read_in_flight_ = ++read_id_;
    read_sent_ms_ = now_;
    send(kClient, leader, ReadReq{*read_in_flight_, consumer_epoch_});
  }
  at(10 + static_cast<std::int64_t>(rnd(10)), [this] { client_read(); });
}

}  // namespace samsa::sim
