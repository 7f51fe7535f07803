// net::tls — TLS over memory (net/tls/README.md). OpenSSL 3 does the cryptography; no socket is
// ever touched here: the transport feeds the ciphertext it received into a Session and sends the
// ciphertext the Session produces.
//
// Configuration follows Kafka's ssl.* settings with PEM stores (ssl.keystore.type=PEM,
// ssl.truststore.type=PEM). A Context is built once from them and is immutable: it is shared by
// every connection on every reactor (shared_ptr<const Context>), and a reload builds a new one
// (sessions already made keep theirs). A Session is one connection's TLS state and belongs to
// that connection's reactor thread.
//
// Errors are values: make_context reports through its error string, a Session through
// failed()/error(). Nothing throws.
//
// Written for C++20 as well (the fuzz flavour builds it with clang 14 and libstdc++ 12): no
// std::expected here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

struct ssl_ctx_st;
struct ssl_st;
struct bio_st;

namespace samsa::net::tls {

// Kafka's ssl.client.auth.
enum class ClientAuth { none, requested, required };
enum class Role { server, client };

// Kafka's ssl.* settings, PEM only. The keystore comes from a file (keystore_location) or inline
// (keystore_key + keystore_certificate_chain), not both; the truststore likewise.
struct Options {
  // ssl.keystore.location: a PEM file with the private key and the certificate chain (leaf
  // first). Any private-key PEM OpenSSL reads is accepted (PKCS#8, encrypted or not, or the
  // traditional EC/RSA forms).
  std::string keystore_location;
  std::string keystore_key;                // ssl.keystore.key: inline PEM private key
  std::string keystore_certificate_chain;  // ssl.keystore.certificate.chain: inline PEM certs
  std::string key_password;                // ssl.key.password: for an encrypted private key
  std::string truststore_location;         // ssl.truststore.location: PEM CA certificates
  std::string truststore_certificates;     // ssl.truststore.certificates: inline PEM certs
  // ssl.enabled.protocols: "TLSv1.2" and/or "TLSv1.3". Anything older is refused.
  std::vector<std::string> enabled_protocols{"TLSv1.2", "TLSv1.3"};
  // ssl.cipher.suites: IANA names as Kafka/Java spell them (TLS_AES_128_GCM_SHA256,
  // TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384) or OpenSSL's names (ECDHE-RSA-AES256-GCM-SHA384).
  // Empty: OpenSSL's TLS 1.3 suites and, for TLS 1.2, ECDHE with AES-GCM or ChaCha20-Poly1305
  // only (no CBC, RC4, 3DES, export, NULL or anonymous suites).
  std::vector<std::string> cipher_suites;
  ClientAuth client_auth = ClientAuth::none;  // server only
  // ssl.endpoint.identification.algorithm, client only: "https" checks the server's certificate
  // against the host name (DNS or IP SAN) given to the Session; "" does not.
  std::string endpoint_identification_algorithm = "https";
};

// The SSL_CTX built from Options. Immutable once made; safe to share between threads (each
// thread only creates Sessions from it).
class Context {
 public:
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  Role role() const { return role_; }
  ClientAuth client_auth() const { return client_auth_; }
  bool verify_hostname() const { return verify_hostname_; }
  // One line for the startup log: role, protocols, client auth, the certificate's subject and
  // expiry.
  const std::string& summary() const { return summary_; }
  ssl_ctx_st* native() const { return ctx_; }

 private:
  friend std::shared_ptr<const Context> make_context(const Options&, Role, std::string*);
  Context(ssl_ctx_st* ctx, Role role, ClientAuth auth, bool verify_hostname, std::string summary)
      : ctx_(ctx),
        role_(role),
        client_auth_(auth),
        verify_hostname_(verify_hostname),
        summary_(std::move(summary)) {}

  ssl_ctx_st* ctx_;
  Role role_;
  ClientAuth client_auth_;
  bool verify_hostname_;
  std::string summary_;
};

// nullptr on a bad configuration, with *error saying which setting and why (one line).
std::shared_ptr<const Context> make_context(const Options& options, Role role, std::string* error);

// A growable byte FIFO: one allocation, bytes appended at the tail and consumed at the head;
// the live bytes move to the front only when the tail runs out of room.
class ByteQueue {
 public:
  ByteQueue() = default;
  ByteQueue(const ByteQueue&) = delete;
  ByteQueue& operator=(const ByteQueue&) = delete;

  std::size_t size() const { return tail_ - head_; }
  bool empty() const { return tail_ == head_; }
  std::span<const std::uint8_t> view() const { return {data_.get() + head_, tail_ - head_}; }
  // Room for n more bytes at the tail; commit() says how many were written there.
  std::uint8_t* prepare(std::size_t n);
  void commit(std::size_t n) { tail_ += n; }
  void consume(std::size_t n);
  // Frees the memory when nothing is held (an idle connection keeps no buffer).
  void release_if_empty();

 private:
  std::unique_ptr<std::uint8_t[]> data_;
  std::size_t capacity_ = 0;
  std::size_t head_ = 0;
  std::size_t tail_ = 0;
};

// One connection's TLS. Single-threaded: every call on the owning reactor thread.
//
// The caller's loop, per chunk of ciphertext received:
//   if (!s.feed(p, n)) -> send what pending_out() holds (the alert), then close; log s.error()
//   consume the plaintext: plain()/consume_plain(), read_plain() or drain_plain()
//   send pending_out(), consume_out(sent)    (handshake records, alerts, application data)
//   if (s.peer_closed()) -> s.close_notify(), send pending_out(), close
// A client session has its ClientHello in pending_out() as soon as it is made.
class Session {
 public:
  // Plaintext decrypted ahead of the reader stops at this much; the rest waits, still
  // encrypted, in the input BIO until the reader drains (4 full records).
  static constexpr std::size_t kPlainHighWater = 64 * 1024;
  // write_plain consumes nothing while this much ciphertext waits to be sent.
  static constexpr std::size_t kMaxPendingOut = 256 * 1024;

  // A client session sends server_name as SNI (when it is a DNS name) and, when the context
  // verifies host names, checks the server's certificate against it (DNS or IP SAN); a client
  // with hostname verification but no name fails at once. A server session ignores it.
  explicit Session(std::shared_ptr<const Context> context, std::string_view server_name = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Ciphertext from the peer, all of it taken (copied). Drives the handshake, then decrypts up
  // to kPlainHighWater bytes of plaintext. False once the session has failed (error() says why);
  // bytes fed after that, or after the peer's close_notify, are dropped.
  bool feed(const std::uint8_t* p, std::size_t n);

  // Decrypted application bytes: copied out (0 when none), viewed in place, or all appended to
  // *out. Each call decrypts more of what was fed as room frees up, so after a feed
  // drain_plain (or read_plain until 0) yields everything that arrived. A bad record found
  // while decrypting fails the session (failed(), error()).
  std::size_t read_plain(std::uint8_t* out, std::size_t cap);
  std::span<const std::uint8_t> plain() const { return plain_.view(); }
  void consume_plain(std::size_t n);
  std::size_t drain_plain(std::vector<std::uint8_t>* out);

  // Encrypts up to n bytes into pending_out(); returns how many were taken (the caller may
  // reuse them at once). 0 before the handshake is done, after close_notify() or a failure,
  // and while pending_out() holds kMaxPendingOut or more.
  std::size_t write_plain(const std::uint8_t* p, std::size_t n);

  // Ciphertext to send, in order. consume_out(n) once n bytes are handed to the kernel. Any
  // non-const call may append to it and move it: copy it if a send stays in flight across one.
  std::span<const std::uint8_t> pending_out() const { return out_.view(); }
  void consume_out(std::size_t n);

  bool handshake_done() const { return handshake_done_; }
  bool failed() const { return failed_; }
  const std::string& error() const { return error_; }
  // Queues a close_notify alert (once); write_plain takes nothing afterwards.
  void close_notify();
  bool peer_closed() const { return peer_closed_; }

  Role role() const { return role_; }
  // Ciphertext fed but not yet decrypted (waiting for the reader or for the rest of a record).
  std::size_t buffered_in() const;

  // After the handshake: "TLSv1.3", the IANA cipher suite name
  // ("TLS_AES_256_GCM_SHA384"), and the verified peer certificate's subject in the RFC 2253
  // form Java's X500Principal.getName() gives Kafka ("CN=alice,OU=eng,O=samsa,C=US"); "" when
  // the peer sent no certificate.
  std::string protocol() const;
  std::string cipher() const;
  const std::string& peer_subject() const { return peer_subject_; }

 private:
  void advance();
  void pump();
  void pull_out();
  void fail(const char* what, int ssl_error);
  void on_handshake_done();

  std::shared_ptr<const Context> context_;
  Role role_;
  ssl_st* ssl_ = nullptr;
  bio_st* in_ = nullptr;       // owned by ssl_
  bio_st* out_bio_ = nullptr;  // owned by ssl_
  ByteQueue plain_;
  ByteQueue out_;
  bool handshake_done_ = false;
  bool failed_ = false;
  bool peer_closed_ = false;
  bool close_sent_ = false;
  std::string error_;
  std::string peer_subject_;
};

// Kafka's ssl.principal.mapping.rules: a comma-separated list of rules tried in order, each
//   RULE:pattern/replacement/     optionally followed by L (lower case) or U (upper case)
//   DEFAULT                       the distinguished name unchanged
// A RULE applies when its pattern (ECMAScript regex here; Kafka's are Java regexes, which agree
// on the usual constructs) matches the whole DN; the replacement may use $1..$n for the groups
// ($0 for the whole DN, \ to quote the next character). A backslash inside a pattern or
// replacement quotes the next character for the parser (so "\/" and "\," stay in the rule).
// Immutable once parsed; map() may be called from any thread.
class PrincipalMapper {
 public:
  // The mapper Kafka uses when the setting is absent: DEFAULT.
  PrincipalMapper();
  ~PrincipalMapper();
  PrincipalMapper(const PrincipalMapper&);
  PrincipalMapper& operator=(const PrincipalMapper&);
  PrincipalMapper(PrincipalMapper&&) noexcept;
  PrincipalMapper& operator=(PrincipalMapper&&) noexcept;

  // On a syntax error (or a pattern that does not compile) the result's ok() is false and
  // *error says which rule (one line, starting "ssl.principal.mapping.rules: "). An empty
  // setting (nothing but spaces and commas) is DEFAULT, as when the setting is absent.
  static PrincipalMapper parse(std::string_view rules, std::string* error);

  bool ok() const { return ok_; }
  // The first applicable rule's result; nullopt when none applies (Kafka refuses such a
  // connection: NoMatchingRule). DNs over 8 KiB are matched by DEFAULT only.
  std::optional<std::string> apply(std::string_view dn) const;
  // apply(), or the DN unchanged when no rule applies.
  std::string map(std::string_view dn) const;

 private:
  struct Rule;
  std::vector<Rule> rules_;
  bool ok_ = true;
};

// Whether the kernel offers the "tls" TCP upper-layer protocol (kTLS), from
// /proc/sys/net/ipv4/tcp_available_ulp. Informational: samsa does not use kTLS yet; records are
// always encrypted in user space by OpenSSL.
bool kernel_tls_available();

}  // namespace samsa::net::tls
