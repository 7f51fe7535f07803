// The admin socket's acl.* and user.* commands (samsactl acl, samsactl user): the same ACLs
// and SCRAM credentials kafka-acls and kafka-configs manage, committed by the controller, for
// an operator on the machine. They need no Kafka login: that is how the first SCRAM user and
// the first ACLs of a cluster without a PLAINTEXT listener are made.
#include "base/log.h"
#include "daemon/admin/admin_commands.h"
#include "daemon/broker.h"
#include "net/sasl/sasl.h"
#include "replication/controller.h"

namespace samsa::daemon {
namespace {

using replication::AclBinding;

// An ACL from acl.add / acl.remove's arguments, in Kafka's names (kafka-acls' spellings too:
// "Read", "TransactionalId", "prefixed").
std::optional<AclBinding> binding_of(const json::Value& args, const Reply& reply) {
  Args a(args, reply);
  auto type = a.string("resource_type", true);
  auto name = a.string("name", false);
  auto pattern = a.string("pattern", false);
  auto principal = a.string("principal", true);
  auto host = a.string("host", false);
  auto op = a.string("operation", true);
  auto permission = a.string("permission", true);
  if (a.failed()) return std::nullopt;
  AclBinding b;
  b.resource_type = replication::parse_resource_type(*type);
  b.resource_name = b.resource_type == replication::ResourceType::cluster
                        ? name.value_or(std::string(replication::kClusterResourceName))
                        : name.value_or("");
  b.pattern_type = replication::parse_pattern_type(pattern.value_or("literal"));
  b.principal = *principal;
  b.host = host.value_or("*");
  b.operation = replication::parse_acl_operation(*op);
  b.permission = replication::parse_acl_permission_type(*permission);
  if (auto why = replication::validate_for_create(b)) {
    reply.error(admin_error::invalid_argument, *why);
    return std::nullopt;
  }
  return b;
}

json::Value acl_json(const AclBinding& b) {
  json::Value v;
  v["resource_type"] = std::string(replication::name(b.resource_type));
  v["name"] = b.resource_name;
  v["pattern"] = std::string(replication::name(b.pattern_type));
  v["principal"] = b.principal;
  v["host"] = b.host;
  v["operation"] = std::string(replication::name(b.operation));
  v["permission"] = std::string(replication::name(b.permission));
  return v;
}

void acl_list(Broker& b, const json::Value&, Reply reply) {
  if (!serving(b, reply, true)) return;
  const bool enabled = b.settings()->authorizer_enabled;
  b.on_controller([reply, enabled](replication::Controller& c) {
    json::Value list = json::Value::array();
    for (const auto& [id, acl] : c.image()->acls())
      list.push(acl_json(acl));
    json::Value out;
    out["authorizer"] = enabled;
    out["acls"] = std::move(list);
    reply.ok(std::move(out));
  });
}

void acl_change(Broker& b, const json::Value& args, Reply reply, bool add) {
  if (!serving(b, reply)) return;
  auto acl = binding_of(args, reply);
  if (!acl) return;
  LOG_INFO("admin: %s ACL %s (uid %u)", add ? "add" : "remove",
           replication::to_string(*acl).c_str(), static_cast<unsigned>(reply.peer_uid()));
  b.on_controller([reply, add, acl = std::move(*acl)](replication::Controller& c) {
    auto done = [reply, acl, add](std::vector<replication::AclOutcome> out) {
      const auto& o = out.front();
      if (o.error != kafka::ErrorCode::none)
        return reply.error(lower_error(o.error),
                           o.message.empty() ? std::string(kafka::error_name(o.error)) : o.message);
      json::Value v = acl_json(acl);
      if (!add) v["removed"] = static_cast<long long>(o.matching.size());
      reply.ok(std::move(v));
    };
    if (add) {
      c.create_acls({acl}, std::move(done));
    } else {
      c.delete_acls({replication::to_filter(acl)}, std::move(done));
    }
  });
}

std::optional<replication::ScramMechanism> scram_mechanism(const std::string& name) {
  auto m = net::sasl::parse_mechanism(name);
  if (m == net::sasl::Mechanism::scram_sha_256) return replication::ScramMechanism::sha256;
  if (m == net::sasl::Mechanism::scram_sha_512) return replication::ScramMechanism::sha512;
  return std::nullopt;
}

void user_list(Broker& b, const json::Value&, Reply reply) {
  if (!serving(b, reply, true)) return;
  b.on_controller([reply](replication::Controller& c) {
    json::Value list = json::Value::array();
    for (const auto& [key, cred] : c.image()->scram_credentials()) {
      json::Value u;
      u["user"] = cred.name;
      u["mechanism"] =
          cred.mechanism == replication::ScramMechanism::sha256 ? "SCRAM-SHA-256" : "SCRAM-SHA-512";
      u["iterations"] = static_cast<long long>(cred.iterations);
      list.push(std::move(u));
    }
    json::Value out;
    out["users"] = std::move(list);
    reply.ok(std::move(out));
  });
}

// user.add derives the credential here (the password never reaches the metadata log, as with
// kafka-configs, whose client salts it); user.remove removes one mechanism's credential.
void user_change(Broker& b, const json::Value& args, Reply reply, bool add) {
  if (!serving(b, reply)) return;
  Args a(args, reply);
  auto user = a.string("user", true);
  auto mechanism = a.string("mechanism", true);
  auto password = a.string("password", add);
  auto iterations = a.integer("iterations", false, net::sasl::kMinScramIterations,
                              net::sasl::kMaxScramIterations);
  if (a.failed()) return;
  auto m = scram_mechanism(*mechanism);
  if (!m)
    return reply.error(admin_error::invalid_argument,
                       "mechanism must be SCRAM-SHA-256 or SCRAM-SHA-512");
  replication::ScramAlteration change;
  change.remove = !add;
  change.credential.name = *user;
  change.credential.mechanism = *m;
  if (add) {
    const auto n = static_cast<std::int32_t>(iterations.value_or(net::sasl::kMinScramIterations));
    auto cred =
        net::sasl::make_scram_credential(*net::sasl::parse_mechanism(*mechanism), *password, "", n);
    change.credential.salt = std::move(cred.salt);
    change.credential.stored_key = std::move(cred.stored_key);
    change.credential.server_key = std::move(cred.server_key);
    change.credential.iterations = n;
  }
  LOG_INFO("admin: %s %s credential of user %s (uid %u)", add ? "set" : "remove",
           mechanism->c_str(), user->c_str(), static_cast<unsigned>(reply.peer_uid()));
  b.on_controller([reply, change = std::move(change)](replication::Controller& c) mutable {
    const std::string name = change.credential.name;
    c.alter_scram_credentials({std::move(change)},
                              [reply, name](std::vector<replication::ScramOutcome> out) {
                                const auto& o = out.front();
                                if (o.error != kafka::ErrorCode::none)
                                  return reply.error(lower_error(o.error), o.message);
                                json::Value v;
                                v["user"] = name;
                                reply.ok(std::move(v));
                              });
  });
}

}  // namespace

void register_security_commands(AdminServer& admin, Broker& b) {
  admin.add_command("acl.list", [&b](const json::Value& a, Reply r) { acl_list(b, a, r); });
  admin.add_command("acl.add",
                    [&b](const json::Value& a, Reply r) { acl_change(b, a, std::move(r), true); });
  admin.add_command("acl.remove",
                    [&b](const json::Value& a, Reply r) { acl_change(b, a, std::move(r), false); });
  admin.add_command("user.list", [&b](const json::Value& a, Reply r) { user_list(b, a, r); });
  admin.add_command("user.add",
                    [&b](const json::Value& a, Reply r) { user_change(b, a, std::move(r), true); });
  admin.add_command("user.remove", [&b](const json::Value& a, Reply r) {
    user_change(b, a, std::move(r), false);
  });
}

}  // namespace samsa::daemon
