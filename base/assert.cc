#include "base/assert.h"

#include <cstdlib>

#include "base/log.h"

namespace samsa::detail {

void assert_failed(const char* expr, const char* file, int line, const char* why) {
  LOG_ERROR("assertion failed: %s (%s:%d)%s%s", expr, file, line, why ? ": " : "", why ? why : "");
  std::abort();
}

}  // namespace samsa::detail
