// Broker configuration with Kafka's property names (DESIGN.md decision 4).
//
// Layers, highest first: --override flags > dynamic settings (admin socket, kept in the
// metadata log) > the properties file > built-in defaults. Every key samsa understands is
// declared once in config.cc's table with its type, default, bounds and whether it can change
// at run time; unknown keys are reported as warnings, invalid values stop the start with a
// message naming the key.
#pragma once

#include <cstdint>
#include <expected>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace samsa::daemon {

enum class ConfigType : std::uint8_t { boolean, int32, int64, string, list, enumeration };

struct ConfigKey {
  std::string_view name;
  ConfigType type;
  std::string_view default_value;  // as text; "" means unset (for strings)
  std::int64_t min = INT64_MIN;    // numeric bounds
  std::int64_t max = INT64_MAX;
  std::string_view choices;  // enumeration: comma-separated
  bool dynamic = false;      // may change without restart (SIGHUP, admin socket)
  std::string_view doc;
};

// Parses Java .properties text: key=value or key:value or key value, '#'/'!' comments,
// backslash line continuation and \t \n \\ \uXXXX escapes.
std::expected<std::map<std::string, std::string>, std::string> parse_properties(
    std::string_view text);

class Config {
 public:
  // Lowest precedence first. The two dynamic layers are Kafka's: dynamic_default holds the
  // cluster-wide values (resource name ""), dynamic this broker's own (its node id).
  enum class Layer : std::uint8_t { defaults, file, dynamic_default, dynamic, override_ };
  static constexpr int kLayers = 5;

  // Builds a config from a file (may be empty path: defaults only) and overrides
  // ("key=value"). Returns an error naming the key on any invalid value.
  static std::expected<Config, std::string> load(const std::string& file,
                                                 const std::vector<std::string>& overrides,
                                                 std::vector<std::string>* warnings);

  // Re-reads the file layer (SIGHUP / samsactl reload). Returns the keys whose effective value
  // changed; fails without changing anything if a value is invalid.
  std::expected<std::vector<std::string>, std::string> reload_file(
      std::vector<std::string>* warnings);
  // Sets (or with nullopt, clears) a dynamic value; only keys declared dynamic. layer is
  // Layer::dynamic or Layer::dynamic_default.
  std::expected<void, std::string> set_dynamic(const std::string& key,
                                               const std::optional<std::string>& value,
                                               Layer layer = Layer::dynamic);
  // Whether key=value may be set at run time, worded as Kafka words its INVALID_REQUEST
  // answers (nullopt: yes). With no value, only whether the key may change.
  static std::optional<std::string> check_dynamic(const std::string& key,
                                                  const std::optional<std::string>& value);

  std::string get_string(std::string_view key) const;
  std::int64_t get_int(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  std::vector<std::string> get_list(std::string_view key) const;
  // Where the effective value came from.
  Layer source(std::string_view key) const;
  bool is_set(std::string_view key) const;  // set above the defaults layer
  // The value one layer holds for key, if any (DescribeConfigs' synonyms).
  std::optional<std::string> layer_value(std::string_view key, Layer layer) const;
  // Every key a dynamic layer holds.
  const std::map<std::string, std::string, std::less<>>& layer_values(Layer layer) const {
    return layers_[static_cast<int>(layer)];
  }

  const std::string& file() const { return file_; }
  // All known keys with their effective values (for `samsactl config get` and DescribeConfigs).
  std::vector<std::pair<std::string, std::string>> effective() const;

  static const ConfigKey* find_key(std::string_view name);
  // Kafka's PASSWORD-typed settings (keys, passwords, JAAS configs): DescribeConfigs and
  // samsactl show them as sensitive, without their values.
  static bool sensitive(std::string_view name);
  static const std::vector<ConfigKey>& keys();
  // Checks a value against a key's type and bounds.
  static std::expected<void, std::string> validate(const ConfigKey& k, std::string_view value);

  // Derived broker settings with Kafka's fallbacks (log.retention.ms > .minutes > .hours ...).
  std::int64_t log_retention_ms() const;
  std::int64_t log_roll_ms() const;
  std::vector<std::string> log_dirs() const;

 private:
  const std::string* lookup(std::string_view key) const;
  std::string file_;
  std::map<std::string, std::string, std::less<>> layers_[kLayers];
};

}  // namespace samsa::daemon
