// Kafka's sasl.jaas.config values: the generic entry parser and PLAIN's user list.
#include <gtest/gtest.h>

#include <string>

#include "net/sasl/sasl.h"

namespace samsa::net::sasl {
namespace {

TEST(Jaas, KafkaDocsExample) {
  std::string error = "stale";
  const PlainUsers u = parse_plain_jaas(
      "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"admin\" "
      "password=\"admin-secret\" user_admin=\"admin-secret\" user_alice=\"alice-secret\";",
      &error);
  EXPECT_EQ(error, "");
  EXPECT_EQ(u.username, "admin");
  EXPECT_EQ(u.password, "admin-secret");
  ASSERT_EQ(u.users.size(), 2u);
  EXPECT_EQ(u.users.at("admin"), "admin-secret");
  EXPECT_EQ(u.users.at("alice"), "alice-secret");
}

TEST(Jaas, GenericEntry) {
  std::string error;
  const JaasEntry e = parse_jaas(
      "org.apache.kafka.common.security.scram.ScramLoginModule Required\n"
      "  username=admin\n  password='s3cr\\'et';\n",
      &error);
  EXPECT_EQ(error, "");
  EXPECT_EQ(e.login_module, kScramLoginModule);
  EXPECT_EQ(e.control_flag, "REQUIRED");
  ASSERT_EQ(e.options.size(), 2u);
  EXPECT_EQ(e.options.at("username"), "admin");
  EXPECT_EQ(e.options.at("password"), "s3cr'et");
  for (const char* flag : {"requisite", "SUFFICIENT", "optional"}) {
    const JaasEntry f = parse_jaas(std::string("M ") + flag + ";", &error);
    EXPECT_EQ(error, "") << flag;
    EXPECT_EQ(f.login_module, "M");
    EXPECT_TRUE(f.options.empty());
  }
}

TEST(Jaas, QuotingAndEscapes) {
  std::string error;
  const JaasEntry e =
      parse_jaas(R"(M required a="x \"y\" z" c="back\\slash" d="tab\there" e="\101\60\0" )"
                 R"(f="new\nline" g=unquoted-value_1.2:3 h="" i="caf)"
                 "\xc3\xa9"
                 R"(" j="\q" k="\377";)",
                 &error);
  ASSERT_EQ(error, "");
  EXPECT_EQ(e.options.at("a"), "x \"y\" z");
  EXPECT_EQ(e.options.at("c"), "back\\slash");
  EXPECT_EQ(e.options.at("d"), "tab\there");
  EXPECT_EQ(e.options.at("e"), std::string("A0\0", 3));
  EXPECT_EQ(e.options.at("f"), "new\nline");
  EXPECT_EQ(e.options.at("g"), "unquoted-value_1.2:3");
  EXPECT_EQ(e.options.at("h"), "");
  EXPECT_EQ(e.options.at("i"), "caf\xc3\xa9");
  EXPECT_EQ(e.options.at("j"), "q");
  EXPECT_EQ(e.options.at("k"), "\xc3\xbf");
}

// Two adjacent quoted strings are two tokens: 'it' is the value, 's' a key without one.
TEST(Jaas, AdjacentQuotedStringsNeedAnEquals) {
  std::string error;
  parse_jaas("M required b='it''s';", &error);
  EXPECT_EQ(error, "Value not specified for key 's' in JAAS config");
}

TEST(Jaas, WhitespaceCommentsAndDuplicates) {
  std::string error;
  const PlainUsers u = parse_plain_jaas(
      "\n\t org.apache.kafka.common.security.plain.PlainLoginModule   required\r\n"
      "  // the broker's own login\n"
      "  username = \"admin\"  /* inline\n comment */ password=\"a\"\n"
      "  user_alice=\"one\"\n"
      "  user_alice=\"two\"   user_=\"ignored\"\n"
      "  ;  \n",
      &error);
  ASSERT_EQ(error, "");
  EXPECT_EQ(u.username, "admin");
  EXPECT_EQ(u.password, "a");
  ASSERT_EQ(u.users.size(), 1u);
  EXPECT_EQ(u.users.at("alice"), "two");
}

TEST(Jaas, SlashOutsideQuotesStartsAComment) {
  std::string error;
  // As Kafka's tokenizer: '/' hides the rest of its line, so "path" has no value...
  parse_jaas("M required path=/etc/x;", &error);
  EXPECT_EQ(error, "Value not specified for key 'path' in JAAS config");
  // ...or takes the next line's first word, leaving an '=' where a key belongs.
  parse_jaas("M required path=/etc/x\n a=\"/etc/y\";", &error);
  EXPECT_EQ(error, "Value not specified for key 'null' in JAAS config");
  const JaasEntry f = parse_jaas("M required a=\"/etc/y\"; // trailing", &error);
  EXPECT_EQ(error, "");
  EXPECT_EQ(f.options.at("a"), "/etc/y");
}

TEST(Jaas, KafkaErrors) {
  const auto error_of = [](std::string_view text) {
    std::string error;
    const JaasEntry e = parse_jaas(text, &error);
    EXPECT_TRUE(e.login_module.empty()) << text;
    EXPECT_TRUE(e.options.empty()) << text;
    return error;
  };
  EXPECT_EQ(error_of(""), "Login module not specified in JAAS config");
  EXPECT_EQ(error_of("  // nothing\n"), "Login module not specified in JAAS config");
  EXPECT_EQ(error_of("M"), "Login module control flag not specified in JAAS config");
  EXPECT_EQ(error_of("M ;"), "Login module control flag is not available in the JAAS config");
  EXPECT_EQ(error_of("M mandatory;"),
            "Invalid login module control flag 'mandatory' in JAAS config");
  EXPECT_EQ(error_of("M required a;"), "Value not specified for key 'a' in JAAS config");
  EXPECT_EQ(error_of("M required a=;"), "Value not specified for key 'a' in JAAS config");
  EXPECT_EQ(error_of("M required a="), "Value not specified for key 'a' in JAAS config");
  EXPECT_EQ(error_of("M required =b;"), "Value not specified for key 'null' in JAAS config");
  EXPECT_EQ(error_of("M required a=b"), "JAAS config entry not terminated by semi-colon");
  EXPECT_EQ(error_of("M required a=\"b\" "), "JAAS config entry not terminated by semi-colon");
  EXPECT_EQ(error_of("M required; N required;"),
            "JAAS config property contains 2 login modules, should be 1 module");
  EXPECT_EQ(error_of("M required a=\"b;"), "Unterminated quoted string in JAAS config");
  EXPECT_EQ(error_of("M required a=\"b\nc\";"), "Unterminated quoted string in JAAS config");
  EXPECT_EQ(error_of("M required a=\"b\\"), "Unterminated quoted string in JAAS config");
  EXPECT_EQ(error_of("M required /* a=b;"), "Unterminated comment in JAAS config");
  EXPECT_EQ(error_of("; M required;"), "Login module not specified in JAAS config");
  EXPECT_EQ(error_of("\"\" required;"), "Login module not specified in JAAS config");
}

TEST(Jaas, NullErrorPointerIsFine) {
  EXPECT_TRUE(parse_jaas("broken", nullptr).login_module.empty());
  EXPECT_EQ(parse_jaas("M required;", nullptr).login_module, "M");
}

TEST(Jaas, PlainNeedsThePlainLoginModule) {
  std::string error;
  const PlainUsers u = parse_plain_jaas(
      "org.apache.kafka.common.security.scram.ScramLoginModule required user_a=\"b\";", &error);
  EXPECT_EQ(error,
            "Login module 'org.apache.kafka.common.security.scram.ScramLoginModule' in JAAS "
            "config is not org.apache.kafka.common.security.plain.PlainLoginModule");
  EXPECT_TRUE(u.users.empty());
  parse_plain_jaas("org.apache.kafka.common.security.plain.PlainLoginModule required user_a=;",
                   &error);
  EXPECT_EQ(error, "Value not specified for key 'user_a' in JAAS config");
}

TEST(Jaas, PlainUsersAuthenticate) {
  std::string error;
  const PlainUsers u = parse_plain_jaas(
      "org.apache.kafka.common.security.plain.PlainLoginModule required "
      "user_alice=\"alice \\\"quoted\\\" secret\";",
      &error);
  ASSERT_EQ(error, "");
  Lookup lookup;
  lookup.plain_password = [&](std::string_view user) -> const std::string* {
    auto it = u.users.find(user);
    return it == u.users.end() ? nullptr : &it->second;
  };
  auto auth = make_authenticator(Mechanism::plain, lookup);
  const std::string m = plain_client_message("alice", "alice \"quoted\" secret");
  EXPECT_EQ(auth->step({reinterpret_cast<const std::uint8_t*>(m.data()), m.size()}).status,
            Step::done);
}

}  // namespace
}  // namespace samsa::net::sasl
