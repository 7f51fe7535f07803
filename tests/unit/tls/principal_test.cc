// net::tls principals: the RFC 2253 subject (as Java's X500Principal.getName() prints it) and
// Kafka's ssl.principal.mapping.rules.
#include <gtest/gtest.h>
#include <openssl/objects.h>
#include <openssl/x509.h>

#include <string>

#include "net/tls/internal.h"
#include "net/tls/tls.h"

namespace samsa::net::tls {
namespace {

// ---- subject_rfc2253 ----

struct NameBuilder {
  X509_NAME* name = X509_NAME_new();
  ~NameBuilder() { X509_NAME_free(name); }
  // Appends an attribute as a new RDN, or to the last RDN (a multi-valued one).
  NameBuilder& add(const char* field, const std::string& value, bool new_rdn = true) {
    X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8,
                               reinterpret_cast<const unsigned char*>(value.data()),
                               static_cast<int>(value.size()), -1, new_rdn ? 0 : -1);
    return *this;
  }
};

TEST(SubjectRfc2253, SimpleNameMostSpecificFirst) {
  NameBuilder b;
  b.add("C", "US").add("O", "samsa").add("OU", "eng").add("CN", "alice");
  EXPECT_EQ(internal::subject_rfc2253(b.name), "CN=alice,OU=eng,O=samsa,C=US");
}

TEST(SubjectRfc2253, KeywordsJavaKnows) {
  NameBuilder b;
  b.add("DC", "com").add("DC", "example").add("L", "Paris").add("ST", "IDF");
  b.add("street", "1 rue X").add("UID", "u42").add("CN", "bob");
  EXPECT_EQ(internal::subject_rfc2253(b.name),
            "CN=bob,UID=u42,STREET=1 rue X,ST=IDF,L=Paris,DC=example,DC=com");
}

TEST(SubjectRfc2253, OtherAttributesAsOidAndDerHex) {
  NameBuilder b;
  b.add("O", "samsa").add("emailAddress", "a@b.c").add("CN", "carol");
  // emailAddress is an IA5String: tag 0x16, length 5.
  EXPECT_EQ(internal::subject_rfc2253(b.name),
            "CN=carol,1.2.840.113549.1.9.1=#16056140622e63,O=samsa");
}

TEST(SubjectRfc2253, Escaping) {
  NameBuilder b;
  b.add("O", "a,b+c=d").add("OU", "<x>;\"q\"\\").add("CN", " #lead and trail ");
  EXPECT_EQ(internal::subject_rfc2253(b.name),
            "CN=\\ \\#lead and trail\\ ,OU=\\<x\\>\\;\\\"q\\\"\\\\,O=a\\,b\\+c\\=d");
}

TEST(SubjectRfc2253, MultiValuedRdnKeepsItsOrder) {
  NameBuilder b;
  b.add("O", "samsa").add("OU", "eng").add("CN", "dave", false);
  EXPECT_EQ(internal::subject_rfc2253(b.name), "OU=eng+CN=dave,O=samsa");
}

TEST(SubjectRfc2253, Utf8AsIs) {
  NameBuilder b;
  b.add("CN", "Zoë");
  EXPECT_EQ(internal::subject_rfc2253(b.name), "CN=Zoë");
}

// ---- PrincipalMapper ----

PrincipalMapper parse_ok(std::string_view rules) {
  std::string error;
  PrincipalMapper m = PrincipalMapper::parse(rules, &error);
  EXPECT_TRUE(m.ok()) << rules << ": " << error;
  EXPECT_EQ(error, "");
  return m;
}

TEST(PrincipalMapper, DefaultKeepsTheName) {
  PrincipalMapper m;
  EXPECT_TRUE(m.ok());
  EXPECT_EQ(m.map("CN=alice,OU=eng"), "CN=alice,OU=eng");
  EXPECT_EQ(parse_ok("DEFAULT").map("CN=x"), "CN=x");
}

TEST(PrincipalMapper, KafkaDocumentationExample) {
  PrincipalMapper m = parse_ok(
      "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
      "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
      "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,"
      "DEFAULT");
  EXPECT_EQ(m.map("CN=kafka-broker,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown"),
            "kafka-broker");
  EXPECT_EQ(m.map("CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Cupertino,ST=CA,C=US"),
            "duke@javasoft");
  EXPECT_EQ(m.map("OU=Eng,CN=Alice.Smith,O=x"), "alice.smith");
  EXPECT_EQ(m.map("O=nobody"), "O=nobody");
}

TEST(PrincipalMapper, UpperCaseAndWhitespaceBetweenRules) {
  PrincipalMapper m = parse_ok("  RULE:^CN=([^,]*),.*$/$1/U ,\n DEFAULT  ");
  EXPECT_EQ(m.map("CN=alice,O=x"), "ALICE");
  EXPECT_EQ(m.map("O=x"), "O=x");
}

TEST(PrincipalMapper, FirstMatchingRuleWins) {
  PrincipalMapper m = parse_ok("RULE:^CN=admin,.*$/root/,RULE:^CN=([^,]*),.*$/user-$1/");
  EXPECT_EQ(m.map("CN=admin,O=x"), "root");
  EXPECT_EQ(m.map("CN=bob,O=x"), "user-bob");
}

TEST(PrincipalMapper, NoRuleMatches) {
  PrincipalMapper m = parse_ok("RULE:^CN=([^,]*),O=samsa$/$1/");
  EXPECT_EQ(m.apply("CN=bob,O=other"), std::nullopt);
  EXPECT_EQ(m.map("CN=bob,O=other"), "CN=bob,O=other") << "the DN as it is";
  EXPECT_EQ(m.apply("CN=bob,O=samsa"), "bob");
  // The pattern must match the whole DN.
  EXPECT_EQ(parse_ok("RULE:CN=bob/x/").apply("CN=bob,O=samsa"), std::nullopt);
}

TEST(PrincipalMapper, EscapesAndBackReferences) {
  // "\/" in a pattern is a slash; "\," keeps a comma; "\$" in a replacement is a dollar.
  PrincipalMapper m = parse_ok("RULE:^CN=([^,]*)\\/([^,]*),.*$/$2\\$$1/");
  EXPECT_EQ(m.map("CN=team/ops,O=x"), "ops$team");
  // $4 with three groups stays literal; $12 with two groups is $1 then '2'; $0 is the DN.
  EXPECT_EQ(parse_ok("RULE:^(a)(b)(c)$/$4-$3/").map("abc"), "$4-c");
  EXPECT_EQ(parse_ok("RULE:^(a)(b)$/$12/").map("ab"), "a2");
  EXPECT_EQ(parse_ok("RULE:^CN=(.*)$/[$0]/").map("CN=z"), "[CN=z]");
}

TEST(PrincipalMapper, ReplaceAllLikeKafka) {
  // Kafka applies the replacement with String.replaceAll: a pattern that can also match the
  // empty string at the end of the DN replaces twice.
  EXPECT_EQ(parse_ok("RULE:.*/x/").map("abc"), "xx");
  EXPECT_EQ(parse_ok("RULE:^.*$/x/").map("abc"), "x");
}

TEST(PrincipalMapper, EmptyRulesAreIgnored) {
  PrincipalMapper m = parse_ok(",, RULE:^(.*)$/<$1>/ ,,");
  EXPECT_EQ(m.map("q"), "<q>");
  for (const char* empty : {"", "  ", " , ,"}) {
    EXPECT_EQ(parse_ok(empty).apply("CN=a"), "CN=a") << "an empty setting is DEFAULT";
  }
}

TEST(PrincipalMapper, BadSyntax) {
  for (const char* rules :
       {"RULE:^CN=(.*)$/$1", "RULE:^CN=(.*)$", "RULE:a/b/Lx", "DEFAULTX", "DEFAULT L", "rule:a/b/",
        "RULE:a/b/,garbage", "RULE:(unclosed/x/", "RULE:a/b/c/d/"}) {
    std::string error;
    PrincipalMapper m = PrincipalMapper::parse(rules, &error);
    EXPECT_FALSE(m.ok()) << rules;
    EXPECT_EQ(error.rfind("ssl.principal.mapping.rules: invalid", 0), 0u) << rules << ": " << error;
  }
}

TEST(PrincipalMapper, LongDnMatchesDefaultOnly) {
  std::string dn = "CN=" + std::string(20000, 'a');
  PrincipalMapper m = parse_ok("RULE:^CN=(.*)$/$1/,DEFAULT");
  EXPECT_EQ(m.map(dn), dn);
}

}  // namespace
}  // namespace samsa::net::tls
