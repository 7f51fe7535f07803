// SASL's server mechanisms (net/sasl) fed arbitrary client messages.
//
// Input: byte 0 picks the mechanism (low two bits: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512;
// bit 0x80: a random server nonce instead of the fixed one; bit 0x40: also run ScramClient
// over the messages as if they came from a server). The rest is cut on its first two 0xFF
// bytes into up to three client messages, each passed to step() in turn. The one known user
// is "alice" / "alice-secret" for every mechanism; her SCRAM credentials are derived once.
// The whole input also goes through parse_jaas, parse_plain_jaas and base64.
//
// Invariants checked besides the sanitizers: only alice can authenticate, a failure always
// carries an error, an answer that continues always carries a message, base64 round-trips.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "net/sasl/sasl.h"

namespace {

using namespace samsa::net::sasl;

[[noreturn]] void fail(const char* what) {
  (void)what;  // libFuzzer records the input that got here.
  __builtin_trap();
}

const std::string kPassword = "alice-secret";
// Fixed so that a seed can carry a client-final message with the right nonce and proof.
const char* kServerNonce = "FuzzServerNonce0123456789abcdef";

const ScramCredential& credential(Mechanism m) {
  // 4096 iterations, once per process: the server side computes only H and HMAC per login.
  static const ScramCredential sha256 =
      make_scram_credential(Mechanism::scram_sha_256, kPassword, "fuzz-salt", 4096);
  static const ScramCredential sha512 =
      make_scram_credential(Mechanism::scram_sha_512, kPassword, "fuzz-salt", 4096);
  return m == Mechanism::scram_sha_512 ? sha512 : sha256;
}

Lookup alice_lookup() {
  Lookup l;
  l.plain_password = [](std::string_view user) -> const std::string* {
    return user == "alice" ? &kPassword : nullptr;
  };
  l.scram = [](std::string_view user, Mechanism m) -> std::optional<ScramCredential> {
    if (user != "alice") return std::nullopt;
    return credential(m);
  };
  return l;
}

std::vector<std::string_view> split_messages(std::string_view rest) {
  std::vector<std::string_view> out;
  while (out.size() < 2) {
    const std::size_t cut = rest.find('\xff');
    if (cut == std::string_view::npos) break;
    out.push_back(rest.substr(0, cut));
    rest.remove_prefix(cut + 1);
  }
  out.push_back(rest);
  return out;
}

void check_step(const Step& s) {
  switch (s.status) {
    case Step::more:
      if (s.server_message.empty()) fail("more without a server message");
      break;
    case Step::done:
      if (s.principal != "alice") fail("someone other than alice authenticated");
      break;
    case Step::failed:
      if (s.error.empty() || !s.principal.empty()) fail("failure without an error");
      break;
  }
}

void run_server(Mechanism m, bool random_nonce, const std::vector<std::string_view>& messages) {
  AuthenticatorOptions options;
  if (!random_nonce) options.server_nonce = [] { return std::string(kServerNonce); };
  auto auth = make_authenticator(m, alice_lookup(), std::move(options));
  bool ended = false;
  for (std::string_view msg : messages) {
    const Step s = auth->step({reinterpret_cast<const std::uint8_t*>(msg.data()), msg.size()});
    check_step(s);
    if (ended && s.status != Step::failed) fail("a step after the end did not fail");
    if (s.status != Step::more) ended = true;
  }
}

// The client's parsing of what a server sends: messages[0] as server-first, [1] as final.
void run_client(Mechanism m, const std::vector<std::string_view>& messages) {
  if (m == Mechanism::plain) return;
  ScramClient client(m, "alice", kPassword, "fuzzclientnonce");
  client.first();
  if (!client.final(messages[0])) return;
  if (messages.size() > 1) client.verify(messages[1]);
}

void check_base64(std::string_view input) {
  if (const auto decoded = base64_decode(input)) {
    if (base64_encode(*decoded) != input) fail("strict base64 accepted a non-canonical form");
  }
  const auto again = base64_decode(base64_encode(input));
  if (!again || *again != input) fail("base64 round trip");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::uint8_t selector = data[0];
  static constexpr Mechanism kMechanisms[] = {Mechanism::plain, Mechanism::scram_sha_256,
                                              Mechanism::scram_sha_512, Mechanism::scram_sha_256};
  const Mechanism m = kMechanisms[selector & 3];
  const auto messages = split_messages(input.substr(1));
  run_server(m, (selector & 0x80) != 0, messages);
  if ((selector & 0x40) != 0) run_client(m, messages);

  std::string error;
  const JaasEntry entry = parse_jaas(input, &error);
  if (error.empty() == entry.login_module.empty()) fail("parse_jaas: error and entry disagree");
  parse_plain_jaas(input, &error);
  check_base64(input);
  return 0;
}
