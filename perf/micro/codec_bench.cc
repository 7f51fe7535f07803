// Kafka codecs on the produce and fetch paths (net/kafka), each against memcpy of the bytes it
// handles: decoding a request frame against copying the frame (what receiving it costs anyway),
// encoding a response against copying its encoded bytes. Records are never copied by the
// codecs (views on decode, file ranges on encode), so a large x_baseline means the codec costs
// less than touching the records once would.
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "net/kafka/api.h"
#include "perf/micro/pair.h"

namespace {

using namespace samsa;

// A whole frame as one buffer, without its size prefix.
std::vector<std::byte> flatten(const net::Response& r) {
  std::vector<std::byte> out;
  for (const auto& p : r.pieces())
    out.insert(out.end(), p.bytes.data(), p.bytes.data() + p.bytes.size());
  out.erase(out.begin(), out.begin() + 4);
  return out;
}

std::size_t memory_bytes(const net::Response& r) {
  std::size_t n = 0;
  for (const auto& p : r.pieces())
    n += p.bytes.size();
  return n;
}

// Produce request: one topic, `parts` partitions, one batch of `batch` bytes each (librdkafka
// sends v7; the Java client 4.x sends flexible versions).
void BM_ProduceRequestDecode(benchmark::State& st) {
  const auto version = static_cast<std::int16_t>(st.range(0));
  const auto parts = static_cast<int>(st.range(1));
  const std::size_t batch = 16 << 10;
  std::vector<std::vector<std::byte>> batches(static_cast<std::size_t>(parts),
                                              std::vector<std::byte>(batch, std::byte{7}));
  kafka::ProduceRequest req;
  req.acks = -1;
  req.timeout_ms = 30000;
  auto& t = req.topic_data.emplace_back();
  t.name = "perf-topic";
  for (int p = 0; p < parts; ++p) {
    auto& pd = t.partition_data.emplace_back();
    pd.index = p;
    pd.records.assign(batches[static_cast<std::size_t>(p)]);
  }
  auto frame = flatten(kafka::encode_request(req, version, 1, "samsa-perf"));
  std::vector<std::byte> copy(frame.size());
  std::size_t sink = 0;
  perf::run_pair(
      st, perf::Unit::bytes, static_cast<double>(frame.size()),
      [&] {
        const auto h = kafka::decode_request_header(frame);
        kafka::ProduceRequest out;
        if (kafka::decode_request_body(frame, h, out) != kafka::DecodeError::none) std::abort();
        sink += out.topic_data[0].partition_data.size();
      },
      [&] {
        std::memcpy(copy.data(), frame.data(), frame.size());
        benchmark::ClobberMemory();
      });
  benchmark::DoNotOptimize(sink);
  st.counters["frame_bytes"] = static_cast<double>(frame.size());
}
BENCHMARK(BM_ProduceRequestDecode)->Args({7, 16})->Args({9, 16})->Args({9, 1000})->UseManualTime();

void BM_ProduceResponseEncode(benchmark::State& st) {
  const auto version = static_cast<std::int16_t>(st.range(0));
  const auto parts = static_cast<int>(st.range(1));
  kafka::ProduceResponse resp;
  auto& t = resp.responses.emplace_back();
  t.name = "perf-topic";
  for (int p = 0; p < parts; ++p) {
    auto& pr = t.partition_responses.emplace_back();
    pr.index = p;
    pr.base_offset = 123456789 + p;
  }
  const std::size_t bytes = memory_bytes(kafka::encode_response(resp, version, 1));
  std::vector<std::byte> src(bytes, std::byte{1}), dst(bytes);
  std::size_t sink = 0;
  perf::run_pair(
      st, perf::Unit::items, 1, [&] { sink += kafka::encode_response(resp, version, 1).size(); },
      [&] {
        std::memcpy(dst.data(), src.data(), bytes);
        benchmark::ClobberMemory();
      });
  benchmark::DoNotOptimize(sink);
  st.counters["response_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_ProduceResponseEncode)->Args({7, 16})->Args({9, 16})->Args({9, 1000})->UseManualTime();

// Fetch request: one topic, `parts` partitions (librdkafka 2.0 sends v11; 12+ is flexible).
void BM_FetchRequestDecode(benchmark::State& st) {
  const auto version = static_cast<std::int16_t>(st.range(0));
  const auto parts = static_cast<int>(st.range(1));
  kafka::FetchRequest req;
  req.max_wait_ms = 500;
  req.min_bytes = 1;
  req.session_epoch = -1;
  auto& t = req.topics.emplace_back();
  t.topic = "perf-topic";
  for (int p = 0; p < parts; ++p) {
    auto& fp = t.partitions.emplace_back();
    fp.partition = p;
    fp.fetch_offset = 1'000'000 + p;
    fp.partition_max_bytes = 1 << 20;
  }
  auto frame = flatten(kafka::encode_request(req, version, 1, "samsa-perf"));
  std::vector<std::byte> copy(frame.size());
  std::size_t sink = 0;
  perf::run_pair(
      st, perf::Unit::items, 1,
      [&] {
        const auto h = kafka::decode_request_header(frame);
        kafka::FetchRequest out;
        if (kafka::decode_request_body(frame, h, out) != kafka::DecodeError::none) std::abort();
        sink += out.topics[0].partitions.size();
      },
      [&] {
        std::memcpy(copy.data(), frame.data(), frame.size());
        benchmark::ClobberMemory();
      });
  benchmark::DoNotOptimize(sink);
  st.counters["frame_bytes"] = static_cast<double>(frame.size());
}
BENCHMARK(BM_FetchRequestDecode)->Args({11, 16})->Args({12, 16})->Args({12, 1000})->UseManualTime();

// Fetch response: `parts` partitions, each one stored range of a segment file (never copied:
// the encoder only writes the fields around them). Thousands of ranges is a follower or a
// consumer of many partitions.
void BM_FetchResponseEncode(benchmark::State& st) {
  const auto version = static_cast<std::int16_t>(st.range(0));
  const auto parts = static_cast<int>(st.range(1));
  const int fd = ::open("/dev/zero", O_RDONLY);
  kafka::FetchResponse resp;
  auto& t = resp.responses.emplace_back();
  t.topic = "perf-topic";
  for (int p = 0; p < parts; ++p) {
    auto& pd = t.partitions.emplace_back();
    pd.partition_index = p;
    pd.high_watermark = 5'000'000;
    pd.last_stable_offset = 5'000'000;
    pd.log_start_offset = 0;
    pd.records.add_file(net::FileRange{nullptr, fd, static_cast<std::uint64_t>(p) << 20, 65536});
  }
  const std::size_t bytes = memory_bytes(kafka::encode_response(resp, version, 1));
  std::vector<std::byte> src(bytes, std::byte{1}), dst(bytes);
  std::size_t sink = 0;
  perf::run_pair(
      st, perf::Unit::items, 1,
      [&] { sink += kafka::encode_response(resp, version, 1).pieces().size(); },
      [&] {
        std::memcpy(dst.data(), src.data(), bytes);
        benchmark::ClobberMemory();
      });
  benchmark::DoNotOptimize(sink);
  ::close(fd);
  st.counters["encoded_bytes"] = static_cast<double>(bytes);
  st.counters["file_ranges"] = parts;
}
BENCHMARK(BM_FetchResponseEncode)
    ->Args({11, 16})
    ->Args({12, 16})
    ->Args({12, 1000})
    ->Args({12, 5000})
    ->UseManualTime();

}  // namespace

BENCHMARK_MAIN();
