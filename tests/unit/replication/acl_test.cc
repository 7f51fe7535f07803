#include "replication/acl.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "replication/acl_records.h"

namespace samsa::replication {
namespace {

using Op = AclOperation;
using Perm = AclPermissionType;
using Pat = PatternType;
using Type = ResourceType;

AclBinding acl(Type type, std::string name, Pat pattern, std::string principal, std::string host,
               Op op, Perm perm) {
  return AclBinding{type, std::move(name), pattern, std::move(principal), std::move(host), op,
                    perm};
}
AclBinding topic(std::string name, std::string principal, Op op, Perm perm = Perm::allow,
                 Pat pattern = Pat::literal, std::string host = "*") {
  return acl(Type::topic, std::move(name), pattern, std::move(principal), std::move(host), op,
             perm);
}

// One authorize() question and the answer Kafka gives.
struct Case {
  const char* what;
  const char* principal;
  const char* host;
  Op op;
  Type type;
  const char* name;
  bool allowed;
};

void check(const Authorizer& a, const std::vector<Case>& cases) {
  for (const auto& c : cases)
    EXPECT_EQ(a.authorize(c.principal, c.host, c.op, c.type, c.name), c.allowed)
        << c.what << ": " << c.principal << " from " << c.host << " " << name(c.op) << " "
        << name(c.type) << " '" << c.name << "'";
}

TEST(Acl, EnumsHaveKafkasCodesAndNames) {
  EXPECT_EQ(code(Type::transactional_id), 5);
  EXPECT_EQ(code(Type::user), 7);
  EXPECT_EQ(code(Pat::prefixed), 4);
  EXPECT_EQ(code(Op::describe_tokens), 14);
  EXPECT_EQ(code(Perm::allow), 3);
  EXPECT_EQ(name(Type::delegation_token), "DELEGATION_TOKEN");
  EXPECT_EQ(name(Pat::match), "MATCH");
  EXPECT_EQ(name(Op::cluster_action), "CLUSTER_ACTION");
  EXPECT_EQ(name(Op::delete_), "DELETE");
  EXPECT_EQ(name(Perm::deny), "DENY");
  // fromCode: a code Kafka does not know is UNKNOWN.
  EXPECT_EQ(resource_type_from_code(8), Type::unknown);
  EXPECT_EQ(resource_type_from_code(-1), Type::unknown);
  EXPECT_EQ(resource_type_from_code(3), Type::group);
  EXPECT_EQ(pattern_type_from_code(5), Pat::unknown);
  EXPECT_EQ(acl_operation_from_code(15), Op::unknown);
  EXPECT_EQ(acl_operation_from_code(12), Op::idempotent_write);
  EXPECT_EQ(acl_permission_type_from_code(4), Perm::unknown);
  // fromString, and kafka-acls.sh's PascalCase.
  EXPECT_EQ(parse_resource_type("topic"), Type::topic);
  EXPECT_EQ(parse_resource_type("TransactionalId"), Type::transactional_id);
  EXPECT_EQ(parse_resource_type("TRANSACTIONAL_ID"), Type::transactional_id);
  EXPECT_EQ(parse_resource_type("topics"), Type::unknown);
  EXPECT_EQ(parse_pattern_type("Prefixed"), Pat::prefixed);
  EXPECT_EQ(parse_acl_operation("ClusterAction"), Op::cluster_action);
  EXPECT_EQ(parse_acl_operation("describe_configs"), Op::describe_configs);
  EXPECT_EQ(parse_acl_operation(""), Op::unknown);
  EXPECT_EQ(parse_acl_permission_type("Allow"), Perm::allow);
}

TEST(Acl, DenyWinsAndPrincipalHostAndResourceWildcards) {
  Authorizer a(
      {
          topic("orders", "User:alice", Op::read),
          topic("orders", "User:alice", Op::write, Perm::deny),
          topic("orders", "User:alice", Op::all),
          topic("orders", "User:bob", Op::all, Perm::allow, Pat::literal, "10.0.0.1"),
          topic("payments", "User:*", Op::read),
          topic("payments", "User:mallory", Op::read, Perm::deny),
          topic("payments", "User:carol", Op::write, Perm::deny, Pat::literal, "10.6.6.6"),
          topic("*", "User:dave", Op::describe),
          topic("*", "User:erin", Op::read, Perm::deny),
          topic("audit", "User:erin", Op::read),
          topic("audit", "Group:*", Op::read),
      },
      {});
  check(
      a,
      {
          {"allowed", "User:alice", "1.2.3.4", Op::read, Type::topic, "orders", true},
          {"DENY WRITE beats ALLOW ALL", "User:alice", "1.2.3.4", Op::write, Type::topic, "orders",
           false},
          {"ALL allows the rest", "User:alice", "1.2.3.4", Op::create, Type::topic, "orders", true},
          {"host matches exactly", "User:bob", "10.0.0.1", Op::read, Type::topic, "orders", true},
          {"other host", "User:bob", "10.0.0.2", Op::read, Type::topic, "orders", false},
          {"User:* is everyone", "User:zed", "h", Op::read, Type::topic, "payments", true},
          {"User:* whatever the principal type", "ServiceAccount:svc", "h", Op::read, Type::topic,
           "payments", true},
          {"a DENY for one principal", "User:mallory", "h", Op::read, Type::topic, "payments",
           false},
          {"a DENY from another host", "User:carol", "10.0.0.9", Op::write, Type::topic, "payments",
           false},  // no ALLOW WRITE at all, and ACLs exist
          {"a DENY only from its host", "User:carol", "10.0.0.9", Op::read, Type::topic, "payments",
           true},
          {"LITERAL * is every name", "User:dave", "h", Op::describe, Type::topic, "anything",
           true},
          {"LITERAL * is the name * too", "User:dave", "h", Op::describe, Type::topic, "*", true},
          {"LITERAL * DENY beats a LITERAL ALLOW", "User:erin", "h", Op::read, Type::topic, "audit",
           false},
          {"Group:* is not a wildcard", "Group:ops", "h", Op::read, Type::topic, "audit", false},
          {"the principal Group:* itself", "Group:*", "h", Op::read, Type::topic, "audit", true},
          {"other resource type", "User:alice", "h", Op::read, Type::group, "orders", false},
          {"names are case sensitive", "User:alice", "h", Op::read, Type::topic, "Orders", false},
      });
}

TEST(Acl, PrefixedPatternsLongestAndShortest) {
  Authorizer a(
      {
          topic("logs", "User:dave", Op::read, Perm::allow, Pat::prefixed),
          topic("logs-secret", "User:dave", Op::read, Perm::deny, Pat::prefixed),
          topic("l", "User:erin", Op::write, Perm::allow, Pat::prefixed),
          topic("lo", "User:erin", Op::write, Perm::deny),  // LITERAL: only "lo"
          topic("logs-app-1", "User:frank", Op::read),
          topic("logs-app-1-extra", "User:frank", Op::read, Perm::deny, Pat::prefixed),
          topic("*", "User:gina", Op::read, Perm::allow, Pat::prefixed),  // not a wildcard
          topic("x", "User:hal", Op::read, Perm::deny, Pat::prefixed),
          topic("xyz", "User:hal", Op::read, Perm::allow, Pat::prefixed),
      },
      {});
  check(
      a,
      {
          {"prefix", "User:dave", "h", Op::read, Type::topic, "logs-app", true},
          {"the prefix itself", "User:dave", "h", Op::read, Type::topic, "logs", true},
          {"longer prefixed DENY", "User:dave", "h", Op::read, Type::topic, "logs-secret-1", false},
          {"not a prefix", "User:dave", "h", Op::read, Type::topic, "log", false},
          {"shortest prefix", "User:erin", "h", Op::write, Type::topic, "logs-app", true},
          {"a LITERAL that is a prefix does not apply", "User:erin", "h", Op::write, Type::topic,
           "lo2", true},
          {"the LITERAL itself", "User:erin", "h", Op::write, Type::topic, "lo", false},
          {"LITERAL and a longer prefixed DENY", "User:frank", "h", Op::read, Type::topic,
           "logs-app-1", true},
          {"PREFIXED * is a prefix", "User:gina", "h", Op::read, Type::topic, "*star", true},
          {"PREFIXED * is not a wildcard", "User:gina", "h", Op::read, Type::topic, "topic", false},
          {"shorter prefixed DENY beats a longer ALLOW", "User:hal", "h", Op::read, Type::topic,
           "xyz1", false},
          {"implied DESCRIBE through a prefix", "User:dave", "h", Op::describe, Type::topic,
           "logs-app", true},
      });
}

TEST(Acl, ImpliedOperationsAreAllowOnly) {
  auto cluster = [](std::string principal, Op op, Perm perm = Perm::allow) {
    return acl(Type::cluster, "kafka-cluster", Pat::literal, std::move(principal), "*", op, perm);
  };
  Authorizer a(
      {
          topic("t", "User:r", Op::read),
          topic("t", "User:w", Op::write),
          topic("t", "User:d", Op::delete_),
          topic("t", "User:a", Op::alter),
          topic("t", "User:c", Op::create),
          topic("t", "User:dc", Op::describe_configs),
          topic("t", "User:ac", Op::alter_configs),
          topic("t", "User:desc", Op::describe),
          topic("t", "User:all", Op::all),
          topic("t", "User:denyall", Op::all, Perm::deny),
          topic("t", "User:denyall", Op::describe),
          topic("t", "User:denyread", Op::read, Perm::deny),
          topic("t", "User:denyread", Op::describe),
          topic("t", "User:denyac", Op::alter_configs, Perm::deny),
          topic("t", "User:denyac", Op::describe_configs),
          cluster("User:cac", Op::alter_configs),
          cluster("User:idem", Op::idempotent_write),
      },
      {});
  const char* k = "kafka-cluster";
  check(a, {
               {"READ implies DESCRIBE", "User:r", "h", Op::describe, Type::topic, "t", true},
               {"WRITE implies DESCRIBE", "User:w", "h", Op::describe, Type::topic, "t", true},
               {"DELETE implies DESCRIBE", "User:d", "h", Op::describe, Type::topic, "t", true},
               {"ALTER implies DESCRIBE", "User:a", "h", Op::describe, Type::topic, "t", true},
               {"CREATE does not", "User:c", "h", Op::describe, Type::topic, "t", false},
               {"DESCRIBE_CONFIGS does not", "User:dc", "h", Op::describe, Type::topic, "t", false},
               {"ALTER_CONFIGS does not", "User:ac", "h", Op::describe, Type::topic, "t", false},
               {"ALTER_CONFIGS implies DESCRIBE_CONFIGS", "User:ac", "h", Op::describe_configs,
                Type::topic, "t", true},
               {"ALTER does not imply DESCRIBE_CONFIGS", "User:a", "h", Op::describe_configs,
                Type::topic, "t", false},
               {"DESCRIBE implies nothing", "User:desc", "h", Op::read, Type::topic, "t", false},
               {"READ does not imply WRITE", "User:r", "h", Op::write, Type::topic, "t", false},
               {"ALL", "User:all", "h", Op::describe_configs, Type::topic, "t", true},
               {"DENY ALL denies DESCRIBE", "User:denyall", "h", Op::describe, Type::topic, "t",
                false},
               {"DENY READ does not deny DESCRIBE", "User:denyread", "h", Op::describe, Type::topic,
                "t", true},
               {"DENY READ denies READ", "User:denyread", "h", Op::read, Type::topic, "t", false},
               {"DENY ALTER_CONFIGS does not deny DESCRIBE_CONFIGS", "User:denyac", "h",
                Op::describe_configs, Type::topic, "t", true},
               {"cluster", "User:cac", "h", Op::describe_configs, Type::cluster, k, true},
               {"cluster, other op", "User:cac", "h", Op::alter, Type::cluster, k, false},
               {"IDEMPOTENT_WRITE", "User:idem", "h", Op::idempotent_write, Type::cluster, k, true},
           });
}

TEST(Acl, SuperUsersAreAllowedEverything) {
  Authorizer a(
      {topic("t", "User:root", Op::all, Perm::deny), topic("*", "User:*", Op::all, Perm::deny)},
      {{"User:root", "User:admin"}, false});
  check(a,
        {
            {"despite DENY ALL", "User:root", "h", Op::delete_, Type::topic, "t", true},
            {"no ACL at all", "User:admin", "h", Op::alter, Type::cluster, "kafka-cluster", true},
            {"not a super user", "User:bob", "h", Op::read, Type::topic, "t", false},
            {"the principal type counts", "Group:root", "h", Op::read, Type::topic, "u", false},
        });
  EXPECT_TRUE(a.is_super_user("User:admin"));
  EXPECT_FALSE(a.is_super_user("admin"));
  EXPECT_TRUE(a.authorize_any("User:root", "h", Op::write, Type::topic));
  EXPECT_FALSE(a.authorize_any("User:bob", "h", Op::write, Type::topic));

  auto su = parse_super_users(" User:admin ; ;User:bob;User:admin;");
  ASSERT_TRUE(su.has_value());
  EXPECT_EQ(*su, (std::vector<std::string>{"User:admin", "User:bob"}));
  EXPECT_EQ(parse_super_users("").value(), std::vector<std::string>{});
  auto bad = parse_super_users("User:admin;bob");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error(), "expected a string in format principalType:principalName but got bob");
}

TEST(Acl, AllowEveryoneIfNoAclFoundOnlyWhenNoAclAppliesToTheResource) {
  std::vector<AclBinding> acls = {
      topic("orders", "User:alice", Op::read),
      topic("fo", "User:alice", Op::read, Perm::allow, Pat::prefixed),
      topic("bar", "User:alice", Op::read, Perm::deny, Pat::prefixed),
      acl(Type::group, "shared", Pat::literal, "User:alice", "*", Op::read, Perm::allow),
      topic("hosted", "User:alice", Op::read, Perm::allow, Pat::literal, "10.0.0.1"),
  };
  struct Row {
    const char* what;
    const char* principal;
    const char* host;
    Op op;
    Type type;
    const char* name;
    bool when_off;
    bool when_on;
  };
  std::vector<Row> rows = {
      {"ACLs only for other topics", "User:bob", "h", Op::read, Type::topic, "other", false, true},
      {"an ACL of another type with the name", "User:bob", "h", Op::read, Type::topic, "shared",
       false, true},
      {"an ACL of this topic for another principal", "User:bob", "h", Op::read, Type::topic,
       "orders", false, false},
      {"an ACL of this topic for another operation", "User:alice", "h", Op::write, Type::topic,
       "orders", false, false},
      {"an ACL of this topic for another host", "User:alice", "10.0.0.2", Op::read, Type::topic,
       "hosted", false, false},
      {"a prefixed ACL that applies", "User:bob", "h", Op::read, Type::topic, "foo", false, false},
      {"a prefixed ACL that does not apply", "User:bob", "h", Op::read, Type::topic, "f", false,
       true},
      {"a prefixed DENY of another principal", "User:bob", "h", Op::read, Type::topic, "barn",
       false, false},
      {"the matching ALLOW", "User:alice", "h", Op::read, Type::topic, "orders", true, true},
  };
  for (bool on : {false, true}) {
    Authorizer a(acls, {{}, on});
    for (const auto& r : rows)
      EXPECT_EQ(a.authorize(r.principal, r.host, r.op, r.type, r.name), on ? r.when_on : r.when_off)
          << r.what << " (allow.everyone.if.no.acl.found=" << on << ")";
  }
  // No ACLs at all.
  EXPECT_FALSE(Authorizer().authorize("User:x", "h", Op::read, Type::topic, "t"));
  EXPECT_TRUE(Authorizer({}, {{}, true}).authorize("User:x", "h", Op::read, Type::topic, "t"));
  // A LITERAL "*" ACL applies to every name of its type, so the default never decides there.
  Authorizer wild({topic("*", "User:alice", Op::read)}, {{}, true});
  EXPECT_FALSE(wild.authorize("User:bob", "h", Op::read, Type::topic, "t"));
  EXPECT_TRUE(wild.authorize("User:bob", "h", Op::read, Type::group, "t"));
  // Filter values are never allowed, whatever the default.
  Authorizer open({}, {{}, true});
  EXPECT_FALSE(open.authorize("User:x", "h", Op::any, Type::topic, "t"));
  EXPECT_FALSE(open.authorize("User:x", "h", Op::read, Type::any, "t"));
  EXPECT_FALSE(open.authorize("User:x", "h", Op::unknown, Type::topic, "t"));
}

TEST(Acl, AnUnknownPermissionCodeDeniesAsKafkaReadsIt) {
  // Kafka's findResult: a matching ACL is ALLOWED if ALLOW, else DENIED.
  Authorizer a({topic("t", "User:a", Op::read), topic("t", "User:a", Op::read, Perm::unknown),
                topic("u", "User:a", Op::read), topic("u", "User:a", Op::describe, Perm::unknown)},
               {});
  EXPECT_FALSE(a.authorize("User:a", "h", Op::read, Type::topic, "t"));
  EXPECT_TRUE(a.authorize("User:a", "h", Op::describe, Type::topic, "t"));  // implied, ALLOW only
  EXPECT_FALSE(a.authorize("User:a", "h", Op::describe, Type::topic, "u"));
}

// The rules written the obvious way (a scan of every ACL), against which the index is checked.
bool reference(const std::vector<AclBinding>& acls, const AuthorizerOptions& o,
               const std::string& principal, const std::string& host, Op op, Type type,
               const std::string& name) {
  for (const auto& s : o.super_users)
    if (s == principal) return true;
  bool any = false, allow = false, deny = false;
  for (const auto& a : acls) {
    if (a.resource_type != type) continue;
    bool applies = a.pattern_type == Pat::literal
                       ? a.resource_name == name || a.resource_name == "*"
                       : a.pattern_type == Pat::prefixed && name.starts_with(a.resource_name);
    if (!applies) continue;
    any = true;
    if (a.principal != principal && a.principal != "User:*") continue;
    if (a.host != "*" && a.host != host) continue;
    bool implied =
        a.permission == Perm::allow &&
        ((op == Op::describe && (a.operation == Op::read || a.operation == Op::write ||
                                 a.operation == Op::delete_ || a.operation == Op::alter)) ||
         (op == Op::describe_configs && a.operation == Op::alter_configs));
    if (a.operation != Op::all && a.operation != op && !implied) continue;
    (a.permission == Perm::allow ? allow : deny) = true;
  }
  if (deny) return false;
  if (allow) return true;
  return !any && o.allow_everyone_if_no_acl_found;
}

TEST(Acl, IndexAgreesWithAScanOfEveryAcl) {
  std::mt19937 rng(12345);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  // Names over a tiny alphabet so that prefixes collide often; '!' sorts before the letters
  // and makes patterns that sort between a name and its prefixes.
  auto random_name = [&](int max_len) {
    std::string s;
    int len = pick(max_len + 1);
    for (int i = 0; i < len; ++i)
      s.push_back("ab!c"[pick(4)]);
    return s;
  };
  const std::vector<std::string> principals = {"User:a", "User:b", "User:*", "Group:a"};
  const std::vector<std::string> hosts = {"*", "h1", "h2"};
  const std::vector<Op> ops = {Op::all,          Op::read,     Op::write,  Op::delete_,
                               Op::alter,        Op::describe, Op::create, Op::describe_configs,
                               Op::alter_configs};
  for (int round = 0; round < 40; ++round) {
    std::vector<AclBinding> acls;
    int n = 1 + pick(60);
    for (int i = 0; i < n; ++i) {
      Pat pat = pick(2) ? Pat::literal : Pat::prefixed;
      std::string nm = pat == Pat::literal && pick(10) == 0 ? "*" : random_name(5);
      acls.push_back(acl(pick(5) ? Type::topic : Type::group, nm, pat,
                         principals[static_cast<std::size_t>(pick(4))],
                         hosts[static_cast<std::size_t>(pick(3))],
                         ops[static_cast<std::size_t>(pick(static_cast<int>(ops.size())))],
                         pick(3) ? Perm::allow : Perm::deny));
    }
    AuthorizerOptions opts{
        round % 3 == 0 ? std::vector<std::string>{"User:b"} : std::vector<std::string>{},
        round % 2 == 0};
    Authorizer a(acls, opts);
    for (int q = 0; q < 400; ++q) {
      std::string principal = std::vector<std::string>{
          "User:a", "User:b", "User:c", "Group:a"}[static_cast<std::size_t>(pick(4))];
      std::string host = pick(2) ? "h1" : "h2";
      Op op = ops[static_cast<std::size_t>(1 + pick(static_cast<int>(ops.size()) - 1))];
      Type type = pick(5) ? Type::topic : Type::group;
      std::string nm = pick(20) ? random_name(7) : "*";
      ASSERT_EQ(a.authorize(principal, host, op, type, nm),
                reference(acls, opts, principal, host, op, type, nm))
          << "round " << round << ": " << principal << " " << host << " " << name(op) << " "
          << name(type) << " '" << nm << "'";
    }
  }
}

TEST(Acl, AuthorizeAnyIsKafkasAuthorizeByResourceType) {
  struct Row {
    const char* what;
    std::vector<AclBinding> acls;
    bool allow_everyone;
    Op op;
    bool allowed;
  };
  const char* me = "User:me";
  std::vector<Row> rows = {
      {"no ACLs", {}, false, Op::write, false},
      {"no ACLs, allow everyone (via the name 'hardcode')", {}, true, Op::write, true},
      {"ALLOW of one topic", {topic("t1", me, Op::write)}, false, Op::write, true},
      {"no implied operations here", {topic("t1", me, Op::write)}, false, Op::describe, false},
      {"ALL", {topic("t1", me, Op::all)}, false, Op::idempotent_write, true},
      {"ALLOW and DENY of the same literal",
       {topic("t1", me, Op::write), topic("t1", me, Op::write, Perm::deny)},
       false,
       Op::write,
       false},
      {"a DENY of another literal",
       {topic("t1", me, Op::write), topic("t2", me, Op::write, Perm::deny)},
       false,
       Op::write,
       true},
      {"a literal under a denied prefix",
       {topic("foo-1", me, Op::write), topic("foo", me, Op::write, Perm::deny, Pat::prefixed)},
       false,
       Op::write,
       false},
      {"a prefix under a denied prefix",
       {topic("foo-", me, Op::write, Perm::allow, Pat::prefixed),
        topic("foo", me, Op::write, Perm::deny, Pat::prefixed)},
       false,
       Op::write,
       false},
      {"a prefix over a denied longer prefix",
       {topic("foo", me, Op::write, Perm::allow, Pat::prefixed),
        topic("foo-", me, Op::write, Perm::deny, Pat::prefixed)},
       false,
       Op::write,
       true},
      {"a denied literal does not dominate an allowed prefix",
       {topic("foo", me, Op::write, Perm::allow, Pat::prefixed),
        topic("foo", me, Op::write, Perm::deny)},
       false,
       Op::write,
       true},
      {"another allowed name escapes the denied prefix",
       {topic("foo-1", me, Op::write), topic("foo", me, Op::write, Perm::deny, Pat::prefixed),
        topic("bar", me, Op::write)},
       false,
       Op::write,
       true},
      {"a wildcard DENY beats everything",
       {topic("*", me, Op::write), topic("t1", me, Op::write),
        topic("*", "User:*", Op::write, Perm::deny)},
       false,
       Op::write,
       false},
      {"a wildcard ALLOW beats denied prefixes",
       {topic("*", me, Op::write), topic("a", me, Op::write, Perm::deny, Pat::prefixed)},
       false,
       Op::write,
       true},
      {"another principal's ALLOW", {topic("t1", "User:you", Op::write)}, false, Op::write, false},
      {"User:* ALLOW", {topic("t1", "User:*", Op::write)}, false, Op::write, true},
      {"another host's ALLOW",
       {topic("t1", me, Op::write, Perm::allow, Pat::literal, "10.9.9.9")},
       false,
       Op::write,
       false},
      {"another type's ALLOW",
       {acl(Type::group, "g", Pat::literal, me, "*", Op::write, Perm::allow)},
       false,
       Op::write,
       false},
      {"allow everyone, but ACLs apply to 'hardcode'",
       {topic("hard", "User:you", Op::read, Perm::allow, Pat::prefixed)},
       true,
       Op::write,
       false},
      {"allow everyone, ACLs for other names only",
       {topic("t1", "User:you", Op::read)},
       true,
       Op::write,
       true},
  };
  for (const auto& r : rows) {
    Authorizer a(r.acls, {{}, r.allow_everyone});
    EXPECT_EQ(a.authorize_any(me, "10.0.0.1", r.op, Type::topic), r.allowed) << r.what;
  }
  Authorizer open({}, {{}, true});
  EXPECT_FALSE(open.authorize_any(me, "h", Op::any, Type::topic));
  EXPECT_FALSE(open.authorize_any(me, "h", Op::write, Type::any));
  EXPECT_FALSE(open.authorize_any(me, "h", Op::write, Type::unknown));
}

TEST(Acl, FiltersMatchAsKafkasDescribeAndDeleteAcls) {
  const AclBinding lit = topic("foobar", "User:a", Op::read);
  const AclBinding wild = topic("*", "User:a", Op::read);
  const AclBinding pre_foo = topic("foo", "User:a", Op::read, Perm::allow, Pat::prefixed);
  const AclBinding pre_foobar = topic("foobar", "User:a", Op::read, Perm::allow, Pat::prefixed);
  const AclBinding pre_longer = topic("foobarbaz", "User:a", Op::read, Perm::allow, Pat::prefixed);
  const AclBinding lit_foo = topic("foo", "User:a", Op::read);
  const AclBinding group =
      acl(Type::group, "foobar", Pat::literal, "User:a", "*", Op::read, Perm::allow);
  const AclBinding all_op = topic("foobar", "User:*", Op::all, Perm::deny, Pat::literal, "h1");

  auto f = [](Type t, std::optional<std::string> n, Pat p) {
    AclBindingFilter x;
    x.resource_type = t;
    x.resource_name = std::move(n);
    x.pattern_type = p;
    return x;
  };
  struct Row {
    const char* what;
    AclBindingFilter filter;
    const AclBinding& binding;
    bool matches;
  };
  std::vector<Row> rows = {
      {"ANY matches everything", AclBindingFilter{}, pre_longer, true},
      {"ANY matches everything", AclBindingFilter{}, group, true},
      {"resource type", f(Type::group, std::nullopt, Pat::any), lit, false},
      {"resource type", f(Type::group, std::nullopt, Pat::any), group, true},
      {"LITERAL name", f(Type::topic, "foobar", Pat::literal), lit, true},
      {"LITERAL is not PREFIXED", f(Type::topic, "foobar", Pat::literal), pre_foobar, false},
      {"LITERAL name is exact", f(Type::topic, "foobar", Pat::literal), wild, false},
      {"PREFIXED name is exact", f(Type::topic, "foobar", Pat::prefixed), pre_foobar, true},
      {"PREFIXED name is exact", f(Type::topic, "foobar", Pat::prefixed), pre_foo, false},
      {"ANY pattern: name exact", f(Type::topic, "foobar", Pat::any), pre_foobar, true},
      {"ANY pattern: name exact", f(Type::topic, "foobar", Pat::any), lit, true},
      {"ANY pattern: name exact", f(Type::topic, "foobar", Pat::any), wild, false},
      {"ANY pattern: name exact", f(Type::topic, "foobar", Pat::any), pre_foo, false},
      {"MATCH: the literal", f(Type::topic, "foobar", Pat::match), lit, true},
      {"MATCH: the wildcard", f(Type::topic, "foobar", Pat::match), wild, true},
      {"MATCH: a prefix", f(Type::topic, "foobar", Pat::match), pre_foo, true},
      {"MATCH: the name as prefix", f(Type::topic, "foobar", Pat::match), pre_foobar, true},
      {"MATCH: a longer prefix", f(Type::topic, "foobar", Pat::match), pre_longer, false},
      {"MATCH: a literal prefix", f(Type::topic, "foobar", Pat::match), lit_foo, false},
      {"MATCH: another type", f(Type::topic, "foobar", Pat::match), group, false},
      {"MATCH without a name", f(Type::topic, std::nullopt, Pat::match), pre_longer, true},
      {"MATCH of '*' is the wildcard only", f(Type::topic, "*", Pat::match), wild, true},
      {"MATCH of '*' is the wildcard only", f(Type::topic, "*", Pat::match), lit, false},
  };
  AclBindingFilter by_entry;
  by_entry.principal = "User:*";
  rows.push_back({"principal exact, User:* literally", by_entry, all_op, true});
  rows.push_back({"principal exact, User:* literally", by_entry, lit, false});
  AclBindingFilter by_host;
  by_host.host = "h1";
  rows.push_back({"host exact", by_host, all_op, true});
  rows.push_back({"host exact, '*' literally", by_host, lit, false});
  AclBindingFilter by_op;
  by_op.operation = Op::read;
  rows.push_back({"operation exact", by_op, lit, true});
  rows.push_back({"operation exact, not ALL", by_op, all_op, false});
  AclBindingFilter by_perm;
  by_perm.permission = Perm::deny;
  rows.push_back({"permission", by_perm, all_op, true});
  rows.push_back({"permission", by_perm, lit, false});
  for (const auto& r : rows)
    EXPECT_EQ(matches(r.filter, r.binding), r.matches)
        << r.what << ": " << to_string(r.filter) << " vs " << to_string(r.binding);

  // Every binding's own filter matches it and nothing else here.
  std::vector<AclBinding> all = {lit,        wild,    pre_foo, pre_foobar,
                                 pre_longer, lit_foo, group,   all_op};
  for (std::size_t i = 0; i < all.size(); ++i)
    for (std::size_t j = 0; j < all.size(); ++j)
      EXPECT_EQ(matches(to_filter(all[i]), all[j]), i == j) << i << " " << j;

  // DescribeAcls over a snapshot: in the order given.
  Authorizer a(all, {});
  EXPECT_EQ(a.acls(AclBindingFilter{}), all);
  EXPECT_EQ(a.acls(f(Type::topic, "foobar", Pat::match)),
            (std::vector<AclBinding>{lit, wild, pre_foo, pre_foobar, all_op}));
  EXPECT_EQ(a.acls(f(Type::group, std::nullopt, Pat::any)), std::vector<AclBinding>{group});
  EXPECT_EQ(a.acls(f(Type::user, std::nullopt, Pat::any)), std::vector<AclBinding>{});

  // DeleteAcls refuses UNKNOWN in a filter.
  EXPECT_EQ(validate_filter(AclBindingFilter{}), std::nullopt);
  EXPECT_EQ(validate_filter(f(Type::topic, "x", Pat::match)), std::nullopt);
  EXPECT_EQ(validate_filter(f(Type::unknown, "x", Pat::any)), "Unknown patternFilter.");
  EXPECT_EQ(validate_filter(f(Type::topic, "x", Pat::unknown)), "Unknown patternFilter.");
  AclBindingFilter bad_op;
  bad_op.operation = Op::unknown;
  EXPECT_EQ(validate_filter(bad_op), "Unknown entryFilter.");
  AclBindingFilter bad_perm;
  bad_perm.permission = Perm::unknown;
  EXPECT_EQ(validate_filter(bad_perm), "Unknown entryFilter.");
}

TEST(Acl, CreateValidationIsKafkas) {
  auto ok = topic("t", "User:alice", Op::read);
  struct Row {
    const char* what;
    AclBinding binding;
    std::optional<std::string> error;
  };
  auto with = [&](auto change) {
    AclBinding b = ok;
    change(b);
    return b;
  };
  std::vector<Row> rows = {
      {"ok", ok, std::nullopt},
      {"PREFIXED", with([](AclBinding& b) { b.pattern_type = Pat::prefixed; }), std::nullopt},
      {"LITERAL *", with([](AclBinding& b) { b.resource_name = "*"; }), std::nullopt},
      {"PREFIXED * (Kafka accepts it)", with([](AclBinding& b) {
         b.resource_name = "*";
         b.pattern_type = Pat::prefixed;
       }),
       std::nullopt},
      {"DENY ALL", with([](AclBinding& b) {
         b.permission = Perm::deny;
         b.operation = Op::all;
       }),
       std::nullopt},
      {"any principal type", with([](AclBinding& b) { b.principal = "Group:ops"; }), std::nullopt},
      {"an empty principal name", with([](AclBinding& b) { b.principal = "User:"; }), std::nullopt},
      {"any host text", with([](AclBinding& b) { b.host = "not-an-address"; }), std::nullopt},
      {"the cluster",
       acl(Type::cluster, "kafka-cluster", Pat::literal, "User:a", "*", Op::alter, Perm::allow),
       std::nullopt},
      {"another cluster name", with([](AclBinding& b) {
         b.resource_type = Type::cluster;
         b.resource_name = "my-cluster";
       }),
       "The only valid name for the CLUSTER resource is kafka-cluster"},
      {"empty name", with([](AclBinding& b) { b.resource_name = ""; }),
       "Invalid empty resource name"},
      {"resource type ANY", with([](AclBinding& b) { b.resource_type = Type::any; }),
       "Invalid resourceType ANY"},
      {"resource type UNKNOWN", with([](AclBinding& b) { b.resource_type = Type::unknown; }),
       "Invalid resourceType UNKNOWN"},
      {"pattern MATCH", with([](AclBinding& b) { b.pattern_type = Pat::match; }),
       "Invalid patternType MATCH"},
      {"pattern ANY", with([](AclBinding& b) { b.pattern_type = Pat::any; }),
       "Invalid patternType ANY"},
      {"pattern UNKNOWN", with([](AclBinding& b) { b.pattern_type = Pat::unknown; }),
       "Invalid patternType UNKNOWN"},
      {"operation ANY", with([](AclBinding& b) { b.operation = Op::any; }),
       "Invalid operation ANY"},
      {"operation UNKNOWN", with([](AclBinding& b) { b.operation = Op::unknown; }),
       "Invalid operation UNKNOWN"},
      {"permission ANY", with([](AclBinding& b) { b.permission = Perm::any; }),
       "Invalid permissionType ANY"},
      {"permission UNKNOWN", with([](AclBinding& b) { b.permission = Perm::unknown; }),
       "Invalid permissionType UNKNOWN"},
      {"principal without a colon", with([](AclBinding& b) { b.principal = "alice"; }),
       "Could not parse principal from `alice` (no colon is present separating the principal "
       "type from the principal name)"},
      {"first error wins, in Kafka's order", with([](AclBinding& b) {
         b.resource_name = "";
         b.operation = Op::any;
         b.principal = "x";
       }),
       "Invalid empty resource name"},
  };
  for (const auto& r : rows)
    EXPECT_EQ(validate_for_create(r.binding), r.error) << r.what;
  EXPECT_EQ(kafka::code(kAclValidationError), 42);
}

TEST(Acl, TextIsKafkas) {
  auto b = topic("t", "User:alice", Op::read);
  EXPECT_EQ(pattern_to_string(b),
            "ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)");
  EXPECT_EQ(entry_to_string(b),
            "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)");
  EXPECT_EQ(to_string(b),
            "(pattern=ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL), "
            "entry=(principal=User:alice, host=*, operation=READ, permissionType=ALLOW))");
  auto c = acl(Type::transactional_id, "tx-", Pat::prefixed, "User:*", "10.0.0.1",
               Op::describe_configs, Perm::deny);
  EXPECT_EQ(to_string(c),
            "(pattern=ResourcePattern(resourceType=TRANSACTIONAL_ID, name=tx-, "
            "patternType=PREFIXED), entry=(principal=User:*, host=10.0.0.1, "
            "operation=DESCRIBE_CONFIGS, permissionType=DENY))");
  EXPECT_EQ(to_string(AclBindingFilter{}),
            "(patternFilter=ResourcePattern(resourceType=ANY, name=<any>, patternType=ANY), "
            "entryFilter=(principal=<any>, host=<any>, operation=ANY, permissionType=ANY))");
}

TEST(AclRecords, RoundTripAndBytesAreAsDocumented) {
  Uuid id{};
  for (int i = 0; i < 16; ++i)
    id[i] = static_cast<std::uint8_t>(0xa0 + i);
  AccessControlEntryRecord rec{
      id, acl(Type::topic, "ab", Pat::prefixed, "U:x", "*", Op::write, Perm::deny)};
  auto b = encode_acl_record_fields(rec);
  std::vector<std::byte> want;
  for (auto x : id)
    want.push_back(static_cast<std::byte>(x));
  for (int x :
       std::initializer_list<int>{2, 0, 2, 'a', 'b', 4, 0, 3, 'U', ':', 'x', 0, 1, '*', 4, 2})
    want.push_back(static_cast<std::byte>(x));
  EXPECT_EQ(b, want);
  auto d = decode_access_control_entry_fields(b);
  ASSERT_TRUE(d.has_value()) << d.error();
  EXPECT_EQ(*d, rec);

  RemoveAccessControlEntryRecord rm{id};
  auto rb = encode_acl_record_fields(rm);
  EXPECT_EQ(rb, std::vector<std::byte>(want.begin(), want.begin() + 16));
  auto rd = decode_remove_access_control_entry_fields(rb);
  ASSERT_TRUE(rd.has_value());
  EXPECT_EQ(*rd, rm);
  EXPECT_EQ(kAccessControlEntryRecordType, 18);
  EXPECT_EQ(kRemoveAccessControlEntryRecordType, 19);

  // Through the reader/writer, as metadata_records.cc will use them: framed by other bytes.
  ByteWriter w;
  w.i16(kAccessControlEntryRecordType);
  put_acl_record_fields(w, rec);
  w.i32(7);
  auto framed = w.take();
  ByteReader r(framed, "test");
  EXPECT_EQ(r.i16(), kAccessControlEntryRecordType);
  EXPECT_EQ(get_access_control_entry_fields(r), rec);
  EXPECT_EQ(r.i32(), 7);
  EXPECT_TRUE(r.ok() && r.at_end());
}

TEST(AclRecords, TruncatedOrLongerInputIsRejected) {
  std::vector<AccessControlEntryRecord> recs = {
      {random_uuid(), topic("orders", "User:alice", Op::read)},
      {random_uuid(), acl(Type::cluster, "kafka-cluster", Pat::literal, "User:*", "10.1.1.1",
                          Op::idempotent_write, Perm::allow)},
      {kZeroUuid,
       AclBinding{Type::user, std::string(300, 'u'), Pat::prefixed,
                  "User:" + std::string(1000, 'p'), "", Op::describe_tokens, Perm::deny}},
  };
  for (const auto& rec : recs) {
    auto b = encode_acl_record_fields(rec);
    auto d = decode_access_control_entry_fields(b);
    ASSERT_TRUE(d.has_value()) << d.error();
    EXPECT_EQ(*d, rec);
    for (std::size_t n = 0; n < b.size(); ++n)
      EXPECT_FALSE(decode_access_control_entry_fields(std::span(b).first(n)).has_value())
          << "prefix " << n;
    auto longer = b;
    longer.push_back(std::byte{0});
    auto l = decode_access_control_entry_fields(longer);
    ASSERT_FALSE(l.has_value());
    EXPECT_NE(l.error().find("trailing bytes"), std::string::npos) << l.error();
  }
  auto rb = encode_acl_record_fields(RemoveAccessControlEntryRecord{random_uuid()});
  for (std::size_t n = 0; n < rb.size(); ++n)
    EXPECT_FALSE(decode_remove_access_control_entry_fields(std::span(rb).first(n)).has_value());
  rb.push_back(std::byte{0});
  EXPECT_FALSE(decode_remove_access_control_entry_fields(rb).has_value());

  // A negative string length other than null's -1, and null itself, are malformed.
  auto b =
      encode_acl_record_fields(AccessControlEntryRecord{kZeroUuid, topic("t", "U:x", Op::read)});
  auto nulled = b;
  nulled[17] = std::byte{0xff};
  nulled[18] = std::byte{0xff};
  EXPECT_FALSE(decode_access_control_entry_fields(nulled).has_value());
}

TEST(AclRecords, CodesKafkaDoesNotKnowReadAsUnknown) {
  auto b =
      encode_acl_record_fields(AccessControlEntryRecord{kZeroUuid, topic("t", "U:x", Op::read)});
  b[16] = std::byte{42};            // resource type
  b[b.size() - 2] = std::byte{99};  // operation
  auto d = decode_access_control_entry_fields(b);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->binding.resource_type, Type::unknown);
  EXPECT_EQ(d->binding.operation, Op::unknown);
  EXPECT_EQ(d->binding.permission, Perm::allow);
}

TEST(Acl, ManyAclsEveryAnswerRight) {
  // 100,000 ACLs: LITERAL topics, PREFIXED topics, groups; then 100,000 questions, each
  // answered from the index. (Its cost is not timed here: timings belong in perf/, and the
  // sanitizer build runs this too. A scan per question would be 10^10 steps.)
  constexpr int kAcls = 100'000;
  constexpr int kLookups = 100'000;
  std::vector<AclBinding> acls;
  acls.reserve(kAcls);
  auto user = [](int i) { return "User:u" + std::to_string(i % 1000); };
  for (int i = 0; i < kAcls; ++i) {
    switch (i % 10) {
      case 0:
      case 1:
        acls.push_back(
            topic("app-" + std::to_string(i) + "-", user(i), Op::read, Perm::allow, Pat::prefixed));
        break;
      case 2:
        acls.push_back(acl(Type::group, "g-" + std::to_string(i), Pat::literal, user(i), "*",
                           Op::read, Perm::allow));
        break;
      case 3:
        acls.push_back(topic("topic-" + std::to_string(i), user(i), Op::write, Perm::deny));
        break;
      default:
        acls.push_back(topic("topic-" + std::to_string(i), user(i), Op::read));
    }
  }
  Authorizer a(std::move(acls), {});
  int allowed = 0;
  for (int q = 0; q < kLookups; ++q) {
    int i = (q * 7919) % kAcls;
    std::string nm;
    switch (i % 10) {
      case 0:
      case 1:
        nm = "app-" + std::to_string(i) + "-part-" + std::to_string(q);
        break;
      case 2:
        nm = "g-" + std::to_string(i);
        break;
      default:
        nm = "topic-" + std::to_string(i);
    }
    Type type = i % 10 == 2 ? Type::group : Type::topic;
    bool want = i % 10 != 3;  // READ is allowed everywhere but on the DENY WRITE topics
    bool got = a.authorize(user(i), "10.0.0.1", Op::read, type, nm);
    ASSERT_EQ(got, want) << nm;
    allowed += got;
    // Another principal is never allowed (ACLs exist for every one of these names).
    ASSERT_FALSE(a.authorize(user(i + 1), "10.0.0.1", Op::read, type, nm)) << nm;
  }
  EXPECT_EQ(allowed, kLookups - kLookups / 10);
}

TEST(Acl, PrefixWalkSkipsPatternsSortingBetweenANameAndItsPrefixes) {
  // "abc!" < "abcd" and "ab!" < "abc": each is the greatest pattern <= the name at some step
  // of the walk without being a prefix of it; the real prefixes must still be found.
  std::vector<AclBinding> acls;
  for (const char* p : {"a", "a!", "ab!", "abc!", "abcd!", "b"})
    acls.push_back(topic(p, "User:x", Op::read, Perm::allow, Pat::prefixed));
  acls.push_back(topic("ab", "User:x", Op::read, Perm::deny, Pat::prefixed));
  Authorizer a(acls, {});
  EXPECT_FALSE(a.authorize("User:x", "h", Op::read, Type::topic, "abcd"));  // via "ab"
  EXPECT_TRUE(a.authorize("User:x", "h", Op::read, Type::topic, "a"));
  EXPECT_TRUE(a.authorize("User:x", "h", Op::read, Type::topic, "aa"));
  EXPECT_TRUE(a.authorize("User:x", "h", Op::read, Type::topic, "bz"));
  EXPECT_FALSE(a.authorize("User:x", "h", Op::read, Type::topic, "c"));
  EXPECT_FALSE(a.authorize("User:x", "h", Op::read, Type::topic, ""));
  // A PREFIXED "" (never created through CreateAcls) would be a prefix of everything.
  Authorizer e({topic("", "User:x", Op::read, Perm::allow, Pat::prefixed)}, {});
  EXPECT_TRUE(e.authorize("User:x", "h", Op::read, Type::topic, "anything"));
  EXPECT_TRUE(e.authorize("User:x", "h", Op::read, Type::topic, ""));
}

}  // namespace
}  // namespace samsa::replication
