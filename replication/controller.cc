#include "replication/controller.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <tuple>

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

// Topic names that differ only in '.' versus '_' collide in metric names; Kafka refuses them.
std::string collision_key(std::string_view name) {
  std::string s(name);
  std::replace(s.begin(), s.end(), '.', '_');
  return s;
}

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
    std::vector<MetadataRecord> records;
    Commit* owner = nullptr;
  };
  std::vector<std::unique_ptr<Piece>> pieces;
  std::size_t appended = 0;  // pieces the log accepted
  std::size_t left = 0;      // accepted pieces not yet done
  bool failed = false;
  bool in_state = false;
  std::function<void(bool)> then;
  Controller* self = nullptr;
};

Controller::Controller(io::Reactor& r, Options opts)
    : reactor_(r), opts_(std::move(opts)), applied_(opts_.reactors, -1) {
  image_ = std::make_shared<MetadataImage>();
}

Controller::~Controller() = default;

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
  if (opts_.mode == Mode::controller) {
    ControllerStateOptions so;
    so.session_timeout_ms = opts_.session_timeout_ms;
    state_ = std::make_unique<ControllerState>(so);
  }

  auto image = std::make_shared<MetadataImage>();
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
          ++skipped;
        } else if (!image->apply(*m)) {
          LOG_WARN("metadata log: record at offset %lld does not apply, skipped",
                   static_cast<long long>(at));
          ++skipped;
        } else {
          ++applied;
        }
        if (m && state_) state_->replay(*m, at);
        image->set_offset(at);
      });
      if (!r) return std::unexpected(r.error());
    }
    offset = rr->next_offset;
  }
  image_ = std::move(image);
  LOG_INFO("metadata: replayed %zu records (%zu skipped), %zu topics, image version %lld", applied,
           skipped, image_->topics().size(), static_cast<long long>(image_->offset()));
  if (state_) {
    // Every registered broker gets a full session from now: heartbeat clocks are not logged.
    state_->on_become_active(wall_ms(), log_->log_end_offset());
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

void Controller::commit(std::vector<MetadataRecord> records, std::function<void(bool)> then) {
  std::vector<std::vector<MetadataRecord>> groups;
  groups.push_back(std::move(records));
  commit_groups(std::move(groups), std::move(then));
}

void Controller::commit_groups(std::vector<std::vector<MetadataRecord>> groups,
                               std::function<void(bool)> then, bool in_state) {
  if (!log_) {
    // A broker node writes no metadata: its changes go to the controller (forwarded).
    then(false);
    return;
  }
  if (state_ && !in_state) state_->advance_next_offset(log_->log_end_offset());
  auto* c = new Commit{};
  c->in_state = in_state;
  c->self = this;
  c->then = std::move(then);
  const std::int64_t now = wall_ms();
  std::vector<io::SimpleRecord> batch;
  std::vector<MetadataRecord> batch_records;
  std::size_t batch_bytes = 0;
  auto seal = [&] {
    if (batch.empty()) return;
    auto piece = std::make_unique<Commit::Piece>();
    piece->bytes = io::build_batch(batch);
    piece->records = std::move(batch_records);
    piece->batch = piece->bytes;
    piece->durability = io::Durability::durable;
    piece->owner = c;
    piece->done = [](io::AppendOp* op) {
      auto* p = static_cast<Commit::Piece*>(op);
      p->owner->self->on_piece_done(p->owner);
    };
    c->pieces.push_back(std::move(piece));
    batch.clear();
    batch_records.clear();
    batch_bytes = 0;
  };
  for (auto& g : groups) {
    std::vector<io::SimpleRecord> recs;
    std::size_t bytes = 0;
    recs.reserve(g.size());
    for (auto& r : g) {
      auto v = encode_record(r);
      bytes += v.size() + 16;  // the record's own framing, roughly
      recs.push_back(io::SimpleRecord{
          now, std::nullopt, std::string(reinterpret_cast<const char*>(v.data()), v.size()), {}});
    }
    if (!batch.empty() && batch_bytes + bytes > kBatchBytes) seal();
    for (auto& r : recs)
      batch.push_back(std::move(r));
    for (auto& r : g)
      batch_records.push_back(std::move(r));
    batch_bytes += bytes;
  }
  seal();
  for (auto& piece : c->pieces) {
    auto r = log_->append(piece.get());
    if (!r) {
      LOG_ERROR("metadata log append failed: %s", r.error().detail.c_str());
      c->failed = true;
      break;
    }
    ++c->appended;
    // Changes not made by the state machine join its view now, in log order, as its own
    // proposals do (the active controller's view runs ahead of the commit).
    if (state_ && !in_state) {
      std::int64_t at = r->base_offset;
      for (const auto& rec : piece->records)
        state_->replay(rec, at++);
    }
  }
  c->left = c->appended;
  if (c->appended == 0) {
    auto then_fn = std::move(c->then);
    delete c;
    then_fn(false);  // nothing was written
  }
}

void Controller::on_piece_done(Commit* c) {
  if (--c->left == 0) on_committed(c);
}

void Controller::on_committed(Commit* c) {
  std::unique_ptr<Commit> owned(c);
  // The image follows exactly what reached the log: pieces whose write failed are left out.
  auto next = std::make_shared<MetadataImage>(*image_);
  bool any = false;
  for (std::size_t i = 0; i < c->appended; ++i) {
    Commit::Piece& p = *c->pieces[i];
    if (p.error) {
      LOG_ERROR("metadata log write failed: %s", p.error->detail.c_str());
      c->failed = true;
      continue;
    }
    for (const auto& r : p.records) {
      if (!next->apply(r)) LOG_ERROR("metadata: committed record does not apply (bug)");
    }
    next->set_offset(std::max(next->offset(), p.result.last_offset));
    any = true;
  }
  auto then = std::move(c->then);
  const bool ok = !c->failed;
  if (!any) {
    then(false);
    return;
  }
  image_ = std::move(next);
  publish();
  serve_parked_reads();
  const std::int64_t version = image_->offset();
  waiters_.push_back(Waiter{version, [then = std::move(then), ok] { then(ok); }});
  run_waiters();
}

std::int32_t Controller::pending_partitions(const TopicState& t) const {
  const auto have = static_cast<std::int32_t>(t.partitions.size());
  auto it = pending_counts_.find(t.name);
  return it == pending_counts_.end() ? have : std::max(have, it->second);
}

namespace {

constexpr const char* kTooManyPerRequest = "Excessively large number of partitions per request.";

std::string too_many_on_broker(std::int64_t would, std::int64_t limit) {
  return "This broker would hold " + std::to_string(would) +
         " partitions, more than samsa.max.partitions (" + std::to_string(limit) + ").";
}

}  // namespace

void Controller::create_topics(std::vector<TopicSpec> specs, bool validate_only, CreateDone done,
                               bool partial) {
  auto outcomes = std::make_shared<std::vector<TopicOutcome>>();
  outcomes->reserve(specs.size());
  // The bounds come first, from the counts alone: nothing per partition is built for a request
  // that asks for too many (as Kafka's controller refuses the whole request).
  if (!partial) {
    std::int64_t total = 0;
    for (const auto& s : specs) {
      const std::int32_t p = s.partitions == -1 ? opts_.default_partitions : s.partitions;
      if (p > 0) total += p;
    }
    if (total > opts_.max_partitions_per_request) {
      for (const auto& s : specs)
        outcomes->push_back(TopicOutcome{s.name, ErrorCode::policy_violation, kTooManyPerRequest});
      done(std::move(*outcomes));
      return;
    }
  }
  std::vector<std::vector<MetadataRecord>> groups;
  std::map<std::string, int> seen;
  for (const auto& s : specs)
    ++seen[s.name];
  std::map<std::string, std::string> collisions;
  for (const auto& [name, t] : image_->topics())
    collisions.emplace(collision_key(name), name);
  std::vector<std::string> reserved;
  std::int64_t accepted = 0;  // partitions this request adds

  for (auto& s : specs) {
    TopicOutcome o;
    o.name = s.name;
    auto fail = [&](ErrorCode e, std::string msg) {
      o.error = e;
      o.message = std::move(msg);
    };
    std::int32_t partitions = s.partitions == -1 ? opts_.default_partitions : s.partitions;
    std::int16_t rf =
        s.replication_factor == -1 ? opts_.default_replication_factor : s.replication_factor;
    const std::int64_t on_broker =
        image_->partition_count() + in_flight_partitions_ + accepted + partitions;
    if (seen[s.name] > 1) {
      fail(ErrorCode::invalid_request, "Duplicate topic name " + s.name + " in the request.");
    } else if (auto why = check_topic_name(s.name)) {
      fail(ErrorCode::invalid_topic_exception, *why);
    } else if (s.name == kMetadataPartition.topic) {
      fail(ErrorCode::invalid_request, "The name " + s.name + " is reserved.");
    } else if (image_->topic(s.name) || in_flight_names_.contains(s.name)) {
      fail(ErrorCode::topic_already_exists, "Topic '" + s.name + "' already exists.");
    } else if (auto c = collisions.find(collision_key(s.name));
               c != collisions.end() && c->second != s.name) {
      fail(ErrorCode::invalid_topic_exception,
           "Topic '" + s.name + "' collides with existing topic: " + c->second);
    } else if (partitions <= 0) {
      fail(ErrorCode::invalid_partitions, "Number of partitions must be larger than 0.");
    } else if (rf <= 0) {
      fail(ErrorCode::invalid_replication_factor, "Replication factor must be larger than 0.");
    } else if (rf > live_brokers()) {
      fail(ErrorCode::invalid_replication_factor,
           "Unable to replicate the partition " + std::to_string(rf) +
               " time(s): The target replication factor of " + std::to_string(rf) +
               " cannot be reached because only " + std::to_string(live_brokers()) +
               " broker(s) are registered.");
    } else if (accepted + partitions > opts_.max_partitions_per_request) {
      fail(ErrorCode::policy_violation, kTooManyPerRequest);
    } else if (on_broker > opts_.max_partitions) {
      fail(ErrorCode::policy_violation, too_many_on_broker(on_broker, opts_.max_partitions));
    } else {
      for (const auto& [k, v] : s.configs) {
        if (auto why = validate_topic_config(k, v)) {
          fail(ErrorCode::invalid_config, *why);
          break;
        }
      }
    }
    if (o.error == ErrorCode::none) {
      o.partitions = partitions;
      o.replication_factor = rf;
      accepted += partitions;
      collisions.emplace(collision_key(s.name), s.name);
      if (!validate_only) {
        o.id = random_uuid();
        std::vector<MetadataRecord> records;
        records.reserve(1 + s.configs.size() + static_cast<std::size_t>(partitions));
        records.push_back(TopicRecord{s.name, o.id});
        for (const auto& [k, v] : s.configs)
          records.push_back(ConfigRecord{ConfigResource::topic, s.name, k, v});
        auto placed = place(partitions, rf);
        for (std::int32_t p = 0; p < partitions; ++p) {
          PartitionRecord pr;
          pr.topic_id = o.id;
          pr.partition = p;
          pr.replicas = std::move((*placed)[static_cast<std::size_t>(p)]);
          pr.isr = pr.replicas;
          pr.leader = pr.replicas.front();
          records.push_back(std::move(pr));
        }
        groups.push_back(std::move(records));
        ++in_flight_names_[s.name];
        reserved.push_back(s.name);
      }
    }
    outcomes->push_back(std::move(o));
  }
  if (groups.empty()) {
    done(std::move(*outcomes));
    return;
  }
  in_flight_partitions_ += accepted;
  commit_groups(std::move(groups),
                [this, outcomes, reserved, accepted, done = std::move(done)](bool ok) {
                  in_flight_partitions_ -= accepted;
                  for (const auto& n : reserved)
                    if (--in_flight_names_[n] == 0) in_flight_names_.erase(n);
                  if (!ok) {
                    for (auto& o : *outcomes) {
                      if (o.error == ErrorCode::none && !image_->topic(o.name)) {
                        o.error = ErrorCode::kafka_storage_error;
                        o.message = "The metadata log could not be written.";
                      }
                    }
                  }
                  done(std::move(*outcomes));
                });
}

void Controller::create_partitions(std::vector<PartitionsSpec> specs, bool validate_only,
                                   PartitionsDone done) {
  auto outcomes = std::make_shared<std::vector<PartitionsOutcome>>();
  outcomes->reserve(specs.size());
  std::map<std::string, int> seen;
  std::int64_t total = 0;
  for (const auto& s : specs) {
    ++seen[s.name];
    if (const TopicState* t = image_->topic(s.name); t && s.count > pending_partitions(*t))
      total += s.count - pending_partitions(*t);
  }
  // Kafka 4.1 has no cap here (its controller builds every record a huge count asks for);
  // samsa applies CreateTopics' cap before anything per partition is built.
  if (total > opts_.max_partitions_per_request) {
    for (const auto& s : specs)
      outcomes->push_back({s.name, ErrorCode::policy_violation, kTooManyPerRequest});
    done(std::move(*outcomes));
    return;
  }
  std::vector<std::vector<MetadataRecord>> groups;
  std::vector<std::pair<std::string, std::int32_t>> raised;
  std::int64_t accepted = 0;
  for (auto& s : specs) {
    PartitionsOutcome o;
    o.name = s.name;
    auto fail = [&](ErrorCode e, std::string msg) {
      o.error = e;
      o.message = std::move(msg);
    };
    const TopicState* t = image_->topic(s.name);
    const std::int32_t have = t ? pending_partitions(*t) : 0;
    const std::int64_t add = static_cast<std::int64_t>(s.count) - have;
    const std::int64_t on_broker =
        image_->partition_count() + in_flight_partitions_ + accepted + add;
    if (seen[s.name] > 1) {
      fail(ErrorCode::invalid_request, "Duplicate topic name " + s.name + " in the request.");
    } else if (!t || in_flight_names_.contains(s.name)) {
      fail(ErrorCode::unknown_topic_or_partition, "");  // Kafka sends no message
    } else if (is_internal_topic(s.name)) {
      // The group coordinator maps groups to __consumer_offsets partitions by their count.
      fail(ErrorCode::invalid_request,
           "Cannot increase the partition count of the internal topic " + s.name + ".");
    } else if (s.count < have) {
      fail(ErrorCode::invalid_partitions,
           "The topic " + s.name + " currently has " + std::to_string(have) + " partition(s); " +
               std::to_string(s.count) + " would not be an increase.");
    } else if (s.count == have) {
      fail(ErrorCode::invalid_partitions,
           "Topic already has " + std::to_string(have) + " partition(s).");
    } else if (!s.assignments.empty() && static_cast<std::int64_t>(s.assignments.size()) != add) {
      fail(ErrorCode::invalid_replica_assignment,
           "Attempted to add " + std::to_string(add) + " additional partition(s), but only " +
               std::to_string(s.assignments.size()) + " assignment(s) were specified.");
    } else if (accepted + add > opts_.max_partitions_per_request) {
      fail(ErrorCode::policy_violation, kTooManyPerRequest);
    } else if (on_broker > opts_.max_partitions) {
      fail(ErrorCode::policy_violation, too_many_on_broker(on_broker, opts_.max_partitions));
    } else {
      const std::size_t rf = t->partitions.empty() ? 1 : t->partitions.front().replicas.size();
      for (const auto& a : s.assignments) {
        for (auto b : a) {
          if (!broker_registered(b)) {
            fail(ErrorCode::invalid_replica_assignment,
                 "The manual partition assignment includes broker " + std::to_string(b) +
                     ", but no such broker is registered.");
            break;
          }
        }
        if (o.error != ErrorCode::none) break;
        if (a.size() != rf) {
          fail(ErrorCode::invalid_replica_assignment,
               "The manual partition assignment includes a partition with " +
                   std::to_string(a.size()) +
                   " replica(s), but this is not consistent with previous partitions, which "
                   "have " +
                   std::to_string(rf) + " replica(s).");
          break;
        }
      }
    }
    if (o.error == ErrorCode::none) {
      accepted += add;
      if (!validate_only) {
        std::vector<MetadataRecord> records;
        records.reserve(static_cast<std::size_t>(add));
        const std::size_t rf = t->partitions.empty() ? 1 : t->partitions.front().replicas.size();
        auto placed = s.assignments.empty()
                          ? place(static_cast<std::int32_t>(add), static_cast<std::int16_t>(rf))
                          : std::optional(s.assignments);
        if (!placed) {
          o.error = ErrorCode::invalid_replication_factor;
          o.message = "The topic's replication factor of " + std::to_string(rf) + " exceeds the " +
                      std::to_string(live_brokers()) + " usable broker(s).";
          outcomes->push_back(std::move(o));
          accepted -= add;
          continue;
        }
        for (std::int32_t p = have; p < s.count; ++p) {
          PartitionRecord pr;
          pr.topic_id = t->id;
          pr.partition = p;
          pr.replicas = std::move((*placed)[static_cast<std::size_t>(p - have)]);
          pr.isr = pr.replicas;
          pr.leader = pr.replicas.front();
          records.push_back(std::move(pr));
        }
        groups.push_back(std::move(records));
        pending_counts_[s.name] = s.count;
        raised.emplace_back(s.name, s.count);
      }
    }
    outcomes->push_back(std::move(o));
  }
  if (groups.empty()) {
    done(std::move(*outcomes));
    return;
  }
  in_flight_partitions_ += accepted;
  commit_groups(std::move(groups),
                [this, outcomes, raised, accepted, done = std::move(done)](bool ok) {
                  in_flight_partitions_ -= accepted;
                  for (const auto& [name, count] : raised) {
                    auto it = pending_counts_.find(name);
                    if (it != pending_counts_.end() && it->second == count)
                      pending_counts_.erase(it);
                  }
                  if (!ok) {
                    for (auto& o : *outcomes) {
                      if (o.error == ErrorCode::none) {
                        o.error = ErrorCode::kafka_storage_error;
                        o.message = "The metadata log could not be written.";
                      }
                    }
                  }
                  done(std::move(*outcomes));
                });
}

void Controller::delete_topics(std::vector<std::pair<std::string, Uuid>> topics, DeleteDone done) {
  auto outcomes = std::make_shared<std::vector<DeleteOutcome>>();
  std::vector<MetadataRecord> records;
  std::map<Uuid, bool> removing;
  for (auto& [name, id] : topics) {
    DeleteOutcome o;
    o.name = name;
    o.id = id;
    const TopicState* t = name.empty() ? image_->topic(id) : image_->topic(name);
    if (!opts_.delete_topic_enable) {
      o.error = ErrorCode::topic_deletion_disabled;
      o.message = "Topic deletion is disabled.";
    } else if (!t) {
      o.error = name.empty() ? ErrorCode::unknown_topic_id : ErrorCode::unknown_topic_or_partition;
      o.message = name.empty() ? "This server does not host this topic ID."
                               : "This server does not host this topic-partition.";
    } else if (is_internal_topic(t->name)) {
      o.error = ErrorCode::invalid_topic_exception;
      o.message = "Cannot delete internal topic " + t->name + ".";
    } else {
      o.name = t->name;
      o.id = t->id;
      if (!removing[t->id]) records.push_back(RemoveTopicRecord{t->id});
      removing[t->id] = true;
    }
    outcomes->push_back(std::move(o));
  }
  if (records.empty()) {
    done(std::move(*outcomes));
    return;
  }
  commit(std::move(records), [outcomes, done = std::move(done)](bool ok) {
    if (!ok) {
      for (auto& o : *outcomes)
        if (o.error == ErrorCode::none) o.error = ErrorCode::kafka_storage_error;
    }
    done(std::move(*outcomes));
  });
}

void Controller::allocate_producer_ids(std::int32_t block, std::function<void(std::int64_t)> done) {
  const std::int64_t first = image_->next_producer_id();
  commit({ProducerIdsRecord{opts_.node_id, first + block}},
         [first, done = std::move(done)](bool ok) { done(ok ? first : -1); });
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
