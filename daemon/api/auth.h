// A connection's authentication: the SASL exchange on SASL listeners (SaslHandshake, then
// SaslAuthenticate until the mechanism is done, again before a KIP-368 session ends) and the
// principal its requests act as. The dispatcher asks auth_gate() before it routes a frame: on a
// SASL listener nothing but ApiVersions and the exchange is served before it succeeds.
#pragma once

#include <cstdint>
#include <deque>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "daemon/listener_security.h"
#include "daemon/quotas.h"
#include "io/reactor.h"
#include "net/sasl/sasl.h"
#include "net/transport.h"
#include "replication/acl.h"

namespace samsa::daemon {

// A connection's own state, on every listener: its authentication, and its client quotas
// (daemon/quotas.h) with the requests that wait while it is muted.
struct ConnectionAuth {
  enum class Stage : std::uint8_t { handshake, authenticate, done };
  Stage stage = Stage::handshake;
  std::optional<net::sasl::Mechanism> mechanism;
  std::unique_ptr<net::sasl::Authenticator> authenticator;
  // "User:<name>"; on an SSL listener from the client certificate ("User:ANONYMOUS" without
  // one); "" on a SASL listener until the exchange succeeds.
  std::string principal;
  std::int64_t session_end_ns = 0;  // connections.max.reauth.ms: 0 for ever
  bool reauthenticating = false;    // a KIP-368 exchange on an authenticated connection
  bool principal_known = false;
  ClientQuotaCache quota;
  // Frames that arrived while the connection was muted (throttled), in order, and the timer
  // that lets them through when the mute ends.
  struct Muted : io::Timer {
    net::Connection* conn = nullptr;
    void* dispatcher = nullptr;
  } unmute;
  std::deque<std::pair<std::uint64_t, net::Buffer>> parked;
  bool releasing = false;  // the parked frames are being handled
};

// The connection's state (made by the dispatcher's on_open on secured listeners), or null.
inline ConnectionAuth* auth_of(net::Connection& c) {
  return static_cast<ConnectionAuth*>(c.user);
}

// The principal requests on this connection act as ("User:ANONYMOUS" on PLAINTEXT listeners).
const std::string& principal_of(net::Connection& c);

// At most one log line a second per reactor for a kind of event a client can repeat at will
// (failed logins, denials): allow() says whether to log now, and how many went unlogged since
// the last line.
struct LogLimiter {
  std::int64_t last_ns = 0;
  std::uint64_t quiet = 0;
  std::optional<std::uint64_t> allow(std::int64_t now_ns) {
    if (now_ns - last_ns < 1'000'000'000) {
      ++quiet;
      return std::nullopt;
    }
    last_ns = now_ns;
    return std::exchange(quiet, 0);
  }
};

// The client's address as ACLs name hosts: the peer without its port (IPv6 without brackets,
// in inet_ntop's short form, where Kafka writes the long one).
std::string_view host_of(const net::Connection& c);

struct Request;

// Whether the request's principal may do op on the named resource (Kafka's authorizer, over
// the ACLs of the image this reactor holds, with this broker's super.users and
// allow.everyone.if.no.acl.found). Always, when authorizer.class.name is not set. A denial
// is logged, at most once a second per reactor, as Kafka's authorizer logger does.
// quiet: a denial is not logged (Kafka's logIfDenied=false: filtering what a listing shows,
// the authorized operations Metadata reports).
bool authorized(const Request& r, replication::AclOperation op, replication::ResourceType type,
                std::string_view name, bool quiet = false);
// Whether it may do op on at least one resource of the type (authorizeByResourceType).
bool authorized_any(const Request& r, replication::AclOperation op, replication::ResourceType type);
// Whether authorization is on at all (authorizer.class.name set).
bool authorizing(const Request& r);
// KIP-430's authorized operations: the bit (1 << code) of each of ops the principal may do on
// the resource.
std::int32_t authorized_operations(const Request& r, replication::ResourceType type,
                                   std::string_view name,
                                   std::initializer_list<replication::AclOperation> ops);
// The operations KIP-430 reports for a topic, a group, the cluster.
inline constexpr std::initializer_list<replication::AclOperation> kTopicAclOperations = {
    replication::AclOperation::read,
    replication::AclOperation::write,
    replication::AclOperation::create,
    replication::AclOperation::delete_,
    replication::AclOperation::alter,
    replication::AclOperation::describe,
    replication::AclOperation::describe_configs,
    replication::AclOperation::alter_configs};
inline constexpr std::initializer_list<replication::AclOperation> kGroupAclOperations = {
    replication::AclOperation::read, replication::AclOperation::describe,
    replication::AclOperation::delete_, replication::AclOperation::describe_configs,
    replication::AclOperation::alter_configs};
inline constexpr std::initializer_list<replication::AclOperation> kClusterAclOperations = {
    replication::AclOperation::create,           replication::AclOperation::alter,
    replication::AclOperation::describe,         replication::AclOperation::cluster_action,
    replication::AclOperation::describe_configs, replication::AclOperation::alter_configs,
    replication::AclOperation::idempotent_write};

// Whether a frame of api `key` and `frame_bytes` may be served now. Returns null if so, else
// why not (the dispatcher logs it and closes the connection, as Kafka does).
const char* auth_gate(const ListenerSecurity& sec, net::Connection& c, std::int16_t key,
                      std::size_t frame_bytes, std::int64_t now_ns);

}  // namespace samsa::daemon
