#include <kcache/protocol/url.h>

#include <gtest/gtest.h>

namespace kcache::protocol {
namespace {

TEST(Url, PercentDecodeKeepsMalformedEscapes) {
  EXPECT_EQ(percent_decode("a%2Fb+c"), "a/b c");
  EXPECT_EQ(percent_decode("%zz%4"), "%zz%4");
  EXPECT_EQ(percent_decode("100%"), "100%");
}

TEST(Url, StrictPercentDecodeKeepsPlusAndRefusesMalformedEscapes) {
  EXPECT_EQ(percent_decode_strict("p%40ss+w%2Fd"), "p@ss+w/d");
  EXPECT_EQ(percent_decode_strict(""), "");
  EXPECT_EQ(percent_decode_strict("%zz"), std::nullopt);
  EXPECT_EQ(percent_decode_strict("ab%4"), std::nullopt);
  EXPECT_EQ(percent_decode_strict("100%"), std::nullopt);
  EXPECT_EQ(percent_decode_strict("%+1"), std::nullopt);
}

TEST(Url, EncodeRoundTripsThroughDecode) {
  const std::string text = "host:1/ rank=3&x%+\xff";
  EXPECT_EQ(url_encode(text), "host:1%2F%20rank%3D3%26x%25%2B%FF");
  EXPECT_EQ(percent_decode(url_encode(text)), text);
  EXPECT_EQ(url_encode("A-z_0.9~"), "A-z_0.9~");
}

TEST(Url, SplitQueryKeepsBareNamesAndEmptyValuesApart) {
  const auto params = split_query("a=1&b&c=&d=x=y");
  ASSERT_EQ(params.size(), 4U);
  EXPECT_EQ(params[0].name, "a");
  EXPECT_EQ(params[0].value, "1");
  EXPECT_TRUE(params[0].has_value);
  EXPECT_EQ(params[1].name, "b");
  EXPECT_FALSE(params[1].has_value);
  EXPECT_TRUE(params[2].has_value);
  EXPECT_EQ(params[2].value, "");
  EXPECT_EQ(params[3].value, "x=y");
  EXPECT_TRUE(split_query("").empty());
}

} // namespace
} // namespace kcache::protocol
