// The connection half of the DPDK backend (pipe.h explains the halves) and the per-reactor
// transport that owns them. Framing, reorder window, back-pressure, request budget, idle
// timer, close semantics and file ranges behave as the uring transport's (net/README.md);
// only the socket underneath is the stack's half instead of a kernel socket.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "net/dpdk/dpdk_transport.h"
#include "net/dpdk/pipe.h"
#include "net/memory_budget.h"
#include "net/ring_queue.h"

namespace samsa::net::dpdk {

// File ranges are read ahead of what the stack has taken by at most this many bytes.
constexpr std::size_t kReadAheadBytes = 4u << 20;
constexpr std::uint32_t kMaxReadChunk = 1u << 30;
constexpr std::size_t kMaxReads = 8;
// After a graceful close: how long we wait for the peer's FIN, reading and discarding.
constexpr std::int64_t kLingerMs = 5000;

class Conn final : public Connection, private io::TurnHook, private MemoryBudget::Waiter {
 public:
  Conn(LinkPtr link, StackPort& stack, StackConn* sc, std::string peer);
  ~Conn() override;

  void respond(std::uint64_t seq, Response r) override;
  void skip(std::uint64_t seq) override;
  void close(bool graceful) override;
  bool closed() const override { return state_ == State::closed; }
  std::uint64_t id() const override { return id_; }
  const std::string& peer() const override { return peer_; }
  io::Reactor& reactor() override;

  // The transport takes the connection (its reactor's thread).
  void adopt(TransportImpl* t);
  void on_event(StackEvent& ev);
  void wake();

  Conn* prev = nullptr;
  Conn* next = nullptr;

 private:
  enum class State : std::uint8_t { open, draining, linger, closed };
  struct Slot {
    enum Kind : std::uint8_t { waiting, ready, skipped };
    Kind kind = waiting;
    std::uint32_t request_bytes = 0;
    std::uint64_t answer_bytes = 0;
    Response resp;
  };
  struct ReadOp : io::Completion {
    Conn* conn = nullptr;
    bool busy = false;
    std::uint64_t seq = 0;
    std::size_t piece = 0;
    std::uint32_t done = 0;
  };
  struct ConnTimer : io::Timer {
    Conn* conn = nullptr;
  };

  void on_turn_end() override;
  void on_budget_available() override { wake(); }
  static void on_read(io::Completion* c, int res, std::uint32_t flags);
  static void on_timer(io::Timer* t);

  const ConnectionLimits& limits() const;
  bool can_deliver() const;
  bool reading() const;
  void pump_rx();
  std::size_t consume(const std::byte* p, std::size_t n);
  bool reserve_frame(std::uint32_t size);
  void retry_reserved_frame();
  void drop_undelivered();
  void discard_backlog();
  void frame_complete(Buffer f);
  void deliver_frame(Buffer f);
  void answer(std::uint64_t seq, Slot::Kind kind, Response* r);
  void hand_over();
  void on_taken(std::uint64_t n);
  void release_front();
  void schedule_reads();
  void issue_read(ReadOp& op);
  void hard_close();
  void finish_closed();
  void send_update();
  void arm_timer(std::int64_t deadline_ns);

  LinkPtr link_;
  StackPort& stack_;
  StackConn* sc_;
  TransportImpl* t_ = nullptr;
  State state_ = State::open;
  const std::uint64_t id_;
  const std::string peer_;

  // Receive side: bytes from the stack not yet consumed (front_off_ into the front one).
  RingQueue<Buffer> backlog_;
  std::size_t front_off_ = 0;
  std::uint64_t backlog_bytes_ = 0;
  std::uint64_t held_credit_ = 0;  // consumed while paused; returned when reading resumes
  bool paused_ = false;
  bool peer_eof_ = false;
  std::byte hdr_[4]{};
  std::uint32_t hdr_have_ = 0;
  bool in_frame_ = false;
  Buffer cur_;
  std::size_t cur_have_ = 0;
  RingQueue<Buffer> pending_;  // complete frames held back by the in-flight bounds
  std::uint64_t budget_held_ = 0;
  std::uint64_t undelivered_bytes_ = 0;
  bool budget_wait_ = false;
  std::uint32_t waiting_frame_ = 0;

  // Reorder window: slot i answers seq head_seq_ + i. A slot leaves once the stack has taken
  // all of its answer. hand_seq_/hand_piece_: the next piece to hand to the stack.
  RingQueue<Slot> window_;
  std::uint64_t head_seq_ = 0;
  std::uint64_t next_seq_ = 0;
  std::uint64_t inflight_bytes_ = 0;
  std::uint64_t unanswered_ = 0;
  std::uint64_t hand_seq_ = 0;
  std::size_t hand_piece_ = 0;
  std::uint64_t handed_ = 0;       // bytes handed to the stack
  std::uint64_t taken_ = 0;        // of which the stack took
  std::uint64_t front_taken_ = 0;  // taken bytes not yet matched to released slots

  // What goes to the stack at the end of this turn.
  ConnUpdate out_;

  ReadOp reads_[kMaxReads];
  std::size_t reads_busy_ = 0;
  int ops_ = 0;

  bool close_notified_ = false;
  bool stack_closed_ = false;
  bool release_sent_ = false;
  bool shutdown_sent_ = false;
  ConnTimer timer_;
  std::int64_t last_activity_ns_ = 0;
};

class TransportImpl final : public DpdkTransport {
 public:
  TransportImpl(io::Reactor& r, FrameHandler& h, StackPort& s);
  ~TransportImpl() override;

  bool listen(const ListenerConfig& cfg, std::string* error) override;
  std::uint16_t port() const override { return port_; }
  void stop_accepting() override;
  void close_all() override;
  void close_all_gracefully() override;
  std::size_t connection_count() const override { return open_; }
  const DpdkTransportStats& stats() const override { return stats_; }

  void adopt(Conn* c);
  void destroy(Conn* c);

  io::Reactor& r_;
  FrameHandler& h_;
  StackPort& stack_;
  ListenerConfig cfg_;
  DpdkTransportStats stats_;
  std::size_t open_ = 0;
  bool dying_ = false;

 private:
  LinkPtr link_;
  std::uint16_t port_ = 0;
  bool accepting_ = false;
  Conn* head_ = nullptr;
};

}  // namespace samsa::net::dpdk
