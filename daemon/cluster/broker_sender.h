// cluster::BrokerSender — a reactor's requests to other brokers (the transaction coordinator's
// WriteTxnMarkers to partition leaders): one outbound connection (the network backend's
// net::ClientConnection) per destination broker, requests sent in order and answered in order
// (Kafka answers a connection's requests in order). A request is answered with its response
// frame, or with nullopt when the connection failed before the answer came (the caller retries:
// markers are idempotent). Connections idle for a minute are closed.
//
// Thread: the reactor's; every call and callback on it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "io/reactor.h"
#include "net/buffer.h"
#include "net/client_connection.h"

namespace samsa::cluster {

class BrokerSender {
 public:
  using Done = std::move_only_function<void(std::optional<net::Buffer>)>;

  BrokerSender(io::Reactor& r, net::ClientFactory factory);
  ~BrokerSender();
  BrokerSender(const BrokerSender&) = delete;
  BrokerSender& operator=(const BrokerSender&) = delete;

  // frame: a whole request (size prefix included) whose correlation id is the caller's.
  void send(std::int32_t broker, const std::string& host, std::uint16_t port, net::Buffer frame,
            Done done);
  // Fails everything in flight and closes the connections (shutdown).
  void stop();
  std::size_t connections() const { return peers_.size(); }

 private:
  struct Peer;
  void fail_all(Peer& p);

  io::Reactor& r_;
  net::ClientFactory factory_;
  std::map<std::int32_t, std::unique_ptr<Peer>> peers_;
  bool stopped_ = false;
};

}  // namespace samsa::cluster
