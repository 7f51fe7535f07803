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

// The crc32 instruction has a latency of three cycles and a throughput of one per cycle, so
// one dependent chain uses a third of it. The hardware path runs three chains over three
// adjacent blocks of equal length and joins them: the register after A then B is A's register
// advanced over |B| zero bytes, xor B's register started from zero (CRC is linear). Advancing
// over a fixed length is a 32x32 GF(2) matrix, applied as four byte tables.

// a * b modulo the polynomial, both in the reflected representation (x^0 is bit 31).
constexpr std::uint32_t mul_mod(std::uint32_t a, std::uint32_t b) {
  std::uint32_t product = 0;
  for (std::uint32_t bit = 0x80000000u; bit != 0; bit >>= 1) {
    if (a & bit) product ^= b;
    b = (b & 1) ? (b >> 1) ^ kPoly : b >> 1;  // b *= x
  }
  return product;
}

// x^(8 * bytes) modulo the polynomial: what a register is multiplied by over `bytes` zeros.
constexpr std::uint32_t x_pow_bytes(std::size_t bytes) {
  std::uint32_t r = 0x80000000u;  // x^0
  for (std::size_t i = 0; i < 8 * bytes; ++i)
    r = (r & 1) ? (r >> 1) ^ kPoly : r >> 1;
  return r;
}

using ShiftTable = std::array<std::array<std::uint32_t, 256>, 4>;

constexpr ShiftTable make_shift(std::size_t bytes) {
  const std::uint32_t k = x_pow_bytes(bytes);
  ShiftTable t{};
  for (std::uint32_t j = 0; j < 4; ++j) {
    for (std::uint32_t v = 0; v < 256; ++v)
      t[j][v] = mul_mod(k, v << (8 * j));
  }
  return t;
}

// Block lengths: a produce request's 1 MiB batch runs mostly in long blocks, a 16 KiB batch in
// one long and then short ones; the join costs four lookups per block.
constexpr std::size_t kLong = 4096;
constexpr std::size_t kShort = 256;
constexpr ShiftTable kShiftLong = make_shift(kLong);
constexpr ShiftTable kShiftShort = make_shift(kShort);

inline std::uint32_t shift(const ShiftTable& t, std::uint32_t c) {
  return t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^ t[3][c >> 24];
}

__attribute__((target("sse4.2"))) inline std::uint64_t load_crc(std::uint64_t c,
                                                                const unsigned char* p) {
  std::uint64_t w;
  std::memcpy(&w, p, 8);
  return _mm_crc32_u64(c, w);
}

// Three chains over blocks of `len` bytes (a multiple of 8) while 3 * len bytes remain.
__attribute__((target("sse4.2"))) std::uint64_t crc_3way(std::uint64_t c, const unsigned char*& p,
                                                         std::size_t& n, std::size_t len,
                                                         const ShiftTable& t) {
  while (n >= 3 * len) {
    std::uint64_t c1 = 0;
    std::uint64_t c2 = 0;
    const unsigned char* end = p + len;
    do {
      c = load_crc(c, p);
      c1 = load_crc(c1, p + len);
      c2 = load_crc(c2, p + 2 * len);
      p += 8;
    } while (p != end);
    c = shift(t, static_cast<std::uint32_t>(c)) ^ c1;
    c = shift(t, static_cast<std::uint32_t>(c)) ^ c2;
    p += 2 * len;
    n -= 3 * len;
  }
  return c;
}

__attribute__((target("sse4.2"))) std::uint32_t crc_sse42(std::uint32_t crc, const unsigned char* p,
                                                          std::size_t n) {
  std::uint64_t c = ~crc;
  while (n && (reinterpret_cast<std::uintptr_t>(p) & 7)) {
    c = _mm_crc32_u8(static_cast<std::uint32_t>(c), *p++);
    --n;
  }
  if (n >= 3 * kShort) {  // a small batch pays nothing for the three chains
    c = crc_3way(c, p, n, kLong, kShiftLong);
    c = crc_3way(c, p, n, kShort, kShiftShort);
  }
  while (n >= 8) {
    c = load_crc(c, p);
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
