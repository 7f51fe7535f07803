// Leveled logging. One line per call, written with a single write(2) so lines from different
// threads never interleave. Under systemd the daemon installs a sink that sends each line to
// the journal as structured fields (Fields below, plus the thread's name); otherwise lines go
// to stderr with a UTC timestamp, level and thread name.
#pragma once

#include <atomic>
#include <climits>
#include <cstdint>
#include <optional>
#include <string_view>

namespace samsa::log {

enum class Level : int { error = 3, warn = 4, info = 6, debug = 7 };

void set_level(Level l);
Level level();
std::optional<Level> parse_level(std::string_view s);
const char* level_name(Level l);

// What a line is about, for filtering in the journal (journalctl SAMSA_TOPIC=orders). Unset
// members are left out. The message text still says everything on its own.
struct Fields {
  std::string_view topic;
  std::int32_t partition = -1;
  std::string_view client;              // peer address "ip:port"
  std::int32_t error_code = INT32_MIN;  // Kafka error code
};

// Where formatted lines go instead of stderr (nullptr: stderr). Called on the logging thread;
// must be thread-safe. fields may be null.
using Sink = void (*)(Level level, const Fields* fields, std::string_view thread,
                      std::string_view message);
void set_sink(Sink s);

bool enabled(Level l);
void write(Level l, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void write_fields(Level l, const Fields& f, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

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

// The same with structured fields: LOGF_WARN((log::Fields{.client = peer}), "...", ...).
#define SAMSA_LOGF(lvl, fields, ...)                                             \
  do {                                                                           \
    if (::samsa::log::enabled(::samsa::log::Level::lvl))                         \
      ::samsa::log::write_fields(::samsa::log::Level::lvl, fields, __VA_ARGS__); \
  } while (0)
#define LOGF_ERROR(fields, ...) SAMSA_LOGF(error, fields, __VA_ARGS__)
#define LOGF_WARN(fields, ...) SAMSA_LOGF(warn, fields, __VA_ARGS__)
#define LOGF_INFO(fields, ...) SAMSA_LOGF(info, fields, __VA_ARGS__)
#define LOGF_DEBUG(fields, ...) SAMSA_LOGF(debug, fields, __VA_ARGS__)
