// Every generated message, every version: filled with non-default values in every field the
// version has (and, separately, with nulls wherever the version allows them), encoded,
// decoded, compared, and encoded again to the same bytes. Every strict prefix of each
// encoding must then be rejected cleanly.
//
// With SAMSA_KAFKA_CORPUS_DIR set, the request encodings are also written there as complete
// request frames (header + body, no size prefix): the fuzzer's seed corpus. With
// SAMSA_KAFKA_BODIES_DIR, every message's body is written as <Name>_v<N>[_nulls].bin: what
// net/kafka/tools/java_oracle checks against Kafka's own generated classes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <type_traits>
#include <vector>

#include "net/kafka/api.h"
#include "net/kafka/gen/testing.h"

namespace samsa::kafka {
namespace {

template <class M>
std::vector<std::byte> encode_body(const M& m, std::int16_t version) {
  Writer w(false);
  m.encode(w, version);
  return flatten(w.finish());
}

void write_to(const char* env, const std::string& name, const std::vector<std::byte>& bytes) {
  const char* dir = std::getenv(env);
  if (!dir || !*dir) return;
  std::filesystem::create_directories(dir);
  std::ofstream out(std::filesystem::path(dir) / name, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

template <class M>
void round_trip(std::int16_t version, bool nulls) {
  SCOPED_TRACE(std::string(M::kName) + " v" + std::to_string(version) +
               (nulls ? " (nulls)" : " (values)"));
  testing::Filler filler(static_cast<std::uint32_t>(version * 7919 + nulls), nulls);
  M m;
  testing::fill(m, version, filler);

  std::vector<std::byte> bytes = encode_body(m, version);
  EXPECT_EQ(bytes.size(), m.encoded_size(version));

  // Filled values differ from the defaults, so the encoding must differ from a default
  // message's, except for versions without a single field.
  std::vector<std::byte> plain = encode_body(M{}, version);
  if (!nulls && plain.size() > 1) {
    EXPECT_NE(bytes, plain) << "filler left every field default";
  }

  M decoded;
  Reader r(bytes);
  ASSERT_TRUE(decoded.decode(r, version))
      << decode_error_name(r.error()) << " at byte " << r.error_offset();
  EXPECT_EQ(r.remaining(), 0u);
  EXPECT_TRUE(decoded == m) << "decoded message differs from the encoded one";
  EXPECT_EQ(encode_body(decoded, version), bytes) << "second encoding differs";

  // Every strict prefix runs out of input somewhere.
  for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
    std::vector<std::byte> prefix(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(cut));
    M partial;
    Reader pr(prefix);
    EXPECT_FALSE(partial.decode(pr, version)) << "prefix of " << cut << " bytes decoded";
    EXPECT_NE(pr.error(), DecodeError::none);
  }

  if constexpr (M::kIsRequest && requires { M::kApiKey; }) {
    std::vector<std::byte> frame =
        flatten(encode_request(m, version, 1000 + version, std::string("samsa-corpus")));
    frame.erase(frame.begin(), frame.begin() + 4);
    write_to(
        "SAMSA_KAFKA_CORPUS_DIR",
        std::string(M::kName) + "_v" + std::to_string(version) + (nulls ? "_nulls" : "") + ".bin",
        frame);
  }
  write_to(
      "SAMSA_KAFKA_BODIES_DIR",
      std::string(M::kName) + "_v" + std::to_string(version) + (nulls ? "_nulls" : "") + ".bin",
      bytes);
}

template <class M>
class RoundTrip : public ::testing::Test {
 public:
  void TestBody() override {
    for (int v = M::kMinVersion; v <= M::kMaxVersion; ++v) {
      round_trip<M>(static_cast<std::int16_t>(v), false);
      round_trip<M>(static_cast<std::int16_t>(v), true);
    }
  }
};

// Decoding refuses versions outside the message's range.
template <class M>
class VersionRange : public ::testing::Test {
 public:
  void TestBody() override {
    std::vector<std::byte> bytes = encode_body(M{}, M::kMaxVersion);
    for (int v : {M::kMinVersion - 1, M::kMaxVersion + 1}) {
      M m;
      Reader r(bytes);
      EXPECT_FALSE(m.decode(r, static_cast<std::int16_t>(v))) << M::kName << " v" << v;
      EXPECT_EQ(r.error(), DecodeError::unsupported_version);
    }
  }
};

// One test case per message, named after it.
const bool registered = [] {
  testing::for_each_message([]<class M>(std::type_identity<M>) {
    ::testing::RegisterTest("KafkaRoundTrip", std::string(M::kName).c_str(), nullptr, nullptr,
                            __FILE__, __LINE__,
                            []() -> ::testing::Test* { return new RoundTrip<M>(); });
    ::testing::RegisterTest("KafkaVersionRange", std::string(M::kName).c_str(), nullptr, nullptr,
                            __FILE__, __LINE__,
                            []() -> ::testing::Test* { return new VersionRange<M>(); });
  });
  return true;
}();

// ---- Kafka's own classes as the oracle ----

// Newest kafka-clients jar found: $SAMSA_KAFKA_CLIENTS_JAR, else the caches the client
// harness (tests/clients, perf/vs-kafka) and Maven fill.
std::string find_kafka_clients_jar() {
  if (const char* env = std::getenv("SAMSA_KAFKA_CLIENTS_JAR"); env && *env) return env;
  namespace fs = std::filesystem;
  const char* home = std::getenv("HOME");
  if (!home) return {};
  std::vector<fs::path> found;
  std::error_code ec;
  for (const char* root : {"/.cache/samsa", "/.m2/repository/org/apache/kafka/kafka-clients"}) {
    fs::path dir = fs::path(home).concat(root);
    if (!fs::is_directory(dir, ec)) continue;
    for (auto it = fs::recursive_directory_iterator(dir, ec);
         it != fs::recursive_directory_iterator(); it.increment(ec)) {
      std::string name = it->path().filename().string();
      if (name.starts_with("kafka-clients-") && name.ends_with(".jar") &&
          name.find("sources") == std::string::npos && name.find("test") == std::string::npos)
        found.push_back(it->path());
    }
  }
  if (found.empty()) return {};
  std::sort(found.begin(), found.end(), [](const fs::path& a, const fs::path& b) {
    return a.filename().string() < b.filename().string();
  });
  return found.back().string();
}

template <class M>
void write_bodies(const std::filesystem::path& dir) {
  for (int v = M::kMinVersion; v <= M::kMaxVersion; ++v) {
    for (bool nulls : {false, true}) {
      testing::Filler filler(static_cast<std::uint32_t>(v * 7919 + nulls), nulls);
      M m;
      testing::fill(m, static_cast<std::int16_t>(v), filler);
      auto bytes = encode_body(m, static_cast<std::int16_t>(v));
      std::ofstream out(dir / (std::string(M::kName) + "_v" + std::to_string(v) +
                               (nulls ? "_nulls" : "") + ".bin"),
                        std::ios::binary);
      out.write(reinterpret_cast<const char*>(bytes.data()),
                static_cast<std::streamsize>(bytes.size()));
    }
  }
}

// Every message and version, as samsa encodes it, must be read whole by Kafka's generated
// Java class of the same name and written back by it byte for byte (KafkaOracle.java). This
// catches what no round trip inside samsa can: a schema or generator mistake made the same
// way in encode and decode. Needs a JDK and a kafka-clients jar; skipped without them.
TEST(KafkaJavaOracle, KafkaReadsAndRewritesEveryEncoding) {
  namespace fs = std::filesystem;
  std::string jar = find_kafka_clients_jar();
  if (jar.empty()) GTEST_SKIP() << "no kafka-clients jar (set SAMSA_KAFKA_CLIENTS_JAR)";
  if (std::system("javac -version >/dev/null 2>&1") != 0) GTEST_SKIP() << "no javac";
  fs::path source =
      fs::path(SAMSA_TEST_SOURCE_DIR) / "../../../net/kafka/tools/java_oracle" / "KafkaOracle.java";
  ASSERT_TRUE(fs::exists(source)) << source;
  char tmpl[] = "/tmp/samsa-kafka-oracle-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  fs::path tmp(tmpl);
  fs::create_directories(tmp / "bodies");
  fs::create_directories(tmp / "classes");
  testing::for_each_message(
      [&]<class M>(std::type_identity<M>) { write_bodies<M>(tmp / "bodies"); });
  std::string log = (tmp / "log").string();
  std::string cmd = "javac -d '" + (tmp / "classes").string() + "' -cp '" + jar + "' '" +
                    source.string() + "' >'" + log + "' 2>&1 && java -cp '" + jar + ":" +
                    (tmp / "classes").string() + "' KafkaOracle '" + (tmp / "bodies").string() +
                    "' >>'" + log + "' 2>&1";
  int rc = std::system(cmd.c_str());
  std::ifstream in(log);
  std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(rc, 0) << "with " << jar << ":\n" << output;
  std::printf("%s: %s", jar.c_str(),
              output.substr(output.rfind('\n', output.size() - 2) + 1).c_str());
  fs::remove_all(tmp);
}

// The message list itself: the APIs issue 3 needs now and the KRaft quorum's, with the version
// ranges Kafka 4.1.1 defines for them (a schema edit that drops one fails here).
TEST(KafkaMessages, RequiredApisAndRanges) {
  struct Want {
    std::int16_t key;
    std::int16_t min, max, flex;
  };
  const Want wants[] = {
      {18, 0, 4, 3},   // ApiVersions
      {3, 0, 13, 9},   // Metadata
      {0, 3, 13, 9},   // Produce (the codec starts at 3)
      {1, 4, 18, 12},  // Fetch
      {2, 1, 10, 6},   // ListOffsets
      {19, 2, 7, 5},   // CreateTopics
      {20, 1, 6, 4},   // DeleteTopics
      {11, 0, 9, 6},   // JoinGroup: 0-1 kept for old clients
      {52, 0, 2, 0},   // Vote (KRaft quorum)
      {53, 0, 1, 1},   // BeginQuorumEpoch
      {54, 0, 1, 1},   // EndQuorumEpoch
      {55, 0, 2, 0},   // DescribeQuorum
      {59, 0, 1, 0},   // FetchSnapshot
  };
  for (const Want& w : wants) {
    bool found = false;
    for (const GeneratedApi& a : kGeneratedApis) {
      if (a.key != w.key) continue;
      found = true;
      EXPECT_EQ(a.min_version, w.min) << a.name;
      EXPECT_EQ(a.max_version, w.max) << a.name;
      EXPECT_EQ(a.first_flexible_version, w.flex) << a.name;
    }
    EXPECT_TRUE(found) << "no codec for api key " << w.key;
  }
  EXPECT_GE(std::size(kGeneratedApis), 38u);
}

}  // namespace
}  // namespace samsa::kafka
