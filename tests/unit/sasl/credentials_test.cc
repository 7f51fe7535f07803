// SCRAM credential derivation: from a password, from a client-computed SaltedPassword, and
// against an independent PBKDF2.
#include <gtest/gtest.h>

#include <openssl/evp.h>

#include <string>

#include "net/sasl/sasl.h"

namespace samsa::net::sasl {
namespace {

std::string salted_password(Mechanism m, std::string_view password, std::string_view salt,
                            int iterations) {
  const EVP_MD* md = m == Mechanism::scram_sha_256 ? EVP_sha256() : EVP_sha512();
  std::string out(static_cast<std::size_t>(EVP_MD_get_size(md)), '\0');
  EXPECT_EQ(
      PKCS5_PBKDF2_HMAC(password.data(), static_cast<int>(password.size()),
                        reinterpret_cast<const unsigned char*>(salt.data()),
                        static_cast<int>(salt.size()), iterations, md, static_cast<int>(out.size()),
                        reinterpret_cast<unsigned char*>(out.data())),
      1);
  return out;
}

TEST(Credentials, PasswordAndSaltedPasswordAgree) {
  for (Mechanism m : {Mechanism::scram_sha_256, Mechanism::scram_sha_512}) {
    const std::string salt = "0123456789abcdef";
    const ScramCredential a = make_scram_credential(m, "alice-secret", salt, 4096);
    const ScramCredential b = scram_credential_from_salted_password(
        m, salt, salted_password(m, "alice-secret", salt, 4096), 4096);
    const std::size_t n = m == Mechanism::scram_sha_256 ? 32 : 64;
    EXPECT_EQ(a.mechanism, m);
    EXPECT_EQ(a.salt, salt);
    EXPECT_EQ(a.iterations, 4096);
    EXPECT_EQ(a.stored_key.size(), n);
    EXPECT_EQ(a.server_key.size(), n);
    EXPECT_NE(a.stored_key, a.server_key);
    EXPECT_EQ(a.stored_key, b.stored_key);
    EXPECT_EQ(a.server_key, b.server_key);
    EXPECT_EQ(b.salt, salt);
    EXPECT_EQ(b.iterations, 4096);
  }
}

TEST(Credentials, Rfc7677Keys) {
  // RFC 7677's user "user"/"pencil" (the exchange itself is in scram_test.cc); the expected
  // keys were computed independently with Python's hashlib.pbkdf2_hmac and hmac.
  const std::string salt = *base64_decode("W22ZaJ0SNY7soEsUEjb6gQ==");
  const ScramCredential c = make_scram_credential(Mechanism::scram_sha_256, "pencil", salt, 4096);
  EXPECT_EQ(base64_encode(c.stored_key), "WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=");
  EXPECT_EQ(base64_encode(c.server_key), "wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=");
}

TEST(Credentials, EmptySaltIsRandom) {
  const ScramCredential a = make_scram_credential(Mechanism::scram_sha_512, "pw", "", 4096);
  const ScramCredential b = make_scram_credential(Mechanism::scram_sha_512, "pw", "", 4096);
  EXPECT_EQ(a.salt.size(), 32u);
  EXPECT_NE(a.salt, b.salt);
  EXPECT_NE(a.stored_key, b.stored_key);
  EXPECT_EQ(a.stored_key.size(), 64u);
}

TEST(Credentials, DifferentPasswordsDiffer) {
  const ScramCredential a = make_scram_credential(Mechanism::scram_sha_256, "a", "salt", 4096);
  const ScramCredential b = make_scram_credential(Mechanism::scram_sha_256, "b", "salt", 4096);
  EXPECT_NE(a.stored_key, b.stored_key);
  const ScramCredential c = make_scram_credential(Mechanism::scram_sha_256, "a", "salt", 4097);
  EXPECT_NE(a.stored_key, c.stored_key);
  const ScramCredential empty = make_scram_credential(Mechanism::scram_sha_256, "", "salt", 4096);
  EXPECT_EQ(empty.stored_key.size(), 32u);
}

TEST(Credentials, OutOfRangeGivesNoKeys) {
  for (int iterations : {0, -1, kMaxScramIterations + 1}) {
    const ScramCredential c =
        make_scram_credential(Mechanism::scram_sha_256, "pw", "salt", iterations);
    EXPECT_TRUE(c.stored_key.empty()) << iterations;
    EXPECT_TRUE(c.server_key.empty()) << iterations;
    EXPECT_EQ(c.iterations, iterations);
  }
  EXPECT_TRUE(make_scram_credential(Mechanism::plain, "pw", "salt", 4096).stored_key.empty());
  EXPECT_FALSE(make_scram_credential(Mechanism::scram_sha_256, "pw", "salt", kMaxScramIterations)
                   .stored_key.empty());
  // A SaltedPassword must be one hash long, and the salt non-empty.
  EXPECT_TRUE(scram_credential_from_salted_password(Mechanism::scram_sha_512, "salt",
                                                    std::string(32, 'x'), 4096)
                  .stored_key.empty());
  EXPECT_TRUE(scram_credential_from_salted_password(Mechanism::scram_sha_256, "",
                                                    std::string(32, 'x'), 4096)
                  .stored_key.empty());
  EXPECT_FALSE(scram_credential_from_salted_password(Mechanism::scram_sha_512, "salt",
                                                     std::string(64, 'x'), 4096)
                   .stored_key.empty());
}

TEST(Credentials, SaltedPasswordCredentialAuthenticates) {
  // The AlterUserScramCredentials path: the client sends salt and SaltedPassword only.
  const std::string salt = "kafka-configs-salt";
  const ScramCredential c = scram_credential_from_salted_password(
      Mechanism::scram_sha_512, salt,
      salted_password(Mechanism::scram_sha_512, "carol-pw", salt, 8192), 8192);
  Lookup lookup;
  lookup.scram = [&](std::string_view user, Mechanism) -> std::optional<ScramCredential> {
    if (user == "carol") return c;
    return std::nullopt;
  };
  auto server = make_authenticator(Mechanism::scram_sha_512, lookup);
  ScramClient client(Mechanism::scram_sha_512, "carol", "carol-pw");
  const std::string first = client.first();
  const Step s1 = server->step({reinterpret_cast<const std::uint8_t*>(first.data()), first.size()});
  ASSERT_EQ(s1.status, Step::more);
  EXPECT_NE(s1.server_message.find(",i=8192"), std::string::npos);
  const std::string final = *client.final(s1.server_message);
  const Step s2 = server->step({reinterpret_cast<const std::uint8_t*>(final.data()), final.size()});
  ASSERT_EQ(s2.status, Step::done) << s2.detail;
  EXPECT_TRUE(client.verify(s2.server_message));
}

}  // namespace
}  // namespace samsa::net::sasl
