// daemon::KafkaDispatcher — the Kafka side of a reactor's connections. It decodes each frame's
// request header, picks the handler for the api key, checks the version against what that
// handler serves, and hands over a Request; handlers answer through Request::reply(), possibly
// after work on other shards or the controller, from this reactor's thread.
//
// Bad input never crashes the broker: a frame whose header or body cannot be decoded, or an
// api key samsa does not serve, is logged with the peer and the connection is closed (as Kafka
// does); an unsupported version of a served api gets UNSUPPORTED_VERSION where the protocol can
// carry it (ApiVersions, Produce v0-2), else the connection is closed.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "base/kafka_errors.h"
#include "daemon/quotas.h"
#include "net/buffer.h"
#include "net/kafka/api.h"
#include "net/transport.h"

namespace samsa::daemon {

struct ReactorContext;
class KafkaDispatcher;

// A request a broker forwarded to the controller inside an EnvelopeRequest (Kafka's
// forwarding): it acts as the client's principal, from the client's host, and its answer goes
// back inside an EnvelopeResponse under the envelope's correlation id.
struct Envelope {
  std::string principal;
  std::string host;
  std::int32_t correlation_id = 0;
  std::int16_t version = 0;
};

// One request in flight. Owned by whoever is working on it; reply() or skip() exactly once.
struct Request {
  ReactorContext& rc;
  KafkaDispatcher& dispatcher;
  net::Connection* conn;
  std::uint64_t seq;
  kafka::DecodedRequestHeader header;
  net::Buffer frame;                   // the request bytes (records fields point into it)
  std::int64_t start_ns;               // decoded at (request latency metrics)
  std::unique_ptr<Envelope> envelope;  // forwarded by a broker, or null

  // Who the request acts as, and from where (ACLs' principal and host): the connection's, or
  // the envelope's.
  const std::string& principal() const;
  std::string_view host() const;

  std::int16_t version() const { return header.header.request_api_version; }
  std::int32_t correlation_id() const { return header.header.correlation_id; }
  std::int16_t api_key() const { return header.header.request_api_key; }

  // Decodes the body; on failure logs, closes the connection and returns false (the request is
  // then finished: do not reply).
  template <class Req>
  bool decode(Req& out);
  template <class Resp>
  void reply(const Resp& body) {
    send(kafka::encode_response(body, version(), correlation_id()));
  }
  void send(net::Response r);
  void skip();  // acks=0: no answer
  // Its place in the connection's answers now belongs to another Request (an envelope's to
  // the request it carries): finished without an answer of its own.
  void hand_over() { done_ = true; }
  // Closes the connection because of this request (logged with the reason).
  void fail(const char* why);
  // Charges n bytes of handling memory (per-partition state and the like) to the reactor's
  // request budget until the request ends. When it does not fit, logs what did not, closes
  // the connection and returns false: the request is finished.
  bool charge(std::uint64_t n, const char* what);
  // Records amount against the client's quota of type t (daemon/quotas.h) and returns the
  // throttle time its answer carries (the connection is muted that long); 0 when no quota
  // applies or it is within it. Not for a forwarded request (the broker that forwarded it
  // throttles its client).
  std::int32_t throttle(QuotaType t, std::int64_t amount);

  Request(ReactorContext& rc, KafkaDispatcher& d, net::Connection* c, std::uint64_t seq,
          kafka::DecodedRequestHeader h, net::Buffer f);
  ~Request();
  Request(const Request&) = delete;

 private:
  bool done_ = false;
  std::uint64_t charged_ = 0;  // released to the reactor's budget when the request ends
  friend struct DecodeScope;
};

// The decode allowance of a request: what the reactor's budget can still take.
struct DecodeScope {
  Request& r;
  kafka::DecodeAllowance allowance;
  explicit DecodeScope(Request& req);
  // Charges what the decode used; false (logged, connection closed) on any decode error.
  bool finish(kafka::DecodeError e, std::size_t at);
};

using RequestPtr = std::unique_ptr<Request>;

// A served api: the versions samsa answers and the function that answers.
struct ApiHandler {
  std::int16_t key;
  std::int16_t min_version;  // advertised
  std::int16_t max_version;
  void (*handle)(RequestPtr);
  // Lowest version actually served (Produce is advertised from 0 but served from 3).
  std::int16_t min_served = -1;
  // Served (and advertised) only on a cluster's controller listeners.
  bool controller_only = false;
};

// Whether this node serves (and advertises) the api on `listener` (its index in the settings).
bool serves(const ApiHandler& h, const ReactorContext& rc, std::size_t listener);

// The table of served apis (ApiVersions answers from it).
std::span<const ApiHandler> api_handlers();

class KafkaDispatcher final : public net::FrameHandler {
 public:
  // listener: index into the broker's listeners (Metadata advertises that listener's address).
  KafkaDispatcher(ReactorContext& rc, std::size_t listener) : rc_(rc), listener_(listener) {}
  std::size_t listener() const { return listener_; }

  void on_open(net::Connection& c) override;
  void on_frame(net::Connection& c, std::uint64_t seq, net::Buffer frame) override;
  void on_close(net::Connection& c) override;
  // The frames parked while c was muted, handled now that the mute is over.
  void release_parked(net::Connection& c);

  // Requests decoded but not yet answered (graceful shutdown waits for 0).
  std::size_t in_flight() const { return in_flight_; }
  std::uint64_t requests() const { return requests_; }
  void request_started() { ++in_flight_; }
  void request_finished() { --in_flight_; }

 private:
  // Handles one frame (on_frame once the connection is not muted).
  void dispatch(net::Connection& c, std::uint64_t seq, net::Buffer frame);
  void record_request_time(net::Connection& c, const std::string& client, std::int64_t micros);
  ReactorContext& rc_;
  std::size_t listener_;
  std::size_t in_flight_ = 0;
  std::uint64_t requests_ = 0;
};

// Logged decode failure helper, shared by Request::decode.
void log_decode_failure(const Request& r, kafka::DecodeError e, std::size_t at);

template <class Req>
bool Request::decode(Req& out) {
  DecodeScope scope(*this);
  std::size_t at = 0;
  kafka::DecodeError e =
      kafka::decode_request_body(frame.span(), header, out, &at, &scope.allowance);
  return scope.finish(e, at);
}

}  // namespace samsa::daemon
