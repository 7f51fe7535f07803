// Decodes any request frame (header and body, every api and version with a codec). When a
// body decodes, the message must survive a round trip: encode it again, decode that, and
// get an equal message and the same bytes once more. The same bytes are also tried as the
// body of the api's response, since the broker decodes those too (replica fetchers, tools).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "net/kafka/api.h"

namespace {

using namespace samsa::kafka;

[[noreturn]] void fail(const char* what) {
  // libFuzzer records the input that got here.
  (void)what;
  __builtin_trap();
}

template <class M>
void round_trip_body(const M& first, std::int16_t version) {
  Writer w1(false);
  first.encode(w1, version);
  auto bytes1 = flatten(w1.finish());
  if (bytes1.size() != first.encoded_size(version)) fail("encoded_size disagrees with encode");
  M second;
  Reader r(bytes1);
  if (!second.decode(r, version)) fail("re-encoded message does not decode");
  if (r.remaining() != 0) fail("re-encoded message has trailing bytes");
  Writer w2(false);
  second.encode(w2, version);
  if (flatten(w2.finish()) != bytes1) fail("second encoding differs");
  // A float64 field (DescribeClientQuotas' values) may decode to NaN, which is never == itself:
  // for those messages the identical encodings above are the round trip's proof.
  constexpr bool kHasFloat = std::is_same_v<M, DescribeClientQuotasResponse>;
  if (!kHasFloat && !(second == first)) fail("round trip changed the message");
}

template <class Req, class Resp>
void check(std::span<std::byte> frame, const DecodedRequestHeader& h) {
  const std::int16_t version = h.header.request_api_version;
  Req req;
  if (decode_request_body(frame, h, req) == DecodeError::none) {
    round_trip_body(req, version);
    // The whole frame, header included, must come back identical once re-encoded... up to
    // what decoding normalises (varint forms, unknown tagged fields), so compare decodes.
    auto again = flatten(encode_request(req, version, h.header.correlation_id, h.header.client_id));
    std::span<std::byte> body(again.data() + 4, again.size() - 4);
    auto h2 = decode_request_header(body);
    if (!h2.ok() || !(h2.header == h.header)) fail("request header round trip");
    Req req2;
    if (decode_request_body(body, h2, req2) != DecodeError::none || !(req2 == req))
      fail("request frame round trip");
  }
  if (version >= Resp::kMinVersion && version <= Resp::kMaxVersion) {
    Resp resp;
    Reader r(frame.subspan(h.body_offset));
    if (resp.decode(r, version)) round_trip_body(resp, version);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Decoding views records in place (mutable): work on a copy of the input.
  std::vector<std::byte> frame(size);
  if (size) std::memcpy(frame.data(), data, size);
  auto h = decode_request_header(frame);
  if (!h.ok()) return 0;
  visit_api(h.header.request_api_key,
            [&]<class Req, class Resp>(std::type_identity<Req>, std::type_identity<Resp>) {
              check<Req, Resp>(frame, h);
            });
  return 0;
}
