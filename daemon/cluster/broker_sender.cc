#include "daemon/cluster/broker_sender.h"

#include "base/log.h"

namespace samsa::cluster {

struct BrokerSender::Peer final : net::ClientHandler {
  struct Pending {
    net::Buffer frame;
    Done done;
    bool sent = false;
  };
  BrokerSender* owner = nullptr;
  std::int32_t broker = -1;
  std::unique_ptr<net::ClientConnection> conn;
  std::deque<Pending> queue;  // sent ones first, in send order

  void flush() {
    for (Pending& p : queue) {
      if (p.sent) continue;
      // send() takes the frame even when it refuses it: ask first.
      if (!conn->connected()) return;
      p.sent = conn->send(std::move(p.frame));
      if (!p.sent) {
        conn->reconnect();  // the frame is gone: on_disconnected fails the queue
        return;
      }
    }
  }
  void on_connected(net::ClientConnection&) override { flush(); }
  void on_response(net::ClientConnection&, net::Buffer frame) override {
    if (queue.empty() || !queue.front().sent) {
      conn->reconnect();  // an answer to nothing: the connection is out of step
      return;
    }
    Done done = std::move(queue.front().done);
    queue.pop_front();
    done(std::move(frame));
  }
  void on_disconnected(net::ClientConnection&, int error) override {
    if (!queue.empty())
      LOG_DEBUG("broker sender: connection to broker %d lost (%d): %zu requests failed", broker,
                error, queue.size());
    owner->fail_all(*this);
  }
};

BrokerSender::BrokerSender(io::Reactor& r, net::ClientFactory factory)
    : r_(r), factory_(std::move(factory)) {}

BrokerSender::~BrokerSender() {
  stop();
}

void BrokerSender::fail_all(Peer& p) {
  // Callbacks may send again: take the queue first.
  std::deque<Peer::Pending> q;
  q.swap(p.queue);
  for (auto& pending : q)
    pending.done(std::nullopt);
}

void BrokerSender::stop() {
  stopped_ = true;
  for (auto& [id, p] : peers_)
    fail_all(*p);
  peers_.clear();
}

void BrokerSender::send(std::int32_t broker, const std::string& host, std::uint16_t port,
                        net::Buffer frame, Done done) {
  if (stopped_) {
    done(std::nullopt);
    return;
  }
  auto& p = peers_[broker];
  if (!p) {
    p = std::make_unique<Peer>();
    p->owner = this;
    p->broker = broker;
    net::ClientOptions o;
    o.host = host;
    o.port = port;
    o.request_timeout_ms = 35000;  // markers wait for the ISR up to 30 s
    p->conn = factory_ ? factory_(r_, *p, o) : net::ClientConnection::create(r_, *p, o);
  } else if (p->conn->host() != host || p->conn->port() != port) {
    p->conn->set_endpoint(host, port);
  }
  p->queue.push_back({std::move(frame), std::move(done), false});
  if (p->conn->connected()) p->flush();
}

}  // namespace samsa::cluster
