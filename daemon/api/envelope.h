// Forwarding with the client's identity (Kafka's EnvelopeRequest, api 58): a cluster broker
// sends a client's change (CreateTopics, CreateAcls...) to the controller wrapped with the
// client's principal and host, so the controller authorizes it as the client; the answer
// comes back wrapped in an EnvelopeResponse. Only a principal allowed CLUSTER_ACTION on the
// cluster (a broker) may send one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "daemon/api/dispatch.h"

namespace samsa::daemon {

// Broker side: the envelope frame (header and body, no size prefix) carrying r's frame.
std::vector<std::byte> envelope_frame(const Request& r);
// Broker side: the client's answer (correlation id first, no size prefix) out of the
// controller's envelope answer, or nullopt (logged) when it carries none.
std::optional<std::vector<std::byte>> envelope_answer(std::span<std::byte> frame);

// Controller side: serves an EnvelopeRequest (the dispatcher's request for api 58).
void serve_envelope(RequestPtr r);

// What an enveloped request's answer becomes (Request::send).
net::Response wrap_in_envelope(const Envelope& e, net::Response inner);

}  // namespace samsa::daemon
