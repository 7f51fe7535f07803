#include "replication/quorum/quorum_state_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <limits>
#include <set>

#include "io/checkpoint.h"

namespace samsa::replication::quorum {
namespace {

// ---- a small strict JSON reader (the file is ours: one object, a few fields) ----

struct Json {
  enum class Kind : std::uint8_t { null, boolean, number, string, array, object };
  Kind kind = Kind::null;
  bool boolean = false;
  std::string text;  // a number's literal, or a string's value
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;
};

const char* kind_name(Json::Kind k) {
  switch (k) {
    case Json::Kind::null:
      return "null";
    case Json::Kind::boolean:
      return "a boolean";
    case Json::Kind::number:
      return "a number";
    case Json::Kind::string:
      return "a string";
    case Json::Kind::array:
      return "an array";
    case Json::Kind::object:
      return "an object";
  }
  return "?";
}

class JsonParser {
 public:
  explicit JsonParser(std::string_view s) : s_(s) {}

  // The whole text as one value; error() says where it is malformed otherwise.
  bool parse_document(Json& out) {
    if (!value(out, 0)) return false;
    skip_ws();
    if (pos_ != s_.size()) return fail("unexpected text after the JSON value");
    return true;
  }
  const std::string& error() const { return error_; }

 private:
  static constexpr int kMaxDepth = 8;  // the file nests two levels

  bool fail(std::string_view what) {
    if (error_.empty()) {
      error_ = pos_ >= s_.size()
                   ? "malformed JSON: ends early (truncated?) at byte " + std::to_string(pos_) +
                         ": " + std::string(what)
                   : "malformed JSON at byte " + std::to_string(pos_) + ": " + std::string(what);
    }
    return false;
  }
  void skip_ws() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }
  bool eat(char c) {
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return fail("unknown literal");
    pos_ += word.size();
    return true;
  }

  bool value(Json& out, int depth) {
    if (depth > kMaxDepth) return fail("nested too deeply");
    skip_ws();
    if (pos_ >= s_.size()) return fail("expected a value");
    const char c = s_[pos_];
    if (c == '{') return object(out, depth);
    if (c == '[') return array(out, depth);
    if (c == '"') {
      out.kind = Json::Kind::string;
      return string(out.text);
    }
    if (c == '-' || (c >= '0' && c <= '9')) return number(out);
    if (c == 't' || c == 'f') {
      out.kind = Json::Kind::boolean;
      out.boolean = c == 't';
      return literal(c == 't' ? "true" : "false");
    }
    if (c == 'n') {
      out.kind = Json::Kind::null;
      return literal("null");
    }
    return fail("expected a value");
  }

  bool object(Json& out, int depth) {
    out.kind = Json::Kind::object;
    ++pos_;  // '{'
    if (eat('}')) return true;
    do {
      skip_ws();
      std::string key;
      if (pos_ >= s_.size() || s_[pos_] != '"') return fail("expected a field name");
      if (!string(key)) return false;
      if (!eat(':')) return fail("expected ':'");
      Json v;
      if (!value(v, depth + 1)) return false;
      out.members.emplace_back(std::move(key), std::move(v));
    } while (eat(','));
    if (!eat('}')) return fail("expected ',' or '}'");
    return true;
  }

  bool array(Json& out, int depth) {
    out.kind = Json::Kind::array;
    ++pos_;  // '['
    if (eat(']')) return true;
    do {
      Json v;
      if (!value(v, depth + 1)) return false;
      out.items.push_back(std::move(v));
    } while (eat(','));
    if (!eat(']')) return fail("expected ',' or ']'");
    return true;
  }

  // Numbers keep their literal; whether one is a fitting integer is the field's question.
  bool number(Json& out) {
    out.kind = Json::Kind::number;
    const std::size_t start = pos_;
    if (s_[pos_] == '-') ++pos_;
    const std::size_t digits = pos_;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9')
      ++pos_;
    if (pos_ == digits) return fail("expected digits");
    while (pos_ < s_.size() &&
           (s_[pos_] == '.' || s_[pos_] == 'e' || s_[pos_] == 'E' || s_[pos_] == '+' ||
            s_[pos_] == '-' || (s_[pos_] >= '0' && s_[pos_] <= '9')))
      ++pos_;
    out.text = std::string(s_.substr(start, pos_ - start));
    return true;
  }

  bool string(std::string& out) {
    ++pos_;  // '"'
    while (pos_ < s_.size()) {
      const char c = s_[pos_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) break;
      const char e = s_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u':
          if (!unicode_escape(out)) return false;
          break;
        default:
          return fail("bad escape in a string");
      }
    }
    return fail("unterminated string");
  }

  // \uXXXX of the Basic Multilingual Plane, as UTF-8 (cluster ids are ASCII; this is only so a
  // valid file is never refused).
  bool unicode_escape(std::string& out) {
    if (s_.size() - pos_ < 4) return fail("short \\u escape");
    unsigned cp = 0;
    auto [p, ec] = std::from_chars(s_.data() + pos_, s_.data() + pos_ + 4, cp, 16);
    if (ec != std::errc{} || p != s_.data() + pos_ + 4) return fail("bad \\u escape");
    if (cp >= 0xd800 && cp <= 0xdfff) return fail("surrogate \\u escapes are not supported");
    pos_ += 4;
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
    return true;
  }

  std::string_view s_;
  std::size_t pos_ = 0;
  std::string error_;
};

void append_json_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += "\\u00";
      out += kHex[(c >> 4) & 0xf];
      out += kHex[c & 0xf];
    } else {
      out += c;
    }
  }
  out += '"';
}

// ---- the fields ----

class FieldReader {
 public:
  explicit FieldReader(std::string_view file) : file_(file) {}

  std::string error(std::string_view what) const {
    return std::string(file_) + ": " + std::string(what);
  }

  // An integer in [lo, hi]; "" or what is wrong.
  std::string integer(const Json& v, std::string_view name, std::int64_t lo, std::int64_t hi,
                      std::int64_t& out) const {
    if (v.kind != Json::Kind::number) {
      return error("field " + std::string(name) + " is " + kind_name(v.kind) +
                   ", expected an integer");
    }
    auto [p, ec] = std::from_chars(v.text.data(), v.text.data() + v.text.size(), out);
    if (ec == std::errc::result_out_of_range ||
        (ec == std::errc{} && p == v.text.data() + v.text.size() && (out < lo || out > hi))) {
      return error("field " + std::string(name) + " = " + v.text + " is out of range");
    }
    if (ec != std::errc{} || p != v.text.data() + v.text.size()) {
      return error("field " + std::string(name) + " = " + v.text + " is not an integer");
    }
    return {};
  }

 private:
  std::string_view file_;
};

constexpr std::int64_t kI32Min = std::numeric_limits<std::int32_t>::min();
constexpr std::int64_t kI32Max = std::numeric_limits<std::int32_t>::max();
constexpr std::int64_t kI64Max = std::numeric_limits<std::int64_t>::max();

std::string read_voters(const Json& v, const FieldReader& fr, std::vector<NodeId>& out) {
  if (v.kind != Json::Kind::array) {
    return fr.error(std::string("field currentVoters is ") + kind_name(v.kind) +
                    ", expected an array");
  }
  for (std::size_t i = 0; i < v.items.size(); ++i) {
    const Json& item = v.items[i];
    const std::string where = "currentVoters[" + std::to_string(i) + "]";
    if (item.kind != Json::Kind::object) {
      return fr.error(where + " is " + kind_name(item.kind) + ", expected an object");
    }
    if (item.members.size() != 1 || item.members[0].first != "voterId") {
      return fr.error(where + " must hold exactly the field voterId");
    }
    std::int64_t id = 0;
    if (auto e = fr.integer(item.members[0].second, where + ".voterId", kI32Min, kI32Max, id);
        !e.empty())
      return e;
    out.push_back(static_cast<NodeId>(id));
  }
  return {};
}

enum Field : std::uint8_t {
  kClusterId,
  kLeaderId,
  kLeaderEpoch,
  kVotedId,
  kAppliedOffset,
  kCurrentVoters,
  kDataVersion,
  kFieldCount
};
constexpr std::string_view kFieldNames[kFieldCount] = {
    "clusterId",     "leaderId",      "leaderEpoch", "votedId",
    "appliedOffset", "currentVoters", "data_version"};

// One member into s; "" or what is wrong.
std::string read_field(Field f, const Json& v, const FieldReader& fr, QuorumStateFile& s) {
  std::int64_t n = 0;
  std::string e;
  const std::string_view name = kFieldNames[f];
  switch (f) {
    case kClusterId:
      if (v.kind != Json::Kind::string) {
        return fr.error(std::string("field clusterId is ") + kind_name(v.kind) +
                        ", expected a string");
      }
      s.cluster_id = v.text;
      return {};
    case kLeaderId:
      e = fr.integer(v, name, kI32Min, kI32Max, n);
      s.state.leader = static_cast<NodeId>(n);
      return e;
    case kLeaderEpoch:
      e = fr.integer(v, name, kI32Min, kI32Max, n);
      s.state.epoch = static_cast<std::int32_t>(n);
      return e;
    case kVotedId:
      e = fr.integer(v, name, kI32Min, kI32Max, n);
      s.state.voted_for = static_cast<NodeId>(n);
      return e;
    case kAppliedOffset:
      e = fr.integer(v, name, std::numeric_limits<std::int64_t>::min(), kI64Max, n);
      s.applied_offset = n;
      return e;
    case kCurrentVoters:
      return read_voters(v, fr, s.voters);
    case kDataVersion:
      e = fr.integer(v, name, kI32Min, kI32Max, n);
      if (e.empty() && n != 0) {
        return fr.error("data_version " + std::to_string(n) + " is not supported (only 0)");
      }
      return e;
    case kFieldCount:
      break;
  }
  return fr.error("unknown field");
}

}  // namespace

std::string quorum_state_json(const QuorumStateFile& s) {
  std::string out = "{\"clusterId\":";
  append_json_string(out, s.cluster_id);
  out += ",\"leaderId\":" + std::to_string(s.state.leader);
  out += ",\"leaderEpoch\":" + std::to_string(s.state.epoch);
  out += ",\"votedId\":" + std::to_string(s.state.voted_for);
  out += ",\"appliedOffset\":" + std::to_string(s.applied_offset);
  out += ",\"currentVoters\":[";
  for (std::size_t i = 0; i < s.voters.size(); ++i) {
    if (i) out += ',';
    out += "{\"voterId\":" + std::to_string(s.voters[i]) + "}";
  }
  out += "],\"data_version\":0}";
  return out;
}

std::string check_quorum_state(const QuorumStateFile& s) {
  const QuorumState& q = s.state;
  if (q.epoch < 0) return "leaderEpoch " + std::to_string(q.epoch) + " is negative";
  if (q.leader < -1) return "leaderId " + std::to_string(q.leader) + " is below -1";
  if (q.voted_for < -1) return "votedId " + std::to_string(q.voted_for) + " is below -1";
  // Elections start at epoch 1: a vote or leader in epoch 0 was never written by a Raft node.
  if (q.epoch == 0 && (q.leader != -1 || q.voted_for != -1)) {
    return "a leader or vote in leaderEpoch 0";
  }
  if (s.applied_offset < 0) {
    return "appliedOffset " + std::to_string(s.applied_offset) + " is negative";
  }
  std::set<NodeId> seen;
  for (NodeId v : s.voters) {
    if (v < 0) return "voterId " + std::to_string(v) + " is negative";
    if (!seen.insert(v).second) return "voterId " + std::to_string(v) + " appears twice";
  }
  if (!s.voters.empty()) {
    if (q.leader != -1 && !seen.contains(q.leader)) {
      return "leaderId " + std::to_string(q.leader) + " is not among currentVoters";
    }
    if (q.voted_for != -1 && !seen.contains(q.voted_for)) {
      return "votedId " + std::to_string(q.voted_for) + " is not among currentVoters";
    }
  }
  return {};
}

io::Result<QuorumStateFile> parse_quorum_state(std::string_view json, std::string_view file) {
  auto bad = [&](std::string what) {
    return std::unexpected(io::Error{io::Errc::io_error, std::move(what)});
  };
  const FieldReader fr(file);
  Json doc;
  JsonParser p(json);
  if (!p.parse_document(doc)) return bad(fr.error(p.error()));
  if (doc.kind != Json::Kind::object) {
    return bad(
        fr.error(std::string("the file holds ") + kind_name(doc.kind) + ", expected an object"));
  }
  QuorumStateFile s;
  bool present[kFieldCount] = {};
  for (const auto& [name, v] : doc.members) {
    const auto* it = std::find(std::begin(kFieldNames), std::end(kFieldNames), name);
    if (it == std::end(kFieldNames)) return bad(fr.error("unknown field " + name));
    const auto f = static_cast<Field>(it - std::begin(kFieldNames));
    if (present[f]) return bad(fr.error("field " + name + " appears twice"));
    present[f] = true;
    if (auto e = read_field(f, v, fr, s); !e.empty()) return bad(std::move(e));
  }
  for (std::size_t f = 0; f < kFieldCount; ++f) {
    if (!present[f]) return bad(fr.error("missing field " + std::string(kFieldNames[f])));
  }
  if (auto e = check_quorum_state(s); !e.empty()) return bad(fr.error("inconsistent: " + e));
  return s;
}

io::Result<QuorumStateFile> read_quorum_state(const std::filesystem::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return QuorumStateFile{};
    return std::unexpected(io::sys_error("open", file, errno));
  }
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return std::unexpected(io::sys_error("read", file, err));
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    // A quorum-state file is a few hundred bytes; anything this large is not one.
    if (text.size() > (1u << 20)) {
      ::close(fd);
      return std::unexpected(
          io::Error{io::Errc::io_error, file.string() + ": larger than 1 MiB, not a quorum state"});
    }
  }
  ::close(fd);
  return parse_quorum_state(text, file.string());
}

io::Result<void> write_quorum_state(const std::filesystem::path& file, const QuorumStateFile& s) {
  if (auto e = check_quorum_state(s); !e.empty()) {
    return std::unexpected(io::Error{
        io::Errc::io_error, file.string() + ": refusing to write an inconsistent state: " + e});
  }
  return io::write_file_atomically(file, quorum_state_json(s));
}

}  // namespace samsa::replication::quorum
