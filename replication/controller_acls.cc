// CreateAcls and DeleteAcls, as Kafka's AclControlManager decides them: each ACL (each filter)
// succeeds or fails alone, and the records of one request commit together.
#include <set>

#include "replication/controller_state.h"

namespace samsa::replication {

using kafka::ErrorCode;

// An invalid ACL is refused with Kafka's message; an ACL identical to one that exists, or to
// one earlier in the request, succeeds without a second record (Kafka keeps ACLs as a set).
Proposal<std::vector<AclOutcome>> ControllerState::create_acls(
    const std::vector<AclBinding>& acls) {
  Proposal<std::vector<AclOutcome>> out;
  for (const auto& acl : acls) {
    AclOutcome o;
    if (auto why = validate_for_create(acl)) {
      o.error = kAclValidationError;
      o.message = *why;
      out.answer.push_back(std::move(o));
      continue;
    }
    bool exists = false;
    for (const auto& [id, b] : working().acls())
      if (b == acl) {
        exists = true;
        break;
      }
    if (!exists) {
      Uuid id = random_uuid();
      while (id == kZeroUuid || working().acls().contains(id))
        id = random_uuid();
      emit(out.records, AccessControlEntryRecord{id, acl});
    }
    out.answer.push_back(std::move(o));
  }
  return out;
}

// Every filter lists the ACLs it matched before the request (two filters matching one ACL
// both list it, as Kafka answers); each matched ACL is removed once.
Proposal<std::vector<AclOutcome>> ControllerState::delete_acls(
    const std::vector<AclBindingFilter>& filters) {
  Proposal<std::vector<AclOutcome>> out;
  std::set<Uuid> remove;
  for (const auto& f : filters) {
    AclOutcome o;
    if (auto why = validate_filter(f)) {
      o.error = kAclValidationError;
      o.message = *why;
    } else {
      for (const auto& [id, b] : working().acls())
        if (matches(f, b)) {
          o.matching.push_back(b);
          remove.insert(id);
        }
    }
    out.answer.push_back(std::move(o));
  }
  for (const Uuid& id : remove)
    emit(out.records, RemoveAccessControlEntryRecord{id});
  return out;
}

}  // namespace samsa::replication
