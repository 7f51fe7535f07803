#include "daemon/listener_security.h"

#include <algorithm>
#include <cctype>

#include "daemon/config.h"
#include "daemon/settings.h"

namespace samsa::daemon {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& ch : out)
    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

// listener.security.protocol.map, with Kafka's fallbacks: a listener named after a protocol
// is that protocol; with no map set, a controller listener is PLAINTEXT.
std::expected<SecurityProtocol, std::string> protocol_of(const Config& c, std::string_view name,
                                                         bool controller) {
  for (const auto& item : c.get_list("listener.security.protocol.map")) {
    const auto colon = item.find(':');
    auto p =
        colon == std::string::npos ? std::nullopt : parse_security_protocol(item.substr(colon + 1));
    if (!p)
      return std::unexpected("listener.security.protocol.map: " + item +
                             ": expected LISTENER_NAME:PROTOCOL (PLAINTEXT, SSL, SASL_PLAINTEXT "
                             "or SASL_SSL)");
    if (item.substr(0, colon) == name) return *p;
  }
  if (auto p = parse_security_protocol(name)) return *p;
  if (!c.is_set("listener.security.protocol.map") && controller) return SecurityProtocol::plaintext;
  return std::unexpected("listeners: " + std::string(name) +
                         " has no security protocol: name it in "
                         "listener.security.protocol.map (e.g. " +
                         std::string(name) + ":SASL_SSL)");
}

std::expected<void, std::string> assign_protocols(const Config& c, std::vector<Endpoint>& eps) {
  for (auto& e : eps) {
    auto p = protocol_of(c, e.name, e.controller);
    if (!p) return std::unexpected(p.error());
    e.protocol = *p;
  }
  return {};
}

std::expected<net::tls::Options, std::string> tls_options(const Config& c, std::string_view l,
                                                          bool server = true) {
  auto v = [&](std::string_view k) { return listener_value(c, l, k); };
  for (const char* k : {"ssl.keystore.type", "ssl.truststore.type"})
    if (v(k) != "PEM")
      return std::unexpected(std::string(k) + ": " + v(k) +
                             " is not served: samsa reads PEM (convert the store with keytool "
                             "-importkeystore and openssl pkcs12)");
  net::tls::Options o;
  o.keystore_location = v("ssl.keystore.location");
  o.keystore_key = v("ssl.keystore.key");
  o.keystore_certificate_chain = v("ssl.keystore.certificate.chain");
  o.key_password = v("ssl.key.password");
  o.truststore_location = v("ssl.truststore.location");
  o.truststore_certificates = v("ssl.truststore.certificates");
  o.endpoint_identification_algorithm = v("ssl.endpoint.identification.algorithm");
  auto split = [](const std::string& s) {
    std::vector<std::string> out;
    std::size_t at = 0;
    while (at <= s.size()) {
      auto comma = s.find(',', at);
      if (comma == std::string::npos) comma = s.size();
      std::string item = s.substr(at, comma - at);
      std::erase_if(item, [](char ch) { return std::isspace(static_cast<unsigned char>(ch)); });
      if (!item.empty()) out.push_back(item);
      at = comma + 1;
    }
    return out;
  };
  o.enabled_protocols = split(v("ssl.enabled.protocols"));
  o.cipher_suites = split(v("ssl.cipher.suites"));
  const std::string auth = v("ssl.client.auth");
  o.client_auth = auth == "required"    ? net::tls::ClientAuth::required
                  : auth == "requested" ? net::tls::ClientAuth::requested
                                        : net::tls::ClientAuth::none;
  // A client presents the listener's keystore, if any, when its peer asks (mutual TLS).
  if (server && o.keystore_location.empty() && o.keystore_key.empty())
    return std::unexpected("ssl.keystore.location: must be set for an SSL or SASL_SSL listener");
  return o;
}

std::expected<void, std::string> read_tls(const Config& c, const Endpoint& e, ListenerSecurity& s) {
  auto o = tls_options(c, e.name);
  if (!o) return std::unexpected("listener " + e.name + ": " + o.error());
  std::string error;
  s.tls_context = net::tls::make_context(*o, net::tls::Role::server, &error);
  if (!s.tls_context) return std::unexpected("listener " + e.name + ": " + error);
  return {};
}

std::expected<void, std::string> read_sasl(const Config& c, const Endpoint& e,
                                           ListenerSecurity& s) {
  const std::string key = "listener.name." + lower(e.name) + ".sasl.enabled.mechanisms";
  std::vector<std::string> names =
      c.is_set(key) ? c.get_list(key) : c.get_list("sasl.enabled.mechanisms");
  for (const auto& n : names) {
    auto m = net::sasl::parse_mechanism(n);
    if (!m)
      return std::unexpected("sasl.enabled.mechanisms: " + n + " is not served (listener " +
                             e.name + "): samsa serves PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512");
    s.mechanisms.push_back(*m);
  }
  if (s.mechanisms.empty())
    return std::unexpected("sasl.enabled.mechanisms: empty for SASL listener " + e.name);
  if (s.serves(net::sasl::Mechanism::plain)) {
    std::string jaas = c.get_string("listener.name." + lower(e.name) + ".plain.sasl.jaas.config");
    if (jaas.empty()) jaas = listener_value(c, e.name, "sasl.jaas.config");
    auto users = std::make_shared<PlainUsers>();
    if (!jaas.empty()) {
      std::string error;
      auto parsed = net::sasl::parse_plain_jaas(jaas, &error);
      if (!error.empty())
        return std::unexpected("listener.name." + lower(e.name) +
                               ".plain.sasl.jaas.config: " + error);
      for (auto& [u, p] : parsed.users)
        users->emplace(u, p);
    }
    s.plain_users = std::move(users);
  }
  const std::string reauth = "listener.name." + lower(e.name) + ".connections.max.reauth.ms";
  s.reauth_ms =
      c.get_int(c.is_set(reauth) ? std::string_view(reauth) : "connections.max.reauth.ms");
  s.max_receive_bytes = static_cast<std::int32_t>(c.get_int("sasl.server.max.receive.size"));
  return {};
}

// A login module's username and password (the broker's own credentials for a SASL listener it
// connects to).
std::expected<std::pair<std::string, std::string>, std::string> own_credentials(
    const Config& c, std::string_view listener, net::sasl::Mechanism m) {
  std::string mech = lower(net::sasl::mechanism_name(m));
  std::string key = "listener.name." + lower(listener) + "." + mech + ".sasl.jaas.config";
  std::string jaas = c.get_string(key);
  if (jaas.empty()) {
    key = "sasl.jaas.config";
    jaas = listener_value(c, listener, key);
  }
  if (jaas.empty())
    return std::unexpected("listener.name." + lower(listener) + "." + mech +
                           ".sasl.jaas.config: must give this node's username and password for "
                           "the SASL listener it connects to");
  std::string error;
  auto entry = net::sasl::parse_jaas(jaas, &error);
  if (!error.empty()) return std::unexpected(key + ": " + error);
  auto u = entry.options.find("username");
  auto p = entry.options.find("password");
  if (u == entry.options.end() || p == entry.options.end())
    return std::unexpected(key + ": needs username and password (this node's own login)");
  return std::make_pair(u->second, p->second);
}

}  // namespace

std::expected<std::shared_ptr<const net::ClientSecurity>, std::string> read_client_security(
    const Config& c, std::string_view listener, bool controller, std::string_view mechanism_key) {
  auto proto = protocol_of(c, listener, controller);
  if (!proto) return std::unexpected(proto.error());
  auto out = std::make_shared<net::ClientSecurity>();
  if (*proto == SecurityProtocol::ssl || *proto == SecurityProtocol::sasl_ssl) {
    auto o = tls_options(c, listener, false);
    if (!o) return std::unexpected("listener " + std::string(listener) + ": " + o.error());
    std::string error;
    out->tls = net::tls::make_context(*o, net::tls::Role::client, &error);
    if (!out->tls)
      return std::unexpected("listener " + std::string(listener) + " (as a client): " + error);
  }
  if (*proto == SecurityProtocol::sasl_plaintext || *proto == SecurityProtocol::sasl_ssl) {
    const std::string name = c.get_string(mechanism_key);
    auto m = net::sasl::parse_mechanism(name);
    if (!m)
      return std::unexpected(std::string(mechanism_key) + ": " + name +
                             " is not served: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512");
    auto creds = own_credentials(c, listener, *m);
    if (!creds) return std::unexpected(creds.error());
    out->mechanism = *m;
    out->user = creds->first;
    out->password = creds->second;
  }
  if (!out->tls && !out->mechanism) return nullptr;
  return std::shared_ptr<const net::ClientSecurity>(std::move(out));
}

const char* security_protocol_name(SecurityProtocol p) {
  switch (p) {
    case SecurityProtocol::plaintext:
      return "PLAINTEXT";
    case SecurityProtocol::ssl:
      return "SSL";
    case SecurityProtocol::sasl_plaintext:
      return "SASL_PLAINTEXT";
    case SecurityProtocol::sasl_ssl:
      return "SASL_SSL";
  }
  return "?";
}

std::optional<SecurityProtocol> parse_security_protocol(std::string_view s) {
  for (auto p : {SecurityProtocol::plaintext, SecurityProtocol::ssl,
                 SecurityProtocol::sasl_plaintext, SecurityProtocol::sasl_ssl})
    if (s == security_protocol_name(p)) return p;
  return std::nullopt;
}

std::string listener_value(const Config& c, std::string_view listener, std::string_view key) {
  std::string own = "listener.name." + lower(listener) + "." + std::string(key);
  return c.is_set(own) ? c.get_string(own) : c.get_string(key);
}

std::expected<std::vector<ListenerSecurity>, std::string> read_listener_security(
    const Config& c, std::vector<Endpoint>& endpoints) {
  if (auto r = assign_protocols(c, endpoints); !r) return std::unexpected(r.error());
  std::vector<ListenerSecurity> out;
  for (const auto& e : endpoints) {
    ListenerSecurity s;
    s.protocol = e.protocol;
    std::string error;
    auto mapper = net::tls::PrincipalMapper::parse(
        listener_value(c, e.name, "ssl.principal.mapping.rules"), &error);
    if (!mapper.ok())
      return std::unexpected("ssl.principal.mapping.rules (listener " + e.name + "): " + error);
    s.principal_mapper = std::make_shared<const net::tls::PrincipalMapper>(std::move(mapper));
    s.handshake_timeout_ms = c.get_int("samsa.ssl.handshake.timeout.ms");
    s.max_pending_handshakes =
        static_cast<std::uint32_t>(c.get_int("samsa.ssl.max.pending.handshakes"));
    if (s.tls())
      if (auto r = read_tls(c, e, s); !r) return std::unexpected(r.error());
    if (s.sasl())
      if (auto r = read_sasl(c, e, s); !r) return std::unexpected(r.error());
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace samsa::daemon
