#include <string_view>

#include "base/log.h"
#include "daemon/api/handlers/handlers.h"
#include "daemon/broker.h"
#include "net/kafka/gen/api_versions_request.h"
#include "net/kafka/gen/api_versions_response.h"

namespace samsa::daemon::handlers {
namespace {

// KIP-511: client software names and versions match [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?
bool valid_software_field(std::string_view s) {
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  if (s.empty() || !alnum(s.front()) || !alnum(s.back())) return false;
  for (char c : s)
    if (!alnum(c) && c != '-' && c != '.') return false;
  return true;
}

}  // namespace

void api_versions(RequestPtr r) {
  kafka::ApiVersionsResponse resp;
  if (r->version() > kafka::ApiVersionsRequest::kMaxVersion) {
    // Too new to decode: error 35 and, in the v0 shape, the versions of ApiVersions itself (as
    // Kafka answers); the client retries with the highest of them.
    for (const auto& h : api_handlers())
      if (h.key == kafka::ApiVersionsRequest::kApiKey)
        resp.api_keys.push_back({h.key, h.min_version, h.max_version});
    resp.error_code = kafka::code(kafka::ErrorCode::unsupported_version);
    r->send(kafka::encode_response(resp, 0, r->correlation_id()));
    return;
  }
  kafka::ApiVersionsRequest req;
  if (!r->decode(req)) return;
  if (r->version() >= 3 && (!valid_software_field(req.client_software_name) ||
                            !valid_software_field(req.client_software_version))) {
    resp.error_code = kafka::code(kafka::ErrorCode::invalid_request);
    r->reply(resp);
    return;
  }
  for (const auto& h : api_handlers())
    if (serves(h, r->rc, r->dispatcher.listener()))
      resp.api_keys.push_back({h.key, h.min_version, h.max_version});
  // Features (KIP-584): only transaction.version, the one whose level changes what clients
  // send (the Java client takes version 2 from the finalized level). Kafka leaves features
  // whose minimum is 0 out of v3 answers (KAFKA-17492: older clients reject them).
  if (r->version() >= 4) resp.supported_features.push_back({"transaction.version", 0, 2});
  const std::int16_t tv = r->rc.settings->transaction_version;
  resp.finalized_features.push_back({"transaction.version", tv, tv});
  // Clients adopt finalized features only from an epoch above -1 (Kafka's is the metadata
  // offset that set them; the level here is fixed for the process's life).
  resp.finalized_features_epoch = 1;
  r->reply(resp);
}

}  // namespace samsa::daemon::handlers
