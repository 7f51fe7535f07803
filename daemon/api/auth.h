// A connection's authentication: the SASL exchange on SASL listeners (SaslHandshake, then
// SaslAuthenticate until the mechanism is done, again before a KIP-368 session ends) and the
// principal its requests act as. The dispatcher asks auth_gate() before it routes a frame: on a
// SASL listener nothing but ApiVersions and the exchange is served before it succeeds.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "daemon/listener_security.h"
#include "net/sasl/sasl.h"
#include "net/transport.h"

namespace samsa::daemon {

struct ConnectionAuth {
  enum class Stage : std::uint8_t { handshake, authenticate, done };
  Stage stage = Stage::handshake;
  std::optional<net::sasl::Mechanism> mechanism;
  std::unique_ptr<net::sasl::Authenticator> authenticator;
  // "User:<name>"; on an SSL listener from the client certificate ("User:ANONYMOUS" without
  // one); "" on a SASL listener until the exchange succeeds.
  std::string principal;
  std::int64_t session_end_ns = 0;  // connections.max.reauth.ms: 0 for ever
  bool reauthenticating = false;    // a KIP-368 exchange on an authenticated connection
  bool principal_known = false;
};

// The connection's state (made by the dispatcher's on_open on secured listeners), or null.
inline ConnectionAuth* auth_of(net::Connection& c) {
  return static_cast<ConnectionAuth*>(c.user);
}

// The principal requests on this connection act as ("User:ANONYMOUS" on PLAINTEXT listeners).
const std::string& principal_of(net::Connection& c);

// Whether a frame of api `key` and `frame_bytes` may be served now. Returns null if so, else
// why not (the dispatcher logs it and closes the connection, as Kafka does).
const char* auth_gate(const ListenerSecurity& sec, net::Connection& c, std::int16_t key,
                      std::size_t frame_bytes, std::int64_t now_ns);

}  // namespace samsa::daemon
