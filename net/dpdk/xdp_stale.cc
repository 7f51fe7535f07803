// A killed af_xdp broker's XDP program, left on its interface. Where no BPF filesystem is
// mounted (containers, nspawn: "libxdp: No bpffs found"), libxdp attaches its default program
// (xsk_def_prog) without the pinned state that would let the next process find and reuse it;
// after a kill -9 the program stays attached and every restart's AF_XDP bind is refused
// (EINVAL), so systemd's Restart=on-failure gave up after a few attempts. The interface is
// ours (eal.cc claims it for this process before the EAL starts), so a default XSK program on
// it can only be a dead broker's: it is detached, that exact program only (XDP_FLAGS_REPLACE).
#include <linux/bpf.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "net/dpdk/eal.h"

namespace samsa::net::dpdk {
namespace {

// libbpf's and libxdp's default AF_XDP program (bpf_prog_info names hold 15 characters).
constexpr const char* kDefaultXskProgram = "xsk_def_prog";

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

struct XdpState {
  std::uint32_t prog_id = 0;
  std::uint8_t attached = XDP_ATTACHED_NONE;
};

bool netlink_request(const void* req, std::size_t len, char* buf, std::size_t cap, ssize_t* got) {
  Fd s{::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE)};
  if (s.fd < 0 || ::send(s.fd, req, len, 0) != static_cast<ssize_t>(len)) return false;
  *got = ::recv(s.fd, buf, cap, 0);
  return *got >= static_cast<ssize_t>(sizeof(nlmsghdr));
}

// The XDP program attached to the interface (RTM_GETLINK's IFLA_XDP), if any.
XdpState xdp_state(int ifindex) {
  XdpState st;
  struct {
    nlmsghdr nh;
    ifinfomsg ifi;
  } req{};
  req.nh.nlmsg_len = sizeof req;
  req.nh.nlmsg_type = RTM_GETLINK;
  req.nh.nlmsg_flags = NLM_F_REQUEST;
  req.nh.nlmsg_seq = 1;
  req.ifi.ifi_family = AF_UNSPEC;
  req.ifi.ifi_index = ifindex;
  std::vector<char> buf(65536);  // a link's whole description; once, at start-up
  ssize_t n = 0;
  if (!netlink_request(&req, sizeof req, buf.data(), buf.size(), &n)) return st;
  auto* nh = reinterpret_cast<nlmsghdr*>(buf.data());
  if (!NLMSG_OK(nh, static_cast<unsigned>(n)) || nh->nlmsg_type != RTM_NEWLINK) return st;
  auto* ifi = static_cast<ifinfomsg*>(NLMSG_DATA(nh));
  int len = static_cast<int>(nh->nlmsg_len - NLMSG_LENGTH(sizeof *ifi));
  for (auto* a = IFLA_RTA(ifi); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
    if ((a->rta_type & NLA_TYPE_MASK) != IFLA_XDP) continue;
    int l2 = static_cast<int>(RTA_PAYLOAD(a));
    for (auto* b = static_cast<rtattr*>(RTA_DATA(a)); RTA_OK(b, l2); b = RTA_NEXT(b, l2)) {
      if (b->rta_type == IFLA_XDP_ATTACHED)
        st.attached = *static_cast<std::uint8_t*>(RTA_DATA(b));
      else if (b->rta_type == IFLA_XDP_PROG_ID)
        std::memcpy(&st.prog_id, RTA_DATA(b), sizeof st.prog_id);
    }
  }
  return st;
}

void add_attr(char* base, std::size_t* off, unsigned short type, const void* data,
              std::size_t len) {
  auto* a = reinterpret_cast<rtattr*>(base + *off);
  a->rta_type = type;
  a->rta_len = static_cast<unsigned short>(RTA_LENGTH(len));
  std::memcpy(RTA_DATA(a), data, len);
  *off += RTA_ALIGN(a->rta_len);
}

// Detaches exactly the program behind prog_fd from the interface; "" or why not.
std::string detach(int ifindex, int prog_fd, std::uint8_t attached) {
  std::uint32_t mode = attached == XDP_ATTACHED_SKB  ? XDP_FLAGS_SKB_MODE
                       : attached == XDP_ATTACHED_HW ? XDP_FLAGS_HW_MODE
                                                     : XDP_FLAGS_DRV_MODE;
  struct {
    nlmsghdr nh;
    ifinfomsg ifi;
    char attrs[64];
  } req{};
  req.ifi.ifi_family = AF_UNSPEC;
  req.ifi.ifi_index = ifindex;
  std::size_t off = 0;
  auto* xdp = reinterpret_cast<rtattr*>(req.attrs);
  xdp->rta_type = IFLA_XDP | NLA_F_NESTED;
  off = RTA_LENGTH(0);
  const std::int32_t none = -1;
  const std::uint32_t flags = mode | XDP_FLAGS_REPLACE;
  const std::int32_t expected = prog_fd;
  add_attr(req.attrs, &off, IFLA_XDP_FD, &none, sizeof none);
  add_attr(req.attrs, &off, IFLA_XDP_FLAGS, &flags, sizeof flags);
  add_attr(req.attrs, &off, IFLA_XDP_EXPECTED_FD, &expected, sizeof expected);
  xdp->rta_len = static_cast<unsigned short>(off);
  req.nh.nlmsg_len = static_cast<std::uint32_t>(NLMSG_LENGTH(sizeof req.ifi) + off);
  req.nh.nlmsg_type = RTM_SETLINK;
  req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
  req.nh.nlmsg_seq = 2;
  alignas(nlmsghdr) char buf[4096];
  ssize_t n = 0;
  if (!netlink_request(&req, req.nh.nlmsg_len, buf, sizeof buf, &n))
    return std::string("netlink: ") + std::strerror(errno);
  auto* nh = reinterpret_cast<nlmsghdr*>(buf);
  if (nh->nlmsg_type == NLMSG_ERROR) {
    const int e = static_cast<nlmsgerr*>(NLMSG_DATA(nh))->error;
    if (e != 0) return std::string("RTM_SETLINK: ") + std::strerror(-e);
  }
  return "";
}

}  // namespace

std::string detach_stale_xsk_program(const std::string& iface) {
  const int ifindex = static_cast<int>(::if_nametoindex(iface.c_str()));
  if (ifindex <= 0) return "";
  const XdpState st = xdp_state(ifindex);
  if (!st.prog_id) return "";
  bpf_attr attr{};
  attr.prog_id = st.prog_id;
  Fd prog{static_cast<int>(::syscall(__NR_bpf, BPF_PROG_GET_FD_BY_ID, &attr, sizeof attr))};
  if (prog.fd < 0)
    return "an XDP program (id " + std::to_string(st.prog_id) + ") is attached to " + iface +
           " and cannot be looked at: " + std::strerror(errno);
  bpf_prog_info info{};
  bpf_attr q{};
  q.info.bpf_fd = static_cast<std::uint32_t>(prog.fd);
  q.info.info_len = sizeof info;
  q.info.info = reinterpret_cast<std::uint64_t>(&info);
  if (::syscall(__NR_bpf, BPF_OBJ_GET_INFO_BY_FD, &q, sizeof q) != 0) return "";
  if (std::strncmp(info.name, kDefaultXskProgram, sizeof info.name) != 0) return "";  // not ours
  const std::string why = detach(ifindex, prog.fd, st.attached);
  if (!why.empty())
    return "the default AF_XDP program of a previous process is still attached to " + iface +
           " (id " + std::to_string(st.prog_id) + ") and could not be detached: " + why;
  return "detached the default AF_XDP program a previous process (killed?) left on " + iface +
         " (id " + std::to_string(st.prog_id) + ")";
}

}  // namespace samsa::net::dpdk
