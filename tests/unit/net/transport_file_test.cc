// FileRange pieces (stored batches in fetch answers) reach the client byte-identical, in order
// with the byte pieces around them, with and without zero-copy sends.
#include <fcntl.h>
#include <stdlib.h>

#include <random>
#include <sstream>

#include "tests/unit/net/transport_harness.h"

namespace samsa::net::test {
namespace {

struct TempFile {
  std::string path;
  int fd = -1;
  std::string content;

  explicit TempFile(std::size_t size) {
    char tmpl[] = "/tmp/samsa-transport-file-XXXXXX";
    fd = ::mkstemp(tmpl);
    path = tmpl;
    std::mt19937 g(1234);
    content.resize(size);
    for (auto& c : content)
      c = static_cast<char>(g());
    std::size_t done = 0;
    while (done < size) {
      ssize_t n = ::write(fd, content.data() + done, size - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
  }
  ~TempFile() {
    ::close(fd);
    ::unlink(path.c_str());
  }
};

struct Range {
  std::uint64_t off;
  std::uint32_t len;
};

std::string request_of(Range a, Range b) {
  return std::to_string(a.off) + " " + std::to_string(a.len) + " " + std::to_string(b.off) + " " +
         std::to_string(b.len);
}

// Answer layout: "H:" file(a) "|" file(b).
struct FileHandler : TestHandler {
  int fd;
  std::atomic<int>* released;

  FileHandler(int f, std::atomic<int>* r) : fd(f), released(r) {
    on_frame_fn = [this](Connection& c, std::uint64_t seq, Buffer& f) {
      if (hold) {
        held.push_back({&c, seq, to_string(f)});
      } else {
        c.respond(seq, build(to_string(f)));
      }
    };
  }

  Response build(const std::string& req) {
    std::istringstream in(req);
    Range a{}, b{};
    in >> a.off >> a.len >> b.off >> b.len;
    auto keep = std::shared_ptr<const void>(new int(0), [r = released](const void* p) {
      delete static_cast<const int*>(p);
      r->fetch_add(1);
    });
    Response r;
    Buffer head(6);
    store_be<std::int32_t>(head.data(), static_cast<std::int32_t>(2 + a.len + 1 + b.len));
    std::memcpy(head.data() + 4, "H:", 2);
    r.append(std::move(head));
    r.append_file(FileRange{keep, fd, a.off, a.len});
    r.append(to_buffer("|"));
    r.append_file(FileRange{keep, fd, b.off, b.len});
    return r;
  }
};

std::string expected(const std::string& content, Range a, Range b) {
  return "H:" + content.substr(a.off, a.len) + "|" + content.substr(b.off, b.len);
}

class TransportFile : public ::testing::TestWithParam<std::uint32_t> {};

TEST_P(TransportFile, RangesAreSentByteIdentical) {
  TempFile file(6 << 20);
  std::atomic<int> released{0};
  FileHandler h(file.fd, &released);
  ListenerConfig cfg = test_config();
  cfg.zerocopy_send_min_bytes = GetParam();
  Server srv(h, cfg);
  ASSERT_EQ(srv.error(), "");
  Client c(srv.port());

  std::vector<std::pair<Range, Range>> reqs = {
      {{0, 0}, {0, 1}},
      {{5, 4096}, {6u << 20, 0}},
      {{1000, 5u << 20}, {17, 100}},  // longer than the read-ahead window
      {{(6u << 20) - 10, 10}, {3, 3}},
      {{123457, 65536}, {999, 70000}},
  };
  std::mt19937 g(9);
  for (int i = 0; i < 100; ++i) {
    Range a{g() % (6u << 20), 0}, b{g() % (6u << 20), 0};
    a.len = static_cast<std::uint32_t>(std::min<std::uint64_t>(g() % 20000, (6u << 20) - a.off));
    b.len = static_cast<std::uint32_t>(std::min<std::uint64_t>(g() % 300, (6u << 20) - b.off));
    reqs.push_back({a, b});
  }
  std::string wire;
  for (auto& [a, b] : reqs)
    wire += frame(request_of(a, b));
  std::thread sender([&] { c.send_all(wire); });
  for (auto& [a, b] : reqs) {
    std::string got = c.read_frame();
    ASSERT_EQ(got.size(), 3u + a.len + b.len);
    ASSERT_TRUE(got == expected(file.content, a, b)) << "range " << a.off << "+" << a.len;
  }
  sender.join();
  // Every file reference is let go once its bytes are out.
  ASSERT_TRUE(srv.wait_for([&] { return released.load() == static_cast<int>(reqs.size()); }));
  auto st = srv.stats();
  EXPECT_GT(st.file_reads, 0u);
#ifndef SAMSA_TRANSPORT_DPDK  // SEND_ZC is the uring transport's
  if (GetParam() > 0) {
    EXPECT_GT(st.zerocopy_sends, 0u);
  }
#endif
}

INSTANTIATE_TEST_SUITE_P(ZeroCopyThreshold, TransportFile, ::testing::Values(0u, 1u, 65536u));

TEST(TransportFileOrder, FileAnswersCompletedOutOfOrder) {
  TempFile file(1 << 20);
  std::atomic<int> released{0};
  FileHandler h(file.fd, &released);
  h.hold = true;
  Server srv(h);
  ASSERT_EQ(srv.error(), "");
  Client c(srv.port());
  std::vector<std::pair<Range, Range>> reqs;
  std::string wire;
  for (std::uint32_t i = 0; i < 20; ++i) {
    reqs.push_back({{i * 1000, 5000 + i}, {i, i}});
    wire += frame(request_of(reqs.back().first, reqs.back().second));
  }
  ASSERT_TRUE(c.send_all(wire));
  ASSERT_TRUE(srv.wait_for([&] { return h.held.size() == 20; }));
  srv.call([&] {
    for (int i = 19; i >= 0; --i)
      h.held[i].conn->respond(h.held[i].seq, h.build(h.held[i].payload));
  });
  for (auto& [a, b] : reqs)
    ASSERT_TRUE(c.read_frame() == expected(file.content, a, b));
}

// A range past the end of the file cannot be sent as announced: the connection is closed.
TEST(TransportFileOrder, RangePastEndOfFileClosesTheConnection) {
  TempFile file(4096);
  std::atomic<int> released{0};
  FileHandler h(file.fd, &released);
  Server srv(h);
  ASSERT_EQ(srv.error(), "");
  Client c(srv.port());
  ASSERT_TRUE(c.send_all(frame(request_of({0, 10}, {0, 10}))));
  EXPECT_TRUE(c.read_frame() == expected(file.content, {0, 10}, {0, 10}));
  ASSERT_TRUE(c.send_all(frame(request_of({4000, 200}, {0, 1}))));
  EXPECT_TRUE(c.wait_closed());
  ASSERT_TRUE(srv.wait_for([&] { return h.closes.load() == 1 && released.load() == 2; }));
}

// Answers far larger than the socket buffers, to a reader with a small window: the kernel
// takes each sendmsg only in part, and the cursor resumes mid-piece, mid-file-range.
class TransportShortSends : public ::testing::TestWithParam<std::uint32_t> {};

TEST_P(TransportShortSends, LargeAnswersArriveByteIdentical) {
  TempFile file(12 << 20);
  std::atomic<int> released{0};
  FileHandler h(file.fd, &released);
  ListenerConfig cfg = test_config();
  cfg.zerocopy_send_min_bytes = GetParam();
  Server srv(h, cfg);
  ASSERT_EQ(srv.error(), "");
  Client c(srv.port());
  int rcvbuf = 64 << 10;
  ::setsockopt(c.fd(), SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  const std::vector<std::pair<Range, Range>> reqs = {
      {{1, (12u << 20) - 1}, {5, 7}},
      {{0, 3}, {4096, 9u << 20}},
      {{777, 1000}, {0, 0}},
  };
  std::string wire;
  for (auto& [a, b] : reqs)
    wire += frame(request_of(a, b));
  ASSERT_TRUE(c.send_all(wire));
  for (auto& [a, b] : reqs)
    ASSERT_TRUE(c.read_frame() == expected(file.content, a, b));
  EXPECT_GT(srv.stats().short_sends, 0u);
}

INSTANTIATE_TEST_SUITE_P(ZeroCopy, TransportShortSends, ::testing::Values(0u, 1u));

}  // namespace
}  // namespace samsa::net::test
