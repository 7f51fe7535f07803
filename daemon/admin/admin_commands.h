// The admin socket's commands (DESIGN.md decision 11), registered on the AdminServer:
//   status, reload, drain, flush, config.get, config.set, log.level, metrics,
//   topic.list, topic.describe, topic.create, topic.delete, partition.describe,
//   group.list, group.describe, quorum, broker.*, and testing.stall (only with
//   samsa.testing.hooks=true).
// Each runs on the admin thread and reaches the reactors, the controller and the coordinator
// through their queues (gather() below), answering with whatever arrived in time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/kafka_errors.h"
#include "daemon/admin/admin.h"

namespace samsa::kafka {
struct DescribeQuorumResponse;
}

namespace samsa::daemon {

class Broker;

void register_admin_commands(AdminServer& admin, Broker& broker);
// The topic, partition and group commands (admin_topics.cc).
void register_topic_commands(AdminServer& admin, Broker& broker);
// The controller quorum (admin_quorum.cc).
void register_quorum_command(AdminServer& admin, Broker& broker);
// acl.* and user.* (admin_security.cc).
void register_security_commands(AdminServer& admin, Broker& broker);
// broker.list, broker.describe, broker.drain, broker.unregister (admin_brokers.cc).
void register_broker_commands(AdminServer& admin, Broker& broker);

// Only while serving (or draining; drained too with drained_ok): the broker's threads exist
// and answer. Otherwise answers "unavailable" and returns false.
bool serving(Broker& b, const Reply& r, bool drained_ok = false);
// A Kafka error as an admin error code: its name in lower case.
std::string lower_error(kafka::ErrorCode e);
// DescribeQuorum's answer as the quorum command shows it (admin_quorum.cc): leader, epoch, high
// watermark, max follower lag, voters and observers with their lag and fetch times, the
// voters' endpoints. Ages are taken against now_wall_ms, the answering node's clock.
json::Value quorum_json(const kafka::DescribeQuorumResponse& a, std::int64_t now_wall_ms);

// Asks n targets for a T and collects the answers on the admin thread. start(i, deliver) sends
// the question to target i; deliver(T) may be called from any thread. done gets one slot per
// target, nullopt for those that did not answer within timeout_ms. Call on the admin thread.
template <class T>
void gather(AdminServer& admin, std::size_t n, std::int64_t timeout_ms,
            std::function<void(std::size_t, std::function<void(T)>)> start,
            std::function<void(std::vector<std::optional<T>>)> done) {
  struct State : io::Timer {
    io::Reactor* loop = nullptr;
    std::vector<std::optional<T>> slots;
    std::size_t left = 0;
    bool finished = false;
    std::function<void(std::vector<std::optional<T>>)> done;
    std::shared_ptr<State> self;  // alive while the timer is armed
    void finish() {
      if (finished) return;
      finished = true;
      loop->disarm(this);
      auto keep = std::move(self);
      auto d = std::move(done);
      d(std::move(slots));
    }
  };
  auto st = std::make_shared<State>();
  st->loop = &admin.reactor();
  st->slots.resize(n);
  st->left = n;
  st->done = std::move(done);
  if (n == 0) {
    st->finish();
    return;
  }
  st->self = st;
  st->fn = [](io::Timer* t) { static_cast<State*>(t)->finish(); };
  st->loop->arm(st.get(), mono_ns() + timeout_ms * 1'000'000);
  for (std::size_t i = 0; i < n; ++i) {
    start(i, [&admin, st, i](T v) {
      admin.post([st, i, v = std::move(v)]() mutable {
        if (st->finished) return;
        st->slots[i] = std::move(v);
        if (--st->left == 0) st->finish();
      });
    });
  }
}

// How long a command waits for the broker's threads before answering with what it has.
inline constexpr std::int64_t kGatherTimeoutMs = 3000;

// Argument checks: each getter answers invalid_argument (once) and returns nullopt when the
// argument is missing (if required) or of the wrong type.
class Args {
 public:
  Args(const json::Value& a, const Reply& r) : a_(a), r_(r) {}
  std::optional<std::string> string(const char* name, bool required);
  std::optional<std::int64_t> integer(const char* name, bool required, std::int64_t min,
                                      std::int64_t max);
  const json::Value* object(const char* name, bool required);
  bool failed() const { return failed_; }

 private:
  bool fail(std::string msg);
  const json::Value& a_;
  const Reply& r_;
  bool failed_ = false;
};

}  // namespace samsa::daemon
