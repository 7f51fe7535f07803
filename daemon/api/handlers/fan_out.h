// Per-partition work on the shards that own the partitions, answered from the request's own
// reactor once every shard is done (Produce, ListOffsets, DescribeProducers, DeleteRecords,
// ...). Each shard gets one job holding all of its items, run through the shard's TurnQueue
// (io/turn_queue.h): an item at a time, in the order requests reached the shard, split across
// loop turns when a request is large (16 partitions of 1 MiB batches validate for ~4 ms, a
// stall for every other connection of the reactor). The request's own shard runs its items
// inline, last, when nothing waits before them. Nothing is shared under a lock: the context
// travels as a pointer and the countdown runs only on the origin reactor. (Fetch has rounds of
// its own: reads, parking on the partitions, reads again; fetch.cc.)
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "daemon/api/dispatch.h"
#include "daemon/broker.h"
#include "io/turn_queue.h"

namespace samsa::daemon::handlers {

// What an item's work calls exactly once, on the shard's reactor, at once or later: a small
// copyable handle, so an item can keep it (in its own state) without allocating.
class ItemDone {
 public:
  ItemDone() = default;
  // Made by fan_out_to_shards_async only.
  ItemDone(void* run, std::size_t shard, void (*fn)(void*, std::size_t))
      : run_(run), shard_(shard), fn_(fn) {}
  void operator()() const { fn_(run_, shard_); }

 private:
  void* run_ = nullptr;
  std::size_t shard_ = 0;
  void (*fn_)(void*, std::size_t) = nullptr;
};

// Ctx holds `RequestPtr req`. shard_of(ctx, i) names the shard owning item i, or nullopt for an
// item answered without one (unknown topic, bad index). work(shard_ctx, ctx, i, item_done)
// runs on that shard's reactor and calls item_done() exactly once, at once or later on the
// same shard (a cold read through the shard's ReadAheadPool, a produce waiting for its sync);
// finish(std::unique_ptr<Ctx>) runs on the origin reactor after the last item.
template <class Ctx, class ShardOf, class Work, class Finish>
void fan_out_to_shards_async(std::unique_ptr<Ctx> ctx, std::size_t items, ShardOf shard_of,
                             Work work, Finish finish) {
  Broker& b = *ctx->req->rc.broker;
  const std::size_t origin = ctx->req->rc.index;
  struct Run {
    std::unique_ptr<Ctx> ctx;
    Broker* broker;
    std::size_t origin;
    std::vector<std::vector<std::size_t>> by_shard;
    std::size_t pending = 0;  // shards, touched only on the origin
    Work work;
    Finish finish;

    // Origin thread (or inline there): one shard is done.
    static void shard_done(Run* run) {
      run->broker->on_reactor(run->origin, [run](ReactorContext&) {
        if (--run->pending != 0) return;
        std::unique_ptr<Run> own(run);
        own->finish(std::move(own->ctx));
      });
    }
    // Shard thread: one item of shard s is done.
    static void item_done(void* r, std::size_t s) {
      auto* run = static_cast<Run*>(r);
      if (--run->jobs[s].left == 0) shard_done(run);
    }
    // Shard s's items as one job of its TurnQueue: a step per item. Touched only on that
    // shard.
    struct ShardJob : io::TurnQueue::Job {
      Run* run = nullptr;
      std::size_t shard = 0;
      std::size_t next_item = 0;
      std::size_t left = 0;  // items not done yet, plus one for the job itself
    };
    std::vector<ShardJob> jobs;
    static bool step(io::TurnQueue::Job* j) {
      auto* sj = static_cast<ShardJob*>(j);
      Run* run = sj->run;
      const std::vector<std::size_t>& items = run->by_shard[sj->shard];
      run->work(run->broker->reactor(sj->shard), *run->ctx, items[sj->next_item++],
                ItemDone(run, sj->shard, &Run::item_done));
      return sj->next_item == items.size();
    }
    // After the last step: the job's own count (held so that items finishing at once cannot
    // end the shard early). May free the run, and this job with it.
    static void finished(io::TurnQueue::Job* j) {
      auto* sj = static_cast<ShardJob*>(j);
      item_done(sj->run, sj->shard);
    }
    // Shard thread: every item of shard s.
    void run_shard(std::size_t s) {
      ShardJob& j = jobs[s];
      j.left = by_shard[s].size() + 1;
      j.run = this;
      j.shard = s;
      j.step = &Run::step;
      j.finished = &Run::finished;
      broker->reactor(s).turn_queue->push(&j);
    }
  };
  const std::size_t n = b.reactor_count();
  auto run = new Run{
      std::move(ctx),    &b, origin, std::vector<std::vector<std::size_t>>(n), 0, std::move(work),
      std::move(finish), {}};
  run->jobs.resize(n);
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
  // Other shards' tasks are posted (they run later); the request's own shard runs last and
  // inline: it may finish the whole request, after which nothing here touches `run`.
  const bool local = !run->by_shard[origin].empty();
  for (std::size_t s = 0; s < n; ++s) {
    if (s == origin || run->by_shard[s].empty()) continue;
    b.reactor(s).reactor->post_fn([run, s] { run->run_shard(s); });
  }
  if (local) run->run_shard(origin);
}

// The same for work that finishes at once: work(shard_ctx, ctx, i).
template <class Ctx, class ShardOf, class Work, class Finish>
void fan_out_to_shards(std::unique_ptr<Ctx> ctx, std::size_t items, ShardOf shard_of, Work work,
                       Finish finish) {
  fan_out_to_shards_async(
      std::move(ctx), items, std::move(shard_of),
      [work = std::move(work)](ReactorContext& rc, Ctx& c, std::size_t i, ItemDone item_done) {
        work(rc, c, i);
        item_done();
      },
      std::move(finish));
}

}  // namespace samsa::daemon::handlers
