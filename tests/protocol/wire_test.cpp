#include <kcache/protocol/wire.h>

#include <gtest/gtest.h>

namespace kcache::protocol::wire {
namespace {

TEST(WireParts, RoundTrip) {
  const std::vector<Part> parts = {
      {"record", "{\"key\":\"k\"}"}, {"kernel.cubin", std::string(1000, '\0')}, {"", ""}};
  auto back = decode_parts(encode_parts(parts));
  ASSERT_TRUE(back.has_value()) << back.error();
  EXPECT_EQ(*back, parts);
  EXPECT_TRUE(decode_parts(encode_parts({})).value().empty());
}

TEST(WireParts, RejectsEveryTruncationAndLies) {
  const std::string body = encode_parts({{"a", "hello"}, {"bb", "world!"}});
  for (std::size_t n = 0; n < body.size(); ++n) {
    EXPECT_FALSE(decode_parts(body.substr(0, n)).has_value()) << "accepted a body cut at " << n;
  }
  EXPECT_FALSE(decode_parts(body + "x").has_value());
  std::string huge_count = body;
  huge_count[4] = '\xff';
  huge_count[5] = '\xff';
  EXPECT_FALSE(decode_parts(huge_count).has_value());
  std::string huge_size = encode_parts({{"a", "x"}});
  for (int i = 0; i < 8; ++i) {
    huge_size[13 + i] = '\x7f';
  }
  EXPECT_FALSE(decode_parts(huge_size).has_value());
}

TEST(WireKeys, Validation) {
  EXPECT_TRUE(is_valid_action_key("kc1-" + std::string(64, 'a')));
  EXPECT_TRUE(is_valid_action_key("fxgraph:abc-DEF_1.2+x=y"));
  EXPECT_FALSE(is_valid_action_key(""));
  EXPECT_FALSE(is_valid_action_key("a/b"));
  EXPECT_FALSE(is_valid_action_key("a b"));
  EXPECT_FALSE(is_valid_action_key(std::string(513, 'a')));
  EXPECT_TRUE(is_valid_cas_key(std::string(64, 'f')));
  EXPECT_FALSE(is_valid_cas_key(std::string(64, 'F')));
  EXPECT_FALSE(is_valid_cas_key(std::string(63, 'f')));
}

} // namespace
} // namespace kcache::protocol::wire
