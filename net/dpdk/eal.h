// DPDK's EAL for the port (eal.cc): started once per process, and the helpers port.cc shares
// with it. Internal to net/dpdk; includes no DPDK header itself.
#pragma once

#include <cstdint>
#include <expected>
#include <set>
#include <string>
#include <vector>

#include "net/dpdk/port.h"

namespace samsa::net::dpdk {

// Starts the EAL once per process with argv (checked first: hugepages, socket permissions,
// interfaces nobody else uses); a later call with other arguments is refused.
std::expected<void, std::string> start_eal(const PortOptions& opts,
                                           const std::vector<std::string>& argv);
// The descriptors the EAL opened while it started (the PMDs' sockets among them).
extern std::vector<int> g_eal_new_fds;

// The last lines DPDK logged (its own reason for a failure is usually there), or "".
std::string log_tail();
// The CPUs this process may run on, as a list for --lcores.
std::string allowed_cpus();
std::set<int> open_fds();
// A PMD's receive socket or tap device: poll() reports POLLIN on it once a frame waits.
bool is_wait_fd(int fd);
// The value of `key` in the vdev named `device` (e.g. start_queue), or "".
std::string device_arg(const std::vector<std::string>& argv, const std::string& device,
                       const std::string& key);
// The kernel interface the vdev named `device` drives (its iface=), or "".
std::string device_iface(const std::vector<std::string>& argv, const std::string& device);
// The receive queues a kernel interface has (its /sys/class/net/IF/queues/rx-*), or -1.
int rx_queue_count(const std::string& iface);
std::string ip_text(std::uint32_t ip_be);
std::string mac_text(const std::uint8_t* m);
// xdp_stale.cc: detaches libxdp's default AF_XDP program when a previous process left it on
// the interface (a kill -9 where no bpffs is mounted); what was done or found, or "".
std::string detach_stale_xsk_program(const std::string& iface);
// Whether this thread's effective set holds capability `cap`.
bool has_capability(int cap);

}  // namespace samsa::net::dpdk
