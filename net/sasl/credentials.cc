// Mechanism names and SCRAM credential derivation (RFC 5802 section 3).
#include "net/sasl/internal.h"
#include "net/sasl/sasl.h"

namespace samsa::net::sasl {

const char* mechanism_name(Mechanism m) {
  switch (m) {
    case Mechanism::plain:
      return "PLAIN";
    case Mechanism::scram_sha_256:
      return "SCRAM-SHA-256";
    case Mechanism::scram_sha_512:
      return "SCRAM-SHA-512";
  }
  return "UNKNOWN";
}

std::optional<Mechanism> parse_mechanism(std::string_view name) {
  for (Mechanism m : {Mechanism::plain, Mechanism::scram_sha_256, Mechanism::scram_sha_512})
    if (name == mechanism_name(m)) return m;
  return std::nullopt;
}

bool is_scram(Mechanism m) {
  return m == Mechanism::scram_sha_256 || m == Mechanism::scram_sha_512;
}

std::string generic_failure_message(Mechanism m, bool reauthentication) {
  std::string out = "Authentication failed during ";
  out += reauthentication ? "re-authentication" : "authentication";
  out += " due to invalid credentials with SASL mechanism ";
  out += mechanism_name(m);
  return out;
}

ScramCredential scram_credential_from_salted_password(Mechanism m, std::string_view salt,
                                                      std::string_view salted_password,
                                                      std::int32_t iterations) {
  ScramCredential c;
  c.mechanism = m;
  c.salt = std::string(salt);
  c.iterations = iterations;
  if (!is_scram(m) || salt.empty() || iterations < 1 || iterations > kMaxScramIterations ||
      salted_password.size() != detail::hash_size(m))
    return c;
  std::string client_key = detail::hmac(m, salted_password, "Client Key");
  std::string stored_key = detail::hash(m, client_key);
  std::string server_key = detail::hmac(m, salted_password, "Server Key");
  detail::cleanse(client_key);
  if (stored_key.empty() || server_key.empty()) return c;
  c.stored_key = std::move(stored_key);
  c.server_key = std::move(server_key);
  return c;
}

ScramCredential make_scram_credential(Mechanism m, std::string_view password, std::string_view salt,
                                      std::int32_t iterations) {
  std::string s = salt.empty() ? detail::random_bytes(32) : std::string(salt);
  if (!is_scram(m) || iterations < 1 || iterations > kMaxScramIterations) {
    ScramCredential c;
    c.mechanism = m;
    c.salt = std::move(s);
    c.iterations = iterations;
    return c;
  }
  std::string salted = detail::pbkdf2(m, password, s, iterations);
  ScramCredential c = scram_credential_from_salted_password(m, s, salted, iterations);
  detail::cleanse(salted);
  return c;
}

}  // namespace samsa::net::sasl
