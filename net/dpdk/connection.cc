#include "net/dpdk/connection.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "base/bytes.h"
#include "base/clock.h"
#include "base/log.h"

namespace samsa::net::dpdk {
namespace {
// Ids of their own range, so a process that ran both backends never reuses one.
std::atomic<std::uint64_t> g_next_id{1ull << 40};
}  // namespace

void ConnDeleter::operator()(Conn* c) const {
  delete c;
}

ConnPtr make_conn(const LinkPtr& link, StackPort& stack, StackConn* sc, std::string peer) {
  return ConnPtr(new Conn(link, stack, sc, std::move(peer)));
}

void deliver(const LinkPtr& link, Conn* c, StackEvent ev) {
  TransportImpl* t = link->transport;
  if (!t) return;  // the transport is gone; `ev` frees a half it never adopted
  if (ev.opened) t->adopt(ev.opened.release());
  c->on_event(ev);
}

Conn::Conn(LinkPtr link, StackPort& stack, StackConn* sc, std::string peer)
    : link_(std::move(link)),
      stack_(stack),
      sc_(sc),
      id_(g_next_id.fetch_add(1, std::memory_order_relaxed)),
      peer_(std::move(peer)) {
  for (auto& r : reads_) {
    r.fn = &Conn::on_read;
    r.conn = this;
  }
  timer_.fn = &Conn::on_timer;
  timer_.conn = this;
}

Conn::~Conn() {
  if (!t_) return;
  if (MemoryBudget* b = t_->cfg_.budget) {
    b->cancel(this);
    b->release(budget_held_);
  }
  t_->r_.disarm(&timer_);
}

io::Reactor& Conn::reactor() {
  return t_->r_;
}

const ConnectionLimits& Conn::limits() const {
  return t_->cfg_.limits;
}

void Conn::wake() {
  t_->r_.at_turn_end(this);
}

void Conn::adopt(TransportImpl* t) {
  t_ = t;
  last_activity_ns_ = mono_ns();
  t_->h_.on_open(*this);
  if (state_ == State::open && limits().idle_timeout_ms > 0)
    arm_timer(last_activity_ns_ + limits().idle_timeout_ms * 1'000'000);
  wake();
}

void Conn::arm_timer(std::int64_t deadline_ns) {
  t_->r_.arm(&timer_, deadline_ns);
}

bool Conn::can_deliver() const {
  const auto& l = limits();
  return window_.size() < std::max<std::uint32_t>(l.max_inflight_requests, 1) &&
         inflight_bytes_ < l.max_inflight_bytes;
}

// ---- receiving ----

void Conn::on_event(StackEvent& ev) {
  if (stack_closed_) return;  // nothing follows `closed`
  for (auto& b : ev.data) {
    if (b.size() == 0) continue;
    t_->stats_.bytes_in += b.size();
    backlog_bytes_ += b.size();
    backlog_.push_back(std::move(b));
    last_activity_ns_ = mono_ns();
  }
  if (ev.taken) on_taken(ev.taken);
  if (ev.eof) {
    peer_eof_ = true;
    if (in_frame_ || hdr_have_)
      LOG_DEBUG("connection %llu from %s: peer closed in the middle of a frame",
                static_cast<unsigned long long>(id_), peer_.c_str());
  }
  if (ev.closed != StackEvent::Closed::no) {
    stack_closed_ = true;
    if (state_ != State::closed)
      LOG_DEBUG("connection %llu from %s: %s", static_cast<unsigned long long>(id_), peer_.c_str(),
                ev.closed == StackEvent::Closed::reset ? "reset by peer" : "closed by the stack");
    hard_close();
  }
  wake();
}

// Frames everything received (complete frames wait in pending_ while the in-flight bounds
// hold them back), but credits the bytes back to the stack only while frames may be
// delivered: while paused the credit is withheld, so the stack's TCP window closes behind
// what we hold, as a kernel socket's does when its reader stops.
void Conn::pump_rx() {
  if (state_ == State::draining || state_ == State::linger) {
    discard_backlog();  // read and discard, so closing does not turn into a RST
    return;
  }
  if (state_ != State::open) return;
  while (!backlog_.empty() && !budget_wait_ && state_ == State::open) {
    const bool held = !pending_.empty() || !can_deliver();
    Buffer& b = backlog_.front();
    const std::size_t n = consume(b.data() + front_off_, b.size() - front_off_);
    front_off_ += n;
    backlog_bytes_ -= n;
    (held ? held_credit_ : out_.credit) += n;
    if (front_off_ < b.size()) break;  // waiting for budget, or closed
    backlog_.pop_front();
    front_off_ = 0;
  }
  if (state_ != State::open) return;
  if (!pending_.empty() || !can_deliver() || budget_wait_) {
    if (!paused_) {
      paused_ = true;
      ++t_->stats_.recv_pauses;
    }
  } else {
    paused_ = false;
    out_.credit += held_credit_;
    held_credit_ = 0;
  }
}

void Conn::discard_backlog() {
  out_.credit += backlog_bytes_ + held_credit_;
  held_credit_ = 0;
  backlog_bytes_ = 0;
  backlog_.clear();
  front_off_ = 0;
}

std::size_t Conn::consume(const std::byte* p, std::size_t n) {
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
        ++t_->stats_.bad_frames;
        LOG_WARN(
            "connection %llu from %s: frame size %d outside 1..%u "
            "(socket.request.max.bytes); closing",
            static_cast<unsigned long long>(id_), peer_.c_str(), size, limits().max_frame_bytes);
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

bool Conn::reserve_frame(std::uint32_t size) {
  MemoryBudget* b = t_->cfg_.budget;
  if (!b) return true;
  if (size > b->capacity()) {
    b->note_frame_too_big();
    ++t_->stats_.bad_frames;
    LOG_WARN(
        "connection %llu from %s: frame of %u bytes exceeds this reactor's request memory "
        "budget of %llu bytes (queued.max.request.bytes / reactors); closing",
        static_cast<unsigned long long>(id_), peer_.c_str(), size,
        static_cast<unsigned long long>(b->capacity()));
    hard_close();
    return false;
  }
  if (!b->try_reserve_frame(size, this)) {
    // Wait for room: the bytes after the size prefix stay in the backlog, unread.
    ++t_->stats_.budget_waits;
    budget_wait_ = true;
    waiting_frame_ = size;
    b->wait(this);
    return false;
  }
  budget_held_ += size;
  undelivered_bytes_ += size;
  return true;
}

void Conn::retry_reserved_frame() {
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
}

void Conn::drop_undelivered() {
  if (t_ && t_->cfg_.budget) {
    t_->cfg_.budget->cancel(this);
    t_->cfg_.budget->release(undelivered_bytes_);
  }
  budget_held_ -= undelivered_bytes_;
  undelivered_bytes_ = 0;
  budget_wait_ = false;
}

void Conn::frame_complete(Buffer f) {
  ++t_->stats_.frames_in;
  if (pending_.empty() && can_deliver()) {
    deliver_frame(std::move(f));
  } else {
    pending_.push_back(std::move(f));
  }
}

void Conn::deliver_frame(Buffer f) {
  const std::uint64_t seq = next_seq_++;
  Slot& s = window_.push_back(Slot{});
  s.request_bytes = static_cast<std::uint32_t>(f.size());
  inflight_bytes_ += f.size();
  if (t_->cfg_.budget) undelivered_bytes_ -= f.size();
  ++unanswered_;
  t_->h_.on_frame(*this, seq, std::move(f));
}

// ---- answers ----

void Conn::respond(std::uint64_t seq, Response r) {
  answer(seq, Slot::ready, &r);
}

void Conn::skip(std::uint64_t seq) {
  answer(seq, Slot::skipped, nullptr);
}

void Conn::answer(std::uint64_t seq, Slot::Kind kind, Response* r) {
  if (seq < head_seq_ || seq >= next_seq_ || window_[seq - head_seq_].kind != Slot::waiting) {
    LOG_WARN("connection %llu from %s: answer to seq %llu that is not waiting for one",
             static_cast<unsigned long long>(id_), peer_.c_str(),
             static_cast<unsigned long long>(seq));
    return;
  }
  Slot& s = window_[seq - head_seq_];
  --unanswered_;
  if (state_ == State::closed) {
    s.kind = Slot::skipped;  // nobody will read it; the slot only records the seq is settled
    if (unanswered_ == 0) wake();
    return;
  }
  s.kind = kind;
  if (r) {
    s.resp = std::move(*r);
    for (auto& pc : s.resp.pieces()) {
      if (pc.file.fd < 0) continue;
      pc.bytes = Buffer();  // marks "no read under way"
      if (pc.file.length == 0) pc.file = FileRange{};
    }
    s.answer_bytes = s.resp.size();
  }
  wake();
}

// Moves every piece that is ready, in order, into this turn's update for the stack. File
// ranges are read first; a piece not read yet holds back everything after it.
void Conn::hand_over() {
  schedule_reads();
  std::size_t pieces = 0;
  while (hand_seq_ < next_seq_) {
    Slot& s = window_[hand_seq_ - head_seq_];
    if (s.kind == Slot::waiting) break;
    if (s.kind == Slot::ready) {
      auto& pcs = s.resp.pieces();
      bool blocked = false;
      for (; hand_piece_ < pcs.size(); ++hand_piece_) {
        auto& pc = pcs[hand_piece_];
        if (pc.file.fd >= 0) {
          blocked = true;
          break;
        }
        if (pc.bytes.size() == 0) continue;
        handed_ += pc.bytes.size();
        out_.send.push_back(std::move(pc.bytes));
        pc.bytes = Buffer();
        ++pieces;
      }
      if (blocked) break;
    }
    ++hand_seq_;
    hand_piece_ = 0;
  }
  if (pieces) {
    ++t_->stats_.sends;
    last_activity_ns_ = mono_ns();  // starting a send is activity (see on_timer)
  }
  on_taken(0);  // releases skipped and empty answers at the front
}

void Conn::on_taken(std::uint64_t n) {
  if (n) {
    taken_ += n;
    front_taken_ += n;
    t_->stats_.bytes_out += n;
    if (taken_ < handed_) ++t_->stats_.short_sends;
    last_activity_ns_ = mono_ns();
    wake();
  }
  while (!window_.empty()) {
    Slot& s = window_.front();
    if (s.kind == Slot::waiting) return;
    if (s.kind == Slot::ready) {
      if (hand_seq_ == head_seq_ || front_taken_ < s.answer_bytes) return;
      front_taken_ -= s.answer_bytes;
    }
    release_front();
  }
}

void Conn::release_front() {
  const std::uint32_t req = window_.front().request_bytes;
  inflight_bytes_ -= req;
  if (MemoryBudget* b = t_->cfg_.budget) {
    b->release(req);
    budget_held_ -= req;
  }
  window_.pop_front();
  ++head_seq_;
  if (hand_seq_ < head_seq_) {
    hand_seq_ = head_seq_;
    hand_piece_ = 0;
  }
}

// ---- file ranges ----

void Conn::schedule_reads() {
  if (reads_busy_ == kMaxReads) return;
  std::uint64_t ahead = handed_ - taken_;
  std::size_t scanned = 0;
  for (std::uint64_t seq = hand_seq_; seq < next_seq_; ++seq) {
    Slot& s = window_[seq - head_seq_];
    if (s.kind == Slot::waiting) return;
    if (s.kind == Slot::skipped) continue;
    auto& pcs = s.resp.pieces();
    for (std::size_t p = seq == hand_seq_ ? hand_piece_ : 0; p < pcs.size(); ++p) {
      auto& pc = pcs[p];
      if (ahead >= kReadAheadBytes || ++scanned > 256) return;
      if (pc.file.fd >= 0 && !pc.bytes.data()) {  // unread and no read under way
        ReadOp* op = std::find_if(std::begin(reads_), std::end(reads_),
                                  [](const ReadOp& r) { return !r.busy; });
        pc.bytes = Buffer(pc.file.length);
        op->busy = true;
        op->seq = seq;
        op->piece = p;
        op->done = 0;
        ++reads_busy_;
        issue_read(*op);
        if (reads_busy_ == kMaxReads) return;
      }
      ahead += pc.file.fd >= 0 ? pc.file.length : pc.bytes.size();
    }
  }
}

void Conn::issue_read(ReadOp& op) {
  auto& pc = window_[op.seq - head_seq_].resp.pieces()[op.piece];
  const std::uint32_t len = std::min(pc.file.length - op.done, kMaxReadChunk);
  io_uring_prep_read(t_->r_.sqe(&op), pc.file.fd, pc.bytes.data() + op.done, len,
                     pc.file.offset + op.done);
  ++ops_;
}

void Conn::on_read(io::Completion* c, int res, std::uint32_t) {
  auto& op = *static_cast<ReadOp*>(c);
  Conn* self = op.conn;
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
  // The slot cannot have left the window: handing stops at an unread range.
  auto& pc = self->window_[op.seq - self->head_seq_].resp.pieces()[op.piece];
  if (res <= 0) {
    // The answer's size prefix already counts these bytes; fewer would desynchronise the
    // stream, so the connection has to go.
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
  ++self->t_->stats_.file_reads;
  self->wake();
}

// ---- closing ----

void Conn::close(bool graceful) {
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

void Conn::hard_close() {
  if (state_ == State::closed) return;
  state_ = State::closed;
  --t_->open_;
  ++t_->stats_.closed;
  // The stack closes with a FIN, or a RST when bytes it delivered are left unconsumed (as a
  // kernel socket closed with unread input does).
  if (!stack_closed_) out_.close = true;
  t_->r_.disarm(&timer_);
  pending_.clear();
  in_frame_ = false;
  cur_ = Buffer();
  backlog_.clear();
  backlog_bytes_ = 0;
  front_off_ = 0;
  drop_undelivered();
  wake();
}

void Conn::on_turn_end() {
  if (state_ == State::closed) {
    finish_closed();  // may destroy this
    return;
  }
  if (budget_wait_ && state_ == State::open) retry_reserved_frame();
  while (state_ == State::open && !pending_.empty() && can_deliver())
    deliver_frame(pending_.take_front());
  pump_rx();
  if (state_ == State::closed) {
    finish_closed();
    return;
  }
  hand_over();
  const bool all_sent = window_.empty();
  if (state_ == State::open && peer_eof_ && pending_.empty() && backlog_.empty() && all_sent) {
    hard_close();  // the peer said it is done and has every answer
  } else if (state_ == State::draining && all_sent) {
    if (peer_eof_) {
      hard_close();
    } else {
      // Our FIN once everything handed over is out; then read and discard until the peer's
      // FIN, bounded by the linger time.
      out_.shutdown = true;
      shutdown_sent_ = true;
      state_ = State::linger;
      std::int64_t linger_ms = kLingerMs;
      if (limits().idle_timeout_ms > 0) linger_ms = std::min(linger_ms, limits().idle_timeout_ms);
      arm_timer(mono_ns() + linger_ms * 1'000'000);
    }
  } else if (state_ == State::linger && peer_eof_) {
    hard_close();
  }
  if (state_ == State::closed) {
    finish_closed();
    return;
  }
  send_update();
}

void Conn::finish_closed() {
  if (!close_notified_) {
    close_notified_ = true;
    t_->h_.on_close(*this);
  }
  send_update();         // the close (and credit) go out now
  if (ops_ > 0) return;  // the last read's completion wakes us again
  for (std::size_t i = 0; i < window_.size(); ++i)
    window_[i].resp = Response{};  // keep the slots: late answers are still recognised
  if (!t_->dying_) {
    if (!stack_closed_) return;  // the stack's `closed` wakes us
    if (!release_sent_) {
      out_ = ConnUpdate{};
      out_.release = true;
      send_update();
      release_sent_ = true;
    }
  }
  if (TurnHook::queued) return;
  if (unanswered_ == 0 || t_->dying_) t_->destroy(this);
}

void Conn::send_update() {
  if (out_.empty()) return;
  ConnUpdate u = std::move(out_);
  out_ = ConnUpdate{};
  // After release the stack's half is gone; after `closed` only release matters; a dying
  // transport has already detached from the stack.
  if (release_sent_ || t_->dying_ || (stack_closed_ && !u.release)) return;
  io::Reactor* sr = stack_.reactor();
  if (!sr) return;
  if (sr == &t_->r_) {
    stack_.update(sc_, std::move(u));
  } else {
    sr->post_fn(
        [s = &stack_, sc = sc_, u = std::move(u)]() mutable { s->update(sc, std::move(u)); });
  }
}

// ---- timers ----

void Conn::on_timer(io::Timer* t) {
  Conn* self = static_cast<ConnTimer*>(t)->conn;
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
  } else if (self->unanswered_ > 0 || self->hand_seq_ < self->next_seq_) {
    // The handler is still working on something (a long poll, a commit), or answers wait to
    // be handed to the stack at this turn's end (timers run before turn-end hooks).
    self->arm_timer(now + idle_ns);
  } else {
    LOG_DEBUG("connection %llu from %s: idle for %lld ms; closing",
              static_cast<unsigned long long>(self->id_), self->peer_.c_str(),
              static_cast<long long>(self->limits().idle_timeout_ms));
    self->hard_close();
  }
}

}  // namespace samsa::net::dpdk
