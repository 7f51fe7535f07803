// net::tls::Session against itself in memory: real OpenSSL on both ends, certificates made at
// test time (tests/unit/tls/test_certs.h). Covers the handshake on TLS 1.3 and 1.2, data both
// ways with bounded buffers, client authentication and the subject it yields, trust and host
// name failures, garbage input, and close_notify.
#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "net/tls/tls.h"
#include "tests/unit/tls/test_certs.h"

namespace samsa::net::tls {
namespace {

using testing::CertSpec;
using testing::Identity;
using testing::TempDir;
using testing::TestCa;

const std::string kClientSubject = "CN=client1,OU=eng,O=samsa,C=US";

// One CA, a server certificate for localhost / 127.0.0.1, a client certificate, and a second CA
// nobody trusts; PEM files for them in a temp folder.
class TlsSessionTest : public ::testing::Test {
 protected:
  TlsSessionTest()
      : server_id_(ca_.issue({"CN=localhost,O=samsa", {"localhost"}, {"127.0.0.1"}})),
        client_id_(ca_.issue({kClientSubject})) {
    ca_file_ = dir_.write("ca.pem", ca_.cert_pem());
    server_keystore_ = dir_.write("server.pem", server_id_.key_pem + server_id_.cert_pem);
    client_keystore_ = dir_.write("client.pem", client_id_.key_pem + client_id_.cert_pem);
  }

  Options server_options() const {
    Options o;
    o.keystore_location = server_keystore_;
    o.truststore_location = ca_file_;
    return o;
  }
  Options client_options() const {
    Options o;
    o.truststore_location = ca_file_;
    return o;
  }
  static std::shared_ptr<const Context> context(const Options& o, Role role) {
    std::string error;
    auto ctx = make_context(o, role, &error);
    EXPECT_TRUE(ctx) << error;
    EXPECT_TRUE(error.empty());
    return ctx;
  }

  TestCa ca_;
  TestCa other_ca_{"CN=someone else,O=elsewhere"};
  Identity server_id_;
  Identity client_id_;
  TempDir dir_;
  std::string ca_file_, server_keystore_, client_keystore_;
};

// Moves ciphertext both ways until neither side has any to send.
void shuttle(Session& client, Session& server) {
  for (int round = 0; round < 100; ++round) {
    bool moved = false;
    for (auto [from, to] : {std::pair{&client, &server}, std::pair{&server, &client}}) {
      auto out = from->pending_out();
      if (out.empty()) continue;
      to->feed(out.data(), out.size());
      from->consume_out(out.size());
      moved = true;
    }
    if (!moved) return;
  }
  ADD_FAILURE() << "handshake did not settle";
}

std::string drain(Session& s) {
  std::vector<std::uint8_t> bytes;
  s.drain_plain(&bytes);
  return std::string(bytes.begin(), bytes.end());
}

std::size_t write(Session& s, std::string_view text) {
  return s.write_plain(reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
}

TEST_F(TlsSessionTest, HandshakeTls13) {
  Session server(context(server_options(), Role::server));
  Session client(context(client_options(), Role::client), "localhost");
  EXPECT_FALSE(client.pending_out().empty()) << "the ClientHello is ready at once";
  shuttle(client, server);
  ASSERT_TRUE(server.handshake_done()) << server.error();
  ASSERT_TRUE(client.handshake_done()) << client.error();
  EXPECT_FALSE(server.failed());
  EXPECT_FALSE(client.failed());
  EXPECT_EQ(server.protocol(), "TLSv1.3");
  EXPECT_EQ(client.protocol(), "TLSv1.3");
  EXPECT_EQ(
      server.cipher().rfind("TLS_AES_", 0) == 0 || server.cipher().rfind("TLS_CHACHA", 0) == 0,
      true)
      << server.cipher();
  EXPECT_EQ(server.peer_subject(), "") << "no client auth";
  EXPECT_EQ(client.peer_subject(), "CN=localhost,O=samsa");
}

TEST_F(TlsSessionTest, HandshakeTls12Forced) {
  Options so = server_options();
  so.enabled_protocols = {"TLSv1.2"};
  Session server(context(so, Role::server));
  Session client(context(client_options(), Role::client), "localhost");
  shuttle(client, server);
  ASSERT_TRUE(server.handshake_done()) << server.error();
  ASSERT_TRUE(client.handshake_done()) << client.error();
  EXPECT_EQ(server.protocol(), "TLSv1.2");
  EXPECT_EQ(client.protocol(), "TLSv1.2");
  // ECDHE with an AEAD only.
  EXPECT_EQ(server.cipher().rfind("TLS_ECDHE_ECDSA_WITH_", 0), 0u) << server.cipher();
  EXPECT_TRUE(server.cipher().find("GCM") != std::string::npos ||
              server.cipher().find("CHACHA20") != std::string::npos)
      << server.cipher();

  EXPECT_EQ(write(client, "ping"), 4u);
  shuttle(client, server);
  EXPECT_EQ(drain(server), "ping");
}

TEST_F(TlsSessionTest, DataBothWaysAndNothingBeforeTheHandshake) {
  Session server(context(server_options(), Role::server));
  Session client(context(client_options(), Role::client), "localhost");
  EXPECT_EQ(write(client, "too early"), 0u);
  shuttle(client, server);
  ASSERT_TRUE(client.handshake_done());
  EXPECT_EQ(write(client, "request"), 7u);
  shuttle(client, server);
  EXPECT_EQ(drain(server), "request");
  EXPECT_EQ(write(server, "response"), 8u);
  shuttle(client, server);
  std::uint8_t buf[3];
  std::string got;
  while (std::size_t n = client.read_plain(buf, sizeof buf))
    got.append(buf, buf + n);
  EXPECT_EQ(got, "response");
}

TEST_F(TlsSessionTest, DataPipelinedWithTheClientFinished) {
  Session server(context(server_options(), Role::server));
  Session client(context(client_options(), Role::client), "localhost");
  // ClientHello -> server; server flight -> client (which completes and may write at once).
  auto hello = client.pending_out();
  ASSERT_TRUE(server.feed(hello.data(), hello.size()));
  client.consume_out(hello.size());
  auto flight = server.pending_out();
  ASSERT_TRUE(client.feed(flight.data(), flight.size()));
  server.consume_out(flight.size());
  ASSERT_TRUE(client.handshake_done());
  EXPECT_EQ(write(client, "first request"), 13u);
  // The client's Finished and its first record arrive in one feed.
  auto out = client.pending_out();
  ASSERT_TRUE(server.feed(out.data(), out.size())) << server.error();
  client.consume_out(out.size());
  EXPECT_TRUE(server.handshake_done());
  EXPECT_EQ(drain(server), "first request");
}

// 1 MiB each way through 16 KiB ciphertext chunks: pending_out and the plaintext read ahead
// stay bounded, and every byte arrives in order.
void send_large(Session& from, Session& to) {
  std::vector<std::uint8_t> payload(1 << 20);
  std::mt19937 rng(7);
  for (auto& b : payload)
    b = static_cast<std::uint8_t>(rng());
  std::vector<std::uint8_t> received;
  std::size_t sent = 0;
  std::size_t max_out = 0, max_plain = 0;
  while (received.size() < payload.size()) {
    // The writer offers everything left; the session takes what its bound allows.
    sent += from.write_plain(payload.data() + sent, payload.size() - sent);
    max_out = std::max(max_out, from.pending_out().size());
    auto out = from.pending_out();
    ASSERT_FALSE(out.empty()) << "no progress at " << received.size();
    std::size_t n = std::min<std::size_t>(out.size(), 16 * 1024);
    ASSERT_TRUE(to.feed(out.data(), n)) << to.error();
    from.consume_out(n);
    max_plain = std::max(max_plain, to.plain().size());
    to.drain_plain(&received);
    auto back = to.pending_out();  // e.g. nothing, or TLS 1.3 key updates
    if (!back.empty()) {
      from.feed(back.data(), back.size());
      to.consume_out(back.size());
    }
  }
  EXPECT_EQ(sent, payload.size());
  EXPECT_TRUE(received == payload);
  EXPECT_LE(max_out, Session::kMaxPendingOut + 80 * 1024);
  EXPECT_LE(max_plain, Session::kPlainHighWater + 16 * 1024);
  EXPECT_EQ(to.buffered_in(), 0u);
}

TEST_F(TlsSessionTest, OneMebibyteEachWayWithBoundedBuffers) {
  Session server(context(server_options(), Role::server));
  Session client(context(client_options(), Role::client), "localhost");
  shuttle(client, server);
  ASSERT_TRUE(server.handshake_done());
  send_large(client, server);
  send_large(server, client);
}

TEST_F(TlsSessionTest, PendingOutStopsWritesAtItsBound) {
  Session server(context(server_options(), Role::server));
  Session client(context(client_options(), Role::client), "localhost");
  shuttle(client, server);
  std::vector<std::uint8_t> big(4 << 20, 'x');
  std::size_t taken = client.write_plain(big.data(), big.size());
  EXPECT_GT(taken, 0u);
  EXPECT_LT(taken, big.size());
  EXPECT_GE(client.pending_out().size(), Session::kMaxPendingOut);
  EXPECT_EQ(client.write_plain(big.data(), big.size()), 0u) << "full until drained";
  client.consume_out(client.pending_out().size());
  EXPECT_GT(client.write_plain(big.data(), big.size()), 0u);
}

// The server reads plaintext only as far as its reader drains: the rest stays encrypted.
TEST_F(TlsSessionTest, PlaintextReadAheadIsBounded) {
  Session server(context(server_options(), Role::server));
  Session client(context(client_options(), Role::client), "localhost");
  shuttle(client, server);
  std::vector<std::uint8_t> big(1 << 20, 'y');
  std::size_t sent = 0;
  std::vector<std::uint8_t> wire;
  while (sent < big.size()) {
    sent += client.write_plain(big.data() + sent, big.size() - sent);
    auto out = client.pending_out();
    wire.insert(wire.end(), out.begin(), out.end());
    client.consume_out(out.size());
  }
  ASSERT_TRUE(server.feed(wire.data(), wire.size()));
  EXPECT_LE(server.plain().size(), Session::kPlainHighWater + 16 * 1024);
  EXPECT_GT(server.buffered_in(), 0u);
  std::vector<std::uint8_t> got;
  server.drain_plain(&got);
  EXPECT_EQ(got.size(), big.size());
  EXPECT_EQ(server.buffered_in(), 0u);
}

TEST_F(TlsSessionTest, EncryptedKeyWithPassword) {
  std::string encrypted = testing::key_pem(server_id_.key.get(), "s3cret");
  ASSERT_NE(encrypted.find("ENCRYPTED PRIVATE KEY"), std::string::npos);
  Options o = server_options();
  o.keystore_location = dir_.write("encrypted.pem", encrypted + server_id_.cert_pem);
  o.key_password = "s3cret";
  Session server(context(o, Role::server));
  Session client(context(client_options(), Role::client), "localhost");
  shuttle(client, server);
  EXPECT_TRUE(server.handshake_done()) << server.error();

  std::string error;
  o.key_password = "wrong";
  EXPECT_FALSE(make_context(o, Role::server, &error));
  EXPECT_NE(error.find("ssl.key.password does not decrypt"), std::string::npos) << error;
  o.key_password.clear();
  EXPECT_FALSE(make_context(o, Role::server, &error));
  EXPECT_NE(error.find("ssl.key.password is not set"), std::string::npos) << error;
}

TEST_F(TlsSessionTest, InlinePem) {
  Options so;
  so.keystore_key = testing::key_pem(server_id_.key.get(), "pw");
  so.key_password = "pw";
  so.keystore_certificate_chain = server_id_.cert_pem + ca_.cert_pem();  // leaf first
  so.truststore_certificates = ca_.cert_pem();
  so.client_auth = ClientAuth::required;
  Options co;
  co.keystore_key = client_id_.key_pem;
  co.keystore_certificate_chain = client_id_.cert_pem;
  co.truststore_certificates = ca_.cert_pem();
  Session server(context(so, Role::server));
  Session client(context(co, Role::client), "localhost");
  shuttle(client, server);
  ASSERT_TRUE(server.handshake_done()) << server.error();
  EXPECT_EQ(server.peer_subject(), kClientSubject);

  std::string error;
  so.keystore_location = server_keystore_;
  EXPECT_FALSE(make_context(so, Role::server, &error));
  EXPECT_NE(error.find("not both"), std::string::npos) << error;
}

TEST_F(TlsSessionTest, ConfigurationErrors) {
  std::string error;
  Options o = server_options();
  o.enabled_protocols = {"TLSv1.1"};
  EXPECT_FALSE(make_context(o, Role::server, &error));
  EXPECT_EQ(error, "ssl.enabled.protocols: TLSv1.1 is refused (TLSv1.2 or later only)");
  o.enabled_protocols = {"TLSv1.2", "TLSv9"};
  EXPECT_FALSE(make_context(o, Role::server, &error));
  EXPECT_NE(error.find("unknown protocol 'TLSv9'"), std::string::npos) << error;
  o.enabled_protocols = {};
  EXPECT_FALSE(make_context(o, Role::server, &error));

  o = server_options();
  o.cipher_suites = {"TLS_NOT_A_SUITE"};
  EXPECT_FALSE(make_context(o, Role::server, &error));
  EXPECT_NE(error.find("unknown cipher suite 'TLS_NOT_A_SUITE'"), std::string::npos) << error;

  o = server_options();
  o.keystore_location.clear();
  EXPECT_FALSE(make_context(o, Role::server, &error));
  EXPECT_NE(error.find("needs ssl.keystore.location"), std::string::npos) << error;
  EXPECT_TRUE(make_context(o, Role::client, &error)) << "a client needs no keystore";

  o = server_options();
  o.keystore_location = dir_.write("mismatch.pem", client_id_.key_pem + server_id_.cert_pem);
  EXPECT_FALSE(make_context(o, Role::server, &error));
  EXPECT_NE(error.find("does not match"), std::string::npos) << error;

  o = server_options();
  o.keystore_location = dir_.write("cert-only.pem", server_id_.cert_pem);
  EXPECT_FALSE(make_context(o, Role::server, &error));
  EXPECT_EQ(error, "ssl.keystore.location (" + o.keystore_location + "): no PEM private key found");

  o = server_options();
  o.keystore_location = dir_.path() + "/missing.pem";
  EXPECT_FALSE(make_context(o, Role::server, &error));
  EXPECT_NE(error.find("cannot read"), std::string::npos) << error;

  o = server_options();
  o.truststore_location.clear();
  o.client_auth = ClientAuth::required;
  EXPECT_FALSE(make_context(o, Role::server, &error));
  EXPECT_NE(error.find("ssl.client.auth needs"), std::string::npos) << error;

  o = client_options();
  o.endpoint_identification_algorithm = "ldaps";
  EXPECT_FALSE(make_context(o, Role::client, &error));
  EXPECT_NE(error.find("ssl.endpoint.identification.algorithm"), std::string::npos) << error;

  o = client_options();
  o.truststore_certificates = "not PEM at all";
  o.truststore_location.clear();
  EXPECT_FALSE(make_context(o, Role::client, &error));
  EXPECT_NE(error.find("no PEM certificate"), std::string::npos) << error;
}

TEST_F(TlsSessionTest, CipherSuitesByIanaName) {
  Options so = server_options();
  so.cipher_suites = {"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"};  // TLS 1.2 only
  Session server(context(so, Role::server));
  Session client(context(client_options(), Role::client), "localhost");
  shuttle(client, server);
  ASSERT_TRUE(server.handshake_done()) << server.error();
  EXPECT_EQ(server.protocol(), "TLSv1.2");
  EXPECT_EQ(server.cipher(), "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256");

  so.cipher_suites = {"TLS_AES_128_GCM_SHA256"};  // TLS 1.3 only
  Session server13(context(so, Role::server));
  Session client13(context(client_options(), Role::client), "localhost");
  shuttle(client13, server13);
  ASSERT_TRUE(server13.handshake_done()) << server13.error();
  EXPECT_EQ(server13.protocol(), "TLSv1.3");
  EXPECT_EQ(server13.cipher(), "TLS_AES_128_GCM_SHA256");

  std::string error;
  so.enabled_protocols = {"TLSv1.2"};  // and a TLS 1.3 suite only
  EXPECT_FALSE(make_context(so, Role::server, &error));
  EXPECT_NE(error.find("no suite for the protocols"), std::string::npos) << error;
}

// A TLS 1.1-only client, made with OpenSSL directly (a samsa Context refuses TLSv1.1).
std::vector<std::uint8_t> tls11_client_hello() {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_security_level(ctx, 0);
  SSL_CTX_set_cipher_list(ctx, "DEFAULT:@SECLEVEL=0");
  SSL_CTX_set_min_proto_version(ctx, TLS1_1_VERSION);
  SSL_CTX_set_max_proto_version(ctx, TLS1_1_VERSION);
  SSL* ssl = SSL_new(ctx);
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, in, out);
  SSL_set_connect_state(ssl);
  SSL_do_handshake(ssl);
  std::vector<std::uint8_t> hello(BIO_ctrl_pending(out));
  BIO_read(out, hello.data(), static_cast<int>(hello.size()));
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  ERR_clear_error();
  return hello;
}

TEST_F(TlsSessionTest, Tls11ClientIsRefused) {
  std::vector<std::uint8_t> hello = tls11_client_hello();
  ASSERT_GT(hello.size(), 5u);
  Session server(context(server_options(), Role::server));
  EXPECT_FALSE(server.feed(hello.data(), hello.size()));
  EXPECT_TRUE(server.failed());
  EXPECT_EQ(server.error(), "TLS handshake failed: unsupported protocol");
  EXPECT_FALSE(server.pending_out().empty()) << "a protocol_version alert for the peer";
}

TEST_F(TlsSessionTest, ClientAuthRequiredWithoutCertificateFails) {
  Options so = server_options();
  so.client_auth = ClientAuth::required;
  Session server(context(so, Role::server));
  Session client(context(client_options(), Role::client), "localhost");
  shuttle(client, server);
  EXPECT_TRUE(server.failed());
  EXPECT_FALSE(server.handshake_done());
  EXPECT_NE(server.error().find("peer did not return a certificate"), std::string::npos)
      << server.error();
  // TLS 1.3: the client thought it was done; the server's alert fails it.
  EXPECT_TRUE(client.failed());
  EXPECT_NE(client.error().find("certificate required"), std::string::npos) << client.error();
}

TEST_F(TlsSessionTest, ClientAuthRequiredWithCertificate) {
  Options so = server_options();
  so.client_auth = ClientAuth::required;
  Options co = client_options();
  co.keystore_location = client_keystore_;
  for (const char* version : {"TLSv1.3", "TLSv1.2"}) {
    so.enabled_protocols = {version};
    Session server(context(so, Role::server));
    Session client(context(co, Role::client), "localhost");
    shuttle(client, server);
    ASSERT_TRUE(server.handshake_done()) << version << ": " << server.error();
    EXPECT_FALSE(client.failed()) << client.error();
    EXPECT_EQ(server.peer_subject(), kClientSubject) << version;
    // The same as OpenSSL's own RFC 2253 printing, for a simple name.
    BIO* bio = BIO_new(BIO_s_mem());
    X509_NAME_print_ex(bio, X509_get_subject_name(client_id_.cert.get()), 0, XN_FLAG_RFC2253);
    EXPECT_EQ(testing::bio_text(bio), kClientSubject);
    BIO_free(bio);
  }
}

TEST_F(TlsSessionTest, ClientAuthRequestedWithoutCertificateSucceeds) {
  Options so = server_options();
  so.client_auth = ClientAuth::requested;
  Session server(context(so, Role::server));
  Session client(context(client_options(), Role::client), "localhost");
  shuttle(client, server);
  ASSERT_TRUE(server.handshake_done()) << server.error();
  EXPECT_FALSE(client.failed()) << client.error();
  EXPECT_EQ(server.peer_subject(), "");

  Options co = client_options();
  co.keystore_location = client_keystore_;
  Session server2(context(so, Role::server));
  Session client2(context(co, Role::client), "localhost");
  shuttle(client2, server2);
  ASSERT_TRUE(server2.handshake_done()) << server2.error();
  EXPECT_EQ(server2.peer_subject(), kClientSubject);
}

TEST_F(TlsSessionTest, ClientCertificateFromAnUntrustedCaFails) {
  Options so = server_options();
  so.client_auth = ClientAuth::requested;
  Identity stranger = other_ca_.issue({"CN=mallory"});
  Options co = client_options();
  co.keystore_key = stranger.key_pem;
  co.keystore_certificate_chain = stranger.cert_pem;
  Session server(context(so, Role::server));
  Session client(context(co, Role::client), "localhost");
  shuttle(client, server);
  EXPECT_TRUE(server.failed());
  EXPECT_NE(server.error().find("certificate verify failed"), std::string::npos) << server.error();
}

TEST_F(TlsSessionTest, UntrustedServerFailsTheClient) {
  Options co;
  co.truststore_certificates = other_ca_.cert_pem();
  Session server(context(server_options(), Role::server));
  Session client(context(co, Role::client), "localhost");
  shuttle(client, server);
  EXPECT_TRUE(client.failed());
  EXPECT_FALSE(client.handshake_done());
  // The server sends its CA too (OpenSSL completes the chain from its store): the client
  // finds a root it does not trust.
  EXPECT_EQ(client.error(),
            "TLS handshake failed: certificate verify failed (self-signed certificate in "
            "certificate chain)");
  EXPECT_TRUE(server.failed()) << "the client's alert reached it";
}

TEST_F(TlsSessionTest, HostnameVerification) {
  auto server_ctx = context(server_options(), Role::server);
  auto client_ctx = context(client_options(), Role::client);
  for (const char* good : {"localhost", "127.0.0.1"}) {
    Session server(server_ctx);
    Session client(client_ctx, good);
    shuttle(client, server);
    EXPECT_TRUE(client.handshake_done()) << good << ": " << client.error();
  }
  for (const char* bad : {"wrong.example", "127.0.0.2", "::1"}) {
    Session server(server_ctx);
    Session client(client_ctx, bad);
    shuttle(client, server);
    EXPECT_TRUE(client.failed()) << bad;
    EXPECT_NE(client.error().find("certificate verify failed"), std::string::npos)
        << client.error();
    EXPECT_NE(client.error().find("mismatch"), std::string::npos) << client.error();
  }
  Session nameless(client_ctx);
  EXPECT_TRUE(nameless.failed());
  EXPECT_NE(nameless.error().find("needs the server's host name"), std::string::npos);

  Options co = client_options();
  co.endpoint_identification_algorithm = "";
  Session server(server_ctx);
  Session client(context(co, Role::client), "wrong.example");
  shuttle(client, server);
  EXPECT_TRUE(client.handshake_done()) << "no endpoint identification: " << client.error();
}

TEST_F(TlsSessionTest, GarbageFailsTheServerWithoutBuffering) {
  auto ctx = context(server_options(), Role::server);
  {
    Session server(ctx);
    std::string http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    EXPECT_FALSE(server.feed(reinterpret_cast<const std::uint8_t*>(http.data()), http.size()));
    EXPECT_EQ(server.error(), "TLS handshake failed: http request");
  }
  {
    Session server(ctx);
    const std::uint8_t plaintext_kafka[] = {0, 0, 0, 20, 0, 18, 0, 3, 0, 0, 0, 1};
    EXPECT_FALSE(server.feed(plaintext_kafka, sizeof plaintext_kafka));
    EXPECT_EQ(server.error(), "TLS handshake failed: wrong version number");
  }
  {
    // A handshake record header announcing more than a record may hold.
    Session server(ctx);
    const std::uint8_t huge[] = {0x16, 0x03, 0x01, 0xff, 0xff, 0x01};
    EXPECT_FALSE(server.feed(huge, sizeof huge));
    EXPECT_NE(server.error().find("TLS handshake failed: "), std::string::npos);
  }
  Session server(ctx);
  std::vector<std::uint8_t> chunk(16 * 1024);
  std::mt19937 rng(1);
  std::size_t fed = 0, accepted = 0;
  while (fed < 10u << 20) {
    for (auto& b : chunk)
      b = static_cast<std::uint8_t>(rng());
    if (server.feed(chunk.data(), chunk.size())) ++accepted;
    fed += chunk.size();
    EXPECT_EQ(server.buffered_in(), 0u);
    EXPECT_LE(server.pending_out().size(), 64u) << "an alert at most";
  }
  EXPECT_EQ(accepted, 0u);
  EXPECT_TRUE(server.failed());
  EXPECT_EQ(server.error().rfind("TLS handshake failed: ", 0), 0u) << server.error();
}

TEST_F(TlsSessionTest, GarbageAfterTheHandshakeFailsTheRecordLayer) {
  Session server(context(server_options(), Role::server));
  Session client(context(client_options(), Role::client), "localhost");
  shuttle(client, server);
  ASSERT_TRUE(server.handshake_done());
  std::vector<std::uint8_t> junk(1000, 0x17);  // application_data type, bad version and length
  EXPECT_FALSE(server.feed(junk.data(), junk.size()));
  EXPECT_EQ(server.error().rfind("TLS record error: ", 0), 0u) << server.error();
  EXPECT_EQ(server.write_plain(junk.data(), junk.size()), 0u);
}

TEST_F(TlsSessionTest, ClientHelloOneByteAtATime) {
  Session server(context(server_options(), Role::server));
  Session client(context(client_options(), Role::client), "localhost");
  auto hello = client.pending_out();
  for (std::size_t i = 0; i < hello.size(); ++i) {
    ASSERT_TRUE(server.feed(hello.data() + i, 1)) << server.error();
    EXPECT_LE(server.buffered_in(), 1u);
  }
  client.consume_out(hello.size());
  EXPECT_FALSE(server.pending_out().empty()) << "the server's flight";
  shuttle(client, server);
  EXPECT_TRUE(client.handshake_done());
}

TEST_F(TlsSessionTest, CloseNotifyRoundTrip) {
  Session server(context(server_options(), Role::server));
  Session client(context(client_options(), Role::client), "localhost");
  shuttle(client, server);
  EXPECT_EQ(write(client, "last words"), 10u);
  client.close_notify();
  EXPECT_EQ(write(client, "after close"), 0u);
  shuttle(client, server);
  EXPECT_EQ(drain(server), "last words");
  EXPECT_TRUE(server.peer_closed());
  EXPECT_FALSE(server.failed());
  EXPECT_FALSE(client.peer_closed());
  server.close_notify();
  shuttle(client, server);
  EXPECT_TRUE(client.peer_closed());
  EXPECT_FALSE(client.failed()) << client.error();
  std::uint8_t more[] = {1, 2, 3};
  EXPECT_TRUE(server.feed(more, sizeof more)) << "bytes after close_notify are ignored";
  EXPECT_EQ(server.buffered_in(), 0u);
}

TEST(TlsKernel, KernelTlsAvailableMatchesProc) {
  std::ifstream in("/proc/sys/net/ipv4/tcp_available_ulp");
  std::string ulps((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(kernel_tls_available(), (" " + ulps + " ").find(" tls ") != std::string::npos ||
                                        (" " + ulps).find(" tls\n") != std::string::npos);
}

// Writes the fuzz seeds of tests/fuzz/corpus/tls_record: run by hand with
//   --gtest_also_run_disabled_tests --gtest_filter='*WriteFuzzSeeds*'
// and SAMSA_TLS_SEED_DIR set to the corpus folder.
TEST_F(TlsSessionTest, DISABLED_WriteFuzzSeeds) {
  const char* dir = std::getenv("SAMSA_TLS_SEED_DIR");
  ASSERT_NE(dir, nullptr);
  Session client(context(client_options(), Role::client), "localhost");
  auto hello = client.pending_out();
  std::string bytes(hello.begin(), hello.end());
  auto put = [&](const std::string& name, std::string_view text) {
    std::ofstream(std::string(dir) + "/" + name, std::ios::binary)
        .write(text.data(), static_cast<std::streamsize>(text.size()));
  };
  put("client_hello_tls13.bin", bytes);
  put("client_hello_truncated_header.bin", std::string_view(bytes).substr(0, 3));
  put("client_hello_truncated_half.bin", std::string_view(bytes).substr(0, bytes.size() / 2));
  Options co = client_options();
  co.enabled_protocols = {"TLSv1.2"};
  Session client12(context(co, Role::client), "localhost");
  auto hello12 = client12.pending_out();
  std::string bytes12(hello12.begin(), hello12.end());
  put("client_hello_tls12.bin", bytes12);
  auto u24 = [](std::size_t n) {
    return std::string{static_cast<char>(n >> 16), static_cast<char>(n >> 8), static_cast<char>(n)};
  };
  auto record = [](std::string_view body) {
    return std::string{0x16, 0x03, 0x03, static_cast<char>(body.size() >> 8),
                       static_cast<char>(body.size())} +
           std::string(body);
  };
  // The ClientHello's handshake message cut across two records.
  std::string message = bytes12.substr(5);
  put("client_hello_tls12_fragmented.bin",
      record(message.substr(0, message.size() / 2)) + record(message.substr(message.size() / 2)));
  // ClientHello, then (without waiting for the server's flight) a client Certificate message:
  // with client certificates requested, a TLS 1.2 server parses it in the clear.
  unsigned char* der = nullptr;
  int der_len = i2d_X509(client_id_.cert.get(), &der);
  ASSERT_GT(der_len, 0);
  std::string cert_entry = u24(der_len) + std::string(reinterpret_cast<char*>(der), der_len);
  OPENSSL_free(der);
  std::string list = u24(cert_entry.size()) + cert_entry;
  put("client_hello_tls12_then_certificate.bin",
      bytes12 + record(std::string(1, '\x0b') + u24(list.size()) + list));
  std::vector<std::uint8_t> hello11 = tls11_client_hello();
  put("client_hello_tls11.bin", std::string(hello11.begin(), hello11.end()));
}

}  // namespace
}  // namespace samsa::net::tls
