#include "net/dpdk/conn_journal.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace samsa::net::dpdk {

// 16 bytes; `used` is written last when a slot fills and first when it empties, so a slot
// torn by a crash between two stores names a tuple at worst half old (a probe nobody answers).
struct ConnJournal::Slot {
  std::uint32_t used;
  std::uint32_t local_ip;
  std::uint32_t remote_ip;
  std::uint16_t local_port;
  std::uint16_t remote_port;
};
namespace {
// Anything else is an empty slot.
constexpr std::uint32_t kAccepted = 0x53414d31;  // "SAM1"
constexpr std::uint32_t kOutbound = 0x53414d32;  // "SAM2"
constexpr std::size_t kBytes = ConnJournal::kSlots * 16;
}  // namespace

ConnJournal::~ConnJournal() {
  if (slots_) ::munmap(slots_, kBytes);
}

std::expected<std::vector<ConnJournal::Inherited>, std::string> ConnJournal::open(
    const std::string& path) {
  static_assert(sizeof(Slot) == 16);
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return std::unexpected(path + ": " + std::strerror(errno));
  if (::ftruncate(fd, static_cast<off_t>(kBytes)) != 0) {
    const int e = errno;
    ::close(fd);
    return std::unexpected(path + ": " + std::strerror(e));
  }
  void* m = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int e = errno;
  ::close(fd);  // the mapping keeps the file
  if (m == MAP_FAILED) return std::unexpected(path + ": mmap: " + std::strerror(e));
  slots_ = static_cast<Slot*>(m);
  std::vector<Inherited> previous;
  free_.reserve(kSlots);
  for (std::size_t i = kSlots; i-- > 0;) {
    Slot& s = slots_[i];
    if (s.used == kAccepted || s.used == kOutbound) {
      previous.push_back(
          {{s.local_ip, s.remote_ip, s.local_port, s.remote_port, s.used == kOutbound},
           static_cast<int>(i)});
      ++used_;
    } else {
      s = Slot{};
      free_.push_back(static_cast<int>(i));
    }
  }
  return previous;
}

int ConnJournal::add(const ConnTuple& t) {
  if (!slots_ || free_.empty()) return -1;
  const int i = free_.back();
  free_.pop_back();
  Slot& s = slots_[i];
  s.local_ip = t.local_ip;
  s.remote_ip = t.remote_ip;
  s.local_port = t.local_port;
  s.remote_port = t.remote_port;
  __atomic_store_n(&s.used, t.outbound ? kOutbound : kAccepted, __ATOMIC_RELEASE);
  ++used_;
  return i;
}

void ConnJournal::remove(int slot) {
  if (!slots_ || slot < 0 || static_cast<std::size_t>(slot) >= kSlots) return;
  __atomic_store_n(&slots_[slot].used, 0u, __ATOMIC_RELEASE);
  free_.push_back(slot);
  --used_;
}

}  // namespace samsa::net::dpdk
