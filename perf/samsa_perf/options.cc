#include "perf/samsa_perf/options.h"

#include <charconv>
#include <cstdio>
#include <cstring>
#include <string_view>

namespace samsa::perf {

namespace {

constexpr const char* kUsage = R"(usage: samsa-perf produce|consume|e2e [options]

  produce   producers only; latency from the intended send time to the delivery report
  consume   consumers only; throughput (and, for records samsa-perf wrote, age at consumption)
  e2e       producers and consumers in one process; latency from the intended send time to
            the consumption of the record, and produce latency as above

connection and topics
  -b, --bootstrap HOST:PORT   broker (default 127.0.0.1:9092)
  -t, --topic NAME            topic (default samsa-perf)
      --topics N              N topics NAME-0 .. NAME-(N-1) (default 1: NAME itself)
  -p, --partitions N          partitions per topic, for --create and --pin-partitions (16)
      --create                create the topics (replication factor 1) when absent
      --topic-config K=V      topic config for --create (repeatable)
records
  -s, --record-size BYTES     value size (default 1024; >= 16 carries the send time)
      --keys N                N distinct keys, cycled (default 0: null keys)
producer
      --acks 0|1|all          (default all)
      --compression CODEC     none|gzip|snappy|lz4|zstd (default none)
      --linger-ms MS          linger.ms (default: the client's, 5)
      --batch-size BYTES      batch.size (default: the client's, 1000000)
      --producers N           producer clients, one thread and one connection each (1)
      --rate R                records/s over all producers, open loop: latency counts from
                              each record's intended send time (default: max throughput)
      --rate-mb MBPS          the same in MB/s (10^6 bytes of values and keys)
      --records N             stop after N records instead of the duration
      --pin-partitions        producer g writes only partition g % partitions
      --round-robin           spread records over partitions in turn (default: the
                              client's partitioner, sticky for null keys)
      --call-latency          also report produce latency from each record's produce() call
                              (as ProducerPerformance and rdkafka_performance time it; it
                              hides the time a record waited for its turn, so it is only for
                              comparing with such tools)
      --stamp                 stamp every record's intended send time into its value (as
                              e2e does; a copy per record): perf/stand_in's known answer
      --rdkafka-stats FILE    append librdkafka's statistics JSON of the first producer to
                              FILE once a second (one object a line)
consumer
      --consumers N           consumer clients (threads), partitions split between them (1)
      --until-end             stop at the high watermarks read at the start (consume mode)
      --from-end              start at the end of the log (consume mode; default beginning)
run
  -d, --duration S            measured seconds (default 10)
  -w, --warmup S              seconds before the measurement (default 2; 0 for consume)
      --drain S               after the window, wait at most S for outstanding acks (15)
      --processes K           split producers and consumers over K processes (default 1)
  -X K=V                      librdkafka property for every client (repeatable)
  -P K=V / -C K=V             librdkafka property for producers / consumers only
      --json FILE             results as JSON (- for stdout)
  -q, --quiet                 no progress line (it goes to stderr once a second)
)";

bool usage_error(const char* fmt, std::string_view arg) {
  std::fprintf(stderr, "samsa-perf: ");
  std::fprintf(stderr, fmt, std::string(arg).c_str());
  std::fprintf(stderr, "\n\n%s", kUsage);
  return false;
}

template <class T>
bool parse_num(std::string_view s, T& out) {
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc{} && p == end;
}

bool parse_kv(std::string_view s, std::vector<std::pair<std::string, std::string>>& out) {
  const auto eq = s.find('=');
  if (eq == std::string_view::npos || eq == 0) return false;
  out.emplace_back(std::string(s.substr(0, eq)), std::string(s.substr(eq + 1)));
  return true;
}

}  // namespace

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::produce:
      return "produce";
    case Mode::consume:
      return "consume";
    case Mode::e2e:
      return "e2e";
  }
  return "?";
}

std::vector<std::string> Options::topic_names() const {
  if (topics <= 1) return {topic};
  std::vector<std::string> v;
  for (int i = 0; i < topics; ++i)
    v.push_back(topic + "-" + std::to_string(i));
  return v;
}

namespace {

// A flag without a value: true when a is one (o updated).
bool take_flag(std::string_view a, Options& o) {
  if (a == "--create") {
    o.create = true;
    return true;
  }
  if (a == "--pin-partitions") {
    o.pin_partitions = true;
    return true;
  }
  if (a == "--round-robin") {
    o.round_robin = true;
    return true;
  }
  if (a == "--until-end") {
    o.until_end = true;
    return true;
  }
  if (a == "--from-end") {
    o.from_end = true;
    return true;
  }
  if (a == "--call-latency") {
    o.call_latency = true;
    return true;
  }
  if (a == "--stamp") {
    o.stamp = true;
    return true;
  }
  if (a == "-q" || a == "--quiet") {
    o.quiet = true;
    return true;
  }
  if (a == "-h" || a == "--help") {
    std::fputs(kUsage, stdout);
    std::exit(0);
  }
  return false;
}

enum class Parsed : std::uint8_t { ok, bad, unknown };

Parsed ok_if(bool b) {
  return b ? Parsed::ok : Parsed::bad;
}

// An option with a value.
Parsed take_option(std::string_view name, std::string_view val, Options& o, double& rate_mb) {
  if (name == "-b" || name == "--bootstrap") {
    o.bootstrap = val;
  } else if (name == "-t" || name == "--topic") {
    o.topic = val;
  } else if (name == "--topics") {
    return ok_if(parse_num(val, o.topics) && o.topics >= 1);
  } else if (name == "-p" || name == "--partitions") {
    return ok_if(parse_num(val, o.partitions) && o.partitions >= 1);
  } else if (name == "--topic-config") {
    return ok_if(parse_kv(val, o.topic_config));
  } else if (name == "-s" || name == "--record-size") {
    return ok_if(parse_num(val, o.record_size) && o.record_size >= 0);
  } else if (name == "--keys") {
    return ok_if(parse_num(val, o.keys) && o.keys >= 0);
  } else if (name == "--acks") {
    o.acks = val == "-1" ? "all" : std::string(val);
    return ok_if(val == "0" || val == "1" || val == "all" || val == "-1");
  } else if (name == "--compression") {
    o.compression = val;
    return ok_if(val == "none" || val == "gzip" || val == "snappy" || val == "lz4" ||
                 val == "zstd");
  } else if (name == "--linger-ms") {
    double v = 0;
    const bool ok = parse_num(val, v) && v >= 0;
    o.linger_ms = v;
    return ok_if(ok);
  } else if (name == "--batch-size") {
    int v = 0;
    const bool ok = parse_num(val, v) && v > 0;
    o.batch_size = v;
    return ok_if(ok);
  } else if (name == "--producers") {
    return ok_if(parse_num(val, o.producers) && o.producers >= 0);
  } else if (name == "--consumers") {
    return ok_if(parse_num(val, o.consumers) && o.consumers >= 0);
  } else if (name == "--processes") {
    return ok_if(parse_num(val, o.processes) && o.processes >= 1);
  } else if (name == "--rate") {
    return ok_if(parse_num(val, o.rate) && o.rate >= 0);
  } else if (name == "--rate-mb") {
    return ok_if(parse_num(val, rate_mb) && rate_mb >= 0);
  } else if (name == "--records") {
    return ok_if(parse_num(val, o.records) && o.records >= 0);
  } else if (name == "-d" || name == "--duration") {
    return ok_if(parse_num(val, o.duration_s) && o.duration_s > 0);
  } else if (name == "-w" || name == "--warmup") {
    return ok_if(parse_num(val, o.warmup_s) && o.warmup_s >= 0);
  } else if (name == "--drain") {
    return ok_if(parse_num(val, o.drain_s) && o.drain_s >= 0);
  } else if (name == "-X") {
    return ok_if(parse_kv(val, o.rdkafka));
  } else if (name == "-P") {
    return ok_if(parse_kv(val, o.producer_props));
  } else if (name == "-C") {
    return ok_if(parse_kv(val, o.consumer_props));
  } else if (name == "--json") {
    o.json = val;
  } else if (name == "--rdkafka-stats") {
    o.rdkafka_stats = val;
  } else if (name == "--worker") {  // internal: child i/K of --processes
    const auto slash = val.find('/');
    return ok_if(slash != std::string_view::npos && parse_num(val.substr(0, slash), o.worker) &&
                 parse_num(val.substr(slash + 1), o.workers) && o.worker >= 0 &&
                 o.worker < o.workers);
  } else {
    return Parsed::unknown;
  }
  return Parsed::ok;
}

// What the options imply together, or why they do not fit (false, after the usage line).
bool finish(Options& o, double rate_mb) {
  if (rate_mb > 0) {
    const int key_bytes = o.keys > 0 ? 12 : 0;
    o.rate = rate_mb * 1e6 / (o.record_size + key_bytes);
  }
  if (o.mode == Mode::consume) o.producers = 0;
  if (o.mode == Mode::produce) o.consumers = 0;
  if ((o.mode != Mode::consume && o.producers < 1) ||
      (o.mode != Mode::produce && o.consumers < 1)) {
    usage_error("this mode needs at least one producer and/or consumer%s", "");
    return false;
  }
  if (o.processes > 1 && (o.producers % o.processes != 0 || o.consumers % o.processes != 0)) {
    usage_error("--processes must divide --producers and --consumers%s", "");
    return false;
  }
  return true;
}

}  // namespace

std::optional<Options> parse_options(int argc, char** argv) {
  Options o;
  if (argc < 2) {
    usage_error("a mode is required%s", "");
    return std::nullopt;
  }
  const std::string_view mode = argv[1];
  if (mode == "produce") {
    o.mode = Mode::produce;
  } else if (mode == "consume") {
    o.mode = Mode::consume;
    o.warmup_s = 0;
  } else if (mode == "e2e") {
    o.mode = Mode::e2e;
  } else if (mode == "-h" || mode == "--help") {
    std::fputs(kUsage, stdout);
    std::exit(0);
  } else {
    usage_error("unknown mode '%s'", mode);
    return std::nullopt;
  }
  double rate_mb = 0;
  for (int i = 2; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (take_flag(a, o)) continue;
    // Options with a value: "--opt value" or "--opt=value".
    std::string_view name = a, val;
    bool inline_val = false;
    if (a.starts_with("--") && a.find('=') != std::string_view::npos) {
      name = a.substr(0, a.find('='));
      val = a.substr(a.find('=') + 1);
      inline_val = true;
    }
    if (!inline_val) {
      if (i + 1 >= argc) {
        usage_error("%s needs a value", a);
        return std::nullopt;
      }
      val = argv[++i];
    }
    switch (take_option(name, val, o, rate_mb)) {
      case Parsed::ok:
        break;
      case Parsed::unknown:
        usage_error("unknown option '%s'", a);
        return std::nullopt;
      case Parsed::bad:
        usage_error("bad value for %s", name);
        return std::nullopt;
    }
  }
  if (!finish(o, rate_mb)) return std::nullopt;
  return o;
}

}  // namespace samsa::perf
