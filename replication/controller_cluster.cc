// The cluster side of replication::Controller: on a controller node, BrokerRegistration and
// BrokerHeartbeat through ControllerState (its records committed to __cluster_metadata before
// the answer), session expiry on a timer, and the committed log served to brokers' metadata
// fetches; on a broker node, the image rebuilt from the batches the broker fetched.
#include <algorithm>

#include "base/clock.h"
#include "base/log.h"
#include "replication/controller.h"
#include "replication/controller_internal.h"

namespace samsa::replication {

using kafka::ErrorCode;

void Controller::register_broker(const BrokerRegistration& reg,
                                 std::function<void(RegistrationAnswer)> done) {
  if (opts_.mode != Mode::controller) {
    done(RegistrationAnswer{ErrorCode::not_controller, -1});
    return;
  }
  auto p = state_->register_broker(reg, wall_ms());
  if (p.answer.error == ErrorCode::none)
    LOG_INFO("broker %d registers (epoch %lld, %zu records)", reg.broker_id,
             static_cast<long long>(p.answer.broker_epoch), p.records.size());
  if (p.records.empty()) {
    done(p.answer);
    return;
  }
  commit(std::move(p.records), {}, [answer = p.answer, done = std::move(done)](bool ok) {
    done(ok ? answer : RegistrationAnswer{ErrorCode::kafka_storage_error, -1});
  });
}

void Controller::broker_heartbeat(const Heartbeat& hb, std::function<void(HeartbeatAnswer)> done) {
  if (opts_.mode != Mode::controller) {
    HeartbeatAnswer a;
    a.error = ErrorCode::not_controller;
    done(a);
    return;
  }
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
  commit(std::move(p.records), {}, [answer = p.answer, done = std::move(done)](bool ok) {
    HeartbeatAnswer a = answer;
    if (!ok) a.error = ErrorCode::kafka_storage_error;
    done(a);
  });
}

void Controller::alter_partition(std::vector<AlterPartitionItem> items,
                                 std::function<void(std::vector<AlterPartitionAnswer>)> done) {
  std::vector<AlterPartitionAnswer> answers;
  answers.reserve(items.size());
  if (opts_.mode != Mode::controller) {
    for (std::size_t i = 0; i < items.size(); ++i)
      answers.push_back(AlterPartitionAnswer{0, ErrorCode::not_controller, -1, -1, {}, -1});
    done(std::move(answers));
    return;
  }
  std::vector<MetadataRecord> records;
  for (const auto& it : items) {
    auto p = state_->alter_partition(it);
    if (p.answer.error == ErrorCode::none && !p.records.empty()) {
      const TopicState* t = state_->image().topic(it.topic_id);
      LOG_INFO("leader %d: ISR of %s-%d is now %zu replicas (partition epoch %d)", it.broker_id,
               t ? t->name.c_str() : uuid_to_string(it.topic_id).c_str(), it.partition,
               p.answer.isr.size(), p.answer.partition_epoch);
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
  commit(std::move(records), {},
         [answers = std::move(answers), done = std::move(done)](bool ok) mutable {
           if (!ok)
             for (auto& a : answers)
               if (a.error == ErrorCode::none) a.error = ErrorCode::kafka_storage_error;
           done(std::move(answers));
         });
}

void Controller::elect_leaders(
    bool unclean, std::optional<std::vector<std::pair<std::string, std::int32_t>>> which,
    std::function<void(kafka::ErrorCode, std::vector<ElectionResult>)> done) {
  if (opts_.mode != Mode::controller) {
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
    done(opts_.mode == Mode::single ? ErrorCode::none : ErrorCode::not_controller, std::move(out));
    return;
  }
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
         [answer = std::move(p.answer), done = std::move(done)](bool ok) mutable {
           done(ok ? ErrorCode::none : ErrorCode::kafka_storage_error, std::move(answer));
         });
}

void Controller::on_tick() {
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
    commit(std::move(records), {}, [](bool ok) {
      if (!ok) LOG_ERROR("metadata: fencing records could not be written");
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
      commit(std::move(moves), {}, [](bool ok) {
        if (!ok) LOG_ERROR("metadata: leader rebalance records could not be written");
      });
    }
  }
  // Metadata fetches whose wait is over get what there is (nothing).
  for (auto it = parked_reads_.begin(); it != parked_reads_.end();) {
    if (it->deadline_ms <= now) {
      auto done = std::move(it->done);
      const std::int64_t offset = it->offset;
      const std::int32_t max_bytes = it->max_bytes;
      it = parked_reads_.erase(it);
      done(read_now(offset, max_bytes));
    } else {
      ++it;
    }
  }
  reactor_.arm(&tick_, mono_ns() + kTickMs * 1'000'000);
}

MetadataRead Controller::read_now(std::int64_t offset, std::int32_t max_bytes) {
  MetadataRead out;
  out.high_watermark = image_->offset() + 1;
  out.log_start_offset = log_->log_start_offset();
  if (offset < out.log_start_offset || offset > out.high_watermark) {
    out.error = ErrorCode::offset_out_of_range;
    return out;
  }
  if (offset == out.high_watermark) return out;
  auto rr = log_->read(offset, static_cast<std::size_t>(std::max(max_bytes, 1)), out.high_watermark,
                       true);
  if (!rr) {
    out.error = ErrorCode::kafka_storage_error;
    return out;
  }
  for (const io::Slice& s : rr->slices) {
    const std::size_t at = out.batches.size();
    out.batches.resize(at + s.length);
    if (auto r = pread_all(s.file->fd, out.batches.data() + at, s.length, s.position); !r) {
      out.batches.clear();
      out.error = ErrorCode::kafka_storage_error;
      return out;
    }
  }
  return out;
}

void Controller::read_metadata(std::int64_t offset, std::int32_t max_bytes,
                               std::int32_t max_wait_ms, std::function<void(MetadataRead)> done) {
  if (!log_ || opts_.mode != Mode::controller) {
    done(MetadataRead{ErrorCode::not_controller, -1, -1, {}});
    return;
  }
  if (offset == image_->offset() + 1 && max_wait_ms > 0 && !no_waiting_reads_) {
    parked_reads_.push_back(
        ParkedRead{offset, max_bytes, wall_ms() + max_wait_ms, std::move(done)});
    return;
  }
  done(read_now(offset, max_bytes));
}

void Controller::stop_waiting_reads() {
  no_waiting_reads_ = true;
  std::vector<ParkedRead> all;
  all.swap(parked_reads_);
  for (auto& p : all)
    p.done(read_now(p.offset, p.max_bytes));
}

void Controller::serve_parked_reads() {
  if (parked_reads_.empty()) return;
  const std::int64_t hw = image_->offset() + 1;
  std::vector<ParkedRead> ready;
  for (auto it = parked_reads_.begin(); it != parked_reads_.end();) {
    if (it->offset < hw) {
      ready.push_back(std::move(*it));
      it = parked_reads_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& p : ready)
    p.done(read_now(p.offset, p.max_bytes));
}

void Controller::apply_fetched(std::span<const std::byte> batches, std::int64_t high_watermark) {
  (void)high_watermark;
  std::shared_ptr<MetadataImage> next;
  std::vector<std::byte> storage;
  std::size_t skipped = 0;
  auto r = for_each_record(batches, storage, [&](const MetadataRecord* m, std::int64_t at) {
    const MetadataImage& cur = next ? *next : *image_;
    if (at <= cur.offset()) return;  // already applied (a batch fetched from its middle)
    if (!next) next = std::make_shared<MetadataImage>(*image_);
    if (!m || !next->apply(*m)) ++skipped;
    next->set_offset(at);
  });
  if (!r) LOG_ERROR("metadata fetched from the controller: %s", r.error().detail.c_str());
  if (skipped) LOG_WARN("metadata fetched from the controller: %zu records skipped", skipped);
  const bool changed = next != nullptr;
  if (changed) image_ = std::move(next);
  if (changed || !published_) {
    if (!published_)
      LOG_INFO("metadata: caught up with the controller at offset %lld (%zu topics, %zu brokers)",
               static_cast<long long>(image_->offset()), image_->topics().size(),
               image_->brokers().size());
    published_ = true;
    publish();
  }
}

void Controller::when_applied(std::int64_t version, std::function<void()> fn) {
  waiters_.push_back(Waiter{version, std::move(fn)});
  run_waiters();
}

}  // namespace samsa::replication
