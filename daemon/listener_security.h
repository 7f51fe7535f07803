// Each listener's security: its protocol (listener.security.protocol.map), the TLS context its
// connections take, the SASL mechanisms it serves and where their users come from. Built with
// the BrokerSettings (at start and on every reload, so a reload picks up new certificate files
// for the next connections); a bad value stops the start, or the reload, naming the key.
#pragma once

#include <cstdint>
#include <expected>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "net/client_connection.h"
#include "net/sasl/sasl.h"
#include "net/tls/tls.h"

namespace samsa::daemon {

class Config;
struct Endpoint;

// Kafka's ids (SecurityProtocol.id), as RegisterBrokerRecord carries them.
enum class SecurityProtocol : std::int16_t {
  plaintext = 0,
  ssl = 1,
  sasl_plaintext = 2,
  sasl_ssl = 3,
};
const char* security_protocol_name(SecurityProtocol p);
std::optional<SecurityProtocol> parse_security_protocol(std::string_view s);

using PlainUsers = std::map<std::string, std::string, std::less<>>;

struct ListenerSecurity {
  SecurityProtocol protocol = SecurityProtocol::plaintext;
  bool tls() const {
    return protocol == SecurityProtocol::ssl || protocol == SecurityProtocol::sasl_ssl;
  }
  bool sasl() const {
    return protocol == SecurityProtocol::sasl_plaintext || protocol == SecurityProtocol::sasl_ssl;
  }
  std::shared_ptr<const net::tls::Context> tls_context;  // tls() only
  std::shared_ptr<const net::tls::PrincipalMapper> principal_mapper;
  std::int64_t handshake_timeout_ms = 10000;
  std::uint32_t max_pending_handshakes = 1024;    // samsa.ssl.max.pending.handshakes
  std::vector<net::sasl::Mechanism> mechanisms;   // sasl() only, in sasl.enabled.mechanisms' order
  std::shared_ptr<const PlainUsers> plain_users;  // PLAIN's, from its JAAS config
  std::int64_t reauth_ms = 0;                     // connections.max.reauth.ms
  std::int32_t max_receive_bytes = 524288;        // sasl.server.max.receive.size
  bool serves(net::sasl::Mechanism m) const {
    for (auto x : mechanisms)
      if (x == m) return true;
    return false;
  }
};

// A listener's value of an ssl.* / sasl.* key: listener.name.<listener lower case>.<key> if set,
// else the key's own value.
std::string listener_value(const Config& c, std::string_view listener, std::string_view key);

// How this node connects to a listener of other nodes (a cluster's inter-broker listener, or
// its controller listener): TLS with the listener's truststore (and keystore, for mutual TLS)
// and, on a SASL listener, a login with `mechanism_key`'s mechanism and the username and
// password of the listener's JAAS config for it. Null for a PLAINTEXT listener.
std::expected<std::shared_ptr<const net::ClientSecurity>, std::string> read_client_security(
    const Config& c, std::string_view listener, bool controller, std::string_view mechanism_key);

// Sets each endpoint's protocol and builds its ListenerSecurity (same order as endpoints).
std::expected<std::vector<ListenerSecurity>, std::string> read_listener_security(
    const Config& c, std::vector<Endpoint>& endpoints);

}  // namespace samsa::daemon
