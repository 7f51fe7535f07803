#include "daemon/api/envelope.h"

#include <arpa/inet.h>

#include <cstring>
#include <string>

#include "base/assert.h"
#include "base/log.h"
#include "daemon/api/auth.h"
#include "daemon/broker.h"
#include "net/kafka/api.h"

namespace samsa::daemon {
namespace {

// ClientHostAddress holds the address's bytes (4 or 16), as Kafka's InetAddress.getAddress().
kafka::Bytes address_bytes(std::string_view host) {
  std::string h(host);
  unsigned char buf[16];
  kafka::Bytes out;
  if (::inet_pton(AF_INET, h.c_str(), buf) == 1) {
    out.assign(reinterpret_cast<std::byte*>(buf), reinterpret_cast<std::byte*>(buf) + 4);
  } else if (::inet_pton(AF_INET6, h.c_str(), buf) == 1) {
    out.assign(reinterpret_cast<std::byte*>(buf), reinterpret_cast<std::byte*>(buf) + 16);
  }
  return out;
}

std::string address_text(const kafka::Bytes& b) {
  char text[INET6_ADDRSTRLEN] = "";
  if (b.size() == 4) ::inet_ntop(AF_INET, b.data(), text, sizeof text);
  if (b.size() == 16) ::inet_ntop(AF_INET6, b.data(), text, sizeof text);
  return text;
}

void answer_envelope_error(RequestPtr r, kafka::ErrorCode e) {
  kafka::EnvelopeResponse resp;
  resp.error_code = kafka::code(e);
  r->reply(resp);
}

}  // namespace

std::vector<std::byte> envelope_frame(const Request& r) {
  kafka::EnvelopeRequest env;
  auto frame = r.frame.span();
  env.request_data.assign(frame.begin(), frame.end());
  const std::string& p = r.principal();
  env.request_principal.emplace(reinterpret_cast<const std::byte*>(p.data()),
                                reinterpret_cast<const std::byte*>(p.data()) + p.size());
  env.client_host_address = address_bytes(r.host());
  // The link patches in its own correlation id.
  net::Response out = kafka::encode_request(env, 0, 0, std::string("samsa-forward"));
  std::vector<std::byte> bytes;
  bytes.reserve(out.size());
  for (const auto& piece : out.pieces())
    bytes.insert(bytes.end(), piece.bytes.data(), piece.bytes.data() + piece.bytes.size());
  bytes.erase(bytes.begin(), bytes.begin() + 4);  // the size prefix
  return bytes;
}

std::optional<std::vector<std::byte>> envelope_answer(std::span<std::byte> frame) {
  auto h = kafka::decode_response_header(frame, kafka::key(kafka::ApiKey::envelope), 0);
  kafka::EnvelopeResponse resp;
  if (!h.ok() || kafka::decode_response_body(frame, h, 0, resp) != kafka::DecodeError::none) {
    LOG_WARN("a forwarded request's envelope answer could not be decoded");
    return std::nullopt;
  }
  if (resp.error_code != 0 || !resp.response_data || resp.response_data->size() < 4) {
    LOG_WARN(
        "the controller refused a forwarded request's envelope: %s",
        std::string(kafka::error_name(static_cast<kafka::ErrorCode>(resp.error_code))).c_str());
    return std::nullopt;
  }
  return std::move(*resp.response_data);
}

net::Response wrap_in_envelope(const Envelope& e, net::Response inner) {
  kafka::EnvelopeResponse resp;
  resp.response_data.emplace();
  kafka::Bytes& data = *resp.response_data;
  data.reserve(inner.size());
  for (const auto& piece : inner.pieces()) {
    SAMSA_ASSERT_MSG(piece.file.fd < 0, "a forwarded request's answer holds no file ranges");
    data.insert(data.end(), piece.bytes.data(), piece.bytes.data() + piece.bytes.size());
  }
  data.erase(data.begin(), data.begin() + std::min<std::size_t>(4, data.size()));  // size prefix
  return kafka::encode_response(resp, e.version, e.correlation_id);
}

void serve_envelope(RequestPtr r) {
  kafka::EnvelopeRequest env;
  if (!r->decode(env)) return;
  // Kafka: only a broker (CLUSTER_ACTION on the cluster) may act as someone else.
  if (!authorized(*r, replication::AclOperation::cluster_action, replication::ResourceType::cluster,
                  replication::kClusterResourceName)) {
    answer_envelope_error(std::move(r), kafka::ErrorCode::cluster_authorization_failed);
    return;
  }
  net::Buffer inner(env.request_data.size());
  if (!env.request_data.empty())
    std::memcpy(inner.data(), env.request_data.data(), env.request_data.size());
  auto h = kafka::decode_request_header(inner.span());
  const ApiHandler* handler = nullptr;
  if (h.ok())
    for (const auto& a : api_handlers())
      if (a.key == h.header.request_api_key) handler = &a;
  const std::int16_t v = h.header.request_api_version;
  if (!handler || v < (handler->min_served >= 0 ? handler->min_served : handler->min_version) ||
      v > handler->max_version || h.header.request_api_key == kafka::key(kafka::ApiKey::envelope)) {
    LOGF_WARN((log::Fields{.client = r->conn->peer()}),
              "an envelope from %s carries a request that is not served (api %d v%d)",
              r->conn->peer().c_str(), h.header.request_api_key, v);
    answer_envelope_error(std::move(r), kafka::ErrorCode::invalid_request);
    return;
  }
  auto e = std::make_unique<Envelope>();
  if (env.request_principal)
    e->principal.assign(reinterpret_cast<const char*>(env.request_principal->data()),
                        env.request_principal->size());
  e->host = address_text(env.client_host_address);
  e->correlation_id = r->correlation_id();
  e->version = r->version();
  // The envelope's place in the connection's answers passes to the request it carries.
  auto req = std::make_unique<Request>(r->rc, r->dispatcher, r->conn, r->seq, std::move(h),
                                       std::move(inner));
  req->envelope = std::move(e);
  r->hand_over();
  handler->handle(std::move(req));
}

}  // namespace samsa::daemon
