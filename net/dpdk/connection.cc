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
  if (ClientSide* cs = link->client) {
    cs->on_stack_event(ev);
    return;
  }
  TransportImpl* t = link->transport;
  if (!t) return;  // the transport is gone; `ev` frees a half it never adopted
  if (ev.opened) t->adopt(ev.opened.release());
  c->on_event(ev);
}

Conn::Conn(LinkPtr link, StackPort& stack, StackConn* sc, std::string peer)
    : ConnectionCore(g_next_id.fetch_add(1, std::memory_order_relaxed), std::move(peer)),
      link_(std::move(link)),
      stack_(stack),
      sc_(sc) {}

void Conn::adopt(TransportImpl* t) {
  start(t);
}

// ---- receiving ----

void Conn::on_event(StackEvent& ev) {
  if (stack_closed_) return;  // nothing follows `closed`
  for (auto& b : ev.data) {
    if (b.size() == 0) continue;
    stats().bytes_in += b.size();
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
    // A bad frame closes the connection inside consume(), and closing empties the backlog:
    // b is gone and there is nothing left to account for.
    if (state_ != State::open) return;
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
      ++stats().recv_pauses;
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

// ---- answers ----

// Moves every piece that is ready, in order, into this turn's update for the stack. File
// ranges are read first; a piece not read yet holds back everything after it.
void Conn::hand_over() {
  schedule_reads(hand_seq_, hand_piece_, handed_ - taken_);
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
    ++stats().sends;
    last_activity_ns_ = mono_ns();  // starting a send is activity (see on_timer)
  }
  on_taken(0);  // releases skipped and empty answers at the front
}

void Conn::on_taken(std::uint64_t n) {
  if (n) {
    taken_ += n;
    front_taken_ += n;
    stats().bytes_out += n;
    if (taken_ < handed_) ++stats().short_sends;
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
  pop_front_slot();
  if (hand_seq_ < head_seq_) {
    hand_seq_ = head_seq_;
    hand_piece_ = 0;
  }
}

// ---- file ranges ----

// File ranges not yet handed over start reading, up to kReadAheadBytes ahead of what the
// stack has taken.

// ---- closing ----

void Conn::on_hard_close() {
  // The stack closes with a FIN, or a RST when bytes it delivered are left unconsumed (as a
  // kernel socket closed with unread input does).
  if (!stack_closed_) out_.close = true;
  backlog_.clear();
  backlog_bytes_ = 0;
  front_off_ = 0;
}

void Conn::on_turn_end() {
  if (state_ == State::closed) {
    finish_closed();  // may destroy this
    return;
  }
  deliver_held();
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
      enter_linger();
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
  notify_closed();
  send_update();         // the close (and credit) go out now
  if (ops_ > 0) return;  // the last read's completion wakes us again
  drop_answers();
  if (!t_->dying_) {
    if (!stack_closed_) return;  // the stack's `closed` wakes us
    if (!release_sent_) {
      out_ = ConnUpdate{};
      out_.release = true;
      send_update();
      release_sent_ = true;
    }
  }
  destroy_if_done();
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

}  // namespace samsa::net::dpdk
