// Catching a stalled reactor in the act. A reactor times its own turns
// (Reactor::Options::stall_threshold_ns) and counts the long ones, but once a turn has ended
// its stack is gone. The watch is a thread ("stall-watch") that looks at every watched
// reactor once a period; a reactor whose current turn has run past its threshold gets a signal,
// and the handler, on the reactor's own thread, records the stack inside the turn. The reactor
// logs it when the turn ends. Turns shorter than threshold + period may end before the watch
// looks: they are counted without a stack.
//
// One watch per process (it owns the signal, SIGRTMIN + 7); its owner (the broker) starts it
// before watching reactors and stops it after they are gone.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace samsa::io {

class Reactor;

class StallWatch {
 public:
  explicit StallWatch(std::int64_t period_ns) : period_ns_(period_ns) {}
  ~StallWatch() { stop(); }
  StallWatch(const StallWatch&) = delete;
  StallWatch& operator=(const StallWatch&) = delete;

  // Installs the signal handler and starts the thread.
  void start();
  void stop();
  // Any thread. A watched reactor must be unwatched before it is destroyed.
  void watch(Reactor* r);
  void unwatch(Reactor* r);

  std::uint64_t signals_sent() const { return sent_; }

 private:
  void loop();
  static void on_signal(int);

  const std::int64_t period_ns_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::vector<Reactor*> reactors_;
  std::thread thread_;
  std::uint64_t sent_ = 0;  // under mu_
};

}  // namespace samsa::io
