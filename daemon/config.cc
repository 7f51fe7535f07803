#include "daemon/config.h"

#include <charconv>
#include <fstream>
#include <sstream>

namespace samsa::daemon {
namespace {

using T = ConfigType;
constexpr std::int64_t kMax32 = INT32_MAX;

// The one place broker settings are declared. Kafka's names and defaults where the concept is
// the same; samsa's own under "samsa.". Where samsa's default differs from Kafka's, doc says why.
const std::vector<ConfigKey> kKeys = {
    {"node.id", T::int32, "1", 0, kMax32, {}, false, "This broker's id."},
    {"broker.id", T::int32, "", -1, kMax32, {}, false, "Alias of node.id (older configs)."},
    {"process.roles",
     T::list,
     "broker,controller",
     {},
     {},
     {},
     false,
     "Roles of this node (single node: both)."},
    {"listeners",
     T::list,
     "PLAINTEXT://:9092",
     {},
     {},
     {},
     false,
     "Listeners: NAME://host:port, comma-separated. Empty host means all interfaces."},
    {"advertised.listeners",
     T::list,
     "",
     {},
     {},
     {},
     false,
     "Addresses clients are told to use; defaults to listeners."},
    {"log.dirs", T::list, "", {}, {}, {}, false, "Data directories (defaults to log.dir)."},
    {"log.dir", T::string, "/var/lib/samsa", {}, {}, {}, false, "Data directory."},
    {"num.partitions", T::int32, "1", 1, kMax32, {}, true, "Partitions of auto-created topics."},
    {"default.replication.factor",
     T::int32,
     "1",
     1,
     kMax32,
     {},
     true,
     "Replication factor of auto-created topics."},
    {"auto.create.topics.enable",
     T::boolean,
     "true",
     {},
     {},
     {},
     true,
     "Create unknown topics on Metadata requests that allow it."},
    {"delete.topic.enable", T::boolean, "true", {}, {}, {}, true, "Allow DeleteTopics."},
    {"message.max.bytes",
     T::int32,
     "1048588",
     0,
     kMax32,
     {},
     true,
     "Largest record batch accepted (topic: max.message.bytes)."},
    {"log.segment.bytes", T::int32, "1073741824", 14, kMax32, {}, true, "Segment size."},
    {"log.roll.ms", T::int64, "", 1, INT64_MAX, {}, true, "Segment age before rolling."},
    {"log.roll.hours", T::int32, "168", 1, kMax32, {}, true, "Used when log.roll.ms is unset."},
    {"log.retention.ms",
     T::int64,
     "",
     -1,
     INT64_MAX,
     {},
     true,
     "Age after which closed segments are deleted (-1: never)."},
    {"log.retention.minutes",
     T::int32,
     "",
     -1,
     kMax32,
     {},
     true,
     "Used when log.retention.ms is unset."},
    {"log.retention.hours",
     T::int32,
     "168",
     -1,
     kMax32,
     {},
     true,
     "Used when log.retention.ms and .minutes are unset."},
    {"log.retention.bytes",
     T::int64,
     "-1",
     -1,
     INT64_MAX,
     {},
     true,
     "Partition size above which old segments are deleted (-1: no limit)."},
    {"log.retention.check.interval.ms",
     T::int64,
     "300000",
     1,
     INT64_MAX,
     {},
     false,
     "How often the retention thread looks."},
    {"log.segment.delete.delay.ms",
     T::int64,
     "60000",
     0,
     INT64_MAX,
     {},
     true,
     "Delay between renaming a segment .deleted and unlinking it."},
    {"log.index.interval.bytes",
     T::int32,
     "4096",
     0,
     kMax32,
     {},
     true,
     "Bytes between offset index entries."},
    {"log.index.size.max.bytes",
     T::int32,
     "10485760",
     4,
     kMax32,
     {},
     true,
     "Index size at which the segment rolls."},
    // samsa acknowledges acks=all only after fdatasync (group commit), so the default is 1
    // message: every group commit syncs. Kafka's default (never) is available per topic.
    {"log.flush.interval.messages",
     T::int64,
     "1",
     1,
     INT64_MAX,
     {},
     true,
     "1: fdatasync before acknowledging (samsa's default). More: rely on the page cache."},
    {"log.flush.interval.ms",
     T::int64,
     "",
     0,
     INT64_MAX,
     {},
     true,
     "Upper bound on unsynced time when log.flush.interval.messages > 1."},
    {"log.flush.offset.checkpoint.interval.ms",
     T::int32,
     "60000",
     0,
     kMax32,
     {},
     false,
     "How often recovery points are checkpointed."},
    {"log.message.timestamp.type",
     T::enumeration,
     "CreateTime",
     {},
     {},
     "CreateTime,LogAppendTime",
     true,
     "Timestamp kept in batches."},
    {"log.cleanup.policy", T::list, "delete", {}, {}, {}, true, "delete or compact."},
    {"min.insync.replicas",
     T::int32,
     "1",
     1,
     kMax32,
     {},
     true,
     "Replicas that must have a batch before acks=all succeeds."},
    {"socket.request.max.bytes",
     T::int32,
     "104857600",
     1,
     kMax32,
     {},
     false,
     "Largest request frame."},
    {"connections.max.idle.ms",
     T::int64,
     "600000",
     1,
     INT64_MAX,
     {},
     false,
     "Idle connections are closed after this long."},
    {"queued.max.requests",
     T::int32,
     "500",
     1,
     kMax32,
     {},
     false,
     "Requests in flight per connection before reading pauses (back-pressure)."},
    // Kafka's default (-1) is unbounded; samsa always bounds request memory.
    {"queued.max.request.bytes",
     T::int64,
     "268435456",
     -1,
     INT64_MAX,
     {},
     false,
     "Memory the broker's requests in flight may hold (frames, decoded requests, their "
     "handling), split evenly among the reactors; a reactor's connections stop reading while "
     "it is full, and a request that could never fit is refused (-1: 256 MiB)."},
    {"fetch.max.bytes", T::int32, "57671680", 0, kMax32, {}, true, "Largest fetch response."},
    {"group.initial.rebalance.delay.ms",
     T::int32,
     "3000",
     0,
     kMax32,
     {},
     true,
     "Delay before the first rebalance of a new group."},
    {"group.min.session.timeout.ms", T::int32, "6000", 0, kMax32, {}, true, ""},
    {"group.max.session.timeout.ms", T::int32, "1800000", 0, kMax32, {}, true, ""},
    {"offsets.topic.num.partitions", T::int32, "50", 1, kMax32, {}, false, ""},
    {"offsets.topic.replication.factor", T::int32, "1", 1, kMax32, {}, false, ""},
    {"offsets.retention.minutes", T::int32, "10080", 1, kMax32, {}, true, ""},
    {"controller.listener.names", T::list, "", {}, {}, {}, false, "Accepted for compatibility."},
    {"controller.quorum.voters", T::list, "", {}, {}, {}, false, "Controller quorum."},
    {"controller.quorum.bootstrap.servers", T::list, "", {}, {}, {}, false, "Controller quorum."},
    {"inter.broker.listener.name", T::string, "", {}, {}, {}, false, ""},
    {"listener.security.protocol.map", T::list, "", {}, {}, {}, false, ""},
    {"samsa.reactors",
     T::int32,
     "0",
     0,
     256,
     {},
     false,
     "Reactor threads (each owns an io_uring ring and a shard of partitions); 0: one per core."},
    {"samsa.net.backend",
     T::enumeration,
     "uring",
     {},
     {},
     "uring,dpdk",
     false,
     "Network backend: kernel sockets on io_uring, or DPDK with a userspace TCP/IP stack."},
    {"samsa.dpdk.eal.args",
     T::string,
     "",
     {},
     {},
     {},
     false,
     "With samsa.net.backend=dpdk: DPDK's EAL arguments, split on white space: the device "
     "(e.g. --vdev=net_af_xdp0,iface=eth1,start_queue=0,queue_count=1 or "
     "--vdev=net_af_packet0,iface=eth1, or a PCI device), memory (-m 512 --no-huge, or "
     "hugepages), cores. samsad adds --lcores, --in-memory or --no-shconf and --no-telemetry "
     "unless given."},
    {"samsa.dpdk.ip",
     T::string,
     "",
     {},
     {},
     {},
     false,
     "With samsa.net.backend=dpdk: the broker's IPv4 address on the DPDK device (its TCP/IP "
     "stack is its own; the kernel must not have this address)."},
    {"samsa.dpdk.netmask",
     T::string,
     "255.255.255.0",
     {},
     {},
     {},
     false,
     "Netmask of samsa.dpdk.ip."},
    {"samsa.dpdk.gateway",
     T::string,
     "",
     {},
     {},
     {},
     false,
     "Router for peers outside samsa.dpdk.ip's subnet (empty: none)."},
    {"samsa.dpdk.mtu",
     T::int32,
     "1500",
     576,
     1500,
     {},
     false,
     "MTU of the DPDK device (TCP's MSS follows it; at most 1500: one mbuf per frame)."},
    {"samsa.dpdk.idle.poll.us",
     T::int32,
     "50",
     0,
     1000000,
     {},
     false,
     "After the last packet the poll loop keeps polling this long before it sleeps; it then "
     "sleeps until the device's descriptor is readable (af_packet, af_xdp, tap) or, for "
     "devices without one, in naps growing to 1 ms."},
    {"samsa.dpdk.mbufs",
     T::int32,
     "32767",
     1023,
     4194303,
     {},
     false,
     "Packet buffers (about 2.4 KiB each) in the DPDK pool; samsa.dpdk.eal.args must give the "
     "EAL that much memory and some."},
    {"samsa.admin.socket",
     T::string,
     "/run/samsa/admin.sock",
     {},
     {},
     {},
     false,
     "Unix socket of the admin protocol (samsactl)."},
    {"samsa.log.level",
     T::enumeration,
     "info",
     {},
     {},
     "error,warn,info,debug",
     true,
     "Log verbosity."},
    {"samsa.max.partitions",
     T::int64,
     "100000",
     1,
     INT64_MAX,
     {},
     true,
     "Partitions this broker holds at most, internal topics included; CreateTopics, "
     "CreatePartitions and auto-creation past it get POLICY_VIOLATION. Each open partition "
     "costs file descriptors and memory for its index and recent-batch ring."},
    {"samsa.max.partitions.per.request",
     T::int64,
     "10000",
     1,
     INT64_MAX,
     {},
     true,
     "Partitions one CreateTopics or CreatePartitions request may add (Kafka's controller "
     "caps it at 10000); a larger request is refused whole with POLICY_VIOLATION before "
     "anything is built. Auto-creation from one Metadata request stops at it."},
    {"samsa.shutdown.timeout.ms",
     T::int64,
     "30000",
     0,
     INT64_MAX,
     {},
     false,
     "How long SIGTERM waits for in-flight requests before closing connections."},
    {"log.message.timestamp.before.max.ms",
     T::int64,
     "9223372036854775807",
     0,
     INT64_MAX,
     {},
     true,
     "How far in the past a CreateTime record timestamp may be (topic: "
     "message.timestamp.before.max.ms)."},
    {"log.message.timestamp.after.max.ms",
     T::int64,
     "3600000",
     0,
     INT64_MAX,
     {},
     true,
     "How far in the future a CreateTime record timestamp may be (topic: "
     "message.timestamp.after.max.ms; Kafka 4's default)."},
    {"producer.id.expiration.ms",
     T::int32,
     "86400000",
     1,
     kMax32,
     {},
     true,
     "An idempotent producer silent this long is forgotten by the partitions it wrote to."},
    {"producer.id.expiration.check.interval.ms",
     T::int32,
     "600000",
     1,
     kMax32,
     {},
     false,
     "How often partitions look for expired producers."},
    {"max.incremental.fetch.session.cache.slots",
     T::int32,
     "1000",
     0,
     kMax32,
     {},
     true,
     "Incremental fetch sessions (KIP-227) the broker keeps, split among the reactors; 0 turns "
     "sessions off."},
    {"samsa.fetch.session.eviction.ms",
     T::int64,
     "120000",
     0,
     INT64_MAX,
     {},
     true,
     "A fetch session unused this long may be evicted for a new one (Kafka's fixed 2 minutes)."},
    // Operations (admin socket, metrics): daemon/admin.h.
    {"samsa.admin.timeout.ms",
     T::int64,
     "30000",
     100,
     INT64_MAX,
     {},
     false,
     "Admin connections idle this long are closed; commands unfinished after it answer a "
     "timeout error."},
    {"samsa.metrics.listen",
     T::string,
     "",
     {},
     {},
     {},
     false,
     "host:port of the Prometheus metrics listener (GET /metrics); empty: off."},
    // Test-only behaviour is inert unless samsa.testing.hooks is true, so it ships harmlessly.
    {"samsa.testing.hooks",
     T::boolean,
     "false",
     {},
     {},
     {},
     false,
     "Enables the samsa.testing.* settings and samsactl testing commands (tests only)."},
    {"samsa.testing.blocking.reads",
     T::boolean,
     "false",
     {},
     {},
     {},
     true,
     "With samsa.testing.hooks: fetches read cold batch headers with pread on the reactor, as "
     "before the read-ahead existed, so a test can show it catches a blocked reactor."},
    {"samsa.testing.producer.sequence.check",
     T::boolean,
     "true",
     {},
     {},
     {},
     true,
     "With samsa.testing.hooks: false turns off idempotent producers' duplicate detection and "
     "sequence checks, so a test can show the duplicates they prevent."},
    {"samsa.testing.startup.delay.ms",
     T::int64,
     "0",
     0,
     3600000,
     {},
     false,
     "Test-only (needs samsa.testing.hooks): hold start-up this long after recovery, before "
     "READY."},
};

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

const std::vector<ConfigKey>& Config::keys() {
  return kKeys;
}

const ConfigKey* Config::find_key(std::string_view name) {
  for (const auto& k : kKeys)
    if (k.name == name) return &k;
  return nullptr;
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
  for (const auto& k : kKeys)
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
  for (const auto& k : kKeys) {
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
  for (const auto& k : kKeys) {
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
