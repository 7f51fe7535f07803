// ACLs (CreateAcls, DescribeAcls, DeleteAcls): kept in the metadata log by the controller,
// described from the image this reactor holds. Kafka's answers: SECURITY_DISABLED without an
// authorizer, CLUSTER_AUTHORIZATION_FAILED unless the principal may ALTER (create, delete) or
// DESCRIBE (describe) the cluster.
#include <map>
#include <tuple>

#include "daemon/api/auth.h"
#include "daemon/api/handlers/handlers.h"
#include "daemon/api/handlers/round_trip.h"
#include "net/kafka/api.h"
#include "replication/controller.h"

namespace samsa::daemon::handlers {
namespace {

using kafka::ErrorCode;
using replication::AclBinding;
using replication::AclBindingFilter;
using replication::AclOperation;
using replication::ResourceType;

constexpr const char* kNoAuthorizer = "No Authorizer is configured.";

// A filter as the request carries it: the codes Kafka does not know read as UNKNOWN (and are
// refused by validate_filter).
template <class F>
AclBindingFilter filter_of(const F& f) {
  AclBindingFilter out;
  out.resource_type = replication::resource_type_from_code(f.resource_type_filter);
  out.resource_name = f.resource_name_filter;
  out.pattern_type = replication::pattern_type_from_code(f.pattern_type_filter);
  out.principal = f.principal_filter;
  out.host = f.host_filter;
  out.operation = replication::acl_operation_from_code(f.operation);
  out.permission = replication::acl_permission_type_from_code(f.permission_type);
  return out;
}

std::optional<std::string> null_if_empty(const std::string& s) {
  return s.empty() ? std::nullopt : std::optional<std::string>(s);
}

}  // namespace

void describe_acls(RequestPtr r) {
  kafka::DescribeAclsRequest req;
  if (!r->decode(req)) return;
  kafka::DescribeAclsResponse resp;
  resp.error_message = std::nullopt;
  const AclBindingFilter filter = filter_of(req);
  if (!authorizing(*r)) {
    resp.error_code = kafka::code(ErrorCode::security_disabled);
    resp.error_message = kNoAuthorizer;
  } else if (!authorized(*r, AclOperation::describe, ResourceType::cluster,
                         replication::kClusterResourceName)) {
    resp.error_code = kafka::code(ErrorCode::cluster_authorization_failed);
  } else if (auto why = replication::validate_filter(filter)) {
    resp.error_code = kafka::code(replication::kAclValidationError);
    resp.error_message = *why;
  } else {
    // One entry per resource pattern, its ACLs beneath (Kafka's grouping).
    std::map<std::tuple<std::int8_t, std::string, std::int8_t>, std::vector<const AclBinding*>>
        by_pattern;
    const auto acls = r->rc.image->authorizer().acls(filter);
    for (const auto& b : acls)
      by_pattern[{code(b.resource_type), b.resource_name, code(b.pattern_type)}].push_back(&b);
    for (const auto& [key, list] : by_pattern) {
      kafka::DescribeAclsResponse::DescribeAclsResource res;
      res.resource_type = std::get<0>(key);
      res.resource_name = std::get<1>(key);
      res.pattern_type = std::get<2>(key);
      for (const AclBinding* b : list)
        res.acls.push_back({b->principal, b->host, code(b->operation), code(b->permission)});
      resp.resources.push_back(std::move(res));
    }
  }
  r->reply(resp);
}

void create_acls(RequestPtr r) {
  kafka::CreateAclsRequest req;
  if (!r->decode(req)) return;
  auto refuse_all = [&](ErrorCode e, std::optional<std::string> msg) {
    kafka::CreateAclsResponse resp;
    for (std::size_t i = 0; i < req.creations.size(); ++i)
      resp.results.push_back({kafka::code(e), msg});
    r->reply(resp);
  };
  if (!authorizing(*r)) return refuse_all(ErrorCode::security_disabled, kNoAuthorizer);
  if (!authorized(*r, AclOperation::alter, ResourceType::cluster,
                  replication::kClusterResourceName))
    return refuse_all(ErrorCode::cluster_authorization_failed, std::nullopt);
  std::vector<AclBinding> acls;
  for (const auto& c : req.creations) {
    AclBinding b;
    b.resource_type = replication::resource_type_from_code(c.resource_type);
    b.resource_name = c.resource_name;
    b.pattern_type = replication::pattern_type_from_code(c.resource_pattern_type);
    b.principal = c.principal;
    b.host = c.host;
    b.operation = replication::acl_operation_from_code(c.operation);
    b.permission = replication::acl_permission_type_from_code(c.permission_type);
    acls.push_back(std::move(b));
  }
  via_controller<std::vector<replication::AclOutcome>>(
      std::move(r),
      [acls = std::move(acls)](replication::Controller& c, auto done) mutable {
        c.create_acls(std::move(acls), std::move(done));
      },
      [](RequestPtr r, std::vector<replication::AclOutcome> out) {
        kafka::CreateAclsResponse resp;
        for (const auto& o : out)
          resp.results.push_back({kafka::code(o.error), null_if_empty(o.message)});
        r->reply(resp);
      });
}

void delete_acls(RequestPtr r) {
  kafka::DeleteAclsRequest req;
  if (!r->decode(req)) return;
  auto refuse_all = [&](ErrorCode e, std::optional<std::string> msg) {
    kafka::DeleteAclsResponse resp;
    for (std::size_t i = 0; i < req.filters.size(); ++i) {
      kafka::DeleteAclsResponse::DeleteAclsFilterResult res;
      res.error_code = kafka::code(e);
      res.error_message = msg;
      resp.filter_results.push_back(std::move(res));
    }
    r->reply(resp);
  };
  if (!authorizing(*r)) return refuse_all(ErrorCode::security_disabled, kNoAuthorizer);
  if (!authorized(*r, AclOperation::alter, ResourceType::cluster,
                  replication::kClusterResourceName))
    return refuse_all(ErrorCode::cluster_authorization_failed, std::nullopt);
  std::vector<AclBindingFilter> filters;
  for (const auto& f : req.filters)
    filters.push_back(filter_of(f));
  via_controller<std::vector<replication::AclOutcome>>(
      std::move(r),
      [filters = std::move(filters)](replication::Controller& c, auto done) mutable {
        c.delete_acls(std::move(filters), std::move(done));
      },
      [](RequestPtr r, std::vector<replication::AclOutcome> out) {
        kafka::DeleteAclsResponse resp;
        for (const auto& o : out) {
          kafka::DeleteAclsResponse::DeleteAclsFilterResult res;
          res.error_code = kafka::code(o.error);
          res.error_message = null_if_empty(o.message);
          for (const auto& b : o.matching) {
            kafka::DeleteAclsResponse::DeleteAclsMatchingAcl m;
            m.error_message = std::nullopt;
            m.resource_type = code(b.resource_type);
            m.resource_name = b.resource_name;
            m.pattern_type = code(b.pattern_type);
            m.principal = b.principal;
            m.host = b.host;
            m.operation = code(b.operation);
            m.permission_type = code(b.permission);
            res.matching_acls.push_back(std::move(m));
          }
          resp.filter_results.push_back(std::move(res));
        }
        r->reply(resp);
      });
}

}  // namespace samsa::daemon::handlers
