#include "net/client_login.h"

#include "net/kafka/api.h"

namespace samsa::net {
namespace {

constexpr std::int16_t kHandshakeVersion = 1;
constexpr std::int16_t kAuthenticateVersion = 2;

Buffer whole(net::Response r) {
  return kafka::flatten_to_buffer(r);
}

}  // namespace

ClientLogin::ClientLogin(const ClientSecurity& s) : s_(s) {}
ClientLogin::~ClientLogin() = default;

Buffer ClientLogin::start() {
  kafka::SaslHandshakeRequest req;
  req.mechanism = sasl::mechanism_name(*s_.mechanism);
  step_ = 0;
  return whole(kafka::encode_request(req, kHandshakeVersion, ++corr_, "samsa-broker"));
}

Buffer ClientLogin::authenticate(const std::string& bytes) {
  kafka::SaslAuthenticateRequest req;
  req.auth_bytes.assign(reinterpret_cast<const std::byte*>(bytes.data()),
                        reinterpret_cast<const std::byte*>(bytes.data()) + bytes.size());
  return whole(kafka::encode_request(req, kAuthenticateVersion, ++corr_, "samsa-broker"));
}

ClientLogin::Result ClientLogin::on_response(Buffer& frame, Buffer* next, std::string* error) {
  const sasl::Mechanism m = *s_.mechanism;
  if (step_ == 0) {
    auto h = kafka::decode_response_header(frame.span(), kafka::SaslHandshakeRequest::kApiKey,
                                           kHandshakeVersion);
    kafka::SaslHandshakeResponse resp;
    if (!h.ok() || kafka::decode_response_body(frame.span(), h, kHandshakeVersion, resp) !=
                       kafka::DecodeError::none) {
      *error = "malformed SaslHandshake response";
      return Result::failed;
    }
    if (resp.error_code != 0) {
      *error = std::string("the broker does not serve ") + sasl::mechanism_name(m) +
               " (SaslHandshake error " + std::to_string(resp.error_code) + ")";
      return Result::failed;
    }
    step_ = 1;
    if (m == sasl::Mechanism::plain) {
      *next = authenticate(sasl::plain_client_message(s_.user, s_.password));
    } else {
      scram_ = std::make_unique<sasl::ScramClient>(m, s_.user, s_.password);
      *next = authenticate(scram_->first());
    }
    return Result::more;
  }
  auto h = kafka::decode_response_header(frame.span(), kafka::SaslAuthenticateRequest::kApiKey,
                                         kAuthenticateVersion);
  kafka::SaslAuthenticateResponse resp;
  if (!h.ok() || kafka::decode_response_body(frame.span(), h, kAuthenticateVersion, resp) !=
                     kafka::DecodeError::none) {
    *error = "malformed SaslAuthenticate response";
    return Result::failed;
  }
  if (resp.error_code != 0) {
    *error =
        resp.error_message.value_or("SaslAuthenticate error " + std::to_string(resp.error_code));
    return Result::failed;
  }
  const std::string server(reinterpret_cast<const char*>(resp.auth_bytes.data()),
                           resp.auth_bytes.size());
  if (m == sasl::Mechanism::plain) return Result::done;
  if (step_ == 1) {
    step_ = 2;
    auto final = scram_->final(server);
    if (!final) {
      *error = "SCRAM: " + scram_->error();
      return Result::failed;
    }
    *next = authenticate(*final);
    return Result::more;
  }
  if (!scram_->verify(server)) {
    *error = "SCRAM: the broker's signature does not verify: " + scram_->error();
    return Result::failed;
  }
  return Result::done;
}

}  // namespace samsa::net
