// The cluster side of replication::Controller, on the active controller: BrokerRegistration,
// BrokerHeartbeat, AlterPartition and ElectLeaders through ControllerState (their records
// committed before the answer), and session expiry and leader rebalance on a timer.
#include <algorithm>

#include "base/clock.h"
#include "base/log.h"
#include "replication/controller.h"
#include "replication/controller_internal.h"

namespace samsa::replication {

using kafka::ErrorCode;

void Controller::register_broker(const BrokerRegistration& reg,
                                 std::function<void(RegistrationAnswer)> done) {
  if (opts_.mode == Mode::single) {
    done(RegistrationAnswer{ErrorCode::not_controller, -1});
    return;
  }
  when_active(
      [this, reg, done]() {
        auto p = state_->register_broker(reg, wall_ms());
        if (p.answer.error == ErrorCode::none)
          LOG_INFO("broker %d registers (epoch %lld, %zu records)", reg.broker_id,
                   static_cast<long long>(p.answer.broker_epoch), p.records.size());
        if (p.records.empty()) {
          done(p.answer);
          return;
        }
        commit(std::move(p.records), {}, [answer = p.answer, done](ErrorCode why) {
          done(why == ErrorCode::none ? answer : RegistrationAnswer{why, -1});
        });
      },
      [done] {
        done(RegistrationAnswer{ErrorCode::not_controller, -1});
      });
}

void Controller::broker_heartbeat(const Heartbeat& hb, std::function<void(HeartbeatAnswer)> done) {
  auto refuse = [done] {
    HeartbeatAnswer a;
    a.error = ErrorCode::not_controller;
    done(a);
  };
  if (opts_.mode == Mode::single) {
    refuse();
    return;
  }
  when_active(
      [this, hb, done]() {
        const bool was_fenced = [&] {
          auto it = state_->image().brokers().find(hb.broker_id);
          return it == state_->image().brokers().end() || it->second.fenced;
        }();
        auto p = state_->heartbeat(hb, wall_ms());
        if (was_fenced && !p.answer.is_fenced)
          LOG_INFO("broker %d is caught up (metadata offset %lld): unfenced", hb.broker_id,
                   static_cast<long long>(hb.current_metadata_offset));
        if (p.records.empty()) {
          done(p.answer);
          return;
        }
        commit(std::move(p.records), {}, [answer = p.answer, done](ErrorCode why) {
          HeartbeatAnswer a = answer;
          a.error = why;
          done(a);
        });
      },
      std::move(refuse));
}

void Controller::alter_partition(std::vector<AlterPartitionItem> items,
                                 std::function<void(std::vector<AlterPartitionAnswer>)> done) {
  const std::size_t n = items.size();
  auto refuse = [n, done] {
    done(std::vector<AlterPartitionAnswer>(
        n, AlterPartitionAnswer{0, ErrorCode::not_controller, -1, -1, {}, -1}));
  };
  if (opts_.mode == Mode::single) {
    refuse();
    return;
  }
  when_active(
      [this, items = std::move(items), done]() {
        std::vector<AlterPartitionAnswer> answers;
        answers.reserve(items.size());
        std::vector<MetadataRecord> records;
        for (const auto& it : items) {
          auto p = state_->alter_partition(it);
          if (p.answer.error == ErrorCode::none && !p.records.empty()) {
            const TopicState* t = state_->image().topic(it.topic_id);
            LOG_INFO("leader %d: ISR of %s-%d is now %zu replicas (partition epoch %d)",
                     it.broker_id, t ? t->name.c_str() : uuid_to_string(it.topic_id).c_str(),
                     it.partition, p.answer.isr.size(), p.answer.partition_epoch);
          }
          for (auto& r : p.records)
            records.push_back(std::move(r));
          answers.push_back(std::move(p.answer));
        }
        if (records.empty()) {
          done(std::move(answers));
          return;
        }
        // All the request's changes in one batch: they commit (or fail) together.
        commit(std::move(records), {}, [answers = std::move(answers), done](ErrorCode why) mutable {
          for (auto& a : answers)
            if (a.error == ErrorCode::none) a.error = why;
          done(std::move(answers));
        });
      },
      std::move(refuse));
}

void Controller::elect_leaders(
    bool unclean, std::optional<std::vector<std::pair<std::string, std::int32_t>>> which,
    std::function<void(kafka::ErrorCode, std::vector<ElectionResult>)> done) {
  if (opts_.mode == Mode::single) {
    // A single node: each partition's one replica leads it already.
    std::vector<ElectionResult> out;
    if (which) {
      for (const auto& [name, part] : *which) {
        const TopicState* t = image_->topic(name);
        const bool known = t && part >= 0 && static_cast<std::size_t>(part) < t->partitions.size();
        out.push_back(
            {name, part,
             known ? ErrorCode::election_not_needed : ErrorCode::unknown_topic_or_partition,
             known ? "" : "no such partition"});
      }
    }
    done(ErrorCode::none, std::move(out));
    return;
  }
  when_active(
      [this, unclean, which = std::move(which), done]() {
        auto p = state_->elect_leaders(unclean, which ? &*which : nullptr);
        std::size_t elected = 0;
        for (const auto& r : p.answer)
          if (r.error == ErrorCode::none) ++elected;
        if (elected)
          LOG_INFO("ElectLeaders (%s): %zu partitions get a new leader",
                   unclean ? "unclean" : "preferred", elected);
        if (p.records.empty()) {
          done(ErrorCode::none, std::move(p.answer));
          return;
        }
        commit(std::move(p.records), {},
               [answer = std::move(p.answer), done](ErrorCode why) mutable {
                 done(why, std::move(answer));
               });
      },
      [done] { done(ErrorCode::not_controller, {}); });
}

void Controller::unregister_broker(std::int32_t id, std::function<void(UnregisterAnswer)> done) {
  when_active(
      [this, id, done]() {
        auto p = state_->unregister_broker(id);
        if (p.records.empty()) {
          done(p.answer);
          return;
        }
        LOG_INFO("broker %d unregistered", id);
        commit(std::move(p.records), {}, [done](ErrorCode why) {
          done(why == ErrorCode::none ? UnregisterAnswer{}
                                      : UnregisterAnswer{why, "The change was not committed."});
        });
      },
      [done] {
        done({ErrorCode::not_controller, ""});
      });
}

void Controller::on_tick() {
  if (!active_ || opts_.mode == Mode::single) return;  // rearmed at the next activation
  const std::int64_t now = wall_ms();
  auto fenced_before = state_->image().brokers();
  auto records = state_->tick(now);
  if (!records.empty()) {
    for (const auto& [id, b] : state_->image().brokers()) {
      auto it = fenced_before.find(id);
      if (b.fenced && it != fenced_before.end() && !it->second.fenced)
        LOG_WARN("broker %d missed its heartbeats for %lld ms: fenced, its leaderships move", id,
                 static_cast<long long>(opts_.session_timeout_ms));
    }
    commit(std::move(records), {}, [](ErrorCode why) {
      if (why == ErrorCode::kafka_storage_error)
        LOG_ERROR("metadata: fencing records could not be written");
    });
  }
  // auto.leader.rebalance.enable: leaderships go back to their preferred replicas (a broker
  // that restarted after a failover leads its share again).
  const std::int64_t mono = mono_ms();
  if (opts_.auto_leader_rebalance && mono >= next_rebalance_ms_) {
    next_rebalance_ms_ = mono + opts_.leader_imbalance_check_ms;
    auto moves = state_->rebalance_leaders();
    if (!moves.empty()) {
      LOG_INFO("auto leader rebalance: %zu partitions back to their preferred leaders",
               moves.size());
      commit(std::move(moves), {}, [](ErrorCode why) {
        if (why == ErrorCode::kafka_storage_error)
          LOG_ERROR("metadata: leader rebalance records could not be written");
      });
    }
  }
  reactor_.arm(&tick_, mono_ns() + kTickMs * 1'000'000);
}

void Controller::when_applied(std::int64_t version, std::function<void()> fn,
                              std::int64_t max_wait_ms) {
  const std::int64_t expire = max_wait_ms < 0 ? INT64_MAX : mono_ms() + max_wait_ms;
  waiters_.push_back(Waiter{version, std::move(fn), expire});
  run_waiters();
  if (expire != INT64_MAX) arm_raft_timer(expire);  // drive() expires it
}

std::int64_t Controller::expire_waiters(std::int64_t now_ms) {
  std::vector<Waiter> due;
  std::int64_t next = INT64_MAX;
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (it->expire_ms <= now_ms) {
      due.push_back(std::move(*it));
      it = waiters_.erase(it);
    } else {
      next = std::min(next, it->expire_ms);
      ++it;
    }
  }
  for (auto& w : due)
    w.fn();
  return next;
}

}  // namespace samsa::replication
