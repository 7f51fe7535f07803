// libFuzzer target: the TLS record layer and handshake parsing of a server net::tls::Session
// fed arbitrary bytes. Each input drives a fresh session of one server context (TLS 1.2 and
// 1.3, client certificates requested so a TLS 1.2 Certificate message is parsed too), made
// once from a throwaway CA and key generated in memory at the first call. The input is fed in
// three pieces (split at thirds) so records arrive fragmented; after each piece the plaintext
// is drained and the output discarded; then the session writes a little and closes. Any crash,
// sanitizer report or leak is a failure.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "net/tls/tls.h"
#include "tests/unit/tls/test_certs.h"

namespace {

using samsa::net::tls::ClientAuth;
using samsa::net::tls::Context;
using samsa::net::tls::Options;
using samsa::net::tls::Role;
using samsa::net::tls::Session;

std::shared_ptr<const Context> make_server_context() {
  samsa::net::tls::testing::TestCa ca("CN=samsa fuzz CA");
  samsa::net::tls::testing::Identity id =
      ca.issue({"CN=localhost,O=samsa fuzz", {"localhost"}, {"127.0.0.1"}});
  Options o;
  o.keystore_key = id.key_pem;
  o.keystore_certificate_chain = id.cert_pem;
  o.truststore_certificates = ca.cert_pem();
  o.client_auth = ClientAuth::requested;
  std::string error;
  std::shared_ptr<const Context> ctx = make_context(o, Role::server, &error);
  if (!ctx) {
    std::fprintf(stderr, "tls_record_fuzz: no server context: %s\n", error.c_str());
    std::abort();
  }
  return ctx;
}

const std::shared_ptr<const Context>& server_context() {
  static const std::shared_ptr<const Context> ctx = make_server_context();
  return ctx;
}

void settle(Session& s, std::vector<std::uint8_t>* plain) {
  plain->clear();
  s.drain_plain(plain);
  s.consume_out(s.pending_out().size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Session session(server_context());
  std::vector<std::uint8_t> plain;
  const std::size_t cuts[] = {0, size / 3, 2 * size / 3, size};
  for (int i = 0; i < 3; ++i) {
    std::size_t from = cuts[i], to = cuts[i + 1];
    bool ok = session.feed(data + from, to - from);
    if (ok == session.failed()) std::abort();  // feed's answer is the session's state
    settle(session, &plain);
    if (session.plain().size() != 0 || session.buffered_in() > size) std::abort();
  }
  static const std::uint8_t kAnswer[] = "pong";
  std::size_t taken = session.write_plain(kAnswer, sizeof kAnswer - 1);
  if (taken != 0 && !session.handshake_done()) std::abort();
  session.close_notify();
  settle(session, &plain);
  return 0;
}
