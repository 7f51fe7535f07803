#include "io/cleaner.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/log.h"
#include "base/thread.h"
#include "io/compaction.h"
#include "io/record_batch.h"

namespace samsa::io {

// Shared with the tasks posted to reactors, so a task that runs after the cleaner is gone
// touches nothing freed.
struct LogCleaner::Core {
  Options opts;
  mutable std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  std::atomic<bool> stopping{false};
  bool requested = false, force = false;
  std::size_t asks_pending = 0;  // plan requests posted to reactors, not answered yet
  double round_max_ratio = 0;
  std::int64_t next_round_ms = 0;
  std::vector<std::shared_ptr<Registration>> regs;
  struct Job {
    std::shared_ptr<Registration> reg;
    std::shared_ptr<CleanPlan> plan;
  };
  std::vector<Job> queue;
  Stats stats;
  std::vector<std::thread> threads;
  std::atomic<double> rate{0};

  // Posts a plan request to every registered log's reactor.
  static void ask(const std::shared_ptr<Core>& core, bool force) {
    std::vector<std::shared_ptr<Registration>> regs;
    {
      std::lock_guard lk(core->mu);
      regs = core->regs;
      core->asks_pending += regs.size();
      core->round_max_ratio = 0;
    }
    for (auto& reg : regs) {
      reg->reactor->post_fn([core, reg, force] {
        std::shared_ptr<CleanPlan> plan;
        double ratio = 0;
        if (reg->active) {
          Log::CleanRequest req;
          req.now_ms = wall_ms();
          const Bounds& b = reg->bounds;
          req.cleanable_limit = b.cleanable_limit ? b.cleanable_limit() : INT64_MAX;
          req.producer_expiration_ms = core->opts.producer_expiration_ms;
          req.force = force;
          plan = reg->log->plan_cleaning(req);
          if (plan && b.aborted_txns)
            b.aborted_txns(plan->log_start, plan->clean_end, plan->aborted);
          if (reg->log->config().cleanup_compact) ratio = reg->log->compaction_info().dirty_ratio;
        }
        std::lock_guard lk(core->mu);
        --core->asks_pending;
        core->round_max_ratio = std::max(core->round_max_ratio, ratio);
        if (core->asks_pending == 0) core->stats.max_dirty_ratio = core->round_max_ratio;
        if (plan) core->queue.push_back(Job{reg, std::move(plan)});
        core->cv.notify_all();
      });
    }
  }

  // The dirtiest plan waiting, if any (mu held).
  std::optional<Job> take() {
    if (queue.empty()) return std::nullopt;
    auto it = std::max_element(queue.begin(), queue.end(), [](const Job& a, const Job& b) {
      return a.plan->dirty_ratio() < b.plan->dirty_ratio();
    });
    Job j = std::move(*it);
    queue.erase(it);
    return j;
  }

  void run_job(const std::shared_ptr<Core>& self, Job job, CleanerIo& io) {
    const std::size_t share = opts.dedupe_buffer_bytes / std::max<std::size_t>(1, opts.threads);
    // No more slots than the dirty bytes could hold keys (a small log gets a small map).
    const std::size_t need = (job.plan->dirty_bytes / batch::kMinRecordSize + 64) * 24 * 10 / 9;
    OffsetMap map(std::min(share, need));
    io.set_rate(rate.load(std::memory_order_relaxed));
    const std::int64_t t0 = mono_ns();
    const std::int64_t throttled0 = io.throttled_ns;
    auto result =
        std::make_shared<Result<CleanResult>>(clean_segments(*job.plan, map, io, &stopping));
    {
      std::lock_guard lk(mu);
      stats.busy_ns += mono_ns() - t0;
      stats.throttled_ns += io.throttled_ns - throttled0;
    }
    auto reg = job.reg;
    auto plan = job.plan;
    reg->reactor->post_fn([self, reg, plan, result] {
      if (!*result) {
        if (reg->active) reg->log->abort_cleaning(*plan);
        if (result->error().code != Errc::busy) {
          LOG_WARN("log cleaner: %s: %s", plan->dir.c_str(), result->error().detail.c_str());
          std::lock_guard lk(self->mu);
          ++self->stats.passes_failed;
        }
        return;
      }
      const CleanResult& res = **result;
      if (!reg->active) {
        discard_cleaned(*plan, res);
        return;
      }
      auto r = reg->log->commit_cleaning(*plan, res);
      std::lock_guard lk(self->mu);
      if (!r) {
        if (r.error().code == Errc::busy) {
          ++self->stats.passes_dropped;
          LOG_INFO("log cleaner: %s: %s", plan->dir.c_str(), r.error().detail.c_str());
        } else {
          ++self->stats.passes_failed;
          LOG_ERROR("log cleaner: %s: %s", plan->dir.c_str(), r.error().detail.c_str());
        }
        return;
      }
      ++self->stats.passes;
      self->stats.bytes_read += res.stats.bytes_read;
      self->stats.bytes_written += res.stats.bytes_written;
      self->stats.records_removed += res.stats.records_read - res.stats.records_kept;
      self->stats.tombstones_removed += res.stats.tombstones_removed;
      self->stats.last_pass_ms = plan->now_ms;
      std::size_t inputs = 0;
      for (const auto& g : res.groups)
        inputs += g.input_segments;
      LOG_INFO("log cleaner: %s: %zu segments into %zu, %" PRIu64 " -> %" PRIu64 " bytes, %" PRIu64
               " of %" PRIu64 " records kept, dirty ratio was %.2f",
               plan->dir.c_str(), inputs, res.groups.size(), res.stats.bytes_read,
               res.stats.bytes_written, res.stats.records_kept, res.stats.records_read,
               plan->dirty_ratio());
    });
  }

  void run(const std::shared_ptr<Core>& self, std::size_t index) {
    set_thread_name("cleaner-" + std::to_string(index));
    CleanerIo io;
    std::unique_lock lk(mu);
    while (!stop) {
      if (auto job = take()) {
        lk.unlock();
        run_job(self, std::move(*job), io);
        lk.lock();
        continue;
      }
      const std::int64_t now = mono_ms();
      if ((requested || now >= next_round_ms) && asks_pending == 0) {
        const bool f = force;
        requested = force = false;
        next_round_ms = now + opts.backoff_ms;
        lk.unlock();
        ask(self, f);
        lk.lock();
        continue;
      }
      std::int64_t wait = asks_pending ? opts.backoff_ms : next_round_ms - now;
      cv.wait_for(lk, std::chrono::milliseconds(std::max<std::int64_t>(1, wait)));
    }
  }
};

LogCleaner::LogCleaner(Options opts) : core_(std::make_shared<Core>()) {
  core_->opts = opts;
  core_->opts.threads = std::max<std::size_t>(1, opts.threads);
  core_->opts.backoff_ms = std::max<std::int64_t>(1, opts.backoff_ms);
  core_->rate.store(opts.io_max_bytes_per_second);
}

LogCleaner::~LogCleaner() {
  stop();
}

void LogCleaner::start() {
  if (!core_->opts.enabled || !core_->threads.empty()) return;
  {
    std::lock_guard lk(core_->mu);
    core_->stop = false;
    core_->stopping.store(false);
    core_->next_round_ms = mono_ms() + core_->opts.backoff_ms;
  }
  for (std::size_t i = 0; i < core_->opts.threads; ++i)
    core_->threads.emplace_back([core = core_, i] { core->run(core, i); });
}

void LogCleaner::stop() {
  {
    std::lock_guard lk(core_->mu);
    core_->stop = true;
    core_->stopping.store(true);
    core_->cv.notify_all();
  }
  for (auto& t : core_->threads)
    if (t.joinable()) t.join();
  core_->threads.clear();
}

std::shared_ptr<LogCleaner::Registration> LogCleaner::add(Reactor& r, Log& log, Bounds bounds) {
  auto reg = std::make_shared<Registration>();
  reg->reactor = &r;
  reg->log = &log;
  reg->bounds = std::move(bounds);
  std::lock_guard lk(core_->mu);
  core_->regs.push_back(reg);
  return reg;
}

void LogCleaner::remove(const std::shared_ptr<Registration>& reg) {
  reg->active = false;  // tasks already posted see this on the same thread
  std::lock_guard lk(core_->mu);
  std::erase(core_->regs, reg);
}

void LogCleaner::check_now(bool force) {
  std::lock_guard lk(core_->mu);
  core_->requested = true;
  core_->force = core_->force || force;
  core_->cv.notify_all();
}

void LogCleaner::set_io_rate(double bytes_per_second) {
  core_->rate.store(bytes_per_second);
}

LogCleaner::Stats LogCleaner::stats() const {
  std::lock_guard lk(core_->mu);
  return core_->stats;
}

}  // namespace samsa::io
