// net::Transport — connections that deliver length-prefixed frames and take responses.
// Two backends implement it: `uring` (kernel sockets driven by the reactor's io_uring) and
// `dpdk` (poll-mode drivers and a userspace TCP/IP stack). The layer above sees only this.
//
// Framing is Kafka's: a big-endian int32 size, then that many bytes. A connection delivers
// frames (without the size) to its FrameHandler in arrival order; the handler answers each
// frame with a Response that includes its own 4-byte size (or declares it unanswered, acks=0),
// and the connection sends answers in request order, whatever order they complete in.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "io/reactor.h"
#include "net/buffer.h"
#include "net/tls/tls.h"

namespace samsa::net {

class Connection;
class MemoryBudget;

// Implemented by the layer above (daemon's Kafka dispatch). All calls arrive on the reactor
// thread that owns the connection.
struct FrameHandler {
  virtual void on_open(Connection& c) = 0;
  // A complete frame (without its size prefix). seq numbers frames on this connection from 0;
  // the handler must eventually call c.respond(seq, ...) or c.skip(seq) for every seq.
  virtual void on_frame(Connection& c, std::uint64_t seq, Buffer frame) = 0;
  // The connection is gone (peer closed, error, idle timeout, or close()). The Connection
  // object stays valid until every delivered seq has been answered or skipped; those late
  // calls are discarded.
  virtual void on_close(Connection& c) = 0;

 protected:
  ~FrameHandler() = default;
};

// Over either in-flight bound a connection delivers no more frames and stops reading its
// socket until answers drain, so a client that pipelines without reading its answers fills its
// own socket buffers, not our memory. A frame counts as in flight from delivery until its
// answer has been handed to the kernel (or skipped and every earlier answer sent).
struct ConnectionLimits {
  std::uint32_t max_frame_bytes = 100u << 20;     // socket.request.max.bytes
  std::uint32_t max_inflight_requests = 1000;     // frames in flight
  std::uint64_t max_inflight_bytes = 256u << 20;  // their total size
  std::int64_t idle_timeout_ms = 600000;          // connections.max.idle.ms
};

// Counters of one transport's connections, since the transport was created; read on the
// reactor thread. Each backend extends them (UringTransportStats, DpdkTransportStats).
struct ConnectionStats {
  std::uint64_t accepted = 0;
  std::uint64_t closed = 0;
  std::uint64_t frames_in = 0;
  std::uint64_t bytes_in = 0;
  std::uint64_t bytes_out = 0;    // answer bytes handed to the kernel (dpdk: that the stack took)
  std::uint64_t sends = 0;        // sends (dpdk: batches handed to the stack), each of many answers
  std::uint64_t short_sends = 0;  // sends the kernel (or the stack) took only part of
  std::uint64_t file_reads = 0;   // FileRange pieces read
  std::uint64_t recv_pauses = 0;  // reading stopped for back-pressure
  std::uint64_t bad_frames = 0;   // connections closed for a size outside 1..max_frame_bytes
  std::uint64_t budget_waits = 0;  // frames that waited for room in the request memory budget
};

class Connection {
 public:
  virtual ~Connection() = default;
  // Queue the answer to frame seq; sent once every earlier frame is answered or skipped.
  virtual void respond(std::uint64_t seq, Response r) = 0;
  // Frame seq gets no answer (acks=0 produce); later answers are not held back by it.
  virtual void skip(std::uint64_t seq) = 0;
  // Runs fn once every frame before seq has been answered or skipped: at once if they are,
  // else later in the turn that settles the last of them (never inside respond or skip). For
  // an answer that must describe the state when it is sent, not when it was asked: Kafka
  // reads a connection's next request only once the previous one is answered. seq must be
  // unanswered until fn has run (so the connection outlives it).
  virtual void after_earlier_answers(std::uint64_t seq, std::move_only_function<void()> fn) = 0;
  // At once (graceful=false), or gracefully: deliver no more frames, send the answers to every
  // frame already delivered as they arrive, in order, then shut down. on_close follows when
  // the socket is done; the idle timeout still bounds a peer that stops reading.
  virtual void close(bool graceful) = 0;
  virtual bool closed() const = 0;
  virtual std::uint64_t id() const = 0;
  virtual const std::string& peer() const = 0;  // "ip:port"
  virtual io::Reactor& reactor() = 0;
  // The subject of the certificate a TLS client presented and the listener verified (RFC 2253,
  // as Kafka's principal builder sees it), "" without one or without TLS.
  virtual std::string tls_peer_subject() const { return {}; }
  // Opaque per-connection state of the handler (e.g. the client's negotiated versions).
  void* user = nullptr;
};

struct ListenerConfig {
  std::string host = "127.0.0.1";  // empty: every interface
  std::uint16_t port = 9092;
  int backlog = 1024;
  ConnectionLimits limits;
  // Receive memory the reactor's connections share (uring: a provided-buffer ring). Each recv
  // completion takes one whole buffer, whatever it carries, and frames are copied out at once,
  // so this bounds bytes received per loop turn, not per connection. count is rounded up to
  // a power of two.
  std::uint32_t recv_buffer_count = 256;
  std::uint32_t recv_buffer_bytes = 16384;
  // socket.send.buffer.bytes / socket.receive.buffer.bytes; -1 keeps the kernel's autotuning.
  int socket_send_buffer_bytes = -1;
  int socket_receive_buffer_bytes = -1;
  // Sends of at least this many bytes use zero-copy (SENDMSG_ZC); 0 never. Off by default: on
  // loopback it measured slower than a copying send (the receiver copies anyway).
  std::uint32_t zerocopy_send_min_bytes = 0;
  // TLS (SSL and SASL_SSL listeners): the context each new connection takes, asked at every
  // accept so that a reload's certificates apply from the next connection on; empty, or
  // returning null: plaintext. A connection whose handshake is not done within
  // tls_handshake_timeout_ms is closed. Only the uring backend serves TLS: the DPDK backend's
  // listen() refuses a config with it.
  std::function<std::shared_ptr<const tls::Context>()> tls;
  std::int64_t tls_handshake_timeout_ms = 10000;
  // At most this many TLS connections of this transport (one per reactor and listener) may
  // be in their handshake at once (each holds ~30 KiB of OpenSSL state); more are closed at
  // once with a log line, so a flood of stalled handshakes has a memory bound.
  std::uint32_t tls_max_pending = 1024;
  // The reactor's request memory budget (queued.max.request.bytes / reactors), shared by all
  // of its transports and the requests they deliver; null: frames are bounded only per
  // connection. Must outlive the transport.
  MemoryBudget* budget = nullptr;
};

// One transport instance per reactor. Each accepts on its own SO_REUSEPORT socket so the
// kernel spreads connections over reactors. Every member, the destructor included, runs on the
// reactor's thread; destroy it outside its own callbacks (the destructor runs reactor turns
// until the kernel has released every buffer it was given) and before its reactor. Connections
// still waiting for answers are freed with it: the handler must not touch them afterwards.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual bool listen(const ListenerConfig& cfg, std::string* error) = 0;
  // Bound port (useful with port 0 in tests).
  virtual std::uint16_t port() const = 0;
  // Stop accepting; existing connections stay (drain).
  virtual void stop_accepting() = 0;
  // Close every connection at once.
  virtual void close_all() = 0;
  // Close every connection gracefully (Connection::close(true)): frames already delivered are
  // still answered, then the socket shuts down. For a drain before maintenance.
  virtual void close_all_gracefully() = 0;
  // Connections not yet closed.
  virtual std::size_t connection_count() const = 0;
  // The counters every backend keeps (its own interface has the rest).
  virtual const ConnectionStats& connection_stats() const = 0;
};

std::unique_ptr<Transport> make_uring_transport(io::Reactor& r, FrameHandler& h);

}  // namespace samsa::net
