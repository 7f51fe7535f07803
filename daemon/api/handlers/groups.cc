// Consumer group and committed-offset APIs, and InitProducerId (producer ids are the
// coordinator thread's too). Each handler decodes on the connection's reactor,
// maps the wire version onto the coordinator's request (MEMBER_ID_REQUIRED from JoinGroup v4,
// per-member LeaveGroup from v3, ...), hands it to the coordinator thread and answers on the
// origin reactor when the coordinator calls back: at once, after a rebalance, or once a commit
// is durable. Checks that need the topic metadata (unknown topics in OffsetCommit and
// OffsetDelete) happen here, against this reactor's image, before the hand-off.
#include <map>
#include <memory>

#include "base/log.h"
#include "coordinator/coordinator.h"
#include "coordinator/txn_records.h"
#include "daemon/api/auth.h"
#include "daemon/api/handlers/handlers.h"
#include "daemon/api/handlers/round_trip.h"
#include "daemon/broker.h"
#include "net/kafka/gen/delete_groups_request.h"
#include "net/kafka/gen/delete_groups_response.h"
#include "net/kafka/gen/describe_groups_request.h"
#include "net/kafka/gen/describe_groups_response.h"
#include "net/kafka/gen/find_coordinator_request.h"
#include "net/kafka/gen/find_coordinator_response.h"
#include "net/kafka/gen/heartbeat_request.h"
#include "net/kafka/gen/heartbeat_response.h"
#include "net/kafka/gen/init_producer_id_request.h"
#include "net/kafka/gen/init_producer_id_response.h"
#include "net/kafka/gen/join_group_request.h"
#include "net/kafka/gen/join_group_response.h"
#include "net/kafka/gen/leave_group_request.h"
#include "net/kafka/gen/leave_group_response.h"
#include "net/kafka/gen/list_groups_request.h"
#include "net/kafka/gen/list_groups_response.h"
#include "net/kafka/gen/offset_commit_request.h"
#include "net/kafka/gen/offset_commit_response.h"
#include "net/kafka/gen/offset_delete_request.h"
#include "net/kafka/gen/offset_delete_response.h"
#include "net/kafka/gen/offset_fetch_request.h"
#include "net/kafka/gen/offset_fetch_response.h"
#include "net/kafka/gen/sync_group_request.h"
#include "net/kafka/gen/sync_group_response.h"

namespace samsa::daemon::handlers {
namespace {

using coordinator::GroupCoordinator;
using kafka::ErrorCode;

// FindCoordinator key types.
constexpr std::int8_t kGroupKey = 0;
constexpr std::int8_t kTransactionKey = 1;
constexpr std::int8_t kShareKey = 2;

using replication::AclOperation;
using replication::ResourceType;

bool group_allowed(const Request& r, AclOperation op, std::string_view group) {
  return authorized(r, op, ResourceType::group, group);
}

// Kafka reports the address a member connected from as Java's InetAddress prints it: "/ip".
std::string client_host(const Request& r) {
  std::string_view peer = r.conn->peer();
  if (auto colon = peer.rfind(':'); colon != std::string_view::npos) peer = peer.substr(0, colon);
  if (peer.size() >= 2 && peer.front() == '[' && peer.back() == ']')
    peer = peer.substr(1, peer.size() - 2);
  return "/" + std::string(peer);
}

std::string client_id(const Request& r) {
  return r.header.header.client_id.value_or("");
}

bool topic_partition_exists(const Request& r, const std::string& topic, std::int32_t partition) {
  const replication::TopicState* t = r.rc.image->topic(topic);
  return t && partition >= 0 && static_cast<std::size_t>(partition) < t->partitions.size();
}

}  // namespace

namespace {

struct Coordinator {
  std::int32_t node_id = -1;
  std::string host;
  std::int32_t port = -1;
};

// Where `key` is coordinated: the leader of its partition of `topic` (__consumer_offsets for a
// group, __transaction_state for a transactional id; this node on a single node, once the
// topic exists), at its endpoint on the listener the client came through; nullopt while the
// topic does not exist or the partition has no live leader.
std::optional<Coordinator> coordinator_of(const Request& r, std::string_view topic,
                                          std::string_view key) {
  const auto& s = *r.rc.settings;
  const std::size_t listener = std::min(r.dispatcher.listener(), s.advertised.size() - 1);
  const replication::TopicState* t = r.rc.image->topic(topic);
  if (!t || t->partitions.empty()) return std::nullopt;
  if (!s.clustered()) {
    const Endpoint& ep = s.advertised[listener];
    return Coordinator{s.node_id, ep.host, ep.port};
  }
  const auto n = static_cast<std::int32_t>(t->partitions.size());
  const auto& p = t->partitions[static_cast<std::size_t>(coordinator::partition_for(key, n))];
  if (p.leader < 0) return std::nullopt;
  auto b = r.rc.image->brokers().find(p.leader);
  if (b == r.rc.image->brokers().end() || b->second.fenced) return std::nullopt;
  for (const auto& e : b->second.endpoints)
    if (e.name == s.advertised[listener].name) return Coordinator{p.leader, e.host, e.port};
  return std::nullopt;
}

}  // namespace

void find_coordinator(RequestPtr r) {
  kafka::FindCoordinatorRequest req;
  if (!r->decode(req)) return;
  struct Answer {
    ErrorCode error;
    std::optional<std::string> message;
    Coordinator at;
  };
  // Kafka answers success with the message "NONE" before v4 and "" in v4's per-key entries.
  const std::optional<std::string> ok_message = r->version() < 4 ? "NONE" : "";
  // Until the topic exists (the first moments after the first start) or while the group's
  // partition has no leader (a failover), clients retry.
  auto answer = [&](std::int8_t type, std::string_view key) -> Answer {
    if (type == kGroupKey && !group_allowed(*r, AclOperation::describe, key))
      return {ErrorCode::group_authorization_failed, std::nullopt, {}};
    if (type == kTransactionKey &&
        !authorized(*r, AclOperation::describe, ResourceType::transactional_id, key))
      return {ErrorCode::transactional_id_authorization_failed, std::nullopt, {}};
    if (type == kGroupKey || type == kTransactionKey) {
      const std::string_view topic =
          type == kGroupKey ? coordinator::kOffsetsTopic : coordinator::kTxnStateTopic;
      if (auto c = coordinator_of(*r, topic, key))
        return {ErrorCode::none, ok_message, std::move(*c)};
      if (type == kTransactionKey && !r->rc.image->topic(topic))
        r->rc.broker->want_txn_state_topic();
      return {ErrorCode::coordinator_not_available, "The coordinator is not available.", {}};
    }
    if (type == kShareKey)
      return {ErrorCode::coordinator_not_available, "The coordinator is not available.", {}};
    return {ErrorCode::invalid_request,
            "Unknown coordinator key type " + std::to_string(type) + ".",
            {}};
  };
  kafka::FindCoordinatorResponse resp;
  if (r->version() < 4) {
    const Answer a = answer(req.key_type, req.key);
    resp.error_code = kafka::code(a.error);
    resp.error_message = a.message;
    resp.node_id = a.at.node_id;
    resp.host = a.at.host;
    resp.port = a.at.port;
  } else {
    for (const auto& key : req.coordinator_keys) {
      const Answer a = answer(req.key_type, key);
      kafka::FindCoordinatorResponse::Coordinator c;
      c.key = key;
      c.error_code = kafka::code(a.error);
      c.error_message = a.message;
      c.node_id = a.at.node_id;
      c.host = a.at.host;
      c.port = a.at.port;
      resp.coordinators.push_back(std::move(c));
    }
  }
  r->reply(resp);
}

void join_group(RequestPtr r) {
  kafka::JoinGroupRequest body;
  if (!r->decode(body)) return;
  const std::int16_t v = r->version();
  if (!group_allowed(*r, AclOperation::read, body.group_id)) {
    kafka::JoinGroupResponse resp;
    resp.error_code = kafka::code(ErrorCode::group_authorization_failed);
    resp.generation_id = -1;
    resp.member_id = body.member_id;
    resp.protocol_name = v >= 7 ? std::nullopt : std::optional<std::string>("");
    r->reply(resp);
    return;
  }
  coordinator::JoinRequest jr;
  jr.group_id = std::move(body.group_id);
  jr.member_id = std::move(body.member_id);
  jr.group_instance_id = std::move(body.group_instance_id);
  jr.client_id = client_id(*r);
  jr.client_host = client_host(*r);
  jr.session_timeout_ms = body.session_timeout_ms;
  // v0 has no rebalance timeout: the session timeout stands in, as in Kafka.
  jr.rebalance_timeout_ms = v >= 1 ? body.rebalance_timeout_ms : body.session_timeout_ms;
  jr.protocol_type = std::move(body.protocol_type);
  for (auto& p : body.protocols)
    jr.protocols.push_back({std::move(p.name), std::move(p.metadata)});
  jr.require_known_member_id = v >= 4;
  jr.supports_skip_assignment = v >= 9;
  via_coordinator<coordinator::JoinResult>(
      std::move(r),
      [jr = std::move(jr)](GroupCoordinator& c, auto done) mutable {
        c.join_group(std::move(jr), std::move(done));
      },
      [](RequestPtr r, coordinator::JoinResult res) {
        const std::int16_t v = r->version();
        kafka::JoinGroupResponse resp;
        resp.error_code = kafka::code(res.error);
        resp.generation_id = res.generation;
        resp.protocol_type = std::move(res.protocol_type);
        // Nullable only from v7; before that "no protocol" is the empty string.
        resp.protocol_name = v >= 7 ? std::move(res.protocol_name)
                                    : std::optional<std::string>(res.protocol_name.value_or(""));
        resp.leader = std::move(res.leader);
        resp.skip_assignment = res.skip_assignment;
        resp.member_id = std::move(res.member_id);
        for (auto& m : res.members)
          resp.members.push_back(
              {std::move(m.member_id), std::move(m.group_instance_id), std::move(m.metadata)});
        r->reply(resp);
      });
}

void sync_group(RequestPtr r) {
  kafka::SyncGroupRequest body;
  if (!r->decode(body)) return;
  if (!group_allowed(*r, AclOperation::read, body.group_id)) {
    kafka::SyncGroupResponse resp;
    resp.error_code = kafka::code(ErrorCode::group_authorization_failed);
    r->reply(resp);
    return;
  }
  coordinator::SyncRequest sr;
  sr.group_id = std::move(body.group_id);
  sr.generation = body.generation_id;
  sr.member_id = std::move(body.member_id);
  sr.group_instance_id = std::move(body.group_instance_id);
  sr.protocol_type = std::move(body.protocol_type);
  sr.protocol_name = std::move(body.protocol_name);
  for (auto& a : body.assignments)
    sr.assignments.emplace_back(std::move(a.member_id), std::move(a.assignment));
  via_coordinator<coordinator::SyncResult>(
      std::move(r),
      [sr = std::move(sr)](GroupCoordinator& c, auto done) mutable {
        c.sync_group(std::move(sr), std::move(done));
      },
      [](RequestPtr r, coordinator::SyncResult res) {
        kafka::SyncGroupResponse resp;
        resp.error_code = kafka::code(res.error);
        resp.protocol_type = std::move(res.protocol_type);
        resp.protocol_name = std::move(res.protocol_name);
        resp.assignment = std::move(res.assignment);
        r->reply(resp);
      });
}

void heartbeat(RequestPtr r) {
  kafka::HeartbeatRequest body;
  if (!r->decode(body)) return;
  if (!group_allowed(*r, AclOperation::read, body.group_id)) {
    kafka::HeartbeatResponse resp;
    resp.error_code = kafka::code(ErrorCode::group_authorization_failed);
    r->reply(resp);
    return;
  }
  coordinator::HeartbeatRequest hr{std::move(body.group_id), body.generation_id,
                                   std::move(body.member_id), std::move(body.group_instance_id)};
  via_coordinator<ErrorCode>(
      std::move(r),
      [hr = std::move(hr)](GroupCoordinator& c, auto done) mutable {
        c.heartbeat(std::move(hr), std::move(done));
      },
      [](RequestPtr r, ErrorCode e) {
        kafka::HeartbeatResponse resp;
        resp.error_code = kafka::code(e);
        r->reply(resp);
      });
}

void leave_group(RequestPtr r) {
  kafka::LeaveGroupRequest body;
  if (!r->decode(body)) return;
  if (!group_allowed(*r, AclOperation::read, body.group_id)) {
    kafka::LeaveGroupResponse resp;
    resp.error_code = kafka::code(ErrorCode::group_authorization_failed);
    r->reply(resp);
    return;
  }
  coordinator::LeaveRequest lr;
  lr.group_id = std::move(body.group_id);
  if (r->version() < 3) {
    lr.members.push_back({std::move(body.member_id), std::nullopt, std::nullopt});
  } else {
    for (auto& m : body.members)
      lr.members.push_back(
          {std::move(m.member_id), std::move(m.group_instance_id), std::move(m.reason)});
  }
  via_coordinator<coordinator::LeaveResult>(
      std::move(r),
      [lr = std::move(lr)](GroupCoordinator& c, auto done) mutable {
        c.leave_group(std::move(lr), std::move(done));
      },
      [](RequestPtr r, coordinator::LeaveResult res) {
        kafka::LeaveGroupResponse resp;
        resp.error_code = kafka::code(res.error);
        if (r->version() < 3) {
          // One member and no per-member errors: its error is the answer.
          if (res.error == ErrorCode::none && !res.members.empty())
            resp.error_code = kafka::code(res.members.front().error);
        } else {
          for (auto& m : res.members)
            resp.members.push_back(
                {std::move(m.member_id), std::move(m.group_instance_id), kafka::code(m.error)});
        }
        r->reply(resp);
      });
}

void offset_commit(RequestPtr r) {
  auto body = std::make_shared<kafka::OffsetCommitRequest>();
  if (!r->decode(*body)) return;
  const std::int16_t v = r->version();
  coordinator::CommitRequest cr;
  cr.group_id = body->group_id;
  cr.generation = body->generation_id_or_member_epoch;
  cr.member_id = body->member_id;
  cr.group_instance_id = body->group_instance_id;
  cr.retention_time_ms = v <= 4 ? body->retention_time_ms : -1;
  cr.group_id_not_found_for_unknown_group = v >= 9;
  // Kafka: READ on the group (else every partition GROUP_AUTHORIZATION_FAILED), then READ on
  // each topic. Partitions of unknown or denied topics are answered here; the rest go to the
  // coordinator, and their answers are slotted back in request order.
  const bool group_ok = group_allowed(*r, AclOperation::read, body->group_id);
  std::vector<ErrorCode> local;
  std::vector<std::size_t> sent;  // request slot of each partition sent
  for (const auto& t : body->topics) {
    const bool topic_ok =
        group_ok && authorized(*r, AclOperation::read, ResourceType::topic, t.name);
    for (const auto& p : t.partitions) {
      if (!group_ok || !topic_ok) {
        local.push_back(group_ok ? ErrorCode::topic_authorization_failed
                                 : ErrorCode::group_authorization_failed);
        continue;
      }
      if (!topic_partition_exists(*r, t.name, p.partition_index)) {
        local.push_back(ErrorCode::unknown_topic_or_partition);
        continue;
      }
      sent.push_back(local.size());
      local.push_back(ErrorCode::none);
      cr.partitions.push_back({t.name, p.partition_index, p.committed_offset,
                               p.committed_leader_epoch, p.committed_metadata});
    }
  }
  auto answer = [body, local = std::move(local), sent = std::move(sent)](
                    RequestPtr r, coordinator::CommitResult res) mutable {
    for (std::size_t i = 0; i < sent.size() && i < res.size(); ++i)
      local[sent[i]] = res[i];
    kafka::OffsetCommitResponse resp;
    std::size_t slot = 0;
    for (const auto& t : body->topics) {
      kafka::OffsetCommitResponse::OffsetCommitResponseTopic rt;
      rt.name = t.name;
      rt.topic_id = t.topic_id;
      for (const auto& p : t.partitions)
        rt.partitions.push_back({p.partition_index, kafka::code(local[slot++])});
      resp.topics.push_back(std::move(rt));
    }
    r->reply(resp);
  };
  // A denied group is not the coordinator's business at all.
  if (!group_ok) return answer(std::move(r), {});
  via_coordinator<coordinator::CommitResult>(
      std::move(r),
      [cr = std::move(cr)](GroupCoordinator& c, auto done) mutable {
        c.commit_offsets(std::move(cr), std::move(done));
      },
      std::move(answer));
}

namespace {

// One group of an OffsetFetch, as the coordinator sees it.
coordinator::FetchRequest fetch_request(
    std::string group,
    const std::optional<std::vector<std::pair<std::string, std::vector<std::int32_t>>>>& topics,
    bool require_stable) {
  coordinator::FetchRequest fr;
  fr.group_id = std::move(group);
  fr.require_stable = require_stable;
  if (topics) {
    fr.topics.emplace();
    for (const auto& [name, parts] : *topics)
      fr.topics->push_back({name, parts});
  }
  return fr;
}

// Offsets grouped by topic, in the order they came.
template <class Topic, class Partition>
std::vector<Topic> by_topic(std::vector<coordinator::FetchedOffset>& offsets,
                            ErrorCode error_for_all) {
  std::vector<Topic> out;
  std::map<std::string, std::size_t> index;
  for (auto& o : offsets) {
    auto [it, fresh] = index.emplace(o.topic, out.size());
    if (fresh) {
      out.emplace_back();
      out.back().name = o.topic;
    }
    Partition p;
    p.partition_index = o.partition;
    p.committed_offset = o.offset;
    p.committed_leader_epoch = o.leader_epoch;
    p.metadata = std::move(o.metadata);
    p.error_code = kafka::code(error_for_all != ErrorCode::none ? error_for_all : o.error);
    out[it->second].partitions.push_back(std::move(p));
  }
  return out;
}

// What a principal may see of one group's committed offsets (see offset_fetch).
void hide_unauthorized(const Request& r, coordinator::FetchResult& fr, bool group_denied,
                       bool named) {
  if (group_denied) {
    fr.error = ErrorCode::group_authorization_failed;
    fr.offsets.clear();
    return;
  }
  if (!authorizing(r)) return;
  std::erase_if(fr.offsets, [&](coordinator::FetchedOffset& o) {
    if (authorized(r, AclOperation::describe, ResourceType::topic, o.topic, !named)) return false;
    if (!named) return true;
    o = {o.topic, o.partition, -1, -1, "", ErrorCode::topic_authorization_failed};
    return false;
  });
}

}  // namespace

void offset_fetch(RequestPtr r) {
  kafka::OffsetFetchRequest body;
  if (!r->decode(body)) return;
  const std::int16_t v = r->version();
  using Topics = std::optional<std::vector<std::pair<std::string, std::vector<std::int32_t>>>>;
  std::vector<coordinator::FetchRequest> groups;
  if (v < 8) {
    Topics topics;
    if (body.topics) {
      topics.emplace();
      for (auto& t : *body.topics)
        topics->emplace_back(std::move(t.name), std::move(t.partition_indexes));
    }
    groups.push_back(fetch_request(std::move(body.group_id), topics, body.require_stable));
  } else {
    for (auto& g : body.groups) {
      Topics topics;
      if (g.topics) {
        topics.emplace();
        for (auto& t : *g.topics)
          topics->emplace_back(std::move(t.name), std::move(t.partition_indexes));
      }
      groups.push_back(fetch_request(std::move(g.group_id), topics, body.require_stable));
    }
  }
  // The requested partitions of a v1 request, to carry a group error (v1 has no group-level
  // error field).
  std::vector<std::pair<std::string, std::int32_t>> v1_partitions;
  if (v < 2 && groups.front().topics)
    for (const auto& t : *groups.front().topics)
      for (auto p : t.partitions)
        v1_partitions.emplace_back(t.topic, p);

  std::vector<std::string> group_ids;
  // Kafka: DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED), and on each topic: a named
  // topic the principal may not describe is answered TOPIC_AUTHORIZATION_FAILED, and left out
  // of an all-topics answer.
  std::vector<std::pair<bool, bool>> denied_named;  // per group: denied, named its topics
  for (const auto& g : groups) {
    group_ids.push_back(g.group_id);
    denied_named.emplace_back(!group_allowed(*r, AclOperation::describe, g.group_id),
                              g.topics.has_value());
  }

  using Results = std::vector<coordinator::FetchResult>;
  via_coordinator<Results>(
      std::move(r),
      [groups = std::move(groups)](GroupCoordinator& c, auto done) mutable {
        struct Collect {
          Results results;
          std::size_t left;
          GroupCoordinator::Done<Results> done;
        };
        auto col = std::make_shared<Collect>();
        col->results.resize(groups.size());
        col->left = groups.size() + 1;
        col->done = std::move(done);
        auto step = [col] {
          if (--col->left == 0) col->done(std::move(col->results));
        };
        for (std::size_t i = 0; i < groups.size(); ++i) {
          c.fetch_offsets(std::move(groups[i]), [col, i, step](coordinator::FetchResult fr) {
            col->results[i] = std::move(fr);
            step();
          });
        }
        step();
      },
      [v1_partitions = std::move(v1_partitions), group_ids = std::move(group_ids),
       denied_named = std::move(denied_named)](RequestPtr r, Results res) mutable {
        const std::int16_t v = r->version();
        for (std::size_t i = 0; i < res.size() && i < denied_named.size(); ++i)
          hide_unauthorized(*r, res[i], denied_named[i].first, denied_named[i].second);
        kafka::OffsetFetchResponse resp;
        if (v < 8) {
          coordinator::FetchResult& fr = res.front();
          if (fr.error != ErrorCode::none && v < 2) {
            for (const auto& [topic, p] : v1_partitions)
              fr.offsets.push_back({topic, p, -1, -1, "", fr.error});
          }
          if (fr.error == ErrorCode::none || v < 2) {
            resp.topics = by_topic<kafka::OffsetFetchResponse::OffsetFetchResponseTopic,
                                   kafka::OffsetFetchResponse::OffsetFetchResponsePartition>(
                fr.offsets, v < 2 ? fr.error : ErrorCode::none);
          }
          resp.error_code = kafka::code(fr.error);
        } else {
          for (std::size_t i = 0; i < res.size(); ++i) {
            coordinator::FetchResult& fr = res[i];
            kafka::OffsetFetchResponse::OffsetFetchResponseGroup g;
            g.group_id = group_ids[i];
            g.error_code = kafka::code(fr.error);
            g.topics = by_topic<kafka::OffsetFetchResponse::OffsetFetchResponseTopics,
                                kafka::OffsetFetchResponse::OffsetFetchResponsePartitions>(
                fr.offsets, ErrorCode::none);
            resp.groups.push_back(std::move(g));
          }
        }
        r->reply(resp);
      });
}

void list_groups(RequestPtr r) {
  kafka::ListGroupsRequest body;
  if (!r->decode(body)) return;
  coordinator::ListRequest lr{std::move(body.states_filter), std::move(body.types_filter)};
  via_coordinator<coordinator::ListResult>(
      std::move(r),
      [lr = std::move(lr)](GroupCoordinator& c, auto done) mutable {
        c.list_groups(std::move(lr), std::move(done));
      },
      [](RequestPtr r, coordinator::ListResult res) {
        kafka::ListGroupsResponse resp;
        resp.error_code = kafka::code(res.error);
        // Kafka: every group with DESCRIBE on the cluster, else those the principal may
        // describe.
        const bool all = authorized(*r, AclOperation::describe, ResourceType::cluster,
                                    replication::kClusterResourceName, true);
        for (auto& g : res.groups)
          if (all || authorized(*r, AclOperation::describe, ResourceType::group, g.group_id, true))
            resp.groups.push_back({std::move(g.group_id), std::move(g.protocol_type),
                                   std::move(g.state), std::move(g.type)});
        r->reply(resp);
      });
}

void describe_groups(RequestPtr r) {
  kafka::DescribeGroupsRequest body;
  if (!r->decode(body)) return;
  const bool ops = body.include_authorized_operations;
  // DESCRIBE on each group: a denied one is answered GROUP_AUTHORIZATION_FAILED and nothing
  // of it is described.
  std::vector<std::string> allowed;
  std::vector<std::optional<std::string>> denied;  // per requested group, in order
  for (auto& g : body.groups) {
    if (group_allowed(*r, AclOperation::describe, g)) {
      allowed.push_back(std::move(g));
      denied.emplace_back();
    } else {
      denied.emplace_back(std::move(g));
    }
  }
  via_coordinator<std::vector<coordinator::DescribedGroup>>(
      std::move(r),
      [groups = std::move(allowed)](GroupCoordinator& c, auto done) mutable {
        c.describe_groups(std::move(groups), std::move(done));
      },
      [ops, denied = std::move(denied)](RequestPtr r,
                                        std::vector<coordinator::DescribedGroup> described) {
        const std::int16_t v = r->version();
        kafka::DescribeGroupsResponse resp;
        std::vector<coordinator::DescribedGroup> res;
        std::size_t next = 0;
        for (const auto& d : denied) {
          if (!d) {
            res.push_back(std::move(described[next++]));
            continue;
          }
          coordinator::DescribedGroup g;
          g.group_id = *d;
          g.error = ErrorCode::group_authorization_failed;
          res.push_back(std::move(g));
        }
        for (auto& d : res) {
          kafka::DescribeGroupsResponse::DescribedGroup g;
          g.group_id = std::move(d.group_id);
          g.error_code = kafka::code(d.error);
          if (d.error == ErrorCode::group_id_not_found) {
            // Before v6 an unknown group is a Dead one without error (KIP-1043).
            if (v < 6) {
              g.error_code = 0;
            } else {
              g.error_message = "Group " + g.group_id + " not found.";
            }
          }
          g.group_state = std::move(d.state);
          g.protocol_type = std::move(d.protocol_type);
          g.protocol_data = std::move(d.protocol);
          for (auto& m : d.members) {
            kafka::DescribeGroupsResponse::DescribedGroupMember dm;
            dm.member_id = std::move(m.member_id);
            dm.group_instance_id = std::move(m.group_instance_id);
            dm.client_id = std::move(m.client_id);
            dm.client_host = std::move(m.client_host);
            dm.member_metadata = std::move(m.metadata);
            dm.member_assignment = std::move(m.assignment);
            g.members.push_back(std::move(dm));
          }
          if (ops && d.error == ErrorCode::none)
            g.authorized_operations =
                authorized_operations(*r, ResourceType::group, g.group_id, kGroupAclOperations);
          resp.groups.push_back(std::move(g));
        }
        r->reply(resp);
      });
}

void delete_groups(RequestPtr r) {
  kafka::DeleteGroupsRequest body;
  if (!r->decode(body)) return;
  std::vector<std::string> allowed, denied;  // DELETE on each group
  for (auto& g : body.groups_names)
    (group_allowed(*r, AclOperation::delete_, g) ? allowed : denied).push_back(std::move(g));
  via_coordinator<std::vector<coordinator::DeleteGroupResult>>(
      std::move(r),
      [groups = std::move(allowed)](GroupCoordinator& c, auto done) mutable {
        c.delete_groups(std::move(groups), std::move(done));
      },
      [denied = std::move(denied)](RequestPtr r, std::vector<coordinator::DeleteGroupResult> res) {
        kafka::DeleteGroupsResponse resp;
        for (const auto& g : denied)
          resp.results.push_back({g, kafka::code(ErrorCode::group_authorization_failed)});
        for (auto& d : res)
          resp.results.push_back({std::move(d.group_id), kafka::code(d.error)});
        r->reply(resp);
      });
}

void offset_delete(RequestPtr r) {
  auto body = std::make_shared<kafka::OffsetDeleteRequest>();
  if (!r->decode(*body)) return;
  if (!group_allowed(*r, AclOperation::delete_, body->group_id)) {
    kafka::OffsetDeleteResponse resp;
    resp.error_code = kafka::code(ErrorCode::group_authorization_failed);
    r->reply(resp);
    return;
  }
  coordinator::OffsetDeleteRequest dr;
  dr.group_id = body->group_id;
  std::vector<ErrorCode> local;
  std::vector<std::size_t> sent;
  for (const auto& t : body->topics) {
    const bool topic_ok = authorized(*r, AclOperation::read, ResourceType::topic, t.name);
    for (const auto& p : t.partitions) {
      if (!topic_ok) {
        local.push_back(ErrorCode::topic_authorization_failed);
        continue;
      }
      if (!topic_partition_exists(*r, t.name, p.partition_index)) {
        local.push_back(ErrorCode::unknown_topic_or_partition);
        continue;
      }
      sent.push_back(local.size());
      local.push_back(ErrorCode::none);
      dr.partitions.emplace_back(t.name, p.partition_index);
    }
  }
  via_coordinator<coordinator::OffsetDeleteResult>(
      std::move(r),
      [dr = std::move(dr)](GroupCoordinator& c, auto done) mutable {
        c.delete_offsets(std::move(dr), std::move(done));
      },
      [body, local = std::move(local), sent = std::move(sent)](
          RequestPtr r, coordinator::OffsetDeleteResult res) mutable {
        kafka::OffsetDeleteResponse resp;
        resp.error_code = kafka::code(res.error);
        if (res.error == ErrorCode::none) {
          for (std::size_t i = 0; i < sent.size() && i < res.partitions.size(); ++i)
            local[sent[i]] = res.partitions[i];
          std::size_t slot = 0;
          for (const auto& t : body->topics) {
            kafka::OffsetDeleteResponse::OffsetDeleteResponseTopic rt;
            rt.name = t.name;
            for (const auto& p : t.partitions)
              rt.partitions.push_back({p.partition_index, kafka::code(local[slot++])});
            resp.topics.push_back(std::move(rt));
          }
        }
        r->reply(resp);
      });
}

}  // namespace samsa::daemon::handlers

namespace samsa::daemon::handlers {

// InitProducerId without a transactional id: a fresh producer id at epoch 0 (also when an
// idempotent producer asks to bump its epoch, v3+: Kafka gives it a new id too). With one, the
// transaction coordinator answers (transactions.cc).
void init_producer_id(RequestPtr r) {
  kafka::InitProducerIdRequest body;
  if (!r->decode(body)) return;
  // Kafka: WRITE on the transactional id; an idempotent producer needs IDEMPOTENT_WRITE on
  // the cluster, or WRITE on some topic.
  const bool allowed = body.transactional_id
                           ? authorized(*r, AclOperation::write, ResourceType::transactional_id,
                                        *body.transactional_id)
                           : authorized(*r, AclOperation::idempotent_write, ResourceType::cluster,
                                        replication::kClusterResourceName, true) ||
                                 authorized_any(*r, AclOperation::write, ResourceType::topic);
  if (!allowed) {
    kafka::InitProducerIdResponse resp;
    resp.error_code =
        kafka::code(body.transactional_id ? ErrorCode::transactional_id_authorization_failed
                                          : ErrorCode::cluster_authorization_failed);
    resp.producer_id = -1;
    resp.producer_epoch = -1;
    r->reply(resp);
    return;
  }
  if (body.transactional_id) {
    init_transactional_producer(std::move(r), std::move(body));
    return;
  }
  using Result = std::expected<std::int64_t, ErrorCode>;
  via_coordinator<Result>(
      std::move(r), [](GroupCoordinator& c, auto done) { c.producer_ids().next(std::move(done)); },
      [](RequestPtr r, Result res) {
        kafka::InitProducerIdResponse resp;
        if (res) {
          resp.producer_id = *res;
          resp.producer_epoch = 0;
        } else {
          resp.error_code = kafka::code(res.error());
          resp.producer_id = -1;
          resp.producer_epoch = -1;
        }
        r->reply(resp);
      });
}

}  // namespace samsa::daemon::handlers
