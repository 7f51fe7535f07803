// Transactions: InitProducerId with a transactional id, AddPartitionsToTxn, AddOffsetsToTxn,
// EndTxn (the transaction coordinator, coordinator/txn_coordinator.h), TxnOffsetCommit (the
// group coordinator) and WriteTxnMarkers (the partitions' leaders, daemon/txn_markers.h).
// Each decodes here, checks what needs this reactor's image (unknown topics), hands the work
// to the coordinator thread and answers on this reactor. Versions are Kafka 4.1's, with
// transaction version 2 (KIP-890 part 2: EndTxn v5 bumps the epoch and answers with the next
// one; TxnOffsetCommit v5 and Produce v12 add their partitions themselves). An older version
// that does not know PRODUCER_FENCED gets INVALID_PRODUCER_EPOCH, as Kafka answers it.
#include <memory>
#include <regex>
#include <set>

#include "base/log.h"
#include "coordinator/txn_coordinator.h"
#include "daemon/api/auth.h"
#include "daemon/api/handlers/fan_out.h"
#include "daemon/api/handlers/handlers.h"
#include "daemon/api/handlers/round_trip.h"
#include "daemon/broker.h"
#include "daemon/txn_markers.h"
#include "net/kafka/gen/add_offsets_to_txn_request.h"
#include "net/kafka/gen/add_offsets_to_txn_response.h"
#include "net/kafka/gen/add_partitions_to_txn_request.h"
#include "net/kafka/gen/add_partitions_to_txn_response.h"
#include "net/kafka/gen/describe_transactions_request.h"
#include "net/kafka/gen/describe_transactions_response.h"
#include "net/kafka/gen/end_txn_request.h"
#include "net/kafka/gen/end_txn_response.h"
#include "net/kafka/gen/init_producer_id_request.h"
#include "net/kafka/gen/init_producer_id_response.h"
#include "net/kafka/gen/list_transactions_request.h"
#include "net/kafka/gen/list_transactions_response.h"
#include "net/kafka/gen/txn_offset_commit_request.h"
#include "net/kafka/gen/txn_offset_commit_response.h"
#include "net/kafka/gen/write_txn_markers_request.h"
#include "net/kafka/gen/write_txn_markers_response.h"

namespace samsa::daemon::handlers {
namespace {

using coordinator::TxnCoordinator;
using kafka::ErrorCode;

// PRODUCER_FENCED is known from these versions on (KIP-588); older ones get
// INVALID_PRODUCER_EPOCH.
ErrorCode for_version(ErrorCode e, std::int16_t version, std::int16_t fenced_from) {
  if (e == ErrorCode::producer_fenced && version < fenced_from)
    return ErrorCode::invalid_producer_epoch;
  return e;
}

template <class Result, class Start, class Answer>
void via_txn_coordinator(RequestPtr r, Start start, Answer answer) {
  Broker& b = *r->rc.broker;
  round_trip<Result>(
      std::move(r), [&b](auto f) { b.on_txn_coordinator(std::move(f)); }, std::move(start),
      std::move(answer));
}

// The group's partition of __consumer_offsets by this reactor's image: the one its
// transactional offsets go to, which joins the transaction. -1 before the topic exists.
std::int32_t offsets_partition_of(const Request& r, std::string_view group) {
  const replication::TopicState* t = r.rc.image->topic(coordinator::kOffsetsTopic);
  if (!t || t->partitions.empty()) return -1;
  return coordinator::partition_for(group, static_cast<std::int32_t>(t->partitions.size()));
}

bool partition_exists(const Request& r, const std::string& topic, std::int32_t partition) {
  const replication::TopicState* t = r.rc.image->topic(topic);
  return t && partition >= 0 && static_cast<std::size_t>(partition) < t->partitions.size();
}

}  // namespace

namespace {

using replication::AclOperation;
using replication::ResourceType;

bool txn_allowed(const Request& r, AclOperation op, std::string_view id) {
  return authorized(r, op, ResourceType::transactional_id, id);
}

bool cluster_action_allowed(const Request& r) {
  return authorized(r, AclOperation::cluster_action, ResourceType::cluster,
                    replication::kClusterResourceName);
}

}  // namespace

void init_transactional_producer(RequestPtr r, kafka::InitProducerIdRequest body) {
  coordinator::TxnInitRequest req;
  req.transactional_id = std::move(*body.transactional_id);
  req.timeout_ms = body.transaction_timeout_ms;
  req.producer_id = body.producer_id;
  req.producer_epoch = body.producer_epoch;
  via_txn_coordinator<coordinator::TxnInitResult>(
      std::move(r),
      [req = std::move(req)](TxnCoordinator& c, auto done) mutable {
        c.init_producer_id(std::move(req), std::move(done));
      },
      [](RequestPtr r, coordinator::TxnInitResult res) {
        kafka::InitProducerIdResponse resp;
        resp.error_code = kafka::code(for_version(res.error, r->version(), 4));
        resp.producer_id = res.error == ErrorCode::none ? res.producer_id : -1;
        resp.producer_epoch = res.error == ErrorCode::none ? res.producer_epoch : -1;
        r->reply(resp);
      });
}

void add_partitions_to_txn(RequestPtr r) {
  kafka::AddPartitionsToTxnRequest body;
  if (!r->decode(body)) return;
  const std::int16_t v = r->version();
  // v0-3: one transaction, the client's; v4+: a batch of them (the brokers' form).
  if (v < 4) {
    kafka::AddPartitionsToTxnRequest::AddPartitionsToTxnTransaction t;
    t.transactional_id = std::move(body.v3_and_below_transactional_id);
    t.producer_id = body.v3_and_below_producer_id;
    t.producer_epoch = body.v3_and_below_producer_epoch;
    t.topics = std::move(body.v3_and_below_topics);
    body.transactions.clear();
    body.transactions.push_back(std::move(t));
  } else if (!cluster_action_allowed(*r)) {
    // The brokers' form: only a broker may verify or add for a producer.
    kafka::AddPartitionsToTxnResponse resp;
    resp.error_code = kafka::code(ErrorCode::cluster_authorization_failed);
    r->reply(resp);
    return;
  }
  struct Ctx {
    std::vector<coordinator::TxnAddResult> results;
    std::size_t left = 0;
  };
  auto ctx = std::make_shared<Ctx>();
  ctx->results.resize(body.transactions.size());
  std::vector<coordinator::TxnAddRequest> asks;
  std::vector<std::size_t> ask_index;
  for (std::size_t i = 0; i < body.transactions.size(); ++i) {
    auto& t = body.transactions[i];
    coordinator::TxnAddRequest a;
    a.transactional_id = t.transactional_id;
    a.producer_id = t.producer_id;
    a.producer_epoch = t.producer_epoch;
    a.verify_only = t.verify_only;
    // A broker's add (v4+, not verify-only) is for a producer of transaction version 2.
    a.tv2 = v >= 4 && !t.verify_only;
    bool unknown = false;
    for (const auto& tp : t.topics)
      for (std::int32_t p : tp.partitions) {
        a.partitions[tp.name].insert(p);
        unknown |= !partition_exists(*r, tp.name, p);
      }
    // The client's form (Kafka): WRITE on the transactional id, then on each topic; a denied
    // topic fails the add, the other partitions are not attempted.
    if (v < 4) {
      const bool id_ok = txn_allowed(*r, AclOperation::write, t.transactional_id);
      std::set<std::string_view> denied;
      for (const auto& [topic, parts] : a.partitions)
        if (id_ok && !authorized(*r, AclOperation::write, ResourceType::topic, topic))
          denied.insert(topic);
      if (!id_ok || !denied.empty()) {
        for (const auto& [topic, parts] : a.partitions)
          for (std::int32_t p : parts)
            ctx->results[i][topic][p] = !id_ok ? ErrorCode::transactional_id_authorization_failed
                                        : denied.contains(topic)
                                            ? ErrorCode::topic_authorization_failed
                                            : ErrorCode::operation_not_attempted;
        continue;
      }
    }
    if (unknown) {
      // Kafka's answer: the unknown ones say so, the others were not attempted.
      for (const auto& [topic, parts] : a.partitions)
        for (std::int32_t p : parts)
          ctx->results[i][topic][p] = partition_exists(*r, topic, p)
                                          ? ErrorCode::operation_not_attempted
                                          : ErrorCode::unknown_topic_or_partition;
      continue;
    }
    asks.push_back(std::move(a));
    ask_index.push_back(i);
  }
  auto answer = [body = std::move(body)](RequestPtr r, std::shared_ptr<Ctx> ctx) {
    const std::int16_t v = r->version();
    kafka::AddPartitionsToTxnResponse resp;
    auto topics = [&](const coordinator::TxnAddResult& res) {
      std::vector<kafka::AddPartitionsToTxnResponse::AddPartitionsToTxnTopicResult> out;
      for (const auto& [topic, parts] : res) {
        kafka::AddPartitionsToTxnResponse::AddPartitionsToTxnTopicResult tr;
        tr.name = topic;
        for (const auto& [p, e] : parts)
          tr.results_by_partition.push_back({p, kafka::code(for_version(e, v, 2))});
        out.push_back(std::move(tr));
      }
      return out;
    };
    if (v < 4) {
      resp.results_by_topic_v3_and_below = topics(ctx->results.front());
    } else {
      for (std::size_t i = 0; i < body.transactions.size(); ++i)
        resp.results_by_transaction.push_back(
            {body.transactions[i].transactional_id, topics(ctx->results[i])});
    }
    r->reply(resp);
  };
  via_txn_coordinator<std::shared_ptr<Ctx>>(
      std::move(r),
      [ctx, asks = std::move(asks), ask_index = std::move(ask_index)](TxnCoordinator& c,
                                                                      auto done) mutable {
        auto shared_done = std::make_shared<decltype(done)>(std::move(done));
        ctx->left = asks.size();
        if (ctx->left == 0) return (*shared_done)(ctx);
        for (std::size_t k = 0; k < asks.size(); ++k) {
          c.add_partitions(std::move(asks[k]),
                           [ctx, shared_done, i = ask_index[k]](coordinator::TxnAddResult res) {
                             ctx->results[i] = std::move(res);
                             if (--ctx->left == 0) (*shared_done)(ctx);
                           });
        }
      },
      std::move(answer));
}

void add_offsets_to_txn(RequestPtr r) {
  kafka::AddOffsetsToTxnRequest body;
  if (!r->decode(body)) return;
  const bool id_ok = txn_allowed(*r, AclOperation::write, body.transactional_id);
  if (!id_ok || !authorized(*r, AclOperation::read, ResourceType::group, body.group_id)) {
    kafka::AddOffsetsToTxnResponse resp;
    resp.error_code = kafka::code(id_ok ? ErrorCode::group_authorization_failed
                                        : ErrorCode::transactional_id_authorization_failed);
    r->reply(resp);
    return;
  }
  // The group's partition of __consumer_offsets joins the transaction (its marker completes
  // the TxnOffsetCommits made in it).
  const std::int32_t offsets_partition = offsets_partition_of(*r, body.group_id);
  if (offsets_partition < 0) {
    kafka::AddOffsetsToTxnResponse resp;
    resp.error_code = kafka::code(ErrorCode::coordinator_not_available);
    r->reply(resp);
    return;
  }
  coordinator::TxnAddRequest a;
  a.transactional_id = std::move(body.transactional_id);
  a.producer_id = body.producer_id;
  a.producer_epoch = body.producer_epoch;
  a.partitions[std::string(coordinator::kOffsetsTopic)].insert(offsets_partition);
  via_txn_coordinator<coordinator::TxnAddResult>(
      std::move(r),
      [a = std::move(a)](TxnCoordinator& c, auto done) mutable {
        c.add_partitions(std::move(a), std::move(done));
      },
      [](RequestPtr r, coordinator::TxnAddResult res) {
        kafka::AddOffsetsToTxnResponse resp;
        ErrorCode e = ErrorCode::none;
        for (const auto& [topic, parts] : res)
          for (const auto& [p, pe] : parts)
            e = pe;
        resp.error_code = kafka::code(for_version(e, r->version(), 2));
        r->reply(resp);
      });
}

void end_txn(RequestPtr r) {
  kafka::EndTxnRequest body;
  if (!r->decode(body)) return;
  if (!txn_allowed(*r, AclOperation::write, body.transactional_id)) {
    kafka::EndTxnResponse resp;
    resp.error_code = kafka::code(ErrorCode::transactional_id_authorization_failed);
    resp.producer_id = -1;
    resp.producer_epoch = -1;
    r->reply(resp);
    return;
  }
  coordinator::TxnEndRequest req{std::move(body.transactional_id), body.producer_id,
                                 body.producer_epoch, body.committed, r->version() >= 5};
  via_txn_coordinator<coordinator::TxnEndResult>(
      std::move(r),
      [req = std::move(req)](TxnCoordinator& c, auto done) mutable {
        c.end_txn(std::move(req), std::move(done));
      },
      [](RequestPtr r, coordinator::TxnEndResult res) {
        kafka::EndTxnResponse resp;
        resp.error_code = kafka::code(for_version(res.error, r->version(), 2));
        // v5: what the producer's next transaction uses (the epoch bumped by this end).
        resp.producer_id = res.error == ErrorCode::none ? res.producer_id : -1;
        resp.producer_epoch = res.error == ErrorCode::none ? res.producer_epoch : -1;
        r->reply(resp);
      });
}

void txn_offset_commit(RequestPtr r) {
  kafka::TxnOffsetCommitRequest body;
  if (!r->decode(body)) return;
  coordinator::CommitRequest cr;
  cr.group_id = body.group_id;
  cr.generation = body.generation_id;
  cr.member_id = body.member_id;
  cr.group_instance_id = body.group_instance_id;
  cr.producer_id = body.producer_id;
  cr.producer_epoch = body.producer_epoch;
  // Found here, per partition: Kafka's authorization (WRITE on the transactional id, READ on
  // the group, READ on each topic) and UNKNOWN_TOPIC_OR_PARTITION.
  std::vector<ErrorCode> early;
  const ErrorCode denied = !txn_allowed(*r, AclOperation::write, body.transactional_id)
                               ? ErrorCode::transactional_id_authorization_failed
                           : !authorized(*r, AclOperation::read, ResourceType::group, body.group_id)
                               ? ErrorCode::group_authorization_failed
                               : ErrorCode::none;
  for (const auto& t : body.topics) {
    const bool topic_ok = denied != ErrorCode::none ||
                          authorized(*r, AclOperation::read, ResourceType::topic, t.name);
    for (const auto& p : t.partitions) {
      cr.partitions.push_back({t.name, p.partition_index, p.committed_offset,
                               p.committed_leader_epoch, p.committed_metadata});
      early.push_back(denied != ErrorCode::none ? denied
                      : !topic_ok               ? ErrorCode::topic_authorization_failed
                      : partition_exists(*r, t.name, p.partition_index)
                          ? ErrorCode::none
                          : ErrorCode::unknown_topic_or_partition);
    }
  }
  // Transaction version 2 (v5+): no AddOffsetsToTxn from the client; the group's partition of
  // __consumer_offsets joins the transaction here, before the offsets are written.
  std::optional<TxnPartitionCheck> add;
  if (r->version() >= 5) {
    add = TxnPartitionCheck{body.transactional_id,
                            body.producer_id,
                            body.producer_epoch,
                            std::string(coordinator::kOffsetsTopic),
                            offsets_partition_of(*r, body.group_id),
                            true};
  }
  auto answer = [body = std::move(body), early](RequestPtr r, coordinator::CommitResult res) {
    kafka::TxnOffsetCommitResponse resp;
    std::size_t i = 0;
    for (const auto& t : body.topics) {
      kafka::TxnOffsetCommitResponse::TxnOffsetCommitResponseTopic tr;
      tr.name = t.name;
      for (const auto& p : t.partitions) {
        const ErrorCode e = early[i] != ErrorCode::none ? early[i]
                            : i < res.size()            ? res[i]
                                                        : ErrorCode::unknown_server_error;
        ++i;
        tr.partitions.push_back({p.partition_index, kafka::code(for_version(e, r->version(), 3))});
      }
      resp.topics.push_back(std::move(tr));
    }
    r->reply(resp);
  };
  const std::size_t n = early.size();
  if (std::any_of(early.begin(), early.end(), [](ErrorCode e) { return e != ErrorCode::none; })) {
    answer(std::move(r), coordinator::CommitResult(n, ErrorCode::operation_not_attempted));
    return;
  }
  auto commit = [cr = std::move(cr), answer](RequestPtr r) mutable {
    via_coordinator<coordinator::CommitResult>(
        std::move(r),
        [cr = std::move(cr)](coordinator::GroupCoordinator& g, auto done) mutable {
          g.commit_offsets(std::move(cr), std::move(done));
        },
        std::move(answer));
  };
  if (!add) return commit(std::move(r));
  if (add->partition < 0)
    return answer(std::move(r), coordinator::CommitResult(n, ErrorCode::coordinator_not_available));
  ReactorContext& rc = r->rc;
  check_txn_partition(
      rc, std::move(*add),
      [r = std::move(r), commit = std::move(commit), answer, n](ErrorCode e) mutable {
        if (e == ErrorCode::none) return commit(std::move(r));
        // Kafka's mapping for the group coordinator's writes (CoordinatorOperationExceptionHelper).
        if (e == ErrorCode::network_exception) e = ErrorCode::coordinator_load_in_progress;
        if (e == ErrorCode::not_enough_replicas || e == ErrorCode::request_timed_out)
          e = ErrorCode::coordinator_not_available;
        answer(std::move(r), coordinator::CommitResult(n, e));
      });
}

// WriteTxnMarkers from another broker's transaction coordinator: each partition's marker on
// the shard that owns it, answered once all are held by their ISRs (or refused).
void write_txn_markers(RequestPtr r) {
  struct Item {
    std::size_t marker = 0;
    std::string topic;
    std::int32_t partition = 0;
    ErrorCode error = ErrorCode::none;
  };
  struct Ctx {
    RequestPtr req;
    kafka::WriteTxnMarkersRequest body;
    std::vector<Item> items;
  };
  auto ctx = std::make_unique<Ctx>();
  if (!r->decode(ctx->body)) return;
  ctx->req = std::move(r);
  // Only a broker (CLUSTER_ACTION) writes markers.
  const bool allowed = cluster_action_allowed(*ctx->req);
  for (std::size_t m = 0; m < ctx->body.markers.size(); ++m)
    for (const auto& t : ctx->body.markers[m].topics)
      for (std::int32_t p : t.partition_indexes)
        ctx->items.push_back({m, t.name, p,
                              !allowed ? ErrorCode::cluster_authorization_failed
                              : partition_exists(*ctx->req, t.name, p)
                                  ? ErrorCode::none
                                  : ErrorCode::unknown_topic_or_partition});
  const std::size_t n = ctx->items.size();
  fan_out_to_shards_async(
      std::move(ctx), n,
      [](const Ctx& c, std::size_t i) -> std::optional<std::size_t> {
        if (c.items[i].error != ErrorCode::none) return std::nullopt;
        return c.req->rc.broker->owner(c.items[i].topic, c.items[i].partition);
      },
      [](ReactorContext& shard, Ctx& c, std::size_t i, ItemDone item_done) {
        Item& it = c.items[i];
        const auto& wm = c.body.markers[it.marker];
        const coordinator::MarkerWriter::Marker m{wm.producer_id, wm.producer_epoch,
                                                  wm.transaction_result, wm.coordinator_epoch};
        write_marker_on_shard(shard, it.topic, it.partition, m,
                              [&it, item_done](ErrorCode e) mutable {
                                it.error = e;
                                item_done();
                              });
      },
      [](std::unique_ptr<Ctx> c) {
        kafka::WriteTxnMarkersResponse resp;
        std::size_t i = 0;
        for (const auto& m : c->body.markers) {
          kafka::WriteTxnMarkersResponse::WritableTxnMarkerResult mr;
          mr.producer_id = m.producer_id;
          for (const auto& t : m.topics) {
            kafka::WriteTxnMarkersResponse::WritableTxnMarkerTopicResult tr;
            tr.name = t.name;
            for (std::int32_t p : t.partition_indexes)
              tr.partitions.push_back({p, kafka::code(c->items[i++].error)});
            mr.topics.push_back(std::move(tr));
          }
          resp.markers.push_back(std::move(mr));
        }
        c->req->reply(resp);
      });
}

// DescribeTransactions: the coordinator's view of each transactional id (sent to its
// coordinator; an id coordinated elsewhere gets NOT_COORDINATOR).
void describe_transactions(RequestPtr r) {
  kafka::DescribeTransactionsRequest body;
  if (!r->decode(body)) return;
  std::vector<std::string> ids, denied;  // DESCRIBE on each transactional id
  for (auto& id : body.transactional_ids)
    (txn_allowed(*r, AclOperation::describe, id) ? ids : denied).push_back(std::move(id));
  via_txn_coordinator<std::vector<coordinator::DescribedTxn>>(
      std::move(r),
      [ids = std::move(ids)](TxnCoordinator& c, auto done) mutable {
        c.describe(std::move(ids), std::move(done));
      },
      [denied = std::move(denied)](RequestPtr r, std::vector<coordinator::DescribedTxn> res) {
        kafka::DescribeTransactionsResponse resp;
        for (const auto& id : denied) {
          kafka::DescribeTransactionsResponse::TransactionState ts;
          ts.error_code = kafka::code(ErrorCode::transactional_id_authorization_failed);
          ts.transactional_id = id;
          resp.transaction_states.push_back(std::move(ts));
        }
        for (auto& d : res) {
          kafka::DescribeTransactionsResponse::TransactionState ts;
          ts.error_code = kafka::code(d.error);
          ts.transactional_id = std::move(d.transactional_id);
          ts.transaction_state = std::move(d.state);
          ts.transaction_timeout_ms = d.timeout_ms;
          ts.transaction_start_time_ms = d.start_ms;
          ts.producer_id = d.producer_id;
          ts.producer_epoch = d.producer_epoch;
          // Kafka lists only the topics the principal may describe.
          for (auto& [topic, parts] : d.partitions)
            if (authorized(*r, AclOperation::describe, ResourceType::topic, topic, true))
              ts.topics.push_back({topic, std::vector<std::int32_t>(parts.begin(), parts.end())});
          resp.transaction_states.push_back(std::move(ts));
        }
        r->reply(resp);
      });
}

// ListTransactions: the transactions this broker's coordinator holds (an admin client asks
// every broker), filtered by state, producer id, duration (v1+) and id pattern (v2+, a Java
// regular expression matched against the whole id; ECMAScript's syntax here, which agrees on
// the usual patterns).
void list_transactions(RequestPtr r) {
  kafka::ListTransactionsRequest body;
  if (!r->decode(body)) return;
  coordinator::TxnListRequest req;
  std::vector<std::string> unknown;
  for (auto& s : body.state_filters) {
    if (coordinator::txn_state_from_name(s)) {
      req.states.push_back(s);
    } else {
      unknown.push_back(s);
    }
  }
  // Only unknown states asked for: nothing can match.
  const bool none = !body.state_filters.empty() && req.states.empty();
  req.producer_ids = body.producer_id_filters;
  req.duration_filter_ms = body.duration_filter;
  std::optional<std::regex> pattern;
  if (body.transactional_id_pattern && !body.transactional_id_pattern->empty()) {
    try {
      pattern.emplace(*body.transactional_id_pattern);
    } catch (const std::regex_error&) {
      kafka::ListTransactionsResponse resp;
      resp.error_code = kafka::code(ErrorCode::invalid_regular_expression);
      r->reply(resp);
      return;
    }
  }
  via_txn_coordinator<std::vector<coordinator::ListedTxn>>(
      std::move(r),
      [req = std::move(req), none](TxnCoordinator& c, auto done) mutable {
        if (none) return done(std::vector<coordinator::ListedTxn>{});
        c.list(std::move(req), std::move(done));
      },
      [unknown = std::move(unknown), pattern = std::move(pattern)](
          RequestPtr r, std::vector<coordinator::ListedTxn> res) {
        kafka::ListTransactionsResponse resp;
        resp.unknown_state_filters = unknown;
        for (auto& t : res) {
          if (pattern && !std::regex_match(t.transactional_id, *pattern)) continue;
          if (!authorized(*r, AclOperation::describe, ResourceType::transactional_id,
                          t.transactional_id, true))
            continue;
          resp.transaction_states.push_back(
              {std::move(t.transactional_id), t.producer_id, std::move(t.state)});
        }
        r->reply(resp);
      });
}

}  // namespace samsa::daemon::handlers
