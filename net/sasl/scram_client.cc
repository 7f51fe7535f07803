// The client side of SCRAM (RFC 5802 section 3), for the broker's own connections and tests.
#include <string>
#include <utility>

#include "net/sasl/internal.h"
#include "net/sasl/sasl.h"

namespace samsa::net::sasl {

namespace {

// What the server-first message says: r=, s=, i= (RFC 5802 section 7).
struct ServerFirst {
  std::string_view nonce;
  std::string salt;
  std::int32_t iterations = 0;
};

std::optional<ServerFirst> parse_server_first(std::string_view text, std::string& error) {
  const auto fields = detail::split_attributes(text);
  if (detail::attribute_value(fields[0], 'm')) {
    error = "server-first message has a mandatory extension";
    return std::nullopt;
  }
  if (fields.size() < 3) {
    error = "server-first message is malformed";
    return std::nullopt;
  }
  const auto nonce = detail::attribute_value(fields[0], 'r');
  const auto salt_b64 = detail::attribute_value(fields[1], 's');
  const auto count = detail::attribute_value(fields[2], 'i');
  const auto salt = salt_b64 ? base64_decode(*salt_b64) : std::nullopt;
  const auto iterations = count ? detail::parse_iterations(*count) : std::nullopt;
  if (!nonce || !detail::valid_nonce(*nonce) || !salt || salt->empty() || !iterations) {
    error = "server-first message is malformed";
    return std::nullopt;
  }
  for (std::size_t i = 3; i < fields.size(); ++i) {
    if (!detail::parse_extension(fields[i])) {
      error = "server-first message is malformed";
      return std::nullopt;
    }
  }
  return ServerFirst{*nonce, std::move(*salt), *iterations};
}

}  // namespace

ScramClient::ScramClient(Mechanism m, std::string user, std::string password,
                         std::string client_nonce)
    : mechanism_(m),
      user_(std::move(user)),
      password_(std::move(password)),
      nonce_(std::move(client_nonce)) {}

ScramClient::~ScramClient() {
  detail::cleanse(password_);
  detail::cleanse(expected_server_signature_);
}

std::string ScramClient::first() {
  if (nonce_.empty()) nonce_ = detail::random_nonce();
  client_first_bare_ = "n=" + detail::escape_saslname(user_) + ",r=" + nonce_;
  state_ = State::sent_first;
  return "n,," + client_first_bare_;
}

std::optional<std::string> ScramClient::final(std::string_view server_first) {
  if (state_ != State::sent_first) {
    error_ = "final() without first()";
    return std::nullopt;
  }
  state_ = State::finished;  // one attempt: a failure here ends the exchange
  if (!is_scram(mechanism_)) {
    error_ = "not a SCRAM mechanism";
    return std::nullopt;
  }
  const auto sf = parse_server_first(server_first, error_);
  if (!sf) return std::nullopt;
  if (sf->nonce.size() <= nonce_.size() || sf->nonce.substr(0, nonce_.size()) != nonce_) {
    error_ = "server nonce does not extend the client nonce";
    return std::nullopt;
  }
  if (sf->iterations < kMinScramIterations || sf->iterations > kMaxScramIterations) {
    error_ = "server asks for " + std::to_string(sf->iterations) + " iterations, outside [" +
             std::to_string(kMinScramIterations) + ", " + std::to_string(kMaxScramIterations) + "]";
    return std::nullopt;
  }
  std::string salted = detail::pbkdf2(mechanism_, password_, sf->salt, sf->iterations);
  std::string client_key = detail::hmac(mechanism_, salted, "Client Key");
  std::string server_key = detail::hmac(mechanism_, salted, "Server Key");
  const std::string stored_key = detail::hash(mechanism_, client_key);
  const std::string without_proof = "c=biws,r=" + std::string(sf->nonce);
  const std::string auth_message =
      client_first_bare_ + "," + std::string(server_first) + "," + without_proof;
  std::string signature = detail::hmac(mechanism_, stored_key, auth_message);
  const std::string proof = detail::xor_bytes(client_key, signature);
  expected_server_signature_ = detail::hmac(mechanism_, server_key, auth_message);
  const bool ok = !proof.empty() && !expected_server_signature_.empty();
  detail::cleanse(salted);
  detail::cleanse(client_key);
  detail::cleanse(server_key);
  detail::cleanse(signature);
  if (!ok) {
    error_ = "libcrypto failed";
    return std::nullopt;
  }
  state_ = State::sent_final;
  return without_proof + ",p=" + base64_encode(proof);
}

bool ScramClient::verify(std::string_view server_final) {
  if (state_ != State::sent_final) {
    error_ = "verify() without a successful final()";
    return false;
  }
  state_ = State::finished;
  const auto fields = detail::split_attributes(server_final);
  if (const auto e = detail::attribute_value(fields[0], 'e')) {
    error_ = "server error: " + std::string(*e);
    return false;
  }
  const auto v = detail::attribute_value(fields[0], 'v');
  const auto signature = v ? base64_decode(*v) : std::nullopt;
  const bool ok = signature && detail::equal_constant_time(*signature, expected_server_signature_);
  detail::cleanse(expected_server_signature_);
  if (!ok) error_ = "server signature does not match";
  return ok;
}

}  // namespace samsa::net::sasl
