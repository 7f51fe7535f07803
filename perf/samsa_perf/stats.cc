#include "perf/samsa_perf/stats.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <sstream>
#include <utility>

#include "perf/samsa_perf/options.h"

namespace samsa::perf {

namespace {

// Splits on spaces.
std::vector<std::string_view> fields(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && s[i] == ' ')
      ++i;
    std::size_t j = i;
    while (j < s.size() && s[j] != ' ')
      ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

std::uint64_t u64(std::string_view s) {
  return std::strtoull(std::string(s).c_str(), nullptr, 10);
}
double f64(std::string_view s) {
  return std::strtod(std::string(s).c_str(), nullptr);
}

std::string json_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

std::string num(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string us(std::uint64_t ns) {
  return num(static_cast<double>(ns) / 1000.0);
}

// Quantiles for latency curves: 0, then 1 - 10^-x in steps of x = 0.1 up to five nines.
std::vector<double> curve_quantiles() {
  std::vector<double> q{0.0};
  for (int i = 1; i <= 50; ++i)
    q.push_back(1.0 - std::pow(10.0, -i / 10.0));
  return q;
}

std::string latency_json(const Histogram& h) {
  std::ostringstream o;
  o << "{\"count\": " << h.count() << ", \"mean\": " << num(h.mean() / 1000.0)
    << ", \"min\": " << us(h.min()) << ", \"p50\": " << us(h.percentile(0.5))
    << ", \"p90\": " << us(h.percentile(0.9)) << ", \"p99\": " << us(h.percentile(0.99))
    << ", \"p99.9\": " << us(h.percentile(0.999)) << ", \"p99.99\": " << us(h.percentile(0.9999))
    << ", \"max\": " << us(h.max()) << ", \"curve\": [";
  bool first = true;
  for (double q : curve_quantiles()) {
    o << (first ? "" : ", ") << "[" << num(q) << ", " << us(h.percentile(q)) << "]";
    first = false;
  }
  o << ", [1, " << us(h.max()) << "]]}";
  return o.str();
}

std::string side_json(const Side& s) {
  std::ostringstream o;
  o << "{\"records\": " << s.records << ", \"bytes\": " << s.bytes
    << ", \"seconds\": " << num(s.seconds) << ", \"records_per_s\": " << num(s.records_per_s())
    << ", \"mb_per_s\": " << num(s.mb_per_s()) << ", \"total_records\": " << s.total_records
    << ", \"total_bytes\": " << s.total_bytes << ", \"errors\": " << s.errors
    << ", \"latency_us\": " << latency_json(s.latency);
  if (s.call_latency.count()) o << ", \"call_latency_us\": " << latency_json(s.call_latency);
  o << "}";
  return o.str();
}

std::string props_json(const std::vector<std::pair<std::string, std::string>>& v) {
  std::string s = "{";
  for (std::size_t i = 0; i < v.size(); ++i)
    s += (i ? ", \"" : "\"") + json_escape(v[i].first) + "\": \"" + json_escape(v[i].second) + "\"";
  return s + "}";
}

}  // namespace

void Side::add(const Side& o) {
  if (!o.present) return;
  present = true;
  records += o.records;
  bytes += o.bytes;
  total_records += o.total_records;
  total_bytes += o.total_bytes;
  errors += o.errors;
  seconds = std::max(seconds, o.seconds);
  latency.merge(o.latency);
  call_latency.merge(o.call_latency);
}

std::string tick_line(const Tick& t) {
  char buf[256];
  std::snprintf(
      buf, sizeof buf, "T %.3f %llu %llu %llu %llu %llu %llu\n", t.t,
      static_cast<unsigned long long>(t.p_records), static_cast<unsigned long long>(t.p_bytes),
      static_cast<unsigned long long>(t.c_records), static_cast<unsigned long long>(t.c_bytes),
      static_cast<unsigned long long>(t.p99_produce_ns),
      static_cast<unsigned long long>(t.p99_e2e_ns));
  return buf;
}

std::string side_line(const char* name, const Side& s) {
  std::ostringstream o;
  o << "S " << name << ' ' << (s.present ? 1 : 0) << ' ' << s.records << ' ' << s.bytes << ' '
    << s.total_records << ' ' << s.total_bytes << ' ' << s.errors << ' ' << num(s.seconds);
  // Each histogram: sum min max, then its non-empty buckets as index:count; "|" separates them.
  for (const Histogram* h : {&s.latency, &s.call_latency}) {
    if (h == &s.call_latency) o << " |";
    o << ' ' << h->sum() << ' ' << h->min() << ' ' << h->max();
    for (std::size_t i = 0; i < Histogram::kBuckets; ++i)
      if (const auto c = h->bucket_count(i)) o << ' ' << i << ':' << c;
  }
  o << '\n';
  return o.str();
}

bool apply_line(std::string_view line, RunResult& r, bool& done) {
  const auto f = fields(line);
  if (f.empty()) return false;
  if (f[0] == "D") {
    done = true;
    return true;
  }
  if (f[0] == "E") {
    r.error += std::string(line.substr(std::min<std::size_t>(2, line.size()))) + "; ";
    return true;
  }
  if (f[0] == "C" && f.size() == 2) {
    r.client_cpu_s += f64(f[1]);
    return true;
  }
  if (f[0] == "T" && f.size() == 8) {
    // Appended: the parent keeps one RunResult per process and sums the k-th ticks.
    Tick t;
    t.t = f64(f[1]);
    t.p_records = u64(f[2]);
    t.p_bytes = u64(f[3]);
    t.c_records = u64(f[4]);
    t.c_bytes = u64(f[5]);
    t.p99_produce_ns = u64(f[6]);
    t.p99_e2e_ns = u64(f[7]);
    r.timeline.push_back(t);
    return true;
  }
  if (f[0] == "S" && f.size() >= 12) {
    Side s;
    s.present = f[2] == "1";
    s.records = u64(f[3]);
    s.bytes = u64(f[4]);
    s.total_records = u64(f[5]);
    s.total_bytes = u64(f[6]);
    s.errors = u64(f[7]);
    s.seconds = f64(f[8]);
    // The latency histogram from field 9, the call-latency one after "|".
    std::size_t i = 9;
    for (Histogram* h : {&s.latency, &s.call_latency}) {
      if (h == &s.call_latency) {
        if (i >= f.size()) break;  // none sent
        if (f[i] != "|") return false;
        ++i;
      }
      if (i + 3 > f.size()) return false;
      const std::uint64_t sum = u64(f[i]), min = u64(f[i + 1]), max = u64(f[i + 2]);
      std::vector<std::pair<std::size_t, std::uint64_t>> buckets;
      for (i += 3; i < f.size() && f[i] != "|"; ++i) {
        const auto colon = f[i].find(':');
        if (colon == std::string_view::npos) return false;
        buckets.emplace_back(u64(f[i].substr(0, colon)), u64(f[i].substr(colon + 1)));
      }
      h->merge_serialized(buckets, sum, min, max);
    }
    (f[1] == "produce" ? r.produce : r.consume).add(s);
    return true;
  }
  return false;
}

std::string progress_line(const Tick& now, const Tick& prev, bool produce, bool consume, bool e2e) {
  const double dt = now.t - prev.t > 0 ? now.t - prev.t : 1;
  char buf[512];
  int n = std::snprintf(buf, sizeof buf, "%6.1fs", now.t);
  auto ms = [](std::uint64_t ns) { return static_cast<double>(ns) / 1e6; };
  if (produce)
    n += std::snprintf(buf + n, sizeof buf - n, " | produce %9.0f rec/s %8.1f MB/s p99 %8.3f ms",
                       (now.p_records - prev.p_records) / dt,
                       (now.p_bytes - prev.p_bytes) / dt / 1e6, ms(now.p99_produce_ns));
  if (consume)
    n += std::snprintf(buf + n, sizeof buf - n, " | consume %9.0f rec/s %8.1f MB/s",
                       (now.c_records - prev.c_records) / dt,
                       (now.c_bytes - prev.c_bytes) / dt / 1e6);
  if (e2e) std::snprintf(buf + n, sizeof buf - n, " e2e p99 %8.3f ms", ms(now.p99_e2e_ns));
  return buf;
}

bool write_json(const std::string& path, const Options& o, const RunResult& r) {
  std::ostringstream j;
  char date[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  j << "{\n  \"tool\": \"samsa-perf\",\n  \"date\": \"" << date << "\",\n";
  j << "  \"config\": {\"mode\": \"" << mode_name(o.mode) << "\", \"bootstrap\": \""
    << json_escape(o.bootstrap) << "\", \"topic\": \"" << json_escape(o.topic)
    << "\", \"topics\": " << o.topics << ", \"partitions\": " << o.partitions
    << ", \"record_size\": " << o.record_size << ", \"keys\": " << o.keys << ", \"acks\": \""
    << o.acks << "\", \"compression\": \"" << o.compression
    << "\", \"linger_ms\": " << (o.linger_ms ? num(*o.linger_ms) : "null")
    << ", \"batch_size\": " << (o.batch_size ? std::to_string(*o.batch_size) : "null")
    << ", \"producers\": " << o.producers << ", \"consumers\": " << o.consumers
    << ", \"processes\": " << o.processes << ", \"rate\": " << num(o.rate)
    << ", \"duration_s\": " << num(o.duration_s) << ", \"warmup_s\": " << num(o.warmup_s)
    << ", \"records\": " << o.records
    << ", \"pin_partitions\": " << (o.pin_partitions ? "true" : "false")
    << ", \"round_robin\": " << (o.round_robin ? "true" : "false")
    << ", \"until_end\": " << (o.until_end ? "true" : "false")
    << ", \"rdkafka\": " << props_json(o.rdkafka)
    << ", \"producer_props\": " << props_json(o.producer_props)
    << ", \"consumer_props\": " << props_json(o.consumer_props) << "},\n";
  j << "  \"ok\": " << (r.error.empty() ? "true" : "false") << ",\n";
  if (!r.error.empty()) j << "  \"error\": \"" << json_escape(r.error) << "\",\n";
  j << "  \"client_cpu_s\": " << num(r.client_cpu_s) << ",\n";
  if (r.window_begin_ns)
    j << "  \"window_ns\": [" << r.window_begin_ns << ", " << r.window_end_ns << "],\n";
  if (r.produce.present) j << "  \"produce\": " << side_json(r.produce) << ",\n";
  if (r.consume.present) j << "  \"consume\": " << side_json(r.consume) << ",\n";
  j << "  \"timeline\": [";
  for (std::size_t i = 0; i < r.timeline.size(); ++i) {
    const Tick& t = r.timeline[i];
    j << (i ? ",\n    " : "\n    ") << "{\"t\": " << num(t.t)
      << ", \"produce_records\": " << t.p_records << ", \"produce_bytes\": " << t.p_bytes
      << ", \"consume_records\": " << t.c_records << ", \"consume_bytes\": " << t.c_bytes
      << ", \"produce_p99_us\": " << us(t.p99_produce_ns)
      << ", \"e2e_p99_us\": " << us(t.p99_e2e_ns) << "}";
  }
  j << "]\n}\n";
  const std::string s = j.str();
  if (path == "-") {
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
    return true;
  }
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return false;
  const bool ok = std::fwrite(s.data(), 1, s.size(), f) == s.size();
  return std::fclose(f) == 0 && ok;
}

}  // namespace samsa::perf
