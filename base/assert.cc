#include "base/assert.h"

#include <cstdlib>

#include "base/log.h"

namespace samsa {
namespace {
AssertHandler g_handler = nullptr;
}  // namespace

void set_assert_handler(AssertHandler h) {
  g_handler = h;
}

}  // namespace samsa

namespace samsa::detail {

void assert_failed(const char* expr, const char* file, int line, const char* why) {
  if (samsa::g_handler) {
    samsa::g_handler(expr, file, line, why);
    std::abort();  // a handler that returns
  }
  LOG_ERROR("assertion failed: %s (%s:%d)%s%s", expr, file, line, why ? ": " : "", why ? why : "");
  std::abort();
}

}  // namespace samsa::detail
