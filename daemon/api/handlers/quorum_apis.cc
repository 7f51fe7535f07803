// The controller quorum's RPCs (KRaft's), served by every node that runs a controller or keeps
// a copy of the metadata log: Vote, BeginQuorumEpoch, EndQuorumEpoch, FetchSnapshot, the Fetch
// of __cluster_metadata by voters and observers, and DescribeQuorum (kafka-metadata-quorum).
// Each is decoded here, converted (replication/quorum/quorum_wire.h), handed to the controller
// thread (replication::Controller's on_* calls) and answered on the request's reactor.
#include "base/log.h"
#include "daemon/api/auth.h"
#include "daemon/api/handlers/handlers.h"
#include "daemon/api/handlers/round_trip.h"
#include "daemon/api/quorum_describe.h"
#include "daemon/broker.h"
#include "net/kafka/gen/begin_quorum_epoch_request.h"
#include "net/kafka/gen/begin_quorum_epoch_response.h"
#include "net/kafka/gen/describe_quorum_request.h"
#include "net/kafka/gen/describe_quorum_response.h"
#include "net/kafka/gen/end_quorum_epoch_request.h"
#include "net/kafka/gen/end_quorum_epoch_response.h"
#include "net/kafka/gen/fetch_request.h"
#include "net/kafka/gen/fetch_response.h"
#include "net/kafka/gen/fetch_snapshot_request.h"
#include "net/kafka/gen/fetch_snapshot_response.h"
#include "net/kafka/gen/vote_request.h"
#include "net/kafka/gen/vote_response.h"
#include "replication/quorum/quorum_wire.h"

namespace samsa::daemon::handlers {
namespace {

using kafka::ErrorCode;
namespace q = replication::quorum;

// The request's cluster id against this node's; logs a refusal once per peer and reason.
ErrorCode cluster_check(const Request& r, const std::optional<std::string>& theirs) {
  const ErrorCode e = q::check_cluster(theirs, r.rc.settings->cluster_id);
  if (e != ErrorCode::none)
    LOG_WARN("%s from %s names cluster %s, this is cluster %s: refused",
             std::string(kafka::api_name(r.api_key())).c_str(), r.conn->peer().c_str(),
             theirs->c_str(), r.rc.settings->cluster_id.c_str());
  return e;
}

}  // namespace

void vote(RequestPtr r) {
  kafka::VoteRequest req;
  if (!r->decode(req)) return;
  ErrorCode top = cluster_check(*r, req.cluster_id);
  auto v = q::vote_of(req);
  if (top == ErrorCode::none && !v) top = v.error();
  if (top != ErrorCode::none) {
    r->reply(q::vote_response(top, {}));
    return;
  }
  via_controller<q::VoteResponse>(
      std::move(r), [v = *v](replication::Controller& c, auto done) { done(c.on_vote(v)); },
      [](RequestPtr r, q::VoteResponse a) { r->reply(q::vote_response(ErrorCode::none, a)); });
}

void begin_quorum_epoch(RequestPtr r) {
  kafka::BeginQuorumEpochRequest req;
  if (!r->decode(req)) return;
  ErrorCode top = cluster_check(*r, req.cluster_id);
  auto b = q::begin_epoch_of(req);
  if (top == ErrorCode::none && !b) top = b.error();
  if (top != ErrorCode::none) {
    r->reply(q::begin_epoch_response(top, {}));
    return;
  }
  via_controller<q::EpochResponse>(
      std::move(r), [b = *b](replication::Controller& c, auto done) { done(c.on_begin_epoch(b)); },
      [](RequestPtr r, q::EpochResponse a) {
        r->reply(q::begin_epoch_response(ErrorCode::none, a));
      });
}

void end_quorum_epoch(RequestPtr r) {
  kafka::EndQuorumEpochRequest req;
  if (!r->decode(req)) return;
  ErrorCode top = cluster_check(*r, req.cluster_id);
  auto e = q::end_epoch_of(req, r->version());
  if (top == ErrorCode::none && !e) top = e.error();
  if (top != ErrorCode::none) {
    r->reply(q::end_epoch_response(top, {}));
    return;
  }
  via_controller<q::EpochResponse>(
      std::move(r), [e = *e](replication::Controller& c, auto done) { done(c.on_end_epoch(e)); },
      [](RequestPtr r, q::EpochResponse a) {
        r->reply(q::end_epoch_response(ErrorCode::none, a));
      });
}

void fetch_snapshot(RequestPtr r) {
  kafka::FetchSnapshotRequest req;
  if (!r->decode(req)) return;
  ErrorCode top = cluster_check(*r, req.cluster_id);
  std::int32_t max_bytes = 0;
  auto f = q::fetch_snapshot_of(req, &max_bytes);
  if (top == ErrorCode::none && !f) top = f.error();
  if (top != ErrorCode::none) {
    r->reply(q::fetch_snapshot_response(top, {}, {}));
    return;
  }
  // One answer holds at most 1 MiB of the snapshot: the fetcher asks again from there.
  const std::int64_t cap = std::clamp<std::int64_t>(max_bytes, 1, 1 << 20);
  via_controller<q::FetchSnapshotResponse>(
      std::move(r),
      [f = *f, cap](replication::Controller& c, auto done) { done(c.on_fetch_snapshot(f, cap)); },
      [id = f->id](RequestPtr r, q::FetchSnapshotResponse a) {
        r->reply(q::fetch_snapshot_response(ErrorCode::none, id, a));  // encodes a's bytes
      });
}

// A voter's or an observer's Fetch of the metadata log, long-polled on the controller thread.
void metadata_log_fetch(RequestPtr r) {
  kafka::FetchRequest req;
  if (!r->decode(req)) return;
  ErrorCode top = cluster_check(*r, req.cluster_id);
  auto f = q::fetch_of(req, r->version());
  if (top == ErrorCode::none && !f) top = f.error();
  if (top != ErrorCode::none) {
    r->reply(q::fetch_refusal(req, top));
    return;
  }
  std::int32_t max_bytes = 1 << 16;
  for (const auto& t : req.topics)
    for (const auto& p : t.partitions)
      max_bytes = std::max(max_bytes, p.partition_max_bytes);
  max_bytes = std::min(max_bytes, std::max(req.max_bytes, 1 << 16));
  via_controller<replication::Controller::FetchReply>(
      std::move(r),
      [f = *f, max_bytes](replication::Controller& c, auto done) {
        c.on_fetch(f, max_bytes, std::move(done));
      },
      [](RequestPtr r, replication::Controller::FetchReply got) {
        auto resp = q::fetch_response(got.answer, got.records);
        // Where the leader is, so an observer that bootstrapped through another node finds it.
        if (auto ep = quorum_endpoint(*r->rc.settings, got.answer.leader)) {
          auto& ne = resp.node_endpoints.emplace_back();
          ne.node_id = ep->id;
          ne.host = ep->host;
          ne.port = ep->port;
        }
        r->reply(resp);  // encodes (copies) the records
      });
}

// kafka-metadata-quorum describe --status / --replication. Served where the controller runs;
// a broker node forwards it (dispatch.cc). The answer is describe_quorum_answer's, which
// samsactl quorum shows too.
void describe_quorum(RequestPtr r) {
  kafka::DescribeQuorumRequest req;
  if (!r->decode(req)) return;
  bool ours = false;
  for (const auto& t : req.topics)
    for (const auto& p : t.partitions)
      if (t.topic_name == q::kMetadataTopic && p.partition_index == 0) ours = true;
  if (!authorized(*r, replication::AclOperation::describe, replication::ResourceType::cluster,
                  replication::kClusterResourceName)) {
    kafka::DescribeQuorumResponse resp;
    resp.error_code = kafka::code(ErrorCode::cluster_authorization_failed);
    r->reply(resp);
    return;
  }
  if (!ours) {
    kafka::DescribeQuorumResponse resp;
    resp.error_code = kafka::code(ErrorCode::unknown_topic_or_partition);
    resp.error_message = "DescribeQuorum names __cluster_metadata partition 0 only";
    r->reply(resp);
    return;
  }
  via_controller<replication::Controller::QuorumView>(
      std::move(r), [](replication::Controller& c, auto done) { done(c.quorum_view()); },
      [](RequestPtr r, replication::Controller::QuorumView v) {
        r->reply(describe_quorum_answer(v, *r->rc.settings, wall_ms(), mono_ms()));
      });
}

}  // namespace samsa::daemon::handlers
