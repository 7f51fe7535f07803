#include "daemon/api/auth.h"

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
