// net/sasl's base64: RFC 4648's test vectors and strict decoding.
#include <gtest/gtest.h>

#include <string>

#include "net/sasl/sasl.h"

namespace samsa::net::sasl {
namespace {

TEST(Base64, EncodesRfc4648Vectors) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("foob"), "Zm9vYg==");
  EXPECT_EQ(base64_encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64_encode("n,,"), "biws");
}

TEST(Base64, DecodesRfc4648Vectors) {
  EXPECT_EQ(base64_decode(""), std::string());
  EXPECT_EQ(base64_decode("Zg=="), "f");
  EXPECT_EQ(base64_decode("Zm8="), "fo");
  EXPECT_EQ(base64_decode("Zm9v"), "foo");
  EXPECT_EQ(base64_decode("Zm9vYmFy"), "foobar");
  EXPECT_EQ(base64_decode("+/+/"), "\xfb\xff\xbf");
}

TEST(Base64, RoundTripsEveryByte) {
  std::string all;
  for (int i = 0; i < 256; ++i)
    all += static_cast<char>(i);
  for (std::size_t len = 0; len <= all.size(); len += 7) {
    const std::string in = all.substr(0, len);
    EXPECT_EQ(base64_decode(base64_encode(in)), in) << len;
  }
}

TEST(Base64, RejectsWhatIsNotCanonical) {
  for (const char* bad : {
           "Zg",        // no padding
           "Zg=",       // short padding
           "Zg===",     // too much padding
           "Z===",      // three pad characters
           "====",      // padding only
           "Zh==",      // unused bits set
           "Zm9=",      // unused bits set
           "Zg==Zm9v",  // padding in the middle
           "Zm9v\n",    // whitespace
           " Zm9v",     // whitespace
           "Zm9-",      // URL-safe alphabet
           "Zm9_",      // URL-safe alphabet
           "Zm=v",      // '=' before data
           "Zm9v=",     // length not a multiple of 4
       }) {
    EXPECT_FALSE(base64_decode(bad).has_value()) << bad;
  }
  EXPECT_FALSE(base64_decode(std::string("Zm\0v", 4)).has_value());
  EXPECT_FALSE(base64_decode("Zm9\xc3").has_value());
}

}  // namespace
}  // namespace samsa::net::sasl
