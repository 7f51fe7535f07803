#include "io/reactor.h"

#include <execinfo.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdlib>
#include <string>

#include "base/clock.h"
#include "base/log.h"

namespace samsa::io {
namespace {
thread_local Reactor* t_current = nullptr;
}

std::expected<std::unique_ptr<Reactor>, int> Reactor::create(Options opts) {
  std::unique_ptr<Reactor> r(new Reactor());
  r->name_ = std::move(opts.name);
  r->tid_ = static_cast<int>(::gettid());
  r->stall_threshold_ns_ = opts.stall_threshold_ns;
  r->turn_budget_ns_ = opts.turn_budget_ns;
  io_uring_params p{};
  // DEFER_TASKRUN runs completion work only when we enter the kernel to wait, on our thread:
  // fewer interrupts of the loop. Needs 6.1; fall back to plain rings elsewhere.
  p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_CQSIZE;
  p.cq_entries = opts.sq_entries * 4;
  int rc = io_uring_queue_init_params(opts.sq_entries, &r->ring_, &p);
  if (rc == -EINVAL) {
    p = {};
    p.flags = IORING_SETUP_CQSIZE;
    p.cq_entries = opts.sq_entries * 4;
    rc = io_uring_queue_init_params(opts.sq_entries, &r->ring_, &p);
  } else if (rc == 0) {
    r->defer_taskrun_ = true;
  }
  if (rc < 0) return std::unexpected(rc);
  // fdatasync and buffered file writes run on io_uring's worker threads, at most 4 per CPU by
  // default. Many logs syncing at once (one fdatasync per dirty partition per turn) need them
  // concurrently: the file system batches concurrent syncs into one journal commit.
  unsigned workers[2] = {opts.io_workers, 0};
  if (opts.io_workers) io_uring_register_iowq_max_workers(&r->ring_, workers);
  r->event_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (r->event_fd_ < 0) {
    int e = errno;
    io_uring_queue_exit(&r->ring_);
    return std::unexpected(-e);
  }
  r->wakeup_.fn = &Reactor::on_wakeup;
  r->wakeup_.owner = r.get();
  r->arm_wakeup();
  t_current = r.get();
  return r;
}

Reactor::~Reactor() {
  // Tasks still queued are not run: their owners (connections, shards) may already be gone.
  // Those the reactor allocated (post_fn/defer_fn closures) are freed; tasks embedded in
  // other objects belong to those objects.
  while (auto* n = remote_.pop())
    defer(static_cast<Task*>(n));
  for (Task* t = local_head_; t;) {
    Task* next = t == local_tail_ ? nullptr : t->local_next;
    if (t->drop) t->drop(t);
    t = next;
  }
  local_head_ = local_tail_ = nullptr;
  if (t_current == this) t_current = nullptr;
  io_uring_queue_exit(&ring_);
  if (event_fd_ >= 0) ::close(event_fd_);
}

Reactor* Reactor::current() {
  return t_current;
}

io_uring_sqe* Reactor::sqe(Completion* c) {
  io_uring_sqe* s = io_uring_get_sqe(&ring_);
  while (!s) {
    io_uring_submit(&ring_);
    ++submits_;
    s = io_uring_get_sqe(&ring_);
  }
  io_uring_sqe_set_data(s, c);
  return s;
}

io_uring_sqe* Reactor::sqe_noreply() {
  return sqe(nullptr);
}

void Reactor::arm_wakeup() {
  io_uring_prep_read(sqe(&wakeup_), event_fd_, &event_buf_, sizeof event_buf_, 0);
}

void Reactor::on_wakeup(Completion* c, int res, std::uint32_t) {
  Reactor* self = static_cast<Wakeup*>(c)->owner;
  if (res < 0 && res != -EINTR && res != -EAGAIN) {
    LOG_ERROR("%s: eventfd read failed: %d", self->name_.c_str(), res);
  }
  // Reset before draining so a post() racing with the drain writes the eventfd again.
  self->notified_.exchange(false, std::memory_order_acq_rel);
  self->arm_wakeup();
}

void Reactor::post(Task* t) {
  remote_.push(t);
  if (!notified_.exchange(true, std::memory_order_acq_rel)) {
    std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(event_fd_, &one, sizeof one);
  }
}

void Reactor::stop() {
  stop_.store(true, std::memory_order_release);
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(event_fd_, &one, sizeof one);
}

void Reactor::defer(Task* t) {
  t->local_next = nullptr;
  if (local_tail_) {
    local_tail_->local_next = t;
  } else {
    local_head_ = t;
  }
  local_tail_ = t;
}

void Reactor::at_turn_end(TurnHook* h) {
  if (h->queued) return;
  h->queued = true;
  h->hook_next = hooks_;
  hooks_ = h;
}

void Reactor::reap() {
  io_uring_cqe* cqe;
  unsigned head;
  unsigned n = 0;
  io_uring_for_each_cqe(&ring_, head, cqe) {
    ++n;
    auto* c = static_cast<Completion*>(io_uring_cqe_get_data(cqe));
    if (c && c->fn) c->fn(c, cqe->res, cqe->flags);
    // A burst of completions (a 16 MiB produce request arrives as hundreds of receive
    // buffers, each copied into its frame) is also split at the turn budget: the rest stay in
    // the completion ring, in order, and the next turn takes them without waiting.
    if ((n & 7) == 0 && turn_budget_spent()) break;
  }
  if (n) io_uring_cq_advance(&ring_, n);
}

void Reactor::run_tasks() {
  while (auto* n = remote_.pop())
    defer(static_cast<Task*>(n));
  // Only the tasks present now: tasks deferred while running wait for the next turn, so a
  // task that re-defers itself cannot starve I/O.
  Task* t = local_head_;
  Task* end = local_tail_;
  local_head_ = local_tail_ = nullptr;
  while (t) {
    Task* next = t->local_next;
    bool last = t == end;
    t->fn(t);
    if (last) break;
    t = next;
  }
}

void Reactor::run_hooks() {
  // Hooks may queue further hooks (e.g. a log that rolls); loop until quiet.
  while (TurnHook* h = hooks_) {
    hooks_ = nullptr;
    while (h) {
      TurnHook* next = h->hook_next;
      h->queued = false;
      h->on_turn_end();
      h = next;
    }
  }
}

void Reactor::run_once(std::int64_t timeout_ns) {
  ++turns_;
  t_current = this;
  reap();
  run_tasks();
  fire_timers();
  run_hooks();
  const bool busy = poller_ && poller_->poll();

  std::int64_t wait = timeout_ns;
  // Work the poller queued (tasks, hooks) runs in the next turn without waiting.
  if (local_head_ || hooks_ || busy || stopping() || io_uring_cq_ready(&ring_) > 0) wait = 0;
  if (!heap_.empty()) {
    std::int64_t until = heap_[0]->deadline_ns - mono_ns();
    if (until < 0) until = 0;
    if (wait < 0 || until < wait) wait = until;
  }
  if (poller_ && wait != 0) {
    const std::int64_t p = poller_->idle_wait_ns();
    if (p >= 0 && (wait < 0 || p < wait)) wait = p;
  }
  ++submits_;
  const std::int64_t before = mono_ns();
  end_turn(before);
  if (wait == 0) {
    io_uring_submit(&ring_);
    if (defer_taskrun_) io_uring_get_events(&ring_);
    turn_began_ns_.store(before, std::memory_order_relaxed);
  } else {
    turn_began_ns_.store(0, std::memory_order_relaxed);
    // A stall watch's signal that lands here (the turn had just ended) only cuts the wait
    // short: the loop goes round again.
    if (wait < 0) {
      io_uring_submit_and_wait(&ring_, 1);
    } else {
      __kernel_timespec ts{wait / 1'000'000'000, wait % 1'000'000'000};
      io_uring_cqe* cqe = nullptr;
      io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
    }
    const std::int64_t after = mono_ns();
    idle_ns_ += static_cast<std::uint64_t>(after - before);
    turn_began_ns_.store(after, std::memory_order_relaxed);
  }
  reap();
}

// A turn runs from leaving the kernel (or from the first turn) to entering it again; the
// time between run_once calls (run_until's predicate, start-up code) counts too: the loop was
// not serving meanwhile either.
void Reactor::end_turn(std::int64_t now) {
  if (stall_threshold_ns_ <= 0) return;
  const std::int64_t began = turn_began_ns_.load(std::memory_order_relaxed);
  if (began == 0) return;
  const std::int64_t turn = now - began;
  if (turn > longest_turn_ns_) longest_turn_ns_ = turn;
  if (turn > stall_threshold_ns_) {
    ++stalls_;
    // A stack the watch's signal took in an earlier turn (it arrived as that one ended) is
    // not this one's.
    const bool caught = caught_turn_ns_.load(std::memory_order_relaxed) == began;
    const int depth = caught ? stall_stack_depth_ : 0;
    if (depth > 0) ++stalls_with_stack_;
    log_stall(turn, depth);
  }
  stall_stack_depth_ = 0;
}

void Reactor::log_stall(std::int64_t turn_ns, int depth) {
  const std::int64_t now = mono_ns();
  // At most one every 10 s, but the first stack, and a turn over twice as long as any logged
  // before, always: the worst ones are the ones to see (and their count stays logarithmic).
  const bool worse = turn_ns > 2 * longest_logged_ns_;
  if (now < next_stall_log_ns_ && !worse && !(depth > 0 && stalls_with_stack_ == 1)) return;
  next_stall_log_ns_ = now + 10'000'000'000;
  longest_logged_ns_ = std::max(longest_logged_ns_, turn_ns);
  std::string where;
  if (depth > 0) {
    char** names = ::backtrace_symbols(stall_stack_, depth);
    where = "; its stack after " + std::to_string(stall_stack_at_ns_ / 1000) + " us:";
    for (int i = 0; i < depth; ++i) {
      where += "\n    ";
      where += names ? names[i] : "?";
    }
    std::free(names);
  }
  LOG_WARN("%s: a loop turn ran %.2f ms without yielding (stall %" PRIu64 ", threshold %.2f ms)%s",
           name_.c_str(), static_cast<double>(turn_ns) / 1e6, stalls_,
           static_cast<double>(stall_threshold_ns_) / 1e6, where.c_str());
}

void Reactor::run() {
  t_current = this;
  while (!stopping())
    run_once(-1);
  // Let work that is already queued finish its turn (e.g. group commits in flight).
  run_once(0);
}

// ---- timers: an intrusive binary min-heap on deadline ----

void Reactor::arm(Timer* t, std::int64_t deadline_ns) {
  if (t->armed()) disarm(t);
  t->deadline_ns = deadline_ns;
  t->heap_index = heap_.size();
  heap_.push_back(t);
  heap_up(t->heap_index);
}

void Reactor::disarm(Timer* t) {
  if (!t->armed()) return;
  std::size_t i = t->heap_index;
  std::size_t last = heap_.size() - 1;
  if (i != last) heap_swap(i, last);
  heap_.pop_back();
  t->heap_index = SIZE_MAX;
  if (i < heap_.size()) {
    heap_up(i);
    heap_down(i);
  }
}

void Reactor::fire_timers() {
  if (heap_.empty()) return;
  const std::int64_t now = mono_ns();
  while (!heap_.empty() && heap_[0]->deadline_ns <= now) {
    Timer* t = heap_[0];
    disarm(t);
    t->fn(t);
  }
}

void Reactor::heap_swap(std::size_t a, std::size_t b) {
  std::swap(heap_[a], heap_[b]);
  heap_[a]->heap_index = a;
  heap_[b]->heap_index = b;
}

void Reactor::heap_up(std::size_t i) {
  while (i > 0) {
    std::size_t p = (i - 1) / 2;
    if (heap_[p]->deadline_ns <= heap_[i]->deadline_ns) break;
    heap_swap(i, p);
    i = p;
  }
}

void Reactor::heap_down(std::size_t i) {
  for (;;) {
    std::size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < heap_.size() && heap_[l]->deadline_ns < heap_[m]->deadline_ns) m = l;
    if (r < heap_.size() && heap_[r]->deadline_ns < heap_[m]->deadline_ns) m = r;
    if (m == i) break;
    heap_swap(i, m);
    i = m;
  }
}

}  // namespace samsa::io
