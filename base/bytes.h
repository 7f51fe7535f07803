// Big-endian loads and stores (Kafka's wire and disk formats are big-endian) and the
// zig-zag varints RecordBatch v2 records use.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace samsa {

template <class T>
inline T load_be(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (std::endian::native == std::endian::little) v = std::byteswap(v);
  return v;
}

template <class T>
inline void store_be(std::byte* p, T v) {
  if constexpr (std::endian::native == std::endian::little) v = std::byteswap(v);
  std::memcpy(p, &v, sizeof v);
}

// Decodes an unsigned LEB128 varint of at most 5 (32-bit) or 10 (64-bit) bytes.
// Returns bytes consumed, 0 if truncated or too long.
inline std::size_t read_uvarint64(const std::byte* p, std::size_t n, std::uint64_t& out) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n && i < 10; ++i) {
    auto b = static_cast<std::uint8_t>(p[i]);
    v |= std::uint64_t(b & 0x7f) << (7 * i);
    if (!(b & 0x80)) {
      out = v;
      return i + 1;
    }
  }
  return 0;
}

inline std::size_t read_varint64(const std::byte* p, std::size_t n, std::int64_t& out) {
  std::uint64_t u;
  std::size_t used = read_uvarint64(p, n, u);
  if (used) out = static_cast<std::int64_t>((u >> 1) ^ (~(u & 1) + 1));
  return used;
}

inline std::size_t read_varint32(const std::byte* p, std::size_t n, std::int32_t& out) {
  std::int64_t v;
  std::size_t used = read_varint64(p, n < 5 ? n : 5, v);
  if (used) out = static_cast<std::int32_t>(v);
  return used;
}

inline std::size_t write_uvarint64(std::byte* p, std::uint64_t v) {
  std::size_t i = 0;
  while (v >= 0x80) {
    p[i++] = std::byte((v & 0x7f) | 0x80);
    v >>= 7;
  }
  p[i++] = std::byte(v);
  return i;
}

inline std::size_t write_varint64(std::byte* p, std::int64_t v) {
  return write_uvarint64(
      p, (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63));
}

inline std::size_t uvarint_size(std::uint64_t v) {
  std::size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

inline std::size_t varint_size(std::int64_t v) {
  return uvarint_size((static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63));
}

}  // namespace samsa
