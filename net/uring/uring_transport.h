// The `uring` backend of net::Transport: kernel sockets driven by the reactor's io_uring.
// Multishot accept on a per-reactor SO_REUSEPORT socket, multishot recv into a provided-buffer
// ring shared by the reactor's connections, vectored sends that coalesce every answer ready in
// a loop turn, file ranges read with IORING_OP_READ. net/README.md has the details.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "net/transport.h"

namespace samsa::net {

// The shared counters (net/transport.h) and the uring transport's own.
struct UringTransportStats : ConnectionStats {
  std::uint64_t zerocopy_sends = 0;
  std::uint64_t recv_arms = 0;     // multishot recvs armed (first arm included)
  std::uint64_t recv_enobufs = 0;  // recvs ended because the buffer ring ran dry
  std::uint64_t tls_pending = 0;   // TLS connections whose handshake is not done yet
  std::uint64_t tls_refused = 0;   // connections closed at once: tls_max_pending reached
};

// Every reactor's listening socket sets SO_REUSEPORT, which would also let a second broker
// process of the same user join the group and silently take half the connections. Call this
// once per listener before the reactors bind: it binds a plain socket (SO_REUSEADDR only, so
// TIME_WAIT leftovers do not count) and fails if anything listens there already.
bool check_address_free(const std::string& host, std::uint16_t port, std::string* error);

class UringTransport : public Transport {
 public:
  static std::unique_ptr<UringTransport> create(io::Reactor& r, FrameHandler& h);
  virtual const UringTransportStats& stats() const = 0;
};

}  // namespace samsa::net
