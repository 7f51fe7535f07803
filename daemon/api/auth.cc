#include "daemon/api/auth.h"

#include "base/clock.h"
#include "base/log.h"
#include "daemon/api/dispatch.h"
#include "daemon/broker.h"
#include "net/kafka/api.h"

namespace samsa::daemon {
namespace {

const std::string kAnonymous = "User:ANONYMOUS";

// An SSL listener's principal: the certificate's subject through ssl.principal.mapping.rules,
// known once the handshake is done (before the first frame).
void learn_tls_principal(const ListenerSecurity& sec, net::Connection& c, ConnectionAuth& a) {
  a.principal_known = true;
  const std::string subject = c.tls_peer_subject();
  if (subject.empty()) {
    a.principal = kAnonymous;
    return;
  }
  a.principal = "User:" + (sec.principal_mapper ? sec.principal_mapper->map(subject) : subject);
}

}  // namespace

const std::string& principal_of(net::Connection& c) {
  ConnectionAuth* a = auth_of(c);
  return a && !a->principal.empty() ? a->principal : kAnonymous;
}

std::string_view host_of(const net::Connection& c) {
  std::string_view p = c.peer();
  const auto colon = p.rfind(':');
  if (colon != std::string_view::npos) p = p.substr(0, colon);
  if (p.size() >= 2 && p.front() == '[' && p.back() == ']') p = p.substr(1, p.size() - 2);
  return p;
}

bool authorizing(const Request& r) {
  return r.rc.settings->authorizer_enabled;
}

namespace {

void log_denied(const Request& r, std::string_view principal, replication::AclOperation op,
                replication::ResourceType type, std::string_view name) {
  static thread_local LogLimiter limiter;
  const auto quiet = limiter.allow(mono_ns());
  if (!quiet) return;
  const std::string more =
      *quiet ? " (" + std::to_string(*quiet) + " more denials in the last second)" : "";
  LOGF_INFO((log::Fields{.client = r.conn->peer()}),
            "Principal = %.*s is Denied operation = %s from host = %.*s on resource = %s:%.*s "
            "(%s v%d)%s",
            static_cast<int>(principal.size()), principal.data(),
            std::string(replication::name(op)).c_str(), static_cast<int>(r.host().size()),
            r.host().data(), std::string(replication::name(type)).c_str(),
            static_cast<int>(name.size()), name.data(),
            std::string(kafka::api_name(r.api_key())).c_str(), r.version(), more.c_str());
}

}  // namespace

bool authorized(const Request& r, replication::AclOperation op, replication::ResourceType type,
                std::string_view name, bool quiet) {
  const BrokerSettings& s = *r.rc.settings;
  if (!s.authorizer_enabled) return true;
  const std::string& principal = r.principal();
  if (r.rc.image &&
      r.rc.image->authorizer().authorize(s.authorizer, principal, r.host(), op, type, name))
    return true;
  if (!r.rc.image && replication::Authorizer::is_super_user(s.authorizer, principal)) return true;
  if (!quiet) log_denied(r, principal, op, type, name);
  return false;
}

std::int32_t authorized_operations(const Request& r, replication::ResourceType type,
                                   std::string_view name,
                                   std::initializer_list<replication::AclOperation> ops) {
  // Kafka reports operations only on what the principal may describe.
  if (!authorized(r, replication::AclOperation::describe, type, name, true)) return 0;
  std::int32_t bits = 0;
  for (auto op : ops)
    if (authorized(r, op, type, name, true)) bits |= std::int32_t{1} << replication::code(op);
  return bits;
}

bool authorized_any(const Request& r, replication::AclOperation op,
                    replication::ResourceType type) {
  const BrokerSettings& s = *r.rc.settings;
  if (!s.authorizer_enabled) return true;
  const std::string& principal = r.principal();
  if (r.rc.image &&
      r.rc.image->authorizer().authorize_any(s.authorizer, principal, r.host(), op, type))
    return true;
  if (!r.rc.image && replication::Authorizer::is_super_user(s.authorizer, principal)) return true;
  log_denied(r, principal, op, type, "*");
  return false;
}

const char* auth_gate(const ListenerSecurity& sec, net::Connection& c, std::int16_t key,
                      std::size_t frame_bytes, std::int64_t now_ns) {
  using kafka::ApiKey;
  ConnectionAuth* a = auth_of(c);
  if (!a) return nullptr;  // PLAINTEXT
  if (!sec.sasl()) {
    if (!a->principal_known) learn_tls_principal(sec, c, *a);
    return nullptr;
  }
  const bool api_versions = key == kafka::key(ApiKey::api_versions);
  const bool handshake = key == kafka::key(ApiKey::sasl_handshake);
  const bool authenticate = key == kafka::key(ApiKey::sasl_authenticate);
  switch (a->stage) {
    case ConnectionAuth::Stage::handshake:
      // sasl.server.max.receive.size bounds what an unauthenticated peer may make us hold.
      if (frame_bytes > static_cast<std::size_t>(sec.max_receive_bytes))
        return "request larger than sasl.server.max.receive.size before SASL authentication";
      if (api_versions || handshake) return nullptr;
      return "request before SASL authentication (only ApiVersions and SaslHandshake are "
             "served then)";
    case ConnectionAuth::Stage::authenticate:
      if (!a->reauthenticating && frame_bytes > static_cast<std::size_t>(sec.max_receive_bytes))
        return "SASL token larger than sasl.server.max.receive.size";
      if (authenticate) return nullptr;
      if (a->reauthenticating) return nullptr;  // requests already in flight carry on
      return "request other than SaslAuthenticate after SaslHandshake";
    case ConnectionAuth::Stage::done:
      if (handshake) return nullptr;  // re-authentication (KIP-368)
      if (authenticate) return "SaslAuthenticate without SaslHandshake";
      if (a->session_end_ns && now_ns > a->session_end_ns)
        return "SASL session expired (connections.max.reauth.ms) without re-authentication";
      return nullptr;
  }
  return nullptr;
}

}  // namespace samsa::daemon
