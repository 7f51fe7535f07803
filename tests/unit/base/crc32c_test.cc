#include "base/crc32c.h"

#include <gtest/gtest.h>

#include <string_view>

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
