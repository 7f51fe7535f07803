#include "base/log.h"
#include "daemon/handlers/handlers.h"
#include "net/kafka/gen/api_versions_request.h"
#include "net/kafka/gen/api_versions_response.h"

namespace samsa::daemon::handlers {

void api_versions(RequestPtr r) {
  kafka::ApiVersionsResponse resp;
  for (const auto& h : api_handlers())
    resp.api_keys.push_back({h.key, h.min_version, h.max_version});
  if (r->version() > kafka::ApiVersionsRequest::kMaxVersion) {
    // Too new to decode: error 35 and our list in the v0 shape (the client retries with the
    // highest version we list).
    resp.error_code = kafka::code(kafka::ErrorCode::unsupported_version);
    r->send(kafka::encode_response(resp, 0, r->correlation_id()));
    return;
  }
  kafka::ApiVersionsRequest req;
  if (!r->decode(req)) return;
  r->reply(resp);
}

}  // namespace samsa::daemon::handlers
