// sd_notify for Type=notify units: READY, RELOADING (with MONOTONIC_USEC, as
// Type=notify-reload expects), STOPPING, STATUS and watchdog pings. No-ops outside systemd.
#pragma once

#include <cstdint>
#include <string>

namespace samsa::daemon::systemd {

void notify_ready(const std::string& status);
void notify_reloading();
void notify_stopping();
void notify_status(const std::string& status);
void notify_watchdog();
// WATCHDOG_USEC for this process, 0 if no watchdog is configured.
std::int64_t watchdog_usec();

}  // namespace samsa::daemon::systemd
