// The admin protocol's JSON: what a client may send (RFC 8259, bounded nesting) and that every
// answer is valid JSON, whatever bytes it quotes back.
#include "daemon/admin/admin_json.h"

#include <gtest/gtest.h>

#include <string>

namespace samsa::daemon::json {
namespace {

TEST(AdminJson, ParsesARequest) {
  auto v = parse(R"({"v":1,"cmd":"topic.create","args":{"topic":"t","partitions":3,
                    "configs":{"retention.ms":"1000"},"flag":true,"none":null,"x":-1.5e3}})");
  ASSERT_TRUE(v.has_value()) << v.error();
  EXPECT_EQ(v->find("v")->as_int(), 1);
  EXPECT_EQ(v->find("cmd")->as_string(), "topic.create");
  const Value* args = v->find("args");
  ASSERT_TRUE(args && args->is_object());
  EXPECT_EQ(args->find("partitions")->as_int(), 3);
  EXPECT_TRUE(args->find("partitions")->is_int());
  EXPECT_TRUE(args->find("flag")->as_bool());
  EXPECT_TRUE(args->find("none")->is_null());
  EXPECT_FALSE(args->find("x")->is_int());
  EXPECT_DOUBLE_EQ(args->find("x")->as_double(), -1500);
  EXPECT_EQ(args->find("configs")->find("retention.ms")->as_string(), "1000");
}

TEST(AdminJson, RoundTrips) {
  Value v;
  v["s"] = "quote \" backslash \\ newline \n tab \t nul " + std::string(1, '\0');
  v["i"] = -42;
  v["big"] = static_cast<long long>(INT64_MAX);
  v["list"].push(1);
  v["list"].push("two");
  v["list"].push(Value::object());
  v["ok"] = false;
  auto back = parse(v.dump());
  ASSERT_TRUE(back.has_value()) << back.error();
  EXPECT_EQ(back->dump(), v.dump());
  EXPECT_EQ(back->find("s")->as_string(), v.find("s")->as_string());
  EXPECT_EQ(back->find("big")->as_int(), INT64_MAX);
}

TEST(AdminJson, EscapesAndUnicode) {
  auto v = parse(R"(["\u00e9\u4e2d\ud83d\ude00", "\/\b\f"])");
  ASSERT_TRUE(v.has_value()) << v.error();
  EXPECT_EQ(v->items()[0].as_string(), "\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80");
  EXPECT_EQ(v->items()[1].as_string(), "/\b\f");
}

TEST(AdminJson, RejectsWhatIsNotJson) {
  for (const char* bad : {"",
                          "{",
                          "}",
                          "[1,]",
                          "{\"a\" 1}",
                          "{\"a\":1,}",
                          "{a:1}",
                          "01",
                          "1.",
                          "-",
                          "+1",
                          "1e",
                          "tru",
                          "nul",
                          "\"unterminated",
                          "\"bad \\x escape\"",
                          "\"\\u12\"",
                          "\"\\ud800\"",
                          "\"\\udc00x\"",
                          "\"ctl \x01\"",
                          "[1] 2",
                          "NaN",
                          "'single'"}) {
    auto v = parse(bad);
    EXPECT_FALSE(v.has_value()) << "accepted: " << bad;
    if (!v) {
      EXPECT_NE(v.error().find("byte"), std::string::npos) << v.error();
    }
  }
}

TEST(AdminJson, BoundsNesting) {
  std::string deep(10000, '[');
  auto v = parse(deep);
  ASSERT_FALSE(v.has_value());
  EXPECT_NE(v.error().find("nesting"), std::string::npos) << v.error();
  std::string ok = std::string(32, '[') + std::string(32, ']');
  EXPECT_TRUE(parse(ok, 32).has_value());
  std::string over = std::string(33, '[') + std::string(33, ']');
  EXPECT_FALSE(parse(over, 32).has_value());
}

TEST(AdminJson, AnswersAreValidUtf8WhateverTheyQuote) {
  // Invalid sequences, overlong forms, surrogates encoded in UTF-8, truncated sequences.
  const std::string raw = "a\xc3\x28 b\xc0\xaf c\xed\xa0\x80 d\xf4\x90\x80\x80 e\xe2\x82 \xc3\xa9";
  Value v(raw);
  const std::string out = v.dump();
  auto back = parse(out);
  ASSERT_TRUE(back.has_value()) << back.error();
  const std::string& s = back->as_string();
  EXPECT_NE(s.find("\xc3\xa9"), std::string::npos);      // valid text is kept
  EXPECT_NE(s.find("\xef\xbf\xbd"), std::string::npos);  // invalid bytes became U+FFFD
  for (std::size_t i = 0; i < s.size(); ++i)
    EXPECT_NE(static_cast<unsigned char>(s[i]), 0xc0u);
}

TEST(AdminJson, RepeatedMembersKeepTheLast) {
  auto v = parse(R"({"cmd":"a","cmd":"b"})");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->find("cmd")->as_string(), "b");
  EXPECT_EQ(v->size(), 1u);
}

}  // namespace
}  // namespace samsa::daemon::json
