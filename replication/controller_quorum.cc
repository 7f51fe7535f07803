// replication::Controller's quorum side: the RaftNode over the __cluster_metadata log, its
// quorum-state file and its snapshots; what is committed is applied to the state machine; the
// leader activates once its first record commits; fetches from followers and observers are
// answered (long-polled); snapshots are taken and loaded.
#include <filesystem>
#include <random>

#include "base/assert.h"
#include "base/bytes.h"
#include "base/clock.h"
#include "base/log.h"
#include "io/offload.h"
#include "io/record_batch.h"
#include "replication/controller.h"
#include "replication/controller_internal.h"
#include "replication/quorum/control_records.h"
#include "replication/quorum/file_snapshot_store.h"
#include "replication/quorum/quorum_state_file.h"
#include "replication/quorum/snapshot_file.h"

namespace samsa::replication {

using kafka::ErrorCode;
using quorum::NodeId;

namespace {

const io::PartitionId kMetadataPartition{"__cluster_metadata", 0};
constexpr std::uint32_t kMaxMetadataBatch = 64u << 20;
// How often the applied offset is written to quorum-state (a broker replays up to it at start).
constexpr std::int64_t kSaveAppliedMs = 5000;

std::uint64_t seeded() {
  std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace

// Here, where every member's type is complete.
Controller::~Controller() = default;

// ---- opening ----

io::Result<void> Controller::open_quorum() {
  io::LogConfig cfg;
  cfg.retention_ms = -1;  // metadata is never aged out; snapshots move the log start
  cfg.retention_bytes = -1;
  cfg.segment_bytes = 64u << 20;
  cfg.max_batch_bytes = kMaxMetadataBatch;
  auto log = opts_.log_dir->open_log(reactor_, kMetadataPartition, cfg);
  if (!log) return std::unexpected(log.error());
  log_ = std::move(*log);
  raft_log_ = std::make_unique<IoReplicaLog>(*log_);
  const std::filesystem::path dir = log_->dir();
  quorum_state_file_ = dir / quorum::kQuorumStateFile;
  auto qs = quorum::read_quorum_state(quorum_state_file_);
  if (!qs) return std::unexpected(qs.error());
  if (!qs->cluster_id.empty() && !opts_.quorum.cluster_id.empty() &&
      qs->cluster_id != opts_.quorum.cluster_id)
    return std::unexpected(io::Error{
        io::Errc::io_error, quorum_state_file_.string() + ": belongs to cluster " + qs->cluster_id +
                                ", this node is of " + opts_.quorum.cluster_id});
  persisted_ = qs->state;
  applied_saved_ = qs->applied_offset;
  auto store = quorum::FileSnapshotStore::open(
      dir, [this](const quorum::SnapshotId& id, std::vector<MetadataRecord> recs) {
        return install_snapshot(id, std::move(recs));
      });
  if (!store) return std::unexpected(store.error());
  snapshots_ = std::move(*store);
  // The newest snapshot, then the log records known committed after it.
  if (auto latest = snapshots_->latest()) {
    auto recs = quorum::read_snapshot_file(dir / quorum::snapshot_file_name(*latest));
    if (!recs) return std::unexpected(recs.error());
    for (const auto& r : *recs)
      state_->replay(r, latest->end_offset - 1);
    applied_offset_ = latest->end_offset;
    if (log_->log_end_offset() < latest->end_offset) {
      // A snapshot loaded from the leader whose log restart did not reach the disk.
      if (auto t = log_->truncate_fully_and_start_at(latest->end_offset); !t)
        return std::unexpected(t.error());
    }
    LOG_INFO("metadata: snapshot %020lld-%010d loaded (%zu records)",
             static_cast<long long>(latest->end_offset), latest->epoch, recs->size());
  }
  load_committed();
  quorum::RaftOptions ro;
  ro.node_id = opts_.node_id;
  ro.voters = opts_.quorum.voters;
  if (ro.voters.empty() && opts_.mode != Mode::broker) ro.voters = {opts_.node_id};
  ro.bootstrap = opts_.quorum.bootstrap;
  ro.election_timeout_ms = opts_.quorum.election_timeout_ms;
  ro.fetch_timeout_ms = opts_.quorum.fetch_timeout_ms;
  ro.election_backoff_max_ms = opts_.quorum.election_backoff_max_ms;
  ro.request_timeout_ms = std::max<std::int64_t>(opts_.quorum.fetch_timeout_ms, 1000);
  raft_ = std::make_unique<quorum::RaftNode>(
      ro, *raft_log_, *snapshots_, persisted_,
      [rng = std::mt19937_64(seeded())]() mutable { return rng(); }, mono_ms());
  raft_timer_.self = this;
  raft_timer_.fn = [](io::Timer* t) {
    Controller* c = static_cast<RaftTimer*>(t)->self;
    c->raft_timer_at_ = INT64_MAX;
    c->wake_parked(true);
    c->drive();
  };
  last_snapshot_ms_ = mono_ms();
  size_at_snapshot_ = log_->size_bytes();
  return {};
}

// Replays the log from applied_offset_ up to what quorum-state says was applied before the
// restart (every record there was committed), so a node serves from its own image at once.
void Controller::load_committed() {
  const std::int64_t until = std::min(applied_saved_, log_->log_end_offset());
  if (until <= applied_offset_) return;
  const auto [applied, skipped] = replay_range(applied_offset_, until);
  image_ = state_->committed_image();
  LOG_INFO("metadata: replayed %zu records (%zu skipped) to offset %lld, %zu topics", applied,
           skipped, static_cast<long long>(applied_offset_), image_->topics().size());
}

// Committed records [from, to) into the state machine (to is a batch boundary: the HW always
// is). Returns how many applied and how many were skipped.
std::pair<std::size_t, std::size_t> Controller::replay_range(std::int64_t from, std::int64_t to) {
  std::size_t applied = 0, skipped = 0;
  std::int64_t offset = std::max(from, log_->log_start_offset());
  std::vector<std::byte> buf, storage;
  while (offset < to) {
    auto rr = log_->read(offset, 4u << 20, to, true);
    if (!rr || rr->slices.empty()) {
      LOG_ERROR("metadata log: cannot read committed records at %lld: %s",
                static_cast<long long>(offset), rr ? "nothing there" : rr.error().detail.c_str());
      break;
    }
    for (const io::Slice& s : rr->slices) {
      buf.resize(s.length);
      if (!pread_all(s.file->fd, buf.data(), s.length, s.position)) return {applied, skipped};
      auto r = for_each_record(
          buf, storage, [&](const MetadataRecord* m, std::int64_t at, bool control) {
            if (at < applied_offset_ || at >= to) return;
            if (control) {
              state_->skip(at);  // the quorum's own record: an offset of the log only
            } else if (!m) {
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
            applied_offset_ = at + 1;
          });
      if (!r) LOG_ERROR("metadata log: %s", r.error().detail.c_str());
    }
    offset = rr->next_offset;
  }
  return {applied, skipped};
}

// ---- driving the node ----

void Controller::drive() {
  std::int64_t next = INT64_MAX;
  for (int round = 0; round < 16; ++round) {
    quorum::Effects e = raft_->take_effects();
    // Durable before anything this node says next (a vote above all).
    if (e.persist) persist(*e.persist);
    if (e.append_leader_change) append_leader_change();
    for (const auto& o : e.send)
      if (opts_.quorum.send) opts_.quorum.send(o);
    next = raft_->tick(mono_ms());
    if (!raft_->has_effects()) break;
  }
  next = std::min(next, expire_waiters(mono_ms()));
  if (raft_->leader() != last_leader_ || raft_->epoch() != last_leader_epoch_) {
    last_leader_ = raft_->leader();
    last_leader_epoch_ = raft_->epoch();
    if (opts_.quorum.on_leader) opts_.quorum.on_leader(last_leader_, last_leader_epoch_);
  }
  if (last_role_ == quorum::Role::leader && raft_->role() != quorum::Role::leader)
    deactivate(ErrorCode::not_controller);
  last_role_ = raft_->role();
  on_high_watermark();
  wake_parked(false);
  arm_raft_timer(next);
}

void Controller::persist(const quorum::QuorumState& s) {
  quorum::QuorumStateFile f;
  f.cluster_id = opts_.quorum.cluster_id;
  f.state = s;
  f.applied_offset = applied_saved_;
  f.voters = raft_ ? raft_->options().voters : opts_.quorum.voters;
  if (auto r = quorum::write_quorum_state(quorum_state_file_, f); !r) {
    // A vote that may not be durable must never be answered: this node cannot take part.
    LOG_ERROR("quorum: cannot write %s: %s; stopping", quorum_state_file_.c_str(),
              r.error().detail.c_str());
    std::abort();
  }
  persisted_ = s;
}

void Controller::save_applied_offset(bool force) {
  if (!raft_ || applied_offset_ <= applied_saved_) return;
  const std::int64_t now = mono_ms();
  if (!force && now - applied_saved_ms_ < kSaveAppliedMs) return;
  applied_saved_ = applied_offset_;
  applied_saved_ms_ = now;
  persist(persisted_);
}

void Controller::arm_raft_timer(std::int64_t next_ms) {
  for (const auto& p : parked_)
    next_ms = std::min(next_ms, p->deadline_ms);
  if (next_ms >= raft_timer_at_ && raft_timer_.armed()) return;
  if (raft_timer_.armed()) reactor_.disarm(&raft_timer_);
  raft_timer_at_ = next_ms;
  reactor_.arm(&raft_timer_, next_ms * 1'000'000);
}

// A new leader's first record, of its epoch: once a majority holds it, everything before it is
// committed and this node becomes the active controller.
void Controller::append_leader_change() {
  quorum::LeaderChangeMessage m;
  m.leader_id = opts_.node_id;
  m.voters = raft_->options().voters;
  m.granting_voters = raft_->options().voters;
  auto op = own_append(quorum::build_control_batch(
      m, quorum::ControlBatchOptions{log_->log_end_offset(), raft_->epoch(), wall_ms()}));
  auto r = log_->append(op.get());
  if (!r) {
    LOG_ERROR("quorum: cannot append the leader-change record: %s", r.error().detail.c_str());
    raft_->resign(mono_ms());
    return;
  }
  raft_->note_batch(raft_->epoch(), r->base_offset);
  raft_->leader_change_appended(r->base_offset);
  activation_offset_ = r->base_offset;
  own_appends_.push_back(std::move(op));
}

// A durable write of this node's own batches (a new leader's leader-change record, a
// follower's fetched ones): kept in own_appends_ until it completes, then the node moves on.
std::unique_ptr<Controller::FollowerAppend> Controller::own_append(std::vector<std::byte> bytes) {
  auto op = std::make_unique<FollowerAppend>();
  op->self = this;
  op->bytes = std::move(bytes);
  op->batch = op->bytes;
  op->durability = io::Durability::durable;
  op->done = [](io::AppendOp* o) {
    auto* f = static_cast<FollowerAppend*>(o);
    Controller* self = f->self;
    if (f->error) LOG_ERROR("metadata log write failed: %s", f->error->detail.c_str());
    std::erase_if(self->own_appends_, [f](const auto& p) { return p.get() == f; });
    self->on_log_durable();
  };
  return op;
}

void Controller::on_log_durable() {
  raft_->on_log_durable(mono_ms());
  drive();
}

// ---- what is committed ----

void Controller::on_high_watermark() {
  const std::int64_t raft_hw = raft_->high_watermark();
  const std::int64_t hw = std::min(raft_hw, log_->durable_end_offset());
  if (hw > applied_offset_) apply_committed(hw);
  // The first image goes out once this node knows what is committed and has applied all of
  // it. What it replayed at start is a prefix: it may lack topics created since, and a shard
  // takes the logs of a topic missing from its image for a deleted topic's (Kafka's brokers
  // also wait for their first catch-up before they serve).
  if (!published_ && raft_hw >= 0 && applied_offset_ >= hw) {
    image_ = state_->committed_image();
    published_ = true;
    LOG_INFO("metadata: caught up with the quorum at offset %lld (%zu topics, %zu brokers)",
             static_cast<long long>(image_->offset()), image_->topics().size(),
             image_->brokers().size());
    publish();
  }
  if (!active_ && raft_->is_leader() && activation_offset_ >= 0 &&
      applied_offset_ > activation_offset_)
    activate();
  finish_commits();
  maybe_snapshot();
  save_applied_offset(false);
}

void Controller::apply_committed(std::int64_t hw) {
  if (active_) {
    // The active controller's own proposals: already in the working view.
    state_->commit(hw - 1);
    applied_offset_ = hw;
  } else {
    replay_range(applied_offset_, hw);
  }
  if (state_->committed_image() != image_) {
    image_ = state_->committed_image();
    if (published_) publish();
  }
}

void Controller::activate() {
  active_ = true;
  activation_offset_ = -1;
  // Every registered broker gets a full session from now: heartbeat clocks are not logged.
  state_->on_become_active(wall_ms(), log_->log_end_offset());
  SAMSA_ASSERT_MSG(state_->next_offset() == log_->log_end_offset(),
                   "the active controller numbers its proposals from the log's end");
  LOG_INFO("quorum: node %d is the active controller (epoch %d, metadata offset %lld)",
           opts_.node_id, raft_->epoch(), static_cast<long long>(applied_offset_));
  if (opts_.mode != Mode::single) reactor_.arm(&tick_, mono_ns() + kTickMs * 1'000'000);
  auto waiting = std::move(waiting_activation_);
  waiting_activation_.clear();
  for (auto& [fn, refuse] : waiting)
    fn();
}

void Controller::deactivate(ErrorCode why) {
  const bool was = active_;
  active_ = false;
  activation_offset_ = -1;
  if (tick_.armed()) reactor_.disarm(&tick_);
  state_->on_resign();
  fail_commits(why);
  auto waiting = std::move(waiting_activation_);
  waiting_activation_.clear();
  for (auto& [fn, refuse] : waiting)
    refuse();
  // What was proposed and not committed leaves the working view; if the next leader commits
  // it, it comes back as a replayed record.
  if (state_->uncommitted() > 0) state_->revert_to(state_->committed_offset() + 1);
  if (why == ErrorCode::kafka_storage_error && raft_->is_leader()) raft_->resign(mono_ms());
  if (was)
    LOG_INFO("quorum: node %d is no longer the active controller (%s)", opts_.node_id,
             std::string(kafka::error_name(why)).c_str());
}

// ---- requests from other nodes ----

quorum::VoteResponse Controller::on_vote(const quorum::VoteRequest& r) {
  auto a = raft_->on_vote(r, mono_ms());
  drive();
  return a;
}

quorum::EpochResponse Controller::on_begin_epoch(const quorum::BeginEpochRequest& r) {
  auto a = raft_->on_begin_epoch(r, mono_ms());
  drive();
  return a;
}

quorum::EpochResponse Controller::on_end_epoch(const quorum::EndEpochRequest& r) {
  auto a = raft_->on_end_epoch(r, mono_ms());
  drive();
  return a;
}

quorum::FetchSnapshotResponse Controller::on_fetch_snapshot(const quorum::FetchSnapshotRequest& r,
                                                            std::int64_t max_bytes) {
  auto a = raft_->on_fetch_snapshot(r, max_bytes, mono_ms());
  drive();
  return a;
}

void Controller::on_fetch(const quorum::FetchRequest& r, std::int32_t max_bytes,
                          std::function<void(FetchReply)> done) {
  const auto a = raft_->on_fetch(r, mono_ms());
  drive();  // the fetch may have moved the HW
  if (a.may_wait && a.error == ErrorCode::none && r.max_wait_ms > 0 && !no_waiting_reads_) {
    auto p = std::make_unique<Parked>();
    p->req = r;
    p->max_bytes = max_bytes;
    p->deadline_ms = mono_ms() + r.max_wait_ms;
    p->hw_seen = a.high_watermark;
    p->done = std::move(done);
    parked_.push_back(std::move(p));
    arm_raft_timer(INT64_MAX);
    return;
  }
  done(fetch_now(r, max_bytes));
}

Controller::FetchReply Controller::fetch_now(const quorum::FetchRequest& r,
                                             std::int32_t max_bytes) {
  FetchReply out;
  out.answer = raft_->on_fetch(r, mono_ms());
  const auto& a = out.answer;
  if (a.error != ErrorCode::none || a.diverging || a.snapshot) return out;
  const std::int64_t end = log_->written_end_offset();
  if (r.fetch_offset >= end) return out;
  auto rr = log_->read(r.fetch_offset, static_cast<std::size_t>(std::max(max_bytes, 1)), end, true);
  if (!rr) {
    out.answer.error = ErrorCode::kafka_storage_error;
    return out;
  }
  for (const io::Slice& s : rr->slices) {
    const std::size_t at = out.records.size();
    out.records.resize(at + s.length);
    if (!pread_all(s.file->fd, out.records.data() + at, s.length, s.position)) {
      out.records.clear();
      out.answer.error = ErrorCode::kafka_storage_error;
      return out;
    }
  }
  return out;
}

void Controller::wake_parked(bool expired_only) {
  if (parked_.empty()) return;
  const std::int64_t now = mono_ms();
  std::vector<std::unique_ptr<Parked>> ready;
  for (auto it = parked_.begin(); it != parked_.end();) {
    Parked& p = **it;
    const bool moved = log_->written_end_offset() > p.req.fetch_offset ||
                       raft_->high_watermark() != p.hw_seen || !raft_->is_leader();
    if (now >= p.deadline_ms || no_waiting_reads_ || (!expired_only && moved)) {
      ready.push_back(std::move(*it));
      it = parked_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& p : ready)
    p->done(fetch_now(p->req, p->max_bytes));
}

void Controller::stop_waiting_reads() {
  no_waiting_reads_ = true;
  if (raft_) wake_parked(false);
}

// ---- answers to this node's requests ----

void Controller::on_vote_response(std::int64_t id, NodeId from, const quorum::VoteResponse& r) {
  raft_->on_vote_response(id, from, r, mono_ms());
  drive();
}

void Controller::on_epoch_response(std::int64_t id, NodeId from, const quorum::EpochResponse& r) {
  raft_->on_epoch_response(id, from, r, mono_ms());
  drive();
}

void Controller::on_request_failed(std::int64_t id, NodeId to, bool unreachable) {
  raft_->on_request_failed(id, to, unreachable, mono_ms());
  drive();
}

void Controller::on_fetch_snapshot_response(std::int64_t id, NodeId from,
                                            const quorum::FetchSnapshotResponse& r) {
  raft_->on_fetch_snapshot_response(id, from, r, mono_ms());
  drive();
}

void Controller::on_fetch_response(std::int64_t id, NodeId from, const quorum::FetchAnswer& a,
                                   std::span<const std::byte> records) {
  // The whole batches the answer carries.
  quorum::FetchResponse resp;
  resp.answer = a;
  std::size_t pos = 0;
  while (pos + io::batch::kHeaderSize <= records.size()) {
    const io::BatchInfo info = io::batch::parse_header(records.data() + pos);
    if (info.length <= 0 || pos + static_cast<std::size_t>(info.length) > records.size()) break;
    if (resp.records_base < 0) resp.records_base = info.base_offset;
    resp.records_end = info.base_offset + info.last_offset_delta + 1;
    pos += static_cast<std::size_t>(info.length);
  }
  const auto step = raft_->on_fetch_response(id, from, resp, mono_ms());
  if (step == quorum::FollowerStep::append) {
    struct Note final : io::Log::BatchVisitor {
      explicit Note(quorum::RaftNode& n) : raft(n) {}
      void on_batch(const io::BatchInfo& b, std::span<const std::byte>) override {
        raft.note_batch(b.partition_leader_epoch, b.base_offset);
      }
      quorum::RaftNode& raft;
    } note(*raft_);
    auto op = own_append(std::vector<std::byte>(
        records.begin(), records.begin() + static_cast<std::ptrdiff_t>(pos)));
    if (auto r = log_->append_replicated(op.get(), &note); !r)
      LOG_WARN("quorum: appending fetched metadata at %lld: %s",
               static_cast<long long>(resp.records_base), r.error().detail.c_str());
    else
      own_appends_.push_back(std::move(op));
  }
  drive();
}

void Controller::resign() {
  if (!raft_) return;
  raft_->resign(mono_ms());
  drive();
}

// ---- snapshots ----

void Controller::maybe_snapshot() {
  if (snapshot_in_flight_ || applied_offset_ <= 0 || opts_.mode == Mode::single) return;
  const auto latest = snapshots_->latest();
  if (latest && latest->end_offset >= applied_offset_) return;
  const std::int64_t grown = static_cast<std::int64_t>(log_->size_bytes()) - size_at_snapshot_;
  const bool due =
      grown >= opts_.quorum.snapshot_bytes ||
      (mono_ms() - last_snapshot_ms_ >= opts_.quorum.snapshot_interval_ms && grown > 0);
  if (!due) return;
  const std::int64_t end = applied_offset_;
  const auto epoch = log_->leader_epochs().epoch_for_offset(end - 1);
  quorum::SnapshotId id{end, epoch.value_or(latest ? latest->epoch : 0)};
  // The records are made here (the committed view is this thread's); the file is written and
  // synced on an offload thread.
  auto bytes = std::make_shared<std::vector<std::byte>>(
      quorum::encode_snapshot(state_->snapshot(), id, wall_ms()));
  snapshot_in_flight_ = true;
  last_snapshot_ms_ = mono_ms();
  size_at_snapshot_ = static_cast<std::int64_t>(log_->size_bytes());
  io::offload(
      reactor_, static_cast<std::uint64_t>(opts_.node_id),
      [dir = log_->dir(), id, bytes] { return quorum::write_snapshot_file(dir, id, *bytes); },
      [this, id](io::Result<std::filesystem::path> r) {
        snapshot_in_flight_ = false;
        if (!r) {
          LOG_ERROR("metadata: snapshot at %lld: %s", static_cast<long long>(id.end_offset),
                    r.error().detail.c_str());
          return;
        }
        (void)snapshots_->add(id);
        (void)snapshots_->delete_before(id);
        // The log below the snapshot is no longer needed: a follower that lacks it gets the
        // snapshot instead.
        if (auto d = log_->delete_records(id.end_offset); !d)
          LOG_WARN("metadata: moving the log start to %lld: %s",
                   static_cast<long long>(id.end_offset), d.error().detail.c_str());
        for (const auto& f : log_->apply_retention(wall_ms())) {
          std::error_code ec;
          std::filesystem::remove(f, ec);
        }
        LOG_INFO("metadata: snapshot %020lld-%010d written", static_cast<long long>(id.end_offset),
                 id.epoch);
      });
}

bool Controller::install_snapshot(const quorum::SnapshotId& id,
                                  std::vector<MetadataRecord> records) {
  if (!log_->idle()) return false;  // fetched again later
  if (auto t = log_->truncate_fully_and_start_at(id.end_offset); !t) {
    LOG_ERROR("metadata: restarting the log at %lld: %s", static_cast<long long>(id.end_offset),
              t.error().detail.c_str());
    return false;
  }
  auto fresh = std::make_unique<ControllerState>(state_->options());
  for (const auto& r : records)
    fresh->replay(r, id.end_offset - 1);
  state_ = std::move(fresh);
  applied_offset_ = id.end_offset;
  image_ = state_->committed_image();
  if (published_) publish();  // else the first image waits for the catch-up (on_high_watermark)
  save_applied_offset(true);
  LOG_INFO("metadata: loaded snapshot %020lld-%010d from the leader (%zu records)",
           static_cast<long long>(id.end_offset), id.epoch, records.size());
  return true;
}

// ---- what DescribeQuorum shows ----

Controller::QuorumView Controller::quorum_view() const {
  QuorumView v;
  if (!raft_) return v;
  v.role = raft_->role();
  v.leader = raft_->leader();
  v.epoch = raft_->epoch();
  v.high_watermark = raft_->high_watermark();
  v.log_end_offset = log_->log_end_offset();
  v.log_start_offset = log_->log_start_offset();
  v.applied_offset = applied_offset_;
  v.snapshot = snapshots_->latest();
  v.voters = raft_->options().voters;
  v.replicas = raft_->progress(mono_ms());
  return v;
}

}  // namespace samsa::replication
