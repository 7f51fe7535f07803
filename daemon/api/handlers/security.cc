// Authentication on SASL listeners (SaslHandshake, SaslAuthenticate) and the SCRAM credentials
// kept in the metadata log (DescribeUserScramCredentials, AlterUserScramCredentials).
#include <algorithm>
#include <chrono>
#include <set>

#include "base/clock.h"
#include "base/log.h"
#include "daemon/api/auth.h"
#include "daemon/api/handlers/handlers.h"
#include "daemon/api/handlers/round_trip.h"
#include "daemon/broker.h"
#include "net/kafka/api.h"
#include "replication/controller.h"

namespace samsa::daemon::handlers {
namespace {

using kafka::ErrorCode;
using net::sasl::Mechanism;
using replication::ScramMechanism;

std::optional<ScramMechanism> scram_id(Mechanism m) {
  if (m == Mechanism::scram_sha_256) return ScramMechanism::sha256;
  if (m == Mechanism::scram_sha_512) return ScramMechanism::sha512;
  return std::nullopt;
}

std::optional<Mechanism> mechanism_of(std::int8_t id) {
  if (id == static_cast<std::int8_t>(ScramMechanism::sha256)) return Mechanism::scram_sha_256;
  if (id == static_cast<std::int8_t>(ScramMechanism::sha512)) return Mechanism::scram_sha_512;
  return std::nullopt;
}

bool cluster_allowed(const Request& r, replication::AclOperation op) {
  return authorized(r, op, replication::ResourceType::cluster, replication::kClusterResourceName);
}

const ListenerSecurity& security_of(const Request& r) {
  return r.rc.settings->security[r.dispatcher.listener()];
}

// The users a mechanism may find: PLAIN's from the listener's JAAS config, SCRAM's from the
// metadata image this reactor holds when the client's message arrives.
net::sasl::Lookup lookup_for(ReactorContext& rc, const ListenerSecurity& sec) {
  net::sasl::Lookup l;
  l.plain_password = [users = sec.plain_users](std::string_view user) -> const std::string* {
    if (!users) return nullptr;
    auto it = users->find(user);
    return it == users->end() ? nullptr : &it->second;
  };
  l.scram = [&rc](std::string_view user, Mechanism m) -> std::optional<net::sasl::ScramCredential> {
    auto id = scram_id(m);
    if (!id || !rc.image) return std::nullopt;
    const auto* c = rc.image->scram_credential(user, *id);
    if (!c) return std::nullopt;
    return net::sasl::ScramCredential{m, c->salt, c->stored_key, c->server_key, c->iterations};
  };
  return l;
}

// Failed logins are logged at most once a second per reactor, with how many went unlogged:
// a password-guessing client must not flood the journal.
void log_failed_login(const Request& r, const std::string& detail) {
  static thread_local LogLimiter limiter;
  const auto quiet = limiter.allow(mono_ns());
  if (!quiet) return;
  const std::string more =
      *quiet ? " (" + std::to_string(*quiet) + " more failures in the last second)" : "";
  LOGF_INFO((log::Fields{.client = r.conn->peer()}), "failed authentication with %s (%s)%s",
            r.conn->peer().c_str(), detail.c_str(), more.c_str());
}

// Kafka's connection.failed.authentication.delay.ms: the failure's answer, and the close that
// follows it, wait 100 ms, so guessing passwords costs the guesser time, not the broker.
struct DelayedFailure : io::Timer {
  RequestPtr request;
  net::Response answer;
};

void answer_failure_later(RequestPtr r, net::Response answer) {
  io::Reactor& reactor = r->conn->reactor();
  auto* d = new DelayedFailure;
  d->request = std::move(r);
  d->answer = std::move(answer);
  d->fn = [](io::Timer* t) {
    std::unique_ptr<DelayedFailure> self(static_cast<DelayedFailure*>(t));
    net::Connection* c = self->request->conn;
    self->request->send(std::move(self->answer));
    c->close(true);
  };
  reactor.arm(d, mono_ns() + 100'000'000);
}

void reply_authenticate_error(RequestPtr r, ErrorCode e, std::string message, bool delay) {
  kafka::SaslAuthenticateResponse resp;
  resp.error_code = kafka::code(e);
  resp.error_message = std::move(message);
  net::Response answer = kafka::encode_response(resp, r->version(), r->correlation_id());
  if (delay) {
    answer_failure_later(std::move(r), std::move(answer));
    return;
  }
  net::Connection* c = r->conn;
  r->send(std::move(answer));
  c->close(true);
}

}  // namespace

void sasl_handshake(RequestPtr r) {
  kafka::SaslHandshakeRequest req;
  if (!r->decode(req)) return;
  const ListenerSecurity& sec = security_of(*r);
  ConnectionAuth* a = auth_of(*r->conn);
  kafka::SaslHandshakeResponse resp;
  for (Mechanism m : sec.mechanisms)
    resp.mechanisms.emplace_back(net::sasl::mechanism_name(m));
  if (!sec.sasl() || !a) {
    resp.error_code = kafka::code(ErrorCode::illegal_sasl_state);
    r->reply(resp);
    return;
  }
  auto m = net::sasl::parse_mechanism(req.mechanism);
  net::Connection* c = r->conn;
  if (!m || !sec.serves(*m)) {
    LOGF_INFO((log::Fields{.client = c->peer()}),
              "closing connection from %s: SASL mechanism %s is not enabled", c->peer().c_str(),
              req.mechanism.c_str());
    resp.error_code = kafka::code(ErrorCode::unsupported_sasl_mechanism);
    r->reply(resp);
    c->close(true);
    return;
  }
  if (a->stage == ConnectionAuth::Stage::done) {
    // KIP-368: re-authentication keeps the mechanism.
    if (a->mechanism != *m) {
      resp.error_code = kafka::code(ErrorCode::unsupported_sasl_mechanism);
      r->reply(resp);
      c->close(true);
      return;
    }
    a->reauthenticating = true;
  }
  a->stage = ConnectionAuth::Stage::authenticate;
  a->mechanism = *m;
  a->authenticator = net::sasl::make_authenticator(*m, lookup_for(r->rc, sec));
  r->reply(resp);
}

void sasl_authenticate(RequestPtr r) {
  kafka::SaslAuthenticateRequest req;
  if (!r->decode(req)) return;
  ConnectionAuth* a = auth_of(*r->conn);
  if (!a || a->stage != ConnectionAuth::Stage::authenticate || !a->authenticator) {
    reply_authenticate_error(std::move(r), ErrorCode::illegal_sasl_state,
                             "Unexpected Kafka request of type SASL_AUTHENTICATE during SASL "
                             "handshake.",
                             false);
    return;
  }
  const ListenerSecurity& sec = security_of(*r);
  auto* bytes = reinterpret_cast<const std::uint8_t*>(req.auth_bytes.data());
  net::sasl::Step step = a->authenticator->step({bytes, req.auth_bytes.size()});
  if (step.status == net::sasl::Step::failed) {
    const Mechanism m = a->authenticator->mechanism();
    log_failed_login(*r, step.detail.empty() ? step.error : step.detail);
    std::string msg =
        step.generic ? net::sasl::generic_failure_message(m, a->reauthenticating) : step.error;
    a->authenticator.reset();
    reply_authenticate_error(std::move(r), ErrorCode::sasl_authentication_failed, std::move(msg),
                             true);
    return;
  }
  kafka::SaslAuthenticateResponse resp;
  resp.auth_bytes.assign(
      reinterpret_cast<const std::byte*>(step.server_message.data()),
      reinterpret_cast<const std::byte*>(step.server_message.data()) + step.server_message.size());
  if (step.status == net::sasl::Step::done) {
    std::string principal = "User:" + step.principal;
    if (a->reauthenticating && principal != a->principal) {
      reply_authenticate_error(std::move(r), ErrorCode::sasl_authentication_failed,
                               "Cannot change principals during re-authentication from " +
                                   a->principal + ": " + principal,
                               true);
      return;
    }
    a->principal = std::move(principal);
    a->principal_known = true;
    a->stage = ConnectionAuth::Stage::done;
    a->reauthenticating = false;
    a->authenticator.reset();
    if (sec.reauth_ms > 0) {
      a->session_end_ns = mono_ns() + sec.reauth_ms * 1'000'000;
      resp.session_lifetime_ms = sec.reauth_ms;
    }
    LOG_DEBUG("connection from %s authenticated as %s", r->conn->peer().c_str(),
              a->principal.c_str());
  }
  r->reply(resp);
}

void describe_user_scram_credentials(RequestPtr r) {
  kafka::DescribeUserScramCredentialsRequest req;
  if (!r->decode(req)) return;
  kafka::DescribeUserScramCredentialsResponse resp;
  if (!cluster_allowed(*r, replication::AclOperation::describe)) {
    resp.error_code = kafka::code(ErrorCode::cluster_authorization_failed);
    r->reply(resp);
    return;
  }
  const auto& creds = r->rc.image->scram_credentials();
  using Result = kafka::DescribeUserScramCredentialsResponse::DescribeUserScramCredentialsResult;
  auto describe = [&](const std::string& user) {
    Result res;
    res.user = user;
    for (auto it = creds.lower_bound({user, ScramMechanism::sha256});
         it != creds.end() && it->first.first == user; ++it)
      res.credential_infos.push_back(
          {static_cast<std::int8_t>(it->second.mechanism), it->second.iterations});
    if (res.credential_infos.empty()) {
      res.error_code = kafka::code(ErrorCode::resource_not_found);
      res.error_message = "Attempt to describe a user credential that does not exist: " + user;
    }
    return res;
  };
  if (!req.users || req.users->empty()) {
    std::set<std::string> users;
    for (const auto& [key, c] : creds)
      users.insert(key.first);
    for (const auto& u : users)
      resp.results.push_back(describe(u));
  } else {
    std::map<std::string, int> named;
    for (const auto& u : *req.users)
      ++named[u.name];
    for (const auto& [u, n] : named) {
      if (n > 1) {
        Result res;
        res.user = u;
        res.error_code = kafka::code(ErrorCode::duplicate_resource);
        res.error_message =
            "Cannot describe SCRAM credentials for the same user twice in a "
            "single request: " +
            u;
        resp.results.push_back(std::move(res));
      } else {
        resp.results.push_back(describe(u));
      }
    }
  }
  r->reply(resp);
}

// The credential is derived here, on the controller node's reactor (a cluster broker forwards
// the request): only what RFC 5802's server stores reaches the metadata log.
void alter_user_scram_credentials(RequestPtr r) {
  kafka::AlterUserScramCredentialsRequest req;
  if (!r->decode(req)) return;
  std::vector<replication::ScramAlteration> changes;
  std::map<std::string, std::pair<ErrorCode, std::string>> early;
  auto refuse = [&](const std::string& user, ErrorCode e, std::string msg) {
    early.emplace(user, std::make_pair(e, std::move(msg)));
  };
  for (const auto& d : req.deletions) {
    if (!mechanism_of(d.mechanism)) {
      refuse(d.name, ErrorCode::unsupported_sasl_mechanism, "Unknown SCRAM mechanism");
      continue;
    }
    replication::ScramAlteration a;
    a.remove = true;
    a.credential.name = d.name;
    a.credential.mechanism = static_cast<ScramMechanism>(d.mechanism);
    changes.push_back(std::move(a));
  }
  for (const auto& u : req.upsertions) {
    auto m = mechanism_of(u.mechanism);
    if (!m) {
      refuse(u.name, ErrorCode::unsupported_sasl_mechanism, "Unknown SCRAM mechanism");
      continue;
    }
    replication::ScramAlteration a;
    a.credential.name = u.name;
    a.credential.mechanism = static_cast<ScramMechanism>(u.mechanism);
    a.credential.iterations = u.iterations;
    if (u.iterations >= net::sasl::kMinScramIterations &&
        u.iterations <= net::sasl::kMaxScramIterations) {
      std::string salt(reinterpret_cast<const char*>(u.salt.data()), u.salt.size());
      std::string salted(reinterpret_cast<const char*>(u.salted_password.data()),
                         u.salted_password.size());
      auto c = net::sasl::scram_credential_from_salted_password(*m, salt, salted, u.iterations);
      if (c.stored_key.empty()) {
        refuse(u.name, ErrorCode::unacceptable_credential,
               "The salt and salted password must be non-empty, and the salted password one "
               "hash long");
        continue;
      }
      a.credential.salt = std::move(c.salt);
      a.credential.stored_key = std::move(c.stored_key);
      a.credential.server_key = std::move(c.server_key);
    }
    changes.push_back(std::move(a));
  }
  if (!cluster_allowed(*r, replication::AclOperation::alter)) {
    // Kafka: every user named is refused.
    for (const auto& c : changes)
      refuse(c.credential.name, ErrorCode::cluster_authorization_failed, "");
  }
  std::erase_if(changes, [&](const auto& c) { return early.contains(c.credential.name); });
  via_controller<std::vector<replication::ScramOutcome>>(
      std::move(r),
      [changes = std::move(changes)](replication::Controller& c, auto done) mutable {
        c.alter_scram_credentials(std::move(changes), std::move(done));
      },
      [early = std::move(early)](RequestPtr r, std::vector<replication::ScramOutcome> out) {
        kafka::AlterUserScramCredentialsResponse resp;
        for (const auto& [user, e] : early)
          resp.results.push_back({user, kafka::code(e.first), e.second});
        for (auto& o : out)
          resp.results.push_back(
              {o.user, kafka::code(o.error),
               o.error == ErrorCode::none ? std::optional<std::string>() : o.message});
        r->reply(resp);
      });
}

}  // namespace samsa::daemon::handlers
