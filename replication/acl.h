// Kafka ACLs (KIP-11, KIP-290 prefixed patterns) as Kafka's StandardAuthorizer decides them in
// KRaft mode: the model (bindings and the filters DescribeAcls and DeleteAcls carry), the
// validation CreateAcls applies, and the authorizer's decision over an immutable snapshot of
// the ACLs. Pure: no I/O, no clock, no threads; a snapshot is safe to query from any thread.
//
// Enum values are Kafka's wire ids (int8 in the ACL requests and records). Principals are
// Kafka's "Type:name" strings ("User:alice"; "User:*" in an ACL means every principal), hosts
// are the client's address as text ("*" in an ACL means every host).
#pragma once

#include <array>
#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/kafka_errors.h"

namespace samsa::replication {

enum class ResourceType : std::int8_t {
  unknown = 0,
  any = 1,  // filters only
  topic = 2,
  group = 3,
  cluster = 4,
  transactional_id = 5,
  delegation_token = 6,
  user = 7,
};

enum class PatternType : std::int8_t {
  unknown = 0,
  any = 1,    // filters only: any pattern type, name compared exactly
  match = 2,  // filters only: every pattern that would apply to the named resource
  literal = 3,
  prefixed = 4,
};

enum class AclOperation : std::int8_t {
  unknown = 0,
  any = 1,  // filters only
  all = 2,
  read = 3,
  write = 4,
  create = 5,
  delete_ = 6,
  alter = 7,
  describe = 8,
  cluster_action = 9,
  describe_configs = 10,
  alter_configs = 11,
  idempotent_write = 12,
  create_tokens = 13,
  describe_tokens = 14,
};

enum class AclPermissionType : std::int8_t {
  unknown = 0,
  any = 1,  // filters only
  deny = 2,
  allow = 3,
};

// Kafka's fromCode: a code Kafka does not know is UNKNOWN.
ResourceType resource_type_from_code(std::int8_t code);
PatternType pattern_type_from_code(std::int8_t code);
AclOperation acl_operation_from_code(std::int8_t code);
AclPermissionType acl_permission_type_from_code(std::int8_t code);

constexpr std::int8_t code(ResourceType v) {
  return static_cast<std::int8_t>(v);
}
constexpr std::int8_t code(PatternType v) {
  return static_cast<std::int8_t>(v);
}
constexpr std::int8_t code(AclOperation v) {
  return static_cast<std::int8_t>(v);
}
constexpr std::int8_t code(AclPermissionType v) {
  return static_cast<std::int8_t>(v);
}

// Names as Kafka prints them ("TOPIC", "TRANSACTIONAL_ID", "DESCRIBE_CONFIGS", "ALLOW").
std::string_view name(ResourceType v);
std::string_view name(PatternType v);
std::string_view name(AclOperation v);
std::string_view name(AclPermissionType v);

// Kafka's fromString for tools: case-insensitive, and (like kafka-acls.sh) the PascalCase forms
// too ("ClusterAction", "TransactionalId"); anything else is UNKNOWN.
ResourceType parse_resource_type(std::string_view s);
PatternType parse_pattern_type(std::string_view s);
AclOperation parse_acl_operation(std::string_view s);
AclPermissionType parse_acl_permission_type(std::string_view s);

inline constexpr std::string_view kWildcardResource = "*";  // LITERAL "*": every resource
inline constexpr std::string_view kWildcardPrincipal = "User:*";
inline constexpr std::string_view kWildcardHost = "*";
inline constexpr std::string_view kClusterResourceName = "kafka-cluster";

// Kafka's AclBinding: a ResourcePattern (type, name, pattern type) and an AccessControlEntry
// (principal, host, operation, permission).
struct AclBinding {
  ResourceType resource_type = ResourceType::unknown;
  std::string resource_name;
  PatternType pattern_type = PatternType::literal;
  std::string principal;
  std::string host = "*";
  AclOperation operation = AclOperation::unknown;
  AclPermissionType permission = AclPermissionType::unknown;
  bool operator==(const AclBinding&) const = default;
};

// Kafka's AclBindingFilter (DescribeAcls, DeleteAcls): ANY and nullopt match anything.
// pattern_type ANY compares the name exactly whatever the pattern type; MATCH matches every
// ACL that applies to the named resource: LITERAL of that name, LITERAL "*", and PREFIXED
// patterns the name starts with.
struct AclBindingFilter {
  ResourceType resource_type = ResourceType::any;
  std::optional<std::string> resource_name;
  PatternType pattern_type = PatternType::any;
  std::optional<std::string> principal;
  std::optional<std::string> host;
  AclOperation operation = AclOperation::any;
  AclPermissionType permission = AclPermissionType::any;
  bool operator==(const AclBindingFilter&) const = default;
};

bool matches(const AclBindingFilter& filter, const AclBinding& binding);
// The filter that matches exactly this binding (Kafka's AclBinding.toFilter).
AclBindingFilter to_filter(const AclBinding& binding);

// CreateAcls: nullopt if Kafka would create the ACL, else Kafka's message, to be answered with
// kAclValidationError. Kafka's checks, in Kafka's order: a CLUSTER pattern must name
// "kafka-cluster"; the name must not be empty; no UNKNOWN or ANY resource type, only LITERAL and
// PREFIXED patterns, no UNKNOWN or ANY operation, only ALLOW and DENY; the principal must have
// a colon ("Type:name"). (Kafka refuses ANY, MATCH and the UNKNOWN code 0 even earlier, failing
// the whole request while parsing it; one message per ACL is kinder and costs nothing.)
std::optional<std::string> validate_for_create(const AclBinding& binding);
// DeleteAcls (AclControlManager.validateFilter): UNKNOWN resource or pattern type, operation or
// permission in a filter. Answered with kAclValidationError too.
std::optional<std::string> validate_filter(const AclBindingFilter& filter);
inline constexpr kafka::ErrorCode kAclValidationError = kafka::ErrorCode::invalid_request;

// Kafka's toString forms. to_string(binding) is AclBinding.toString:
//   (pattern=ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL),
//    entry=(principal=User:alice, host=*, operation=READ, permissionType=ALLOW))
// (one line); kafka-acls.sh prints the two halves: "Current ACLs for resource `<pattern>`:"
// and then one "\t<entry>" line per ACL.
std::string to_string(const AclBinding& binding);
std::string pattern_to_string(const AclBinding& binding);  // ResourcePattern(...)
std::string entry_to_string(const AclBinding& binding);    // (principal=..., ...)
std::string to_string(const AclBindingFilter& filter);     // "<any>" for null fields

// super.users: principals separated by ';', blanks trimmed and skipped; each needs a colon
// (Kafka's message otherwise: "expected a string in format principalType:principalName but got
// <value>").
std::expected<std::vector<std::string>, std::string> parse_super_users(std::string_view config);

struct AuthorizerOptions {
  std::vector<std::string> super_users;  // "User:admin": allowed everything
  bool allow_everyone_if_no_acl_found = false;
};

// An immutable snapshot of the ACLs and the decision over them. Build a new one when the ACLs
// change. Lookups are indexed: per resource type, LITERAL names in a hash map and PREFIXED names
// in a sorted array searched Kafka's way (O(log n) per candidate prefix, not a scan of all
// ACLs).
class Authorizer {
 public:
  Authorizer() = default;  // no ACLs, default options: everyone denied but super users
  Authorizer(std::vector<AclBinding> bindings, AuthorizerOptions options);

  // Kafka's StandardAuthorizer:
  //  - a super user is allowed everything;
  //  - the ACLs that apply are those of the resource type whose pattern is LITERAL with the
  //    name, LITERAL "*", or PREFIXED with a prefix of the name;
  //  - of those, an ACL matches if its principal is the principal or "User:*", its host is
  //    the host or "*", and its operation is op or ALL, or, for an ALLOW ACL only, implies op
  //    (READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS;
  //    a DENY of READ does not deny DESCRIBE);
  //  - a matching DENY wins; else a matching ALLOW allows; else, if no ACL applies to the
  //    resource at all (for any principal, host or operation), allow_everyone_if_no_acl_found
  //    decides; else denied.
  // A filter value (ANY or UNKNOWN) for op or type is denied.
  bool authorize(std::string_view principal, std::string_view host, AclOperation op,
                 ResourceType type, std::string_view name) const;

  // Kafka's Authorizer.authorizeByResourceType (StandardAuthorizer keeps the interface's
  // default): may the principal do op on at least one resource of the type? Allowed if
  // authorize() allows op on a resource named "hardcode" (so super users, and the default when
  // no ACL applies to that name); else over the ACLs of the type that match the principal
  // ("User:*" too), the host ("*" too) and op exactly or ALL (no implied operations here): a
  // DENY of LITERAL "*" denies; an ALLOW of LITERAL "*" allows; an ALLOW of a LITERAL name
  // allows unless the same LITERAL name or a PREFIXED prefix of it is denied; an ALLOW of a
  // PREFIXED name allows unless a PREFIXED prefix of it is denied. Else denied.
  bool authorize_any(std::string_view principal, std::string_view host, AclOperation op,
                     ResourceType type) const;

  bool is_super_user(std::string_view principal) const;

  // The same decisions with options given per call: a broker's metadata image holds one
  // Authorizer for the ACLs, while super.users and allow.everyone.if.no.acl.found are each
  // broker's own settings.
  bool authorize(const AuthorizerOptions& opts, std::string_view principal, std::string_view host,
                 AclOperation op, ResourceType type, std::string_view name) const;
  bool authorize_any(const AuthorizerOptions& opts, std::string_view principal,
                     std::string_view host, AclOperation op, ResourceType type) const;
  static bool is_super_user(const AuthorizerOptions& opts, std::string_view principal);

  // DescribeAcls (and what DeleteAcls would delete): the bindings the filter matches, in the
  // order given to the constructor.
  std::vector<AclBinding> acls(const AclBindingFilter& filter) const;

  const std::vector<AclBinding>& bindings() const { return bindings_; }
  const AuthorizerOptions& options() const { return options_; }

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Eq {
    using is_transparent = void;
    bool operator()(std::string_view a, std::string_view b) const { return a == b; }
  };
  using Ids = std::vector<std::uint32_t>;  // indexes into bindings_
  struct TypeIndex {
    std::unordered_map<std::string, Ids, Hash, Eq> literal;  // includes "*"
    std::vector<std::pair<std::string, Ids>> prefixed;       // sorted by name
    Ids all;
  };
  // What scanning the ACLs that apply to a resource found.
  struct Found {
    bool any_acl = false;
    bool allow = false;
    bool deny = false;
  };
  static constexpr std::size_t kTypes = 8;

  void scan(const Ids& ids, std::string_view principal, std::string_view host, AclOperation op,
            Found& found) const;

  std::vector<AclBinding> bindings_;
  AuthorizerOptions options_;
  std::array<TypeIndex, kTypes> by_type_;
};

}  // namespace samsa::replication
