// Kafka's sasl.jaas.config values: `<class> <flag> (<name>=<value>)*;`, tokenized the way
// Kafka's JaasConfig sets up java.io.StreamTokenizer, and PLAIN's user_<name> options.
#include <string>
#include <utility>
#include <vector>

#include "net/sasl/sasl.h"

namespace samsa::net::sasl {

namespace {

struct Token {
  enum Kind { eof, word, quoted, semicolon, equals, bad } kind = eof;
  std::string text;  // word and quoted only
  bool has_value() const { return kind == word || kind == quoted; }
};

// Whitespace is every byte 0..32; ';' and '=' stand alone; '"' and '\'' quote; '/' starts a
// comment; every other byte (0x80 and up included: UTF-8 passes through) is part of a word.
bool word_byte(unsigned char c) {
  return c > 32 && c != ';' && c != '=' && c != '"' && c != '\'' && c != '/';
}

class Tokenizer {
 public:
  explicit Tokenizer(std::string_view in) : in_(in) {}

  Token next() {
    if (!skip_blanks_and_comments()) return {Token::bad, "Unterminated comment in JAAS config"};
    if (pos_ >= in_.size()) return {};
    const char c = in_[pos_];
    if (c == ';' || c == '=') {
      ++pos_;
      return {c == ';' ? Token::semicolon : Token::equals, {}};
    }
    if (c == '"' || c == '\'') return quoted(c);
    const std::size_t start = pos_;
    while (pos_ < in_.size() && word_byte(static_cast<unsigned char>(in_[pos_])))
      ++pos_;
    return {Token::word, std::string(in_.substr(start, pos_ - start))};
  }

 private:
  // False for a "/*" without its "*/".
  bool skip_blanks_and_comments() {
    while (pos_ < in_.size()) {
      const auto c = static_cast<unsigned char>(in_[pos_]);
      if (c <= 32) {
        ++pos_;
      } else if (c == '/' && pos_ + 1 < in_.size() && in_[pos_ + 1] == '*') {
        const std::size_t end = in_.find("*/", pos_ + 2);
        if (end == std::string_view::npos) return false;
        pos_ = end + 2;
      } else if (c == '/') {
        // "//" and a lone '/' (a comment character) both run to the end of the line.
        while (pos_ < in_.size() && in_[pos_] != '\n' && in_[pos_] != '\r')
          ++pos_;
      } else {
        return true;
      }
    }
    return true;
  }

  // Java's StreamTokenizer escapes: \a \b \f \n \r \t \v, octal \0..\377, and a backslash
  // before anything else stands for that character. Unlike Java, a string left open at the
  // end of a line or of the input is an error rather than silently closed.
  Token quoted(char quote) {
    ++pos_;
    std::string out;
    while (pos_ < in_.size() && in_[pos_] != quote && in_[pos_] != '\n' && in_[pos_] != '\r') {
      if (in_[pos_] != '\\') {
        out += in_[pos_++];
        continue;
      }
      if (++pos_ >= in_.size()) break;
      const char e = in_[pos_];
      if (e >= '0' && e <= '7') {
        append_code_point(out, octal_escape());
        continue;
      }
      ++pos_;
      out += unescape(e);
    }
    if (pos_ >= in_.size() || in_[pos_] != quote)
      return {Token::bad, "Unterminated quoted string in JAAS config"};
    ++pos_;
    return {Token::quoted, std::move(out)};
  }

  static char unescape(char e) {
    constexpr std::string_view from = "abfnrtv";
    constexpr std::string_view to = "\a\b\f\n\r\t\v";
    const std::size_t i = from.find(e);
    return i == std::string_view::npos ? e : to[i];
  }

  // Up to three octal digits (three only when the first is 0..3), as Java reads them.
  unsigned octal_escape() {
    const char first = in_[pos_];
    unsigned v = static_cast<unsigned>(first - '0');
    ++pos_;
    const auto octal = [&] { return pos_ < in_.size() && in_[pos_] >= '0' && in_[pos_] <= '7'; };
    if (!octal()) return v;
    v = v * 8 + static_cast<unsigned>(in_[pos_++] - '0');
    if (!octal() || first > '3') return v;
    return v * 8 + static_cast<unsigned>(in_[pos_++] - '0');
  }

  // Java holds the escape as a char (U+0000..U+00FF); the config is UTF-8.
  static void append_code_point(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string_view in_;
  std::size_t pos_ = 0;
};

std::optional<std::string> control_flag(const std::string& flag) {
  std::string upper = flag;
  for (char& c : upper)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  for (const char* known : {"REQUIRED", "REQUISITE", "SUFFICIENT", "OPTIONAL"})
    if (upper == known) return upper;
  return std::nullopt;
}

bool fail(std::string& error, std::string text) {
  error = std::move(text);
  return false;
}

// One entry, its first token (the login module) already read. Kafka's messages.
bool parse_entry(Tokenizer& tok, Token module, JaasEntry& entry, std::string& error) {
  if (!module.has_value() || module.text.empty())
    return fail(error, "Login module not specified in JAAS config");
  entry.login_module = std::move(module.text);
  Token flag = tok.next();
  if (flag.kind == Token::bad) return fail(error, flag.text);
  if (flag.kind == Token::eof)
    return fail(error, "Login module control flag not specified in JAAS config");
  if (!flag.has_value())
    return fail(error, "Login module control flag is not available in the JAAS config");
  const auto f = control_flag(flag.text);
  if (!f)
    return fail(error, "Invalid login module control flag '" + flag.text + "' in JAAS config");
  entry.control_flag = *f;
  Token t = tok.next();
  for (; t.kind != Token::eof && t.kind != Token::semicolon; t = tok.next()) {
    if (t.kind == Token::bad) return fail(error, t.text);
    // Java's sval: null for a token that is not a word or a quoted string.
    const std::string key = t.has_value() ? t.text : "null";
    Token eq = tok.next();
    Token value = eq.kind == Token::equals ? tok.next() : Token{};
    if (eq.kind == Token::bad) return fail(error, eq.text);
    if (value.kind == Token::bad) return fail(error, value.text);
    if (!t.has_value() || !value.has_value())
      return fail(error, "Value not specified for key '" + key + "' in JAAS config");
    entry.options.insert_or_assign(key, std::move(value.text));
  }
  if (t.kind != Token::semicolon)
    return fail(error, "JAAS config entry not terminated by semi-colon");
  return true;
}

void set_error(std::string* out, std::string text) {
  if (out != nullptr) *out = std::move(text);
}

}  // namespace

JaasEntry parse_jaas(std::string_view jaas, std::string* error) {
  Tokenizer tok(jaas);
  std::vector<JaasEntry> entries;
  std::string why;
  for (Token t = tok.next(); t.kind != Token::eof; t = tok.next()) {
    if (t.kind == Token::bad) why = t.text;
    JaasEntry entry;
    if (!why.empty() || !parse_entry(tok, std::move(t), entry, why)) {
      set_error(error, std::move(why));
      return {};
    }
    entries.push_back(std::move(entry));
  }
  if (entries.empty()) {
    set_error(error, "Login module not specified in JAAS config");
    return {};
  }
  if (entries.size() != 1) {
    set_error(error, "JAAS config property contains " + std::to_string(entries.size()) +
                         " login modules, should be 1 module");
    return {};
  }
  set_error(error, {});
  return std::move(entries.front());
}

PlainUsers parse_plain_jaas(std::string_view jaas, std::string* error) {
  std::string why;
  JaasEntry entry = parse_jaas(jaas, &why);
  if (why.empty() && entry.login_module != kPlainLoginModule) {
    why = "Login module '" + entry.login_module + "' in JAAS config is not " +
          std::string(kPlainLoginModule);
  }
  if (!why.empty()) {
    set_error(error, std::move(why));
    return {};
  }
  PlainUsers out;
  for (auto& [key, value] : entry.options) {
    if (key == "username") {
      out.username = std::move(value);
    } else if (key == "password") {
      out.password = std::move(value);
    } else if (key.size() > 5 && key.compare(0, 5, "user_") == 0) {
      out.users.insert_or_assign(key.substr(5), std::move(value));
    }
  }
  set_error(error, {});
  return out;
}

}  // namespace samsa::net::sasl
