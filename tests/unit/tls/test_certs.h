// Throwaway X.509 material for TLS tests, made at test time with OpenSSL's C API: EC P-256
// keys, a CA, certificates it issues (subject, DNS and IP SANs), PEM text and files in a temp
// folder. Nothing here is secret or kept. No GoogleTest: the fuzz targets include it too.
#pragma once

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace samsa::net::tls::testing {

struct OpenSslFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
};
using KeyPtr = std::unique_ptr<EVP_PKEY, OpenSslFree>;
using CertPtr = std::unique_ptr<X509, OpenSslFree>;
using BioPtr = std::unique_ptr<BIO, OpenSslFree>;

inline KeyPtr make_key() {
  return KeyPtr(EVP_EC_gen("P-256"));
}

inline std::string bio_text(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return std::string(data, n > 0 ? static_cast<std::size_t>(n) : 0);
}

inline std::string cert_pem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), cert);
  return bio_text(bio.get());
}

// PKCS#8; encrypted with AES-256-CBC when a password is given.
inline std::string key_pem(EVP_PKEY* key, const std::string& password = {}) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (password.empty()) {
    PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  } else {
    PEM_write_bio_PKCS8PrivateKey(bio.get(), key, EVP_aes_256_cbc(), nullptr, 0, nullptr,
                                  const_cast<char*>(password.c_str()));
  }
  return bio_text(bio.get());
}

// What a certificate says. subject is RFC 2253 order ("CN=client1,OU=eng,O=samsa,C=US": most
// specific first), plain values only; it is encoded in reverse, so it prints back the same.
struct CertSpec {
  std::string subject;
  std::vector<std::string> dns_names;
  std::vector<std::string> ip_addresses;
  bool is_ca = false;
  long days = 30;
};

inline void add_extension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext != nullptr) {
    X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
  }
}

inline void set_subject(X509* cert, const std::string& subject) {
  std::vector<std::pair<std::string, std::string>> parts;
  std::size_t start = 0;
  while (start < subject.size()) {
    std::size_t comma = subject.find(',', start);
    if (comma == std::string::npos) comma = subject.size();
    std::string part = subject.substr(start, comma - start);
    std::size_t eq = part.find('=');
    parts.emplace_back(part.substr(0, eq), part.substr(eq + 1));
    start = comma + 1;
  }
  X509_NAME* name = X509_get_subject_name(cert);
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    X509_NAME_add_entry_by_txt(name, it->first.c_str(), MBSTRING_UTF8,
                               reinterpret_cast<const unsigned char*>(it->second.c_str()), -1, -1,
                               0);
  }
}

// A certificate for `key`, signed by issuer/issuer_key (self-signed when issuer is null).
inline CertPtr make_cert(const CertSpec& spec, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key) {
  static long serial = 1000;
  CertPtr cert(X509_new());
  X509* x = cert.get();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), ++serial);
  X509_gmtime_adj(X509_getm_notBefore(x), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x), spec.days * 86400);
  X509_set_pubkey(x, key);
  set_subject(x, spec.subject);
  X509* signer = issuer != nullptr ? issuer : x;
  X509_set_issuer_name(x, X509_get_subject_name(signer));
  if (spec.is_ca) {
    add_extension(x, signer, NID_basic_constraints, "critical,CA:TRUE");
    add_extension(x, signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    add_extension(x, signer, NID_basic_constraints, "critical,CA:FALSE");
    add_extension(x, signer, NID_key_usage, "critical,digitalSignature,keyAgreement");
    add_extension(x, signer, NID_ext_key_usage, "serverAuth,clientAuth");
  }
  add_extension(x, signer, NID_subject_key_identifier, "hash");
  if (issuer != nullptr) add_extension(x, signer, NID_authority_key_identifier, "keyid:always");
  std::string san;
  for (const auto& d : spec.dns_names)
    san += (san.empty() ? "DNS:" : ",DNS:") + d;
  for (const auto& ip : spec.ip_addresses)
    san += (san.empty() ? "IP:" : ",IP:") + ip;
  if (!san.empty()) add_extension(x, signer, NID_subject_alt_name, san);
  X509_sign(x, issuer_key != nullptr ? issuer_key : key, EVP_sha256());
  return cert;
}

// A key and its certificate, as objects and as PEM.
struct Identity {
  KeyPtr key;
  CertPtr cert;
  std::string key_pem;
  std::string cert_pem;
};

class TestCa {
 public:
  explicit TestCa(const std::string& subject = "CN=samsa test CA,O=samsa") : key_(make_key()) {
    cert_ = make_cert({subject, {}, {}, true, 365}, key_.get(), nullptr, nullptr);
    pem_ = tls::testing::cert_pem(cert_.get());
  }
  const std::string& cert_pem() const { return pem_; }
  X509* cert() const { return cert_.get(); }

  Identity issue(const CertSpec& spec) const {
    Identity id;
    id.key = make_key();
    id.cert = make_cert(spec, id.key.get(), cert_.get(), key_.get());
    id.key_pem = key_pem(id.key.get());
    id.cert_pem = tls::testing::cert_pem(id.cert.get());
    return id;
  }

 private:
  KeyPtr key_;
  CertPtr cert_;
  std::string pem_;
};

// A fresh folder under $TMPDIR (or /tmp), removed with everything in it.
class TempDir {
 public:
  TempDir() {
    const char* base = getenv("TMPDIR");
    std::string tmpl =
        std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/samsa-tls-test.XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) != nullptr) path_ = buf.data();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // Writes `text` to path()/name and returns the file's path.
  std::string write(const std::string& name, std::string_view text) const {
    std::string file = path_ + "/" + name;
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    return file;
  }

 private:
  std::string path_;
};

}  // namespace samsa::net::tls::testing
