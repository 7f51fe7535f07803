#include "net/uring/buf_ring.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

namespace samsa::net {
namespace {

// Group ids must be unique per io_uring; several transports may share a reactor, so hand them
// out process-wide and step over ids the ring already knows.
std::atomic<std::uint16_t> g_next_bgid{1};

std::size_t round_to_pages(std::size_t n) {
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return (n + page - 1) / page * page;
}

}  // namespace

std::expected<std::unique_ptr<ProvidedBuffers>, int> ProvidedBuffers::create(io_uring* ring,
                                                                             unsigned count,
                                                                             unsigned size) {
  if (count == 0 || count > 32768 || size == 0) return std::unexpected(-EINVAL);
  unsigned n = 1;
  while (n < count)
    n <<= 1;

  std::unique_ptr<ProvidedBuffers> pb(new ProvidedBuffers());
  pb->ring_ = ring;
  pb->count_ = n;
  pb->size_ = size;
  pb->mask_ = io_uring_buf_ring_mask(n);

  pb->br_bytes_ = round_to_pages(std::size_t(n) * sizeof(io_uring_buf));
  void* br =
      ::mmap(nullptr, pb->br_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (br == MAP_FAILED) return std::unexpected(-errno);
  pb->br_ = static_cast<io_uring_buf_ring*>(br);

  pb->base_bytes_ = round_to_pages(std::size_t(n) * size);
  void* base =
      ::mmap(nullptr, pb->base_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return std::unexpected(-errno);
  pb->base_ = static_cast<std::byte*>(base);

  io_uring_buf_ring_init(pb->br_);
  int rc = -EEXIST;
  for (int attempt = 0; attempt < 64 && rc == -EEXIST; ++attempt) {
    std::uint16_t id = g_next_bgid.fetch_add(1, std::memory_order_relaxed);
    if (id == 0) continue;
    io_uring_buf_reg reg{};
    reg.ring_addr = reinterpret_cast<std::uint64_t>(pb->br_);
    reg.ring_entries = n;
    reg.bgid = id;
    rc = io_uring_register_buf_ring(ring, &reg, 0);
    if (rc == 0) pb->bgid_ = id;
  }
  if (rc < 0) return std::unexpected(rc);
  pb->registered_ = true;

  for (unsigned i = 0; i < n; ++i) {
    io_uring_buf_ring_add(pb->br_, pb->base_ + std::size_t(i) * size, size,
                          static_cast<unsigned short>(i), pb->mask_, static_cast<int>(i));
  }
  io_uring_buf_ring_advance(pb->br_, static_cast<int>(n));
  return pb;
}

ProvidedBuffers::~ProvidedBuffers() {
  // The kernel pins the ring pages while registered; unregister before unmapping.
  if (registered_) io_uring_unregister_buf_ring(ring_, bgid_);
  if (br_) ::munmap(br_, br_bytes_);
  if (base_) ::munmap(base_, base_bytes_);
}

void ProvidedBuffers::recycle(std::uint16_t bid) {
  io_uring_buf_ring_add(br_, base_ + std::size_t(bid) * size_, size_, bid, mask_, 0);
  io_uring_buf_ring_advance(br_, 1);
}

}  // namespace samsa::net
