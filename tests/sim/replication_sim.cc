// Deterministic simulation of replication: the production state machines (ReplicaState on
// every broker, ControllerState on the controller) driven over a seeded fake network (loss,
// delays that reorder, isolation) and fake disks (a crash loses what was not synced), with one
// controller, three brokers, a partition with RF=3 and min.insync.replicas=2, a client
// producing with acks=all and a consumer reading up to the high watermark. Faults: broker
// crashes and restarts, isolations, controller crashes, power cuts of every node at once.
//
// Invariants, checked after every step (every event the simulation processes):
//  - at most one broker leads each leader epoch;
//  - no offset below any replica's high watermark is ever lost or changed: every replica's log
//    below its HW equals the committed history, and every member of the controller's committed
//    ISR holds on disk (synced) the committed history up to the highest HW any replica reached;
//  - acknowledged acks=all records are part of that history (so they are never lost);
//  - a follower whose truncation is done holds a prefix of its leader's log;
//  - the consumer never sees the high watermark go back, nor a record that later changes.
// After the faults stop, the cluster must heal: a leader serving every acknowledged record.
//
// Usage: replication_sim [--seeds N] [--first-seed S] [--broken-hw] [--expect-violation] [-v]
//   SAMSA_SIM_SEEDS overrides the default seed count (2000). --broken-hw advances the HW on the
//   leader alone (ReplicaOptions::testing_hw_leader_only); with --expect-violation the run
//   succeeds only if some seed breaks an invariant (the test's teeth). A failure prints its seed;
//   `--first-seed S --seeds 1 -v` replays it with a trace.
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <random>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "base/log.h"
#include "io/leader_epoch.h"
#include "replication/controller_state.h"
#include "replication/replica_state.h"
#include "sim_disk.h"
#include "sim_nodes.h"

using namespace samsa;
using namespace samsa::replication;
using namespace samsa::sim;

namespace {

constexpr int kBrokers = 3;
constexpr int kController = 0;
constexpr int kClient = 100;
constexpr std::int64_t kFaultEndMs = 3000;
constexpr std::int64_t kEndMs = 6000;

bool g_verbose = false;
// Leave out the check that every ISR member holds the committed history on disk (the precursor
// of a loss), so a broken variant has to show the loss itself: a record below some HW changed.
bool g_loss_only = false;

enum class Variant { correct, hw_leader_only, fetch_from_memory };

struct Violation {
  std::string what;
};

// Totals over the seeds run, to show the faults did happen.
struct Stats {
  std::int64_t steps = 0, acked = 0, broker_crashes = 0, isolations = 0, controller_crashes = 0,
               power_cuts = 0, link_cuts = 0, controlled_shutdowns = 0, leaderships = 0,
               truncations = 0, max_offset = 0;
};
Stats g_stats;

class Sim {
 public:
  Sim(std::uint64_t seed, Variant v) : seed_(seed), variant_(v), rng_(seed) {
    loss_ = static_cast<double>(rnd(6)) / 100.0;  // 0..5 % per message
    for (int i = 0; i < kBrokers; ++i)
      b_[i].id = i + 1;
  }

  std::optional<Violation> run() {
    start_controller();
    for (auto& b : b_)
      start_broker(b);
    at(1, [this] { tick(); });
    at(300, [this] { next_fault(); });
    at(5, [this] { client_produce(); });
    at(7, [this] { client_read(); });
    at(kFaultEndMs, [this] { heal(); });
    while (!q_.empty() && !failed_) {
      auto ev = q_.top();
      q_.pop();
      now_ = ev.t;
      if (now_ > kEndMs) break;
      ++steps_;
      ev.fn();
      if (!failed_) check();
    }
    if (!failed_) final_check();
    if (failed_) return violation_;
    return std::nullopt;
  }
  void add_stats() const {
    g_stats.steps += steps_;
    g_stats.acked += static_cast<std::int64_t>(acked_.size());
    g_stats.leaderships += static_cast<std::int64_t>(leaders_.size());
    for (const auto& b : b_)
      g_stats.truncations += b.log.truncations();
    g_stats.max_offset = std::max(g_stats.max_offset, committed_.size());
  }

 private:
  struct Event {
    std::int64_t t;
    std::uint64_t seq;
    std::function<void()> fn;
    bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
  };

  std::uint64_t rnd(std::uint64_t n) { return rng_() % n; }
  void at(std::int64_t delay, std::function<void()> fn) {
    q_.push(Event{now_ + delay, seq_++, std::move(fn)});
  }
  void trace(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    if (!g_verbose) return;
    std::printf("[%6" PRId64 "] ", now_);
    va_list ap;
    va_start(ap, fmt);
    std::vprintf(fmt, ap);
    va_end(ap);
    std::printf("\n");
  }
  void fail(std::string what) {
    if (failed_) return;
    failed_ = true;
    char head[128];
    std::snprintf(head, sizeof head, "step %" PRId64 " (t=%" PRId64 " ms): ", steps_, now_);
    violation_ = Violation{head + what};
  }

  // ---- network ----
  bool cut(int a, int b) const { return cut_links_.contains({std::min(a, b), std::max(a, b)}); }
  bool reachable(int node) const {
    if (node == kClient) return true;
    if (node == kController) return ctl_.up && !ctl_.isolated;
    const Broker& b = b_[node - 1];
    return b.up && !b.isolated;
  }
  void send(int from, int to, Msg m) {
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
  void start_controller() {
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
  void crash_controller() {
    if (!ctl_.up) return;
    ++g_stats.controller_crashes;
    ctl_.up = false;
    ctl_.quorum.crash();
    ctl_.cs.reset();
    trace("controller crashed");
  }
  void propose(const std::vector<MetadataRecord>& recs) {
    if (recs.empty()) return;
    ctl_.quorum.propose(recs);
  }
  // Answers go out once everything proposed so far is committed (no answer rests on a view
  // that a crash could take back).
  void answer_later(int to, Msg m) {
    ctl_.answers.push_back({ctl_.cs->next_offset() - 1, to, std::move(m)});
  }
  void controller_receive(int from, Msg m) {
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
  void controller_tick() {
    if (!ctl_.up) return;
    auto& cs = *ctl_.cs;
    propose(cs.tick(now_));
    if (!topic_created_ && cs.image().topic("t") == nullptr) {
      int live = 0;
      for (const auto& [id, b] : cs.image().brokers())
        live += !b.fenced;
      if (live == kBrokers) {
        auto p = cs.create_topic("t", topic_id_, 1, 3);
        if (p.answer == ErrorCode::none) propose(p.records);
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
  void controller_committed() {
    const auto committed = ctl_.quorum.committed_offset();
    const auto& recs = ctl_.quorum.records();
    while (ctl_.applied < committed) {
      ++ctl_.applied;
      (void)ctl_.committed.apply(recs[static_cast<std::size_t>(ctl_.applied)]);
      ctl_.committed.set_offset(ctl_.applied);
    }
    if (ctl_.committed.topic("t")) topic_created_ = true;
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
  std::optional<PartitionState> committed_partition() const {
    const TopicState* t = ctl_.committed.topic("t");
    if (!t || t->partitions.empty()) return std::nullopt;
    return t->partitions[0];
  }
  void publish(bool always) {
    if (!always && ctl_.published == ctl_.applied) return;
    ctl_.published = ctl_.applied;
    MetadataMsg m{ctl_.applied, committed_partition(), ctl_.committed.brokers()};
    for (int i = 1; i <= kBrokers; ++i)
      send(kController, i, m);
    send(kController, kClient, m);
  }

  // ---- brokers ----
  void start_broker(Broker& b) {
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
  void crash_broker(Broker& b, bool clean = false) {
    if (!b.up) return;
    if (!clean) ++g_stats.broker_crashes;
    b.up = false;
    b.log.crash();
    b.rs.reset();
    b.pending.clear();
    trace("broker %d crashed (kept %" PRId64 ")", b.id, b.log.log_end_offset());
  }
  void broker_apply_metadata(Broker& b) {
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
  void broker_receive(Broker& b, int from, Msg m) {
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
  void leader_progress(Broker& b) {
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
  void broker_tick(Broker& b) {
    if (!b.up) return;
    auto& rs = *b.rs;
    if (b.broker_epoch < 0) {
      if (now_ >= b.next_register_ms) {
        b.next_register_ms = now_ + 50;
        send(b.id, kController, RegisterReq{{b.id, b.incarnation_id, {}, std::nullopt}});
      }
    } else if (now_ >= b.next_heartbeat_ms) {
      b.next_heartbeat_ms = now_ + 50;
      send(b.id, kController,
           HeartbeatReq{{b.id, b.broker_epoch, b.meta_offset, false, b.stopping}});
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
  int client_leader() const { return client_part_ ? client_part_->leader : -1; }
  void client_receive(Msg m) {
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
        fail("consumer saw the high watermark go back from " + std::to_string(consumer_hw_) +
             " to " + std::to_string(rr->hw));
        return;
      }
      consumer_hw_ = rr->hw;
      if (rr->hw > committed_.size() ||
          committed_.ph[static_cast<std::size_t>(rr->hw)] != rr->prefix_hash)
        fail("consumer read records below the HW that differ from the committed history");
    }
  }
  void client_produce() {
    if (faults_on_ || now_ < kEndMs - 1500) {
      int leader = client_leader();
      if (leader > 0) send(kClient, leader, ProduceReq{next_value_++});
    }
    at(5 + static_cast<std::int64_t>(rnd(15)), [this] { client_produce(); });
  }
  void client_read() {
    if (read_in_flight_ && now_ - read_sent_ms_ > 100) read_in_flight_.reset();
    int leader = client_leader();
    if (!read_in_flight_ && leader > 0) {
      read_in_flight_ = ++read_id_;
      read_sent_ms_ = now_;
      send(kClient, leader, ReadReq{*read_in_flight_, consumer_epoch_});
    }
    at(10 + static_cast<std::int64_t>(rnd(10)), [this] { client_read(); });
  }

  // ---- faults ----
  void tick() {
    controller_tick();
    for (auto& b : b_)
      broker_tick(b);
    at(2, [this] { tick(); });
  }
  void next_fault() {
    if (!faults_on_) return;
    const auto k = rnd(100);
    Broker& b = b_[rnd(kBrokers)];
    const std::int64_t downtime = 30 + static_cast<std::int64_t>(rnd(600));
    if (k < 30) {
      if (b.up) {
        crash_broker(b);
        at(downtime, [this, &b] {
          if (!b.up) start_broker(b);
        });
      }
    } else if (k < 55) {
      if (b.up && !b.isolated) {
        b.isolated = true;
        ++g_stats.isolations;
        trace("broker %d isolated", b.id);
        at(downtime, [this, &b] {
          b.isolated = false;
          trace("broker %d healed", b.id);
        });
      }
    } else if (k < 65) {
      crash_controller();
      at(downtime, [this] {
        if (!ctl_.up) start_controller();
      });
    } else if (k < 70) {
      if (!ctl_.isolated) {
        ctl_.isolated = true;
        ++g_stats.isolations;
        trace("controller isolated");
        at(downtime, [this] { ctl_.isolated = false; });
      }
    } else if (k < 80) {
      // Two brokers lose each other (both still reach the controller and the client).
      int x = static_cast<int>(rnd(kBrokers)) + 1, y = static_cast<int>(rnd(kBrokers)) + 1;
      if (x != y) {
        std::pair<int, int> link{std::min(x, y), std::max(x, y)};
        cut_links_.insert(link);
        ++g_stats.link_cuts;
        trace("link %d-%d cut", x, y);
        at(downtime, [this, link] { cut_links_.erase(link); });
      }
    } else if (k < 80 + 7) {
      if (b.up && !b.stopping && b.broker_epoch >= 0) {
        trace("broker %d asks for a controlled shutdown", b.id);
        b.stopping = true;
        b.restart_after_ms = downtime;
      }
    } else if (k < 94) {
      // A power cut of every node at once.
      trace("power cut");
      ++g_stats.power_cuts;
      crash_controller();
      for (auto& x : b_)
        crash_broker(x);
      for (auto& x : b_)
        at(20 + static_cast<std::int64_t>(rnd(400)), [this, &x] {
          if (!x.up) start_broker(x);
        });
      at(20 + static_cast<std::int64_t>(rnd(400)), [this] {
        if (!ctl_.up) start_controller();
      });
    }
    at(50 + static_cast<std::int64_t>(rnd(250)), [this] { next_fault(); });
  }
  void heal() {
    faults_on_ = false;
    loss_ = 0;
    trace("faults stop, healing");
    if (!ctl_.up) start_controller();
    ctl_.isolated = false;
    cut_links_.clear();
    for (auto& b : b_) {
      b.isolated = false;
      if (!b.up) start_broker(b);
    }
  }

  // ---- invariants ----
  void check() {
    // At most one leader per epoch.
    for (auto& b : b_) {
      if (!b.up || b.rs->role() != ReplicaRole::leader) continue;
      auto [it, fresh] = leaders_.emplace(b.rs->leader_epoch(), b.id);
      if (!fresh && it->second != b.id) {
        fail("brokers " + std::to_string(it->second) + " and " + std::to_string(b.id) +
             " both led epoch " + std::to_string(b.rs->leader_epoch()));
        return;
      }
    }
    // Logs below each replica's HW equal the committed history (which they extend).
    for (auto& b : b_) {
      const auto low = b.log.take_low();
      b.verified = std::min(b.verified, low);
      b.durable_verified = std::min(b.durable_verified, low);
      if (!b.up) continue;
      const auto& h = b.log.history();
      const std::int64_t hw = b.rs->high_watermark();
      if (hw > h.size()) {
        fail("broker " + std::to_string(b.id) + " has HW " + std::to_string(hw) +
             " above its log end " + std::to_string(h.size()));
        return;
      }
      if (hw <= b.verified) continue;
      for (std::int64_t o = committed_.size(); o < hw; ++o)
        committed_.push(h.recs[static_cast<std::size_t>(o)]);
      if (h.ph[static_cast<std::size_t>(hw)] != committed_.ph[static_cast<std::size_t>(hw)]) {
        fail("broker " + std::to_string(b.id) + ": records below its HW " + std::to_string(hw) +
             " differ from the committed history (lost or changed): " + first_difference(h, hw));
        return;
      }
      b.verified = hw;
    }
    // Every member of the committed ISR holds the committed history on disk.
    if (auto p = committed_partition(); p && !g_loss_only) {
      const std::int64_t n = committed_.size();
      for (std::int32_t id : p->isr) {
        Broker& b = b_[id - 1];
        if (b.durable_verified >= n) continue;
        const auto& h = b.log.history();
        if (b.log.durable_end_offset() < n ||
            h.ph[static_cast<std::size_t>(n)] != committed_.ph[static_cast<std::size_t>(n)]) {
          fail("ISR member " + std::to_string(id) + " (leader epoch " +
               std::to_string(p->leader_epoch) + ") lacks committed offsets below " +
               std::to_string(n) + " on disk (durable end " +
               std::to_string(b.log.durable_end_offset()) + "): a leader elected now loses them");
          return;
        }
        b.durable_verified = n;
      }
    }
    // Acknowledged records are committed.
    for (; acked_checked_ < acked_.size(); ++acked_checked_) {
      const auto& a = acked_[acked_checked_];
      if (a.first >= committed_.size() ||
          committed_.recs[static_cast<std::size_t>(a.first)].value != a.second) {
        fail("acknowledged record " + std::to_string(a.second) + " at offset " +
             std::to_string(a.first) + " is not in the committed history");
        return;
      }
    }
    // A follower done truncating holds a prefix of its leader's log.
    for (auto& f : b_) {
      if (!f.up || f.rs->role() != ReplicaRole::follower || !f.rs->truncation_done()) continue;
      Broker& l = b_[f.rs->leader_id() - 1];
      if (!l.up || l.rs->role() != ReplicaRole::leader ||
          l.rs->leader_epoch() != f.rs->leader_epoch())
        continue;
      const auto& fh = f.log.history();
      const auto& lh = l.log.history();
      if (fh.size() > lh.size() || fh.ph[static_cast<std::size_t>(fh.size())] !=
                                       lh.ph[static_cast<std::size_t>(fh.size())]) {
        fail("follower " + std::to_string(f.id) + " (log end " + std::to_string(fh.size()) +
             ") is not a prefix of leader " + std::to_string(l.id) + " (log end " +
             std::to_string(lh.size()) + ") after truncation");
        return;
      }
    }
  }
  // Where a log first departs from the committed history (only when reporting a failure).
  std::string first_difference(const History& h, std::int64_t n) const {
    for (std::int64_t o = 0; o < n; ++o) {
      const Rec& got = h.recs[static_cast<std::size_t>(o)];
      const Rec& want = committed_.recs[static_cast<std::size_t>(o)];
      if (got.epoch == want.epoch && got.value == want.value) continue;
      bool acked = false;
      for (const auto& a : acked_)
        acked = acked || (a.first == o && a.second == want.value);
      return "offset " + std::to_string(o) + " held record " + std::to_string(want.value) +
             " (epoch " + std::to_string(want.epoch) + (acked ? ", acknowledged" : "") +
             "), now record " + std::to_string(got.value) + " (epoch " + std::to_string(got.epoch) +
             ")";
    }
    return "no difference found";
  }
  void final_check() {
    // Healed: some leader must serve every acknowledged record below its visible HW.
    for (auto& b : b_) {
      if (!b.up || b.rs->role() != ReplicaRole::leader) continue;
      auto vis = b.rs->visible_high_watermark();
      std::int64_t need = 0;
      for (const auto& a : acked_)
        need = std::max(need, a.first + 1);
      if (vis && *vis >= need &&
          b.log.history().ph[static_cast<std::size_t>(need)] ==
              committed_.ph[static_cast<std::size_t>(need)])
        return;
    }
    std::string state;
    for (auto& b : b_) {
      state += " broker " + std::to_string(b.id) + (b.up ? "" : " down") + " role " +
               std::to_string(b.up ? static_cast<int>(b.rs->role()) : -1) + " epoch " +
               std::to_string(b.up ? b.rs->leader_epoch() : -1) + " hw " +
               std::to_string(b.up ? b.rs->high_watermark() : -1) + " end " +
               std::to_string(b.log.log_end_offset()) + ";";
    }
    if (auto p = committed_partition())
      state += " metadata leader " + std::to_string(p->leader) + " epoch " +
               std::to_string(p->leader_epoch) + " isr size " + std::to_string(p->isr.size());
    fail("no leader serves every acknowledged record after healing:" + state);
  }

  std::uint64_t seed_;
  Variant variant_;
  std::mt19937_64 rng_;
  double loss_ = 0;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> q_;
  std::uint64_t seq_ = 0;
  std::int64_t now_ = 0;
  std::int64_t steps_ = 0;
  bool failed_ = false;
  Violation violation_;
  bool faults_on_ = true;
  std::set<std::pair<int, int>> cut_links_;
  Controller ctl_;
  Broker b_[kBrokers];
  Uuid topic_id_{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  bool topic_created_ = false;
  // Client
  std::int64_t client_meta_offset_ = -1;
  std::optional<PartitionState> client_part_;
  std::int64_t next_value_ = 1;
  std::optional<std::int64_t> read_in_flight_;
  std::int64_t read_id_ = 0;
  std::int64_t read_sent_ms_ = 0;
  std::int32_t consumer_epoch_ = -1;
  std::int64_t consumer_hw_ = 0;
  // Checker
  History committed_;
  std::map<std::int32_t, std::int32_t> leaders_;
  std::vector<std::pair<std::int64_t, std::int64_t>> acked_;  // offset, value
  std::size_t acked_checked_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t seeds = 2000, first = 1;
  if (const char* e = std::getenv("SAMSA_SIM_SEEDS")) seeds = std::strtoull(e, nullptr, 10);
  Variant variant = Variant::correct;
  bool expect_violation = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--seeds" && i + 1 < argc) {
      seeds = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--first-seed" && i + 1 < argc) {
      first = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--broken-hw") {
      variant = Variant::hw_leader_only;
    } else if (a == "--memory-acks") {
      variant = Variant::fetch_from_memory;
    } else if (a == "--loss-only") {
      g_loss_only = true;
    } else if (a == "--expect-violation") {
      expect_violation = true;
    } else if (a == "-v") {
      g_verbose = true;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--seeds N] [--first-seed S] [--broken-hw | --memory-acks] "
                   "[--loss-only] [--expect-violation] [-v]\n",
                   argv[0]);
      return 2;
    }
  }
  std::string flags;
  if (variant == Variant::hw_leader_only) flags += " --broken-hw";
  if (variant == Variant::fetch_from_memory) flags += " --memory-acks";
  if (g_loss_only) flags += " --loss-only";
  // The epoch cache logs each empty epoch it replaces; thousands of elections make that noise.
  if (!g_verbose) samsa::log::set_level(samsa::log::Level::error);
  const auto t0 = std::chrono::steady_clock::now();
  for (std::uint64_t s = first; s < first + seeds; ++s) {
    Sim sim(s, variant);
    auto v = sim.run();
    sim.add_stats();
    if (v) {
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("seed %" PRIu64 " violates an invariant at %s\n", s, v->what.c_str());
      std::printf("(%" PRIu64 " seeds run in %.1f s; replay: %s --first-seed %" PRIu64
                  " --seeds 1%s -v)\n",
                  s - first + 1, secs, argv[0], s, flags.c_str());
      return expect_violation ? 0 : 1;
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const Stats& st = g_stats;
  std::printf("%" PRIu64 " seeds (%" PRIu64 "..%" PRIu64 "), no invariant broken, %.1f s\n", seeds,
              first, first + seeds - 1, secs);
  std::printf("  %" PRId64 " steps checked, %" PRId64
              " acks=all records acknowledged (longest log %" PRId64 "), %" PRId64
              " leaderships, %" PRId64 " truncations\n",
              st.steps, st.acked, st.max_offset, st.leaderships, st.truncations);
  std::printf("  faults: %" PRId64 " broker crashes, %" PRId64 " isolations, %" PRId64
              " controller crashes, %" PRId64 " broker-to-broker link cuts, %" PRId64
              " controlled shutdowns, %" PRId64 " power cuts of every node\n",
              st.broker_crashes, st.isolations, st.controller_crashes, st.link_cuts,
              st.controlled_shutdowns, st.power_cuts);
  if (expect_violation) {
    std::printf("expected a violation (--expect-violation) and saw none\n");
    return 1;
  }
  return 0;
}
