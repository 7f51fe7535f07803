// The controller at scale (issue 23): the production ControllerState with 100 brokers and
// 1,000,000 partitions (RF 3), timed on one thread.
//  - creating the partitions (CreateTopics decisions, then their commit);
//  - a broker fenced (its session expired): the decision that moves its leaderships and ISR
//    places, the commit of those records, and a broker's image applying them;
//  - the memory of one metadata image of that size (what every broker holds), from the RSS.
// Not part of CI: perf/README.md says how to run it; figures go to perf/RESULTS.md.
//
// Usage: controller_scale [--brokers N] [--partitions N] [--per-topic N]
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "replication/controller_state.h"

namespace {

using namespace samsa::replication;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Resident set size in bytes (/proc/self/statm's second field, in pages).
std::int64_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  std::int64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * 4096;
}

struct Args {
  int brokers = 100;
  std::int64_t partitions = 1'000'000;
  int per_topic = 1000;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--brokers")) a.brokers = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--partitions")) a.partitions = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--per-topic")) a.per_topic = std::atoi(argv[i + 1]);
  }
  return a;
}

Uuid id_of(std::uint64_t n, std::uint8_t tag) {
  Uuid u{};
  for (int i = 0; i < 8; ++i)
    u[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(n >> (8 * i));
  u[15] = tag;
  return u;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  std::uint64_t next_topic = 0;
  ControllerStateOptions o;
  o.max_partitions = a.partitions * 2;
  o.max_partitions_per_request = a.partitions;
  o.new_topic_id = [&next_topic] { return id_of(++next_topic, 1); };
  ControllerState cs(o);
  cs.on_become_active(0, 0);
  std::vector<std::int64_t> epochs(static_cast<std::size_t>(a.brokers) + 1, -1);
  for (int b = 1; b <= a.brokers; ++b) {
    auto reg =
        cs.register_broker({b, id_of(static_cast<std::uint64_t>(b), 2), {}, std::nullopt}, 0);
    epochs[static_cast<std::size_t>(b)] = reg.answer.broker_epoch;
    cs.heartbeat({b, reg.answer.broker_epoch, cs.next_offset(), false, false}, 0);
  }
  cs.commit(cs.next_offset() - 1);

  const std::int64_t rss0 = rss_bytes();
  auto t0 = Clock::now();
  std::vector<TopicSpec> specs;
  const std::int64_t topics = a.partitions / a.per_topic;
  for (std::int64_t t = 0; t < topics; ++t)
    specs.push_back({"topic-" + std::to_string(t), a.per_topic, 3, {}});
  auto created = cs.create_topics(std::move(specs), false);
  const double decide_ms = ms_since(t0);
  for (const auto& out : created.answer)
    if (out.error != samsa::kafka::ErrorCode::none) {
      std::fprintf(stderr, "creation failed: %s\n", out.message.c_str());
      return 1;
    }
  t0 = Clock::now();
  cs.commit(cs.next_offset() - 1);
  ImagePtr committed = cs.committed_image();
  const double commit_ms = ms_since(t0);
  const std::int64_t rss_two_views = rss_bytes() - rss0;
  const std::size_t records = created.records.size();
  created = {};

  // One broker's image: the same records replayed into a fresh MetadataImage.
  const std::int64_t rss1 = rss_bytes();
  auto broker_image = std::make_shared<MetadataImage>();
  for (const auto& r : cs.snapshot())
    broker_image->apply(r);
  const std::int64_t image_bytes = rss_bytes() - rss1;

  // A broker's session expires: its leaderships move and it leaves every ISR.
  const int victim = 1 + a.brokers / 2;
  std::int64_t led = 0;
  for (const auto& [name, t] : committed->topics())
    for (const auto& p : t->partitions)
      led += p.leader == victim;
  t0 = Clock::now();
  auto fence = cs.heartbeat(
      {victim, epochs[static_cast<std::size_t>(victim)], cs.next_offset(), true, false}, 1);
  const double fence_decide_ms = ms_since(t0);
  t0 = Clock::now();
  cs.commit(cs.next_offset() - 1);
  ImagePtr after = cs.committed_image();
  const double fence_commit_ms = ms_since(t0);
  t0 = Clock::now();
  auto next = std::make_shared<MetadataImage>(*broker_image);
  for (const auto& r : fence.records)
    next->apply(r);
  const double broker_apply_ms = ms_since(t0);
  std::int64_t still_led = 0;
  for (const auto& [name, t] : after->topics())
    for (const auto& p : t->partitions)
      still_led += p.leader == victim;

  std::printf("controller_scale: %d brokers, %" PRId64 " partitions (%" PRId64
              " topics x %d, RF 3)\n",
              a.brokers, a.partitions, topics, a.per_topic);
  std::printf("  create: decide %.0f ms, commit %.0f ms (%zu records; %.0f partitions/s)\n",
              decide_ms, commit_ms, records,
              static_cast<double>(a.partitions) / ((decide_ms + commit_ms) / 1000.0));
  std::printf("  memory: one image %.1f MiB (%.0f B/partition); controller's two views %.1f MiB\n",
              static_cast<double>(image_bytes) / (1 << 20),
              static_cast<double>(image_bytes) / static_cast<double>(a.partitions),
              static_cast<double>(rss_two_views) / (1 << 20));
  std::printf("  broker %d fenced: led %" PRId64 " partitions (%" PRId64
              " after); %zu records; controller time: decide %.0f ms + commit %.0f ms = %.0f ms; "
              "a broker applies them in %.0f ms\n",
              victim, led, still_led, fence.records.size(), fence_decide_ms, fence_commit_ms,
              fence_decide_ms + fence_commit_ms, broker_apply_ms);
  return still_led == 0 ? 0 : 1;
}
