// The Broker's stop: stop accepting, answer what is in flight (within
// samsa.shutdown.timeout.ms), close connections, then the controller, the coordinator and the
// shards' logs, and mark the log dirs clean.
#include <atomic>
#include <chrono>
#include <thread>

#include "base/clock.h"
#include "base/log.h"
#include "daemon/admin/admin.h"
#include "daemon/api/dispatch.h"
#include "daemon/broker.h"
#include "daemon/broker_internal.h"
#include "daemon/cluster/cluster_link.h"

namespace samsa::daemon {

namespace {

// Stops a loop thread's reactor and waits for it. Safe to call again: a joined thread is no
// longer joinable, so the second call (the path that skipped the orderly steps) does nothing.
void stop_and_join(std::thread& thread, io::Reactor* reactor) {
  if (!thread.joinable()) return;
  if (reactor) reactor->stop();
  thread.join();
}

}  // namespace

// 1. Stop accepting and expire long polls; 2. wait (up to samsa.shutdown.timeout.ms) for the
// requests in flight to be answered.
void Broker::drain_requests(const std::vector<ReactorThread*>& running) {
  const std::int64_t timeout_ms = config().get_int("samsa.shutdown.timeout.ms");
  std::atomic<std::size_t> busy{0};
  auto count_busy = [&](bool first) {
    busy.store(0);
    std::atomic<std::size_t> left{running.size()};
    for (ReactorThread* t : running) {
      t->ctx->reactor->post_fn([t, &busy, &left, first] {
        ReactorContext& ctx = *t->ctx;
        if (first) {
          ctx.shutting_down = true;
          for (auto& tr : ctx.transports)
            tr->stop_accepting();
          // acks=all produces waiting for followers answer now rather than at their timeout.
          if (ctx.shard) ctx.shard->for_each([](auto& p) { p.release_commit_waiters(); });
        }
        while (ctx.parked) {
          ParkedRequest* p = ctx.parked;
          ctx.unpark(p);
          p->expire();
        }
        std::size_t n = 0;
        for (auto& d : ctx.dispatchers)
          n += d->in_flight();
        busy.fetch_add(n);
        left.fetch_sub(1);
      });
    }
    while (left.load() != 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return busy.load();
  };
  // Group requests parked in the coordinator (a JoinGroup waits up to its rebalance timeout)
  // are answered now, so the wait below is for real work only.
  if (coordinator_reactor_) {
    on_coordinator([](coordinator::GroupCoordinator& g) { g.shutdown(); });
    on_txn_coordinator([](coordinator::TxnCoordinator& t) { t.shutdown(); });
  }
  // A controller node: brokers' metadata long polls answer at once from now on.
  if (controller_reactor_ && controller_)
    on_controller([](replication::Controller& c) { c.stop_waiting_reads(); });
  const std::int64_t end = mono_ms() + timeout_ms;
  bool first = true;
  while (!running.empty() && count_busy(first) != 0 && mono_ms() < end) {
    first = false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!running.empty() && busy.load() != 0)
    LOG_WARN("shutdown: %zu requests still in flight after %lld ms; closing anyway", busy.load(),
             static_cast<long long>(timeout_ms));
}

// 3. No more requests: close every connection on every reactor.
void Broker::close_connections(const std::vector<ReactorThread*>& running) {
  std::atomic<std::size_t> left{running.size()};
  for (ReactorThread* t : running) {
    t->ctx->reactor->post_fn([t, &left] {
      for (auto& tr : t->ctx->transports)
        tr->close_all();
      left.fetch_sub(1);
    });
  }
  while (left.load() != 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

// 4. The controller (it may still be finishing a change), the coordinator (its writes in flight
// complete on the shards, which are still running), then the shards' logs, closed cleanly.
void Broker::close_logs(const std::vector<ReactorThread*>& running) {
  // The quorum's connections close on reactor 0 while the controller still takes the failures
  // of what was in flight.
  if (quorum_peers_) quorum_peers_->stop();
  stop_and_join(controller_thread_, controller_reactor_);
  stop_and_join(coordinator_thread_, coordinator_reactor_);
  // The logs' closes leave their index files to one syncfs per log dir (shutdown_clean).
  for (auto& d : log_dirs_)
    d->defer_close_syncs();
  for (ReactorThread* t : running) {
    t->ctx->reactor->post_fn([t] {
      ReactorContext& ctx = *t->ctx;
      if (ctx.fetcher) ctx.fetcher->stop();  // no more appends to the logs about to close
      if (ctx.sender) ctx.sender->stop();
      ctx.shard->close_all();
      struct Poll : io::Timer {
        ReactorContext* ctx;
      };
      auto* poll = new Poll();
      poll->ctx = &ctx;
      poll->fn = [](io::Timer* tm) {
        auto* p = static_cast<Poll*>(tm);
        if (p->ctx->shard->closed()) {
          p->ctx->reactor->stop();
          delete p;
          return;
        }
        p->ctx->reactor->arm(tm, mono_ns() + 2'000'000);
      };
      ctx.reactor->arm(poll, mono_ns());
    });
  }
  for (auto& t : reactors_)
    if (t->thread.joinable()) t->thread.join();
  stop_and_join(controller_thread_, controller_reactor_);
  stop_and_join(coordinator_thread_, coordinator_reactor_);
  if (retention_) retention_->stop();
  if (cleaner_) cleaner_->stop();
  // The reactors are done; what they handed the offload is finished before the clean marker.
  offload_.reset();
  stall_watch_.reset();
  bool clean = true;
  for (auto& t : reactors_)
    clean &= t->ctx->reactor != nullptr;
  for (auto& d : log_dirs_) {
    auto r = clean ? d->shutdown_clean() : d->write_checkpoints();
    if (!r) LOG_WARN("log dir %s: %s", d->root().c_str(), r.error().detail.c_str());
  }
  // No backend when its start failed (an EAL that refused the device).
  if (backend_) {
    if (const std::string line = backend_->stats_line(); !line.empty())
      LOG_INFO("%s", line.c_str());
    backend_.reset();  // every reactor thread that used it has ended
  }
  reactors_.clear();
  contexts_.clear();
  log_dirs_.clear();
}

void Broker::shutdown() {
  if (stopping_.exchange(true)) return;
  const State was = state_.exchange(State::stopping, std::memory_order_acq_rel);
  // The admin thread first: it reaches into every other thread.
  admin_.reset();
  // A broker node asks the controller to move its leaderships first, so clients find the new
  // leaders at once instead of after broker.session.timeout.ms.
  if (link_ && was != State::starting) {
    const std::int64_t t0 = mono_ms();
    const bool moved = link_->controlled_shutdown(5000);
    LOG_INFO("controlled shutdown: %s after %lld ms", moved ? "leaderships moved" : "timed out",
             static_cast<long long>(mono_ms() - t0));
  }
  // The active controller hands the quorum on (EndQuorumEpoch to the others, most caught up
  // first), so a planned restart elects the next leader at once rather than after
  // controller.quorum.fetch.timeout.ms.
  if (quorum_peers_ && controller_reactor_ && was != State::starting) {
    on_controller([](replication::Controller& c) { c.resign(); });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the requests leave
  }
  std::vector<ReactorThread*> running;
  for (auto& t : reactors_)
    if (t->ctx->reactor && t->thread.joinable()) running.push_back(t.get());
  drain_requests(running);
  // A broker node's link to the controller ran the forwarded requests just answered.
  if (link_) link_->stop();
  close_connections(running);
  close_logs(running);
}

}  // namespace samsa::daemon
