#include "net/uring_transport.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "base/clock.h"
#include "base/log.h"
#include "net/buf_ring.h"
#include "net/memory_budget.h"
#include "net/ring_queue.h"

namespace samsa::net {
namespace {

// One sendmsg carries at most this many pieces; the rest follow when it completes.
constexpr std::size_t kMaxIov = 64;
// File ranges are read ahead of the send cursor up to this many queued bytes, so a large
// fetch answer is not all in memory at once while the socket drains.
constexpr std::size_t kReadAheadBytes = 4u << 20;
// Largest single READ; a longer range is read in several.
constexpr std::uint32_t kMaxReadChunk = 1u << 30;
// READs in flight per connection. Cached reads complete at submission, so several per turn let
// one sendmsg carry several file-backed answers.
constexpr std::size_t kMaxReads = 8;
// After a graceful close we shut down our side and wait this long for the peer's FIN, reading
// and discarding meanwhile: closing with unread input would send a RST, and a RST can destroy
// answers the peer has not read yet.
constexpr std::int64_t kLingerMs = 5000;
// Accept failures that persist (EMFILE, ENFILE, ENOMEM) are retried after this long instead
// of spinning.
constexpr std::int64_t kAcceptRetryMs = 100;

std::atomic<std::uint64_t> g_next_connection_id{1};

std::string format_peer(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = "?";
  unsigned port = 0;
  if (ss.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(ss);
    ::inet_ntop(AF_INET, &a.sin_addr, host, sizeof host);
    port = ntohs(a.sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  if (ss.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(ss);
    ::inet_ntop(AF_INET6, &a.sin6_addr, host, sizeof host);
    port = ntohs(a.sin6_port);
    return "[" + std::string(host) + "]:" + std::to_string(port);
  }
  return "?";
}

class UringTransportImpl;

class UringConnection final : public Connection,
                              private io::TurnHook,
                              private MemoryBudget::Waiter {
 public:
  UringConnection(UringTransportImpl& t, int fd, std::string peer);
  ~UringConnection() override;

  void respond(std::uint64_t seq, Response r) override;
  void skip(std::uint64_t seq) override;
  void close(bool graceful) override;
  bool closed() const override { return state_ == State::closed; }
  std::uint64_t id() const override { return id_; }
  const std::string& peer() const override { return peer_; }
  io::Reactor& reactor() override;

  void start();
  // Queue the service routine for the end of this loop turn.
  void wake();

  // The transport's list of every connection object not yet destroyed.
  UringConnection* prev = nullptr;
  UringConnection* next = nullptr;

 private:
  enum class State : std::uint8_t {
    open,      // reading, delivering, sending
    draining,  // close(true): no more frames; answers to delivered frames still go out
    linger,    // our FIN is sent; reading and discarding until the peer's FIN or a timeout
    closed,    // socket shut down; waiting for the kernel's last completions and the handler
  };
  struct Slot {
    enum Kind : std::uint8_t { waiting, ready, skipped };
    Kind kind = waiting;
    std::uint32_t request_bytes = 0;
    Response resp;
  };
  struct Op : io::Completion {
    UringConnection* conn = nullptr;
  };
  // A READ filling one file piece: the piece is pieces()[piece] of the answer to seq.
  struct ReadOp : io::Completion {
    UringConnection* conn = nullptr;
    bool busy = false;
    std::uint64_t seq = 0;
    std::size_t piece = 0;
    std::uint32_t done = 0;
  };
  struct ConnTimer : io::Timer {
    UringConnection* conn = nullptr;
  };

  // Everything that must not run inside the handler's calls or in the middle of completion
  // processing happens here, at the end of the turn: delivering held frames, sending,
  // re-arming recv, finishing a close, destroying the object.
  void on_turn_end() override;
  void on_budget_available() override { wake(); }
  static void on_recv(io::Completion* c, int res, std::uint32_t flags);
  static void on_send(io::Completion* c, int res, std::uint32_t flags);
  static void on_read(io::Completion* c, int res, std::uint32_t flags);
  static void on_timer(io::Timer* t);

  const ConnectionLimits& limits() const;
  bool can_deliver() const;
  bool want_recv() const;
  void arm_recv();
  void pause_recv();
  void consume(const std::byte* p, std::size_t n);
  // Reserves a frame's memory; false (and the connection waits, its unread bytes stashed)
  // when the reactor's request budget has no room, or closes it when the frame can never fit.
  bool reserve_frame(std::uint32_t size, const std::byte* rest, std::size_t rest_len);
  void retry_reserved_frame();
  void drop_undelivered();
  void frame_complete(Buffer f);
  void deliver(Buffer f);
  void answer(std::uint64_t seq, Slot::Kind kind, Response* r);
  void flush();
  void send_done(int res);
  void advance_sent(std::size_t n);
  void release_front();
  void schedule_reads();
  void issue_read(ReadOp& op);
  void hard_close();
  void shut_down_write();
  void finish_closed();
  void arm_timer(std::int64_t deadline_ns);

  UringTransportImpl& t_;
  int fd_;
  State state_ = State::open;
  const std::uint64_t id_;
  const std::string peer_;

  // Receive side.
  Op recv_op_;
  bool recv_armed_ = false;
  bool recv_cancelling_ = false;
  bool peer_eof_ = false;
  std::byte hdr_[4]{};
  std::uint32_t hdr_have_ = 0;
  bool in_frame_ = false;
  Buffer cur_;
  std::size_t cur_have_ = 0;
  RingQueue<Buffer> pending_;  // complete frames held back by the in-flight bounds
  // Request memory budget: bytes this connection holds (frames received, delivered and not yet
  // answered), those of frames not yet delivered (cur_ and pending_), and a frame waiting for
  // room with the bytes that followed its size prefix.
  std::uint64_t budget_held_ = 0;
  std::uint64_t undelivered_bytes_ = 0;
  bool budget_wait_ = false;
  std::uint32_t waiting_frame_ = 0;
  std::vector<std::byte> stash_;

  // Reorder window: slot i answers seq head_seq_ + i. Slots leave from the front once their
  // answer is handed to the kernel.
  RingQueue<Slot> window_;
  std::uint64_t head_seq_ = 0;
  std::uint64_t next_seq_ = 0;
  std::uint64_t inflight_bytes_ = 0;
  std::uint64_t unanswered_ = 0;
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

  // File ranges are read into the piece's own buffer (allocated when its read starts).
  ReadOp reads_[kMaxReads];
  std::size_t reads_busy_ = 0;

  // SQEs whose final completion has not arrived; the object lives at least until it is 0.
  int ops_ = 0;
  bool close_notified_ = false;
  ConnTimer timer_;
  std::int64_t last_activity_ns_ = 0;
};

class UringTransportImpl final : public UringTransport {
 public:
  UringTransportImpl(io::Reactor& r, FrameHandler& h) : r_(r), h_(h) {
    accept_op_.fn = &UringTransportImpl::on_accept;
    accept_op_.self = this;
    retry_timer_.fn = &UringTransportImpl::on_retry;
    retry_timer_.self = this;
  }
  ~UringTransportImpl() override;

  bool listen(const ListenerConfig& cfg, std::string* error) override;
  std::uint16_t port() const override { return port_; }
  void stop_accepting() override;
  void close_all() override;
  void close_all_gracefully() override;
  std::size_t connection_count() const override { return open_; }
  const UringTransportStats& stats() const override { return stats_; }

  // Shared with the connections.
  io::Reactor& r_;
  FrameHandler& h_;
  ListenerConfig cfg_;
  std::unique_ptr<ProvidedBuffers> bufs_;
  UringTransportStats stats_;
  std::size_t open_ = 0;
  bool dying_ = false;

  void destroy(UringConnection* c);

 private:
  struct AcceptOp : io::Completion {
    UringTransportImpl* self = nullptr;
  };
  struct RetryTimer : io::Timer {
    UringTransportImpl* self = nullptr;
  };

  static void on_accept(io::Completion* c, int res, std::uint32_t flags);
  static void on_retry(io::Timer* t);
  void arm_accept();
  void adopt(int fd);

  int lfd_ = -1;
  std::uint16_t port_ = 0;
  bool accepting_ = false;
  bool accept_armed_ = false;
  AcceptOp accept_op_;
  RetryTimer retry_timer_;
  UringConnection* head_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// UringConnection

UringConnection::UringConnection(UringTransportImpl& t, int fd, std::string peer)
    : t_(t),
      fd_(fd),
      id_(g_next_connection_id.fetch_add(1, std::memory_order_relaxed)),
      peer_(std::move(peer)) {
  recv_op_.fn = &UringConnection::on_recv;
  recv_op_.conn = this;
  send_op_.fn = &UringConnection::on_send;
  send_op_.conn = this;
  for (auto& r : reads_) {
    r.fn = &UringConnection::on_read;
    r.conn = this;
  }
  timer_.fn = &UringConnection::on_timer;
  timer_.conn = this;
  iov_.reserve(kMaxIov);
}

UringConnection::~UringConnection() {
  if (MemoryBudget* b = t_.cfg_.budget) {
    b->cancel(this);
    b->release(budget_held_);
  }
  t_.r_.disarm(&timer_);
  if (fd_ >= 0) ::close(fd_);
}

io::Reactor& UringConnection::reactor() {
  return t_.r_;
}

const ConnectionLimits& UringConnection::limits() const {
  return t_.cfg_.limits;
}

void UringConnection::wake() {
  t_.r_.at_turn_end(this);
}

void UringConnection::start() {
  last_activity_ns_ = mono_ns();
  t_.h_.on_open(*this);
  if (state_ == State::open && limits().idle_timeout_ms > 0) {
    arm_timer(last_activity_ns_ + limits().idle_timeout_ms * 1'000'000);
  }
  wake();
}

void UringConnection::arm_timer(std::int64_t deadline_ns) {
  t_.r_.arm(&timer_, deadline_ns);
}

bool UringConnection::can_deliver() const {
  const auto& l = limits();
  return window_.size() < std::max<std::uint32_t>(l.max_inflight_requests, 1) &&
         inflight_bytes_ < l.max_inflight_bytes;
}

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
      self->consume(self->t_.bufs_->data(bid), static_cast<std::size_t>(res));
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
  if (!self->recv_armed_ || self->state_ == State::closed) self->wake();
}

void UringConnection::consume(const std::byte* p, std::size_t n) {
  while (n > 0 && state_ == State::open) {
    if (!in_frame_) {
      std::size_t take = std::min<std::size_t>(4 - hdr_have_, n);
      std::memcpy(hdr_ + hdr_have_, p, take);
      hdr_have_ += static_cast<std::uint32_t>(take);
      p += take;
      n -= take;
      if (hdr_have_ < 4) return;
      hdr_have_ = 0;
      const std::int32_t size = load_be<std::int32_t>(hdr_);
      if (size <= 0 || static_cast<std::uint32_t>(size) > limits().max_frame_bytes) {
        ++t_.stats_.bad_frames;
        LOG_WARN(
            "connection %llu from %s: frame size %d outside 1..%u "
            "(socket.request.max.bytes); closing",
            static_cast<unsigned long long>(id_), peer_.c_str(), size, limits().max_frame_bytes);
        hard_close();
        return;
      }
      if (!reserve_frame(static_cast<std::uint32_t>(size), p, n)) return;
      cur_ = Buffer(static_cast<std::size_t>(size));
      cur_have_ = 0;
      in_frame_ = true;
      continue;
    }
    std::size_t take = std::min(cur_.size() - cur_have_, n);
    std::memcpy(cur_.data() + cur_have_, p, take);
    cur_have_ += take;
    p += take;
    n -= take;
    if (cur_have_ == cur_.size()) {
      in_frame_ = false;
      frame_complete(std::move(cur_));
      cur_ = Buffer();
    }
  }
}

bool UringConnection::reserve_frame(std::uint32_t size, const std::byte* rest,
                                    std::size_t rest_len) {
  MemoryBudget* b = t_.cfg_.budget;
  if (!b) return true;
  if (size > b->capacity()) {
    b->note_frame_too_big();
    ++t_.stats_.bad_frames;
    LOG_WARN(
        "connection %llu from %s: frame of %u bytes exceeds this reactor's request memory "
        "budget of %llu bytes (queued.max.request.bytes / reactors); closing",
        static_cast<unsigned long long>(id_), peer_.c_str(), size,
        static_cast<unsigned long long>(b->capacity()));
    hard_close();
    return false;
  }
  if (!b->try_reserve_frame(size, this)) {
    // Wait for room: the rest of this receive buffer is kept, the socket is not read.
    ++t_.stats_.budget_waits;
    budget_wait_ = true;
    waiting_frame_ = size;
    stash_.assign(rest, rest + rest_len);
    b->wait(this);
    pause_recv();
    return false;
  }
  budget_held_ += size;
  undelivered_bytes_ += size;
  return true;
}

void UringConnection::retry_reserved_frame() {
  MemoryBudget* b = t_.cfg_.budget;
  if (!b->try_reserve_frame(waiting_frame_, this)) {
    b->wait(this);
    return;
  }
  budget_wait_ = false;
  budget_held_ += waiting_frame_;
  undelivered_bytes_ += waiting_frame_;
  cur_ = Buffer(waiting_frame_);
  cur_have_ = 0;
  in_frame_ = true;
  std::vector<std::byte> rest = std::move(stash_);
  stash_.clear();
  consume(rest.data(), rest.size());
}

// Frames received but never to be delivered (close): their memory goes back at once.
void UringConnection::drop_undelivered() {
  if (MemoryBudget* b = t_.cfg_.budget) {
    b->cancel(this);
    b->release(undelivered_bytes_);
  }
  budget_held_ -= undelivered_bytes_;
  undelivered_bytes_ = 0;
  budget_wait_ = false;
  stash_.clear();
  stash_.shrink_to_fit();
}

void UringConnection::frame_complete(Buffer f) {
  ++t_.stats_.frames_in;
  if (pending_.empty() && can_deliver()) {
    deliver(std::move(f));
  } else {
    pending_.push_back(std::move(f));
  }
}

void UringConnection::deliver(Buffer f) {
  const std::uint64_t seq = next_seq_++;
  Slot& s = window_.push_back(Slot{});
  s.request_bytes = static_cast<std::uint32_t>(f.size());
  inflight_bytes_ += f.size();
  if (t_.cfg_.budget) undelivered_bytes_ -= f.size();
  ++unanswered_;
  t_.h_.on_frame(*this, seq, std::move(f));
}

void UringConnection::respond(std::uint64_t seq, Response r) {
  answer(seq, Slot::ready, &r);
}

void UringConnection::skip(std::uint64_t seq) {
  answer(seq, Slot::skipped, nullptr);
}

void UringConnection::answer(std::uint64_t seq, Slot::Kind kind, Response* r) {
  if (seq < head_seq_ || seq >= next_seq_ || window_[seq - head_seq_].kind != Slot::waiting) {
    LOG_WARN("connection %llu from %s: answer to seq %llu that is not waiting for one",
             static_cast<unsigned long long>(id_), peer_.c_str(),
             static_cast<unsigned long long>(seq));
    return;
  }
  Slot& s = window_[seq - head_seq_];
  --unanswered_;
  if (state_ == State::closed) {
    // Late answer: nobody will read it. The slot only records that the seq is settled.
    s.kind = Slot::skipped;
    if (unanswered_ == 0) wake();
    return;
  }
  s.kind = kind;
  if (r) {
    s.resp = std::move(*r);
    for (auto& pc : s.resp.pieces()) {
      if (pc.file.fd < 0) continue;
      // A file piece's buffer marks a read under way; bytes given with it are not sent.
      pc.bytes = Buffer();
      if (pc.file.length == 0) pc.file = FileRange{};
    }
  }
  wake();
}

void UringConnection::close(bool graceful) {
  if (state_ == State::closed) return;
  if (!graceful) {
    hard_close();
    return;
  }
  if (state_ != State::open) return;
  state_ = State::draining;
  pending_.clear();
  in_frame_ = false;
  hdr_have_ = 0;
  cur_ = Buffer();
  drop_undelivered();
  wake();
}

void UringConnection::hard_close() {
  if (state_ == State::closed) return;
  state_ = State::closed;
  --t_.open_;
  ++t_.stats_.closed;
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);  // wakes a pending recv and fails a pending send
  if (recv_armed_ && !recv_cancelling_) {
    io_uring_prep_cancel(t_.r_.sqe_noreply(), &recv_op_, 0);
    recv_cancelling_ = true;
  }
  if (send_inflight_) io_uring_prep_cancel(t_.r_.sqe_noreply(), &send_op_, 0);
  t_.r_.disarm(&timer_);
  pending_.clear();
  in_frame_ = false;
  cur_ = Buffer();
  drop_undelivered();
  wake();
}

void UringConnection::shut_down_write() {
  ::shutdown(fd_, SHUT_WR);
  state_ = State::linger;
  std::int64_t linger_ms = kLingerMs;
  if (limits().idle_timeout_ms > 0) linger_ms = std::min(linger_ms, limits().idle_timeout_ms);
  arm_timer(mono_ns() + linger_ms * 1'000'000);
}

void UringConnection::on_turn_end() {
  if (state_ == State::closed) {
    finish_closed();  // may destroy this
    return;
  }
  if (budget_wait_ && state_ == State::open) retry_reserved_frame();
  while (state_ == State::open && !pending_.empty() && can_deliver()) {
    deliver(pending_.take_front());
  }
  if (state_ == State::closed) {
    finish_closed();
    return;
  }
  flush();
  if (want_recv()) arm_recv();
  const bool all_sent = window_.empty() && !send_inflight_;
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
  if (!close_notified_) {
    close_notified_ = true;
    t_.h_.on_close(*this);
  }
  if (ops_ > 0) return;  // the last completion wakes us again
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
    // Drop the bytes; keep the slots so late answers are still recognised and counted.
    for (std::size_t i = 0; i < window_.size(); ++i)
      window_[i].resp = Response{};
    cur_piece_ = cur_off_ = 0;
  }
  if (TurnHook::queued) return;
  if (unanswered_ == 0 || t_.dying_) t_.destroy(this);
}

// ---- sending ----

void UringConnection::flush() {
  if (fd_ < 0 || (state_ != State::open && state_ != State::draining)) return;
  if (!send_inflight_) advance_sent(0);  // drop skipped and empty answers at the front
  schedule_reads();                      // file ranges are read while earlier bytes are sent
  if (send_inflight_) return;
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
  advance_sent(static_cast<std::size_t>(res));
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
  inflight_bytes_ -= window_.front().request_bytes;
  if (MemoryBudget* b = t_.cfg_.budget) {
    b->release(window_.front().request_bytes);
    budget_held_ -= window_.front().request_bytes;
  }
  window_.pop_front();
  ++head_seq_;
  cur_piece_ = 0;
  cur_off_ = 0;
}

// ---- file ranges ----

void UringConnection::schedule_reads() {
  if (reads_busy_ == kMaxReads) return;
  std::size_t ahead = 0;
  std::size_t scanned = 0;
  for (std::size_t i = 0; i < window_.size() && scanned < 4 * kMaxIov; ++i, ++scanned) {
    Slot& s = window_[i];
    if (s.kind == Slot::waiting) return;
    if (s.kind == Slot::skipped) continue;
    auto& pcs = s.resp.pieces();
    for (std::size_t p = i == 0 ? cur_piece_ : 0; p < pcs.size(); ++p) {
      auto& pc = pcs[p];
      if (pc.file.fd >= 0 && !pc.bytes.data()) {  // unread and no read under way
        ReadOp* op = std::find_if(std::begin(reads_), std::end(reads_),
                                  [](const ReadOp& r) { return !r.busy; });
        pc.bytes = Buffer(pc.file.length);
        op->busy = true;
        op->seq = head_seq_ + i;
        op->piece = p;
        op->done = 0;
        ++reads_busy_;
        issue_read(*op);
        if (reads_busy_ == kMaxReads) return;
      }
      ahead += pc.bytes.size();
      if (ahead >= kReadAheadBytes || ++scanned >= 4 * kMaxIov) return;
    }
  }
}

void UringConnection::issue_read(ReadOp& op) {
  auto& pc = window_[op.seq - head_seq_].resp.pieces()[op.piece];
  const std::uint32_t len = std::min(pc.file.length - op.done, kMaxReadChunk);
  io_uring_prep_read(t_.r_.sqe(&op), pc.file.fd, pc.bytes.data() + op.done, len,
                     pc.file.offset + op.done);
  ++ops_;
}

void UringConnection::on_read(io::Completion* c, int res, std::uint32_t) {
  auto& op = *static_cast<ReadOp*>(c);
  UringConnection* self = op.conn;
  --self->ops_;
  auto finish = [&] {
    op.busy = false;
    --self->reads_busy_;
  };
  if (self->state_ == State::closed) {
    finish();
    self->wake();
    return;
  }
  // The slot cannot have left the window: the send cursor stops at an unread range.
  auto& pc = self->window_[op.seq - self->head_seq_].resp.pieces()[op.piece];
  if (res <= 0) {
    // The answer's size prefix already counts these bytes; sending fewer would desynchronise
    // the stream, so the connection has to go.
    LOG_WARN("connection %llu from %s: reading %u bytes of fd %d at %llu: %s; closing",
             static_cast<unsigned long long>(self->id_), self->peer_.c_str(),
             pc.file.length - op.done, pc.file.fd,
             static_cast<unsigned long long>(pc.file.offset + op.done),
             res == 0 ? "file ends early" : std::strerror(-res));
    finish();
    self->hard_close();
    return;
  }
  op.done += static_cast<std::uint32_t>(res);
  if (op.done < pc.file.length) {
    self->issue_read(op);
    return;
  }
  pc.file = FileRange{};  // now a plain byte piece; lets go of the segment
  finish();
  ++self->t_.stats_.file_reads;
  self->wake();
}

// ---- timers ----

void UringConnection::on_timer(io::Timer* t) {
  UringConnection* self = static_cast<ConnTimer*>(t)->conn;
  if (self->state_ == State::closed) return;
  if (self->state_ == State::linger) {
    self->hard_close();
    return;
  }
  const std::int64_t idle_ns = self->limits().idle_timeout_ms * 1'000'000;
  const std::int64_t now = mono_ns();
  const std::int64_t deadline = self->last_activity_ns_ + idle_ns;
  if (now < deadline) {
    self->arm_timer(deadline);
  } else if (self->unanswered_ > 0 || (!self->window_.empty() && !self->send_inflight_)) {
    // The handler is still working on something (a long poll, a commit), or answers wait for
    // this turn's send (timers run before turn-end hooks): not idle.
    self->arm_timer(now + idle_ns);
  } else {
    LOG_DEBUG("connection %llu from %s: idle for %lld ms; closing",
              static_cast<unsigned long long>(self->id_), self->peer_.c_str(),
              static_cast<long long>(self->limits().idle_timeout_ms));
    self->hard_close();
  }
}

// ---------------------------------------------------------------------------------------------
// UringTransportImpl

bool UringTransportImpl::listen(const ListenerConfig& cfg, std::string* error) {
  auto fail = [&](std::string msg) {
    if (error) *error = std::move(msg);
    return false;
  };
  if (lfd_ >= 0 || bufs_) return fail("already listening");
  cfg_ = cfg;

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(cfg.port);
  int rc = ::getaddrinfo(cfg.host.empty() ? nullptr : cfg.host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) return fail("resolving " + cfg.host + ": " + ::gai_strerror(rc));
  std::string last_error = "no address";
  int fd = -1;
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last_error = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    // Set on the listening socket so accepted ones inherit them (the receive buffer decides
    // the window scale offered in the handshake).
    if (cfg.socket_send_buffer_bytes > 0) {
      ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &cfg.socket_send_buffer_bytes, sizeof(int));
    }
    if (cfg.socket_receive_buffer_bytes > 0) {
      ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &cfg.socket_receive_buffer_bytes, sizeof(int));
    }
    // Every reactor binds the same address; the kernel hashes new connections over them.
    if (::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0 ||
        ::bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || ::listen(fd, cfg.backlog) < 0) {
      last_error = std::strerror(errno);
      ::close(fd);
      fd = -1;
      continue;
    }
    break;
  }
  ::freeaddrinfo(res);
  if (fd < 0) return fail("listening on " + cfg.host + ":" + port + ": " + last_error);

  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  port_ = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(ss).sin6_port
                                         : reinterpret_cast<sockaddr_in&>(ss).sin_port);

  auto bufs = ProvidedBuffers::create(r_.ring(), cfg.recv_buffer_count, cfg.recv_buffer_bytes);
  if (!bufs) {
    ::close(fd);
    return fail(std::string("registering the receive buffer ring: ") +
                std::strerror(-bufs.error()));
  }
  bufs_ = std::move(*bufs);
  lfd_ = fd;
  accepting_ = true;
  arm_accept();
  LOG_DEBUG("%s: listening on %s:%u", r_.name().c_str(), cfg.host.c_str(), unsigned(port_));
  return true;
}

}  // namespace

bool check_address_free(const std::string& host, std::uint16_t port, std::string* error) {
  if (port == 0) return true;  // an ephemeral port cannot collide
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string p = std::to_string(port);
  int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), p.c_str(), &hints, &res);
  if (rc != 0) {
    if (error) *error = "resolving " + host + ": " + ::gai_strerror(rc);
    return false;
  }
  bool ok = true;
  for (addrinfo* ai = res; ai && ok; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno == EADDRINUSE) {
      ok = false;
      if (error) *error = host + ":" + p + " is already in use by another process";
    }
    ::close(fd);
    break;  // the first address is the one listen() takes
  }
  ::freeaddrinfo(res);
  return ok;
}

namespace {

void UringTransportImpl::arm_accept() {
  io_uring_prep_multishot_accept(r_.sqe(&accept_op_), lfd_, nullptr, nullptr, SOCK_CLOEXEC);
  accept_armed_ = true;
}

void UringTransportImpl::on_accept(io::Completion* c, int res, std::uint32_t flags) {
  UringTransportImpl* self = static_cast<AcceptOp*>(c)->self;
  if (!(flags & IORING_CQE_F_MORE)) self->accept_armed_ = false;
  bool transient = false;
  if (res >= 0) {
    if (self->accepting_) {
      self->adopt(res);
    } else {
      ::close(res);
    }
  } else if (res != -ECANCELED) {
    transient = res == -EMFILE || res == -ENFILE || res == -ENOMEM || res == -ENOBUFS;
    LOG_WARN("%s: accept: %s", self->r_.name().c_str(), std::strerror(-res));
  }
  if (self->accept_armed_) return;
  if (self->accepting_) {
    if (transient) {
      self->r_.arm(&self->retry_timer_, mono_ns() + kAcceptRetryMs * 1'000'000);
    } else {
      self->arm_accept();
    }
  } else if (self->lfd_ >= 0) {
    ::close(self->lfd_);
    self->lfd_ = -1;
  }
}

void UringTransportImpl::on_retry(io::Timer* t) {
  UringTransportImpl* self = static_cast<RetryTimer*>(t)->self;
  if (self->accepting_ && !self->accept_armed_) self->arm_accept();
}

void UringTransportImpl::adopt(int fd) {
  int one = 1;
  // As Kafka's acceptor: answers go out at once, and dead peers are found eventually.
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  std::string peer = ::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0
                         ? format_peer(ss)
                         : std::string("?");
  auto* c = new UringConnection(*this, fd, std::move(peer));
  c->next = head_;
  if (head_) head_->prev = c;
  head_ = c;
  ++open_;
  ++stats_.accepted;
  c->start();
}

void UringTransportImpl::destroy(UringConnection* c) {
  if (c->prev) c->prev->next = c->next;
  if (c->next) c->next->prev = c->prev;
  if (head_ == c) head_ = c->next;
  delete c;
}

void UringTransportImpl::stop_accepting() {
  if (!accepting_) return;
  accepting_ = false;
  r_.disarm(&retry_timer_);
  if (accept_armed_) {
    // The listening socket closes when the cancelled accept reports back.
    io_uring_prep_cancel(r_.sqe_noreply(), &accept_op_, 0);
  } else if (lfd_ >= 0) {
    ::close(lfd_);
    lfd_ = -1;
  }
}

void UringTransportImpl::close_all() {
  for (UringConnection* c = head_; c; c = c->next)
    c->close(false);
}

void UringTransportImpl::close_all_gracefully() {
  for (UringConnection* c = head_; c; c = c->next)
    c->close(true);
}

UringTransportImpl::~UringTransportImpl() {
  stop_accepting();
  close_all();
  dying_ = true;
  for (UringConnection* c = head_; c; c = c->next)
    c->wake();
  // The kernel may still write into connection buffers and the buffer ring until the cancelled
  // operations report back; run the loop until they have.
  const bool done = r_.run_until([&] { return !accept_armed_ && head_ == nullptr; });
  if (!done) {
    LOG_ERROR("%s: transport destroyed with operations still in the kernel; leaking them",
              r_.name().c_str());
    bufs_.release();
    return;
  }
  if (lfd_ >= 0) ::close(lfd_);
}

}  // namespace

std::unique_ptr<UringTransport> UringTransport::create(io::Reactor& r, FrameHandler& h) {
  return std::make_unique<UringTransportImpl>(r, h);
}

std::unique_ptr<Transport> make_uring_transport(io::Reactor& r, FrameHandler& h) {
  return UringTransport::create(r, h);
}

}  // namespace samsa::net
