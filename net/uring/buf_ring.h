// A provided-buffer ring (IORING_REGISTER_PBUF_RING): the kernel picks a buffer from it for
// each multishot recv completion, so receive memory is shared by all connections of a reactor
// instead of one buffer per idle socket. liburing 2.3 has no io_uring_setup_buf_ring, so the
// ring memory is mapped and registered here.
#pragma once

#include <liburing.h>

#include <cstddef>
#include <cstdint>
#include <expected>
#include <memory>

namespace samsa::net {

class ProvidedBuffers {
 public:
  // count is rounded up to a power of two (at most 32768). Returns -errno on failure.
  static std::expected<std::unique_ptr<ProvidedBuffers>, int> create(io_uring* ring, unsigned count,
                                                                     unsigned size);
  ~ProvidedBuffers();
  ProvidedBuffers(const ProvidedBuffers&) = delete;
  ProvidedBuffers& operator=(const ProvidedBuffers&) = delete;

  // Buffer group id for IOSQE_BUFFER_SELECT.
  std::uint16_t group() const { return bgid_; }
  unsigned count() const { return count_; }
  unsigned buffer_size() const { return size_; }
  const std::byte* data(std::uint16_t bid) const { return base_ + std::size_t(bid) * size_; }
  // Hands buffer bid back to the kernel.
  void recycle(std::uint16_t bid);

 private:
  ProvidedBuffers() = default;

  io_uring* ring_ = nullptr;
  io_uring_buf_ring* br_ = nullptr;
  std::size_t br_bytes_ = 0;
  std::byte* base_ = nullptr;
  std::size_t base_bytes_ = 0;
  unsigned count_ = 0;
  unsigned size_ = 0;
  int mask_ = 0;
  std::uint16_t bgid_ = 0;
  bool registered_ = false;
};

}  // namespace samsa::net
