#include "io/retention.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "base/clock.h"
#include "base/log.h"
#include "base/thread.h"
#include "io/log_dir.h"

namespace samsa::io {

// Shared with the tasks posted to reactors, so a task that runs after the deleter is gone
// touches nothing freed.
struct RetentionDeleter::Core {
  Options opts;
  std::vector<LogDir*> dirs;
  mutable std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  bool check_requested = false;
  std::vector<std::shared_ptr<Registration>> regs;
  std::multimap<std::int64_t, std::filesystem::path> unlink_at;  // mono ms -> file
  Stats stats;
  std::thread thread;

  void schedule(std::vector<std::filesystem::path> files, std::int64_t delay_ms, bool from_log) {
    if (files.empty()) return;
    std::lock_guard lk(mu);
    std::int64_t due = mono_ms() + std::max<std::int64_t>(0, delay_ms);
    if (from_log) stats.files_renamed += files.size();
    for (auto& f : files)
      unlink_at.emplace(due, std::move(f));
    cv.notify_all();
  }

  void unlink_due(std::int64_t now, bool all) {
    std::vector<std::filesystem::path> due;
    {
      std::lock_guard lk(mu);
      auto end = all ? unlink_at.end() : unlink_at.upper_bound(now);
      for (auto it = unlink_at.begin(); it != end; ++it)
        due.push_back(std::move(it->second));
      unlink_at.erase(unlink_at.begin(), end);
    }
    std::uint64_t n = 0;
    for (const auto& f : due) {
      // Directories are partitions of deleted topics ("<topic>-<p>.<id>-delete").
      std::error_code ec;
      if (std::filesystem::is_directory(f, ec)) {
        std::filesystem::remove_all(f, ec);
        if (ec) {
          LOG_WARN("remove %s: %s", f.c_str(), ec.message().c_str());
        } else {
          ++n;
        }
      } else if (::unlink(f.c_str()) == 0 || errno == ENOENT) {
        ++n;
      } else {
        LOG_WARN("unlink %s: %s", f.c_str(), std::strerror(errno));
      }
    }
    if (n) {
      std::lock_guard lk(mu);
      stats.files_unlinked += n;
    }
  }

  static void pass(const std::shared_ptr<Core>& core) {
    std::vector<std::shared_ptr<Registration>> regs;
    {
      std::lock_guard lk(core->mu);
      regs = core->regs;
      ++core->stats.passes;
    }
    for (auto& reg : regs) {
      reg->reactor->post_fn([core, reg] {
        if (!reg->active) return;
        std::int64_t now = wall_ms();
        auto files = reg->log->apply_retention(now);
        reg->log->maybe_roll(now);
        core->schedule(std::move(files), reg->log->config().file_delete_delay_ms, true);
        std::lock_guard lk(core->mu);
        ++core->stats.log_checks;
      });
    }
  }

  void run(const std::shared_ptr<Core>& self) {
    set_thread_name("retention");
    std::int64_t next_check = mono_ms() + opts.check_interval_ms;
    std::int64_t next_ckpt = mono_ms() + opts.checkpoint_interval_ms;
    std::unique_lock lk(mu);
    while (!stop) {
      std::int64_t wake = std::min(next_check, next_ckpt);
      if (!unlink_at.empty()) wake = std::min(wake, unlink_at.begin()->first);
      std::int64_t wait = wake - mono_ms();
      if (wait > 0 && !check_requested) {
        cv.wait_for(lk, std::chrono::milliseconds(wait));
        continue;  // re-evaluate: stop, a request, or a new earliest deadline
      }
      bool do_check = check_requested || mono_ms() >= next_check;
      check_requested = false;
      lk.unlock();
      std::int64_t now = mono_ms();
      if (do_check) {
        pass(self);
        next_check = now + opts.check_interval_ms;
      }
      unlink_due(now, false);
      if (now >= next_ckpt) {
        for (LogDir* d : dirs) {
          auto r = d->write_checkpoints();
          std::lock_guard g(mu);
          if (r) {
            ++stats.checkpoint_writes;
          } else {
            ++stats.checkpoint_errors;
            LOG_ERROR("writing checkpoints of %s: %s", d->root().c_str(), r.error().detail.c_str());
          }
        }
        next_ckpt = now + opts.checkpoint_interval_ms;
      }
      lk.lock();
    }
  }
};

RetentionDeleter::RetentionDeleter(Options opts, std::vector<LogDir*> dirs)
    : core_(std::make_shared<Core>()) {
  core_->opts = opts;
  core_->opts.check_interval_ms = std::max<std::int64_t>(1, opts.check_interval_ms);
  core_->opts.checkpoint_interval_ms = std::max<std::int64_t>(1, opts.checkpoint_interval_ms);
  core_->dirs = std::move(dirs);
  // Deleted partitions whose removal a stop or a power cut interrupted.
  for (LogDir* d : core_->dirs)
    core_->schedule(d->left_to_delete(), 0, false);
}

RetentionDeleter::~RetentionDeleter() {
  stop();
}

void RetentionDeleter::start() {
  if (core_->thread.joinable()) return;
  {
    std::lock_guard lk(core_->mu);
    core_->stop = false;
  }
  core_->thread = std::thread([core = core_] { core->run(core); });
}

void RetentionDeleter::stop() {
  {
    std::lock_guard lk(core_->mu);
    core_->stop = true;
    core_->cv.notify_all();
  }
  if (core_->thread.joinable()) core_->thread.join();
  core_->unlink_due(0, true);
}

std::shared_ptr<RetentionDeleter::Registration> RetentionDeleter::add(Reactor& r, Log& log) {
  auto reg = std::make_shared<Registration>();
  reg->reactor = &r;
  reg->log = &log;
  std::lock_guard lk(core_->mu);
  core_->regs.push_back(reg);
  return reg;
}

void RetentionDeleter::remove(const std::shared_ptr<Registration>& reg) {
  reg->active = false;  // tasks already posted see this on the same thread
  std::lock_guard lk(core_->mu);
  std::erase(core_->regs, reg);
}

void RetentionDeleter::check_now() {
  std::lock_guard lk(core_->mu);
  core_->check_requested = true;
  core_->cv.notify_all();
}

void RetentionDeleter::schedule_unlink(std::vector<std::filesystem::path> files,
                                       std::int64_t delay_ms) {
  core_->schedule(std::move(files), delay_ms, false);
}

RetentionDeleter::Stats RetentionDeleter::stats() const {
  std::lock_guard lk(core_->mu);
  return core_->stats;
}

}  // namespace samsa::io
