#include "base/log.h"
#include "net/dpdk/connection.h"

namespace samsa::net::dpdk {

TransportImpl::TransportImpl(io::Reactor& r, FrameHandler& h, StackPort& s)
    : TransportBase(r, h), stack_(s) {
  conn_stats_ = &stats_;
}

bool TransportImpl::listen(const ListenerConfig& cfg, std::string* error) {
  if (link_) {
    if (error) *error = "already listening";
    return false;
  }
  if (cfg.tls) {
    if (error) *error = "TLS is not served by the DPDK backend (its userspace stack has no TLS)";
    return false;
  }
  cfg_ = cfg;
  auto link = std::make_shared<Link>();
  link->reactor = &r_;
  link->transport = this;
  if (!stack_.listen(link, cfg, &port_, error)) {
    link->transport = nullptr;
    return false;
  }
  link_ = std::move(link);
  accepting_ = true;
  LOG_INFO("%s: listening on port %u (dpdk)", r_.name().c_str(), unsigned(port_));
  return true;
}

void TransportImpl::stop_accepting() {
  if (!accepting_) return;
  accepting_ = false;
  stack_.stop_accepting(link_);
}

void TransportImpl::adopt(Conn* c) {
  add(c);
  c->adopt(this);
  // Accepted by the stack before it heard that we stopped (as a kernel's accept queue).
  if (!accepting_ || dying_) c->close(false);
}

TransportImpl::~TransportImpl() {
  dying_ = true;
  if (link_) {
    accepting_ = false;
    // The stack resets our connections' halves and posts nothing more here; what it posted
    // already is dropped once the link no longer names us.
    stack_.detach(link_);
    link_->transport = nullptr;
  }
  close_all();
  wake_each();
  // File reads still in the kernel write into connection buffers: run until they are back.
  if (!r_.run_until([&] { return no_connections(); }))
    LOG_ERROR("%s: dpdk transport destroyed with reads still in the kernel; leaking them",
              r_.name().c_str());
}

}  // namespace samsa::net::dpdk

namespace samsa::net {

std::unique_ptr<DpdkTransport> DpdkTransport::create(io::Reactor& r, FrameHandler& h,
                                                     DpdkStack& s) {
  auto* port = dynamic_cast<dpdk::StackPort*>(&s);
  return std::make_unique<dpdk::TransportImpl>(r, h, *port);
}

}  // namespace samsa::net
