// AlterClientQuotas, as Kafka's ClientQuotaControlManager decides it: an entity is user and/or
// client-id (a null name: that type's default), or ip alone; each key belongs to its entity
// kind and takes a value of its type; an entry's operations apply together or not at all.
#include <algorithm>
#include <cmath>

#include "replication/controller_state.h"

namespace samsa::replication {

using kafka::ErrorCode;

namespace {

enum class ValueKind { whole, fraction };

// The keys Kafka's QuotaConfig defines, for user/client-id entities and for ip entities.
std::optional<ValueKind> client_key(std::string_view key) {
  if (key == "producer_byte_rate" || key == "consumer_byte_rate") return ValueKind::whole;
  if (key == "request_percentage" || key == "controller_mutation_rate") return ValueKind::fraction;
  return std::nullopt;
}

std::optional<std::string> check_entity(QuotaEntity& entity) {
  if (entity.empty()) return "Invalid empty client quota entity";
  std::sort(entity.begin(), entity.end());
  bool user = false, client = false, ip = false;
  for (std::size_t i = 0; i < entity.size(); ++i) {
    const auto& [type, name] = entity[i];
    if (i > 0 && entity[i - 1].first == type) return "Invalid duplicate entity type " + type;
    if (type == "user") {
      user = true;
    } else if (type == "client-id") {
      client = true;
    } else if (type == "ip") {
      ip = true;
    } else {
      return "Unhandled client quota entity type: " + type;
    }
    if (name && name->empty()) return "Invalid empty " + type + " name";
  }
  if (ip && (user || client)) return "Invalid quota entity combination: ip with user or client-id";
  return std::nullopt;
}

std::optional<std::string> check_op(bool ip_entity, const QuotaAlteration::Op& op) {
  if (ip_entity) {
    if (op.key != "connection_creation_rate") return "Invalid configuration key " + op.key;
    if (!op.remove && (op.value < 0 || op.value != std::floor(op.value)))
      return "Configuration connection_creation_rate must be a whole number of at least 0";
    return std::nullopt;
  }
  auto kind = client_key(op.key);
  if (!kind) return "Invalid configuration key " + op.key;
  if (op.remove) return std::nullopt;
  if (!std::isfinite(op.value) || op.value <= 0)
    return "Configuration " + op.key + " must be a positive number";
  if (*kind == ValueKind::whole && (op.value != std::floor(op.value) || op.value > 9.2e18))
    return "Configuration " + op.key + " must be a Long value";
  return std::nullopt;
}

}  // namespace

Proposal<std::vector<QuotaOutcome>> ControllerState::alter_client_quotas(
    std::vector<QuotaAlteration> changes, bool validate_only) {
  Proposal<std::vector<QuotaOutcome>> out;
  for (auto& c : changes) {
    QuotaOutcome o;
    auto why = check_entity(c.entity);
    const bool ip = !why && c.entity.front().first == "ip";
    for (const auto& op : c.ops) {
      if (why) break;
      why = check_op(ip, op);
    }
    if (why) {
      o.error = ErrorCode::invalid_request;
      o.message = *why;
    } else if (!validate_only) {
      for (const auto& op : c.ops)
        emit(out.records, ClientQuotaRecord{c.entity, op.key, op.remove ? 0 : op.value, op.remove});
    }
    out.answer.push_back(std::move(o));
  }
  return out;
}

}  // namespace samsa::replication
