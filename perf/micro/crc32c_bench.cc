// CRC32C (base/crc32c.h, SSE4.2 when present) against a table-driven CRC32C (one table lookup
// per byte, the portable textbook method), on buffers from one record to one produce request.
#include <array>
#include <cstdint>
#include <vector>

#include "base/crc32c.h"
#include "perf/micro/pair.h"

namespace {

using namespace samsa;

std::array<std::uint32_t, 256> make_table() {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k)
      c = c & 1 ? 0x82f63b78u ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
  return t;
}

const std::array<std::uint32_t, 256> kTable = make_table();

std::uint32_t crc32c_table(const unsigned char* p, std::size_t n) {
  std::uint32_t c = ~0u;
  for (std::size_t i = 0; i < n; ++i)
    c = kTable[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return ~c;
}

void BM_Crc32c(benchmark::State& st) {
  const auto n = static_cast<std::size_t>(st.range(0));
  std::vector<unsigned char> buf(n);
  for (std::size_t i = 0; i < n; ++i)
    buf[i] = static_cast<unsigned char>(i * 131 + 7);
  if (crc32c(0, buf.data(), n) != crc32c_table(buf.data(), n)) {
    st.SkipWithError("the two CRC32C implementations disagree");
    return;
  }
  // Enough repetitions per iteration that the clock's own cost is noise.
  const std::size_t reps = std::max<std::size_t>(1, (256u << 10) / n);
  std::uint32_t sink = 0;
  perf::run_pair(
      st, perf::Unit::bytes, static_cast<double>(n * reps),
      [&] {
        for (std::size_t r = 0; r < reps; ++r)
          sink ^= crc32c(0, buf.data(), n);
      },
      [&] {
        for (std::size_t r = 0; r < reps; ++r)
          sink ^= crc32c_table(buf.data(), n);
      });
  benchmark::DoNotOptimize(sink);
  st.counters["hardware"] = crc32c_hardware() ? 1 : 0;
}
BENCHMARK(BM_Crc32c)->Arg(64)->Arg(1024)->Arg(16 << 10)->Arg(1 << 20)->UseManualTime();

}  // namespace

BENCHMARK_MAIN();
