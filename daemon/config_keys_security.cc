// The security settings (listeners' protocols, TLS, SASL), Kafka's names and defaults, in a
// table of their own beside config_keys.cc's. Every ssl.* and sasl.* key here may also be set
// for one listener as listener.name.<listener, lower case>.<key> (and the JAAS config as
// listener.name.<listener>.<mechanism, lower case>.sasl.jaas.config), as in Kafka:
// listener_value() in daemon/listener_security.cc reads them in that order. The keystore and
// truststore settings are dynamic, as in Kafka: a reload (or AlterConfigs) builds the TLS
// context anew, and new connections get the new certificate.
#include <cstdint>
#include <vector>

#include "daemon/config.h"

namespace samsa::daemon {

namespace {

using T = ConfigType;

const std::vector<ConfigKey> kSecurityKeys = {
    {"listener.security.protocol.map",
     T::list,
     "",
     {},
     {},
     {},
     false,
     "LISTENER_NAME:SECURITY_PROTOCOL pairs (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL). A "
     "listener named after a protocol needs no entry; with no map set, a controller "
     "listener not named after one is PLAINTEXT (Kafka's rule)."},
    {"ssl.keystore.type",
     T::string,
     "PEM",
     {},
     {},
     {},
     true,
     "PEM only (Kafka accepts PEM too): convert a JKS or PKCS12 store with keytool and "
     "openssl. Kafka's default is JKS."},
    {"ssl.keystore.location",
     T::string,
     "",
     {},
     {},
     {},
     true,
     "PEM file with this broker's private key and its certificate chain (leaf first)."},
    {"ssl.keystore.key", T::string, "", {}, {}, {}, true, "The private key as inline PEM."},
    {"ssl.keystore.certificate.chain",
     T::string,
     "",
     {},
     {},
     {},
     true,
     "The certificate chain as inline PEM (with ssl.keystore.key)."},
    {"ssl.key.password", T::string, "", {}, {}, {}, true, "Password of an encrypted private key."},
    {"ssl.keystore.password",
     T::string,
     "",
     {},
     {},
     {},
     true,
     "Accepted for Kafka's configs; a PEM keystore has none (ssl.key.password is the key's)."},
    {"ssl.truststore.type", T::string, "PEM", {}, {}, {}, true, "PEM only (as the keystore)."},
    {"ssl.truststore.location",
     T::string,
     "",
     {},
     {},
     {},
     true,
     "PEM file of the CA certificates that client (and broker) certificates must chain to."},
    {"ssl.truststore.certificates",
     T::string,
     "",
     {},
     {},
     {},
     true,
     "The trusted CA certificates as inline PEM."},
    {"ssl.truststore.password", T::string, "", {}, {}, {}, true, "Accepted; PEM has none."},
    {"ssl.client.auth",
     T::enumeration,
     "none",
     {},
     {},
     "none,requested,required",
     false,
     "Mutual TLS: required refuses clients without a certificate the truststore "
     "accepts; requested asks for one. The principal is the certificate's subject, mapped "
     "by ssl.principal.mapping.rules."},
    {"ssl.enabled.protocols",
     T::list,
     "TLSv1.2,TLSv1.3",
     {},
     {},
     {},
     false,
     "TLS versions served; anything below TLSv1.2 is refused at start."},
    {"ssl.protocol",
     T::string,
     "TLSv1.3",
     {},
     {},
     {},
     false,
     "Accepted for Kafka's configs; ssl.enabled.protocols decides."},
    {"ssl.cipher.suites",
     T::list,
     "",
     {},
     {},
     {},
     false,
     "OpenSSL or IANA names of the TLS 1.2 and 1.3 suites served; empty: forward-secret "
     "AEAD suites only."},
    {"ssl.principal.mapping.rules",
     T::string,
     "DEFAULT",
     {},
     {},
     {},
     false,
     "How a client certificate's subject becomes the principal's name: "
     "RULE:pattern/replacement/[LU] entries and DEFAULT, comma-separated (Kafka's syntax)."},
    {"ssl.endpoint.identification.algorithm",
     T::string,
     "https",
     {},
     {},
     {},
     false,
     "https: this broker checks the host name in the certificates of brokers it connects to."},
    {"samsa.ssl.handshake.timeout.ms",
     T::int64,
     "10000",
     100,
     INT64_MAX,
     {},
     false,
     "A TLS connection whose handshake is not done this long after it was accepted is "
     "closed (a slow or silent client holds a TLS session's memory; Kafka bounds it only "
     "with connections.max.idle.ms)."},
    {"samsa.ssl.max.pending.handshakes",
     T::int32,
     "1024",
     1,
     1000000,
     {},
     false,
     "TLS connections each reactor lets be in their handshake at once per listener (each "
     "holds ~30 KiB); more are closed at once, with a log line a second at most."},
    {"sasl.enabled.mechanisms",
     T::list,
     "SCRAM-SHA-256,SCRAM-SHA-512",
     {},
     {},
     {},
     false,
     "SASL mechanisms served: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512. Kafka's default is "
     "GSSAPI, which samsa does not serve."},
    {"sasl.jaas.config",
     T::string,
     "",
     {},
     {},
     {},
     false,
     "JAAS login module options. For PLAIN (listener.name.<l>.plain.sasl.jaas.config): "
     "PlainLoginModule's user_<name>=\"<password>\" entries are the users."},
    {"sasl.mechanism.inter.broker.protocol",
     T::string,
     "PLAIN",
     {},
     {},
     {},
     false,
     "The mechanism this broker logs in with on a SASL inter-broker listener."},
    {"sasl.mechanism.controller.protocol",
     T::string,
     "PLAIN",
     {},
     {},
     {},
     false,
     "The mechanism this node logs in with on a SASL controller listener (Kafka's default is "
     "GSSAPI)."},
    {"sasl.server.max.receive.size",
     T::int32,
     "524288",
     1,
     INT32_MAX,
     {},
     false,
     "Largest SASL token a client may send before it is authenticated; a larger one closes "
     "the connection."},
    {"connections.max.reauth.ms",
     T::int64,
     "0",
     0,
     INT64_MAX,
     {},
     false,
     "KIP-368: a SASL session lasts this long (0: for ever); a client must authenticate "
     "again before it ends, or its next request closes the connection."},
    {"authorizer.class.name",
     T::string,
     "",
     {},
     {},
     {},
     false,
     "Empty: no authorization (Kafka's default). "
     "org.apache.kafka.metadata.authorizer.StandardAuthorizer: every request is checked "
     "against the ACLs in the metadata log (CreateAcls, kafka-acls), with Kafka's semantics."},
    {"super.users",
     T::string,
     "",
     {},
     {},
     {},
     false,
     "Principals allowed everything whatever the ACLs say, separated by ';' "
     "(User:admin;User:broker). A cluster's own principals (inter-broker and controller "
     "listeners) must be here or be granted CLUSTER_ACTION, as in Kafka."},
    {"allow.everyone.if.no.acl.found",
     T::boolean,
     "false",
     {},
     {},
     {},
     false,
     "With an authorizer: a resource no ACL names is open to everyone (true) or to super "
     "users only (false, Kafka's default)."},
};

}  // namespace

const std::vector<ConfigKey>& security_config_keys() {
  return kSecurityKeys;
}

bool Config::sensitive(std::string_view name) {
  return name.ends_with("ssl.key.password") || name.ends_with("ssl.keystore.password") ||
         name.ends_with("ssl.truststore.password") || name.ends_with("ssl.keystore.key") ||
         name.ends_with("sasl.jaas.config");
}

}  // namespace samsa::daemon
