#include "base/log.h"

#include <pthread.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace samsa::log {
namespace {

std::atomic<int> g_level{static_cast<int>(Level::info)};
std::atomic<Sink> g_sink{nullptr};

void vwrite(Level l, const Fields* f, const char* fmt, va_list ap) {
  char name[16] = "?";
  pthread_getname_np(pthread_self(), name, sizeof name);
  char buf[4096];
  if (Sink sink = g_sink.load(std::memory_order_acquire)) {
    int m = std::vsnprintf(buf, sizeof buf, fmt, ap);
    if (m < 0) m = 0;
    std::size_t len = static_cast<std::size_t>(m) < sizeof buf ? m : sizeof buf - 1;
    sink(l, f, name, std::string_view(buf, len));
    return;
  }
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  tm t;
  gmtime_r(&ts.tv_sec, &t);
  int n = std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s [%s] ",
                        t.tm_year + 1900, t.tm_mon + 1, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec,
                        ts.tv_nsec / 1000000, level_name(l), name);
  int m = std::vsnprintf(buf + n, sizeof buf - n - 1, fmt, ap);
  if (m < 0) m = 0;
  std::size_t len = n + (static_cast<std::size_t>(m) < sizeof buf - n - 1 ? m : sizeof buf - n - 2);
  buf[len++] = '\n';
  [[maybe_unused]] auto r = ::write(2, buf, len);
}

}  // namespace

void set_level(Level l) {
  g_level.store(static_cast<int>(l), std::memory_order_relaxed);
}
Level level() {
  return static_cast<Level>(g_level.load(std::memory_order_relaxed));
}
bool enabled(Level l) {
  return static_cast<int>(l) <= g_level.load(std::memory_order_relaxed);
}
void set_sink(Sink s) {
  g_sink.store(s, std::memory_order_release);
}

std::optional<Level> parse_level(std::string_view s) {
  if (s == "error") return Level::error;
  if (s == "warn" || s == "warning") return Level::warn;
  if (s == "info") return Level::info;
  if (s == "debug") return Level::debug;
  return std::nullopt;
}

const char* level_name(Level l) {
  switch (l) {
    case Level::error:
      return "error";
    case Level::warn:
      return "warn";
    case Level::info:
      return "info";
    case Level::debug:
      return "debug";
  }
  return "?";
}

void write(Level l, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vwrite(l, nullptr, fmt, ap);
  va_end(ap);
}

void write_fields(Level l, const Fields& f, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vwrite(l, &f, fmt, ap);
  va_end(ap);
}

}  // namespace samsa::log
