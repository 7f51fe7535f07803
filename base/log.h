// Leveled logging. One line per call, written with a single write(2) so lines from different
// threads never interleave. Under systemd (JOURNAL_STREAM set) lines carry the "<N>" syslog
// priority prefix journald understands; otherwise a UTC timestamp, level and thread name.
#pragma once

#include <atomic>
#include <optional>
#include <string_view>

namespace samsa::log {

enum class Level : int { error = 3, warn = 4, info = 6, debug = 7 };

void set_level(Level l);
Level level();
std::optional<Level> parse_level(std::string_view s);
const char* level_name(Level l);

bool enabled(Level l);
void write(Level l, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace samsa::log

#define SAMSA_LOG(lvl, ...)                                       \
  do {                                                            \
    if (::samsa::log::enabled(::samsa::log::Level::lvl))          \
      ::samsa::log::write(::samsa::log::Level::lvl, __VA_ARGS__); \
  } while (0)
#define LOG_ERROR(...) SAMSA_LOG(error, __VA_ARGS__)
#define LOG_WARN(...) SAMSA_LOG(warn, __VA_ARGS__)
#define LOG_INFO(...) SAMSA_LOG(info, __VA_ARGS__)
#define LOG_DEBUG(...) SAMSA_LOG(debug, __VA_ARGS__)
