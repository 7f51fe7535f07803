#include "daemon/systemd.h"

#include <sys/stat.h>
#include <sys/uio.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

// sd-journal.h brings syslog.h's LOG_INFO and LOG_DEBUG (numbers); base/log.h's macros of the
// same names are the ones this file means.
#undef LOG_INFO
#undef LOG_DEBUG
#include "base/log.h"

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

void notify_extend_timeout(std::uint64_t usec) {
  sd_notifyf(0, "EXTEND_TIMEOUT_USEC=%llu", static_cast<unsigned long long>(usec));
}

std::int64_t watchdog_usec() {
  std::uint64_t us = 0;
  if (sd_watchdog_enabled(0, &us) > 0) return static_cast<std::int64_t>(us);
  return 0;
}

namespace {

void journal_sink(log::Level level, const log::Fields* f, std::string_view thread,
                  std::string_view message) {
  // Each iovec is one whole "NAME=value" field; the small ones are formatted on the stack.
  char prio[16], thr[32], topic[300], part[32], client[96], code[32];
  iovec iov[8];
  int n = 0;
  auto add = [&](char* buf, std::size_t cap, const char* fmt, auto... args) {
    int len = std::snprintf(buf, cap, fmt, args...);
    if (len < 0) return;
    iov[n].iov_base = buf;
    iov[n].iov_len = static_cast<std::size_t>(len) < cap ? static_cast<std::size_t>(len) : cap - 1;
    ++n;
  };
  std::string m;
  m.reserve(8 + message.size());
  m.append("MESSAGE=").append(message);
  iov[n].iov_base = m.data();
  iov[n].iov_len = m.size();
  ++n;
  add(prio, sizeof prio, "PRIORITY=%d", static_cast<int>(level));
  add(thr, sizeof thr, "SAMSA_THREAD=%.*s", static_cast<int>(thread.size()), thread.data());
  if (f) {
    if (!f->topic.empty())
      add(topic, sizeof topic, "SAMSA_TOPIC=%.*s", static_cast<int>(f->topic.size()),
          f->topic.data());
    if (f->partition >= 0) add(part, sizeof part, "SAMSA_PARTITION=%d", f->partition);
    if (!f->client.empty())
      add(client, sizeof client, "SAMSA_CLIENT=%.*s", static_cast<int>(f->client.size()),
          f->client.data());
    if (f->error_code != INT32_MIN) add(code, sizeof code, "SAMSA_ERROR_CODE=%d", f->error_code);
  }
  if (sd_journal_sendv(iov, n) >= 0) return;
  // journald is gone (stopping, restarting): the stream on stderr still reaches it later.
  char line[4200];
  int len = std::snprintf(line, sizeof line, "<%d>%.*s\n", static_cast<int>(level),
                          static_cast<int>(message.size()), message.data());
  if (len > 0) [[maybe_unused]]
    auto r = ::write(2, line, static_cast<std::size_t>(len) < sizeof line ? len : sizeof line - 1);
}

}  // namespace

bool log_to_journal_if_connected() {
  const char* js = std::getenv("JOURNAL_STREAM");
  if (!js) return false;
  unsigned long long dev = 0, ino = 0;
  if (std::sscanf(js, "%llu:%llu", &dev, &ino) != 2) return false;
  struct stat st;
  if (fstat(2, &st) != 0) return false;
  if (static_cast<unsigned long long>(st.st_dev) != dev ||
      static_cast<unsigned long long>(st.st_ino) != ino)
    return false;
  log::set_sink(&journal_sink);
  return true;
}

}  // namespace samsa::daemon::systemd
