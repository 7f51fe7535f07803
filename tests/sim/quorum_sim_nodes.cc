// The quorum simulation's nodes, disks and network (quorum_sim.cc says what it checks).
#include <cstdarg>

#include "quorum_sim.h"

namespace samsa::sim {

using namespace samsa::replication::quorum;

QuorumSim::QuorumSim(std::uint64_t seed, int voters, QuorumVariant v)
    : seed_(seed), variant_(v), rng_(seed), voters_(voters) {
  loss_ = static_cast<double>(rnd(4)) / 100.0;  // 0..3 % per message
  nodes_ = std::vector<Node>(static_cast<std::size_t>(voters + 1));
  for (int i = 0; i <= voters; ++i) {
    nodes_[i].id = i + 1;
    nodes_[i].voter = i < voters;
    nodes_[i].snaps = std::make_unique<SimSnapshots>(nodes_[i].log);
  }
}

void QuorumSim::trace(const char* fmt, ...) {
  if (!g_quorum_verbose) return;
  std::printf("[%6" PRId64 "] ", now_);
  va_list ap;
  va_start(ap, fmt);
  std::vprintf(fmt, ap);
  va_end(ap);
  std::printf("\n");
}

std::optional<std::string> QuorumSim::run() {
  for (auto& n : nodes_)
    start_node(n);
  at(5, [this] { client_propose(); });
  at(300, [this] { next_fault(); });
  at(kFaultEndMs, [this] { heal(); });
  for (auto& n : nodes_)
    at(100 + static_cast<std::int64_t>(rnd(100)),
       [this, id = n.id] { maybe_snapshot(nodes_[id - 1]); });
  try {
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
  } catch (const AssertFailed& a) {
    fail(std::string("a product assertion failed: ") + a.what());
  }
  if (failed_) return violation_;
  return std::nullopt;
}

void QuorumSim::add_totals() const {
  auto& t = g_quorum_totals;
  t.steps += steps_;
  t.leaders += static_cast<std::int64_t>(leaders_.size());
  if (!leaders_.empty())
    t.max_epoch = std::max<std::int64_t>(t.max_epoch, leaders_.rbegin()->first);
  t.committed += static_cast<std::int64_t>(committed_.size());
  for (const auto& n : nodes_) {
    t.truncations += n.log.truncations();
    t.installs += n.snaps->installs;
  }
  t.snapshots += snapshots_;
  t.kills += kills_;
  t.power_cuts += power_cuts_;
  t.total_power_cuts += total_power_cuts_;
  t.partitions += partitions_;
  t.resignations += resignations_;
  t.lost += lost_;
  if (recovered_at_ >= 0 && healed_at_ >= 0) {
    t.recovery_ms.push_back(recovered_at_ - healed_at_);
    t.max_recovery_ms = std::max(t.max_recovery_ms, recovered_at_ - healed_at_);
  }
}

// ---- nodes ----

void QuorumSim::start_node(Node& n) {
  n.up = true;
  ++n.incarnation;
  n.parked.clear();
  n.applied.clear();
  // The state machine restarts from the newest snapshot; the rest comes as the HW is learned.
  if (auto s = n.snaps->latest()) {
    auto recs = decode_snapshot(n.snaps->read(*s, 0, INT64_MAX));
    if (!recs) {
      fail("node " + std::to_string(n.id) + ": its own snapshot does not decode");
      return;
    }
    n.applied = std::move(*recs);
  }
  n.verified = n.log.log_start_offset();
  n.log_truncations = n.log.truncations();
  n.applied_verified = 0;
  n.installs_seen = n.snaps->installs;
  RaftOptions o;
  o.node_id = n.id;
  for (int i = 1; i <= voters_; ++i)
    o.voters.push_back(i);
  o.election_timeout_ms = kElectionTimeoutMs;
  o.fetch_timeout_ms = kFetchTimeoutMs;
  o.election_backoff_max_ms = kBackoffMaxMs;
  o.fetch_max_wait_ms = 100;
  o.request_timeout_ms = 400;
  o.testing_commit_old_epoch = variant_ == QuorumVariant::commit_old_epoch;
  n.led_epoch = -1;  // a new incarnation has led nothing yet
  n.raft = std::make_unique<RaftNode>(
      o, n.log, *n.snaps, n.written, [this] { return rng_(); }, now_);
  n.last_role = n.raft->role();
  n.last_role_epoch = n.raft->epoch();
  trace("node %d starts: epoch %d voted %d leader %d, log %" PRId64 "..%" PRId64, n.id,
        n.written.epoch, n.written.voted_for, n.written.leader, n.log.log_start_offset(),
        n.log.log_end_offset());
  after_call(n);
}

void QuorumSim::stop_node(Node& n, bool power_cut) {
  if (!n.up) return;
  n.up = false;
  ++n.tick_gen;
  n.parked.clear();
  if (power_cut) {
    n.log.power_cut();
    n.written = n.durable;
    ++power_cuts_;
  } else {
    n.log.kill();
    ++kills_;
  }
  n.raft.reset();
  n.snaps->installed.clear();
  trace("node %d %s", n.id, power_cut ? "loses power" : "is killed");
}

// After every call into a node: make its quorum state durable (the broken variant only writes
// it and syncs later), append a new leader's leader-change record, send what it wants sent, and
// run its timers until it has nothing more to say.
void QuorumSim::after_call(Node& n) {
  if (!n.up || !n.raft) return;
  for (int round = 0; round < 8; ++round) {
    Effects e = n.raft->take_effects();
    if (e.persist) {
      n.written = *e.persist;
      if (variant_ != QuorumVariant::vote_before_sync) {
        n.durable = n.written;
      } else {
        at(1 + static_cast<std::int64_t>(rnd(40)), [this, id = n.id, inc = n.incarnation] {
          Node& m = nodes_[id - 1];
          if (m.incarnation == inc && m.up) m.durable = m.written;
        });
      }
    }
    if (e.append_leader_change) {
      const std::int64_t off = n.log.log_end_offset();
      n.log.append(QRec{n.raft->epoch(), -n.raft->epoch()});
      n.raft->leader_change_appended(off);
      schedule_sync(n);
    }
    for (const auto& o : e.send)
      send_request(n, o);
    const std::int64_t next = n.raft->tick(now_);
    if (!n.raft->has_effects()) {
      n.next_tick = next;
      break;
    }
  }
  if (n.snaps->installs != n.installs_seen) {
    n.installs_seen = n.snaps->installs;
    n.applied = n.snaps->installed;
    n.applied_verified = 0;
    n.verified = n.log.log_start_offset();
    n.log_truncations = n.log.truncations();
  }
  apply_committed(n);
  schedule_tick(n);
  wake_parked(n);
}

void QuorumSim::schedule_tick(Node& n) {
  const std::uint64_t gen = ++n.tick_gen;
  at(std::max<std::int64_t>(n.next_tick - now_, 1), [this, id = n.id, gen] {
    Node& m = nodes_[id - 1];
    if (m.up && m.tick_gen == gen) after_call(m);
  });
}

void QuorumSim::schedule_sync(Node& n) {
  if (!n.log.start_sync()) return;
  at(1 + static_cast<std::int64_t>(rnd(4)), [this, id = n.id, inc = n.incarnation] {
    Node& m = nodes_[id - 1];
    if (!m.up || m.incarnation != inc) return;
    m.log.finish_sync();
    m.raft->on_log_durable(now_);
    after_call(m);
    schedule_sync(m);
  });
}

void QuorumSim::apply_committed(Node& n) {
  const std::int64_t hw = std::min(n.raft->high_watermark(), n.log.log_end_offset());
  while (static_cast<std::int64_t>(n.applied.size()) < hw) {
    const auto o = static_cast<std::int64_t>(n.applied.size());
    if (o < n.log.log_start_offset()) break;  // only a snapshot holds it: loaded from the leader
    n.applied.push_back(n.log.at(o));
  }
}

void QuorumSim::maybe_snapshot(Node& n) {
  if (now_ > kEndMs - 100) return;
  at(50 + static_cast<std::int64_t>(rnd(200)),
     [this, id = n.id] { maybe_snapshot(nodes_[id - 1]); });
  if (!n.up || n.applied.size() < 2) return;
  const auto at_offset = static_cast<std::int64_t>(n.applied.size());
  auto latest = n.snaps->latest();
  if (latest && at_offset - latest->end_offset < 20) return;
  if (at_offset > n.log.durable_end_offset() || at_offset < n.log.log_start_offset()) return;
  n.snaps->take(n.applied, n.applied.back().epoch);
  ++snapshots_;
  // The snapshot is durable; the log below it goes (a follower that needs it gets the snapshot).
  n.log.delete_prefix(at_offset);
  n.verified = std::max(n.verified, n.log.log_start_offset());
  trace("node %d snapshots at %" PRId64, n.id, at_offset);
}

void QuorumSim::client_propose() {
  if (now_ > kEndMs - 300) return;
  at(3 + static_cast<std::int64_t>(rnd(8)), [this] { client_propose(); });
  std::vector<Node*> leaders;
  for (auto& n : nodes_)
    if (n.up && n.raft->accepts_proposals()) leaders.push_back(&n);
  if (leaders.empty()) return;
  Node& n = *leaders[rnd(leaders.size())];
  const std::int64_t off = n.log.log_end_offset();
  n.log.append(QRec{n.raft->epoch(), next_value_++});
  n.raft->note_batch(n.raft->epoch(), off);
  schedule_sync(n);
  wake_parked(n);
}

// ---- network ----

bool QuorumSim::link_ok(NodeId a, NodeId b) const {
  return !cut_.contains({a, b});
}

// A message from `from` to `to` over a TCP connection: delayed 1..8 ms (so reordered across
// connections). At the loss rate (more in a lossy spell) the connection is reset instead: the
// message never arrives and the request it carries or answers fails at its sender a little later
// (`on_reset`), as a real client sees a reset; TCP itself never drops a message silently. On a
// cut link it is silence (the sender's timeout notices). A request to a node that is down gets a
// reset back (its host is up, the process is not).
void QuorumSim::deliver(NodeId from, NodeId to, std::function<void(Node&)> fn, bool is_request,
                        std::function<void()> on_reset) {
  if (!link_ok(from, to)) {
    ++lost_;
    return;
  }
  const double loss = lossy_spell_ ? 0.3 : loss_;
  if (static_cast<double>(rnd(10000)) < loss * 10000) {
    ++lost_;
    if (on_reset) at(1 + static_cast<std::int64_t>(rnd(20)), on_reset);
    return;
  }
  at(1 + static_cast<std::int64_t>(rnd(8)),
     [this, from, to, fn = std::move(fn), is_request, on_reset = std::move(on_reset)] {
       Node& d = nodes_[to - 1];
       if (d.up) {
         fn(d);
       } else if (is_request && on_reset && link_ok(to, from)) {
         at(1, on_reset);
       }
     });
}

// The sender's side of a reset or refused connection: its request `id` to `to` failed.
std::function<void()> QuorumSim::request_failed(NodeId from, std::uint64_t inc, std::int64_t id,
                                                NodeId to) {
  return [this, from, inc, id, to] {
    Node& s = nodes_[from - 1];
    if (!s.up || s.incarnation != inc || !s.raft) return;
    s.raft->on_request_failed(id, to, true, now_);
    after_call(s);
  };
}

void QuorumSim::send_request(Node& n, const Outgoing& o) {
  const NodeId from = n.id;
  const std::uint64_t inc = n.incarnation;
  deliver(
      from, o.to,
      [this, from, inc, id = o.id, r = o.request](Node& d) { serve_request(d, from, inc, id, r); },
      true, request_failed(from, inc, o.id, o.to));
}

template <class Resp, class Fn>
void QuorumSim::respond(Node& n, NodeId to, std::uint64_t to_inc, std::int64_t id, Resp resp,
                        Fn apply) {
  // What the answer depends on (a vote) is persisted before it leaves.
  after_call(n);
  deliver(
      n.id, to,
      [this, to_inc, resp = std::move(resp), apply = std::move(apply)](Node& s) {
        if (s.incarnation != to_inc || !s.raft) return;
        apply(s, resp);
        after_call(s);
      },
      false, request_failed(to, to_inc, id, n.id));
}

void QuorumSim::serve_request(Node& d, NodeId from, std::uint64_t from_inc, std::int64_t id,
                              const Request& r) {
  const NodeId me = d.id;
  if (const auto* v = std::get_if<VoteRequest>(&r)) {
    respond(d, from, from_inc, id, d.raft->on_vote(*v, now_),
            [this, id, me](Node& s, const VoteResponse& a) {
              s.raft->on_vote_response(id, me, a, now_);
            });
  } else if (const auto* b = std::get_if<BeginEpochRequest>(&r)) {
    respond(d, from, from_inc, id, d.raft->on_begin_epoch(*b, now_),
            [this, id, me](Node& s, const EpochResponse& a) {
              s.raft->on_epoch_response(id, me, a, now_);
            });
  } else if (const auto* e = std::get_if<EndEpochRequest>(&r)) {
    respond(d, from, from_inc, id, d.raft->on_end_epoch(*e, now_),
            [this, id, me](Node& s, const EpochResponse& a) {
              s.raft->on_epoch_response(id, me, a, now_);
            });
  } else if (const auto* f = std::get_if<FetchRequest>(&r)) {
    answer_fetch(d, from, from_inc, id, *f, false);
  } else if (const auto* fs = std::get_if<FetchSnapshotRequest>(&r)) {
    const auto max = 64 + static_cast<std::int64_t>(rnd(512));
    respond(d, from, from_inc, id, d.raft->on_fetch_snapshot(*fs, max, now_),
            [this, id, me](Node& s, const FetchSnapshotResponse& a) {
              s.raft->on_fetch_snapshot_response(id, me, a, now_);
            });
  }
}

void QuorumSim::answer_fetch(Node& d, NodeId from, std::uint64_t from_inc, std::int64_t id,
                             const FetchRequest& req, bool waited) {
  FetchAnswer a = d.raft->on_fetch(req, now_);
  if (!waited && a.may_wait && a.error == kafka::ErrorCode::none) {
    // The long poll: held until the log or the HW moves, or max_wait passes.
    d.parked.push_back(
        Node::Parked{from, from_inc, id, req, now_ + req.max_wait_ms, a.high_watermark});
    at(req.max_wait_ms, [this, me = d.id, inc = d.incarnation] {
      Node& m = nodes_[me - 1];
      if (m.up && m.incarnation == inc) wake_parked(m, true);
    });
    after_call(d);
    return;
  }
  FetchResponse resp;
  resp.answer = a;
  std::vector<QRec> recs;
  if (a.error == kafka::ErrorCode::none && !a.diverging && !a.snapshot) {
    const std::int64_t end =
        std::min(d.log.log_end_offset(), req.fetch_offset + 1 + static_cast<std::int64_t>(rnd(30)));
    for (std::int64_t o = req.fetch_offset; o < end; ++o)
      recs.push_back(d.log.at(o));
    resp.records_base = req.fetch_offset;
    resp.records_end = end;
  }
  const NodeId me = d.id;
  respond(d, from, from_inc, id, std::make_pair(resp, std::move(recs)),
          [this, id, me](Node& s, const std::pair<FetchResponse, std::vector<QRec>>& p) {
            const auto step = s.raft->on_fetch_response(id, me, p.first, now_);
            trace("node %d <- fetch from %d: error %d, epoch %d, hw %" PRId64 ", records %" PRId64
                  "..%" PRId64 ", step %d",
                  s.id, me, static_cast<int>(p.first.answer.error), p.first.answer.epoch,
                  p.first.answer.high_watermark, p.first.records_base, p.first.records_end,
                  static_cast<int>(step));
            if (step != FollowerStep::append || p.first.records_base != s.log.log_end_offset())
              return;
            std::int64_t off = p.first.records_base;
            for (const QRec& rec : p.second) {
              s.raft->note_batch(rec.epoch, off++);
              s.log.append(rec);
            }
            schedule_sync(s);
          });
}

void QuorumSim::wake_parked(Node& n, bool expired_only) {
  if (n.parked.empty()) return;
  std::vector<Node::Parked> wake, keep;
  for (auto& p : n.parked) {
    const bool moved = n.log.log_end_offset() > p.req.fetch_offset ||
                       n.raft->high_watermark() != p.hw_seen || !n.raft->is_leader();
    if (now_ >= p.deadline || (!expired_only && moved))
      wake.push_back(p);
    else
      keep.push_back(p);
  }
  n.parked = std::move(keep);
  for (auto& p : wake)
    answer_fetch(n, p.from, p.from_inc, p.id, p.req, true);
}

}  // namespace samsa::sim
