// net::tls::Session: one connection's TLS over two memory BIOs. Ciphertext the peer sent goes
// into the input BIO (feed); what OpenSSL writes to the output BIO is moved, in whole chunks,
// into a ByteQueue the transport sends from (pending_out). Plaintext is decrypted into another
// ByteQueue, at most kPlainHighWater ahead of the reader.
#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <fstream>
#include <sstream>

#include "net/tls/internal.h"
#include "net/tls/tls.h"

namespace samsa::net::tls {

namespace {

// SSL_read asks for this much room: one full record's plaintext.
constexpr std::size_t kReadChunk = 16 * 1024;
// write_plain hands OpenSSL at most this much per SSL_write (four full records).
constexpr std::size_t kWriteChunk = 64 * 1024;

bool is_ip_address(const std::string& name) {
  unsigned char buf[sizeof(struct in6_addr)];
  return inet_pton(AF_INET, name.c_str(), buf) == 1 || inet_pton(AF_INET6, name.c_str(), buf) == 1;
}

}  // namespace

namespace internal {

std::string take_openssl_error(const char* fallback) {
  unsigned long first = ERR_get_error();
  if (first == 0) return fallback;
  ERR_clear_error();
  const char* reason = ERR_reason_error_string(first);
  if (reason != nullptr) return reason;
  char buf[256];
  ERR_error_string_n(first, buf, sizeof buf);
  return buf;
}

}  // namespace internal

// ---- ByteQueue ----

std::uint8_t* ByteQueue::prepare(std::size_t n) {
  if (head_ == tail_) head_ = tail_ = 0;
  if (capacity_ - tail_ >= n) return data_.get() + tail_;
  std::size_t live = tail_ - head_;
  if (live + n <= capacity_ && head_ >= capacity_ / 2) {
    // At least half the buffer was consumed: moving the rest costs no more than that did.
    std::memmove(data_.get(), data_.get() + head_, live);
  } else {
    std::size_t capacity = std::max({capacity_ * 2, live + n, std::size_t{4096}});
    std::unique_ptr<std::uint8_t[]> grown(new std::uint8_t[capacity]);
    if (live > 0) std::memcpy(grown.get(), data_.get() + head_, live);
    data_ = std::move(grown);
    capacity_ = capacity;
  }
  head_ = 0;
  tail_ = live;
  return data_.get() + tail_;
}

void ByteQueue::consume(std::size_t n) {
  head_ += std::min(n, tail_ - head_);
  if (head_ == tail_) head_ = tail_ = 0;
}

void ByteQueue::release_if_empty() {
  if (head_ != tail_ || !data_) return;
  data_.reset();
  capacity_ = head_ = tail_ = 0;
}

// ---- Session ----

Session::Session(std::shared_ptr<const Context> context, std::string_view server_name)
    : context_(std::move(context)), role_(context_->role()) {
  ERR_clear_error();
  ssl_ = SSL_new(context_->native());
  in_ = BIO_new(BIO_s_mem());
  out_bio_ = BIO_new(BIO_s_mem());
  if (ssl_ == nullptr || in_ == nullptr || out_bio_ == nullptr) {
    BIO_free(in_);
    BIO_free(out_bio_);
    in_ = out_bio_ = nullptr;
    fail("TLS session setup failed", SSL_ERROR_SSL);
    return;
  }
  // An empty input BIO means "wait for more", not end of stream.
  BIO_set_mem_eof_return(in_, -1);
  BIO_set_mem_eof_return(out_bio_, -1);
  SSL_set_bio(ssl_, in_, out_bio_);
  if (role_ == Role::server) {
    SSL_set_accept_state(ssl_);
    return;
  }
  SSL_set_connect_state(ssl_);
  std::string name(server_name);
  if (!name.empty() && !is_ip_address(name)) {
    SSL_set_tlsext_host_name(ssl_, name.c_str());  // SNI carries DNS names only (RFC 6066)
  }
  if (context_->verify_hostname()) {
    if (name.empty()) {
      failed_ = true;
      error_ =
          "TLS client: ssl.endpoint.identification.algorithm=https needs the server's host name";
      return;
    }
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl_);
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    int ok = is_ip_address(name) ? X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str())
                                 : X509_VERIFY_PARAM_set1_host(param, name.c_str(), name.size());
    if (ok != 1) {
      fail("TLS client: bad server host name", SSL_ERROR_SSL);
      return;
    }
  }
  advance();  // the ClientHello
  pull_out();
}

Session::~Session() {
  SSL_free(ssl_);
}  // frees both BIOs

bool Session::feed(const std::uint8_t* p, std::size_t n) {
  if (failed_) return false;
  if (peer_closed_) return true;  // nothing may follow close_notify; ignore it
  while (n > 0) {
    int chunk = static_cast<int>(std::min<std::size_t>(n, INT_MAX / 2));
    int wrote = BIO_write(in_, p, chunk);
    if (wrote <= 0) {
      fail("TLS input buffer", SSL_ERROR_SSL);
      return false;
    }
    p += wrote;
    n -= static_cast<std::size_t>(wrote);
  }
  advance();
  pull_out();
  return !failed_;
}

void Session::advance() {
  if (failed_) return;
  if (!handshake_done_) {
    ERR_clear_error();
    int r = SSL_do_handshake(ssl_);
    if (r != 1) {
      int e = SSL_get_error(ssl_, r);
      if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) fail("TLS handshake failed", e);
      return;
    }
    on_handshake_done();
  }
  pump();
}

void Session::on_handshake_done() {
  handshake_done_ = true;
  X509* cert = SSL_get0_peer_certificate(ssl_);
  if (cert != nullptr && SSL_get_verify_result(ssl_) == X509_V_OK) {
    peer_subject_ = internal::subject_rfc2253(X509_get_subject_name(cert));
  }
}

// Decrypts what the input BIO holds into plain_, until plain_ reaches kPlainHighWater or the
// input runs out.
void Session::pump() {
  while (!failed_ && !peer_closed_ && handshake_done_ && plain_.size() < kPlainHighWater) {
    if (BIO_ctrl_pending(in_) == 0 && SSL_has_pending(ssl_) == 0) break;
    std::uint8_t* dst = plain_.prepare(kReadChunk);
    std::size_t got = 0;
    ERR_clear_error();
    int r = SSL_read_ex(ssl_, dst, kReadChunk, &got);
    if (r == 1) {
      plain_.commit(got);
      continue;
    }
    int e = SSL_get_error(ssl_, r);
    if (e == SSL_ERROR_ZERO_RETURN) {
      peer_closed_ = true;
    } else if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
      fail("TLS record error", e);
    }
    break;
  }
  plain_.release_if_empty();
}

// Moves everything OpenSSL wrote into out_ in one read.
void Session::pull_out() {
  if (out_bio_ == nullptr) return;
  std::size_t pending = BIO_ctrl_pending(out_bio_);
  while (pending > 0) {
    int chunk = static_cast<int>(std::min<std::size_t>(pending, INT_MAX / 2));
    std::uint8_t* dst = out_.prepare(static_cast<std::size_t>(chunk));
    int got = BIO_read(out_bio_, dst, chunk);
    if (got <= 0) break;
    out_.commit(static_cast<std::size_t>(got));
    pending = BIO_ctrl_pending(out_bio_);
  }
}

void Session::fail(const char* what, int ssl_error) {
  if (failed_) return;
  failed_ = true;
  std::string reason;
  if (ssl_error == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
    reason = "unexpected end of stream";
  } else {
    reason = internal::take_openssl_error("protocol error");
  }
  error_ = std::string(what) + ": " + reason;
  // "certificate verify failed" alone does not say what was wrong with it.
  if (ssl_ != nullptr && reason == "certificate verify failed") {
    long v = SSL_get_verify_result(ssl_);
    if (v != X509_V_OK) error_ += std::string(" (") + X509_verify_cert_error_string(v) + ")";
  }
  ERR_clear_error();
  // The peer gets the alert OpenSSL queued; the ciphertext still unread is dropped.
  pull_out();
  if (in_ != nullptr) (void)BIO_reset(in_);
}

std::size_t Session::read_plain(std::uint8_t* out, std::size_t cap) {
  std::size_t total = 0;
  while (total < cap) {
    if (plain_.empty()) {
      pump();
      pull_out();
      if (plain_.empty()) break;
    }
    std::span<const std::uint8_t> have = plain_.view();
    std::size_t n = std::min(have.size(), cap - total);
    std::memcpy(out + total, have.data(), n);
    plain_.consume(n);
    total += n;
  }
  if (plain_.empty()) plain_.release_if_empty();
  return total;
}

void Session::consume_plain(std::size_t n) {
  plain_.consume(n);
  if (plain_.size() < kPlainHighWater) {
    pump();
    pull_out();
  }
}

std::size_t Session::drain_plain(std::vector<std::uint8_t>* out) {
  std::size_t total = 0;
  for (;;) {
    std::span<const std::uint8_t> have = plain_.view();
    if (have.empty()) {
      pump();
      pull_out();
      have = plain_.view();
      if (have.empty()) break;
    }
    out->insert(out->end(), have.begin(), have.end());
    total += have.size();
    plain_.consume(have.size());
  }
  plain_.release_if_empty();
  return total;
}

std::size_t Session::write_plain(const std::uint8_t* p, std::size_t n) {
  if (failed_ || close_sent_ || !handshake_done_) return 0;
  std::size_t taken = 0;
  while (taken < n && out_.size() < kMaxPendingOut) {
    std::size_t chunk = std::min(n - taken, kWriteChunk);
    std::size_t wrote = 0;
    ERR_clear_error();
    int r = SSL_write_ex(ssl_, p + taken, chunk, &wrote);
    if (r != 1) {
      int e = SSL_get_error(ssl_, r);
      if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) fail("TLS write failed", e);
      break;
    }
    taken += wrote;
    pull_out();
  }
  pull_out();
  return taken;
}

void Session::consume_out(std::size_t n) {
  out_.consume(n);
  out_.release_if_empty();
}

void Session::close_notify() {
  if (close_sent_ || failed_ || ssl_ == nullptr) return;
  close_sent_ = true;
  if (!handshake_done_) return;  // nothing agreed yet to close politely
  ERR_clear_error();
  SSL_shutdown(ssl_);
  ERR_clear_error();
  pull_out();
}

std::size_t Session::buffered_in() const {
  return in_ == nullptr ? 0 : BIO_ctrl_pending(in_);
}

std::string Session::protocol() const {
  return handshake_done_ ? SSL_get_version(ssl_) : std::string();
}

std::string Session::cipher() const {
  if (!handshake_done_) return {};
  const SSL_CIPHER* c = SSL_get_current_cipher(ssl_);
  if (c == nullptr) return {};
  const char* standard = SSL_CIPHER_standard_name(c);
  return standard != nullptr ? standard : SSL_CIPHER_get_name(c);
}

bool kernel_tls_available() {
  std::ifstream in("/proc/sys/net/ipv4/tcp_available_ulp");
  std::string word;
  while (in >> word) {
    if (word == "tls") return true;
  }
  return false;
}

}  // namespace samsa::net::tls
