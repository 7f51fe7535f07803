// Hands a request's work to another thread (the controller or the group coordinator) and the
// result back to the request's own reactor, where the answer is encoded and sent. The request
// itself never leaves its reactor's hands: only a pointer travels, and only the answer step
// touches it again.
#pragma once

#include <utility>

#include "daemon/api/dispatch.h"
#include "daemon/broker.h"

namespace samsa::daemon::handlers {

// post(f) runs f(target) on the other thread; start(target, done) begins the work there;
// done(result), called on any thread, brings result back; answer(request, result) replies.
template <class Result, class Post, class Start, class Answer>
void round_trip(RequestPtr r, Post post, Start start, Answer answer) {
  Broker& b = *r->rc.broker;
  const std::size_t origin = r->rc.index;
  Request* raw = r.release();
  post([&b, origin, raw, start = std::move(start),
        answer = std::move(answer)](auto& target) mutable {
    start(target, [&b, origin, raw, answer = std::move(answer)](Result res) mutable {
      b.on_reactor(
          origin, [raw, answer = std::move(answer), res = std::move(res)](ReactorContext&) mutable {
            answer(RequestPtr(raw), std::move(res));
          });
    });
  });
}

template <class Result, class Start, class Answer>
void via_controller(RequestPtr r, Start start, Answer answer) {
  Broker& b = *r->rc.broker;
  round_trip<Result>(
      std::move(r), [&b](auto f) { b.on_controller(std::move(f)); }, std::move(start),
      std::move(answer));
}

template <class Result, class Start, class Answer>
void via_coordinator(RequestPtr r, Start start, Answer answer) {
  Broker& b = *r->rc.broker;
  round_trip<Result>(
      std::move(r), [&b](auto f) { b.on_coordinator(std::move(f)); }, std::move(start),
      std::move(answer));
}

}  // namespace samsa::daemon::handlers
