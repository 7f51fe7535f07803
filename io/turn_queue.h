// Work a reactor may split across loop turns. Jobs run in the order they were pushed, one step
// at a time; once the current turn has run past the reactor's turn budget
// (Reactor::Options::turn_budget_ns) the rest waits for the next turn, and the loop enters the
// kernel in between: completions are reaped and the group commits of the steps already run are
// submitted. Order is the point: a job pushed while others wait runs after them, never inline,
// so requests of one connection (an idempotent producer's sequence) keep their order.
//
// One per reactor, touched only on its thread. Nothing is allocated: jobs are embedded in
// their owners, which keep them alive until their last step.
#pragma once

#include "io/reactor.h"

namespace samsa::io {

class TurnQueue {
 public:
  struct Job {
    // Runs one step; returns true when the job has no step left.
    using Step = bool (*)(Job* self);
    // Called once after the last step, with the job out of the queue: may free it.
    using Finished = void (*)(Job* self);
    Step step = nullptr;
    Finished finished = nullptr;
    Job* next = nullptr;
  };

  explicit TurnQueue(Reactor& r);
  TurnQueue(const TurnQueue&) = delete;
  TurnQueue& operator=(const TurnQueue&) = delete;

  // Runs j's steps now while the turn has budget and nothing waits before it; the rest in
  // later turns, after the jobs queued before it.
  void push(Job* j);
  bool empty() const { return head_ == nullptr; }
  // Turns that ended with steps left over (a split: counted for the metrics).
  std::uint64_t yields() const { return yields_; }

 private:
  // Steps the queue's jobs in order until it is empty or the budget is spent; at least one
  // step when called from its task, so the queue always advances.
  void drain(bool at_least_one);
  void schedule();

  Reactor& reactor_;
  Job* head_ = nullptr;
  Job* tail_ = nullptr;
  struct DrainTask : Task {
    TurnQueue* queue = nullptr;
  } task_;
  bool scheduled_ = false;
  std::uint64_t yields_ = 0;
};

}  // namespace samsa::io
