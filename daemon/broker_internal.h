// What the Broker's files (broker.cc, broker_threads.cc, broker_reload.cc, broker_shutdown.cc)
// share and nobody else needs.
#pragma once

#include <cstddef>
#include <string>

#include "daemon/settings.h"

namespace samsa::daemon {

// Each reactor keeps its share of the broker's fetch sessions (rounded up: never 0 unless
// sessions are off).
std::size_t session_slots_per_reactor(const BrokerSettings& s, std::size_t reactors);

}  // namespace samsa::daemon
