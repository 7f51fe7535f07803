// net::MemoryBudget — the memory one reactor's requests may hold (DESIGN.md decision 12):
// `queued.max.request.bytes` split among the reactors. Every request frame is reserved from it
// when its size prefix arrives, before its buffer exists, and released when its answer has been
// handed to the kernel; what decoding and handling a request allocate (decoded arrays, per
// partition state) is charged to it too, through the request, until the request ends.
//
// Frames may fill the budget up to its capacity; a connection whose next frame does not fit
// stops reading and waits in FIFO order (the kernel's socket buffers hold the rest). Charges
// for decoding and handling may go a little further, by the overdraft, so a small request can
// always be decoded even while frames fill the budget; a request that needs more than that is
// refused (the caller logs and closes its connection). So the memory requests hold on one
// reactor never exceeds capacity + overdraft, whatever clients send.
//
// Reactor-thread only: plain integers, no locks.
#pragma once

#include <cstdint>

namespace samsa::net {

class MemoryBudget {
 public:
  // Called (on the reactor thread) when memory was released and this waiter is at the front;
  // it must only schedule its retry (try_reserve_frame), not retry inside the call.
  struct Waiter {
    virtual void on_budget_available() = 0;
    Waiter* budget_next = nullptr;
    bool budget_queued = false;

   protected:
    ~Waiter() = default;
  };

  struct Stats {
    std::uint64_t peak = 0;            // most bytes ever held at once
    std::uint64_t waits = 0;           // frames that had to wait for room
    std::uint64_t refused = 0;         // charges refused (requests over the budget)
    std::uint64_t frames_too_big = 0;  // frames larger than the whole budget
  };

  explicit MemoryBudget(std::uint64_t capacity = 256ull << 20, std::uint64_t overdraft = 16u << 20)
      : capacity_(capacity), overdraft_(overdraft) {}
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  std::uint64_t capacity() const { return capacity_; }
  std::uint64_t overdraft() const { return overdraft_; }
  std::uint64_t used() const { return used_; }
  const Stats& stats() const { return stats_; }
  void set_capacity(std::uint64_t c, std::uint64_t overdraft) {
    capacity_ = c;
    overdraft_ = overdraft;
    wake();
  }

  // A frame of n bytes for `who`: fits only within the capacity, and only when no other waiter
  // is ahead of it. A waiter that gets its frame leaves the queue (and the next one hears).
  bool try_reserve_frame(std::uint64_t n, Waiter* who) {
    if (head_ && head_ != who) return false;
    if (used_ + n > capacity_) return false;
    take(n);
    if (who && who->budget_queued) {
      head_ = who->budget_next;
      if (!head_) tail_ = nullptr;
      who->budget_queued = false;
      who->budget_next = nullptr;
      if (head_) head_->on_budget_available();
    }
    return true;
  }
  // Decoding and handling memory: may use the overdraft.
  bool try_charge(std::uint64_t n) {
    if (used_ + n > capacity_ + overdraft_) {
      ++stats_.refused;
      return false;
    }
    take(n);
    return true;
  }
  // What a charge may still take right now.
  std::uint64_t chargeable() const {
    return used_ >= capacity_ + overdraft_ ? 0 : capacity_ + overdraft_ - used_;
  }
  void release(std::uint64_t n) {
    used_ = n > used_ ? 0 : used_ - n;
    if (head_) wake();
  }

  // Queues w (once) to hear when room appears; FIFO, so large frames are not starved.
  void wait(Waiter* w) {
    if (w->budget_queued) return;
    ++stats_.waits;
    w->budget_queued = true;
    w->budget_next = nullptr;
    if (tail_) {
      tail_->budget_next = w;
    } else {
      head_ = w;
    }
    tail_ = w;
  }
  void cancel(Waiter* w) {
    if (!w->budget_queued) return;
    Waiter** link = &head_;
    Waiter* prev = nullptr;
    while (*link && *link != w) {
      prev = *link;
      link = &(*link)->budget_next;
    }
    if (*link) *link = w->budget_next;
    if (tail_ == w) tail_ = prev;
    w->budget_queued = false;
    w->budget_next = nullptr;
  }
  void note_frame_too_big() { ++stats_.frames_too_big; }

 private:
  void take(std::uint64_t n) {
    used_ += n;
    if (used_ > stats_.peak) stats_.peak = used_;
  }
  // The front waiter retries (it stays at the front until its frame fits). Waiters only
  // schedule their retry, so this never re-enters the caller.
  void wake() {
    if (head_) head_->on_budget_available();
  }

  std::uint64_t capacity_;
  std::uint64_t overdraft_;
  std::uint64_t used_ = 0;
  Waiter* head_ = nullptr;
  Waiter* tail_ = nullptr;
  Stats stats_;
};

}  // namespace samsa::net
