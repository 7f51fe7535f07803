// io::Offload — threads for the rare file work a reactor must not block on (DESIGN.md decision
// 12): the index files of a rolled segment, producer snapshots, the leader-epoch checkpoint.
// The work runs on an offload thread ("offload-N", each running its own io::Reactor loop) and
// its completion runs back on the reactor that asked, through that reactor's task queue.
// Work submitted with the same key runs in submission order (one thread per key), so the
// successive versions of one file are written in order.
//
// A reactor finds its Offload through Reactor::offload(). Without one (unit tests, tools)
// offload() runs the work at once on the calling thread and its completion on the next loop
// turn: the caller sees the same asynchronous shape either way.
//
// Threads: the offload threads, owned by the Offload (joined by its destructor, after the
// work already queued has run).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "io/reactor.h"

namespace samsa::io {

class Offload {
 public:
  // Starts `threads` threads named "<name>-<i>"; nullptr with a message when a ring cannot be
  // set up.
  static std::unique_ptr<Offload> start(const std::string& name, std::size_t threads,
                                        std::string* error);
  ~Offload();
  Offload(const Offload&) = delete;
  Offload& operator=(const Offload&) = delete;

  // Any thread: work() on the offload thread for key; then done(result) on home's thread.
  template <class Work, class Done>
  void run(Reactor& home, std::uint64_t key, Work work, Done done);

  std::size_t threads() const { return workers_.size(); }
  // Jobs submitted and finished (for tests and metrics; relaxed).
  std::uint64_t submitted() const { return submitted_.load(std::memory_order_relaxed); }

 private:
  struct Worker {
    std::thread thread;
    std::unique_ptr<Reactor> reactor;
  };
  Offload() = default;
  Reactor& worker_for(std::uint64_t key) { return *workers_[key % workers_.size()]->reactor; }

  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<std::uint64_t> submitted_{0};
};

template <class Work, class Done>
void Offload::run(Reactor& home, std::uint64_t key, Work work, Done done) {
  submitted_.fetch_add(1, std::memory_order_relaxed);
  worker_for(key).post_fn([&home, work = std::move(work), done = std::move(done)]() mutable {
    auto result = work();
    home.post_fn([done = std::move(done), result = std::move(result)]() mutable {
      done(std::move(result));
    });
  });
}

// The reactor's Offload if it has one, else inline: see the header comment. Must be called on
// home's thread.
template <class Work, class Done>
void offload(Reactor& home, std::uint64_t key, Work work, Done done) {
  if (Offload* o = home.offload()) {
    o->run(home, key, std::move(work), std::move(done));
    return;
  }
  auto result = work();
  home.defer_fn(
      [done = std::move(done), result = std::move(result)]() mutable { done(std::move(result)); });
}

}  // namespace samsa::io
