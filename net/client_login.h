// net::ClientLogin — the client side of a SASL login on an outbound connection (a broker's own
// connections to a SASL inter-broker or controller listener): SaslHandshake v1, then
// SaslAuthenticate v2 rounds until the mechanism is done. ClientMachine runs it between the
// connection (and its TLS handshake) and on_connected.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "net/buffer.h"
#include "net/client_connection.h"

namespace samsa::net {

class ClientLogin {
 public:
  enum class Result { more, done, failed };
  explicit ClientLogin(const ClientSecurity& s);
  ~ClientLogin();
  // The first request (SaslHandshake), a whole frame with its size prefix.
  Buffer start();
  // The answer to the last request: with more, *next is the next request; with failed,
  // *error says why (the broker's error message when it gave one).
  Result on_response(Buffer& frame, Buffer* next, std::string* error);

 private:
  Buffer authenticate(const std::string& bytes);
  const ClientSecurity& s_;
  std::unique_ptr<sasl::ScramClient> scram_;
  int step_ = 0;  // 0: handshake sent, 1..: authenticate rounds
  std::int32_t corr_ = 0;
};

}  // namespace samsa::net
