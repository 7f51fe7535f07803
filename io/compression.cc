#include "io/compression.h"

#include <lz4frame.h>
#include <snappy.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>

#include "base/bytes.h"

namespace samsa::io {
namespace {

using Result = std::expected<std::vector<std::byte>, std::string>;

std::unexpected<std::string> fail(const char* codec, std::string what) {
  return std::unexpected(std::string(codec) + ": " + std::move(what));
}

std::unexpected<std::string> too_big(const char* codec, std::size_t max_out) {
  return fail(codec,
              "decompressed size exceeds the limit of " + std::to_string(max_out) + " bytes");
}

// The framing states the size up front: refused before anything is allocated or decoded.
std::unexpected<std::string> declared_too_big(const char* codec, std::uint64_t declared,
                                              std::size_t max_out) {
  return fail(codec, "declared size " + std::to_string(declared) + " exceeds the limit of " +
                         std::to_string(max_out) + " bytes");
}

// Growing output buffer for the streaming decoders. Its capacity never exceeds max_out + 1:
// the one spare byte lets a decoder that still has output pending prove the payload is over the
// limit without the buffer ever holding more than that (a bomb costs at most max_out + 1 bytes).
class Sink {
 public:
  Sink(std::size_t max_out, std::size_t expected)
      : max_out_(max_out),
        cap_(max_out == std::numeric_limits<std::size_t>::max() ? max_out : max_out + 1) {
    buf_.resize(std::min(cap_, std::max<std::size_t>(expected, 1)));
  }

  // Room to write into, growing the buffer when it is full; empty when the limit is reached.
  std::span<std::byte> space() {
    if (len_ == buf_.size() && buf_.size() < cap_) {
      std::size_t grown =
          buf_.size() < cap_ / 2 ? std::max<std::size_t>(buf_.size() * 2, 64) : cap_;
      buf_.resize(std::min(grown, cap_));
    }
    return std::span(buf_).subspan(len_);
  }
  void commit(std::size_t n) { len_ += n; }
  bool over() const { return len_ > max_out_; }
  std::vector<std::byte> take() && {
    buf_.resize(len_);
    return std::move(buf_);
  }

 private:
  std::size_t max_out_;
  std::size_t cap_;
  std::size_t len_ = 0;
  std::vector<std::byte> buf_;
};

// First guess at the output size when the framing does not say: batches usually compress 2-5x.
std::size_t guess(std::size_t in) {
  return in > std::numeric_limits<std::size_t>::max() / 4 ? in : std::max<std::size_t>(in * 4, 256);
}

// What to allocate up front for a size the frame header declares (already checked against
// max_out): a lying header of a few bytes must not get gigabytes before any data backs it, so
// past 64 MiB the buffer grows only as output is really produced.
std::size_t trust_declared(std::uint64_t declared, std::size_t in) {
  constexpr std::uint64_t kTrusted = 64 << 20;
  return static_cast<std::size_t>(
      std::min<std::uint64_t>(declared, std::max<std::uint64_t>(kTrusted, guess(in))));
}

constexpr uInt kZlibChunk = std::numeric_limits<uInt>::max();

bool is_gzip_magic(const std::byte* p, std::size_t n) {
  return n >= 2 && p[0] == std::byte{0x1f} && p[1] == std::byte{0x8b};
}

// RFC 1950 header: deflate method and a check value that makes CMF*256+FLG a multiple of 31.
bool is_zlib_header(const std::byte* p, std::size_t n) {
  if (n < 2) return false;
  unsigned cmf = static_cast<unsigned>(p[0]), flg = static_cast<unsigned>(p[1]);
  return (cmf & 0x0f) == 8 && (cmf >> 4) <= 7 && (cmf * 256 + flg) % 31 == 0;
}

Result gunzip(std::span<const std::byte> in, std::size_t max_out) {
  if (in.empty()) return fail("gzip", "empty input");
  // Kafka's clients write gzip; zlib and raw deflate cost nothing extra to accept.
  int window_bits = is_gzip_magic(in.data(), in.size())    ? 16 + MAX_WBITS
                    : is_zlib_header(in.data(), in.size()) ? MAX_WBITS
                                                           : -MAX_WBITS;
  z_stream zs{};
  if (inflateInit2(&zs, window_bits) != Z_OK) return fail("gzip", "inflateInit2 failed");
  struct End {
    z_stream* zs;
    ~End() { inflateEnd(zs); }
  } end{&zs};

  Sink sink(max_out, guess(in.size()));
  std::size_t pos = 0;
  for (;;) {
    auto room = sink.space();
    if (room.empty()) return too_big("gzip", max_out);
    std::size_t in_n = std::min<std::size_t>(in.size() - pos, kZlibChunk);
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in.data() + pos));
    zs.avail_in = static_cast<uInt>(in_n);
    zs.next_out = reinterpret_cast<Bytef*>(room.data());
    zs.avail_out = static_cast<uInt>(std::min<std::size_t>(room.size(), kZlibChunk));
    uInt out_n = zs.avail_out;
    int rc = inflate(&zs, Z_NO_FLUSH);
    pos += in_n - zs.avail_in;
    sink.commit(out_n - zs.avail_out);
    if (sink.over()) return too_big("gzip", max_out);
    switch (rc) {
      case Z_STREAM_END:
        if (pos == in.size()) return std::move(sink).take();
        // A gzip stream may hold several members (concatenated files); anything else after
        // the end is not part of a valid payload.
        if (window_bits != 16 + MAX_WBITS || !is_gzip_magic(in.data() + pos, in.size() - pos))
          return fail("gzip", "trailing bytes after the end of the stream");
        if (inflateReset(&zs) != Z_OK) return fail("gzip", "inflateReset failed");
        break;
      case Z_OK:
        break;
      case Z_BUF_ERROR:
        // No progress possible: either the output is full (grow and go on) or input ran out.
        if (zs.avail_out != 0) return fail("gzip", "truncated input");
        break;
      case Z_NEED_DICT:
        return fail("gzip", "stream needs a preset dictionary");
      case Z_MEM_ERROR:
        return fail("gzip", "out of memory");
      default:
        return fail("gzip", std::string("corrupt input: ") + (zs.msg ? zs.msg : "inflate error"));
    }
  }
}

Result gzip(std::span<const std::byte> in) {
  z_stream zs{};
  // Level and parameters of java.util.zip.GZIPOutputStream, which Kafka's Java client uses.
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK)
    return fail("gzip", "deflateInit2 failed");
  struct End {
    z_stream* zs;
    ~End() { deflateEnd(zs); }
  } end{&zs};

  std::vector<std::byte> out(deflateBound(&zs, static_cast<uLong>(in.size())));
  std::size_t pos = 0, len = 0;
  for (;;) {
    if (len == out.size()) out.resize(out.size() * 2);
    std::size_t in_n = std::min<std::size_t>(in.size() - pos, kZlibChunk);
    std::size_t out_n = std::min<std::size_t>(out.size() - len, kZlibChunk);
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in.data() + pos));
    zs.avail_in = static_cast<uInt>(in_n);
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + len);
    zs.avail_out = static_cast<uInt>(out_n);
    int rc = deflate(&zs, pos + in_n == in.size() ? Z_FINISH : Z_NO_FLUSH);
    pos += in_n - zs.avail_in;
    len += out_n - zs.avail_out;
    if (rc == Z_STREAM_END) break;
    if (rc != Z_OK && rc != Z_BUF_ERROR)
      return fail("gzip", std::string("deflate failed: ") + (zs.msg ? zs.msg : "error"));
  }
  out.resize(len);
  return out;
}

// snappy-java's stream header (SnappyOutputStream): a magic, then format version and the
// oldest compatible version, both int32 big-endian; then blocks of int32 length + raw block.
constexpr std::byte kXerialMagic[8] = {std::byte{0x82}, std::byte{'S'}, std::byte{'N'},
                                       std::byte{'A'},  std::byte{'P'}, std::byte{'P'},
                                       std::byte{'Y'},  std::byte{0}};
constexpr std::size_t kXerialHeader = 16;
constexpr std::size_t kXerialBlock = 32 * 1024;  // SnappyOutputStream's default block size

bool is_xerial(const std::byte* p, std::size_t n) {
  return n >= sizeof kXerialMagic && std::memcmp(p, kXerialMagic, sizeof kXerialMagic) == 0;
}

// Appends one raw snappy block to out, checking its declared size against the limit first.
std::expected<void, std::string> unsnappy_block(const std::byte* p, std::size_t n,
                                                std::vector<std::byte>& out, std::size_t max_out) {
  const char* src = reinterpret_cast<const char*>(p);
  std::size_t ulen = 0;
  if (!snappy::GetUncompressedLength(src, n, &ulen))
    return fail("snappy", "corrupt block (bad length header)");
  // A snappy element expands at most 64 bytes from 3 (a 2-byte-offset copy): a larger claim is
  // corrupt, and refusing it here avoids allocating for it.
  if (ulen / 22 > n)
    return fail("snappy", "corrupt block (impossible length " + std::to_string(ulen) + ")");
  if (ulen > max_out - out.size()) return declared_too_big("snappy", out.size() + ulen, max_out);
  std::size_t at = out.size();
  out.resize(at + ulen);
  if (!snappy::RawUncompress(src, n, reinterpret_cast<char*>(out.data() + at)))
    return fail("snappy", "corrupt block");
  return {};
}

Result unsnappy(std::span<const std::byte> in, std::size_t max_out) {
  std::vector<std::byte> out;
  if (!is_xerial(in.data(), in.size())) {
    // Raw block: what librdkafka and several other clients write.
    if (in.empty()) return fail("snappy", "empty input");
    if (auto r = unsnappy_block(in.data(), in.size(), out, max_out); !r)
      return std::unexpected(std::move(r.error()));
    return out;
  }
  std::size_t pos = 0;
  while (pos < in.size()) {
    // Streams may be concatenated: a header can appear again at any block boundary.
    if (is_xerial(in.data() + pos, in.size() - pos)) {
      if (in.size() - pos < kXerialHeader) return fail("snappy", "truncated xerial header");
      auto compat = load_be<std::int32_t>(in.data() + pos + 12);
      if (compat > 1)
        return fail("snappy",
                    "unsupported xerial version (compatible " + std::to_string(compat) + ")");
      pos += kXerialHeader;
      continue;
    }
    if (in.size() - pos < 4) return fail("snappy", "truncated xerial block length");
    auto n = load_be<std::int32_t>(in.data() + pos);
    pos += 4;
    if (n <= 0) return fail("snappy", "bad xerial block length " + std::to_string(n));
    if (static_cast<std::size_t>(n) > in.size() - pos)
      return fail("snappy", "truncated xerial block");
    if (auto r = unsnappy_block(in.data() + pos, static_cast<std::size_t>(n), out, max_out); !r)
      return std::unexpected(std::move(r.error()));
    pos += static_cast<std::size_t>(n);
  }
  return out;
}

Result snappy_xerial(std::span<const std::byte> in) {
  std::size_t blocks = (in.size() + kXerialBlock - 1) / kXerialBlock;
  std::vector<std::byte> out(kXerialHeader +
                             blocks * (4 + snappy::MaxCompressedLength(kXerialBlock)));
  std::memcpy(out.data(), kXerialMagic, sizeof kXerialMagic);
  store_be<std::int32_t>(out.data() + 8, 1);   // version
  store_be<std::int32_t>(out.data() + 12, 1);  // compatible version
  std::size_t len = kXerialHeader;
  for (std::size_t pos = 0; pos < in.size(); pos += kXerialBlock) {
    std::size_t n = std::min(kXerialBlock, in.size() - pos);
    std::size_t written = 0;
    snappy::RawCompress(reinterpret_cast<const char*>(in.data() + pos), n,
                        reinterpret_cast<char*>(out.data() + len + 4), &written);
    store_be<std::int32_t>(out.data() + len, static_cast<std::int32_t>(written));
    len += 4 + written;
  }
  out.resize(len);
  return out;
}

struct Lz4DctxFree {
  void operator()(LZ4F_dctx* c) const { LZ4F_freeDecompressionContext(c); }
};

// Decoder contexts are kept per thread: creating one allocates its buffers (hundreds of KiB for
// lz4 and zstd) and faults them in, which costs more than decoding a typical batch. A call
// takes the context out and gives it back only after a clean finish; one left mid-frame by an
// error is freed instead, since resetting it is not enough (liblz4 1.9.4 keeps the remaining
// content size of an abandoned frame across LZ4F_resetDecompressionContext).
using Lz4Dctx = std::unique_ptr<LZ4F_dctx, Lz4DctxFree>;
thread_local Lz4Dctx t_lz4_dctx;

Lz4Dctx take_lz4_dctx() {
  if (t_lz4_dctx) return std::move(t_lz4_dctx);
  LZ4F_dctx* raw = nullptr;
  if (LZ4F_isError(LZ4F_createDecompressionContext(&raw, LZ4F_VERSION))) return nullptr;
  return Lz4Dctx(raw);
}

Result unlz4(std::span<const std::byte> in, std::size_t max_out) {
  if (in.empty()) return fail("lz4", "empty input");
  Lz4Dctx owned = take_lz4_dctx();
  if (!owned) return fail("lz4", "cannot create a decompression context");
  LZ4F_dctx* dctx = owned.get();

  // The frame header may carry the content size: size the output once, or refuse a bomb early.
  std::size_t pos = 0;
  std::size_t expected = guess(in.size());
  LZ4F_frameInfo_t info{};
  std::size_t header = in.size();
  if (!LZ4F_isError(LZ4F_getFrameInfo(dctx, &info, in.data(), &header))) {
    pos = header;
    if (info.contentSize > max_out) return declared_too_big("lz4", info.contentSize, max_out);
    if (info.contentSize != 0) expected = trust_declared(info.contentSize, in.size());
  }

  Sink sink(max_out, expected);
  for (;;) {
    auto room = sink.space();
    if (room.empty()) return too_big("lz4", max_out);
    std::size_t src_n = in.size() - pos, dst_n = room.size();
    // Default options (stableDst off): the decoder keeps its own copy of the last 64 KiB for
    // linked blocks, so the buffer may move when the Sink grows.
    std::size_t hint = LZ4F_decompress(dctx, room.data(), &dst_n, in.data() + pos, &src_n, nullptr);
    if (LZ4F_isError(hint))
      return fail("lz4", std::string("corrupt frame: ") + LZ4F_getErrorName(hint));
    pos += src_n;
    sink.commit(dst_n);
    if (sink.over()) return too_big("lz4", max_out);
    if (pos == in.size()) {
      if (hint == 0) {
        t_lz4_dctx = std::move(owned);
        return std::move(sink).take();
      }
      if (dst_n < room.size()) return fail("lz4", "truncated frame");
    }
    // hint == 0 with input left: another frame follows (or garbage, which the decoder rejects).
  }
}

Result lz4(std::span<const std::byte> in) {
  // What Kafka's Java client writes (KafkaLZ4BlockOutputStream): 64 KiB independent blocks,
  // no checksums, no content size.
  LZ4F_preferences_t prefs{};
  prefs.frameInfo.blockSizeID = LZ4F_max64KB;
  prefs.frameInfo.blockMode = LZ4F_blockIndependent;
  prefs.frameInfo.contentChecksumFlag = LZ4F_noContentChecksum;
  prefs.frameInfo.blockChecksumFlag = LZ4F_noBlockChecksum;
  std::vector<std::byte> out(LZ4F_compressFrameBound(in.size(), &prefs));
  std::size_t n = LZ4F_compressFrame(out.data(), out.size(), in.data(), in.size(), &prefs);
  if (LZ4F_isError(n)) return fail("lz4", std::string("compress failed: ") + LZ4F_getErrorName(n));
  out.resize(n);
  return out;
}

struct ZstdDctxFree {
  void operator()(ZSTD_DCtx* c) const { ZSTD_freeDCtx(c); }
};

using ZstdDctx = std::unique_ptr<ZSTD_DCtx, ZstdDctxFree>;
thread_local ZstdDctx t_zstd_dctx;  // same scheme as t_lz4_dctx

ZstdDctx take_zstd_dctx() {
  if (t_zstd_dctx) return std::move(t_zstd_dctx);
  return ZstdDctx(ZSTD_createDCtx());
}

Result unzstd(std::span<const std::byte> in, std::size_t max_out) {
  if (in.empty()) return fail("zstd", "empty input");
  ZstdDctx owned = take_zstd_dctx();
  if (!owned) return fail("zstd", "cannot create a decompression context");
  ZSTD_DCtx* dctx = owned.get();

  // Streaming writers (zstd-jni's ZstdOutputStream in the Java client) leave the content size
  // out; when it is there, use it to size the output or to refuse a bomb before decoding.
  std::size_t expected = guess(in.size());
  unsigned long long declared = ZSTD_getFrameContentSize(in.data(), in.size());
  if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != ZSTD_CONTENTSIZE_ERROR) {
    if (declared > max_out) return declared_too_big("zstd", declared, max_out);
    expected = trust_declared(declared, in.size());
  }

  Sink sink(max_out, expected);
  ZSTD_inBuffer src{in.data(), in.size(), 0};
  for (;;) {
    auto room = sink.space();
    if (room.empty()) return too_big("zstd", max_out);
    ZSTD_outBuffer dst{room.data(), room.size(), 0};
    std::size_t rc = ZSTD_decompressStream(dctx, &dst, &src);
    if (ZSTD_isError(rc))
      return fail("zstd", std::string("corrupt frame: ") + ZSTD_getErrorName(rc));
    sink.commit(dst.pos);
    if (sink.over()) return too_big("zstd", max_out);
    if (src.pos == src.size) {
      if (rc == 0) {
        t_zstd_dctx = std::move(owned);
        return std::move(sink).take();
      }
      if (dst.pos < dst.size) return fail("zstd", "truncated frame");
    }
  }
}

Result zstd(std::span<const std::byte> in) {
  // Level 3 is Kafka's default for zstd (and zstd's own).
  std::vector<std::byte> out(ZSTD_compressBound(in.size()));
  std::size_t n = ZSTD_compress(out.data(), out.size(), in.data(), in.size(), 3);
  if (ZSTD_isError(n)) return fail("zstd", std::string("compress failed: ") + ZSTD_getErrorName(n));
  out.resize(n);
  return out;
}

}  // namespace

const char* codec_name(Codec c) {
  switch (c) {
    case Codec::none:
      return "none";
    case Codec::gzip:
      return "gzip";
    case Codec::snappy:
      return "snappy";
    case Codec::lz4:
      return "lz4";
    case Codec::zstd:
      return "zstd";
  }
  return "unknown";
}

std::expected<std::vector<std::byte>, std::string> decompress(Codec c,
                                                              std::span<const std::byte> in,
                                                              std::size_t max_out) {
  switch (c) {
    case Codec::none:
      if (in.size() > max_out) return too_big("none", max_out);
      return std::vector<std::byte>(in.begin(), in.end());
    case Codec::gzip:
      return gunzip(in, max_out);
    case Codec::snappy:
      return unsnappy(in, max_out);
    case Codec::lz4:
      return unlz4(in, max_out);
    case Codec::zstd:
      return unzstd(in, max_out);
  }
  return std::unexpected("unknown codec " + std::to_string(static_cast<int>(c)));
}

std::expected<std::vector<std::byte>, std::string> compress(Codec c,
                                                            std::span<const std::byte> in) {
  switch (c) {
    case Codec::none:
      return std::vector<std::byte>(in.begin(), in.end());
    case Codec::gzip:
      return gzip(in);
    case Codec::snappy:
      return snappy_xerial(in);
    case Codec::lz4:
      return lz4(in);
    case Codec::zstd:
      return zstd(in);
  }
  return std::unexpected("unknown codec " + std::to_string(static_cast<int>(c)));
}

}  // namespace samsa::io
