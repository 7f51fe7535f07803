#include "base/crc32c.h"

#include <nmmintrin.h>

#include <array>
#include <cstring>

namespace samsa {
namespace {

constexpr std::uint32_t kPoly = 0x82f63b78;  // reflected Castagnoli

constexpr std::array<std::uint32_t, 256> make_table() {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k)
      c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr auto kTable = make_table();

std::uint32_t crc_table(std::uint32_t crc, const unsigned char* p, std::size_t n) {
  crc = ~crc;
  while (n--)
    crc = kTable[(crc ^ *p++) & 0xff] ^ (crc >> 8);
  return ~crc;
}

__attribute__((target("sse4.2"))) std::uint32_t crc_sse42(std::uint32_t crc, const unsigned char* p,
                                                          std::size_t n) {
  std::uint64_t c = ~crc;
  while (n && (reinterpret_cast<std::uintptr_t>(p) & 7)) {
    c = _mm_crc32_u8(static_cast<std::uint32_t>(c), *p++);
    --n;
  }
  while (n >= 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    c = _mm_crc32_u64(c, w);
    p += 8;
    n -= 8;
  }
  while (n--)
    c = _mm_crc32_u8(static_cast<std::uint32_t>(c), *p++);
  return ~static_cast<std::uint32_t>(c);
}

const bool kHardware = __builtin_cpu_supports("sse4.2");

}  // namespace

std::uint32_t crc32c(std::uint32_t crc, const void* data, std::size_t n) {
  auto p = static_cast<const unsigned char*>(data);
  return kHardware ? crc_sse42(crc, p, n) : crc_table(crc, p, n);
}

bool crc32c_hardware() {
  return kHardware;
}

}  // namespace samsa
