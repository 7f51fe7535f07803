// RFC 5802's message syntax: saslname escaping, nonces, attributes, extensions.
#include "net/sasl/internal.h"

namespace samsa::net::sasl::detail {

namespace {

bool continuation(unsigned char c) {
  return (c & 0xC0) == 0x80;
}

// Length of the well-formed UTF-8 sequence starting at s[i] (RFC 3629's table), 0 if none.
std::size_t utf8_sequence(std::string_view s, std::size_t i) {
  const auto at = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = at(0);
  const std::size_t left = s.size() - i;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return left >= 2 && continuation(at(1)) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (left < 3 || !continuation(at(1)) || !continuation(at(2))) return 0;
    if (c == 0xE0 && at(1) < 0xA0) return 0;  // overlong
    if (c == 0xED && at(1) > 0x9F) return 0;  // surrogates
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (left < 4 || !continuation(at(1)) || !continuation(at(2)) || !continuation(at(3))) return 0;
    if (c == 0xF0 && at(1) < 0x90) return 0;  // overlong
    if (c == 0xF4 && at(1) > 0x8F) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

bool ascii_letter(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

}  // namespace

bool valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_sequence(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string escape_saslname(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (char c : name) {
    if (c == ',')
      out += "=2C";
    else if (c == '=')
      out += "=3D";
    else
      out += c;
  }
  return out;
}

std::optional<std::string> unescape_saslname(std::string_view saslname) {
  if (saslname.empty()) return std::nullopt;
  std::string out;
  out.reserve(saslname.size());
  for (std::size_t i = 0; i < saslname.size(); ++i) {
    const char c = saslname[i];
    if (c == '\0' || c == ',') return std::nullopt;
    if (c != '=') {
      out += c;
      continue;
    }
    const std::string_view code = saslname.substr(i + 1, 2);
    if (code == "2C")
      out += ',';
    else if (code == "3D")
      out += '=';
    else
      return std::nullopt;
    i += 2;
  }
  if (!valid_utf8(out)) return std::nullopt;
  return out;
}

bool valid_nonce(std::string_view nonce) {
  if (nonce.empty()) return false;
  for (char c : nonce)
    if (c < 0x21 || c > 0x7E || c == ',') return false;
  return true;
}

std::vector<std::string_view> split_attributes(std::string_view message) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = message.find(',', start);
    if (comma == std::string_view::npos) {
      out.push_back(message.substr(start));
      return out;
    }
    out.push_back(message.substr(start, comma - start));
    start = comma + 1;
  }
}

std::optional<std::string_view> attribute_value(std::string_view field, char name) {
  if (field.size() < 2 || field[0] != name || field[1] != '=') return std::nullopt;
  return field.substr(2);
}

std::optional<Extension> parse_extension(std::string_view field) {
  const std::size_t eq = field.find('=');
  if (eq == 0 || eq == std::string_view::npos || eq + 1 == field.size()) return std::nullopt;
  Extension e{field.substr(0, eq), field.substr(eq + 1)};
  for (char c : e.name)
    if (!ascii_letter(c)) return std::nullopt;
  for (char c : e.value) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x01 || b > 0x7F) return std::nullopt;
  }
  return e;
}

std::optional<std::int32_t> parse_iterations(std::string_view digits) {
  if (digits.empty() || digits.size() > 10) return std::nullopt;
  std::int64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  if (v > INT32_MAX) return std::nullopt;
  return static_cast<std::int32_t>(v);
}

}  // namespace samsa::net::sasl::detail
