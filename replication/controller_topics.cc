// ControllerState's topic requests: CreateTopics, CreatePartitions, DeleteTopics, and producer-id
// blocks. Each reads the view decisions read (the working one: committed records plus every
// proposal since), so two requests in one commit window never both take the same name, the
// same partitions or the same ids.
#include <algorithm>
#include <map>

#include "replication/controller_state.h"

namespace samsa::replication {

using kafka::ErrorCode;

namespace {

const char* const kMetadataTopic = "__cluster_metadata";
constexpr const char* kTooManyPerRequest = "Excessively large number of partitions per request.";

// Topic names that differ only in '.' versus '_' collide in metric names; Kafka refuses them.
std::string collision_key(std::string_view name) {
  std::string s(name);
  std::replace(s.begin(), s.end(), '.', '_');
  return s;
}

std::string too_many_on_broker(std::int64_t would, std::int64_t limit) {
  return "This broker would hold " + std::to_string(would) +
         " partitions, more than samsa.max.partitions (" + std::to_string(limit) + ").";
}

PartitionRecord new_partition(const Uuid& topic, std::int32_t p, std::vector<std::int32_t> r) {
  PartitionRecord pr;
  pr.topic_id = topic;
  pr.partition = p;
  pr.isr = r;
  pr.leader = r.front();
  pr.replicas = std::move(r);
  return pr;
}

}  // namespace

Uuid ControllerState::new_topic_id() {
  for (;;) {
    Uuid id = opts_.new_topic_id ? opts_.new_topic_id() : random_uuid();
    if (id != kZeroUuid && !working().topic(id)) return id;
  }
}

Uuid ControllerState::emit_topic(std::vector<MetadataRecord>& out, std::vector<std::size_t>& groups,
                                 const TopicSpec& s, std::int32_t partitions, std::int16_t rf) {
  auto placed = s.assignments.empty() ? place(partitions, rf) : s.assignments;
  const Uuid id = new_topic_id();
  const std::size_t before = out.size();
  emit(out, TopicRecord{s.name, id});
  for (const auto& [k, v] : s.configs)
    emit(out, ConfigRecord{ConfigResource::topic, s.name, k, v});
  for (std::int32_t p = 0; p < partitions; ++p)
    emit(out, new_partition(id, p, std::move((*placed)[static_cast<std::size_t>(p)])));
  groups.push_back(out.size() - before);
  return id;
}

Proposal<std::vector<TopicOutcome>> ControllerState::create_topics(std::vector<TopicSpec> specs,
                                                                   bool validate_only,
                                                                   bool partial) {
  Proposal<std::vector<TopicOutcome>> out;
  auto& outcomes = out.answer;
  outcomes.reserve(specs.size());
  // The bounds come first, from the counts alone: nothing per partition is built for a request
  // that asks for too many (as Kafka's controller refuses the whole request).
  if (!partial) {
    std::int64_t total = 0;
    for (const auto& s : specs) {
      const std::int32_t p = s.partitions == -1 ? opts_.default_partitions : s.partitions;
      if (p > 0) total += p;
    }
    if (total > opts_.max_partitions_per_request) {
      for (const auto& s : specs)
        outcomes.push_back(TopicOutcome{s.name, ErrorCode::policy_violation, kTooManyPerRequest});
      return out;
    }
  }
  const MetadataImage& view = decision_view();
  // Counted once: the topics this request adds join the working view as they are accepted.
  const std::int64_t existing = view.partition_count();
  std::map<std::string, int> seen;
  for (const auto& s : specs)
    ++seen[s.name];
  std::map<std::string, std::string> collisions;
  for (const auto& [name, t] : view.topics())
    collisions.emplace(collision_key(name), name);
  std::int64_t accepted = 0;  // partitions this request adds
  const std::int32_t live = live_brokers();

  for (auto& s : specs) {
    TopicOutcome o;
    o.name = s.name;
    auto fail = [&](ErrorCode e, std::string msg) {
      o.error = e;
      o.message = std::move(msg);
    };
    const std::int32_t partitions = s.partitions == -1 ? opts_.default_partitions : s.partitions;
    const std::int16_t rf =
        s.replication_factor == -1 ? opts_.default_replication_factor : s.replication_factor;
    const std::int64_t on_broker = existing + accepted + partitions;
    if (seen[s.name] > 1) {
      fail(ErrorCode::invalid_request, "Duplicate topic name " + s.name + " in the request.");
    } else if (auto why = check_topic_name(s.name)) {
      fail(ErrorCode::invalid_topic_exception, *why);
    } else if (s.name == kMetadataTopic) {
      fail(ErrorCode::invalid_request, "The name " + s.name + " is reserved.");
    } else if (view.topic(s.name)) {
      fail(ErrorCode::topic_already_exists, "Topic '" + s.name + "' already exists.");
    } else if (auto c = collisions.find(collision_key(s.name));
               c != collisions.end() && c->second != s.name) {
      fail(ErrorCode::invalid_topic_exception,
           "Topic '" + s.name + "' collides with existing topic: " + c->second);
    } else if (partitions <= 0) {
      fail(ErrorCode::invalid_partitions, "Number of partitions must be larger than 0.");
    } else if (rf <= 0) {
      fail(ErrorCode::invalid_replication_factor, "Replication factor must be larger than 0.");
    } else if (!s.assignments.empty()) {
      if (auto why = check_assignments(s.assignments, static_cast<std::size_t>(rf)))
        fail(ErrorCode::invalid_replica_assignment, *why);
    } else if (rf > live) {
      fail(ErrorCode::invalid_replication_factor,
           "Unable to replicate the partition " + std::to_string(rf) +
               " time(s): The target replication factor of " + std::to_string(rf) +
               " cannot be reached because only " + std::to_string(live) +
               " broker(s) are registered.");
    } else if (accepted + partitions > opts_.max_partitions_per_request) {
      fail(ErrorCode::policy_violation, kTooManyPerRequest);
    } else if (on_broker > opts_.max_partitions) {
      fail(ErrorCode::policy_violation, too_many_on_broker(on_broker, opts_.max_partitions));
    } else {
      for (const auto& [k, v] : s.configs) {
        if (auto why = validate_topic_config(k, v)) {
          fail(ErrorCode::invalid_config, *why);
          break;
        }
      }
    }
    if (o.error == ErrorCode::none) {
      o.partitions = partitions;
      o.replication_factor = rf;
      accepted += partitions;
      collisions.emplace(collision_key(s.name), s.name);
      if (!validate_only) o.id = emit_topic(out.records, out.groups, s, partitions, rf);
    }
    outcomes.push_back(std::move(o));
  }
  return out;
}

std::optional<std::string> ControllerState::check_assignments(
    const std::vector<std::vector<std::int32_t>>& assignments, std::size_t rf) const {
  for (const auto& a : assignments) {
    auto bad =
        std::find_if(a.begin(), a.end(), [&](std::int32_t b) { return !broker_registered(b); });
    if (bad != a.end())
      return "The manual partition assignment includes broker " + std::to_string(*bad) +
             ", but no such broker is registered.";
    for (auto b = a.begin(); b != a.end(); ++b)
      if (std::find(a.begin(), b, *b) != b)
        return "The manual partition assignment includes broker " + std::to_string(*b) +
               " more than once.";
    if (a.size() != rf)
      return "The manual partition assignment includes a partition with " +
             std::to_string(a.size()) +
             " replica(s), but this is not consistent with previous partitions, which have " +
             std::to_string(rf) + " replica(s).";
  }
  return std::nullopt;
}

Proposal<std::vector<PartitionsOutcome>> ControllerState::create_partitions(
    std::vector<PartitionsSpec> specs, bool validate_only) {
  Proposal<std::vector<PartitionsOutcome>> out;
  auto& outcomes = out.answer;
  outcomes.reserve(specs.size());
  const MetadataImage& view = decision_view();
  std::map<std::string, int> seen;
  std::int64_t total = 0;
  for (const auto& s : specs) {
    ++seen[s.name];
    if (const TopicState* t = view.topic(s.name);
        t && s.count > static_cast<std::int64_t>(t->partitions.size()))
      total += s.count - static_cast<std::int64_t>(t->partitions.size());
  }
  // Kafka 4.1 has no cap here (its controller builds every record a huge count asks for);
  // samsa applies CreateTopics' cap before anything per partition is built.
  if (total > opts_.max_partitions_per_request) {
    for (const auto& s : specs)
      outcomes.push_back({s.name, ErrorCode::policy_violation, kTooManyPerRequest});
    return out;
  }
  const std::int64_t existing = view.partition_count();
  std::int64_t accepted = 0;
  for (auto& s : specs) {
    PartitionsOutcome o;
    o.name = s.name;
    auto fail = [&](ErrorCode e, std::string msg) {
      o.error = e;
      o.message = std::move(msg);
    };
    const TopicState* t = view.topic(s.name);
    const std::int32_t have = t ? static_cast<std::int32_t>(t->partitions.size()) : 0;
    const std::int64_t add = static_cast<std::int64_t>(s.count) - have;
    const std::int64_t on_broker = existing + accepted + add;
    const std::size_t rf = !t || t->partitions.empty() ? 1 : t->partitions.front().replicas.size();
    if (seen[s.name] > 1) {
      fail(ErrorCode::invalid_request, "Duplicate topic name " + s.name + " in the request.");
    } else if (!t) {
      fail(ErrorCode::unknown_topic_or_partition, "");  // Kafka sends no message
    } else if (is_internal_topic(s.name)) {
      // The group coordinator maps groups to __consumer_offsets partitions by their count.
      fail(ErrorCode::invalid_request,
           "Cannot increase the partition count of the internal topic " + s.name + ".");
    } else if (s.count < have) {
      fail(ErrorCode::invalid_partitions,
           "The topic " + s.name + " currently has " + std::to_string(have) + " partition(s); " +
               std::to_string(s.count) + " would not be an increase.");
    } else if (s.count == have) {
      fail(ErrorCode::invalid_partitions,
           "Topic already has " + std::to_string(have) + " partition(s).");
    } else if (!s.assignments.empty() && static_cast<std::int64_t>(s.assignments.size()) != add) {
      fail(ErrorCode::invalid_replica_assignment,
           "Attempted to add " + std::to_string(add) + " additional partition(s), but only " +
               std::to_string(s.assignments.size()) + " assignment(s) were specified.");
    } else if (accepted + add > opts_.max_partitions_per_request) {
      fail(ErrorCode::policy_violation, kTooManyPerRequest);
    } else if (on_broker > opts_.max_partitions) {
      fail(ErrorCode::policy_violation, too_many_on_broker(on_broker, opts_.max_partitions));
    } else if (auto why = check_assignments(s.assignments, rf)) {
      fail(ErrorCode::invalid_replica_assignment, std::move(*why));
    }
    std::optional<std::vector<std::vector<std::int32_t>>> placed;
    if (o.error == ErrorCode::none && !validate_only) {
      placed = s.assignments.empty()
                   ? place(static_cast<std::int32_t>(add), static_cast<std::int16_t>(rf))
                   : std::optional(s.assignments);
      if (!placed)
        fail(ErrorCode::invalid_replication_factor,
             "The topic's replication factor of " + std::to_string(rf) + " exceeds the " +
                 std::to_string(live_brokers()) + " usable broker(s).");
    }
    if (o.error == ErrorCode::none) {
      accepted += add;
      if (placed) {
        const Uuid id = t->id;  // t may not survive the emits (copy on write)
        const std::size_t before = out.records.size();
        for (std::int32_t p = have; p < s.count; ++p)
          emit(out.records,
               new_partition(id, p, std::move((*placed)[static_cast<std::size_t>(p - have)])));
        out.groups.push_back(out.records.size() - before);
      }
    }
    outcomes.push_back(std::move(o));
  }
  return out;
}

Proposal<std::vector<DeleteOutcome>> ControllerState::delete_topics(
    const std::vector<std::pair<std::string, Uuid>>& topics) {
  Proposal<std::vector<DeleteOutcome>> out;
  const MetadataImage& view = decision_view();
  std::vector<Uuid> removing;
  for (const auto& [name, id] : topics) {
    DeleteOutcome o;
    o.name = name;
    o.id = id;
    const TopicState* t = name.empty() ? view.topic(id) : view.topic(name);
    if (!opts_.delete_topic_enable) {
      o.error = ErrorCode::topic_deletion_disabled;
      o.message = "Topic deletion is disabled.";
    } else if (!t) {
      o.error = name.empty() ? ErrorCode::unknown_topic_id : ErrorCode::unknown_topic_or_partition;
      o.message = name.empty() ? "This server does not host this topic ID."
                               : "This server does not host this topic-partition.";
    } else if (is_internal_topic(t->name)) {
      o.error = ErrorCode::invalid_topic_exception;
      o.message = "Cannot delete internal topic " + t->name + ".";
    } else {
      o.name = t->name;
      o.id = t->id;
      // A topic named twice (by name and by id) is removed once; both entries succeed.
      if (std::find(removing.begin(), removing.end(), t->id) == removing.end())
        removing.push_back(t->id);
    }
    out.answer.push_back(std::move(o));
  }
  // Emitted after every lookup: the first removal would hide the topic from the later entries.
  for (const auto& id : removing)
    emit(out.records, RemoveTopicRecord{id});
  return out;
}

Proposal<ProducerIdsAnswer> ControllerState::allocate_producer_ids(std::int32_t broker_id,
                                                                   std::int64_t broker_epoch) {
  Proposal<ProducerIdsAnswer> out;
  if (!opts_.single_node) {
    // Kafka's checkBrokerEpoch: only a registered broker of that epoch gets ids.
    auto b = working().brokers().find(broker_id);
    if (b == working().brokers().end() || (broker_epoch >= 0 && b->second.epoch != broker_epoch)) {
      out.answer.error = ErrorCode::stale_broker_epoch;
      return out;
    }
  }
  const std::int64_t first = decision_view().next_producer_id();
  const std::int32_t block = opts_.producer_id_block;
  if (first > INT64_MAX - block) {
    // Kafka's controller answers the same when the id space is used up.
    out.answer.error = ErrorCode::unknown_server_error;
    return out;
  }
  emit(out.records, ProducerIdsRecord{broker_id, first + block});
  out.answer = ProducerIdsAnswer{ErrorCode::none, first, block};
  return out;
}

}  // namespace samsa::replication
