// ControllerState's config changes: topic configs and dynamic broker settings
// (IncrementalAlterConfigs' operations, AlterConfigs' replacement).
#include <algorithm>
#include <map>
#include <memory>
#include <string>

#include "replication/controller_state.h"

namespace samsa::replication {

using kafka::ErrorCode;

namespace {

const char* op_name(ConfigOpType op) {
  switch (op) {
    case ConfigOpType::set:
      return "SET";
    case ConfigOpType::remove:
      return "DELETE";
    case ConfigOpType::append:
      return "APPEND";
    case ConfigOpType::subtract:
      return "SUBTRACT";
  }
  return "?";
}

std::vector<std::string> split_items(std::string_view v) {
  std::vector<std::string> out;
  while (!v.empty()) {
    auto c = v.find(',');
    std::string_view item = v.substr(0, c);
    while (!item.empty() && item.front() == ' ')
      item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ')
      item.remove_suffix(1);
    if (!item.empty()) out.emplace_back(item);
    if (c == std::string_view::npos) break;
    v.remove_prefix(c + 1);
  }
  return out;
}

std::string join_items(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items)
    out += (out.empty() ? "" : ",") + i;
  return out;
}

// APPEND adds the items not yet present; SUBTRACT removes the ones present.
std::string apply_list_op(ConfigOpType op, std::string_view current, std::string_view value) {
  auto items = split_items(current);
  for (const auto& v : split_items(value)) {
    auto it = std::find(items.begin(), items.end(), v);
    if (op == ConfigOpType::append && it == items.end()) items.push_back(v);
    if (op == ConfigOpType::subtract && it != items.end()) items.erase(it);
  }
  return join_items(items);
}

}  // namespace

Proposal<std::vector<ConfigOutcome>> ControllerState::alter_configs(
    std::vector<ConfigAlteration> changes, bool validate_only) {
  // Each change reads the values in the working view, so APPEND, SUBTRACT and AlterConfigs'
  // replacement build on a change still being committed, never on an older value.
  Proposal<std::vector<ConfigOutcome>> out;
  out.answer.reserve(changes.size());
  std::map<std::pair<ConfigResource, std::string>, int> named;
  for (const auto& a : changes)
    ++named[{a.resource, a.name}];
  std::vector<MetadataRecord> records;
  for (const auto& a : changes) {
    if (named[{a.resource, a.name}] > 1) {
      // Kafka refuses every occurrence of a resource named twice.
      out.answer.push_back({ErrorCode::invalid_request, "Each resource must appear at most once."});
      continue;
    }
    out.answer.push_back(alter_one(a, validate_only, records));
  }
  for (auto& r : records)
    emit(out.records, std::move(r));
  return out;
}

ConfigOutcome ControllerState::alter_one(const ConfigAlteration& a, bool validate_only,
                                         std::vector<MetadataRecord>& records) {
  ConfigOutcome o;
  auto fail = [&](ErrorCode e, std::string msg) {
    if (o.error != ErrorCode::none) return;
    o.error = e;
    o.message = std::move(msg);
  };
  const MetadataImage& view = decision_view();
  const bool topic = a.resource == ConfigResource::topic;
  const std::string self_id = std::to_string(opts_.node_id);
  std::map<std::string, std::string> current;
  if (topic) {
    if (auto why = check_topic_name(a.name)) {
      fail(ErrorCode::invalid_topic_exception, "Topic name is invalid: " + *why);
    } else if (const TopicState* t = view.topic(a.name)) {
      current = t->configs;
    } else {
      fail(ErrorCode::unknown_topic_or_partition, "The topic '" + a.name + "' does not exist.");
    }
  } else if (a.name != "" && a.name != self_id &&
             !(!opts_.single_node && a.name.find_first_not_of("0123456789") == std::string::npos &&
               a.name.size() < 10 && broker_registered(std::atoi(a.name.c_str())))) {
    fail(ErrorCode::invalid_request,
         "Unexpected broker id, expected " + self_id + " or empty string, but received " + a.name);
  } else if (!opts_.validate_broker_config) {
    fail(ErrorCode::invalid_request, "Dynamic broker settings are not available.");
  } else {
    current = view.broker_configs(a.name);
  }
  std::map<std::string, int> seen;
  for (const auto& op : a.ops)
    if (++seen[op.key] == 2) fail(ErrorCode::invalid_request, "Error due to duplicate config keys");
  // Kafka reports bad topic configs as INVALID_CONFIG and bad broker ones as INVALID_REQUEST.
  const ErrorCode bad = topic ? ErrorCode::invalid_config : ErrorCode::invalid_request;
  std::map<std::string, std::string> next =
      a.replace ? std::map<std::string, std::string>{} : current;
  for (const auto& op : a.ops) {
    if (o.error != ErrorCode::none) break;
    const TopicConfigKey* tk = topic ? find_topic_config(op.key) : nullptr;
    if (topic && !tk) {
      fail(ErrorCode::invalid_config, "Unknown topic config name: " + op.key);
      break;
    }
    if (op.op != ConfigOpType::remove && !op.value) {
      fail(ErrorCode::invalid_request, "Null value not supported for : " + op.key);
      break;
    }
    std::optional<std::string> value;
    if (op.op == ConfigOpType::set) {
      value = *op.value;
    } else if (op.op == ConfigOpType::append || op.op == ConfigOpType::subtract) {
      if (topic && tk->type != TopicConfigType::list) {
        fail(ErrorCode::invalid_config, std::string("Can't ") + op_name(op.op) + " to key " +
                                            op.key + " because its type is not LIST.");
        break;
      }
      std::string now;
      if (auto it = next.find(op.key); it != next.end()) {
        now = it->second;
      } else if (topic) {
        now = topic_config_value({}, opts_.defaults, op.key);
      } else if (opts_.broker_config_value) {
        now = opts_.broker_config_value(op.key);
      }
      value = apply_list_op(op.op, now, *op.value);
    }
    if (topic) {
      if (value) {
        if (auto why = validate_topic_config(op.key, *value)) fail(bad, *why);
      }
    } else if (auto why = opts_.validate_broker_config(op.key, value)) {
      fail(bad, *why);
    }
    if (value) {
      next[op.key] = *value;
    } else {
      next.erase(op.key);
    }
  }
  if (o.error == ErrorCode::none && !validate_only) {
    for (const auto& [k, v] : next) {
      auto it = current.find(k);
      if (it == current.end() || it->second != v)
        records.push_back(ConfigRecord{a.resource, a.name, k, v});
    }
    for (const auto& [k, v] : current)
      if (!next.contains(k)) records.push_back(ConfigRecord{a.resource, a.name, k, std::nullopt});
  }
  return o;
}

// Kafka's rules (ScramControlManager): a user's alterations apply together or not at all; a
// user and mechanism named twice is DUPLICATE_RESOURCE, iterations outside 4096..16384
// UNACCEPTABLE_CREDENTIAL, removing a credential that is not there RESOURCE_NOT_FOUND.
Proposal<std::vector<ScramOutcome>> ControllerState::alter_scram_credentials(
    std::vector<ScramAlteration> changes) {
  Proposal<std::vector<ScramOutcome>> out;
  std::map<std::string, std::size_t> user_index;
  std::map<std::pair<std::string, ScramMechanism>, int> named;
  for (const auto& c : changes) {
    ++named[{c.credential.name, c.credential.mechanism}];
    if (user_index.emplace(c.credential.name, out.answer.size()).second)
      out.answer.push_back({c.credential.name, ErrorCode::none, ""});
  }
  auto fail = [&](const std::string& user, ErrorCode e, std::string msg) {
    ScramOutcome& o = out.answer[user_index[user]];
    if (o.error == ErrorCode::none) {
      o.error = e;
      o.message = std::move(msg);
    }
  };
  const MetadataImage& image = working();
  for (const auto& c : changes) {
    const auto& cr = c.credential;
    if (cr.name.empty()) {
      fail(cr.name, ErrorCode::unacceptable_credential, "Username must not be empty");
    } else if (named[{cr.name, cr.mechanism}] > 1) {
      fail(cr.name, ErrorCode::duplicate_resource,
           "A user credential cannot be altered twice in the same request");
    } else if (c.remove) {
      if (!image.scram_credential(cr.name, cr.mechanism))
        fail(cr.name, ErrorCode::resource_not_found,
             "Attempt to delete a user credential that does not exist");
    } else if (cr.iterations < 4096) {
      fail(cr.name, ErrorCode::unacceptable_credential, "Too few iterations");
    } else if (cr.iterations > 16384) {
      fail(cr.name, ErrorCode::unacceptable_credential, "Too many iterations");
    }
  }
  for (auto& c : changes) {
    if (out.answer[user_index[c.credential.name]].error != ErrorCode::none) continue;
    if (c.remove) {
      emit(out.records, RemoveUserScramCredentialRecord{c.credential.name, c.credential.mechanism});
    } else {
      emit(out.records, std::move(c.credential));
    }
  }
  return out;
}

}  // namespace samsa::replication
