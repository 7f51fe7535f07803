// Topic configs (Kafka's names), their validation, and how they become an io::LogConfig.
// A topic's effective value is its override (ConfigRecord in the metadata log) if present,
// else the broker default the daemon passes in (from log.segment.bytes, log.retention.ms, ...).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/log.h"

namespace samsa::replication {

// The value types Kafka's DescribeConfigs reports (int32 vs int64 matters to admin clients).
enum class TopicConfigType : std::uint8_t { boolean, int32, int64, double_, list, string };

struct TopicConfigKey {
  std::string_view name;
  TopicConfigType type;
  std::string_view builtin_default;  // when the broker gives no default
  std::int64_t min = INT64_MIN;      // numeric bounds
  std::int64_t max = INT64_MAX;
  std::string_view choices;  // string/list: allowed items, comma-separated ("" = any)
  // Kafka's broker setting that supplies the default (DescribeConfigs synonyms), or "".
  std::string_view broker_synonym;
  std::string_view doc;
};

const std::vector<TopicConfigKey>& topic_config_keys();
const TopicConfigKey* find_topic_config(std::string_view name);
// nullopt if valid, else a message for INVALID_CONFIG (worded as Kafka words it).
std::optional<std::string> validate_topic_config(std::string_view key, std::string_view value);

// Broker-wide defaults of topic configs, keyed by the topic config name.
using TopicDefaults = std::map<std::string, std::string, std::less<>>;

// Effective value of key for a topic: override, else broker default, else built-in default.
std::string topic_config_value(const std::map<std::string, std::string>& overrides,
                               const TopicDefaults& defaults, std::string_view key);

io::LogConfig make_log_config(const std::map<std::string, std::string>& overrides,
                              const TopicDefaults& defaults);

// What leader.replication.throttled.replicas or follower.replication.throttled.replicas name for
// one broker (Kafka's TopicConfigHandler): every partition ("*"), or the partitions of the
// partitionId:brokerId entries whose broker is it. A value that does not validate names none.
struct ThrottledPartitions {
  bool all = false;
  std::vector<std::int32_t> partitions;  // sorted
  bool contains(std::int32_t p) const;
};
ThrottledPartitions parse_throttled_replicas(std::string_view value, std::int32_t broker_id);

// Topics the broker itself writes (consumer offsets, transactions, cluster metadata):
// clients may read them but not produce to or delete them.
bool is_internal_topic(std::string_view name);

// Legal topic name (Kafka's rules: 1-249 chars of [a-zA-Z0-9._-], not "." or ".."); nullopt if
// legal, else why not.
std::optional<std::string> check_topic_name(std::string_view name);

}  // namespace samsa::replication
