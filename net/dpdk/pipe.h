// The two halves of a DPDK-backend connection and what passes between them.
//
// The TCP/IP stack (lwIP, one instance per process) runs on one reactor: the one that polls
// the device. A connection's other half (framing, reorder window, budget, idle timer, the
// handler's calls) lives on the reactor whose transport accepted it, like a uring connection.
// The halves talk like a socket and its kernel: the stack side hands over received bytes and
// reports how many answer bytes it took into its send buffer; the connection side hands over
// answers, returns receive credit as it consumes bytes (so the TCP window closes when it stops
// reading), and asks for shutdown or close. When both halves are on the same reactor these
// are direct calls at safe points; otherwise each batch is one task posted to the other
// reactor (at most one per connection per loop turn each way).
//
// Lifetimes: the stack side sends `closed` once, when its pcb is gone; the connection side
// answers with `release` and never writes again; then the stack side frees itself. A Link is
// one transport as the stack sees it; when the transport goes away it detaches the Link and
// the stack drops everything of it (connections are reset).
//
// Outbound connections (client.cc, a follower's fetcher to its leader) use the same halves: the
// requesting reactor's side is a ClientSide with a Link of its own for each attempt; the stack
// opens the connection (StackPort::connect_out) and reports `connected` or `closed`. Ending an
// attempt detaches its Link, which resets the connection and frees the stack's half, so there
// is no closed/release exchange for them.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/reactor.h"
#include "net/buffer.h"
#include "net/client_connection.h"
#include "net/transport.h"

namespace samsa::net::dpdk {

class StackConn;  // the stack's half (stack.cc)
class Conn;       // the connection's half (connection.cc)
class TransportImpl;
// Frees a connection half that never reached its transport (connection.cc).
struct ConnDeleter {
  void operator()(Conn* c) const;
};
using ConnPtr = std::unique_ptr<Conn, ConnDeleter>;

struct StackEvent;

// The requesting reactor's half of an outbound connection (client.cc): takes the stack's events
// on that reactor's thread.
class ClientSide {
 public:
  virtual void on_stack_event(StackEvent& ev) = 0;

 protected:
  ~ClientSide() = default;
};

struct Link {
  io::Reactor* reactor = nullptr;
  // The transport, touched only on `reactor`'s thread; null once it has gone away.
  TransportImpl* transport = nullptr;
  // Or the outbound connection it serves, touched only on `reactor`'s thread; null once its
  // attempt has ended.
  ClientSide* client = nullptr;
  // Set by the transport's thread before it goes; the stack stops posting to the reactor.
  std::atomic<bool> detached{false};
  // Posts to `reactor` under way from the stack's thread (the detaching thread waits for 0).
  std::atomic<int> posting{0};
};
using LinkPtr = std::shared_ptr<Link>;

// Stack → connection, accumulated during one poll and delivered at its end.
struct StackEvent {
  ConnPtr opened;            // a new connection for the transport to adopt
  std::vector<Buffer> data;  // received bytes, in order
  std::uint64_t taken = 0;   // answer bytes the stack accepted into its send buffer
  bool eof = false;          // the peer's FIN (after the data above)
  // An outbound connection's handshake completed; `self` is the stack's half to update.
  bool connected = false;
  StackConn* self = nullptr;
  enum class Closed : std::uint8_t { no, normal, reset, error };
  Closed closed = Closed::no;
  bool empty() const {
    return !opened && data.empty() && taken == 0 && !eof && !connected && closed == Closed::no;
  }
};

// Connection → stack, accumulated during one loop turn.
struct ConnUpdate {
  std::vector<Buffer> send;  // answer bytes, in order
  std::uint64_t credit = 0;  // received bytes consumed: reopen that much TCP window
  bool shutdown = false;     // our FIN once everything handed over has been sent
  bool close = false;        // close now: FIN, or RST when input is left unread
  bool release = false;      // after `closed`: the connection side is done
  bool empty() const { return send.empty() && credit == 0 && !shutdown && !close && !release; }
};

// The stack's side of the conversation (stack.cc). Thread: any transport's reactor may call
// these; they run on the stack's reactor (directly when already there, else posted).
class StackPort {
 public:
  virtual io::Reactor* reactor() = 0;  // the reactor that polls; null while detached
  virtual void update(StackConn* sc, ConnUpdate u) = 0;
  // Joins (or creates) the listener on cfg.port for this transport; waits for the stack.
  virtual bool listen(const LinkPtr& link, const ListenerConfig& cfg, std::uint16_t* port,
                      std::string* error) = 0;
  virtual void stop_accepting(const LinkPtr& link) = 0;
  // Opens an outbound connection to ip:port (ip in network order) from an ephemeral port for
  // link's client; its outcome comes as an event (`connected`, or `closed`). False when the
  // stack is not attached to a reactor.
  virtual bool connect_out(const LinkPtr& link, std::uint32_t ip, std::uint16_t port) = 0;
  // The transport is going: its connections are reset and nothing more is posted to it.
  virtual void detach(const LinkPtr& link) = 0;

 protected:
  ~StackPort() = default;
};

// Implemented by connection.cc, called by the stack on its own thread at accept.
ConnPtr make_conn(const LinkPtr& link, StackPort& stack, StackConn* sc, std::string peer);
// An outbound connection on reactor r over the stack (client.cc).
std::unique_ptr<ClientConnection> make_client(io::Reactor& r, ClientHandler& h, ClientOptions o,
                                              StackPort& stack);
// Delivers an event on the connection's reactor thread (connection.cc).
void deliver(const LinkPtr& link, Conn* c, StackEvent ev);

}  // namespace samsa::net::dpdk
