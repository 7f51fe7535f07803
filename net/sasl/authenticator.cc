// make_authenticator and the Step values every mechanism answers with.
#include <utility>

#include "net/sasl/internal.h"
#include "net/sasl/sasl.h"

namespace samsa::net::sasl {

Authenticator::~Authenticator() = default;

std::unique_ptr<Authenticator> make_authenticator(Mechanism m, Lookup lookup,
                                                  AuthenticatorOptions options) {
  if (m == Mechanism::plain) return detail::make_plain_authenticator(std::move(lookup));
  return detail::make_scram_authenticator(m, std::move(lookup), std::move(options));
}

namespace detail {

Step step_more(std::string server_message) {
  Step s;
  s.status = Step::more;
  s.server_message = std::move(server_message);
  return s;
}

Step step_done(std::string server_message, std::string principal) {
  Step s;
  s.status = Step::done;
  s.server_message = std::move(server_message);
  s.principal = std::move(principal);
  return s;
}

Step step_failed(std::string error, std::string detail) {
  Step s;
  s.status = Step::failed;
  s.error = std::move(error);
  s.detail = std::move(detail);
  return s;
}

Step step_failed_generic(Mechanism m, std::string detail) {
  Step s = step_failed(generic_failure_message(m, false), std::move(detail));
  s.generic = true;
  return s;
}

Step step_after_end(bool completed) {
  std::string text = "Unexpected challenge in Sasl server state ";
  text += completed ? "COMPLETE" : "FAILED";
  return step_failed(text, text);
}

Step step_oversized(Mechanism m, std::size_t size) {
  return step_failed_generic(m, "SASL message of " + std::to_string(size) +
                                    " bytes exceeds the limit of " +
                                    std::to_string(kMaxClientMessageBytes) + " bytes");
}

}  // namespace detail

}  // namespace samsa::net::sasl
