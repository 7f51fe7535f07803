#include "replication/controller.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <tuple>

#include "base/assert.h"
#include "base/bytes.h"
#include "base/clock.h"
#include "base/log.h"
#include "io/batch_builder.h"
#include "io/record_batch.h"
#include "replication/controller_internal.h"

namespace samsa::replication {

using kafka::ErrorCode;

namespace {

const io::PartitionId kMetadataPartition{"__cluster_metadata", 0};
// Metadata batches are packed up to this size; one topic's records (bounded by the partitions
// a request may add) always fit a single batch, whatever this says.
constexpr std::size_t kBatchBytes = 1u << 20;
constexpr std::uint32_t kMaxMetadataBatch = 64u << 20;

}  // namespace

io::Result<void> pread_all(int fd, std::byte* dst, std::size_t n, std::uint64_t off) {
  while (n) {
    ssize_t r = ::pread(fd, dst, n, static_cast<off_t>(off));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      return std::unexpected(io::Error{io::Errc::io_error, "pread of the metadata log failed"});
    dst += r;
    n -= static_cast<std::size_t>(r);
    off += static_cast<std::uint64_t>(r);
  }
  return {};
}

io::Result<void> for_each_record(
    std::span<const std::byte> buf, std::vector<std::byte>& storage,
    const std::function<void(const MetadataRecord*, std::int64_t, bool)>& fn) {
  std::size_t pos = 0;
  while (pos + io::batch::kHeaderSize <= buf.size()) {
    std::span<const std::byte> rest(buf.data() + pos, buf.size() - pos);
    io::BatchInfo info = io::batch::parse_header(rest.data());
    if (info.length <= 0 || static_cast<std::size_t>(info.length) > rest.size()) break;
    std::span<const std::byte> b = rest.first(static_cast<std::size_t>(info.length));
    pos += static_cast<std::size_t>(info.length);
    if (info.is_control()) {
      // The quorum's own records (a leader change): an offset of the log, not of the image.
      for (std::int64_t at = info.base_offset; at <= info.base_offset + info.last_offset_delta;
           ++at)
        fn(nullptr, at, true);
      continue;
    }
    auto recs = io::batch::records_of(b, storage);
    if (!recs) return std::unexpected(recs.error());
    io::batch::RecordReader reader(*recs, info.record_count);
    for (;;) {
      auto rec = reader.next();
      if (!rec) return std::unexpected(rec.error());
      if (!*rec) break;
      const std::int64_t at = info.base_offset + (*rec)->offset_delta;
      auto m = (*rec)->value ? decode_record(*(*rec)->value) : std::nullopt;
      fn(m ? &*m : nullptr, at, false);
    }
  }
  return {};
}

Controller::Controller(io::Reactor& r, Options opts)
    : reactor_(r), opts_(std::move(opts)), applied_(opts_.reactors, -1) {
  image_ = std::make_shared<MetadataImage>();
}

void Controller::set_defaults(TopicDefaults d) {
  opts_.defaults = d;
  if (state_) state_->options().defaults = std::move(d);
}

void Controller::set_default_partitions(std::int32_t n) {
  opts_.default_partitions = n;
  if (state_) state_->options().default_partitions = n;
}

void Controller::set_delete_topic_enable(bool b) {
  opts_.delete_topic_enable = b;
  if (state_) state_->options().delete_topic_enable = b;
}

void Controller::set_max_partitions(std::int64_t per_broker, std::int64_t per_request) {
  opts_.max_partitions = per_broker;
  opts_.max_partitions_per_request = per_request;
  if (state_) {
    state_->options().max_partitions = per_broker;
    state_->options().max_partitions_per_request = per_request;
  }
}

io::Result<void> Controller::open() {
  ControllerStateOptions so;
  so.session_timeout_ms = opts_.session_timeout_ms;
  so.single_node = opts_.mode == Mode::single;
  so.node_id = opts_.node_id;
  so.defaults = opts_.defaults;
  so.default_partitions = opts_.default_partitions;
  so.default_replication_factor = opts_.default_replication_factor;
  so.delete_topic_enable = opts_.delete_topic_enable;
  so.max_partitions = opts_.max_partitions;
  so.max_partitions_per_request = opts_.max_partitions_per_request;
  so.producer_id_block = opts_.producer_id_block;
  so.validate_broker_config = opts_.validate_broker_config;
  so.broker_config_value = opts_.broker_config_value;
  state_ = std::make_unique<ControllerState>(std::move(so));
  if (auto r = open_quorum(); !r) return r;
  tick_.self = this;
  tick_.fn = [](io::Timer* t) { static_cast<TickTimer*>(t)->self->on_tick(); };
  image_ = state_->committed_image();
  // A controller node holds no partitions: it publishes what it replayed at once, so it
  // listens and can vote. The others publish once caught up (on_high_watermark).
  if (opts_.mode == Mode::controller) {
    published_ = true;
    publish();
  }
  drive();
  return {};
}

void Controller::publish() {
  if (opts_.publish) opts_.publish(image_);
}

void Controller::applied(std::size_t reactor, std::int64_t version) {
  if (reactor < applied_.size()) applied_[reactor] = std::max(applied_[reactor], version);
  run_waiters();
}

void Controller::run_waiters() {
  std::int64_t min_applied = INT64_MAX;
  for (auto v : applied_)
    min_applied = std::min(min_applied, v);
  if (applied_.empty()) min_applied = INT64_MAX;
  std::vector<Waiter> ready;
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (it->version <= min_applied) {
      ready.push_back(std::move(*it));
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& w : ready)
    w.fn();
}

void Controller::when_active(std::function<void()> fn, std::function<void()> refuse) {
  if (active_) {
    fn();
  } else if (raft_ && raft_->is_leader()) {
    waiting_activation_.emplace_back(std::move(fn), std::move(refuse));
  } else {
    refuse();
  }
}

void Controller::commit(std::vector<MetadataRecord> records, std::vector<std::size_t> groups,
                        std::function<void(ErrorCode)> then) {
  SAMSA_ASSERT(state_ && log_ && active_ && raft_->accepts_proposals());
  const std::int64_t first = state_->next_offset() - static_cast<std::int64_t>(records.size());
  // The state machine numbers its records as the log will: it is the log's only writer.
  SAMSA_ASSERT_MSG(log_->fenced() || first == log_->log_end_offset(),
                   "proposals are numbered from the metadata log's end");
  if (groups.empty()) groups.push_back(records.size());
  auto owned = std::make_unique<Commit>();
  Commit* c = owned.get();
  c->self = this;
  c->then = std::move(then);
  const std::int64_t now = wall_ms();
  const std::int32_t epoch = raft_->epoch();
  std::vector<io::SimpleRecord> batch;
  std::size_t batch_bytes = 0;
  std::int64_t next = first;
  auto seal = [&] {
    if (batch.empty()) return;
    auto piece = std::make_unique<Commit::Piece>();
    piece->bytes = io::build_batch(batch);
    // The quorum's epoch travels in each batch: followers rebuild their epoch cache from it.
    store_be<std::int32_t>(piece->bytes.data() + io::batch::kPartitionLeaderEpoch, epoch);
    piece->first_offset = next;
    piece->last_offset = next + static_cast<std::int64_t>(batch.size()) - 1;
    next = piece->last_offset + 1;
    piece->batch = piece->bytes;
    piece->durability = io::Durability::durable;
    piece->owner = c;
    piece->index = c->pieces.size();
    piece->done = [](io::AppendOp* op) {
      auto* p = static_cast<Commit::Piece*>(op);
      p->owner->self->on_piece_done(p->owner, p->index);
    };
    c->pieces.push_back(std::move(piece));
    batch.clear();
    batch_bytes = 0;
  };
  std::size_t at = 0;
  for (std::size_t g : groups) {
    std::vector<io::SimpleRecord> recs;
    std::size_t bytes = 0;
    recs.reserve(g);
    for (std::size_t i = at; i < at + g; ++i) {
      auto v = encode_record(records[i]);
      bytes += v.size() + 16;  // the record's own framing, roughly
      recs.push_back(io::SimpleRecord{
          now, std::nullopt, std::string(reinterpret_cast<const char*>(v.data()), v.size()), {}});
    }
    at += g;
    if (!batch.empty() && batch_bytes + bytes > kBatchBytes) seal();
    for (auto& r : recs)
      batch.push_back(std::move(r));
    batch_bytes += bytes;
  }
  SAMSA_ASSERT(at == records.size());
  seal();
  for (auto& piece : c->pieces) {
    auto r = log_->append(piece.get());
    if (!r) {
      LOG_ERROR("metadata log append failed: %s", r.error().detail.c_str());
      // This piece and the ones after it never reach the log: the state machine forgets them,
      // and this node stops leading (its log is fenced).
      state_->revert_to(piece->first_offset);
      c->pieces.resize(piece->index);
      break;
    }
    SAMSA_ASSERT(r->base_offset == piece->first_offset);
    raft_->note_batch(epoch, r->base_offset);
    ++c->in_flight;
  }
  if (c->pieces.empty()) {
    c->then(ErrorCode::kafka_storage_error);  // nothing was written
    deactivate(ErrorCode::kafka_storage_error);
    return;
  }
  c->last_offset = c->pieces.back()->last_offset;
  commits_.push_back(std::move(owned));
  wake_parked(false);  // followers waiting at the log end get the new batches
}

void Controller::on_piece_done(Commit* c, std::size_t index) {
  const Commit::Piece& p = *c->pieces[index];
  --c->in_flight;
  if (c->orphaned) {
    if (c->in_flight == 0) std::erase_if(orphaned_, [c](const auto& o) { return o.get() == c; });
    return;
  }
  if (p.error) {
    // The log is fenced: this piece and everything after it are lost; this node steps down.
    LOG_ERROR("metadata log write failed: %s", p.error->detail.c_str());
    deactivate(ErrorCode::kafka_storage_error);
    return;
  }
  on_log_durable();
}

// Commits the quorum's high watermark has passed: into the committed view, published, and
// answered once every reactor has the image.
void Controller::finish_commits() {
  const std::int64_t hw = raft_->high_watermark();
  bool any = false;
  while (!commits_.empty() && commits_.front()->last_offset < hw &&
         commits_.front()->in_flight == 0) {
    auto c = std::move(commits_.front());
    commits_.pop_front();
    any = true;
    waiters_.push_back(
        Waiter{c->last_offset, [then = std::move(c->then)] { then(ErrorCode::none); }});
  }
  if (any) run_waiters();
}

// The proposals not committed yet will not be answered by this node: NOT_CONTROLLER after a
// lost leadership (the next leader may still commit them: the client retries, as with Kafka),
// KAFKA_STORAGE_ERROR after a failed write.
void Controller::fail_commits(ErrorCode why) {
  auto all = std::move(commits_);
  commits_.clear();
  for (auto& c : all) {
    auto then = std::move(c->then);
    // Pieces still being written complete into their commit: keep it until they have.
    if (c->in_flight > 0) {
      c->orphaned = true;
      orphaned_.push_back(std::move(c));
    }
    if (then) then(why);
  }
}

namespace {

// The outcomes that had succeeded, when their commit did not happen (or is not known to).
template <class Outcome>
void fail_successes(std::vector<Outcome>& outcomes, ErrorCode why) {
  if (why == ErrorCode::none) return;
  for (auto& o : outcomes) {
    if (o.error == ErrorCode::none) {
      o.error = why;
      o.message = why == ErrorCode::not_controller
                      ? "The controller moved before the change was committed."
                      : "The metadata log could not be written.";
    }
  }
}

template <class Outcome>
std::vector<Outcome> refused(std::size_t n, Outcome o) {
  return std::vector<Outcome>(n, o);
}

}  // namespace

// A proposal with no records is answered at once; otherwise once committed, its successful
// outcomes turned into the failure if the commit did not happen.
template <class Outcome>
void Controller::commit_proposal(Proposal<std::vector<Outcome>> p,
                                 std::function<void(std::vector<Outcome>)> done) {
  if (p.records.empty()) {
    done(std::move(p.answer));
    return;
  }
  commit(std::move(p.records), std::move(p.groups),
         [outcomes = std::move(p.answer), done = std::move(done)](ErrorCode why) mutable {
           fail_successes(outcomes, why);
           done(std::move(outcomes));
         });
}

void Controller::create_topics(std::vector<TopicSpec> specs, bool validate_only, CreateDone done,
                               bool partial) {
  auto refuse = [specs, done]() {
    std::vector<TopicOutcome> out;
    for (auto& s : specs)
      out.push_back(TopicOutcome{s.name, ErrorCode::not_controller, "", {}, -1, -1});
    done(std::move(out));
  };
  when_active(
      [this, specs = std::move(specs), validate_only, done, partial]() mutable {
        auto p = state_->create_topics(std::move(specs), validate_only, partial);
        if (p.records.empty()) {
          done(std::move(p.answer));
          return;
        }
        commit(std::move(p.records), std::move(p.groups),
               [this, outcomes = std::move(p.answer), done](ErrorCode why) mutable {
                 if (why != ErrorCode::none) {
                   // Topics whose batch was committed before the failure exist.
                   for (auto& o : outcomes) {
                     const TopicState* t = image_->topic(o.name);
                     if (o.error == ErrorCode::none && !(t && t->id == o.id)) {
                       o.error = why;
                       o.message = why == ErrorCode::not_controller
                                       ? "The controller moved before the topic was committed."
                                       : "The metadata log could not be written.";
                     }
                   }
                 }
                 done(std::move(outcomes));
               });
      },
      std::move(refuse));
}

void Controller::create_partitions(std::vector<PartitionsSpec> specs, bool validate_only,
                                   PartitionsDone done) {
  auto refuse = [specs, done]() {
    std::vector<PartitionsOutcome> out;
    for (auto& s : specs)
      out.push_back(PartitionsOutcome{s.name, ErrorCode::not_controller, ""});
    done(std::move(out));
  };
  when_active(
      [this, specs = std::move(specs), validate_only, done]() mutable {
        auto p = state_->create_partitions(std::move(specs), validate_only);
        commit_proposal(std::move(p), std::move(done));
      },
      std::move(refuse));
}

void Controller::delete_topics(std::vector<std::pair<std::string, Uuid>> topics, DeleteDone done) {
  auto refuse = [topics, done]() {
    std::vector<DeleteOutcome> out;
    for (auto& [name, id] : topics)
      out.push_back(DeleteOutcome{name, id, ErrorCode::not_controller, ""});
    done(std::move(out));
  };
  when_active(
      [this, topics = std::move(topics), done]() mutable {
        auto p = state_->delete_topics(topics);
        commit_proposal(std::move(p), std::move(done));
      },
      std::move(refuse));
}

void Controller::alter_configs(std::vector<ConfigAlteration> changes, bool validate_only,
                               ConfigDone done) {
  const std::size_t n = changes.size();
  when_active(
      [this, changes = std::move(changes), validate_only, done]() mutable {
        auto p = state_->alter_configs(std::move(changes), validate_only);
        commit_proposal(std::move(p), std::move(done));
      },
      [n, done] {
        done(refused(n, ConfigOutcome{ErrorCode::not_controller, ""}));
      });
}

void Controller::alter_scram_credentials(std::vector<ScramAlteration> changes,
                                         std::function<void(std::vector<ScramOutcome>)> done) {
  when_active(
      [this, changes = std::move(changes), done]() mutable {
        auto p = state_->alter_scram_credentials(std::move(changes));
        commit_proposal(std::move(p), std::move(done));
      },
      [changes, done] {
        std::vector<ScramOutcome> out;
        for (const auto& c : changes)
          if (std::none_of(out.begin(), out.end(),
                           [&](const ScramOutcome& o) { return o.user == c.credential.name; }))
            out.push_back({c.credential.name, ErrorCode::not_controller, ""});
        done(std::move(out));
      });
}

void Controller::create_acls(std::vector<AclBinding> acls,
                             std::function<void(std::vector<AclOutcome>)> done) {
  const std::size_t n = acls.size();
  when_active(
      [this, acls = std::move(acls), done]() { commit_proposal(state_->create_acls(acls), done); },
      [n, done] {
        done(refused(n, AclOutcome{ErrorCode::not_controller, "", {}}));
      });
}

void Controller::delete_acls(std::vector<AclBindingFilter> filters,
                             std::function<void(std::vector<AclOutcome>)> done) {
  const std::size_t n = filters.size();
  when_active([this, filters = std::move(filters),
               done]() { commit_proposal(state_->delete_acls(filters), done); },
              [n, done] {
                done(refused(n, AclOutcome{ErrorCode::not_controller, "", {}}));
              });
}

void Controller::alter_client_quotas(std::vector<QuotaAlteration> changes, bool validate_only,
                                     std::function<void(std::vector<QuotaOutcome>)> done) {
  const std::size_t n = changes.size();
  when_active(
      [this, changes = std::move(changes), validate_only, done]() mutable {
        commit_proposal(state_->alter_client_quotas(std::move(changes), validate_only), done);
      },
      [n, done] {
        done(refused(n, QuotaOutcome{ErrorCode::not_controller, ""}));
      });
}

void Controller::alter_partition_reassignments(
    std::vector<ReassignmentSpec> specs, bool allow_rf_change,
    std::function<void(std::vector<ReassignmentOutcome>)> done) {
  const std::size_t n = specs.size();
  when_active(
      [this, specs = std::move(specs), allow_rf_change, done]() {
        auto p = state_->alter_partition_reassignments(specs, allow_rf_change);
        std::size_t started = 0;
        for (const auto& o : p.answer)
          if (o.error == ErrorCode::none) ++started;
        if (started) LOG_INFO("AlterPartitionReassignments: %zu partitions change", started);
        commit_proposal(std::move(p), done);
      },
      [n, done] {
        done(std::vector<ReassignmentOutcome>(n, {ErrorCode::not_controller, ""}));
      });
}

void Controller::allocate_producer_ids(std::int32_t broker_id, std::int64_t broker_epoch,
                                       std::function<void(ProducerIdsAnswer)> done) {
  when_active(
      [this, broker_id, broker_epoch, done]() {
        auto p = state_->allocate_producer_ids(broker_id, broker_epoch);
        if (p.records.empty()) {
          done(p.answer);
          return;
        }
        // The block is handed out only once its record is committed: a restart, or a power
        // cut of the whole quorum, can never hand it out again.
        commit(std::move(p.records), {}, [broker_id, answer = p.answer, done](ErrorCode why) {
          if (why == ErrorCode::none)
            LOG_INFO("producer ids %lld..%lld reserved for broker %d",
                     static_cast<long long>(answer.first),
                     static_cast<long long>(answer.first + answer.length - 1), broker_id);
          done(why == ErrorCode::none ? answer : ProducerIdsAnswer{why, -1, 0});
        });
      },
      [done] {
        done(ProducerIdsAnswer{ErrorCode::not_controller, -1, 0});
      });
}

io::Result<void> Controller::close() {
  if (tick_.armed()) reactor_.disarm(&tick_);
  if (raft_timer_.armed()) reactor_.disarm(&raft_timer_);
  stop_waiting_reads();
  fail_commits(ErrorCode::not_controller);
  for (auto& w : waiting_activation_)
    w.second();
  waiting_activation_.clear();
  if (!log_) return {};
  reactor_.run_until([&] { return log_->idle() && orphaned_.empty(); }, 10'000'000'000);
  save_applied_offset(true);
  raft_.reset();
  auto r = log_->close();
  log_.reset();
  return r;
}

}  // namespace samsa::replication
