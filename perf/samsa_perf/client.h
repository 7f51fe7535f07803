// Thin helpers over librdkafka's C API: client creation from Options, topic creation,
// partition counts and watermarks. Errors are strings; none of this runs per record.
#pragma once

#include <librdkafka/rdkafka.h>

#include <cstdint>
#include <expected>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "perf/samsa_perf/options.h"

namespace samsa::perf {

struct RdKafkaDeleter {
  void operator()(rd_kafka_t* rk) const { rd_kafka_destroy(rk); }
};
using Client = std::unique_ptr<rd_kafka_t, RdKafkaDeleter>;

using Props = std::vector<std::pair<std::string, std::string>>;

// The properties every client gets, then the kind's own, then -X, then -P/-C (last wins).
Props producer_props(const Options& o);
Props consumer_props(const Options& o);

// Creates a client; conf_hook may add callbacks to the conf before it is handed over.
std::expected<Client, std::string> make_client(rd_kafka_type_t type, const Props& props,
                                               void* opaque,
                                               void (*conf_hook)(rd_kafka_conf_t*) = nullptr);

// Creates the topics that are absent (replication factor 1, o.topic_config); an existing topic
// with another partition count is an error.
std::expected<void, std::string> create_topics(const Options& o);

// Partition count of a topic, waiting (up to timeout_ms) until every partition has a leader.
std::expected<int, std::string> partition_count(rd_kafka_t* rk, const std::string& topic,
                                                int timeout_ms);

// Low and high watermark of one partition, retried until timeout_ms.
std::expected<std::pair<std::int64_t, std::int64_t>, std::string> watermarks(
    rd_kafka_t* rk, const std::string& topic, int partition, int timeout_ms);

}  // namespace samsa::perf
