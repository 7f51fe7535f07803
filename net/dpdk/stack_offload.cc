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

// Ones' complement sums as lwIP's LWIP_CHKSUM returns them: of the bytes as stored, not
// inverted (so byte order needs no care as long as every part is taken the same way).
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
  offload_watch_ = false;
  const std::uint16_t pseudo =
      fold(std::uint32_t{LWIP_CHKSUM(t->ip + 12, 8)} + lwip_htons(IP_PROTO_TCP) +
           lwip_htons(static_cast<u16_t>(t->tcp_len)));
  const u16_t segment = LWIP_CHKSUM(t->tcp, static_cast<int>(t->tcp_len));
  if (fold(std::uint32_t{pseudo} + segment) == 0xffff) return;  // a good checksum
  std::uint16_t field = 0;                                      // as stored, as the sums are
  std::memcpy(&field, t->tcp + 16, sizeof field);
  if (field != pseudo) return;  // corrupt, not partial: lwIP drops it, counted
  offload_seen_ = true;         // said once: no more watching
  LOG_WARN(
      "dpdk: segments from the kernel peer arrive with unfilled TCP checksums (transmit "
      "checksum offload on the sending end, the default of a veth pair); they are dropped "
      "as corrupt and no connection can open. Run: %s",
      fix_for(info_.interface).c_str());
}

}  // namespace samsa::net::dpdk
