// net::ClientConnection — an outbound connection owned by a reactor (a follower's fetcher to
// its leader): it connects, sends size-prefixed request frames, delivers the response frames in
// the order they arrive (Kafka answers a connection's requests in order) and, when the
// connection fails, tells its handler and connects again after an exponential backoff.
//
// ClientConnection is the interface; each backend has its own: create() is the uring one (kernel
// sockets driven by the reactor's ring), DpdkStack::connect (net/dpdk) the DPDK one. Code that
// must not know which backend runs takes a ClientFactory. Requests are not
// kept across a reconnect: send() refuses while not connected, and the handler re-sends what
// it still wants from on_connected (a fetcher asks again from its log end anyway).
//
// Thread: the reactor's. Every call, the callbacks and the destructor run on its thread. The
// handle may be destroyed anywhere on that thread, inside its own callbacks too; the socket is
// shut at once and the internals are freed once the kernel has returned their operations.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "io/reactor.h"
#include "net/buffer.h"
#include "net/sasl/sasl.h"
#include "net/tls/tls.h"

namespace samsa::net {

// How an outbound connection secures itself (a cluster's inter-broker and controller
// listeners): TLS with a client context (null: none), then, with a mechanism, a SASL login
// (SaslHandshake and SaslAuthenticate) before the handler hears on_connected.
struct ClientSecurity {
  std::shared_ptr<const tls::Context> tls;
  std::optional<sasl::Mechanism> mechanism;
  std::string user;
  std::string password;
};

struct ClientOptions {
  std::string host;  // numeric address or a name (resolved off the reactor)
  std::uint16_t port = 0;
  std::uint32_t max_frame_bytes = 100u << 20;  // a larger response closes the connection
  std::int64_t connect_timeout_ms = 3000;
  // The oldest request without a response for this long closes the connection (0: never).
  std::int64_t request_timeout_ms = 30000;
  // Backoff before each new attempt after a failure: min, doubled per failure up to max, each
  // with up to 20% jitter so the followers of a dead leader do not knock in step. A response
  // resets it.
  std::int64_t backoff_min_ms = 50;
  std::int64_t backoff_max_ms = 1000;
  int socket_send_buffer_bytes = -1;  // -1: the kernel's autotuning
  int socket_receive_buffer_bytes = -1;
  // Null: plaintext, no login. The connect timeout covers the TLS handshake and the login too.
  std::shared_ptr<const ClientSecurity> security;
};

struct ClientStats {
  std::uint64_t connects = 0;          // connections established
  std::uint64_t connect_failures = 0;  // attempts that failed (resolution, refusal, timeout)
  std::uint64_t disconnects = 0;       // established connections lost
  std::uint64_t requests = 0;
  std::uint64_t responses = 0;
  std::uint64_t bytes_out = 0;
  std::uint64_t bytes_in = 0;
};

class ClientConnection;

// Implemented by the user (a fetcher). All calls arrive on the reactor's thread, never inside
// ClientConnection's own member calls.
struct ClientHandler {
  virtual void on_connected(ClientConnection& c) = 0;
  // One response frame, without its size prefix, in request order.
  virtual void on_response(ClientConnection& c, Buffer frame) = 0;
  // An established connection or an attempt failed (error: a positive errno; EPROTO for a bad
  // frame size, ETIMEDOUT for a timeout). Requests without a response are lost. The next attempt
  // follows after the backoff.
  virtual void on_disconnected(ClientConnection& c, int error) = 0;

 protected:
  ~ClientHandler() = default;
};

class ClientConnection {
 public:
  // The uring backend's connection; starts connecting at once.
  static std::unique_ptr<ClientConnection> create(io::Reactor& r, ClientHandler& h,
                                                  ClientOptions o);
  virtual ~ClientConnection() = default;
  ClientConnection(const ClientConnection&) = delete;
  ClientConnection& operator=(const ClientConnection&) = delete;

  // Queues a whole request frame, its 4-byte size prefix included; sent at the end of this
  // loop turn with every other frame queued meanwhile. False (and nothing queued) when not
  // connected.
  virtual bool send(Buffer frame) = 0;
  virtual bool connected() const = 0;
  // Requests sent (or queued) whose response has not arrived.
  virtual std::size_t inflight() const = 0;
  // Drops the connection now (e.g. after a response that makes no sense) and connects again
  // after the backoff; on_disconnected follows as for a failure.
  virtual void reconnect() = 0;
  // Where the next attempts go; a live connection elsewhere is dropped (leadership moved to a
  // broker with another address, or a broker re-registered with a new endpoint).
  virtual void set_endpoint(const std::string& host, std::uint16_t port) = 0;
  virtual const std::string& host() const = 0;
  virtual std::uint16_t port() const = 0;
  virtual const ClientStats& stats() const = 0;

  // ClientConnection internals of every backend alive (handles and those still waiting for the
  // kernel or the stack); for tests.
  static std::size_t live_count();

 protected:
  ClientConnection() = default;
};

// Makes a backend's outbound connection on reactor r (its thread); it starts connecting at
// once. An empty factory means the uring one (ClientConnection::create).
using ClientFactory = std::function<std::unique_ptr<ClientConnection>(
    io::Reactor& r, ClientHandler& h, ClientOptions o)>;

}  // namespace samsa::net
