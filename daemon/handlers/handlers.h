// One function per Kafka api samsa serves; each answers through Request::reply().
// The version ranges they serve are in dispatch.cc's table.
#pragma once

#include "daemon/dispatch.h"

namespace samsa::daemon::handlers {

void api_versions(RequestPtr r);
void metadata(RequestPtr r);
void produce(RequestPtr r);
void fetch(RequestPtr r);
void list_offsets(RequestPtr r);
void create_topics(RequestPtr r);
void delete_topics(RequestPtr r);

// The answer to a Produce v0-2 request (which Kafka advertises but refuses): every partition
// gets UNSUPPORTED_VERSION. Hand-encoded: the codec starts at v3.
net::Response produce_v0_2_unsupported(const Request& r);

}  // namespace samsa::daemon::handlers
