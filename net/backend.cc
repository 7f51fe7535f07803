// net::Backend::create: the backend samsa.net.backend names, or why it cannot run here.
#include "net/backend.h"

namespace samsa::net {

std::unique_ptr<Backend> make_uring_backend();
#if SAMSA_HAVE_DPDK
std::expected<std::unique_ptr<Backend>, std::string> make_dpdk_backend(const DpdkOptions& o);
#endif

std::expected<std::unique_ptr<Backend>, std::string> Backend::create(const BackendOptions& o) {
  if (o.name == "uring") return make_uring_backend();
  if (o.name == "dpdk") {
#if SAMSA_HAVE_DPDK
    auto b = make_dpdk_backend(o.dpdk);
    if (!b) return std::unexpected("samsa.net.backend=dpdk: " + b.error());
    return std::move(*b);
#else
    return std::unexpected(
        "samsa.net.backend=dpdk: this samsad was built without the DPDK backend (libdpdk-dev "
        "and lwIP's sources were missing at build time; see net/dpdk/README.md)");
#endif
  }
  return std::unexpected("samsa.net.backend: unknown backend \"" + o.name + "\" (uring or dpdk)");
}

}  // namespace samsa::net
