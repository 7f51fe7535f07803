// cluster::ControllerChannel — how a broker node's blocking cluster-link thread reaches its
// controller: one connection, one request at a time, each with a deadline. The connection is
// the network backend's outbound one (net::ClientConnection, made by the backend's factory) on
// a reactor, so the link's logic (cluster_link.h) does not know which network carries it, and a
// DPDK broker needs no kernel route to its controller.
//
// Thread: a channel is used by one thread at a time (the link's, or start-up's); the reactor
// one hands each request to its reactor and waits for the answer with a mutex and a condition
// variable (control traffic: a few requests a second, never a data path).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <expected>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "io/reactor.h"
#include "net/client_connection.h"

namespace samsa::net {
class Backend;
}

namespace samsa::cluster {

class ControllerChannel {
 public:
  virtual ~ControllerChannel() = default;
  // Opens the connection (in about a second at most); false when the controller cannot be
  // reached. Any earlier connection is closed first.
  virtual bool connect(const std::string& host, std::uint16_t port) = 0;
  virtual void disconnect() = 0;
  // Between a successful connect() and disconnect() (the connection may have failed since:
  // the next exchange says so).
  virtual bool connected() const = 0;
  // Sends a complete frame (with size prefix) and returns the answer frame (without it);
  // nullopt when the connection failed, timeout_ms passed or stop was set. The caller then
  // disconnects: an answer arriving later must not be taken for the next request's.
  virtual std::optional<std::vector<std::byte>> exchange(std::span<const std::byte> frame,
                                                         std::int64_t timeout_ms,
                                                         const std::atomic<bool>& stop) = 0;
};

// A ClientConnection made by `factory` on reactor r, driven from the calling thread through
// r's task queue. r must keep running until the channel is disconnected (the connection is
// destroyed on r's thread; if r has stopped, it is left to the process's end).
std::unique_ptr<ControllerChannel> reactor_controller_channel(io::Reactor& r,
                                                              net::ClientFactory factory);

// A new broker node's cluster id: the controller's (DescribeCluster), asked until it answers or
// timeout_ms passes (the error names the setting). Runs before the broker's reactors exist: a
// reactor of its own ("cluster-boot") carries the connection (and polls the backend's device
// meanwhile, then gives it back for reactor 0 to take).
std::expected<std::string, std::string> controller_cluster_id(net::Backend& backend,
                                                              const std::string& host,
                                                              std::uint16_t port,
                                                              std::int64_t timeout_ms);

}  // namespace samsa::cluster
