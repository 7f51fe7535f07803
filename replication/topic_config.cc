#include "replication/topic_config.h"

#include <charconv>

namespace samsa::replication {
namespace {

using T = TopicConfigType;
constexpr std::int64_t kMax32 = INT32_MAX;

const std::vector<TopicConfigKey> kTopicKeys = {
    {"cleanup.policy", T::list, "delete", {}, {}, "delete,compact"},
    {"compression.type",
     T::enumeration,
     "producer",
     {},
     {},
     "producer,uncompressed,gzip,snappy,lz4,zstd"},
    {"delete.retention.ms", T::integer, "86400000", 0, INT64_MAX, {}},
    {"file.delete.delay.ms", T::integer, "60000", 0, INT64_MAX, {}},
    {"flush.messages", T::integer, "1", 1, INT64_MAX, {}},
    {"flush.ms", T::integer, "9223372036854775807", 0, INT64_MAX, {}},
    {"index.interval.bytes", T::integer, "4096", 0, kMax32, {}},
    {"max.compaction.lag.ms", T::integer, "9223372036854775807", 1, INT64_MAX, {}},
    {"max.message.bytes", T::integer, "1048588", 0, kMax32, {}},
    {"message.timestamp.type", T::enumeration, "CreateTime", {}, {}, "CreateTime,LogAppendTime"},
    {"message.timestamp.before.max.ms", T::integer, "9223372036854775807", 0, INT64_MAX, {}},
    {"message.timestamp.after.max.ms", T::integer, "3600000", 0, INT64_MAX, {}},
    {"min.cleanable.dirty.ratio", T::ratio, "0.5", {}, {}, {}},
    {"min.compaction.lag.ms", T::integer, "0", 0, INT64_MAX, {}},
    {"min.insync.replicas", T::integer, "1", 1, kMax32, {}},
    {"preallocate", T::boolean, "false", {}, {}, {}},
    {"retention.bytes", T::integer, "-1", -1, INT64_MAX, {}},
    {"retention.ms", T::integer, "604800000", -1, INT64_MAX, {}},
    {"segment.bytes", T::integer, "1073741824", 14, kMax32, {}},
    {"segment.index.bytes", T::integer, "10485760", 4, kMax32, {}},
    {"segment.jitter.ms", T::integer, "0", 0, INT64_MAX, {}},
    {"segment.ms", T::integer, "604800000", 1, INT64_MAX, {}},
    {"unclean.leader.election.enable", T::boolean, "false", {}, {}, {}},
};

std::optional<std::int64_t> to_int(std::string_view v) {
  std::int64_t out;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (v.empty() || ec != std::errc() || p != v.data() + v.size()) return std::nullopt;
  return out;
}

bool in_list(std::string_view choices, std::string_view item) {
  while (!choices.empty()) {
    auto c = choices.find(',');
    if (choices.substr(0, c) == item) return true;
    if (c == std::string_view::npos) break;
    choices.remove_prefix(c + 1);
  }
  return false;
}

}  // namespace

const std::vector<TopicConfigKey>& topic_config_keys() {
  return kTopicKeys;
}

const TopicConfigKey* find_topic_config(std::string_view name) {
  for (const auto& k : kTopicKeys)
    if (k.name == name) return &k;
  return nullptr;
}

std::optional<std::string> validate_topic_config(std::string_view key, std::string_view value) {
  const TopicConfigKey* k = find_topic_config(key);
  std::string what = std::string(key) + "=" + std::string(value);
  if (!k) return "unknown topic config " + std::string(key);
  switch (k->type) {
    case T::boolean:
      if (value != "true" && value != "false") return what + ": expected true or false";
      return std::nullopt;
    case T::integer: {
      auto v = to_int(value);
      if (!v) return what + ": expected an integer";
      if (*v < k->min || *v > k->max)
        return what + ": out of range [" + std::to_string(k->min) + ", " + std::to_string(k->max) +
               "]";
      return std::nullopt;
    }
    case T::enumeration:
      if (!in_list(k->choices, value)) return what + ": expected one of " + std::string(k->choices);
      return std::nullopt;
    case T::list: {
      std::string_view v = value;
      if (v.empty()) return what + ": empty list";
      while (!v.empty()) {
        auto c = v.find(',');
        auto item = v.substr(0, c);
        while (!item.empty() && item.front() == ' ')
          item.remove_prefix(1);
        while (!item.empty() && item.back() == ' ')
          item.remove_suffix(1);
        if (!in_list(k->choices, item))
          return what + ": items must be among " + std::string(k->choices);
        if (c == std::string_view::npos) break;
        v.remove_prefix(c + 1);
      }
      return std::nullopt;
    }
    case T::ratio: {
      double d = 0;
      auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), d);
      if (ec != std::errc() || p != value.data() + value.size() || d < 0 || d > 1)
        return what + ": expected a number between 0 and 1";
      return std::nullopt;
    }
    case T::string:
      return std::nullopt;
  }
  return std::nullopt;
}

std::string topic_config_value(const std::map<std::string, std::string>& overrides,
                               const TopicDefaults& defaults, std::string_view key) {
  if (auto it = overrides.find(std::string(key)); it != overrides.end()) return it->second;
  if (auto it = defaults.find(key); it != defaults.end()) return it->second;
  if (const auto* k = find_topic_config(key)) return std::string(k->builtin_default);
  return {};
}

io::LogConfig make_log_config(const std::map<std::string, std::string>& overrides,
                              const TopicDefaults& defaults) {
  auto num = [&](std::string_view key) {
    return to_int(topic_config_value(overrides, defaults, key)).value_or(0);
  };
  io::LogConfig c;
  c.segment_bytes = static_cast<std::uint64_t>(num("segment.bytes"));
  c.segment_ms = num("segment.ms");
  c.index_interval_bytes = static_cast<std::uint32_t>(num("index.interval.bytes"));
  c.segment_index_bytes = static_cast<std::uint32_t>(num("segment.index.bytes"));
  c.retention_ms = num("retention.ms");
  c.retention_bytes = num("retention.bytes");
  c.max_batch_bytes = static_cast<std::uint32_t>(num("max.message.bytes"));
  c.file_delete_delay_ms = num("file.delete.delay.ms");
  c.timestamp_type =
      topic_config_value(overrides, defaults, "message.timestamp.type") == "LogAppendTime"
          ? io::TimestampType::log_append_time
          : io::TimestampType::create_time;
  c.timestamp_before_max_ms = num("message.timestamp.before.max.ms");
  c.timestamp_after_max_ms = num("message.timestamp.after.max.ms");
  c.fsync = num("flush.messages") <= 1;
  return c;
}

bool is_internal_topic(std::string_view name) {
  return name == "__consumer_offsets" || name == "__transaction_state" ||
         name == "__cluster_metadata";
}

std::optional<std::string> check_topic_name(std::string_view name) {
  if (name.empty()) return "topic name is empty";
  if (name == "." || name == "..") return "topic name cannot be \".\" or \"..\"";
  if (name.size() > 249) return "topic name is longer than 249 characters";
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok)
      return "topic name " + std::string(name) +
             " has characters other than ASCII alphanumerics, '.', '_' and '-'";
  }
  return std::nullopt;
}

}  // namespace samsa::replication
