// The uring backend's internals: a connection over a kernel socket (uring_connection.cc) and
// the per-reactor transport that accepts them (uring_transport.cc). Framing, budget, window
// and close states are ConnectionCore's; this adds the multishot recv into the provided-buffer
// ring and the coalesced sendmsg.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "net/connection_core.h"
#include "net/uring/buf_ring.h"
#include "net/uring/uring_transport.h"

namespace samsa::net::uring {

// One sendmsg carries at most this many pieces; the rest follow when it completes.
constexpr std::size_t kMaxIov = 64;

class TransportImpl;

class UringConnection final : public ConnectionCore {
 public:
  // tls: the listener's context (null: plaintext).
  UringConnection(TransportImpl& t, int fd, std::string peer,
                  std::shared_ptr<const tls::Context> tls = nullptr);
  ~UringConnection() override;

  void start();
  std::string tls_peer_subject() const override {
    return tls_ ? tls_->peer_subject() : std::string();
  }

 private:
  struct Op : io::Completion {
    UringConnection* conn = nullptr;
  };

  // Everything that must not run inside the handler's calls or in the middle of completion
  // processing happens here, at the end of the turn: delivering held frames, sending,
  // re-arming recv, finishing a close, destroying the object.
  void on_turn_end() override;
  void on_hard_close() override;
  bool answers_unsent() const override {
    return (!window_.empty() || !tls_idle()) && !send_inflight_;
  }
  void on_budget_wait() override { pause_recv(); }
  static void on_recv(io::Completion* c, int res, std::uint32_t flags);
  static void on_send(io::Completion* c, int res, std::uint32_t flags);

  bool want_recv() const;
  void arm_recv();
  void pause_recv();
  void flush();
  std::size_t gather_ready();
  void send_done(int res);
  void advance_sent(std::size_t n);
  void release_front();
  void shut_down_write();
  void finish_closed();
  // TLS (connection_tls.cc): ciphertext in, plaintext on to the framing; answers encrypted
  // into tls_send_, which is what a TLS connection's sendmsg carries.
  void tls_receive(const std::byte* p, std::size_t n);
  void tls_flush();
  void tls_encrypt_window();
  bool tls_idle() const {
    return !tls_ || (tls_send_off_ == tls_send_.size() && tls_->pending_out().empty());
  }

  TransportImpl& t_;
  int fd_;

  // Receive side.
  Op recv_op_;
  bool recv_armed_ = false;
  bool recv_cancelling_ = false;

  // Send cursor inside window_.front().
  std::size_t cur_piece_ = 0;
  std::size_t cur_off_ = 0;

  // Send side: one sendmsg at a time keeps the stream in order.
  Op send_op_;
  bool send_inflight_ = false;
  bool send_zc_ = false;
  std::size_t send_len_ = 0;
  int zc_res_ = 0;
  std::vector<iovec> iov_;
  msghdr msg_{};

  // TLS: the session, and the ciphertext being sent (copied out of the session, whose buffer
  // may move while a sendmsg holds a pointer into ours).
  std::unique_ptr<tls::Session> tls_;
  std::vector<std::uint8_t> tls_send_;
  std::size_t tls_send_off_ = 0;
};

class TransportImpl final : public TransportBase<UringTransport> {
 public:
  TransportImpl(io::Reactor& r, FrameHandler& h);
  ~TransportImpl() override;

  bool listen(const ListenerConfig& cfg, std::string* error) override;
  std::uint16_t port() const override { return port_; }
  void stop_accepting() override;
  const UringTransportStats& stats() const override { return stats_; }

  // Shared with the connections.
  std::unique_ptr<ProvidedBuffers> bufs_;
  UringTransportStats stats_;

 private:
  struct AcceptOp : io::Completion {
    TransportImpl* self = nullptr;
  };
  struct RetryTimer : io::Timer {
    TransportImpl* self = nullptr;
  };

  static void on_accept(io::Completion* c, int res, std::uint32_t flags);
  static void on_retry(io::Timer* t);
  void arm_accept();
  void adopt(int fd);

  int lfd_ = -1;
  std::int64_t tls_refused_logged_ns_ = 0;
  std::uint16_t port_ = 0;
  bool accepting_ = false;
  bool accept_armed_ = false;
  AcceptOp accept_op_;
  RetryTimer retry_timer_;
};

}  // namespace samsa::net::uring
