#include "io/stall_watch.h"

#include <execinfo.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "base/clock.h"
#include "base/log.h"
#include "base/thread.h"
#include "io/reactor.h"

namespace samsa::io {
namespace {

int stall_signal() {
  return SIGRTMIN + 7;
}

}  // namespace

// The handler runs on the reactor's thread, inside the turn (Reactor::current() is that
// thread's reactor). backtrace() is safe here once it has run before in the process (its
// first call loads libgcc's unwinder: start() makes that call).
void StallWatch::on_signal(int) {
  Reactor* r = Reactor::current();
  if (!r) return;
  const std::int64_t turn = r->turn_began_ns_.load(std::memory_order_relaxed);
  // The turn the watch saw may have ended meanwhile: a stack of another turn would mislead.
  if (turn == 0 || turn != r->caught_turn_ns_.load(std::memory_order_relaxed)) return;
  r->stall_stack_at_ns_ = mono_ns() - turn;
  r->stall_stack_depth_ = ::backtrace(r->stall_stack_, Reactor::kStallStackDepth);
}

void StallWatch::start() {
  void* warm[2];
  (void)::backtrace(warm, 2);
  struct sigaction sa {};
  sa.sa_handler = &StallWatch::on_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  ::sigaction(stall_signal(), &sa, nullptr);
  std::lock_guard lk(mu_);
  stopping_ = false;
  thread_ = std::thread([this] {
    set_thread_name("stall-watch");
    loop();
  });
}

void StallWatch::stop() {
  {
    std::lock_guard lk(mu_);
    if (!thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void StallWatch::watch(Reactor* r) {
  std::lock_guard lk(mu_);
  reactors_.push_back(r);
}

void StallWatch::unwatch(Reactor* r) {
  std::lock_guard lk(mu_);
  std::erase(reactors_, r);
}

void StallWatch::loop() {
  const pid_t pid = ::getpid();
  std::unique_lock lk(mu_);
  while (!cv_.wait_for(lk, std::chrono::nanoseconds(period_ns_), [&] { return stopping_; })) {
    const std::int64_t now = mono_ns();
    for (Reactor* r : reactors_) {
      const std::int64_t began = r->turn_began_ns_.load(std::memory_order_relaxed);
      if (began == 0 || r->stall_threshold_ns_ <= 0 || now - began <= r->stall_threshold_ns_)
        continue;
      // Once a turn: the first look past the threshold tells most about where it is stuck.
      if (r->caught_turn_ns_.exchange(began, std::memory_order_relaxed) == began) continue;
      ::syscall(SYS_tgkill, pid, r->tid_, stall_signal());
      ++sent_;
    }
  }
}

}  // namespace samsa::io
