// The admin socket's `quorum` command: the controller quorum as `kafka-metadata-quorum describe
// --status` and `--replication` show it, and this node's own place in it.
//
// The quorum part is DescribeQuorum's answer (describe_quorum_answer, daemon/api/
// quorum_describe.h) read into JSON, never put together a second way. A controller answers from
// its own RaftNode. A broker (process.roles=broker) forwards DescribeQuorum to the active
// controller, as Kafka's brokers do for kafka-metadata-quorum --bootstrap-server: the broker is
// only an observer, which knows the leader's id and epoch and how far it has fetched, while the
// voters' progress (and, when only controller.quorum.bootstrap.servers is configured, even who
// the voters are) is known to the leader alone, and that is what an operator asks this command
// for. The node's own view (the leader it follows, its epoch, its metadata log end and how far
// it applied) comes under "node" on every node, from its own controller thread: it answers
// without the network, so it still says something when the controllers cannot be reached.
#include <algorithm>

#include "base/kafka_errors.h"
#include "daemon/admin/admin_commands.h"
#include "daemon/api/quorum_describe.h"
#include "daemon/broker.h"
#include "net/kafka/api.h"
#include "net/kafka/gen/describe_quorum_request.h"
#include "replication/quorum/quorum_wire.h"

namespace samsa::daemon {

namespace q = replication::quorum;
using Answer = kafka::DescribeQuorumResponse;

namespace {

// v2: the first with Nodes (the voters' endpoints).
constexpr std::int16_t kDescribeQuorumVersion = 2;

json::Value optional_int(std::int64_t v) {
  return v < 0 ? json::Value() : json::Value(static_cast<long long>(v));
}

std::string error_text(std::int16_t code, const std::optional<std::string>& message) {
  std::string s(kafka::error_name(code));
  if (message && !message->empty()) s += ": " + *message;
  return s;
}

json::Value replica_json(const Answer::ReplicaState& r, const char* status, std::int64_t leader_end,
                         std::int64_t now_wall_ms) {
  json::Value v;
  v["id"] = r.replica_id;
  v["status"] = status;
  v["log_end_offset"] = optional_int(r.log_end_offset);
  v["lag"] = r.log_end_offset < 0 || leader_end < 0 ? json::Value()
                                                    : optional_int(leader_end - r.log_end_offset);
  v["last_fetch_timestamp"] = optional_int(r.last_fetch_timestamp);
  v["last_caught_up_timestamp"] = optional_int(r.last_caught_up_timestamp);
  // Ages as well as timestamps: the clock that matters is the answering node's, not samsactl's.
  v["last_fetch_ms_ago"] =
      r.last_fetch_timestamp < 0
          ? json::Value()
          : optional_int(std::max<std::int64_t>(0, now_wall_ms - r.last_fetch_timestamp));
  v["last_caught_up_ms_ago"] =
      r.last_caught_up_timestamp < 0
          ? json::Value()
          : optional_int(std::max<std::int64_t>(0, now_wall_ms - r.last_caught_up_timestamp));
  return v;
}

// MaxFollowerLag and MaxFollowerLagTimeMs as kafka-metadata-quorum computes them: the voter
// furthest behind the leader's log end, and how much longer ago it last caught up.
void max_follower_lag(const Answer::PartitionData& p, std::int64_t leader_end, json::Value& out) {
  const Answer::ReplicaState* leader = nullptr;
  const Answer::ReplicaState* worst = nullptr;
  for (const auto& v : p.current_voters) {
    if (v.replica_id == p.leader_id) leader = &v;
    if (v.log_end_offset >= 0 && (!worst || v.log_end_offset < worst->log_end_offset)) worst = &v;
  }
  if (!leader || !worst || leader_end < 0) {
    out["max_follower_lag"] = json::Value();
    out["max_follower_lag_time_ms"] = json::Value();
    return;
  }
  out["max_follower_lag"] = static_cast<long long>(leader_end - worst->log_end_offset);
  const bool known = leader->last_caught_up_timestamp >= 0 && worst->last_caught_up_timestamp >= 0;
  out["max_follower_lag_time_ms"] =
      worst == leader ? json::Value(0)
      : known         ? json::Value(static_cast<long long>(leader->last_caught_up_timestamp -
                                                   worst->last_caught_up_timestamp))
                      : json::Value();
}

json::Value nodes_json(const Answer& a) {
  json::Value nodes = json::Value::array();
  for (const auto& n : a.nodes) {
    json::Value v;
    v["id"] = n.node_id;
    json::Value ls = json::Value::array();
    for (const auto& l : n.listeners) {
      json::Value e;
      e["name"] = l.name;
      e["host"] = l.host;
      e["port"] = static_cast<unsigned>(l.port);
      ls.push(std::move(e));
    }
    v["listeners"] = std::move(ls);
    nodes.push(std::move(v));
  }
  return nodes;
}

json::Value node_json(const replication::Controller::QuorumView& v, std::int32_t node_id) {
  json::Value n;
  n["id"] = node_id;
  n["voter"] = std::ranges::find(v.voters, node_id) != v.voters.end();
  n["role"] = q::role_name(v.role);
  n["leader_id"] = v.leader;
  n["leader_epoch"] = v.epoch;
  n["high_watermark"] = optional_int(v.high_watermark);
  n["log_start_offset"] = static_cast<long long>(v.log_start_offset);
  n["log_end_offset"] = static_cast<long long>(v.log_end_offset);
  n["applied_offset"] = static_cast<long long>(v.applied_offset);
  if (v.snapshot) {
    n["snapshot"]["end_offset"] = static_cast<long long>(v.snapshot->end_offset);
    n["snapshot"]["epoch"] = v.snapshot->epoch;
  } else {
    n["snapshot"] = json::Value();
  }
  json::Value voters = json::Value::array();
  for (auto id : v.voters)
    voters.push(id);
  n["voters"] = std::move(voters);  // as this node knows them (a broker may know none)
  return n;
}

// The forwarded DescribeQuorum's answer, or why there is none.
json::Value forwarded_json(const std::optional<std::vector<std::byte>>& frame) {
  json::Value err;
  if (!frame) {
    err["error"] = "the active controller could not be reached";
    return err;
  }
  std::vector<std::byte> bytes = *frame;
  auto h = kafka::decode_response_header(bytes, Answer::kApiKey, kDescribeQuorumVersion);
  Answer a;
  if (!h.ok() || kafka::decode_response_body(bytes, h, kDescribeQuorumVersion, a) !=
                     kafka::DecodeError::none) {
    err["error"] = "the active controller's DescribeQuorum answer does not decode";
    return err;
  }
  return quorum_json(a, wall_ms());
}

void forward_describe(Broker& b, std::function<void(json::Value)> deliver) {
  kafka::DescribeQuorumRequest req;
  auto& t = req.topics.emplace_back();
  t.topic_name = std::string(q::kMetadataTopic);
  t.partitions.emplace_back().partition_index = 0;
  auto frame = kafka::flatten_body(
      kafka::encode_request(req, kDescribeQuorumVersion, 0, std::string("samsa-admin")));
  b.forward_to_controller(std::move(frame), [deliver](std::optional<std::vector<std::byte>> r) {
    deliver(forwarded_json(r));
  });
}

void quorum(Broker& b, AdminServer& admin, Reply reply) {
  const auto s = b.state();
  if (s != Broker::State::serving && s != Broker::State::draining && s != Broker::State::drained)
    return reply.error(admin_error::unavailable, std::string("samsad is ") + Broker::state_name(s));
  const auto settings = b.settings();
  const bool forwarded = settings->cluster.role == ProcessRole::broker;
  json::Value out;
  out["cluster_id"] = b.cluster_id();
  out["node_id"] = settings->node_id;
  out["process_roles"] = process_roles_name(settings->cluster.role);
  out["quorum_source"] = forwarded ? "forwarded to the active controller" : "this node";
  // Part 0 from the controller thread: the node's view (and a controller's answer); part 1, a
  // broker's, from the active controller.
  gather<json::Value>(
      admin, forwarded ? 2 : 1, kGatherTimeoutMs,
      [&b, settings, forwarded](std::size_t i, std::function<void(json::Value)> deliver) {
        if (i == 1) return forward_describe(b, std::move(deliver));
        b.on_controller([settings, forwarded, deliver](replication::Controller& c) {
          const auto v = c.quorum_view();
          json::Value part;
          part["node"] = node_json(v, settings->node_id);
          if (!forwarded)
            part["quorum"] =
                quorum_json(describe_quorum_answer(v, *settings, wall_ms(), mono_ms()), wall_ms());
          deliver(std::move(part));
        });
      },
      [reply, forwarded,
       out = std::move(out)](std::vector<std::optional<json::Value>> got) mutable {
        json::Value late;
        late["error"] = forwarded ? "the active controller did not answer in time"
                                  : "the controller thread did not answer in time";
        if (forwarded) {
          out["quorum"] = got[1] ? std::move(*got[1]) : late;
        } else {
          out["quorum"] = got[0] ? std::move((*got[0])["quorum"]) : late;
        }
        json::Value none;
        none["error"] = "the controller thread did not answer in time";
        out["node"] = got[0] ? std::move((*got[0])["node"]) : none;
        reply.ok(std::move(out));
      });
}

}  // namespace

json::Value quorum_json(const kafka::DescribeQuorumResponse& a, std::int64_t now_wall_ms) {
  json::Value out;
  if (a.error_code != 0 || a.topics.empty() || a.topics.front().partitions.empty()) {
    out["error"] = a.error_code != 0 ? error_text(a.error_code, a.error_message)
                                     : std::string("an answer without __cluster_metadata-0");
    return out;
  }
  const auto& p = a.topics.front().partitions.front();
  out["leader_id"] = p.leader_id;
  out["leader_epoch"] = p.leader_epoch;
  out["high_watermark"] = optional_int(p.high_watermark);
  // A controller that does not lead still names the leader; the progress is the leader's alone.
  if (p.error_code != 0) out["error"] = error_text(p.error_code, p.error_message);
  std::int64_t leader_end = -1;
  for (const auto& v : p.current_voters)
    if (v.replica_id == p.leader_id) leader_end = v.log_end_offset;
  max_follower_lag(p, leader_end, out);
  json::Value voters = json::Value::array();
  for (const auto& v : p.current_voters)
    voters.push(replica_json(v, v.replica_id == p.leader_id ? "Leader" : "Follower", leader_end,
                             now_wall_ms));
  out["voters"] = std::move(voters);
  json::Value observers = json::Value::array();
  for (const auto& o : p.observers)
    observers.push(replica_json(o, "Observer", leader_end, now_wall_ms));
  out["observers"] = std::move(observers);
  out["nodes"] = nodes_json(a);
  return out;
}

void register_quorum_command(AdminServer& admin, Broker& b) {
  admin.add_command("quorum", [&b, &admin](const json::Value&, Reply r) { quorum(b, admin, r); });
}

}  // namespace samsa::daemon
