#include "perf/samsa_perf/clients.h"

#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <cstring>

#include "base/clock.h"
#include "base/thread.h"

namespace samsa::perf {

namespace {

constexpr std::int64_t kPaceNs = 200'000;

void sleep_until_ns(std::int64_t t) {
  timespec ts{static_cast<time_t>(t / 1'000'000'000), static_cast<long>(t % 1'000'000'000)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Producer

Producer::Producer(const Options& o, int index, int total, std::vector<int> partitions_per_topic)
    : o_(o), index_(index), total_(total), partitions_(std::move(partitions_per_topic)) {}

Producer::~Producer() {
  join();
  for (auto* t : topics_)
    rd_kafka_topic_destroy(t);
  // Before value_ goes: records still queued (a missed drain deadline) refer to it.
  rk_.reset();
  if (stats_) std::fclose(stats_);
}

int Producer::on_stats(rd_kafka_t*, char* json, std::size_t len, void* opaque) {
  auto* self = static_cast<Producer*>(opaque);
  if (self->stats_) {
    std::fwrite(json, 1, len, self->stats_);
    std::fputc('\n', self->stats_);
  }
  return 0;  // librdkafka frees json
}

void Producer::on_delivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
  auto* self = static_cast<Producer*>(opaque);
  Counters& c = self->counters_;
  const std::int64_t now = mono_ns();
  if (m->err) {
    Counters::bump(c.errors, 1);
    return;
  }
  const std::uint64_t bytes = m->len + m->key_len;
  if (c.first_ns.load(std::memory_order_relaxed) == 0)
    c.first_ns.store(now, std::memory_order_relaxed);
  c.last_ns.store(now, std::memory_order_relaxed);
  Counters::bump(c.records, 1);
  Counters::bump(c.bytes, bytes);
  if (self->w_.contains(now)) {
    Counters::bump(c.window_records, 1);
    Counters::bump(c.window_bytes, bytes);
  }
  const auto due = static_cast<std::int64_t>(reinterpret_cast<std::intptr_t>(m->_private));
  if (!self->w_.contains(due)) return;
  c.latency.record(static_cast<std::uint64_t>(now - due));
  if (self->o_.call_latency) {
    // librdkafka's clock from the produce() call (µs), read in the same callback as `now`.
    const std::int64_t from_call = rd_kafka_message_latency(m);
    if (from_call >= 0) c.call_latency.record(static_cast<std::uint64_t>(from_call) * 1000);
  }
}

std::expected<void, std::string> Producer::start(const Window& w) {
  w_ = w;
  Props props = producer_props(o_);
  auto hook = [](rd_kafka_conf_t* conf) {
    rd_kafka_conf_set_dr_msg_cb(conf, &Producer::on_delivery);
  };
  auto stats_hook = [](rd_kafka_conf_t* conf) {
    rd_kafka_conf_set_dr_msg_cb(conf, &Producer::on_delivery);
    rd_kafka_conf_set_stats_cb(conf, &Producer::on_stats);
  };
  const bool stats = !o_.rdkafka_stats.empty() && index_ == 0;
  if (stats) {
    stats_ = std::fopen(o_.rdkafka_stats.c_str(), "a");
    if (!stats_) return std::unexpected("cannot open " + o_.rdkafka_stats);
    // Before -X/-P, which may set another interval (the last setting wins).
    props.insert(props.begin(), {"statistics.interval.ms", "1000"});
  }
  auto rk = make_client(RD_KAFKA_PRODUCER, props, this, stats ? +stats_hook : +hook);
  if (!rk) return std::unexpected(rk.error());
  rk_ = std::move(*rk);
  for (const auto& name : o_.topic_names())
    topics_.push_back(rd_kafka_topic_new(rk_.get(), name.c_str(), nullptr));
  poller_ = std::thread([this] { poll_loop(); });
  sender_ = std::thread([this] { send_loop(); });
  return {};
}

std::int64_t Producer::in_flight() const {
  return rk_ ? rd_kafka_outq_len(rk_.get()) : 0;
}

void Producer::join() {
  if (sender_.joinable()) sender_.join();
  if (poller_.joinable()) poller_.join();
}

void Producer::send_loop() {
  set_thread_name("perf-send-" + std::to_string(index_));
  // Sleeps end on time, not up to 50 µs late (the default slack).
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  const int ntopics = static_cast<int>(topics_.size());
  std::vector<char>& value = value_;
  value.resize(static_cast<std::size_t>(o_.record_size));
  for (std::size_t i = 0; i < value.size(); ++i)
    value[i] = static_cast<char>('a' + (i * 7 + static_cast<std::size_t>(index_)) % 26);
  // Only end-to-end runs need the due time inside the record (the consumer reads it), and so a
  // copy per record; otherwise every record refers to the same bytes, as rdkafka_performance's
  // do, and the due time travels in the record's opaque pointer.
  const bool stamp = (o_.mode == Mode::e2e || o_.stamp) && value.size() >= 16;
  const int flags = stamp ? RD_KAFKA_MSG_F_COPY : 0;
  char key[16];
  // Open loop: record k of this producer is due at start + (index + k * total) / rate, so the
  // producers' schedules interleave into one stream of `rate` records per second.
  const double interval = o_.rate > 0 ? 1e9 * total_ / o_.rate : 0;
  const double phase = o_.rate > 0 ? 1e9 * index_ / o_.rate : 0;
  std::int64_t limit = 0;  // records for this producer (0: no limit)
  if (o_.records > 0) limit = o_.records / total_ + (index_ < o_.records % total_ ? 1 : 0);
  std::int64_t k = 0;
  std::uint64_t rr = static_cast<std::uint64_t>(index_);
  const int pinned_topic = index_ % ntopics;
  const int pinned_partition =
      partitions_.empty()
          ? 0
          : (index_ / ntopics) % partitions_[static_cast<std::size_t>(pinned_topic)];
  std::int64_t errors = 0;
  std::int64_t backoff_ns = 100'000;
  sleep_until_ns(w_.start);
  while (limit == 0 || k < limit) {
    std::int64_t now = mono_ns();
    if (now >= w_.end && limit == 0) break;
    std::int64_t due = now;
    if (interval > 0) {
      due = w_.start + static_cast<std::int64_t>(phase + interval * static_cast<double>(k));
      if (due > now) {
        // Sleep at least kPaceNs, then send everything that fell due meanwhile, each record
        // with its own due time: tens of thousands of wake-ups a second would cost more CPU
        // than the sends (on a 2-core machine, taken from the broker), while the lateness this
        // adds (< kPaceNs) is counted in the latencies anyway.
        sleep_until_ns(std::max(due, now + kPaceNs));
        continue;
      }
      if (due >= w_.end && limit == 0) break;
    }
    if (stamp) {
      std::memcpy(value.data(), &due, 8);
      std::memcpy(value.data() + 8, &kStampMarker, 8);
    }
    int topic = pinned_topic;
    std::int32_t partition = RD_KAFKA_PARTITION_UA;
    if (o_.pin_partitions) {
      partition = pinned_partition;
    } else if (o_.round_robin) {
      topic = static_cast<int>(rr % static_cast<std::uint64_t>(ntopics));
      const auto np = static_cast<std::uint64_t>(partitions_[static_cast<std::size_t>(topic)]);
      partition = static_cast<std::int32_t>((rr / static_cast<std::uint64_t>(ntopics)) % np);
      ++rr;
    } else {
      topic = static_cast<int>(k % ntopics);
    }
    const void* kp = nullptr;
    std::size_t klen = 0;
    if (o_.keys > 0) {
      std::snprintf(key, sizeof key, "key-%08d", static_cast<int>(k % o_.keys));
      kp = key;
      klen = 12;
    }
    for (;;) {
      const int r = rd_kafka_produce(topics_[static_cast<std::size_t>(topic)], partition, flags,
                                     value.data(), value.size(), kp, klen,
                                     reinterpret_cast<void*>(static_cast<std::intptr_t>(due)));
      if (r == 0) {
        backoff_ns = 100'000;
        break;
      }
      const rd_kafka_resp_err_t e = rd_kafka_last_error();
      if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        // The client's queue is full: wait for acknowledgements (the poller serves them). The
        // record keeps its due time, so the wait counts in its latency. The wait doubles while
        // the queue stays full (0.1 to 3.2 ms): dozens of producers retrying every 100 µs
        // would spend the machine's CPU on wake-ups.
        sleep_until_ns(mono_ns() + backoff_ns);
        backoff_ns = std::min<std::int64_t>(backoff_ns * 2, 3'200'000);
        if (mono_ns() >= w_.end + static_cast<std::int64_t>(o_.drain_s * 1e9)) break;
        continue;
      }
      if (++errors <= 3) std::fprintf(stderr, "samsa-perf: produce: %s\n", rd_kafka_err2str(e));
      Counters::bump(counters_.errors, 1);
      break;
    }
    sent_.store(k + 1, std::memory_order_relaxed);
    ++k;
  }
  sending_done_.store(true, std::memory_order_release);
}

void Producer::poll_loop() {
  set_thread_name("perf-poll-" + std::to_string(index_));
  std::int64_t deadline = 0;
  for (;;) {
    rd_kafka_poll(rk_.get(), 20);
    if (!sending_done_.load(std::memory_order_acquire)) continue;
    if (deadline == 0) deadline = mono_ns() + static_cast<std::int64_t>(o_.drain_s * 1e9);
    if (rd_kafka_outq_len(rk_.get()) == 0) break;
    if (mono_ns() >= deadline) {
      error_ = std::to_string(rd_kafka_outq_len(rk_.get())) +
               " records still unacknowledged at the drain deadline";
      break;
    }
  }
  finished_.store(true, std::memory_order_release);
}

// ---------------------------------------------------------------------------------------------
// Consumer

Consumer::Consumer(const Options& o, int index, std::vector<Assignment> parts)
    : o_(o),
      index_(index),
      parts_(std::move(parts)),
      names_(o.topic_names()),
      position_(parts_.size(), -1),
      targets_(parts_.size()) {
  for (std::size_t i = 0; i < parts_.size(); ++i)
    targets_[i].store(parts_[i].target, std::memory_order_relaxed);
  targets_set_.store(
      std::any_of(parts_.begin(), parts_.end(), [](const Assignment& a) { return a.target >= 0; }));
}

Consumer::~Consumer() {
  join();
  if (rk_) rd_kafka_consumer_close(rk_.get());
}

std::expected<void, std::string> Consumer::start(const Window& w, bool record_latency) {
  w_ = w;
  record_latency_ = record_latency;
  auto rk = make_client(RD_KAFKA_CONSUMER, consumer_props(o_), this);
  if (!rk) return std::unexpected(rk.error());
  rk_ = std::move(*rk);
  rd_kafka_poll_set_consumer(rk_.get());
  rd_kafka_topic_partition_list_t* l =
      rd_kafka_topic_partition_list_new(static_cast<int>(parts_.size()));
  for (const auto& a : parts_)
    rd_kafka_topic_partition_list_add(l, names_[static_cast<std::size_t>(a.topic)].c_str(),
                                      a.partition)
        ->offset = a.start;
  const rd_kafka_resp_err_t e = rd_kafka_assign(rk_.get(), l);
  rd_kafka_topic_partition_list_destroy(l);
  if (e) return std::unexpected(std::string("assign: ") + rd_kafka_err2str(e));
  thread_ = std::thread([this] { loop(); });
  return {};
}

void Consumer::set_targets(const std::vector<std::int64_t>& targets) {
  for (std::size_t i = 0; i < targets.size() && i < targets_.size(); ++i)
    targets_[i].store(targets[i], std::memory_order_relaxed);
  targets_set_.store(true, std::memory_order_release);
}

void Consumer::join() {
  if (thread_.joinable()) thread_.join();
}

bool Consumer::reached_targets() const {
  if (!targets_set_.load(std::memory_order_acquire)) return false;
  for (std::size_t i = 0; i < parts_.size(); ++i) {
    const std::int64_t t = targets_[i].load(std::memory_order_relaxed);
    if (t < 0) return false;
    // A partition with nothing to read (target at its start) is done without a record.
    const std::int64_t pos = position_[i] >= 0 ? position_[i] : parts_[i].start;
    if (pos < t) return false;
  }
  return true;
}

void Consumer::loop() {
  set_thread_name("perf-cons-" + std::to_string(index_));
  rd_kafka_queue_t* q = rd_kafka_queue_get_consumer(rk_.get());
  constexpr std::size_t kBatch = 1024;
  rd_kafka_message_t* msgs[kBatch];
  // (topic, partition) -> assignment slot, found by linear search once per handle and
  // partition, then cached in a flat table.
  std::vector<rd_kafka_topic_t*> rkts(names_.size(), nullptr);
  int max_p = 0;
  for (const auto& a : parts_)
    max_p = std::max(max_p, a.partition + 1);
  std::vector<int> slot(names_.size() * static_cast<std::size_t>(max_p), -1);
  for (std::size_t i = 0; i < parts_.size(); ++i)
    slot[static_cast<std::size_t>(parts_[i].topic) * max_p +
         static_cast<std::size_t>(parts_[i].partition)] = static_cast<int>(i);
  Counters& c = counters_;
  std::int64_t errors_logged = 0;
  while (!stop_.load(std::memory_order_acquire)) {
    // A batch call with a timeout waits for a full batch (or the timeout): at low rates that
    // would add up to the timeout to every latency. Wait for one record, then take whatever
    // else has arrived without waiting.
    ssize_t n = rd_kafka_consume_batch_queue(q, 0, msgs, kBatch);
    if (n == 0) {
      msgs[0] = rd_kafka_consumer_poll(rk_.get(), 100);
      n = msgs[0] ? 1 : 0;
    }
    const std::int64_t now = mono_ns();
    for (ssize_t i = 0; i < n; ++i) {
      rd_kafka_message_t* m = msgs[i];
      if (m->err) {
        if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
          Counters::bump(c.errors, 1);
          if (++errors_logged <= 3)
            std::fprintf(stderr, "samsa-perf: consume: %s\n", rd_kafka_message_errstr(m));
        }
        rd_kafka_message_destroy(m);
        continue;
      }
      const std::uint64_t bytes = m->len + m->key_len;
      if (c.first_ns.load(std::memory_order_relaxed) == 0)
        c.first_ns.store(now, std::memory_order_relaxed);
      c.last_ns.store(now, std::memory_order_relaxed);
      Counters::bump(c.records, 1);
      Counters::bump(c.bytes, bytes);
      if (w_.contains(now)) {
        Counters::bump(c.window_records, 1);
        Counters::bump(c.window_bytes, bytes);
      }
      if (record_latency_ && m->len >= 16) {
        std::uint64_t marker;
        std::int64_t due;
        std::memcpy(&marker, static_cast<const char*>(m->payload) + 8, 8);
        std::memcpy(&due, m->payload, 8);
        if (marker == kStampMarker && w_.contains(due) && now >= due)
          c.latency.record(static_cast<std::uint64_t>(now - due));
      }
      // Position bookkeeping for targets.
      std::size_t t = 0;
      while (t < rkts.size() && rkts[t] != m->rkt)
        ++t;
      if (t == rkts.size()) {
        const char* name = rd_kafka_topic_name(m->rkt);
        for (t = 0; t < names_.size() && names_[t] != name; ++t) {
        }
        if (t < names_.size()) rkts[t] = m->rkt;
      }
      if (t < names_.size() && m->partition < max_p) {
        const int s =
            slot[t * static_cast<std::size_t>(max_p) + static_cast<std::size_t>(m->partition)];
        if (s >= 0) position_[static_cast<std::size_t>(s)] = m->offset + 1;
      }
      rd_kafka_message_destroy(m);
    }
    if (n < 0) {
      Counters::bump(c.errors, 1);
      break;
    }
    if (reached_targets()) {
      reached_.store(true, std::memory_order_release);
      break;
    }
  }
  rd_kafka_queue_destroy(q);
  finished_.store(true, std::memory_order_release);
}

}  // namespace samsa::perf
