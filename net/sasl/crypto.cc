// libcrypto behind net/sasl: hashes, HMAC, PBKDF2, random bytes, constant-time comparison.
#include <climits>
#include <cstring>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "net/sasl/internal.h"

namespace samsa::net::sasl::detail {

namespace {

const EVP_MD* digest(Mechanism m) {
  switch (m) {
    case Mechanism::scram_sha_256:
      return EVP_sha256();
    case Mechanism::scram_sha_512:
      return EVP_sha512();
    case Mechanism::plain:
      break;
  }
  return nullptr;
}

const unsigned char* bytes(std::string_view s) {
  // libcrypto wants a non-null pointer even for zero bytes.
  static const unsigned char kEmpty = 0;
  return s.empty() ? &kEmpty : reinterpret_cast<const unsigned char*>(s.data());
}

bool fits_int(std::string_view s) {
  return s.size() <= static_cast<std::size_t>(INT_MAX);
}

}  // namespace

std::size_t hash_size(Mechanism m) {
  const EVP_MD* md = digest(m);
  return md == nullptr ? 0 : static_cast<std::size_t>(EVP_MD_get_size(md));
}

std::string hash(Mechanism m, std::string_view data) {
  const EVP_MD* md = digest(m);
  if (md == nullptr) return {};
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(bytes(data), data.size(), out, &len, md, nullptr) != 1) return {};
  std::string result(reinterpret_cast<const char*>(out), len);
  OPENSSL_cleanse(out, sizeof out);
  return result;
}

std::string hmac(Mechanism m, std::string_view key, std::string_view data) {
  const EVP_MD* md = digest(m);
  if (md == nullptr || !fits_int(key)) return {};
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(md, bytes(key), static_cast<int>(key.size()), bytes(data), data.size(), out, &len) ==
      nullptr)
    return {};
  std::string result(reinterpret_cast<const char*>(out), len);
  OPENSSL_cleanse(out, sizeof out);
  return result;
}

std::string pbkdf2(Mechanism m, std::string_view password, std::string_view salt, int iterations) {
  const EVP_MD* md = digest(m);
  if (md == nullptr || iterations < 1 || !fits_int(password) || !fits_int(salt)) return {};
  std::string out(hash_size(m), '\0');
  if (PKCS5_PBKDF2_HMAC(reinterpret_cast<const char*>(bytes(password)),
                        static_cast<int>(password.size()), bytes(salt),
                        static_cast<int>(salt.size()), iterations, md, static_cast<int>(out.size()),
                        reinterpret_cast<unsigned char*>(out.data())) != 1) {
    cleanse(out);
    return {};
  }
  return out;
}

std::string random_bytes(std::size_t n) {
  std::string out(n, '\0');
  if (n > static_cast<std::size_t>(INT_MAX) ||
      RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1)
    return {};
  return out;
}

std::string random_nonce() {
  std::string raw = random_bytes(24);
  // Without a working generator there is no safe nonce; an empty one fails the exchange.
  if (raw.empty()) return {};
  return base64_encode(raw);
}

std::string xor_bytes(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return {};
  std::string out(a.size(), '\0');
  for (std::size_t i = 0; i < a.size(); ++i)
    out[i] = static_cast<char>(static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i]));
  return out;
}

bool equal_constant_time(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  return CRYPTO_memcmp(bytes(a), bytes(b), a.size()) == 0;
}

void cleanse(std::string& s) {
  if (!s.empty()) OPENSSL_cleanse(s.data(), s.size());
  s.clear();
}

}  // namespace samsa::net::sasl::detail
