#include "replication/acl.h"

#include <algorithm>
#include <unordered_set>

namespace samsa::replication {
namespace {

constexpr std::array<std::string_view, 8> kResourceTypeNames = {
    "UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"};
constexpr std::array<std::string_view, 5> kPatternTypeNames = {"UNKNOWN", "ANY", "MATCH", "LITERAL",
                                                               "PREFIXED"};
constexpr std::array<std::string_view, 15> kOperationNames = {"UNKNOWN",
                                                              "ANY",
                                                              "ALL",
                                                              "READ",
                                                              "WRITE",
                                                              "CREATE",
                                                              "DELETE",
                                                              "ALTER",
                                                              "DESCRIBE",
                                                              "CLUSTER_ACTION",
                                                              "DESCRIBE_CONFIGS",
                                                              "ALTER_CONFIGS",
                                                              "IDEMPOTENT_WRITE",
                                                              "CREATE_TOKENS",
                                                              "DESCRIBE_TOKENS"};
constexpr std::array<std::string_view, 4> kPermissionNames = {"UNKNOWN", "ANY", "DENY", "ALLOW"};

template <std::size_t N>
std::string_view name_of(const std::array<std::string_view, N>& names, std::int8_t c) {
  if (c < 0 || static_cast<std::size_t>(c) >= N) return names[0];
  return names[static_cast<std::size_t>(c)];
}

template <std::size_t N>
std::int8_t code_from(std::int8_t c) {
  return c < 0 || static_cast<std::size_t>(c) >= N ? 0 : c;
}

// Equal ignoring case and underscores: "CLUSTER_ACTION", "cluster_action", "ClusterAction".
bool loose_equal(std::string_view a, std::string_view b) {
  auto next = [](std::string_view s, std::size_t& i) -> int {
    while (i < s.size() && s[i] == '_')
      ++i;
    if (i == s.size()) return -1;
    char c = s[i++];
    return c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c;
  };
  std::size_t i = 0, j = 0;
  for (;;) {
    int x = next(a, i), y = next(b, j);
    if (x != y) return false;
    if (x < 0) return true;
  }
}

template <std::size_t N>
std::int8_t parse_name(const std::array<std::string_view, N>& names, std::string_view s) {
  for (std::size_t i = 0; i < N; ++i)
    if (loose_equal(names[i], s)) return static_cast<std::int8_t>(i);
  return 0;
}

std::string_view trim(std::string_view s) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && space(s.front()))
    s.remove_prefix(1);
  while (!s.empty() && space(s.back()))
    s.remove_suffix(1);
  return s;
}

bool is_filter_type(ResourceType t) {
  return t == ResourceType::any || t == ResourceType::unknown;
}
bool is_filter_op(AclOperation op) {
  return op == AclOperation::any || op == AclOperation::unknown;
}

std::size_t type_slot(ResourceType t) {
  return static_cast<std::size_t>(static_cast<std::uint8_t>(t));
}

// Does this ACL's entry (principal, host, operation, permission) apply to the request?
// Kafka's StandardAuthorizerData.findResult; the resource name was matched by the caller.
bool entry_matches(const AclBinding& acl, std::string_view principal, std::string_view host,
                   AclOperation op) {
  if (acl.principal != principal && acl.principal != kWildcardPrincipal) return false;
  if (acl.host != kWildcardHost && acl.host != host) return false;
  if (acl.operation == AclOperation::all || acl.operation == op) return true;
  // Implied operations, for ALLOW only: a DENY of READ does not deny DESCRIBE.
  if (acl.permission != AclPermissionType::allow) return false;
  switch (op) {
    case AclOperation::describe:
      return acl.operation == AclOperation::read || acl.operation == AclOperation::write ||
             acl.operation == AclOperation::delete_ || acl.operation == AclOperation::alter;
    case AclOperation::describe_configs:
      return acl.operation == AclOperation::alter_configs;
    default:
      return false;
  }
}

}  // namespace

ResourceType resource_type_from_code(std::int8_t c) {
  return static_cast<ResourceType>(code_from<kResourceTypeNames.size()>(c));
}
PatternType pattern_type_from_code(std::int8_t c) {
  return static_cast<PatternType>(code_from<kPatternTypeNames.size()>(c));
}
AclOperation acl_operation_from_code(std::int8_t c) {
  return static_cast<AclOperation>(code_from<kOperationNames.size()>(c));
}
AclPermissionType acl_permission_type_from_code(std::int8_t c) {
  return static_cast<AclPermissionType>(code_from<kPermissionNames.size()>(c));
}

std::string_view name(ResourceType v) {
  return name_of(kResourceTypeNames, code(v));
}
std::string_view name(PatternType v) {
  return name_of(kPatternTypeNames, code(v));
}
std::string_view name(AclOperation v) {
  return name_of(kOperationNames, code(v));
}
std::string_view name(AclPermissionType v) {
  return name_of(kPermissionNames, code(v));
}

ResourceType parse_resource_type(std::string_view s) {
  return static_cast<ResourceType>(parse_name(kResourceTypeNames, s));
}
PatternType parse_pattern_type(std::string_view s) {
  return static_cast<PatternType>(parse_name(kPatternTypeNames, s));
}
AclOperation parse_acl_operation(std::string_view s) {
  return static_cast<AclOperation>(parse_name(kOperationNames, s));
}
AclPermissionType parse_acl_permission_type(std::string_view s) {
  return static_cast<AclPermissionType>(parse_name(kPermissionNames, s));
}

// Kafka's ResourcePatternFilter.matches and AccessControlEntryFilter.matches.
bool matches(const AclBindingFilter& f, const AclBinding& b) {
  if (f.resource_type != ResourceType::any && f.resource_type != b.resource_type) return false;
  if (f.pattern_type != PatternType::any && f.pattern_type != PatternType::match &&
      f.pattern_type != b.pattern_type)
    return false;
  if (f.resource_name) {
    const std::string& want = *f.resource_name;
    if (f.pattern_type == PatternType::any || f.pattern_type == b.pattern_type) {
      if (want != b.resource_name) return false;
    } else {  // MATCH
      switch (b.pattern_type) {
        case PatternType::literal:
          if (want != b.resource_name && b.resource_name != kWildcardResource) return false;
          break;
        case PatternType::prefixed:
          if (!want.starts_with(b.resource_name)) return false;
          break;
        default:
          return false;  // Kafka throws: no binding has another pattern type
      }
    }
  }
  if (f.principal && *f.principal != b.principal) return false;
  if (f.host && *f.host != b.host) return false;
  if (f.operation != AclOperation::any && f.operation != b.operation) return false;
  return f.permission == AclPermissionType::any || f.permission == b.permission;
}

AclBindingFilter to_filter(const AclBinding& b) {
  return AclBindingFilter{b.resource_type, b.resource_name, b.pattern_type, b.principal,
                          b.host,          b.operation,     b.permission};
}

std::optional<std::string> validate_for_create(const AclBinding& b) {
  // AclApis.handleCreateAcls, then AclControlManager.validateNewAcl.
  if (b.resource_type == ResourceType::cluster && b.resource_name != kClusterResourceName)
    return "The only valid name for the CLUSTER resource is " + std::string(kClusterResourceName);
  if (b.resource_name.empty()) return "Invalid empty resource name";
  if (is_filter_type(b.resource_type))
    return "Invalid resourceType " + std::string(name(b.resource_type));
  if (b.pattern_type != PatternType::literal && b.pattern_type != PatternType::prefixed)
    return "Invalid patternType " + std::string(name(b.pattern_type));
  if (is_filter_op(b.operation)) return "Invalid operation " + std::string(name(b.operation));
  if (b.permission != AclPermissionType::allow && b.permission != AclPermissionType::deny)
    return "Invalid permissionType " + std::string(name(b.permission));
  if (b.principal.find(':') == std::string::npos)
    return "Could not parse principal from `" + b.principal +
           "` (no colon is present separating the principal type from the principal name)";
  return std::nullopt;
}

std::optional<std::string> validate_filter(const AclBindingFilter& f) {
  if (f.resource_type == ResourceType::unknown || f.pattern_type == PatternType::unknown)
    return "Unknown patternFilter.";
  if (f.operation == AclOperation::unknown || f.permission == AclPermissionType::unknown)
    return "Unknown entryFilter.";
  return std::nullopt;
}

std::string pattern_to_string(const AclBinding& b) {
  std::string s = "ResourcePattern(resourceType=";
  s += name(b.resource_type);
  s += ", name=";
  s += b.resource_name;
  s += ", patternType=";
  s += name(b.pattern_type);
  s += ")";
  return s;
}

std::string entry_to_string(const AclBinding& b) {
  std::string s = "(principal=";
  s += b.principal;
  s += ", host=";
  s += b.host;
  s += ", operation=";
  s += name(b.operation);
  s += ", permissionType=";
  s += name(b.permission);
  s += ")";
  return s;
}

std::string to_string(const AclBinding& b) {
  return "(pattern=" + pattern_to_string(b) + ", entry=" + entry_to_string(b) + ")";
}

std::string to_string(const AclBindingFilter& f) {
  auto opt = [](const std::optional<std::string>& v) { return v ? *v : std::string("<any>"); };
  std::string s = "(patternFilter=ResourcePattern(resourceType=";
  s += name(f.resource_type);
  s += ", name=" + opt(f.resource_name);
  s += ", patternType=";
  s += name(f.pattern_type);
  s += "), entryFilter=(principal=" + opt(f.principal);
  s += ", host=" + opt(f.host);
  s += ", operation=";
  s += name(f.operation);
  s += ", permissionType=";
  s += name(f.permission);
  s += "))";
  return s;
}

std::expected<std::vector<std::string>, std::string> parse_super_users(std::string_view config) {
  std::vector<std::string> out;
  while (true) {
    auto semi = config.find(';');
    std::string_view v = trim(config.substr(0, semi));
    if (!v.empty()) {
      if (v.find(':') == std::string_view::npos)
        return std::unexpected("expected a string in format principalType:principalName but got " +
                               std::string(v));
      if (std::find(out.begin(), out.end(), v) == out.end()) out.emplace_back(v);
    }
    if (semi == std::string_view::npos) break;
    config.remove_prefix(semi + 1);
  }
  return out;
}

Authorizer::Authorizer(std::vector<AclBinding> bindings, AuthorizerOptions options)
    : bindings_(std::move(bindings)), options_(std::move(options)) {
  std::array<std::unordered_map<std::string_view, Ids>, kTypes> prefixed;
  for (std::uint32_t i = 0; i < bindings_.size(); ++i) {
    const AclBinding& b = bindings_[i];
    std::size_t t = type_slot(b.resource_type);
    if (t >= kTypes) continue;  // not a type Kafka knows: never asked about
    by_type_[t].all.push_back(i);
    if (b.pattern_type == PatternType::literal) {
      by_type_[t].literal[b.resource_name].push_back(i);
    } else if (b.pattern_type == PatternType::prefixed) {
      prefixed[t][b.resource_name].push_back(i);
    }
  }
  for (std::size_t t = 0; t < kTypes; ++t) {
    auto& out = by_type_[t].prefixed;
    out.reserve(prefixed[t].size());
    for (auto& [n, ids] : prefixed[t])
      out.emplace_back(std::string(n), std::move(ids));
    std::sort(out.begin(), out.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
  }
}

bool Authorizer::is_super_user(std::string_view principal) const {
  return is_super_user(options_, principal);
}

bool Authorizer::is_super_user(const AuthorizerOptions& o, std::string_view principal) {
  return std::find(o.super_users.begin(), o.super_users.end(), principal) != o.super_users.end();
}

void Authorizer::scan(const Ids& ids, std::string_view principal, std::string_view host,
                      AclOperation op, Found& found) const {
  for (std::uint32_t i : ids) {
    const AclBinding& acl = bindings_[i];
    found.any_acl = true;
    if (!entry_matches(acl, principal, host, op)) continue;
    // Kafka: a matching ACL allows if it is an ALLOW, and denies otherwise (a permission
    // code it does not know, read from a record, denies too).
    if (acl.permission == AclPermissionType::allow) {
      found.allow = true;
    } else {
      found.deny = true;
      return;
    }
  }
}

bool Authorizer::authorize(std::string_view principal, std::string_view host, AclOperation op,
                           ResourceType type, std::string_view name) const {
  return authorize(options_, principal, host, op, type, name);
}

bool Authorizer::authorize(const AuthorizerOptions& opts, std::string_view principal,
                           std::string_view host, AclOperation op, ResourceType type,
                           std::string_view name) const {
  if (is_filter_op(op) || is_filter_type(type)) return false;
  if (is_super_user(opts, principal)) return true;
  std::size_t t = type_slot(type);
  if (t >= kTypes) return false;
  const TypeIndex& index = by_type_[t];
  Found found;

  // LITERAL: the name itself, and the wildcard "*".
  if (auto it = index.literal.find(name); it != index.literal.end())
    scan(it->second, principal, host, op, found);
  if (!found.deny && name != kWildcardResource) {
    if (auto it = index.literal.find(kWildcardResource); it != index.literal.end())
      scan(it->second, principal, host, op, found);
  }

  // PREFIXED: every pattern that is a prefix of the name. The greatest pattern <= the name
  // either is a prefix of it, or shares a common prefix c with it such that every pattern
  // that is a prefix of the name is a prefix of name[0, c) (a longer one would sort between
  // that pattern and the name). So the candidates are found by successive binary searches on
  // ever shorter prefixes of the name, as Kafka's authorizer walks its sorted set.
  const auto& pre = index.prefixed;
  std::string_view cur = name;
  while (!found.deny && !pre.empty()) {
    auto it = std::upper_bound(pre.begin(), pre.end(), cur,
                               [](std::string_view n, const auto& e) { return n < e.first; });
    if (it == pre.begin()) break;
    --it;
    std::string_view p = it->first;
    std::size_t c = 0;
    while (c < p.size() && c < cur.size() && p[c] == cur[c])
      ++c;
    if (c == p.size()) {  // p is a prefix of cur, hence of the name
      scan(it->second, principal, host, op, found);
      if (p.empty()) break;
      cur = cur.substr(0, p.size() - 1);
    } else {
      cur = cur.substr(0, c);
    }
  }

  if (found.deny) return false;
  if (found.allow) return true;
  return !found.any_acl && opts.allow_everyone_if_no_acl_found;
}

bool Authorizer::authorize_any(std::string_view principal, std::string_view host, AclOperation op,
                               ResourceType type) const {
  return authorize_any(options_, principal, host, op, type);
}

bool Authorizer::authorize_any(const AuthorizerOptions& opts, std::string_view principal,
                               std::string_view host, AclOperation op, ResourceType type) const {
  if (is_filter_op(op) || is_filter_type(type)) return false;
  // A hard-coded name, so that super users are allowed whatever the DENY ACLs say.
  if (authorize(opts, principal, host, op, type, "hardcode")) return true;
  std::size_t t = type_slot(type);
  if (t >= kTypes) return false;

  std::unordered_set<std::string_view> deny_literal, deny_prefixed;
  std::vector<std::string_view> allow_literal, allow_prefixed;
  bool wildcard_allow = false;
  for (std::uint32_t i : by_type_[t].all) {
    const AclBinding& acl = bindings_[i];
    if (acl.host != host && acl.host != kWildcardHost) continue;
    if (acl.principal != principal && acl.principal != kWildcardPrincipal) continue;
    if (acl.operation != op && acl.operation != AclOperation::all) continue;
    const bool literal = acl.pattern_type == PatternType::literal;
    const bool prefixed = acl.pattern_type == PatternType::prefixed;
    if (acl.permission == AclPermissionType::deny) {
      if (literal && acl.resource_name == kWildcardResource) return false;
      if (literal) deny_literal.insert(acl.resource_name);
      if (prefixed) deny_prefixed.insert(acl.resource_name);
    } else if (acl.permission == AclPermissionType::allow) {
      if (literal && acl.resource_name == kWildcardResource) {
        wildcard_allow = true;
      } else if (literal) {
        allow_literal.push_back(acl.resource_name);
      } else if (prefixed) {
        allow_prefixed.push_back(acl.resource_name);
      }
    }
  }
  if (wildcard_allow) return true;

  // An allowed name is dominated by a denied prefix of it (of length 1 and up).
  auto dominated = [&](std::string_view allowed) {
    if (deny_prefixed.empty()) return false;
    for (std::size_t n = 1; n <= allowed.size(); ++n)
      if (deny_prefixed.contains(allowed.substr(0, n))) return true;
    return false;
  };
  for (std::string_view a : allow_literal)
    if (!deny_literal.contains(a) && !dominated(a)) return true;
  for (std::string_view a : allow_prefixed)
    if (!dominated(a)) return true;
  return false;
}

std::vector<AclBinding> Authorizer::acls(const AclBindingFilter& filter) const {
  std::vector<AclBinding> out;
  auto consider = [&](const AclBinding& b) {
    if (matches(filter, b)) out.push_back(b);
  };
  if (filter.resource_type != ResourceType::any && type_slot(filter.resource_type) < kTypes) {
    for (std::uint32_t i : by_type_[type_slot(filter.resource_type)].all)
      consider(bindings_[i]);
  } else {
    for (const auto& b : bindings_)
      consider(b);
  }
  return out;
}

}  // namespace samsa::replication
