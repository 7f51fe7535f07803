// The Broker's operations behind the admin socket: start-up progress and summary, drain and
// flush. Kept apart from broker*.cc, which own the threads' lifecycle and settings.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstring>

#include "base/clock.h"
#include "base/log.h"
#include "daemon/admin/admin.h"
#include "daemon/admin/admin_commands.h"
#include "daemon/api/dispatch.h"
#include "daemon/broker.h"

namespace samsa::daemon {

const char* Broker::state_name(State s) {
  switch (s) {
    case State::starting:
      return "starting";
    case State::serving:
      return "serving";
    case State::draining:
      return "draining";
    case State::drained:
      return "drained";
    case State::stopping:
      return "stopping";
  }
  return "?";
}

Config Broker::config() const {
  std::lock_guard lk(config_mu_);
  return config_;
}

std::shared_ptr<const BrokerSettings> Broker::settings() const {
  std::lock_guard lk(config_mu_);
  return settings_;
}

std::string Broker::start_admin() {
  AdminServer::Options o;
  o.socket_path = config_.get_string("samsa.admin.socket");
  o.metrics_listen = config_.get_string("samsa.metrics.listen");
  o.idle_timeout_ms = config_.get_int("samsa.admin.timeout.ms");
  o.command_timeout_ms = o.idle_timeout_ms;
  auto a = AdminServer::start(std::move(o));
  if (!a) return a.error();
  admin_ = std::move(*a);
  register_admin_commands(*admin_, *this);
  return {};
}

namespace {

std::string human_bytes(std::uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

}  // namespace

std::string Broker::progress_line() const {
  std::size_t found = 0, opened = 0, scanned = 0;
  for (const auto& d : log_dirs_) {
    auto r = d->recovery_summary();
    found += r.found;
    opened += r.opened;
    scanned += r.scanned_segments;
  }
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "recovering logs: %zu of %zu partitions opened, %zu segments scanned", opened,
                found, scanned);
  return buf;
}

void Broker::log_recovery_summary() {
  recovery_.clear();
  for (const auto& d : log_dirs_) {
    auto r = d->recovery_summary();
    recovery_.push_back(r);
    const std::string size = std::to_string(r.opened) + " partitions, " +
                             std::to_string(r.segments) + " segments, " + human_bytes(r.bytes);
    if (r.found == 0 && !r.clean) {
      LOG_INFO("log dir %s: no previous data; %s", d->root().c_str(), size.c_str());
    } else if (r.clean && r.scanned_segments == 0) {
      LOG_INFO("log dir %s: %s; previous shutdown was clean, recovery scan skipped",
               d->root().c_str(), size.c_str());
    } else {
      LOG_INFO(
          "log dir %s: %s; previous shutdown was %s: scanned %zu segments, %zu tails "
          "truncated, in %" PRId64 " ms",
          d->root().c_str(), size.c_str(), r.clean ? "clean" : "unclean", r.scanned_segments,
          r.truncated, recovery_ms_);
    }
  }
}

std::string Broker::flush_logs() {
  std::string error;
  for (const auto& d : log_dirs_) {
    int fd = ::open(d->root().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
      error += d->root().string() + ": open: " + std::strerror(errno) + "; ";
      continue;
    }
    // One call syncs every file of the file system: the logs with flush.messages > 1, whose
    // writes are only in the page cache, and everything else.
    if (::syncfs(fd) != 0) error += d->root().string() + ": syncfs: " + std::strerror(errno) + "; ";
    ::close(fd);
    if (auto r = d->write_checkpoints(); !r)
      error += d->root().string() + ": checkpoints: " + r.error().detail + "; ";
  }
  return error;
}

void Broker::drain(std::function<void(DrainResult)> done) {
  struct Drain : io::Timer {
    Broker* b = nullptr;
    io::Reactor* loop = nullptr;
    DrainResult result;
    std::int64_t start_ns = 0;
    std::int64_t deadline_ns = 0;
    std::size_t asked = 0;
    std::size_t answered = 0;
    std::size_t busy = 0;
    bool first = true;
    std::function<void(DrainResult)> done;
    std::shared_ptr<Drain> self;
  };
  auto d = std::make_shared<Drain>();
  d->b = this;
  d->loop = io::Reactor::current();  // the admin thread's
  d->done = std::move(done);
  d->self = d;
  d->start_ns = mono_ns();
  d->deadline_ns = d->start_ns + config().get_int("samsa.shutdown.timeout.ms") * 1'000'000;
  state_.store(State::draining, std::memory_order_release);
  LOG_INFO("draining: no new connections; closing the open ones once their requests are answered");

  // One round: every reactor reports its connections and requests in flight (the first round
  // also stops accepting and asks connections to close once answered). Rounds repeat every
  // 20 ms until nothing is in flight or the shutdown timeout passes.
  d->fn = [](io::Timer* t) {
    auto* d = static_cast<Drain*>(t);
    Broker* b = d->b;
    d->asked = b->reactor_count();
    d->answered = 0;
    d->busy = 0;
    const bool first = d->first;
    d->first = false;
    for (std::size_t i = 0; i < b->reactor_count(); ++i) {
      b->on_reactor(i, [d = d->self, first](ReactorContext& ctx) {
        std::size_t conns = 0, busy = 0;
        if (first) {
          ctx.shutting_down = true;  // long polls answer at once from now on
          for (auto& tr : ctx.transports) {
            conns += tr->connection_count();
            tr->stop_accepting();
            tr->close_all_gracefully();
          }
          while (ctx.parked) {
            ParkedRequest* p = ctx.parked;
            ctx.unpark(p);
            p->expire();
          }
        }
        for (auto& disp : ctx.dispatchers)
          busy += disp->in_flight();
        d->loop->post_fn([d, conns, busy, first] {
          if (first) {
            d->result.connections += conns;
            d->result.in_flight += busy;
          }
          d->busy += busy;
          if (++d->answered < d->asked) return;
          if (d->busy != 0 && mono_ns() < d->deadline_ns) {
            d->loop->arm(d.get(), mono_ns() + 20'000'000);
            return;
          }
          d->result.left = d->busy;
          d->result.flush_error = d->b->flush_logs();
          d->result.elapsed_ms = (mono_ns() - d->start_ns) / 1'000'000;
          d->b->state_.store(State::drained, std::memory_order_release);
          LOG_INFO("drained in %" PRId64 " ms: %zu connections closed, %zu requests unanswered",
                   d->result.elapsed_ms, d->result.connections, d->result.left);
          auto fin = std::move(d->done);
          auto keep = std::move(d->self);
          fin(d->result);
        });
      });
    }
  };
  d->loop->arm(d.get(), mono_ns());
}

}  // namespace samsa::daemon
