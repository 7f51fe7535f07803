// Kafka's SASL mechanisms PLAIN (RFC 4616), SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802,
// RFC 7677, Kafka's KIP-84): the server side a listener runs per connection, the client side
// the broker uses for its own inter-broker connections, the credential arithmetic behind
// AlterUserScramCredentials, base64, and the JAAS option strings Kafka configures them with.
//
// Everything is plain code called on the connection's reactor thread: no threads, no I/O, no
// exceptions. Errors are values. The crypto is OpenSSL 3's libcrypto.
//
// This library is also compiled with clang 14 against libstdc++ 12 (the fuzz build), which
// has no std::expected: results are plain structs and optionals.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace samsa::net::sasl {

enum class Mechanism { plain, scram_sha_256, scram_sha_512 };

// "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512".
const char* mechanism_name(Mechanism m);
// The exact (case-sensitive) name a SaslHandshake request carries; nullopt for any other.
std::optional<Mechanism> parse_mechanism(std::string_view name);
bool is_scram(Mechanism m);

// A client message (one SaslAuthenticate auth_bytes) longer than this fails the exchange
// without being parsed. PLAIN needs at most 3 * 255 + 2 bytes (RFC 4616), SCRAM's messages a
// few hundred.
inline constexpr std::size_t kMaxClientMessageBytes = 4096;

// Kafka's bounds on a SCRAM credential's iteration count: the server refuses to log in with
// fewer than kMinScramIterations (ScramMechanism.minIterations), AlterUserScramCredentials
// refuses more than kMaxScramIterations, and ScramClient refuses a server asking for a count
// outside both.
inline constexpr std::int32_t kMinScramIterations = 4096;
inline constexpr std::int32_t kMaxScramIterations = 16384;

// ---- Base64 (RFC 4648 section 4, with padding) ----

std::string base64_encode(std::string_view bytes);
// Strict: only the standard alphabet, length a multiple of 4, '=' only as the final one or
// two characters, and the unused bits of the last group zero (so every encoding is the one
// base64_encode would give). Anything else is nullopt. The empty string decodes to "".
std::optional<std::string> base64_decode(std::string_view text);

// ---- SCRAM credentials ----

// What the broker stores per user and mechanism (RFC 5802 section 3). The strings hold raw
// bytes; stored_key and server_key are one hash long (32 or 64 bytes).
struct ScramCredential {
  Mechanism mechanism = Mechanism::scram_sha_256;
  std::string salt;
  std::string stored_key;
  std::string server_key;
  std::int32_t iterations = 0;
};

// Derives a credential from a password: SaltedPassword = Hi(password, salt, iterations),
// then ClientKey, StoredKey and ServerKey. An empty salt is replaced with 32 random bytes.
// The password is used as given (Kafka does no SASLprep). iterations should be within
// [kMinScramIterations, kMaxScramIterations] (the broker checks that before calling); a
// count below 1 or above kMaxScramIterations, or PLAIN, gives a credential with empty keys,
// which never authenticates. Costs `iterations` HMACs: milliseconds on the calling thread.
ScramCredential make_scram_credential(Mechanism m, std::string_view password, std::string_view salt,
                                      std::int32_t iterations);
// The same from what an AlterUserScramCredentials upsertion carries: the salt and
// SaltedPassword the client computed. A salted_password that is not one hash long, an empty
// salt or a count outside [1, kMaxScramIterations] gives a credential with empty keys.
ScramCredential scram_credential_from_salted_password(Mechanism m, std::string_view salt,
                                                      std::string_view salted_password,
                                                      std::int32_t iterations);

// ---- The server side ----

// How the mechanisms find users. Both are called synchronously from Authenticator::step on
// the caller's thread; either may be empty (then every user is unknown to that mechanism).
struct Lookup {
  // PLAIN: the user's password, or null when the user is unknown. The pointer is read before
  // step() returns and not kept.
  std::function<const std::string*(std::string_view user)> plain_password;
  // SCRAM: the user's credential for the mechanism, or nullopt when there is none.
  std::function<std::optional<ScramCredential>(std::string_view user, Mechanism m)> scram;
};

// One step of an exchange: the answer to one client message.
struct Step {
  enum Status { more, done, failed };
  Status status = failed;
  // more and done: the bytes for SaslAuthenticate's auth_bytes (PLAIN's done: empty).
  std::string server_message;
  // failed: the text Kafka puts in SaslAuthenticate's error_message (code
  // SASL_AUTHENTICATION_FAILED) for this failure during a first authentication.
  std::string error;
  // failed: when set, error is generic_failure_message(mechanism, false), Kafka's answer to a
  // mechanism's plain SaslException, whose reason stays off the wire; a caller that is
  // re-authenticating (KIP-368) sends generic_failure_message(mechanism, true) instead.
  bool generic = false;
  // failed: the mechanism's own reason, for the broker's log only: it can name the user.
  std::string detail;
  // done: the authenticated user name (the caller builds "User:<name>").
  std::string principal;
};

// Kafka's "Authentication failed during authentication due to invalid credentials with SASL
// mechanism <name>" ("re-authentication" when reauthentication).
std::string generic_failure_message(Mechanism m, bool reauthentication);

// One connection's exchange. step() takes each client message in turn. After done or failed
// every further call fails ("Unexpected challenge in Sasl server state COMPLETE" / FAILED).
// A message longer than kMaxClientMessageBytes fails the exchange.
//
// PLAIN: one step, "authzid NUL authcid NUL passwd". Kafka's messages, sent verbatim:
//   "Invalid SASL/PLAIN response: expected 3 tokens, got <n>",
//   "Authentication failed: username not specified" / "... password not specified",
//   "Authentication failed: Invalid username or password" (unknown user or wrong password;
//   the password comparison is constant-time over hashes of both),
//   "Authentication failed: Client requested an authorization id that is different from
//   username".
// SCRAM: client-first -> server-first (more), client-final -> server-final (done). Every
// failure is Kafka's generic message (Step::generic) except the authorization id one above.
// Unlike Kafka, which fails an unknown user at the client-first message, an unknown user gets
// a server-first message with a salt derived from the name under a per-process key and fails
// at the client-final message, exactly as a wrong password does (RFC 5802 section 5.1), so
// the exchange does not tell which users exist. Delegation tokens (tokenauth=true) are not
// supported and fail at the first message.
class Authenticator {
 public:
  virtual ~Authenticator();
  virtual Step step(std::span<const std::uint8_t> client_message) = 0;
  virtual Mechanism mechanism() const = 0;
};

struct AuthenticatorOptions {
  // SCRAM's server nonce. Empty: 24 random bytes from RAND_bytes, base64-encoded. Tests set
  // it to reproduce RFC 7677's example; it must return printable ASCII without ','.
  std::function<std::string()> server_nonce;
};

std::unique_ptr<Authenticator> make_authenticator(Mechanism m, Lookup lookup,
                                                  AuthenticatorOptions options = {});

// ---- The client side (the broker's own connections, and tests) ----

// "NUL user NUL password" (no authorization id), as Kafka's clients send it.
std::string plain_client_message(std::string_view user, std::string_view password);

// One SCRAM exchange as a client: first() -> send; final(server-first) -> send; then
// verify(server-final). The password is used as given (no SASLprep, as Kafka). Computing the
// proof costs the server's iteration count in HMACs on the calling thread.
class ScramClient {
 public:
  // client_nonce: empty for 24 random bytes, base64-encoded; tests pass a fixed one.
  ScramClient(Mechanism m, std::string user, std::string password, std::string client_nonce = {});
  ~ScramClient();
  ScramClient(const ScramClient&) = delete;
  ScramClient& operator=(const ScramClient&) = delete;

  // The client-first message: "n,,n=<user, escaped>,r=<nonce>".
  std::string first();
  // The client-final message for the server-first message, or nullopt when that is
  // malformed, does not extend the client's nonce, has an empty salt or an iteration count
  // outside [kMinScramIterations, kMaxScramIterations], or first() was not called (error()).
  std::optional<std::string> final(std::string_view server_first);
  // Whether the server-final message proves the server knew the credential ("v=..."); false
  // for "e=..." or anything else (error()).
  bool verify(std::string_view server_final);
  const std::string& error() const { return error_; }

 private:
  Mechanism mechanism_;
  std::string user_;
  std::string password_;
  std::string nonce_;
  std::string client_first_bare_;
  std::string expected_server_signature_;
  std::string error_;
  enum class State { start, sent_first, sent_final, finished };
  State state_ = State::start;
};

// ---- JAAS configuration (sasl.jaas.config, listener.name.<l>.<mech>.sasl.jaas.config) ----

inline constexpr std::string_view kPlainLoginModule =
    "org.apache.kafka.common.security.plain.PlainLoginModule";
inline constexpr std::string_view kScramLoginModule =
    "org.apache.kafka.common.security.scram.ScramLoginModule";

// One login module entry: `<class> <flag> (<name>=<value>)*;`.
struct JaasEntry {
  std::string login_module;
  std::string control_flag;  // upper case: REQUIRED, REQUISITE, SUFFICIENT or OPTIONAL
  std::map<std::string, std::string, std::less<>> options;
};

// Parses a config value that must hold exactly one login module, with Kafka's JaasConfig
// tokenizer rules: whitespace (bytes 0..32, newlines included) separates tokens; values are
// words or quoted with " or ' (backslash escapes inside quotes as Java's StreamTokenizer:
// \" \' \\ \n \t \r \b \f \a \v and octal); '/' outside quotes starts a comment ("//" and
// "/" to the end of the line, "/* */"); a later duplicate option replaces an earlier one.
// On failure returns an empty entry and sets *error (when error is non-null) to Kafka's
// message, e.g. "JAAS config entry not terminated by semi-colon"; on success clears *error.
JaasEntry parse_jaas(std::string_view jaas, std::string* error);

// PLAIN's users from a PlainLoginModule entry: user_<name>="<password>" options, plus the
// broker's own client credentials (username, password; empty when absent).
struct PlainUsers {
  std::map<std::string, std::string, std::less<>> users;
  std::string username;
  std::string password;
};

// parse_jaas plus: the login module must be kPlainLoginModule. Errors as parse_jaas.
PlainUsers parse_plain_jaas(std::string_view jaas, std::string* error);

}  // namespace samsa::net::sasl
