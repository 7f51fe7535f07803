// Reading the configuration: Java properties files, --override and the dynamic layers, each
// value checked against its key (config_keys.cc holds the table), and typed lookup.
#include "daemon/config.h"

#include <charconv>
#include <fstream>
#include <sstream>

namespace samsa::daemon {
namespace {

using T = ConfigType;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\f'))
    s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\f'))
    s.remove_suffix(1);
  return s;
}

// Applies Java properties escapes to one logical line's key or value.
std::string unescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c != '\\' || i + 1 == s.size()) {
      out.push_back(c);
      continue;
    }
    char n = s[++i];
    switch (n) {
      case 't':
        out.push_back('\t');
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'u': {
        unsigned cp = 0;
        if (i + 4 < s.size() &&
            std::from_chars(s.data() + i + 1, s.data() + i + 5, cp, 16).ec == std::errc()) {
          i += 4;
          if (cp < 0x80) {
            out.push_back(static_cast<char>(cp));
          } else if (cp < 0x800) {
            out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
            out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
          } else {
            out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
            out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
            out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
          }
        } else {
          out.push_back('u');
        }
        break;
      }
      default:
        out.push_back(n);
    }
  }
  return out;
}

std::optional<std::int64_t> parse_int(std::string_view v) {
  v = trim(v);
  std::int64_t out;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || p != v.data() + v.size() || v.empty()) return std::nullopt;
  return out;
}

std::vector<std::string> split_list(std::string_view v) {
  std::vector<std::string> out;
  while (!v.empty()) {
    auto comma = v.find(',');
    auto item = trim(v.substr(0, comma));
    if (!item.empty()) out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
  return out;
}

std::expected<std::string, std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::unexpected("cannot read config file " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::expected<std::map<std::string, std::string>, std::string> parse_properties(
    std::string_view text) {
  std::map<std::string, std::string> out;
  std::size_t line_no = 0;
  while (!text.empty()) {
    // Gather one logical line (a physical line ending in an odd number of backslashes
    // continues on the next one, whose leading blanks are dropped).
    std::string logical;
    bool first = true;
    for (;;) {
      auto nl = text.find('\n');
      std::string_view phys = text.substr(0, nl);
      text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
      ++line_no;
      std::string_view t = trim(phys);
      if (first && (t.empty() || t.front() == '#' || t.front() == '!')) {
        if (text.empty()) break;
        continue;
      }
      first = false;
      std::size_t bs = 0;
      while (bs < t.size() && t[t.size() - 1 - bs] == '\\')
        ++bs;
      bool cont = bs % 2 == 1;
      if (cont) t.remove_suffix(1);
      logical.append(t);
      if (!cont || text.empty()) break;
    }
    std::string_view l = trim(logical);
    if (l.empty()) continue;
    // The key ends at the first unescaped '=', ':' or whitespace.
    std::size_t i = 0;
    for (; i < l.size(); ++i) {
      if (l[i] == '\\') {
        ++i;
        continue;
      }
      if (l[i] == '=' || l[i] == ':' || l[i] == ' ' || l[i] == '\t') break;
    }
    std::string key = unescape(l.substr(0, i));
    std::string_view rest = trim(l.substr(i < l.size() ? i : l.size()));
    if (!rest.empty() && (rest.front() == '=' || rest.front() == ':')) rest = trim(rest.substr(1));
    if (key.empty()) return std::unexpected("line " + std::to_string(line_no) + ": empty key");
    out[key] = unescape(rest);
  }
  return out;
}

std::expected<void, std::string> Config::validate(const ConfigKey& k, std::string_view value) {
  auto bad = [&](std::string_view why) {
    return std::unexpected(std::string(k.name) + "=" + std::string(value) + ": " +
                           std::string(why));
  };
  switch (k.type) {
    case T::boolean:
      if (value != "true" && value != "false") return bad("expected true or false");
      return {};
    case T::int32:
    case T::int64: {
      auto v = parse_int(value);
      if (!v) return bad("expected an integer");
      if (*v < k.min || *v > k.max)
        return bad("out of range [" + std::to_string(k.min) + ", " + std::to_string(k.max) + "]");
      return {};
    }
    case T::enumeration:
      for (const auto& c : split_list(k.choices))
        if (c == trim(value)) return {};
      return bad("expected one of " + std::string(k.choices));
    case T::string:
    case T::list:
      return {};
  }
  return {};
}

std::expected<Config, std::string> Config::load(const std::string& file,
                                                const std::vector<std::string>& overrides,
                                                std::vector<std::string>* warnings) {
  Config c;
  for (const auto& k : keys())
    if (!k.default_value.empty())
      c.layers_[static_cast<int>(Layer::defaults)].emplace(std::string(k.name), k.default_value);
  c.file_ = file;
  if (!file.empty()) {
    auto changed = c.reload_file(warnings);
    if (!changed) return std::unexpected(changed.error());
  }
  for (const auto& o : overrides) {
    auto eq = o.find('=');
    if (eq == std::string::npos) return std::unexpected("--override " + o + ": expected key=value");
    std::string key(trim(std::string_view(o).substr(0, eq)));
    std::string value(trim(std::string_view(o).substr(eq + 1)));
    const ConfigKey* k = find_key(key);
    if (!k) {
      if (warnings) warnings->push_back("unknown config key " + key + " (from --override)");
    } else if (auto v = validate(*k, value); !v) {
      return std::unexpected(v.error());
    }
    c.layers_[static_cast<int>(Layer::override_)][key] = value;
  }
  return c;
}

std::expected<std::vector<std::string>, std::string> Config::reload_file(
    std::vector<std::string>* warnings) {
  std::map<std::string, std::string, std::less<>> fresh;
  if (!file_.empty()) {
    auto text = read_file(file_);
    if (!text) return std::unexpected(text.error());
    auto props = parse_properties(*text);
    if (!props) return std::unexpected(file_ + ": " + props.error());
    for (auto& [key, value] : *props) {
      const ConfigKey* k = find_key(key);
      if (!k) {
        if (warnings) warnings->push_back("unknown config key " + key + " in " + file_);
      } else if (auto v = validate(*k, value); !v) {
        return std::unexpected(file_ + ": " + v.error());
      }
      fresh.emplace(key, value);
    }
  }
  std::vector<std::string> changed;
  Config before = *this;
  layers_[static_cast<int>(Layer::file)] = std::move(fresh);
  for (const auto& k : keys()) {
    const std::string* a = before.lookup(k.name);
    const std::string* b = lookup(k.name);
    if ((a == nullptr) != (b == nullptr) || (a && *a != *b)) changed.emplace_back(k.name);
  }
  return changed;
}

std::expected<void, std::string> Config::set_dynamic(const std::string& key,
                                                     const std::optional<std::string>& value,
                                                     Layer layer) {
  if (layer != Layer::dynamic && layer != Layer::dynamic_default)
    return std::unexpected("set_dynamic: not a dynamic layer");
  const ConfigKey* k = find_key(key);
  if (!k) return std::unexpected("unknown config key " + key);
  if (!k->dynamic) return std::unexpected(key + " cannot be changed at run time");
  auto& l = layers_[static_cast<int>(layer)];
  if (!value) {
    l.erase(key);
    return {};
  }
  if (auto v = validate(*k, *value); !v) return std::unexpected(v.error());
  l[key] = *value;
  return {};
}

std::optional<std::string> Config::check_dynamic(const std::string& key,
                                                 const std::optional<std::string>& value) {
  const ConfigKey* k = find_key(key);
  if (!k) return "Unknown broker config name: " + key;
  if (!k->dynamic) return "Cannot update these configs dynamically: Set(" + key + ")";
  if (!value) return std::nullopt;
  const std::string bad = "Invalid value " + *value + " for configuration " + key + ": ";
  switch (k->type) {
    case T::boolean:
      if (trim(*value) != "true" && trim(*value) != "false")
        return bad + "Expected value to be either true or false";
      return std::nullopt;
    case T::int32:
    case T::int64: {
      auto v = parse_int(*value);
      if (!v || (k->type == T::int32 && (*v < INT32_MIN || *v > INT32_MAX)))
        return bad + "Not a number of type " + (k->type == T::int32 ? "INT" : "LONG");
      if (*v < k->min) return bad + "Value must be at least " + std::to_string(k->min);
      if (*v > k->max) return bad + "Value must be no more than " + std::to_string(k->max);
      return std::nullopt;
    }
    case T::enumeration:
      for (const auto& c : split_list(k->choices))
        if (c == trim(*value)) return std::nullopt;
      {
        std::string choices;
        for (const auto& c : split_list(k->choices))
          choices += (choices.empty() ? "" : ", ") + c;
        return bad + "String must be one of: " + choices;
      }
    case T::string:
    case T::list:
      if (auto v = validate(*k, *value); !v) return bad + v.error();
      return std::nullopt;
  }
  return std::nullopt;
}

std::optional<std::string> Config::layer_value(std::string_view key, Layer layer) const {
  const auto& l = layers_[static_cast<int>(layer)];
  auto it = l.find(key);
  if (it == l.end()) return std::nullopt;
  return it->second;
}

const std::string* Config::lookup(std::string_view key) const {
  for (int i = kLayers - 1; i >= 0; --i) {
    auto it = layers_[i].find(key);
    if (it != layers_[i].end()) return &it->second;
  }
  return nullptr;
}

Config::Layer Config::source(std::string_view key) const {
  for (int i = kLayers - 1; i >= 0; --i)
    if (layers_[i].contains(key)) return static_cast<Layer>(i);
  return Layer::defaults;
}

bool Config::is_set(std::string_view key) const {
  return source(key) != Layer::defaults;
}

std::string Config::get_string(std::string_view key) const {
  const std::string* v = lookup(key);
  return v ? std::string(trim(*v)) : std::string();
}

std::int64_t Config::get_int(std::string_view key) const {
  const std::string* v = lookup(key);
  if (!v) return 0;
  return parse_int(*v).value_or(0);
}

bool Config::get_bool(std::string_view key) const {
  const std::string* v = lookup(key);
  return v && trim(*v) == "true";
}

std::vector<std::string> Config::get_list(std::string_view key) const {
  const std::string* v = lookup(key);
  return v ? split_list(*v) : std::vector<std::string>{};
}

std::vector<std::pair<std::string, std::string>> Config::effective() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& k : keys()) {
    const std::string* v = lookup(k.name);
    out.emplace_back(std::string(k.name), v ? *v : std::string());
  }
  return out;
}

std::int64_t Config::log_retention_ms() const {
  if (lookup("log.retention.ms")) return get_int("log.retention.ms");
  if (lookup("log.retention.minutes")) {
    auto m = get_int("log.retention.minutes");
    return m < 0 ? -1 : m * 60'000;
  }
  auto h = get_int("log.retention.hours");
  return h < 0 ? -1 : h * 3'600'000;
}

std::int64_t Config::log_roll_ms() const {
  if (lookup("log.roll.ms")) return get_int("log.roll.ms");
  return get_int("log.roll.hours") * 3'600'000;
}

std::vector<std::string> Config::log_dirs() const {
  auto dirs = get_list("log.dirs");
  if (dirs.empty()) dirs.push_back(get_string("log.dir"));
  return dirs;
}

}  // namespace samsa::daemon
