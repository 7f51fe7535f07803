// lwIP's compile-time options for samsa's DPDK backend (lwIP 2.1.3 from Debian's source package).
// One stack instance per process, driven by one reactor thread with the raw API (NO_SYS=1):
// no lwIP threads, no locks. IPv4 with ARP and ICMP echo; TCP only.
//
// Memory is fixed at start-up (static pools, no malloc inside lwIP), so a flood of half-open
// connections or out-of-order segments runs into pool limits, not into the process's RSS.
#pragma once

#include "net/dpdk/lwip/samsa_hooks.h"

// ---- system ----
#define NO_SYS 1
#define LWIP_TIMERS 1
#define SYS_LIGHTWEIGHT_PROT 0
#define LWIP_NETCONN 0
#define LWIP_SOCKET 0
#define LWIP_NETIF_API 0
#define LWIP_COMPAT_SOCKETS 0
// Errors are values here; lwIP's assertions are internal invariants and stay on.
#define LWIP_PROVIDE_ERRNO 0

// ---- protocols ----
#define LWIP_IPV4 1
#define LWIP_IPV6 0
#define LWIP_ARP 1
#define LWIP_ETHERNET 1
#define ETHARP_SUPPORT_STATIC_ENTRIES 0
#define ARP_TABLE_SIZE 256
#define ARP_QUEUEING 1
#define MEMP_NUM_ARP_QUEUE 256
#define ETHARP_TRUST_IP_MAC 0
#define LWIP_ICMP 1
#define LWIP_BROADCAST_PING 0
#define LWIP_MULTICAST_PING 0
#define LWIP_RAW 0
#define LWIP_UDP 0
#define LWIP_DHCP 0
#define LWIP_AUTOIP 0
#define LWIP_IGMP 0
#define LWIP_DNS 0
// TCP never sends segments that need fragmenting (MSS follows the MTU), and fragments are a
// memory sink an attacker controls: neither reassemble nor fragment.
#define IP_REASSEMBLY 0
#define IP_FRAG 0
#define IP_FORWARD 0
#define IP_OPTIONS_ALLOWED 0
#define LWIP_NETIF_LOOPBACK 0
#define LWIP_HAVE_LOOPIF 0
#define LWIP_SINGLE_NETIF 1
#define LWIP_NETIF_STATUS_CALLBACK 0
#define LWIP_NETIF_LINK_CALLBACK 0
// While a pcb sends, lwIP points netif->hints at the pcb's own: link_output learns from it
// which connection's kept answers a segment's payload points into (zero-copy transmit).
#define LWIP_NETIF_HWADDRHINT 1

// ---- TCP ----
#define LWIP_TCP 1
// The largest MSS (jumbo frames, samsa.dpdk.mtu up to 9000): lwIP announces and uses
// min(TCP_MSS, the interface's MTU - 40), so a 1500-byte MTU still gives 1460.
#define TCP_MSS 8960
#define TCP_CALCULATE_EFF_SEND_MSS 1
// Window scaling lets one connection keep 512 KiB in flight each way (lwIP's 16-bit window
// would cap a connection at 64 KiB per round trip).
#define LWIP_WND_SCALE 1
#define TCP_RCV_SCALE 4
#define TCP_WND (512 * 1024)
#define TCP_SND_BUF (512 * 1024)
// Counted in 1460-byte segments: the queue must not shrink with the jumbo TCP_MSS above.
#define TCP_SND_QUEUELEN ((4 * TCP_SND_BUF) / 1460)
#define TCP_SNDLOWAT (16 * 1024)
#define TCP_SNDQUEUELOWAT (TCP_SND_QUEUELEN / 2)
#define TCP_WND_UPDATE_THRESHOLD (TCP_WND / 8)
// lwIP checks the window against its own receive pool, which this backend does not use
// (received frames are mbufs); its other checks hold.
#define LWIP_DISABLE_TCP_SANITY_CHECKS 1
// lwIP generates SACK blocks for segments it holds out of order (RFC 2018), so a kernel
// sender repairs several losses per round trip; it does not act on the SACKs it receives.
#define LWIP_TCP_SACK_OUT 1
#define LWIP_TCP_MAX_SACK_NUM 8
#define TCP_QUEUE_OOSEQ 1
#define TCP_OOSEQ_MAX_BYTES TCP_WND
#define TCP_OOSEQ_MAX_PBUFS 512
#define LWIP_TCP_TIMESTAMPS 0
#define LWIP_TCP_KEEPALIVE 1
#define TCP_LISTEN_BACKLOG 1
#define TCP_DEFAULT_LISTEN_BACKLOG 255
#define TCP_OVERSIZE 1460
#define LWIP_TCP_PCB_NUM_EXT_ARGS 0
#define LWIP_CALLBACK_API 1
#define LWIP_EVENT_API 0
// The TCP timer: delayed ACKs and retries run every 25 ms, retransmission timeouts count in
// 50 ms ticks (lwIP keeps an RTO of at least 3 ticks: 150 ms, near Linux's 200 ms floor).
// lwIP's default of 250 ms would make every tail loss cost a second.
#define TCP_TMR_INTERVAL 25
#define TCP_MSL 30000UL
#define TCP_SYNMAXRTX 4

// ---- memory (all static) ----
#define MEM_ALIGNMENT 8
#define MEM_LIBC_MALLOC 0
#define MEMP_MEM_MALLOC 0
#define MEM_USE_POOLS 0
// The heap holds TCP/IP headers of outgoing segments (the payload is referenced, not copied)
// and small control packets.
#define MEM_SIZE (24 * 1024 * 1024)
#define MEMP_NUM_TCP_PCB 4096
#define MEMP_NUM_TCP_PCB_LISTEN 16
#define MEMP_NUM_TCP_SEG 65535
#define MEMP_NUM_PBUF 65535
#define MEMP_NUM_REASSDATA 0
#define MEMP_NUM_FRAG_PBUF 0
#define MEMP_NUM_UDP_PCB 0
#define MEMP_NUM_RAW_PCB 0
#define MEMP_NUM_NETBUF 0
#define MEMP_NUM_NETCONN 0
#define MEMP_NUM_SYS_TIMEOUT 8
// Received frames are DPDK mbufs wrapped as custom pbufs; lwIP's own pool is for nothing.
#define PBUF_POOL_SIZE 16
#define PBUF_POOL_BUFSIZE 256
#define LWIP_SUPPORT_CUSTOM_PBUF 1
#define PBUF_LINK_HLEN 14
#define PBUF_LINK_ENCAPSULATION_HLEN 0

// ---- checksums: computed in software, with DPDK's vectorised sum ----
#define CHECKSUM_GEN_IP 1
#define CHECKSUM_GEN_TCP 1
#define CHECKSUM_GEN_ICMP 1
#define CHECKSUM_CHECK_IP 1
#define CHECKSUM_CHECK_TCP 1
#define CHECKSUM_CHECK_ICMP 1
#define LWIP_CHECKSUM_ON_COPY 0
#define LWIP_CHKSUM samsa_lwip_chksum

// ---- statistics (samsactl metrics) ----
#define LWIP_STATS 1
#define LWIP_STATS_DISPLAY 0
#define LINK_STATS 1
#define ETHARP_STATS 1
#define IP_STATS 1
#define ICMP_STATS 1
#define TCP_STATS 1
#define MEM_STATS 1
#define MEMP_STATS 1
#define SYS_STATS 0
#define IPFRAG_STATS 0
#define UDP_STATS 0
#define MIB2_STATS 0

// ---- hooks (samsa_hooks.h) ----
#define LWIP_HOOK_TCP_ISN samsa_lwip_tcp_isn
#define LWIP_HOOK_TCP_OUT_ADD_TCPOPTS samsa_lwip_tcp_out
