// One function per Kafka api samsa serves; each answers through Request::reply().
// The version ranges they serve are in dispatch.cc's table.
#pragma once

#include <map>
#include <string>

#include "daemon/api/dispatch.h"
#include "daemon/settings.h"
#include "net/kafka/gen/init_producer_id_request.h"
#include "replication/topic_config.h"

namespace samsa::daemon::handlers {

void api_versions(RequestPtr r);
void metadata(RequestPtr r);
void produce(RequestPtr r);
void fetch(RequestPtr r);
void list_offsets(RequestPtr r);
void create_topics(RequestPtr r);
void delete_topics(RequestPtr r);
void create_partitions(RequestPtr r);
void elect_leaders(RequestPtr r);
// reassignments.cc
void alter_partition_reassignments(RequestPtr r);
void list_partition_reassignments(RequestPtr r);
void unregister_broker(RequestPtr r);
// Topic configs and dynamic broker settings (configs.cc).
void describe_configs(RequestPtr r);
void alter_configs(RequestPtr r);
void incremental_alter_configs(RequestPtr r);
// The source DescribeConfigs reports for a topic config (CreateTopics' answer carries it too).
std::int8_t topic_config_source(const BrokerSettings& s,
                                const std::map<std::string, std::string>& overrides,
                                const replication::TopicConfigKey& k);
// Per-partition admin work on the owning shards (records.cc).
void delete_records(RequestPtr r);
void offset_for_leader_epoch(RequestPtr r);
// Brokers, log directories and partitions (cluster.cc).
void describe_cluster(RequestPtr r);
void describe_log_dirs(RequestPtr r);
void describe_topic_partitions(RequestPtr r);
// Consumer groups and committed offsets (groups.cc), answered by the coordinator thread.
void find_coordinator(RequestPtr r);
void join_group(RequestPtr r);
void sync_group(RequestPtr r);
void heartbeat(RequestPtr r);
void leave_group(RequestPtr r);
void offset_commit(RequestPtr r);
void offset_fetch(RequestPtr r);
void list_groups(RequestPtr r);
void describe_groups(RequestPtr r);
void delete_groups(RequestPtr r);
void offset_delete(RequestPtr r);
// Producer ids for idempotent producers (groups.cc: the coordinator thread hands them out).
void init_producer_id(RequestPtr r);
// Authentication on SASL listeners and SCRAM credentials (security.cc).
void sasl_handshake(RequestPtr r);
void sasl_authenticate(RequestPtr r);
void describe_user_scram_credentials(RequestPtr r);
void alter_user_scram_credentials(RequestPtr r);
// Client quotas (quotas.cc).
void describe_client_quotas(RequestPtr r);
void alter_client_quotas(RequestPtr r);
// ACLs (acls.cc).
void create_acls(RequestPtr r);
void describe_acls(RequestPtr r);
void delete_acls(RequestPtr r);
// Transactions (transactions.cc).
void init_transactional_producer(RequestPtr r, kafka::InitProducerIdRequest body);
void add_partitions_to_txn(RequestPtr r);
void add_offsets_to_txn(RequestPtr r);
void end_txn(RequestPtr r);
void txn_offset_commit(RequestPtr r);
void write_txn_markers(RequestPtr r);
void describe_transactions(RequestPtr r);
void list_transactions(RequestPtr r);
// Idempotent producers' state per partition (producers.cc).
void describe_producers(RequestPtr r);

// A cluster's controller node (controller_apis.cc): brokers register and heartbeat; a broker
// node forwards topic and config changes to it.
void broker_registration(RequestPtr r);
void broker_heartbeat(RequestPtr r);
void alter_partition(RequestPtr r);
void allocate_producer_ids(RequestPtr r);
void forward(RequestPtr r);
// The controller quorum's RPCs (quorum_apis.cc): between controllers, and brokers' Fetch of the
// metadata log; DescribeQuorum for kafka-metadata-quorum.
void vote(RequestPtr r);
void begin_quorum_epoch(RequestPtr r);
void end_quorum_epoch(RequestPtr r);
void fetch_snapshot(RequestPtr r);
void metadata_log_fetch(RequestPtr r);
void describe_quorum(RequestPtr r);

// The answer to a Produce v0-2 request (which Kafka advertises but refuses): every partition
// gets UNSUPPORTED_VERSION. Hand-encoded: the codec starts at v3.
net::Response produce_v0_2_unsupported(const Request& r);

}  // namespace samsa::daemon::handlers
