// Intrusive multi-producer single-consumer queue (Vyukov's design): push is one atomic
// exchange, pop is wait-free for the single consumer. Used to hand work to a reactor thread
// without a lock.
#pragma once

#include <atomic>

namespace samsa {

struct MpscNode {
  std::atomic<MpscNode*> next{nullptr};
};

class MpscQueue {
 public:
  MpscQueue() : head_(&stub_), tail_(&stub_) {}
  MpscQueue(const MpscQueue&) = delete;
  MpscQueue& operator=(const MpscQueue&) = delete;

  // Any thread.
  void push(MpscNode* n) {
    n->next.store(nullptr, std::memory_order_relaxed);
    MpscNode* prev = head_.exchange(n, std::memory_order_acq_rel);
    prev->next.store(n, std::memory_order_release);
  }

  // Consumer thread only. Returns nullptr if empty or if a producer is mid-push (the item
  // becomes visible momentarily; callers retry on the next turn).
  MpscNode* pop() {
    MpscNode* tail = tail_;
    MpscNode* next = tail->next.load(std::memory_order_acquire);
    if (tail == &stub_) {
      if (!next) return nullptr;
      tail_ = next;
      tail = next;
      next = next->next.load(std::memory_order_acquire);
    }
    if (next) {
      tail_ = next;
      return tail;
    }
    if (tail != head_.load(std::memory_order_acquire)) return nullptr;
    push(&stub_);
    next = tail->next.load(std::memory_order_acquire);
    if (next) {
      tail_ = next;
      return tail;
    }
    return nullptr;
  }

 private:
  alignas(64) std::atomic<MpscNode*> head_;
  alignas(64) MpscNode* tail_;
  MpscNode stub_;
};

}  // namespace samsa
