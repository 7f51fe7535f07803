// quorum::RaftNode driven by hand: one voter, its log and snapshots the quorum simulation's
// in-memory ones, the test answering for the leader and the other voter with exact timing.
// (tests/sim/quorum_sim.cc drives whole quorums through random faults.)
#include "replication/quorum/raft.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>

#include "tests/sim/quorum_disk.h"

namespace samsa::replication::quorum {
namespace {

constexpr std::int64_t kFetchTimeoutMs = 400;
constexpr std::int32_t kLongPollMs = 100;

RaftOptions options() {
  RaftOptions o;
  o.node_id = 1;
  o.voters = {1, 2, 3};
  o.election_timeout_ms = 200;
  o.fetch_timeout_ms = kFetchTimeoutMs;
  o.election_backoff_max_ms = 200;
  o.fetch_max_wait_ms = kLongPollMs;
  o.request_timeout_ms = 400;
  return o;
}

// Node 1, restarted as the follower of node 2 in epoch 1.
class QuorumRaftTest : public ::testing::Test {
 protected:
  void SetUp() override {
    node = std::make_unique<RaftNode>(
        options(), log, snaps, QuorumState{1, -1, 2}, [this] { return rng(); }, now);
    run();
  }

  // The node's timers at `now`; what it sends is kept for the test to answer (or lose).
  void run() {
    node->tick(now);
    for (auto& o : node->take_effects().send)
      sent.push_back(std::move(o));
  }
  void advance_to(std::int64_t t) {
    while (now < t) {
      ++now;
      run();
    }
  }
  template <class R>
  std::vector<Outgoing> take() {
    std::vector<Outgoing> out, keep;
    for (auto& o : sent)
      (std::holds_alternative<R>(o.request) ? out : keep).push_back(std::move(o));
    sent = std::move(keep);
    return out;
  }
  // The leader's answer: nothing new, its HW at 0.
  void answer_fetch(const Outgoing& o) {
    const auto& f = std::get<FetchRequest>(o.request);
    FetchResponse r;
    r.answer.epoch = 1;
    r.answer.leader = 2;
    r.answer.high_watermark = 0;
    r.records_base = r.records_end = f.fetch_offset;
    node->on_fetch_response(o.id, 2, r, now);
    run();
  }
  // The leader and the other follower, which still hears from it, refuse the pre-vote.
  void refuse_votes() {
    for (const auto& v : take<VoteRequest>())
      node->on_vote_response(v.id, v.to, VoteResponse{kafka::ErrorCode::none, 1, 2, false}, now);
    run();
  }
  // A fetch answered, the next one lost (request or answer): the fetch timeout runs out before
  // the lost fetch's request timeout, so the node asks for pre-votes, and loses them.
  void lose_a_fetch_then_a_pre_vote() {
    auto first = take<FetchRequest>();
    ASSERT_EQ(first.size(), 1u);
    advance_to(5);
    answer_fetch(first[0]);
    ASSERT_EQ(take<FetchRequest>().size(), 1u);  // lost
    advance_to(5 + kFetchTimeoutMs);
    ASSERT_STREQ(role_name(node->role()), "prospective");
    advance_to(now + 3);
    refuse_votes();
    ASSERT_STREQ(role_name(node->role()), "follower");
    ASSERT_EQ(node->leader(), 2);
  }

  sim::QuorumLog log;
  sim::SimSnapshots snaps{log};
  std::mt19937_64 rng{7};
  std::int64_t now = 0;
  std::unique_ptr<RaftNode> node;
  std::vector<Outgoing> sent;
};

// Back from a lost pre-vote, the follower's fetches succeed again only after its lost one times
// out and the leader long-polls the next: it must wait for them, not stand again after the
// election back-off (a prospective node drops the fetch answers, so it never got one).
TEST_F(QuorumRaftTest, FollowerBackFromALostPreVoteKeepsFetchingFromItsLeader) {
  ASSERT_NO_FATAL_FAILURE(lose_a_fetch_then_a_pre_vote());
  const std::int64_t until = now + 3 * kFetchTimeoutMs;
  std::vector<std::pair<std::int64_t, Outgoing>> held;  // the leader's long poll
  int answered = 0;
  while (now < until) {
    advance_to(now + 1);
    ASSERT_STREQ(role_name(node->role()), "follower")
        << "at " << now << " ms, " << answered << " answered";
    refuse_votes();
    for (auto& f : take<FetchRequest>())
      held.emplace_back(now + kLongPollMs, std::move(f));
    while (!held.empty() && held.front().first <= now) {
      answer_fetch(held.front().second);
      held.erase(held.begin());
      ++answered;
    }
  }
  EXPECT_GE(answered, 5);
}

// The fetch it timed out on is given up with the pre-vote: following again, it asks at once, not
// after that request's own timeout (500 ms here, longer than the fetch timeout).
TEST_F(QuorumRaftTest, FollowerBackFromALostPreVoteFetchesAgainAtOnce) {
  ASSERT_NO_FATAL_FAILURE(lose_a_fetch_then_a_pre_vote());
  EXPECT_EQ(take<FetchRequest>().size(), 1u);
}

// The other side: a leader that stays silent still loses the follower, a fetch timeout after
// the lost pre-vote.
TEST_F(QuorumRaftTest, FollowerBackFromALostPreVoteStandsAfterAFetchTimeoutOfSilence) {
  ASSERT_NO_FATAL_FAILURE(lose_a_fetch_then_a_pre_vote());
  const std::int64_t lost_at = now;
  advance_to(lost_at + kFetchTimeoutMs - 1);
  EXPECT_STREQ(role_name(node->role()), "follower");
  advance_to(lost_at + kFetchTimeoutMs);
  EXPECT_STREQ(role_name(node->role()), "prospective");
  EXPECT_EQ(take<VoteRequest>().size(), 2u);
}

}  // namespace
}  // namespace samsa::replication::quorum
