// Batch validation on the produce path (io::Log::validate_batch: framing, CRC32C, record count
// and, for uncompressed batches, every record's framing) against the CRC32C alone over the same
// bytes, the part no validation can skip. x_baseline near 1 means validation costs little more
// than its checksum.
#include <string>
#include <vector>

#include "base/crc32c.h"
#include "io/batch_builder.h"
#include "io/log.h"
#include "perf/micro/pair.h"

namespace {

using namespace samsa;

std::vector<std::byte> make_batch(std::size_t records, std::size_t value_bytes) {
  std::vector<std::byte> buf(records * (value_bytes + 64) + 128);
  io::BatchBuilder b(buf);
  const std::string value(value_bytes, 'v');
  for (std::size_t i = 0; i < records; ++i) {
    const auto v = std::as_bytes(std::span(value));
    if (!b.add(1'700'000'000'000 + static_cast<std::int64_t>(i), std::nullopt, v)) std::abort();
  }
  const auto out = b.finish();
  return {out.begin(), out.end()};
}

void BM_ValidateBatch(benchmark::State& st) {
  const auto batch =
      make_batch(static_cast<std::size_t>(st.range(0)), static_cast<std::size_t>(st.range(1)));
  if (!io::Log::validate_batch(batch, 64u << 20)) {
    st.SkipWithError("the batch does not validate");
    return;
  }
  constexpr std::size_t kCrcStart = 21;  // the CRC covers attributes .. end
  const std::size_t reps = std::max<std::size_t>(1, (1u << 20) / batch.size());
  std::uint64_t sink = 0;
  perf::run_pair(
      st, perf::Unit::bytes, static_cast<double>(batch.size() * reps),
      [&] {
        for (std::size_t r = 0; r < reps; ++r)
          sink += io::Log::validate_batch(batch, 64u << 20)->record_count;
      },
      [&] {
        for (std::size_t r = 0; r < reps; ++r)
          sink += crc32c(0, batch.data() + kCrcStart, batch.size() - kCrcStart);
      });
  benchmark::DoNotOptimize(sink);
  st.counters["records_per_batch"] = static_cast<double>(st.range(0));
}
// (records, value bytes): librdkafka-sized 16 KiB batches of 1 KiB and of 100 B records, and a
// 1 MiB batch.
BENCHMARK(BM_ValidateBatch)
    ->Args({15, 1024})
    ->Args({140, 100})
    ->Args({1000, 1024})
    ->UseManualTime();

}  // namespace

BENCHMARK_MAIN();
