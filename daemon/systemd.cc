#include "daemon/systemd.h"

#include <systemd/sd-daemon.h>
#include <time.h>

namespace samsa::daemon::systemd {

void notify_ready(const std::string& status) {
  sd_notifyf(0, "READY=1\nSTATUS=%s", status.c_str());
}

void notify_reloading() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  unsigned long long us = static_cast<unsigned long long>(ts.tv_sec) * 1000000ull +
                          static_cast<unsigned long long>(ts.tv_nsec) / 1000ull;
  sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading configuration", us);
}

void notify_stopping() {
  sd_notify(0, "STOPPING=1\nSTATUS=shutting down");
}

void notify_status(const std::string& status) {
  sd_notifyf(0, "STATUS=%s", status.c_str());
}

void notify_watchdog() {
  sd_notify(0, "WATCHDOG=1");
}

std::int64_t watchdog_usec() {
  std::uint64_t us = 0;
  if (sd_watchdog_enabled(0, &us) > 0) return static_cast<std::int64_t>(us);
  return 0;
}

}  // namespace samsa::daemon::systemd
