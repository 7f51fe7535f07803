// The C functions lwIP calls through lwipopts.h: its clock, a faster checksum, keyed initial
// sequence numbers, the TCP output hook that counts retransmits, and its assertions.
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "base/clock.h"
#include "base/log.h"
#include "net/dpdk/stack.h"

namespace samsa::net::dpdk {

std::atomic<std::uint64_t> g_retransmits{0};
std::uint64_t g_isn_key[2] = {0x9e3779b97f4a7c15ull, 0xbf58476d1ce4e5b9ull};

namespace {
std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}
}  // namespace
}  // namespace samsa::net::dpdk

extern "C" {

u32_t sys_now(void) {
  return static_cast<u32_t>(samsa::mono_ms());
}

uint16_t samsa_lwip_chksum(const void* data, int len) {
  // Eight bytes at a time into a 64-bit sum of 32-bit halves; folding that to 16 bits gives
  // the same ones' complement sum of 16-bit words as lwIP's byte-pair loop.
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t sum = 0;
  while (len >= 8) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    sum += (v & 0xffffffffu) + (v >> 32);
    p += 8;
    len -= 8;
  }
  while (len >= 2) {
    std::uint16_t v;
    std::memcpy(&v, p, 2);
    sum += v;
    p += 2;
    len -= 2;
  }
  if (len > 0) sum += *p;
  sum = (sum & 0xffffffffu) + (sum >> 32);
  sum = (sum & 0xffffffffu) + (sum >> 32);
  sum = (sum & 0xffffu) + (sum >> 16);
  sum = (sum & 0xffffu) + (sum >> 16);
  sum = (sum & 0xffffu) + (sum >> 16);
  return static_cast<uint16_t>(sum);
}

uint32_t samsa_lwip_tcp_isn(const struct ip4_addr* local_ip, uint16_t local_port,
                            const struct ip4_addr* remote_ip, uint16_t remote_port) {
  using namespace samsa::net::dpdk;
  const std::uint64_t a = (std::uint64_t(local_ip->addr) << 32) | remote_ip->addr;
  const std::uint64_t b = (std::uint64_t(local_port) << 16) | remote_port;
  const std::uint64_t h = mix(mix(a ^ g_isn_key[0]) ^ b ^ g_isn_key[1]);
  return static_cast<uint32_t>(h) + static_cast<uint32_t>(samsa::mono_ns() / 4000);
}

uint32_t* samsa_lwip_tcp_out(struct pbuf* p, struct tcp_hdr* hdr, const struct tcp_pcb* pcb,
                             uint32_t* opts) {
  if (pcb && hdr && p) {
    const std::uint32_t seq = lwip_ntohl(hdr->seqno);
    const std::uint32_t payload = p->tot_len - TCPH_HDRLEN_BYTES(hdr);
    const bool syn_fin = (TCPH_FLAGS(hdr) & (TCP_SYN | TCP_FIN)) != 0;
    if ((payload > 0 || syn_fin) && TCP_SEQ_LT(seq, pcb->snd_nxt))
      samsa::net::dpdk::g_retransmits.fetch_add(1, std::memory_order_relaxed);
  }
  return opts;
}

void samsa_lwip_assert(const char* msg, int line, const char* file) {
  LOG_ERROR("lwIP assertion failed: %s (%s:%d)", msg, file, line);
  std::abort();
}

}  // extern "C"
