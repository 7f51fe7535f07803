// Frames whose TCP checksum a kernel peer left to an offload that never happens. A veth's
// kernel end offloads transmit checksums by default: its segments carry only the pseudo-header
// sum (CHECKSUM_PARTIAL), the kernel on the other end would trust them, and lwIP drops them as
// corrupt, so no connection opens. Accepting them would not be enough (with the offload on the
// peer also sends TSO frames above the MTU), so samsad says so at once, with the command.
#include <net/if.h>

#include <cstdio>
#include <cstring>
#include <fstream>

#include "base/log.h"
#include "net/dpdk/stack.h"

namespace samsa::net::dpdk {
namespace {

std::uint32_t sum16(const std::uint8_t* p, std::size_t len, std::uint32_t sum) {
  for (; len >= 2; p += 2, len -= 2)
    sum += std::uint32_t(p[0]) << 8 | p[1];
  if (len) sum += std::uint32_t(p[0]) << 8;
  return sum;
}

std::uint16_t fold(std::uint32_t sum) {
  while (sum >> 16)
    sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<std::uint16_t>(sum);
}

long read_long(const std::string& path) {
  std::ifstream f(path);
  long v = -1;
  f >> v;
  return f ? v : -1;
}

// `ethtool -K <peer> tx off` for the interface's veth peer, named when it is in this network
// namespace (an interface index means another interface in another namespace).
std::string fix_for(const std::string& iface) {
  if (iface.empty()) return "turn transmit checksum offload off on the sending interface";
  const long peer = read_long("/sys/class/net/" + iface + "/iflink");
  const long self = read_long("/sys/class/net/" + iface + "/ifindex");
  char name[IF_NAMESIZE] = {};
  if (peer > 0 && peer != self && ::if_indextoname(static_cast<unsigned>(peer), name) &&
      read_long(std::string("/sys/class/net/") + name + "/iflink") == self)
    return std::string("ethtool -K ") + name + " tx off";
  if (peer > 0 && peer != self)
    return "ethtool -K <the peer of " + iface + ", interface index " + std::to_string(peer) +
           " in its network namespace> tx off";
  return "turn transmit checksum offload off where these frames come from";
}

}  // namespace

void StackImpl::check_offload(const Frame& f) {
  const auto t = tcp_frame(f);
  // SYNs: few, small, and the first thing a peer with the offload on gets wrong.
  if (!t || t->dst != ip_ || !(t->flags & TCP_SYN)) return;
  const std::uint32_t pseudo =
      sum16(t->ip + 12, 8, 0) + IP_PROTO_TCP + static_cast<std::uint32_t>(t->tcp_len);
  if (fold(sum16(t->tcp, t->tcp_len, pseudo)) == 0xffff) return;  // a good checksum
  const auto field = static_cast<std::uint16_t>(t->tcp[16] << 8 | t->tcp[17]);
  if (field != fold(pseudo)) return;  // corrupt, not partial: lwIP drops it, counted
  offload_seen_ = true;
  LOG_WARN(
      "dpdk: segments from the kernel peer arrive with unfilled TCP checksums (transmit "
      "checksum offload on the sending end, the default of a veth pair); they are dropped "
      "as corrupt and no connection can open. Run: %s",
      fix_for(info_.interface).c_str());
}

}  // namespace samsa::net::dpdk
