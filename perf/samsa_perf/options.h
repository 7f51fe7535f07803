// samsa-perf's command line: one Options value, parsed once in main and copied into every
// worker (thread or child process).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace samsa::perf {

enum class Mode { produce, consume, e2e };

struct Options {
  Mode mode = Mode::produce;
  std::string bootstrap = "127.0.0.1:9092";
  std::string topic = "samsa-perf";
  int topics = 1;       // >1: topic-0 .. topic-(n-1)
  int partitions = 16;  // for --create, and the pinned mapping
  bool create = false;
  std::vector<std::pair<std::string, std::string>> topic_config;  // --topic-config k=v
  int record_size = 1024;
  int keys = 0;  // distinct keys cycled through; 0: null keys
  std::string acks = "all";
  std::string compression = "none";
  std::optional<double> linger_ms;
  std::optional<int> batch_size;
  int producers = 1;
  int consumers = 1;
  int processes = 1;
  double rate = 0;  // records/s over all producers; 0: as fast as possible
  double duration_s = 10;
  double warmup_s = 2;
  double drain_s = 15;          // after the window: wait this long at most for outstanding acks
  std::int64_t records = 0;     // produce: stop after this many (0: run for the duration)
  bool pin_partitions = false;  // producer g writes only partition g % partitions
  bool round_robin = false;     // records spread over partitions in turn (else the client's
                                // partitioner: sticky for null keys, hash for keys)
  bool until_end = false;       // consume: stop at the high watermarks seen at the start
  bool from_end = false;        // consume: start at the end (default: beginning)
  std::vector<std::pair<std::string, std::string>> rdkafka;         // -X k=v, every client
  std::vector<std::pair<std::string, std::string>> producer_props;  // -P k=v
  std::vector<std::pair<std::string, std::string>> consumer_props;  // -C k=v
  // Also time each record from its rd_kafka_produce() call (librdkafka's own clock), as
  // closed-loop tools do; the latency from the intended send time stays the primary figure.
  bool call_latency = false;
  // Produce: every record carries its intended send time (as e2e's do), at the cost of a copy
  // per record; perf/stand_in reads it to time each record from its side (the known answer).
  bool stamp = false;
  // Producer 0 (of the first process) appends librdkafka's statistics JSON here once a second:
  // its queue wait (int_latency) and request round trips (rtt) split a latency in two.
  std::string rdkafka_stats;
  std::string json;  // path, "-" for stdout, empty: none
  bool quiet = false;

  // Set for a child process of --processes: which one and how many.
  int worker = 0;
  int workers = 1;

  std::vector<std::string> topic_names() const;
};

// Parses argv; on a usage error prints it (with the usage text) and returns nullopt.
std::optional<Options> parse_options(int argc, char** argv);

const char* mode_name(Mode m);

}  // namespace samsa::perf
