#include "replication/controller.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <tuple>

#include "base/assert.h"
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
    const std::function<void(const MetadataRecord*, std::int64_t)>& fn) {
  std::size_t pos = 0;
  while (pos + io::batch::kHeaderSize <= buf.size()) {
    std::span<const std::byte> rest(buf.data() + pos, buf.size() - pos);
    io::BatchInfo info = io::batch::parse_header(rest.data());
    if (info.length <= 0 || static_cast<std::size_t>(info.length) > rest.size()) break;
    std::span<const std::byte> b = rest.first(static_cast<std::size_t>(info.length));
    pos += static_cast<std::size_t>(info.length);
    auto recs = io::batch::records_of(b, storage);
    if (!recs) return std::unexpected(recs.error());
    io::batch::RecordReader reader(*recs, info.record_count);
    for (;;) {
      auto rec = reader.next();
      if (!rec) return std::unexpected(rec.error());
      if (!*rec) break;
      const std::int64_t at = info.base_offset + (*rec)->offset_delta;
      auto m = (*rec)->value ? decode_record(*(*rec)->value) : std::nullopt;
      fn(m ? &*m : nullptr, at);
    }
  }
  return {};
}

// One commit: its records in one or more batches (pieces), appended in the same loop turn so
// one group commit writes and syncs them all.
struct Controller::Commit {
  struct Piece : io::AppendOp {
    std::vector<std::byte> bytes;
    std::int64_t first_offset = -1;  // what the state machine gave its records
    std::int64_t last_offset = -1;
    Commit* owner = nullptr;
    std::size_t index = 0;
  };
  std::vector<std::unique_ptr<Piece>> pieces;
  std::size_t appended = 0;  // pieces the log accepted
  std::size_t left = 0;      // accepted pieces not yet done
  bool failed = false;
  bool any_committed = false;
  std::function<void(bool)> then;
  Controller* self = nullptr;
};

Controller::Controller(io::Reactor& r, Options opts)
    : reactor_(r), opts_(std::move(opts)), applied_(opts_.reactors, -1) {
  image_ = std::make_shared<MetadataImage>();
}

Controller::~Controller() = default;

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
  if (opts_.mode == Mode::broker) return {};  // the image comes from the controller's log
  io::LogConfig cfg;
  cfg.retention_ms = -1;  // metadata is never aged out
  cfg.retention_bytes = -1;
  cfg.segment_bytes = 64u << 20;
  cfg.max_batch_bytes = kMaxMetadataBatch;
  auto log = opts_.log_dir->open_log(reactor_, kMetadataPartition, cfg);
  if (!log) return std::unexpected(log.error());
  log_ = std::move(*log);
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

  std::int64_t offset = log_->log_start_offset();
  const std::int64_t end = log_->log_end_offset();
  std::vector<std::byte> buf;
  std::vector<std::byte> storage;
  std::size_t applied = 0, skipped = 0;
  while (offset < end) {
    auto rr = log_->read(offset, 4u << 20, end, true);
    if (!rr) return std::unexpected(rr.error());
    if (rr->slices.empty()) break;
    for (const io::Slice& s : rr->slices) {
      buf.resize(s.length);
      if (auto r = pread_all(s.file->fd, buf.data(), s.length, s.position); !r) return r;
      auto r = for_each_record(buf, storage, [&](const MetadataRecord* m, std::int64_t at) {
        if (!m) {
          LOG_ERROR("metadata log: undecodable record at offset %lld, skipped",
                    static_cast<long long>(at));
          state_->skip(at);
          ++skipped;
        } else if (!state_->replay(*m, at)) {
          LOG_WARN("metadata log: record at offset %lld does not apply, skipped",
                   static_cast<long long>(at));
          ++skipped;
        } else {
          ++applied;
        }
      });
      if (!r) return std::unexpected(r.error());
    }
    offset = rr->next_offset;
  }
  image_ = state_->committed_image();
  LOG_INFO("metadata: replayed %zu records (%zu skipped), %zu topics, image version %lld", applied,
           skipped, image_->topics().size(), static_cast<long long>(image_->offset()));
  // Every registered broker gets a full session from now: heartbeat clocks are not logged.
  state_->on_become_active(wall_ms(), log_->log_end_offset());
  if (opts_.mode == Mode::controller) {
    tick_.self = this;
    tick_.fn = [](io::Timer* t) { static_cast<TickTimer*>(t)->self->on_tick(); };
    reactor_.arm(&tick_, mono_ns() + kTickMs * 1'000'000);
  }
  publish();
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

void Controller::commit(std::vector<MetadataRecord> records, std::vector<std::size_t> groups,
                        std::function<void(bool)> then) {
  SAMSA_ASSERT(state_ && log_);
  const std::int64_t first = state_->next_offset() - static_cast<std::int64_t>(records.size());
  // The state machine numbers its records as the log will: it is the log's only writer.
  SAMSA_ASSERT_MSG(log_->fenced() || first == log_->log_end_offset(),
                   "proposals are numbered from the metadata log's end");
  if (groups.empty()) groups.push_back(records.size());
  auto* c = new Commit{};
  c->self = this;
  c->then = std::move(then);
  const std::int64_t now = wall_ms();
  std::vector<io::SimpleRecord> batch;
  std::size_t batch_bytes = 0;
  std::int64_t next = first;
  auto seal = [&] {
    if (batch.empty()) return;
    auto piece = std::make_unique<Commit::Piece>();
    piece->bytes = io::build_batch(batch);
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
      c->failed = true;
      // This piece and the ones after it never reach the log: the state machine forgets them.
      state_->revert_to(piece->first_offset);
      break;
    }
    SAMSA_ASSERT(r->base_offset == piece->first_offset);
    ++c->appended;
  }
  c->left = c->appended;
  if (c->appended == 0) {
    auto then_fn = std::move(c->then);
    delete c;
    then_fn(false);  // nothing was written
  }
}

void Controller::on_piece_done(Commit* c, std::size_t index) {
  const Commit::Piece& p = *c->pieces[index];
  if (p.error) {
    // The log is fenced: this piece and everything proposed after it are lost.
    LOG_ERROR("metadata log write failed: %s", p.error->detail.c_str());
    c->failed = true;
    state_->revert_to(p.first_offset);
  } else {
    state_->commit(p.last_offset);
    c->any_committed = true;
  }
  if (--c->left == 0) on_committed(c);
}

void Controller::on_committed(Commit* c) {
  std::unique_ptr<Commit> owned(c);
  auto then = std::move(c->then);
  const bool ok = !c->failed;
  if (!c->any_committed) {
    then(false);
    return;
  }
  image_ = state_->committed_image();
  publish();
  serve_parked_reads();
  const std::int64_t version = image_->offset();
  waiters_.push_back(Waiter{version, [then = std::move(then), ok] { then(ok); }});
  run_waiters();
}

namespace {

// The outcomes a failed commit turns into KAFKA_STORAGE_ERROR (those that had succeeded).
template <class Outcome>
void fail_successes(std::vector<Outcome>& outcomes) {
  for (auto& o : outcomes) {
    if (o.error == ErrorCode::none) {
      o.error = ErrorCode::kafka_storage_error;
      o.message = "The metadata log could not be written.";
    }
  }
}

}  // namespace

void Controller::create_topics(std::vector<TopicSpec> specs, bool validate_only, CreateDone done,
                               bool partial) {
  if (!state_) {
    std::vector<TopicOutcome> out;
    for (auto& s : specs)
      out.push_back(TopicOutcome{s.name, ErrorCode::not_controller, "", {}, -1, -1});
    done(std::move(out));
    return;
  }
  auto p = state_->create_topics(std::move(specs), validate_only, partial);
  if (p.records.empty()) {
    done(std::move(p.answer));
    return;
  }
  commit(std::move(p.records), std::move(p.groups),
         [this, outcomes = std::move(p.answer), done = std::move(done)](bool ok) mutable {
           if (!ok) {
             // Topics whose batch did reach the log before the failure exist.
             for (auto& o : outcomes) {
               const TopicState* t = image_->topic(o.name);
               if (o.error == ErrorCode::none && !(t && t->id == o.id)) {
                 o.error = ErrorCode::kafka_storage_error;
                 o.message = "The metadata log could not be written.";
               }
             }
           }
           done(std::move(outcomes));
         });
}

void Controller::create_partitions(std::vector<PartitionsSpec> specs, bool validate_only,
                                   PartitionsDone done) {
  if (!state_) {
    std::vector<PartitionsOutcome> out;
    for (auto& s : specs)
      out.push_back(PartitionsOutcome{s.name, ErrorCode::not_controller, ""});
    done(std::move(out));
    return;
  }
  auto p = state_->create_partitions(std::move(specs), validate_only);
  if (p.records.empty()) {
    done(std::move(p.answer));
    return;
  }
  commit(std::move(p.records), std::move(p.groups),
         [outcomes = std::move(p.answer), done = std::move(done)](bool ok) mutable {
           if (!ok) fail_successes(outcomes);
           done(std::move(outcomes));
         });
}

void Controller::delete_topics(std::vector<std::pair<std::string, Uuid>> topics, DeleteDone done) {
  if (!state_) {
    std::vector<DeleteOutcome> out;
    for (auto& [name, id] : topics)
      out.push_back(DeleteOutcome{name, id, ErrorCode::not_controller, ""});
    done(std::move(out));
    return;
  }
  auto p = state_->delete_topics(topics);
  if (p.records.empty()) {
    done(std::move(p.answer));
    return;
  }
  commit(std::move(p.records), {},
         [outcomes = std::move(p.answer), done = std::move(done)](bool ok) mutable {
           if (!ok) fail_successes(outcomes);
           done(std::move(outcomes));
         });
}

void Controller::alter_configs(std::vector<ConfigAlteration> changes, bool validate_only,
                               ConfigDone done) {
  if (!state_) {
    done(std::vector<ConfigOutcome>(changes.size(), ConfigOutcome{ErrorCode::not_controller, ""}));
    return;
  }
  auto p = state_->alter_configs(std::move(changes), validate_only);
  if (p.records.empty()) {
    done(std::move(p.answer));
    return;
  }
  commit(std::move(p.records), {},
         [outcomes = std::move(p.answer), done = std::move(done)](bool ok) mutable {
           if (!ok) fail_successes(outcomes);
           done(std::move(outcomes));
         });
}

void Controller::allocate_producer_ids(std::int32_t broker_id, std::int64_t broker_epoch,
                                       std::function<void(ProducerIdsAnswer)> done) {
  if (!state_) {
    done(ProducerIdsAnswer{ErrorCode::not_controller, -1, 0});
    return;
  }
  auto p = state_->allocate_producer_ids(broker_id, broker_epoch);
  if (p.records.empty()) {
    done(p.answer);
    return;
  }
  // The block is handed out only once its record is durable: a restart, or a power cut of
  // the controller, can never hand it out again.
  commit(std::move(p.records), {}, [broker_id, answer = p.answer, done = std::move(done)](bool ok) {
    if (ok)
      LOG_INFO("producer ids %lld..%lld reserved for broker %d",
               static_cast<long long>(answer.first),
               static_cast<long long>(answer.first + answer.length - 1), broker_id);
    done(ok ? answer : ProducerIdsAnswer{ErrorCode::kafka_storage_error, -1, 0});
  });
}

io::Result<void> Controller::close() {
  if (tick_.armed()) reactor_.disarm(&tick_);
  for (auto& p : parked_reads_)
    p.done(MetadataRead{ErrorCode::not_controller, -1, -1, {}});
  parked_reads_.clear();
  if (!log_) return {};
  reactor_.run_until([&] { return log_->idle(); }, 10'000'000'000);
  auto r = log_->close();
  log_.reset();
  return r;
}

}  // namespace samsa::replication
