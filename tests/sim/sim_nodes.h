// The simulation's messages and node state (brokers and the controller).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <variant>
#include <vector>

#include "replication/controller_state.h"
#include "replication/replica_state.h"
#include "sim_disk.h"

namespace samsa::sim {

using kafka::ErrorCode;

struct MetadataMsg {
  std::int64_t offset;
  std::optional<PartitionState> part;
  std::map<std::int32_t, BrokerState> brokers;
};
struct RegisterReq {
  BrokerRegistration reg;
};
struct RegisterResp {
  RegistrationAnswer a;
  std::int32_t incarnation;
};
struct HeartbeatReq {
  Heartbeat hb;
};
struct HeartbeatResp {
  HeartbeatAnswer a;
};
struct AlterReq {
  AlterPartitionItem item;
};
struct AlterResp {
  AlterPartitionAnswer a;
};
struct FetchReq {
  FollowerFetchRequest f;
};
struct FetchResp {
  FollowerFetchResponse r;
  std::vector<Rec> recs;
};
struct ProduceReq {
  std::int64_t value;
};
struct ProduceResp {
  std::int64_t value;
  ErrorCode error;
};
struct ReadReq {
  std::int64_t id;
  std::int32_t current_leader_epoch;
};
struct ReadResp {
  std::int64_t id;
  ErrorCode error;
  std::int32_t epoch;
  std::int64_t hw;
  std::uint64_t prefix_hash;
};
using Msg =
    std::variant<MetadataMsg, RegisterReq, RegisterResp, HeartbeatReq, HeartbeatResp, AlterReq,
                 AlterResp, FetchReq, FetchResp, ProduceReq, ProduceResp, ReadReq, ReadResp>;

struct Broker {
  std::int32_t id = 0;
  bool up = false;
  bool isolated = false;
  bool stopping = false;  // controlled shutdown asked for: heartbeats want_shut_down
  std::int64_t restart_after_ms = 0;
  std::int32_t incarnation = 0;
  Uuid incarnation_id{};
  SimLog log;
  std::unique_ptr<ReplicaState> rs;
  std::int64_t broker_epoch = -1;
  std::int64_t meta_offset = -1;
  std::optional<PartitionState> part;
  std::map<std::int32_t, BrokerState> brokers;
  std::int64_t next_register_ms = 0;
  std::int64_t next_heartbeat_ms = 0;
  std::int64_t next_fetch_ms = 0;
  std::int64_t next_isr_ms = 0;
  bool syncing = false;
  struct Pending {
    std::int64_t last_offset;
    std::int64_t value;
  };
  std::vector<Pending> pending;
  // Checker state: the log prefix verified against the committed history.
  std::int64_t verified = 0;
  std::int64_t durable_verified = 0;
};

struct Controller {
  bool up = false;
  bool isolated = false;
  std::int32_t incarnation = 0;
  SimQuorum quorum;
  std::unique_ptr<ControllerState> cs;
  MetadataImage committed;  // what brokers may see
  std::int64_t applied = -1;
  std::int64_t published = -1;
  std::int64_t next_publish_ms = 0;
  struct Answer {
    std::int64_t offset;
    int to;
    Msg msg;
  };
  std::vector<Answer> answers;
  bool syncing = false;
};

}  // namespace samsa::sim
