// net::Backend — the network backend samsad runs on (`samsa.net.backend`), made once at start
// from its options: it makes every reactor's transport (listeners and accepted connections) and
// every outbound connection (replica fetchers, the controller channel), says which reactor
// drives its device, and reports its own status and metrics. Above net/ nothing names a
// backend: the daemon holds a Backend and asks it.
//
// Two implementations: `uring` (kernel sockets driven by each reactor's io_uring;
// net/uring_backend.cc) and `dpdk` (DPDK poll-mode drivers and lwIP; net/dpdk/dpdk_backend.cc,
// built only where libdpdk and lwIP's sources were found).
//
// Threads: create() and the status calls on any thread; attach/detach, make_transport and the
// factory's connections on the reactor concerned.
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "io/reactor.h"
#include "net/client_connection.h"
#include "net/transport.h"

namespace samsa::net {

// samsa.dpdk.* (used with samsa.net.backend=dpdk).
struct DpdkOptions {
  std::string eal_args;                   // samsa.dpdk.eal.args
  std::string ip;                         // samsa.dpdk.ip (dotted quad)
  std::string netmask = "255.255.255.0";  // samsa.dpdk.netmask
  std::string gateway;                    // samsa.dpdk.gateway ("" none)
  std::uint32_t mtu = 1500;               // samsa.dpdk.mtu
  // samsa.dpdk.idle.poll.us: after the last packet the loop keeps polling this long without
  // sleeping; then it sleeps until the device's descriptor is readable (af_packet, af_xdp,
  // tap) or, for drivers without one, in naps that grow up to this long.
  std::uint32_t idle_poll_us = 50;
  std::uint32_t mbufs = 32767;  // packet buffers in the pool
  // samsa.dpdk.tx.zero.copy: attach answer memory to outgoing frames instead of copying it,
  // where the device allows (net/dpdk/README.md, Zero copy).
  bool tx_zero_copy = true;
  // Where the stack keeps the 4-tuples of its open connections, so that after a kill -9 the
  // next start can reset them and their clients reconnect at once (net/dpdk/conn_journal.h);
  // the daemon puts it in the first log dir. Empty: not kept.
  std::string connection_journal;
};

struct BackendOptions {
  std::string name = "uring";  // samsa.net.backend: uring | dpdk
  DpdkOptions dpdk;
};

// Where a backend writes its metric families (the daemon's Prometheus writer).
class MetricSink {
 public:
  // Declares a family once; then its samples, with at most one label (label empty: none).
  virtual void family(const char* name, const char* type, const char* help) = 0;
  virtual void sample(const char* name, double value, const char* label = nullptr,
                      std::string_view label_value = {}) = 0;

 protected:
  ~MetricSink() = default;
};

// `samsactl status`' part for the backend: the machine fields and the lines a person reads.
struct BackendStatus {
  using Field = std::variant<std::string, std::int64_t, double>;
  std::vector<std::pair<std::string, Field>> fields;
  std::vector<std::pair<std::string, std::string>> rows;  // label, line
};

class Backend {
 public:
  // The error names the problem (an unknown name, a backend this build lacks, no device, no
  // memory, the device or the address in use).
  static std::expected<std::unique_ptr<Backend>, std::string> create(const BackendOptions& o);
  virtual ~Backend() = default;

  virtual const char* name() const = 0;
  // Whether nothing else listens at host:port (checked before any data is touched: another
  // broker may hold the port). A backend with an address of its own has no one to share with.
  virtual bool address_free(const std::string& host, std::uint16_t port,
                            std::string* why) const = 0;

  // On reactor index's thread, before it makes a transport or a connection: the reactor that
  // drives the device (dpdk: index 0, or the short-lived reactor used before the broker's exist)
  // starts polling it. detach() on the same thread before the reactor goes away.
  static constexpr std::size_t kBootReactor = SIZE_MAX;  // the reactor used before the broker's
  virtual void attach(std::size_t index, io::Reactor& r) = 0;
  virtual void detach(std::size_t index) = 0;
  virtual std::unique_ptr<Transport> make_transport(io::Reactor& r, FrameHandler& h) = 0;
  virtual ClientFactory client_factory() = 0;

  // One line for the log (every minute from reactor 0 while traffic() moves, and at shutdown);
  // empty when there is nothing to say.
  virtual std::string stats_line() const = 0;
  // Packets moved so far (0 for a backend the kernel does this for).
  virtual std::uint64_t traffic() const = 0;
  // "; <what the backend runs on>" for systemd's STATUS, or empty.
  virtual std::string summary() const = 0;
  virtual BackendStatus status() const = 0;
  virtual void write_metrics(MetricSink& sink) const = 0;
};

}  // namespace samsa::net
