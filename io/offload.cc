#include "io/offload.h"

#include <condition_variable>
#include <mutex>

#include "base/thread.h"

namespace samsa::io {

std::unique_ptr<Offload> Offload::start(const std::string& name, std::size_t threads,
                                        std::string* error) {
  std::unique_ptr<Offload> o(new Offload());
  for (std::size_t i = 0; i < std::max<std::size_t>(threads, 1); ++i) {
    auto w = std::make_unique<Worker>();
    std::mutex mu;
    std::condition_variable cv;
    bool ready = false;
    std::string err;
    const std::string tname = name + "-" + std::to_string(i);
    Worker* raw = w.get();
    w->thread = std::thread([&, raw, tname] {
      set_thread_name(tname);
      auto r = Reactor::create({.name = tname, .sq_entries = 64, .io_workers = 0});
      {
        std::lock_guard lk(mu);
        if (r) {
          raw->reactor = std::move(*r);
        } else {
          err = tname + ": io_uring setup failed (" + std::to_string(r.error()) + ")";
        }
        ready = true;
        // Under the lock: the starting thread may destroy cv as soon as it sees `ready`.
        cv.notify_all();
      }
      if (raw->reactor) raw->reactor->run();
    });
    {
      std::unique_lock lk(mu);
      cv.wait(lk, [&] { return ready; });
    }
    if (!err.empty()) {
      w->thread.join();
      if (error) *error = err;
      return nullptr;
    }
    o->workers_.push_back(std::move(w));
  }
  return o;
}

Offload::~Offload() {
  // Everything queued before stop() runs first: the stop itself is queued behind it.
  for (auto& w : workers_)
    w->reactor->post_fn([r = w->reactor.get()] { r->stop(); });
  for (auto& w : workers_)
    if (w->thread.joinable()) w->thread.join();
}

}  // namespace samsa::io
