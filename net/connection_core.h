// What both backends' connections share, whatever carries their bytes: Kafka framing (size
// prefix, bounds, the frame's buffer), the request memory budget (reserve, wait, retry), the
// in-flight bounds and the frames they hold back, the reorder window and its answers, file
// ranges read with IORING_OP_READ, the idle/linger timer and the close states. A backend
// (uring_connection.cc, dpdk/connection.cc) adds only its I/O: how bytes come in, how answers
// go out, how the socket closes. TransportCore is the matching part of a transport: the
// connection list and what its connections read from it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "io/reactor.h"
#include "net/memory_budget.h"
#include "net/ring_queue.h"
#include "net/transport.h"

namespace samsa::net {

// File ranges are read ahead of what has been sent by at most this many bytes, so a large
// fetch answer is not all in memory at once while the peer drains it.
constexpr std::size_t kReadAheadBytes = 4u << 20;
// Largest single READ; a longer range is read in several.
constexpr std::uint32_t kMaxReadChunk = 1u << 30;
// READs in flight per connection. Cached reads complete at submission, so several per turn let
// one send carry several file-backed answers.
constexpr std::size_t kMaxReads = 8;
// After a graceful close we shut down our side and wait this long for the peer's FIN, reading
// and discarding meanwhile: closing with unread input would send a RST, and a RST can destroy
// answers the peer has not read yet.
constexpr std::int64_t kLingerMs = 5000;

class ConnectionCore;

class TransportCore {
 public:
  TransportCore(io::Reactor& r, FrameHandler& h) : r_(r), h_(h) {}
  TransportCore(const TransportCore&) = delete;
  TransportCore& operator=(const TransportCore&) = delete;

  // A new connection joins the list (and counts as accepted and open).
  void add(ConnectionCore* c);
  // Unlinks and frees c (its finish_closed decides when).
  void destroy(ConnectionCore* c);
  void close_each(bool graceful);
  void wake_each();
  bool no_connections() const { return head_ == nullptr; }

  io::Reactor& r_;
  FrameHandler& h_;
  ListenerConfig cfg_;
  // The transport's own counters, seen as the shared part (set by its constructor).
  ConnectionStats* conn_stats_ = nullptr;
  std::size_t open_ = 0;
  bool dying_ = false;

 protected:
  ~TransportCore() = default;

 private:
  ConnectionCore* head_ = nullptr;
};

// The Transport calls every backend answers the same way; Iface is the backend's interface.
template <class Iface>
class TransportBase : public Iface, public TransportCore {
 public:
  TransportBase(io::Reactor& r, FrameHandler& h) : TransportCore(r, h) {}
  void close_all() override { close_each(false); }
  void close_all_gracefully() override { close_each(true); }
  std::size_t connection_count() const override { return open_; }
  const ConnectionStats& connection_stats() const override { return *conn_stats_; }
};

class ConnectionCore : public Connection, protected io::TurnHook, protected MemoryBudget::Waiter {
 public:
  ~ConnectionCore() override;

  void respond(std::uint64_t seq, Response r) override;
  void skip(std::uint64_t seq) override;
  void after_earlier_answers(std::uint64_t seq, std::move_only_function<void()> fn) override;
  void close(bool graceful) override;
  bool closed() const override { return state_ == State::closed; }
  std::uint64_t id() const override { return id_; }
  const std::string& peer() const override { return peer_; }
  io::Reactor& reactor() override { return t_->r_; }

  // Queue the backend's on_turn_end for the end of this loop turn.
  void wake() { t_->r_.at_turn_end(this); }

  // The transport's list of every connection object not yet destroyed.
  ConnectionCore* prev = nullptr;
  ConnectionCore* next = nullptr;

 protected:
  enum class State : std::uint8_t {
    open,      // reading, delivering, sending
    draining,  // close(true): no more frames; answers to delivered frames still go out
    linger,    // our FIN is on its way; reading and discarding until the peer's FIN or a timeout
    closed,    // shut down; waiting for the last completions and the handler
  };
  struct Slot {
    enum Kind : std::uint8_t { waiting, ready, skipped };
    Kind kind = waiting;
    std::uint32_t request_bytes = 0;
    std::uint64_t answer_bytes = 0;
    Response resp;
  };
  // A READ filling one file piece: the piece is pieces()[piece] of the answer to seq.
  struct ReadOp : io::Completion {
    ConnectionCore* conn = nullptr;
    bool busy = false;
    std::uint64_t seq = 0;
    std::size_t piece = 0;
    std::uint32_t done = 0;
  };
  struct ConnTimer : io::Timer {
    ConnectionCore* conn = nullptr;
  };

  ConnectionCore(std::uint64_t id, std::string peer);

  // The backend's I/O. on_hard_close stops its socket (hard_close did the rest);
  // answers_unsent tells the idle check that answers wait for this turn's send.
  virtual void on_hard_close() = 0;
  virtual bool answers_unsent() const = 0;
  // A frame now waits for budget: stop reading if the backend's reads would not stop anyway.
  virtual void on_budget_wait() {}

  // The connection has its transport (on the transport's reactor): on_open, idle timer, wake.
  void start(TransportCore* t);
  const ConnectionLimits& limits() const { return t_->cfg_.limits; }
  ConnectionStats& stats() { return *t_->conn_stats_; }
  void arm_timer(std::int64_t deadline_ns) { t_->r_.arm(&timer_, deadline_ns); }
  bool can_deliver() const {
    const auto& l = limits();
    return window_.size() < std::max<std::uint32_t>(l.max_inflight_requests, 1) &&
           inflight_bytes_ < l.max_inflight_bytes;
  }

  // ---- receiving ----
  // Frames bytes in place; returns how many it used. It stops early when the connection
  // closes or a frame waits for budget, and uses nothing while one waits: the bytes after a
  // waiting frame's size prefix belong to that frame and must not be parsed as a new one.
  std::size_t consume(const std::byte* p, std::size_t n);
  // For bytes in a buffer the backend reuses at once: what consume cannot use while a frame
  // waits for budget is kept, in order, in the stash (it follows the waiting frame's prefix).
  void take(const std::byte* p, std::size_t n) {
    const std::size_t used = budget_wait_ ? 0 : consume(p, n);
    if (budget_wait_) stash_.insert(stash_.end(), p + used, p + n);
  }
  // At the turn's end: a frame waiting for budget tries again (then the stash is framed), and
  // frames held back by the in-flight bounds are delivered while they fit.
  void deliver_held();
  // Everything received but not delivered goes, with its budget (close).
  void discard_input();
  bool reserve_frame(std::uint32_t size);
  void retry_reserved_frame();
  void drop_undelivered();
  void frame_complete(Buffer f);
  void deliver(Buffer f);

  // ---- answers ----
  void answer(std::uint64_t seq, Slot::Kind kind, Response* r);
  // The front slot is done: its request bytes leave the in-flight count and the budget.
  void pop_front_slot();
  // Starts reading the file piece pieces()[piece] of seq's answer; false when no READ is left.
  bool start_read(std::uint64_t seq, std::size_t piece);
  // Reads the file pieces of the answers about to go out, from (seq, piece) on, while less than
  // kReadAheadBytes lie ahead of the sending (`ahead`: what the backend already holds unsent):
  // at most kMaxReads at once, a bounded number of pieces looked at per call.
  void schedule_reads(std::uint64_t seq, std::size_t piece, std::uint64_t ahead);
  void issue_read(ReadOp& op);
  static void on_read(io::Completion* c, int res, std::uint32_t flags);

  // ---- closing ----
  void hard_close();
  void enter_linger();
  // on_close (once), for finish_closed.
  void notify_closed();
  // Drops the answers' bytes; the slots stay so late answers are still recognised and counted.
  void drop_answers();
  // Frees this once nothing refers to it any more; the caller returns at once.
  void destroy_if_done() {
    if (TurnHook::queued) return;
    if (unanswered_ == 0 || t_->dying_) t_->destroy(this);
  }

  TransportCore* t_ = nullptr;
  State state_ = State::open;
  const std::uint64_t id_;
  const std::string peer_;
  bool peer_eof_ = false;

  // Framing: the size prefix, then the frame's own buffer, filled as bytes arrive.
  std::byte hdr_[4]{};
  std::uint32_t hdr_have_ = 0;
  bool in_frame_ = false;
  Buffer cur_;
  std::size_t cur_have_ = 0;
  RingQueue<Buffer> pending_;  // complete frames held back by the in-flight bounds
  // Request memory budget: bytes this connection holds (frames received, delivered and not yet
  // answered), those of frames not yet delivered (cur_ and pending_), and a frame waiting for
  // room with the bytes that followed its size prefix (take()).
  std::uint64_t budget_held_ = 0;
  std::uint64_t undelivered_bytes_ = 0;
  bool budget_wait_ = false;
  std::uint32_t waiting_frame_ = 0;
  std::vector<std::byte> stash_;

  // Reorder window: slot i answers seq head_seq_ + i. Slots leave from the front once the
  // backend has handed their answer on.
  RingQueue<Slot> window_;
  std::uint64_t head_seq_ = 0;
  std::uint64_t next_seq_ = 0;
  std::uint64_t inflight_bytes_ = 0;
  std::uint64_t unanswered_ = 0;
  // after_earlier_answers' callbacks still waiting for an earlier answer (rare: a Metadata
  // request pipelined behind an acks=all produce).
  struct AfterEarlier {
    std::uint64_t seq;
    std::move_only_function<void()> fn;
  };
  std::vector<AfterEarlier> after_earlier_;
  bool earlier_answered(std::uint64_t seq) const;
  void release_after_earlier();

  // File ranges are read into the piece's own buffer (allocated when its read starts).
  ReadOp reads_[kMaxReads];
  std::size_t reads_busy_ = 0;
  // Operations whose final completion has not arrived; the object lives at least until 0.
  int ops_ = 0;

  bool close_notified_ = false;
  ConnTimer timer_;
  std::int64_t last_activity_ns_ = 0;
  // A TLS connection is closed if its handshake is not done by then (0: no such deadline).
  std::int64_t handshake_deadline_ns_ = 0;

 private:
  void on_turn_end() override = 0;
  void on_budget_available() override { wake(); }
  static void on_timer(io::Timer* t);
};

}  // namespace samsa::net
