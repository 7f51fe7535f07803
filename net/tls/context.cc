// net::tls::Context: Kafka's ssl.* settings (PEM stores) turned into one immutable SSL_CTX.
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include "net/tls/internal.h"
#include "net/tls/tls.h"

namespace samsa::net::tls {

using internal::Owned;
using internal::take_openssl_error;

namespace {

// TLS 1.2 when ssl.cipher.suites is empty: forward secrecy and AEAD only.
constexpr const char* kDefaultTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

constexpr const char* kTls13Suites[] = {
    "TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",   "TLS_CHACHA20_POLY1305_SHA256",
    "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256",
};

// A PEM text and where it came from, for error messages.
struct PemSource {
  std::string text;
  std::string origin;
};

bool read_file(const std::string& path, const char* setting, std::string* out, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = std::string(setting) + ": cannot read " + path + " (" + std::strerror(errno) + ")";
    return false;
  }
  std::ostringstream text;
  text << in.rdbuf();
  *out = text.str();
  return true;
}

// One of two ways to give a store: a file, or the PEM inline. Neither: an empty origin.
bool pick_source(const std::string& location, const char* location_setting,
                 const std::string& inline_pem, const char* inline_setting, PemSource* out,
                 std::string* error) {
  if (!location.empty() && !inline_pem.empty()) {
    *error = std::string("set either ") + location_setting + " or " + inline_setting + ", not both";
    return false;
  }
  if (!location.empty()) {
    out->origin = std::string(location_setting) + " (" + location + ")";
    return read_file(location, location_setting, &out->text, error);
  }
  if (!inline_pem.empty()) {
    out->origin = inline_setting;
    out->text = inline_pem;
  }
  return true;
}

// Every certificate in a PEM text, in order.
bool read_certificates(const PemSource& pem, std::vector<Owned<X509>>* out, std::string* error) {
  Owned<BIO> bio(BIO_new_mem_buf(pem.text.data(), static_cast<int>(pem.text.size())));
  if (!bio) {
    *error = pem.origin + ": out of memory";
    return false;
  }
  ERR_clear_error();
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    out->emplace_back(cert);
  }
  // The loop ends at the end of the text ("no start line"); anything else is a broken block.
  unsigned long e = ERR_peek_last_error();
  if (e != 0 && !(ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE)) {
    *error = pem.origin + ": bad PEM certificate (" + take_openssl_error("unreadable") + ")";
    return false;
  }
  ERR_clear_error();
  if (out->empty()) {
    *error = pem.origin + ": no PEM certificate found";
    return false;
  }
  return true;
}

struct PasswordSource {
  const std::string* password;
  bool asked = false;
};

// OpenSSL asks for the key's password through this (never from the terminal).
int password_callback(char* buf, int size, int /*rwflag*/, void* user) {
  auto* source = static_cast<PasswordSource*>(user);
  source->asked = true;
  if (source->password->empty() || size <= 0) return -1;
  int n = static_cast<int>(std::min<std::size_t>(source->password->size(), size));
  std::memcpy(buf, source->password->data(), n);
  return n;
}

Owned<EVP_PKEY> read_private_key(const std::string& text, const std::string& origin,
                                 const std::string& password, std::string* error) {
  Owned<BIO> bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
  PasswordSource source{&password};
  ERR_clear_error();
  Owned<EVP_PKEY> key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, password_callback, &source)
                          : nullptr);
  if (key) {
    ERR_clear_error();
    return key;
  }
  std::string reason = take_openssl_error("unreadable");
  if (source.asked && password.empty()) {
    *error = origin + ": the private key is encrypted and ssl.key.password is not set";
  } else if (source.asked) {
    *error = "ssl.key.password does not decrypt the private key in " + origin + " (" + reason + ")";
  } else if (reason == "unsupported" || reason == "no start line") {
    *error = origin + ": no PEM private key found";  // OpenSSL's words for "nothing there"
  } else {
    *error = origin + ": bad PEM private key (" + reason + ")";
  }
  return nullptr;
}

bool load_keystore(SSL_CTX* ctx, const Options& o, Role role, std::string* subject,
                   std::string* error) {
  PemSource key_pem;
  if (!pick_source(o.keystore_location, "ssl.keystore.location", o.keystore_key, "ssl.keystore.key",
                   &key_pem, error)) {
    return false;
  }
  if (key_pem.origin.empty()) {
    if (!o.keystore_certificate_chain.empty()) {
      *error = "ssl.keystore.certificate.chain needs ssl.keystore.key";
      return false;
    }
    if (role == Role::server) {
      *error = "a TLS listener needs ssl.keystore.location or ssl.keystore.key";
      return false;
    }
    return true;  // a client without a certificate of its own
  }
  PemSource chain_pem = key_pem;  // the keystore file holds both
  if (o.keystore_location.empty()) {
    if (o.keystore_certificate_chain.empty()) {
      *error = "ssl.keystore.key needs ssl.keystore.certificate.chain";
      return false;
    }
    chain_pem = {o.keystore_certificate_chain, "ssl.keystore.certificate.chain"};
  } else if (!o.keystore_certificate_chain.empty()) {
    *error = "set either ssl.keystore.location or ssl.keystore.certificate.chain, not both";
    return false;
  }
  Owned<EVP_PKEY> key = read_private_key(key_pem.text, key_pem.origin, o.key_password, error);
  if (!key) return false;
  std::vector<Owned<X509>> chain;
  if (!read_certificates(chain_pem, &chain, error)) return false;
  ERR_clear_error();
  if (SSL_CTX_use_certificate(ctx, chain[0].get()) != 1) {
    *error = chain_pem.origin + ": certificate refused (" + take_openssl_error("unknown") + ")";
    return false;
  }
  for (std::size_t i = 1; i < chain.size(); ++i) {
    if (SSL_CTX_add1_chain_cert(ctx, chain[i].get()) != 1) {
      *error =
          chain_pem.origin + ": chain certificate refused (" + take_openssl_error("unknown") + ")";
      return false;
    }
  }
  if (SSL_CTX_use_PrivateKey(ctx, key.get()) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
    *error = key_pem.origin + ": the private key does not match the certificate (" +
             take_openssl_error("mismatch") + ")";
    return false;
  }
  *subject = internal::subject_rfc2253(X509_get_subject_name(chain[0].get()));
  const ASN1_TIME* not_after = X509_get0_notAfter(chain[0].get());
  struct tm tm {};
  if (ASN1_TIME_to_tm(not_after, &tm) == 1) {
    char when[32];
    std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
    *subject += std::string(", expires ") + when;
    if (X509_cmp_current_time(not_after) < 0) *subject += " (EXPIRED)";
  }
  return true;
}

bool load_truststore(SSL_CTX* ctx, const Options& o, Role role, std::string* error) {
  PemSource trust;
  if (!pick_source(o.truststore_location, "ssl.truststore.location", o.truststore_certificates,
                   "ssl.truststore.certificates", &trust, error)) {
    return false;
  }
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  if (trust.origin.empty()) {
    if (role == Role::server && o.client_auth != ClientAuth::none) {
      *error = "ssl.client.auth needs ssl.truststore.location or ssl.truststore.certificates";
      return false;
    }
    // A client without a truststore trusts the system's CAs, as Java trusts its cacerts.
    if (role == Role::client) SSL_CTX_set_default_verify_paths(ctx);
    ERR_clear_error();
    return true;
  }
  std::vector<Owned<X509>> certs;
  if (!read_certificates(trust, &certs, error)) return false;
  for (const auto& cert : certs) {
    ERR_clear_error();
    X509_STORE_add_cert(store, cert.get());  // a duplicate is harmless
    if (role == Role::server && o.client_auth != ClientAuth::none) {
      SSL_CTX_add_client_CA(ctx, cert.get());  // the CA names sent with CertificateRequest
    }
  }
  ERR_clear_error();
  // Java's PKIX trusts any certificate in the truststore as an anchor (an intermediate or a
  // peer's own certificate); so does this.
  X509_STORE_set_flags(store, X509_V_FLAG_PARTIAL_CHAIN);
  return true;
}

bool protocol_version(const std::string& name, int* version, std::string* error) {
  if (name == "TLSv1.2") {
    *version = TLS1_2_VERSION;
  } else if (name == "TLSv1.3") {
    *version = TLS1_3_VERSION;
  } else if (name == "TLSv1.1" || name == "TLSv1" || name == "SSLv3" || name == "SSLv2" ||
             name == "SSLv2Hello" || name == "SSL" || name == "TLSv1.0") {
    *error = "ssl.enabled.protocols: " + name + " is refused (TLSv1.2 or later only)";
    return false;
  } else {
    *error = "ssl.enabled.protocols: unknown protocol '" + name + "' (use TLSv1.2, TLSv1.3)";
    return false;
  }
  return true;
}

bool is_tls13_suite(const std::string& name) {
  for (const char* s : kTls13Suites) {
    if (name == s) return true;
  }
  return false;
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names)
    out += (out.empty() ? "" : ":") + n;
  return out;
}

// ssl.cipher.suites: TLS 1.3 suites and TLS 1.2 ciphers, each by IANA or OpenSSL name. Narrows
// [*min, *max] when only one protocol's suites are listed.
bool set_ciphers(SSL_CTX* ctx, const std::vector<std::string>& suites, int* min, int* max,
                 std::string* error) {
  if (suites.empty()) {
    if (SSL_CTX_set_cipher_list(ctx, kDefaultTls12Ciphers) != 1) {
      *error = "default TLS 1.2 ciphers refused (" + take_openssl_error("unknown") + ")";
      return false;
    }
    return true;
  }
  std::vector<std::string> tls13, tls12;
  for (const auto& raw : suites) {
    std::string name = raw;
    if (is_tls13_suite(name)) {
      tls13.push_back(name);
      continue;
    }
    if (name.rfind("SSL_", 0) == 0) name = "TLS_" + name.substr(4);  // Java's old aliases
    if (name.rfind("TLS_", 0) == 0) {
      const char* openssl_name = OPENSSL_cipher_name(name.c_str());
      if (openssl_name == nullptr || std::strcmp(openssl_name, "(NONE)") == 0) {
        *error = "ssl.cipher.suites: unknown cipher suite '" + raw + "'";
        return false;
      }
      name = openssl_name;
    }
    tls12.push_back(name);
  }
  ERR_clear_error();
  if (!tls13.empty() && SSL_CTX_set_ciphersuites(ctx, join(tls13).c_str()) != 1) {
    *error = "ssl.cipher.suites: TLS 1.3 suites refused (" + take_openssl_error("unknown") + ")";
    return false;
  }
  if (!tls12.empty()) {
    if (SSL_CTX_set_cipher_list(ctx, join(tls12).c_str()) != 1) {
      *error = "ssl.cipher.suites: no usable TLS 1.2 cipher in '" + join(tls12) + "'";
      ERR_clear_error();
      return false;
    }
    // OpenSSL skips names it does not know, or that its security level refuses: say which.
    STACK_OF(SSL_CIPHER)* have = SSL_CTX_get_ciphers(ctx);
    for (const auto& want : tls12) {
      bool found = false;
      for (int i = 0; i < sk_SSL_CIPHER_num(have) && !found; ++i) {
        found = want == SSL_CIPHER_get_name(sk_SSL_CIPHER_value(have, i));
      }
      if (!found) {
        *error = "ssl.cipher.suites: unknown or refused cipher suite '" + want + "'";
        return false;
      }
    }
  }
  if (tls12.empty()) *min = std::max(*min, TLS1_3_VERSION);
  if (tls13.empty()) *max = std::min(*max, TLS1_2_VERSION);
  if (*min > *max) {
    *error = "ssl.cipher.suites: no suite for the protocols in ssl.enabled.protocols";
    return false;
  }
  return true;
}

bool set_protocols(SSL_CTX* ctx, const Options& o, std::string* error) {
  if (o.enabled_protocols.empty()) {
    *error = "ssl.enabled.protocols is empty";
    return false;
  }
  int min = TLS1_3_VERSION, max = TLS1_2_VERSION;
  for (const auto& name : o.enabled_protocols) {
    int v = 0;
    if (!protocol_version(name, &v, error)) return false;
    min = std::min(min, v);
    max = std::max(max, v);
  }
  if (!set_ciphers(ctx, o.cipher_suites, &min, &max, error)) return false;
  if (SSL_CTX_set_min_proto_version(ctx, min) != 1 ||
      SSL_CTX_set_max_proto_version(ctx, max) != 1) {
    *error = "ssl.enabled.protocols refused (" + take_openssl_error("unknown") + ")";
    return false;
  }
  return true;
}

bool set_verification(SSL_CTX* ctx, const Options& o, Role role, bool* verify_hostname,
                      std::string* error) {
  const std::string& alg = o.endpoint_identification_algorithm;
  if (alg == "https" || alg == "HTTPS") {
    *verify_hostname = role == Role::client;
  } else if (alg.empty()) {
    *verify_hostname = false;
  } else {
    *error = "ssl.endpoint.identification.algorithm: unsupported '" + alg + "' (https or empty)";
    return false;
  }
  int mode = SSL_VERIFY_PEER;
  if (role == Role::server) {
    switch (o.client_auth) {
      case ClientAuth::none:
        mode = SSL_VERIFY_NONE;
        break;
      case ClientAuth::requested:
        mode = SSL_VERIFY_PEER;
        break;
      case ClientAuth::required:
        mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
        break;
    }
  }
  SSL_CTX_set_verify(ctx, mode, nullptr);
  return true;
}

const char* describe_auth(ClientAuth a) {
  switch (a) {
    case ClientAuth::none:
      return "none";
    case ClientAuth::requested:
      return "requested";
    case ClientAuth::required:
      return "required";
  }
  return "?";
}

std::string version_name(int v) {
  return v == TLS1_3_VERSION ? "TLSv1.3" : "TLSv1.2";
}

std::string make_summary(SSL_CTX* ctx, const Options& o, Role role, bool verify_hostname,
                         const std::string& subject) {
  std::string s = role == Role::server ? "TLS server" : "TLS client";
  s += ", " + version_name(static_cast<int>(SSL_CTX_get_min_proto_version(ctx))) + "-" +
       version_name(static_cast<int>(SSL_CTX_get_max_proto_version(ctx)));
  if (role == Role::server) {
    s += std::string(", client auth ") + describe_auth(o.client_auth);
  } else {
    s += verify_hostname ? ", host names verified" : ", host names not verified";
  }
  s += subject.empty() ? ", no certificate" : ", certificate " + subject;
  return s;
}

}  // namespace

Context::~Context() {
  SSL_CTX_free(ctx_);
}

std::shared_ptr<const Context> make_context(const Options& options, Role role, std::string* error) {
  std::string scratch;
  if (error == nullptr) error = &scratch;
  ERR_clear_error();
  Owned<SSL_CTX> ctx(SSL_CTX_new(role == Role::server ? TLS_server_method() : TLS_client_method()));
  if (!ctx) {
    *error = "cannot create an SSL_CTX (" + take_openssl_error("out of memory") + ")";
    return nullptr;
  }
  bool verify_hostname = false;
  std::string subject;
  if (!set_protocols(ctx.get(), options, error) ||
      !set_verification(ctx.get(), options, role, &verify_hostname, error) ||
      !load_keystore(ctx.get(), options, role, &subject, error) ||
      !load_truststore(ctx.get(), options, role, error)) {
    ERR_clear_error();
    return nullptr;
  }
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                                     (role == Role::server ? SSL_OP_CIPHER_SERVER_PREFERENCE : 0));
  // Idle connections keep no record buffers (34 KiB each otherwise).
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_RELEASE_BUFFERS);
  // No session cache: TLS 1.3 tickets are stateless and a client does not resume. The id
  // context lets a verifying server accept a resumption at all.
  SSL_CTX_set_session_cache_mode(ctx.get(), SSL_SESS_CACHE_OFF);
  static const unsigned char kSessionContext[] = "samsa";
  SSL_CTX_set_session_id_context(ctx.get(), kSessionContext, sizeof kSessionContext - 1);
  std::string summary = make_summary(ctx.get(), options, role, verify_hostname, subject);
  error->clear();
  return std::shared_ptr<const Context>(
      new Context(ctx.release(), role, options.client_auth, verify_hostname, std::move(summary)));
}

}  // namespace samsa::net::tls
