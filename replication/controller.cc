#include "replication/controller.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>

#include "base/clock.h"
#include "base/log.h"
#include "io/batch_builder.h"
#include "io/record_batch.h"

namespace samsa::replication {

using kafka::ErrorCode;

namespace {

const io::PartitionId kMetadataPartition{"__cluster_metadata", 0};

// Topic names that differ only in '.' versus '_' collide in metric names; Kafka refuses them.
std::string collision_key(std::string_view name) {
  std::string s(name);
  std::replace(s.begin(), s.end(), '.', '_');
  return s;
}

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

}  // namespace

struct Controller::Commit : io::AppendOp {
  std::vector<std::byte> bytes;
  std::vector<MetadataRecord> records;
  std::function<void(bool)> then;
  Controller* self;
};

Controller::Controller(io::Reactor& r, Options opts)
    : reactor_(r), opts_(std::move(opts)), applied_(opts_.reactors, -1) {
  image_ = std::make_shared<MetadataImage>();
}

Controller::~Controller() = default;

io::Result<void> Controller::open() {
  io::LogConfig cfg;
  cfg.retention_ms = -1;  // metadata is never aged out
  cfg.retention_bytes = -1;
  cfg.segment_bytes = 64u << 20;
  auto log = opts_.log_dir->open_log(reactor_, kMetadataPartition, cfg);
  if (!log) return std::unexpected(log.error());
  log_ = std::move(*log);

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
      std::size_t pos = 0;
      while (pos + io::batch::kHeaderSize <= buf.size()) {
        std::span<const std::byte> rest(buf.data() + pos, buf.size() - pos);
        io::BatchInfo info = io::batch::parse_header(rest.data());
        std::span<const std::byte> b = rest.first(static_cast<std::size_t>(info.length));
        pos += static_cast<std::size_t>(info.length);
        auto recs = io::batch::records_of(b, storage);
        if (!recs) return std::unexpected(recs.error());
        io::batch::RecordReader reader(*recs, info.record_count);
        for (;;) {
          auto rec = reader.next();
          if (!rec) return std::unexpected(rec.error());
          if (!*rec) break;
          std::int64_t at = info.base_offset + (*rec)->offset_delta;
          auto m = (*rec)->value ? decode_record(*(*rec)->value) : std::nullopt;
          if (!m) {
            LOG_ERROR("metadata log: undecodable record at offset %lld, skipped",
                      static_cast<long long>(at));
            ++skipped;
            continue;
          }
          if (!image->apply(*m)) {
            LOG_WARN("metadata log: record at offset %lld does not apply, skipped",
                     static_cast<long long>(at));
            ++skipped;
            continue;
          }
          ++applied;
        }
        image->set_offset(info.base_offset + info.last_offset_delta);
      }
    }
    offset = rr->next_offset;
  }
  image_ = std::move(image);
  LOG_INFO("metadata: replayed %zu records (%zu skipped), %zu topics, image version %lld", applied,
           skipped, image_->topics().size(), static_cast<long long>(image_->offset()));
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
  auto* c = new Commit{};
  c->self = this;
  c->records = std::move(records);
  c->then = std::move(then);
  std::vector<io::SimpleRecord> recs;
  const std::int64_t now = wall_ms();
  for (const auto& r : c->records) {
    auto v = encode_record(r);
    recs.push_back(io::SimpleRecord{
        now, std::nullopt, std::string(reinterpret_cast<const char*>(v.data()), v.size()), {}});
  }
  c->bytes = io::build_batch(recs);
  c->batch = c->bytes;
  c->durability = io::Durability::durable;
  c->done = [](io::AppendOp* op) {
    auto* c = static_cast<Commit*>(op);
    c->self->on_committed(c);
  };
  auto r = log_->append(c);
  if (!r) {
    LOG_ERROR("metadata log append failed: %s", r.error().detail.c_str());
    auto then_fn = std::move(c->then);
    delete c;
    then_fn(false);
  }
}

void Controller::on_committed(Commit* c) {
  std::unique_ptr<Commit> owned(c);
  if (c->error) {
    LOG_ERROR("metadata log write failed: %s", c->error->detail.c_str());
    c->then(false);
    return;
  }
  auto next = std::make_shared<MetadataImage>(*image_);
  for (const auto& r : c->records) {
    if (!next->apply(r)) LOG_ERROR("metadata: committed record does not apply (bug)");
  }
  next->set_offset(c->result.last_offset);
  image_ = std::move(next);
  publish();
  const std::int64_t version = image_->offset();
  auto then = std::move(c->then);
  waiters_.push_back(Waiter{version, [then = std::move(then)] { then(true); }});
  run_waiters();
}

void Controller::create_topics(std::vector<TopicSpec> specs, bool validate_only, CreateDone done) {
  auto outcomes = std::make_shared<std::vector<TopicOutcome>>();
  std::vector<MetadataRecord> records;
  std::map<std::string, int> seen;
  for (const auto& s : specs)
    ++seen[s.name];
  std::map<std::string, std::string> collisions;
  for (const auto& [name, t] : image_->topics())
    collisions.emplace(collision_key(name), name);
  std::vector<std::string> reserved;

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
    } else if (rf > opts_.live_brokers) {
      fail(ErrorCode::invalid_replication_factor,
           "Unable to replicate the partition " + std::to_string(rf) +
               " time(s): The target replication factor of " + std::to_string(rf) +
               " cannot be reached because only " + std::to_string(opts_.live_brokers) +
               " broker(s) are registered.");
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
      collisions.emplace(collision_key(s.name), s.name);
      if (!validate_only) {
        o.id = random_uuid();
        records.push_back(TopicRecord{s.name, o.id});
        for (const auto& [k, v] : s.configs)
          records.push_back(ConfigRecord{ConfigResource::topic, s.name, k, v});
        for (std::int32_t p = 0; p < partitions; ++p) {
          PartitionRecord pr;
          pr.topic_id = o.id;
          pr.partition = p;
          pr.replicas = {opts_.node_id};
          pr.isr = {opts_.node_id};
          pr.leader = opts_.node_id;
          records.push_back(std::move(pr));
        }
        ++in_flight_names_[s.name];
        reserved.push_back(s.name);
      }
    }
    outcomes->push_back(std::move(o));
  }
  if (records.empty()) {
    done(std::move(*outcomes));
    return;
  }
  commit(std::move(records), [this, outcomes, reserved, done = std::move(done)](bool ok) {
    for (const auto& n : reserved)
      if (--in_flight_names_[n] == 0) in_flight_names_.erase(n);
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

void Controller::alter_configs(std::vector<ConfigChange> changes, bool validate_only,
                               ConfigDone done) {
  auto results = std::make_shared<std::vector<std::pair<ErrorCode, std::string>>>();
  std::vector<MetadataRecord> records;
  for (auto& c : changes) {
    std::pair<ErrorCode, std::string> r{ErrorCode::none, {}};
    if (c.resource == ConfigResource::topic) {
      if (!image_->topic(c.name)) {
        r = {ErrorCode::unknown_topic_or_partition, "Topic " + c.name + " does not exist."};
      } else if (c.value) {
        if (auto why = validate_topic_config(c.key, *c.value))
          r = {ErrorCode::invalid_config, *why};
      } else if (!find_topic_config(c.key)) {
        r = {ErrorCode::invalid_config, "unknown topic config " + c.key};
      }
    }
    if (r.first == ErrorCode::none && !validate_only)
      records.push_back(ConfigRecord{c.resource, c.name, c.key, c.value});
    results->push_back(std::move(r));
  }
  if (records.empty()) {
    done(std::move(*results));
    return;
  }
  commit(std::move(records), [results, done = std::move(done)](bool ok) {
    if (!ok) {
      for (auto& r : *results)
        if (r.first == ErrorCode::none)
          r = {ErrorCode::kafka_storage_error, "metadata log write failed"};
    }
    done(std::move(*results));
  });
}

void Controller::allocate_producer_ids(std::int32_t block, std::function<void(std::int64_t)> done) {
  const std::int64_t first = image_->next_producer_id();
  commit({ProducerIdsRecord{opts_.node_id, first + block}},
         [first, done = std::move(done)](bool ok) { done(ok ? first : -1); });
}

io::Result<void> Controller::close() {
  if (!log_) return {};
  reactor_.run_until([&] { return log_->idle(); }, 10'000'000'000);
  auto r = log_->close();
  log_.reset();
  return r;
}

}  // namespace samsa::replication
