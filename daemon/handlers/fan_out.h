// Per-partition work on the shards that own the partitions, answered from the request's own
// reactor once every shard is done (ListOffsets, DescribeProducers, DeleteRecords, ...). Each
// shard gets one task holding all of its items; nothing is shared under a lock: the context
// travels as a pointer and the countdown runs only on the origin reactor.
#pragma once

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "daemon/broker.h"
#include "daemon/dispatch.h"

namespace samsa::daemon::handlers {

// Ctx holds `RequestPtr req`. shard_of(i) names the shard owning item i, or nullopt for an
// item answered without one (unknown topic, bad index). work(shard_ctx, ctx, i, item_done)
// runs on that shard's reactor and calls item_done() exactly once, at once or later on the
// same shard (a cold read through the shard's ReadAheadPool); finish(std::unique_ptr<Ctx>)
// runs on the origin reactor after the last item.
template <class Ctx, class ShardOf, class Work, class Finish>
void fan_out_to_shards_async(std::unique_ptr<Ctx> ctx, std::size_t items, ShardOf shard_of,
                             Work work, Finish finish) {
  Broker& b = *ctx->req->rc.broker;
  const std::size_t origin = ctx->req->rc.index;
  struct Run {
    std::unique_ptr<Ctx> ctx;
    std::vector<std::vector<std::size_t>> by_shard;
    std::vector<std::size_t> left;  // per shard, touched only on that shard
    std::size_t pending = 0;        // shards, touched only on the origin
    Work work;
    Finish finish;
  };
  const std::size_t n = b.reactor_count();
  auto run = new Run{std::move(ctx),
                     std::vector<std::vector<std::size_t>>(n),
                     std::vector<std::size_t>(n),
                     0,
                     std::move(work),
                     std::move(finish)};
  for (std::size_t i = 0; i < items; ++i) {
    if (std::optional<std::size_t> s = shard_of(*run->ctx, i)) run->by_shard[*s].push_back(i);
  }
  for (const auto& v : run->by_shard)
    run->pending += !v.empty();
  if (run->pending == 0) {
    std::unique_ptr<Run> own(run);
    own->finish(std::move(own->ctx));
    return;
  }
  for (std::size_t s = 0; s < n; ++s) {
    if (run->by_shard[s].empty()) continue;
    b.reactor(s).reactor->post_fn([run, s, origin, &b] {
      auto shard_done = [run, origin, &b] {
        b.on_reactor(origin, [run](ReactorContext&) {
          if (--run->pending != 0) return;
          std::unique_ptr<Run> own(run);
          own->finish(std::move(own->ctx));
        });
      };
      // One extra count for this loop (items finishing at once must not end it early).
      run->left[s] = run->by_shard[s].size() + 1;
      for (std::size_t i : run->by_shard[s]) {
        run->work(b.reactor(s), *run->ctx, i, [run, s, shard_done] {
          if (--run->left[s] == 0) shard_done();
        });
      }
      if (--run->left[s] == 0) shard_done();
    });
  }
}

// The same for work that finishes at once: work(shard_ctx, ctx, i).
template <class Ctx, class ShardOf, class Work, class Finish>
void fan_out_to_shards(std::unique_ptr<Ctx> ctx, std::size_t items, ShardOf shard_of, Work work,
                       Finish finish) {
  fan_out_to_shards_async(
      std::move(ctx), items, std::move(shard_of),
      [work = std::move(work)](ReactorContext& rc, Ctx& c, std::size_t i,
                               auto&& item_done) mutable {
        work(rc, c, i);
        item_done();
      },
      std::move(finish));
}

}  // namespace samsa::daemon::handlers
