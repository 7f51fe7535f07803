// SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's ScramSaslServer runs them:
// client-first -> server-first, client-final -> server-final. No channel binding.
#include <string>
#include <utility>

#include "net/sasl/internal.h"
#include "net/sasl/sasl.h"

namespace samsa::net::sasl {

namespace detail {

namespace {

constexpr const char* kInvalidUser = "Authentication failed: Invalid user credentials";
constexpr const char* kTokensUnsupported =
    "Token Authentication failed: delegation tokens are not supported";
constexpr const char* kAuthzidMismatch =
    "Authentication failed: Client requested an authorization id that is different from "
    "username";

// The key behind the salts made up for unknown users: random per process, so the salt of a
// name is stable while the process runs and says nothing about other brokers.
const std::string& unknown_user_key() {
  static const std::string key = random_bytes(32);
  return key;
}

bool usable(const ScramCredential& c, Mechanism m) {
  const std::size_t n = hash_size(m);
  return c.mechanism == m && !c.salt.empty() && c.stored_key.size() == n &&
         c.server_key.size() == n && c.iterations > 0;
}

// What the client-first message says (RFC 5802 section 7, Kafka's ClientFirstMessage).
struct ClientFirst {
  std::string gs2_header;  // "n,," / "y,," / "n,a=...,"
  std::string bare;        // client-first-message-bare, as received
  std::string authzid;     // unescaped; empty when absent
  std::string user;        // unescaped
  std::string nonce;
  bool token_auth = false;
  std::string error;  // non-empty: malformed (a SaslException reason)
};

// The gs2 header: cbind-flag "," [authzid] ",". Returns its length, 0 when malformed.
std::size_t parse_gs2_header(std::string_view text, ClientFirst& out) {
  const std::size_t c1 = text.find(',');
  if (c1 == std::string_view::npos) return 0;
  const std::string_view flag = text.substr(0, c1);
  if (flag.substr(0, 2) == "p=") {
    out.error = "Channel binding is not supported";
    return 0;
  }
  if (flag != "n" && flag != "y") return 0;
  const std::size_t c2 = text.find(',', c1 + 1);
  if (c2 == std::string_view::npos) return 0;
  const std::string_view authz = text.substr(c1 + 1, c2 - c1 - 1);
  if (!authz.empty()) {
    const auto value = attribute_value(authz, 'a');
    const auto name = value ? unescape_saslname(*value) : std::nullopt;
    if (!name) return 0;
    out.authzid = *name;
  }
  return c2 + 1;
}

ClientFirst parse_client_first(std::string_view text) {
  ClientFirst out;
  const std::size_t header = parse_gs2_header(text, out);
  if (header == 0) {
    if (out.error.empty()) out.error = "Invalid SCRAM client first message format: gs2 header";
    return out;
  }
  out.gs2_header = std::string(text.substr(0, header));
  out.bare = std::string(text.substr(header));
  const auto fields = split_attributes(out.bare);
  if (attribute_value(fields[0], 'm')) {
    out.error = "Mandatory SCRAM extensions are not supported";
    return out;
  }
  const auto name = attribute_value(fields[0], 'n');
  const auto user = name ? unescape_saslname(*name) : std::nullopt;
  const auto nonce = fields.size() >= 2 ? attribute_value(fields[1], 'r') : std::nullopt;
  if (!user || !nonce || !valid_nonce(*nonce)) {
    out.error = "Invalid SCRAM client first message format: user name or nonce";
    return out;
  }
  out.user = *user;
  out.nonce = std::string(*nonce);
  for (std::size_t i = 2; i < fields.size(); ++i) {
    const auto ext = parse_extension(fields[i]);
    if (!ext) {
      out.error = "Invalid SCRAM client first message format: extensions";
      return out;
    }
    // Kafka's ScramLoginModule.TOKEN_AUTH_CONFIG, read with Boolean.parseBoolean.
    if (ext->name == "tokenauth" && ext->value.size() == 4) {
      std::string v(ext->value);
      for (char& c : v)
        c = static_cast<char>(c | 0x20);
      out.token_auth = v == "true";
    }
  }
  return out;
}

class ScramAuthenticator final : public Authenticator {
 public:
  ScramAuthenticator(Mechanism m, Lookup lookup, AuthenticatorOptions options)
      : mechanism_(m), lookup_(std::move(lookup)), options_(std::move(options)) {}

  ~ScramAuthenticator() override { clear(); }

  Step step(std::span<const std::uint8_t> client_message) override {
    if (state_ == State::complete || state_ == State::failed)
      return step_after_end(state_ == State::complete);
    Step s;
    if (client_message.size() > kMaxClientMessageBytes) {
      s = step_oversized(mechanism_, client_message.size());
    } else {
      const std::string_view text(reinterpret_cast<const char*>(client_message.data()),
                                  client_message.size());
      s = state_ == State::client_first ? on_client_first(text) : on_client_final(text);
    }
    if (s.status == Step::more) {
      state_ = State::client_final;
    } else {
      state_ = s.status == Step::done ? State::complete : State::failed;
      clear();
    }
    return s;
  }

  Mechanism mechanism() const override { return mechanism_; }

 private:
  enum class State { client_first, client_final, complete, failed };

  Step on_client_first(std::string_view text) {
    ClientFirst first = parse_client_first(text);
    if (!first.error.empty()) return step_failed_generic(mechanism_, std::move(first.error));
    if (first.token_auth) return step_failed_generic(mechanism_, kTokensUnsupported);
    // Before the lookup, so that the answer is the same whether the user exists or not.
    if (!first.authzid.empty() && first.authzid != first.user)
      return step_failed(kAuthzidMismatch, kAuthzidMismatch);
    std::optional<ScramCredential> found;
    if (lookup_.scram) found = lookup_.scram(first.user, mechanism_);
    if (found && usable(*found, mechanism_)) {
      credential_ = std::move(*found);
    } else {
      credential_ = stand_in_credential(first.user);
      unknown_user_ = true;
    }
    if (credential_.iterations < kMinScramIterations) {
      return step_failed_generic(
          mechanism_, "Iterations " + std::to_string(credential_.iterations) +
                          " is less than the minimum " + std::to_string(kMinScramIterations) +
                          " for " + mechanism_name(mechanism_));
    }
    const std::string server_nonce =
        options_.server_nonce ? options_.server_nonce() : random_nonce();
    if (!valid_nonce(server_nonce))
      return step_failed_generic(mechanism_, "No valid server nonce could be made");
    nonce_ = first.nonce + server_nonce;
    server_first_ = "r=" + nonce_ + ",s=" + base64_encode(credential_.salt) +
                    ",i=" + std::to_string(credential_.iterations);
    gs2_header_ = std::move(first.gs2_header);
    client_first_bare_ = std::move(first.bare);
    user_ = std::move(first.user);
    return step_more(server_first_);
  }

  // RFC 5802 section 5.1: an unknown user gets a salt and count like a real one and fails at
  // the proof. The keys are random, so no proof matches them.
  ScramCredential stand_in_credential(std::string_view user) const {
    ScramCredential c;
    c.mechanism = mechanism_;
    std::string input(mechanism_name(mechanism_));
    input += '\0';
    input += user;
    c.salt = hmac(Mechanism::scram_sha_256, unknown_user_key(), input);
    c.stored_key = random_bytes(hash_size(mechanism_));
    c.server_key = random_bytes(hash_size(mechanism_));
    c.iterations = kMinScramIterations;
    if (c.salt.empty()) c.salt = random_bytes(32);
    return c;
  }

  Step on_client_final(std::string_view text) {
    // channel-binding "," nonce ["," extensions] "," proof: the proof is the last attribute.
    const std::size_t last = text.rfind(',');
    const auto proof_b64 =
        last == std::string_view::npos ? std::nullopt : attribute_value(text.substr(last + 1), 'p');
    if (!proof_b64) return final_format_error("proof");
    const std::string_view without_proof = text.substr(0, last);
    const auto fields = split_attributes(without_proof);
    const auto binding = attribute_value(fields[0], 'c');
    const auto nonce = fields.size() >= 2 ? attribute_value(fields[1], 'r') : std::nullopt;
    if (!binding || !nonce) return final_format_error("channel binding or nonce");
    for (std::size_t i = 2; i < fields.size(); ++i)
      if (!parse_extension(fields[i])) return final_format_error("extensions");
    const auto proof = base64_decode(*proof_b64);
    if (!proof) return final_format_error("proof is not base64");
    if (*binding != base64_encode(gs2_header_))
      return step_failed_generic(mechanism_, "Invalid channel binding in the final client message");
    // Kafka checks only that the nonce ends with the one it sent, and librdkafka (2.0 at
    // least) relies on that: it sends its own nonce again in front of the combined one. The
    // proof covers the nonce as sent, so nothing is weakened.
    if (!nonce->ends_with(nonce_))
      return step_failed_generic(mechanism_, "Invalid client nonce in the final client message.");
    return verify_proof(without_proof, *proof);
  }

  Step final_format_error(const char* what) const {
    return step_failed_generic(mechanism_,
                               std::string("Invalid SCRAM client final message format: ") + what);
  }

  Step verify_proof(std::string_view without_proof, std::string_view proof) {
    std::string auth_message = client_first_bare_;
    auth_message += ',';
    auth_message += server_first_;
    auth_message += ',';
    auth_message += without_proof;
    std::string signature = hmac(mechanism_, credential_.stored_key, auth_message);
    std::string client_key = xor_bytes(proof, signature);
    std::string computed = hash(mechanism_, client_key);
    const bool match = !computed.empty() && equal_constant_time(computed, credential_.stored_key);
    cleanse(signature);
    cleanse(client_key);
    cleanse(computed);
    if (!match || unknown_user_)
      return step_failed_generic(mechanism_,
                                 unknown_user_ ? kInvalidUser : "Invalid client credentials");
    const std::string server_signature = hmac(mechanism_, credential_.server_key, auth_message);
    if (server_signature.empty())
      return step_failed_generic(mechanism_, "Sasl client verification failed");
    return step_done("v=" + base64_encode(server_signature), user_);
  }

  // Kafka's clearCredentials: nothing of the exchange outlives it.
  void clear() {
    cleanse(credential_.stored_key);
    cleanse(credential_.server_key);
    credential_.salt.clear();
    client_first_bare_.clear();
    server_first_.clear();
    nonce_.clear();
  }

  Mechanism mechanism_;
  Lookup lookup_;
  AuthenticatorOptions options_;
  State state_ = State::client_first;
  ScramCredential credential_;
  bool unknown_user_ = false;
  std::string gs2_header_;
  std::string client_first_bare_;
  std::string server_first_;
  std::string nonce_;
  std::string user_;
};

}  // namespace

std::unique_ptr<Authenticator> make_scram_authenticator(Mechanism m, Lookup lookup,
                                                        AuthenticatorOptions options) {
  return std::make_unique<ScramAuthenticator>(m, std::move(lookup), std::move(options));
}

}  // namespace detail

}  // namespace samsa::net::sasl
