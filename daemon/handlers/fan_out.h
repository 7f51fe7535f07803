// Per-partition work on the shards that own the partitions, answered on the request's own
// reactor once every shard has done its part. Each shard gets one task for all of its items.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "daemon/broker.h"
#include "daemon/dispatch.h"

namespace samsa::daemon::handlers {

// State is the handler's (it holds the items; they must stay put while shards work on them).
// shard_of(i) gives the owning shard of item i, or SIZE_MAX for items answered without one.
// work(state, i, ctx) runs on the owner's reactor; answer(std::move(request), state) runs on
// the request's reactor at the end.
template <class State, class ShardOf, class Work, class Answer>
void fan_out(RequestPtr r, std::unique_ptr<State> state, std::size_t items, ShardOf shard_of,
             Work work, Answer answer) {
  struct Ctx {
    RequestPtr req;
    std::unique_ptr<State> state;
    std::vector<std::pair<std::size_t, std::vector<std::size_t>>> groups;  // shard -> items
    std::size_t pending = 0;
    Answer answer;
  };
  Broker& b = *r->rc.broker;
  auto* ctx = new Ctx{std::move(r), std::move(state), {}, 0, std::move(answer)};
  std::vector<std::size_t> group_of(b.reactor_count(), SIZE_MAX);
  for (std::size_t i = 0; i < items; ++i) {
    const std::size_t shard = shard_of(*ctx->state, i);
    if (shard == SIZE_MAX) continue;
    if (group_of[shard] == SIZE_MAX) {
      group_of[shard] = ctx->groups.size();
      ctx->groups.push_back({shard, {}});
    }
    ctx->groups[group_of[shard]].second.push_back(i);
  }
  auto finish = [](Ctx* c) {
    std::unique_ptr<Ctx> owned(c);
    c->answer(std::move(c->req), *c->state);
  };
  if (ctx->groups.empty()) {
    finish(ctx);
    return;
  }
  ctx->pending = ctx->groups.size();
  const std::size_t origin = ctx->req->rc.index;
  for (std::size_t gi = 0; gi < ctx->groups.size(); ++gi) {
    b.reactor(ctx->groups[gi].first).reactor->post_fn([ctx, gi, origin, &b, work, finish] {
      auto& g = ctx->groups[gi];
      ReactorContext& rc = b.reactor(g.first);
      for (std::size_t i : g.second)
        work(*ctx->state, i, rc);
      b.on_reactor(origin, [ctx, finish](ReactorContext&) {
        if (--ctx->pending == 0) finish(ctx);
      });
    });
  }
}

// Work on every shard (not per item): work(state, shard_index, ctx) on each reactor.
template <class State, class Work, class Answer>
void on_every_shard(RequestPtr r, std::unique_ptr<State> state, Work work, Answer answer) {
  const std::size_t n = r->rc.broker->reactor_count();
  fan_out(
      std::move(r), std::move(state), n, [](const State&, std::size_t i) { return i; },
      std::move(work), std::move(answer));
}

}  // namespace samsa::daemon::handlers
