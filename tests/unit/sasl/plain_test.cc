// SASL/PLAIN's server against Kafka's PlainSaslServer behaviour, and its client message.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "net/sasl/sasl.h"

namespace samsa::net::sasl {
namespace {

std::span<const std::uint8_t> bytes(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

constexpr const char* kInvalid = "Authentication failed: Invalid username or password";

class PlainTest : public ::testing::Test {
 protected:
  Lookup lookup() {
    Lookup l;
    l.plain_password = [this](std::string_view user) -> const std::string* {
      ++lookups_;
      auto it = users_.find(user);
      return it == users_.end() ? nullptr : &it->second;
    };
    return l;
  }

  Step run(std::string_view message) {
    auto auth = make_authenticator(Mechanism::plain, lookup());
    return auth->step(bytes(message));
  }

  static std::string msg(std::string_view authzid, std::string_view user, std::string_view pw) {
    std::string out(authzid);
    out += '\0';
    out += user;
    out += '\0';
    out += pw;
    return out;
  }

  std::map<std::string, std::string, std::less<>> users_{{"alice", "alice-secret"},
                                                         {"admin", "admin-secret"}};
  int lookups_ = 0;
};

TEST_F(PlainTest, AcceptsTheRightPassword) {
  const Step s = run(plain_client_message("alice", "alice-secret"));
  EXPECT_EQ(s.status, Step::done);
  EXPECT_EQ(s.principal, "alice");
  EXPECT_EQ(s.server_message, "");
  EXPECT_EQ(s.error, "");
  EXPECT_EQ(lookups_, 1);
}

TEST_F(PlainTest, ClientMessageHasNoAuthorizationId) {
  EXPECT_EQ(plain_client_message("alice", "pw"), std::string("\0alice\0pw", 9));
}

TEST_F(PlainTest, WrongPasswordAndUnknownUserLookTheSame) {
  for (const std::string& m : {msg("", "alice", "wrong"), msg("", "alice", "alice-secre"),
                               msg("", "alice", "alice-secret2"), msg("", "mallory", "x"),
                               msg("", "Alice", "alice-secret")}) {
    const Step s = run(m);
    EXPECT_EQ(s.status, Step::failed);
    EXPECT_EQ(s.error, kInvalid);
    EXPECT_FALSE(s.generic);
    EXPECT_EQ(s.principal, "");
  }
}

TEST_F(PlainTest, AuthorizationIdMustBeTheUser) {
  EXPECT_EQ(run(msg("alice", "alice", "alice-secret")).status, Step::done);
  const Step s = run(msg("admin", "alice", "alice-secret"));
  EXPECT_EQ(s.status, Step::failed);
  EXPECT_EQ(s.error,
            "Authentication failed: Client requested an authorization id that is different "
            "from username");
  // Kafka checks the password first: a wrong one hides the authorization id problem.
  EXPECT_EQ(run(msg("admin", "alice", "nope")).error, kInvalid);
}

TEST_F(PlainTest, EmptyTokensAsKafka) {
  EXPECT_EQ(run(msg("", "", "")).error, "Authentication failed: username not specified");
  EXPECT_EQ(run(msg("", "", "p")).error, "Authentication failed: username not specified");
  EXPECT_EQ(run(msg("", "u", "")).error, "Authentication failed: password not specified");
  EXPECT_EQ(run(msg("a", "", "p")).error, "Authentication failed: username not specified");
  EXPECT_EQ(lookups_, 0);
}

TEST_F(PlainTest, TokenCountAsKafka) {
  EXPECT_EQ(run("").error, "Invalid SASL/PLAIN response: expected 3 tokens, got 1");
  EXPECT_EQ(run("alice").error, "Invalid SASL/PLAIN response: expected 3 tokens, got 1");
  EXPECT_EQ(run(std::string("\0u", 2)).error,
            "Invalid SASL/PLAIN response: expected 3 tokens, got 2");
  EXPECT_EQ(run(msg("a", "u", "p") + '\0').error,
            "Invalid SASL/PLAIN response: expected 3 tokens, got 4");
  EXPECT_EQ(run(msg("a", "alice", "alice-secret") + '\0' + "x" + '\0' + "y").error,
            "Invalid SASL/PLAIN response: expected 3 tokens, got 4");
}

TEST_F(PlainTest, PasswordsAreBytes) {
  users_["bob"] = std::string("p\xc3\xa4ss", 5);
  EXPECT_EQ(run(msg("", "bob", std::string("p\xc3\xa4ss", 5))).status, Step::done);
  EXPECT_EQ(run(msg("", "bob", "pass")).status, Step::failed);
}

TEST_F(PlainTest, OversizedMessageFails) {
  std::string big = msg("", "alice", std::string(kMaxClientMessageBytes, 'x'));
  const Step s = run(big);
  EXPECT_EQ(s.status, Step::failed);
  EXPECT_TRUE(s.generic);
  EXPECT_EQ(s.error, generic_failure_message(Mechanism::plain, false));
  EXPECT_EQ(lookups_, 0);
  // Right at the limit the message is read (and the password is wrong).
  const std::string at_limit = msg("", "alice", std::string(kMaxClientMessageBytes - 7, 'x'));
  ASSERT_EQ(at_limit.size(), kMaxClientMessageBytes);
  EXPECT_EQ(run(at_limit).error, kInvalid);
}

TEST_F(PlainTest, NothingAfterTheEnd) {
  auto auth = make_authenticator(Mechanism::plain, lookup());
  EXPECT_EQ(auth->mechanism(), Mechanism::plain);
  EXPECT_EQ(auth->step(bytes(plain_client_message("alice", "alice-secret"))).status, Step::done);
  Step again = auth->step(bytes(plain_client_message("alice", "alice-secret")));
  EXPECT_EQ(again.status, Step::failed);
  EXPECT_EQ(again.error, "Unexpected challenge in Sasl server state COMPLETE");

  auto failed = make_authenticator(Mechanism::plain, lookup());
  EXPECT_EQ(failed->step(bytes(plain_client_message("alice", "x"))).status, Step::failed);
  again = failed->step(bytes(plain_client_message("alice", "alice-secret")));
  EXPECT_EQ(again.status, Step::failed);
  EXPECT_EQ(again.error, "Unexpected challenge in Sasl server state FAILED");
}

TEST_F(PlainTest, NoLookupMeansNoUsers) {
  auto auth = make_authenticator(Mechanism::plain, Lookup{});
  EXPECT_EQ(auth->step(bytes(plain_client_message("alice", "alice-secret"))).error, kInvalid);
}

TEST(Mechanisms, NamesRoundTrip) {
  for (Mechanism m : {Mechanism::plain, Mechanism::scram_sha_256, Mechanism::scram_sha_512})
    EXPECT_EQ(parse_mechanism(mechanism_name(m)), m);
  EXPECT_STREQ(mechanism_name(Mechanism::scram_sha_512), "SCRAM-SHA-512");
  EXPECT_FALSE(parse_mechanism("plain").has_value());
  EXPECT_FALSE(parse_mechanism("GSSAPI").has_value());
  EXPECT_FALSE(parse_mechanism("SCRAM-SHA-1").has_value());
  EXPECT_EQ(generic_failure_message(Mechanism::scram_sha_256, false),
            "Authentication failed during authentication due to invalid credentials with SASL "
            "mechanism SCRAM-SHA-256");
  EXPECT_EQ(generic_failure_message(Mechanism::plain, true),
            "Authentication failed during re-authentication due to invalid credentials with "
            "SASL mechanism PLAIN");
}

}  // namespace
}  // namespace samsa::net::sasl
