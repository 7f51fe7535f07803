// SAMSA_ASSERT: an invariant of product code, checked in every build (release included). Meant
// for cheap checks (a comparison, a pointer test) on ordering and ownership rules whose breach
// would otherwise surface much later as lost or wrong data; a failure logs the expression,
// file and line and aborts, so the process stops before it acts on a broken state (systemd
// restarts it; recovery runs from what is on disk).
#pragma once

namespace samsa {
// What a failed assertion does instead of aborting. Only for deterministic simulations, which
// report the seed and step of a product assertion as an invariant violation: the handler must
// not return (it throws, on the simulation's single thread). Production never sets one.
using AssertHandler = void (*)(const char* expr, const char* file, int line, const char* why);
void set_assert_handler(AssertHandler h);
}  // namespace samsa

namespace samsa::detail {
[[noreturn]] void assert_failed(const char* expr, const char* file, int line, const char* why);
}  // namespace samsa::detail

#define SAMSA_ASSERT(cond)                                                \
  do {                                                                    \
    if (!(cond)) [[unlikely]]                                             \
      ::samsa::detail::assert_failed(#cond, __FILE__, __LINE__, nullptr); \
  } while (0)
// The same with a sentence saying what the invariant is.
#define SAMSA_ASSERT_MSG(cond, why)                                   \
  do {                                                                \
    if (!(cond)) [[unlikely]]                                         \
      ::samsa::detail::assert_failed(#cond, __FILE__, __LINE__, why); \
  } while (0)
