// A growable circular FIFO with random access from the front. A connection's reorder window
// and its queue of undelivered frames live in these: steady state allocates nothing (the
// storage only grows, to a power of two), unlike std::deque, which allocates and frees blocks
// as the window slides.
#pragma once

#include "base/assert.h"

#include <cstddef>
#include <utility>
#include <vector>

namespace samsa::net {

template <class T>
class RingQueue {
 public:
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  T& operator[](std::size_t i) { return slots_[(head_ + i) & (slots_.size() - 1)]; }
  const T& operator[](std::size_t i) const { return slots_[(head_ + i) & (slots_.size() - 1)]; }
  T& front() { return (*this)[0]; }
  T& back() { return (*this)[size_ - 1]; }

  T& push_back(T&& v) {
    if (size_ == slots_.size()) grow();
    T& slot = slots_[(head_ + size_) & (slots_.size() - 1)];
    slot = std::move(v);
    ++size_;
    return slot;
  }

  // Resets the slot so whatever it owns (buffers, file references) is released now.
  void pop_front() {
    SAMSA_ASSERT(size_ > 0);  // cheap, and a wrapped size_ would corrupt every later index
    slots_[head_] = T{};
    head_ = (head_ + 1) & (slots_.size() - 1);
    --size_;
  }

  T take_front() {
    T v = std::move(slots_[head_]);
    pop_front();
    return v;
  }

  void clear() {
    while (size_)
      pop_front();
    head_ = 0;
  }

 private:
  void grow() {
    std::vector<T> next(slots_.empty() ? 8 : slots_.size() * 2);
    for (std::size_t i = 0; i < size_; ++i)
      next[i] = std::move((*this)[i]);
    slots_ = std::move(next);
    head_ = 0;
  }

  std::vector<T> slots_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

}  // namespace samsa::net
