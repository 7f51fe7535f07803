// Client quotas kept in the metadata log (AlterClientQuotas through the controller,
// DescribeClientQuotas from the image this reactor holds). Enforcement: daemon/quotas.h.
#include "daemon/api/auth.h"
#include "daemon/api/handlers/handlers.h"
#include "daemon/api/handlers/round_trip.h"
#include "net/kafka/api.h"
#include "replication/controller.h"

namespace samsa::daemon::handlers {
namespace {

using kafka::ErrorCode;

bool cluster_allowed(const Request& r, replication::AclOperation op) {
  return authorized(r, op, replication::ResourceType::cluster, replication::kClusterResourceName);
}

// Kafka's filter: every component names a type the entity has, with a name that matches
// (0: exactly Match, 1: the default, 2: any name); strict: the entity has no other type.
template <class Component>
bool matches(const replication::QuotaEntity& entity, const std::vector<Component>& components,
             bool strict) {
  for (const auto& c : components) {
    auto it = std::find_if(entity.begin(), entity.end(),
                           [&](const auto& e) { return e.first == c.entity_type; });
    if (it == entity.end()) return false;
    if (c.match_type == 0 && it->second != c.match) return false;
    if (c.match_type == 1 && it->second) return false;
  }
  return !strict || entity.size() == components.size();
}

}  // namespace

void describe_client_quotas(RequestPtr r) {
  kafka::DescribeClientQuotasRequest req;
  if (!r->decode(req)) return;
  kafka::DescribeClientQuotasResponse resp;
  auto refuse = [&](ErrorCode e, std::optional<std::string> msg) {
    resp.error_code = kafka::code(e);
    resp.error_message = std::move(msg);
    resp.entries = std::nullopt;
    r->reply(resp);
  };
  if (!cluster_allowed(*r, replication::AclOperation::describe_configs))
    return refuse(ErrorCode::cluster_authorization_failed, std::nullopt);
  for (std::size_t i = 0; i < req.components.size(); ++i) {
    const auto& c = req.components[i];
    if (c.match_type < 0 || c.match_type > 2)
      return refuse(ErrorCode::invalid_request,
                    "Unexpected match type " + std::to_string(c.match_type));
    if (c.match_type == 0 && !c.match)
      return refuse(ErrorCode::invalid_request, "A match type of EXACT needs a name");
    for (std::size_t k = 0; k < i; ++k)
      if (req.components[k].entity_type == c.entity_type)
        return refuse(ErrorCode::invalid_request,
                      "Duplicate entity type in the filter: " + c.entity_type);
  }
  resp.entries.emplace();
  for (const auto& [entity, values] : r->rc.image->client_quotas()) {
    if (!matches(entity, req.components, req.strict)) continue;
    kafka::DescribeClientQuotasResponse::EntryData e;
    for (const auto& [type, name] : entity)
      e.entity.push_back({type, name});
    for (const auto& [key, value] : values)
      e.values.push_back({key, value});
    resp.entries->push_back(std::move(e));
  }
  r->reply(resp);
}

void alter_client_quotas(RequestPtr r) {
  kafka::AlterClientQuotasRequest req;
  if (!r->decode(req)) return;
  auto entity_of = [](const auto& entry) {
    replication::QuotaEntity e;
    for (const auto& d : entry.entity)
      e.emplace_back(d.entity_type, d.entity_name);
    return e;
  };
  auto answer_entity = [](const replication::QuotaEntity& e) {
    std::vector<kafka::AlterClientQuotasResponse::EntityData> out;
    for (const auto& [type, name] : e)
      out.push_back({type, name});
    return out;
  };
  if (!cluster_allowed(*r, replication::AclOperation::alter_configs)) {
    kafka::AlterClientQuotasResponse resp;
    for (const auto& entry : req.entries)
      resp.entries.push_back({kafka::code(ErrorCode::cluster_authorization_failed), std::nullopt,
                              answer_entity(entity_of(entry))});
    r->reply(resp);
    return;
  }
  std::vector<replication::QuotaAlteration> changes;
  std::vector<replication::QuotaEntity> entities;
  for (const auto& entry : req.entries) {
    replication::QuotaAlteration a;
    a.entity = entity_of(entry);
    for (const auto& op : entry.ops)
      a.ops.push_back({op.key, op.value, op.remove});
    entities.push_back(a.entity);
    changes.push_back(std::move(a));
  }
  const bool validate_only = req.validate_only;
  via_controller<std::vector<replication::QuotaOutcome>>(
      std::move(r),
      [changes = std::move(changes), validate_only](replication::Controller& c, auto done) mutable {
        c.alter_client_quotas(std::move(changes), validate_only, std::move(done));
      },
      [entities = std::move(entities), answer_entity](RequestPtr r,
                                                      std::vector<replication::QuotaOutcome> out) {
        kafka::AlterClientQuotasResponse resp;
        for (std::size_t i = 0; i < out.size() && i < entities.size(); ++i)
          resp.entries.push_back(
              {kafka::code(out[i].error),
               out[i].error == ErrorCode::none ? std::nullopt : std::optional(out[i].message),
               answer_entity(entities[i])});
        r->reply(resp);
      });
}

}  // namespace samsa::daemon::handlers
