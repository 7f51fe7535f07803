#include "base/kafka_errors.h"

namespace samsa::kafka {

namespace {
// Codes are dense from -1: index = code + 1.
constexpr std::string_view kNames[] = {
#define SAMSA_KAFKA_ERROR_NAME(code, id, name) name,
    SAMSA_KAFKA_ERROR_CODES(SAMSA_KAFKA_ERROR_NAME)
#undef SAMSA_KAFKA_ERROR_NAME
};

constexpr bool dense() {
  std::int16_t expect = -1;
#define SAMSA_KAFKA_ERROR_CHECK(code, id, name) \
  if (code != expect++) return false;
  SAMSA_KAFKA_ERROR_CODES(SAMSA_KAFKA_ERROR_CHECK)
#undef SAMSA_KAFKA_ERROR_CHECK
  return true;
}
static_assert(dense(), "error codes must stay dense from -1 for the name table");
}  // namespace

std::string_view error_name(std::int16_t code) {
  int i = code + 1;
  if (i < 0 || i >= static_cast<int>(std::size(kNames))) return {};
  return kNames[i];
}

}  // namespace samsa::kafka
