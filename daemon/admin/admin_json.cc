#include "daemon/admin/admin_json.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace samsa::daemon::json {

const Value* Value::find(std::string_view key) const {
  if (type_ != Type::object) return nullptr;
  for (const auto& [k, v] : o_)
    if (k == key) return &v;
  return nullptr;
}

Value& Value::operator[](std::string_view key) {
  if (type_ == Type::null) type_ = Type::object;
  for (auto& [k, v] : o_)
    if (k == key) return v;
  o_.emplace_back(std::string(key), Value());
  return o_.back().second;
}

Value& Value::push(Value v) {
  if (type_ == Type::null) type_ = Type::array;
  a_.push_back(std::move(v));
  return a_.back();
}

namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 if it is not one (overlong forms,
// surrogates and code points above U+10FFFF included).
std::size_t utf8_len(std::string_view s, std::size_t i) {
  auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned c = b(i);
  std::size_t n;
  std::uint32_t cp;
  if (c < 0x80) return 1;
  if ((c & 0xe0) == 0xc0) {
    n = 2;
    cp = c & 0x1f;
  } else if ((c & 0xf0) == 0xe0) {
    n = 3;
    cp = c & 0x0f;
  } else if ((c & 0xf8) == 0xf0) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3f);
  }
  static constexpr std::uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000)) return 0;
  return n;
}

}  // namespace

// Answers must be valid JSON even when they quote what a client sent: bytes that are not
// UTF-8 become U+FFFD.
void quote_to(std::string& out, std::string_view s) {
  out.push_back('"');
  for (std::size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      std::size_t n = utf8_len(s, i);
      if (n == 0) {
        out += "\xef\xbf\xbd";
        ++i;
      } else {
        out.append(s.substr(i, n));
        i += n;
      }
      continue;
    }
    ++i;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

void Value::dump_to(std::string& out) const {
  switch (type_) {
    case Type::null:
      out += "null";
      return;
    case Type::boolean:
      out += b_ ? "true" : "false";
      return;
    case Type::integer: {
      char buf[24];
      auto r = std::to_chars(buf, buf + sizeof buf, i_);
      out.append(buf, r.ptr);
      return;
    }
    case Type::number: {
      if (!std::isfinite(d_)) {
        out += "null";  // JSON has no NaN or infinity
        return;
      }
      char buf[32];
      auto r = std::to_chars(buf, buf + sizeof buf, d_);
      out.append(buf, r.ptr);
      return;
    }
    case Type::string:
      quote_to(out, s_);
      return;
    case Type::array:
      out.push_back('[');
      for (std::size_t i = 0; i < a_.size(); ++i) {
        if (i) out.push_back(',');
        a_[i].dump_to(out);
      }
      out.push_back(']');
      return;
    case Type::object:
      out.push_back('{');
      for (std::size_t i = 0; i < o_.size(); ++i) {
        if (i) out.push_back(',');
        quote_to(out, o_[i].first);
        out.push_back(':');
        o_[i].second.dump_to(out);
      }
      out.push_back('}');
      return;
  }
}

std::string Value::dump() const {
  std::string out;
  dump_to(out);
  return out;
}

namespace {

class Parser {
 public:
  Parser(std::string_view t, int max_depth) : t_(t), max_depth_(max_depth) {}

  std::expected<Value, std::string> run() {
    skip_ws();
    Value v;
    if (!value(v, 0)) return std::unexpected(error_);
    skip_ws();
    if (i_ != t_.size()) return std::unexpected(at("trailing characters after the value"));
    return v;
  }

 private:
  std::string at(std::string_view what) {
    return std::string(what) + " at byte " + std::to_string(i_);
  }
  bool fail(std::string_view what) {
    if (error_.empty()) error_ = at(what);
    return false;
  }
  void skip_ws() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\t' || t_[i_] == '\n' || t_[i_] == '\r'))
      ++i_;
  }
  bool literal(std::string_view word) {
    if (t_.substr(i_, word.size()) != word) return fail("invalid literal");
    i_ += word.size();
    return true;
  }

  bool value(Value& out, int depth) {
    if (i_ >= t_.size()) return fail("unexpected end of input");
    char c = t_[i_];
    switch (c) {
      case 'n':
        out = Value();
        return literal("null");
      case 't':
        out = Value(true);
        return literal("true");
      case 'f':
        out = Value(false);
        return literal("false");
      case '"': {
        std::string s;
        if (!string(s)) return false;
        out = Value(std::move(s));
        return true;
      }
      case '[':
        return array(out, depth + 1);
      case '{':
        return object(out, depth + 1);
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return number(out);
        return fail("unexpected character");
    }
  }

  bool array(Value& out, int depth) {
    if (depth > max_depth_) return fail("nesting too deep");
    ++i_;  // '['
    out = Value::array();
    skip_ws();
    if (i_ < t_.size() && t_[i_] == ']') {
      ++i_;
      return true;
    }
    for (;;) {
      skip_ws();
      Value v;
      if (!value(v, depth)) return false;
      out.push(std::move(v));
      skip_ws();
      if (i_ >= t_.size()) return fail("unterminated array");
      if (t_[i_] == ',') {
        ++i_;
        continue;
      }
      if (t_[i_] == ']') {
        ++i_;
        return true;
      }
      return fail("expected ',' or ']'");
    }
  }

  bool object(Value& out, int depth) {
    if (depth > max_depth_) return fail("nesting too deep");
    ++i_;  // '{'
    out = Value::object();
    skip_ws();
    if (i_ < t_.size() && t_[i_] == '}') {
      ++i_;
      return true;
    }
    for (;;) {
      skip_ws();
      if (i_ >= t_.size() || t_[i_] != '"') return fail("expected a member name");
      std::string key;
      if (!string(key)) return false;
      skip_ws();
      if (i_ >= t_.size() || t_[i_] != ':') return fail("expected ':'");
      ++i_;
      skip_ws();
      Value v;
      if (!value(v, depth)) return false;
      out[key] = std::move(v);  // a repeated name keeps the last value
      skip_ws();
      if (i_ >= t_.size()) return fail("unterminated object");
      if (t_[i_] == ',') {
        ++i_;
        continue;
      }
      if (t_[i_] == '}') {
        ++i_;
        return true;
      }
      return fail("expected ',' or '}'");
    }
  }

  static void put_utf8(std::string& s, std::uint32_t cp) {
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      s.push_back(static_cast<char>(0xc0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      s.push_back(static_cast<char>(0xe0 | (cp >> 12)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      s.push_back(static_cast<char>(0xf0 | (cp >> 18)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }

  bool hex4(std::uint32_t& out) {
    if (i_ + 4 > t_.size()) return fail("truncated \\u escape");
    out = 0;
    for (int k = 0; k < 4; ++k) {
      char c = t_[i_++];
      out <<= 4;
      if (c >= '0' && c <= '9') {
        out |= static_cast<std::uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        out |= static_cast<std::uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        out |= static_cast<std::uint32_t>(c - 'A' + 10);
      } else {
        return fail("bad \\u escape");
      }
    }
    return true;
  }

  bool string(std::string& s) {
    ++i_;  // opening quote
    for (;;) {
      if (i_ >= t_.size()) return fail("unterminated string");
      auto c = static_cast<unsigned char>(t_[i_]);
      if (c == '"') {
        ++i_;
        return true;
      }
      if (c < 0x20) return fail("control character in string");
      if (c != '\\') {
        s.push_back(static_cast<char>(c));
        ++i_;
        continue;
      }
      if (++i_ >= t_.size()) return fail("unterminated escape");
      char e = t_[i_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          s.push_back(e);
          break;
        case 'b':
          s.push_back('\b');
          break;
        case 'f':
          s.push_back('\f');
          break;
        case 'n':
          s.push_back('\n');
          break;
        case 'r':
          s.push_back('\r');
          break;
        case 't':
          s.push_back('\t');
          break;
        case 'u': {
          std::uint32_t cp;
          if (!hex4(cp)) return false;
          if (cp >= 0xd800 && cp < 0xdc00) {
            std::uint32_t lo;
            if (t_.substr(i_, 2) != "\\u") return fail("lone surrogate");
            i_ += 2;
            if (!hex4(lo)) return false;
            if (lo < 0xdc00 || lo > 0xdfff) return fail("bad surrogate pair");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          } else if (cp >= 0xdc00 && cp < 0xe000) {
            return fail("lone surrogate");
          }
          put_utf8(s, cp);
          break;
        }
        default:
          return fail("bad escape");
      }
    }
  }

  bool number(Value& out) {
    const std::size_t start = i_;
    if (t_[i_] == '-') ++i_;
    if (i_ >= t_.size() || t_[i_] < '0' || t_[i_] > '9') return fail("bad number");
    if (t_[i_] == '0') {
      ++i_;
    } else {
      while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9')
        ++i_;
    }
    bool integral = true;
    if (i_ < t_.size() && t_[i_] == '.') {
      integral = false;
      ++i_;
      if (i_ >= t_.size() || t_[i_] < '0' || t_[i_] > '9') return fail("bad number");
      while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9')
        ++i_;
    }
    if (i_ < t_.size() && (t_[i_] == 'e' || t_[i_] == 'E')) {
      integral = false;
      ++i_;
      if (i_ < t_.size() && (t_[i_] == '+' || t_[i_] == '-')) ++i_;
      if (i_ >= t_.size() || t_[i_] < '0' || t_[i_] > '9') return fail("bad number");
      while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9')
        ++i_;
    }
    const char* b = t_.data() + start;
    const char* e = t_.data() + i_;
    if (integral) {
      std::int64_t v;
      auto r = std::from_chars(b, e, v);
      if (r.ec == std::errc() && r.ptr == e) {
        out = Value(static_cast<long long>(v));
        return true;
      }
    }
    double d;
    auto r = std::from_chars(b, e, d);
    if (r.ec != std::errc() || r.ptr != e) return fail("number out of range");
    out = Value(d);
    return true;
  }

  std::string_view t_;
  std::size_t i_ = 0;
  int max_depth_;
  std::string error_;
};

}  // namespace

std::expected<Value, std::string> parse(std::string_view text, int max_depth) {
  return Parser(text, max_depth).run();
}

Value int_array(const std::vector<std::int32_t>& v) {
  Value a = Value::array();
  for (std::int32_t x : v)
    a.push(x);
  return a;
}

}  // namespace samsa::daemon::json
