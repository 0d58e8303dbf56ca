#include <kcache/protocol/json_text.h>

#include <gtest/gtest.h>

namespace kcache::protocol {
namespace {

std::string nested(std::size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

TEST(ParseJson, AcceptsDocumentsUpToTheDepthLimit) {
  EXPECT_TRUE(parse_json(nested(kMaxJsonDepth)).has_value());
  auto doc = parse_json(R"({"a": [1, {"b": "c"}]})");
  ASSERT_TRUE(doc.has_value()) << doc.error();
  EXPECT_EQ((*doc)["a"][1]["b"], "c");
}

TEST(ParseJson, RefusesDeeperDocumentsWithoutRecursing) {
  const auto too_deep = parse_json(nested(kMaxJsonDepth + 1));
  ASSERT_FALSE(too_deep.has_value());
  EXPECT_NE(too_deep.error().find("nested deeper"), std::string::npos);
  // The daemon's crash: {"spec": followed by 100,000 '['.
  const std::string body = R"({"spec":)" + nested(100'000) + "}";
  EXPECT_FALSE(parse_json(body).has_value());
  EXPECT_FALSE(parse_json(R"({"spec":)" + std::string(100'000, '[')).has_value());
  EXPECT_TRUE(parse_json_or_discarded(body).is_discarded());
}

TEST(ParseJson, BracketsInStringsDoNotCount) {
  const std::string deep_text =
      "\"" + std::string(1000, '[') + "\\\"" + std::string(1000, '{') + "\"";
  EXPECT_TRUE(json_depth_within(deep_text, 1));
  auto doc = parse_json("[" + deep_text + "]", 1);
  ASSERT_TRUE(doc.has_value()) << doc.error();
  EXPECT_EQ((*doc)[0].get<std::string>().size(), 2001U);
  EXPECT_FALSE(json_depth_within("[[", 1));
  EXPECT_TRUE(json_depth_within("[]]][", 1)); // the parse, not the scan, rejects it
}

TEST(ParseJson, MalformedIsAnErrorValue) {
  EXPECT_FALSE(parse_json("{").has_value());
  EXPECT_FALSE(parse_json("").has_value());
  EXPECT_TRUE(parse_json_or_discarded("nope").is_discarded());
}

TEST(JsonText, ReplacesInvalidUtf8) {
  EXPECT_EQ(json_text(nlohmann::json("a\xff")), "\"a\xEF\xBF\xBD\"");
}

TEST(JsonInteger, RefusesWhatDoesNotFit) {
  EXPECT_EQ(json_integer<int>(nlohmann::json(7)), 7);
  EXPECT_THROW(json_integer<int>(nlohmann::json(1e300)), nlohmann::json::type_error);
  EXPECT_THROW(json_integer<std::uint32_t>(nlohmann::json(-1)), nlohmann::json::type_error);
  EXPECT_EQ(json_integer(nlohmann::json::object(), "x", 5), 5);
}

} // namespace
} // namespace kcache::protocol
