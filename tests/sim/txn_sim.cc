// Deterministic simulation of the transaction coordinator (issue 21): the production
// TxnCoordinator on its reactor, with a fake __transaction_state (an in-memory log whose appends
// complete, fail or are lost in a seeded order), fake partition leaders that take the clients'
// transactional records and the coordinator's markers as Kafka's partitions do (producer epochs
// fence older ones, coordinator epochs fence older coordinators), and transactional producers
// that begin, add partitions, write, commit or abort, crash (the next incarnation's
// InitProducerId fences the old one, which lives on as a zombie that keeps writing and trying to
// commit) or go silent past their transaction timeout. Producers speak transaction version 1
// (AddPartitionsToTxn, the partition verifying) or version 2 (KIP-890 part 2: the partition
// adds itself on the first write, EndTxn bumps the epoch and answers with the next one, and
// some answers are lost so the EndTxn is retried at the old epoch). Faults: marker writes that
// fail, state writes that fail or are lost, and coordinator failovers (the partition is resigned
// and elected again in a newer epoch: the state in memory goes, the durable log is replayed).
//
// Invariants, checked once the run is quiesced (faults off, every producer finished or
// crashed, time past every timeout, every pending write and marker delivered):
//  - atomicity: every transaction's records end all committed or all aborted;
//  - an EndTxn(commit) answered NONE: every record of that transaction is committed; an
//    EndTxn(abort) answered NONE: every one is aborted;
//  - nothing hangs: no partition holds an open transaction;
//  - a write refused by a partition never ends in it (zombies are fenced).
//
// Usage: txn_sim [--seeds N] [--first-seed S] [--broken] [--expect-violation] [-v]
//   SAMSA_SIM_SEEDS overrides the default seed count (2000). --broken gives up on markers that
//   failed (TxnCoordinator::Options::testing_give_up_failed_markers); with --expect-violation
//   the run succeeds only if some seed breaks an invariant.
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "base/log.h"
#include "coordinator/txn_coordinator.h"
#include "io/record_batch.h"

namespace samsa::sim {
namespace {

using namespace samsa::coordinator;
using kafka::ErrorCode;

constexpr int kProducers = 3;
constexpr int kDataPartitions = 4;
constexpr int kStatePartitions = 2;
constexpr std::int32_t kTimeoutMs = 400;

struct Rec {
  int producer = 0;     // client index
  int incarnation = 0;  // which start of that client
  int txn = 0;          // its transaction number in that incarnation
  int seq = 0;
  bool operator<(const Rec& o) const {
    return std::tie(producer, incarnation, txn, seq) <
           std::tie(o.producer, o.incarnation, o.txn, o.seq);
  }
};

// A partition leader as Kafka's keeps a producer's state: its epoch, the coordinator epoch of
// its last marker, the records of its open transaction.
struct Part {
  std::map<std::int64_t, std::int16_t> epoch;
  std::map<std::int64_t, std::int32_t> coordinator_epoch;
  std::map<std::int64_t, std::vector<Rec>> open;
  std::map<Rec, bool> done;  // record -> committed
  bool write(std::int64_t pid, std::int16_t e, const Rec& r) {
    auto it = epoch.find(pid);
    if (it != epoch.end() && e < it->second) return false;
    epoch[pid] = e;
    open[pid].push_back(r);
    return true;
  }
  ErrorCode marker(const MarkerWriter::Marker& m) {
    auto it = epoch.find(m.producer_id);
    if (it != epoch.end() && m.producer_epoch < it->second)
      return ErrorCode::invalid_producer_epoch;
    auto ce = coordinator_epoch.find(m.producer_id);
    if (ce != coordinator_epoch.end() && m.coordinator_epoch < ce->second)
      return ErrorCode::transaction_coordinator_fenced;
    epoch[m.producer_id] = m.producer_epoch;
    coordinator_epoch[m.producer_id] = m.coordinator_epoch;
    for (const Rec& r : open[m.producer_id])
      done[r] = m.commit;
    open.erase(m.producer_id);
    return ErrorCode::none;
  }
};

struct World;

class FakeStore final : public OffsetsStore {
 public:
  explicit FakeStore(World& w) : w_(w) {}
  void append(std::int32_t partition, std::vector<std::byte> batch, AppendDone done) override;
  void load(std::int32_t partition, BatchVisitor visit, LoadDone done) override;

 private:
  World& w_;
};

class FakeMarkers final : public MarkerWriter {
 public:
  explicit FakeMarkers(World& w) : w_(w) {}
  void write(const Marker& m, std::vector<Target> targets, Done done) override;

 private:
  World& w_;
};

struct Client {
  int index = 0;
  int incarnation = 0;
  std::string id;
  std::int64_t pid = -1;
  std::int16_t epoch = -1;
  enum class St { start, initing, ready, adding, in_txn, ending, end_again, dead } st = St::start;
  bool commit = false;  // the decision of the EndTxn being sent (retried as it was)
  int txn = 0;
  int seq = 0;
  std::set<int> parts;
  bool zombie = false;
  bool silent = false;  // stopped inside a transaction: the coordinator must time it out
  bool tv2 = false;     // transaction version 2 (decided per incarnation)
};

struct World {
  std::mt19937_64 rng;
  bool verbose = false;
  bool faults = true;
  std::int64_t now = 1'000'000;
  std::vector<std::vector<std::vector<std::byte>>> log{kStatePartitions};  // durable batches
  // Marker rounds in flight, with their producer id. Transaction version 1 (what samsa
  // serves) relies on a resigned coordinator's markers landing before its successor's first
  // transaction for the producer: a round delivered later with the same producer epoch would
  // end the new transaction (version 2's epoch bump per transaction removes the assumption).
  // So a failover settles the rounds of its partition's producers first, as it does writes.
  std::deque<std::pair<std::int64_t, std::move_only_function<void()>>> pending;
  std::map<std::int64_t, std::int32_t> pid_partition;  // producer id -> state partition
  // State writes in flight: (partition, complete(may land)). A failover settles its
  // partition's first (each lands or not), as a leader change does: the new leader's replay
  // reads a log no older leader appends to afterwards.
  std::deque<std::pair<std::int32_t, std::move_only_function<void(bool)>>> writes;
  std::vector<Part> parts{kDataPartitions};
  std::vector<Client> clients;                               // live and zombies
  std::map<std::pair<int, int>, std::map<int, bool>> acked;  // (producer, inc) -> txn -> commit
  std::set<Rec> refused;
  std::vector<std::int32_t> coord_epoch = std::vector<std::int32_t>(kStatePartitions, 0);
  std::int64_t next_pid = 0;
  int incarnations[kProducers] = {};
  std::string violation;

  bool chance(int pct) { return static_cast<int>(rng() % 100) < pct; }
  void trace(const char* f, auto... args) {
    if (!verbose) return;
    std::printf("  t=%" PRId64 " ", now);
    std::printf(f, args...);
    std::printf("\n");
  }
  void fail(const std::string& why) {
    if (violation.empty()) violation = why;
  }
};

void FakeStore::append(std::int32_t partition, std::vector<std::byte> batch, AppendDone done) {
  World& w = w_;
  w.writes.emplace_back(partition, [&w, partition, batch = std::move(batch),
                                    done = std::move(done)](bool may_land) mutable {
    if (!may_land || (w.faults && w.chance(8))) {
      // Refused, or its answer lost: the coordinator must not act on it (it may have landed).
      if (may_land && w.chance(50)) w.log[static_cast<std::size_t>(partition)].push_back(batch);
      done(io::Error{io::Errc::io_error, "simulated write failure"});
      return;
    }
    w.log[static_cast<std::size_t>(partition)].push_back(std::move(batch));
    done(std::nullopt);
  });
}

void FakeStore::load(std::int32_t partition, BatchVisitor visit, LoadDone done) {
  for (const auto& b : w_.log[static_cast<std::size_t>(partition)])
    visit(b);
  done(std::nullopt);
}

void FakeMarkers::write(const Marker& m, std::vector<Target> targets, Done done) {
  World& w = w_;
  w.pending.emplace_back(
      m.producer_id, [&w, m, targets = std::move(targets), done = std::move(done)]() mutable {
        std::vector<ErrorCode> errors;
        for (const Target& t : targets) {
          if (w.faults && w.chance(15)) {
            errors.push_back(ErrorCode::not_leader_or_follower);
            w.trace("marker pid %" PRId64 " epoch %d -> %d: not delivered", m.producer_id,
                    m.producer_epoch, t.partition);
            continue;
          }
          if (t.topic == "data") {
            errors.push_back(w.parts[static_cast<std::size_t>(t.partition)].marker(m));
            w.trace("marker %s pid %" PRId64 " epoch %d -> %d: %d", m.commit ? "commit" : "abort",
                    m.producer_id, m.producer_epoch, t.partition, static_cast<int>(errors.back()));
          } else {
            errors.push_back(ErrorCode::unknown_topic_or_partition);
          }
        }
        done(std::move(errors));
      });
}

std::string tid(int i) {
  return "tx-" + std::to_string(i);
}

struct Sim {
  World& w;
  io::Reactor& r;
  TxnCoordinator& c;
  bool verify = true;

  void turn() { r.run_once(0); }

  void start(Client& cl) {
    cl.st = Client::St::initing;
    TxnInitRequest req{cl.id, kTimeoutMs, -1, -1};
    const int inc = cl.incarnation;
    const int idx = cl.index;
    c.init_producer_id(std::move(req), [this, idx, inc](TxnInitResult res) {
      Client* cl = find(idx, inc);
      if (!cl) return;
      if (res.error != ErrorCode::none) {
        cl->st = Client::St::start;  // retriable: CONCURRENT_TRANSACTIONS, NOT_COORDINATOR...
        return;
      }
      cl->pid = res.producer_id;
      cl->epoch = res.producer_epoch;
      w.pid_partition[cl->pid] = c.partition_of(cl->id);
      cl->st = Client::St::ready;
      w.trace("client %d/%d: pid %" PRId64 " epoch %d", idx, inc, cl->pid, cl->epoch);
    });
  }

  Client* find(int idx, int inc) {
    for (auto& cl : w.clients)
      if (cl.index == idx && cl.incarnation == inc) return &cl;
    return nullptr;
  }

  void add(Client& cl) {
    std::set<int> more;
    const int n = 1 + static_cast<int>(w.rng() % 3);
    for (int i = 0; i < n; ++i)
      more.insert(static_cast<int>(w.rng() % kDataPartitions));
    TxnAddRequest req;
    req.transactional_id = cl.id;
    req.producer_id = cl.pid;
    req.producer_epoch = cl.epoch;
    for (int p : more)
      req.partitions["data"].insert(p);
    cl.st = Client::St::adding;
    const int idx = cl.index, inc = cl.incarnation;
    c.add_partitions(std::move(req), [this, idx, inc, more](TxnAddResult res) {
      Client* cl = find(idx, inc);
      if (!cl || cl->st != Client::St::adding) return;
      bool ok = true;
      for (auto& [t, ps] : res)
        for (auto& [p, e] : ps)
          ok &= e == ErrorCode::none;
      if (w.verbose) {
        std::string st;
        c.describe({tid(idx)}, [&](std::vector<DescribedTxn> d) {
          st = d.front().state + " epoch " + std::to_string(d.front().producer_epoch) +
               " partitions " + std::to_string(d.front().partitions.size());
        });
        w.trace("client %d/%d: add %s (coordinator: %s)", idx, inc, ok ? "ok" : "failed",
                st.c_str());
      }
      if (ok) {
        cl->parts.insert(more.begin(), more.end());
        cl->st = Client::St::in_txn;
      } else {
        cl->st = cl->parts.empty() ? Client::St::ready : Client::St::in_txn;
      }
    });
  }

  void produce(Client& cl) {
    if (cl.parts.empty()) return;
    auto it = cl.parts.begin();
    std::advance(it, static_cast<long>(w.rng() % cl.parts.size()));
    const Rec rec{cl.index, cl.incarnation, cl.txn, cl.seq++};
    Part& part = w.parts[static_cast<std::size_t>(*it)];
    // KIP-890's defence, as the partition leader applies it: a producer's first write of a
    // transaction here is taken only if the coordinator says the partition is in it.
    bool ok = true;
    auto open = part.open.find(cl.pid);
    if (verify && (open == part.open.end() || open->second.empty())) {
      TxnAddRequest v;
      v.transactional_id = cl.id;
      v.producer_id = cl.pid;
      v.producer_epoch = cl.epoch;
      v.verify_only = true;
      v.partitions["data"].insert(*it);
      bool answered = false;
      c.add_partitions(std::move(v), [&](TxnAddResult res) {
        answered = true;
        ok = res["data"][*it] == ErrorCode::none;
      });
      ok &= answered;
    }
    ok = ok && part.write(cl.pid, cl.epoch, rec);
    if (!ok) w.refused.insert(rec);
    std::string st;
    if (w.verbose)
      c.describe({cl.id}, [&](std::vector<DescribedTxn> d) {
        st = d.front().state + " epoch " + std::to_string(d.front().producer_epoch) + " {";
        for (auto& [t, ps] : d.front().partitions)
          for (int x : ps)
            st += " " + std::to_string(x);
        st += " }";
      });
    w.trace("client %d/%d txn %d: write to %d epoch %d: %s (coordinator: %s)", cl.index,
            cl.incarnation, cl.txn, *it, cl.epoch, ok ? "ok" : "refused", st.c_str());
  }

  // Version 2: a write to any partition; the partition's leader asks the coordinator to add
  // the partition first when the producer has no transaction open there at its epoch.
  void produce_v2(Client& cl) {
    const int p = static_cast<int>(w.rng() % kDataPartitions);
    const Rec rec{cl.index, cl.incarnation, cl.txn, cl.seq++};
    Part& part = w.parts[static_cast<std::size_t>(p)];
    auto open = part.open.find(cl.pid);
    auto pe = part.epoch.find(cl.pid);
    const bool opened = open != part.open.end() && !open->second.empty() &&
                        pe != part.epoch.end() && pe->second == cl.epoch;
    if (opened) {
      const bool ok = part.write(cl.pid, cl.epoch, rec);
      if (!ok) w.refused.insert(rec);
      w.trace("client %d/%d txn %d: write to %d epoch %d: %s", cl.index, cl.incarnation, cl.txn, p,
              cl.epoch, ok ? "ok" : "refused");
      return;
    }
    TxnAddRequest a;
    a.transactional_id = cl.id;
    a.producer_id = cl.pid;
    a.producer_epoch = cl.epoch;
    a.tv2 = true;
    a.partitions["data"].insert(p);
    cl.st = Client::St::adding;
    const int idx = cl.index, inc = cl.incarnation;
    c.add_partitions(
        std::move(a), [this, idx, inc, p, rec, pid = cl.pid, epoch = cl.epoch](TxnAddResult res) {
          // The leader appends once the coordinator added the partition; a marker that came first
          // (a timeout's abort at a bumped epoch) refuses it.
          const ErrorCode e = res["data"][p];
          const bool ok =
              e == ErrorCode::none && w.parts[static_cast<std::size_t>(p)].write(pid, epoch, rec);
          if (!ok) w.refused.insert(rec);
          w.trace("client %d/%d: add+write to %d epoch %d: %d %s", idx, inc, p, epoch,
                  static_cast<int>(e), ok ? "ok" : "refused");
          Client* cl = find(idx, inc);
          if (!cl || cl->st != Client::St::adding) return;
          if (ok) cl->parts.insert(p);
          if (e == ErrorCode::producer_fenced || e == ErrorCode::invalid_producer_id_mapping) {
            // The producer learns it was fenced (a timeout's bump): it aborts, at its old epoch
            // (the Java client sends that EndTxn even when no partition was added).
            cl->st = Client::St::in_txn;
            end(*cl, false);
            return;
          }
          cl->st = cl->parts.empty() ? Client::St::ready : Client::St::in_txn;
        });
  }

  void end(Client& cl, bool commit) {
    cl.st = Client::St::ending;
    cl.commit = commit;
    const int idx = cl.index, inc = cl.incarnation, txn = cl.txn;
    c.end_txn(TxnEndRequest{cl.id, cl.pid, cl.epoch, commit, cl.tv2}, [this, idx, inc, txn,
                                                                       commit](TxnEndResult res) {
      ErrorCode e = res.error;
      Client* cl = find(idx, inc);
      // Version 2: an answer lost on the way; the client retries at its old epoch.
      if (e == ErrorCode::none && cl && cl->tv2 && w.faults && w.chance(10)) {
        w.trace("client %d/%d txn %d: end answer lost", idx, inc, txn);
        if (cl->st == Client::St::ending) cl->st = Client::St::end_again;
        return;
      }
      if (e == ErrorCode::none) w.acked[{idx, inc}][txn] = commit;
      w.trace("client %d/%d txn %d: end(%s) -> %d (pid %" PRId64 " epoch %d)", idx, inc, txn,
              commit ? "commit" : "abort", static_cast<int>(e), res.producer_id,
              res.producer_epoch);
      if (!cl || cl->st != Client::St::ending) return;
      if (e == ErrorCode::none && cl->tv2) {
        if (res.producer_id < 0 || res.producer_epoch < 0 ||
            (res.producer_id == cl->pid && res.producer_epoch != cl->epoch + 1)) {
          w.fail("EndTxn v5 answered producer " + std::to_string(res.producer_id) + " epoch " +
                 std::to_string(res.producer_epoch) + " after epoch " + std::to_string(cl->epoch));
        }
        cl->pid = res.producer_id;
        cl->epoch = res.producer_epoch;
        w.pid_partition[cl->pid] = c.partition_of(cl->id);
      }
      if (e == ErrorCode::none || e == ErrorCode::producer_fenced ||
          e == ErrorCode::invalid_producer_id_mapping || e == ErrorCode::invalid_txn_state) {
        cl->st = e == ErrorCode::none ? Client::St::ready : Client::St::dead;
        ++cl->txn;
        cl->seq = 0;
        cl->parts.clear();
      } else {
        // Retriable: the clients send the same EndTxn again (never write on).
        cl->st = Client::St::end_again;
      }
    });
  }

  // One random action of a client.
  void act(Client& cl) {
    if (cl.silent || cl.st == Client::St::dead) return;
    switch (cl.st) {
      case Client::St::start:
        if (!cl.zombie) start(cl);
        break;
      case Client::St::ready:
        if (cl.tv2)
          produce_v2(cl);
        else
          add(cl);
        break;
      case Client::St::end_again:
        end(cl, cl.commit);
        break;
      case Client::St::in_txn:
        if (cl.tv2) {
          if (w.chance(60))
            produce_v2(cl);
          else
            end(cl, w.chance(70));
        } else if (w.chance(60)) {
          produce(cl);
        } else if (w.chance(20)) {
          add(cl);
        } else {
          end(cl, w.chance(70));
        }
        break;
      default:
        break;
    }
  }

  void crash(int idx) {
    w.trace("client %d crashes", idx);
    for (auto& cl : w.clients)
      if (cl.index == idx && !cl.zombie) {
        cl.zombie = true;  // keeps acting with its old epoch
        if (w.chance(30)) cl.silent = true;
      }
    Client n;
    n.index = idx;
    n.incarnation = ++w.incarnations[idx];
    n.id = tid(idx);
    n.tv2 = w.chance(50);
    w.clients.push_back(n);
  }

  void failover() {
    const auto p = static_cast<std::int32_t>(w.rng() % kStatePartitions);
    const std::int32_t e = w.coord_epoch[static_cast<std::size_t>(p)];
    // Marker rounds first: their answers may start the completion's write, which must be
    // settled too (until nothing of the old term is left in flight).
    for (bool more = true; more;) {
      more = false;
      for (auto it = w.pending.begin(); it != w.pending.end();) {
        if (w.pid_partition[it->first] != p) {
          ++it;
          continue;
        }
        auto f = std::move(it->second);
        it = w.pending.erase(it);
        f();
        more = true;
      }
      for (auto it = w.writes.begin(); it != w.writes.end();) {
        if (it->first != p) {
          ++it;
          continue;
        }
        auto f = std::move(it->second);
        it = w.writes.erase(it);
        f(w.chance(50));  // landed before the resignation, or never
        more = true;
      }
      turn();  // retries the coordinator armed meanwhile
    }
    w.trace("failover of state partition %d", p);
    if (w.verbose) {
      for (const auto& b : w.log[static_cast<std::size_t>(p)]) {
        std::vector<std::byte> storage;
        auto recs = io::batch::records_of(b, storage);
        io::batch::RecordReader rd(*recs, 1);
        auto rec = rd.next();
        auto id = decode_txn_key(*(*rec)->key);
        auto v = decode_txn_value(*(*rec)->value);
        std::printf("    log: %s %s epoch %d parts %zu\n", id->c_str(),
                    std::string(txn_state_name(v->state)).c_str(), v->producer_epoch,
                    v->partitions.empty() ? 0 : v->partitions.begin()->second.size());
      }
    }
    c.deactivate(p, e + 1);
    w.coord_epoch[static_cast<std::size_t>(p)] = e + 2;
    c.activate(p, e + 2);
  }

  void deliver_one() {
    const std::size_t n = w.pending.size() + w.writes.size();
    if (n == 0) return;
    std::size_t i = w.rng() % n;
    if (i < w.pending.size()) {
      auto f = std::move(w.pending[i].second);
      w.pending.erase(w.pending.begin() + static_cast<long>(i));
      f();
      return;
    }
    i -= w.pending.size();
    auto f = std::move(w.writes[i].second);
    w.writes.erase(w.writes.begin() + static_cast<long>(i));
    f(true);
  }
  bool in_flight() const { return !w.pending.empty() || !w.writes.empty(); }

  void step() {
    const int pick = static_cast<int>(w.rng() % 100);
    if (pick < 45) {
      act(w.clients[w.rng() % w.clients.size()]);
    } else if (pick < 85) {
      deliver_one();
    } else if (pick < 95) {
      w.now += static_cast<std::int64_t>(w.rng() % 100);
      c.abort_timed_out(w.now);
    } else if (w.faults && pick < 98) {
      crash(static_cast<int>(w.rng() % kProducers));
    } else if (w.faults) {
      failover();
    }
    turn();
  }

  // Faults off; live clients end what they started; time passes every timeout.
  void quiesce() {
    w.faults = false;
    for (int round = 0; round < 20000; ++round) {
      bool busy = in_flight();
      for (auto& cl : w.clients) {
        if (cl.zombie || cl.silent) continue;
        if (cl.st == Client::St::in_txn) end(cl, true);
        if (cl.st == Client::St::end_again) end(cl, cl.commit);
        if (cl.st == Client::St::start) start(cl);
        busy |= cl.st == Client::St::initing || cl.st == Client::St::adding ||
                cl.st == Client::St::ending || cl.st == Client::St::start ||
                cl.st == Client::St::end_again;
      }
      while (in_flight())
        deliver_one();
      w.now += 50;
      c.abort_timed_out(w.now);
      turn();
      turn();
      bool open = false;
      for (const auto& p : w.parts)
        for (const auto& [pid, recs] : p.open)
          open |= !recs.empty();
      if (!busy && !open && !in_flight() && w.now > 1'000'000 + 100 * kTimeoutMs) break;
    }
  }

  // Past transactional.id.expiration.ms every id is idle: each goes (a tombstone), stays gone
  // through a failover's replay, and a new producer with the id starts at a new producer id.
  void expire() {
    std::map<std::string, std::int64_t> before;
    for (int i = 0; i < kProducers; ++i)
      c.describe({tid(i)}, [&](std::vector<DescribedTxn> d) {
        if (d.front().error == ErrorCode::none) before[tid(i)] = d.front().producer_id;
      });
    w.now += 8LL * 24 * 3600 * 1000;
    c.expire_ids(w.now);
    while (in_flight())
      deliver_one();
    turn();
    auto gone = [&](const char* when) {
      for (const auto& [id, pid] : before) {
        ErrorCode e = ErrorCode::none;
        c.describe({id}, [&](std::vector<DescribedTxn> d) { e = d.front().error; });
        if (e != ErrorCode::transactional_id_not_found) {
          w.fail(id + " outlived transactional.id.expiration.ms " + when + " (" +
                 std::to_string(static_cast<int>(e)) + ")");
          return false;
        }
      }
      return true;
    };
    if (!gone("in memory")) return;
    for (std::int32_t p = 0; p < kStatePartitions; ++p) {
      c.deactivate(p, w.coord_epoch[static_cast<std::size_t>(p)] + 1);
      w.coord_epoch[static_cast<std::size_t>(p)] += 2;
      c.activate(p, w.coord_epoch[static_cast<std::size_t>(p)]);
    }
    turn();
    if (!gone("after a failover's replay")) return;
    for (const auto& [id, pid] : before) {
      std::int64_t fresh = -2;
      c.init_producer_id(TxnInitRequest{id, kTimeoutMs, -1, -1},
                         [&](TxnInitResult r) { fresh = r.producer_id; });
      while (in_flight())
        deliver_one();
      turn();
      if (fresh == pid || fresh < 0)
        w.fail(id + " after expiring: producer id " + std::to_string(fresh) + " (was " +
               std::to_string(pid) + ")");
    }
  }

  void check() {
    std::map<std::tuple<int, int, int>, std::set<bool>> outcome;
    for (std::size_t p = 0; p < w.parts.size(); ++p) {
      for (const auto& [pid, recs] : w.parts[p].open)
        if (!recs.empty()) {
          std::string who;
          for (const Rec& r : recs)
            who += " " + std::to_string(r.producer) + "/" + std::to_string(r.incarnation) + "/" +
                   std::to_string(r.txn);
          c.describe({tid(recs.front().producer)}, [&](std::vector<DescribedTxn> d) {
            who += " coordinator: " + d.front().state + " pid " +
                   std::to_string(d.front().producer_id) + " epoch " +
                   std::to_string(d.front().producer_epoch) + " error " +
                   std::to_string(static_cast<int>(d.front().error));
          });
          w.fail("partition " + std::to_string(p) + " holds an open transaction of producer " +
                 std::to_string(pid) + " (" + std::to_string(recs.size()) + " records): it hangs;" +
                 who + " part epoch " + std::to_string(w.parts[p].epoch[pid]));
        }
      for (const auto& [r, committed] : w.parts[p].done) {
        outcome[{r.producer, r.incarnation, r.txn}].insert(committed);
        if (w.refused.contains(r)) w.fail("a refused record is stored");
      }
    }
    for (const auto& [k, o] : outcome) {
      const auto& [prod, inc, txn] = k;
      if (o.size() > 1)
        w.fail("transaction " + std::to_string(prod) + "/" + std::to_string(inc) + "/" +
               std::to_string(txn) + " is committed on some partitions and aborted on others");
      auto a = w.acked.find({prod, inc});
      if (a == w.acked.end()) continue;
      auto t = a->second.find(txn);
      if (t != a->second.end() && (o.size() != 1 || *o.begin() != t->second))
        w.fail("transaction " + std::to_string(prod) + "/" + std::to_string(inc) + "/" +
               std::to_string(txn) + " was acknowledged as " +
               (t->second ? "committed" : "aborted") + " but did not end so");
    }
  }
};

std::string run(std::uint64_t seed, bool broken, bool verify, bool verbose) {
  auto rr = io::Reactor::create({.name = "txn-sim"});
  if (!rr) return "no reactor";
  io::Reactor& r = **rr;
  World w;
  w.rng.seed(seed);
  w.verbose = verbose;
  ProducerIdManager ids(
      [&w](std::int32_t block, std::move_only_function<void(std::int64_t)> done) {
        const std::int64_t first = w.next_pid;
        w.next_pid += block;
        done(first);
      },
      4);
  TxnCoordinator::Options o;
  o.abort_check_interval_ms = 1'000'000'000;  // the simulation calls abort_timed_out itself
  o.marker_retry_ms = 0;
  o.clock = [&w] { return w.now; };
  o.testing_give_up_failed_markers = broken;
  TxnCoordinator c(r, o, std::make_unique<FakeStore>(w), ids, std::make_unique<FakeMarkers>(w));
  c.start(kStatePartitions, TxnCoordinator::Leadership::elected);
  for (std::int32_t p = 0; p < kStatePartitions; ++p)
    c.activate(p, 0);
  for (int i = 0; i < kProducers; ++i) {
    Client cl;
    cl.index = i;
    cl.id = tid(i);
    cl.tv2 = w.chance(50);
    w.clients.push_back(cl);
  }
  Sim sim{w, r, c, verify};
  sim.turn();
  const int steps = 400 + static_cast<int>(w.rng() % 400);
  for (int i = 0; i < steps; ++i)
    sim.step();
  sim.quiesce();
  sim.check();
  if (w.violation.empty()) sim.expire();
  return w.violation;
}

}  // namespace
}  // namespace samsa::sim

int main(int argc, char** argv) {
  std::uint64_t seeds = 2000, first = 1;
  bool broken = false, expect = false, verbose = false, verify = true;
  if (const char* e = std::getenv("SAMSA_SIM_SEEDS")) seeds = std::strtoull(e, nullptr, 10);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seeds" && i + 1 < argc)
      seeds = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--first-seed" && i + 1 < argc)
      first = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--broken")
      broken = true;
    else if (a == "--no-verify")
      verify = false;
    else if (a == "--expect-violation")
      expect = true;
    else if (a == "-v")
      verbose = true;
  }
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  samsa::log::set_level(verbose ? samsa::log::Level::debug : samsa::log::Level::error);
  std::uint64_t bad = 0;
  for (std::uint64_t s = first; s < first + seeds; ++s) {
    const std::string v = samsa::sim::run(s, broken, verify, verbose);
    if (v.empty()) continue;
    ++bad;
    if (bad <= 3) std::printf("seed %" PRIu64 ": %s\n", s, v.c_str());
    if (expect) break;
  }
  std::printf("txn_sim: %" PRIu64 " seeds from %" PRIu64 "%s: %" PRIu64 " violated an invariant\n",
              seeds, first, broken ? " (broken)" : "", bad);
  if (expect) return bad ? 0 : 1;
  return bad ? 1 : 0;
}
