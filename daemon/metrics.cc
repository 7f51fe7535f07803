#include "daemon/metrics.h"

#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "base/clock.h"
#include "daemon/api/dispatch.h"
#include "daemon/broker.h"
#include "net/kafka/api.h"

namespace samsa::daemon {

void ReactorMetrics::add_bytes_out(std::string_view topic, std::uint64_t bytes) {
  auto it = topics_.find(topic);
  if (it == topics_.end()) it = topics_.emplace(std::string(topic), Topic{}).first;
  it->second.bytes_out += bytes;
}

void ReactorMetrics::on_beat(const io::Reactor& r, std::int64_t now_ns) {
  const std::uint64_t idle = r.idle_ns();
  const std::int64_t elapsed = now_ns - last_beat_ns_;
  if (elapsed > 0) {
    const double idle_part =
        static_cast<double>(idle - last_idle_ns_) / static_cast<double>(elapsed);
    utilisation_ = std::clamp(1.0 - idle_part, 0.0, 1.0);
  }
  last_beat_ns_ = now_ns;
  last_idle_ns_ = idle;
}

namespace {

void sample_requests(ReactorContext& ctx, ReactorSample& s) {
  auto& m = ctx.metrics;
  for (std::size_t k = 0; k < kMaxApiKey; ++k) {
    const auto& a = m.apis()[k];
    if (!a) continue;
    for (std::size_t v = 0; v < kMaxApiVersion; ++v) {
      if (a->by_version[v].count() == 0) continue;
      s.requests.push_back(
          {{static_cast<std::int16_t>(k), static_cast<std::int16_t>(v)}, a->by_version[v]});
    }
  }
  // Topics deleted since are dropped here, so their series end.
  for (auto it = m.topics().begin(); it != m.topics().end();) {
    if (ctx.image && !ctx.image->topic(it->first)) {
      it = m.topics().erase(it);
      continue;
    }
    s.topic_bytes_out[it->first] = it->second.bytes_out;
    ++it;
  }
  for (auto& d : ctx.dispatchers)
    s.in_flight += d->in_flight();
  s.follower_reads = m.follower_reads();
}

void sample_transports(ReactorContext& ctx, ReactorSample& s) {
  for (auto& t : ctx.transports) {
    s.connections += t->connection_count();
    const net::ConnectionStats& st = t->connection_stats();
    s.accepted += st.accepted;
    s.closed += st.closed;
    s.backpressure_pauses += st.recv_pauses;
    s.net_bytes_in += st.bytes_in;
    s.net_bytes_out += st.bytes_out;
  }
}

void sample_replication(ReactorContext& ctx, ReactorSample& s) {
  if (ctx.shard) {
    ctx.shard->for_each([&](replication::Partition& p) {
      const replication::ReplicaState* rs = p.replica();
      if (!rs || rs->role() != replication::ReplicaRole::leader) return;
      ++s.led_partitions;
      if (rs->isr().size() < rs->replicas().size()) ++s.under_replicated;
      if (static_cast<std::int32_t>(rs->isr().size()) < rs->min_insync_replicas())
        ++s.under_min_isr;
    });
  }
  if (ctx.index == 0 && ctx.image) {
    for (const auto& [name, t] : ctx.image->topics())
      for (const auto& part : t->partitions)
        if (part.leader < 0) ++s.offline_partitions;
  }
  if (ctx.isr_keeper) {
    s.isr_shrinks = ctx.isr_keeper->stats().shrinks;
    s.isr_expands = ctx.isr_keeper->stats().expands;
  }
  if (ctx.fetcher) {
    s.replica_fetches = ctx.fetcher->stats().fetches;
    s.replica_bytes_in = ctx.fetcher->stats().bytes_appended;
    s.replica_truncations = ctx.fetcher->stats().truncations;
  }
}

}  // namespace

PartitionSample sample_partition(replication::Partition& p) {
  PartitionSample ps;
  ps.topic = p.topic();
  ps.partition = p.index();
  ps.leader_epoch = p.leader_epoch();
  const io::Log& log = p.log();
  ps.log_start = log.log_start_offset();
  ps.log_end = log.log_end_offset();
  ps.durable_end = log.durable_end_offset();
  ps.high_watermark = p.high_watermark();
  ps.last_stable = p.last_stable_offset();
  ps.open_txns = p.txns().ongoing();
  ps.aborted_txns = p.txns().aborted();
  ps.size_bytes = log.size_bytes();
  ps.segments = log.segment_count();
  ps.producers = p.producers().size();
  ps.bytes_in = log.stats().bytes_written;
  ps.batches_in = log.stats().appends;
  ps.duplicate_mismatches = p.duplicate_mismatches();
  ps.fenced = log.fenced();
  ps.dir = log.dir().string();
  if (log.config().cleanup_compact) {
    const auto ci = log.compaction_info();
    ps.compacted = true;
    ps.dirty_ratio = ci.dirty_ratio;
    ps.first_dirty = ci.first_dirty;
    ps.last_clean_ms = ci.last_clean_ms >= 0 ? wall_ms() - ci.last_clean_ms : -1;
    ps.clean_passes = ci.passes;
  }
  const replication::ReplicaState* rs = p.replica();
  if (!rs) return ps;
  const std::int64_t now = mono_ms();
  auto ago = [now](std::int64_t t) { return t > 0 ? now - t : std::int64_t{-1}; };
  switch (rs->role()) {
    case replication::ReplicaRole::leader:
      ps.role = "leader";
      break;
    case replication::ReplicaRole::follower:
      ps.role = "follower";
      break;
    case replication::ReplicaRole::none:
      ps.role = "none";
      break;
  }
  ps.leader = rs->leader_id();
  ps.partition_epoch = rs->partition_epoch();
  ps.isr = rs->isr();
  ps.maximal_isr = rs->maximal_isr();
  for (const auto& [id, f] : rs->followers())
    ps.followers.push_back({id, f.fetch_offset, ago(f.last_fetch_ms), ago(f.last_caught_up_ms)});
  if (auto sent = rs->fetch_sent_ms()) ps.fetch_in_flight_ms = now - *sent;
  if (auto t = rs->pending_truncation()) ps.pending_truncation = *t;
  return ps;
}

ReactorSample sample_reactor(ReactorContext& ctx, bool with_partitions) {
  ReactorSample s;
  s.index = ctx.index;
  s.utilisation = ctx.metrics.utilisation();
  if (ctx.reactor) {
    s.idle_ns = ctx.reactor->idle_ns();
    s.turns = ctx.reactor->turns();
    s.stalls = ctx.reactor->stalls();
    s.longest_turn_ns = ctx.reactor->longest_turn_ns();
    if (ctx.turn_queue) s.turn_yields = ctx.turn_queue->yields();
    s.io = ctx.reactor->io_metrics();
    s.open_segment_files = ctx.reactor->open_files().open();
    s.open_segment_files_budget = ctx.reactor->open_files().budget();
    s.segment_files = ctx.reactor->open_files().stats();
  }
  s.alive_ns =
      static_cast<std::uint64_t>(std::max<std::int64_t>(0, mono_ns() - ctx.metrics.started_ns()));
  sample_requests(ctx, s);
  sample_transports(ctx, s);
  sample_replication(ctx, s);
  if (ctx.shard) {
    s.failed_partitions = ctx.shard->failed();
    if (with_partitions)
      ctx.shard->for_each(
          [&](replication::Partition& p) { s.partitions.push_back(sample_partition(p)); });
  }
  return s;
}

namespace {

void escape_label(std::string& out, std::string_view v) {
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
}

class Writer {
 public:
  // Declares a metric family once (HELP and TYPE lines).
  void family(const char* name, const char* type, const char* help) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    out_ += help;
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }
  using Labels = std::initializer_list<std::pair<const char*, std::string_view>>;
  void sample(std::string_view name, Labels labels, double v, const char* extra_label = nullptr,
              std::string_view extra_value = {}) {
    out_ += name;
    bool any = false;
    auto put = [&](const char* k, std::string_view val) {
      out_ += any ? ',' : '{';
      any = true;
      out_ += k;
      out_ += "=\"";
      escape_label(out_, val);
      out_ += '"';
    };
    for (const auto& [k, val] : labels)
      put(k, val);
    if (extra_label) put(extra_label, extra_value);
    if (any) out_ += '}';
    out_ += ' ';
    char buf[40];
    if (v == static_cast<double>(static_cast<std::int64_t>(v)) && v < 9e15 && v > -9e15) {
      std::snprintf(buf, sizeof buf, "%" PRId64, static_cast<std::int64_t>(v));
    } else {
      std::snprintf(buf, sizeof buf, "%.9g", v);
    }
    out_ += buf;
    out_ += '\n';
  }
  // A histogram's _bucket (cumulative), _sum and _count lines; scale turns recorded units into
  // the exposed base unit (ns -> s).
  template <class H>
  void histogram(const std::string& name, Labels labels, const H& h, double scale) {
    std::uint64_t cum = 0;
    const auto& b = H::bounds();
    char le[32];
    for (std::size_t i = 0; i < b.size(); ++i) {
      cum += h.counts()[i];
      std::snprintf(le, sizeof le, "%.9g", static_cast<double>(b[i]) * scale);
      sample(name + "_bucket", labels, static_cast<double>(cum), "le", le);
    }
    cum += h.counts()[b.size()];
    sample(name + "_bucket", labels, static_cast<double>(cum), "le", "+Inf");
    sample(name + "_sum", labels, static_cast<double>(h.sum()) * scale);
    sample(name + "_count", labels, static_cast<double>(h.count()));
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

}  // namespace

namespace {

// What every reactor reported, merged.
struct Merged {
  std::map<std::pair<std::int16_t, std::int16_t>, LatencyHistogram> req;
  std::map<std::string, std::uint64_t> bytes_out, bytes_in, batches_in;
  std::vector<const PartitionSample*> parts;
  io::Reactor::IoMetrics io;
  std::uint64_t conns = 0, accepted = 0, closed = 0, pauses = 0, nin = 0, nout = 0, inflight = 0;
  std::map<std::pair<std::string, std::int32_t>, std::int64_t> hw;
};

Merged merge(const BrokerSample& s) {
  Merged m;
  for (const auto& r : s.reactors) {
    if (!r) continue;
    for (const auto& [k, h] : r->requests)
      m.req[k].merge(h);
    for (const auto& [t, b] : r->topic_bytes_out)
      m.bytes_out[t] += b;
    for (const auto& p : r->partitions) {
      m.bytes_in[p.topic] += p.bytes_in;
      m.batches_in[p.topic] += p.batches_in;
      m.parts.push_back(&p);
      m.hw[{p.topic, p.partition}] = p.high_watermark;
    }
    m.io.fsync.merge(r->io.fsync);
    m.io.group_commit_appends.merge(r->io.group_commit_appends);
    m.io.group_commit_bytes += r->io.group_commit_bytes;
    m.conns += r->connections;
    m.accepted += r->accepted;
    m.closed += r->closed;
    m.pauses += r->backpressure_pauses;
    m.nin += r->net_bytes_in;
    m.nout += r->net_bytes_out;
    m.inflight += r->in_flight;
  }
  return m;
}

void write_requests(Writer& w, const Merged& m) {
  w.family("samsa_requests_total", "counter", "Kafka requests answered, by API and version.");
  for (const auto& [k, h] : m.req)
    w.sample("samsa_requests_total",
             {{"api", kafka::api_name(k.first)}, {"version", std::to_string(k.second)}},
             static_cast<double>(h.count()));
  w.family("samsa_request_duration_seconds", "histogram",
           "Time from a request's decoding to its answer being queued, by API and version.");
  for (const auto& [k, h] : m.req)
    w.histogram("samsa_request_duration_seconds",
                {{"api", kafka::api_name(k.first)}, {"version", std::to_string(k.second)}}, h,
                1e-9);
  w.family("samsa_requests_in_flight", "gauge", "Requests decoded and not yet answered.");
  w.sample("samsa_requests_in_flight", {}, static_cast<double>(m.inflight));
}

void write_topics(Writer& w, Merged& m) {
  std::set<std::string> topics;
  for (const auto& [t, b] : m.bytes_in)
    topics.insert(t);
  for (const auto& [t, b] : m.bytes_out)
    topics.insert(t);
  w.family("samsa_topic_bytes_in_total", "counter",
           "Record batch bytes written to the topic's logs (since each log was opened).");
  for (const auto& t : topics)
    w.sample("samsa_topic_bytes_in_total", {{"topic", t}}, static_cast<double>(m.bytes_in[t]));
  w.family("samsa_topic_batches_in_total", "counter", "Record batches appended to the topic.");
  for (const auto& t : topics)
    w.sample("samsa_topic_batches_in_total", {{"topic", t}}, static_cast<double>(m.batches_in[t]));
  std::uint64_t mismatches = 0;
  for (const PartitionSample* p : m.parts)
    mismatches += p->duplicate_mismatches;
  w.family("samsa_producer_duplicate_mismatches_total", "counter",
           "Batches refused because they repeated a stored batch's producer id, epoch and "
           "sequence numbers with other contents (a producer id in use twice), since each log "
           "was opened.");
  w.sample("samsa_producer_duplicate_mismatches_total", {}, static_cast<double>(mismatches));
  w.family("samsa_topic_bytes_out_total", "counter", "Record bytes sent to fetchers.");
  for (const auto& t : topics)
    w.sample("samsa_topic_bytes_out_total", {{"topic", t}}, static_cast<double>(m.bytes_out[t]));
}

void write_partitions(Writer& w, const Merged& m) {
  auto per_partition = [&](const char* name, const char* help, auto get) {
    w.family(name, "gauge", help);
    for (const PartitionSample* p : m.parts)
      w.sample(name, {{"topic", p->topic}, {"partition", std::to_string(p->partition)}},
               static_cast<double>(get(*p)));
  };
  per_partition("samsa_partition_size_bytes", "Bytes of the partition's segments on disk.",
                [](const PartitionSample& p) { return p.size_bytes; });
  per_partition("samsa_partition_log_start_offset", "First offset still in the log.",
                [](const PartitionSample& p) { return p.log_start; });
  per_partition("samsa_partition_log_end_offset", "Offset the next record will get.",
                [](const PartitionSample& p) { return p.log_end; });
  per_partition("samsa_partition_high_watermark", "Consumers read below this offset.",
                [](const PartitionSample& p) { return p.high_watermark; });
  per_partition("samsa_partition_lso_lag",
                "High watermark minus last stable offset: what read_committed consumers wait "
                "for (open transactions).",
                [](const PartitionSample& p) { return p.high_watermark - p.last_stable; });
  per_partition("samsa_partition_open_transactions", "Transactions open on the partition.",
                [](const PartitionSample& p) { return static_cast<std::int64_t>(p.open_txns); });
  per_partition("samsa_partition_segments", "Segment files of the partition.",
                [](const PartitionSample& p) { return p.segments; });
  per_partition("samsa_partition_producers", "Idempotent producers the partition tracks.",
                [](const PartitionSample& p) { return p.producers; });
}

void write_groups(Writer& w, const BrokerSample& s, const Merged& m) {
  if (s.groups) {
    w.family("samsa_group_members", "gauge", "Members of a consumer group.");
    for (const auto& g : *s.groups)
      w.sample("samsa_group_members", {{"group", g.group}, {"state", g.state}},
               static_cast<double>(g.members));
    w.family("samsa_group_lag", "gauge",
             "Records between a group's committed offset and the partition's high watermark.");
    for (const auto& g : *s.groups) {
      for (const auto& o : g.offsets) {
        auto it = m.hw.find({o.topic, o.partition});
        if (it == m.hw.end() || o.committed < 0) continue;
        w.sample(
            "samsa_group_lag",
            {{"group", g.group}, {"topic", o.topic}, {"partition", std::to_string(o.partition)}},
            static_cast<double>(lag_of(it->second, o.committed)));
      }
    }
  }
}

void write_txn_coordinator(Writer& w, const BrokerSample& s) {
  if (!s.txn) return;
  const auto& t = *s.txn;
  w.family("samsa_txn_coordinator_transactional_ids", "gauge",
           "Transactional ids whose __transaction_state partition this node leads.");
  w.sample("samsa_txn_coordinator_transactional_ids", {}, static_cast<double>(t.transactional_ids));
  auto counter = [&w](const char* name, const char* help, std::uint64_t v) {
    w.family(name, "counter", help);
    w.sample(name, {}, static_cast<double>(v));
  };
  counter("samsa_txn_coordinator_commits_total", "Transactions committed (markers all written).",
          t.stats.commits);
  counter("samsa_txn_coordinator_aborts_total", "Transactions aborted (markers all written).",
          t.stats.aborts);
  counter("samsa_txn_coordinator_timed_out_total",
          "Transactions the coordinator aborted after transaction.timeout.ms.", t.stats.timed_out);
  counter("samsa_txn_coordinator_markers_total", "Transaction markers written to partitions.",
          t.stats.markers_written);
  counter("samsa_txn_coordinator_marker_retries_total",
          "Rounds of markers sent again after a partition refused or missed one.",
          t.stats.marker_retries);
  counter("samsa_txn_coordinator_expired_ids_total",
          "Transactional ids removed after transactional.id.expiration.ms.", t.stats.expired);
  counter("samsa_txn_coordinator_ended_v2_total",
          "Transactions ended with transaction version 2 (EndTxn v5+: an epoch bump each).",
          t.stats.ended_v2);
}

void write_io_and_reactors(Writer& w, const BrokerSample& s, const Merged& m) {
  w.family("samsa_log_fsync_duration_seconds", "histogram",
           "From submitting a group commit's write with its linked fdatasync to the sync's end.");
  w.histogram("samsa_log_fsync_duration_seconds", {}, m.io.fsync, 1e-9);
  w.family("samsa_log_group_commit_appends", "histogram",
           "Appends written by one group commit (one write and one fdatasync per log).");
  w.histogram("samsa_log_group_commit_appends", {}, m.io.group_commit_appends, 1.0);
  w.family("samsa_log_group_commit_bytes_total", "counter", "Bytes written by group commits.");
  w.sample("samsa_log_group_commit_bytes_total", {}, static_cast<double>(m.io.group_commit_bytes));
  double open = 0, budget = 0, opened = 0, closed = 0, busy = 0;
  for (const auto& r : s.reactors) {
    if (!r) continue;
    open += static_cast<double>(r->open_segment_files);
    budget += static_cast<double>(r->open_segment_files_budget);
    opened += static_cast<double>(r->segment_files.opened);
    closed += static_cast<double>(r->segment_files.evicted);
    busy += static_cast<double>(r->segment_files.busy);
  }
  w.family("samsa_log_segment_files_open", "gauge",
           "Segment files the logs hold open (each a file descriptor).");
  w.sample("samsa_log_segment_files_open", {}, open);
  w.family("samsa_log_segment_files_budget", "gauge",
           "Segment files the logs may hold open (samsa.log.max.open.files; 0: no limit).");
  w.sample("samsa_log_segment_files_budget", {}, budget);
  w.family("samsa_log_segment_files_opened_total", "counter",
           "Segment files opened (new segments, and ones the budget had closed).");
  w.sample("samsa_log_segment_files_opened_total", {}, opened);
  w.family("samsa_log_segment_files_closed_total", "counter",
           "Idle segment files closed to stay within samsa.log.max.open.files.");
  w.sample("samsa_log_segment_files_closed_total", {}, closed);
  w.family("samsa_log_segment_files_over_budget_total", "counter",
           "Times the budget was exceeded because every candidate file was in use.");
  w.sample("samsa_log_segment_files_over_budget_total", {}, busy);

  w.family("samsa_reactor_up", "gauge",
           "1 when the reactor answered the metrics collection in time, else 0.");
  for (std::size_t i = 0; i < s.reactors.size(); ++i)
    w.sample("samsa_reactor_up", {{"reactor", std::to_string(i)}}, s.reactors[i] ? 1 : 0);
  w.family("samsa_reactor_utilization_ratio", "gauge",
           "Share of the last second the reactor's loop spent working rather than waiting.");
  for (const auto& r : s.reactors)
    if (r)
      w.sample("samsa_reactor_utilization_ratio", {{"reactor", std::to_string(r->index)}},
               r->utilisation);
  w.family("samsa_io_workers", "gauge",
           "io_uring worker threads (iou-wrk) of the process now: requests the kernel punted "
           "(buffered writes, fdatasync) each take one, up to the per-ring cap.");
  w.sample("samsa_io_workers", {}, static_cast<double>(s.io_workers));
  w.family("samsa_reactor_stalls_total", "counter",
           "Loop turns that ran longer than samsa.reactor.stall.threshold.us without yielding.");
  for (const auto& r : s.reactors)
    if (r)
      w.sample("samsa_reactor_stalls_total", {{"reactor", std::to_string(r->index)}},
               static_cast<double>(r->stalls));
  w.family("samsa_reactor_turn_yields_total", "counter",
           "Turns in which requests' per-partition work ran past samsa.reactor.turn.budget.us "
           "and left the rest to the next turn.");
  for (const auto& r : s.reactors)
    if (r)
      w.sample("samsa_reactor_turn_yields_total", {{"reactor", std::to_string(r->index)}},
               static_cast<double>(r->turn_yields));
  w.family("samsa_reactor_longest_turn_seconds", "gauge",
           "The longest loop turn since the start (0 when turns are not timed).");
  for (const auto& r : s.reactors)
    if (r)
      w.sample("samsa_reactor_longest_turn_seconds", {{"reactor", std::to_string(r->index)}},
               static_cast<double>(r->longest_turn_ns) * 1e-9);
  w.family("samsa_reactor_busy_seconds_total", "counter",
           "Seconds the reactor's loop spent working rather than waiting for completions.");
  for (const auto& r : s.reactors)
    if (r)
      w.sample("samsa_reactor_busy_seconds_total", {{"reactor", std::to_string(r->index)}},
               static_cast<double>(r->alive_ns > r->idle_ns ? r->alive_ns - r->idle_ns : 0) * 1e-9);
}

void write_cleaner(Writer& w, const io::LogCleaner::Stats& c) {
  auto counter = [&](const char* name, const char* help, double v) {
    w.family(name, "counter", help);
    w.sample(name, {}, v);
  };
  auto gauge = [&](const char* name, const char* help, double v) {
    w.family(name, "gauge", help);
    w.sample(name, {}, v);
  };
  counter("samsa_log_cleaner_passes_total", "Cleaning passes committed.",
          static_cast<double>(c.passes));
  counter("samsa_log_cleaner_passes_failed_total",
          "Cleaning passes that failed (a corrupt batch, an I/O error; the log says which).",
          static_cast<double>(c.passes_failed));
  counter("samsa_log_cleaner_passes_dropped_total",
          "Cleaning passes dropped because the log changed under them (truncation, retention).",
          static_cast<double>(c.passes_dropped));
  counter("samsa_log_cleaner_bytes_read_total", "Bytes the cleaner read.",
          static_cast<double>(c.bytes_read));
  counter("samsa_log_cleaner_bytes_written_total", "Bytes the cleaner wrote.",
          static_cast<double>(c.bytes_written));
  counter("samsa_log_cleaner_records_removed_total", "Records compaction removed.",
          static_cast<double>(c.records_removed));
  counter("samsa_log_cleaner_tombstones_removed_total",
          "Tombstones removed past delete.retention.ms.",
          static_cast<double>(c.tombstones_removed));
  counter("samsa_log_cleaner_busy_seconds_total", "Time the cleaner threads spent in passes.",
          static_cast<double>(c.busy_ns) * 1e-9);
  counter("samsa_log_cleaner_throttled_seconds_total",
          "Time passes slept for log.cleaner.io.max.bytes.per.second.",
          static_cast<double>(c.throttled_ns) * 1e-9);
  gauge("samsa_log_cleaner_max_dirty_ratio",
        "The largest dirty ratio among compacted logs at the cleaner's last look.",
        c.max_dirty_ratio);
  gauge("samsa_log_cleaner_seconds_since_last_pass",
        "Seconds since the last committed pass (-1: none since start).",
        c.last_pass_ms < 0 ? -1.0 : static_cast<double>(wall_ms() - c.last_pass_ms) * 1e-3);
}

void write_network(Writer& w, const Merged& m) {
  w.family("samsa_connections", "gauge", "Open Kafka client connections.");
  w.sample("samsa_connections", {}, static_cast<double>(m.conns));
  w.family("samsa_connections_accepted_total", "counter", "Kafka client connections accepted.");
  w.sample("samsa_connections_accepted_total", {}, static_cast<double>(m.accepted));
  w.family("samsa_connections_closed_total", "counter", "Kafka client connections closed.");
  w.sample("samsa_connections_closed_total", {}, static_cast<double>(m.closed));
  w.family("samsa_backpressure_pauses_total", "counter",
           "Times a connection stopped being read because its requests in flight reached "
           "queued.max.requests or queued.max.request.bytes (samsa pauses instead of refusing).");
  w.sample("samsa_backpressure_pauses_total", {}, static_cast<double>(m.pauses));
  w.family("samsa_network_received_bytes_total", "counter", "Bytes received from clients.");
  w.sample("samsa_network_received_bytes_total", {}, static_cast<double>(m.nin));
  w.family("samsa_network_sent_bytes_total", "counter", "Bytes sent to clients.");
  w.sample("samsa_network_sent_bytes_total", {}, static_cast<double>(m.nout));
}

// The network backend writes its own families through this.
struct BackendSink final : net::MetricSink {
  explicit BackendSink(Writer& writer) : w(writer) {}
  void family(const char* name, const char* type, const char* help) override {
    w.family(name, type, help);
  }
  void sample(const char* name, double v, const char* label, std::string_view value) override {
    w.sample(name, {}, v, label, value);
  }
  Writer& w;
};

// Replication, summed over the reactors (zero on a single node and on a controller).
void write_replication(Writer& w, const BrokerSample& s) {
  auto repl_sum = [&](auto get) {
    std::uint64_t n = 0;
    for (const auto& r : s.reactors)
      if (r) n += get(*r);
    return static_cast<double>(n);
  };
  w.family("samsa_under_replicated_partitions", "gauge",
           "Partitions led here whose ISR is smaller than their replica set.");
  w.sample("samsa_under_replicated_partitions", {},
           repl_sum([](const ReactorSample& r) { return r.under_replicated; }));
  w.family("samsa_under_min_isr_partitions", "gauge",
           "Partitions led here whose ISR is below min.insync.replicas (acks=all refused).");
  w.sample("samsa_under_min_isr_partitions", {},
           repl_sum([](const ReactorSample& r) { return r.under_min_isr; }));
  w.family("samsa_offline_partitions", "gauge", "Partitions with no leader in the metadata.");
  w.sample("samsa_offline_partitions", {},
           repl_sum([](const ReactorSample& r) { return r.offline_partitions; }));
  w.family("samsa_leader_partitions", "gauge", "Partitions led by this broker.");
  w.sample("samsa_leader_partitions", {},
           repl_sum([](const ReactorSample& r) { return r.led_partitions; }));
  w.family("samsa_isr_shrinks_total", "counter",
           "ISR shrinks this broker's leaders had accepted by the controller.");
  w.sample("samsa_isr_shrinks_total", {},
           repl_sum([](const ReactorSample& r) { return r.isr_shrinks; }));
  w.family("samsa_isr_expands_total", "counter",
           "ISR expansions this broker's leaders had accepted by the controller.");
  w.sample("samsa_isr_expands_total", {},
           repl_sum([](const ReactorSample& r) { return r.isr_expands; }));
  w.family("samsa_replica_fetches_total", "counter", "Fetches this broker's followers sent.");
  w.sample("samsa_replica_fetches_total", {},
           repl_sum([](const ReactorSample& r) { return r.replica_fetches; }));
  w.family("samsa_replica_bytes_in_total", "counter",
           "Record bytes this broker's followers appended from their leaders.");
  w.sample("samsa_replica_bytes_in_total", {},
           repl_sum([](const ReactorSample& r) { return r.replica_bytes_in; }));
  w.family("samsa_replica_truncations_total", "counter",
           "Times a follower cut a diverged tail of its log.");
  w.sample("samsa_replica_truncations_total", {},
           repl_sum([](const ReactorSample& r) { return r.replica_truncations; }));
  w.family("samsa_fetch_follower_requests_total", "counter",
           "Consumer Fetch requests this broker served from follower replicas (KIP-392).");
  w.sample("samsa_fetch_follower_requests_total", {},
           repl_sum([](const ReactorSample& r) { return r.follower_reads.requests; }));
  w.family("samsa_fetch_follower_bytes_total", "counter",
           "Record bytes this broker's follower replicas sent to consumers (KIP-392).");
  w.sample("samsa_fetch_follower_bytes_total", {},
           repl_sum([](const ReactorSample& r) { return r.follower_reads.bytes; }));
  w.family("samsa_fetch_preferred_replica_total", "counter",
           "Partitions of consumer fetches this broker's leaders answered with a preferred read "
           "replica in the consumer's rack instead of records (replica.selector.class).");
  w.sample("samsa_fetch_preferred_replica_total", {},
           repl_sum([](const ReactorSample& r) { return r.follower_reads.redirects; }));
}

// Kafka's LeaderReplication and FollowerReplication quota metrics, and how long each held.
void write_replication_throttles(Writer& w,
                                 const std::array<cluster::ReplicationQuota::Stats, 2>& t) {
  const char* sides[] = {"leader", "follower"};
  auto each = [&](const char* name, const char* type, const char* help, auto get) {
    w.family(name, type, help);
    for (std::size_t i = 0; i < 2; ++i)
      w.sample(name, {{"side", sides[i]}}, get(t[i]));
  };
  using S = cluster::ReplicationQuota::Stats;
  each("samsa_replication_throttled_bytes_total", "counter",
       "Record bytes of the replicas *.replication.throttled.replicas lists for this broker that "
       "moved (what the throttle's rate measures).",
       [](const S& s) { return static_cast<double>(s.bytes); });
  each("samsa_replication_throttled_seconds_total", "counter",
       "Time the throttle held listed replicas back, its rate above "
       "*.replication.throttled.rate.",
       [](const S& s) { return static_cast<double>(s.throttled_ms) * 1e-3; });
  each("samsa_replication_throttle_holds_total", "counter",
       "Times a listed replica was held back (left out of a fetch, or answered without records).",
       [](const S& s) { return static_cast<double>(s.holds); });
  each("samsa_replication_throttled_byte_rate", "gauge",
       "The listed replicas' bytes per second as the throttle measures them (Kafka's byte-rate).",
       [](const S& s) { return s.rate; });
}

}  // namespace

std::size_t count_io_workers() {
  std::size_t n = 0;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream f(task.path() / "comm");
    std::string comm;
    if (std::getline(f, comm) && comm.starts_with("iou-wrk")) ++n;
  }
  return n;
}

std::string render_prometheus(const BrokerSample& s) {
  Writer w;
  w.family("samsa_build_info", "gauge", "Always 1; the labels say which samsad this is.");
  w.sample("samsa_build_info",
           {{"version", s.version},
            {"node_id", std::to_string(s.node_id)},
            {"cluster_id", s.cluster_id}},
           1);
  w.family("process_start_time_seconds", "gauge", "Start time of the process since the epoch.");
  w.sample("process_start_time_seconds", {}, s.start_time_s);
  w.family("samsa_uptime_seconds", "gauge", "Seconds since samsad started.");
  w.sample("samsa_uptime_seconds", {}, s.uptime_s);

  Merged m = merge(s);
  write_requests(w, m);
  write_topics(w, m);
  write_partitions(w, m);
  write_groups(w, s, m);
  write_txn_coordinator(w, s);
  write_io_and_reactors(w, s, m);
  write_network(w, m);
  if (s.backend) {
    BackendSink sink{w};
    s.backend->write_metrics(sink);
  }
  write_replication(w, s);
  if (s.replication_throttles) write_replication_throttles(w, *s.replication_throttles);
  if (s.cleaner) write_cleaner(w, *s.cleaner);
  w.family("samsa_metadata_offset", "gauge",
           "Offset of the last applied __cluster_metadata record.");
  w.sample("samsa_metadata_offset", {}, static_cast<double>(s.metadata_offset));
  w.family("samsa_topics", "gauge", "Topics in the cluster metadata.");
  w.sample("samsa_topics", {}, static_cast<double>(s.topics));
  return w.take();
}

}  // namespace samsa::daemon
