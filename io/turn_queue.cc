#include "io/turn_queue.h"

#include "base/assert.h"

namespace samsa::io {

TurnQueue::TurnQueue(Reactor& r) : reactor_(r) {
  task_.queue = this;
  task_.fn = [](Task* t) {
    TurnQueue* q = static_cast<DrainTask*>(t)->queue;
    q->scheduled_ = false;
    q->drain(true);
  };
}

void TurnQueue::push(Job* j) {
  SAMSA_ASSERT(j->step != nullptr && j->finished != nullptr && j->next == nullptr);
  const bool idle = head_ == nullptr;
  if (tail_) {
    tail_->next = j;
  } else {
    head_ = j;
  }
  tail_ = j;
  if (idle) drain(false);
}

void TurnQueue::drain(bool at_least_one) {
  bool stepped = false;
  while (head_) {
    if ((stepped || !at_least_one) && reactor_.turn_budget_spent()) {
      ++yields_;
      schedule();
      return;
    }
    Job* j = head_;
    stepped = true;
    if (!j->step(j)) continue;
    // The step may have pushed jobs (behind this one); unlink this one only now.
    head_ = j->next;
    if (!head_) tail_ = nullptr;
    j->next = nullptr;
    j->finished(j);
  }
}

void TurnQueue::schedule() {
  if (scheduled_) return;
  scheduled_ = true;
  // A task deferred now runs in the next turn (run_tasks takes only the tasks present when it
  // starts), after the kernel has been entered.
  reactor_.defer(&task_);
}

}  // namespace samsa::io
