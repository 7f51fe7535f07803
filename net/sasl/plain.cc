// SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer runs it: one client message,
// "authzid NUL authcid NUL passwd", checked against the configured users.
#include <string>
#include <utility>

#include "net/sasl/internal.h"
#include "net/sasl/sasl.h"

namespace samsa::net::sasl {

namespace detail {

namespace {

constexpr const char* kInvalidCredentials = "Authentication failed: Invalid username or password";
constexpr const char* kAuthzidMismatch =
    "Authentication failed: Client requested an authorization id that is different from "
    "username";

// The message's NUL-separated tokens, counted as Kafka does: at most 4 (so "got 4" for any
// message with three or more NULs).
struct PlainTokens {
  std::size_t count = 0;
  std::string_view authzid;
  std::string_view user;
  std::string_view password;
};

PlainTokens split_tokens(std::string_view text) {
  PlainTokens t;
  std::string_view parts[3];
  std::size_t start = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    const std::size_t nul = text.find('\0', start);
    const std::string_view part =
        text.substr(start, nul == std::string_view::npos ? std::string_view::npos : nul - start);
    if (i < 3) parts[i] = part;
    ++t.count;
    if (nul == std::string_view::npos) break;
    start = nul + 1;
  }
  t.authzid = parts[0];
  t.user = parts[1];
  t.password = parts[2];
  return t;
}

// Whether password is the user's, in time that does not depend on where the two differ or
// on whether the user exists: both sides are hashed to a fixed size and compared with
// CRYPTO_memcmp; an unknown user is compared against a placeholder.
bool password_matches(const Lookup& lookup, std::string_view user, std::string_view password) {
  static const std::string kPlaceholder = "samsa-sasl-plain-unknown-user";
  const std::string* expected = lookup.plain_password ? lookup.plain_password(user) : nullptr;
  std::string got = hash(Mechanism::scram_sha_256, password);
  std::string want = hash(Mechanism::scram_sha_256, expected ? *expected : kPlaceholder);
  const bool same = !got.empty() && equal_constant_time(got, want);
  cleanse(got);
  cleanse(want);
  return same && expected != nullptr;
}

class PlainAuthenticator final : public Authenticator {
 public:
  explicit PlainAuthenticator(Lookup lookup) : lookup_(std::move(lookup)) {}

  Step step(std::span<const std::uint8_t> client_message) override {
    if (state_ != State::waiting) return step_after_end(state_ == State::complete);
    Step s = evaluate(client_message);
    state_ = s.status == Step::done ? State::complete : State::failed;
    return s;
  }

  Mechanism mechanism() const override { return Mechanism::plain; }

 private:
  enum class State { waiting, complete, failed };

  Step evaluate(std::span<const std::uint8_t> message) const {
    if (message.size() > kMaxClientMessageBytes)
      return step_oversized(Mechanism::plain, message.size());
    const std::string_view text(reinterpret_cast<const char*>(message.data()), message.size());
    const PlainTokens t = split_tokens(text);
    if (t.count != 3) {
      return failed_verbatim("Invalid SASL/PLAIN response: expected 3 tokens, got " +
                             std::to_string(t.count));
    }
    if (t.user.empty()) return failed_verbatim("Authentication failed: username not specified");
    if (t.password.empty()) return failed_verbatim("Authentication failed: password not specified");
    // Kafka's order: the credentials first, then the authorization id.
    if (!password_matches(lookup_, t.user, t.password)) return failed_verbatim(kInvalidCredentials);
    if (!t.authzid.empty() && t.authzid != t.user) return failed_verbatim(kAuthzidMismatch);
    return step_done({}, std::string(t.user));
  }

  static Step failed_verbatim(std::string text) {
    std::string detail = text;
    return step_failed(std::move(text), std::move(detail));
  }

  Lookup lookup_;
  State state_ = State::waiting;
};

}  // namespace

std::unique_ptr<Authenticator> make_plain_authenticator(Lookup lookup) {
  return std::make_unique<PlainAuthenticator>(std::move(lookup));
}

}  // namespace detail

std::string plain_client_message(std::string_view user, std::string_view password) {
  std::string out;
  out.reserve(user.size() + password.size() + 2);
  out += '\0';
  out += user;
  out += '\0';
  out += password;
  return out;
}

}  // namespace samsa::net::sasl
