// Offset index lookup (io's OffsetIndexView::floor_offset over Kafka's big-endian 8-byte
// entries, what every fetch of a closed segment does) against std::upper_bound over the same
// offsets held as native int32s: the cost of searching the on-disk layout in place.
// (io/segment.h is io's internal header; a benchmark may look inside, as its tests do.)
#include <algorithm>
#include <random>
#include <vector>

#include "base/bytes.h"
#include "io/segment.h"
#include "perf/micro/pair.h"

namespace {

using namespace samsa;

void BM_IndexLookup(benchmark::State& st) {
  const auto entries = static_cast<std::size_t>(st.range(0));
  std::vector<std::byte> bytes(entries * io::detail::kOffsetEntrySize);
  std::vector<std::int32_t> native(entries);
  for (std::size_t i = 0; i < entries; ++i) {
    // One entry per ~4 KiB of 1 KiB records: relative offsets step by 4.
    const auto rel = static_cast<std::int32_t>(i * 4 + 3);
    store_be<std::int32_t>(bytes.data() + i * 8, rel);
    store_be<std::int32_t>(bytes.data() + i * 8 + 4, static_cast<std::int32_t>(i * 4096));
    native[i] = rel;
  }
  const io::detail::OffsetIndexView view{bytes};
  constexpr std::size_t kLookups = 1024;
  std::mt19937 rng(1);
  std::uniform_int_distribution<std::int64_t> d(0, static_cast<std::int64_t>(entries * 4));
  std::vector<std::int64_t> keys(kLookups);
  for (auto& k : keys)
    k = d(rng);
  for (auto k : keys) {
    const auto a = view.floor_offset(k);
    const auto b = std::upper_bound(native.begin(), native.end(), k) - native.begin() - 1;
    if (a != b) {
      st.SkipWithError("the two searches disagree");
      return;
    }
  }
  std::int64_t sink = 0;
  perf::run_pair(
      st, perf::Unit::items, kLookups,
      [&] {
        for (auto k : keys)
          sink += view.floor_offset(k);
      },
      [&] {
        for (auto k : keys)
          sink += std::upper_bound(native.begin(), native.end(), k) - native.begin();
      });
  benchmark::DoNotOptimize(sink);
}
// A 1 MiB-segment's index (256 entries), a default 1 GiB segment's (262144 entries, 2 MiB), and
// a full 10 MiB index file (segment.index.bytes).
BENCHMARK(BM_IndexLookup)->Arg(256)->Arg(262144)->Arg(1310720)->UseManualTime();

}  // namespace

BENCHMARK_MAIN();
