#include "daemon/api/dispatch.h"

#include <array>

#include "base/clock.h"
#include "base/log.h"
#include "daemon/api/auth.h"
#include "daemon/api/envelope.h"
#include "daemon/api/handlers/handlers.h"
#include "daemon/broker.h"

namespace samsa::daemon {
namespace {

using kafka::ApiKey;
using kafka::key;

// The served apis and versions. Each range is what the handler implements, from Kafka 4.0's
// minimum (FACTS.md) up to what Kafka 4.1.1 advertises (so every current client, the Java 4.1
// client included, gets its newest): README.md has the table.
const std::array kHandlers = {
    // v13 names topics by id (the handler resolves them through the image).
    ApiHandler{key(ApiKey::produce), 0, 13, &handlers::produce, 3},
    // v18 only adds the follower's HighWatermark (a tagged field consumers never send).
    ApiHandler{key(ApiKey::fetch), 4, 18, &handlers::fetch},
    ApiHandler{key(ApiKey::list_offsets), 1, 10, &handlers::list_offsets},
    ApiHandler{key(ApiKey::metadata), 0, 13, &handlers::metadata},
    ApiHandler{key(ApiKey::api_versions), 0, 4, &handlers::api_versions},
    ApiHandler{key(ApiKey::create_topics), 2, 7, &handlers::create_topics},
    ApiHandler{key(ApiKey::delete_topics), 1, 6, &handlers::delete_topics},
    ApiHandler{key(ApiKey::create_partitions), 0, 3, &handlers::create_partitions},
    ApiHandler{key(ApiKey::elect_leaders), 0, 2, &handlers::elect_leaders},
    ApiHandler{key(ApiKey::alter_partition_reassignments), 0, 1,
               &handlers::alter_partition_reassignments},
    ApiHandler{key(ApiKey::list_partition_reassignments), 0, 0,
               &handlers::list_partition_reassignments},
    ApiHandler{key(ApiKey::unregister_broker), 0, 0, &handlers::unregister_broker},
    ApiHandler{key(ApiKey::delete_records), 0, 2, &handlers::delete_records},
    ApiHandler{key(ApiKey::offset_for_leader_epoch), 2, 4, &handlers::offset_for_leader_epoch},
    ApiHandler{key(ApiKey::describe_configs), 1, 4, &handlers::describe_configs},
    ApiHandler{key(ApiKey::alter_configs), 0, 2, &handlers::alter_configs},
    ApiHandler{key(ApiKey::incremental_alter_configs), 0, 1, &handlers::incremental_alter_configs},
    ApiHandler{key(ApiKey::describe_log_dirs), 1, 4, &handlers::describe_log_dirs},
    ApiHandler{key(ApiKey::describe_cluster), 0, 2, &handlers::describe_cluster},
    ApiHandler{key(ApiKey::describe_topic_partitions), 0, 0, &handlers::describe_topic_partitions},
    // Groups: every version the codecs have, except OffsetCommit/OffsetFetch v10 (topic ids;
    // unstable in Kafka 4.1). ConsumerGroupHeartbeat (KIP-848) is not served yet.
    ApiHandler{key(ApiKey::offset_commit), 2, 9, &handlers::offset_commit},
    ApiHandler{key(ApiKey::offset_fetch), 1, 9, &handlers::offset_fetch},
    ApiHandler{key(ApiKey::find_coordinator), 0, 6, &handlers::find_coordinator},
    ApiHandler{key(ApiKey::join_group), 0, 9, &handlers::join_group},
    ApiHandler{key(ApiKey::heartbeat), 0, 4, &handlers::heartbeat},
    ApiHandler{key(ApiKey::leave_group), 0, 5, &handlers::leave_group},
    ApiHandler{key(ApiKey::sync_group), 0, 5, &handlers::sync_group},
    ApiHandler{key(ApiKey::describe_groups), 0, 6, &handlers::describe_groups},
    ApiHandler{key(ApiKey::list_groups), 0, 5, &handlers::list_groups},
    ApiHandler{key(ApiKey::delete_groups), 0, 2, &handlers::delete_groups},
    ApiHandler{key(ApiKey::offset_delete), 0, 0, &handlers::offset_delete},
    // v6 (two-phase commit) is unstable in Kafka 4.1.
    ApiHandler{key(ApiKey::init_producer_id), 0, 5, &handlers::init_producer_id},
    // Transactions, with transaction version 2's (KIP-890 part 2: EndTxn v5, TxnOffsetCommit
    // v5; AddPartitionsToTxn v5 and AddOffsetsToTxn v4 only add TRANSACTION_ABORTABLE).
    ApiHandler{key(ApiKey::add_partitions_to_txn), 0, 5, &handlers::add_partitions_to_txn},
    ApiHandler{key(ApiKey::add_offsets_to_txn), 0, 4, &handlers::add_offsets_to_txn},
    ApiHandler{key(ApiKey::end_txn), 0, 5, &handlers::end_txn},
    ApiHandler{key(ApiKey::txn_offset_commit), 0, 5, &handlers::txn_offset_commit},
    ApiHandler{key(ApiKey::write_txn_markers), 1, 1, &handlers::write_txn_markers},
    ApiHandler{key(ApiKey::describe_transactions), 0, 0, &handlers::describe_transactions},
    ApiHandler{key(ApiKey::list_transactions), 0, 2, &handlers::list_transactions},
    ApiHandler{key(ApiKey::describe_producers), 0, 0, &handlers::describe_producers},
    // A cluster's controller node only (replication/cluster_wire.h).
    ApiHandler{key(ApiKey::broker_registration), 0, 4, &handlers::broker_registration, -1, true},
    ApiHandler{key(ApiKey::broker_heartbeat), 0, 1, &handlers::broker_heartbeat, -1, true},
    ApiHandler{key(ApiKey::alter_partition), 2, 3, &handlers::alter_partition, -1, true},
    ApiHandler{key(ApiKey::allocate_producer_ids), 0, 0, &handlers::allocate_producer_ids, -1,
               true},
    // The controller quorum (KRaft's RPCs, replication/quorum/quorum_wire.h); Fetch of the
    // metadata log is dispatched below. DescribeQuorum everywhere (a broker forwards it).
    ApiHandler{key(ApiKey::vote), 0, 2, &handlers::vote, -1, true},
    ApiHandler{key(ApiKey::begin_quorum_epoch), 0, 1, &handlers::begin_quorum_epoch, -1, true},
    ApiHandler{key(ApiKey::end_quorum_epoch), 0, 1, &handlers::end_quorum_epoch, -1, true},
    ApiHandler{key(ApiKey::fetch_snapshot), 0, 1, &handlers::fetch_snapshot, -1, true},
    // A client's change a broker forwards with the client's identity (envelope.h).
    ApiHandler{key(ApiKey::envelope), 0, 0, &serve_envelope, -1, true},
    ApiHandler{key(ApiKey::describe_quorum), 0, 2, &handlers::describe_quorum},
    // Authentication (v0 of SaslHandshake hands the connection to raw SASL tokens, which no
    // current client uses: it is refused) and SCRAM credentials.
    ApiHandler{key(ApiKey::sasl_handshake), 0, 1, &handlers::sasl_handshake, 1},
    ApiHandler{key(ApiKey::sasl_authenticate), 0, 2, &handlers::sasl_authenticate},
    ApiHandler{key(ApiKey::describe_user_scram_credentials), 0, 0,
               &handlers::describe_user_scram_credentials},
    ApiHandler{key(ApiKey::alter_user_scram_credentials), 0, 0,
               &handlers::alter_user_scram_credentials},
    ApiHandler{key(ApiKey::describe_client_quotas), 0, 1, &handlers::describe_client_quotas},
    ApiHandler{key(ApiKey::alter_client_quotas), 0, 1, &handlers::alter_client_quotas},
    ApiHandler{key(ApiKey::describe_acls), 1, 3, &handlers::describe_acls},
    ApiHandler{key(ApiKey::create_acls), 1, 3, &handlers::create_acls},
    ApiHandler{key(ApiKey::delete_acls), 1, 3, &handlers::delete_acls},
};

// What a broker node sends on to the controller: the changes only it may commit. The answer
// goes back once this broker's image holds the change.
bool forwarded(std::int16_t k) {
  return k == key(ApiKey::create_topics) || k == key(ApiKey::delete_topics) ||
         k == key(ApiKey::create_partitions) || k == key(ApiKey::alter_configs) ||
         k == key(ApiKey::elect_leaders) || k == key(ApiKey::incremental_alter_configs) ||
         k == key(ApiKey::describe_quorum) || k == key(ApiKey::alter_user_scram_credentials) ||
         k == key(ApiKey::create_acls) || k == key(ApiKey::delete_acls) ||
         k == key(ApiKey::alter_client_quotas) || k == key(ApiKey::alter_partition_reassignments) ||
         k == key(ApiKey::unregister_broker);
}

const ApiHandler* find_handler(std::int16_t k) {
  for (const auto& h : kHandlers)
    if (h.key == k) return &h;
  return nullptr;
}

}  // namespace

std::span<const ApiHandler> api_handlers() {
  return kHandlers;
}

bool serves(const ApiHandler& h, const ReactorContext& rc, std::size_t listener) {
  return !h.controller_only || rc.settings->listeners[listener].controller;
}

Request::Request(ReactorContext& rc_, KafkaDispatcher& d, net::Connection* c, std::uint64_t s,
                 kafka::DecodedRequestHeader h, net::Buffer f)
    : rc(rc_),
      dispatcher(d),
      conn(c),
      seq(s),
      header(std::move(h)),
      frame(std::move(f)),
      start_ns(mono_ns()) {
  dispatcher.request_started();
}

Request::~Request() {
  if (charged_) rc.budget.release(charged_);
  if (!done_) {
    // A handler dropped the request without answering: keep the connection's order intact.
    LOGF_ERROR((log::Fields{.client = conn->peer()}),
               "%s v%d from %s dropped without an answer (bug); closing the connection",
               std::string(kafka::api_name(api_key())).c_str(), version(), conn->peer().c_str());
    conn->skip(seq);
    conn->close(false);
  }
  rc.metrics.record_request(api_key(), version(), static_cast<std::uint64_t>(mono_ns() - start_ns));
  dispatcher.request_finished();
}

void Request::send(net::Response r) {
  if (done_) return;
  done_ = true;
  if (envelope) r = wrap_in_envelope(*envelope, std::move(r));
  conn->respond(seq, std::move(r));
}

const std::string& Request::principal() const {
  return envelope ? envelope->principal : principal_of(*conn);
}

std::string_view Request::host() const {
  return envelope ? std::string_view(envelope->host) : host_of(*conn);
}

void Request::skip() {
  if (done_) return;
  done_ = true;
  conn->skip(seq);
}

void Request::fail(const char* why) {
  if (done_) return;
  done_ = true;
  LOGF_WARN((log::Fields{.client = conn->peer()}),
            "closing connection from %s: %s (%s v%d, correlation id %d)", conn->peer().c_str(), why,
            std::string(kafka::api_name(api_key())).c_str(), version(), correlation_id());
  conn->skip(seq);
  conn->close(false);
}

std::int32_t Request::throttle(QuotaType t, std::int64_t amount) {
  ConnectionAuth* a = auth_of(*conn);
  if (!a || envelope || !rc.image || conn->closed()) return 0;
  const std::int64_t ms = record_quota(a->quota, *rc.image, quota_user(principal()),
                                       header.header.client_id.value_or(""), t, amount);
  return static_cast<std::int32_t>(std::min<std::int64_t>(ms, INT32_MAX));
}

bool Request::charge(std::uint64_t n, const char* what) {
  if (rc.budget.try_charge(n)) {
    charged_ += n;
    return true;
  }
  LOG_WARN(
      "%s v%d from %s needs %llu more bytes for %s, over this reactor's request memory "
      "budget (%llu of %llu bytes in use, queued.max.request.bytes / reactors); refused",
      std::string(kafka::api_name(api_key())).c_str(), version(), conn->peer().c_str(),
      static_cast<unsigned long long>(n), what, static_cast<unsigned long long>(rc.budget.used()),
      static_cast<unsigned long long>(rc.budget.capacity()));
  fail("request over the memory budget");
  return false;
}

DecodeScope::DecodeScope(Request& req) : r(req) {
  allowance.limit = r.rc.budget.chargeable();
}

bool DecodeScope::finish(kafka::DecodeError e, std::size_t at) {
  // Kafka's request parser reads one message and ignores what follows it, and clients rely on
  // that: librdkafka 2.16 sends Metadata v13 with three bytes after the body. Be as lenient.
  if (e == kafka::DecodeError::trailing_bytes) {
    LOG_DEBUG("%s v%d from %s: %zu bytes after the request body ignored",
              std::string(kafka::api_name(r.api_key())).c_str(), r.version(),
              r.conn->peer().c_str(), r.frame.size() - at);
    e = kafka::DecodeError::none;
  }
  if (e == kafka::DecodeError::none) {
    if (allowance.used && r.rc.budget.try_charge(allowance.used)) r.charged_ += allowance.used;
    return true;
  }
  if (e == kafka::DecodeError::over_budget) {
    LOG_WARN(
        "%s v%d from %s would allocate over %llu bytes to decode (a %zu-byte frame), over "
        "this reactor's request memory budget (%llu of %llu bytes in use, "
        "queued.max.request.bytes / reactors); refused",
        std::string(kafka::api_name(r.api_key())).c_str(), r.version(), r.conn->peer().c_str(),
        static_cast<unsigned long long>(allowance.limit), r.frame.size(),
        static_cast<unsigned long long>(r.rc.budget.used()),
        static_cast<unsigned long long>(r.rc.budget.capacity()));
    r.fail("request over the memory budget");
    return false;
  }
  log_decode_failure(r, e, at);
  r.fail("malformed request body");
  return false;
}

void log_decode_failure(const Request& r, kafka::DecodeError e, std::size_t at) {
  LOGF_WARN((log::Fields{.client = r.conn->peer()}),
            "malformed %s v%d request from %s: %s at byte %zu of %zu",
            std::string(kafka::api_name(r.api_key())).c_str(), r.version(), r.conn->peer().c_str(),
            std::string(kafka::decode_error_name(e)).c_str(), at, r.frame.size());
}

void KafkaDispatcher::on_open(net::Connection& c) {
  LOG_DEBUG("connection %llu from %s", static_cast<unsigned long long>(c.id()), c.peer().c_str());
  auto* a = new ConnectionAuth;
  a->unmute.conn = &c;
  a->unmute.dispatcher = this;
  a->unmute.fn = [](io::Timer* t) {
    auto* m = static_cast<ConnectionAuth::Muted*>(t);
    static_cast<KafkaDispatcher*>(m->dispatcher)->release_parked(*m->conn);
  };
  c.user = a;
}

void KafkaDispatcher::on_close(net::Connection& c) {
  LOG_DEBUG("connection %llu from %s closed", static_cast<unsigned long long>(c.id()),
            c.peer().c_str());
  if (ConnectionAuth* a = auth_of(c); a && a->unmute.armed()) c.reactor().disarm(&a->unmute);
  delete auth_of(c);
  c.user = nullptr;
}

// Kafka mutes a throttled client's channel: nothing more is read from it until the throttle
// time is over. Here its frames wait, in order, and are handled then; a client that keeps
// sending regardless is closed once queued.max.requests frames wait.
void KafkaDispatcher::on_frame(net::Connection& c, std::uint64_t seq, net::Buffer frame) {
  ConnectionAuth* a = auth_of(c);
  if (a && !a->releasing &&
      (!a->parked.empty() || (a->quota.muted_until_ns && mono_ns() < a->quota.muted_until_ns))) {
    if (a->parked.size() >= rc_.settings->queued_max_requests) {
      LOGF_WARN((log::Fields{.client = c.peer()}),
                "closing connection from %s: %zu requests sent while throttled", c.peer().c_str(),
                a->parked.size());
      c.skip(seq);
      c.close(false);
      return;
    }
    a->parked.emplace_back(seq, std::move(frame));
    if (!a->unmute.armed()) c.reactor().arm(&a->unmute, a->quota.muted_until_ns);
    return;
  }
  dispatch(c, seq, std::move(frame));
}

void KafkaDispatcher::release_parked(net::Connection& c) {
  ConnectionAuth* a = auth_of(c);
  while (!c.closed() && !a->parked.empty()) {
    if (mono_ns() < a->quota.muted_until_ns) {
      c.reactor().arm(&a->unmute, a->quota.muted_until_ns);
      return;
    }
    auto [seq, frame] = std::move(a->parked.front());
    a->parked.pop_front();
    a->releasing = true;
    dispatch(c, seq, std::move(frame));
    if (c.closed()) return;
    a->releasing = false;
  }
}

void KafkaDispatcher::dispatch(net::Connection& c, std::uint64_t seq, net::Buffer frame) {
  ++requests_;
  auto h = kafka::decode_request_header(frame.span());
  if (!h.ok()) {
    if (h.error == kafka::DecodeError::unknown_api) {
      LOGF_WARN((log::Fields{.client = c.peer()}),
                "closing connection from %s: unknown api key %d (version %d)", c.peer().c_str(),
                h.header.request_api_key, h.header.request_api_version);
    } else {
      LOGF_WARN((log::Fields{.client = c.peer()}),
                "closing connection from %s: malformed request header (%s at byte %zu)",
                c.peer().c_str(), std::string(kafka::decode_error_name(h.error)).c_str(),
                h.error_offset);
    }
    c.skip(seq);
    c.close(false);
    return;
  }
  const std::int16_t k = h.header.request_api_key;
  const std::int16_t v = h.header.request_api_version;
  const ApiHandler* handler = find_handler(k);
  if (handler && !serves(*handler, rc_, listener_)) handler = nullptr;
  if (!handler) {
    LOGF_WARN((log::Fields{.client = c.peer()}),
              "closing connection from %s: api %s (key %d) is not served", c.peer().c_str(),
              std::string(kafka::api_name(k)).c_str(), k);
    c.skip(seq);
    c.close(false);
    return;
  }
  if (const char* why =
          auth_gate(rc_.settings->security[listener_], c, k, frame.size(), mono_ns())) {
    LOGF_WARN((log::Fields{.client = c.peer()}), "closing connection from %s: %s (%s v%d)",
              c.peer().c_str(), why, std::string(kafka::api_name(k)).c_str(), v);
    c.skip(seq);
    c.close(false);
    return;
  }
  auto req = std::make_unique<Request>(rc_, *this, &c, seq, std::move(h), std::move(frame));
  const std::int16_t min_served =
      handler->min_served >= 0 ? handler->min_served : handler->min_version;
  if (v < min_served || v > handler->max_version) {
    if (k == kafka::key(ApiKey::api_versions)) {
      // Clients probe with their newest version and expect error 35 with our list, in the v0
      // shape, so they can retry with a version we serve.
      handlers::api_versions(std::move(req));
      return;
    }
    if (k == kafka::key(ApiKey::produce) && v >= 0 && v < 3) {
      req->send(handlers::produce_v0_2_unsupported(*req));
      return;
    }
    req->fail("unsupported version");
    return;
  }
  // A controller listener's requests are the quorum's and the brokers' (a combined node has
  // both kinds of listener); a cluster broker's clients' changes go to the active controller.
  const bool controller_listener = rc_.settings->listeners[listener_].controller;
  if (!controller_listener && rc_.settings->cluster_broker() && forwarded(k)) {
    handlers::forward(std::move(req));
    return;
  }
  // Metadata describes the cluster when it is answered: behind an earlier request still in
  // flight (an acks=all produce waiting for its ISR) it is built once that one is answered, as
  // Kafka, which reads a connection's requests one at a time, would. Built at once and held
  // for the produce it would name leaders from before a failover that happened meanwhile, and
  // librdkafka then moves a partition back to its dead leader and stays stuck there.
  if (k == kafka::key(ApiKey::metadata)) {
    c.after_earlier_answers(
        seq, [handler, r = std::move(req)]() mutable { handler->handle(std::move(r)); });
    return;
  }
  // The quorum's and the brokers' own apis (registration, heartbeats, ISR changes, votes, the
  // metadata log) need CLUSTER_ACTION on the cluster, as in Kafka. They have no error a
  // client could act on: a denied one is logged (by authorized) and the connection closed.
  const bool metadata_fetch = controller_listener && k == kafka::key(ApiKey::fetch);
  if ((handler->controller_only || metadata_fetch) && k != kafka::key(ApiKey::envelope) &&
      !authorized(*req, replication::AclOperation::cluster_action,
                  replication::ResourceType::cluster, replication::kClusterResourceName)) {
    req->fail("CLUSTER_ACTION on the cluster is not authorized for this principal");
    return;
  }
  if (metadata_fetch) {
    handlers::metadata_log_fetch(std::move(req));
    return;
  }
  // request_percentage counts the time this reactor spends handling the client's request
  // (what runs here; waits for other threads and long polls are not handling).
  const bool timed = rc_.image && !rc_.image->client_quotas().empty();
  const std::int64_t t0 = timed ? mono_ns() : 0;
  const std::string client = timed ? req->header.header.client_id.value_or("") : std::string();
  handler->handle(std::move(req));
  if (timed && !c.closed()) record_request_time(c, client, (mono_ns() - t0) / 1000);
}

void KafkaDispatcher::record_request_time(net::Connection& c, const std::string& client,
                                          std::int64_t micros) {
  ConnectionAuth* a = auth_of(c);
  if (!a || !rc_.image) return;
  record_quota(a->quota, *rc_.image, quota_user(principal_of(c)), client, QuotaType::request,
               micros);
}

}  // namespace samsa::daemon
