// Functions lwIP calls through lwipopts.h, implemented by samsa (net/dpdk/lwip_glue.cc and
// net/dpdk/port.cc). Plain C declarations: this header is included by lwIP's own sources.
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tcp_pcb;
struct tcp_hdr;
struct pbuf;
struct ip4_addr;

// The 16-bit ones' complement sum of len bytes (not inverted), as lwip_standard_chksum.
uint16_t samsa_lwip_chksum(const void* data, int len);
// RFC 6528 initial sequence numbers: a keyed hash of the connection's addresses plus a 4 µs
// clock, so an off-path attacker cannot predict them (lwIP's default is a counter).
uint32_t samsa_lwip_tcp_isn(const struct ip4_addr* local_ip, uint16_t local_port,
                            const struct ip4_addr* remote_ip, uint16_t remote_port);
// Called for every TCP segment lwIP transmits; counts retransmissions (a data segment that
// starts before pcb->snd_nxt). Returns opts unchanged.
uint32_t* samsa_lwip_tcp_out(struct pbuf* p, struct tcp_hdr* hdr, const struct tcp_pcb* pcb,
                             uint32_t* opts);

#ifdef __cplusplus
}
#endif
