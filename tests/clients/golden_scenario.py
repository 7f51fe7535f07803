"""The golden-response scenario: one deterministic sequence of Kafka requests, run once against
Apache Kafka 4.1.1 (captured) and in every test run against samsad (compared).

Rules that keep it deterministic:
- Requests never depend on a broker's answers except through values the broker hands out
  (topic ids, member ids, producer ids, generations, session ids), read with `ctx.got(...)`
  and a fallback so the same request is still sent when a broker answers differently.
- Nothing here branches on an answer. Steps that wait for a broker to catch up (metadata
  propagation, coordinator loading) use `ctx.wait`, whose polls are not recorded; only the
  wait's outcome is.
- Record timestamps are fixed (2023-11-14); both brokers are started with the settings in
  BROKER_SETTINGS so that answers depending on them agree.
"""

from __future__ import annotations

from golden_common import (  # noqa: F401  (BROKER_SETTINGS, KAFKA_ONLY_SETTINGS: for kgolden.py)
    BROKER_SETTINGS, KAFKA_ONLY_SETTINGS, NONE, SESSION_MS, TOPIC_A, TOPIC_AUTO, TOPIC_AUTO_V1,
    TOPIC_B, TOPIC_DEL, TOPIC_DEL_ID, TOPIC_IDEM, TS, UNKNOWN, UNKNOWN_ID, assignment, batch,
    fetch_body, learn_topic_ids, list_offsets_body, metadata_topics, produce_body, recs,
    subscription, topic_id, wait_metadata)
from golden_admin import admin, delete_topics


def run(ctx):
    """The whole scenario. ctx: kgolden.Ctx."""
    api_versions(ctx)
    metadata_and_topics(ctx)
    produce(ctx)
    fetch(ctx)
    list_offsets(ctx)
    groups(ctx)
    producer_ids(ctx)
    admin(ctx)
    delete_topics(ctx)


# ------------------------------------------------------------------------------------------


def api_versions(ctx):
    for v in (0, 1, 2):
        ctx.call(f"api_versions_v{v}", "ApiVersions", v, {})
    for v in (3, 4):
        ctx.call(f"api_versions_v{v}", "ApiVersions", v,
                 {"ClientSoftwareName": "samsa-golden", "ClientSoftwareVersion": "1.0"})
    # A version newer than any broker knows: error 35 and the list in the v0 shape.
    body = ctx.kafka.codec.encode(ctx.kafka.schemas.request(18), 4,
                                  {"ClientSoftwareName": "samsa-golden",
                                   "ClientSoftwareVersion": "1.0"})
    ctx.call("api_versions_v5_too_new", "ApiVersions", 5, body_hex=body.hex())
    # ApiVersions v3 with an invalid software name (KIP-511: INVALID_REQUEST).
    ctx.call("api_versions_v3_bad_name", "ApiVersions", 3,
             {"ClientSoftwareName": "bad name!", "ClientSoftwareVersion": "1.0"})




def metadata_and_topics(ctx):
    # A fresh broker: all topics (v0: empty array means all; v1+: null).
    ctx.call("metadata_v0_all_empty", "Metadata", 0, {"Topics": []})
    ctx.call("metadata_v1_all_empty", "Metadata", 1, {"Topics": None})

    # CreateTopics: several versions, ok / exists / invalid name / bad partitions / validate.
    ctx.call("create_topics_v2_ok", "CreateTopics", 2, {"Topics": [
        {"Name": TOPIC_A, "NumPartitions": 3, "ReplicationFactor": 1}], "timeoutMs": 30000})
    wait_metadata(ctx, "topic_a_ready", [TOPIC_A], partitions=3)
    ctx.call("create_topics_v4_exists_and_bad", "CreateTopics", 4, {"Topics": [
        {"Name": TOPIC_A, "NumPartitions": 3, "ReplicationFactor": 1},
        {"Name": "bad name!", "NumPartitions": 1, "ReplicationFactor": 1},
        {"Name": "golden-zero-parts", "NumPartitions": 0, "ReplicationFactor": 1},
        {"Name": "golden-neg-rf", "NumPartitions": 1, "ReplicationFactor": -2},
        {"Name": "golden-rf3", "NumPartitions": 1, "ReplicationFactor": 3},
        {"Name": "golden-bad-config", "NumPartitions": 1, "ReplicationFactor": 1,
         "Configs": [{"Name": "no.such.config", "Value": "1"}]},
        {"Name": "golden-bad-value", "NumPartitions": 1, "ReplicationFactor": 1,
         "Configs": [{"Name": "retention.ms", "Value": "soon"}]},
    ], "timeoutMs": 30000, "validateOnly": False})
    ctx.call("create_topics_v5_validate_only", "CreateTopics", 5, {"Topics": [
        {"Name": "golden-validate", "NumPartitions": 2, "ReplicationFactor": 1,
         "Configs": [{"Name": "retention.ms", "Value": "3600000"}]}],
        "timeoutMs": 30000, "validateOnly": True})
    ctx.call("create_topics_v7_with_configs", "CreateTopics", 7, {"Topics": [
        {"Name": TOPIC_B, "NumPartitions": 1, "ReplicationFactor": 1,
         "Configs": [{"Name": "retention.ms", "Value": "86400000"},
                     {"Name": "max.message.bytes", "Value": "100000"},
                     {"Name": "cleanup.policy", "Value": "delete"}]},
        {"Name": TOPIC_IDEM, "NumPartitions": -1, "ReplicationFactor": -1},
        {"Name": TOPIC_DEL, "NumPartitions": 2, "ReplicationFactor": 1},
        {"Name": TOPIC_DEL_ID, "NumPartitions": 1, "ReplicationFactor": 1},
        {"Name": "x" * 250, "NumPartitions": 1, "ReplicationFactor": 1},
        {"Name": "..", "NumPartitions": 1, "ReplicationFactor": 1},
        {"Name": "", "NumPartitions": 1, "ReplicationFactor": 1},
        {"Name": TOPIC_A, "NumPartitions": 1, "ReplicationFactor": 1},
        {"Name": "golden-zero-v7", "NumPartitions": 0, "ReplicationFactor": 1},
        {"Name": "golden-bad-config-v7", "NumPartitions": 1, "ReplicationFactor": 1,
         "Configs": [{"Name": "cleanup.policy", "Value": "sometimes"}]},
        {"Name": "golden-explicit", "NumPartitions": -1, "ReplicationFactor": -1,
         "Assignments": [{"PartitionIndex": 0, "BrokerIds": [1]},
                         {"PartitionIndex": 1, "BrokerIds": [1]}]},
    ], "timeoutMs": 30000, "validateOnly": False})
    wait_metadata(ctx, "topics_ready", [TOPIC_A, TOPIC_B, TOPIC_IDEM, TOPIC_DEL,
                                        TOPIC_DEL_ID, "golden-explicit"])
    learn_topic_ids(ctx, [TOPIC_A, TOPIC_B, TOPIC_IDEM, TOPIC_DEL, TOPIC_DEL_ID])

    # Metadata: versions 0..13, named topics, unknown and invalid names, auto-creation.
    named = [TOPIC_A, TOPIC_B]
    ctx.call("metadata_v0_named", "Metadata", 0, {"Topics": metadata_topics(named)})
    # Before v4 a Metadata request always auto-creates the topics it names.
    ctx.call("metadata_v1_named_auto_creates", "Metadata", 1,
             {"Topics": metadata_topics([TOPIC_A, TOPIC_AUTO_V1])})
    wait_metadata(ctx, "auto_v1_topic_ready", [TOPIC_AUTO_V1])
    ctx.call("metadata_v2_after_auto_create", "Metadata", 2,
             {"Topics": metadata_topics([TOPIC_AUTO_V1])})
    ctx.call("metadata_v4_no_auto_create", "Metadata", 4,
             {"Topics": metadata_topics([UNKNOWN, "bad name!"]),
              "AllowAutoTopicCreation": False})
    ctx.call("metadata_v5_named", "Metadata", 5, {"Topics": metadata_topics(named),
                                                  "AllowAutoTopicCreation": False})
    ctx.call("metadata_v8_authorized_ops", "Metadata", 8,
             {"Topics": metadata_topics(named + [UNKNOWN]), "AllowAutoTopicCreation": False,
              "IncludeClusterAuthorizedOperations": True,
              "IncludeTopicAuthorizedOperations": True})
    ctx.call("metadata_v9_named", "Metadata", 9, {"Topics": metadata_topics(named),
                                                  "AllowAutoTopicCreation": False})
    ctx.call("metadata_v10_all", "Metadata", 10, {"Topics": None,
                                                  "AllowAutoTopicCreation": False})
    ctx.call("metadata_v11_empty_list", "Metadata", 11,
             {"Topics": [], "AllowAutoTopicCreation": False})
    ctx.call("metadata_v12_by_id", "Metadata", 12, {"Topics": [
        {"TopicId": topic_id(ctx, TOPIC_A), "Name": None},
        {"TopicId": UNKNOWN_ID, "Name": None}], "AllowAutoTopicCreation": False})
    ctx.call("metadata_v12_invalid_name", "Metadata", 12,
             {"Topics": metadata_topics(["bad name!", "", "x" * 250]),
              "AllowAutoTopicCreation": True})
    ctx.call("metadata_v13_all", "Metadata", 13, {"Topics": None,
                                                  "AllowAutoTopicCreation": False,
                                                  "IncludeTopicAuthorizedOperations": True})
    # Auto-creation: the first answer, then the topic once it exists.
    ctx.call("metadata_v4_auto_create", "Metadata", 4,
             {"Topics": metadata_topics([TOPIC_AUTO]), "AllowAutoTopicCreation": True})
    wait_metadata(ctx, "auto_topic_ready", [TOPIC_AUTO])
    learn_topic_ids(ctx, [TOPIC_AUTO])
    ctx.call("metadata_v12_auto_created", "Metadata", 12,
             {"Topics": metadata_topics([TOPIC_AUTO]), "AllowAutoTopicCreation": True})
    ctx.call("metadata_v7_named", "Metadata", 7, {"Topics": metadata_topics(named),
                                                  "AllowAutoTopicCreation": False})


# ------------------------------------------------------------------------------------------


def produce(ctx):
    a = TOPIC_A
    ctx.call("produce_v3_acks1", "Produce", 3,
             produce_body(a, 0, batch(recs("p0a", 2)), acks=1))
    ctx.call("produce_v5_acks_all", "Produce", 5,
             produce_body(a, 1, batch(recs("p1a", 3)), acks=-1))
    ctx.call("produce_v7_acks_all", "Produce", 7,
             produce_body(a, 0, batch(recs("p0b", 1, headers=False)), acks=-1))
    ctx.call("produce_v8_acks1", "Produce", 8,
             produce_body(a, 2, batch(recs("p2a", 2)), acks=1))
    ctx.call("produce_v9_acks_all_flexible", "Produce", 9,
             produce_body(a, 2, batch(recs("p2b", 2)), acks=-1))
    # acks=0: no answer; the next request on the connection gets the next answer.
    ctx.call("produce_v9_acks0", "Produce", 9,
             produce_body(a, 1, batch(recs("p1b", 2)), acks=0), expect_response=False)
    ctx.call("metadata_after_acks0", "Metadata", 9,
             {"Topics": metadata_topics([a]), "AllowAutoTopicCreation": False})
    # Several topics and partitions in one request, records with null keys/values.
    body = {"TransactionalId": None, "Acks": -1, "TimeoutMs": 10000, "TopicData": [
        {"Name": a, "PartitionData": [
            {"Index": 0, "Records": batch([(None, "null-key", []), ("null-value", None, [])])},
            {"Index": 1, "Records": batch(recs("p1c", 1))}]},
        {"Name": TOPIC_B, "PartitionData": [
            {"Index": 0, "Records": batch(recs("b0a", 4))}]}]}
    ctx.call("produce_v11_multi", "Produce", 11, body)
    ctx.call("produce_v12_gzip", "Produce", 12,
             produce_body(a, 2, batch(recs("p2gz", 3), attributes=1), acks=-1))
    # A timestamp of -1 (NO_TIMESTAMP): Kafka stores such records.
    ctx.call("produce_v12_no_timestamp", "Produce", 12,
             produce_body(a, 0, batch(recs("p0nots", 1), base_ts=-1, maxTimestamp=-1),
                          acks=-1))
    # Errors: acks=2, bad CRC, unknown topic and partition, too large for the topic, null
    # records, an empty records field.
    ctx.call("produce_v9_bad_acks", "Produce", 9,
             produce_body(a, 0, batch(recs("bad", 1)), acks=2))
    ctx.call("produce_v9_bad_crc", "Produce", 9,
             produce_body(a, 0, batch(recs("crc", 1), crc=12345), acks=-1))
    ctx.call("produce_v9_unknown_topic", "Produce", 9,
             produce_body(UNKNOWN, 0, batch(recs("u", 1)), acks=-1))
    ctx.call("produce_v9_unknown_partition", "Produce", 9,
             produce_body(a, 7, batch(recs("u", 1)), acks=-1))
    ctx.call("produce_v9_too_large", "Produce", 9,
             produce_body(TOPIC_B, 0, batch([("big", "v" * 120000, [])]), acks=-1))
    # (Null records are left out: Kafka 4.1.1 throws a NullPointerException and never answers.)
    ctx.call("produce_v9_bad_batch_length", "Produce", 9,
             produce_body(a, 0, batch(recs("len", 1), batchLength=5000), acks=-1))
    ctx.call("produce_v3_invalid_topic_name", "Produce", 3,
             produce_body("bad name!", 0, batch(recs("u", 1)), acks=1))
    # Produce v2: advertised from v0, refused below v3. Body in the v2 layout (no
    # TransactionalId): acks, timeout, topics.
    v3 = ctx.kafka.codec.encode(ctx.kafka.schemas.request(0), 3,
                                produce_body(a, 0, batch(recs("v2", 1)), acks=1))
    ctx.call("produce_v2_unsupported", "Produce", 2, body_hex=v3[2:].hex())
    # acks=0 with an error: Kafka closes the connection so the client refreshes metadata.
    ctx.call("produce_v9_acks0_unknown_topic", "Produce", 9,
             produce_body(UNKNOWN, 0, batch(recs("u0", 1)), acks=0), expect_response=False,
             conn="acks0")
    ctx.call("metadata_after_acks0_error", "Metadata", 9,
             {"Topics": metadata_topics([a]), "AllowAutoTopicCreation": False},
             conn="acks0")


# ------------------------------------------------------------------------------------------


def fetch(ctx):
    a = TOPIC_A
    aid = topic_id(ctx, a)
    ctx.call("fetch_v4_p0_from0", "Fetch", 4, fetch_body([(a, None, [(0, 0)])]))
    ctx.call("fetch_v5_all_partitions", "Fetch", 5,
             fetch_body([(a, None, [(0, 0), (1, 0), (2, 0)])]))
    ctx.call("fetch_v7_mid_batch", "Fetch", 7, fetch_body([(a, None, [(1, 1)])]))
    ctx.call("fetch_v11_rack", "Fetch", 11,
             fetch_body([(a, None, [(2, 0)]), (TOPIC_B, None, [(0, 0)])], rack="rack-a"))
    ctx.call("fetch_v12_flexible", "Fetch", 12, fetch_body([(a, None, [(0, 0), (2, 2)])]))
    ctx.call("fetch_v13_by_id", "Fetch", 13, fetch_body([(None, aid, [(0, 0), (1, 0)])]))
    ctx.call("fetch_v15_by_id", "Fetch", 15, fetch_body([(None, aid, [(2, 0)])]))
    ctx.call("fetch_v16_by_id", "Fetch", 16, fetch_body([(None, aid, [(0, 3)])]))
    ctx.call("fetch_v17_by_id", "Fetch", 17,
             fetch_body([(None, aid, [(0, 0)]), (None, topic_id(ctx, TOPIC_B), [(0, 0)])]))
    # Out of range (past the end, and negative), at the end with max wait 0, unknown topic
    # and partition, unknown topic id.
    ctx.call("fetch_v11_out_of_range", "Fetch", 11,
             fetch_body([(a, None, [(0, 1000), (1, -5)])]))
    ctx.call("fetch_v12_at_end_no_wait", "Fetch", 12,
             fetch_body([(a, None, [(1, 6)])], max_wait=0))
    ctx.call("fetch_v12_at_end_wait_200ms", "Fetch", 12,
             fetch_body([(a, None, [(1, 6)])], max_wait=200))
    ctx.call("fetch_v12_unknown", "Fetch", 12,
             fetch_body([(UNKNOWN, None, [(0, 0)]), (a, None, [(9, 0)])]))
    ctx.call("fetch_v13_unknown_id", "Fetch", 13,
             fetch_body([(None, UNKNOWN_ID, [(0, 0)])]))
    # Limits: one batch even above the partition and response limits (KIP-74).
    ctx.call("fetch_v12_tiny_partition_max", "Fetch", 12,
             fetch_body([(a, None, [(0, 0)])], part_max=10))
    ctx.call("fetch_v12_tiny_max_bytes", "Fetch", 12,
             fetch_body([(a, None, [(0, 0), (1, 0)])], max_bytes=10))
    ctx.call("fetch_v12_read_committed", "Fetch", 12,
             fetch_body([(a, None, [(2, 0)])], isolation=1))
    # A fetch session asked for (epoch 0): Kafka creates one; a broker may decline (id 0).
    ctx.call("fetch_v12_new_session", "Fetch", 12,
             fetch_body([(a, None, [(0, 0)])], session_epoch=0))


def list_offsets(ctx):
    a = TOPIC_A
    ctx.call("list_offsets_v1_earliest_latest", "ListOffsets", 1,
             list_offsets_body(a, [(0, -2), (1, -1)]))
    ctx.call("list_offsets_v2_latest", "ListOffsets", 2, list_offsets_body(a, [(2, -1)]))
    ctx.call("list_offsets_v4_by_timestamp", "ListOffsets", 4,
             list_offsets_body(a, [(0, TS), (1, TS + 1), (2, TS + 100)]))
    ctx.call("list_offsets_v5_before_all", "ListOffsets", 5,
             list_offsets_body(a, [(0, 0), (1, TS - 1)]))
    ctx.call("list_offsets_v6_flexible", "ListOffsets", 6,
             list_offsets_body(a, [(0, -2), (1, -1), (2, TS + 2)]))
    ctx.call("list_offsets_v7_max_timestamp", "ListOffsets", 7,
             list_offsets_body(a, [(0, -3), (1, -3), (2, -3)]))
    ctx.call("list_offsets_v8_earliest_local", "ListOffsets", 8,
             list_offsets_body(a, [(0, -4), (1, -4)]))
    ctx.call("list_offsets_v9_latest_tiered", "ListOffsets", 9,
             list_offsets_body(a, [(0, -5)]))
    ctx.call("list_offsets_v10", "ListOffsets", 10,
             list_offsets_body(a, [(0, -1), (1, -2), (2, TS + 1)]))
    ctx.call("list_offsets_v10_read_committed", "ListOffsets", 10,
             list_offsets_body(a, [(0, -1)], isolation=1))
    ctx.call("list_offsets_v6_unknown", "ListOffsets", 6,
             list_offsets_body(UNKNOWN, [(0, -1)]))
    ctx.call("list_offsets_v6_unknown_partition", "ListOffsets", 6,
             list_offsets_body(a, [(5, -1)]))
    ctx.call("list_offsets_v1_bad_timestamp", "ListOffsets", 1,
             list_offsets_body(a, [(0, -7)]))
    ctx.call("list_offsets_v6_empty_topic", "ListOffsets", 6,
             list_offsets_body(TOPIC_AUTO, [(0, -2)]))
    ctx.call("list_offsets_v6_duplicate_partition", "ListOffsets", 6,
             list_offsets_body(TOPIC_AUTO, [(0, -2), (0, -1)]))


# ------------------------------------------------------------------------------------------


def wait_coordinator(ctx, label, key, key_type=0):
    return ctx.wait(label, "FindCoordinator", 6, {"KeyType": key_type, "CoordinatorKeys": [key]},
                    lambda r: r is not None and r["Coordinators"][0]["ErrorCode"] == NONE,
                    give_up_s=3 if key_type else None)


def member_of(resp, fallback="member-unknown"):
    if resp is None:
        return fallback
    return resp.get("MemberId") or fallback


def groups(ctx):
    a = TOPIC_A
    wait_coordinator(ctx, "group_coordinator_ready", "golden-g0")
    ctx.call("find_coordinator_v0", "FindCoordinator", 0, {"Key": "golden-g0"})
    ctx.call("find_coordinator_v1", "FindCoordinator", 1, {"Key": "golden-g0", "KeyType": 0})
    ctx.call("find_coordinator_v3", "FindCoordinator", 3, {"Key": "golden-g1", "KeyType": 0})
    ctx.call("find_coordinator_v4_batch", "FindCoordinator", 4,
             {"KeyType": 0, "CoordinatorKeys": ["golden-g0", "golden-g1", ""]})
    ctx.call("find_coordinator_v6", "FindCoordinator", 6,
             {"KeyType": 0, "CoordinatorKeys": ["golden-g2"]})
    ctx.call("find_coordinator_v2_bad_type", "FindCoordinator", 2, {"Key": "x", "KeyType": 5})
    sub = subscription([a])

    # ---- group g0: JoinGroup v0..v3 (no MEMBER_ID_REQUIRED) ----
    g0 = "golden-g0"
    j = ctx.call("join_group_v0", "JoinGroup", 0, {
        "GroupId": g0, "SessionTimeoutMs": SESSION_MS, "MemberId": "", "ProtocolType": "consumer",
        "Protocols": [{"Name": "range", "Metadata": sub}]})
    m0 = member_of(j)
    gen0 = (j or {}).get("GenerationId", -1)
    ctx.call("sync_group_v0_leader", "SyncGroup", 0, {
        "GroupId": g0, "GenerationId": gen0, "MemberId": m0,
        "Assignments": [{"MemberId": m0, "Assignment": assignment({a: [0, 1, 2]})}]})
    ctx.call("heartbeat_v0", "Heartbeat", 0, {"GroupId": g0, "GenerationId": gen0, "MemberId": m0})
    ctx.call("offset_commit_v2", "OffsetCommit", 2, {
        "GroupId": g0, "GenerationIdOrMemberEpoch": gen0, "MemberId": m0, "RetentionTimeMs": -1,
        "Topics": [{"Name": a, "Partitions": [
            {"PartitionIndex": 0, "CommittedOffset": 2, "CommittedMetadata": "m"},
            {"PartitionIndex": 1, "CommittedOffset": 1, "CommittedMetadata": None}]}]})
    ctx.call("offset_fetch_v1", "OffsetFetch", 1, {
        "GroupId": g0, "Topics": [{"Name": a, "PartitionIndexes": [0, 1, 2]}]})
    ctx.call("describe_groups_v0_stable", "DescribeGroups", 0, {"Groups": [g0, "golden-none"]})
    ctx.call("leave_group_v0", "LeaveGroup", 0, {"GroupId": g0, "MemberId": m0})
    ctx.call("describe_groups_v1_empty", "DescribeGroups", 1, {"Groups": [g0]})

    # ---- group g1: v5+ join with MEMBER_ID_REQUIRED, the full life of a consumer ----
    g1 = "golden-g1"
    join = {"GroupId": g1, "SessionTimeoutMs": SESSION_MS, "RebalanceTimeoutMs": SESSION_MS,
            "MemberId": "", "GroupInstanceId": None, "ProtocolType": "consumer",
            "Protocols": [{"Name": "range", "Metadata": sub},
                          {"Name": "roundrobin", "Metadata": sub}]}
    j = ctx.call("join_group_v5_member_id_required", "JoinGroup", 5, join)
    m1 = member_of(j)
    ctx.call("join_group_v5_bad_session_timeout", "JoinGroup", 5,
             dict(join, SessionTimeoutMs=1000, MemberId=m1))
    j = ctx.call("join_group_v5_with_member_id", "JoinGroup", 5, dict(join, MemberId=m1))
    gen1 = (j or {}).get("GenerationId", -1)
    ctx.call("sync_group_v5_leader", "SyncGroup", 5, {
        "GroupId": g1, "GenerationId": gen1, "MemberId": m1, "ProtocolType": "consumer",
        "ProtocolName": "range",
        "Assignments": [{"MemberId": m1, "Assignment": assignment({a: [0, 1, 2]})}]})
    ctx.call("heartbeat_v4", "Heartbeat", 4, {"GroupId": g1, "GenerationId": gen1,
                                              "MemberId": m1})
    ctx.call("heartbeat_v3_bad_generation", "Heartbeat", 3,
             {"GroupId": g1, "GenerationId": gen1 + 5, "MemberId": m1})
    ctx.call("heartbeat_v4_unknown_member", "Heartbeat", 4,
             {"GroupId": g1, "GenerationId": gen1, "MemberId": "nobody"})
    ctx.call("heartbeat_v4_unknown_group", "Heartbeat", 4,
             {"GroupId": "golden-nogroup", "GenerationId": 1, "MemberId": "nobody"})
    ctx.call("offset_commit_v8", "OffsetCommit", 8, {
        "GroupId": g1, "GenerationIdOrMemberEpoch": gen1, "MemberId": m1,
        "Topics": [{"Name": a, "Partitions": [
            {"PartitionIndex": 0, "CommittedOffset": 3, "CommittedLeaderEpoch": 0,
             "CommittedMetadata": ""},
            {"PartitionIndex": 1, "CommittedOffset": 2, "CommittedMetadata": "meta"},
            {"PartitionIndex": 2, "CommittedOffset": 4}]},
            {"Name": TOPIC_B, "Partitions": [{"PartitionIndex": 0, "CommittedOffset": 1}]}]})
    ctx.call("offset_commit_v9_bad_generation", "OffsetCommit", 9, {
        "GroupId": g1, "GenerationIdOrMemberEpoch": gen1 + 3, "MemberId": m1,
        "Topics": [{"Name": a, "Partitions": [{"PartitionIndex": 0, "CommittedOffset": 1}]}]})
    ctx.call("offset_commit_v9_unknown_member", "OffsetCommit", 9, {
        "GroupId": g1, "GenerationIdOrMemberEpoch": gen1, "MemberId": "nobody",
        "Topics": [{"Name": a, "Partitions": [{"PartitionIndex": 0, "CommittedOffset": 1}]}]})
    ctx.call("offset_fetch_v5", "OffsetFetch", 5, {
        "GroupId": g1, "Topics": [{"Name": a, "PartitionIndexes": [0, 1, 2, 5]}]})
    ctx.call("offset_fetch_v7_all_topics", "OffsetFetch", 7,
             {"GroupId": g1, "Topics": None, "RequireStable": True})
    ctx.call("offset_fetch_v8_groups", "OffsetFetch", 8, {"Groups": [
        {"GroupId": g1, "Topics": [{"Name": a, "PartitionIndexes": [0, 2]},
                                   {"Name": UNKNOWN, "PartitionIndexes": [0]}]},
        {"GroupId": g0, "Topics": None},
        {"GroupId": "golden-nogroup", "Topics": None}], "RequireStable": False})
    ctx.call("offset_fetch_v9_member", "OffsetFetch", 9, {"Groups": [
        {"GroupId": g1, "MemberId": None, "MemberEpoch": -1, "Topics": None}]})
    ctx.call("describe_groups_v5_stable", "DescribeGroups", 5,
             {"Groups": [g1], "IncludeAuthorizedOperations": True})
    ctx.call("list_groups_v0", "ListGroups", 0, {})
    ctx.call("list_groups_v3", "ListGroups", 3, {})
    ctx.call("list_groups_v4_states", "ListGroups", 4, {"StatesFilter": ["Stable"]})
    ctx.call("list_groups_v5_types", "ListGroups", 5,
             {"StatesFilter": [], "TypesFilter": ["classic"]})
    ctx.call("offset_delete_v0_subscribed", "OffsetDelete", 0, {"GroupId": g1, "Topics": [
        {"Name": a, "Partitions": [{"PartitionIndex": 0}]}]})
    ctx.call("offset_delete_v0_not_subscribed", "OffsetDelete", 0, {"GroupId": g1, "Topics": [
        {"Name": TOPIC_B, "Partitions": [{"PartitionIndex": 0}]}]})
    ctx.call("offset_delete_v0_unknown_group", "OffsetDelete", 0, {
        "GroupId": "golden-nogroup", "Topics": [{"Name": a, "Partitions": [
            {"PartitionIndex": 0}]}]})
    ctx.call("delete_groups_v1_non_empty", "DeleteGroups", 1,
             {"GroupsNames": [g1, "golden-nogroup"]})
    # A second member joins (its JoinGroup waits for the rebalance); the first member's
    # heartbeat learns of it and rejoins; both sync.
    j2 = ctx.call("join_group_v9_second_member_required", "JoinGroup", 9,
                  dict(join, MemberId="", Reason="golden"), conn="m2")
    m2 = member_of(j2, "member2-unknown")
    h2 = ctx.call("join_group_v9_second_member_joins", "JoinGroup", 9,
                  dict(join, MemberId=m2, Reason="golden"), conn="m2", wait=False)
    ctx.wait("group_g1_rebalancing", "DescribeGroups", 5,
             {"Groups": [g1], "IncludeAuthorizedOperations": False},
             lambda r: r is not None and r["Groups"][0]["GroupState"] == "PreparingRebalance")
    ctx.call("heartbeat_v4_rebalance_in_progress", "Heartbeat", 4,
             {"GroupId": g1, "GenerationId": gen1, "MemberId": m1})
    j1 = ctx.call("join_group_v5_first_member_rejoins", "JoinGroup", 5, dict(join, MemberId=m1))
    if h2 is not None:
        ctx.collect(h2)
    gen2 = (j1 or {}).get("GenerationId", -1)
    s2 = ctx.call("sync_group_v5_follower", "SyncGroup", 5, {
        "GroupId": g1, "GenerationId": gen2, "MemberId": m2, "ProtocolType": "consumer",
        "ProtocolName": "range", "Assignments": []}, conn="m2", wait=False)
    ctx.call("sync_group_v5_leader_two_members", "SyncGroup", 5, {
        "GroupId": g1, "GenerationId": gen2, "MemberId": m1, "ProtocolType": "consumer",
        "ProtocolName": "range",
        "Assignments": [{"MemberId": m1, "Assignment": assignment({a: [0, 1]})},
                        {"MemberId": m2, "Assignment": assignment({a: [2]})}]})
    if s2 is not None:
        ctx.collect(s2)
    ctx.call("describe_groups_v5_two_members", "DescribeGroups", 5,
             {"Groups": [g1], "IncludeAuthorizedOperations": False})
    ctx.call("heartbeat_v4_old_generation", "Heartbeat", 4,
             {"GroupId": g1, "GenerationId": gen1, "MemberId": m1})
    ctx.call("leave_group_v5_both", "LeaveGroup", 5, {"GroupId": g1, "Members": [
        {"MemberId": m1, "Reason": "done"}, {"MemberId": m2, "Reason": "done"},
        {"MemberId": "nobody"}]})
    ctx.call("describe_groups_v5_after_leave", "DescribeGroups", 5, {"Groups": [g1]})
    ctx.call("offset_delete_v0_empty_group", "OffsetDelete", 0, {"GroupId": g1, "Topics": [
        {"Name": a, "Partitions": [{"PartitionIndex": 0}, {"PartitionIndex": 9}]}]})
    ctx.call("offset_fetch_v6_after_delete", "OffsetFetch", 6, {
        "GroupId": g1, "Topics": [{"Name": a, "PartitionIndexes": [0, 1]}]})
    ctx.call("delete_groups_v2", "DeleteGroups", 2,
             {"GroupsNames": [g1, g0, "golden-nogroup"]})
    ctx.call("describe_groups_v6_deleted", "DescribeGroups", 6, {"Groups": [g1]})

    # ---- standalone commits (generation -1, no member), as assign()-style consumers do ----
    gs = "golden-standalone"
    ctx.call("offset_commit_v2_standalone", "OffsetCommit", 2, {
        "GroupId": gs, "GenerationIdOrMemberEpoch": -1, "MemberId": "",
        "Topics": [{"Name": a, "Partitions": [{"PartitionIndex": 2, "CommittedOffset": 5,
                                               "CommittedMetadata": "standalone"}]}]})
    ctx.call("offset_commit_v7_standalone_unknown_topic", "OffsetCommit", 7, {
        "GroupId": gs, "GenerationIdOrMemberEpoch": -1, "MemberId": "",
        "Topics": [{"Name": UNKNOWN, "Partitions": [{"PartitionIndex": 0,
                                                     "CommittedOffset": 5}]},
                   {"Name": a, "Partitions": [{"PartitionIndex": 7, "CommittedOffset": 1}]}]})
    ctx.call("offset_fetch_v3_standalone", "OffsetFetch", 3, {
        "GroupId": gs, "Topics": [{"Name": a, "PartitionIndexes": [0, 2]}]})
    ctx.call("list_groups_v5_all", "ListGroups", 5, {"StatesFilter": [], "TypesFilter": []})
    ctx.call("describe_groups_v3_standalone", "DescribeGroups", 3, {"Groups": [gs]})
    ctx.call("delete_groups_v0_standalone", "DeleteGroups", 0, {"GroupsNames": [gs]})
    ctx.call("join_group_v7_bad_protocol_type", "JoinGroup", 7, {
        "GroupId": "golden-g3", "SessionTimeoutMs": SESSION_MS, "RebalanceTimeoutMs": SESSION_MS,
        "MemberId": "", "ProtocolType": "consumer", "Protocols": []})
    ctx.call("sync_group_v3_unknown", "SyncGroup", 3, {
        "GroupId": "golden-nogroup", "GenerationId": 1, "MemberId": "nobody",
        "Assignments": []})


# ------------------------------------------------------------------------------------------


def producer_ids(ctx):
    # Kafka answers COORDINATOR_LOAD_IN_PROGRESS until its first block of producer ids
    # arrives from the controller; the poll that succeeds takes an id (ids are mapped).
    ctx.wait("producer_ids_ready", "InitProducerId", 0,
             {"TransactionalId": None, "TransactionTimeoutMs": 60000},
             lambda r: r is not None and r["ErrorCode"] == NONE)
    r0 = ctx.call("init_producer_id_v0", "InitProducerId", 0,
                  {"TransactionalId": None, "TransactionTimeoutMs": 60000})
    ctx.call("init_producer_id_v2", "InitProducerId", 2,
             {"TransactionalId": None, "TransactionTimeoutMs": 60000})
    r = ctx.call("init_producer_id_v5", "InitProducerId", 5,
                 {"TransactionalId": None, "TransactionTimeoutMs": 60000,
                  "ProducerId": -1, "ProducerEpoch": -1})
    pid = (r or {}).get("ProducerId", -1)
    epoch = (r or {}).get("ProducerEpoch", -1)
    # KIP-360: an idempotent producer bumps its epoch by asking again with its id and epoch.
    r = ctx.call("init_producer_id_v4_bump_epoch", "InitProducerId", 4,
                 {"TransactionalId": None, "TransactionTimeoutMs": 60000,
                  "ProducerId": pid, "ProducerEpoch": epoch})
    epoch2 = (r or {}).get("ProducerEpoch", -1)
    ctx.call("init_producer_id_v4_stale_epoch", "InitProducerId", 4,
             {"TransactionalId": None, "TransactionTimeoutMs": 60000,
              "ProducerId": (r0 or {}).get("ProducerId", -1), "ProducerEpoch": 5})

    # Idempotent produce: in order, duplicate, gap, stale epoch, new epoch from 0.
    t = TOPIC_IDEM

    def idem(label, seq, n, ep, prefix):
        records = batch(recs(prefix, n), producerId=pid, producerEpoch=ep, baseSequence=seq)
        return ctx.call(label, "Produce", 9, produce_body(t, 0, records, acks=-1))

    idem("produce_idempotent_seq0", 0, 3, epoch2, "i0")
    idem("produce_idempotent_seq3", 3, 2, epoch2, "i3")
    idem("produce_idempotent_duplicate_seq3", 3, 2, epoch2, "i3")
    idem("produce_idempotent_duplicate_seq0", 0, 3, epoch2, "i0")
    idem("produce_idempotent_gap", 9, 1, epoch2, "i9")
    idem("produce_idempotent_stale_epoch", 5, 1, epoch, "iold")
    idem("produce_idempotent_new_epoch_bad_seq", 4, 1, epoch2 + 1, "inew")
    idem("produce_idempotent_new_epoch_seq0", 0, 1, epoch2 + 1, "inew0")
    records = batch(recs("iu", 1), producerId=987654, producerEpoch=0, baseSequence=7)
    ctx.call("produce_idempotent_unknown_producer", "Produce", 9,
             produce_body(t, 0, records, acks=-1))
    ctx.call("fetch_v12_idempotent", "Fetch", 12, fetch_body([(t, None, [(0, 0)])]))

    # Transactions: the coordinator of a transactional id, and its producer id.
    wait_coordinator(ctx, "txn_coordinator_ready", "golden-txn", key_type=1)
    ctx.call("find_coordinator_v4_transaction", "FindCoordinator", 4,
             {"KeyType": 1, "CoordinatorKeys": ["golden-txn"]})
    ctx.call("init_producer_id_v5_transactional", "InitProducerId", 5,
             {"TransactionalId": "golden-txn", "TransactionTimeoutMs": 60000,
              "ProducerId": -1, "ProducerEpoch": -1})
