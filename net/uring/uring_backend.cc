// The `uring` network backend: kernel sockets, each reactor's own io_uring drives its
// listeners, connections and outbound clients. Nothing to attach, no device to report.
#include "net/backend.h"
#include "net/uring/uring_transport.h"

namespace samsa::net {
namespace {

class UringBackend final : public Backend {
 public:
  const char* name() const override { return "uring"; }
  bool address_free(const std::string& host, std::uint16_t port, std::string* why) const override {
    return check_address_free(host, port, why);
  }
  void attach(std::size_t, io::Reactor&) override {}
  void detach(std::size_t) override {}
  std::unique_ptr<Transport> make_transport(io::Reactor& r, FrameHandler& h) override {
    return make_uring_transport(r, h);
  }
  ClientFactory client_factory() override {
    return [](io::Reactor& r, ClientHandler& h, ClientOptions o) {
      return ClientConnection::create(r, h, std::move(o));
    };
  }
  std::string stats_line() const override { return {}; }
  std::uint64_t traffic() const override { return 0; }
  std::string summary() const override { return {}; }
  BackendStatus status() const override { return {}; }
  void write_metrics(MetricSink&) const override {}
};

}  // namespace

std::unique_ptr<Backend> make_uring_backend() {
  return std::make_unique<UringBackend>();
}

}  // namespace samsa::net
