// net::tls principals: the peer certificate's subject as Kafka (Java's X500Principal) prints it,
// and Kafka's ssl.principal.mapping.rules applied to it.
#include <openssl/asn1.h>
#include <openssl/objects.h>
#include <openssl/x509.h>

#include <regex>

#include "net/tls/internal.h"
#include "net/tls/tls.h"

namespace samsa::net::tls {

// ---- The subject in RFC 2253 form ----

namespace internal {
namespace {

// The attributes Java's RFC 2253 printer names by keyword; the rest go by dotted OID.
const char* rfc2253_keyword(int nid) {
  switch (nid) {
    case NID_commonName:
      return "CN";
    case NID_countryName:
      return "C";
    case NID_localityName:
      return "L";
    case NID_stateOrProvinceName:
      return "ST";
    case NID_organizationName:
      return "O";
    case NID_organizationalUnitName:
      return "OU";
    case NID_streetAddress:
      return "STREET";
    case NID_domainComponent:
      return "DC";
    case NID_userId:
      return "UID";
    default:
      return nullptr;
  }
}

bool is_string_type(int type) {
  switch (type) {
    case V_ASN1_PRINTABLESTRING:
    case V_ASN1_T61STRING:
    case V_ASN1_IA5STRING:
    case V_ASN1_GENERALSTRING:
    case V_ASN1_BMPSTRING:
    case V_ASN1_UTF8STRING:
      return true;
    default:
      return false;
  }
}

// '#' and the hex of the value's DER encoding (tag, length, contents).
std::string hex_value(const ASN1_STRING* value) {
  Owned<ASN1_TYPE> any(ASN1_TYPE_new());
  unsigned char* der = nullptr;
  int len = -1;
  if (any && ASN1_TYPE_set1(any.get(), ASN1_STRING_type(value), value) == 1) {
    len = i2d_ASN1_TYPE(any.get(), &der);
  }
  std::string out = "#";
  static const char kHex[] = "0123456789abcdef";
  for (int i = 0; i < len; ++i) {
    out += kHex[der[i] >> 4];
    out += kHex[der[i] & 0xf];
  }
  OPENSSL_free(der);
  return out;
}

std::string escaped_value(const ASN1_STRING* value) {
  unsigned char* utf8 = nullptr;
  int len = ASN1_STRING_to_UTF8(&utf8, value);
  std::string text;
  for (int i = 0; i < len; ++i) {
    char c = static_cast<char>(utf8[i]);
    if (c == '\0') {
      text += "\\00";
      continue;
    }
    if (std::string_view(",=+<>#;\"\\").find(c) != std::string_view::npos) text += '\\';
    text += c;
  }
  OPENSSL_free(utf8);
  // Leading and trailing spaces (and CRs) are escaped one by one.
  std::size_t lead = 0;
  while (lead < text.size() && (text[lead] == ' ' || text[lead] == '\r'))
    ++lead;
  std::size_t trail = text.size();
  while (trail > lead && (text[trail - 1] == ' ' || text[trail - 1] == '\r'))
    --trail;
  std::string out;
  out.reserve(text.size() + 4);
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (i < lead || i >= trail) out += '\\';
    out += text[i];
  }
  return out;
}

std::string format_ava(const X509_NAME_ENTRY* entry) {
  const ASN1_OBJECT* object = X509_NAME_ENTRY_get_object(entry);
  const ASN1_STRING* value = X509_NAME_ENTRY_get_data(entry);
  const char* keyword = rfc2253_keyword(OBJ_obj2nid(object));
  std::string out;
  if (keyword != nullptr) {
    out = keyword;
  } else {
    char oid[128];
    int n = OBJ_obj2txt(oid, sizeof oid, object, 1);
    out.assign(oid, n > 0 ? std::min<std::size_t>(n, sizeof oid - 1) : 0);
  }
  out += '=';
  if (keyword == nullptr || !is_string_type(ASN1_STRING_type(value))) {
    out += hex_value(value);
  } else {
    out += escaped_value(value);
  }
  return out;
}

}  // namespace

std::string subject_rfc2253(const X509_NAME* name) {
  // Entries in encoding order, grouped into RDNs by their set number.
  std::vector<std::vector<const X509_NAME_ENTRY*>> rdns;
  int last_set = -1;
  for (int i = 0; i < X509_NAME_entry_count(name); ++i) {
    const X509_NAME_ENTRY* entry = X509_NAME_get_entry(name, i);
    int set = X509_NAME_ENTRY_set(entry);
    if (rdns.empty() || set != last_set) rdns.emplace_back();
    rdns.back().push_back(entry);
    last_set = set;
  }
  std::string out;
  for (auto rdn = rdns.rbegin(); rdn != rdns.rend(); ++rdn) {
    if (!out.empty()) out += ',';
    for (std::size_t j = 0; j < rdn->size(); ++j) {
      if (j > 0) out += '+';
      out += format_ava((*rdn)[j]);
    }
  }
  return out;
}

}  // namespace internal

// ---- ssl.principal.mapping.rules ----

namespace {

// Longer DNs are matched by DEFAULT only: std::regex recurses per character.
constexpr std::size_t kMaxRuleInput = 8 * 1024;

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}

// Up to the next unescaped '/', a backslash keeping the character after it; false at the end.
bool take_part(std::string_view s, std::size_t* i, std::string* out) {
  while (*i < s.size()) {
    char c = s[*i];
    if (c == '/') {
      ++*i;
      return true;
    }
    if (c == '\\' && *i + 1 < s.size()) {
      *out += c;
      ++*i;
      c = s[*i];
    }
    *out += c;
    ++*i;
  }
  return false;
}

std::string until_comma(std::string_view s, std::size_t from) {
  std::size_t end = s.find(',', from);
  return std::string(s.substr(from, end == std::string_view::npos ? s.size() - from : end - from));
}

// Java's replacement syntax: $n (the longest group number that exists), \x for a literal x;
// a $ naming no group stays as it is (Kafka escapes those).
void append_replacement(const std::string& replacement, const std::smatch& m, std::string* out) {
  const std::size_t groups = m.size() - 1;
  for (std::size_t i = 0; i < replacement.size(); ++i) {
    char c = replacement[i];
    if (c == '\\' && i + 1 < replacement.size()) {
      *out += replacement[++i];
      continue;
    }
    if (c != '$' || i + 1 >= replacement.size() || replacement[i + 1] < '0' ||
        replacement[i + 1] > '9') {
      *out += c;
      continue;
    }
    std::size_t group = static_cast<std::size_t>(replacement[i + 1] - '0');
    if (group > groups) {
      *out += c;  // "$4" with three groups: literal
      continue;
    }
    i += 1;
    while (i + 1 < replacement.size() && replacement[i + 1] >= '0' && replacement[i + 1] <= '9') {
      std::size_t longer = group * 10 + static_cast<std::size_t>(replacement[i + 1] - '0');
      if (longer > groups) break;
      group = longer;
      ++i;
    }
    if (m[group].matched) *out += m[group].str();
  }
}

}  // namespace

struct PrincipalMapper::Rule {
  bool is_default = true;
  std::regex pattern;
  std::string replacement;
  char fold = 0;  // 'L', 'U' or none
};

PrincipalMapper::PrincipalMapper() {
  rules_.emplace_back();
}
PrincipalMapper::~PrincipalMapper() = default;
PrincipalMapper::PrincipalMapper(const PrincipalMapper&) = default;
PrincipalMapper& PrincipalMapper::operator=(const PrincipalMapper&) = default;
PrincipalMapper::PrincipalMapper(PrincipalMapper&&) noexcept = default;
PrincipalMapper& PrincipalMapper::operator=(PrincipalMapper&&) noexcept = default;

PrincipalMapper PrincipalMapper::parse(std::string_view s, std::string* error) {
  PrincipalMapper m;
  m.rules_.clear();
  std::string scratch;
  if (error == nullptr) error = &scratch;
  auto bad = [&](std::string message) {
    *error = "ssl.principal.mapping.rules: " + message;
    m.rules_.clear();
    m.ok_ = false;
    return m;
  };
  std::size_t i = 0;
  for (;;) {
    while (i < s.size() && is_space(s[i]))
      ++i;
    if (i == s.size()) break;
    if (s[i] == ',') {  // an empty rule is ignored
      ++i;
      continue;
    }
    const std::size_t start = i;
    Rule rule;
    if (s.substr(i, 7) == "DEFAULT") {
      i += 7;
    } else if (s.substr(i, 5) == "RULE:") {
      i += 5;
      std::string pattern;
      if (!take_part(s, &i, &pattern) || !take_part(s, &i, &rule.replacement)) {
        return bad("invalid rule `" + until_comma(s, start) +
                   "`: expected RULE:pattern/replacement/");
      }
      if (i < s.size() && (s[i] == 'L' || s[i] == 'U')) rule.fold = s[i++];
      try {
        rule.pattern = std::regex(pattern, std::regex::ECMAScript);
      } catch (const std::regex_error& e) {
        return bad("invalid pattern `" + pattern + "`: " + e.what());
      }
      rule.is_default = false;
    } else {
      return bad("invalid rule `" + until_comma(s, start) + "`");
    }
    std::size_t end = i;
    while (i < s.size() && is_space(s[i]))
      ++i;
    if (i < s.size() && s[i] != ',') {
      return bad("invalid rule `" + until_comma(s, start) + "`, unmatched `" + until_comma(s, end) +
                 "`");
    }
    if (i < s.size()) ++i;
    m.rules_.push_back(std::move(rule));
  }
  // Nothing but spaces and commas: the setting's default, as when it is absent.
  if (m.rules_.empty()) m.rules_.emplace_back();
  error->clear();
  return m;
}

std::optional<std::string> PrincipalMapper::apply(std::string_view dn_view) const {
  const std::string dn(dn_view);
  for (const Rule& rule : rules_) {
    if (rule.is_default) return dn;
    if (dn.size() > kMaxRuleInput) continue;
    std::string out;
    try {
      if (!std::regex_match(dn, rule.pattern)) continue;
      // Kafka rewrites with replaceAll: every match of the pattern in the DN (the whole DN, and
      // an empty match at its end when the pattern allows one).
      std::size_t copied = 0;
      for (std::sregex_iterator it(dn.begin(), dn.end(), rule.pattern), end; it != end; ++it) {
        out.append(dn, copied, static_cast<std::size_t>(it->position()) - copied);
        append_replacement(rule.replacement, *it, &out);
        copied = static_cast<std::size_t>(it->position() + it->length());
      }
      out.append(dn, copied, std::string::npos);
    } catch (const std::regex_error&) {
      continue;  // too complex for std::regex: the rule does not apply
    }
    for (char& c : out) {
      if (rule.fold == 'L' && c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      if (rule.fold == 'U' && c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    }
    return out;
  }
  return std::nullopt;
}

std::string PrincipalMapper::map(std::string_view dn) const {
  std::optional<std::string> mapped = apply(dn);
  return mapped ? std::move(*mapped) : std::string(dn);
}

}  // namespace samsa::net::tls
