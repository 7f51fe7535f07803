// Ending the connections a killed predecessor held (conn_journal.h says why). Each is probed
// with a bare ACK whose sequence number lies outside the peer's window; RFC 793 (and RFC 5961's
// challenge ACK) make the peer answer with an ACK carrying its own next sequence number. That
// answer reaches lwIP for a connection it does not know, and lwIP answers it with a reset at
// exactly that sequence number (tcp_input for an unknown connection, tcp_listen_input for an
// ACK to a listening port), which the peer accepts: its client sees the connection reset and
// reconnects at once, as after a crash over kernel sockets.
#include <sys/random.h>

#include <cstring>

#include "base/clock.h"
#include "base/log.h"
#include "net/dpdk/stack.h"

extern "C" {
#include "lwip/inet_chksum.h"
#include "lwip/ip4.h"
}

namespace samsa::net::dpdk {
namespace {

// When the rounds go out, after the first attach: a peer that lost a probe (its ARP entry for
// us being refreshed, a full queue) gets another. Linux answers out-of-window segments at most
// once per 500 ms per connection (net.ipv4.tcp_invalid_ratelimit), so rounds are further apart.
constexpr std::int64_t kRoundDelayNs[] = {0, 600'000'000, 1'500'000'000, 3'000'000'000};
constexpr int kRounds = sizeof kRoundDelayNs / sizeof kRoundDelayNs[0];
// Connections whose port is not listening again by then are forgotten.
constexpr std::int64_t kGiveUpNs = 300'000'000'000;

}  // namespace

void StackImpl::open_journal(std::int64_t now) {
  journal_tried_ = true;
  if (opts_.connection_journal.empty()) return;
  auto prev = journal_.open(opts_.connection_journal);
  if (!prev) {
    LOG_WARN(
        "dpdk: connection journal %s; after a kill -9 the next start cannot reset this "
        "process's client connections (clients then wait for their request time-out)",
        prev.error().c_str());
    return;
  }
  // Another address's (samsa.dpdk.ip changed): nobody to probe from.
  std::erase_if(*prev, [this](const ConnJournal::Inherited& x) {
    if (x.t.local_ip == ip_) return false;
    journal_.remove(x.slot);
    return true;
  });
  if (prev->empty()) return;
  LOG_INFO(
      "dpdk: %zu connections of a previous process (killed?) are reset through their "
      "peers once their ports listen again, so that their clients reconnect then rather "
      "than at their request time-out",
      prev->size());
  probes_.reserve(prev->size());
  for (const auto& [t, slot] : *prev) {
    probes_.push_back({t, slot, 0, now});
    if (!t.outbound) waiting_.insert(t.local_port);
  }
  probes_until_ns_ = now + kGiveUpNs;
  next_probe_ns_ = now;
}

void StackImpl::remember(StackConn* sc, bool outbound) {
  if (!sc->pcb || sc->journal_slot >= 0) return;
  const tcp_pcb* p = sc->pcb;
  sc->journal_slot = journal_.add({ip_2_ip4(&p->local_ip)->addr, ip_2_ip4(&p->remote_ip)->addr,
                                   p->local_port, p->remote_port, outbound});
}

void StackImpl::probe_previous(std::int64_t now) {
  next_probe_ns_ = INT64_MAX;
  if (now >= probes_until_ns_) {
    if (!probes_.empty())
      LOG_INFO(
          "dpdk: %zu connections of the previous process not probed: their ports never "
          "listened again",
          probes_.size());
    for (const Probe& p : probes_)
      journal_.remove(p.slot);
    probes_.clear();
    probes_.shrink_to_fit();
    waiting_.clear();
    return;
  }
  std::size_t sent = 0;
  for (Probe& p : probes_) {
    // A reset before its port listens again would send the client into a refused connect
    // and its reconnect backoff; a connection this process made (a fetcher's, from an
    // ephemeral port) has nothing to wait for.
    const bool ready = p.t.outbound || groups_.contains(p.t.local_port);
    if (!ready) continue;
    if (now >= p.next_ns) {
      send_probe(p.t);
      ++sent;
      if (++p.round < kRounds)
        p.next_ns = now + kRoundDelayNs[p.round] - kRoundDelayNs[p.round - 1];
    }
    if (p.round < kRounds) next_probe_ns_ = std::min(next_probe_ns_, p.next_ns);
  }
  probed_.fetch_add(sent, std::memory_order_relaxed);
  // Done: the slot it kept (for a successor, had this process died first) goes.
  std::erase_if(probes_, [this](const Probe& p) {
    if (p.round < kRounds) return false;
    journal_.remove(p.slot);
    return true;
  });
  if (probes_.empty()) probes_.shrink_to_fit();
  // Waiting for a port to listen: listen() brings the next look forward.
  else if (next_probe_ns_ == INT64_MAX)
    next_probe_ns_ = probes_until_ns_;
}

void StackImpl::now_listening(std::uint16_t port) {
  waiting_.erase(port);
  if (probes_.empty()) return;
  next_probe_ns_ = 0;  // this port's remembered connections: probe them now
}

std::optional<TcpFrame> tcp_frame(const Frame& f) {
  const auto* b = reinterpret_cast<const std::uint8_t*>(f.data);
  constexpr std::size_t kEth = 14;
  if (f.len < kEth + 20 + 20 || b[12] != 0x08 || b[13] != 0x00) return std::nullopt;  // IPv4
  TcpFrame t;
  t.ip = b + kEth;
  const std::size_t ihl = std::size_t(t.ip[0] & 0x0f) * 4;
  const std::size_t ip_len = std::size_t(t.ip[2]) << 8 | t.ip[3];
  if ((t.ip[0] >> 4) != 4 || t.ip[9] != IP_PROTO_TCP || ihl < 20 || ip_len < ihl + 20 ||
      kEth + ip_len > f.len)
    return std::nullopt;
  std::memcpy(&t.src, t.ip + 12, 4);
  std::memcpy(&t.dst, t.ip + 16, 4);
  t.tcp = t.ip + ihl;
  t.tcp_len = ip_len - ihl;
  t.sport = static_cast<std::uint16_t>(t.tcp[0] << 8 | t.tcp[1]);
  t.dport = static_cast<std::uint16_t>(t.tcp[2] << 8 | t.tcp[3]);
  t.flags = t.tcp[13];
  return t;
}

bool StackImpl::held_for_listener(const Frame& f) const {
  const auto t = tcp_frame(f);
  // A SYN is refused as ever: a client's reconnect backoff starts at 100 ms, its SYN
  // retransmission at 1 s.
  return t && t->dst == ip_ && !(t->flags & TCP_SYN) && waiting_.contains(t->dport);
}

void StackImpl::send_probe(const ConnTuple& t) {
  pbuf* p = pbuf_alloc(PBUF_IP, TCP_HLEN, PBUF_RAM);
  if (!p) return;  // out of lwIP memory: the next round tries again
  std::uint32_t r[2] = {0, 0};
  if (getrandom(r, sizeof r, GRND_NONBLOCK) != sizeof r) {
    r[0] = static_cast<std::uint32_t>(mono_ns());
    r[1] = r[0] * 2654435761u;
  }
  auto* h = static_cast<tcp_hdr*>(p->payload);
  h->src = lwip_htons(t.local_port);
  h->dest = lwip_htons(t.remote_port);
  // Random numbers: out of any window but for a chance of about window / 2^32; a probe that
  // lands inside is an ACK of unsent data, which the peer also answers with its numbers.
  h->seqno = lwip_htonl(r[0]);
  h->ackno = lwip_htonl(r[1]);
  TCPH_HDRLEN_FLAGS_SET(h, TCP_HLEN / 4, TCP_ACK);
  h->wnd = PP_HTONS(0);
  h->chksum = 0;
  h->urgp = 0;
  ip4_addr_t src, dst;
  src.addr = t.local_ip;
  dst.addr = t.remote_ip;
  h->chksum = inet_chksum_pseudo(p, IP_PROTO_TCP, p->tot_len, &src, &dst);
  // Through ARP: a peer not yet resolved gets the probe once its address is (ARP_QUEUEING).
  (void)ip4_output_if(p, &src, &dst, TCP_TTL, 0, IP_PROTO_TCP, &netif_);
  pbuf_free(p);
}

}  // namespace samsa::net::dpdk
