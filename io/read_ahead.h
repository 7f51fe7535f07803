// io::ReadAhead — a reader's buffer for the file bytes a cold read needs (batch headers of a
// range the page cache may not hold, whole batches for timestamp lookups). With one, Log::read
// and the timestamp lookups never read a file on the reactor thread: when the bytes they need
// are not in the buffer they answer Errc::would_block, Log::fill reads them with io_uring and
// calls back on the log's reactor, and the caller asks again (usually once: a fill takes the
// whole range the read may cover, up to the buffer's capacity).
//
// io::ReadAheadPool — a reactor's bounded set of them, so that many cold readers at once cost
// a fixed amount of memory: readers wait in FIFO order for a buffer.
//
// Reactor-thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/reactor.h"

namespace samsa::io {

struct SegmentFile;
class Log;

class ReadAhead {
 public:
  explicit ReadAhead(std::size_t capacity) : capacity_(capacity) {}
  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;

  std::size_t capacity() const { return capacity_; }
  bool filling() const { return filling_; }
  // Forgets what it holds and the files it pins. The memory stays for the next reader (a
  // pool's buffers cost at most buffers x capacity per reactor; allocating 1.25 MiB anew for
  // every cold read meant an mmap, page faults and an munmap each time), unless one oversized
  // batch grew it past the capacity.
  void clear() {
    if (size_ > capacity_) {
      buf_.reset();
      size_ = 0;
    }
    len_ = 0;
    file_.reset();
    want_file_.reset();
  }

  // The bytes [pos, pos + n) of file f, if held.
  const std::byte* find(const SegmentFile* f, std::uint64_t pos, std::size_t n) const {
    if (file_.get() != f || pos < pos_ || pos + n > pos_ + len_) return nullptr;
    return buf_.get() + (pos - pos_);
  }
  // Records what the next fill must read: [pos, pos + want) of f, at least `need` bytes of it
  // (a batch larger than the capacity grows the buffer for that one fill).
  void want(std::shared_ptr<SegmentFile> f, std::uint64_t pos, std::size_t need, std::size_t want) {
    want_file_ = std::move(f);
    want_pos_ = pos;
    want_len_ = std::max(need, std::min(want, capacity_));
  }

 private:
  friend class Log;
  struct FillCompletion : Completion {
    ReadAhead* self = nullptr;
  };
  std::size_t capacity_;
  std::unique_ptr<std::byte[]> buf_;
  std::size_t size_ = 0;  // allocated
  std::shared_ptr<SegmentFile> file_;
  std::uint64_t pos_ = 0;
  std::size_t len_ = 0;
  std::shared_ptr<SegmentFile> want_file_;
  std::uint64_t want_pos_ = 0;
  std::size_t want_len_ = 0;
  bool filling_ = false;
  FillCompletion fill_c_;
  std::function<void(std::optional<std::string>)> on_filled_;
};

class ReadAheadPool {
 public:
  // Told (once, on the reactor thread) that it holds a buffer now.
  struct Waiter {
    virtual void on_read_ahead(ReadAhead* ra) = 0;
    Waiter* pool_next = nullptr;
    bool pool_queued = false;

   protected:
    ~Waiter() = default;
  };

  ReadAheadPool(std::size_t buffers, std::size_t bytes_each) {
    for (std::size_t i = 0; i < buffers; ++i)
      free_.push_back(std::make_unique<ReadAhead>(bytes_each));
  }
  // A buffer now, or nullptr and w is called when one comes back.
  ReadAhead* acquire(Waiter* w) {
    if (!free_.empty() && !head_) {
      ReadAhead* ra = free_.back().release();
      free_.pop_back();
      return ra;
    }
    if (!w->pool_queued) {
      w->pool_queued = true;
      w->pool_next = nullptr;
      (tail_ ? tail_->pool_next : head_) = w;
      tail_ = w;
    }
    return nullptr;
  }
  void cancel(Waiter* w) {
    if (!w->pool_queued) return;
    Waiter** link = &head_;
    Waiter* prev = nullptr;
    while (*link && *link != w) {
      prev = *link;
      link = &(*link)->pool_next;
    }
    if (*link) *link = w->pool_next;
    if (tail_ == w) tail_ = prev;
    w->pool_queued = false;
  }
  // Returns a buffer: handed to the first waiter at once, else kept for the next reader.
  void release(ReadAhead* ra) {
    // Never hand over bytes a previous reader read: a truncated and rewritten segment could
    // hold other bytes at the same position by now.
    ra->clear();
    if (Waiter* w = head_) {
      head_ = w->pool_next;
      if (!head_) tail_ = nullptr;
      w->pool_queued = false;
      w->on_read_ahead(ra);
      return;
    }
    free_.emplace_back(ra);
  }

 private:
  std::vector<std::unique_ptr<ReadAhead>> free_;
  Waiter* head_ = nullptr;
  Waiter* tail_ = nullptr;
};

}  // namespace samsa::io
