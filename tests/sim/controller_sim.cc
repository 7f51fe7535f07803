// Deterministic simulation of the controller's request handling (issue 17): the production
// ControllerState on one controller node, driven by three brokers that send it requests
// concurrently over a seeded network (delays that reorder, lost answers): AllocateProducerIds,
// CreateTopics (names that collide, '.' against '_'), CreatePartitions, DeleteTopics,
// AlterConfigs, AlterPartition and AlterPartitionReassignments, with registrations and heartbeats
// (fencing moves leaders while AlterPartitions are in flight). The controller's log is a fake disk
// with group-commit syncs of random length; faults: a write that fails (the unsynced tail is lost
// and the state machine reverts it, the controller carries on), kill -9 (the written records
// survive) and a power cut (only the synced ones do), each followed by a restart that replays the
// log; broker crashes (a new registration, so requests with the old epoch go stale).
//
// Invariants, checked after every step:
//  - every producer-id block a broker receives is disjoint from every other one received, in
//    this incarnation of the controller or any earlier, and its record was durable before the
//    answer left (a restart or power cut can never hand it out again);
//  - the committed log replays: each committed record applies to the image of the records
//    before it (a decision made from a stale view shows up as a contradiction: a second topic
//    of one name, a producer-id block that does not move forward, partitions or configs of a
//    deleted topic); so one topic per name;
//  - every success answer describes committed state: a created topic's id is in the log under
//    its name; an AlterPartition's answer is a partition state the log went through; partition
//    and leader epochs never go back;
//  - every committed partition state is well formed: ISR, adding and removing replicas within
//    the replica list, none both added and removed, the leader in the ISR, the ISR not empty;
//  - the state machine refused none of its own proposals, and with nothing in flight its
//    working view equals the committed one.
//
// Usage: controller_sim [--seeds N] [--first-seed S] [--broken] [--visible-only]
//                       [--expect-violation] [-v]
//   SAMSA_SIM_SEEDS overrides the default seed count (5000). --broken decides from the
//   committed view (ControllerStateOptions::testing_decide_from_committed, the code before
//   issue 17); --visible-only leaves out the refused-proposal check, so only damage a client
//   would see counts; with --expect-violation the run succeeds only if some seed breaks an
//   invariant.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
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
#include "replication/controller_state.h"

namespace samsa::sim {
namespace {

using namespace samsa::replication;
using kafka::ErrorCode;

constexpr int kBrokers = 3;
constexpr std::int64_t kEndMs = 3000;
bool g_verbose = false;
// Leave out the check that the state machine refused none of its proposals (the precursor), so
// a broken variant has to show the damage a client would see.
bool g_visible_only = false;

struct Totals {
  std::int64_t steps = 0, blocks = 0, topics_created = 0, deletions = 0, partitions_added = 0,
               configs = 0, isr_changes = 0, reassignments = 0, stale = 0, write_failures = 0,
               kills = 0, power_cuts = 0, broker_crashes = 0, records = 0;
} g_totals;

// The controller's log on a fake disk: records are written (page cache) at once; a sync makes
// every record written before it started durable.
struct Disk {
  std::vector<MetadataRecord> recs;
  std::size_t durable = 0;
  void kill() {}  // kill -9: the page cache keeps what was written (synced at the restart)
  void power_cut() { recs.resize(durable); }
};

// What a request turns into once the records it proposed commit.
struct Waiting {
  std::int64_t last_offset;
  std::function<void(bool)> then;
};

class ControllerSim {
 public:
  ControllerSim(std::uint64_t seed, bool broken) : seed_(seed), broken_(broken), rng_(seed) {}

  std::optional<std::string> run() {
    start_controller();
    for (int b = 1; b <= kBrokers; ++b) {
      brokers_[b].id = b;
      at(rnd(5), [this, b] { broker_start(b); });
    }
    at(1, [this] { tick(); });
    at(100, [this] { next_fault(); });
    while (!q_.empty() && !violation_) {
      auto ev = q_.top();
      q_.pop();
      now_ = ev.t;
      if (now_ > kEndMs) break;
      ++g_totals.steps;
      ev.fn();
      if (!violation_) check();
    }
    g_totals.records += static_cast<std::int64_t>(disk_.recs.size());
    return violation_;
  }

 private:
  struct Event {
    std::int64_t t;
    std::uint64_t seq;
    std::function<void()> fn;
    bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
  };
  struct Broker {
    int id = 0;
    bool up = false;
    int incarnation = 0;
    std::int64_t epoch = -1;
    ImagePtr view = std::make_shared<MetadataImage>();  // the committed image it was last sent
  };

  std::uint64_t rnd(std::uint64_t n) { return n ? rng_() % n : 0; }
  void at(std::int64_t delay, std::function<void()> fn) {
    q_.push(Event{now_ + delay, seq_++, std::move(fn)});
  }
  void trace(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    if (!g_verbose) return;
    std::printf("[%5" PRId64 "] ", now_);
    va_list ap;
    va_start(ap, fmt);
    std::vprintf(fmt, ap);
    va_end(ap);
    std::printf("\n");
  }
  void fail(std::string what) {
    if (violation_) return;
    violation_ = "t=" + std::to_string(now_) + " ms: " + what;
  }
  // A message on the network: delivered after 0..4 ms (so messages reorder), or lost.
  void deliver(std::function<void()> fn, bool may_lose = true) {
    if (may_lose && rnd(100) < 3) return;
    at(static_cast<std::int64_t>(rnd(5)), std::move(fn));
  }

  // ---- controller ----
  void start_controller() {
    ++incarnation_;
    up_ = true;
    syncing_ = false;
    waiting_.clear();
    ControllerStateOptions o;
    o.session_timeout_ms = 150;
    o.max_partitions = 60;
    o.max_partitions_per_request = 8;
    o.producer_id_block = 10;
    o.default_replication_factor = 2;
    o.new_topic_id = [this] {
      Uuid u{};
      const std::uint64_t n = ++topic_ids_;
      for (int i = 0; i < 8; ++i)
        u[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(n >> (8 * i));
      u[15] = 1;
      return u;
    };
    o.testing_decide_from_committed = broken_;
    cs_ = std::make_unique<ControllerState>(o);
    // What a kill left written in the page cache is synced by the log's recovery at open
    // (io::Log recovers and fdatasyncs the segments after its recovery point) before the
    // replay counts it as committed.
    disk_.durable = disk_.recs.size();
    for (std::size_t i = 0; i < disk_.recs.size(); ++i) {
      check_committed_record(static_cast<std::int64_t>(i));
      (void)cs_->replay(disk_.recs[i], static_cast<std::int64_t>(i));
    }
    committed_ = static_cast<std::int64_t>(disk_.durable) - 1;
    cs_->on_become_active(now_, static_cast<std::int64_t>(disk_.recs.size()));
    trace("controller up (incarnation %d, %zu records, %zu durable)", incarnation_,
          disk_.recs.size(), disk_.durable);
  }

  // The records a request produced: written now, answered once synced.
  void propose(std::vector<MetadataRecord> recs, std::function<void(bool)> then) {
    if (recs.empty()) {
      then(true);
      return;
    }
    const std::int64_t first = cs_->next_offset() - static_cast<std::int64_t>(recs.size());
    if (first != static_cast<std::int64_t>(disk_.recs.size())) {
      fail("proposal numbered " + std::to_string(first) + " at log end " +
           std::to_string(disk_.recs.size()));
      return;
    }
    for (auto& r : recs)
      disk_.recs.push_back(std::move(r));
    waiting_.push_back(Waiting{cs_->next_offset() - 1, std::move(then)});
    maybe_sync();
  }

  void maybe_sync() {
    if (syncing_ || disk_.durable == disk_.recs.size()) return;
    syncing_ = true;
    const std::size_t target = disk_.recs.size();
    const int inc = incarnation_;
    at(1 + static_cast<std::int64_t>(rnd(8)), [this, target, inc] {
      if (!up_ || inc != incarnation_) return;
      syncing_ = false;
      if (rnd(100) < 4) {
        write_failure();
        return;
      }
      disk_.durable = std::max(disk_.durable, std::min(target, disk_.recs.size()));
      committed(static_cast<std::int64_t>(disk_.durable) - 1);
      maybe_sync();
    });
  }

  void committed(std::int64_t offset) {
    if (offset <= committed_) return;
    // The checker replays each newly committed record before anyone hears of it.
    for (std::int64_t o = committed_ + 1; o <= offset; ++o)
      check_committed_record(o);
    committed_ = offset;
    cs_->commit(offset);
    std::vector<Waiting> ready;
    while (!waiting_.empty() && waiting_.front().last_offset <= offset) {
      ready.push_back(std::move(waiting_.front()));
      waiting_.erase(waiting_.begin());
    }
    for (auto& w : ready)
      w.then(true);
    publish();
  }

  // The sync failed: everything not yet synced is lost, the state machine forgets it, and
  // every request waiting for it is answered with an error.
  void write_failure() {
    ++g_totals.write_failures;
    trace("write failure: %zu unsynced records lost", disk_.recs.size() - disk_.durable);
    disk_.recs.resize(disk_.durable);
    cs_->revert_to(static_cast<std::int64_t>(disk_.durable));
    auto lost = std::move(waiting_);
    waiting_.clear();
    for (auto& w : lost)
      w.then(false);
  }

  void crash_controller(bool power) {
    if (!up_) return;
    trace("controller %s", power ? "power cut" : "killed");
    ++(power ? g_totals.power_cuts : g_totals.kills);
    up_ = false;
    power ? disk_.power_cut() : disk_.kill();
    cs_.reset();
    waiting_.clear();
    at(5 + static_cast<std::int64_t>(rnd(30)), [this] { start_controller(); });
  }

  void publish() {
    ImagePtr img = cs_->committed_image();
    for (int b = 1; b <= kBrokers; ++b)
      deliver([this, b, img, inc = brokers_[b].incarnation] {
        Broker& br = brokers_[b];
        if (br.up && br.incarnation == inc && img->offset() > br.view->offset()) br.view = img;
      });
  }

  void tick() {
    if (up_) {
      auto recs = cs_->tick(now_);
      propose(std::move(recs), [](bool) {});
    }
    at(10, [this] { tick(); });
  }

  // A request from broker b reaches the controller (if it is up), is decided at once, and the
  // answer goes back once its records commit.
  template <class Answer>
  void request(int b, std::function<Proposal<Answer>(ControllerState&)> decide,
               std::function<void(Broker&, const Answer&, bool ok)> on_answer) {
    const int binc = brokers_[b].incarnation;
    deliver([this, b, binc, decide = std::move(decide), on_answer = std::move(on_answer)] {
      if (!up_) return;
      auto p = decide(*cs_);
      auto answer = std::make_shared<Answer>(std::move(p.answer));
      propose(std::move(p.records), [this, b, binc, answer, on_answer](bool ok) {
        deliver([this, b, binc, answer, on_answer, ok] {
          Broker& br = brokers_[b];
          if (br.up && br.incarnation == binc) on_answer(br, *answer, ok);
        });
      });
    });
  }

  // ---- brokers ----
  void broker_start(int b) {
    Broker& br = brokers_[b];
    br.up = true;
    ++br.incarnation;
    br.epoch = -1;
    register_broker(b);
    at(1, [this, b, inc = br.incarnation] { broker_loop(b, inc); });
  }

  void register_broker(int b) {
    Uuid inc{};
    inc[0] = static_cast<std::uint8_t>(b);
    inc[1] = static_cast<std::uint8_t>(brokers_[b].incarnation);
    BrokerRegistration reg{b, inc, {}, std::nullopt};
    request<RegistrationAnswer>(
        b, [this, reg](ControllerState& cs) { return cs.register_broker(reg, now_); },
        [](Broker& br, const RegistrationAnswer& a, bool ok) {
          if (ok && a.error == ErrorCode::none) br.epoch = a.broker_epoch;
        });
  }

  void broker_loop(int b, int inc) {
    Broker& br = brokers_[b];
    if (!br.up || br.incarnation != inc) return;
    if (br.epoch < 0) {
      if (rnd(4) == 0) register_broker(b);
    } else {
      Heartbeat hb{b, br.epoch, br.view->offset(), false, false};
      request<HeartbeatAnswer>(
          b, [this, hb](ControllerState& cs) { return cs.heartbeat(hb, now_); },
          [](Broker& br, const HeartbeatAnswer& a, bool) {
            if (a.error == ErrorCode::stale_broker_epoch) br.epoch = -1;
          });
      send_random_request(b);
    }
    at(5 + static_cast<std::int64_t>(rnd(20)), [this, b, inc] { broker_loop(b, inc); });
  }

  std::string random_topic() {
    static const char* const kNames[] = {"a", "b", "c", "x.y", "x_y"};
    return kNames[rnd(5)];
  }

  void send_random_request(int b);
  void on_block(Broker& br, const ProducerIdsAnswer& a, bool ok);
  void on_alter_partition(const AlterPartitionItem& item, const AlterPartitionAnswer& a, bool ok);
  void check_committed_record(std::int64_t offset);
  void check_partition(const PartitionState& p, std::int64_t offset);
  void check();
  void next_fault();

  std::uint64_t seed_;
  bool broken_;
  std::mt19937_64 rng_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> q_;
  std::uint64_t seq_ = 0;
  std::int64_t now_ = 0;
  std::optional<std::string> violation_;
  // Controller
  Disk disk_;
  std::unique_ptr<ControllerState> cs_;
  bool up_ = false;
  int incarnation_ = 0;
  bool syncing_ = false;
  std::int64_t committed_ = -1;
  std::vector<Waiting> waiting_;
  std::uint64_t topic_ids_ = 0;
  Broker brokers_[kBrokers + 1];
  // Checker
  MetadataImage replayed_;  // the committed log replayed from offset 0
  std::int64_t replayed_to_ = -1;
  std::map<std::int64_t, std::int64_t> blocks_;  // first -> end, of blocks brokers received
  std::map<Uuid, std::string> ever_created_;     // topic id -> name, from committed records
  // (topic id, partition, partition epoch) -> the state it had then
  std::map<std::tuple<Uuid, std::int32_t, std::int32_t>, PartitionState> history_;
};

void ControllerSim::send_random_request(int b) {
  Broker& br = brokers_[b];
  const std::int64_t epoch = br.epoch;
  switch (rnd(8)) {
    case 0:
    case 1:
      request<ProducerIdsAnswer>(
          b, [b, epoch](ControllerState& cs) { return cs.allocate_producer_ids(b, epoch); },
          [this](Broker& br, const ProducerIdsAnswer& a, bool ok) { on_block(br, a, ok); });
      break;
    case 2: {
      TopicSpec spec{random_topic(),
                     1 + static_cast<std::int32_t>(rnd(3)),
                     static_cast<std::int16_t>(1 + rnd(3)),
                     {}};
      request<std::vector<TopicOutcome>>(
          b, [spec](ControllerState& cs) { return cs.create_topics({spec}, false); },
          [this](Broker&, const std::vector<TopicOutcome>& out, bool ok) {
            if (!ok || out.at(0).error != ErrorCode::none) return;
            ++g_totals.topics_created;
            auto it = ever_created_.find(out[0].id);
            if (it == ever_created_.end() || it->second != out[0].name)
              fail("CreateTopics answered " + out[0].name +
                   " created, its record is not committed");
          });
      break;
    }
    case 3: {
      const std::string name = random_topic();
      const TopicState* t = br.view->topic(name);
      const auto count = static_cast<std::int32_t>((t ? t->partitions.size() : 1) + 1 + rnd(2));
      request<std::vector<PartitionsOutcome>>(
          b,
          [name, count](ControllerState& cs) {
            return cs.create_partitions({{name, count, {}}}, false);
          },
          [](Broker&, const std::vector<PartitionsOutcome>& out, bool ok) {
            if (ok && out.at(0).error == ErrorCode::none) ++g_totals.partitions_added;
          });
      break;
    }
    case 4: {
      const std::string name = random_topic();
      request<std::vector<DeleteOutcome>>(
          b,
          [name](ControllerState& cs) {
            return cs.delete_topics({{name, kZeroUuid}});
          },
          [](Broker&, const std::vector<DeleteOutcome>& out, bool ok) {
            if (ok && out.at(0).error == ErrorCode::none) ++g_totals.deletions;
          });
      break;
    }
    case 5: {
      ConfigAlteration a{ConfigResource::topic,
                         random_topic(),
                         {{"retention.ms", ConfigOpType::set, std::to_string(1000 + rnd(5))}},
                         false};
      request<std::vector<ConfigOutcome>>(
          b, [a](ControllerState& cs) { return cs.alter_configs({a}, false); },
          [](Broker&, const std::vector<ConfigOutcome>& out, bool ok) {
            if (ok && out.at(0).error == ErrorCode::none) ++g_totals.configs;
          });
      break;
    }
    case 6: {
      // A reassignment to a random replica list (its factor may change), or a cancellation.
      ReassignmentSpec spec{random_topic(), static_cast<std::int32_t>(rnd(3)), std::nullopt};
      if (rnd(4) != 0) {
        std::vector<std::int32_t> all{1, 2, 3};
        std::shuffle(all.begin(), all.end(), rng_);
        all.resize(1 + rnd(3));
        spec.replicas = all;
      }
      request<std::vector<ReassignmentOutcome>>(
          b, [spec](ControllerState& cs) { return cs.alter_partition_reassignments({spec}, true); },
          [](Broker&, const std::vector<ReassignmentOutcome>& out, bool ok) {
            if (ok && out.at(0).error == ErrorCode::none) ++g_totals.reassignments;
          });
      break;
    }
    default: {
      // An ISR change for a partition this broker leads in its (possibly stale) view: drop a
      // follower, or take every replica back.
      for (const auto& [name, t] : br.view->topics()) {
        for (const auto& p : t->partitions) {
          if (p.leader != b || rnd(2)) continue;
          AlterPartitionItem item;
          item.broker_id = b;
          item.broker_epoch = epoch;
          item.topic_id = t->id;
          item.partition = p.partition;
          item.proposal.leader_epoch = p.leader_epoch;
          item.proposal.partition_epoch = p.partition_epoch;
          std::vector<std::int32_t> isr = p.replicas;
          if (rnd(2) && p.isr.size() > 1) {
            isr = p.isr;
            std::erase(isr, isr[1 + rnd(isr.size() - 1)]);
          }
          for (std::int32_t r : isr)
            item.proposal.new_isr.push_back({r, -1});
          request<AlterPartitionAnswer>(
              b, [item](ControllerState& cs) { return cs.alter_partition(item); },
              [this, item](Broker&, const AlterPartitionAnswer& a, bool ok) {
                on_alter_partition(item, a, ok);
              });
          return;
        }
      }
    }
  }
}

void ControllerSim::on_block(Broker& br, const ProducerIdsAnswer& a, bool ok) {
  if (!ok || a.error != ErrorCode::none) {
    if (a.error == ErrorCode::stale_broker_epoch) ++g_totals.stale;
    return;
  }
  ++g_totals.blocks;
  const std::int64_t end = a.first + a.length;
  trace("broker %d gets producer ids %" PRId64 "..%" PRId64, br.id, a.first, end - 1);
  if (a.length <= 0) fail("an empty producer-id block");
  auto next = blocks_.lower_bound(a.first);
  if (next != blocks_.end() && next->first < end)
    fail("producer-id block " + std::to_string(a.first) + ".." + std::to_string(end - 1) +
         " overlaps one handed out before, from " + std::to_string(next->first));
  if (next != blocks_.begin() && std::prev(next)->second > a.first)
    fail("producer-id block " + std::to_string(a.first) + ".." + std::to_string(end - 1) +
         " overlaps one handed out before, from " + std::to_string(std::prev(next)->first));
  if (replayed_.next_producer_id() < end)
    fail("producer-id block " + std::to_string(a.first) +
         " answered before its record was durable");
  blocks_[a.first] = end;
}

void ControllerSim::on_alter_partition(const AlterPartitionItem& item,
                                       const AlterPartitionAnswer& a, bool ok) {
  if (!ok || a.error != ErrorCode::none) return;
  ++g_totals.isr_changes;
  auto it = history_.find({item.topic_id, item.partition, a.partition_epoch});
  if (it == history_.end()) {
    fail("AlterPartition answered partition epoch " + std::to_string(a.partition_epoch) +
         ", a state the committed log never had");
    return;
  }
  if (it->second.isr != a.isr || it->second.leader != a.leader_id ||
      it->second.leader_epoch != a.leader_epoch)
    fail("AlterPartition's answer differs from the committed state of its partition epoch");
}

void ControllerSim::check_committed_record(std::int64_t offset) {
  if (offset <= replayed_to_) return;  // replayed already (a restart re-commits nothing new)
  const MetadataRecord& r = disk_.recs.at(static_cast<std::size_t>(offset));
  const std::int64_t pid_before = replayed_.next_producer_id();
  if (!replayed_.apply(r)) {
    fail("committed record " + std::to_string(offset) + " (type " + std::to_string(r.index()) +
         ") contradicts the records before it");
    return;
  }
  if (std::holds_alternative<ProducerIdsRecord>(r) && replayed_.next_producer_id() <= pid_before)
    fail("a producer-id block record at " + std::to_string(offset) + " does not move forward");
  replayed_.set_offset(offset);
  replayed_to_ = offset;
  if (const auto* t = std::get_if<TopicRecord>(&r)) ever_created_[t->topic_id] = t->name;
  const Uuid* id = nullptr;
  std::int32_t part = 0;
  if (const auto* p = std::get_if<PartitionRecord>(&r)) {
    id = &p->topic_id;
    part = p->partition;
  } else if (const auto* c = std::get_if<PartitionChangeRecord>(&r)) {
    id = &c->topic_id;
    part = c->partition;
  }
  if (!id) return;
  const TopicState* t = replayed_.topic(*id);
  const PartitionState& now = t->partitions.at(static_cast<std::size_t>(part));
  auto prev = history_.lower_bound({*id, part, INT32_MIN});
  for (auto e = prev;
       e != history_.end() && std::get<0>(e->first) == *id && std::get<1>(e->first) == part; ++e) {
    if (e->second.partition_epoch >= now.partition_epoch ||
        e->second.leader_epoch > now.leader_epoch)
      fail("partition epochs went back at offset " + std::to_string(offset));
  }
  history_[{*id, part, now.partition_epoch}] = now;
  check_partition(now, offset);
}

// What every committed partition state must satisfy, reassignments included.
void ControllerSim::check_partition(const PartitionState& p, std::int64_t offset) {
  auto within = [&](const std::vector<std::int32_t>& ids) {
    for (std::int32_t id : ids)
      if (!contains(p.replicas, id)) return false;
    return true;
  };
  const std::string at = " at offset " + std::to_string(offset);
  if (!within(p.isr) || !within(p.adding) || !within(p.removing))
    fail("an ISR, adding or removing replica outside the replica list" + at);
  for (std::int32_t id : p.adding)
    if (contains(p.removing, id)) fail("a replica both added and removed" + at);
  if (p.leader >= 0 && !contains(p.isr, p.leader)) fail("a leader outside the ISR" + at);
  if (p.isr.empty()) fail("an empty ISR" + at);
  if (p.replicas.size() <= p.removing.size()) fail("a reassignment to no replica" + at);
}

void ControllerSim::check() {
  if (!up_) return;
  if (!g_visible_only && cs_->refused_proposals() != 0)
    fail("the state machine refused a proposal of its own");
  if (cs_->committed_offset() != committed_)
    fail("the state machine's committed offset " + std::to_string(cs_->committed_offset()) +
         " is not the log's " + std::to_string(committed_));
  if (cs_->uncommitted() == 0 && committed_ == replayed_to_) {
    // Nothing in flight: the working view is the committed log, replayed independently.
    const MetadataImage& w = cs_->image();
    bool same = w.topics().size() == replayed_.topics().size() &&
                w.next_producer_id() == replayed_.next_producer_id() &&
                w.partition_count() == replayed_.partition_count();
    for (const auto& [name, t] : replayed_.topics()) {
      const TopicState* o = w.topic(name);
      same = same && o && o->id == t->id && o->partitions.size() == t->partitions.size() &&
             o->configs == t->configs;
    }
    if (!same) fail("with nothing in flight, the working view differs from the committed log");
  }
}

void ControllerSim::next_fault() {
  if (now_ > kEndMs - 500) return;
  switch (rnd(6)) {
    case 0:
      crash_controller(false);
      break;
    case 1:
      crash_controller(true);
      break;
    case 2: {
      const int b = 1 + static_cast<int>(rnd(kBrokers));
      Broker& br = brokers_[b];
      if (br.up) {
        ++g_totals.broker_crashes;
        trace("broker %d crashes", b);
        br.up = false;
        ++br.incarnation;
        at(20 + static_cast<std::int64_t>(rnd(200)), [this, b] { broker_start(b); });
      }
      break;
    }
    default:
      break;  // a quiet spell: write failures happen on their own
  }
  at(50 + static_cast<std::int64_t>(rnd(250)), [this] { next_fault(); });
}

}  // namespace
}  // namespace samsa::sim

int main(int argc, char** argv) {
  using namespace samsa::sim;
  std::uint64_t seeds = 5000, first = 1;
  if (const char* e = std::getenv("SAMSA_SIM_SEEDS")) seeds = std::strtoull(e, nullptr, 10);
  bool broken = false, expect_violation = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--seeds" && i + 1 < argc) {
      seeds = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--first-seed" && i + 1 < argc) {
      first = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--broken") {
      broken = true;
    } else if (a == "--visible-only") {
      g_visible_only = true;
    } else if (a == "--expect-violation") {
      expect_violation = true;
    } else if (a == "-v") {
      g_verbose = true;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--seeds N] [--first-seed S] [--broken] [--visible-only] "
                   "[--expect-violation] [-v]\n",
                   argv[0]);
      return 2;
    }
  }
  if (!g_verbose) samsa::log::set_level(samsa::log::Level::error);
  // A broken variant's refused proposals log an error each: keep them out of the output.
  if (broken && !g_verbose) samsa::log::set_level(static_cast<samsa::log::Level>(0));
  const auto t0 = std::chrono::steady_clock::now();
  for (std::uint64_t s = first; s < first + seeds; ++s) {
    ControllerSim sim(s, broken);
    if (auto v = sim.run()) {
      std::printf("seed %" PRIu64 " violates an invariant at %s\n", s, v->c_str());
      std::printf("(replay: %s --first-seed %" PRIu64 " --seeds 1%s%s -v)\n", argv[0], s,
                  broken ? " --broken" : "", g_visible_only ? " --visible-only" : "");
      return expect_violation ? 0 : 1;
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const Totals& t = g_totals;
  std::printf("%" PRIu64 " seeds (%" PRIu64 "..%" PRIu64 "), no invariant broken, %.1f s\n", seeds,
              first, first + seeds - 1, secs);
  std::printf("  %" PRId64 " steps; answered: %" PRId64 " producer-id blocks (%" PRId64
              " stale epochs refused), %" PRId64 " topics created, %" PRId64 " deleted, %" PRId64
              " partition additions, %" PRId64 " config changes, %" PRId64 " ISR changes, %" PRId64
              " reassignments; %" PRId64 " records committed\n",
              t.steps, t.blocks, t.stale, t.topics_created, t.deletions, t.partitions_added,
              t.configs, t.isr_changes, t.reassignments, t.records);
  std::printf("  faults: %" PRId64 " write failures (reverted), %" PRId64 " kills, %" PRId64
              " power cuts of the controller, %" PRId64 " broker crashes\n",
              t.write_failures, t.kills, t.power_cuts, t.broker_crashes);
  if (expect_violation) {
    std::printf("expected a violation (--expect-violation) and saw none\n");
    return 1;
  }
  return 0;
}
