"""The golden-response scenario's admin steps (configs and the other admin APIs) and its topic
deletions; run by golden_scenario.run. The rules in golden_scenario.py's docstring hold here too."""

from __future__ import annotations

from golden_common import (
    NONE, TOPIC_A, TOPIC_AUTO, TOPIC_B, TOPIC_DEL, TOPIC_DEL_ID, TOPIC_IDEM, TS, UNKNOWN,
    UNKNOWN_ID, batch, fetch_body, list_offsets_body, metadata_topics, produce_body, recs,
    topic_id, wait_metadata)

# ------------------------------------------------------------------------------------------

TOPIC, BROKER = 2, 4  # config resource types
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def describe_configs(ctx, label, v, resources, synonyms=False, docs=False):
    return ctx.call(label, "DescribeConfigs", v, {
        "Resources": [{"ResourceType": t, "ResourceName": n, "ConfigurationKeys": keys}
                      for t, n, keys in resources],
        "IncludeSynonyms": synonyms, "IncludeDocumentation": docs})


def wait_config(ctx, label, rtype, name, key, value):
    def ok(r):
        if r is None or not r["Results"] or r["Results"][0]["ErrorCode"] != NONE:
            return False
        vals = {c["Name"]: c["Value"] for c in r["Results"][0]["Configs"]}
        return vals.get(key) == value
    return ctx.wait(label, "DescribeConfigs", 4, {
        "Resources": [{"ResourceType": rtype, "ResourceName": name, "ConfigurationKeys": [key]}],
        "IncludeSynonyms": False, "IncludeDocumentation": False}, ok)


BROKER_KEYS = ["num.partitions", "log.retention.hours", "log.retention.ms",
               "log.segment.bytes", "auto.create.topics.enable", "message.max.bytes",
               "min.insync.replicas", "log.cleanup.policy", "default.replication.factor",
               "log.flush.interval.messages", "log.roll.hours", "delete.topic.enable",
               "offsets.topic.num.partitions", "group.initial.rebalance.delay.ms",
               "no.such.config"]
TOPIC_KEYS = ["retention.ms", "max.message.bytes", "cleanup.policy", "segment.bytes",
              "min.insync.replicas", "flush.messages", "flush.ms", "retention.bytes",
              "message.timestamp.type", "segment.ms", "no.such.config"]


def admin(ctx):
    a, b = TOPIC_A, TOPIC_B
    # ---- DescribeConfigs ----
    describe_configs(ctx, "describe_configs_v1_topic_all", 1, [(TOPIC, b, None)])
    describe_configs(ctx, "describe_configs_v4_topic_keys_synonyms_docs", 4,
                     [(TOPIC, b, TOPIC_KEYS), (TOPIC, a, ["retention.ms", "cleanup.policy"])],
                     synonyms=True, docs=True)
    describe_configs(ctx, "describe_configs_v2_topic_all_synonyms", 2, [(TOPIC, a, None)],
                     synonyms=True)
    describe_configs(ctx, "describe_configs_v3_broker_keys", 3, [(BROKER, "1", BROKER_KEYS)],
                     synonyms=True)
    describe_configs(ctx, "describe_configs_v4_errors", 4, [
        (TOPIC, UNKNOWN, None), (BROKER, "7", ["num.partitions"]), (BROKER, "x", None),
        (TOPIC, "", None), (TOPIC, "bad name!", None)])
    describe_configs(ctx, "describe_configs_v4_bad_resource_type", 4, [(9, "what", None)])
    # ---- IncrementalAlterConfigs ----
    ctx.call("incremental_alter_configs_v0_set_delete", "IncrementalAlterConfigs", 0, {
        "Resources": [{"ResourceType": TOPIC, "ResourceName": b, "Configs": [
            {"Name": "retention.ms", "ConfigOperation": SET, "Value": "7200000"},
            {"Name": "max.message.bytes", "ConfigOperation": DELETE, "Value": None},
            {"Name": "segment.ms", "ConfigOperation": SET, "Value": "3600000"}]}],
        "ValidateOnly": False})
    wait_config(ctx, "config_b_applied", TOPIC, b, "retention.ms", "7200000")
    describe_configs(ctx, "describe_configs_v4_after_incremental", 4,
                     [(TOPIC, b, ["retention.ms", "max.message.bytes", "segment.ms"])],
                     synonyms=True)
    ctx.call("incremental_alter_configs_v1_append_subtract", "IncrementalAlterConfigs", 1, {
        "Resources": [{"ResourceType": TOPIC, "ResourceName": b, "Configs": [
            {"Name": "cleanup.policy", "ConfigOperation": APPEND, "Value": "compact"}]}],
        "ValidateOnly": False})
    wait_config(ctx, "config_b_policy_applied", TOPIC, b, "cleanup.policy", "delete,compact")
    ctx.call("incremental_alter_configs_v1_subtract", "IncrementalAlterConfigs", 1, {
        "Resources": [{"ResourceType": TOPIC, "ResourceName": b, "Configs": [
            {"Name": "cleanup.policy", "ConfigOperation": SUBTRACT, "Value": "compact"}]}],
        "ValidateOnly": False})
    wait_config(ctx, "config_b_policy_back", TOPIC, b, "cleanup.policy", "delete")
    ctx.call("incremental_alter_configs_v1_errors", "IncrementalAlterConfigs", 1, {
        "Resources": [
            {"ResourceType": TOPIC, "ResourceName": a, "Configs": [
                {"Name": "retention.ms", "ConfigOperation": SET, "Value": "soon"}]},
            {"ResourceType": TOPIC, "ResourceName": a, "Configs": [
                {"Name": "no.such.config", "ConfigOperation": SET, "Value": "1"}]},
            {"ResourceType": TOPIC, "ResourceName": UNKNOWN, "Configs": [
                {"Name": "retention.ms", "ConfigOperation": SET, "Value": "1000"}]},
            {"ResourceType": TOPIC, "ResourceName": a, "Configs": [
                {"Name": "retention.ms", "ConfigOperation": APPEND, "Value": "1000"}]},
            {"ResourceType": TOPIC, "ResourceName": a, "Configs": [
                {"Name": "min.insync.replicas", "ConfigOperation": SET, "Value": "0"}]}],
        "ValidateOnly": False})
    ctx.call("incremental_alter_configs_v1_validate_only", "IncrementalAlterConfigs", 1, {
        "Resources": [{"ResourceType": TOPIC, "ResourceName": a, "Configs": [
            {"Name": "retention.ms", "ConfigOperation": SET, "Value": "1000"}]}],
        "ValidateOnly": True})
    # Dynamic broker settings: per broker and cluster-wide ("" names the cluster default).
    ctx.call("incremental_alter_configs_v1_broker", "IncrementalAlterConfigs", 1, {
        "Resources": [
            {"ResourceType": BROKER, "ResourceName": "1", "Configs": [
                {"Name": "log.retention.ms", "ConfigOperation": SET, "Value": "604800001"}]},
            {"ResourceType": BROKER, "ResourceName": "", "Configs": [
                {"Name": "log.flush.interval.messages", "ConfigOperation": SET,
                 "Value": "100000"}]}],
        "ValidateOnly": False})
    wait_config(ctx, "config_broker_applied", BROKER, "1", "log.retention.ms", "604800001")
    wait_config(ctx, "config_cluster_applied", BROKER, "1", "log.flush.interval.messages",
                "100000")
    describe_configs(ctx, "describe_configs_v4_broker_dynamic", 4, [
        (BROKER, "1", ["log.retention.ms", "log.flush.interval.messages"]),
        (BROKER, "", ["log.flush.interval.messages"])], synonyms=True)
    describe_configs(ctx, "describe_configs_v4_topic_sees_broker_dynamic", 4,
                     [(TOPIC, a, ["retention.ms", "flush.messages"])], synonyms=True)
    ctx.call("incremental_alter_configs_v1_broker_static_only", "IncrementalAlterConfigs", 1, {
        "Resources": [{"ResourceType": BROKER, "ResourceName": "1", "Configs": [
            {"Name": "node.id", "ConfigOperation": SET, "Value": "5"}]}],
        "ValidateOnly": False})
    ctx.call("incremental_alter_configs_v1_broker_undo", "IncrementalAlterConfigs", 1, {
        "Resources": [
            {"ResourceType": BROKER, "ResourceName": "1", "Configs": [
                {"Name": "log.retention.ms", "ConfigOperation": DELETE, "Value": None}]},
            {"ResourceType": BROKER, "ResourceName": "", "Configs": [
                {"Name": "log.flush.interval.messages", "ConfigOperation": DELETE,
                 "Value": None}]}],
        "ValidateOnly": False})
    wait_config(ctx, "config_broker_undone", BROKER, "1", "log.flush.interval.messages",
                "9223372036854775807")
    # ---- AlterConfigs (the whole set replaces the old one) ----
    ctx.call("alter_configs_v0_replace", "AlterConfigs", 0, {
        "Resources": [{"ResourceType": TOPIC, "ResourceName": b, "Configs": [
            {"Name": "retention.ms", "Value": "3600000"},
            {"Name": "segment.bytes", "Value": "1048576"}]}], "ValidateOnly": False})
    wait_config(ctx, "config_b_replaced", TOPIC, b, "segment.bytes", "1048576")
    describe_configs(ctx, "describe_configs_v4_after_alter", 4,
                     [(TOPIC, b, ["retention.ms", "segment.bytes", "segment.ms",
                                  "cleanup.policy"])], synonyms=True)
    ctx.call("alter_configs_v1_errors", "AlterConfigs", 1, {
        "Resources": [
            {"ResourceType": TOPIC, "ResourceName": UNKNOWN, "Configs": [
                {"Name": "retention.ms", "Value": "1"}]},
            {"ResourceType": TOPIC, "ResourceName": a, "Configs": [
                {"Name": "segment.bytes", "Value": "-1"}]}], "ValidateOnly": False})
    ctx.call("alter_configs_v2_validate_only", "AlterConfigs", 2, {
        "Resources": [{"ResourceType": TOPIC, "ResourceName": a, "Configs": [
            {"Name": "retention.ms", "Value": "5000"}]}], "ValidateOnly": True})

    # ---- CreatePartitions ----
    ctx.call("create_partitions_v0_grow", "CreatePartitions", 0, {
        "Topics": [{"Name": a, "Count": 4, "Assignments": None}], "TimeoutMs": 30000,
        "ValidateOnly": False})
    wait_metadata(ctx, "topic_a_grown", [a], partitions=4)
    ctx.call("create_partitions_v1_errors", "CreatePartitions", 1, {
        "Topics": [{"Name": a, "Count": 2, "Assignments": None},
                   {"Name": b, "Count": 1, "Assignments": None},
                   {"Name": UNKNOWN, "Count": 3, "Assignments": None},
                   {"Name": TOPIC_AUTO, "Count": 3, "Assignments": [{"BrokerIds": [1]}]},
                   {"Name": TOPIC_DEL, "Count": 3, "Assignments": [{"BrokerIds": [7]}]}],
        "TimeoutMs": 30000, "ValidateOnly": False})
    ctx.call("create_partitions_v2_validate_only", "CreatePartitions", 2, {
        "Topics": [{"Name": b, "Count": 5, "Assignments": None}], "TimeoutMs": 30000,
        "ValidateOnly": True})
    ctx.call("create_partitions_v3_assignments", "CreatePartitions", 3, {
        "Topics": [{"Name": TOPIC_AUTO, "Count": 3,
                    "Assignments": [{"BrokerIds": [1]}, {"BrokerIds": [1]}]}],
        "TimeoutMs": 30000, "ValidateOnly": False})
    wait_metadata(ctx, "topic_auto_grown", [TOPIC_AUTO], partitions=3)
    ctx.call("metadata_v12_after_create_partitions", "Metadata", 12, {
        "Topics": metadata_topics([a, TOPIC_AUTO]), "AllowAutoTopicCreation": False})
    ctx.call("produce_v9_new_partition", "Produce", 9,
             produce_body(a, 3, batch(recs("p3a", 2)), acks=-1))

    # ---- DeleteRecords ----
    ctx.call("delete_records_v0", "DeleteRecords", 0, {"Topics": [{"Name": a, "Partitions": [
        {"PartitionIndex": 0, "Offset": 2}, {"PartitionIndex": 1, "Offset": -1}]}],
        "TimeoutMs": 30000})
    ctx.call("delete_records_v1_errors", "DeleteRecords", 1, {"Topics": [
        {"Name": a, "Partitions": [{"PartitionIndex": 2, "Offset": 1000},
                                   {"PartitionIndex": 9, "Offset": 0},
                                   {"PartitionIndex": 0, "Offset": 1}]},
        {"Name": UNKNOWN, "Partitions": [{"PartitionIndex": 0, "Offset": 0}]}],
        "TimeoutMs": 30000})
    ctx.call("delete_records_v2", "DeleteRecords", 2, {"Topics": [{"Name": a, "Partitions": [
        {"PartitionIndex": 2, "Offset": 3}]}], "TimeoutMs": 30000})
    ctx.call("list_offsets_v6_after_delete_records", "ListOffsets", 6,
             list_offsets_body(a, [(0, -2), (1, -2), (2, -2), (3, -2)]))
    ctx.call("list_offsets_v6_timestamp_after_delete_records", "ListOffsets", 6,
             list_offsets_body(a, [(0, TS), (1, -1), (2, TS + 1)]))
    ctx.call("fetch_v12_before_log_start", "Fetch", 12,
             fetch_body([(a, None, [(0, 0), (0, 2)])]))

    # ---- DescribeCluster ----
    ctx.call("describe_cluster_v0", "DescribeCluster", 0,
             {"IncludeClusterAuthorizedOperations": False})
    ctx.call("describe_cluster_v1_ops", "DescribeCluster", 1,
             {"IncludeClusterAuthorizedOperations": True, "EndpointType": 1})
    ctx.call("describe_cluster_v1_controllers", "DescribeCluster", 1,
             {"IncludeClusterAuthorizedOperations": False, "EndpointType": 2})
    ctx.call("describe_cluster_v2_fenced", "DescribeCluster", 2,
             {"IncludeClusterAuthorizedOperations": False, "EndpointType": 1,
              "IncludeFencedBrokers": True})

    # ---- DescribeLogDirs ----
    parts = [{"Topic": a, "Partitions": [0, 1, 2, 3]}, {"Topic": b, "Partitions": [0]},
             {"Topic": UNKNOWN, "Partitions": [0]}]
    ctx.call("describe_log_dirs_v1", "DescribeLogDirs", 1, {"Topics": parts})
    ctx.call("describe_log_dirs_v2", "DescribeLogDirs", 2, {"Topics": parts[:1]})
    ctx.call("describe_log_dirs_v4", "DescribeLogDirs", 4, {"Topics": parts})
    ctx.call("describe_log_dirs_v3_none", "DescribeLogDirs", 3, {"Topics": []})

    # ---- DescribeProducers ----
    ctx.call("describe_producers_v0", "DescribeProducers", 0, {"Topics": [
        {"Name": TOPIC_IDEM, "PartitionIndexes": [0, 3]},
        {"Name": a, "PartitionIndexes": [0]},
        {"Name": UNKNOWN, "PartitionIndexes": [0]}]})

    # ---- OffsetForLeaderEpoch ----
    ctx.call("offset_for_leader_epoch_v2", "OffsetForLeaderEpoch", 2, {"Topics": [
        {"Topic": a, "Partitions": [{"Partition": 0, "CurrentLeaderEpoch": -1, "LeaderEpoch": 0},
                                    {"Partition": 1, "CurrentLeaderEpoch": 0,
                                     "LeaderEpoch": 0}]}]})
    ctx.call("offset_for_leader_epoch_v3_consumer", "OffsetForLeaderEpoch", 3, {
        "ReplicaId": -1, "Topics": [
            {"Topic": a, "Partitions": [
                {"Partition": 2, "CurrentLeaderEpoch": -1, "LeaderEpoch": 0},
                {"Partition": 0, "CurrentLeaderEpoch": -1, "LeaderEpoch": 7},
                {"Partition": 1, "CurrentLeaderEpoch": 3, "LeaderEpoch": 0},
                {"Partition": 9, "CurrentLeaderEpoch": -1, "LeaderEpoch": 0}]},
            {"Topic": UNKNOWN, "Partitions": [
                {"Partition": 0, "CurrentLeaderEpoch": -1, "LeaderEpoch": 0}]}]})
    ctx.call("offset_for_leader_epoch_v4", "OffsetForLeaderEpoch", 4, {
        "ReplicaId": -1, "Topics": [{"Topic": a, "Partitions": [
            {"Partition": 3, "CurrentLeaderEpoch": -1, "LeaderEpoch": 0}]}]})

    # ---- DescribeTopicPartitions ----
    ctx.call("describe_topic_partitions_v0", "DescribeTopicPartitions", 0, {
        "Topics": [{"Name": a}, {"Name": b}, {"Name": UNKNOWN}], "ResponsePartitionLimit": 2000,
        "Cursor": None})
    ctx.call("describe_topic_partitions_v0_limit", "DescribeTopicPartitions", 0, {
        "Topics": [{"Name": a}, {"Name": b}], "ResponsePartitionLimit": 2, "Cursor": None})
    ctx.call("describe_topic_partitions_v0_cursor", "DescribeTopicPartitions", 0, {
        "Topics": [{"Name": a}, {"Name": b}], "ResponsePartitionLimit": 2,
        "Cursor": {"TopicName": a, "PartitionIndex": 2}})


# ------------------------------------------------------------------------------------------


def delete_topics(ctx):
    ctx.call("delete_topics_v1", "DeleteTopics", 1, {"TopicNames": [TOPIC_DEL, UNKNOWN],
                                                     "TimeoutMs": 30000})
    wait_metadata(ctx, "topic_del_gone", [TOPIC_DEL], want_ok=False)
    ctx.call("delete_topics_v4_again", "DeleteTopics", 4, {"TopicNames": [TOPIC_DEL, "bad name!"],
                                                           "TimeoutMs": 30000})
    ctx.call("delete_topics_v6_by_id", "DeleteTopics", 6, {"Topics": [
        {"Name": None, "TopicId": topic_id(ctx, TOPIC_DEL_ID)},
        {"Name": None, "TopicId": UNKNOWN_ID},
        {"Name": UNKNOWN, "TopicId": "AAAAAAAAAAAAAAAAAAAAAA"}], "TimeoutMs": 30000})
    wait_metadata(ctx, "topic_del_id_gone", [TOPIC_DEL_ID], want_ok=False)
    ctx.call("metadata_v12_after_delete", "Metadata", 12, {
        "Topics": metadata_topics([TOPIC_DEL, TOPIC_DEL_ID]),
        "AllowAutoTopicCreation": False})
    ctx.call("fetch_v13_deleted_topic_id", "Fetch", 13,
             fetch_body([(None, topic_id(ctx, TOPIC_DEL_ID), [(0, 0)])]))
    ctx.call("metadata_v12_all_end", "Metadata", 12, {"Topics": None,
                                                      "AllowAutoTopicCreation": False})
