#include "io/compression.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <lz4frame.h>
#include <snappy.h>
#include <zlib.h>
#include <zstd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "base/bytes.h"

namespace samsa::io {
namespace {

using Bytes = std::vector<std::byte>;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr Codec kCodecs[] = {Codec::gzip, Codec::snappy, Codec::lz4, Codec::zstd};
constexpr std::size_t kUnlimited = std::numeric_limits<std::size_t>::max();

// Vectors written by real clients (kafka-python, librdkafka, the Java client); the scripts that
// made them sit beside them in testdata/.
std::filesystem::path testdata() {
  return std::filesystem::path(SAMSA_TEST_SOURCE_DIR) / "testdata";
}

Bytes read_file(const std::string& name) {
  std::ifstream f(testdata() / name, std::ios::binary);
  EXPECT_TRUE(f.good()) << "missing test vector " << name;
  std::vector<char> raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  Bytes out(raw.size());
  if (!raw.empty()) std::memcpy(out.data(), raw.data(), raw.size());
  return out;
}

const Bytes& plain() {
  static const Bytes p = read_file("compression_plain.bin");
  return p;
}

Bytes random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Bytes out(n);
  for (auto& b : out)
    b = static_cast<std::byte>(rng());
  return out;
}

// Text-like data that compresses about 3-10x, with matches reaching back across block borders.
Bytes compressible(std::size_t n, std::uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  const Bytes dict = random_bytes(4096, seed + 1);
  Bytes out;
  out.reserve(n);
  while (out.size() < n) {
    std::size_t at = rng() % dict.size(), len = 8 + rng() % 120;
    for (std::size_t i = 0; i < len && out.size() < n; ++i)
      out.push_back(dict[(at + i) % dict.size()]);
    out.push_back(static_cast<std::byte>(rng()));
  }
  out.resize(n);
  return out;
}

Bytes concat(const Bytes& a, const Bytes& b) {
  Bytes out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

std::span<const std::byte> prefix(const Bytes& b, std::size_t n) {
  return std::span(b).first(n);
}

Bytes must_compress(Codec c, std::span<const std::byte> in) {
  auto r = compress(c, in);
  EXPECT_TRUE(r.has_value()) << codec_name(c) << ": " << r.error();
  return r ? std::move(*r) : Bytes{};
}

TEST(Compression, CodecNames) {
  EXPECT_STREQ(codec_name(Codec::none), "none");
  EXPECT_STREQ(codec_name(Codec::gzip), "gzip");
  EXPECT_STREQ(codec_name(Codec::snappy), "snappy");
  EXPECT_STREQ(codec_name(Codec::lz4), "lz4");
  EXPECT_STREQ(codec_name(Codec::zstd), "zstd");
  EXPECT_STREQ(codec_name(static_cast<Codec>(5)), "unknown");
}

TEST(Compression, UnknownCodecIsAnError) {
  Bytes in(10);
  auto d = decompress(static_cast<Codec>(6), in, kUnlimited);
  ASSERT_FALSE(d.has_value());
  EXPECT_THAT(d.error(), HasSubstr("unknown codec 6"));
  auto c = compress(static_cast<Codec>(7), in);
  ASSERT_FALSE(c.has_value());
  EXPECT_THAT(c.error(), HasSubstr("unknown codec 7"));
}

TEST(Compression, NoneCopiesAndHonoursTheLimit) {
  Bytes in = random_bytes(100, 3);
  auto c = compress(Codec::none, in);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(*c, in);
  auto d = decompress(Codec::none, in, 100);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(*d, in);
  EXPECT_FALSE(decompress(Codec::none, in, 99).has_value());
}

// --- Round trips -------------------------------------------------------------------------------

class RoundTrip : public ::testing::TestWithParam<std::tuple<Codec, int>> {};

TEST_P(RoundTrip, DecompressGivesBackTheInput) {
  auto [codec, kind] = GetParam();
  Bytes in;
  switch (kind) {
    case 0:
      break;
    case 1:
      in = {std::byte{'k'}};
      break;
    case 2:
      in = compressible(1024);
      break;
    case 3:
      in = compressible(1 << 20);
      break;
    case 4:
      in = random_bytes(1 << 20, 42);  // incompressible
      break;
  }
  Bytes packed = must_compress(codec, in);
  ASSERT_FALSE(packed.empty());
  if (kind == 3) {
    EXPECT_LT(packed.size(), in.size() / 2) << codec_name(codec);
  }
  // The exact size is allowed, one byte less is not.
  auto out = decompress(codec, packed, in.size());
  ASSERT_TRUE(out.has_value()) << out.error();
  EXPECT_EQ(*out, in);
  auto unlimited = decompress(codec, packed, kUnlimited);
  ASSERT_TRUE(unlimited.has_value()) << unlimited.error();
  EXPECT_EQ(*unlimited, in);
  if (!in.empty()) {
    auto over = decompress(codec, packed, in.size() - 1);
    ASSERT_FALSE(over.has_value());
    EXPECT_THAT(over.error(), StartsWith(std::string(codec_name(codec)) + ": "));
    EXPECT_THAT(over.error(), HasSubstr("exceeds"));
  }
}

std::string round_trip_name(const ::testing::TestParamInfo<std::tuple<Codec, int>>& info) {
  static const char* kinds[] = {"empty", "one_byte", "1KiB", "1MiB", "1MiB_incompressible"};
  return std::string(codec_name(std::get<0>(info.param))) + "_" + kinds[std::get<1>(info.param)];
}

INSTANTIATE_TEST_SUITE_P(AllCodecs, RoundTrip,
                         ::testing::Combine(::testing::ValuesIn(kCodecs), ::testing::Range(0, 5)),
                         round_trip_name);

// --- What real clients send --------------------------------------------------------------------

class ClientVector : public ::testing::TestWithParam<std::tuple<Codec, const char* /*source*/>> {
 protected:
  Bytes vector() const {
    auto [codec, source] = GetParam();
    return read_file(std::string("compression_") + codec_name(codec) + "_" + source + ".bin");
  }
};

TEST_P(ClientVector, DecompressesToTheRecords) {
  Codec codec = std::get<0>(GetParam());
  Bytes in = vector();
  ASSERT_FALSE(in.empty());
  ASSERT_EQ(plain().size(), 70731u);
  auto out = decompress(codec, in, plain().size());
  ASSERT_TRUE(out.has_value()) << out.error();
  EXPECT_EQ(*out, plain());
  auto over = decompress(codec, in, plain().size() - 1);
  ASSERT_FALSE(over.has_value());
  EXPECT_THAT(over.error(), HasSubstr("exceeds"));
}

TEST_P(ClientVector, TruncationIsAnErrorOrAWholeBlockPrefix) {
  Codec codec = std::get<0>(GetParam());
  Bytes in = vector();
  std::vector<std::size_t> cuts = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 15, 16, 17, 18, 19, 20, 21};
  for (std::size_t n = 100; n < in.size(); n += 997)
    cuts.push_back(n);
  for (std::size_t back = 1; back <= 12; ++back)
    cuts.push_back(in.size() - back);
  int errors = 0;
  for (std::size_t n : cuts) {
    auto out = decompress(codec, prefix(in, n), kUnlimited);
    if (!out) {
      ++errors;
      EXPECT_THAT(out.error(), StartsWith(std::string(codec_name(codec)) + ": ")) << n;
      continue;
    }
    // Xerial framing has no end marker: a stream cut at a block border is a valid shorter one.
    ASSERT_EQ(codec, Codec::snappy) << "truncated to " << n << " bytes but decoded";
    ASSERT_LT(out->size(), plain().size());
    EXPECT_TRUE(std::equal(out->begin(), out->end(), plain().begin())) << n;
  }
  EXPECT_GE(errors, static_cast<int>(cuts.size()) - 2);
}

TEST_P(ClientVector, CorruptionNeverCrashesAndNeverOverflows) {
  Codec codec = std::get<0>(GetParam());
  Bytes in = vector();
  std::mt19937_64 rng(7);
  int errors = 0, trials = 0;
  for (std::size_t pos = 0; pos < in.size(); pos += 1 + pos / 4 + rng() % 7, ++trials) {
    Bytes bad = in;
    bad[pos] ^= static_cast<std::byte>(1 + rng() % 255);
    auto out = decompress(codec, bad, plain().size() + 100);
    if (!out) {
      ++errors;
      EXPECT_THAT(out.error(), StartsWith(std::string(codec_name(codec)) + ": "));
    } else {
      EXPECT_LE(out->size(), plain().size() + 100);
    }
  }
  // Whether a flipped byte is caught depends on the framing's checksums (gzip has a CRC32; the
  // others may decode literal damage silently), but damage to the framing itself is.
  EXPECT_GT(errors, 0) << trials << " trials";
}

INSTANTIATE_TEST_SUITE_P(Clients, ClientVector,
                         ::testing::Combine(::testing::ValuesIn(kCodecs),
                                            ::testing::Values("java", "kafka_python",
                                                              "librdkafka")),
                         [](const auto& info) {
                           return std::string(codec_name(std::get<0>(info.param))) + "_" +
                                  std::get<1>(info.param);
                         });

// The Java client's framing, checked on the bytes it wrote (what compress() mimics).
TEST(ClientFraming, SnappyFromJavaAndKafkaPythonIsXerialAndLibrdkafkaIsRaw) {
  Bytes java = read_file("compression_snappy_java.bin");
  Bytes py = read_file("compression_snappy_kafka_python.bin");
  Bytes rdk = read_file("compression_snappy_librdkafka.bin");
  const unsigned char xerial[16] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1};
  ASSERT_GE(java.size(), 16u);
  EXPECT_EQ(std::memcmp(java.data(), xerial, 16), 0);
  EXPECT_EQ(std::memcmp(py.data(), xerial, 16), 0);
  EXPECT_NE(std::memcmp(rdk.data(), xerial, 8), 0);
  std::size_t n = 0;
  ASSERT_TRUE(
      snappy::GetUncompressedLength(reinterpret_cast<const char*>(rdk.data()), rdk.size(), &n));
  EXPECT_EQ(n, plain().size());
}

// Splits a xerial stream into the uncompressed sizes of its blocks.
std::vector<std::size_t> xerial_block_sizes(const Bytes& s) {
  std::vector<std::size_t> sizes;
  for (std::size_t pos = 16; pos + 4 <= s.size();) {
    auto n = static_cast<std::size_t>(load_be<std::int32_t>(s.data() + pos));
    std::size_t u = 0;
    EXPECT_TRUE(
        snappy::GetUncompressedLength(reinterpret_cast<const char*>(s.data() + pos + 4), n, &u));
    sizes.push_back(u);
    pos += 4 + n;
  }
  return sizes;
}

TEST(ClientFraming, CompressWritesSnappyLikeJava) {
  Bytes java = read_file("compression_snappy_java.bin");
  Bytes ours = must_compress(Codec::snappy, plain());
  ASSERT_GE(ours.size(), 16u);
  EXPECT_EQ(std::memcmp(ours.data(), java.data(), 16), 0);
  auto sizes = xerial_block_sizes(ours);
  EXPECT_EQ(sizes, xerial_block_sizes(java));
  EXPECT_EQ(sizes, (std::vector<std::size_t>{32768, 32768, 70731 - 65536}));
  // Header only: what Java writes for an empty payload.
  EXPECT_EQ(must_compress(Codec::snappy, {}).size(), 16u);
}

TEST(ClientFraming, CompressWritesLz4LikeJava) {
  Bytes java = read_file("compression_lz4_java.bin");
  Bytes ours = must_compress(Codec::lz4, plain());
  // Magic, FLG (version 1, independent blocks, no checksums, no content size), BD (64 KiB
  // blocks) and the header checksum KIP-57 made correct: the same 7 bytes as the Java client.
  ASSERT_GE(java.size(), 7u);
  ASSERT_GE(ours.size(), 7u);
  EXPECT_EQ(std::memcmp(ours.data(), java.data(), 7), 0);
  const unsigned char expected[6] = {0x04, 0x22, 0x4d, 0x18, 0x60, 0x40};
  EXPECT_EQ(std::memcmp(ours.data(), expected, 6), 0);
}

TEST(ClientFraming, CompressWritesGzipAndZstdFrames) {
  Bytes gz = must_compress(Codec::gzip, plain());
  ASSERT_GE(gz.size(), 18u);
  EXPECT_EQ(gz[0], std::byte{0x1f});
  EXPECT_EQ(gz[1], std::byte{0x8b});
  EXPECT_EQ(gz[2], std::byte{8});  // deflate
  Bytes zs = must_compress(Codec::zstd, plain());
  EXPECT_EQ(ZSTD_getFrameContentSize(zs.data(), zs.size()), plain().size());
  EXPECT_EQ(ZSTD_findFrameCompressedSize(zs.data(), zs.size()), zs.size());
}

TEST(ClientFraming, RawSnappyFromKafkaPython) {
  Bytes raw = read_file("compression_snappyraw300_kafka_python.bin");
  auto out = decompress(Codec::snappy, raw, 300);
  ASSERT_TRUE(out.has_value()) << out.error();
  EXPECT_EQ(*out, Bytes(plain().begin(), plain().begin() + 300));
}

// --- Framing variants other writers use --------------------------------------------------------

Bytes deflate_with(int window_bits, const Bytes& in) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 6, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY), Z_OK);
  Bytes out(deflateBound(&zs, in.size()) + 64);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

TEST(Gzip, ConcatenatedMembersDecodeToTheirConcatenation) {
  Bytes a = compressible(5000, 1), b = compressible(7000, 2);
  Bytes stream = concat(must_compress(Codec::gzip, a), must_compress(Codec::gzip, b));
  auto out = decompress(Codec::gzip, stream, kUnlimited);
  ASSERT_TRUE(out.has_value()) << out.error();
  EXPECT_EQ(*out, concat(a, b));
  EXPECT_FALSE(decompress(Codec::gzip, stream, a.size() + b.size() - 1).has_value());
}

TEST(Gzip, ZlibAndRawDeflateAreAccepted) {
  Bytes in = compressible(20000);
  for (int bits : {MAX_WBITS, -MAX_WBITS}) {
    auto out = decompress(Codec::gzip, deflate_with(bits, in), kUnlimited);
    ASSERT_TRUE(out.has_value()) << bits << ": " << out.error();
    EXPECT_EQ(*out, in);
  }
}

TEST(Gzip, TrailingGarbageAndBadChecksumAreErrors) {
  Bytes gz = must_compress(Codec::gzip, compressible(3000));
  Bytes junk = concat(gz, Bytes{std::byte{1}, std::byte{2}, std::byte{3}});
  auto out = decompress(Codec::gzip, junk, kUnlimited);
  ASSERT_FALSE(out.has_value());
  EXPECT_THAT(out.error(), StartsWith("gzip: "));
  EXPECT_THAT(out.error(), HasSubstr("trailing"));
  Bytes bad = gz;
  bad[bad.size() - 6] ^= std::byte{0x40};  // inside the CRC32 of the trailer
  out = decompress(Codec::gzip, bad, kUnlimited);
  ASSERT_FALSE(out.has_value());
  EXPECT_THAT(out.error(), StartsWith("gzip: corrupt input"));
}

Bytes xerial_header(std::int32_t version, std::int32_t compat) {
  Bytes h(16);
  const char magic[8] = {'\x82', 'S', 'N', 'A', 'P', 'P', 'Y', 0};
  std::memcpy(h.data(), magic, 8);
  store_be<std::int32_t>(h.data() + 8, version);
  store_be<std::int32_t>(h.data() + 12, compat);
  return h;
}

TEST(Snappy, ConcatenatedXerialStreamsAndHeaderOnly) {
  Bytes java = read_file("compression_snappy_java.bin");
  Bytes py = read_file("compression_snappy_kafka_python.bin");
  auto out = decompress(Codec::snappy, concat(java, py), kUnlimited);
  ASSERT_TRUE(out.has_value()) << out.error();
  EXPECT_EQ(*out, concat(plain(), plain()));
  auto empty = decompress(Codec::snappy, xerial_header(1, 1), kUnlimited);
  ASSERT_TRUE(empty.has_value()) << empty.error();
  EXPECT_TRUE(empty->empty());
}

TEST(Snappy, BadXerialFramingIsAnError) {
  Bytes block = must_compress(Codec::snappy, compressible(1000));
  struct Case {
    Bytes in;
    const char* what;
  } cases[] = {
      {Bytes(block.begin(), block.begin() + 12), "truncated xerial header"},
      {concat(xerial_header(2, 2), Bytes(block.begin() + 16, block.end())), "unsupported"},
      {concat(xerial_header(1, 1), Bytes{std::byte{0}, std::byte{0}}), "truncated xerial block"},
      {concat(xerial_header(1, 1), Bytes(4)), "bad xerial block length 0"},
      {concat(xerial_header(1, 1), Bytes{std::byte{0x80}, {}, {}, {}}), "bad xerial block length"},
      {concat(xerial_header(1, 1), Bytes{{}, {}, std::byte{0x10}, {}, std::byte{1}}),
       "truncated xerial block"},
  };
  for (const auto& c : cases) {
    auto out = decompress(Codec::snappy, c.in, kUnlimited);
    ASSERT_FALSE(out.has_value()) << c.what;
    EXPECT_THAT(out.error(), StartsWith("snappy: "));
    EXPECT_THAT(out.error(), HasSubstr(c.what));
  }
}

TEST(Snappy, ImpossibleDeclaredLengthIsRefusedBeforeAllocating) {
  // A 6-byte "block" claiming 4 GiB - 1 of output.
  Bytes in = {std::byte{0xff}, std::byte{0xff}, std::byte{0xff},
              std::byte{0xff}, std::byte{0x0f}, std::byte{0}};
  auto out = decompress(Codec::snappy, in, kUnlimited);
  ASSERT_FALSE(out.has_value());
  EXPECT_THAT(out.error(), HasSubstr("snappy: corrupt block (impossible length 4294967295)"));
}

Bytes lz4_frame(const Bytes& in, LZ4F_blockMode_t mode, bool block_sum, bool content_sum,
                bool content_size, LZ4F_blockSizeID_t block = LZ4F_max64KB) {
  LZ4F_preferences_t p{};
  p.frameInfo.blockSizeID = block;
  p.frameInfo.blockMode = mode;
  p.frameInfo.blockChecksumFlag = block_sum ? LZ4F_blockChecksumEnabled : LZ4F_noBlockChecksum;
  p.frameInfo.contentChecksumFlag =
      content_sum ? LZ4F_contentChecksumEnabled : LZ4F_noContentChecksum;
  p.frameInfo.contentSize = content_size ? in.size() : 0;
  Bytes out(LZ4F_compressFrameBound(in.size(), &p));
  std::size_t n = LZ4F_compressFrame(out.data(), out.size(), in.data(), in.size(), &p);
  EXPECT_FALSE(LZ4F_isError(n));
  out.resize(n);
  return out;
}

TEST(Lz4, EveryFlagCombinationDecodes) {
  // 1 MiB with matches across 64 KiB blocks: linked blocks need the previous output as their
  // dictionary while the output buffer grows (and moves) underneath the decoder.
  Bytes in = compressible(1 << 20, 9);
  for (auto mode : {LZ4F_blockLinked, LZ4F_blockIndependent})
    for (bool bsum : {false, true})
      for (bool csum : {false, true})
        for (bool csize : {false, true}) {
          Bytes f = lz4_frame(in, mode, bsum, csum, csize);
          auto out = decompress(Codec::lz4, f, kUnlimited);
          ASSERT_TRUE(out.has_value()) << mode << bsum << csum << csize << ": " << out.error();
          EXPECT_EQ(*out, in) << mode << bsum << csum << csize;
        }
}

TEST(Lz4, ContentChecksumCatchesLiteralDamage) {
  Bytes in = random_bytes(4000, 5);  // stored as literals
  Bytes f = lz4_frame(in, LZ4F_blockIndependent, false, true, false);
  f[f.size() / 2] ^= std::byte{0x01};
  auto out = decompress(Codec::lz4, f, kUnlimited);
  ASSERT_FALSE(out.has_value());
  EXPECT_THAT(out.error(), StartsWith("lz4: corrupt frame"));
}

TEST(Lz4, WrongHeaderChecksumIsAnError) {
  // Pre-KIP-57 Kafka wrote a wrong header checksum; RecordBatch v2 never carries one.
  Bytes f = must_compress(Codec::lz4, compressible(1000));
  f[6] ^= std::byte{0xff};
  auto out = decompress(Codec::lz4, f, kUnlimited);
  ASSERT_FALSE(out.has_value());
  EXPECT_THAT(out.error(), StartsWith("lz4: "));
}

TEST(Lz4, ConcatenatedFramesAndTrailingGarbage) {
  Bytes a = compressible(3000, 1), b = compressible(90000, 2);
  Bytes two = concat(must_compress(Codec::lz4, a), lz4_frame(b, LZ4F_blockLinked, 0, 1, 1));
  auto out = decompress(Codec::lz4, two, kUnlimited);
  ASSERT_TRUE(out.has_value()) << out.error();
  EXPECT_EQ(*out, concat(a, b));
  auto junk = decompress(Codec::lz4, concat(must_compress(Codec::lz4, a), Bytes(3)), kUnlimited);
  ASSERT_FALSE(junk.has_value());
  EXPECT_THAT(junk.error(), StartsWith("lz4: "));
}

Bytes zstd_stream(const Bytes& in, bool checksum) {
  // Like zstd-jni's ZstdOutputStream: the size is not known up front, so not in the header.
  ZSTD_CCtx* c = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, checksum ? 1 : 0);
  Bytes out(ZSTD_compressBound(in.size()) + 64);
  ZSTD_outBuffer ob{out.data(), out.size(), 0};
  ZSTD_inBuffer ib{in.data(), in.size(), 0};
  std::size_t rc = ZSTD_compressStream2(c, &ob, &ib, ZSTD_e_continue);
  EXPECT_FALSE(ZSTD_isError(rc));
  do {
    rc = ZSTD_compressStream2(c, &ob, &ib, ZSTD_e_end);
    EXPECT_FALSE(ZSTD_isError(rc));
  } while (rc != 0 && !ZSTD_isError(rc));
  ZSTD_freeCCtx(c);
  out.resize(ob.pos);
  return out;
}

TEST(Zstd, FramesWithoutContentSizeSeveralFramesAndSkippableFrames) {
  Bytes a = compressible(200000, 1), b = compressible(5000, 2);
  Bytes fa = zstd_stream(a, true);
  ASSERT_EQ(ZSTD_getFrameContentSize(fa.data(), fa.size()), ZSTD_CONTENTSIZE_UNKNOWN);
  auto out = decompress(Codec::zstd, fa, kUnlimited);
  ASSERT_TRUE(out.has_value()) << out.error();
  EXPECT_EQ(*out, a);

  Bytes skippable(8 + 5);
  store_be<std::uint32_t>(skippable.data(), 0x502a4d18);  // 0x184D2A50, little-endian
  skippable[4] = std::byte{5};
  Bytes all = concat(concat(fa, skippable), must_compress(Codec::zstd, b));
  out = decompress(Codec::zstd, all, kUnlimited);
  ASSERT_TRUE(out.has_value()) << out.error();
  EXPECT_EQ(*out, concat(a, b));

  auto junk = decompress(Codec::zstd, concat(fa, Bytes(4)), kUnlimited);
  ASSERT_FALSE(junk.has_value());
  EXPECT_THAT(junk.error(), StartsWith("zstd: corrupt frame"));
}

TEST(Zstd, ChecksumCatchesDamage) {
  Bytes in = random_bytes(3000, 8);
  Bytes f = zstd_stream(in, true);
  f[f.size() / 2] ^= std::byte{0x10};
  auto out = decompress(Codec::zstd, f, kUnlimited);
  ASSERT_FALSE(out.has_value());
  EXPECT_THAT(out.error(), StartsWith("zstd: "));
}

// --- Decompression bombs -----------------------------------------------------------------------

TEST(Bomb, EveryCodecStopsAtTheLimit) {
  // 64 MiB of zeros packs into a few KiB; with a 1 MiB limit each decoder must give up.
  const Bytes zeros(64 << 20);
  const std::size_t limit = 1 << 20;
  struct Bomb {
    Codec codec;
    Bytes bytes;
    bool declared;  // the framing states the size: refused before decoding
  };
  std::vector<Bomb> bombs = {
      {Codec::gzip, must_compress(Codec::gzip, zeros), false},
      {Codec::snappy, must_compress(Codec::snappy, zeros), true},  // per 32 KiB block
      {Codec::lz4, must_compress(Codec::lz4, zeros), false},       // Java's: no size
      {Codec::lz4, lz4_frame(zeros, LZ4F_blockLinked, false, false, false), false},
      {Codec::lz4, lz4_frame(zeros, LZ4F_blockIndependent, false, false, true), true},
      {Codec::zstd, must_compress(Codec::zstd, zeros), true},
      {Codec::zstd, zstd_stream(zeros, false), false},
  };
  for (std::size_t i = 0; i < bombs.size(); ++i) {
    const auto& b = bombs[i];
    EXPECT_LT(b.bytes.size(), 4u << 20) << i;
    auto out = decompress(b.codec, b.bytes, limit);
    ASSERT_FALSE(out.has_value()) << i;
    EXPECT_THAT(out.error(), StartsWith(std::string(codec_name(b.codec)) + ": ")) << i;
    EXPECT_THAT(out.error(), HasSubstr("exceeds the limit of 1048576 bytes")) << i;
    EXPECT_EQ(out.error().find("declared size") != std::string::npos, b.declared) << out.error();
  }
}

TEST(Bomb, ZeroLimitAllowsOnlyEmptyOutput) {
  for (Codec c : kCodecs) {
    auto empty = decompress(c, must_compress(c, {}), 0);
    ASSERT_TRUE(empty.has_value()) << codec_name(c) << ": " << empty.error();
    EXPECT_TRUE(empty->empty());
    Bytes one = {std::byte{'x'}};
    EXPECT_FALSE(decompress(c, must_compress(c, one), 0).has_value()) << codec_name(c);
  }
}

TEST(Bomb, LyingHeadersGetNoAllocationUpFront) {
  // Headers declaring 1 TiB, followed by almost nothing; even with no limit the decoders must
  // fail on the missing data rather than try to allocate what the header claims.
  constexpr std::uint64_t kTiB = 1ull << 40;
  Bytes zs = {std::byte{0x28}, std::byte{0xb5}, std::byte{0x2f}, std::byte{0xfd},
              std::byte{0xe0}};  // 8-byte content size, single segment
  zs.resize(zs.size() + 8);
  for (int i = 0; i < 8; ++i)
    zs[5 + i] = static_cast<std::byte>(kTiB >> (8 * i));
  for (int b : {0x09, 0x00, 0x00, 0x78})
    zs.push_back(static_cast<std::byte>(b));  // 1-byte raw block
  auto out = decompress(Codec::zstd, zs, kUnlimited);
  ASSERT_FALSE(out.has_value());
  EXPECT_THAT(out.error(), StartsWith("zstd: "));

  LZ4F_cctx* cctx = nullptr;
  ASSERT_FALSE(LZ4F_isError(LZ4F_createCompressionContext(&cctx, LZ4F_VERSION)));
  LZ4F_preferences_t p{};
  p.frameInfo.contentSize = kTiB;
  Bytes lz(LZ4F_HEADER_SIZE_MAX);
  std::size_t n = LZ4F_compressBegin(cctx, lz.data(), lz.size(), &p);
  LZ4F_freeCompressionContext(cctx);
  ASSERT_FALSE(LZ4F_isError(n));
  lz.resize(n + 4);  // the end mark: a zero block size
  out = decompress(Codec::lz4, lz, kUnlimited);
  ASSERT_FALSE(out.has_value());
  EXPECT_THAT(out.error(), StartsWith("lz4: "));
}

TEST(Bomb, AnAbandonedFrameDoesNotSpoilTheNextCall) {
  // Decoder state is reused between calls on a thread; a call that gave up mid-frame must not
  // leave anything behind for the next one.
  Bytes in = compressible(300000, 4);
  for (Codec c : kCodecs) {
    Bytes good = must_compress(c, in);
    std::vector<Bytes> bad = {good, Bytes(good.begin(), good.end() - 3)};
    if (c == Codec::lz4) bad.push_back(lz4_frame(in, LZ4F_blockLinked, true, true, true));
    if (c == Codec::zstd) bad.push_back(zstd_stream(in, true));
    for (const Bytes& b : bad) {
      EXPECT_FALSE(decompress(c, b, 1000).has_value()) << codec_name(c);
      auto out = decompress(c, good, kUnlimited);
      ASSERT_TRUE(out.has_value()) << codec_name(c) << ": " << out.error();
      EXPECT_EQ(*out, in);
    }
  }
}

TEST(Threads, EachThreadDecodesWithItsOwnState) {
  // lz4 and zstd keep a decoder context per thread; two threads decoding at once must not mix.
  const Bytes lz = read_file("compression_lz4_java.bin");
  const Bytes zs = read_file("compression_zstd_java.bin");
  const Bytes& expected = plain();
  std::atomic<int> bad{0};
  auto work = [&](bool lz4_first) {
    for (int i = 0; i < 50; ++i) {
      bool lz4 = (i % 2 == 0) == lz4_first;
      auto out = decompress(lz4 ? Codec::lz4 : Codec::zstd, lz4 ? lz : zs, 1 << 20);
      if (!out || *out != expected) bad.fetch_add(1);
      // An abandoned frame in between (its context is dropped, not shared).
      if (decompress(Codec::lz4, lz, 10).has_value()) bad.fetch_add(1);
    }
  };
  std::thread a(work, true), b(work, false);
  a.join();
  b.join();
  EXPECT_EQ(bad.load(), 0);
}

// --- Garbage -----------------------------------------------------------------------------------

TEST(Garbage, EmptyInputIsAnErrorNamingTheCodec) {
  for (Codec c : kCodecs) {
    auto out = decompress(c, {}, kUnlimited);
    ASSERT_FALSE(out.has_value()) << codec_name(c);
    EXPECT_THAT(out.error(), StartsWith(std::string(codec_name(c)) + ": "));
  }
}

TEST(Garbage, RandomInputNeverCrashes) {
  int errors = 0, trials = 0;
  for (Codec c : kCodecs) {
    for (std::size_t n : {1u, 2u, 5u, 16u, 17u, 100u, 4096u}) {
      for (std::uint64_t seed = 0; seed < 20; ++seed, ++trials) {
        Bytes in = random_bytes(n, seed * 1000 + n);
        auto out = decompress(c, in, 1 << 20);
        if (!out) {
          ++errors;
          EXPECT_THAT(out.error(), StartsWith(std::string(codec_name(c)) + ": "));
        } else {
          EXPECT_LE(out->size(), 1u << 20);
        }
      }
    }
  }
  EXPECT_GT(errors, trials * 9 / 10);
}

TEST(Garbage, RandomBytesBehindValidHeadersNeverCrash) {
  // Past the magic the decoders parse attacker-controlled lengths and offsets.
  const Bytes lz4_empty = must_compress(Codec::lz4, {});
  std::vector<std::pair<Codec, Bytes>> heads = {
      {Codec::gzip,
       Bytes{std::byte{0x1f}, std::byte{0x8b}, std::byte{8}, {}, {}, {}, {}, {}, {}, std::byte{3}}},
      {Codec::snappy, xerial_header(1, 1)},
      {Codec::lz4, Bytes(lz4_empty.begin(), lz4_empty.begin() + 7)},
      {Codec::zstd, Bytes{std::byte{0x28}, std::byte{0xb5}, std::byte{0x2f}, std::byte{0xfd},
                          std::byte{0x00}, std::byte{0x58}}},
  };
  for (auto& [c, head] : heads) {
    for (std::uint64_t seed = 0; seed < 200; ++seed) {
      Bytes in = concat(head, random_bytes(1 + seed * 7 % 600, seed));
      auto out = decompress(c, in, 1 << 16);
      if (!out) {
        EXPECT_THAT(out.error(), StartsWith(std::string(codec_name(c)) + ": "));
      } else {
        EXPECT_LE(out->size(), 1u << 16);
      }
    }
  }
}

}  // namespace
}  // namespace samsa::io
