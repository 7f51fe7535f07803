// Internal to the coordinator library (not a public header): the state TxnCoordinator keeps
// per transactional id and the helpers its source files share. TxnCoordinator's methods live in
// txn_coordinator.cc (leadership and loading, the requests that start or extend a transaction,
// timeouts and expiration, DescribeTransactions and ListTransactions) and txn_end.cc (EndTxn in
// both transaction versions, fencing, the markers and the completion).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "coordinator/txn_coordinator.h"

namespace samsa::coordinator {

struct TxnCoordinator::Txn {
  struct RetryTimer : io::Timer {
    TxnCoordinator* self = nullptr;
    Txn* txn = nullptr;
  } retry;
  std::string id;
  std::int32_t partition = 0;
  TxnValue v;  // as durable in __transaction_state
  // A transition or a round of markers is in flight: other requests get CONCURRENT_TRANSACTIONS.
  bool busy = false;
  // Partitions whose marker is still to be written (the round in flight or the next retry).
  std::vector<MarkerWriter::Target> unmarked;
  // AddPartitionsToTxn of the same producer that arrived while its previous transaction was
  // completing: answered once the completion is written, instead of CONCURRENT_TRANSACTIONS
  // (the Java client would back off 20 ms for each).
  std::vector<std::pair<TxnAddRequest, TxnCoordinator::Done<TxnAddResult>>> parked;
};

}  // namespace samsa::coordinator
