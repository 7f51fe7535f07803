// Request frames captured from real clients (tests/unit/net/golden/<client>/<seq>_<Api>_v<N>.bin,
// frames without their size prefix): each must decode (header and body, nothing left over),
// name the api and version its file name says, and encode back to the very same bytes.
// Every file found there is a test case of its own; an api without a codec fails.
//
// A few frames are also embedded here with their fields checked by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <type_traits>
#include <vector>

#include "net/kafka/api.h"

namespace samsa::kafka {
namespace {

namespace fs = std::filesystem;

fs::path golden_dir() {
  return fs::path(SAMSA_TEST_SOURCE_DIR) / "golden";
}

std::vector<std::byte> read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(chars.size());
  std::transform(chars.begin(), chars.end(), out.begin(), [](char c) { return std::byte(c); });
  return out;
}

std::vector<std::byte> from_hex(std::string_view hex) {
  std::vector<std::byte> out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(std::byte(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  return out;
}

// Decodes and re-encodes one request frame; gtest failures describe what went wrong.
void check_frame(std::vector<std::byte> frame, const std::string& want_api, int want_version) {
  const std::vector<std::byte> original = frame;
  DecodedRequestHeader h = decode_request_header(frame);
  ASSERT_TRUE(h.ok()) << "header: " << decode_error_name(h.error) << " at byte " << h.error_offset;
  EXPECT_EQ(api_name(h.header.request_api_key), want_api);
  EXPECT_EQ(h.header.request_api_version, want_version);
  bool have_codec = visit_api(
      h.header.request_api_key,
      [&]<class Req, class Resp>(std::type_identity<Req>, std::type_identity<Resp>) {
        Req req;
        std::size_t at = 0;
        DecodeError e = decode_request_body(frame, h, req, &at);
        ASSERT_EQ(e, DecodeError::none) << decode_error_name(e) << " at byte " << at;
        std::vector<std::byte> again = flatten(encode_request(
            req, h.header.request_api_version, h.header.correlation_id, h.header.client_id));
        ASSERT_GE(again.size(), 4u);
        again.erase(again.begin(), again.begin() + 4);
        EXPECT_EQ(again.size(), original.size());
        auto diff = std::mismatch(again.begin(), again.end(), original.begin(), original.end());
        EXPECT_TRUE(again == original)
            << "re-encoding differs from byte " << (diff.first - again.begin());
      });
  EXPECT_TRUE(have_codec) << "no codec for api key " << h.header.request_api_key << " (" << want_api
                          << ")";
}

class GoldenFile : public ::testing::Test {
 public:
  GoldenFile(fs::path path, std::string api, int version)
      : path_(std::move(path)), api_(std::move(api)), version_(version) {}
  void TestBody() override {
    SCOPED_TRACE(path_.string());
    check_frame(read_file(path_), api_, version_);
  }

 private:
  fs::path path_;
  std::string api_;
  int version_;
};

const bool registered = [] {
  std::error_code ec;
  if (!fs::is_directory(golden_dir(), ec)) return false;
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(golden_dir(), ec))
    if (e.is_regular_file() && e.path().extension() == ".bin") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  static const std::regex name_re(R"(^\d+_([A-Za-z]+)_v(\d+)\.bin$)");
  for (const fs::path& p : files) {
    std::string client = p.parent_path().filename().string();
    std::string file = p.filename().string();
    std::smatch m;
    std::string test_name = client + "/" + file;
    if (!std::regex_match(file, m, name_re)) {
      ::testing::RegisterTest("KafkaGolden", test_name.c_str(), nullptr, nullptr, __FILE__,
                              __LINE__, [p]() -> ::testing::Test* {
                                struct BadName : ::testing::Test {
                                  fs::path p;
                                  void TestBody() override {
                                    ADD_FAILURE() << p << ": expected <seq>_<Api>_v<N>.bin";
                                  }
                                };
                                auto* t = new BadName();
                                t->p = p;
                                return t;
                              });
      continue;
    }
    std::string api = m[1];
    int version = std::stoi(m[2]);
    ::testing::RegisterTest(
        "KafkaGolden", test_name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
        [p, api, version]() -> ::testing::Test* { return new GoldenFile(p, api, version); });
  }
  return true;
}();

// The capture folder exists in the tree: an empty run would prove nothing.
TEST(KafkaGolden, CapturesArePresent) {
  std::size_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(golden_dir(), ec))
    if (e.path().extension() == ".bin") ++n;
  EXPECT_GT(n, 0u) << "no captures under " << golden_dir();
}

// kcat 1.7.1 (librdkafka 2.0.2), `kcat -L`: its first request, ApiVersions v3 (header v2 with
// the classic ClientId string, compact strings in the body).
TEST(KafkaGolden, KcatApiVersionsV3ByHand) {
  auto frame = from_hex("0012000300000001000772646b61666b61000b6c696272646b61666b6106322e302e3200");
  check_frame(frame, "ApiVersions", 3);
  DecodedRequestHeader h = decode_request_header(frame);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h.header_version, 2);
  EXPECT_EQ(h.header.correlation_id, 1);
  EXPECT_EQ(h.header.client_id, std::optional<std::string>("rdkafka"));
  EXPECT_EQ(h.body_offset, 18u);  // key, version, correlation id; 2+7 ClientId; tag count
  ApiVersionsRequest req;
  ASSERT_EQ(decode_request_body(frame, h, req), DecodeError::none);
  EXPECT_EQ(req.client_software_name, "librdkafka");
  EXPECT_EQ(req.client_software_version, "2.0.2");
}

// python3-confluent-kafka 1.7.0 on librdkafka 2.0.2: ApiVersions v3.
TEST(KafkaGolden, ConfluentKafkaApiVersionsV3ByHand) {
  auto frame = from_hex(
      "0012000300000001000772646b61666b610017636f6e666c75656e742d6b61666b612d707974686f6e1431"
      "2e372e302d72646b61666b612d322e302e3200");
  check_frame(frame, "ApiVersions", 3);
  DecodedRequestHeader h = decode_request_header(frame);
  ApiVersionsRequest req;
  ASSERT_EQ(decode_request_body(frame, h, req), DecodeError::none);
  EXPECT_EQ(req.client_software_name, "confluent-kafka-python");
  EXPECT_EQ(req.client_software_version, "1.7.0-rdkafka-2.0.2");
}

// kafka-python 2.0.2: ApiVersions v0, header v1, empty body.
TEST(KafkaGolden, KafkaPythonApiVersionsV0ByHand) {
  auto frame = from_hex("001200000000000100126b61666b612d707974686f6e2d322e302e32");
  check_frame(frame, "ApiVersions", 0);
  DecodedRequestHeader h = decode_request_header(frame);
  EXPECT_EQ(h.header_version, 1);
  EXPECT_EQ(h.header.client_id, std::optional<std::string>("kafka-python-2.0.2"));
  EXPECT_EQ(h.body_offset, frame.size());
}

}  // namespace
}  // namespace samsa::kafka
