// The CPU a broker cannot avoid per GB moved, measured on this machine: the floor that samsa's
// "CPU seconds per GB" is compared with.
//
//   produce floor: recv from a loopback TCP socket (one socket copy) + CRC32C of the bytes +
//                  write into a new file's page cache (one page-cache copy)
//   consume floor: read from the page cache (one copy) + send to a loopback TCP socket (one
//                  socket copy); a broker does not check CRCs on fetch
//
// Only the CPU time of the thread doing the broker's part is counted
// (CLOCK_THREAD_CPUTIME_ID); the peer thread (the "client") is not. Each piece is also timed
// alone. Prints one JSON object.
//
//   cpu_floor DIR [GB]     DIR: a directory on the brokers' file system (default 1 GB moved)
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/crc32c.h"

namespace {

constexpr std::size_t kChunk = 1 << 20;  // about one produce request / fetch response

double thread_cpu() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

[[noreturn]] void die(const char* what) {
  std::perror(what);
  std::exit(1);
}

// A connected loopback TCP pair: {a, b}.
std::pair<int, int> tcp_pair() {
  const int l = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(l, 1) != 0 ||
      ::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    die("listen");
  const int c = ::socket(AF_INET, SOCK_STREAM, 0);
  if (::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("connect");
  const int s = ::accept(l, nullptr, nullptr);
  if (s < 0) die("accept");
  ::close(l);
  const int one = 1;
  ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return {c, s};
}

void send_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, 0);
    if (w <= 0) die("send");
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

// Receives exactly n bytes into buf (n <= buf size).
void recv_all(int fd, char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r <= 0) die("recv");
    p += r;
    n -= static_cast<std::size_t>(r);
  }
}

void write_all(int fd, const char* p, std::size_t n, off_t off) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, n, off);
    if (w <= 0) die("pwrite");
    p += w;
    n -= static_cast<std::size_t>(w);
    off += w;
  }
}

struct Pieces {
  double recv = 0, crc = 0, write = 0, read = 0, send = 0;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: cpu_floor DIR [GB]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const double gb = argc > 2 ? std::atof(argv[2]) : 1.0;
  const std::size_t chunks = static_cast<std::size_t>(gb * 1e9 / kChunk) + 1;
  const double moved_gb = static_cast<double>(chunks * kChunk) / 1e9;
  const std::string path = dir + "/cpu_floor." + std::to_string(::getpid());

  std::vector<char> src(kChunk), buf(kChunk);
  for (std::size_t i = 0; i < kChunk; ++i)
    src[i] = static_cast<char>(i * 131 + 7);

  Pieces p;
  std::uint32_t crc_sink = 0;

  // Produce: the peer sends, the measured thread receives, checksums and writes.
  int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_RDWR, 0644);
  if (fd < 0) die("open");
  {
    auto [c, s] = tcp_pair();
    std::thread peer([&, c = c] {
      for (std::size_t i = 0; i < chunks; ++i)
        send_all(c, src.data(), kChunk);
    });
    for (std::size_t i = 0; i < chunks; ++i) {
      double t0 = thread_cpu();
      recv_all(s, buf.data(), kChunk);
      double t1 = thread_cpu();
      crc_sink ^= samsa::crc32c(0, buf.data(), kChunk);
      double t2 = thread_cpu();
      write_all(fd, buf.data(), kChunk, static_cast<off_t>(i * kChunk));
      double t3 = thread_cpu();
      p.recv += t1 - t0;
      p.crc += t2 - t1;
      p.write += t3 - t2;
    }
    peer.join();
    ::close(c);
    ::close(s);
  }
  // Consume: the measured thread reads the (cached) file and sends; the peer receives.
  {
    auto [c, s] = tcp_pair();
    std::thread peer([&, c = c] {
      std::vector<char> sink(kChunk);
      for (std::size_t i = 0; i < chunks; ++i)
        recv_all(c, sink.data(), kChunk);
    });
    for (std::size_t i = 0; i < chunks; ++i) {
      double t0 = thread_cpu();
      if (::pread(fd, buf.data(), kChunk, static_cast<off_t>(i * kChunk)) !=
          static_cast<ssize_t>(kChunk))
        die("pread");
      double t1 = thread_cpu();
      send_all(s, buf.data(), kChunk);
      double t2 = thread_cpu();
      p.read += t1 - t0;
      p.send += t2 - t1;
    }
    peer.join();
    ::close(c);
    ::close(s);
  }
  ::close(fd);
  ::unlink(path.c_str());

  auto per_gb = [&](double s) { return s / moved_gb; };
  std::printf(
      "{\"gb\": %.3f, \"crc32c_hardware\": %s, \"produce_floor_s_per_gb\": %.4f, "
      "\"consume_floor_s_per_gb\": %.4f, \"recv_s_per_gb\": %.4f, \"crc_s_per_gb\": %.4f, "
      "\"write_s_per_gb\": %.4f, \"read_s_per_gb\": %.4f, \"send_s_per_gb\": %.4f, "
      "\"crc\": %u}\n",
      moved_gb, samsa::crc32c_hardware() ? "true" : "false", per_gb(p.recv + p.crc + p.write),
      per_gb(p.read + p.send), per_gb(p.recv), per_gb(p.crc), per_gb(p.write), per_gb(p.read),
      per_gb(p.send), crc_sink);
  return 0;
}
