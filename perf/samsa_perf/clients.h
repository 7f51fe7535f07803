// The load: Producer (one librdkafka producer, a sending thread and a polling thread) and
// Consumer (one librdkafka consumer and its thread). Both own their threads; the run starts
// and joins them.
//
// Records carry their intended send time: the first 8 bytes of a value of at least 16 bytes are
// the monotonic nanoseconds at which the record was due, the next 8 a marker. Monotonic time is
// system-wide, so consumers in other processes of the same machine can read it.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "perf/samsa_perf/client.h"
#include "perf/samsa_perf/options.h"
#include "perf/samsa_perf/stats.h"

namespace samsa::perf {

inline constexpr std::uint64_t kStampMarker = 0x3146505341534d53ull;  // "SMSASPF1"

// The shared clock of one run (monotonic ns).
struct Window {
  std::int64_t start = 0;  // producers begin (the open-loop schedule's origin)
  std::int64_t begin = 0;  // measurement begins (start + warm-up)
  std::int64_t end = 0;    // measurement ends; producers stop sending
  bool contains(std::int64_t t) const { return t >= begin && t < end; }
};

class Producer {
 public:
  // index: this producer among all producers of the run (all processes); total: their number.
  Producer(const Options& o, int index, int total, std::vector<int> partitions_per_topic);
  ~Producer();
  std::expected<void, std::string> start(const Window& w);
  // True once the sending thread stopped and every record is acknowledged or the drain
  // deadline passed.
  bool finished() const { return finished_.load(std::memory_order_acquire); }
  void join();
  Counters& counters() { return counters_; }
  std::int64_t in_flight() const;
  const std::string& error() const { return error_; }

 private:
  static void on_delivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque);
  static int on_stats(rd_kafka_t*, char* json, std::size_t len, void* opaque);
  void send_loop();
  void poll_loop();

  const Options& o_;
  int index_, total_;
  std::vector<int> partitions_;
  Window w_;
  Client rk_;
  std::vector<rd_kafka_topic_t*> topics_;
  std::vector<char> value_;  // records refer to it until acknowledged (no copy per record)
  Counters counters_;
  std::atomic<bool> sending_done_{false}, finished_{false};
  std::atomic<std::int64_t> sent_{0};
  std::string error_;
  std::FILE* stats_ = nullptr;  // --rdkafka-stats, producer 0 only; written by the poller
  std::thread sender_, poller_;
};

class Consumer {
 public:
  struct Assignment {
    int topic;  // index into o.topic_names()
    int partition;
    std::int64_t start;        // offset, or RD_KAFKA_OFFSET_BEGINNING
    std::int64_t target = -1;  // stop once the position reaches this (-1: no target)
  };
  Consumer(const Options& o, int index, std::vector<Assignment> parts);
  ~Consumer();
  std::expected<void, std::string> start(const Window& w, bool record_latency);
  // Sets the offsets at which to stop (e2e, once producers are done); indexed like the
  // assignment.
  void set_targets(const std::vector<std::int64_t>& targets);
  void stop() { stop_.store(true, std::memory_order_release); }
  bool finished() const { return finished_.load(std::memory_order_acquire); }
  // True if it stopped because every partition reached its target.
  bool reached_end() const { return reached_.load(std::memory_order_acquire); }
  void join();
  Counters& counters() { return counters_; }
  const std::vector<Assignment>& assignment() const { return parts_; }
  const std::string& error() const { return error_; }

 private:
  void loop();
  bool reached_targets() const;

  const Options& o_;
  int index_;
  std::vector<Assignment> parts_;
  std::vector<std::string> names_;
  std::vector<std::int64_t> position_;  // next offset per assignment slot
  std::vector<std::atomic<std::int64_t>> targets_;
  std::atomic<bool> targets_set_{false};
  Window w_;
  bool record_latency_ = false;
  Client rk_;
  Counters counters_;
  std::atomic<bool> stop_{false}, finished_{false}, reached_{false};
  std::string error_;
  std::thread thread_;
};

}  // namespace samsa::perf
