#include "base/crc32c.h"

#include <gtest/gtest.h>

#include <string_view>
#include <vector>

#include "base/bytes.h"

namespace samsa {
namespace {

TEST(Crc32c, KnownVectors) {
  // RFC 3720 B.4 check value for "123456789".
  std::string_view s = "123456789";
  EXPECT_EQ(crc32c(0, s.data(), s.size()), 0xe3069283u);
  std::byte zeros[32]{};
  EXPECT_EQ(crc32c(0, zeros, sizeof zeros), 0x8a9136aau);
}

TEST(Crc32c, IncrementalEqualsWhole) {
  std::string s(1000, 'x');
  for (std::size_t i = 0; i < s.size(); ++i)
    s[i] = static_cast<char>(i * 31 + 7);
  std::uint32_t whole = crc32c(0, s.data(), s.size());
  for (std::size_t cut : {0u, 1u, 7u, 8u, 9u, 500u, 999u}) {
    std::uint32_t part = crc32c(crc32c(0, s.data(), cut), s.data() + cut, s.size() - cut);
    EXPECT_EQ(part, whole) << "cut at " << cut;
  }
}

// The hardware path splits long buffers into three interleaved blocks (4096 and 256 bytes)
// and joins their registers; a bytewise table CRC has no such seams. Every length around the
// block boundaries, at every alignment, must agree.
TEST(Crc32c, MatchesTheBytewiseDefinitionAcrossBlockSeams) {
  std::uint32_t table[256];
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k)
      c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    table[i] = c;
  }
  auto reference = [&](const unsigned char* p, std::size_t n) {
    std::uint32_t c = ~0u;
    for (std::size_t i = 0; i < n; ++i)
      c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return ~c;
  };
  std::vector<unsigned char> buf(3 * 4096 * 3 + 64);
  std::uint32_t x = 12345;
  for (auto& b : buf) {
    x = x * 1103515245u + 12345u;
    b = static_cast<unsigned char>(x >> 16);
  }
  std::vector<std::size_t> lengths;
  for (std::size_t n = 0; n <= 1100; ++n)
    lengths.push_back(n);
  for (std::size_t base : {3u * 4096, 2u * 3 * 4096, 3u * 4096 + 3 * 256})
    for (std::size_t d = 0; d < 20; ++d)
      lengths.push_back(base - 10 + d);
  lengths.push_back(buf.size() - 8);
  for (std::size_t align = 0; align < 8; ++align) {
    for (std::size_t n : lengths) {
      ASSERT_EQ(crc32c(0, buf.data() + align, n), reference(buf.data() + align, n))
          << "length " << n << " at alignment " << align;
    }
  }
}

TEST(Varint, ZigZagRoundTrip) {
  std::byte buf[10];
  const std::int64_t values[] = {0, 1, -1, 63, -64, 64, 300, -300, INT64_MAX, INT64_MIN};
  for (std::int64_t v : values) {
    std::size_t n = write_varint64(buf, v);
    EXPECT_EQ(n, varint_size(v));
    std::int64_t out = 0;
    EXPECT_EQ(read_varint64(buf, n, out), n);
    EXPECT_EQ(out, v);
  }
  std::byte truncated[1] = {std::byte{0x80}};
  std::int64_t out;
  EXPECT_EQ(read_varint64(truncated, 1, out), 0u);
}

}  // namespace
}  // namespace samsa
