// Hostile input: every message of every api, at a few versions, with each byte in turn
// replaced by values that make lengths negative, huge or null; whole frames (real client
// captures) cut at every byte; explicit absurd counts. Decoding must fail or succeed cleanly
// (no crash; the sanitizer build checks memory errors) and never allocate more than a small
// multiple of the input: a frame cannot make the broker reserve gigabytes by claiming a count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <new>
#include <type_traits>
#include <vector>

#include "net/kafka/api.h"
#include "net/kafka/gen/testing.h"

// Records the largest single allocation while `g_tracking` is set (this binary only). The
// replacement operators pair malloc with free, which gcc cannot see through once inlined.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
namespace {
bool g_tracking = false;
std::size_t g_largest = 0;
}  // namespace

void* operator new(std::size_t n) {
  if (g_tracking && n > g_largest) g_largest = n;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  return operator new(n);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}

namespace samsa::kafka {
namespace {

// Allowed bytes of allocation per byte of input. Decoded structs are bigger than their
// encoding (a 2-byte compact struct may become a 100-byte C++ object), so the bound is a
// ratio, not the input size.
constexpr std::size_t kAllocationPerInputByte = 256;
constexpr std::size_t kAllocationSlack = 4096;

struct Tracking {
  Tracking() {
    g_largest = 0;
    g_tracking = true;
  }
  ~Tracking() { g_tracking = false; }
  std::size_t largest() const { return g_largest; }
};

template <class M>
std::vector<std::byte> encode_body(const M& m, std::int16_t version) {
  Writer w(false);
  m.encode(w, version);
  return flatten(w.finish());
}

std::size_t g_worst_ratio = 0;

template <class M>
void mutate_every_byte(std::int16_t version) {
  SCOPED_TRACE(std::string(M::kName) + " v" + std::to_string(version));
  testing::Filler filler(static_cast<std::uint32_t>(version) + 11);
  M m;
  testing::fill(m, version, filler);
  const std::vector<std::byte> good = encode_body(m, version);
  static constexpr std::uint8_t kValues[] = {0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff};
  std::vector<std::byte> bad = good;
  for (std::size_t i = 0; i < good.size(); ++i) {
    for (std::uint8_t value : kValues) {
      bad[i] = std::byte(value);
      M d;
      std::size_t largest;
      bool ok;
      {
        Tracking t;
        Reader r(bad);
        ok = d.decode(r, version);
        largest = t.largest();
        if (!ok) {
          EXPECT_NE(r.error(), DecodeError::none);
        }
      }
      ASSERT_LE(largest, kAllocationPerInputByte * bad.size() + kAllocationSlack)
          << "byte " << i << " = " << int(value) << (ok ? " (decoded)" : " (rejected)");
      g_worst_ratio = std::max(g_worst_ratio, largest / bad.size());
      if (ok) {
        // Whatever decoded must encode and decode to itself.
        auto again = encode_body(d, version);
        M d2;
        Reader r2(again);
        ASSERT_TRUE(d2.decode(r2, version));
        EXPECT_TRUE(d2 == d);
      }
    }
    bad[i] = good[i];
  }
}

template <class M>
void mutate_versions() {
  std::vector<int> versions = {M::kMinVersion, M::kMaxVersion};
  if (M::kFirstFlexibleVersion > M::kMinVersion) {
    versions.push_back(M::kFirstFlexibleVersion - 1);
    versions.push_back(M::kFirstFlexibleVersion);
  }
  std::sort(versions.begin(), versions.end());
  versions.erase(std::unique(versions.begin(), versions.end()), versions.end());
  for (int v : versions)
    mutate_every_byte<M>(static_cast<std::int16_t>(v));
}

TEST(KafkaMalformed, EveryByteOfEveryMessage) {
  testing::for_each_message([]<class M>(std::type_identity<M>) { mutate_versions<M>(); });
  std::printf("worst allocation/input ratio: %zu\n", g_worst_ratio);
}

// Real frames, cut anywhere: the header and body decoders both stop cleanly.
TEST(KafkaMalformed, GoldenFramesCutAtEveryByte) {
  namespace fs = std::filesystem;
  std::size_t files = 0;
  std::error_code ec;
  for (const auto& e :
       fs::recursive_directory_iterator(fs::path(SAMSA_TEST_SOURCE_DIR) / "golden", ec)) {
    if (e.path().extension() != ".bin") continue;
    ++files;
    std::ifstream in(e.path(), std::ios::binary);
    std::vector<char> chars((std::istreambuf_iterator<char>(in)), {});
    std::vector<std::byte> frame(chars.size());
    std::transform(chars.begin(), chars.end(), frame.begin(), [](char c) { return std::byte(c); });
    for (std::size_t cut = 0; cut < frame.size(); ++cut) {
      std::vector<std::byte> prefix(frame.begin(),
                                    frame.begin() + static_cast<std::ptrdiff_t>(cut));
      Tracking t;
      auto h = decode_request_header(prefix);
      bool decoded = false;
      if (h.ok()) {
        visit_api(h.header.request_api_key,
                  [&]<class Req, class Resp>(std::type_identity<Req>, std::type_identity<Resp>) {
                    Req req;
                    decoded = decode_request_body(prefix, h, req) == DecodeError::none;
                  });
      }
      EXPECT_FALSE(decoded) << e.path() << " cut at " << cut;
      EXPECT_LE(t.largest(), kAllocationPerInputByte * frame.size() + kAllocationSlack);
    }
  }
  EXPECT_GT(files, 0u);
}

// A request frame: header for (key, version), then whatever `body` writes.
template <class F>
std::vector<std::byte> frame_of(std::int16_t key, std::int16_t version, F&& body) {
  Writer w(false);
  RequestHeader h;
  h.request_api_key = key;
  h.request_api_version = version;
  h.correlation_id = 1;
  h.client_id = std::nullopt;
  h.encode(w, request_header_version(key, version));
  body(w);
  return flatten(w.finish());
}

TEST(KafkaMalformed, AbsurdCountsAllocateNothingBig) {
  struct Case {
    const char* what;
    std::vector<std::byte> frame;
    DecodeError want;
  };
  const Case cases[] = {
      {"produce v9: 2^32-2 topics",
       frame_of(0, 9,
                [](Writer& w) {
                  w.uvarint(0);  // TransactionalId null
                  w.i16(-1);     // acks
                  w.i32(1000);   // timeout
                  w.uvarint(0xffffffffu);
                }),
       DecodeError::length_too_large},
      {"metadata v1: 2^31-1 topics",
       frame_of(3, 1,
                [](Writer& w) {
                  w.i32(0x7fffffff);
                  w.i16(1);
                }),
       DecodeError::length_too_large},
      {"fetch v4: 2^31-1 partitions",
       frame_of(1, 4,
                [](Writer& w) {
                  w.i32(-1);  // replica id
                  w.i32(0);   // max wait
                  w.i32(0);   // min bytes
                  w.i32(0);   // max bytes
                  w.i8(0);    // isolation level
                  w.i32(1);   // one topic
                  w.string("t", false);
                  w.i32(0x7fffffff);
                  w.i32(0);
                }),
       DecodeError::length_too_large},
      {"produce v8: records of 1 GiB",
       frame_of(0, 8,
                [](Writer& w) {
                  w.i16(-1);  // TransactionalId null
                  w.i16(-1);
                  w.i32(1000);
                  w.i32(1);
                  w.string("t", false);
                  w.i32(1);
                  w.i32(0);        // partition index
                  w.i32(1 << 30);  // records length
                  w.raw("abc", 3);
                }),
       DecodeError::length_too_large},
      {"metadata v1: topic name of length -7",
       frame_of(3, 1,
                [](Writer& w) {
                  w.i32(1);
                  w.i16(-7);
                }),
       DecodeError::negative_length},
      {"create topics v5: endless varint",
       frame_of(19, 5,
                [](Writer& w) {
                  const std::uint8_t endless[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80};
                  w.raw(endless, sizeof endless);
                }),
       DecodeError::varint_overflow},
      {"metadata v0: null topics", frame_of(3, 0, [](Writer& w) { w.i32(-1); }),
       DecodeError::null_not_allowed},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::vector<std::byte> frame = c.frame;
    Tracking t;
    auto h = decode_request_header(frame);
    ASSERT_TRUE(h.ok()) << decode_error_name(h.error);
    DecodeError got = DecodeError::none;
    ASSERT_TRUE(
        visit_api(h.header.request_api_key,
                  [&]<class Req, class Resp>(std::type_identity<Req>, std::type_identity<Resp>) {
                    Req req;
                    got = decode_request_body(frame, h, req);
                  }));
    EXPECT_EQ(got, c.want) << decode_error_name(got);
    EXPECT_LE(t.largest(), 4096u);
  }
}

}  // namespace
}  // namespace samsa::kafka
