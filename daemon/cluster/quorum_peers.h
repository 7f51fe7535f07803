// cluster::QuorumPeers — how this node's part of the controller quorum (replication::Controller,
// a voter or an observer) reaches the other nodes: each quorum::Outgoing becomes its KRaft
// request (replication/quorum/quorum_wire.h) on a connection to the peer, and the answer goes
// back to the controller thread (Controller::on_*_response), or on_request_failed when the
// connection fails under it (unreachable when the peer refused or reset it: the node is gone,
// not slow, and a follower stands at once instead of after the fetch timeout).
//
// Two connections per peer: one for Fetch and FetchSnapshot (a leader holds a fetch up to its
// long poll, and Kafka answers a connection's requests in order), one for Vote and the epoch
// messages, so an election is never queued behind a held fetch.
//
// Peers are the voters (controller.quorum.voters) and the bootstrap servers (negative ids:
// controller.quorum.bootstrap.servers, which an observer asks until it knows the leader). A
// leader the node learns of without an address is reached through the node that named it
// (learn()).
//
// Thread: send() and learn() from any thread (the controller's); the connections live on the
// network reactor given (reactor 0, which drives the backend's device) and are closed by
// stop(), which must run before that reactor stops.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "io/reactor.h"
#include "net/client_connection.h"
#include "replication/quorum/raft.h"

namespace samsa::replication {
class Controller;
}

namespace samsa::cluster {

class QuorumPeers {
 public:
  struct Endpoint {
    std::string host;
    std::uint16_t port = 0;
  };
  struct Options {
    std::int32_t node_id = -1;
    std::string cluster_id;
    std::map<replication::quorum::NodeId, Endpoint> peers;
    io::Reactor* reactor = nullptr;  // where the connections live
    net::ClientFactory factory;      // the network backend's outbound connections
    // Runs fn on the controller's thread, with the controller.
    std::function<void(std::function<void(replication::Controller&)>)> on_controller;
    std::int32_t fetch_max_bytes = 8 << 20;
    std::int64_t request_timeout_ms = 5000;
  };

  explicit QuorumPeers(Options o);
  ~QuorumPeers();
  QuorumPeers(const QuorumPeers&) = delete;
  QuorumPeers& operator=(const QuorumPeers&) = delete;

  void send(const replication::quorum::Outgoing& o);
  // A node's address learnt from an answer (the node that named a leader we have none for).
  void learn(replication::quorum::NodeId id, Endpoint e);
  // A node's address, if known (any thread).
  std::optional<Endpoint> endpoint(replication::quorum::NodeId id) const;
  // Closes every connection (on the reactor; returns once done). Later sends fail at once.
  void stop();

  struct Lane;  // one connection (quorum_peers.cc)

 private:
  void send_on_reactor(const replication::quorum::Outgoing& o);
  Lane* lane_for(replication::quorum::NodeId id, bool fetch);
  void add_peer(replication::quorum::NodeId id, Endpoint e);
  void fail(const replication::quorum::Outgoing& o, bool unreachable);

  Options opts_;
  // opts_.peers is written on the reactor under this lock; endpoint() reads it from others.
  mutable std::mutex peers_mu_;
  // Used on the reactor only.
  std::map<replication::quorum::NodeId, std::unique_ptr<Lane>> control_;
  std::map<replication::quorum::NodeId, std::unique_ptr<Lane>> fetch_;
  bool stopped_ = false;
};

}  // namespace samsa::cluster
