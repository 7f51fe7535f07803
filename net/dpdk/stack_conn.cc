// The stack half of each DPDK connection (pipe.h): received bytes copied out of lwIP's pbufs
// into chunks, answers written into lwIP without a copy and kept until acknowledged, receive
// credit, shutdown and close, and the per-poll events to the connection halves.
#include <algorithm>

#include "net/dpdk/stack.h"

namespace samsa::net::dpdk {
namespace {
// Received bytes are copied out of the mbufs at once (the frames go back to the pool) into
// chunks of at least this size.
constexpr std::size_t kChunk = 16384;
}  // namespace

err_t StackImpl::on_recv(void* arg, tcp_pcb*, pbuf* p, err_t) {
  auto* sc = static_cast<StackConn*>(arg);
  if (!p) {
    sc->ev.eof = true;
  } else {
    sc->stack.append_rx(sc, p);
    pbuf_free(p);
    sc->got_data = true;
  }
  sc->stack.mark(sc);
  return ERR_OK;
}

void StackImpl::append_rx(StackConn* sc, pbuf* p) {
  std::size_t off = 0;
  const std::size_t total = p->tot_len;
  while (off < total) {
    if (sc->chunk_used == sc->chunk.size()) {
      if (sc->chunk.size() > 0) sc->ev.data.push_back(std::move(sc->chunk));
      sc->chunk = Buffer(std::max(kChunk, total - off));
      sc->chunk_used = 0;
    }
    const std::size_t n = std::min(sc->chunk.size() - sc->chunk_used, total - off);
    pbuf_copy_partial(p, sc->chunk.data() + sc->chunk_used, static_cast<u16_t>(n),
                      static_cast<u16_t>(off));
    sc->chunk_used += n;
    off += n;
  }
}

err_t StackImpl::on_sent(void* arg, tcp_pcb*, u16_t len) {
  auto* sc = static_cast<StackConn*>(arg);
  sc->acked += len;
  sc->stack.release_acked(sc);
  sc->stack.try_write(sc);
  if (sc->close_wanted) sc->stack.do_close(sc);
  sc->stack.mark(sc);
  return ERR_OK;
}

void StackImpl::on_err(void* arg, err_t err) {
  auto* sc = static_cast<StackConn*>(arg);
  if (!sc) return;
  // lwIP has freed the pcb (and the segments that pointed into our buffers).
  sc->pcb = nullptr;
  if (err == ERR_RST) sc->stack.resets_.fetch_add(1, std::memory_order_relaxed);
  sc->stack.drop_pcb(sc, err == ERR_RST    ? StackEvent::Closed::reset
                         : err == ERR_CLSD ? StackEvent::Closed::normal
                                           : StackEvent::Closed::error);
}

err_t StackImpl::on_poll(void* arg, tcp_pcb*) {
  auto* sc = static_cast<StackConn*>(arg);
  if (!sc) return ERR_OK;
  // Retries what lwIP's memory refused earlier.
  sc->stack.try_write(sc);
  if (sc->close_wanted && sc->pcb) sc->stack.do_close(sc);
  if (sc->pcb) sc->stack.mark(sc);
  return ERR_OK;
}

void StackImpl::set_callbacks(tcp_pcb* pcb, StackConn* sc) {
  tcp_arg(pcb, sc);
  tcp_recv(pcb, &StackImpl::on_recv);
  tcp_sent(pcb, &StackImpl::on_sent);
  tcp_err(pcb, &StackImpl::on_err);
  tcp_poll(pcb, &StackImpl::on_poll, 4);
  // Answers go out at once; dead peers are found.
  tcp_nagle_disable(pcb);
  ip_set_option(pcb, SOF_KEEPALIVE);
}

void StackImpl::clear_callbacks(tcp_pcb* pcb) {
  tcp_arg(pcb, nullptr);
  tcp_recv(pcb, nullptr);
  tcp_sent(pcb, nullptr);
  tcp_err(pcb, nullptr);
  tcp_poll(pcb, nullptr, 0);
}

void StackImpl::drop_pcb(StackConn* sc, StackEvent::Closed why) {
  if (sc->ev.closed == StackEvent::Closed::no && !sc->closed_sent) {
    sc->ev.closed = why;
    open_.fetch_sub(1, std::memory_order_relaxed);
  }
  clear_txq(sc);
  sc->wpiece = sc->woff = 0;
  sc->front_start = sc->acked = sc->written = sc->queued;
  mark(sc);
}

void StackImpl::update(StackConn* sc, ConnUpdate u) {
  if (u.release) {
    sc->released = true;
    if (sc->pcb) {  // the connection side gave up without our `closed`: reset
      clear_callbacks(sc->pcb);
      tcp_abort(sc->pcb);
      sc->pcb = nullptr;
      open_.fetch_sub(1, std::memory_order_relaxed);
    }
    if (!sc->dirty) free_conn(sc);  // else once its pending event is gone (flush_events)
    return;
  }
  if (!sc->pcb) return;  // closed meanwhile; `closed` is on its way. Answers are dropped.
  for (auto& b : u.send) {
    if (b.size() == 0) continue;
    sc->queued += b.size();
    sc->txq.push_back(tx_pool_.get(std::move(b)));
  }
  if (u.credit) {
    // A consumed byte reopens the window by one; lwIP takes 16 bits at a time.
    std::uint64_t c = u.credit;
    while (c > 0 && sc->pcb) {
      const auto n = static_cast<u16_t>(std::min<std::uint64_t>(c, 0xffff));
      tcp_recved(sc->pcb, n);
      c -= n;
    }
  }
  try_write(sc);
  if (u.shutdown) sc->shutdown_wanted = true;
  maybe_shutdown(sc);
  if (u.close) {
    sc->close_wanted = true;
    do_close(sc);
  }
  mark(sc);
}

void StackImpl::try_write(StackConn* sc) {
  while (sc->pcb && sc->wpiece < sc->txq.size()) {
    Buffer& b = sc->txq[sc->wpiece]->bytes;
    const std::size_t rem = b.size() - sc->woff;
    if (rem == 0) {
      ++sc->wpiece;
      sc->woff = 0;
      continue;
    }
    const u16_t room = tcp_sndbuf(sc->pcb);
    if (room == 0 || tcp_sndqueuelen(sc->pcb) >= TCP_SND_QUEUELEN - 2) break;
    const auto len = static_cast<u16_t>(std::min<std::size_t>(rem, room));
    const bool more = len < rem || sc->wpiece + 1 < sc->txq.size();
    const err_t e = tcp_write(sc->pcb, b.data() + sc->woff, len, more ? TCP_WRITE_FLAG_MORE : 0);
    if (e != ERR_OK) break;  // ERR_MEM: lwIP's pools are busy; on_sent/on_poll retry
    sc->woff += len;
    sc->written += len;
    sc->ev.taken += len;
  }
  maybe_shutdown(sc);
}

void StackImpl::release_acked(StackConn* sc) {
  while (!sc->txq.empty() && sc->wpiece > 0 &&
         sc->front_start + sc->txq.front()->bytes.size() <= sc->acked) {
    sc->front_start += sc->txq.front()->bytes.size();
    TxPool::put(sc->txq.take_front());
    --sc->wpiece;
    if (sc->tx_hint > 0) --sc->tx_hint;
  }
}

void StackImpl::clear_txq(StackConn* sc) {
  while (!sc->txq.empty())
    TxPool::put(sc->txq.take_front());
  sc->tx_hint = 0;
}

// The kept answer piece that holds p (a segment's payload, which lwIP sends from in place),
// and how many bytes of it from p on. Segments go out near where the last one was found
// (new data after it, a retransmission at the front), so the search starts there.
TxBuf* StackImpl::find_txbuf(StackConn* sc, const std::byte* p, std::size_t* avail) {
  const std::size_t n = sc->txq.size();
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = (sc->tx_hint + k) % n;
    TxBuf* t = sc->txq[i];
    const std::byte* b = t->bytes.data();
    if (p >= b && p < b + t->bytes.size()) {
      sc->tx_hint = i;
      *avail = static_cast<std::size_t>(b + t->bytes.size() - p);
      return t;
    }
  }
  return nullptr;
}

// ---- kept answer pieces ----

TxBuf* TxPool::get(Buffer b) {
  TxBuf* t = free;
  if (t) {
    free = t->next_free;
    --free_count;
  } else {
    t = new TxBuf;
    t->pool = this;
  }
  t->next_free = nullptr;
  t->bytes = std::move(b);
  Port::ext_init(&t->ref, &TxPool::freed, t);
  ++live;
  return t;
}

void TxPool::put(TxBuf* t) {
  Port::ext_put(&t->ref);
}

void TxPool::freed(void*, void* opaque) {
  auto* t = static_cast<TxBuf*>(opaque);
  TxPool* pool = t->pool;
  t->bytes = Buffer();
  --pool->live;
  // Enough spares for the answers of a busy moment; beyond that they go back to the heap.
  if (pool->free_count >= 4096) {
    delete t;
    return;
  }
  t->next_free = pool->free;
  pool->free = t;
  ++pool->free_count;
}

TxPool::~TxPool() {
  while (TxBuf* t = free) {
    free = t->next_free;
    delete t;
  }
}

void StackImpl::maybe_shutdown(StackConn* sc) {
  if (!sc->pcb || !sc->shutdown_wanted || sc->shutdown_done || sc->written != sc->queued) return;
  if (tcp_shutdown(sc->pcb, 0, 1) == ERR_OK) sc->shutdown_done = true;
}

void StackImpl::do_close(StackConn* sc) {
  if (!sc->pcb) return;
  tcp_pcb* pcb = sc->pcb;
  if (sc->acked == sc->written) {
    // Nothing of ours is referenced any more: lwIP may finish the close on its own (FIN, or
    // RST when received bytes are left unconsumed, as a kernel does).
    clear_callbacks(pcb);
    if (tcp_close(pcb) != ERR_OK) {  // out of memory for the FIN: retried from on_poll
      tcp_arg(pcb, sc);
      tcp_recv(pcb, &StackImpl::on_recv);
      tcp_sent(pcb, &StackImpl::on_sent);
      tcp_err(pcb, &StackImpl::on_err);
      tcp_poll(pcb, &StackImpl::on_poll, 4);
      return;
    }
  } else {
    // Segments still point into answers that are about to be freed: reset instead.
    clear_callbacks(pcb);
    tcp_abort(pcb);
  }
  sc->pcb = nullptr;
  drop_pcb(sc, StackEvent::Closed::normal);
}

void StackImpl::mark(StackConn* sc) {
  if (sc->dirty) return;
  sc->dirty = true;
  sc->dirty_next = dirty_;
  dirty_ = sc;
}

void StackImpl::flush_events() {
  while (StackConn* list = dirty_) {
    dirty_ = nullptr;
    for (StackConn* sc = list; sc;) {
      StackConn* next = sc->dirty_next;
      sc->dirty = false;
      sc->dirty_next = nullptr;
      if (sc->pcb) {
        // Acknowledge what arrived in this poll now instead of on the 25 ms timer: the
        // kernel peer's congestion window grows with our ACKs.
        if (sc->got_data && (sc->pcb->flags & TF_ACK_DELAY)) tcp_ack_now(sc->pcb);
        tcp_output(sc->pcb);
      }
      sc->got_data = false;
      if (sc->released) {
        free_conn(sc);
      } else {
        deliver_event(sc);
      }
      sc = next;
    }
  }
}

void StackImpl::deliver_event(StackConn* sc) {
  if (sc->chunk_used > 0) {
    sc->chunk.resize(sc->chunk_used);
    sc->ev.data.push_back(std::move(sc->chunk));
    sc->chunk = Buffer();
    sc->chunk_used = 0;
  }
  if (sc->ev.empty() || sc->closed_sent) {
    sc->ev = StackEvent{};
    return;
  }
  if (sc->ev.closed != StackEvent::Closed::no) sc->closed_sent = true;
  StackEvent ev = std::move(sc->ev);
  sc->ev = StackEvent{};
  Link& l = *sc->link;
  if (l.detached.load(std::memory_order_relaxed)) return;  // `ev` frees an unadopted half
  if (l.reactor == reactor()) {
    deliver(sc->link, sc->conn, std::move(ev));
    return;
  }
  l.posting.fetch_add(1, std::memory_order_seq_cst);
  if (!l.detached.load(std::memory_order_seq_cst)) {
    l.reactor->post_fn([link = sc->link, c = sc->conn, e = std::move(ev)]() mutable {
      deliver(link, c, std::move(e));
    });
  }
  l.posting.fetch_sub(1, std::memory_order_seq_cst);
}

void StackImpl::free_conn(StackConn* sc) {
  journal_.remove(sc->journal_slot);
  if (sc->prev) sc->prev->next = sc->next;
  if (sc->next) sc->next->prev = sc->prev;
  if (conns_ == sc) conns_ = sc->next;
  clear_txq(sc);
  if (sc->dirty) {  // unlink from the dirty list
    StackConn** pp = &dirty_;
    while (*pp && *pp != sc)
      pp = &(*pp)->dirty_next;
    if (*pp) *pp = sc->dirty_next;
  }
  delete sc;
}

}  // namespace samsa::net::dpdk
