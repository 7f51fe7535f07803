#include "replication/replica_state.h"

#include "replication/replica_selector.h"

#include <gtest/gtest.h>

#include <vector>

namespace samsa::replication {
namespace {

using kafka::ErrorCode;

// A log in memory: records are epochs; `durable` is how many of them are synced.
class MemLog final : public ReplicaLog {
 public:
  MemLog() : epochs_(*io::LeaderEpochCache::load("/nonexistent/samsa-unit/leader-epoch")) {
    epochs_.set_writer([](const std::filesystem::path&, std::vector<std::vector<std::string>>) {});
  }
  std::int64_t log_start_offset() const override { return 0; }
  std::int64_t log_end_offset() const override { return static_cast<std::int64_t>(recs.size()); }
  std::int64_t durable_end_offset() const override { return durable; }
  // -1: everything appended is readable; else appends past it are still queued.
  std::int64_t readable_end_offset() const override {
    return readable < 0 ? log_end_offset() : readable;
  }
  std::optional<std::int32_t> latest_epoch() const override { return epochs_.latest_epoch(); }
  io::LeaderEpochCache::EpochEnd end_offset_for(std::int32_t e) const override {
    return epochs_.end_offset_for(e, log_end_offset());
  }
  io::Result<void> assign_epoch(std::int32_t e, std::int64_t start) override {
    return epochs_.assign(e, start);
  }
  io::Result<void> truncate_to(std::int64_t offset) override {
    if (durable < log_end_offset()) return std::unexpected(io::Error{io::Errc::busy, "busy"});
    if (offset < log_end_offset()) recs.resize(static_cast<std::size_t>(offset));
    durable = std::min(durable, offset);
    (void)epochs_.truncate_from_end(offset);
    return {};
  }
  // Appends n records of epoch e (as leader or follower would), synced or not.
  void add(std::int32_t e, int n, bool sync = true) {
    auto latest = epochs_.latest_epoch();
    if (!latest || *latest < e) (void)epochs_.assign(e, log_end_offset());
    for (int i = 0; i < n; ++i)
      recs.push_back(e);
    if (sync) durable = log_end_offset();
  }
  std::vector<std::int32_t> recs;
  std::int64_t durable = 0;
  std::int64_t readable = -1;

 private:
  io::LeaderEpochCache epochs_;
};

PartitionState part(std::int32_t leader, std::int32_t epoch, std::vector<std::int32_t> isr,
                    std::int32_t pe = 0) {
  return PartitionState{0, {1, 2, 3}, std::move(isr), leader, epoch, pe};
}

ReplicaOptions opts(std::int32_t id, std::int32_t min_isr = 2) {
  ReplicaOptions o;
  o.broker_id = id;
  o.replica_lag_time_max_ms = 1000;
  o.min_insync_replicas = min_isr;
  o.alter_partition_retry_ms = 100;
  return o;
}

ReplicaFetch fetch(std::int32_t id, std::int32_t epoch, std::int64_t off, std::int32_t last) {
  return ReplicaFetch{id, 10 + id, epoch, off, last};
}

std::map<std::int32_t, BrokerState> live_brokers() {
  std::map<std::int32_t, BrokerState> m;
  for (int i = 1; i <= 3; ++i)
    m[i] = BrokerState{i, {}, 10 + i, {}, std::nullopt, false, false};
  return m;
}

TEST(ReplicaState, HighWatermarkIsTheLowestDurableOffsetAcrossTheIsr) {
  MemLog log;
  ReplicaState rs(opts(1), log);
  rs.apply_metadata(part(1, 0, {1, 2, 3}), 0);
  ASSERT_EQ(rs.role(), ReplicaRole::leader);
  log.add(0, 10, false);
  rs.on_log_advanced();
  EXPECT_EQ(rs.high_watermark(), 0);  // nothing durable on the leader yet
  log.durable = 10;
  rs.on_log_advanced();
  EXPECT_EQ(rs.high_watermark(), 0);  // followers not heard from in this epoch
  EXPECT_EQ(rs.on_replica_fetch(fetch(2, 0, 6, 0), 1).error, ErrorCode::none);
  EXPECT_EQ(rs.high_watermark(), 0);
  EXPECT_EQ(rs.on_replica_fetch(fetch(3, 0, 4, 0), 1).error, ErrorCode::none);
  EXPECT_EQ(rs.high_watermark(), 4);
  EXPECT_EQ(rs.acks_all_outcome(3), ErrorCode::none);
  EXPECT_EQ(rs.acks_all_outcome(4), std::nullopt);
  rs.on_replica_fetch(fetch(3, 0, 10, 0), 2);
  EXPECT_EQ(rs.high_watermark(), 6);
  EXPECT_EQ(rs.visible_high_watermark(), 6);
}

TEST(ReplicaState, HwOnTheLeaderAloneIsTheTestOnlyBrokenVariant) {
  MemLog log;
  auto o = opts(1);
  o.testing_hw_leader_only = true;
  ReplicaState rs(o, log);
  rs.apply_metadata(part(1, 0, {1, 2, 3}), 0);
  log.add(0, 5);
  rs.on_log_advanced();
  EXPECT_EQ(rs.high_watermark(), 5);
}

TEST(ReplicaState, FencedAndUnknownEpochsAndDivergedLogsDoNotCount) {
  MemLog log;
  log.add(0, 5);
  ReplicaState rs(opts(1), log);
  rs.apply_metadata(part(1, 2, {1, 2, 3}), 0);
  log.add(2, 5);
  EXPECT_EQ(rs.on_replica_fetch(fetch(2, 1, 5, 0), 0).error, ErrorCode::fenced_leader_epoch);
  EXPECT_EQ(rs.on_replica_fetch(fetch(2, 3, 5, 0), 0).error, ErrorCode::unknown_leader_epoch);
  // Follower 2 holds 7 records of epoch 0, the leader's epoch 0 ended at 5: diverged.
  auto a = rs.on_replica_fetch(fetch(2, 2, 7, 0), 0);
  ASSERT_TRUE(a.diverging.has_value());
  EXPECT_EQ(a.diverging->epoch, 0);
  EXPECT_EQ(a.diverging->end_offset, 5);
  EXPECT_EQ(rs.followers().at(2).fetch_offset, -1);  // not counted
  // Follower 3 wrote epoch 1 (a leader that never reached this one): ends where 0 did.
  a = rs.on_replica_fetch(fetch(3, 2, 8, 1), 0);
  ASSERT_TRUE(a.diverging.has_value());
  EXPECT_EQ(a.diverging->epoch, 0);
  EXPECT_EQ(a.diverging->end_offset, 5);
  EXPECT_FALSE(rs.on_replica_fetch(fetch(3, 2, 5, 0), 0).diverging.has_value());
}

// Broker 2 (broker epoch 12) as a follower of `leader` in `leader_epoch`, ISR {1, 2, 3}: its
// first fetch (nullopt if it did not become a follower or has nothing to send).
std::optional<FollowerFetchRequest> follow(ReplicaState& rs, std::int32_t leader,
                                           std::int32_t leader_epoch) {
  rs.set_broker_epoch(12);
  rs.apply_metadata(part(leader, leader_epoch, {1, 2, 3}), 0);
  if (rs.role() != ReplicaRole::follower) return std::nullopt;
  return rs.next_fetch(0);
}

TEST(ReplicaState, FollowerTruncatesToAPrefixOfTheLeaderAndFetchesOnlyDurableOffsets) {
  MemLog log;
  log.add(0, 5);
  log.add(1, 3);  // epoch 1's tail the new leader never had
  ReplicaState rs(opts(2), log);
  auto f = follow(rs, 1, 2);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->leader_id, 1);
  EXPECT_EQ(f->fetch.fetch_offset, 8);
  EXPECT_EQ(f->fetch.last_fetched_epoch, 1);
  EXPECT_EQ(f->fetch.broker_epoch, 12);
  EXPECT_FALSE(rs.next_fetch(1).has_value());  // one in flight
  FollowerFetchResponse r{f->request_id, {}, -1, -1};
  r.answer.diverging = io::LeaderEpochCache::EpochEnd{0, 6};  // leader: epoch 0 ran to 6
  // We do not know where our own epoch 0 ends against 6: ours ended at 5, so cut there.
  EXPECT_EQ(rs.on_fetch_response(r, 2), FollowerStep::truncated);
  EXPECT_EQ(log.log_end_offset(), 5);
  EXPECT_FALSE(rs.truncation_done());
  f = rs.next_fetch(3);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->fetch.last_fetched_epoch, 0);
  FollowerFetchResponse ok{f->request_id, {}, 5, 7};
  ok.answer.high_watermark = 6;
  EXPECT_EQ(rs.on_fetch_response(ok, 4), FollowerStep::append);
  EXPECT_TRUE(rs.truncation_done());
  log.add(0, 1, false);
  rs.note_replicated_batch(2, 6);
  log.add(2, 1, false);
  EXPECT_FALSE(rs.next_fetch(5).has_value());  // waits for its sync
  log.durable = log.log_end_offset();
  f = rs.next_fetch(6);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->fetch.fetch_offset, 7);
  EXPECT_EQ(f->fetch.last_fetched_epoch, 2);
  EXPECT_EQ(rs.high_watermark(), 5);  // min(leader's 6, durable 5 at the time)
  // A stale answer (an earlier request) is ignored.
  EXPECT_EQ(rs.on_fetch_response(ok, 7), FollowerStep::ignore);
}

// A replica that led an epoch and lost it before appending anything keeps that epoch at the
// end of its cache (two fences in a row did this on a cluster); the new leader, which never had
// it, answers "diverging" at our very end. The truncation cuts nothing but must drop the epoch,
// or every fetch names it again and the follower never rejoins the ISR.
TEST(ReplicaState, AnEpochLedWithoutRecordsIsDroppedWhenTheNewLeaderDiverges) {
  MemLog log;
  log.add(1, 5);
  ASSERT_TRUE(log.assign_epoch(2, 5));  // led epoch 2 from offset 5, appended nothing
  ReplicaState rs(opts(2), log);
  auto f = follow(rs, 1, 3);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->fetch.last_fetched_epoch, 2);
  FollowerFetchResponse r{f->request_id, {}, -1, -1};
  r.answer.diverging = io::LeaderEpochCache::EpochEnd{1, 5};
  EXPECT_EQ(rs.on_fetch_response(r, 1), FollowerStep::truncated);
  EXPECT_EQ(log.log_end_offset(), 5);
  f = rs.next_fetch(2);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->fetch.fetch_offset, 5);
  EXPECT_EQ(f->fetch.last_fetched_epoch, 1) << "the empty epoch 2 is gone";
}

TEST(ReplicaState, AnAbandonedFetchIsReplacedAtOnceAndItsLateAnswerIgnored) {
  MemLog log;
  log.add(0, 5);
  ReplicaState rs(opts(2), log);
  rs.apply_metadata(part(1, 2, {1, 2, 3}), 0);
  auto f = rs.next_fetch(0);
  ASSERT_TRUE(f.has_value());
  EXPECT_FALSE(rs.next_fetch(1).has_value());
  rs.abandon_fetch();  // its connection closed
  auto g = rs.next_fetch(2);
  ASSERT_TRUE(g.has_value());
  EXPECT_NE(g->request_id, f->request_id);
  FollowerFetchResponse late{f->request_id, {}, 5, 7};
  EXPECT_EQ(rs.on_fetch_response(late, 3), FollowerStep::ignore);
  FollowerFetchResponse ok{g->request_id, {}, 5, 7};
  EXPECT_EQ(rs.on_fetch_response(ok, 4), FollowerStep::append);
}

TEST(ReplicaState, IsrShrinksAfterTheLagTimeAndTheRemovalCountsOnlyOnceCommitted) {
  MemLog log;
  ReplicaState rs(opts(1), log);
  rs.set_broker_epoch(11);
  rs.apply_metadata(part(1, 0, {1, 2, 3}, 4), 0);
  log.add(0, 10);
  rs.on_replica_fetch(fetch(2, 0, 10, 0), 10);
  rs.on_replica_fetch(fetch(3, 0, 2, 0), 10);
  EXPECT_FALSE(rs.poll_isr(500, live_brokers()).has_value());
  rs.on_replica_fetch(fetch(2, 0, 10, 0), 1200);
  auto p = rs.poll_isr(1200, live_brokers());
  ASSERT_TRUE(p.has_value());  // 3 has not caught up since 0
  EXPECT_EQ(p->partition_epoch, 4);
  ASSERT_EQ(p->new_isr.size(), 2u);
  EXPECT_EQ(p->new_isr[0], (IsrMember{1, 11}));
  EXPECT_EQ(p->new_isr[1], (IsrMember{2, 12}));
  EXPECT_EQ(rs.maximal_isr().size(), 3u);  // 3 still holds the HW back
  EXPECT_EQ(rs.high_watermark(), 2);
  EXPECT_FALSE(rs.poll_isr(1250, live_brokers()).has_value());
  auto again = rs.poll_isr(1300, live_brokers());  // unanswered: sent again
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->request_id, p->request_id);
  rs.on_alter_partition_answer({p->request_id, ErrorCode::none, 1, 0, {1, 2}, 5}, 1310);
  EXPECT_EQ(rs.isr(), (std::vector<std::int32_t>{1, 2}));
  EXPECT_EQ(rs.partition_epoch(), 5);
  EXPECT_EQ(rs.high_watermark(), 10);
  EXPECT_EQ(rs.check_produce(true), ErrorCode::none);
}

TEST(ReplicaState, AJoiningReplicaHoldsTheHwBackAtOnceAndNeedsTheEpochStart) {
  MemLog log;
  log.add(0, 8);
  ReplicaState rs(opts(1), log);
  rs.set_broker_epoch(11);
  rs.apply_metadata(part(1, 1, {1, 2}), 0);  // became leader at 8
  EXPECT_EQ(rs.epoch_start_offset(), 8);
  log.add(1, 4);
  rs.on_replica_fetch(fetch(2, 1, 12, 1), 1);
  EXPECT_EQ(rs.high_watermark(), 12);
  rs.on_replica_fetch(fetch(3, 1, 7, 0), 1);  // below the epoch start: may not join
  EXPECT_FALSE(rs.poll_isr(2, live_brokers()).has_value());
  auto fenced = live_brokers();
  fenced[3].fenced = true;
  rs.on_replica_fetch(fetch(3, 1, 12, 1), 3);
  EXPECT_FALSE(rs.poll_isr(3, fenced).has_value());  // fenced brokers may not join
  auto p = rs.poll_isr(4, live_brokers());
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->new_isr.size(), 3u);
  EXPECT_EQ(rs.maximal_isr().size(), 3u);
  log.add(1, 3);
  rs.on_replica_fetch(fetch(2, 1, 15, 1), 5);
  EXPECT_EQ(rs.high_watermark(), 12);  // 3 is in the maximal ISR already
  // The controller refused a repeat it had applied: keep the maximal ISR until the metadata.
  rs.on_alter_partition_answer({p->request_id, ErrorCode::invalid_update_version, 1, 1, {}, 1}, 6);
  EXPECT_EQ(rs.maximal_isr().size(), 3u);
  EXPECT_FALSE(rs.poll_isr(1000, live_brokers()).has_value());
  rs.apply_metadata(part(1, 1, {1, 2, 3}, 1), 7);
  EXPECT_EQ(rs.isr().size(), 3u);
  EXPECT_EQ(rs.partition_epoch(), 1);
}

TEST(ReplicaState, AcksAllNeedsMinInsyncReplicas) {
  MemLog log;
  ReplicaState rs(opts(1, 2), log);
  rs.apply_metadata(part(1, 0, {1}), 0);
  EXPECT_EQ(rs.check_produce(false), ErrorCode::none);
  EXPECT_EQ(rs.check_produce(true), ErrorCode::not_enough_replicas);
  log.add(0, 3);  // acks=1 records
  rs.on_log_advanced();
  EXPECT_EQ(rs.high_watermark(), 0) << "KIP-966: the HW stands still below min.insync.replicas";
  EXPECT_EQ(rs.acks_all_outcome(2), std::nullopt);
  rs.apply_metadata(part(2, 1, {2, 3}), 1);
  EXPECT_EQ(rs.role(), ReplicaRole::follower);
  EXPECT_EQ(rs.acks_all_outcome(2), ErrorCode::not_leader_or_follower);
  EXPECT_EQ(rs.check_leader_epoch(1), ErrorCode::not_leader_or_follower);
  rs.apply_metadata(part(1, 0, {1, 2, 3}), 2);  // stale metadata is ignored
  EXPECT_EQ(rs.role(), ReplicaRole::follower);
}

// KIP-966: the members that leave an ISR below min.insync.replicas stay eligible to lead, so
// nothing may become committed without them; the HW moves again once the ISR is back to the
// minimum (capped at the replica count: a topic with fewer replicas is not frozen for good).
TEST(ReplicaState, TheHwStandsStillBelowMinInsyncReplicas) {
  MemLog log;
  ReplicaState rs(opts(1, 2), log);
  rs.set_broker_epoch(11);
  rs.apply_metadata(part(1, 0, {1, 2}, 1), 0);
  log.add(0, 5);
  rs.on_replica_fetch(fetch(2, 0, 5, 0), 1);
  EXPECT_EQ(rs.high_watermark(), 5);
  EXPECT_EQ(rs.acks_all_outcome(4), ErrorCode::none);
  log.add(0, 3);
  rs.apply_metadata(part(1, 0, {1}, 2), 2);  // 2 left the ISR (the controller keeps it in ELR)
  rs.on_log_advanced();
  EXPECT_EQ(rs.high_watermark(), 5);
  EXPECT_EQ(rs.acks_all_outcome(7), std::nullopt) << "waits for the ISR, as Kafka's does";
  rs.on_replica_fetch(fetch(2, 0, 8, 0), 3);
  EXPECT_EQ(rs.high_watermark(), 5);
  rs.apply_metadata(part(1, 0, {1, 2}, 3), 4);
  EXPECT_EQ(rs.high_watermark(), 8);
  EXPECT_EQ(rs.acks_all_outcome(7), ErrorCode::none);

  // min.insync.replicas 3 on a partition of 2 replicas: the minimum is the replica count.
  MemLog small;
  ReplicaState two(opts(1, 3), small);
  two.apply_metadata(PartitionState{0, {1, 2}, {1, 2}, 1, 0, 0}, 0);
  small.add(0, 2);
  two.on_replica_fetch(fetch(2, 0, 2, 0), 1);
  EXPECT_EQ(two.high_watermark(), 2);
}

TEST(ReplicaState, ANewLeaderHidesItsHwUntilItReachesTheEpochStart) {
  MemLog log;
  log.add(0, 10);
  ReplicaState rs(opts(2), log);
  rs.apply_metadata(part(2, 1, {2, 3}), 0);
  EXPECT_EQ(rs.visible_high_watermark(), std::nullopt);  // KIP-207
  rs.on_replica_fetch(fetch(3, 1, 10, 0), 1);
  EXPECT_EQ(rs.visible_high_watermark(), 10);
}

TEST(ReplicaState, AFollowerKeepingUpUnderSteadyLoadStaysInTheIsr) {
  // The leader's log end is always a batch ahead of what it could send (appends queued, not
  // yet written): a follower that fetches everything readable each time is caught up.
  MemLog log;
  ReplicaState rs(opts(1), log);
  rs.apply_metadata(part(1, 0, {1, 2, 3}), 0);
  ASSERT_EQ(rs.role(), ReplicaRole::leader);
  std::int64_t t = 0;
  log.readable = 0;
  for (int round = 0; round < 30; ++round, t += 100) {
    // Each follower's fetch arrives with everything readable (caught up), parks, and is woken
    // (evaluated again, as the daemon's fetch handler does) once new records are written while
    // the next append is still queued; its next fetch asks from what that answer carried.
    for (std::int32_t f : {2, 3})
      EXPECT_EQ(rs.on_replica_fetch(fetch(f, 0, log.readable, 0), t).error, ErrorCode::none);
    const std::int64_t asked = log.readable;
    log.add(0, 5);
    log.readable = log.log_end_offset();
    log.add(0, 1, false);  // queued: readable with the next round's records
    for (std::int32_t f : {2, 3})
      EXPECT_EQ(rs.on_replica_fetch(fetch(f, 0, asked, 0), t + 50).error, ErrorCode::none);
    EXPECT_FALSE(rs.poll_isr(t + 50, live_brokers())) << "round " << round;
  }
  EXPECT_EQ(rs.isr(), (std::vector<std::int32_t>{1, 2, 3}));
}

TEST(ReplicaState, AFollowerBehindForTheLagLeavesAndRejoinsOnlyOnceCaughtUp) {
  MemLog log;
  ReplicaState rs(opts(1), log);
  rs.apply_metadata(part(1, 0, {1, 2, 3}), 0);
  log.add(0, 10);
  rs.on_replica_fetch(fetch(2, 0, 10, 0), 0);
  rs.on_replica_fetch(fetch(3, 0, 10, 0), 0);
  // Broker 3 stops fetching; 2 keeps up.
  rs.on_replica_fetch(fetch(2, 0, 10, 0), 1200);
  auto shrink = rs.poll_isr(1200, live_brokers());
  ASSERT_TRUE(shrink);
  ASSERT_EQ(shrink->new_isr.size(), 2u);
  rs.on_alter_partition_answer({shrink->request_id, ErrorCode::none, 1, 0, {1, 2}, 1}, 1200);
  // 3 comes back at the HW but its last catch-up is old: it must fetch up to the end first.
  log.add(0, 5);
  rs.on_replica_fetch(fetch(2, 0, 15, 0), 1300);
  rs.on_replica_fetch(fetch(3, 0, 10, 0), 1300);
  EXPECT_FALSE(rs.poll_isr(1300, live_brokers()));
  rs.on_replica_fetch(fetch(3, 0, 15, 0), 1400);
  auto grow = rs.poll_isr(1400, live_brokers());
  ASSERT_TRUE(grow);
  EXPECT_EQ(grow->new_isr.size(), 3u);
}

// KIP-392's RackAwareReplicaSelector as Kafka's findPreferredReadReplica asks it: a follower
// in the consumer's rack, in the ISR, reachable on its listener and holding its offset; the most
// caught up of several; none (the leader serves) when the leader is in that rack.
TEST(ReplicaSelector, PicksTheMostCaughtUpInSyncFollowerInTheClientsRack) {
  MemLog log;
  ReplicaState rs(opts(1), log);
  rs.apply_metadata(part(1, 0, {1, 2, 3}), 0);
  log.add(0, 10);
  rs.on_log_advanced();
  auto brokers = live_brokers();
  const std::vector<BrokerEndpoint> eps{{"PLAINTEXT", "h", 9092, 0}};
  for (auto& [id, b] : brokers)
    b.endpoints = eps;
  brokers[1].rack = "a";
  brokers[2].rack = "b";
  brokers[3].rack = "c";
  auto pick = [&](std::string_view rack, std::int64_t offset,
                  std::string_view listener = "PLAINTEXT") {
    return preferred_read_replica(rs, brokers, {rack, listener, offset, 100});
  };
  EXPECT_EQ(pick("b", 5), -1);  // the followers have not fetched in this epoch yet
  ReplicaFetch f2 = fetch(2, 0, 10, 0);
  f2.log_start_offset = 0;
  rs.on_replica_fetch(f2, 50);
  rs.on_replica_fetch(fetch(3, 0, 8, 0), 50);
  EXPECT_EQ(pick("b", 5), 2);
  EXPECT_EQ(pick("b", 10), 2);
  EXPECT_EQ(pick("b", 11), -1);  // beyond what the follower holds
  EXPECT_EQ(pick("c", 8), 3);
  EXPECT_EQ(pick("c", 9), -1);
  EXPECT_EQ(pick("a", 5), -1);         // the leader's own rack
  EXPECT_EQ(pick("", 5), -1);          // no client.rack
  EXPECT_EQ(pick("d", 5), -1);         // no replica there
  EXPECT_EQ(pick("b", 5, "SSL"), -1);  // no endpoint on the client's listener
  // A follower whose log starts after the offset does not hold it.
  f2.log_start_offset = 6;
  rs.on_replica_fetch(f2, 60);
  EXPECT_EQ(pick("b", 5), -1);
  EXPECT_EQ(pick("b", 6), 2);
  // Two in the rack: the higher fetch offset wins, then the one caught up most recently.
  brokers[3].rack = "b";
  EXPECT_EQ(pick("b", 7), 2);
  rs.on_replica_fetch(fetch(3, 0, 10, 0), 70);
  EXPECT_EQ(pick("b", 7), 3);
  // Fenced, or out of the ISR: not a candidate.
  brokers[3].fenced = true;
  EXPECT_EQ(pick("b", 7), 2);
  brokers[3].fenced = false;
  rs.apply_metadata(part(1, 0, {1, 2}, 1), 80);
  EXPECT_EQ(pick("b", 7), 2);
}

}  // namespace
}  // namespace samsa::replication
