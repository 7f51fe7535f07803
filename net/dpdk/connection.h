// The connection half of the DPDK backend (pipe.h explains the halves) and the per-reactor
// transport that owns them. Framing, reorder window, request budget, idle timer, close states
// and file ranges are ConnectionCore's (net/connection_core.h), shared with the uring
// transport; this adds the stack's half underneath instead of a kernel socket: received
// chunks in a backlog, receive credit for back-pressure, answers handed over in pieces.
#pragma once

#include <cstdint>
#include <string>

#include "net/connection_core.h"
#include "net/dpdk/dpdk_transport.h"
#include "net/dpdk/pipe.h"

namespace samsa::net::dpdk {

class Conn final : public ConnectionCore {
 public:
  Conn(LinkPtr link, StackPort& stack, StackConn* sc, std::string peer);

  // The transport takes the connection (its reactor's thread).
  void adopt(TransportImpl* t);
  void on_event(StackEvent& ev);

 private:
  void on_turn_end() override;
  void on_hard_close() override;
  bool answers_unsent() const override { return hand_seq_ < next_seq_; }

  void pump_rx();
  void discard_backlog();
  void hand_over();
  void on_taken(std::uint64_t n);
  void release_front();
  void finish_closed();
  void send_update();

  LinkPtr link_;
  StackPort& stack_;
  StackConn* sc_;

  // Receive side: bytes from the stack not yet consumed (front_off_ into the front one). While
  // a frame waits for budget they stay here, unread: the backlog is this backend's stash.
  RingQueue<Buffer> backlog_;
  std::size_t front_off_ = 0;
  std::uint64_t backlog_bytes_ = 0;
  std::uint64_t held_credit_ = 0;  // consumed while paused; returned when reading resumes
  bool paused_ = false;

  // A slot leaves the window once the stack has taken all of its answer.
  // hand_seq_/hand_piece_: the next piece to hand to the stack.
  std::uint64_t hand_seq_ = 0;
  std::size_t hand_piece_ = 0;
  std::uint64_t handed_ = 0;       // bytes handed to the stack
  std::uint64_t taken_ = 0;        // of which the stack took
  std::uint64_t front_taken_ = 0;  // taken bytes not yet matched to released slots

  // What goes to the stack at the end of this turn.
  ConnUpdate out_;

  bool stack_closed_ = false;
  bool release_sent_ = false;
  bool shutdown_sent_ = false;
};

class TransportImpl final : public TransportBase<DpdkTransport> {
 public:
  TransportImpl(io::Reactor& r, FrameHandler& h, StackPort& s);
  ~TransportImpl() override;

  bool listen(const ListenerConfig& cfg, std::string* error) override;
  std::uint16_t port() const override { return port_; }
  void stop_accepting() override;
  const DpdkTransportStats& stats() const override { return stats_; }

  void adopt(Conn* c);

  StackPort& stack_;
  DpdkTransportStats stats_;

 private:
  LinkPtr link_;
  std::uint16_t port_ = 0;
  bool accepting_ = false;
};

}  // namespace samsa::net::dpdk
