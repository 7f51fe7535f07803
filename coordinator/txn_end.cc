// TxnCoordinator: ending transactions — EndTxn (transaction version 1, and version 2 with its
// epoch bump per transaction), the coordinator's own aborts (fencing), the markers and the
// completion. See txn_coordinator_impl.h for how the class's sources divide.
#include <cinttypes>

#include "base/assert.h"
#include "base/clock.h"
#include "base/log.h"
#include "coordinator/txn_coordinator.h"
#include "coordinator/txn_coordinator_impl.h"

namespace samsa::coordinator {
namespace {

bool marker_done(ErrorCode e) {
  switch (e) {
    case ErrorCode::none:
    // Kafka's marker handler gives up on these too: the partition is gone, or a newer producer
    // epoch or coordinator wrote there since (this round is moot).
    case ErrorCode::unknown_topic_id:
    case ErrorCode::invalid_producer_epoch:
    case ErrorCode::transaction_coordinator_fenced:
      return true;
    default:
      return false;
  }
}

}  // namespace

void TxnCoordinator::end_txn(TxnEndRequest req, Done<TxnEndResult> done) {
  if (ErrorCode e = check_id(req.transactional_id); e != ErrorCode::none) return done({e});
  Txn* t = find(req.transactional_id);
  if (!t) return done({ErrorCode::invalid_producer_id_mapping});
  if (t->busy) return done({ErrorCode::concurrent_transactions});
  if (req.tv2) return end_txn_v2(*t, req, std::move(done));
  end_txn_v1(*t, req, std::move(done));
}

void TxnCoordinator::end_txn_v1(Txn& t, const TxnEndRequest& req, Done<TxnEndResult> done) {
  if (t.v.producer_id != req.producer_id) return done({ErrorCode::invalid_producer_id_mapping});
  if (t.v.producer_epoch != req.producer_epoch) return done({ErrorCode::producer_fenced});
  switch (t.v.state) {
    case TxnState::ongoing:
      break;
    case TxnState::complete_commit:  // a retry of an EndTxn that succeeded
      return done({req.commit ? ErrorCode::none : ErrorCode::invalid_txn_state});
    case TxnState::complete_abort:
      return done({req.commit ? ErrorCode::invalid_txn_state : ErrorCode::none});
    case TxnState::prepare_commit:
    case TxnState::prepare_abort:
    case TxnState::prepare_epoch_fence:
      return done({ErrorCode::concurrent_transactions});
    default:
      return done({ErrorCode::invalid_txn_state});
  }
  TxnValue next = t.v;
  next.state = req.commit ? TxnState::prepare_commit : TxnState::prepare_abort;
  transition(t, std::move(next), [this, id = t.id, done = std::move(done)](ErrorCode e) mutable {
    // Answered once the decision is durable; the markers follow (as Kafka does).
    done({e});
    if (e != ErrorCode::none) return;
    if (Txn* t = find(id)) send_markers(*t);
  });
}

// Kafka's table for version 2 (TransactionCoordinator.endTransaction), where a retry is the
// epoch before the current one (the answer to the first try was lost) and current is equal:
//   state            abort/retry      abort/current   commit/retry       commit/current
//   Ongoing          PRODUCER_FENCED  prepare         PRODUCER_FENCED    prepare
//   Empty            PRODUCER_FENCED  bump            PRODUCER_FENCED    INVALID_TXN_STATE
//   CompleteAbort    NONE             bump            INVALID_TXN_STATE  INVALID_TXN_STATE
//   CompleteCommit   INVALID_TXN_STATE bump           NONE               INVALID_TXN_STATE
// where bump is an abort with no partitions: the epoch moves on, no markers.
void TxnCoordinator::end_txn_v2(Txn& t, const TxnEndRequest& req, Done<TxnEndResult> done) {
  const TxnValue& v = t.v;
  // After an overflow the client's retry still names the old producer id, at the last epoch.
  // Only a state a version 2 end (or a timeout's abort of a version 2 transaction) left
  // takes retries: Kafka 4.1 also takes one after a version 1 transaction, where the epoch
  // one below is a fenced zombie's (the simulation found it adopting its successor's epoch).
  const bool bumped = v.client_transaction_version >= 2;
  const bool retry_on_overflow = bumped && v.previous_producer_id == req.producer_id &&
                                 req.producer_epoch == INT16_MAX - 1 && v.producer_epoch == 0;
  const bool retry = (bumped && v.producer_epoch == req.producer_epoch + 1) || retry_on_overflow;
  const bool current = v.producer_epoch == req.producer_epoch;
  if (v.producer_id != req.producer_id && !retry_on_overflow)
    return done({ErrorCode::invalid_producer_id_mapping});
  const TxnEndResult now{ErrorCode::none, v.producer_id, v.producer_epoch};
  switch (v.state) {
    case TxnState::ongoing:
      if (!current) return done({ErrorCode::producer_fenced});
      return prepare_v2(t, req.commit, std::move(done));
    case TxnState::prepare_commit:
    case TxnState::prepare_abort:
    case TxnState::prepare_epoch_fence:
      if (!retry) return done({ErrorCode::producer_fenced});
      return done({(v.state == TxnState::prepare_commit) == req.commit
                       ? ErrorCode::concurrent_transactions
                       : ErrorCode::invalid_txn_state});
    case TxnState::empty:
    case TxnState::complete_commit:
    case TxnState::complete_abort: {
      if (!current && !(retry && v.state != TxnState::empty))
        return done({ErrorCode::producer_fenced});
      if (current) {
        if (req.commit) return done({ErrorCode::invalid_txn_state});
        return prepare_v2(t, false, std::move(done));  // the bump
      }
      const bool same = (v.state == TxnState::complete_commit) == req.commit;
      if (!same) return done({ErrorCode::invalid_txn_state});
      ++stats_.ended_v2;
      return done(now);
    }
    default:
      return done({ErrorCode::invalid_txn_state});
  }
}

void TxnCoordinator::prepare_v2(Txn& t, bool commit, Done<TxnEndResult> done) {
  auto write = [this, id = t.id, commit, done = std::move(done)](
                   std::expected<std::int64_t, ErrorCode> next_pid_or) mutable {
    if (!next_pid_or) return done({next_pid_or.error()});
    const std::int64_t next_pid = *next_pid_or;
    Txn* t = find(id);
    if (!t || t->busy) return done({ErrorCode::concurrent_transactions});
    TxnValue next = t->v;
    next.state = commit ? TxnState::prepare_commit : TxnState::prepare_abort;
    next.client_transaction_version = 2;
    next.previous_producer_id = next.producer_id;
    next.next_producer_id = next_pid;
    // The markers carry the bumped epoch, so a late batch of this transaction (at the old
    // one) is refused by every partition once its marker is there.
    ++next.producer_epoch;
    const TxnEndResult answer{ErrorCode::none, next_pid >= 0 ? next_pid : next.producer_id,
                              next_pid >= 0 ? std::int16_t{0} : next.producer_epoch};
    transition(*t, std::move(next),
               [this, id, answer, done = std::move(done)](ErrorCode e) mutable {
                 if (e != ErrorCode::none) return done({e});
                 ++stats_.ended_v2;
                 done(answer);
                 if (Txn* t = find(id)) send_markers(*t);
               });
  };
  if (t.v.producer_epoch < INT16_MAX - 1) return write(std::int64_t{-1});
  // The bump reaches the last epoch: the markers use it, and the next transaction a new
  // producer id (from Complete* on).
  t.busy = true;  // nothing else may start meanwhile
  ids_.next([this, id = t.id,
             write = std::move(write)](std::expected<std::int64_t, ErrorCode> pid) mutable {
    if (Txn* t = find(id)) t->busy = false;
    write(pid);
  });
}

void TxnCoordinator::fence_and_abort(Txn& t, const char* why) {
  SAMSA_ASSERT(t.v.state == TxnState::ongoing && !t.busy);
  LOG_INFO("transaction coordinator: aborting the transaction of %s (producer %" PRId64
           " epoch %d): %s",
           t.id.c_str(), t.v.producer_id, t.v.producer_epoch, why);
  TxnValue next = t.v;
  // The epoch bump fences the producer that opened the transaction (Kafka's PrepareEpochFence,
  // written as PrepareAbort with the new epoch).
  if (next.producer_epoch < INT16_MAX) ++next.producer_epoch;
  next.state = TxnState::prepare_abort;
  transition(t, std::move(next), [this, id = t.id](ErrorCode e) {
    if (e != ErrorCode::none) return;  // tried again by the next timer pass
    if (Txn* t = find(id)) send_markers(*t);
  });
}

// ---------------------------------------------------------------------------------------------
// Markers and completion

void TxnCoordinator::send_markers(Txn& t) {
  LOG_DEBUG("send_markers %s state %d unmarked %zu partitions %zu", t.id.c_str(), (int)t.v.state,
            t.unmarked.size(), t.v.partitions.size());
  if (t.v.state != TxnState::prepare_commit && t.v.state != TxnState::prepare_abort) return;
  const Slot& s = slots_[static_cast<std::size_t>(t.partition)];
  if (s.state != LoadState::loaded) return;
  if (t.unmarked.empty()) {
    for (const auto& [topic, parts] : t.v.partitions)
      for (std::int32_t p : parts)
        t.unmarked.push_back({topic, p});
  }
  if (t.unmarked.empty()) {
    complete(t);
    return;
  }
  t.busy = true;
  LOG_DEBUG("transaction coordinator: %s markers of %s (producer %" PRId64
            " epoch %d) to %zu partitions",
            t.v.state == TxnState::prepare_commit ? "COMMIT" : "ABORT", t.id.c_str(),
            t.v.producer_id, t.v.producer_epoch, t.unmarked.size());
  const MarkerWriter::Marker m{t.v.producer_id, t.v.producer_epoch,
                               t.v.state == TxnState::prepare_commit, s.epoch};
  auto targets = t.unmarked;
  markers_->write(m, targets,
                  [this, id = t.id, term = s.term, targets](std::vector<ErrorCode> errors) mutable {
                    on_markers(id, term, std::move(targets), std::move(errors));
                  });
}

void TxnCoordinator::on_markers(const std::string& id, std::uint64_t term,
                                std::vector<MarkerWriter::Target> sent,
                                std::vector<ErrorCode> errors) {
  Txn* t = find(id);
  if (!t || slots_[static_cast<std::size_t>(t->partition)].term != term) return;
  t->busy = false;
  std::vector<MarkerWriter::Target> left;
  for (std::size_t i = 0; i < sent.size(); ++i) {
    const ErrorCode e = i < errors.size() ? errors[i] : ErrorCode::unknown_server_error;
    if (marker_done(e) || opts_.testing_give_up_failed_markers) {
      if (e != ErrorCode::none) {
        LOG_WARN("transaction coordinator: marker of %s for %s-%d: %s; not retried", id.c_str(),
                 sent[i].topic.c_str(), sent[i].partition,
                 std::string(kafka::error_name(e)).c_str());
      }
      ++stats_.markers_written;
      continue;
    }
    left.push_back(std::move(sent[i]));
  }
  t->unmarked = std::move(left);
  if (t->unmarked.empty()) {
    complete(*t);
    return;
  }
  ++stats_.marker_retries;
  t->busy = true;  // the retry timer owns the next round
  reactor_.arm(&t->retry, mono_ns() + opts_.marker_retry_ms * 1'000'000);
}

void TxnCoordinator::complete(Txn& t) {
  const bool commit = t.v.state == TxnState::prepare_commit;
  TxnValue next = t.v;
  next.state = commit ? TxnState::complete_commit : TxnState::complete_abort;
  next.partitions.clear();
  if (next.next_producer_id >= 0) {
    // Version 2's epoch overflow: the next transaction runs under the new producer id.
    next.producer_id = next.next_producer_id;
    next.producer_epoch = 0;
    next.next_producer_id = -1;
  }
  transition(t, std::move(next), [this, commit, id = t.id](ErrorCode e) {
    if (e != ErrorCode::none) {
      // Still Prepare*: the markers are written again (harmless) and the completion retried.
      // NOT_COORDINATOR: the partition moved (the new leader's replay finishes it).
      if (e == ErrorCode::not_coordinator) return;
      if (Txn* t = find(id);
          t && !t->busy &&
          (t->v.state == TxnState::prepare_commit || t->v.state == TxnState::prepare_abort)) {
        t->busy = true;
        reactor_.arm(&t->retry, mono_ns() + opts_.marker_retry_ms * 1'000'000);
      }
      return;
    }
    ++(commit ? stats_.commits : stats_.aborts);
  });
}

}  // namespace samsa::coordinator
