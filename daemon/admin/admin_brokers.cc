// The admin socket's broker.* commands (samsactl broker): the registered brokers as the
// metadata image holds them, and a broker's retirement: broker.drain moves every replica off it
// with one AlterPartitionReassignments (planned by drain_plan.h), broker.unregister retires its
// registration with UnregisterBroker.
//
// Both changes are decided by the active controller. On its node they go to the Controller on
// the controller thread; anywhere else (a broker, or a controller that does not lead) the same
// Kafka request frame is forwarded to the active controller over the node's controller link,
// as a broker forwards a client's, so `broker drain` works from any node's admin socket. The
// answer comes once this node's image holds the change. samsactl then follows the drain with
// broker.describe.
#include <algorithm>
#include <map>

#include "base/kafka_errors.h"
#include "base/log.h"
#include "daemon/admin/admin_commands.h"
#include "daemon/admin/drain_plan.h"
#include "daemon/broker.h"
#include "daemon/listener_security.h"
#include "net/kafka/api.h"
#include "replication/controller.h"

namespace samsa::daemon {
namespace {

using replication::BrokerState;
using replication::contains;
using replication::MetadataImage;

constexpr std::int16_t kReassignVersion = 0;    // AlterPartitionReassignments
constexpr std::int16_t kUnregisterVersion = 0;  // UnregisterBroker

struct Load {
  long replicas = 0;
  long leaderships = 0;
  long reassigning = 0;  // partitions of a reassignment in progress that touch it
};

std::map<std::int32_t, Load> loads(const MetadataImage& img) {
  std::map<std::int32_t, Load> out;
  for (const auto& [name, t] : img.topics())
    for (const auto& p : t->partitions) {
      for (std::int32_t r : p.replicas) {
        ++out[r].replicas;
        if (p.reassigning()) ++out[r].reassigning;
      }
      if (p.leader >= 0) ++out[p.leader].leaderships;
    }
  return out;
}

json::Value broker_json(const BrokerState& b, const Load& l) {
  json::Value v;
  v["id"] = b.id;
  v["rack"] = b.rack ? json::Value(*b.rack) : json::Value();
  v["epoch"] = static_cast<long long>(b.epoch);
  json::Value eps = json::Value::array();
  for (const auto& e : b.endpoints) {
    json::Value ep;
    ep["name"] = e.name;
    ep["host"] = e.host;
    ep["port"] = e.port;
    ep["security_protocol"] =
        security_protocol_name(static_cast<SecurityProtocol>(e.security_protocol));
    eps.push(std::move(ep));
  }
  v["endpoints"] = std::move(eps);
  v["fenced"] = b.fenced;
  v["in_controlled_shutdown"] = b.in_controlled_shutdown;
  v["replicas"] = static_cast<long long>(l.replicas);
  v["leaderships"] = static_cast<long long>(l.leaderships);
  v["reassigning"] = static_cast<long long>(l.reassigning);
  return v;
}

// What this node's image says, on the controller thread; f(image, reply) answers.
template <class F>
void with_image(Broker& b, Reply reply, F f) {
  if (!serving(b, reply, true)) return;
  b.on_controller([reply, f = std::move(f)](replication::Controller& c) mutable {
    auto img = c.image();
    if (!img) return reply.error(admin_error::unavailable, "no metadata image yet");
    f(*img, reply);
  });
}

void broker_list(Broker& b, Reply reply) {
  with_image(b, reply, [](const MetadataImage& img, const Reply& r) {
    const auto l = loads(img);
    json::Value list = json::Value::array();
    for (const auto& [id, st] : img.brokers()) {
      auto it = l.find(id);
      list.push(broker_json(st, it == l.end() ? Load{} : it->second));
    }
    json::Value out;
    out["brokers"] = std::move(list);
    r.ok(std::move(out));
  });
}

std::optional<std::int32_t> broker_id(const json::Value& args, const Reply& reply) {
  Args a(args, reply);
  auto id = a.integer("id", true, 0, INT32_MAX);
  if (a.failed()) return std::nullopt;
  return static_cast<std::int32_t>(*id);
}

json::Value partitions_of(const MetadataImage& img, std::int32_t id, bool moving_only) {
  json::Value list = json::Value::array();
  for (const auto& [name, t] : img.topics())
    for (const auto& p : t->partitions) {
      const bool touches =
          contains(p.replicas, id) || contains(p.adding, id) || contains(p.removing, id);
      if (!touches || (moving_only && !p.reassigning())) continue;
      json::Value v;
      v["topic"] = name;
      v["partition"] = p.partition;
      if (!moving_only)
        v["role"] = p.leader == id           ? "leader"
                    : contains(p.isr, id)    ? "follower"
                    : contains(p.adding, id) ? "adding"
                                             : "out-of-sync";
      v["leader"] = p.leader;
      v["replicas"] = json::int_array(p.replicas);
      v["isr"] = json::int_array(p.isr);
      if (moving_only) {
        v["adding"] = json::int_array(p.adding);
        v["removing"] = json::int_array(p.removing);
      }
      list.push(std::move(v));
    }
  return list;
}

void broker_describe(Broker& b, const json::Value& args, Reply reply) {
  auto id = broker_id(args, reply);
  if (!id) return;
  with_image(b, reply, [id = *id](const MetadataImage& img, const Reply& r) {
    auto it = img.brokers().find(id);
    if (it == img.brokers().end())
      return r.error(admin_error::not_found, "broker " + std::to_string(id) + " is not registered");
    const auto l = loads(img);
    auto li = l.find(id);
    json::Value out = broker_json(it->second, li == l.end() ? Load{} : li->second);
    out["partitions"] = partitions_of(img, id, false);
    out["reassignments"] = partitions_of(img, id, true);
    r.ok(std::move(out));
  });
}

// One outcome per partition submitted: "topic-p" and its Kafka error (none: accepted).
using Outcomes = std::vector<std::tuple<std::string, std::int16_t, std::string>>;

std::vector<replication::ReassignmentSpec> specs_of(const DrainPlan& plan) {
  std::vector<replication::ReassignmentSpec> specs;
  for (const auto& m : plan.moves)
    specs.push_back({m.topic, m.partition, m.target});
  return specs;
}

// The forwarded AlterPartitionReassignments' answer, or the reason there is none.
std::expected<Outcomes, std::string> forwarded_outcomes(
    const std::optional<std::vector<std::byte>>& frame) {
  if (!frame) return std::unexpected("the active controller could not be reached");
  std::vector<std::byte> bytes = *frame;
  using Resp = kafka::AlterPartitionReassignmentsResponse;
  auto h = kafka::decode_response_header(bytes, Resp::kApiKey, kReassignVersion);
  Resp a;
  if (!h.ok() ||
      kafka::decode_response_body(bytes, h, kReassignVersion, a) != kafka::DecodeError::none)
    return std::unexpected("the active controller's answer does not decode");
  if (a.error_code != 0)
    return std::unexpected(std::string(kafka::error_name(a.error_code)) +
                           (a.error_message ? ": " + *a.error_message : ""));
  Outcomes out;
  for (const auto& t : a.responses)
    for (const auto& p : t.partitions)
      out.emplace_back(t.name + "-" + std::to_string(p.partition_index), p.error_code,
                       p.error_message.value_or(""));
  return out;
}

std::vector<std::byte> reassign_frame(const DrainPlan& plan) {
  kafka::AlterPartitionReassignmentsRequest req;
  for (const auto& m : plan.moves) {
    if (req.topics.empty() || req.topics.back().name != m.topic) {
      req.topics.emplace_back();
      req.topics.back().name = m.topic;
    }
    auto& p = req.topics.back().partitions.emplace_back();
    p.partition_index = m.partition;
    p.replicas = m.target;
  }
  return kafka::flatten_body(
      kafka::encode_request(req, kReassignVersion, 0, std::string("samsa-admin")));
}

json::Value plan_json(const DrainPlan& plan, bool forwarded) {
  json::Value out;
  out["broker"] = plan.broker;
  out["partitions"] = static_cast<long long>(plan.partitions);
  out["submitted"] = static_cast<long long>(plan.moves.size());
  out["via"] = forwarded ? "forwarded to the active controller" : "this node's controller";
  json::Value moves = json::Value::array();
  for (const auto& m : plan.moves) {
    json::Value v;
    v["topic"] = m.topic;
    v["partition"] = m.partition;
    v["from"] = json::int_array(m.from);
    v["to"] = json::int_array(m.target);
    moves.push(std::move(v));
  }
  out["moves"] = std::move(moves);
  json::Value away = json::Value::array();
  for (const auto& tp : plan.moving_away)
    away.push(tp);
  out["already_moving"] = std::move(away);
  return out;
}

// The plan's answer: ok, or the partitions that failed with their Kafka error names.
void answer_drain(const Reply& reply, const DrainPlan& plan, bool forwarded,
                  std::expected<Outcomes, std::string> got) {
  if (!got) return reply.error(admin_error::failed, "drain not submitted: " + got.error());
  std::string failed;
  std::size_t n = 0;
  for (const auto& [tp, code, msg] : *got) {
    if (code == 0) continue;
    ++n;
    failed += (failed.empty() ? "" : "; ") + tp + ": " + std::string(kafka::error_name(code)) +
              (msg.empty() ? "" : " (" + msg + ")");
  }
  if (n)
    return reply.error(admin_error::failed, std::to_string(n) + " of " +
                                                std::to_string(plan.moves.size()) +
                                                " partitions failed to reassign (the others "
                                                "are moving): " +
                                                failed);
  reply.ok(plan_json(plan, forwarded));
}

void submit(Broker& b, replication::Controller& c, DrainPlan plan, Reply reply) {
  if (plan.moves.empty()) return answer_drain(reply, plan, false, Outcomes{});
  if (c.active()) {
    auto specs = specs_of(plan);
    // As Kafka's v0 requests (and so the forwarded one): a target keeps the size of the one it
    // replaces, but a partition caught in a replication factor change may differ from its
    // original replicas.
    c.alter_partition_reassignments(
        specs, true, [reply, plan, specs](std::vector<replication::ReassignmentOutcome> out) {
          Outcomes o;
          for (std::size_t i = 0; i < specs.size() && i < out.size(); ++i)
            o.emplace_back(specs[i].topic + "-" + std::to_string(specs[i].partition),
                           kafka::code(out[i].error), out[i].message);
          answer_drain(reply, plan, false, std::move(o));
        });
    return;
  }
  // A controller that does not lead has no link to the one that does: name it instead.
  if (b.settings()->controller_only())
    return reply.error(admin_error::failed,
                       "this controller is not the active one (node " +
                           std::to_string(c.quorum_view().leader) +
                           " leads): run samsactl on its node or on a broker's");
  auto frame = reassign_frame(plan);
  b.forward_to_controller(std::move(frame), [reply, plan](std::optional<std::vector<std::byte>> r) {
    answer_drain(reply, plan, true, forwarded_outcomes(r));
  });
}

void broker_drain(Broker& b, const json::Value& args, Reply reply) {
  if (!serving(b, reply)) return;
  auto id = broker_id(args, reply);
  if (!id) return;
  LOG_INFO("admin: drain broker %d (uid %u)", *id, static_cast<unsigned>(reply.peer_uid()));
  b.on_controller([&b, reply, id = *id](replication::Controller& c) {
    auto img = c.image();
    if (!img) return reply.error(admin_error::unavailable, "no metadata image yet");
    if (!img->brokers().contains(id))
      return reply.error(admin_error::not_found,
                         "broker " + std::to_string(id) + " is not registered");
    auto plan = plan_drain(*img, id);
    if (!plan) return reply.error(admin_error::failed, plan.error());
    submit(b, c, std::move(*plan), reply);
  });
}

void answer_unregister(const Reply& reply, std::int32_t id, std::int16_t code,
                       const std::string& msg) {
  if (code != 0)
    return reply.error(lower_error(static_cast<kafka::ErrorCode>(code)),
                       msg.empty() ? std::string(kafka::error_name(code)) : msg);
  json::Value v;
  v["broker"] = id;
  v["unregistered"] = true;
  reply.ok(std::move(v));
}

void forward_unregister(Broker& b, std::int32_t id, Reply reply) {
  kafka::UnregisterBrokerRequest req;
  req.broker_id = id;
  auto frame = kafka::flatten_body(
      kafka::encode_request(req, kUnregisterVersion, 0, std::string("samsa-admin")));
  b.forward_to_controller(std::move(frame), [reply, id](std::optional<std::vector<std::byte>> r) {
    if (!r) return reply.error(admin_error::failed, "the active controller could not be reached");
    using Resp = kafka::UnregisterBrokerResponse;
    auto h = kafka::decode_response_header(*r, Resp::kApiKey, kUnregisterVersion);
    Resp a;
    if (!h.ok() ||
        kafka::decode_response_body(*r, h, kUnregisterVersion, a) != kafka::DecodeError::none)
      return reply.error(admin_error::failed, "the active controller's answer does not decode");
    answer_unregister(reply, id, a.error_code, a.error_message.value_or(""));
  });
}

void broker_unregister(Broker& b, const json::Value& args, Reply reply) {
  if (!serving(b, reply)) return;
  Args a(args, reply);
  auto id = a.integer("id", true, 0, INT32_MAX);
  auto force = args.find("force");
  if (a.failed()) return;
  const bool forced = force && force->is_bool() && force->as_bool();
  b.on_controller(
      [&b, reply, id = static_cast<std::int32_t>(*id), forced](replication::Controller& c) {
        auto img = c.image();
        if (!img) return reply.error(admin_error::unavailable, "no metadata image yet");
        auto it = img->brokers().find(id);
        if (it == img->brokers().end())
          return reply.error(admin_error::not_found,
                             "broker " + std::to_string(id) + " is not registered");
        const auto l = loads(*img);
        const auto li = l.find(id);
        if (li != l.end() && li->second.replicas > 0 && !forced)
          return reply.error(admin_error::failed,
                             "broker " + std::to_string(id) + " still holds " +
                                 std::to_string(li->second.replicas) + " replicas (" +
                                 std::to_string(li->second.leaderships) +
                                 " leaderships): drain it first (samsactl broker drain " +
                                 std::to_string(id) + "), or unregister it with --force");
        LOG_INFO("admin: unregister broker %d%s (uid %u)", id, forced ? " (forced)" : "",
                 static_cast<unsigned>(reply.peer_uid()));
        if (!c.active() && b.settings()->controller_only())
          return reply.error(admin_error::failed,
                             "this controller is not the active one (node " +
                                 std::to_string(c.quorum_view().leader) +
                                 " leads): run samsactl on its node or on a broker's");
        if (!c.active()) return forward_unregister(b, id, reply);
        c.unregister_broker(id, [reply, id](replication::UnregisterAnswer ans) {
          answer_unregister(reply, id, kafka::code(ans.error), ans.message);
        });
      });
}

}  // namespace

void register_broker_commands(AdminServer& admin, Broker& b) {
  admin.add_command("broker.list", [&b](const json::Value&, Reply r) { broker_list(b, r); });
  admin.add_command("broker.describe",
                    [&b](const json::Value& a, Reply r) { broker_describe(b, a, r); });
  admin.add_command("broker.drain", [&b](const json::Value& a, Reply r) { broker_drain(b, a, r); });
  admin.add_command("broker.unregister",
                    [&b](const json::Value& a, Reply r) { broker_unregister(b, a, r); });
}

}  // namespace samsa::daemon
