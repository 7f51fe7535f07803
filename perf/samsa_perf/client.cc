#include "perf/samsa_perf/client.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

namespace samsa::perf {

namespace {

Props common_props(const Options& o) {
  Props p{{"bootstrap.servers", o.bootstrap}, {"client.id", "samsa-perf"}};
  for (const auto& kv : o.rdkafka)
    p.push_back(kv);
  return p;
}

std::string fmt_ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", ms);
  return buf;
}

}  // namespace

Props producer_props(const Options& o) {
  Props p{{"bootstrap.servers", o.bootstrap},
          {"client.id", "samsa-perf"},
          {"acks", o.acks},
          {"compression.codec", o.compression},
          // Each producer keeps at most this much queued: with many producers in one process
          // the client's default (1 GiB each) would not fit in memory, and a deep queue only
          // adds waiting time to max-throughput latencies.
          {"queue.buffering.max.kbytes",
           std::to_string(std::max(16384, 262144 / std::max(1, o.producers)))}};
  if (o.linger_ms) p.emplace_back("linger.ms", fmt_ms(*o.linger_ms));
  if (o.batch_size) p.emplace_back("batch.size", std::to_string(*o.batch_size));
  for (const auto& kv : o.rdkafka)
    p.push_back(kv);
  for (const auto& kv : o.producer_props)
    p.push_back(kv);
  return p;
}

Props consumer_props(const Options& o) {
  Props p = common_props(o);
  p.emplace_back("group.id", "samsa-perf-" + std::to_string(::getpid()));
  p.emplace_back("enable.auto.commit", "false");
  p.emplace_back("enable.auto.offset.store", "false");
  p.emplace_back("enable.partition.eof", "false");
  p.emplace_back("auto.offset.reset", "earliest");
  for (const auto& kv : o.consumer_props)
    p.push_back(kv);
  return p;
}

std::expected<Client, std::string> make_client(rd_kafka_type_t type, const Props& props,
                                               void* opaque, void (*conf_hook)(rd_kafka_conf_t*)) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  for (const auto& [k, v] : props) {
    if (rd_kafka_conf_set(conf, k.c_str(), v.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(conf);
      return std::unexpected("librdkafka property " + k + "=" + v + ": " + err);
    }
  }
  if (opaque) rd_kafka_conf_set_opaque(conf, opaque);
  if (conf_hook) conf_hook(conf);
  rd_kafka_t* rk = rd_kafka_new(type, conf, err, sizeof err);
  if (!rk) {
    rd_kafka_conf_destroy(conf);
    return std::unexpected(std::string("rd_kafka_new: ") + err);
  }
  return Client(rk);
}

std::expected<int, std::string> partition_count(rd_kafka_t* rk, const std::string& topic,
                                                int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::string last = "no answer";
  rd_kafka_topic_t* rkt = rd_kafka_topic_new(rk, topic.c_str(), nullptr);
  while (std::chrono::steady_clock::now() < deadline) {
    const rd_kafka_metadata_t* md = nullptr;
    const rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, rkt, &md, 5000);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
      last = rd_kafka_err2str(e);
    } else {
      int n = -1;
      for (int i = 0; i < md->topic_cnt; ++i) {
        const auto& t = md->topics[i];
        if (topic != t.topic) continue;
        if (t.err != RD_KAFKA_RESP_ERR_NO_ERROR) {
          last = rd_kafka_err2str(t.err);
          break;
        }
        bool leaders = t.partition_cnt > 0;
        for (int p = 0; p < t.partition_cnt; ++p)
          leaders = leaders && t.partitions[p].leader >= 0 && !t.partitions[p].err;
        if (leaders)
          n = t.partition_cnt;
        else
          last = "partitions without a leader";
      }
      rd_kafka_metadata_destroy(md);
      if (n > 0) {
        rd_kafka_topic_destroy(rkt);
        return n;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  rd_kafka_topic_destroy(rkt);
  return std::unexpected("topic " + topic + ": " + last);
}

std::expected<std::pair<std::int64_t, std::int64_t>, std::string> watermarks(
    rd_kafka_t* rk, const std::string& topic, int partition, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR_NO_ERROR;
  do {
    std::int64_t lo = -1, hi = -1;
    e = rd_kafka_query_watermark_offsets(rk, topic.c_str(), partition, &lo, &hi, 5000);
    if (e == RD_KAFKA_RESP_ERR_NO_ERROR) return std::pair{lo, hi};
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  } while (std::chrono::steady_clock::now() < deadline);
  return std::unexpected(topic + "[" + std::to_string(partition) +
                         "] watermarks: " + rd_kafka_err2str(e));
}

std::expected<void, std::string> create_topics(const Options& o) {
  auto admin = make_client(RD_KAFKA_PRODUCER, common_props(o), nullptr);
  if (!admin) return std::unexpected(admin.error());
  rd_kafka_t* rk = admin->get();
  const auto names = o.topic_names();
  std::vector<rd_kafka_NewTopic_t*> nts;
  char err[512];
  for (const auto& n : names) {
    rd_kafka_NewTopic_t* nt = rd_kafka_NewTopic_new(n.c_str(), o.partitions, 1, err, sizeof err);
    if (!nt) return std::unexpected(std::string("NewTopic: ") + err);
    for (const auto& [k, v] : o.topic_config)
      rd_kafka_NewTopic_set_config(nt, k.c_str(), v.c_str());
    nts.push_back(nt);
  }
  rd_kafka_queue_t* q = rd_kafka_queue_new(rk);
  rd_kafka_AdminOptions_t* ao = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
  rd_kafka_AdminOptions_set_operation_timeout(ao, 30000, err, sizeof err);
  rd_kafka_CreateTopics(rk, nts.data(), nts.size(), ao, q);
  rd_kafka_event_t* ev = rd_kafka_queue_poll(q, 60000);
  std::string failure;
  if (!ev) {
    failure = "CreateTopics: no answer within 60 s";
  } else if (rd_kafka_event_error(ev)) {
    failure = std::string("CreateTopics: ") + rd_kafka_event_error_string(ev);
  } else {
    const rd_kafka_CreateTopics_result_t* res = rd_kafka_event_CreateTopics_result(ev);
    std::size_t cnt = 0;
    const rd_kafka_topic_result_t** trs = rd_kafka_CreateTopics_result_topics(res, &cnt);
    for (std::size_t i = 0; i < cnt; ++i) {
      const rd_kafka_resp_err_t e = rd_kafka_topic_result_error(trs[i]);
      if (e != RD_KAFKA_RESP_ERR_NO_ERROR && e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
        failure +=
            std::string(rd_kafka_topic_result_name(trs[i])) + ": " +
            (rd_kafka_topic_result_error_string(trs[i]) ? rd_kafka_topic_result_error_string(trs[i])
                                                        : rd_kafka_err2str(e)) +
            "; ";
    }
  }
  if (ev) rd_kafka_event_destroy(ev);
  rd_kafka_AdminOptions_destroy(ao);
  rd_kafka_queue_destroy(q);
  rd_kafka_NewTopic_destroy_array(nts.data(), nts.size());
  if (!failure.empty()) return std::unexpected(failure);
  for (const auto& n : names) {
    auto pc = partition_count(rk, n, 30000);
    if (!pc) return std::unexpected(pc.error());
    if (*pc != o.partitions)
      return std::unexpected("topic " + n + " exists with " + std::to_string(*pc) +
                             " partitions, not " + std::to_string(o.partitions));
  }
  return {};
}

}  // namespace samsa::perf
