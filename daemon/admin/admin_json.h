// The JSON of the admin socket protocol (DESIGN.md decision 11), shared by samsad and samsactl:
// a small value type, a parser that bounds nesting (a hostile line cannot exhaust the stack)
// and a one-line serializer. Objects keep insertion order so answers read as they were built.
#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace samsa::daemon::json {

class Value {
 public:
  enum class Type : std::uint8_t { null, boolean, integer, number, string, array, object };
  using Members = std::vector<std::pair<std::string, Value>>;

  Value() = default;
  Value(std::nullptr_t) {}
  Value(bool b) : type_(Type::boolean), b_(b) {}
  Value(int i) : type_(Type::integer), i_(i) {}
  Value(long i) : type_(Type::integer), i_(i) {}
  Value(long long i) : type_(Type::integer), i_(i) {}
  Value(unsigned i) : type_(Type::integer), i_(i) {}
  Value(unsigned long i) : type_(Type::integer), i_(static_cast<std::int64_t>(i)) {}
  Value(unsigned long long i) : type_(Type::integer), i_(static_cast<std::int64_t>(i)) {}
  Value(double d) : type_(Type::number), d_(d) {}
  Value(std::string s) : type_(Type::string), s_(std::move(s)) {}
  Value(std::string_view s) : type_(Type::string), s_(s) {}
  Value(const char* s) : type_(Type::string), s_(s) {}

  static Value array() {
    Value v;
    v.type_ = Type::array;
    return v;
  }
  static Value object() {
    Value v;
    v.type_ = Type::object;
    return v;
  }

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::null; }
  bool is_bool() const { return type_ == Type::boolean; }
  bool is_int() const { return type_ == Type::integer; }
  bool is_number() const { return type_ == Type::integer || type_ == Type::number; }
  bool is_string() const { return type_ == Type::string; }
  bool is_array() const { return type_ == Type::array; }
  bool is_object() const { return type_ == Type::object; }

  bool as_bool() const { return b_; }
  std::int64_t as_int() const { return type_ == Type::number ? static_cast<std::int64_t>(d_) : i_; }
  double as_double() const { return type_ == Type::integer ? static_cast<double>(i_) : d_; }
  const std::string& as_string() const { return s_; }
  const std::vector<Value>& items() const { return a_; }
  std::vector<Value>& items() { return a_; }
  const Members& members() const { return o_; }

  // Object member lookup (nullptr if absent or not an object).
  const Value* find(std::string_view key) const;
  // Object member, inserted as null if absent (turns a null value into an object).
  Value& operator[](std::string_view key);
  // Appends to an array (turns a null value into an array).
  Value& push(Value v);
  std::size_t size() const { return type_ == Type::array ? a_.size() : o_.size(); }

  // Compact, one line, no trailing newline.
  std::string dump() const;
  void dump_to(std::string& out) const;

 private:
  Type type_ = Type::null;
  bool b_ = false;
  std::int64_t i_ = 0;
  double d_ = 0;
  std::string s_;
  std::vector<Value> a_;
  Members o_;
};

// Parses one JSON text (RFC 8259), with at most max_depth nested arrays/objects. Errors say
// what and at which byte.
std::expected<Value, std::string> parse(std::string_view text, int max_depth = 32);

// Appends s as a JSON string literal (quoted, escaped).
void quote_to(std::string& out, std::string_view s);

// An array of ids (replicas, ISR, brokers).
Value int_array(const std::vector<std::int32_t>& v);

}  // namespace samsa::daemon::json
