#include "net/uring/connection.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "base/clock.h"
#include "base/log.h"

namespace samsa::net::uring {
namespace {
std::atomic<std::uint64_t> g_next_connection_id{1};
}  // namespace

UringConnection::UringConnection(TransportImpl& t, int fd, std::string peer,
                                 std::shared_ptr<const tls::Context> tls)
    : ConnectionCore(g_next_connection_id.fetch_add(1, std::memory_order_relaxed), std::move(peer)),
      t_(t),
      fd_(fd) {
  recv_op_.fn = &UringConnection::on_recv;
  recv_op_.conn = this;
  send_op_.fn = &UringConnection::on_send;
  send_op_.conn = this;
  iov_.reserve(kMaxIov);
  if (tls) {
    tls_ = std::make_unique<tls::Session>(std::move(tls));
    handshake_deadline_ns_ = mono_ns() + t.cfg_.tls_handshake_timeout_ms * 1'000'000;
    ++t.stats_.tls_pending;
  }
}

UringConnection::~UringConnection() {
  if (fd_ >= 0) ::close(fd_);
  if (handshake_deadline_ns_) --t_.stats_.tls_pending;
}

void UringConnection::start() {
  ConnectionCore::start(&t_);
}

// ---- receiving ----

bool UringConnection::want_recv() const {
  if (fd_ < 0 || recv_armed_ || peer_eof_ || budget_wait_) return false;
  switch (state_) {
    case State::open:
      return pending_.empty() && can_deliver();
    case State::draining:
    case State::linger:
      return true;  // read and discard, so closing does not turn into a RST
    case State::closed:
      return false;
  }
  return false;
}

void UringConnection::arm_recv() {
  io_uring_sqe* s = t_.r_.sqe(&recv_op_);
  io_uring_prep_recv_multishot(s, fd_, nullptr, 0, 0);
  s->flags |= IOSQE_BUFFER_SELECT;
  s->buf_group = t_.bufs_->group();
  recv_armed_ = true;
  recv_cancelling_ = false;
  ++ops_;
  ++t_.stats_.recv_arms;
}

void UringConnection::pause_recv() {
  if (!recv_armed_ || recv_cancelling_) return;
  io_uring_prep_cancel(t_.r_.sqe_noreply(), &recv_op_, 0);
  recv_cancelling_ = true;
  ++t_.stats_.recv_pauses;
}

void UringConnection::on_recv(io::Completion* c, int res, std::uint32_t flags) {
  UringConnection* self = static_cast<Op*>(c)->conn;
  if (!(flags & IORING_CQE_F_MORE)) {
    self->recv_armed_ = false;
    self->recv_cancelling_ = false;
    --self->ops_;
  }
  if (flags & IORING_CQE_F_BUFFER) {
    auto bid = static_cast<std::uint16_t>(flags >> IORING_CQE_BUFFER_SHIFT);
    if (res > 0 && self->state_ == State::open) {
      // A frame waiting for request memory has the recv cancelled, but completions already on
      // their way still land here: take() stashes their bytes behind the waiting frame's.
      if (self->tls_) {
        self->tls_receive(self->t_.bufs_->data(bid), static_cast<std::size_t>(res));
      } else {
        self->take(self->t_.bufs_->data(bid), static_cast<std::size_t>(res));
      }
    }
    // Copied out (or discarded): the buffer goes straight back for any connection to use.
    self->t_.bufs_->recycle(bid);
  }
  if (res > 0) {
    self->t_.stats_.bytes_in += static_cast<std::uint64_t>(res);
    self->last_activity_ns_ = mono_ns();
    if (self->state_ == State::open && (!self->pending_.empty() || !self->can_deliver())) {
      self->pause_recv();
    }
  } else if (res == 0) {
    self->peer_eof_ = true;
    if (self->in_frame_ || self->hdr_have_) {
      LOG_DEBUG("connection %llu from %s: peer closed in the middle of a frame",
                static_cast<unsigned long long>(self->id_), self->peer_.c_str());
    }
    if (self->state_ == State::linger) self->hard_close();
  } else if (res == -ENOBUFS) {
    // The ring ran dry within one turn; buffers are back by the end of it, re-arm then.
    ++self->t_.stats_.recv_enobufs;
  } else if (res != -ECANCELED) {
    if (self->state_ != State::closed) {
      LOG_DEBUG("connection %llu from %s: recv: %s", static_cast<unsigned long long>(self->id_),
                self->peer_.c_str(), std::strerror(-res));
      self->hard_close();
    }
  }
  if (!self->recv_armed_ || self->state_ == State::closed || !self->tls_idle()) self->wake();
}

// ---- closing ----

void UringConnection::on_hard_close() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);  // wakes a pending recv and fails a pending send
  if (recv_armed_ && !recv_cancelling_) {
    io_uring_prep_cancel(t_.r_.sqe_noreply(), &recv_op_, 0);
    recv_cancelling_ = true;
  }
  if (send_inflight_) io_uring_prep_cancel(t_.r_.sqe_noreply(), &send_op_, 0);
}

void UringConnection::shut_down_write() {
  ::shutdown(fd_, SHUT_WR);
  enter_linger();
}

void UringConnection::on_turn_end() {
  if (state_ == State::closed) {
    finish_closed();  // may destroy this
    return;
  }
  deliver_held();
  if (state_ == State::closed) {
    finish_closed();
    return;
  }
  flush();
  if (want_recv()) arm_recv();
  const bool all_sent = window_.empty() && !send_inflight_ && tls_idle();
  if (state_ == State::open && peer_eof_ && pending_.empty() && all_sent) {
    hard_close();  // the peer said it is done and has every answer
  } else if (state_ == State::draining && all_sent) {
    if (peer_eof_) {
      hard_close();
    } else {
      shut_down_write();
      if (want_recv()) arm_recv();
    }
  }
}

void UringConnection::finish_closed() {
  notify_closed();
  if (ops_ > 0) return;  // the last completion wakes us again
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
    drop_answers();
    cur_piece_ = cur_off_ = 0;
  }
  destroy_if_done();
}

// ---- sending ----

// The answer bytes ready at the front of the window, in order, as iovecs in iov_ (at most
// kMaxIov, up to the first answer still waiting or the first file range not read yet); their
// total. What a sendmsg carries, or, on a TLS connection, what is encrypted next.
std::size_t UringConnection::gather_ready() {
  iov_.clear();
  std::size_t total = 0;
  for (std::size_t i = 0; i < window_.size() && iov_.size() < kMaxIov; ++i) {
    Slot& s = window_[i];
    if (s.kind == Slot::waiting) break;
    if (s.kind == Slot::skipped) continue;
    auto& pcs = s.resp.pieces();
    std::size_t p = i == 0 ? cur_piece_ : 0;
    std::size_t off = i == 0 ? cur_off_ : 0;
    bool blocked = false;
    for (; p < pcs.size() && iov_.size() < kMaxIov; ++p, off = 0) {
      auto& pc = pcs[p];
      if (pc.file.fd >= 0) {  // not read yet; later answers wait behind it
        blocked = true;
        break;
      }
      if (pc.bytes.size() == off) continue;
      iov_.push_back(iovec{pc.bytes.data() + off, pc.bytes.size() - off});
      total += pc.bytes.size() - off;
    }
    if (blocked) break;
  }
  return total;
}

void UringConnection::flush() {
  if (fd_ < 0 || (state_ != State::open && state_ != State::draining)) return;
  if (!send_inflight_) advance_sent(0);      // drop skipped and empty answers at the front
  schedule_reads(head_seq_, cur_piece_, 0);  // file ranges are read while earlier bytes go
  if (send_inflight_) return;
  if (tls_) {
    tls_flush();
    return;
  }
  const std::size_t total = gather_ready();
  if (total == 0) return;
  msg_ = msghdr{};
  msg_.msg_iov = iov_.data();
  msg_.msg_iovlen = iov_.size();
  io_uring_sqe* s = t_.r_.sqe(&send_op_);
  // No MSG_WAITALL: a short send comes back and is continued from the cursor, so progress on a
  // slow reader counts as activity for the idle check.
  send_len_ = total;
  const std::uint32_t zc_min = t_.cfg_.zerocopy_send_min_bytes;
  send_zc_ = zc_min > 0 && total >= zc_min;
  if (send_zc_) {
    io_uring_prep_sendmsg_zc(s, fd_, &msg_, MSG_NOSIGNAL);
    ++t_.stats_.zerocopy_sends;
  } else {
    io_uring_prep_sendmsg(s, fd_, &msg_, MSG_NOSIGNAL);
  }
  send_inflight_ = true;
  ++ops_;
  ++t_.stats_.sends;
  // Starting a send is activity too: an answer queued just before the idle timer fires must
  // not be cut off. A send that then makes no progress (the peer stopped reading) still ages.
  last_activity_ns_ = mono_ns();
}

void UringConnection::on_send(io::Completion* c, int res, std::uint32_t flags) {
  UringConnection* self = static_cast<Op*>(c)->conn;
  if (flags & IORING_CQE_F_NOTIF) {
    // Zero-copy: the kernel has let go of the pages only now.
    --self->ops_;
    self->send_done(self->zc_res_);
    return;
  }
  if (self->send_zc_ && (flags & IORING_CQE_F_MORE)) {
    self->zc_res_ = res;
    return;
  }
  --self->ops_;
  self->send_done(res);
}

void UringConnection::send_done(int res) {
  send_inflight_ = false;
  if (state_ == State::closed) {
    wake();
    return;
  }
  if (res <= 0) {
    LOG_DEBUG("connection %llu from %s: send: %s", static_cast<unsigned long long>(id_),
              peer_.c_str(), res == 0 ? "no progress" : std::strerror(-res));
    hard_close();
    return;
  }
  t_.stats_.bytes_out += static_cast<std::uint64_t>(res);
  if (static_cast<std::size_t>(res) < send_len_) ++t_.stats_.short_sends;
  last_activity_ns_ = mono_ns();
  if (tls_) {
    tls_send_off_ += static_cast<std::size_t>(res);  // the answers were consumed when encrypted
  } else {
    advance_sent(static_cast<std::size_t>(res));
  }
  wake();
}

// Moves the send cursor n bytes on, releasing every answer that is now wholly with the kernel
// (and skipped seqs that reach the front).
void UringConnection::advance_sent(std::size_t n) {
  while (!window_.empty()) {
    Slot& s = window_.front();
    if (s.kind == Slot::skipped) {
      release_front();
      continue;
    }
    if (s.kind != Slot::ready) return;
    auto& pcs = s.resp.pieces();
    while (cur_piece_ < pcs.size()) {
      auto& pc = pcs[cur_piece_];
      if (pc.file.fd >= 0) return;  // unread file range: nothing past it was sent
      const std::size_t rem = pc.bytes.size() - cur_off_;
      if (n < rem) {
        cur_off_ += n;
        return;
      }
      n -= rem;
      pc.bytes = Buffer();  // free each piece as soon as it is out
      ++cur_piece_;
      cur_off_ = 0;
    }
    release_front();
  }
}

void UringConnection::release_front() {
  pop_front_slot();
  cur_piece_ = 0;
  cur_off_ = 0;
}

// File ranges ahead of the send cursor start reading, up to kReadAheadBytes.

}  // namespace samsa::net::uring
