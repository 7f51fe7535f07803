// SCRAM-SHA-256/512: RFC 7677's example exchange, ScramClient against the server, and every
// way Kafka's ScramSaslServer refuses a client.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <utility>

#include "net/sasl/sasl.h"

namespace samsa::net::sasl {
namespace {

std::span<const std::uint8_t> bytes(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

// RFC 7677 section 3.
constexpr const char* kClientFirst = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
constexpr const char* kServerNonce = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
constexpr const char* kServerFirst =
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
constexpr const char* kClientFinal =
    "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
constexpr const char* kServerFinal = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";
constexpr const char* kAuthzidMismatch =
    "Authentication failed: Client requested an authorization id that is different from "
    "username";

class ScramTest : public ::testing::Test {
 protected:
  void SetUp() override {
    salt_ = *base64_decode("W22ZaJ0SNY7soEsUEjb6gQ==");
    add("user", "pencil", Mechanism::scram_sha_256);
  }

  void add(const std::string& user, std::string_view password, Mechanism m) {
    creds_[{user, m}] = make_scram_credential(m, password, salt_, 4096);
  }

  Lookup lookup() {
    Lookup l;
    l.scram = [this](std::string_view user, Mechanism m) -> std::optional<ScramCredential> {
      ++lookups_;
      auto it = creds_.find({std::string(user), m});
      if (it == creds_.end()) return std::nullopt;
      return it->second;
    };
    return l;
  }

  std::unique_ptr<Authenticator> server(Mechanism m = Mechanism::scram_sha_256) {
    AuthenticatorOptions o;
    o.server_nonce = [] { return std::string(kServerNonce); };
    return make_authenticator(m, lookup(), std::move(o));
  }

  // The RFC exchange's first step, returning the server ready for a client-final message.
  std::unique_ptr<Authenticator> after_first(std::string_view client_first = kClientFirst) {
    auto s = server();
    const Step first = s->step(bytes(client_first));
    EXPECT_EQ(first.status, Step::more) << first.detail;
    return s;
  }

  static void expect_generic(const Step& s, Mechanism m, std::string_view detail) {
    EXPECT_EQ(s.status, Step::failed);
    EXPECT_TRUE(s.generic);
    EXPECT_EQ(s.error, generic_failure_message(m, false));
    EXPECT_EQ(s.detail, detail);
    EXPECT_EQ(s.server_message, "");
    EXPECT_EQ(s.principal, "");
  }

  std::string salt_;
  std::map<std::pair<std::string, Mechanism>, ScramCredential> creds_;
  int lookups_ = 0;
};

TEST_F(ScramTest, Rfc7677ExampleExactly) {
  auto s = server();
  EXPECT_EQ(s->mechanism(), Mechanism::scram_sha_256);
  const Step first = s->step(bytes(kClientFirst));
  ASSERT_EQ(first.status, Step::more);
  EXPECT_EQ(first.server_message, kServerFirst);
  const Step final = s->step(bytes(kClientFinal));
  ASSERT_EQ(final.status, Step::done) << final.detail;
  EXPECT_EQ(final.server_message, kServerFinal);
  EXPECT_EQ(final.principal, "user");
  EXPECT_EQ(lookups_, 1);
}

TEST_F(ScramTest, Rfc7677ExampleFromTheClientSide) {
  ScramClient c(Mechanism::scram_sha_256, "user", "pencil", "rOprNGfwEbeRWgbNEkqO");
  EXPECT_EQ(c.first(), kClientFirst);
  EXPECT_EQ(c.final(kServerFirst), std::optional<std::string>(kClientFinal));
  EXPECT_TRUE(c.verify(kServerFinal)) << c.error();
}

TEST_F(ScramTest, ClientRefusesAForgedServerSignature) {
  ScramClient c(Mechanism::scram_sha_256, "user", "pencil", "rOprNGfwEbeRWgbNEkqO");
  c.first();
  ASSERT_TRUE(c.final(kServerFirst).has_value());
  EXPECT_FALSE(c.verify("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G5="));
}

TEST_F(ScramTest, ClientRefusesBadServerFirst) {
  const auto try_first = [](std::string_view server_first) {
    ScramClient c(Mechanism::scram_sha_256, "user", "pencil", "abc");
    c.first();
    return c.final(server_first);
  };
  EXPECT_FALSE(try_first("r=xyz123,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"));  // not our nonce
  EXPECT_FALSE(try_first("r=abc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"));     // not extended
  EXPECT_FALSE(try_first("r=abcd,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4095"));    // too few
  EXPECT_FALSE(try_first("r=abcd,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=16385"));   // too many
  EXPECT_FALSE(try_first("r=abcd,s=W22ZaJ0SNY7soEsUEjb6gQ=,i=4096"));     // bad base64
  EXPECT_FALSE(try_first("r=abcd,s=,i=4096"));                            // empty salt
  EXPECT_FALSE(try_first("m=x,r=abcd,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"));
  EXPECT_FALSE(try_first("r=abcd,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=99999999999"));
  ScramClient early(Mechanism::scram_sha_256, "user", "pencil");
  EXPECT_FALSE(early.final(kServerFirst).has_value());
  EXPECT_FALSE(early.error().empty());
}

TEST_F(ScramTest, Sha512RoundTripWithScramClient) {
  add("alice", "alice-secret", Mechanism::scram_sha_512);
  auto s = make_authenticator(Mechanism::scram_sha_512, lookup());
  ScramClient c(Mechanism::scram_sha_512, "alice", "alice-secret");
  const std::string client_first = c.first();
  const Step first = s->step(bytes(client_first));
  ASSERT_EQ(first.status, Step::more);
  const auto client_final = c.final(first.server_message);
  ASSERT_TRUE(client_final.has_value()) << c.error();
  const Step final = s->step(bytes(*client_final));
  ASSERT_EQ(final.status, Step::done) << final.detail;
  EXPECT_EQ(final.principal, "alice");
  EXPECT_TRUE(c.verify(final.server_message)) << c.error();
}

TEST_F(ScramTest, RandomServerNonceIsLongAndFresh) {
  auto a = make_authenticator(Mechanism::scram_sha_256, lookup());
  auto b = make_authenticator(Mechanism::scram_sha_256, lookup());
  const std::string fa = a->step(bytes(kClientFirst)).server_message;
  const std::string fb = b->step(bytes(kClientFirst)).server_message;
  ASSERT_EQ(fa.rfind("r=rOprNGfwEbeRWgbNEkqO", 0), 0u);
  const std::string nonce_a = fa.substr(2, fa.find(',') - 2);
  EXPECT_GE(nonce_a.size(), std::string("rOprNGfwEbeRWgbNEkqO").size() + 32);
  EXPECT_NE(fa, fb);
}

TEST_F(ScramTest, WrongPasswordFailsAtTheProof) {
  add("bob", "right", Mechanism::scram_sha_512);
  auto s = make_authenticator(Mechanism::scram_sha_512, lookup());
  ScramClient c(Mechanism::scram_sha_512, "bob", "wrong");
  const Step first = s->step(bytes(c.first()));
  ASSERT_EQ(first.status, Step::more);
  const auto client_final = c.final(first.server_message);
  ASSERT_TRUE(client_final.has_value());
  expect_generic(s->step(bytes(*client_final)), Mechanism::scram_sha_512,
                 "Invalid client credentials");
}

TEST_F(ScramTest, UnknownUserLooksLikeAWrongPassword) {
  // The first answer has the same shape as for a real user, and a stable salt per name.
  auto first_for = [&](std::string_view user) {
    auto s = make_authenticator(Mechanism::scram_sha_256, lookup());
    ScramClient c(Mechanism::scram_sha_256, std::string(user), "pencil");
    const Step first = s->step(bytes(c.first()));
    EXPECT_EQ(first.status, Step::more);
    const auto client_final = c.final(first.server_message);
    EXPECT_TRUE(client_final.has_value()) << c.error();
    const Step final = s->step(bytes(client_final.value_or("")));
    expect_generic(final, Mechanism::scram_sha_256,
                   "Authentication failed: Invalid user credentials");
    std::string sf = first.server_message;
    return sf.substr(sf.find(",s="));
  };
  const std::string mallory1 = first_for("mallory");
  EXPECT_EQ(first_for("mallory"), mallory1);
  EXPECT_NE(first_for("trudy"), mallory1);
  EXPECT_NE(mallory1.find(",i=4096"), std::string::npos);
}

TEST_F(ScramTest, CredentialOfAnotherMechanismIsUnknown) {
  auto s = make_authenticator(Mechanism::scram_sha_512, lookup());
  ScramClient c(Mechanism::scram_sha_512, "user", "pencil");
  const Step first = s->step(bytes(c.first()));
  ASSERT_EQ(first.status, Step::more);
  expect_generic(s->step(bytes(*c.final(first.server_message))), Mechanism::scram_sha_512,
                 "Authentication failed: Invalid user credentials");
}

TEST_F(ScramTest, NoLookupMeansNoUsers) {
  auto s = make_authenticator(Mechanism::scram_sha_256, Lookup{});
  ScramClient c(Mechanism::scram_sha_256, "user", "pencil");
  const Step first = s->step(bytes(c.first()));
  ASSERT_EQ(first.status, Step::more);
  EXPECT_EQ(s->step(bytes(*c.final(first.server_message))).status, Step::failed);
}

TEST_F(ScramTest, TooFewIterationsFailAtTheFirstMessage) {
  creds_[{"low", Mechanism::scram_sha_256}] =
      make_scram_credential(Mechanism::scram_sha_256, "pw", "salt", 4095);
  auto s = server();
  expect_generic(s->step(bytes("n,,n=low,r=abc")), Mechanism::scram_sha_256,
                 "Iterations 4095 is less than the minimum 4096 for SCRAM-SHA-256");
}

TEST_F(ScramTest, NonceMismatch) {
  auto s = after_first();
  expect_generic(s->step(bytes("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k1,"
                               "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")),
                 Mechanism::scram_sha_256, "Invalid client nonce in the final client message.");
  s = after_first();
  expect_generic(s->step(bytes("c=biws,r=rOprNGfwEbeRWgbNEkqO,"
                               "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")),
                 Mechanism::scram_sha_256, "Invalid client nonce in the final client message.");
}

TEST_F(ScramTest, ChannelBindingMustRepeatTheGs2Header) {
  const std::string rest =
      ",r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
      "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
  for (const char* c : {"c=eSws", "c=", "c=biwsbiws", "c=cD10bHMtdW5pcXVlLCw="}) {
    auto s = after_first();
    expect_generic(s->step(bytes(c + rest)), Mechanism::scram_sha_256,
                   "Invalid channel binding in the final client message");
  }
}

TEST_F(ScramTest, YFlagIsAcceptedAndBound) {
  // "y": the client could bind but believes the server cannot; c= must then be "eSws".
  auto s = server();
  ASSERT_EQ(s->step(bytes("y,,n=user,r=rOprNGfwEbeRWgbNEkqO")).status, Step::more);
  // The proof covers c=eSws, so the RFC's proof (for c=biws) no longer verifies...
  expect_generic(s->step(bytes("c=eSws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                               "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")),
                 Mechanism::scram_sha_256, "Invalid client credentials");
  // ...and c=biws does not match the header.
  s = server();
  ASSERT_EQ(s->step(bytes("y,,n=user,r=rOprNGfwEbeRWgbNEkqO")).status, Step::more);
  expect_generic(s->step(bytes(kClientFinal)), Mechanism::scram_sha_256,
                 "Invalid channel binding in the final client message");
}

TEST_F(ScramTest, ChannelBindingIsRefused) {
  auto s = server();
  expect_generic(s->step(bytes("p=tls-unique,,n=user,r=abc")), Mechanism::scram_sha_256,
                 "Channel binding is not supported");
  EXPECT_EQ(lookups_, 0);
}

TEST_F(ScramTest, AuthorizationId) {
  // Equal to the user: accepted, and c= must carry the whole header.
  auto s = server();
  ASSERT_EQ(s->step(bytes("n,a=user,n=user,r=rOprNGfwEbeRWgbNEkqO")).status, Step::more);
  EXPECT_EQ(s->step(bytes(kClientFinal)).detail,
            "Invalid channel binding in the final client message");
  // Different: Kafka's own message, sent as it is, for known and unknown users alike.
  for (const char* m : {"n,a=admin,n=user,r=abc", "n,a=admin,n=nobody,r=abc"}) {
    s = server();
    const Step step = s->step(bytes(m));
    EXPECT_EQ(step.status, Step::failed);
    EXPECT_FALSE(step.generic);
    EXPECT_EQ(step.error, kAuthzidMismatch);
  }
  EXPECT_EQ(lookups_, 1);
}

TEST_F(ScramTest, SaslNameEscapes) {
  const std::string odd = "a,b=c";
  add(odd, "pw", Mechanism::scram_sha_256);
  auto s = make_authenticator(Mechanism::scram_sha_256, lookup());
  ScramClient c(Mechanism::scram_sha_256, odd, "pw", "nonce");
  const std::string first_msg = c.first();
  EXPECT_EQ(first_msg, "n,,n=a=2Cb=3Dc,r=nonce");
  const Step first = s->step(bytes(first_msg));
  ASSERT_EQ(first.status, Step::more);
  const Step final = s->step(bytes(*c.final(first.server_message)));
  ASSERT_EQ(final.status, Step::done) << final.detail;
  EXPECT_EQ(final.principal, odd);
  EXPECT_TRUE(c.verify(final.server_message));

  for (const char* bad : {"n,,n=a=2Db,r=abc", "n,,n=a=2cb,r=abc", "n,,n=a=,r=abc", "n,,n=a=3,r=abc",
                          "n,,n=,r=abc", "n,,n=a\xff,r=abc", "n,a=x=41,n=x,r=abc"}) {
    s = server();
    const Step step = s->step(bytes(bad));
    EXPECT_EQ(step.status, Step::failed) << bad;
    EXPECT_TRUE(step.generic) << bad;
  }
}

TEST_F(ScramTest, Utf8NamesAreAccepted) {
  const std::string name = "J\xc3\xbcrgen";
  add(name, "pw", Mechanism::scram_sha_256);
  auto s = make_authenticator(Mechanism::scram_sha_256, lookup());
  ScramClient c(Mechanism::scram_sha_256, name, "pw");
  const Step first = s->step(bytes(c.first()));
  ASSERT_EQ(first.status, Step::more);
  const Step final = s->step(bytes(*c.final(first.server_message)));
  EXPECT_EQ(final.status, Step::done);
  EXPECT_EQ(final.principal, name);
}

TEST_F(ScramTest, Extensions) {
  // Unknown extensions are accepted (Kafka logs and ignores them) and covered by the proof.
  auto s = server();
  const Step first = s->step(bytes("n,,n=user,r=rOprNGfwEbeRWgbNEkqO,foo=bar,tokenauth=false"));
  ASSERT_EQ(first.status, Step::more) << first.detail;
  expect_generic(s->step(bytes(kClientFinal)), Mechanism::scram_sha_256,
                 "Invalid client credentials");
  // Delegation tokens are not supported.
  for (const char* m : {"n,,n=user,r=abc,tokenauth=true", "n,,n=user,r=abc,tokenauth=TRUE"}) {
    s = server();
    expect_generic(s->step(bytes(m)), Mechanism::scram_sha_256,
                   "Token Authentication failed: delegation tokens are not supported");
  }
  for (const char* m : {"n,,n=user,r=abc,", "n,,n=user,r=abc,x", "n,,n=user,r=abc,1=2",
                        "n,,n=user,r=abc,a=", "n,,n=user,r=abc,=b", "n,,n=user,r=abc,a=\xc3\xa4"}) {
    s = server();
    expect_generic(s->step(bytes(m)), Mechanism::scram_sha_256,
                   "Invalid SCRAM client first message format: extensions");
  }
}

TEST_F(ScramTest, MalformedClientFirst) {
  for (const char* m :
       {"", "n", "n,", "x,,n=user,r=abc", ",,n=user,r=abc", "n,b=user,n=user,r=abc", "n,,n=user",
        "n,,r=abc,n=user", "n,,n=user,r=", "n,,n=user,r=a b", "n,,n=user,r=a\x7f",
        "n,,n=user,x=abc", "n,,m=ext,n=user,r=abc", "n,,n=user,,r=abc"}) {
    auto s = server();
    const Step step = s->step(bytes(m));
    EXPECT_EQ(step.status, Step::failed) << m;
    EXPECT_TRUE(step.generic) << m;
    EXPECT_EQ(step.error, generic_failure_message(Mechanism::scram_sha_256, false));
  }
  EXPECT_EQ(lookups_, 0);
}

TEST_F(ScramTest, MalformedClientFinal) {
  for (const char* m : {"", "c=biws", "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
                        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,c=biws,p=AAAA",
                        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=not*base64",
                        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzb,x=y",
                        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,1=2,p=AAAA"}) {
    auto s = after_first();
    const Step step = s->step(bytes(m));
    EXPECT_EQ(step.status, Step::failed) << m;
    EXPECT_TRUE(step.generic) << m;
    EXPECT_EQ(step.detail.rfind("Invalid SCRAM client final message format", 0), 0u)
        << m << ": " << step.detail;
  }
  // A proof of the wrong length decodes but cannot match.
  auto s = after_first();
  expect_generic(s->step(bytes("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                               "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQA")),
                 Mechanism::scram_sha_256, "Invalid client credentials");
}

TEST_F(ScramTest, ClientFinalExtensionsAreCoveredByTheProof) {
  // The RFC's proof was computed without the extension, so adding one breaks it.
  auto s = after_first();
  expect_generic(s->step(bytes("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                               "ext=1,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")),
                 Mechanism::scram_sha_256, "Invalid client credentials");
}

TEST_F(ScramTest, OversizedMessageFails) {
  std::string big = std::string(kClientFirst) + ",x=" + std::string(kMaxClientMessageBytes, 'a');
  auto s = server();
  const Step step = s->step(bytes(big));
  EXPECT_EQ(step.status, Step::failed);
  EXPECT_TRUE(step.generic);
  EXPECT_NE(step.detail.find("exceeds the limit of 4096 bytes"), std::string::npos);
  // An oversized client-final likewise.
  s = after_first();
  EXPECT_EQ(s->step(bytes(std::string(kClientFinal) + std::string(4096, ','))).status,
            Step::failed);
}

TEST_F(ScramTest, NothingAfterTheEnd) {
  auto s = after_first();
  ASSERT_EQ(s->step(bytes(kClientFinal)).status, Step::done);
  Step again = s->step(bytes(kClientFinal));
  EXPECT_EQ(again.status, Step::failed);
  EXPECT_EQ(again.error, "Unexpected challenge in Sasl server state COMPLETE");
  again = s->step(bytes(kClientFirst));
  EXPECT_EQ(again.status, Step::failed);

  s = server();
  EXPECT_EQ(s->step(bytes("garbage")).status, Step::failed);
  again = s->step(bytes(kClientFirst));
  EXPECT_EQ(again.status, Step::failed);
  EXPECT_EQ(again.error, "Unexpected challenge in Sasl server state FAILED");
}

TEST_F(ScramTest, ClientFirstTwiceIsAFinalMessage) {
  // Out of order: a second client-first where the client-final belongs fails the exchange.
  auto s = after_first();
  EXPECT_EQ(s->step(bytes(kClientFirst)).status, Step::failed);
  EXPECT_EQ(s->step(bytes(kClientFinal)).status, Step::failed);
}

TEST_F(ScramTest, BadInjectedNonceFails) {
  AuthenticatorOptions o;
  o.server_nonce = [] { return std::string("has,comma"); };
  auto s = make_authenticator(Mechanism::scram_sha_256, lookup(), std::move(o));
  EXPECT_EQ(s->step(bytes(kClientFirst)).status, Step::failed);
}

}  // namespace
}  // namespace samsa::net::sasl
