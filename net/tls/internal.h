// net::tls internals shared by its .cc files (not a public header): owning pointers for OpenSSL
// objects, the error queue as one line, and the RFC 2253 subject Kafka's principals use.
#pragma once

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <memory>
#include <string>

namespace samsa::net::tls::internal {

struct Free {
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(SSL_CTX* p) const { SSL_CTX_free(p); }
  void operator()(ASN1_TYPE* p) const { ASN1_TYPE_free(p); }
};
template <typename T>
using Owned = std::unique_ptr<T, Free>;

// The earliest reason on this thread's OpenSSL error queue ("wrong version number"), and the
// queue cleared; `fallback` when the queue is empty.
std::string take_openssl_error(const char* fallback);

// The name as Java's X500Principal.getName() (RFC 2253) prints it: RDNs last to first, joined
// by ','; the AVAs of a multi-valued RDN joined by '+'; CN, C, L, ST, O, OU, STREET, DC and UID
// by keyword, any other attribute as its dotted OID with '#' and the hex of its DER value; in
// string values ,=+<>#;"\ are escaped with '\', NUL as \00, and leading or trailing spaces
// escaped.
std::string subject_rfc2253(const X509_NAME* name);

}  // namespace samsa::net::tls::internal
