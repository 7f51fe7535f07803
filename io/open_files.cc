#include "io/open_files.h"

#include <algorithm>

#include "io/log.h"

namespace samsa::io {

OpenFiles::Handle::~Handle() {
  if (owner_) owner_->drop(*this);
}

OpenFiles::~OpenFiles() {
  // Handles outliving their reactor's list (tests tearing down in any order) just forget it.
  for (Handle* h = head_; h;) {
    Handle* next = h->next_;
    h->owner_ = nullptr;
    h->prev_ = h->next_ = nullptr;
    h = next;
  }
}

void OpenFiles::set_budget(std::size_t n) {
  budget_ = n == 0 ? 0 : std::max(n, kMinBudget);
  shrink();
}

void OpenFiles::unlink(Handle& h) {
  (h.prev_ ? h.prev_->next_ : head_) = h.next_;
  (h.next_ ? h.next_->prev_ : tail_) = h.prev_;
  h.prev_ = h.next_ = nullptr;
}

void OpenFiles::push_front(Handle& h) {
  h.prev_ = nullptr;
  h.next_ = head_;
  (head_ ? head_->prev_ : tail_) = &h;
  head_ = &h;
}

void OpenFiles::adopt(Handle& h, std::shared_ptr<SegmentFile> f) {
  if (h.owner_ == this) {
    unlink(h);
  } else {
    if (h.owner_) h.owner_->drop(h);
    h.owner_ = this;
    ++open_;
  }
  h.file_ = std::move(f);
  push_front(h);
  ++stats_.opened;
  shrink();
}

void OpenFiles::touch(Handle& h) {
  if (h.owner_ != this || head_ == &h) return;
  unlink(h);
  push_front(h);
}

void OpenFiles::drop(Handle& h) {
  if (h.owner_ != this) return;
  unlink(h);
  h.owner_ = nullptr;
  h.file_.reset();
  --open_;
}

void OpenFiles::shrink() {
  if (budget_ == 0) return;
  // From the least recently used end; a file someone holds stays (closing it is up to them:
  // the descriptor goes with the last reference). The walk is bounded so that a budget full
  // of busy files costs each open a little, not a scan of every file.
  // The most recently used (the file just opened) always stays.
  std::size_t looked = 0;
  for (Handle* h = tail_; h && h != head_ && open_ > budget_ && looked < 64; ++looked) {
    Handle* prev = h->prev_;
    if (h->file_.use_count() == 1) {
      unlink(*h);
      h->owner_ = nullptr;
      h->file_.reset();
      --open_;
      ++stats_.evicted;
    }
    h = prev;
  }
  if (open_ > budget_) ++stats_.busy;
}

}  // namespace samsa::io
