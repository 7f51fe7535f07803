// DescribeConfigs, AlterConfigs and IncrementalAlterConfigs: topic configs and dynamic broker
// settings. Descriptions are answered on the reactor from its image and settings; changes are
// validated and committed by the controller (replication::Controller::alter_configs) and
// answered once every reactor has the new image and settings.
//
// Sources and synonyms follow Kafka's ConfigHelper, so `kafka-configs --describe --all` prints
// what it prints against Kafka: a broker key's synonyms are its group (log.retention.ms,
// .minutes, .hours) layer by layer, highest precedence first, starting at the key itself; a
// topic key's are its override, then its broker setting's synonyms.
#include <algorithm>
#include <array>

#include "daemon/api/auth.h"
#include "daemon/api/handlers/handlers.h"
#include "daemon/api/handlers/round_trip.h"
#include "daemon/broker.h"
#include "net/kafka/gen/alter_configs_request.h"
#include "net/kafka/gen/alter_configs_response.h"
#include "net/kafka/gen/describe_configs_request.h"
#include "net/kafka/gen/describe_configs_response.h"
#include "net/kafka/gen/incremental_alter_configs_request.h"
#include "net/kafka/gen/incremental_alter_configs_response.h"
#include "replication/topic_config.h"

namespace samsa::daemon::handlers {
namespace {

using kafka::ErrorCode;
using Resp = kafka::DescribeConfigsResponse;

// ConfigResource.Type on the wire.
constexpr std::int8_t kTopic = 2;
constexpr std::int8_t kBroker = 4;
constexpr std::int8_t kBrokerLogger = 8;

// DescribeConfigsResponse.ConfigSource.
using Source = std::int8_t;
constexpr Source kTopicConfig = 1, kDynamicBroker = 2, kDynamicDefaultBroker = 3, kStaticBroker = 4,
                 kDefault = 5;

// DescribeConfigsResponse.ConfigType.
using KafkaType = std::int8_t;
constexpr KafkaType kBoolean = 1, kString = 2, kInt = 3, kLong = 5, kDouble = 6, kList = 7;

KafkaType kafka_type(ConfigType t) {
  switch (t) {
    case ConfigType::boolean:
      return kBoolean;
    case ConfigType::int32:
      return kInt;
    case ConfigType::int64:
      return kLong;
    case ConfigType::list:
      return kList;
    case ConfigType::string:
    case ConfigType::enumeration:
      return kString;
  }
  return kString;
}

KafkaType kafka_type(replication::TopicConfigType t) {
  using T = replication::TopicConfigType;
  switch (t) {
    case T::boolean:
      return kBoolean;
    case T::int32:
      return kInt;
    case T::int64:
      return kLong;
    case T::double_:
      return kDouble;
    case T::list:
      return kList;
    case T::string:
      return kString;
  }
  return kString;
}

// samsa's layers, highest precedence first, as Kafka's sources (--override is static
// configuration given on the command line).
constexpr std::array<std::pair<Config::Layer, Source>, 5> kLayers = {{
    {Config::Layer::override_, kStaticBroker},
    {Config::Layer::dynamic, kDynamicBroker},
    {Config::Layer::dynamic_default, kDynamicDefaultBroker},
    {Config::Layer::file, kStaticBroker},
    {Config::Layer::defaults, kDefault},
}};

// Kafka's synonym groups: the keys one setting may come from, most specific first.
std::vector<std::string_view> synonym_group(std::string_view key) {
  if (key == "log.roll.ms" || key == "log.roll.hours") return {"log.roll.ms", "log.roll.hours"};
  if (key == "log.retention.ms" || key == "log.retention.minutes" || key == "log.retention.hours")
    return {"log.retention.ms", "log.retention.minutes", "log.retention.hours"};
  if (key == "log.flush.interval.ms")
    return {"log.flush.interval.ms", "log.flush.scheduler.interval.ms"};
  return {key};
}

// Kafka's configSynonyms(): every group member layer by layer, then everything before the
// first entry for `key` itself is dropped. A broker setting samsa does not have contributes
// its Kafka default (fallback), as Kafka's own default layer would.
std::vector<Resp::DescribeConfigsSynonym> broker_synonyms(const Config& c, std::string_view key,
                                                          std::string_view fallback = {}) {
  std::vector<Resp::DescribeConfigsSynonym> out;
  const auto group = synonym_group(key);
  if (!Config::find_key(key)) {
    if (!fallback.empty()) out.push_back({std::string(key), std::string(fallback), kDefault});
    return out;
  }
  for (const auto& [layer, source] : kLayers) {
    for (auto name : group) {
      if (auto v = c.layer_value(name, layer)) out.push_back({std::string(name), *v, source});
    }
  }
  auto first = std::find_if(out.begin(), out.end(), [&](const auto& s) { return s.name == key; });
  out.erase(out.begin(), first);
  return out;
}

// The effective value of a broker key (null when no layer sets it).
std::optional<std::string> broker_value(const Config& c, std::string_view key) {
  for (const auto& [layer, source] : kLayers)
    if (auto v = c.layer_value(key, layer)) return v;
  return std::nullopt;
}

// A topic config's synonyms: its override, then its broker setting's synonyms.
std::vector<Resp::DescribeConfigsSynonym> topic_synonyms(
    const BrokerSettings& s, const std::map<std::string, std::string>& overrides,
    const replication::TopicConfigKey& k) {
  std::vector<Resp::DescribeConfigsSynonym> syn;
  if (auto o = overrides.find(std::string(k.name)); o != overrides.end())
    syn.push_back({o->first, o->second, kTopicConfig});
  if (!k.broker_synonym.empty()) {
    for (auto& b : broker_synonyms(*s.config, k.broker_synonym, k.builtin_default))
      syn.push_back(std::move(b));
  }
  return syn;
}

bool wanted(const std::optional<std::vector<std::string>>& keys, std::string_view name) {
  return !keys || keys->empty() || std::find(keys->begin(), keys->end(), name) != keys->end();
}

void describe_topic(const Request& r, const kafka::DescribeConfigsRequest& req,
                    const kafka::DescribeConfigsRequest::DescribeConfigsResource& res,
                    Resp::DescribeConfigsResult& out) {
  const auto& s = *r.rc.settings;
  if (auto why = replication::check_topic_name(res.resource_name)) {
    out.error_code = kafka::code(ErrorCode::invalid_topic_exception);
    out.error_message = "Topic name is invalid: " + *why;
    return;
  }
  const replication::TopicState* t = r.rc.image->topic(res.resource_name);
  if (!t) {
    out.error_code = kafka::code(ErrorCode::unknown_topic_or_partition);
    out.error_message = "";
    return;
  }
  for (const auto& k : replication::topic_config_keys()) {
    if (!wanted(res.configuration_keys, k.name)) continue;
    Resp::DescribeConfigsResourceResult e;
    e.name = std::string(k.name);
    e.value = replication::topic_config_value(t->configs, s.topic_defaults, k.name);
    e.read_only = false;
    e.is_sensitive = false;
    std::vector<Resp::DescribeConfigsSynonym> syn = topic_synonyms(s, t->configs, k);
    e.config_source = syn.empty() ? kDefault : syn.front().source;
    if (req.include_synonyms) e.synonyms = std::move(syn);
    e.config_type = kafka_type(k.type);
    e.documentation = req.include_documentation ? std::optional(std::string(k.doc)) : std::nullopt;
    out.configs.push_back(std::move(e));
  }
}

void describe_broker(const Request& r, const kafka::DescribeConfigsRequest& req,
                     const kafka::DescribeConfigsRequest::DescribeConfigsResource& res,
                     Resp::DescribeConfigsResult& out) {
  const auto& s = *r.rc.settings;
  const Config& c = *s.config;
  const bool cluster_default = res.resource_name.empty();
  if (!cluster_default && res.resource_name != std::to_string(s.node_id)) {
    out.error_code = kafka::code(ErrorCode::invalid_request);
    out.error_message = "Unexpected broker id, expected " + std::to_string(s.node_id) +
                        " or empty string, but received " + res.resource_name;
    return;
  }
  for (const auto& k : Config::keys()) {
    if (!wanted(res.configuration_keys, k.name)) continue;
    Resp::DescribeConfigsResourceResult e;
    e.name = std::string(k.name);
    std::vector<Resp::DescribeConfigsSynonym> syn = broker_synonyms(c, k.name);
    if (cluster_default) {
      // The cluster-wide defaults alone, as Kafka describes resource "".
      auto v = c.layer_value(k.name, Config::Layer::dynamic_default);
      if (!v) continue;
      e.value = *v;
      std::erase_if(syn, [](const auto& x) { return x.source != kDynamicDefaultBroker; });
      e.config_source = kDynamicDefaultBroker;
    } else {
      e.value = broker_value(c, k.name);
      e.config_source = syn.empty() ? kDefault : syn.front().source;
    }
    e.read_only = !k.dynamic;
    e.is_sensitive = Config::sensitive(k.name);
    if (e.is_sensitive) {
      e.value = std::nullopt;
      for (auto& x : syn)
        x.value = std::nullopt;
    }
    if (req.include_synonyms) e.synonyms = std::move(syn);
    e.config_type = kafka_type(k.type);
    e.documentation = req.include_documentation ? std::optional(std::string(k.doc)) : std::nullopt;
    out.configs.push_back(std::move(e));
  }
}

replication::ConfigResource resource_of(std::int8_t type) {
  return type == kTopic ? replication::ConfigResource::topic : replication::ConfigResource::broker;
}

// Resources the controller does not handle are answered here: (index, error, message).
struct Early {
  ErrorCode error;
  std::string message;
};

std::optional<Early> unsupported(std::int8_t type) {
  if (type == kTopic || type == kBroker) return std::nullopt;
  if (type == kBrokerLogger)
    return Early{ErrorCode::invalid_request,
                 "Broker loggers are not configurable through Kafka's API; use samsa.log.level."};
  return Early{ErrorCode::invalid_request,
               "Unsupported resource type " + std::to_string(type) + "."};
}

// DESCRIBE_CONFIGS (ALTER_CONFIGS) on the topic, or on the cluster for a broker's settings.
std::optional<Early> config_denied(const Request& r, std::int8_t type, std::string_view name,
                                   replication::AclOperation op) {
  if (type == kTopic && !authorized(r, op, replication::ResourceType::topic, name))
    return Early{ErrorCode::topic_authorization_failed, ""};
  if (type == kBroker &&
      !authorized(r, op, replication::ResourceType::cluster, replication::kClusterResourceName))
    return Early{ErrorCode::cluster_authorization_failed, ""};
  return std::nullopt;
}

// Runs the alterations on the controller and answers each resource with make(index, outcome).
template <class Response, class Entry>
void alter(RequestPtr r, std::vector<std::pair<std::int8_t, std::string>> names,
           std::vector<std::optional<Early>> early,
           std::vector<replication::ConfigAlteration> changes, bool validate_only) {
  auto answer = [names = std::move(names), early](RequestPtr r,
                                                  std::vector<replication::ConfigOutcome> out) {
    Response resp;
    std::size_t next = 0;
    for (std::size_t i = 0; i < names.size(); ++i) {
      Entry e;
      e.resource_type = names[i].first;
      e.resource_name = names[i].second;
      ErrorCode code = ErrorCode::none;
      std::string msg;
      if (early[i]) {
        code = early[i]->error;
        msg = early[i]->message;
      } else {
        code = out[next].error;
        msg = std::move(out[next].message);
        ++next;
      }
      e.error_code = kafka::code(code);
      e.error_message = code == ErrorCode::none ? std::nullopt : std::optional(msg);
      resp.responses.push_back(std::move(e));
    }
    r->reply(resp);
  };
  if (changes.empty()) {
    answer(std::move(r), {});
    return;
  }
  via_controller<std::vector<replication::ConfigOutcome>>(
      std::move(r),
      [changes = std::move(changes), validate_only](replication::Controller& c, auto done) mutable {
        c.alter_configs(std::move(changes), validate_only, std::move(done));
      },
      std::move(answer));
}

// Both alter apis: a resource is answered early (a type the controller does not handle, or what
// ops(resource, alteration) refuses) or becomes an alteration with the ops ops() filled in;
// alter() runs them.
template <class Response, class Entry, class Resources, class Ops>
void alter_resources(RequestPtr r, Resources& resources, bool validate_only, Ops ops) {
  if (!r->charge(resources.size() * (sizeof(replication::ConfigAlteration) +
                                     sizeof(replication::ConfigOutcome) + 64),
                 "its resources"))
    return;
  std::vector<std::pair<std::int8_t, std::string>> names;
  std::vector<std::optional<Early>> early;
  std::vector<replication::ConfigAlteration> changes;
  for (auto& res : resources) {
    names.emplace_back(res.resource_type, res.resource_name);
    replication::ConfigAlteration a;
    auto e = unsupported(res.resource_type);
    if (!e)
      e = config_denied(*r, res.resource_type, res.resource_name,
                        replication::AclOperation::alter_configs);
    if (!e) e = ops(res, a);
    early.push_back(e);
    if (e) continue;
    a.resource = resource_of(res.resource_type);
    a.name = std::move(res.resource_name);
    changes.push_back(std::move(a));
  }
  alter<Response, Entry>(std::move(r), std::move(names), std::move(early), std::move(changes),
                         validate_only);
}

}  // namespace

std::int8_t topic_config_source(const BrokerSettings& s,
                                const std::map<std::string, std::string>& overrides,
                                const replication::TopicConfigKey& k) {
  auto syn = topic_synonyms(s, overrides, k);
  return syn.empty() ? kDefault : syn.front().source;
}

// Each resource a request names costs a few bytes and answers with dozens of entries: past
// this many entries in one answer, further resources get INVALID_REQUEST instead (a client
// describing thousands of topics asks in several requests, as kafka-configs does).
constexpr std::size_t kMaxEntriesPerAnswer = 100'000;
// An entry with its strings and synonyms, roughly (charged to the request budget).
constexpr std::size_t kEntryBytes = sizeof(Resp::DescribeConfigsResourceResult) + 160;

void describe_configs(RequestPtr r) {
  kafka::DescribeConfigsRequest req;
  if (!r->decode(req)) return;
  Resp resp;
  resp.results.reserve(req.resources.size());
  std::size_t entries = 0;
  for (const auto& res : req.resources) {
    Resp::DescribeConfigsResult out;
    out.resource_type = res.resource_type;
    out.resource_name = res.resource_name;
    out.error_message = "";  // Kafka sends an empty message, not null, with no error
    // What one resource's answer will hold, within the request budget.
    const std::size_t keys =
        res.configuration_keys && !res.configuration_keys->empty()
            ? res.configuration_keys->size()
            : std::max(Config::keys().size(), replication::topic_config_keys().size());
    if (entries >= kMaxEntriesPerAnswer) {
      out.error_code = kafka::code(ErrorCode::invalid_request);
      out.error_message = std::nullopt;
    } else if (!r->charge(keys * kEntryBytes, "its configs")) {
      return;
    } else if (auto e = config_denied(*r, res.resource_type, res.resource_name,
                                      replication::AclOperation::describe_configs)) {
      out.error_code = kafka::code(e->error);
      out.error_message = std::nullopt;
    } else if (res.resource_type == kTopic) {
      describe_topic(*r, req, res, out);
    } else if (res.resource_type == kBroker) {
      describe_broker(*r, req, res, out);
    } else {
      auto e = unsupported(res.resource_type);
      out.error_code = kafka::code(e->error);
      out.error_message = e->message;
    }
    entries += out.configs.size();
    resp.results.push_back(std::move(out));
  }
  r->reply(resp);
}

void incremental_alter_configs(RequestPtr r) {
  kafka::IncrementalAlterConfigsRequest req;
  if (!r->decode(req)) return;
  alter_resources<kafka::IncrementalAlterConfigsResponse,
                  kafka::IncrementalAlterConfigsResponse::AlterConfigsResourceResponse>(
      std::move(r), req.resources, req.validate_only,
      [](auto& res, replication::ConfigAlteration& a) -> std::optional<Early> {
        std::optional<Early> e;
        for (const auto& c : res.configs) {
          if (c.config_operation < 0 || c.config_operation > 3)
            e = Early{ErrorCode::invalid_request,
                      "Unknown alter config operation " + std::to_string(c.config_operation) + "."};
        }
        if (e) return e;
        for (auto& c : res.configs)
          a.ops.push_back({std::move(c.name),
                           static_cast<replication::ConfigOpType>(c.config_operation),
                           std::move(c.value)});
        return std::nullopt;
      });
}

// The legacy form: the configs given replace every override the resource had.
void alter_configs(RequestPtr r) {
  kafka::AlterConfigsRequest req;
  if (!r->decode(req)) return;
  alter_resources<kafka::AlterConfigsResponse,
                  kafka::AlterConfigsResponse::AlterConfigsResourceResponse>(
      std::move(r), req.resources, req.validate_only,
      [](auto& res, replication::ConfigAlteration& a) -> std::optional<Early> {
        a.replace = true;
        for (auto& c : res.configs)
          a.ops.push_back({std::move(c.name), replication::ConfigOpType::set, std::move(c.value)});
        return std::nullopt;
      });
}

}  // namespace samsa::daemon::handlers
