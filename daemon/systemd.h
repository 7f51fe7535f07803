// systemd integration: sd_notify for Type=notify units (READY, RELOADING with MONOTONIC_USEC,
// STOPPING, STATUS, watchdog pings, start timeout extensions) and logging to the journal.
// Everything here is a no-op outside systemd.
#pragma once

#include <cstdint>
#include <string>

namespace samsa::daemon::systemd {

void notify_ready(const std::string& status);
void notify_reloading();
void notify_stopping();
void notify_status(const std::string& status);
void notify_watchdog();
// Start-up is making progress: push systemd's start timeout usec further out.
void notify_extend_timeout(std::uint64_t usec);
// WATCHDOG_USEC for this process, 0 if no watchdog is configured.
std::int64_t watchdog_usec();

// When stderr is the journal's stream (JOURNAL_STREAM names fd 2, as systemd sets it for
// StandardError=journal), log lines go to the journal natively, with PRIORITY, the thread's
// name and base/log.h's Fields (SAMSA_TOPIC, SAMSA_PARTITION, SAMSA_CLIENT,
// SAMSA_ERROR_CODE) as fields. Returns whether it did.
bool log_to_journal_if_connected();

}  // namespace samsa::daemon::systemd
