#include "net/connection_core.h"

#include "base/assert.h"

#include <algorithm>
#include <cstring>

#include "base/bytes.h"
#include "base/clock.h"
#include "base/log.h"

namespace samsa::net {

// ---------------------------------------------------------------------------------------------
// TransportCore

void TransportCore::add(ConnectionCore* c) {
  c->next = head_;
  if (head_) head_->prev = c;
  head_ = c;
  ++open_;
  ++conn_stats_->accepted;
}

void TransportCore::destroy(ConnectionCore* c) {
  if (c->prev) c->prev->next = c->next;
  if (c->next) c->next->prev = c->prev;
  if (head_ == c) head_ = c->next;
  delete c;
}

void TransportCore::close_each(bool graceful) {
  for (ConnectionCore* c = head_; c; c = c->next)
    c->close(graceful);
}

void TransportCore::wake_each() {
  for (ConnectionCore* c = head_; c; c = c->next)
    c->wake();
}

// ---------------------------------------------------------------------------------------------
// ConnectionCore

ConnectionCore::ConnectionCore(std::uint64_t id, std::string peer)
    : id_(id), peer_(std::move(peer)) {
  for (auto& r : reads_) {
    r.fn = &ConnectionCore::on_read;
    r.conn = this;
  }
  timer_.fn = &ConnectionCore::on_timer;
  timer_.conn = this;
}

ConnectionCore::~ConnectionCore() {
  if (!t_) return;  // never reached a transport
  if (MemoryBudget* b = t_->cfg_.budget) {
    b->cancel(this);
    b->release(budget_held_);
  }
  t_->r_.disarm(&timer_);
}

void ConnectionCore::start(TransportCore* t) {
  t_ = t;
  last_activity_ns_ = mono_ns();
  t_->h_.on_open(*this);
  if (state_ == State::open && limits().idle_timeout_ms > 0) {
    const std::int64_t idle = last_activity_ns_ + limits().idle_timeout_ms * 1'000'000;
    arm_timer(handshake_deadline_ns_ ? std::min(idle, handshake_deadline_ns_) : idle);
  }
  wake();
}

// ---- receiving ----

std::size_t ConnectionCore::consume(const std::byte* p, std::size_t n) {
  std::size_t used = 0;
  while (used < n && state_ == State::open && !budget_wait_) {
    if (!in_frame_) {
      const std::size_t take = std::min<std::size_t>(4 - hdr_have_, n - used);
      std::memcpy(hdr_ + hdr_have_, p + used, take);
      hdr_have_ += static_cast<std::uint32_t>(take);
      used += take;
      if (hdr_have_ < 4) return used;
      hdr_have_ = 0;
      const std::int32_t size = load_be<std::int32_t>(hdr_);
      if (size <= 0 || static_cast<std::uint32_t>(size) > limits().max_frame_bytes) {
        ++stats().bad_frames;
        // A TLS record header (0x16 0x03 ...) read as a size: a client configured for SSL
        // on a listener that is not; say so, the number alone puzzles operators.
        const bool tls = hdr_[0] == std::byte{0x16} && hdr_[1] == std::byte{0x03};
        LOG_WARN(
            "connection %llu from %s: frame size %d outside 1..%u "
            "(socket.request.max.bytes); closing%s",
            static_cast<unsigned long long>(id_), peer_.c_str(), size, limits().max_frame_bytes,
            tls ? " (it is a TLS handshake: the client uses SSL on a listener without TLS)" : "");
        hard_close();
        return used;
      }
      if (!reserve_frame(static_cast<std::uint32_t>(size))) return used;
      cur_ = Buffer(static_cast<std::size_t>(size));
      cur_have_ = 0;
      in_frame_ = true;
      continue;
    }
    const std::size_t take = std::min(cur_.size() - cur_have_, n - used);
    std::memcpy(cur_.data() + cur_have_, p + used, take);
    cur_have_ += take;
    used += take;
    if (cur_have_ == cur_.size()) {
      in_frame_ = false;
      frame_complete(std::move(cur_));
      cur_ = Buffer();
    }
  }
  return used;
}

// Reserves a frame's memory; false (and the connection waits, its unread bytes kept by the
// caller) when the reactor's request budget has no room, or closes it when the frame can never
// fit.
bool ConnectionCore::reserve_frame(std::uint32_t size) {
  MemoryBudget* b = t_->cfg_.budget;
  if (!b) return true;
  if (size > b->capacity()) {
    b->note_frame_too_big();
    ++stats().bad_frames;
    LOG_WARN(
        "connection %llu from %s: frame of %u bytes exceeds this reactor's request memory "
        "budget of %llu bytes (queued.max.request.bytes / reactors); closing",
        static_cast<unsigned long long>(id_), peer_.c_str(), size,
        static_cast<unsigned long long>(b->capacity()));
    hard_close();
    return false;
  }
  if (!b->try_reserve_frame(size, this)) {
    ++stats().budget_waits;
    budget_wait_ = true;
    waiting_frame_ = size;
    b->wait(this);
    on_budget_wait();
    return false;
  }
  budget_held_ += size;
  undelivered_bytes_ += size;
  return true;
}

void ConnectionCore::retry_reserved_frame() {
  MemoryBudget* b = t_->cfg_.budget;
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
  if (stash_.empty()) return;
  std::vector<std::byte> rest = std::move(stash_);
  stash_.clear();
  take(rest.data(), rest.size());
}

void ConnectionCore::deliver_held() {
  if (budget_wait_ && state_ == State::open) retry_reserved_frame();
  while (state_ == State::open && !pending_.empty() && can_deliver()) {
    deliver(pending_.take_front());
  }
}

// Frames received but never to be delivered (close): their memory goes back at once.
void ConnectionCore::drop_undelivered() {
  if (t_ && t_->cfg_.budget) {
    t_->cfg_.budget->cancel(this);
    t_->cfg_.budget->release(undelivered_bytes_);
  }
  budget_held_ -= undelivered_bytes_;
  undelivered_bytes_ = 0;
  budget_wait_ = false;
  stash_.clear();
  stash_.shrink_to_fit();
}

void ConnectionCore::discard_input() {
  pending_.clear();
  in_frame_ = false;
  hdr_have_ = 0;
  cur_ = Buffer();
  drop_undelivered();
}

void ConnectionCore::frame_complete(Buffer f) {
  ++stats().frames_in;
  if (pending_.empty() && can_deliver()) {
    deliver(std::move(f));
  } else {
    pending_.push_back(std::move(f));
  }
}

void ConnectionCore::deliver(Buffer f) {
  const std::uint64_t seq = next_seq_++;
  Slot& s = window_.push_back(Slot{});
  s.request_bytes = static_cast<std::uint32_t>(f.size());
  inflight_bytes_ += f.size();
  if (t_->cfg_.budget) undelivered_bytes_ -= f.size();
  ++unanswered_;
  t_->h_.on_frame(*this, seq, std::move(f));
}

// ---- answers ----

void ConnectionCore::respond(std::uint64_t seq, Response r) {
  answer(seq, Slot::ready, &r);
}

void ConnectionCore::skip(std::uint64_t seq) {
  answer(seq, Slot::skipped, nullptr);
}

void ConnectionCore::after_earlier_answers(std::uint64_t seq, std::move_only_function<void()> fn) {
  SAMSA_ASSERT(io::Reactor::current() == &t_->r_);
  if (earlier_answered(seq)) {
    fn();
    return;
  }
  after_earlier_.push_back({seq, std::move(fn)});
}

bool ConnectionCore::earlier_answered(std::uint64_t seq) const {
  for (std::uint64_t s = head_seq_; s < seq && s < next_seq_; ++s)
    if (window_[s - head_seq_].kind == Slot::waiting) return false;
  return true;
}

// From answer(): the callbacks whose earlier frames are now all settled run later in this turn
// (a handler answering from inside answer() would re-enter it).
void ConnectionCore::release_after_earlier() {
  for (auto it = after_earlier_.begin(); it != after_earlier_.end();) {
    if (!earlier_answered(it->seq)) {
      ++it;
      continue;
    }
    t_->r_.defer_fn([fn = std::move(it->fn)]() mutable { fn(); });
    it = after_earlier_.erase(it);
  }
}

void ConnectionCore::answer(std::uint64_t seq, Slot::Kind kind, Response* r) {
  // A connection belongs to its transport's reactor: answers are posted there, never given
  // from another thread.
  SAMSA_ASSERT(io::Reactor::current() == &t_->r_);
  // The reorder window holds one slot per seq delivered and not yet released.
  SAMSA_ASSERT(head_seq_ + window_.size() == next_seq_);
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
    if (!after_earlier_.empty()) release_after_earlier();
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
    s.answer_bytes = s.resp.size();
  }
  if (!after_earlier_.empty()) release_after_earlier();
  wake();
}

void ConnectionCore::pop_front_slot() {
  const std::uint32_t req = window_.front().request_bytes;
  inflight_bytes_ -= req;
  if (MemoryBudget* b = t_->cfg_.budget) {
    b->release(req);
    budget_held_ -= req;
  }
  window_.pop_front();
  ++head_seq_;
}

// ---- file ranges ----

void ConnectionCore::schedule_reads(std::uint64_t seq, std::size_t piece, std::uint64_t ahead) {
  constexpr std::size_t kMaxScan = 256;
  if (reads_busy_ == kMaxReads) return;
  std::size_t scanned = 0;
  for (; seq < next_seq_; ++seq, piece = 0) {
    Slot& s = window_[seq - head_seq_];
    if (s.kind == Slot::waiting) return;
    if (s.kind == Slot::skipped) continue;
    auto& pcs = s.resp.pieces();
    for (std::size_t p = piece; p < pcs.size(); ++p) {
      auto& pc = pcs[p];
      if (ahead >= kReadAheadBytes || ++scanned > kMaxScan) return;
      if (pc.file.fd >= 0 && !pc.bytes.data()) {  // unread and no read under way
        if (!start_read(seq, p)) return;
      }
      ahead += pc.file.fd >= 0 ? pc.file.length : pc.bytes.size();
    }
  }
}

bool ConnectionCore::start_read(std::uint64_t seq, std::size_t piece) {
  auto& pc = window_[seq - head_seq_].resp.pieces()[piece];
  ReadOp* op =
      std::find_if(std::begin(reads_), std::end(reads_), [](const ReadOp& r) { return !r.busy; });
  pc.bytes = Buffer(pc.file.length);
  op->busy = true;
  op->seq = seq;
  op->piece = piece;
  op->done = 0;
  ++reads_busy_;
  issue_read(*op);
  return reads_busy_ < kMaxReads;
}

void ConnectionCore::issue_read(ReadOp& op) {
  auto& pc = window_[op.seq - head_seq_].resp.pieces()[op.piece];
  const std::uint32_t len = std::min(pc.file.length - op.done, kMaxReadChunk);
  io_uring_prep_read(t_->r_.sqe(&op), pc.file.fd, pc.bytes.data() + op.done, len,
                     pc.file.offset + op.done);
  ++ops_;
}

void ConnectionCore::on_read(io::Completion* c, int res, std::uint32_t) {
  auto& op = *static_cast<ReadOp*>(c);
  ConnectionCore* self = op.conn;
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
  // The slot cannot have left the window: sending stops at an unread range.
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
  ++self->stats().file_reads;
  self->wake();
}

// ---- closing ----

void ConnectionCore::close(bool graceful) {
  if (state_ == State::closed) return;
  if (!graceful) {
    hard_close();
    return;
  }
  if (state_ != State::open) return;
  state_ = State::draining;
  discard_input();
  wake();
}

void ConnectionCore::hard_close() {
  if (state_ == State::closed) return;
  state_ = State::closed;
  --t_->open_;
  ++stats().closed;
  on_hard_close();
  t_->r_.disarm(&timer_);
  discard_input();
  wake();
}

void ConnectionCore::enter_linger() {
  state_ = State::linger;
  std::int64_t linger_ms = kLingerMs;
  if (limits().idle_timeout_ms > 0) linger_ms = std::min(linger_ms, limits().idle_timeout_ms);
  arm_timer(mono_ns() + linger_ms * 1'000'000);
}

void ConnectionCore::notify_closed() {
  if (close_notified_) return;
  close_notified_ = true;
  t_->h_.on_close(*this);
}

void ConnectionCore::drop_answers() {
  for (std::size_t i = 0; i < window_.size(); ++i)
    window_[i].resp = Response{};
}

void ConnectionCore::on_timer(io::Timer* t) {
  ConnectionCore* self = static_cast<ConnTimer*>(t)->conn;
  if (self->state_ == State::closed) return;
  if (self->state_ == State::linger) {
    self->hard_close();
    return;
  }
  const std::int64_t idle_ns = self->limits().idle_timeout_ms * 1'000'000;
  const std::int64_t now = mono_ns();
  const std::int64_t hs = self->handshake_deadline_ns_;
  if (hs && now >= hs) {
    LOG_INFO("connection %llu from %s: TLS handshake not done within %lld ms; closing",
             static_cast<unsigned long long>(self->id_), self->peer_.c_str(),
             static_cast<long long>(self->t_->cfg_.tls_handshake_timeout_ms));
    self->hard_close();
    return;
  }
  auto rearm = [&](std::int64_t at) { self->arm_timer(hs ? std::min(at, hs) : at); };
  const std::int64_t deadline = self->last_activity_ns_ + idle_ns;
  if (now < deadline) {
    rearm(deadline);
  } else if (self->unanswered_ > 0 || self->answers_unsent()) {
    // The handler is still working on something (a long poll, a commit), or answers wait for
    // this turn's send (timers run before turn-end hooks): not idle.
    rearm(now + idle_ns);
  } else {
    LOG_DEBUG("connection %llu from %s: idle for %lld ms; closing",
              static_cast<unsigned long long>(self->id_), self->peer_.c_str(),
              static_cast<long long>(self->limits().idle_timeout_ms));
    self->hard_close();
  }
}

}  // namespace samsa::net
