// The `dpdk` backend of net::Transport: DPDK poll-mode drivers and a userspace TCP/IP stack
// (lwIP 2.1, built from Debian's source package with net/dpdk/lwip/lwipopts.h).
//
// One DpdkStack per process owns the EAL, the Ethernet port and the TCP/IP stack; the reactor
// it is attached to polls the device every loop turn (and sleeps on the device's descriptors
// when idle). Every reactor has its own DpdkTransport, as with uring; connections are spread
// over the transports that listen on a port, and the stack hands each one's bytes to its
// reactor through that reactor's queue. net/dpdk/README.md has the details.
#pragma once

#include <cstdint>
#include <expected>
#include <memory>
#include <string>

#include "io/reactor.h"
#include "net/backend.h"
#include "net/client_connection.h"
#include "net/transport.h"

namespace samsa::net {

// Each connection's TCP receive window (lwipopts.h TCP_WND): what the stack holds for a
// connection whose reader stopped (the uring transport's kernel socket buffer).
constexpr std::uint32_t kDpdkReceiveWindow = 512 * 1024;

// The stack's counters (a snapshot the poll loop refreshes every few milliseconds).
struct DpdkStats {
  std::uint64_t rx_packets = 0, rx_bytes = 0, tx_packets = 0, tx_bytes = 0;
  std::uint64_t rx_dropped = 0;          // device ring full, no mbuf, errors
  std::uint64_t tx_dropped = 0;          // transmit ring full for too long, no mbuf, errors
  std::uint64_t tx_zero_copy_bytes = 0;  // payload sent from kept answers without a copy
  std::uint64_t ip_dropped = 0;  // not for us, bad header or checksum (lwIP's IP and TCP drops)
  std::uint64_t rx_bad_checksum = 0;  // of those, bad IP or TCP checksums (or unfilled ones)
  std::uint64_t tcp_retransmits = 0;
  std::uint64_t tcp_connections = 0;  // established (or closing) connections now
  std::uint64_t tcp_half_open = 0;    // SYN received, handshake not finished
  std::uint64_t tcp_accepted = 0;     // since start
  std::uint64_t tcp_connects = 0;     // outbound connections attempted since start (fetchers)
  std::uint64_t tcp_resets_received = 0;
  std::uint64_t tcp_syn_dropped = 0;  // half-open connections dropped: backlog nearly full
  std::uint64_t tcp_probes = 0;       // probes of a killed predecessor's connections (ConnJournal)
  std::uint64_t poll_busy_ns = 0;     // time in polls that found work
  std::uint64_t poll_total_ns = 0;    // time since attach
  std::uint64_t sleeps = 0;           // times the loop slept
  std::uint32_t mbufs_free = 0, mbufs_total = 0;
};

// Names and sizes for `samsactl status`.
struct DpdkInfo {
  std::string device, driver, interface, ip, mac;
  std::uint32_t mtu = 0;
  std::uint16_t rx_queues = 0, tx_queues = 0;
  std::string polled_by;  // the attached reactor's name
};

class DpdkStack {
 public:
  // Initialises DPDK and the stack (once per process). The error names the problem: no
  // device, no memory, hugepages missing, the device or the address in use.
  static std::expected<std::unique_ptr<DpdkStack>, std::string> create(const DpdkOptions& o);
  virtual ~DpdkStack() = default;
  // On r's thread: r polls the device from now on. detach() on that same thread, before r
  // goes away; the stack may then be attached to another reactor.
  virtual void attach(io::Reactor& r) = 0;
  virtual void detach() = 0;
  virtual DpdkStats stats() const = 0;  // any thread
  virtual DpdkInfo info() const = 0;    // any thread
  // An outbound connection over this stack, owned by reactor r (its thread; any reactor, the
  // polling one or another): net::ClientConnection's behaviour (connect timeout, backoff and
  // reconnect, request timeout, framing). The host must be a numeric IPv4 address (the stack
  // has no resolver). Call on r's thread; every callback comes there.
  virtual std::unique_ptr<ClientConnection> connect(io::Reactor& r, ClientHandler& h,
                                                    ClientOptions o) = 0;
  // The same as a factory, for code that must not know the backend (ReplicaFetcher).
  ClientFactory client_factory() {
    return [this](io::Reactor& r, ClientHandler& h, ClientOptions o) {
      return connect(r, h, std::move(o));
    };
  }
};

// Per reactor, the counters both backends share (net/transport.h); read on the reactor thread.
struct DpdkTransportStats : ConnectionStats {};

class DpdkTransport : public Transport {
 public:
  static std::unique_ptr<DpdkTransport> create(io::Reactor& r, FrameHandler& h, DpdkStack& s);
  virtual const DpdkTransportStats& stats() const = 0;
};

}  // namespace samsa::net
