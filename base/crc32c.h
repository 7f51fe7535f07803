// CRC32C (Castagnoli), the checksum of RecordBatch v2. Uses the SSE4.2 crc32 instruction when
// the CPU has it (checked once; three interleaved chains, joined with precomputed tables), a
// table otherwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace samsa {

// Extends `crc` (0 to start) over `data`.
std::uint32_t crc32c(std::uint32_t crc, const void* data, std::size_t n);

inline std::uint32_t crc32c(std::span<const std::byte> data) {
  return crc32c(0, data.data(), data.size());
}

// True if the hardware path is in use (reported in logs and benchmarks).
bool crc32c_hardware();

}  // namespace samsa
