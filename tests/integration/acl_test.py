#!/usr/bin/env python3
"""ACLs (authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer) on
samsad, checked against Kafka's answers with real clients over real sockets:

1. one broker with a SASL_PLAINTEXT listener (PLAIN users admin, alice and bob from a JAAS list)
   and a PLAINTEXT one; super.users=User:admin; no request on the SASL listener before the
   login but ApiVersions (the connection closes), and User:ANONYMOUS on PLAINTEXT is no one;
2. the ACL apis: CreateAcls, DescribeAcls, DeleteAcls refused to bob (CLUSTER_AUTHORIZATION_
   FAILED), Kafka's INVALID_REQUEST for a bad CLUSTER name or an empty one, Kafka 4.1.1's
   kafka-acls adding a PREFIXED ALLOW and a LITERAL DENY, --list with a MATCH filter, --remove;
   DescribeAcls by principal and with a MATCH pattern filter;
3. the matrix: for each api and resource type (TOPIC, GROUP, TRANSACTIONAL_ID, CLUSTER) a raw
   request (tests/clients/kproto.py) from alice, granted the ACL it needs, and from bob, granted
   nothing, with the exact error code Kafka gives each (KafkaApis, ControllerApis and AclApis of
   Kafka 4.x); implied operations (READ/WRITE/DELETE/ALTER imply DESCRIBE, ALTER_CONFIGS implies
   DESCRIBE_CONFIGS), a DENY overriding a prefixed ALLOW (but not the DESCRIBE it implies), a
   host that does not match, the User:* wildcard; Metadata hiding what bob may not describe;
4. confluent-kafka (librdkafka), Kafka's console producer and consumer, franz-go
   (tests/clients/go/cmd/securecheck --expect-denied) and kafkajs (tests/clients/node/
   secure_check.js --expect-denied) each see TOPIC_AUTHORIZATION_FAILED producing to a topic bob
   may not write, and GROUP_AUTHORIZATION_FAILED consuming in a group bob may not read; alice
   produces and consumes with confluent-kafka;
5. a second broker with allow.everyone.if.no.acl.found=true: what no ACL names is open to bob
   (the cluster included: he creates topics and ACLs), until an ACL names it; a third without
   an authorizer: the ACL apis answer SECURITY_DISABLED.

  acl_test.py --samsad PATH        the test (CI=true: a missing client is a failure)
  acl_test.py --kafka              the same checks against Apache Kafka 4.1.1 (perf/vs-kafka/
                                   kafka.sh start): the proof that the expectations are Kafka's.
                                   There User:ANONYMOUS must be a super user (the broker's own
                                   principal on its PLAINTEXT controller listener), so the check
                                   of ANONYMOUS is left out.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients"))
import admin_harness  # noqa: E402
from admin_harness import (Checks, SamsadProcess, free_port, kafka_tools_available,  # noqa: E402
                           missing, tool)
import kproto  # noqa: E402

admin_harness.TOOLS.setdefault("kafka-acls", "org.apache.kafka.tools.AclCommand")

checks = Checks("acl")
K = kproto.Kafka()
HERE = os.path.dirname(os.path.abspath(__file__))
CLIENTS = os.path.join(HERE, "..", "clients")

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" ' +
        " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

# Error codes (org.apache.kafka.common.protocol.Errors).
UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE = 3, 5
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR = 14, 15, 16
TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED = 29, 30, 31
INVALID_REQUEST, CONCURRENT_TRANSACTIONS = 42, 51
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, SECURITY_DISABLED, OPERATION_NOT_ATTEMPTED = 53, 54, 55
MEMBER_ID_REQUIRED, ELECTION_NOT_NEEDED = 79, 84
COORDINATOR_BUSY = (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
                    CONCURRENT_TRANSACTIONS)

# ACL enums (org.apache.kafka.common.resource / acl).
R_ANY, R_TOPIC, R_GROUP, R_CLUSTER, R_TXN = 1, 2, 3, 4, 5
P_ANY, P_MATCH, P_LITERAL, P_PREFIXED = 1, 2, 3, 4
OP_ANY, OP_ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 1, 2, 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
PERM_ANY, DENY, ALLOW = 1, 2, 3
CLUSTER = "kafka-cluster"
# Config resource types (DescribeConfigs, AlterConfigs).
CFG_TOPIC, CFG_BROKER = 2, 4

# Api keys.
PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH = 0, 1, 2, 3, 8, 9
FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 10, 11, 12, 13, 14
DESCRIBE_GROUPS, LIST_GROUPS, SASL_HANDSHAKE, API_VERSIONS = 15, 16, 17, 18
CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS, INIT_PRODUCER_ID = 19, 20, 21, 22
ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 24, 25, 26, 28
DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
DESCRIBE_CONFIGS_API, ALTER_CONFIGS_API = 32, 33
DESCRIBE_LOG_DIRS, SASL_AUTHENTICATE, CREATE_PARTITIONS, DELETE_GROUPS = 35, 36, 37, 42
ELECT_LEADERS, INCREMENTAL_ALTER_CONFIGS, OFFSET_DELETE = 43, 44, 47
DESCRIBE_SCRAM, ALTER_SCRAM, DESCRIBE_CLUSTER, DESCRIBE_PRODUCERS = 50, 51, 60, 61
DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 65, 66
OFFSET_FOR_LEADER_EPOCH, WRITE_TXN_MARKERS, DESCRIBE_CLIENT_QUOTAS = 23, 27, 48
DESCRIBE_QUORUM, ENVELOPE, ALLOCATE_PRODUCER_IDS, CONSUMER_GROUP_HEARTBEAT = 55, 58, 67, 68
DESCRIBE_TOPIC_PARTITIONS = 75

# The topics admin makes, and what alice may do with each (bob: nothing).
TOPICS = ["acl-data", "acl-cfg", "acl-del", "acl-public", "acl-pfx-ok", "acl-pfx-blocked",
          "acl-host"]
TX = "acl-tx"


def acl(rtype, name, op, perm=ALLOW, principal="User:alice", pattern=P_LITERAL, host="*"):
    return (rtype, name, pattern, principal, host, op, perm)


# Granted with CreateAcls by admin before the matrix.
ALICE_ACLS = [
    acl(R_TOPIC, "acl-data", READ), acl(R_TOPIC, "acl-data", WRITE),
    acl(R_TOPIC, "acl-cfg", ALTER_CONFIGS), acl(R_TOPIC, "acl-cfg", ALTER),
    acl(R_TOPIC, "acl-del", DELETE),
    acl(R_TOPIC, "alice-", CREATE, pattern=P_PREFIXED),
    acl(R_TOPIC, "alice-", DESCRIBE, pattern=P_PREFIXED),
    acl(R_TOPIC, "acl-nocreate", DESCRIBE),
    acl(R_TOPIC, "acl-host", READ, host="10.9.8.7"),  # not the host alice comes from
    acl(R_GROUP, "acl-g", READ),
    acl(R_GROUP, "acl-gdel", DELETE),
    acl(R_GROUP, "alice-", READ, pattern=P_PREFIXED),
    acl(R_TXN, TX, WRITE),
]
WILDCARD_ACLS = [acl(R_TOPIC, "acl-public", READ, principal="User:*")]
# Added with kafka-acls.
CLI_ACLS = [acl(R_TOPIC, "acl-pfx-", WRITE, pattern=P_PREFIXED),
            acl(R_TOPIC, "acl-pfx-blocked", WRITE, perm=DENY)]
# Granted later, for the cluster-level apis.
CLUSTER_ACLS = [acl(R_CLUSTER, CLUSTER, DESCRIBE), acl(R_CLUSTER, CLUSTER, ALTER),
                acl(R_CLUSTER, CLUSTER, IDEMPOTENT_WRITE, principal="User:bob")]


# --- a raw client -----------------------------------------------------------------------------

class Closed(Exception):
    pass


class Client:
    """A blocking connection speaking the project's own codecs (tests/clients/kproto), logged in
    with SASL PLAIN as `user` (None: no login)."""

    def __init__(self, port: int, user: str | None, password: str | None = None,
                 timeout: float = 15):
        self.user = user or "ANONYMOUS"
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.corr = 0
        if user:
            r = self.call(SASL_HANDSHAKE, 1, {"Mechanism": "PLAIN"})
            if r["ErrorCode"]:
                raise RuntimeError(f"SaslHandshake PLAIN: {r}")
            pw = USERS[user] if password is None else password
            r = self.call(SASL_AUTHENTICATE, 2,
                          {"AuthBytes": f"\0{user}\0{pw}".encode().hex()})
            if r["ErrorCode"]:
                raise RuntimeError(f"PLAIN login as {user}: {r}")

    def call(self, key: int, v: int, body: dict) -> dict:
        self.corr += 1
        f = K.encode_request(key, v, self.corr, f"acl-test-{self.user}", body)
        try:
            self.s.sendall(struct.pack(">i", len(f)) + f)
            head = self._exact(4)
            frame = self._exact(struct.unpack(">i", head)[0])
        except OSError as e:
            raise Closed(str(e))
        corr, body = K.decode_response(key, v, frame)
        assert corr == self.corr, f"correlation id {corr} != {self.corr}"
        return body

    def _exact(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.s.recv(n - len(out))
            if not chunk:
                raise Closed("closed by the broker")
            out += chunk
        return out

    def close(self):
        self.s.close()


def retry(fn, busy=COORDINATOR_BUSY, timeout: float = 20):
    """fn() -> (code, answer) until code is not one of `busy` (a coordinator still loading)."""
    deadline = time.time() + timeout
    while True:
        code, r = fn()
        if code not in busy or time.time() > deadline:
            return code, r
        time.sleep(0.2)


# --- requests, each returning the error code that matters (and the answer) --------------------

def batch(value: str, **kw) -> dict:
    return {"batches": [{"baseTimestamp": int(time.time() * 1000), "records": [{"value": value}],
                         **kw}]}


def produce(c: Client, topic: str, txn: str | None = None, records: dict | None = None):
    r = c.call(PRODUCE, 9, {"TransactionalId": txn, "Acks": -1, "TimeoutMs": 10000, "TopicData": [
        {"Name": topic, "PartitionData": [{"Index": 0, "Records": records or batch(topic)}]}]})
    return r["Responses"][0]["PartitionResponses"][0]["ErrorCode"], r


def fetch(c: Client, topic: str):
    r = c.call(FETCH, 12, {"MaxWaitMs": 100, "MinBytes": 1, "MaxBytes": 1 << 20,
                           "SessionEpoch": -1, "Topics": [
                               {"Topic": topic, "Partitions": [
                                   {"Partition": 0, "FetchOffset": 0,
                                    "PartitionMaxBytes": 1 << 20}]}]})
    return r["Responses"][0]["Partitions"][0]["ErrorCode"], r


def list_offsets(c: Client, topic: str):
    r = c.call(LIST_OFFSETS, 7, {"ReplicaId": -1, "Topics": [
        {"Name": topic, "Partitions": [{"PartitionIndex": 0, "Timestamp": -1}]}]})
    return r["Topics"][0]["Partitions"][0]["ErrorCode"], r


def metadata(c: Client, topics: list[str] | None, auto: bool = False) -> dict:
    return c.call(METADATA, 12, {
        "Topics": None if topics is None else [{"Name": t} for t in topics],
        "AllowAutoTopicCreation": auto, "IncludeTopicAuthorizedOperations": False})


def metadata_code(c: Client, topic: str, auto: bool = False):
    r = metadata(c, [topic], auto)
    return r["Topics"][0]["ErrorCode"], r


def create_topic(c: Client, name: str, partitions: int = 1):
    r = c.call(CREATE_TOPICS, 7, {"Topics": [
        {"Name": name, "NumPartitions": partitions, "ReplicationFactor": 1, "Assignments": [],
         "Configs": []}], "timeoutMs": 15000, "validateOnly": False})
    return r["Topics"][0]["ErrorCode"], r


def delete_topic(c: Client, name: str):
    r = c.call(DELETE_TOPICS, 6, {"Topics": [{"Name": name}], "TimeoutMs": 15000})
    return r["Responses"][0]["ErrorCode"], r


def create_partitions(c: Client, topic: str, count: int):
    r = c.call(CREATE_PARTITIONS, 3, {"Topics": [{"Name": topic, "Count": count,
                                                  "Assignments": None}],
                                      "TimeoutMs": 15000, "ValidateOnly": False})
    return r["Results"][0]["ErrorCode"], r


def delete_records(c: Client, topic: str, offset: int):
    r = c.call(DELETE_RECORDS, 2, {"Topics": [{"Name": topic, "Partitions": [
        {"PartitionIndex": 0, "Offset": offset}]}], "TimeoutMs": 15000})
    return r["Topics"][0]["Partitions"][0]["ErrorCode"], r


def describe_configs(c: Client, rtype: int, name: str):
    r = c.call(DESCRIBE_CONFIGS_API, 4, {"Resources": [
        {"ResourceType": rtype, "ResourceName": name, "ConfigurationKeys": None}]})
    return r["Results"][0]["ErrorCode"], r


def alter_configs(c: Client, rtype: int, name: str, key: str, value: str,
                  validate: bool = False):
    r = c.call(ALTER_CONFIGS_API, 2, {"Resources": [
        {"ResourceType": rtype, "ResourceName": name,
         "Configs": [{"Name": key, "Value": value}]}], "ValidateOnly": validate})
    return r["Responses"][0]["ErrorCode"], r


def incremental_alter_configs(c: Client, rtype: int, name: str, key: str, value: str,
                              validate: bool = False):
    r = c.call(INCREMENTAL_ALTER_CONFIGS, 1, {"Resources": [
        {"ResourceType": rtype, "ResourceName": name,
         "Configs": [{"Name": key, "ConfigOperation": 0, "Value": value}]}],
        "ValidateOnly": validate})
    return r["Responses"][0]["ErrorCode"], r


def describe_producers(c: Client, topic: str):
    r = c.call(DESCRIBE_PRODUCERS, 0, {"Topics": [{"Name": topic, "PartitionIndexes": [0]}]})
    return r["Topics"][0]["Partitions"][0]["ErrorCode"], r


def offset_for_leader_epoch(c: Client, topic: str):
    r = c.call(OFFSET_FOR_LEADER_EPOCH, 4, {"ReplicaId": -2, "Topics": [
        {"Topic": topic, "Partitions": [{"Partition": 0, "LeaderEpoch": 0}]}]})
    return r["Topics"][0]["Partitions"][0]["ErrorCode"], r


def describe_topic_partitions(c: Client, topics: list[str]):
    r = c.call(DESCRIBE_TOPIC_PARTITIONS, 0, {"Topics": [{"Name": t} for t in topics]})
    return {t["Name"]: t["ErrorCode"] for t in r["Topics"]}, r


def produce_many(c: Client, topics: list[str]) -> dict[str, int]:
    r = c.call(PRODUCE, 9, {"Acks": -1, "TimeoutMs": 10000, "TopicData": [
        {"Name": t, "PartitionData": [{"Index": 0, "Records": batch(t)}]} for t in topics]})
    return {t["Name"]: t["PartitionResponses"][0]["ErrorCode"] for t in r["Responses"]}


def fetch_many(c: Client, topics: list[str]) -> dict[str, int]:
    r = c.call(FETCH, 12, {"MaxWaitMs": 100, "MinBytes": 1, "SessionEpoch": -1, "Topics": [
        {"Topic": t, "Partitions": [{"Partition": 0, "FetchOffset": 0,
                                      "PartitionMaxBytes": 1 << 20}]} for t in topics]})
    return {t["Topic"]: t["Partitions"][0]["ErrorCode"] for t in r["Responses"]}


def fetch_by_id(c: Client, topic_id: str):
    r = c.call(FETCH, 13, {"MaxWaitMs": 100, "MinBytes": 1, "SessionEpoch": -1, "Topics": [
        {"TopicId": topic_id, "Partitions": [{"Partition": 0, "FetchOffset": 0,
                                              "PartitionMaxBytes": 1 << 20}]}]})
    return r["Responses"][0]["Partitions"][0]["ErrorCode"], r


def consumer_group_heartbeat(c: Client, group: str, member: str, epoch: int = 0):
    body = {"GroupId": group, "MemberId": member, "MemberEpoch": epoch}
    if epoch == 0:
        body.update({"RebalanceTimeoutMs": 30000, "SubscribedTopicNames": ["acl-data"],
                     "TopicPartitions": []})
    r = c.call(CONSUMER_GROUP_HEARTBEAT, 1, body)
    return r["ErrorCode"], r


def write_txn_markers(c: Client, topic: str):
    r = c.call(WRITE_TXN_MARKERS, 1, {"Markers": [
        {"ProducerId": 999, "ProducerEpoch": 0, "TransactionResult": False,
         "Topics": [{"Name": topic, "PartitionIndexes": [0]}], "CoordinatorEpoch": 0}]})
    return [p["ErrorCode"] for m in r["Markers"] for t in m["Topics"] for p in t["Partitions"]], r


def describe_client_quotas(c: Client):
    r = c.call(DESCRIBE_CLIENT_QUOTAS, 1, {"Components": [], "Strict": False})
    return r["ErrorCode"], r


def describe_quorum(c: Client):
    r = c.call(DESCRIBE_QUORUM, 2, {"Topics": [{"TopicName": "__cluster_metadata",
                                                "Partitions": [{"PartitionIndex": 0}]}]})
    return r["ErrorCode"], r


def find_coordinator(c: Client, key: str, key_type: int = 0, v: int = 4):
    if v >= 4:
        r = c.call(FIND_COORDINATOR, v, {"KeyType": key_type, "CoordinatorKeys": [key]})
        return r["Coordinators"][0]["ErrorCode"], r
    r = c.call(FIND_COORDINATOR, v, {"Key": key, "KeyType": key_type})
    return r["ErrorCode"], r


def subscription(topic: str) -> str:
    """ConsumerProtocolSubscription v0 for one topic, as kproto's hex."""
    t = topic.encode()
    return (struct.pack(">hi", 0, 1) + struct.pack(">h", len(t)) + t +
            struct.pack(">i", -1)).hex()


def join_group(c: Client, group: str, member: str = ""):
    r = c.call(JOIN_GROUP, 9, {"GroupId": group, "SessionTimeoutMs": 30000,
                               "RebalanceTimeoutMs": 30000, "MemberId": member,
                               "ProtocolType": "consumer",
                               "Protocols": [{"Name": "range",
                                              "Metadata": subscription("acl-data")}]})
    return r["ErrorCode"], r


def sync_group(c: Client, group: str, gen: int, member: str):
    r = c.call(SYNC_GROUP, 5, {"GroupId": group, "GenerationId": gen, "MemberId": member,
                               "ProtocolType": "consumer", "ProtocolName": "range",
                               "Assignments": [{"MemberId": member, "Assignment": ""}]})
    return r["ErrorCode"], r


def heartbeat(c: Client, group: str, gen: int, member: str):
    r = c.call(HEARTBEAT, 4, {"GroupId": group, "GenerationId": gen, "MemberId": member})
    return r["ErrorCode"], r


def leave_group(c: Client, group: str, member: str):
    r = c.call(LEAVE_GROUP, 5, {"GroupId": group, "Members": [{"MemberId": member}]})
    return r["ErrorCode"], r


def offset_commit(c: Client, group: str, topic: str, offset: int = 1, gen: int = -1,
                  member: str = ""):
    r = c.call(OFFSET_COMMIT, 9, {"GroupId": group, "GenerationIdOrMemberEpoch": gen,
                                  "MemberId": member, "Topics": [
                                      {"Name": topic, "Partitions": [
                                          {"PartitionIndex": 0, "CommittedOffset": offset,
                                           "CommittedMetadata": ""}]}]})
    return r["Topics"][0]["Partitions"][0]["ErrorCode"], r


def offset_fetch(c: Client, group: str, topics: list[str] | None = None):
    r = c.call(OFFSET_FETCH, 8, {"Groups": [{"GroupId": group, "Topics": None if topics is None
                                             else [{"Name": t, "PartitionIndexes": [0]}
                                                   for t in topics]}],
                                 "RequireStable": False})
    return r["Groups"][0]["ErrorCode"], r


def offset_fetch_topics(r: dict) -> dict:
    """{topic: (committed offset, error)} of partition 0 of each topic in an OffsetFetch v8."""
    return {t["Name"]: (t["Partitions"][0]["CommittedOffset"], t["Partitions"][0]["ErrorCode"])
            for t in r["Groups"][0]["Topics"]}


def describe_group(c: Client, group: str):
    r = c.call(DESCRIBE_GROUPS, 5, {"Groups": [group], "IncludeAuthorizedOperations": False})
    return r["Groups"][0]["ErrorCode"], r


def list_groups(c: Client) -> set[str]:
    r = c.call(LIST_GROUPS, 4, {"StatesFilter": []})
    return {g["GroupId"] for g in r["Groups"]} if r["ErrorCode"] == 0 else {f"error {r}"}


def delete_group(c: Client, group: str):
    r = c.call(DELETE_GROUPS, 2, {"GroupsNames": [group]})
    return r["Results"][0]["ErrorCode"], r


def offset_delete(c: Client, group: str, topic: str):
    r = c.call(OFFSET_DELETE, 0, {"GroupId": group, "Topics": [
        {"Name": topic, "Partitions": [{"PartitionIndex": 0}]}]})
    part = r["Topics"][0]["Partitions"][0]["ErrorCode"] if r["Topics"] else None
    return (r["ErrorCode"], part), r


def init_producer_id(c: Client, txn: str | None):
    r = c.call(INIT_PRODUCER_ID, 4, {"TransactionalId": txn, "TransactionTimeoutMs": 60000})
    return r["ErrorCode"], r


def add_partitions_to_txn(c: Client, txn: str, pid: int, epoch: int, topics: list[str]):
    r = c.call(ADD_PARTITIONS_TO_TXN, 3, {
        "V3AndBelowTransactionalId": txn, "V3AndBelowProducerId": pid,
        "V3AndBelowProducerEpoch": epoch,
        "V3AndBelowTopics": [{"Name": t, "Partitions": [0]} for t in topics]})
    codes = {t["Name"]: t["ResultsByPartition"][0]["PartitionErrorCode"]
             for t in r["ResultsByTopicV3AndBelow"]}
    return codes, r


def add_offsets_to_txn(c: Client, txn: str, pid: int, epoch: int, group: str):
    r = c.call(ADD_OFFSETS_TO_TXN, 3, {"TransactionalId": txn, "ProducerId": pid,
                                       "ProducerEpoch": epoch, "GroupId": group})
    return r["ErrorCode"], r


def txn_offset_commit(c: Client, txn: str, pid: int, epoch: int, group: str, topic: str):
    r = c.call(TXN_OFFSET_COMMIT, 3, {
        "TransactionalId": txn, "GroupId": group, "ProducerId": pid, "ProducerEpoch": epoch,
        "GenerationId": -1, "MemberId": "", "Topics": [
            {"Name": topic, "Partitions": [{"PartitionIndex": 0, "CommittedOffset": 1,
                                            "CommittedMetadata": ""}]}]})
    return r["Topics"][0]["Partitions"][0]["ErrorCode"], r


def end_txn(c: Client, txn: str, pid: int, epoch: int, commit: bool = True):
    r = c.call(END_TXN, 3, {"TransactionalId": txn, "ProducerId": pid, "ProducerEpoch": epoch,
                            "Committed": commit})
    return r["ErrorCode"], r


def describe_txn(c: Client, txn: str):
    r = c.call(DESCRIBE_TRANSACTIONS, 0, {"TransactionalIds": [txn]})
    return r["TransactionStates"][0]["ErrorCode"], r


def list_txns(c: Client) -> set[str]:
    r = c.call(LIST_TRANSACTIONS, 0, {"StateFilters": [], "ProducerIdFilters": []})
    return {t["TransactionalId"] for t in r["TransactionStates"]}


def describe_cluster(c: Client):
    r = c.call(DESCRIBE_CLUSTER, 1, {"IncludeClusterAuthorizedOperations": True,
                                     "EndpointType": 1})
    return (r["ErrorCode"], r["ClusterAuthorizedOperations"]), r


def describe_log_dirs(c: Client):
    r = c.call(DESCRIBE_LOG_DIRS, 4, {"Topics": None})
    return r["ErrorCode"], r


def elect_leaders(c: Client, topic: str):
    r = c.call(ELECT_LEADERS, 2, {"ElectionType": 0, "TopicPartitions": [
        {"Topic": topic, "Partitions": [0]}], "TimeoutMs": 15000})
    parts = [p["ErrorCode"] for t in r["ReplicaElectionResults"] for p in t["PartitionResult"]]
    return (r["ErrorCode"], parts), r


def describe_scram(c: Client):
    # Users [] (all), not null: Kafka 4.1.1 does not answer an unauthorized null.
    r = c.call(DESCRIBE_SCRAM, 0, {"Users": []})
    return r["ErrorCode"], r


def alter_scram(c: Client, user: str):
    r = c.call(ALTER_SCRAM, 0, {"Deletions": [], "Upsertions": [
        {"Name": user, "Mechanism": 1, "Iterations": 4096, "Salt": os.urandom(16).hex(),
         "SaltedPassword": os.urandom(32).hex()}]})
    return r["Results"][0]["ErrorCode"], r


def acl_body(a: tuple) -> dict:
    rtype, name, pattern, principal, host, op, perm = a
    return {"ResourceType": rtype, "ResourceName": name, "ResourcePatternType": pattern,
            "Principal": principal, "Host": host, "Operation": op, "PermissionType": perm}


def create_acls(c: Client, acls: list[tuple]) -> tuple[list[int], dict]:
    r = c.call(CREATE_ACLS, 3, {"Creations": [acl_body(a) for a in acls]})
    return [x["ErrorCode"] for x in r["Results"]], r


def acl_filter(rtype=R_ANY, name=None, pattern=P_ANY, principal=None, host=None, op=OP_ANY,
               perm=PERM_ANY) -> dict:
    return {"ResourceTypeFilter": rtype, "ResourceNameFilter": name, "PatternTypeFilter": pattern,
            "PrincipalFilter": principal, "HostFilter": host, "Operation": op,
            "PermissionType": perm}


def describe_acls(c: Client, **filt) -> tuple[int, set[tuple]]:
    r = c.call(DESCRIBE_ACLS, 3, acl_filter(**filt))
    got = {(res["ResourceType"], res["ResourceName"], res["PatternType"], a["Principal"],
            a["Host"], a["Operation"], a["PermissionType"])
           for res in r["Resources"] for a in res["Acls"]}
    return r["ErrorCode"], got


def delete_acls(c: Client, **filt) -> tuple[int, int, dict]:
    r = c.call(DELETE_ACLS, 3, {"Filters": [acl_filter(**filt)]})
    fr = r["FilterResults"][0]
    return fr["ErrorCode"], len(fr["MatchingAcls"]), r


# --- the check helpers ------------------------------------------------------------------------

def expect(what: str, got, want) -> bool:
    g = repr(got)
    g = g if len(g) <= 300 else g[:300] + "..."
    return checks(got == want, f"{what}: {g}" + ("" if got == want else f" (want {want!r})"))


def pair(api: str, need: str, fn, alice: Client, bob: Client, want_alice, want_bob,
         busy: bool = False):
    """The same request from alice (granted `need`) and from bob (granted nothing)."""
    call = (lambda c: retry(lambda: fn(c))) if busy else fn
    got_a = call(alice)[0]
    got_b = call(bob)[0]
    expect(f"{api} [{need}] alice", got_a, want_alice)
    expect(f"{api} [{need}] bob", got_b, want_bob)


# --- brokers ----------------------------------------------------------------------------------

def common_settings() -> dict[str, str]:
    return {
        "authorizer.class.name": AUTHORIZER,
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "num.partitions": "1",
        "auto.create.topics.enable": "true",
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.num.partitions": "1",
    }


class SamsaBroker:
    oracle = False

    def __init__(self, binary: str, work: str, extra: dict[str, str] | None = None):
        self.plain, self.sasl = free_port(), free_port()
        os.makedirs(work, exist_ok=True)
        s = common_settings()
        s.update({
            "listeners": f"PLAINTEXT://127.0.0.1:{self.plain},"
                         f"SASL_PLAINTEXT://127.0.0.1:{self.sasl}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,"
                                              "SASL_PLAINTEXT:SASL_PLAINTEXT",
            "super.users": "User:admin",
            "samsa.reactors": "2",
        })
        s.update(extra or {})
        self.p = SamsadProcess(binary, work, [f"{k}={v}" for k, v in s.items()], port=self.plain)

    def start(self):
        self.p.start()

    def alive(self) -> bool:
        return self.p.alive()

    def stop(self) -> str | None:
        return self.p.stop()

    def tail(self) -> str:
        return self.p.tail(40, "  | ")


class KafkaBroker:
    """Apache Kafka 4.1.1 (KRaft, one node) from perf/vs-kafka/kafka.sh: the oracle."""
    oracle = True

    def __init__(self, work: str, extra: dict[str, str] | None = None):
        self.dir = work
        self.plain, self.sasl, self.ctrl = free_port(), free_port(), free_port()
        self.extra = extra or {}

    def start(self):
        s = common_settings()
        s.update({
            "listeners": f"PLAINTEXT://127.0.0.1:{self.plain},"
                         f"SASL_PLAINTEXT://127.0.0.1:{self.sasl},"
                         f"CONTROLLER://127.0.0.1:{self.ctrl}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.plain},"
                                    f"SASL_PLAINTEXT://127.0.0.1:{self.sasl},"
                                    f"CONTROLLER://127.0.0.1:{self.ctrl}",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
                                              "SASL_PLAINTEXT:SASL_PLAINTEXT",
            # The broker's own principal on its PLAINTEXT controller listener.
            "super.users": "User:admin;User:ANONYMOUS",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
        })
        s.update(self.extra)
        env = dict(os.environ, KAFKA_CONTROLLER_PORT=str(self.ctrl))
        p = subprocess.run(["bash", admin_harness.KAFKA_SH, "start", self.dir, str(self.plain)] +
                           [f"{k}={v}" for k, v in s.items()], env=env, capture_output=True,
                           text=True, timeout=180)
        if p.returncode:
            raise RuntimeError(f"kafka.sh start: {p.stderr.strip()[-600:]}")

    def alive(self) -> bool:
        try:
            with open(os.path.join(self.dir, "kafka.pid")) as f:
                os.kill(int(f.read()), 0)
            return True
        except (OSError, ValueError):
            return False

    def stop(self) -> str | None:
        subprocess.run(["bash", admin_harness.KAFKA_SH, "stop", self.dir], timeout=60)
        return None

    def tail(self) -> str:
        try:
            with open(os.path.join(self.dir, "server.log"), errors="replace") as f:
                return "\n".join("  | " + l for l in f.read().splitlines()[-40:])
        except OSError:
            return "(no server.log)"


# --- the steps --------------------------------------------------------------------------------

def step_gate(b):
    """Nothing but ApiVersions and the SASL exchange before the login."""
    c = Client(b.sasl, None)
    r = c.call(API_VERSIONS, 3, {"ClientSoftwareName": "acl-test", "ClientSoftwareVersion": "1"})
    checks(r["ErrorCode"] == 0, "SASL listener: ApiVersions answered before the login")
    try:
        c.call(METADATA, 12, {"Topics": None, "AllowAutoTopicCreation": False})
        closed = False
    except (Closed, socket.timeout):
        closed = True
    checks(closed, "SASL listener: Metadata before the login closes the connection, unanswered")
    c.close()


def step_anonymous(b):
    """User:ANONYMOUS (the PLAINTEXT listener's principal) has no ACL: it is no one."""
    if b.oracle:
        checks.note("User:ANONYMOUS is a super user of the Kafka oracle: its checks left out")
        return
    anon = Client(b.plain, None)
    expect("PLAINTEXT listener, User:ANONYMOUS (no ACL): Metadata of acl-data",
           metadata_code(anon, "acl-data")[0], TOPIC_AUTHORIZATION_FAILED)
    expect("PLAINTEXT listener, User:ANONYMOUS: Metadata of all topics (all hidden)",
           [t["Name"] for t in metadata(anon, None)["Topics"]], [])
    expect("PLAINTEXT listener, User:ANONYMOUS: Produce to acl-data",
           produce(anon, "acl-data")[0], TOPIC_AUTHORIZATION_FAILED)
    expect("PLAINTEXT listener, User:ANONYMOUS: CreateTopics",
           create_topic(anon, "anon-new")[0], TOPIC_AUTHORIZATION_FAILED)
    anon.close()


def step_setup(admin: Client):
    """admin (a super user, no ACL of its own) makes the topics, writes a record to each and
    commits offsets for the groups the matrix reads."""
    for t in TOPICS:
        code, r = create_topic(admin, t)
        checks(code == 0, f"super user admin creates {t} ({code})")
    wait_leaders(admin, TOPICS)
    for t in TOPICS:
        code, _ = produce(admin, t)
        checks(code == 0, f"super user admin produces to {t} ({code})")
    for g in ("acl-g", "acl-gdel", "acl-hidden-g"):
        code, _ = retry(lambda: find_coordinator(admin, g))
        checks(code == 0, f"super user admin finds the coordinator of {g} ({code})")
    for g, t in (("acl-g", "acl-data"), ("acl-g", "acl-host"), ("acl-gdel", "acl-data"),
                 ("acl-hidden-g", "acl-data")):
        code, _ = retry(lambda: offset_commit(admin, g, t))
        checks(code == 0, f"super user admin commits offset 1 of {t} for group {g} ({code})")


def wait_leaders(c: Client, topics: list[str], timeout: float = 20) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = metadata(c, topics)
        if all(t["ErrorCode"] == 0 and t["Partitions"] and
               all(p["LeaderId"] >= 0 for p in t["Partitions"]) for t in r["Topics"]):
            return True
        time.sleep(0.2)
    return False


def wait_acls(admin: Client, want: set[tuple], gone: set[tuple] = frozenset(),
              timeout: float = 15) -> bool:
    """Until the broker's authorizer holds `want` and not `gone` (DescribeAcls reads the same
    ACLs as the authorizer)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        code, got = describe_acls(admin)
        if code == 0 and want <= got and not (gone & got):
            return True
        time.sleep(0.2)
    return False


def step_acl_apis(admin: Client, bob: Client):
    codes, _ = create_acls(bob, [acl(R_TOPIC, "acl-data", READ, principal="User:bob")])
    expect("CreateAcls [ALTER cluster] bob: per creation", codes, [CLUSTER_AUTHORIZATION_FAILED])
    code, _ = describe_acls(bob)
    expect("DescribeAcls [DESCRIBE cluster] bob", code, CLUSTER_AUTHORIZATION_FAILED)
    code, n, _ = delete_acls(bob, principal="User:alice")
    expect("DeleteAcls [ALTER cluster] bob: per filter", (code, n),
           (CLUSTER_AUTHORIZATION_FAILED, 0))
    codes, _ = create_acls(admin, ALICE_ACLS + WILDCARD_ACLS)
    expect(f"CreateAcls by super user admin: {len(ALICE_ACLS) + len(WILDCARD_ACLS)} ACLs",
           codes, [0] * (len(ALICE_ACLS) + len(WILDCARD_ACLS)))
    codes, _ = create_acls(admin, [acl(R_CLUSTER, "my-cluster", DESCRIBE),
                                   acl(R_TOPIC, "", READ)])
    expect("CreateAcls: a CLUSTER not named kafka-cluster, an empty name", codes,
           [INVALID_REQUEST, INVALID_REQUEST])


def not_served(b, what: str, key: int, v: int, body: dict):
    """bob sends a request only a cluster's own nodes may send, on the client listener: Kafka
    closes the connection (the api is not enabled there) and does nothing."""
    c = Client(b.sasl, "bob", timeout=5)
    try:
        r = c.call(key, v, body)
        got = f"answered {r}"
    except (Closed, socket.timeout):
        got = "closed"
    c.close()
    checks(got == "closed", f"{what} from bob on the client listener: the connection closes, "
                            f"unanswered ({got[:200]})")


def step_not_served(b, admin: Client):
    forged = acl(R_TOPIC, "acl-forged", OP_ALL, principal="User:bob")
    inner = K.encode_request(CREATE_ACLS, 3, 1, "forger", {"Creations": [acl_body(forged)]})
    not_served(b, "Envelope (a CreateAcls as User:admin)", ENVELOPE, 0, {
        "RequestData": inner.hex(), "RequestPrincipal": b"User:admin".hex(),
        "ClientHostAddress": bytes([127, 0, 0, 1]).hex()})
    time.sleep(0.5)
    code, got = describe_acls(admin, principal="User:bob")
    expect("... and the forged ACL was not made", (code, got), (0, set()))
    not_served(b, "AllocateProducerIds", ALLOCATE_PRODUCER_IDS, 0,
               {"BrokerId": 1, "BrokerEpoch": 0})


def props(path: str, user: str) -> str:
    with open(path, "w") as f:
        f.write("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
                f'required username="{user}" password="{USERS[user]}";\n')
    return path


def kafka_acls(b, work: str, *args: str) -> tuple[int, str]:
    cfg = props(os.path.join(work, "admin.properties"), "admin")
    return tool("kafka-acls", "--bootstrap-server", f"127.0.0.1:{b.sasl}",
                "--command-config", cfg, *args, timeout=90)


ACL_LINE = "(principal=User:alice, host=*, operation=WRITE, permissionType={})"


def step_kafka_acls_add(b, work: str):
    rc, out = kafka_acls(b, work, "--add", "--allow-principal", "User:alice", "--operation",
                         "Write", "--topic", "acl-pfx-", "--resource-pattern-type", "prefixed")
    checks(rc == 0 and "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, "
           "name=acl-pfx-, patternType=PREFIXED)`" in out and ACL_LINE.format("ALLOW") in out,
           f"kafka-acls --add --resource-pattern-type prefixed (ALLOW WRITE acl-pfx-*): "
           f"{out.strip()[-240:]!r}")
    rc, out = kafka_acls(b, work, "--add", "--deny-principal", "User:alice", "--operation",
                         "Write", "--topic", "acl-pfx-blocked")
    checks(rc == 0 and "ResourcePattern(resourceType=TOPIC, name=acl-pfx-blocked, "
           "patternType=LITERAL)" in out and ACL_LINE.format("DENY") in out,
           f"kafka-acls --add --deny-principal (DENY WRITE acl-pfx-blocked): "
           f"{out.strip()[-240:]!r}")


def step_kafka_acls_list(b, work: str):
    rc, out = kafka_acls(b, work, "--list", "--topic", "acl-pfx-blocked",
                         "--resource-pattern-type", "match")
    checks(rc == 0 and "name=acl-pfx-, patternType=PREFIXED" in out and
           "name=acl-pfx-blocked, patternType=LITERAL" in out and
           ACL_LINE.format("ALLOW") in out and ACL_LINE.format("DENY") in out and
           "acl-public" not in out,
           f"kafka-acls --list --resource-pattern-type match: the prefixed ALLOW and the literal "
           f"DENY that apply to acl-pfx-blocked, nothing else ({out.strip()[-300:]!r})")


def step_describe_acls(admin: Client):
    code, got = describe_acls(admin, principal="User:alice")
    want = set(ALICE_ACLS) | set(CLI_ACLS)
    checks(code == 0 and got == want,
           f"DescribeAcls principal=User:alice: the {len(want)} ACLs made so far"
           + ("" if got == want else f" (missing {want - got}, extra {got - want})"))
    code, got = describe_acls(admin, rtype=R_TOPIC, name="acl-pfx-blocked", pattern=P_MATCH)
    expect("DescribeAcls TOPIC acl-pfx-blocked pattern MATCH: the literal DENY and the prefixed "
           "ALLOW", (code, got), (0, set(CLI_ACLS)))
    code, got = describe_acls(admin, rtype=R_TOPIC, name="acl-pfx-", pattern=P_PREFIXED)
    expect("DescribeAcls TOPIC acl-pfx- pattern PREFIXED", (code, got), (0, {CLI_ACLS[0]}))
    code, got = describe_acls(admin, principal="User:*")
    expect("DescribeAcls principal=User:* (only the wildcard ACL)", (code, got),
           (0, set(WILDCARD_ACLS)))


def step_topics(admin: Client, alice: Client, bob: Client):
    pair("Produce", "WRITE topic acl-data", lambda c: produce(c, "acl-data"), alice, bob,
         0, TOPIC_AUTHORIZATION_FAILED)
    expect("Produce [READ only is not WRITE] alice to acl-public",
           produce(alice, "acl-public")[0], TOPIC_AUTHORIZATION_FAILED)
    expect("Produce [ALTER+ALTER_CONFIGS are not WRITE] alice to acl-cfg",
           produce(alice, "acl-cfg")[0], TOPIC_AUTHORIZATION_FAILED)
    expect("Produce [prefixed ALLOW acl-pfx-] alice to acl-pfx-ok",
           produce(alice, "acl-pfx-ok")[0], 0)
    expect("Produce [literal DENY overrides prefixed ALLOW] alice to acl-pfx-blocked",
           produce(alice, "acl-pfx-blocked")[0], TOPIC_AUTHORIZATION_FAILED)
    expect("Metadata [DENY WRITE does not deny the DESCRIBE an ALLOW WRITE implies] alice "
           "acl-pfx-blocked", metadata_code(alice, "acl-pfx-blocked")[0], 0)
    expect("Produce [non-existent topic, no ACL] bob to bob-nothing: not UNKNOWN_TOPIC",
           produce(bob, "bob-nothing")[0], TOPIC_AUTHORIZATION_FAILED)
    code, r = produce(bob, "acl-data", txn=TX,
                      records=batch("t", attributes=0x10, producerId=1, producerEpoch=0,
                                    baseSequence=0))
    expect("Produce of transactional records [WRITE transactional id] bob", code,
           TRANSACTIONAL_ID_AUTHORIZATION_FAILED)

    code, r = fetch(alice, "acl-data")
    recs = r["Responses"][0]["Partitions"][0]["Records"]
    n = sum(len(bt.get("records", [])) for bt in (recs or {}).get("batches", []))
    checks(code == 0 and n >= 1, f"Fetch [READ topic acl-data] alice: {code}, {n} records")
    expect("Fetch [READ topic acl-data] bob", fetch(bob, "acl-data")[0],
           TOPIC_AUTHORIZATION_FAILED)
    code, r = fetch(bob, "acl-data")
    expect("Fetch [READ topic] bob: no records with the denial",
           r["Responses"][0]["Partitions"][0]["Records"] in (None, {"batches": []}), True)
    expect("Fetch [User:* READ acl-public] bob", fetch(bob, "acl-public")[0], 0)
    expect("Fetch [WRITE is not READ] alice from acl-pfx-ok", fetch(alice, "acl-pfx-ok")[0],
           TOPIC_AUTHORIZATION_FAILED)
    expect("Produce alice to acl-data and acl-pfx-blocked in one request: per topic",
           produce_many(alice, ["acl-data", "acl-pfx-blocked"]),
           {"acl-data": 0, "acl-pfx-blocked": TOPIC_AUTHORIZATION_FAILED})
    expect("Fetch bob from acl-data and acl-public in one request: per topic",
           fetch_many(bob, ["acl-data", "acl-public"]),
           {"acl-data": TOPIC_AUTHORIZATION_FAILED, "acl-public": 0})
    topic_id = next(t["TopicId"] for t in metadata(admin, ["acl-data"])["Topics"])
    pair("Fetch v13 by topic id", "READ topic acl-data", lambda c: fetch_by_id(c, topic_id),
         alice, bob, 0, TOPIC_AUTHORIZATION_FAILED)
    r = bob.call(METADATA, 12, {"Topics": [{"TopicId": topic_id, "Name": None}],
                                "AllowAutoTopicCreation": False})
    expect("Metadata by topic id [DESCRIBE topic] bob: denied, the name not told",
           (r["Topics"][0]["ErrorCode"], r["Topics"][0]["Name"]),
           (TOPIC_AUTHORIZATION_FAILED, None))
    r = bob.call(DELETE_TOPICS, 6, {"Topics": [{"Name": None, "TopicId": topic_id}],
                                    "TimeoutMs": 15000})
    expect("DeleteTopics by topic id [DESCRIBE, DELETE topic] bob: denied, the name not told",
           (r["Responses"][0]["ErrorCode"], r["Responses"][0]["Name"]),
           (TOPIC_AUTHORIZATION_FAILED, None))
    pair("OffsetForLeaderEpoch", "DESCRIBE topic acl-data",
         lambda c: offset_for_leader_epoch(c, "acl-data"), alice, bob, 0,
         TOPIC_AUTHORIZATION_FAILED)
    pair("DescribeTopicPartitions", "DESCRIBE topic acl-data",
         lambda c: describe_topic_partitions(c, ["acl-data"]), alice, bob, {"acl-data": 0},
         {"acl-data": TOPIC_AUTHORIZATION_FAILED})
    got = set(describe_topic_partitions(bob, [])[0])
    expect("DescribeTopicPartitions all topics, bob: only acl-public", got, {"acl-public"})

    pair("ListOffsets", "DESCRIBE topic acl-data (implied by READ)",
         lambda c: list_offsets(c, "acl-data"), alice, bob, 0, TOPIC_AUTHORIZATION_FAILED)
    expect("ListOffsets [ACL for host 10.9.8.7 only] alice acl-host",
           list_offsets(alice, "acl-host")[0], TOPIC_AUTHORIZATION_FAILED)
    expect("ListOffsets [DESCRIBE implied by ALTER] alice acl-cfg",
           list_offsets(alice, "acl-cfg")[0], 0)
    expect("ListOffsets [DESCRIBE implied by DELETE] alice acl-del",
           list_offsets(alice, "acl-del")[0], 0)

    pair("Metadata", "DESCRIBE topic acl-data", lambda c: metadata_code(c, "acl-data"), alice,
         bob, 0, TOPIC_AUTHORIZATION_FAILED)
    r = metadata(bob, ["acl-data"])
    t = r["Topics"][0]
    checks(t["Partitions"] == [] and t["TopicId"] == kproto.ZERO_UUID,
           "Metadata denied to bob: no partitions, no topic id")
    code, _ = metadata_code(bob, "no-such-topic")
    expect("Metadata [no DESCRIBE] bob for a topic that does not exist: not told it does not",
           code, TOPIC_AUTHORIZATION_FAILED)
    want_alice = {"acl-data", "acl-cfg", "acl-del", "acl-public", "acl-pfx-ok",
                  "acl-pfx-blocked"}
    got = {t["Name"] for t in metadata(alice, None)["Topics"]}
    expect("Metadata all topics, alice: those she may describe (not acl-host: other host)",
           got, want_alice)
    got = {t["Name"] for t in metadata(bob, None)["Topics"]}
    expect("Metadata all topics, bob: only acl-public (User:*), the others hidden", got,
           {"acl-public"})
    got = {t["Name"] for t in metadata(admin, None)["Topics"]}
    checks(set(TOPICS) <= got, f"Metadata all topics, super user admin: all {len(TOPICS)}")

    # Auto-creation: DESCRIBE, then CREATE on the cluster or the topic.
    # Kafka answers LEADER_NOT_AVAILABLE, then UNKNOWN_TOPIC_OR_PARTITION while the creation is
    # under way, then the topic.
    code, _ = retry(lambda: metadata_code(alice, "alice-auto", auto=True),
                    busy=(LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION))
    expect("Metadata auto-creation [DESCRIBE+CREATE prefixed alice-] alice-auto", code, 0)
    expect("Metadata auto-creation [no ACL] bob-auto", metadata_code(bob, "bob-auto", True)[0],
           TOPIC_AUTHORIZATION_FAILED)
    expect("Metadata auto-creation [DESCRIBE, no CREATE] alice acl-nocreate",
           metadata_code(alice, "acl-nocreate", True)[0], TOPIC_AUTHORIZATION_FAILED)
    expect("Metadata [DESCRIBE, no auto-creation asked] alice acl-nocreate",
           metadata_code(alice, "acl-nocreate", False)[0], UNKNOWN_TOPIC_OR_PARTITION)
    expect("Metadata auto-creation refused: acl-nocreate was not made",
           metadata_code(admin, "acl-nocreate")[0], UNKNOWN_TOPIC_OR_PARTITION)

    code, r = create_topic(alice, "alice-new")
    tc = r["Topics"][0]
    expect("CreateTopics [CREATE prefixed alice-] alice-new", code, 0)
    expect("CreateTopics alice-new: TopicConfigErrorCode without DESCRIBE_CONFIGS, no configs",
           (tc["TopicConfigErrorCode"], tc["Configs"]), (TOPIC_AUTHORIZATION_FAILED, []))
    expect("CreateTopics [CREATE] bob-new", create_topic(bob, "bob-new")[0],
           TOPIC_AUTHORIZATION_FAILED)
    expect("CreateTopics [DESCRIBE is not CREATE] alice acl-nocreate",
           create_topic(alice, "acl-nocreate")[0], TOPIC_AUTHORIZATION_FAILED)
    expect("CreateTopics by bob of an existing topic: still TOPIC_AUTHORIZATION_FAILED",
           create_topic(bob, "acl-data")[0], TOPIC_AUTHORIZATION_FAILED)

    pair("CreatePartitions", "ALTER topic acl-cfg", lambda c: create_partitions(c, "acl-cfg", 2),
         alice, bob, 0, TOPIC_AUTHORIZATION_FAILED)
    expect("CreatePartitions [READ/WRITE are not ALTER] alice acl-data",
           create_partitions(alice, "acl-data", 2)[0], TOPIC_AUTHORIZATION_FAILED)

    pair("DeleteRecords", "DELETE topic acl-del", lambda c: delete_records(c, "acl-del", 1),
         alice, bob, 0, TOPIC_AUTHORIZATION_FAILED)
    expect("DeleteRecords [READ/WRITE are not DELETE] alice acl-data",
           delete_records(alice, "acl-data", 0)[0], TOPIC_AUTHORIZATION_FAILED)

    pair("DescribeConfigs", "DESCRIBE_CONFIGS topic acl-cfg (implied by ALTER_CONFIGS)",
         lambda c: describe_configs(c, CFG_TOPIC, "acl-cfg"), alice, bob, 0,
         TOPIC_AUTHORIZATION_FAILED)
    code, r = describe_configs(bob, CFG_TOPIC, "acl-cfg")
    expect("DescribeConfigs denied: no configs", r["Results"][0]["Configs"], [])
    expect("DescribeConfigs [READ is not DESCRIBE_CONFIGS] alice acl-data",
           describe_configs(alice, CFG_TOPIC, "acl-data")[0], TOPIC_AUTHORIZATION_FAILED)
    pair("AlterConfigs", "ALTER_CONFIGS topic acl-cfg",
         lambda c: alter_configs(c, CFG_TOPIC, "acl-cfg", "retention.ms", "3600000"),
         alice, bob, 0, TOPIC_AUTHORIZATION_FAILED)
    pair("IncrementalAlterConfigs", "ALTER_CONFIGS topic acl-cfg",
         lambda c: incremental_alter_configs(c, CFG_TOPIC, "acl-cfg", "retention.ms", "7200000"),
         alice, bob, 0, TOPIC_AUTHORIZATION_FAILED)
    expect("IncrementalAlterConfigs [ALTER is not ALTER_CONFIGS] alice acl-data",
           incremental_alter_configs(alice, CFG_TOPIC, "acl-data", "retention.ms", "1")[0],
           TOPIC_AUTHORIZATION_FAILED)
    code, r = describe_configs(admin, CFG_TOPIC, "acl-cfg")
    val = {c["Name"]: c["Value"] for c in r["Results"][0]["Configs"]}.get("retention.ms")
    expect("alice's IncrementalAlterConfigs took effect: retention.ms", val, "7200000")

    pair("DescribeProducers", "READ topic acl-data", lambda c: describe_producers(c, "acl-data"),
         alice, bob, 0, TOPIC_AUTHORIZATION_FAILED)
    expect("DescribeProducers [DESCRIBE is not READ] alice acl-cfg",
           describe_producers(alice, "acl-cfg")[0], TOPIC_AUTHORIZATION_FAILED)

    # DeleteTopics: DESCRIBE first (no existence leak), then DELETE.
    expect("DeleteTopics [DELETE] bob acl-del", delete_topic(bob, "acl-del")[0],
           TOPIC_AUTHORIZATION_FAILED)
    expect("DeleteTopics [no DESCRIBE] bob, a topic that does not exist",
           delete_topic(bob, "no-such-topic")[0], TOPIC_AUTHORIZATION_FAILED)
    expect("DeleteTopics [DESCRIBE prefixed alice-] alice, alice-gone (does not exist)",
           delete_topic(alice, "alice-gone")[0], UNKNOWN_TOPIC_OR_PARTITION)
    expect("DeleteTopics [READ/WRITE are not DELETE] alice acl-data",
           delete_topic(alice, "acl-data")[0], TOPIC_AUTHORIZATION_FAILED)


def step_groups(admin: Client, alice: Client, bob: Client, apis: set[int]):
    pair("FindCoordinator v4", "DESCRIBE group acl-g (implied by READ)",
         lambda c: find_coordinator(c, "acl-g"), alice, bob, 0, GROUP_AUTHORIZATION_FAILED,
         busy=True)
    code, r = find_coordinator(bob, "acl-g", v=3)
    expect("FindCoordinator v3 [DESCRIBE group] bob: the answer's error, no node",
           (code, r["NodeId"]), (GROUP_AUTHORIZATION_FAILED, -1))

    # alice's offsets as admin committed them: acl-host (she may not describe it) left out.
    code, r = offset_fetch(alice, "acl-g")
    expect("OffsetFetch all topics [DESCRIBE group, topics filtered by DESCRIBE] alice acl-g",
           (code, offset_fetch_topics(r) if code == 0 else None), (0, {"acl-data": (1, 0)}))
    code, r = offset_fetch(admin, "acl-g")
    expect("OffsetFetch all topics, super user admin acl-g",
           (code, offset_fetch_topics(r) if code == 0 else None),
           (0, {"acl-data": (1, 0), "acl-host": (1, 0)}))
    code, r = offset_fetch(alice, "acl-g", ["acl-data", "acl-host"])
    expect("OffsetFetch named topics alice acl-g: acl-host TOPIC_AUTHORIZATION_FAILED",
           (code, offset_fetch_topics(r) if code == 0 else None),
           (0, {"acl-data": (1, 0), "acl-host": (-1, TOPIC_AUTHORIZATION_FAILED)}))
    expect("OffsetFetch [DESCRIBE group] bob acl-g", offset_fetch(bob, "acl-g")[0],
           GROUP_AUTHORIZATION_FAILED)

    code, r = retry(lambda: join_group(alice, "acl-g"))
    member = r["MemberId"]
    if code == MEMBER_ID_REQUIRED:
        code, r = retry(lambda: join_group(alice, "acl-g", member))
    gen = r["GenerationId"]
    expect("JoinGroup [READ group acl-g] alice", code, 0)
    expect("JoinGroup [READ group acl-g] bob", join_group(bob, "acl-g")[0],
           GROUP_AUTHORIZATION_FAILED)
    pair("SyncGroup", "READ group acl-g", lambda c: sync_group(c, "acl-g", gen, member), alice,
         bob, 0, GROUP_AUTHORIZATION_FAILED)
    pair("Heartbeat", "READ group acl-g", lambda c: heartbeat(c, "acl-g", gen, member), alice,
         bob, 0, GROUP_AUTHORIZATION_FAILED)
    pair("OffsetCommit", "READ group acl-g, READ topic acl-data",
         lambda c: offset_commit(c, "acl-g", "acl-data", 1, gen, member), alice, bob, 0,
         GROUP_AUTHORIZATION_FAILED)
    expect("OffsetCommit [READ group, no READ topic] alice acl-g acl-cfg",
           offset_commit(alice, "acl-g", "acl-cfg", 1, gen, member)[0],
           TOPIC_AUTHORIZATION_FAILED)
    expect("OffsetCommit [READ topic only after READ group] bob acl-g acl-public (User:* READ)",
           offset_commit(bob, "acl-g", "acl-public")[0], GROUP_AUTHORIZATION_FAILED)
    code, r = describe_group(alice, "acl-g")
    expect("DescribeGroups [DESCRIBE group acl-g, implied by READ] alice",
           (code, r["Groups"][0]["GroupState"]), (0, "Stable"))
    expect("DescribeGroups [DESCRIBE group] bob", describe_group(bob, "acl-g")[0],
           GROUP_AUTHORIZATION_FAILED)
    expect("ListGroups [groups filtered by DESCRIBE] alice (not acl-hidden-g)",
           list_groups(alice), {"acl-g", "acl-gdel"})
    expect("ListGroups [groups filtered by DESCRIBE] bob", list_groups(bob), set())
    checks({"acl-g", "acl-gdel", "acl-hidden-g"} <= list_groups(admin),
           "ListGroups, super user admin: all groups")
    expect("LeaveGroup [READ group] bob", leave_group(bob, "acl-g", member)[0],
           GROUP_AUTHORIZATION_FAILED)
    expect("LeaveGroup [READ group] alice", leave_group(alice, "acl-g", member)[0], 0)

    code, r = offset_delete(bob, "acl-gdel", "acl-data")
    expect("OffsetDelete [DELETE group acl-gdel] bob", code[0], GROUP_AUTHORIZATION_FAILED)
    code, r = retry(lambda: offset_delete(alice, "acl-gdel", "acl-cfg"),
                    busy=[(b, None) for b in COORDINATOR_BUSY])
    expect("OffsetDelete [DELETE group, no READ topic acl-cfg] alice", code,
           (0, TOPIC_AUTHORIZATION_FAILED))
    code, r = offset_delete(alice, "acl-gdel", "acl-data")
    expect("OffsetDelete [DELETE group acl-gdel, READ topic acl-data] alice", code, (0, 0))
    expect("DeleteGroups [DELETE group] bob acl-gdel", delete_group(bob, "acl-gdel")[0],
           GROUP_AUTHORIZATION_FAILED)
    expect("DeleteGroups [READ is not DELETE] alice acl-g", delete_group(alice, "acl-g")[0],
           GROUP_AUTHORIZATION_FAILED)
    expect("DeleteGroups [DELETE group acl-gdel] alice", delete_group(alice, "acl-gdel")[0], 0)

    if CONSUMER_GROUP_HEARTBEAT not in apis:
        checks.note("ConsumerGroupHeartbeat (KIP-848) is not in the broker's ApiVersions: its "
                    "checks are left out")
        return
    member = kproto.uuid_text(os.urandom(16))
    code, r = retry(lambda: consumer_group_heartbeat(alice, "alice-848", member))
    expect("ConsumerGroupHeartbeat [READ group prefixed alice-] alice joins alice-848", code, 0)
    if code == 0:
        expect("ConsumerGroupHeartbeat: alice leaves alice-848",
               consumer_group_heartbeat(alice, "alice-848", member, -1)[0], 0)
    expect("ConsumerGroupHeartbeat [READ group] bob alice-848",
           consumer_group_heartbeat(bob, "alice-848", member)[0], GROUP_AUTHORIZATION_FAILED)
    expect("ConsumerGroupHeartbeat [READ group] alice acl-nogroup",
           consumer_group_heartbeat(alice, "acl-nogroup", member)[0],
           GROUP_AUTHORIZATION_FAILED)


def step_transactions(alice: Client, bob: Client):
    pair("FindCoordinator transaction", "DESCRIBE transactional id acl-tx (implied by WRITE)",
         lambda c: find_coordinator(c, TX, key_type=1), alice, bob, 0,
         TRANSACTIONAL_ID_AUTHORIZATION_FAILED, busy=True)
    code, r = retry(lambda: init_producer_id(alice, TX))
    pid, epoch = r["ProducerId"], r["ProducerEpoch"]
    expect("InitProducerId [WRITE transactional id acl-tx] alice", code, 0)
    expect("InitProducerId [WRITE transactional id] bob", init_producer_id(bob, TX)[0],
           TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    expect("InitProducerId, no transactional id [IDEMPOTENT_WRITE cluster or WRITE on a topic] "
           "alice", init_producer_id(alice, None)[0], 0)
    expect("InitProducerId, no transactional id [IDEMPOTENT_WRITE cluster or WRITE on a topic] "
           "bob", init_producer_id(bob, None)[0], CLUSTER_AUTHORIZATION_FAILED)

    codes, _ = add_partitions_to_txn(alice, TX, pid, epoch, ["acl-data", "acl-cfg"])
    expect("AddPartitionsToTxn [WRITE topic] alice acl-data + acl-cfg: the denied one fails the "
           "other", codes, {"acl-data": OPERATION_NOT_ATTEMPTED,
                             "acl-cfg": TOPIC_AUTHORIZATION_FAILED})
    codes, _ = retry(lambda: add_partitions_to_txn(alice, TX, pid, epoch, ["acl-data"]),
                     busy=[{"acl-data": b} for b in COORDINATOR_BUSY])
    expect("AddPartitionsToTxn [WRITE transactional id, WRITE topic acl-data] alice", codes,
           {"acl-data": 0})
    codes, _ = add_partitions_to_txn(bob, TX, pid, epoch, ["acl-data"])
    expect("AddPartitionsToTxn [WRITE transactional id] bob", codes,
           {"acl-data": TRANSACTIONAL_ID_AUTHORIZATION_FAILED})
    code, _ = produce(alice, "acl-data", txn=TX,
                      records=batch("in-txn", attributes=0x10, producerId=pid,
                                    producerEpoch=epoch, baseSequence=0))
    expect("Produce of transactional records [WRITE transactional id, WRITE topic] alice", code,
           0)

    code, _ = retry(lambda: add_offsets_to_txn(alice, TX, pid, epoch, "acl-g"))
    expect("AddOffsetsToTxn [WRITE transactional id, READ group acl-g] alice", code, 0)
    expect("AddOffsetsToTxn [READ group] alice, group acl-nogroup",
           add_offsets_to_txn(alice, TX, pid, epoch, "acl-nogroup")[0],
           GROUP_AUTHORIZATION_FAILED)
    expect("AddOffsetsToTxn [WRITE transactional id] bob",
           add_offsets_to_txn(bob, TX, pid, epoch, "acl-g")[0],
           TRANSACTIONAL_ID_AUTHORIZATION_FAILED)

    code, _ = retry(lambda: txn_offset_commit(alice, TX, pid, epoch, "acl-g", "acl-data"))
    expect("TxnOffsetCommit [WRITE transactional id, READ group, READ topic] alice", code, 0)
    expect("TxnOffsetCommit [READ topic] alice acl-cfg",
           txn_offset_commit(alice, TX, pid, epoch, "acl-g", "acl-cfg")[0],
           TOPIC_AUTHORIZATION_FAILED)
    expect("TxnOffsetCommit [READ group] alice acl-nogroup",
           txn_offset_commit(alice, TX, pid, epoch, "acl-nogroup", "acl-data")[0],
           GROUP_AUTHORIZATION_FAILED)
    expect("TxnOffsetCommit [WRITE transactional id] bob",
           txn_offset_commit(bob, TX, pid, epoch, "acl-g", "acl-data")[0],
           TRANSACTIONAL_ID_AUTHORIZATION_FAILED)

    code, r = describe_txn(alice, TX)
    st = r["TransactionStates"][0]
    expect("DescribeTransactions [DESCRIBE transactional id acl-tx] alice: its topics filtered "
           "by DESCRIBE (not __consumer_offsets)",
           (code, st["TransactionState"], sorted(t["Topic"] for t in st["Topics"])),
           (0, "Ongoing", ["acl-data"]))
    expect("DescribeTransactions [DESCRIBE transactional id] bob", describe_txn(bob, TX)[0],
           TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    expect("ListTransactions [filtered by DESCRIBE transactional id] alice", list_txns(alice),
           {TX})
    expect("ListTransactions [filtered by DESCRIBE transactional id] bob", list_txns(bob), set())

    expect("WriteTxnMarkers [CLUSTER_ACTION or ALTER cluster] bob: per partition",
           write_txn_markers(bob, "acl-data")[0], [CLUSTER_AUTHORIZATION_FAILED])
    expect("EndTxn [WRITE transactional id] bob", end_txn(bob, TX, pid, epoch)[0],
           TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    expect("EndTxn [WRITE transactional id acl-tx] alice: commit",
           retry(lambda: end_txn(alice, TX, pid, epoch))[0], 0)


def step_cluster(admin: Client, alice: Client, bob: Client, broker_id: str):
    """The cluster-level apis: bob (and alice) without ACLs, then alice granted DESCRIBE and
    ALTER on the cluster, bob IDEMPOTENT_WRITE."""
    code, _ = describe_cluster(bob)
    expect("DescribeCluster with authorized operations, no DESCRIBE cluster (Kafka answers, with "
           "operations 0)", code, (0, 0))
    expect("DescribeLogDirs [DESCRIBE cluster] alice (none yet)", describe_log_dirs(alice)[0],
           CLUSTER_AUTHORIZATION_FAILED)
    code, r = describe_log_dirs(bob)
    expect("DescribeLogDirs [DESCRIBE cluster] bob: error, no results", (code, r["Results"]),
           (CLUSTER_AUTHORIZATION_FAILED, []))
    expect("ElectLeaders [ALTER cluster] bob: top-level and per partition",
           elect_leaders(bob, "acl-data")[0],
           (CLUSTER_AUTHORIZATION_FAILED, [CLUSTER_AUTHORIZATION_FAILED]))
    expect("DescribeUserScramCredentials [DESCRIBE cluster] bob", describe_scram(bob)[0],
           CLUSTER_AUTHORIZATION_FAILED)
    expect("AlterUserScramCredentials [ALTER cluster] bob: per user", alter_scram(bob, "carol")[0],
           CLUSTER_AUTHORIZATION_FAILED)
    for api, fn in (("DescribeConfigs", lambda c: describe_configs(c, CFG_BROKER, broker_id)),
                    ("AlterConfigs", lambda c: alter_configs(
                        c, CFG_BROKER, broker_id, "log.retention.ms", "86400000", True)),
                    ("IncrementalAlterConfigs", lambda c: incremental_alter_configs(
                        c, CFG_BROKER, broker_id, "log.retention.ms", "86400000", True))):
        need = "DESCRIBE_CONFIGS" if api == "DescribeConfigs" else "ALTER_CONFIGS"
        expect(f"{api} BROKER {broker_id} [{need} cluster] bob", fn(bob)[0],
               CLUSTER_AUTHORIZATION_FAILED)

    expect("DescribeClientQuotas [DESCRIBE_CONFIGS cluster] bob", describe_client_quotas(bob)[0],
           CLUSTER_AUTHORIZATION_FAILED)
    expect("DescribeClientQuotas, super user admin", describe_client_quotas(admin)[0], 0)
    expect("DescribeQuorum [DESCRIBE cluster] bob", describe_quorum(bob)[0],
           CLUSTER_AUTHORIZATION_FAILED)
    codes, _ = create_acls(admin, CLUSTER_ACLS)
    expect("CreateAcls by admin: alice DESCRIBE+ALTER cluster, bob IDEMPOTENT_WRITE", codes,
           [0, 0, 0])
    checks(wait_acls(admin, set(CLUSTER_ACLS)), "the cluster ACLs are in force")

    expect("DescribeCluster [DESCRIBE cluster] alice: operations DESCRIBE|ALTER",
           describe_cluster(alice)[0], (0, (1 << DESCRIBE) | (1 << ALTER)))
    expect("DescribeLogDirs [DESCRIBE cluster] alice", describe_log_dirs(alice)[0], 0)
    expect("DescribeQuorum [DESCRIBE cluster] alice", describe_quorum(alice)[0], 0)
    expect("ElectLeaders [ALTER cluster] alice (leader already preferred)",
           elect_leaders(alice, "acl-data")[0], (0, [ELECTION_NOT_NEEDED]))
    expect("DescribeUserScramCredentials [DESCRIBE cluster] alice", describe_scram(alice)[0], 0)
    expect("AlterUserScramCredentials [ALTER cluster] alice", alter_scram(alice, "carol")[0], 0)
    expect("DescribeConfigs BROKER [DESCRIBE is not DESCRIBE_CONFIGS] alice",
           describe_configs(alice, CFG_BROKER, broker_id)[0], CLUSTER_AUTHORIZATION_FAILED)
    code, got = describe_acls(alice, principal="User:bob")
    expect("DescribeAcls [DESCRIBE cluster] alice: bob's ACLs", (code, got),
           (0, {CLUSTER_ACLS[2]}))
    carol = acl(R_TOPIC, "acl-carol", READ, principal="User:carol")
    codes, _ = create_acls(alice, [carol])
    expect("CreateAcls [ALTER cluster] alice", codes, [0])
    checks(wait_acls(admin, {carol}), "alice's ACL is in force")
    code, n, _ = delete_acls(alice, principal="User:carol")
    expect("DeleteAcls [ALTER cluster] alice: the one ACL for User:carol", (code, n), (0, 1))
    checks(wait_acls(admin, set(), gone={carol}), "... and it is gone")
    groups = list_groups(alice)
    checks({"acl-g", "acl-hidden-g"} <= groups,
           f"ListGroups [DESCRIBE cluster: all groups] alice now sees acl-hidden-g ({groups})")
    expect("InitProducerId, no transactional id [IDEMPOTENT_WRITE cluster] bob",
           init_producer_id(bob, None)[0], 0)


def step_delete_topic(alice: Client, admin: Client):
    expect("DeleteTopics [DELETE topic acl-del] alice", delete_topic(alice, "acl-del")[0], 0)
    deadline = time.time() + 15
    while time.time() < deadline:
        if metadata_code(admin, "acl-del")[0] == UNKNOWN_TOPIC_OR_PARTITION:
            break
        time.sleep(0.2)
    expect("acl-del is gone", metadata_code(admin, "acl-del")[0], UNKNOWN_TOPIC_OR_PARTITION)


# --- real clients -----------------------------------------------------------------------------

def sasl_conf(b, user: str, **extra) -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{b.sasl}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN", "sasl.username": user, "sasl.password": USERS[user],
            "socket.timeout.ms": 10000, **extra}


def confluent_denied(b) -> tuple[str, str]:
    """bob producing to acl-data, and consuming acl-public in group bob-g: the errors."""
    from confluent_kafka import Consumer, KafkaError, Producer
    reports: list = []
    p = Producer(sasl_conf(b, "bob", **{"message.timeout.ms": 10000, "acks": "all"}))
    p.produce("acl-data", b"x", on_delivery=lambda e, m: reports.append(e))
    p.flush(15)
    prod = reports[0].name() if reports and reports[0] is not None else f"reports {reports}"
    errors: list[str] = []
    c = Consumer(sasl_conf(b, "bob", **{"group.id": "bob-g", "auto.offset.reset": "earliest",
                                        "error_cb": lambda e: errors.append(e.name())}))
    c.subscribe(["acl-public"])
    deadline = time.time() + 15
    cons = None
    while time.time() < deadline and cons is None:
        m = c.poll(0.3)
        if m is not None and m.error() and m.error().code() != KafkaError._PARTITION_EOF:
            errors.append(m.error().name())
        if m is not None and not m.error():
            cons = f"consumed a record at offset {m.offset()}"
        cons = next((e for e in errors if "AUTHORIZATION" in e), cons)
    c.close()
    return prod, cons or f"errors {errors[:3]}"


def confluent_alice(b) -> str | None:
    """alice produces 5 records to acl-data and reads them back in group acl-g."""
    from confluent_kafka import Consumer, KafkaError, Producer
    reports: list = []
    p = Producer(sasl_conf(b, "alice", acks="all"))
    for i in range(5):
        p.produce("acl-data", f"alice-{i}".encode(), on_delivery=lambda e, m: reports.append(e))
    p.flush(15)
    if len(reports) != 5 or any(reports):
        return f"produce: {reports}"
    c = Consumer(sasl_conf(b, "alice", **{"group.id": "acl-g", "auto.offset.reset": "earliest",
                                          "enable.auto.commit": False}))
    c.subscribe(["acl-data"])
    got: list[bytes] = []
    errors: list[str] = []
    deadline = time.time() + 20
    while time.time() < deadline and len([g for g in got if g.startswith(b"alice-")]) < 5:
        m = c.poll(0.3)
        if m is None:
            continue
        if m.error():
            if m.error().code() != KafkaError._PARTITION_EOF:
                errors.append(m.error().name())
            continue
        got.append(m.value())
    c.commit(asynchronous=False) if got else None
    c.close()
    mine = [g for g in got if g.startswith(b"alice-")]
    if mine != [f"alice-{i}".encode() for i in range(5)]:
        return f"consume: {mine} errors {errors[:3]}"
    return None


def run_clients(b, work: str, have_go: bool, have_node: bool) -> dict[str, tuple]:
    """Everything that runs a program, at once: Kafka's console producer and consumer, franz-go
    and kafkajs as bob. {name: (returncode, output)}."""
    cfg = props(os.path.join(work, "bob.properties"), "bob")
    boot = f"127.0.0.1:{b.sasl}"
    jobs = {
        "console-producer": lambda: tool(
            "kafka-console-producer", "--bootstrap-server", boot, "--topic", "acl-data",
            "--producer.config", cfg, stdin="denied\n", timeout=90),
        "console-consumer": lambda: tool(
            "kafka-console-consumer", "--bootstrap-server", boot, "--topic", "acl-public",
            "--group", "bob-console-g", "--consumer.config", cfg, "--from-beginning",
            "--max-messages", "1", "--timeout-ms", "20000", timeout=90),
    }
    common = ["--bootstrap", boot, "--plaintext", "--mechanism", "PLAIN", "--user", "bob",
              "--password", USERS["bob"], "--topic", "acl-data", "--expect-denied",
              "--group-topic", "acl-public"]

    def prog(cmd):
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        return p.returncode, p.stdout + p.stderr

    if have_go:
        jobs["franz-go"] = lambda: prog([os.path.join(work, "securecheck")] + common +
                                        ["--group", "bob-franz-g"])
    if have_node:
        jobs["kafkajs"] = lambda: prog(["node", os.path.join(CLIENTS, "node", "secure_check.js")] +
                                       common + ["--group", "bob-kafkajs-g"])
    out: dict[str, tuple] = {}

    def run(name, fn):
        try:
            out[name] = fn()
        except Exception as e:  # a timeout, a missing binary
            out[name] = (-1, f"{type(e).__name__}: {e}")

    threads = [threading.Thread(target=run, args=(n, f)) for n, f in jobs.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def step_clients(b, work: str):
    have_go = bool(shutil.which("go"))
    if have_go:
        p = subprocess.run(["go", "build", "-o", os.path.join(work, "securecheck"),
                            "./cmd/securecheck"], cwd=os.path.join(CLIENTS, "go"),
                           capture_output=True, text=True, timeout=300)
        have_go = checks(p.returncode == 0, f"franz-go check builds ({p.stderr.strip()[-120:]})")
    else:
        missing(checks, "go (franz-go)")
    have_node = bool(shutil.which("node")) and os.path.isdir(
        os.path.join(CLIENTS, "node", "node_modules", "kafkajs"))
    if not have_node:
        missing(checks, "node with kafkajs (tests/clients/install.sh)")
    results: dict[str, tuple] = {}
    bg = threading.Thread(target=lambda: results.update(run_clients(b, work, have_go, have_node)))
    bg.start()
    prod, cons = confluent_denied(b)
    expect("confluent-kafka: bob produces to acl-data", prod, "TOPIC_AUTHORIZATION_FAILED")
    expect("confluent-kafka: bob consumes acl-public in group bob-g", cons,
           "GROUP_AUTHORIZATION_FAILED")
    why = confluent_alice(b)
    checks(why is None, "confluent-kafka: alice produces 5 records to acl-data and consumes them "
                        "in group acl-g" + ("" if why is None else f": {why}"))
    bg.join()
    rc, out = results["console-producer"]
    checks("TopicAuthorizationException: Not authorized to access topics: [acl-data]" in out,
           f"kafka-console-producer as bob to acl-data: TopicAuthorizationException "
           f"(exit {rc}; {last_lines(out)})")
    rc, out = results["console-consumer"]
    checks("GroupAuthorizationException: Not authorized to access group: bob-console-g" in out,
           f"kafka-console-consumer as bob in group bob-console-g: GroupAuthorizationException "
           f"(exit {rc}; {last_lines(out)})")
    for name in ("franz-go", "kafkajs"):
        if name not in results:
            continue
        rc, out = results[name]
        checks(rc == 0 and "PASS" in out,
            f"{name} as bob: TOPIC_AUTHORIZATION_FAILED producing to acl-data, "
            f"GROUP_AUTHORIZATION_FAILED in group bob-*-g ({last_lines(out, 3)})")


def last_lines(out: str, n: int = 2) -> str:
    lines = [l.strip() for l in out.strip().splitlines() if l.strip()]
    return " | ".join(lines[-n:])[-400:]


def step_kafka_acls_remove(b, work: str, admin: Client, alice: Client):
    rc, out = kafka_acls(b, work, "--remove", "--force", "--deny-principal", "User:alice",
                         "--operation", "Write", "--topic", "acl-pfx-blocked")
    checks(rc == 0, f"kafka-acls --remove --force the DENY (exit {rc} {out.strip()[-160:]!r})")
    checks(wait_acls(admin, {CLI_ACLS[0]}, gone={CLI_ACLS[1]}),
           "DescribeAcls: the DENY is gone, the prefixed ALLOW stays")
    expect("Produce [prefixed ALLOW, the DENY removed] alice to acl-pfx-blocked",
           produce(alice, "acl-pfx-blocked")[0], 0)


def step_allow_everyone(b):
    """allow.everyone.if.no.acl.found=true: a resource no ACL names is open to bob; once an ACL
    names it (even for someone else) it is closed."""
    bob = Client(b.sasl, "bob")
    expect("allow.everyone.if.no.acl.found: CreateTopics by bob (no ACL on the cluster)",
           create_topic(bob, "open")[0], 0)
    expect("allow.everyone.if.no.acl.found: CreateTopics by bob, open2",
           create_topic(bob, "open2")[0], 0)
    wait_leaders(bob, ["open", "open2"])
    expect("allow.everyone.if.no.acl.found: Produce by bob to open (no ACL names it)",
           produce(bob, "open")[0], 0)
    codes, _ = create_acls(bob, [acl(R_TOPIC, "open", READ)])
    expect("allow.everyone.if.no.acl.found: CreateAcls by bob (no ACL on the cluster): alice READ "
           "open", codes, [0])
    deadline = time.time() + 15
    while time.time() < deadline and produce(bob, "open")[0] == 0:
        time.sleep(0.2)
    expect("allow.everyone.if.no.acl.found: Produce by bob to open, now that an ACL names it",
           produce(bob, "open")[0], TOPIC_AUTHORIZATION_FAILED)
    expect("allow.everyone.if.no.acl.found: Metadata by bob of open", metadata_code(bob, "open")[0],
           TOPIC_AUTHORIZATION_FAILED)
    expect("allow.everyone.if.no.acl.found: Produce by bob to open2 (still no ACL)",
           produce(bob, "open2")[0], 0)
    bob.close()


def step_security_disabled(b):
    """No authorizer: the ACL apis answer SECURITY_DISABLED (the rest is open)."""
    c = Client(b.sasl, "bob")
    code, _ = describe_acls(c)
    expect("no authorizer: DescribeAcls", code, SECURITY_DISABLED)
    codes, _ = create_acls(c, [acl(R_TOPIC, "t", READ)])
    expect("no authorizer: CreateAcls, per creation", codes, [SECURITY_DISABLED])
    code, n, _ = delete_acls(c, principal="User:alice")
    expect("no authorizer: DeleteAcls, per filter", (code, n), (SECURITY_DISABLED, 0))
    c.close()


def other_broker(a, work: str, name: str, extra: dict[str, str], step):
    """A second broker with `extra` settings for one step; stopped after it."""
    d = os.path.join(work, name)
    b = KafkaBroker(d, extra) if a.kafka else SamsaBroker(a.samsad, d, extra)
    try:
        b.start()
        step(b)
        checks(b.alive(), f"the {name} broker is still running")
    finally:
        checks(b.stop() is None, f"the {name} broker exits 0 on SIGTERM")


def main() -> int:
    ap = argparse.ArgumentParser()
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--samsad")
    g.add_argument("--kafka", action="store_true",
                   help="run against Apache Kafka 4.1.1 (perf/vs-kafka/kafka.sh) instead")
    a = ap.parse_args()
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return missing(checks, "python3-confluent-kafka")
    why = kafka_tools_available()
    if why:
        return missing(checks, why)
    work = tempfile.mkdtemp(prefix="samsa-acl-")
    b = KafkaBroker(os.path.join(work, "kafka")) if a.kafka else SamsaBroker(a.samsad, work)
    ok = False
    try:
        t = time.time()
        b.start()
        checks.note(f"{'Kafka 4.1.1' if b.oracle else 'samsad'} up in {time.time() - t:.1f}s: "
                    f"PLAINTEXT {b.plain}, SASL_PLAINTEXT {b.sasl}")
        step_gate(b)
        admin, alice, bob = (Client(b.sasl, u) for u in ("admin", "alice", "bob"))
        apis = {k["ApiKey"] for k in admin.call(API_VERSIONS, 3, {
            "ClientSoftwareName": "acl-test", "ClientSoftwareVersion": "1"})["ApiKeys"]}
        broker_id = str(metadata(admin, [])["Brokers"][0]["NodeId"])
        step_setup(admin)
        step_anonymous(b)
        step_acl_apis(admin, bob)
        step_not_served(b, admin)
        step_kafka_acls_add(b, work)
        checks(wait_acls(admin, set(ALICE_ACLS) | set(WILDCARD_ACLS) | set(CLI_ACLS)),
               "DescribeAcls: every ACL made is in force")
        step_kafka_acls_list(b, work)
        step_describe_acls(admin)
        step_topics(admin, alice, bob)
        step_groups(admin, alice, bob, apis)
        step_transactions(alice, bob)
        step_cluster(admin, alice, bob, broker_id)
        step_delete_topic(alice, admin)
        step_clients(b, work)
        step_kafka_acls_remove(b, work, admin, alice)
        for c in (admin, alice, bob):
            c.close()
        checks(b.alive(), "the broker is still running")
        checks(b.stop() is None, "the broker exits 0 on SIGTERM")
        other_broker(a, work, "allow-everyone", {"allow.everyone.if.no.acl.found": "true"},
                     step_allow_everyone)
        other_broker(a, work, "no-authorizer", {"authorizer.class.name": ""},
                     step_security_disabled)
        ok = True
    except Exception as e:
        import traceback
        traceback.print_exc()
        checks(False, f"unexpected {type(e).__name__}: {e}")
    finally:
        if b.alive():
            b.stop()
        rc = checks.finish()
        if rc:
            print(f"[acl] broker log tail:\n{b.tail()}", flush=True)
            print(f"[acl] work dir kept: {work}", flush=True)
        elif ok:
            shutil.rmtree(work, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
