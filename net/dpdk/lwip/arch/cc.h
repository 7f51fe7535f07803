// lwIP's architecture header for samsa's DPDK backend (x86-64 Linux, glibc).
#pragma once

#include <stdint.h>
#include <stdlib.h>

#define LWIP_NO_CTYPE_H 0
#define BYTE_ORDER LITTLE_ENDIAN
#define LWIP_RAND() ((u32_t)random())
// Assertions are internal invariants of lwIP: report where, then stop (a broken TCP state
// must not keep serving).
void samsa_lwip_assert(const char* msg, int line, const char* file);
#define LWIP_PLATFORM_ASSERT(x) samsa_lwip_assert((x), __LINE__, __FILE__)
#define LWIP_PLATFORM_DIAG(x) \
  do {                        \
  } while (0)
