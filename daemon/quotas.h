// Client quotas, enforced as Kafka's ClientQuotaManager does on each broker: a client's
// produce bytes, fetch bytes and request handling time are measured over quota.window.num
// windows of quota.window.size.seconds; over its quota, the answer carries throttle_time_ms
// and the connection is muted that long (its next requests wait), so clients that honour the
// field (KIP-219) and clients that do not are held to the rate alike.
//
// Which quota applies is Kafka's order, per quota key, from the metadata image's
// ClientQuotaRecords: user+client-id, user+default client, user, default user+client-id,
// default user+default client, default user, client-id, default client. A quota found for a
// user alone is shared by all that user's clients; one for a client id alone by every user
// of that id; a default applies to each user (client) on its own.
//
// Measuring is lock-free: a connection caches its quotas and sensors until the image or its
// client id changes (then one lookup under the registry's lock). Sensors are shared by all
// reactors (a client's connections may be on several), their windows atomic.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/rate_sensor.h"

namespace samsa::replication {
class MetadataImage;
}

namespace samsa::daemon {

enum class QuotaType : std::uint8_t { produce = 0, fetch = 1, request = 2 };
inline constexpr std::size_t kQuotaTypes = 3;

// Kafka's Rate over quota.window.num windows (base/rate_sensor.h, shared with the replication
// throttles).
using samsa::RateSensor;

// What a connection keeps: the quotas that apply to it and their sensors, valid for one image
// and one client id.
struct ClientQuotaCache {
  std::int64_t image_offset = -2;
  std::string client_id;
  std::array<std::optional<double>, kQuotaTypes> limit;
  std::array<std::shared_ptr<RateSensor>, kQuotaTypes> sensor;
  std::int64_t muted_until_ns = 0;  // its next requests wait until then
};

// Records amount (bytes; request time in microseconds) against the client's quota of type t
// and returns the throttle time in ms (0 when within the quota or when no quota applies).
// user: the principal's name ("User:" dropped).
std::int64_t record_quota(ClientQuotaCache& cache, const replication::MetadataImage& image,
                          std::string_view user, std::string_view client_id, QuotaType t,
                          std::int64_t amount);

// The user a principal is for quotas: its name without Kafka's "User:" type.
inline std::string_view quota_user(std::string_view principal) {
  if (principal.starts_with("User:")) principal.remove_prefix(5);
  return principal;
}

// Kafka's quota keys for the three types.
std::string_view quota_key(QuotaType t);

}  // namespace samsa::daemon
