// coordinator::TxnCoordinator — Kafka's transaction coordinator (KIP-98, KIP-360, KIP-447) for
// every transactional id whose __transaction_state partition this node leads: producer ids and
// epochs for transactional producers (InitProducerId), the partitions of each transaction
// (AddPartitionsToTxn, AddOffsetsToTxn, and the brokers' verification form), its end (EndTxn:
// PrepareCommit/PrepareAbort written, markers sent to every partition, CompleteCommit/
// CompleteAbort written), the abort of transactions older than their timeout (the producer is
// fenced by an epoch bump), and what DescribeTransactions and ListTransactions report.
//
// The state machine is Kafka's: Empty -> Ongoing -> PrepareCommit|PrepareAbort ->
// CompleteCommit|CompleteAbort -> Ongoing ..., with PrepareEpochFence for an abort the
// coordinator starts itself. A transition is answered only once its record is durable
// (acks=all on the partition); while one is in flight, or markers are still being written,
// requests for the id get CONCURRENT_TRANSACTIONS (clients retry), except AddPartitionsToTxn,
// which waits (bounded) for the previous transaction's completion, as the next transaction's
// first request always meets it.
//
// Threading: the "coordinator" thread (shared with the GroupCoordinator, whose producer id
// blocks it uses); every method and callback runs there. Markers go through a MarkerWriter
// (the daemon writes them on the partitions' leaders) and are retried until every partition
// took them or this node stops leading the transaction's partition.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/kafka_errors.h"
#include "coordinator/producer_ids.h"
#include "coordinator/store.h"
#include "coordinator/txn_records.h"
#include "io/reactor.h"

namespace samsa::coordinator {

using kafka::ErrorCode;

// Writes transaction markers: one per partition, each answered with its error (none once the
// marker is durable on the partition's ISR). Callbacks run on the coordinator's thread.
class MarkerWriter {
 public:
  struct Marker {
    std::int64_t producer_id = -1;
    std::int16_t producer_epoch = -1;
    bool commit = false;
    std::int32_t coordinator_epoch = -1;
  };
  struct Target {
    std::string topic;
    std::int32_t partition = 0;
  };
  using Done = std::move_only_function<void(std::vector<ErrorCode>)>;
  virtual ~MarkerWriter() = default;
  virtual void write(const Marker& m, std::vector<Target> targets, Done done) = 0;
};

struct TxnInitRequest {
  std::string transactional_id;
  std::int32_t timeout_ms = 0;
  // KIP-360: a producer that knows its id and epoch asks for a bump (-1: a fresh start).
  std::int64_t producer_id = -1;
  std::int16_t producer_epoch = -1;
};

struct TxnInitResult {
  ErrorCode error = ErrorCode::none;
  std::int64_t producer_id = -1;
  std::int16_t producer_epoch = -1;
};

struct TxnAddRequest {
  std::string transactional_id;
  std::int64_t producer_id = -1;
  std::int16_t producer_epoch = -1;
  TopicPartitions partitions;
  bool verify_only = false;  // AddPartitionsToTxn v4+ from a broker: is each one in the txn?
  // A broker adding a partition for a producer of transaction version 2 (its Produce v12+ or
  // TxnOffsetCommit v5+): the client sends no AddPartitionsToTxn of its own.
  bool tv2 = false;
};

// One error per partition of the request.
using TxnAddResult = std::map<std::string, std::map<std::int32_t, ErrorCode>>;

struct TxnEndRequest {
  std::string transactional_id;
  std::int64_t producer_id = -1;
  std::int16_t producer_epoch = -1;
  bool commit = false;
  // Transaction version 2 (EndTxn v5+, KIP-890 part 2): every end bumps the epoch, and the
  // answer carries the producer id and epoch the next transaction uses.
  bool tv2 = false;
};

struct TxnEndResult {
  ErrorCode error = ErrorCode::none;
  std::int64_t producer_id = -1;  // version 2 only
  std::int16_t producer_epoch = -1;
};

struct DescribedTxn {
  std::string transactional_id;
  ErrorCode error = ErrorCode::none;
  std::string state;
  std::int32_t timeout_ms = 0;
  std::int64_t start_ms = -1;
  std::int64_t producer_id = -1;
  std::int16_t producer_epoch = -1;
  TopicPartitions partitions;
};

struct TxnListRequest {
  std::vector<std::string> states;         // Kafka's state names; empty: all
  std::vector<std::int64_t> producer_ids;  // empty: all
  std::int64_t duration_filter_ms = -1;    // running longer than this (-1: any)
};

struct ListedTxn {
  std::string transactional_id;
  std::int64_t producer_id = -1;
  std::string state;
};

class TxnCoordinator {
 public:
  struct Options {
    std::int32_t max_timeout_ms = 900000;                    // transaction.max.timeout.ms
    std::int64_t abort_check_interval_ms = 10000;            // ...abort.timed.out...interval.ms
    std::int64_t id_expiration_ms = 7LL * 24 * 3600 * 1000;  // transactional.id.expiration.ms
    // transaction.remove.expired.transaction.cleanup.interval.ms
    std::int64_t id_expiration_check_ms = 3600000;
    std::int64_t marker_retry_ms = 100;
    std::int64_t load_retry_ms = 1000;
    // The wall clock transactions are timed by (empty: base/clock.h's wall_ms); the
    // simulation supplies its own.
    std::function<std::int64_t()> clock;
    // Test-only (the simulation's broken variant): a marker that failed counts as written,
    // as if the round could complete without it. Never set in samsad.
    bool testing_give_up_failed_markers = false;
  };
  template <class T>
  using Done = std::move_only_function<void(T)>;

  TxnCoordinator(io::Reactor& r, Options opts, std::unique_ptr<OffsetsStore> store,
                 ProducerIdManager& ids, std::unique_ptr<MarkerWriter> markers);
  ~TxnCoordinator();
  TxnCoordinator(const TxnCoordinator&) = delete;
  TxnCoordinator& operator=(const TxnCoordinator&) = delete;

  enum class Leadership : std::uint8_t { all, elected };
  // As GroupCoordinator's: the partition count of __transaction_state; Leadership::all loads
  // every partition now, elected waits for activate().
  void start(std::int32_t partitions, Leadership leadership = Leadership::all);
  void activate(std::int32_t p, std::int32_t leader_epoch);
  void deactivate(std::int32_t p, std::int32_t leader_epoch);
  void shutdown();
  bool started() const { return partitions_ > 0; }
  bool loaded() const;
  std::int32_t partitions() const { return partitions_; }
  std::int32_t partition_of(std::string_view id) const { return partition_for(id, partitions_); }
  void set_options(const Options& o) { opts_ = o; }

  void init_producer_id(TxnInitRequest req, Done<TxnInitResult> done);
  void add_partitions(TxnAddRequest req, Done<TxnAddResult> done);
  void end_txn(TxnEndRequest req, Done<TxnEndResult> done);
  void describe(std::vector<std::string> ids, Done<std::vector<DescribedTxn>> done);
  void list(TxnListRequest req, Done<std::vector<ListedTxn>> done);
  // Aborts every transaction older than its timeout now (normally on a timer).
  void abort_timed_out(std::int64_t now_ms);
  // Removes the transactional ids idle (Empty or Complete*) for longer than
  // transactional.id.expiration.ms: a tombstone in __transaction_state each, as Kafka writes
  // (normally on a timer, every id_expiration_check_ms). Their producers start over at a new
  // producer id.
  void expire_ids(std::int64_t now_ms);

  struct Stats {
    std::uint64_t commits = 0;
    std::uint64_t aborts = 0;
    std::uint64_t timed_out = 0;  // aborted by the coordinator
    std::uint64_t markers_written = 0;
    std::uint64_t marker_retries = 0;
    std::uint64_t ended_v2 = 0;  // ends of transaction version 2 (EndTxn v5+) answered
    std::uint64_t expired = 0;   // transactional ids removed after their expiration
  };
  const Stats& stats() const { return stats_; }
  std::size_t transaction_count() const { return txns_.size(); }

 private:
  struct Txn;
  enum class LoadState : std::uint8_t { inactive, loading, loaded, failed };
  struct Slot {
    LoadState state = LoadState::inactive;
    std::int32_t epoch = -1;  // the leader epoch: markers carry it as the coordinator epoch
    std::uint64_t term = 0;
  };

  ErrorCode check_id(std::string_view id) const;
  Txn* find(std::string_view id);
  std::unique_ptr<Txn> new_txn(const std::string& id, std::int32_t p);
  // AddPartitionsToTxn requests parked while the producer's previous transaction completed:
  // tried again once nothing is in flight (drain), or answered with e (fail).
  void drain_parked(const std::string& id);
  void fail_parked(Txn& t, ErrorCode e);
  // Writes t's next state (its record) and calls done(error) once durable; the state in
  // memory changes only then. t is busy meanwhile.
  void transition(Txn& t, TxnValue next, std::move_only_function<void(ErrorCode)> done);
  // Prepare* is durable: write the markers, then Complete*.
  void send_markers(Txn& t);
  void on_markers(const std::string& id, std::uint64_t term, std::vector<MarkerWriter::Target> sent,
                  std::vector<ErrorCode> errors);
  void complete(Txn& t);
  void fence_and_abort(Txn& t, const char* why);
  void end_txn_v1(Txn& t, const TxnEndRequest& req, Done<TxnEndResult> done);
  void end_txn_v2(Txn& t, const TxnEndRequest& req, Done<TxnEndResult> done);
  // Writes Prepare{Commit,Abort} with the epoch bumped (version 2; a new producer id when the
  // epoch is exhausted) and answers with what the next transaction uses once it is durable.
  void prepare_v2(Txn& t, bool commit, Done<TxnEndResult> done);
  void load_partition(std::int32_t p);
  void replay_batch(std::int32_t p, std::span<const std::byte> batch);
  void on_loaded(std::int32_t p, std::uint64_t term, std::optional<io::Error> err);
  void unload_partition(std::int32_t p);
  static void on_abort_timer(io::Timer* t);
  std::int64_t now_ms() const;

  io::Reactor& reactor_;
  Options opts_;
  std::unique_ptr<OffsetsStore> store_;
  ProducerIdManager& ids_;
  std::unique_ptr<MarkerWriter> markers_;
  std::int32_t partitions_ = 0;
  std::vector<Slot> slots_;
  bool shutting_down_ = false;
  std::unordered_map<std::string, std::unique_ptr<Txn>> txns_;
  struct AbortTimer : io::Timer {
    TxnCoordinator* self = nullptr;
  } abort_timer_;
  std::int64_t last_expiration_check_ms_ = -1;
  Stats stats_;
};

}  // namespace samsa::coordinator
