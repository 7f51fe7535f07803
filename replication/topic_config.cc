#include "replication/topic_config.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>

namespace samsa::replication {
namespace {

using T = TopicConfigType;
constexpr std::int64_t kMax32 = INT32_MAX;

// Kafka 4.1's topic configs, in its order (DescribeConfigs lists them sorted by name). The docs
// say what samsa does with each; those samsa keeps only for compatibility say so.
const std::vector<TopicConfigKey> kTopicKeys = {
    {"cleanup.policy",
     T::list,
     "delete",
     {},
     {},
     "compact,delete",
     "log.cleanup.policy",
     "delete: old segments are removed by retention.ms and retention.bytes. compact: the log "
     "cleaner keeps the latest record of each key (and tombstones for delete.retention.ms). "
     "Both may be given."},
    {"compression.gzip.level",
     T::int32,
     "-1",
     -1,
     9,
     {},
     "compression.gzip.level",
     "Accepted for compatibility: samsa stores batches as producers compressed them."},
    {"compression.lz4.level",
     T::int32,
     "9",
     1,
     17,
     {},
     "compression.lz4.level",
     "Accepted for compatibility: samsa stores batches as producers compressed them."},
    {"compression.type",
     T::string,
     "producer",
     {},
     {},
     "uncompressed,zstd,lz4,snappy,gzip,producer",
     "compression.type",
     "producer: batches are stored exactly as producers sent them (the only mode samsa "
     "implements; other values are accepted and stored, batches are not recompressed)."},
    {"compression.zstd.level",
     T::int32,
     "3",
     -131072,
     22,
     {},
     "compression.zstd.level",
     "Accepted for compatibility: samsa stores batches as producers compressed them."},
    {"delete.retention.ms",
     T::int64,
     "86400000",
     0,
     INT64_MAX,
     {},
     "log.cleaner.delete.retention.ms",
     "How long compaction keeps a tombstone (a record with a null value) after it first cleans "
     "it, so that consumers reading from the start see the delete."},
    {"file.delete.delay.ms",
     T::int64,
     "60000",
     0,
     INT64_MAX,
     {},
     "log.segment.delete.delay.ms",
     "Time between renaming a removed segment to .deleted and unlinking it."},
    {"flush.messages",
     T::int64,
     "1",
     1,
     INT64_MAX,
     {},
     "log.flush.interval.messages",
     "1 (samsa's default): every group commit is fdatasynced and acks=all waits for it. More: "
     "appends are acknowledged once written, and an fdatasync follows once this many records "
     "are unsynced."},
    {"flush.ms",
     T::int64,
     "9223372036854775807",
     0,
     INT64_MAX,
     {},
     "log.flush.interval.ms",
     "With flush.messages above 1: the longest unsynced data may wait before an fdatasync."},
    {"follower.replication.throttled.replicas",
     T::list,
     "",
     {},
     {},
     {},
     {},
     "Replicas throttled on the follower side (partitionId:brokerId,... or *): while "
     "follower.replication.throttled.rate is exceeded, the broker named leaves the partition "
     "out of its replica fetches unless it has caught up with the leader."},
    {"index.interval.bytes",
     T::int32,
     "4096",
     0,
     kMax32,
     {},
     "log.index.interval.bytes",
     "Bytes appended between two offset index entries."},
    {"leader.replication.throttled.replicas",
     T::list,
     "",
     {},
     {},
     {},
     {},
     "Replicas throttled on the leader side (partitionId:brokerId,... or *): while "
     "leader.replication.throttled.rate is exceeded, the leader named answers followers "
     "outside the ISR with no records for the partition."},
    {"local.retention.bytes",
     T::int64,
     "-2",
     -2,
     INT64_MAX,
     {},
     "log.local.retention.bytes",
     "Tiered storage only (not in samsa): -2 means retention.bytes."},
    {"local.retention.ms",
     T::int64,
     "-2",
     -2,
     INT64_MAX,
     {},
     "log.local.retention.ms",
     "Tiered storage only (not in samsa): -2 means retention.ms."},
    {"max.compaction.lag.ms",
     T::int64,
     "9223372036854775807",
     1,
     INT64_MAX,
     {},
     "log.cleaner.max.compaction.lag.ms",
     "A record stays uncompacted at most this long: a dirty segment older than it is cleaned "
     "whatever the dirty ratio."},
    {"max.message.bytes",
     T::int32,
     "1048588",
     0,
     kMax32,
     {},
     "message.max.bytes",
     "Largest record batch a producer may append; larger ones get MESSAGE_TOO_LARGE."},
    {"message.timestamp.after.max.ms",
     T::int64,
     "3600000",
     0,
     INT64_MAX,
     {},
     "log.message.timestamp.after.max.ms",
     "How far in the future a CreateTime timestamp may be."},
    {"message.timestamp.before.max.ms",
     T::int64,
     "9223372036854775807",
     0,
     INT64_MAX,
     {},
     "log.message.timestamp.before.max.ms",
     "How far in the past a CreateTime timestamp may be."},
    {"message.timestamp.type",
     T::string,
     "CreateTime",
     {},
     {},
     "CreateTime,LogAppendTime",
     "log.message.timestamp.type",
     "CreateTime keeps the producer's timestamps; LogAppendTime stamps batches on append."},
    {"min.cleanable.dirty.ratio",
     T::double_,
     "0.5",
     {},
     {},
     {},
     "log.cleaner.min.cleanable.ratio",
     "The log cleaner cleans a log once this share of its closed segments' bytes was written "
     "since the last cleaning."},
    {"min.compaction.lag.ms",
     T::int64,
     "0",
     0,
     INT64_MAX,
     {},
     "log.cleaner.min.compaction.lag.ms",
     "Records younger than this are not compacted."},
    {"min.insync.replicas",
     T::int32,
     "1",
     1,
     kMax32,
     {},
     "min.insync.replicas",
     "Replicas that must hold a batch before acks=all succeeds."},
    {"preallocate",
     T::boolean,
     "false",
     {},
     {},
     {},
     "log.preallocate",
     "Accepted for compatibility: segments are not preallocated."},
    {"remote.log.copy.disable",
     T::boolean,
     "false",
     {},
     {},
     {},
     {},
     "Tiered storage only (not in samsa)."},
    {"remote.log.delete.on.disable",
     T::boolean,
     "false",
     {},
     {},
     {},
     {},
     "Tiered storage only (not in samsa)."},
    {"remote.storage.enable",
     T::boolean,
     "false",
     {},
     {},
     {},
     {},
     "Tiered storage is not in samsa: only false is accepted."},
    {"retention.bytes",
     T::int64,
     "-1",
     -1,
     INT64_MAX,
     {},
     "log.retention.bytes",
     "Partition size above which the oldest closed segments are removed (-1: no limit)."},
    {"retention.ms",
     T::int64,
     "604800000",
     -1,
     INT64_MAX,
     {},
     "log.retention.ms",
     "Age (by largest record timestamp) after which closed segments are removed (-1: never)."},
    {"segment.bytes",
     T::int32,
     "1073741824",
     14,
     kMax32,
     {},
     "log.segment.bytes",
     "Segment file size at which the log rolls to a new segment."},
    {"segment.index.bytes",
     T::int32,
     "10485760",
     4,
     kMax32,
     {},
     "log.index.size.max.bytes",
     "Index size at which the log rolls to a new segment."},
    // Kafka's synonym is log.roll.jitter.ms, which has no default: no synonym is reported.
    {"segment.jitter.ms",
     T::int64,
     "0",
     0,
     INT64_MAX,
     {},
     {},
     "Accepted for compatibility: segment.ms is applied without jitter."},
    {"segment.ms",
     T::int64,
     "604800000",
     1,
     INT64_MAX,
     {},
     "log.roll.ms",
     "Age of the active segment (by record timestamps) after which the log rolls."},
    {"unclean.leader.election.enable",
     T::boolean,
     "false",
     {},
     {},
     {},
     "unclean.leader.election.enable",
     "Whether a replica outside the ISR may become leader (single node: no effect)."},
};

std::optional<std::int64_t> to_int(std::string_view v) {
  std::int64_t out;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (v.empty() || ec != std::errc() || p != v.data() + v.size()) return std::nullopt;
  return out;
}

std::string_view trim(std::string_view v) {
  while (!v.empty() && v.front() == ' ')
    v.remove_prefix(1);
  while (!v.empty() && v.back() == ' ')
    v.remove_suffix(1);
  return v;
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

// "a, b, c": how Kafka lists the allowed values in its messages.
std::string spaced(std::string_view choices) {
  std::string out;
  for (char c : choices) {
    out.push_back(c);
    if (c == ',') out.push_back(' ');
  }
  return out;
}

// Kafka's ThrottledReplicaListValidator: every item (split on commas, trimmed) is empty or
// digits:digits, or the items joined are exactly "*".
bool throttled_replicas_ok(const std::vector<std::string_view>& items) {
  std::string joined;
  for (auto item : items)
    joined += item;
  if (joined == "*") return true;
  auto digits = [](std::string_view d) {
    return !d.empty() && d.find_first_not_of("0123456789") == std::string_view::npos;
  };
  for (auto item : items) {
    if (item.empty()) continue;
    const auto colon = item.find(':');
    if (colon == std::string_view::npos || !digits(item.substr(0, colon)) ||
        !digits(item.substr(colon + 1)))
      return false;
  }
  return true;
}

// The items of a list value as Kafka's ConfigDef parses a LIST: empty when blank, else split on
// commas (empty items kept), each trimmed.
std::vector<std::string_view> list_items(std::string_view v) {
  std::vector<std::string_view> out;
  if (trim(v).empty()) return out;
  for (;;) {
    const auto c = v.find(',');
    out.push_back(trim(v.substr(0, c)));
    if (c == std::string_view::npos) break;
    v.remove_prefix(c + 1);
  }
  return out;
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
  if (!k) return "Unknown topic config name: " + std::string(key);
  const std::string bad =
      "Invalid value " + std::string(value) + " for configuration " + std::string(key) + ": ";
  switch (k->type) {
    case T::boolean:
      if (trim(value) != "true" && trim(value) != "false")
        return bad + "Expected value to be either true or false";
      if (key == "remote.storage.enable" && trim(value) == "true")
        return std::string(
            "Tiered Storage functionality is disabled in the broker. Topic cannot be configured "
            "with remote log storage.");
      return std::nullopt;
    case T::int32:
    case T::int64: {
      auto v = to_int(trim(value));
      if (!v || (k->type == T::int32 && (*v < INT32_MIN || *v > INT32_MAX)))
        return bad + "Not a number of type " + (k->type == T::int32 ? "INT" : "LONG");
      if (key == "compression.gzip.level" && *v == 0)
        return bad + "Value must be -1 or between 1 and 9";
      if (*v < k->min) return bad + "Value must be at least " + std::to_string(k->min);
      if (*v > k->max) return bad + "Value must be no more than " + std::to_string(k->max);
      return std::nullopt;
    }
    case T::string:
      if (!k->choices.empty() && !in_list(k->choices, trim(value)))
        return bad + "String must be one of: " + spaced(k->choices);
      return std::nullopt;
    case T::list: {
      if (k->choices.empty()) {
        const auto items = list_items(value);
        if (throttled_replicas_ok(items)) return std::nullopt;
        // Kafka names the value as the list it parsed: [a, b].
        std::string shown = "[";
        for (std::size_t i = 0; i < items.size(); ++i)
          shown += (i ? ", " : "") + std::string(items[i]);
        return "Invalid value " + shown + "] for configuration " + std::string(key) + ": " +
               std::string(key) +
               " must be the literal '*' or a list of replicas in the following format: "
               "[partitionId]:[brokerId],[partitionId]:[brokerId],...";
      }
      std::string_view v = value;
      if (trim(v).empty()) return bad + "Empty list";
      while (!v.empty()) {
        auto c = v.find(',');
        auto item = trim(v.substr(0, c));
        if (!in_list(k->choices, item)) return bad + "String must be one of: " + spaced(k->choices);
        if (c == std::string_view::npos) break;
        v.remove_prefix(c + 1);
      }
      return std::nullopt;
    }
    case T::double_: {
      double d = 0;
      std::string_view t = trim(value);
      auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), d);
      if (t.empty() || ec != std::errc() || p != t.data() + t.size())
        return bad + "Not a number of type DOUBLE";
      if (d < 0) return bad + "Value must be at least 0.0";
      if (d > 1) return bad + "Value must be no more than 1.0";
      return std::nullopt;
    }
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
  c.flush_messages = num("flush.messages");
  c.flush_ms = num("flush.ms");
  const std::string policy = topic_config_value(overrides, defaults, "cleanup.policy");
  c.cleanup_delete = policy.find("delete") != std::string::npos;
  c.cleanup_compact = policy.find("compact") != std::string::npos;
  c.delete_retention_ms = num("delete.retention.ms");
  c.min_compaction_lag_ms = num("min.compaction.lag.ms");
  c.max_compaction_lag_ms = num("max.compaction.lag.ms");
  const std::string ratio = topic_config_value(overrides, defaults, "min.cleanable.dirty.ratio");
  c.min_cleanable_dirty_ratio = std::strtod(ratio.c_str(), nullptr);
  return c;
}

ThrottledPartitions parse_throttled_replicas(std::string_view value, std::int32_t broker_id) {
  ThrottledPartitions out;
  const auto items = list_items(value);
  if (!throttled_replicas_ok(items)) return out;
  std::string joined;
  for (auto item : items)
    joined += item;
  if (joined == "*") {
    out.all = true;
    return out;
  }
  for (auto item : items) {
    const auto colon = item.find(':');
    if (colon == std::string_view::npos) continue;
    const auto broker = to_int(item.substr(colon + 1));
    const auto partition = to_int(item.substr(0, colon));
    if (broker && partition && *broker == broker_id && *partition <= INT32_MAX)
      out.partitions.push_back(static_cast<std::int32_t>(*partition));
  }
  std::sort(out.partitions.begin(), out.partitions.end());
  out.partitions.erase(std::unique(out.partitions.begin(), out.partitions.end()),
                       out.partitions.end());
  return out;
}

bool ThrottledPartitions::contains(std::int32_t p) const {
  return all || std::binary_search(partitions.begin(), partitions.end(), p);
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
