// A uring connection's TLS (SSL and SASL_SSL listeners): what the kernel receives goes through
// the connection's tls::Session before the framing sees it, and answers are encrypted just
// before they are sent. kTLS would let the kernel do both and keep Fetch's file ranges out of
// user space; this machine's kernel has no tls ULP (net/tls/README.md), so records are built
// here.
#include <cstring>

#include "base/clock.h"
#include "base/log.h"
#include "net/uring/connection.h"

namespace samsa::net::uring {

void UringConnection::tls_receive(const std::byte* p, std::size_t n) {
  if (!tls_->feed(reinterpret_cast<const std::uint8_t*>(p), n)) {
    LOG_INFO("connection %llu from %s: %s; closing", static_cast<unsigned long long>(id_),
             peer_.c_str(), tls_->error().c_str());
    hard_close();
    return;
  }
  if (handshake_deadline_ns_ && tls_->handshake_done()) {
    handshake_deadline_ns_ = 0;
    --t_.stats_.tls_pending;
    LOG_DEBUG("connection %llu from %s: %s %s%s%s", static_cast<unsigned long long>(id_),
              peer_.c_str(), tls_->protocol().c_str(), tls_->cipher().c_str(),
              tls_->peer_subject().empty() ? "" : ", client ", tls_->peer_subject().c_str());
  }
  // Plaintext goes on to the framing (which stashes it while a frame waits for request
  // memory); the session decrypts more as it is consumed.
  while (state_ == State::open) {
    auto plain = tls_->plain();
    if (plain.empty()) break;
    take(reinterpret_cast<const std::byte*>(plain.data()), plain.size());
    tls_->consume_plain(plain.size());
  }
  if (tls_->failed()) {
    LOG_INFO("connection %llu from %s: %s; closing", static_cast<unsigned long long>(id_),
             peer_.c_str(), tls_->error().c_str());
    hard_close();
  }
}

// Encrypts the answers ready at the front of the window, as far as the session takes them,
// and releases what it took.
void UringConnection::tls_encrypt_window() {
  gather_ready();
  std::size_t consumed = 0;
  for (const iovec& v : iov_) {
    const std::size_t took =
        tls_->write_plain(static_cast<const std::uint8_t*>(v.iov_base), v.iov_len);
    consumed += took;
    if (took < v.iov_len) break;
  }
  advance_sent(consumed);
}

void UringConnection::tls_flush() {
  if (tls_send_off_ == tls_send_.size()) {
    tls_send_.clear();
    tls_send_off_ = 0;
    if (tls_->handshake_done() && !tls_->failed()) tls_encrypt_window();
    auto out = tls_->pending_out();
    if (out.empty()) {
      std::vector<std::uint8_t>().swap(tls_send_);  // an idle connection keeps no buffer
      return;
    }
    tls_send_.assign(out.begin(), out.end());
    tls_->consume_out(out.size());
  }
  iov_.clear();
  iov_.push_back(iovec{tls_send_.data() + tls_send_off_, tls_send_.size() - tls_send_off_});
  msg_ = msghdr{};
  msg_.msg_iov = iov_.data();
  msg_.msg_iovlen = 1;
  send_len_ = iov_.front().iov_len;
  send_zc_ = false;
  io_uring_prep_sendmsg(t_.r_.sqe(&send_op_), fd_, &msg_, MSG_NOSIGNAL);
  send_inflight_ = true;
  ++ops_;
  ++t_.stats_.sends;
  last_activity_ns_ = mono_ns();
}

}  // namespace samsa::net::uring
