// replication::Partition's Kafka-facing calls: what a Produce, Fetch, ListOffsets,
// DeleteRecords and OffsetForLeaderEpoch do to one partition, and what the cluster (metadata,
// a follower's fetch answers, AlterPartition answers) tells its replica. Handlers only decode,
// call these and encode.
#include <algorithm>
#include <cinttypes>

#include "base/assert.h"
#include "base/clock.h"
#include "base/log.h"
#include "replication/partition.h"

namespace samsa::replication {

using kafka::ErrorCode;

// ---------------------------------------------------------------------------------------------
// Produce

void Partition::produce(ProduceOp* op) {
  // A partition belongs to its shard's reactor; work for it is posted there.
  SAMSA_ASSERT(io::Reactor::current() == &reactor_);
  op->partition_ = this;
  const bool all = op->acks == -1;
  // Kafka checks min.insync.replicas before appending: NOT_ENOUGH_REPLICAS stores nothing.
  if (all && replicated()) {
    if (ErrorCode e = check_acks_all(); e != ErrorCode::none) {
      op->error = e;
      op->produced(op);
      return;
    }
  }
  op->durability = all ? io::Durability::durable : io::Durability::written;
  op->done = &Partition::on_produce_written;
  auto r = append(op, op->origin, op->verification);
  if (!r) {
    op->error = r.error().code;
    op->message = std::move(r.error().message);
    op->error_log_start = r.error().log_start_offset;
    op->log_error = r.error().log_error;
    LOG_DEBUG("produce to %s-%d rejected: %s", topic_.c_str(), index_, op->message.c_str());
    op->produced(op);
    return;
  }
  op->result = *r;
}

void Partition::on_produce_written(io::AppendOp* a) {
  auto* op = static_cast<ProduceOp*>(a);
  Partition& p = *op->partition_;
  if (op->error == ErrorCode::none && a->error) {
    op->error = kafka_error_of(a->error->code);
    op->message = a->error->detail;
    op->log_error = a->error->code;
    LOG_ERROR("append to %s-%d failed after acceptance: %s", p.topic_.c_str(), p.index_,
              a->error->detail.c_str());
  }
  if (op->error != ErrorCode::none || op->acks != -1 || !p.replicated()) {
    op->produced(op);
    return;
  }
  // Synced here; an acks=all answer also needs the ISR to hold it.
  op->commit_.op = op;
  op->commit_.last_offset = op->result.last_offset;
  op->commit_.fn = &Partition::on_produce_committed;
  op->deadline_.op = op;
  op->deadline_.fn = &Partition::on_produce_deadline;
  p.reactor_.arm(&op->deadline_, op->deadline_ns);
  p.wait_committed(&op->commit_);
}

void Partition::on_produce_committed(CommitWaiter* w, ErrorCode outcome) {
  ProduceOp* op = static_cast<ProduceOp::Commit*>(w)->op;
  op->partition_->reactor_.disarm(&op->deadline_);
  op->error = outcome;
  op->produced(op);
}

void Partition::on_produce_deadline(io::Timer* t) {
  ProduceOp* op = static_cast<ProduceOp::Deadline*>(t)->op;
  op->partition_->cancel_commit_wait(&op->commit_);
  op->error = ErrorCode::request_timed_out;
  op->produced(op);
}

// ---------------------------------------------------------------------------------------------
// Fetch

std::int64_t Partition::read_limit(const ReadArgs& args, ReadOutcome& out) {
  if (args.replica && replica_) {
    if (args.refuse_replicas) {
      // Stopping: followers go elsewhere (their fetches would keep the drain busy forever).
      out.error = ErrorCode::not_leader_or_follower;
      return -1;
    }
    // Once per read: a re-read after a long poll reports the same offset again, which only
    // refreshes the follower's last fetch time.
    auto a = replica_->on_replica_fetch(*args.replica, mono_ms());
    update_high_watermark();
    out.high_watermark = high_watermark_;
    out.last_stable = last_stable_offset();
    out.log_start = log_->log_start_offset();
    out.log_end_seen = log_->written_end_offset();
    out.diverging = a.diverging;
    out.error = a.error;
    // A diverged follower truncates first: no records.
    if (a.error != ErrorCode::none || a.diverging) return -1;
    return out.log_end_seen;
  }
  out.high_watermark = high_watermark_;
  out.last_stable = last_stable_offset();
  out.log_start = log_->log_start_offset();
  if (args.offset < out.log_start || args.offset > log_->log_end_offset()) {
    out.error = ErrorCode::offset_out_of_range;
    return -1;
  }
  return args.read_committed ? out.last_stable : out.high_watermark;
}

bool Partition::read(const ReadArgs& args, ReadOutcome& out, io::ReadAhead* ra) {
  SAMSA_ASSERT(io::Reactor::current() == &reactor_);
  out.slices.clear();
  out.aborted.clear();
  out.bytes = 0;
  out.error = ErrorCode::none;
  out.diverging.reset();
  const std::int64_t limit = read_limit(args, out);
  if (out.error != ErrorCode::none || args.offset >= limit) return true;
  auto r = log_->read(args.offset, static_cast<std::size_t>(std::max(args.max_bytes, 0)), limit,
                      true, ra);
  if (!r && r.error().code == io::Errc::would_block) return false;
  if (!r) {
    out.error = kafka_error_of(r.error().code);
    if (out.error == ErrorCode::kafka_storage_error)
      LOGF_ERROR(
          (log::Fields{.topic = topic_, .partition = index_, .error_code = kafka::code(out.error)}),
          "fetch from %s-%d: %s", topic_.c_str(), index_, r.error().detail.c_str());
    return true;
  }
  out.slices = std::move(r->slices);
  for (const auto& s : out.slices)
    out.bytes += s.length;
  // The consumer drops the records of aborted transactions the batches returned overlap.
  if (args.read_committed && !args.replica && !out.slices.empty())
    txns_.aborted_in(args.offset, out.slices.back().last_offset + 1, out.aborted);
  return true;
}

void Partition::fill(io::ReadAhead& ra, std::function<void(std::optional<std::string>)> done) {
  log_->fill(ra, std::move(done));
}

bool Partition::moved_since(const ReadOutcome& seen, bool replica) const {
  return high_watermark_ != seen.high_watermark ||
         (replica && log_->written_end_offset() != seen.log_end_seen);
}

// ---------------------------------------------------------------------------------------------
// ListOffsets, DeleteRecords, OffsetForLeaderEpoch

OffsetAnswer Partition::list_offset(std::int64_t timestamp, bool read_committed,
                                    io::ReadAhead* ra) {
  OffsetAnswer out;
  // KIP-207: a new leader's HW may still be below the one its predecessor served; answering
  // from it could move a consumer's end backwards. Retriable until the ISR catches it up.
  if (timestamp != kEarliestOffset && timestamp != kEarliestLocalOffset && replicated() &&
      !replica_->visible_high_watermark()) {
    out.error = ErrorCode::offset_not_available;
    return out;
  }
  out.leader_epoch = leader_epoch_;
  const std::int64_t limit = read_committed ? last_stable_offset() : high_watermark_;
  io::Result<std::optional<io::OffsetAndTimestamp>> found;
  switch (timestamp) {
    case kLatestOffset:
      out.offset = limit;
      return out;
    case kEarliestOffset:
    case kEarliestLocalOffset:
      out.offset = log_->log_start_offset();
      return out;
    case kLatestTieredOffset:
      out.leader_epoch = -1;
      return out;
    case kMaxTimestampOffset:
      found = log_->max_timestamp(ra);
      break;
    default:
      if (timestamp < 0) {
        out.error = ErrorCode::invalid_request;
        return out;
      }
      found = log_->offset_for_timestamp(timestamp, ra);
  }
  if (!found && found.error().code == io::Errc::would_block) {
    out.ready = false;
    return out;
  }
  if (!found) {
    out.error = kafka_error_of(found.error().code);
    LOGF_ERROR(
        (log::Fields{.topic = topic_, .partition = index_, .error_code = kafka::code(out.error)}),
        "ListOffsets on %s-%d: %s", topic_.c_str(), index_, found.error().detail.c_str());
    return out;
  }
  if (timestamp == kMaxTimestampOffset) {
    if (*found) {
      out.offset = (*found)->offset;
      out.timestamp = (*found)->timestamp;
    }
  } else if (*found && (*found)->offset < limit) {
    out.offset = (*found)->offset;
    out.timestamp = (*found)->timestamp;
  } else {
    out.leader_epoch = -1;  // no record at or after the timestamp: Kafka names no epoch either
  }
  return out;
}

std::expected<std::int64_t, ErrorCode> Partition::delete_records(std::int64_t offset) {
  const std::int64_t to = offset == -1 ? high_watermark_ : offset;
  if (to < 0 || to > high_watermark_) return std::unexpected(ErrorCode::offset_out_of_range);
  auto r = log_->delete_records(to);
  if (!r) {
    LOG_ERROR("DeleteRecords on %s-%d: %s", topic_.c_str(), index_, r.error().detail.c_str());
    return std::unexpected(kafka_error_of(r.error().code));
  }
  return *r;
}

io::LeaderEpochCache::EpochEnd Partition::end_offset_for(std::int32_t epoch) {
  return log_->leader_epochs().end_offset_for(epoch, log_->log_end_offset());
}

// ---------------------------------------------------------------------------------------------
// What the cluster tells the replica

void Partition::apply_metadata(const PartitionState& p, std::int64_t now_ms) {
  SAMSA_ASSERT(replica_);
  replica_->apply_metadata(p, now_ms);
  update_high_watermark();
}

FollowerStep Partition::on_fetch_response(const FollowerFetchResponse& r, std::int64_t now_ms) {
  SAMSA_ASSERT(replica_);
  const FollowerStep step = replica_->on_fetch_response(r, now_ms);
  update_high_watermark();
  return step;
}

void Partition::on_alter_partition_answer(const AlterPartitionAnswer& a, std::int64_t now_ms) {
  SAMSA_ASSERT(replica_);
  replica_->on_alter_partition_answer(a, now_ms);
  update_high_watermark();
}

}  // namespace samsa::replication
