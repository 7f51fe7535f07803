// One io_uring event loop per thread. Everything a reactor owns (connections, partition logs)
// is touched only by its thread; other threads hand it work through post().
//
// A loop turn: reap completions → run deferred tasks and remote tasks → fire due timers →
// run turn-end hooks (group commit queues its write+fdatasync SQEs here) → poll the device, if
// a poller is set → submit and wait.
// So every append that arrives within one turn shares one submission.
#pragma once

#include <liburing.h>

#include <atomic>
#include <cstdint>
#include <expected>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/histogram.h"
#include "base/mpsc_queue.h"
#include "io/open_files.h"

namespace samsa::io {

// Every SQE a reactor submits carries a pointer to one of these as user_data; the reactor calls
// fn with the CQE's result and flags. Owners embed it (no allocation per operation).
struct Completion {
  using Fn = void (*)(Completion* self, int res, std::uint32_t flags);
  Fn fn = nullptr;
};

// A unit of work run on a reactor thread (from post() or defer()).
struct Task : MpscNode {
  using Fn = void (*)(Task* self);
  Fn fn = nullptr;
  // Frees a task the reactor is destroyed with, without running it (null: not the reactor's
  // to free, e.g. a task embedded in its owner).
  Fn drop = nullptr;
  Task* local_next = nullptr;
};

// Runs once at the end of the loop turn in which it was queued, before submission.
struct TurnHook {
  virtual void on_turn_end() = 0;
  bool queued = false;
  TurnHook* hook_next = nullptr;

 protected:
  ~TurnHook() = default;
};

// A device polled once per loop turn, after the turn-end hooks (the DPDK backend's poll-mode
// driver). poll() returns true when it found work: the reactor then does not block. When it
// found none the reactor sleeps at most idle_wait_ns() (0: poll again at once; -1: until a
// completion, a task or a timer), so the poller decides how it sleeps, e.g. by arming a poll
// on the device's descriptor first.
struct Poller {
  virtual bool poll() = 0;
  virtual std::int64_t idle_wait_ns() = 0;

 protected:
  ~Poller() = default;
};

// A one-shot timer on the reactor's monotonic clock (base/clock.h mono_ns()).
struct Timer {
  using Fn = void (*)(Timer* self);
  Fn fn = nullptr;
  std::int64_t deadline_ns = 0;
  std::size_t heap_index = SIZE_MAX;  // SIZE_MAX when not armed
  bool armed() const { return heap_index != SIZE_MAX; }
};

class Reactor {
 public:
  struct Options {
    std::string name = "reactor";
    unsigned sq_entries = 1024;
    // Upper bound on io_uring's bounded worker threads (file I/O, fdatasync); 0: kernel default.
    unsigned io_workers = 64;
    // A turn of the loop (completions, tasks, timers, hooks, the poller: everything between two
    // entries into the kernel) that runs longer is a stall: counted, and logged at most every
    // few seconds, with the stack io::StallWatch caught it in when one watches this reactor.
    // 0: turns are not timed.
    std::int64_t stall_threshold_ns = 0;
    // Once a turn has run this long, completions not reaped yet (a large request's receive
    // buffers) and work that can be split (io::TurnQueue) wait for the next turn, so one large
    // request does not hold every other connection, the timers and the group commit back.
    // 0: never yields.
    std::int64_t turn_budget_ns = 500'000;
  };

  // Must be called on the thread that will run the loop (the ring is single-issuer).
  // Returns -errno on failure.
  static std::expected<std::unique_ptr<Reactor>, int> create(Options opts);
  ~Reactor();
  Reactor(const Reactor&) = delete;
  Reactor& operator=(const Reactor&) = delete;

  // The reactor running on the calling thread, or nullptr.
  static Reactor* current();
  const std::string& name() const { return name_; }

  io_uring* ring() { return &ring_; }
  // A fresh SQE with user_data set to c. Never null: flushes the SQ to the kernel when full.
  io_uring_sqe* sqe(Completion* c);
  // An SQE whose completion is ignored (e.g. cancellations).
  io_uring_sqe* sqe_noreply();

  // Runs until stop() is called (from any thread).
  void run();
  // One loop turn; waits at most timeout_ns for a completion (0: poll; -1: until something).
  void run_once(std::int64_t timeout_ns);
  // Runs turns until pred() holds or timeout_ns elapses; returns pred(). For tests and
  // synchronous start-up code.
  template <class Pred>
  bool run_until(Pred pred, std::int64_t timeout_ns = 30'000'000'000);
  void stop();
  bool stopping() const { return stop_.load(std::memory_order_acquire); }

  // Any thread: queue t to run on this reactor's thread.
  void post(Task* t);
  // Any thread: run f on this reactor's thread (allocates; not for per-record work).
  template <class F>
  void post_fn(F&& f);
  // This thread: run t later in this turn or the next one (never re-entrantly).
  void defer(Task* t);
  template <class F>
  void defer_fn(F&& f);
  // This thread: run h at the end of this turn.
  void at_turn_end(TurnHook* h);

  // This thread: p is polled every turn from now on (nullptr: no poller). One at a time.
  void set_poller(Poller* p) { poller_ = p; }
  Poller* poller() const { return poller_; }

  // This thread: arm (or re-arm) t to fire at deadline_ns (mono_ns()).
  void arm(Timer* t, std::int64_t deadline_ns);
  void disarm(Timer* t);

  // Where this reactor sends blocking file work (io/offload.h); null: done inline.
  void set_offload(class Offload* o) { offload_ = o; }
  class Offload* offload() const {
    return offload_;
  }

  std::uint64_t turns() const { return turns_; }
  std::uint64_t submits() const { return submits_; }
  // Nanoseconds spent blocked in the kernel waiting for completions; the rest of the thread's
  // life is loop work (utilisation = 1 - idle / elapsed).
  std::uint64_t idle_ns() const { return idle_ns_; }
  // Turns longer than Options::stall_threshold_ns, and the longest turn so far (0 untimed).
  std::uint64_t stalls() const { return stalls_; }
  std::uint64_t stalls_with_stack() const { return stalls_with_stack_; }
  std::int64_t longest_turn_ns() const { return longest_turn_ns_; }
  // This thread: the current turn has run longer than Options::turn_budget_ns (one clock read).
  bool turn_budget_spent() const {
    const std::int64_t began = turn_began_ns_.load(std::memory_order_relaxed);
    return turn_budget_ns_ > 0 && began != 0 && mono_ns() - began > turn_budget_ns_;
  }

  // Storage metrics of the logs this reactor drives, recorded by them on this thread (plain
  // integers: metrics are collected by a task posted here).
  struct IoMetrics {
    LatencyHistogram fsync;               // linked write+fdatasync submitted -> sync done
    CountHistogram group_commit_appends;  // appends per group commit
    std::uint64_t group_commit_bytes = 0;
  };
  IoMetrics& io_metrics() { return io_metrics_; }

  // The segment files of the logs this reactor drives, within their descriptor budget.
  OpenFiles& open_files() { return open_files_; }

 private:
  Reactor() = default;
  void reap();
  void run_tasks();
  void fire_timers();
  void run_hooks();
  void arm_wakeup();
  static void on_wakeup(Completion* c, int res, std::uint32_t flags);
  void heap_up(std::size_t i);
  void heap_down(std::size_t i);
  void heap_swap(std::size_t a, std::size_t b);
  void end_turn(std::int64_t now);
  void log_stall(std::int64_t turn_ns, int depth);

  // Read by io::StallWatch from its own thread; the stack is written by its signal handler
  // on this reactor's thread, inside the turn it interrupted.
  friend class StallWatch;
  std::atomic<std::int64_t> turn_began_ns_{0};   // 0 while waiting in the kernel
  std::atomic<std::int64_t> caught_turn_ns_{0};  // the turn the watch signalled
  int tid_ = 0;
  static constexpr int kStallStackDepth = 48;
  void* stall_stack_[kStallStackDepth] = {};
  volatile int stall_stack_depth_ = 0;
  std::int64_t stall_stack_at_ns_ = 0;  // how long the turn had run when the stack was taken
  std::int64_t stall_threshold_ns_ = 0;
  std::int64_t turn_budget_ns_ = 0;
  std::uint64_t stalls_ = 0;
  std::int64_t longest_logged_ns_ = 0;
  std::uint64_t stalls_with_stack_ = 0;
  std::int64_t longest_turn_ns_ = 0;
  std::int64_t next_stall_log_ns_ = 0;

  io_uring ring_{};
  std::string name_;
  int event_fd_ = -1;
  std::uint64_t event_buf_ = 0;
  struct Wakeup : Completion {
    Reactor* owner = nullptr;
  } wakeup_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> notified_{false};
  MpscQueue remote_;
  Task* local_head_ = nullptr;
  Task* local_tail_ = nullptr;
  TurnHook* hooks_ = nullptr;
  Poller* poller_ = nullptr;
  std::vector<Timer*> heap_;
  class Offload* offload_ = nullptr;
  std::uint64_t turns_ = 0;
  std::uint64_t submits_ = 0;
  std::uint64_t idle_ns_ = 0;
  IoMetrics io_metrics_;
  OpenFiles open_files_;
  bool defer_taskrun_ = false;
};

namespace detail {
template <class F>
struct FnTask : Task {
  explicit FnTask(F&& f) : f_(std::forward<F>(f)) {
    fn = [](Task* t) {
      auto* self = static_cast<FnTask*>(t);
      self->f_();
      delete self;
    };
    drop = [](Task* t) { delete static_cast<FnTask*>(t); };
  }
  std::decay_t<F> f_;
};
}  // namespace detail

template <class F>
void Reactor::post_fn(F&& f) {
  post(new detail::FnTask<F>(std::forward<F>(f)));
}

template <class F>
void Reactor::defer_fn(F&& f) {
  defer(new detail::FnTask<F>(std::forward<F>(f)));
}

template <class Pred>
bool Reactor::run_until(Pred pred, std::int64_t timeout_ns) {
  const std::int64_t end = mono_ns() + timeout_ns;
  while (!pred()) {
    std::int64_t left = end - mono_ns();
    if (left <= 0) return pred();
    run_once(left < 10'000'000 ? left : 10'000'000);
  }
  return true;
}

}  // namespace samsa::io
