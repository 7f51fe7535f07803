// The DPDK port's zero-copy transmit (net/dpdk/port.h: tx_copy, tx_attach, ExtRef) on a real
// af_packet device: the test process takes a network namespace with a veth pair, drives one
// end with DPDK and reads the frames on the other end with a packet socket. The case that
// matters is the one TCP produces under loss: a frame that points into an answer is still
// queued in the port when the answer's owner lets go of it (the ACK of the first
// transmission arrived); the memory must live until the device has read it, and be released
// exactly once after. The release callback frees the memory, so a count that let go too early
// is a heap-use-after-free under ASan (build-asan) and a wrong frame or early callback here.
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "net/dpdk/port.h"

namespace samsa::net::dpdk {
namespace {

constexpr std::uint16_t kEtherType = 0x88b5;  // IEEE local experimental

struct Answer {
  std::byte* bytes = nullptr;
  ExtRef ref{};
  int freed = 0;
};

void on_freed(void*, void* opaque) {
  auto* a = static_cast<Answer*>(opaque);
  ++a->freed;
  delete[] a->bytes;
  a->bytes = nullptr;
}

class Env {
 public:
  static Env& get() {
    static Env env;
    return env;
  }
  std::string error;
  std::unique_ptr<Port> port;
  int sock = -1;

 private:
  Env() {
    if (::unshare(CLONE_NEWNET) != 0) {
      error = std::string("unshare(CLONE_NEWNET): ") + std::strerror(errno) + " (needs root)";
      return;
    }
    for (const char* c : {"ip link set lo up", "ip link add sk0 type veth peer name sd0",
                          "sysctl -qw net.ipv6.conf.sd0.disable_ipv6=1",
                          "sysctl -qw net.ipv6.conf.sk0.disable_ipv6=1", "ip link set sd0 up",
                          "ip link set sk0 up"}) {
      if (std::system((std::string(c) + " >/dev/null 2>&1").c_str()) != 0) {
        error = std::string("setting up the namespace failed: ") + c;
        return;
      }
    }
    sock = ::socket(AF_PACKET, SOCK_RAW, htons(kEtherType));
    if (sock < 0) {
      error = std::string("packet socket: ") + std::strerror(errno);
      return;
    }
    sockaddr_ll a{};
    a.sll_family = AF_PACKET;
    a.sll_protocol = htons(kEtherType);
    a.sll_ifindex = static_cast<int>(if_nametoindex("sk0"));
    if (::bind(sock, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      error = std::string("bind sk0: ") + std::strerror(errno);
      return;
    }
    timeval tv{2, 0};
    ::setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    PortOptions o;
    o.eal_args = "--no-huge -m 256 --no-pci --vdev=net_af_packet0,iface=sd0";
    o.mbufs = 2047;
    auto p = Port::open(o);  // ip 0: no ARP probe
    if (!p) {
      error = "Port::open: " + p.error();
      return;
    }
    port = std::move(*p);
  }
};

class ZeroCopyTx : public ::testing::Test {
 protected:
  void SetUp() override {
    Env& e = Env::get();
    if (!e.error.empty()) {
      if (std::getenv("CI")) FAIL() << e.error;
      GTEST_SKIP() << e.error;
    }
    port = e.port.get();
    sock = e.sock;
  }

  // The Ethernet header of a test frame: broadcast, from the port, our EtherType.
  std::vector<std::byte> header() const {
    std::vector<std::byte> h(14);
    std::memset(h.data(), 0xff, 6);
    std::memcpy(h.data() + 6, port->mac(), 6);
    h[12] = std::byte(kEtherType >> 8);
    h[13] = std::byte(kEtherType & 0xff);
    return h;
  }

  std::vector<std::byte> receive() {
    std::vector<std::byte> buf(4096);
    const ssize_t n = ::recv(sock, buf.data(), buf.size(), 0);
    if (n <= 0) return {};
    buf.resize(static_cast<std::size_t>(n));
    return buf;
  }

  Port* port = nullptr;
  int sock = -1;
};

TEST_F(ZeroCopyTx, DeviceTakesFramesInPieces) {
  // af_packet walks segment chains with the CPU (DPDK 22.11's eth_af_packet_tx).
  EXPECT_TRUE(port->zero_copy_tx());
}

TEST_F(ZeroCopyTx, QueuedFramesKeepReleasedMemoryUntilSent) {
  ASSERT_TRUE(port->zero_copy_tx());
  Answer ans;
  constexpr std::size_t kSize = 3000;
  ans.bytes = new std::byte[kSize];
  for (std::size_t i = 0; i < kSize; ++i)
    ans.bytes[i] = std::byte(i * 7 + 3);
  Port::ext_init(&ans.ref, &on_freed, &ans);
  ASSERT_EQ(Port::ext_count(&ans.ref), 1);

  // Two frames point into the answer, like a segment and its retransmission: copied header,
  // attached payload, a copied piece between two attached ones.
  const std::vector<std::byte> hdr = header();
  std::vector<std::vector<std::byte>> want;
  for (int f = 0; f < 2; ++f) {
    void* frame = nullptr;
    std::vector<std::byte> w = hdr;
    ASSERT_TRUE(port->tx_copy(&frame, hdr.data(), static_cast<std::uint16_t>(hdr.size())));
    const std::size_t off = 100 + 200 * static_cast<std::size_t>(f);
    ASSERT_TRUE(port->tx_attach(&frame, ans.bytes + off, 1000, &ans.ref));
    w.insert(w.end(), ans.bytes + off, ans.bytes + off + 1000);
    const std::byte mid[3] = {std::byte(0xab), std::byte(0xcd), std::byte(f)};
    ASSERT_TRUE(port->tx_copy(&frame, mid, 3));
    w.insert(w.end(), mid, mid + 3);
    ASSERT_TRUE(port->tx_attach(&frame, ans.bytes + 2000, 400, &ans.ref));
    w.insert(w.end(), ans.bytes + 2000, ans.bytes + 2400);
    port->tx(frame);  // queued: the port sends at 64 frames or on tx_flush
    want.push_back(std::move(w));
  }
  EXPECT_EQ(Port::ext_count(&ans.ref), 5);

  // The owner lets go (the first transmission was acknowledged) while both wait in the port.
  Port::ext_put(&ans.ref);
  EXPECT_EQ(ans.freed, 0) << "released while frames still point into it";
  ASSERT_NE(ans.bytes, nullptr);
  EXPECT_EQ(Port::ext_count(&ans.ref), 4);

  EXPECT_FALSE(port->tx_flush());
  EXPECT_EQ(ans.freed, 1) << "not released exactly once after the device read it";
  for (const auto& w : want) {
    std::vector<std::byte> got = receive();
    ASSERT_EQ(got.size(), w.size());
    EXPECT_TRUE(std::memcmp(got.data(), w.data(), w.size()) == 0);
  }
}

TEST_F(ZeroCopyTx, DiscardedFrameDropsItsReferences) {
  Answer ans;
  ans.bytes = new std::byte[512];
  std::memset(ans.bytes, 0x5a, 512);
  Port::ext_init(&ans.ref, &on_freed, &ans);
  void* frame = nullptr;
  const std::vector<std::byte> hdr = header();
  ASSERT_TRUE(port->tx_copy(&frame, hdr.data(), static_cast<std::uint16_t>(hdr.size())));
  ASSERT_TRUE(port->tx_attach(&frame, ans.bytes, 512, &ans.ref));
  EXPECT_EQ(Port::ext_count(&ans.ref), 2);
  Port::tx_discard(frame);  // link_output's error path: pool empty half-way through a frame
  EXPECT_EQ(ans.freed, 0);
  EXPECT_EQ(Port::ext_count(&ans.ref), 1);
  Port::ext_put(&ans.ref);
  EXPECT_EQ(ans.freed, 1);
}

}  // namespace
}  // namespace samsa::net::dpdk
