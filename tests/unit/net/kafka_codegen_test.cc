// The schema format's rules, as net/kafka/codegen/gen.py enforces them: runs the real
// generator (python3) on small schema files and checks what it accepts, what it refuses and
// what it says. The build runs the same generator on net/kafka/schema.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace {

namespace fs = std::filesystem;

fs::path generator() {
  return fs::path(SAMSA_TEST_SOURCE_DIR) / "../../../net/kafka/codegen/gen.py";
}

class Codegen : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/samsa-kafka-codegen-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    files_.push_back(dir_ / name);
  }

  // Runs gen.py (--out into the temp dir) on the files written; returns exit status, and
  // the output in `out`.
  int run(std::string* out, bool list = false) {
    std::string cmd = "python3 '" + generator().string() + "' ";
    cmd += list ? "--list" : "--out '" + (dir_ / "gen").string() + "'";
    for (const auto& f : files_)
      cmd += " '" + f.string() + "'";
    cmd += " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return -1;
    char buf[4096];
    std::string text;
    while (std::size_t n = fread(buf, 1, sizeof buf, p))
      text.append(buf, n);
    int status = pclose(p);
    if (out) *out = text;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  // The generator refuses `body` (a request whose response is fine) naming `what`.
  void expect_refused(const std::string& body, const std::string& what) {
    files_.clear();
    write("XRequest.ks", "request XRequest key=900 versions=0-3 flexible=2+\n" + body);
    write("XResponse.ks", "response XResponse key=900 versions=0-3 flexible=2+\nA int32 v0+\n");
    std::string out;
    EXPECT_EQ(run(&out), 1) << body;
    EXPECT_NE(out.find(what), std::string::npos) << "for:\n" << body << "got: " << out;
  }

  fs::path dir_;
  std::vector<fs::path> files_;
};

TEST_F(Codegen, AcceptsAWellFormedPairAndListsItsOutputs) {
  write("XRequest.ks",
        "# comment\n"
        "request XRequest key=900 versions=0-3 flexible=2+\n"
        "\n"
        "Name        string     v0+   null=0+ default=null  # trailing comment\n"
        "Items       []Item     v0+\n"
        "  Id        int32      v0+   default=-1\n"
        "  Tags      []string   v1+\n"
        "Extra       int64      v2+   tag=0 default=7\n"
        "Common      []Shared   v3+\n"
        "ClientId    string     v0+   flex=none\n"
        "\n"
        "struct Shared\n"
        "  Flag      bool       v0+   default=true\n");
  write("XResponse.ks", "response XResponse key=900 versions=0-3 flexible=2+\nA int32 v0+\n");
  std::string out;
  ASSERT_EQ(run(&out, /*list=*/true), 0) << out;
  EXPECT_NE(out.find("x_request.h;x_request.cc;x_response.h;x_response.cc;messages.h"),
            std::string::npos)
      << out;
  ASSERT_EQ(run(&out), 0) << out;
  for (const char* f : {"x_request.h", "x_request.cc", "api_table.h", "testing.h"})
    EXPECT_TRUE(fs::exists(dir_ / "gen" / f)) << f;
  std::ifstream h(dir_ / "gen" / "x_request.h");
  std::string header((std::istreambuf_iterator<char>(h)), std::istreambuf_iterator<char>());
  EXPECT_NE(header.find("std::optional<std::string> name = std::nullopt;"), std::string::npos);
  EXPECT_NE(header.find("std::int64_t extra = 7;"), std::string::npos) << header;
  EXPECT_NE(header.find("bool flag = true;"), std::string::npos);
  EXPECT_NE(header.find("static constexpr std::int16_t kFirstFlexibleVersion = 2;"),
            std::string::npos);
}

TEST_F(Codegen, RefusesWhatTheFormatForbids) {
  expect_refused("\tA int32 v0+\n", "tabs are not allowed");
  expect_refused("A int33 v0+\n", "unknown type");
  expect_refused("A int32 0+\n", "versions must look like");
  expect_refused("A int32 v0+ colour=red\n", "unknown attribute");
  expect_refused("A int32 v0+\nA int32 v1+\n", "field A repeated");
  expect_refused("A int32 v2+ tag=1\nB int32 v2+ tag=1\n", "tag 1 repeated");
  expect_refused("A int32 v0+ tag=1\n", "tagged in versions that are not flexible");
  expect_refused("A int32 v0+ null=0+\n", "cannot be nullable");
  expect_refused("A string v0+ default=null\n", "default=null needs the field nullable");
  expect_refused("A int8 v0+ default=300\n", "out of range");
  expect_refused("A bool v0+ default=yes\n", "true or false");
  expect_refused("A string v0+ default=abc\n", "quoted");
  expect_refused("A []Nope v0+\n", "unknown struct Nope");
  expect_refused("A int32 v0+\n   B int32 v0+\n", "multiple of two spaces");
  expect_refused("A int32 v0+\n    B int32 v0+\n", "unexpected indentation");
  expect_refused("A int32 v0+\n  B int32 v0+\n", "only struct types have nested fields");
  expect_refused("A []records v0+\n", "arrays of records are not supported");
  expect_refused("A int32 v3-1\n", "empty version range");
}

TEST_F(Codegen, RefusesInconsistentFiles) {
  // File name and message name disagree.
  write("Wrong.ks", "request XRequest key=900 versions=0 flexible=none\nA int32 v0+\n");
  std::string out;
  EXPECT_EQ(run(&out), 1);
  EXPECT_NE(out.find("file name must be XRequest.ks"), std::string::npos) << out;
  // A request without its response.
  files_.clear();
  write("XRequest.ks", "request XRequest key=900 versions=0 flexible=none\nA int32 v0+\n");
  EXPECT_EQ(run(&out), 1);
  EXPECT_NE(out.find("needs both a request and a response"), std::string::npos) << out;
  // Versions that differ between the two.
  write("XResponse.ks", "response XResponse key=900 versions=0-1 flexible=none\nA int32 v0+\n");
  EXPECT_EQ(run(&out), 1);
  EXPECT_NE(out.find("versions differ"), std::string::npos) << out;
}

}  // namespace
