// net/sasl's internals shared by its .cc files: libcrypto wrappers and SCRAM's text rules.
// Not part of the public API (net/sasl/sasl.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "net/sasl/sasl.h"

namespace samsa::net::sasl::detail {

// ---- crypto.cc: libcrypto, all of it. Mechanism selects SHA-256 or SHA-512. ----

// Bytes in the mechanism's hash (32 or 64); 0 for PLAIN.
std::size_t hash_size(Mechanism m);
// H(data), HMAC(key, data), Hi(password, salt, iterations) (RFC 5802 section 2.2). Each
// returns "" when libcrypto fails or the arguments are out of its range (PLAIN included).
std::string hash(Mechanism m, std::string_view data);
std::string hmac(Mechanism m, std::string_view key, std::string_view data);
std::string pbkdf2(Mechanism m, std::string_view password, std::string_view salt, int iterations);
// n bytes from RAND_bytes; "" when the generator fails.
std::string random_bytes(std::size_t n);
// base64 of 24 random bytes (32 printable characters, no ','): a SCRAM nonce.
std::string random_nonce();
// a XOR b for equal sizes; "" otherwise.
std::string xor_bytes(std::string_view a, std::string_view b);
// Equal sizes and equal bytes, in time that depends on the size only (CRYPTO_memcmp).
bool equal_constant_time(std::string_view a, std::string_view b);
// Overwrites the bytes (OPENSSL_cleanse) and empties the string.
void cleanse(std::string& s);

// ---- scram_text.cc: RFC 5802's message syntax ----

// Well-formed UTF-8 (no overlong forms, surrogates or code points above U+10FFFF).
bool valid_utf8(std::string_view s);
// saslname escaping: ',' -> "=2C", '=' -> "=3D".
std::string escape_saslname(std::string_view name);
// The reverse; nullopt for an empty name, a NUL, a raw ',', an '=' not starting "=2C" or
// "=3D", or a result that is not UTF-8.
std::optional<std::string> unescape_saslname(std::string_view saslname);
// A nonce: one or more of 0x21..0x7E except ','.
bool valid_nonce(std::string_view nonce);
// Splits on every ','; "" gives one empty field.
std::vector<std::string_view> split_attributes(std::string_view message);
// One "k=value" attribute with a single-letter name k; nullopt otherwise. value excludes
// the "k=".
std::optional<std::string_view> attribute_value(std::string_view field, char name);
// An extension "name=value" (Kafka: name is 1+ ASCII letters, value 1+ bytes 0x01..0x7F).
struct Extension {
  std::string_view name;
  std::string_view value;
};
std::optional<Extension> parse_extension(std::string_view field);
// A decimal iteration count without sign or leading '+', within int32; nullopt otherwise.
std::optional<std::int32_t> parse_iterations(std::string_view digits);

// ---- authenticator.cc: Step values shared by the mechanisms ----

Step step_more(std::string server_message);
Step step_done(std::string server_message, std::string principal);
// A failure whose text Kafka sends as it is (a SaslAuthenticationException).
Step step_failed(std::string error, std::string detail);
// A failure Kafka answers with generic_failure_message (a plain SaslException); detail is
// the mechanism's reason, for the log.
Step step_failed_generic(Mechanism m, std::string detail);
// A message after the exchange ended: Kafka's IllegalSaslStateException text.
Step step_after_end(bool completed);
// A message longer than kMaxClientMessageBytes.
Step step_oversized(Mechanism m, std::size_t size);

// plain.cc and scram_server.cc
std::unique_ptr<Authenticator> make_plain_authenticator(Lookup lookup);
std::unique_ptr<Authenticator> make_scram_authenticator(Mechanism m, Lookup lookup,
                                                        AuthenticatorOptions options);

}  // namespace samsa::net::sasl::detail
