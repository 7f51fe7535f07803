#include "daemon/quotas.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>

#include "base/clock.h"
#include "replication/metadata_image.h"

namespace samsa::daemon {

std::string_view quota_key(QuotaType t) {
  switch (t) {
    case QuotaType::produce:
      return "producer_byte_rate";
    case QuotaType::fetch:
      return "consumer_byte_rate";
    case QuotaType::request:
      return "request_percentage";
  }
  return "";
}

namespace {

using Entity = replication::QuotaEntity;

// The sensors of every client, by quota type and the names the applying quota shares them by.
struct Registry {
  std::mutex mu;
  std::unordered_map<std::string, std::weak_ptr<RateSensor>> sensors;
  std::shared_ptr<RateSensor> get(const std::string& key) {
    std::lock_guard lk(mu);
    auto& slot = sensors[key];
    auto s = slot.lock();
    if (!s) {
      s = std::make_shared<RateSensor>();
      slot = s;
    }
    if (sensors.size() > 4096)  // forget the sensors no connection holds any more
      std::erase_if(sensors, [](const auto& kv) { return kv.second.expired(); });
    return s;
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

// Kafka's resolution order for one key; the sensor's key names what the quota is shared by.
void resolve(ClientQuotaCache& c, const replication::MetadataImage& image, std::string_view user,
             std::string_view client, QuotaType t) {
  c.limit[static_cast<std::size_t>(t)].reset();
  c.sensor[static_cast<std::size_t>(t)].reset();
  const auto& quotas = image.client_quotas();
  if (quotas.empty()) return;
  const std::string key(quota_key(t));
  using Name = std::optional<std::string>;
  const Name u{std::string(user)}, cl{std::string(client)}, none;
  struct Try {
    Entity entity;
    bool by_user, by_client;
  };
  const Try order[] = {
      {{{"client-id", cl}, {"user", u}}, true, true},
      {{{"client-id", none}, {"user", u}}, true, true},
      {{{"user", u}}, true, false},
      {{{"client-id", cl}, {"user", none}}, true, true},
      {{{"client-id", none}, {"user", none}}, true, true},
      {{{"user", none}}, true, false},
      {{{"client-id", cl}}, false, true},
      {{{"client-id", none}}, false, true},
  };
  for (const auto& o : order) {
    auto it = quotas.find(o.entity);
    if (it == quotas.end()) continue;
    auto v = it->second.find(key);
    if (v == it->second.end()) continue;
    c.limit[static_cast<std::size_t>(t)] = v->second;
    std::string sensor_key = key + '\0' + (o.by_user ? std::string(user) : "") + '\0' +
                             (o.by_client ? std::string(client) : "");
    c.sensor[static_cast<std::size_t>(t)] = registry().get(sensor_key);
    return;
  }
}

}  // namespace

std::int64_t record_quota(ClientQuotaCache& cache, const replication::MetadataImage& image,
                          std::string_view user, std::string_view client_id, QuotaType t,
                          std::int64_t amount) {
  if (image.client_quotas().empty() && cache.image_offset == image.offset()) return 0;
  if (cache.image_offset != image.offset() || cache.client_id != client_id) {
    cache.image_offset = image.offset();
    cache.client_id = std::string(client_id);
    for (std::size_t i = 0; i < kQuotaTypes; ++i)
      resolve(cache, image, user, client_id, static_cast<QuotaType>(i));
  }
  const auto i = static_cast<std::size_t>(t);
  if (!cache.limit[i] || !cache.sensor[i]) return 0;
  const std::int64_t now_ms = mono_ns() / 1'000'000;
  cache.sensor[i]->record(amount, now_ms);
  // request_percentage: percent of one thread's time, measured in microseconds per second.
  const double limit = t == QuotaType::request ? *cache.limit[i] * 10'000.0 : *cache.limit[i];
  const std::int64_t throttle = cache.sensor[i]->throttle_ms(limit, now_ms);
  if (throttle > 0)
    cache.muted_until_ns = std::max(cache.muted_until_ns, mono_ns() + throttle * 1'000'000);
  return throttle;
}

}  // namespace samsa::daemon
